/* realscan.c -- see realscan.h. */
#include "realscan.h"

#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void identity_orientation(const swi_volume *v, swi_orientation *o)
{
    memset(o, 0, sizeof *o);
    for (int a = 0; a < 3; a++) {
        o->src_axis[a] = a;
        o->in_size[a] = o->size[a] = v->size[a];
    }
    memcpy(o->affine, v->affine, sizeof o->affine);
}

int seg_grid_setup(const seg_opts *o, const swi_volume *v, seg_grid *g, char *err)
{
    memset(g, 0, sizeof *g);
    memcpy(g->in_size, v->size, sizeof g->in_size);
    memcpy(g->size, v->size, sizeof g->size);
    if (!o->orientation && !o->spacing_given)
        return 0;
    char msg[SWI_ERRLEN];
    if (o->orientation) {
        if (swi_orientation_make(v->affine, v->size, o->orientation, &g->orient, msg,
                                 sizeof msg) != SWI_OK) {
            cli_err(err, "%s: --orientation %s: %s", v->path, o->orientation, msg);
            return 1;
        }
        g->oriented = !swi_orientation_is_identity(&g->orient);
    } else {
        identity_orientation(v, &g->orient);
    }
    memcpy(g->size, g->orient.size, sizeof g->size);
    if (o->spacing_given) {
        if (swi_spacing_grid_make(g->orient.affine, g->orient.size, o->spacing, &g->spacing, msg,
                                  sizeof msg) != SWI_OK) {
            cli_err(err, "%s: --spacing %g,%g,%g: %s", v->path, o->spacing[0], o->spacing[1],
                    o->spacing[2], msg);
            return 1;
        }
        /* MONAI leaves a volume alone when the new grid is the old one within 1e-3 */
        if (!g->spacing.identity) {
            g->resampled = 1;
            memcpy(g->size, g->spacing.size, sizeof g->size);
            swi_orient_map_to_input(&g->orient, g->spacing.to_src, g->to_input);
            swi_orient_map_from_input(&g->orient, g->spacing.to_new, g->to_model);
        }
    }
    g->active = g->oriented || g->resampled;
    return 0;
}

static int read_oriented(void *user, int64_t image, const int64_t *lo, const int64_t *hi,
                         float *dst, char *message, size_t message_size)
{
    (void)image;
    (void)message;
    (void)message_size;
    const seg_grid *g = user;
    swi_orient_read_box(&g->orient, g->input, g->channels, lo, hi, dst);
    return 0;
}

/* copy a region [planes, *(hi - lo)] into a whole grid [planes, *size] */
static void put_box(const float *src, int64_t planes, const int64_t lo[3], const int64_t hi[3],
                    const int64_t size[3], float *dst)
{
    const int64_t nk = hi[2] - lo[2], v = size[0] * size[1] * size[2];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = lo[0]; i < hi[0]; i++)
            for (int64_t j = lo[1]; j < hi[1]; j++, src += nk)
                memcpy(dst + p * v + (i * size[1] + j) * size[2] + lo[2], src,
                       (size_t)nk * sizeof *src);
}

static int labels_region(void *user, const swi_region *r)
{
    seg_grid *g = user;
    size_t e = r->dtype == SWI_DTYPE_UINT16 ? 2 : 1;
    if ((int)e != g->label_bytes)
        return 1;
    swi_orient_write_box(&g->orient, r->data, e, 1, r->lo, r->hi, g->labels);
    return 0;
}

static int scores_region(void *user, const swi_region *r)
{
    seg_grid *g = user;
    if (r->channels != g->classes)
        return 1;
    swi_orient_write_box(&g->orient, r->data, sizeof(float), r->channels, r->lo, r->hi, g->scores);
    return 0;
}

static int model_scores_region(void *user, const swi_region *r)
{
    seg_grid *g = user;
    if (r->channels != g->classes)
        return 1;
    put_box(r->data, r->channels, r->lo, r->hi, g->size, g->model_scores);
    return 0;
}

void seg_grid_outputs(seg_grid *g, int want_scores, int softmax, swi_output *outs, int *n_outs)
{
    g->softmax = softmax;
    if (g->resampled) {
        /* the blended scores, to resample back before any reduction */
        swi_output_init(&outs[0], 0, SWI_REDUCE_CUSTOM);
        outs[0].on_region = model_scores_region;
        outs[0].user = g;
        *n_outs = 1;
        return;
    }
    swi_output_init(&outs[0], 0, SWI_REDUCE_ARGMAX);
    outs[0].on_region = labels_region;
    outs[0].user = g;
    *n_outs = 1;
    if (want_scores) {
        swi_output_init(&outs[1], 0, softmax ? SWI_REDUCE_SOFTMAX : SWI_REDUCE_NONE);
        outs[1].on_region = scores_region;
        outs[1].user = g;
        *n_outs = 2;
    }
}

static size_t voxels(const int64_t s[3])
{
    return (size_t)s[0] * (size_t)s[1] * (size_t)s[2];
}

size_t seg_grid_bytes(const seg_grid *g, int64_t classes, int want_scores)
{
    if (!g->active)
        return 0;
    size_t n = voxels(g->in_size) * (classes > 256 ? 2 : 1);
    if (want_scores)
        n += voxels(g->in_size) * (size_t)classes * sizeof(float);
    if (g->resampled)
        n += voxels(g->size) * ((size_t)g->channels + (size_t)classes) * sizeof(float);
    return n;
}

