/* realscan.c -- see realscan.h. */
#include "realscan.h"

#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void identity_orientation(const swi_volume *v, swi_resample_orientation *o) {
    memset(o, 0, sizeof *o);
    for (int a = 0; a < 3; a++) {
        o->src_axis[a] = a;
        o->in_size[a] = o->size[a] = v->size[a];
    }
    memcpy(o->affine, v->affine, sizeof o->affine);
}

int seg_grid_setup(const pl_opts *o, const swi_volume *v, seg_grid *g, char *err) {
    memset(g, 0, sizeof *g);
    memcpy(g->in_size, v->size, sizeof g->in_size);
    memcpy(g->size, v->size, sizeof g->size);
    if (!o->orientation && !o->spacing_given) return 0;
    char msg[SWI_ERRLEN];
    if (o->orientation) {
        if (swi_resample_orientation_make(v->affine, v->size, o->orientation, &g->orient, msg, sizeof msg) !=
            SWI_OK) {
            cli_err(err, "%s: --orientation %s: %s", v->path, o->orientation, msg);
            return 1;
        }
        g->oriented = !swi_resample_orientation_is_identity(&g->orient);
    } else {
        identity_orientation(v, &g->orient);
    }
    memcpy(g->size, g->orient.size, sizeof g->size);
    if (o->spacing_given) {
        if (swi_resample_spacing_grid_make(g->orient.affine, g->orient.size, o->spacing, &g->spacing, msg,
                                           sizeof msg) != SWI_OK) {
            cli_err(err, "%s: --spacing %g,%g,%g: %s", v->path, o->spacing[0], o->spacing[1], o->spacing[2],
                    msg);
            return 1;
        }
        /* MONAI leaves a volume alone when the new grid is the old one within 1e-3 */
        if (!g->spacing.identity) {
            g->resampled = 1;
            memcpy(g->size, g->spacing.size, sizeof g->size);
            swi_resample_orient_to_input(&g->orient, g->spacing.to_src, g->to_input);
            swi_resample_orient_from_input(&g->orient, g->spacing.to_new, g->to_model);
        }
    }
    g->active = g->oriented || g->resampled;
    return 0;
}

static int read_oriented(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst,
                         char *message, size_t message_size) {
    (void)image;
    (void)message;
    (void)message_size;
    const seg_grid *g = user;
    swi_resample_orient_read_box(&g->orient, g->input, g->channels, lo, hi, dst);
    return 0;
}

/* The input-grid box [lo, hi) of labels just made, to the statistics. 0, or 1. */
static int tell_stats(seg_grid *g, const int64_t lo[3], const int64_t hi[3]) {
    if (!g->stats) return 0;
    static const int64_t origin[3] = {0, 0, 0};
    char msg[256];
    return pl_stats_add(g->stats, lo, hi, g->labels, g->label_bytes, origin, g->in_size, msg, sizeof msg) !=
           0;
}

static int labels_region(void *user, const swi_region *r) {
    seg_grid *g = user;
    size_t e = r->dtype == SWI_DTYPE_UINT16 ? 2 : 1;
    if ((int)e != g->label_bytes) return 1;
    swi_resample_orient_write_box(&g->orient, r->data, e, 1, r->lo, r->hi, g->labels);
    /* the region's box on the input grid: oriented axis j is input axis src_axis[j] */
    int64_t lo[3], hi[3];
    for (int j = 0; j < 3; j++) {
        const int a = g->orient.src_axis[j];
        lo[a] = g->orient.flip[j] ? g->orient.size[j] - r->hi[j] : r->lo[j];
        hi[a] = g->orient.flip[j] ? g->orient.size[j] - r->lo[j] : r->hi[j];
    }
    return tell_stats(g, lo, hi);
}

static int scores_region(void *user, const swi_region *r) {
    seg_grid *g = user;
    if (r->channels != g->classes) return 1;
    swi_resample_orient_write_box(&g->orient, r->data, sizeof(float), r->channels, r->lo, r->hi, g->scores);
    return 0;
}

static int model_scores_region(void *user, const swi_region *r) {
    seg_grid *g = user;
    if (r->channels != g->classes) return 1;
    return swi_resample_sink_feed(g->sink, r->lo, r->hi, r->data);
}

