/* nnunet_card.c -- see nnunet_card.h. */
#include "nnunet_card.h"

#include "card.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nn_card_is_model(const char *model, char *card_path, size_t n) {
    struct stat st;
    if (!model || stat(model, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(card_path, n, "%s/%s", model, NN_CARD_NAME) >= n) return 0;
        /* anything by that name (a FIFO too) makes it one, refused by name when it is read */
        return lstat(card_path, &st) == 0;
    }
    const size_t len = strlen(model), k = strlen(NN_CARD_NAME);
    if (len < k || strcmp(model + len - k, NN_CARD_NAME) != 0 || (len > k && model[len - k - 1] != '/'))
        return 0;
    return (size_t)snprintf(card_path, n, "%s", model) < n;
}

void nn_card_free(nn_card *c) {
    for (int f = 0; f < c->n_folds; f++) free(c->models[f]);
    for (int i = 0; i < NN_MAX_HEADS; i++) free(c->names[i]);
    memset(c, 0, sizeof *c);
}

#ifdef SWI_HAVE_JANSSON
#include <jansson.h>

#define BAD(...)                   \
    do {                           \
        cli_err(err, __VA_ARGS__); \
        goto fail;                 \
    } while (0)

static int get_int(json_t *v, int64_t *out) {
    if (!json_is_integer(v)) return -1;
    *out = json_integer_value(v);
    return 0;
}

static int int_list(json_t *v, int64_t *out, int cap) {
    if (!json_is_array(v) || json_array_size(v) > (size_t)cap) return -1;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (get_int(json_array_get(v, i), &out[i])) return -1;
    return (int)json_array_size(v);
}

static int read_resampling(json_t *r, const char *key, nn_card_resampling *out, const char *src, char *err) {
    json_t *e = json_object_get(r, key), *kw = json_object_get(e, "kwargs");
    const char *fn = json_string_value(json_object_get(e, "fn"));
    if (!fn || !json_is_object(kw)) {
        cli_err(err, "%s: \"resampling\".\"%s\" needs \"fn\" and \"kwargs\"", src, key);
        return 1;
    }
    if (strcmp(fn, "resample_data_or_seg_to_shape") != 0) {
        cli_err(err, "%s: %s %s is not supported (resample_data_or_seg_to_shape only)", src, key, fn);
        return 1;
    }
    int64_t order = 3, order_z = 0;
    json_t *o = json_object_get(kw, "order"), *oz = json_object_get(kw, "order_z"),
           *fz = json_object_get(kw, "force_separate_z");
    if ((o && get_int(o, &order)) || (oz && get_int(oz, &order_z)) || order < 0 || order > 5 || order_z < 0 ||
        order_z > 5 || (fz && !json_is_null(fz) && !json_is_boolean(fz))) {
        cli_err(err, "%s: \"resampling\".\"%s\": bad order, order_z or force_separate_z", src, key);
        return 1;
    }
    if ((order != 0 && order != 1 && order != 3) || (order_z != 0 && order_z != 1 && order_z != 3)) {
        cli_err(err, "%s: %s order %lld, order_z %lld: orders 0, 1 and 3 only", src, key, (long long)order,
                (long long)order_z);
        return 1;
    }
    out->order = (int)order;
    out->order_z = (int)order_z;
    out->force_separate_z = !fz || json_is_null(fz) ? -1 : json_is_true(fz);
    return 0;
}

