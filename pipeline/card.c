/* card.c -- see card.h. JSON by jansson (optional: SWI_HAVE_JANSSON); the model's
 * metadata_props through swi_onnx (optional: SWI_HAVE_ONNX_METADATA). */
#include "card.h"

#include "internal.h"

#include "swi_io.h"
#include "swi_resample.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CARD_KEY "swi.card"

void card_free(seg_card *c) {
    free(c->json);
    for (int i = 0; i < c->n_channels; i++) free(c->channels[i]);
    for (int i = 0; i < c->n_classes; i++) free(c->classes[i]);
    for (int i = 0; i < c->n_members; i++) free(c->members[i]);
    memset(c, 0, sizeof *c);
}

/* ---- the card's text: beside the model, or in its metadata_props ------------------------ */

char *pl_model_file(const char *path, size_t max, const char *what, size_t *len, char *err) {
    char why[SWI_ERRLEN];
    int64_t size = 0;
    int fd = swi_io_open_regular(path, &size, why, sizeof why);
    if (fd < 0) {
        cli_err(err, "%s (%s)", why, what);
        return NULL;
    }
    if (max == 0) { /* a check only */
        close(fd);
        return (char *)path;
    }
    if (size < 0 || (uint64_t)size > (uint64_t)max) {
        char a[32], b[32];
        cli_err(err, "%s: %s is %s, more than the %s swi reads", path, what, cli_bytes((size_t)size, a),
                cli_bytes(max, b));
        close(fd);
        return NULL;
    }
    /* read to the end, not to the size: a file that grows meanwhile is still bounded */
    char *buf = malloc(max + 1);
    if (!buf) {
        close(fd);
        cli_err(err, "%s: out of memory reading %s", path, what);
        return NULL;
    }
    size_t got = 0;
    int bad = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, max + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            cli_err(err, "%s: cannot read %s: %s", path, what, strerror(errno));
            bad = 1;
            break;
        }
        got += (size_t)r;
        if (r == 0 || got > max) break;
    }
    close(fd);
    if (!bad && got > max)
        cli_err(err, "%s: %s is larger than the %s swi reads", path, what, cli_bytes(max, why));
    if (bad || got > max) {
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    if (len) *len = got;
    return buf;
}

int pl_json_too_deep(const char *text, size_t len, const char *source, char *err) {
    const int depth = swi_io_json_depth(text, len);
    if (depth <= SWI_IO_JSON_MAX_DEPTH) return 0;
    cli_err(err, "%s: the JSON nests %d levels deep, more than the %d swi reads", source, depth,
            SWI_IO_JSON_MAX_DEPTH);
    return 1;
}

/* The card beside the model: absent is no card; anything else named so is read by the
 * model-file rules (a FIFO refused by name, at most CARD_MAX_BYTES). */
static int read_small_file(const char *path, char **text, int *found, char *err) {
    *found = 0;
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return 0;
    *text = pl_model_file(path, CARD_MAX_BYTES, "the model card", NULL, err);
    if (!*text) return 1;
    *found = 1;
    return 0;
}

#ifdef SWI_HAVE_ONNX_METADATA
#include "onnx_metadata.h"

/* The "swi.card" entry of the model's metadata_props (swi_onnx). A model that cannot be
 * read or parsed has no card here: its own errors come when it is opened; a value above
 * the card's limit is no card either. */
static int onnx_card(const char *model, char **text, int *found, char *err) {
    (void)err;
    char why[SWI_ERRLEN];
    char *value = NULL;
    *found = 0;
    if (ox_read_metadata(model, CARD_KEY, &value, why, sizeof why) != 1) return 0;
    if (strlen(value) > CARD_MAX_BYTES) {
        free(value);
        return 0;
    }
    *text = value;
    *found = 1;
    return 0;
}
#else
/* Without protobuf-c the metadata is not parsed: a model whose bytes name the key is
 * refused rather than run without its card. */