void seg_grid_outputs(seg_grid *g, int want_scores, int softmax, swi_output *outs, int *n_outs) {
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

static size_t voxels(const int64_t s[3]) { return (size_t)s[0] * (size_t)s[1] * (size_t)s[2]; }

size_t seg_grid_band_bytes(const seg_grid *g, int64_t classes, int outer) {
    if (!g->resampled || classes < 1) return 0;
    /* the sink's source is the model grid, its output the input grid */
    return swi_resample_sink_plan_bytes(g->size, g->in_size, g->to_model, classes, 0, outer);
}

size_t seg_grid_bytes(const seg_grid *g, int64_t classes, int want_scores, int outer) {
    if (!g->active) return 0;
    size_t n = voxels(g->in_size) * (classes > 256 ? 2 : 1);
    if (want_scores) n += voxels(g->in_size) * (size_t)classes * sizeof(float);
    if (g->resampled)
        n += voxels(g->size) * (size_t)g->channels * sizeof(float) + seg_grid_band_bytes(g, classes, outer);
    return n;
}

/* One input-grid tile of resampled scores [classes, box]: argmax (lowest index wins ties,
 * the first NaN wins, as the engine's) into the labels, and the scores (softmax when
 * asked) into --scores. Tiles are distinct, so threads may emit at once. */
static int emit_tile(void *user, const int64_t lo[3], const int64_t hi[3], int64_t classes, const float *x) {
    seg_grid *g = user;
    const int64_t *n = g->in_size;
    const int64_t nv = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]), N = n[0] * n[1] * n[2];
    int64_t v = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++, v++) {
                const int64_t at = (i * n[1] + j) * n[2] + k;
                int64_t best = 0;
                float bx = x[v];
                for (int64_t c = 1; c < classes && !isnan(bx); c++) {
                    float y = x[c * nv + v];
                    if (isnan(y) || y > bx) {
                        bx = y;
                        best = c;
                    }
                }
                if (g->label_bytes == 1)
                    ((uint8_t *)g->labels)[at] = (uint8_t)best;
                else
                    ((uint16_t *)g->labels)[at] = (uint16_t)best;
                if (!g->scores) continue;
                if (!g->softmax || isnan(bx)) {
                    for (int64_t c = 0; c < classes; c++)
                        g->scores[c * N + at] = g->softmax ? NAN : x[c * nv + v];
                    continue;
                }
                double sum = 0;
                for (int64_t c = 0; c < classes; c++) sum += exp((double)x[c * nv + v] - bx);
                for (int64_t c = 0; c < classes; c++)
                    g->scores[c * N + at] = (float)(exp((double)x[c * nv + v] - bx) / sum);
            }
    return tell_stats(g, lo, hi);
}

/* Labels alone: the sink's argmax (only the classes that can win are interpolated). */
static int emit_labels(void *user, const int64_t lo[3], const int64_t hi[3], const uint16_t *labels) {
    seg_grid *g = user;
    const int64_t *n = g->in_size;
    int64_t v = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++, v++) {
                const int64_t at = (i * n[1] + j) * n[2] + k;
                if (g->label_bytes == 1)
                    ((uint8_t *)g->labels)[at] = (uint8_t)labels[v];
                else
                    ((uint16_t *)g->labels)[at] = labels[v];
            }
    return tell_stats(g, lo, hi);
}

int seg_grid_finish(seg_grid *g, char *err) {
    if (!g->resampled) return 0;
    char msg[256];
    if (swi_resample_sink_finish(g->sink, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "internal error: %s", msg);
        return 1;
    }
    return 0;
}

int seg_grid_begin(seg_grid *g, const float *input, int64_t channels, int64_t classes, int want_scores,
                   char *err) {
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
        g->model_input = malloc(ni);
        if (!g->model_input) {
            cli_err(err, "out of memory for the input resampled to %lldx%lldx%lld (%s)",
                    (long long)g->size[0], (long long)g->size[1], (long long)g->size[2], cli_bytes(ni, b));
            return 1;
        }
        char msg[256];
        if (swi_resample_sink_create(g->size, g->in_size, g->to_model, classes, 0, emit_tile, g, &g->sink,
                                     msg, sizeof msg) != SWI_OK) {
            cli_err(err, "resampling back to the input grid: %s", msg);
            return 1;
        }
        int64_t slo[3], shi[3];
        if (g->region &&
            swi_resample_sink_restrict(g->sink, g->region_lo, g->region_hi, slo, shi) != SWI_OK) {
            cli_err(err, "internal error: the resampling sink refused the region");
            return 1;
        }
        if (!want_scores && classes <= 65536 && swi_resample_sink_argmax(g->sink, emit_labels, g) != SWI_OK) {
            cli_err(err, "internal error: the resampling sink refused its argmax mode");
            return 1;
        }
        swi_resample_trilinear(input, g->in_size, g->model_input, g->size, g->to_input, channels, 0,
                               g->size[0]);
    }
    return 0;
}

void seg_grid_describe(const seg_grid *g, char *buf, size_t n) {
    char codes[4] = "?";
    swi_resample_axcodes_of(g->orient.affine, codes, NULL, 0);
    int len = snprintf(buf, n, "%lld x %lld x %lld, %s", (long long)g->size[0], (long long)g->size[1],
                       (long long)g->size[2], codes);
    if (len < 0 || (size_t)len >= n) return;
    if (g->resampled)
        snprintf(buf + len, n - (size_t)len,
                 ", %g x %g x %g mm%s (scores resampled back as they "
                 "complete)",
                 g->spacing.pixdim[0], g->spacing.pixdim[1], g->spacing.pixdim[2],
                 g->spacing.centred ? ", centred on the input" : "");
    else if (!g->active)
        snprintf(buf + len, n - (size_t)len, " (the input's own grid)");
    else
        snprintf(buf + len, n - (size_t)len, " (axes permuted and flipped, streamed)");
}

void seg_grid_free(seg_grid *g) {
    free(g->labels);
    free(g->scores);
    free(g->model_input);
    swi_resample_sink_free(g->sink);
    g->sink = NULL;
    g->labels = g->scores = g->model_input = NULL;
}