static int read_channel(json_t *ch, nn_card_channel *c, int i, const char *src, char *err) {
    const char *name = json_string_value(json_object_get(ch, "name"));
    const char *norm = json_string_value(json_object_get(ch, "normalization"));
    if (!norm) {
        cli_err(err, "%s: \"channels\"[%d] has no \"normalization\"", src, i);
        return 1;
    }
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
    c->use_mask = json_is_true(json_object_get(ch, "use_mask_for_norm"));
    if (!strcmp(norm, "CTNormalization")) {
        c->scheme = NNC_NORM_CT;
        const char *keys[4] = {"mean", "std", "percentile_00_5", "percentile_99_5"};
        double *dst[4] = {&c->mean, &c->std, &c->lo, &c->hi};
        for (int k = 0; k < 4; k++) {
            json_t *v = json_object_get(ch, keys[k]);
            if (!json_is_number(v)) {
                cli_err(err, "%s: \"channels\"[%d] (CTNormalization) has no number \"%s\"", src, i, keys[k]);
                return 1;
            }
            *dst[k] = json_number_value(v);
        }
    } else if (!strcmp(norm, "ZScoreNormalization")) {
        c->scheme = NNC_NORM_ZSCORE;
    } else if (!strcmp(norm, "RescaleTo01Normalization")) {
        c->scheme = NNC_NORM_RESCALE;
    } else if (!strcmp(norm, "RGBTo01Normalization")) {
        c->scheme = NNC_NORM_RGB;
    } else if (!strcmp(norm, "NoNormalization")) {
        c->scheme = NNC_NORM_NONE;
    } else {
        cli_err(err, "%s: \"channels\"[%d]: normalization %s is not supported", src, i, norm);
        return 1;
    }
    return 0;
}