static int onnx_card(const char *model, char **text, int *found, char *err) {
    (void)text;
    *found = 0;
    int fd = swi_io_open_regular(model, NULL, NULL, 0);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) { /* the model's own errors come when it is opened */
        if (fd >= 0) close(fd);
        return 0;
    }
    const size_t klen = strlen(CARD_KEY);
    char buf[1 << 16];
    size_t kept = 0, n;
    int named = 0;
    while (!named && (n = fread(buf + kept, 1, sizeof buf - kept, f)) > 0) {
        size_t have = kept + n;
        named = memmem(buf, have, CARD_KEY, klen) != NULL;
        kept = have < klen - 1 ? have : klen - 1; /* the tail: a key across two reads */
        memmove(buf, buf + have - kept, kept);
    }
    fclose(f);
    if (!named) return 0;
    cli_err(err,
            "%s: the model may hold a card in its metadata_props (" CARD_KEY
            "), which this swi cannot read: it was built without protobuf-c (install "
            "libprotobuf-c-dev protobuf-c-compiler libonnx-dev and rebuild), or put the card "
            "beside the model as a .json file",
            model);
    return 1;
}
#endif

#ifdef SWI_HAVE_JANSSON
#include <jansson.h>

int card_available(void) { return 1; }

static int field_err(char *err, const char *src, const char *key, const char *what) {
    cli_err(err, "%s: \"%s\": %s", src, key, what);
    return 1;
}

/* one number, or an array of n numbers (one = all axes when n == 3 and one_ok) */
static int numbers(json_t *v, const char *src, const char *key, double *out, int n, int one_ok, char *err) {
    if (json_is_number(v) && one_ok) {
        for (int i = 0; i < n; i++) out[i] = json_number_value(v);
        return 0;
    }
    if (!json_is_array(v) || (int)json_array_size(v) != n) {
        char what[96];
        snprintf(what, sizeof what, "must be %s%d numbers",
                 one_ok ? "a number or an array of " : "an array of ", n);
        return field_err(err, src, key, what);
    }
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return field_err(err, src, key, "must hold finite numbers only");
        out[i] = json_number_value(x);
    }
    return 0;
}

static int names(json_t *v, const char *src, const char *key, char **out, int *n, int cap, char *err) {
    if (!json_is_array(v) || json_array_size(v) == 0 || (int)json_array_size(v) > cap)
        return field_err(err, src, key, "must be a non-empty array of strings");
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 200 ||
            strpbrk(json_string_value(x), "\"\n\r"))
            return field_err(err, src, key,
                             "must hold names of 1 to 200 characters, without "
                             "quotes or line breaks");
        out[i] = strdup(json_string_value(x));
        if (!out[i]) return field_err(err, src, key, "out of memory");
        (*n)++;
    }
    return 0;
}

static int preprocessing(json_t *v, const char *src, seg_card *c, char *err) {
    if (!json_is_object(v))
        return field_err(err, src, "preprocessing", "must be an object (clip, scale, zscore)");
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        if (strcmp(key, "clip") == 0) {
            if (numbers(x, src, "preprocessing.clip", c->clip, 2, 0, err)) return 1;
            if (c->clip[0] > c->clip[1])
                return field_err(err, src, "preprocessing.clip", "needs low <= high");
            c->has_clip = 1;
        } else if (strcmp(key, "scale") == 0) {
            if (numbers(x, src, "preprocessing.scale", c->scale, 4, 0, err)) return 1;
            if (c->scale[0] == c->scale[1])
                return field_err(err, src, "preprocessing.scale",
                                 "maps [a, b] onto [c, d]: "
                                 "needs a != b");
            c->has_scale = 1;
        } else if (strcmp(key, "zscore") == 0) {
            if (!json_is_boolean(x))
                return field_err(err, src, "preprocessing.zscore", "must be true or false");
            c->zscore = json_is_true(x);
            c->has_zscore = 1;
        } else {
            char k[128];
            snprintf(k, sizeof k, "preprocessing.%.100s", key);
            return field_err(err, src, k, "unknown key (clip, scale, zscore)");
        }
    }
    return 0;
}