int seg_grid_begin(seg_grid *g, const float *input, int64_t channels, int64_t classes,
                   int want_scores, char *err)
{
    g->input = input;
    g->channels = channels;
    g->classes = classes;
    g->label_bytes = classes > 256 ? 2 : 1;
    g->reader.read = read_oriented;
    g->reader.user = g;
    char b[32];
    size_t nl = voxels(g->in_size) * (size_t)g->label_bytes;
    g->labels = calloc(1, nl);
    if (!g->labels) {
        cli_err(err, "out of memory for the label map (%s)", cli_bytes(nl, b));
        return 1;
    }
    if (want_scores) {
        size_t ns = voxels(g->in_size) * (size_t)classes * sizeof(float);
        g->scores = calloc(1, ns);
        if (!g->scores) {
            cli_err(err, "out of memory for the scores (%s)", cli_bytes(ns, b));
            return 1;
        }
    }
    if (g->resampled) {
        size_t ni = voxels(g->size) * (size_t)channels * sizeof(float);
        size_t ns = voxels(g->size) * (size_t)classes * sizeof(float);
        g->model_input = malloc(ni);
        g->model_scores = malloc(ns);
        if (!g->model_input || !g->model_scores) {
            cli_err(err, "out of memory for the resampled grid %lldx%lldx%lld (%s of input, %s "
                    "of scores)", (long long)g->size[0], (long long)g->size[1],
                    (long long)g->size[2], cli_bytes(ni, b), cli_bytes(ns, (char[32]){ 0 }));
            return 1;
        }
        swi_resample_trilinear(input, g->in_size, g->model_input, g->size, g->to_input, channels,
                               0, g->size[0]);
    }
    return 0;
}

/* argmax (lowest index wins ties, the first NaN wins) and softmax of [classes, n] */
static void reduce_band(const float *x, int64_t classes, int64_t n, int label_bytes, void *labels,
                        float *scores, int softmax)
{
    for (int64_t v = 0; v < n; v++) {
        int64_t best = 0;
        float bx = x[v];
        for (int64_t c = 1; c < classes && !isnan(bx); c++) {
            float y = x[c * n + v];
            if (isnan(y) || y > bx) {
                bx = y;
                best = c;
            }
        }
        if (label_bytes == 1)
            ((uint8_t *)labels)[v] = (uint8_t)best;
        else
            ((uint16_t *)labels)[v] = (uint16_t)best;
        if (!scores)
            continue;
        if (!softmax) {
            for (int64_t c = 0; c < classes; c++)
                scores[c * n + v] = x[c * n + v];
            continue;
        }
        if (isnan(bx)) {
            for (int64_t c = 0; c < classes; c++)
                scores[c * n + v] = NAN;
            continue;
        }
        double sum = 0;
        for (int64_t c = 0; c < classes; c++)
            sum += exp((double)x[c * n + v] - bx);
        for (int64_t c = 0; c < classes; c++)
            scores[c * n + v] = (float)(exp((double)x[c * n + v] - bx) / sum);
    }
}

int seg_grid_finish(seg_grid *g, char *err)
{
    if (!g->resampled)
        return 0;
    /* bands of input rows: the scores brought back, then reduced */
    const int64_t plane = g->in_size[1] * g->in_size[2];
    int64_t rows = plane > 0 ? (int64_t)((8u << 20) / ((size_t)plane * (size_t)g->classes * 4)) : 1;
    if (rows < 1)
        rows = 1;
    float *band = malloc((size_t)(rows * plane * g->classes) * sizeof(float));
    float *sband = g->scores ? malloc((size_t)(rows * plane * g->classes) * sizeof(float)) : NULL;
    if (!band || (g->scores && !sband)) {
        free(band);
        free(sband);
        cli_err(err, "out of memory resampling the scores back");
        return 1;
    }
    const int64_t N = plane * g->in_size[0];
    for (int64_t r0 = 0; r0 < g->in_size[0]; r0 += rows) {
        int64_t r1 = r0 + rows < g->in_size[0] ? r0 + rows : g->in_size[0];
        int64_t n = (r1 - r0) * plane;
        swi_resample_trilinear(g->model_scores, g->size, band, g->in_size, g->to_model, g->classes,
                               r0, r1);
        reduce_band(band, g->classes, n, g->label_bytes,
                    (char *)g->labels + (size_t)(r0 * plane) * (size_t)g->label_bytes, sband,
                    g->softmax);
        if (sband)
            for (int64_t c = 0; c < g->classes; c++)
                memcpy(g->scores + c * N + r0 * plane, sband + c * n, (size_t)n * sizeof(float));
    }
    free(band);
    free(sband);
    return 0;
}

void seg_grid_describe(const seg_grid *g, char *buf, size_t n)
{
    char codes[4] = "?";
    swi_affine_axcodes(g->orient.affine, codes, NULL, 0);
    int len = snprintf(buf, n, "%lld x %lld x %lld, %s", (long long)g->size[0],
                       (long long)g->size[1], (long long)g->size[2], codes);
    if (len < 0 || (size_t)len >= n)
        return;
    if (g->resampled)
        snprintf(buf + len, n - (size_t)len, ", %g x %g x %g mm%s (resampled whole: not yet "
                 "streamed)", g->spacing.pixdim[0], g->spacing.pixdim[1], g->spacing.pixdim[2],
                 g->spacing.centred ? ", centred on the input" : "");
    else if (!g->active)
        snprintf(buf + len, n - (size_t)len, " (the input's own grid)");
    else
        snprintf(buf + len, n - (size_t)len, " (axes permuted and flipped, streamed)");
}

void seg_grid_free(seg_grid *g)
{
    free(g->labels);
    free(g->scores);
    free(g->model_input);
    free(g->model_scores);
    g->labels = g->scores = g->model_input = g->model_scores = NULL;
}