int nn_card_load(const char *card_path, nn_card *c, char *err) {
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", card_path);
    const char *slash = strrchr(card_path, '/');
    if (slash)
        snprintf(c->dir, sizeof c->dir, "%.*s", (int)(slash - card_path), card_path);
    else
        snprintf(c->dir, sizeof c->dir, ".");
    const char *src = c->source;
    size_t len = 0;
    char *text = pl_model_file(card_path, CARD_MAX_BYTES, "the nnU-Net card", &len, err);
    if (!text) return 1;
    if (pl_json_too_deep(text, len, src, err)) {
        free(text);
        return 1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        cli_err(err, "%s: line %d: %s", src, je.line, je.text);
        return 1;
    }
    int64_t v64[NN_MAX_HEADS];
    const char *fmt = json_string_value(json_object_get(root, "format"));
    int64_t version = 0;
    if (!fmt || strcmp(fmt, "swi-nnunet") != 0 || get_int(json_object_get(root, "version"), &version) ||
        version != 1)
        BAD("%s: not an swi-nnunet card of version 1 (made by swi convert nnunet)", src);
    const char *conf = json_string_value(json_object_get(root, "configuration"));
    snprintf(c->configuration, sizeof c->configuration, "%s", conf ? conf : "?");
    const char *ds = json_string_value(json_object_get(root, "dataset_name"));
    snprintf(c->dataset, sizeof c->dataset, "%s", ds ? ds : "?");
    int64_t dims = 0;
    if (get_int(json_object_get(root, "dims"), &dims) || (dims != 2 && dims != 3))
        BAD("%s: \"dims\" must be 2 or 3", src);
    c->dims = (int)dims;
    if (int_list(json_object_get(root, "window"), c->window, 3) != 3 || c->window[0] < 1 ||
        c->window[1] < 1 || c->window[2] < 1 || (dims == 2 && c->window[0] != 1))
        BAD("%s: \"window\" must be three positive sizes (1 first for 2-D)", src);
    json_t *sp = json_object_get(root, "spacing");
    if (!json_is_array(sp) || json_array_size(sp) != (size_t)dims)
        BAD("%s: \"spacing\" needs %d values", src, c->dims);
    for (int a = 0; a < c->dims; a++) {
        json_t *v = json_array_get(sp, (size_t)a);
        if (!json_is_number(v) || !(json_number_value(v) > 0)) BAD("%s: \"spacing\" values must be > 0", src);
        c->spacing[a + 3 - c->dims] = json_number_value(v);
    }
    const char *rw = json_string_value(json_object_get(root, "image_reader_writer"));
    if (!rw) BAD("%s: no \"image_reader_writer\"", src);
    if (!strcmp(rw, "NibabelIOWithReorient"))
        c->reorient = 1;
    else if (strcmp(rw, "SimpleITKIO") != 0 && strcmp(rw, "NibabelIO") != 0)
        BAD("%s: image_reader_writer %s is not supported", src, rw);
    json_t *tf = json_object_get(root, "transpose_forward"),
           *tb = json_object_get(root, "transpose_backward");
    if (int_list(tf, v64, 3) != 3) BAD("%s: \"transpose_forward\" needs 3 axes", src);
    for (int a = 0; a < 3; a++) c->t_fwd[a] = (int)v64[a];
    if (int_list(tb, v64, 3) != 3) BAD("%s: \"transpose_backward\" needs 3 axes", src);
    for (int a = 0; a < 3; a++) c->t_bwd[a] = (int)v64[a];
    for (int a = 0; a < 3; a++)
        if (c->t_fwd[a] < 0 || c->t_fwd[a] > 2 || c->t_bwd[c->t_fwd[a]] != a)
            BAD("%s: \"transpose_forward\" and \"transpose_backward\" are not inverse permutations", src);
    json_t *folds = json_object_get(root, "folds"), *models = json_object_get(root, "models");
    if (!json_is_array(folds) || !json_is_array(models) ||
        json_array_size(folds) != json_array_size(models) || json_array_size(folds) < 1 ||
        json_array_size(folds) > NN_MAX_FOLDS)
        BAD("%s: \"folds\" and \"models\" must list 1 to %d folds alike", src, NN_MAX_FOLDS);
    for (size_t f = 0; f < json_array_size(folds); f++) {
        json_t *fv = json_array_get(folds, f);
        const char *m = json_string_value(json_array_get(models, f));
        if (!m || !*m || strchr(m, '/')) BAD("%s: \"models\"[%zu] must be a file name", src, f);
        if (json_is_integer(fv))
            snprintf(c->folds[f], sizeof c->folds[f], "%lld", (long long)json_integer_value(fv));
        else if (json_is_string(fv))
            snprintf(c->folds[f], sizeof c->folds[f], "%s", json_string_value(fv));
        else
            BAD("%s: \"folds\"[%zu] must be a number or \"all\"", src, f);
        size_t n = strlen(c->dir) + strlen(m) + 2;
        c->models[f] = malloc(n);
        if (!c->models[f]) BAD("out of memory");
        snprintf(c->models[f], n, "%s/%s", c->dir, m);
        c->n_folds = (int)f + 1;
    }
    json_t *chs = json_object_get(root, "channels");
    if (!json_is_array(chs) || json_array_size(chs) < 1 || json_array_size(chs) > NN_MAX_CHANNELS)
        BAD("%s: \"channels\" must list 1 to %d channels", src, NN_MAX_CHANNELS);
    for (size_t i = 0; i < json_array_size(chs); i++)
        if (read_channel(json_array_get(chs, i), &c->channels[i], (int)i, src, err)) goto fail;
    c->n_channels = (int)json_array_size(chs);
    json_t *rs = json_object_get(root, "resampling");
    if (read_resampling(rs, "resampling_fn_data", &c->data, src, err) ||
        read_resampling(rs, "resampling_fn_probabilities", &c->probs, src, err))
        goto fail;
    json_t *mir = json_object_get(root, "mirroring_axes");
    if (json_is_null(mir) || !mir) {
        c->n_mirror = -1;
    } else {
        int n = int_list(mir, v64, 3);
        if (n < 0) BAD("%s: \"mirroring_axes\" must list at most 3 axes, or be null", src);
        for (int i = 0; i < n; i++) {
            if (v64[i] < 0 || v64[i] >= c->dims)
                BAD("%s: \"mirroring_axes\": axis %lld", src, (long long)v64[i]);
            c->mirror[i] = (int)v64[i];
        }
        c->n_mirror = n;
    }
    json_t *ts = json_object_get(root, "tile_step_size"), *sg = json_object_get(root, "sigma_scale");
    c->tile_step = json_is_number(ts) ? json_number_value(ts) : 0.5;
    c->sigma = json_is_number(sg) ? json_number_value(sg) : 0.125;
    if (!(c->tile_step > 0 && c->tile_step <= 1) || !(c->sigma > 0))
        BAD("%s: bad tile_step_size or sigma_scale", src);
    const char *fe = json_string_value(json_object_get(root, "file_ending"));
    snprintf(c->file_ending, sizeof c->file_ending, "%s", fe ? fe : ".nii.gz");
    c->has_regions = json_is_true(json_object_get(root, "has_regions"));
    if (get_int(json_object_get(root, "num_segmentation_heads"), &c->heads) || c->heads < 1 ||
        c->heads > NN_MAX_HEADS)
        BAD("%s: \"num_segmentation_heads\" must be 1 to %d", src, NN_MAX_HEADS);
    if (c->has_regions) {
        int n = int_list(json_object_get(root, "regions_class_order"), v64, NN_MAX_HEADS);
        if (n != c->heads) BAD("%s: \"regions_class_order\" must give one label per output", src);
        for (int i = 0; i < n; i++) {
            if (v64[i] < 0 || v64[i] > 65535)
                BAD("%s: \"regions_class_order\": label %lld", src, (long long)v64[i]);
            c->regions_class_order[i] = (int)v64[i];
            if (v64[i] > c->max_label) c->max_label = v64[i];
        }
        json_t *th = json_object_get(root, "threshold");
        c->threshold = json_is_number(th) ? json_number_value(th) : 0.5;
    } else {
        c->max_label = c->heads - 1;
        /* the dataset's names of the labels ({"background": 0, "liver": 1, ...}) */
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(root, "labels"), key, v) {
            const json_int_t l = json_is_integer(v) ? json_integer_value(v) : -1;
            if (l < 0 || l > c->max_label || !strcmp(key, "ignore") || c->names[l]) continue;
            if (!(c->names[l] = strdup(key))) BAD("%s: out of memory", src);
        }
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    nn_card_free(c);
    return 1;
}
#else
int nn_card_load(const char *card_path, nn_card *c, char *err) {
    memset(c, 0, sizeof *c);
    cli_err(err,
            "%s: swi was built without jansson, which nnU-Net model cards need (apt-get install "
            "libjansson-dev and rebuild)",
            card_path);
    return 1;
}
#endif