int card_parse(const char *text, const char *source, const char *dir, seg_card *c, char *err) {
    if (pl_json_too_deep(text, strlen(text), source, err)) return 1;
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        cli_err(err, "%s: not valid JSON: %s (line %d, column %d)", source, je.text, je.line, je.column);
        return 1;
    }
    int rc = 1;
    if (!json_is_object(root)) {
        cli_err(err, "%s: a model card must be a JSON object", source);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        double d[4];
        if (strcmp(key, "roi") == 0) {
            if (numbers(v, source, key, d, 3, 1, err)) goto done;
            for (int a = 0; a < 3; a++) {
                if (d[a] != floor(d[a]) || d[a] < 1 || d[a] > 65536) {
                    field_err(err, source, key, "must be whole numbers from 1 to 65536");
                    goto done;
                }
                c->roi[a] = (int64_t)d[a];
            }
            c->has_roi = 1;
        } else if (strcmp(key, "overlap") == 0) {
            if (numbers(v, source, key, c->overlap, 3, 1, err)) goto done;
            for (int a = 0; a < 3; a++)
                if (!(c->overlap[a] >= 0 && c->overlap[a] < 1)) {
                    field_err(err, source, key, "must be in [0, 1)");
                    goto done;
                }
            c->has_overlap = 1;
        } else if (strcmp(key, "sigma_scale") == 0) {
            if (numbers(v, source, key, c->sigma_scale, 3, 1, err)) goto done;
            for (int a = 0; a < 3; a++)
                if (!(c->sigma_scale[a] > 0)) {
                    field_err(err, source, key, "must be > 0");
                    goto done;
                }
            c->has_sigma = 1;
        } else if (strcmp(key, "spacing") == 0) {
            if (numbers(v, source, key, c->spacing, 3, 1, err)) goto done;
            for (int a = 0; a < 3; a++)
                if (!(c->spacing[a] > 0) || c->spacing[a] > 1e6) {
                    field_err(err, source, key, "must be millimetres > 0");
                    goto done;
                }
            c->has_spacing = 1;
        } else if (strcmp(key, "cval") == 0) {
            if (!json_is_number(v) || fabs(json_number_value(v)) > 3.4e38) {
                field_err(err, source, key, "must be a number");
                goto done;
            }
            c->cval = json_number_value(v);
            c->has_cval = 1;
        } else if (strcmp(key, "blending") == 0) {
            const char *s = json_string_value(v);
            if (s && strcmp(s, "constant") == 0)
                c->blending = SWI_BLEND_CONSTANT;
            else if (s && strcmp(s, "gaussian") == 0)
                c->blending = SWI_BLEND_GAUSSIAN;
            else {
                field_err(err, source, key, "must be \"constant\" or \"gaussian\"");
                goto done;
            }
            c->has_blending = 1;
        } else if (strcmp(key, "padding") == 0) {
            static const char *const pads[] = {"constant", "reflect", "replicate", "circular"};
            const char *s = json_string_value(v);
            int k = 0;
            while (s && k < 4 && strcmp(s, pads[k]) != 0) k++;
            if (!s || k == 4) {
                field_err(err, source, key,
                          "must be \"constant\", \"reflect\", \"replicate\" or "
                          "\"circular\"");
                goto done;
            }
            c->padding = (swi_pad)k;
            c->has_padding = 1;
        } else if (strcmp(key, "orientation") == 0) {
            int w[3], sg[3];
            char msg[256];
            const char *s = json_string_value(v);
            if (!s) {
                field_err(err, source, key, "must be a string of axis codes (\"RAS\")");
                goto done;
            }
            if (swi_resample_axcodes_parse(s, w, sg, msg, sizeof msg) != SWI_OK) {
                field_err(err, source, key, msg);
                goto done;
            }
            memcpy(c->orientation, s, 3);
            c->orientation[3] = '\0';
            c->has_orientation = 1;
        } else if (strcmp(key, "preprocessing") == 0) {
            if (preprocessing(v, source, c, err)) goto done;
        } else if (strcmp(key, "channels") == 0) {
            if (names(v, source, key, c->channels, &c->n_channels, CARD_MAX_NAMES, err)) goto done;
        } else if (strcmp(key, "classes") == 0) {
            if (names(v, source, key, c->classes, &c->n_classes, CARD_MAX_NAMES, err)) goto done;
        } else if (strcmp(key, "members") == 0) {
            char *m[SEG_MAX_MODELS];
            int n = 0;
            if (names(v, source, key, m, &n, SEG_MAX_MODELS - 1, err)) {
                for (int i = 0; i < n; i++) free(m[i]);
                goto done;
            }
            for (int i = 0; i < n; i++) {
                /* relative to the card's own directory */
                char *full = m[i];
                if (m[i][0] != '/' && dir && *dir) {
                    size_t len = strlen(dir) + strlen(m[i]) + 2;
                    full = malloc(len);
                    if (full) snprintf(full, len, "%s/%s", dir, m[i]);
                    free(m[i]);
                }
                if (!full) {
                    field_err(err, source, key, "out of memory");
                    goto done;
                }
                c->members[c->n_members++] = full;
            }
        } else {
            char what[160];
            snprintf(what, sizeof what,
                     "unknown key (known: roi, overlap, blending, sigma_scale, "
                     "padding, cval, orientation, spacing, preprocessing, channels, classes, "
                     "members)");
            field_err(err, source, key, what);
            goto done;
        }
    }
    c->json = strdup(text);
    if (!c->json) {
        cli_err(err, "%s: out of memory", source);
        goto done;
    }
    snprintf(c->source, sizeof c->source, "%s", source);
    rc = 0;