int nn_card_select_folds(nn_card *c, const char *folds, char *err) {
    if (!folds) return 0;
    char *keep[NN_MAX_FOLDS] = {0};
    char names[NN_MAX_FOLDS][16];
    int n = 0;
    const char *p = folds;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (int f = 0; f < c->n_folds; f++)
            if (c->models[f] && strlen(c->folds[f]) == len && !strncmp(c->folds[f], p, len)) found = f;
        if (found < 0 || n == NN_MAX_FOLDS) {
            for (int k = 0; k < n; k++) free(keep[k]);
            cli_err(err, "--folds %s: the model has no fold %.*s (it has %d: %s%s%s)", folds, (int)len, p,
                    c->n_folds, c->folds[0], c->n_folds > 1 ? ", " : "", c->n_folds > 1 ? c->folds[1] : "");
            return 2;
        }
        keep[n] = c->models[found];
        c->models[found] = NULL;
        snprintf(names[n], sizeof names[n], "%s", c->folds[found]);
        n++;
        p = e ? e + 1 : p + len;
    }
    if (n == 0) {
        cli_err(err, "--folds: no fold given");
        return 2;
    }
    for (int f = 0; f < c->n_folds; f++) free(c->models[f]);
    for (int f = 0; f < n; f++) {
        c->models[f] = keep[f];
        memcpy(c->folds[f], names[f], sizeof names[f]);
    }
    c->n_folds = n;
    return 0;
}