done:
    json_decref(root);
    return rc;
}
#else
int card_available(void) { return 0; }

int card_parse(const char *text, const char *source, const char *dir, seg_card *c, char *err) {
    (void)text, (void)dir, (void)c;
    cli_err(err,
            "%s: swi was built without a JSON library, so it cannot read model cards "
            "(install libjansson-dev and rebuild)",
            source);
    return 1;
}
#endif

int card_load(const char *model, seg_card *c, int *found, char *err) {
    memset(c, 0, sizeof *c);
    *found = 0;
    /* m.onnx -> m.json; any other name -> name.json */
    char path[4200], dir[4200];
    size_t n = strlen(model);
    if (n + 6 > sizeof path) {
        cli_err(err, "%.200s...: model path too long", model);
        return 1;
    }
    memcpy(path, model, n + 1);
    if (n > 5 && strcmp(path + n - 5, ".onnx") == 0) path[n - 5] = '\0';
    strcat(path, ".json");
    snprintf(dir, sizeof dir, "%s", model);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, "");
    char *text = NULL;
    if (read_small_file(path, &text, found, err)) return 1;
    char source[4300];
    if (*found) {
        snprintf(source, sizeof source, "%s", path);
    } else {
        if (onnx_card(model, &text, found, err)) return 1;
        if (!*found) return 0;
        snprintf(source, sizeof source, "%s (metadata_props " CARD_KEY ")", model);
    }
    int rc = card_parse(text, source, dir, c, err);
    c->in_file = rc == 0 && strcmp(source, path) == 0;
    free(text);
    if (rc) card_free(c);
    return rc;
}

int card_load_file(const char *path, seg_card *c, char *err) {
    memset(c, 0, sizeof *c);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
    char *text = NULL;
    int found = 0;
    if (read_small_file(path, &text, &found, err)) return 1;
    if (!found) {
        cli_err(err, "%s: no such file", path);
        return 1;
    }
    int rc = card_parse(text, path, dir, c, err);
    c->in_file = rc == 0;
    free(text);
    if (rc) card_free(c);
    return rc;
}

int card_apply(const seg_card *c, pl_opts *o, char *err) {
    (void)err;
    if (c->has_roi && !o->roi_given) {
        memcpy(o->roi, c->roi, sizeof o->roi);
        o->roi_given = 1;
        o->roi_from_card = 1;
    }
    if (c->has_overlap && !(o->given & SEG_GIVEN_OVERLAP)) memcpy(o->overlap, c->overlap, sizeof o->overlap);
    if (c->has_sigma && !(o->given & SEG_GIVEN_SIGMA))
        memcpy(o->sigma_scale, c->sigma_scale, sizeof o->sigma_scale);
    if (c->has_blending && !(o->given & SEG_GIVEN_MODE)) o->mode = c->blending;
    if (c->has_padding && !(o->given & SEG_GIVEN_PADDING)) o->padding = c->padding;
    if (c->has_cval && !(o->given & SEG_GIVEN_CVAL)) o->cval = (float)c->cval;
    if (c->has_orientation && !o->orientation) o->orientation = c->orientation;
    if (c->has_spacing && !o->spacing_given) {
        memcpy(o->spacing, c->spacing, sizeof o->spacing);
        o->spacing_given = 1;
    }
    if (!o->clip_given && !o->scale_given && !o->zscore) {
        if (c->has_clip) {
            memcpy(o->clip, c->clip, sizeof o->clip);
            o->clip_given = 1;
        }
        if (c->has_scale) {
            memcpy(o->scale, c->scale, sizeof o->scale);
            o->scale_given = 1;
        }
        o->zscore = c->zscore;
    }
    if (c->n_members > 0 && o->n_models == 1 && o->n_preds == 0) {
        for (int i = 0; i < c->n_members && o->n_models < SEG_MAX_MODELS; i++)
            o->models[o->n_models++] = c->members[i];
    }
    o->card = c;
    return 0;
}

void card_print(const seg_card *c, FILE *f) {
    static const char *const pads[] = {"constant", "reflect", "replicate", "circular"};
    fprintf(f, "card     %s\n", c->source);
    if (c->has_roi)
        fprintf(f, "  roi          %lld,%lld,%lld\n", (long long)c->roi[0], (long long)c->roi[1],
                (long long)c->roi[2]);
    if (c->has_overlap) fprintf(f, "  overlap      %g,%g,%g\n", c->overlap[0], c->overlap[1], c->overlap[2]);
    if (c->has_blending)
        fprintf(f, "  blending     %s\n", c->blending == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    if (c->has_sigma)
        fprintf(f, "  sigma_scale  %g,%g,%g\n", c->sigma_scale[0], c->sigma_scale[1], c->sigma_scale[2]);
    if (c->has_padding) fprintf(f, "  padding      %s\n", pads[c->padding]);
    if (c->has_cval) fprintf(f, "  cval         %g\n", c->cval);
    if (c->has_orientation) fprintf(f, "  orientation  %s\n", c->orientation);
    if (c->has_spacing)
        fprintf(f, "  spacing      %g,%g,%g mm\n", c->spacing[0], c->spacing[1], c->spacing[2]);
    if (c->has_clip) fprintf(f, "  clip         %g,%g\n", c->clip[0], c->clip[1]);
    if (c->has_scale)
        fprintf(f, "  scale        %g,%g -> %g,%g\n", c->scale[0], c->scale[1], c->scale[2], c->scale[3]);
    if (c->has_zscore) fprintf(f, "  zscore       %s\n", c->zscore ? "yes" : "no");
    for (int i = 0; i < c->n_channels; i++) fprintf(f, "  channel %-4d %s\n", i, c->channels[i]);
    for (int i = 0; i < c->n_classes; i++) fprintf(f, "  class %-6d %s\n", i, c->classes[i]);
    for (int i = 0; i < c->n_members; i++) fprintf(f, "  member       %s\n", c->members[i]);
}

/* The headers swi writes: how a rerun knows a side file as swi's own (card_side_is_own). */
static const char ITK_HEAD[] = "################################################\n"
                               "# ITK-SnAP Label Description File\n"
                               "# Columns = IDX -R- -G- -B- -A-- VIS MSH  LABEL\n"
                               "################################################\n";
static const char CTBL_HEAD[] = "# 3D Slicer color table: index name R G B A\n";

int card_side_is_own(const char *path) {
    struct stat st;
    /* a link or anything but a small regular file is someone else's */
    if (!path || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    char head[sizeof ITK_HEAD];
    size_t got = 0;
    while (got < sizeof head - 1) {
        ssize_t r = read(fd, head + got, sizeof head - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    head[got] = '\0';
    return strncmp(head, ITK_HEAD, sizeof ITK_HEAD - 1) == 0 ||
           strncmp(head, CTBL_HEAD, sizeof CTBL_HEAD - 1) == 0;
}

int card_write_labels(const seg_card *c, int fd, int itksnap, const char *name, char *err) {
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        cli_err(err, "%s: cannot write: %s", name, strerror(errno));
        return 1;
    }
    fputs(itksnap ? ITK_HEAD : CTBL_HEAD, f);
    for (int i = 0; i < c->n_classes; i++) {
        unsigned char rgb[3] = {0, 0, 0};
        if (i > 0) swi_io_label_color(i, rgb);
        if (itksnap)
            fprintf(f, "%5d %5d %4d %4d %8s %2d %2d    \"%s\"\n", i, rgb[0], rgb[1], rgb[2],
                    i == 0 ? "0" : "1", i > 0, i > 0, c->classes[i]);
        else {
            /* a color table's names are one word */
            char word[256];
            snprintf(word, sizeof word, "%s", c->classes[i]);
            for (char *p = word; *p; p++)
                if (*p == ' ' || *p == '\t') *p = '_';
            fprintf(f, "%d %s %d %d %d %d\n", i, word, rgb[0], rgb[1], rgb[2], i == 0 ? 0 : 255);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        cli_err(err, "%s: cannot write: %s", name, strerror(errno));
        return 1;
    }
    return 0;
}
