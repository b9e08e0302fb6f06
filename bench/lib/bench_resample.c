/* bench_resample.c -- see bench_resample.h. */
#include "bench_resample.h"

#include "budget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nnU-Net's model grid and way back (pipeline/nnunet_job.c: nn_prepare's shape and separate-z
 * decisions, nn_back_map without transpose, flips or crop) */
static int setup_nnunet(bench_rs *r, const double in_spacing[3], const double spacing[3], char *err,
                        size_t errlen) {
    if (swi_resample_nnunet_shape(in_spacing, spacing, r->in_size, r->model) != SWI_OK) {
        snprintf(err, errlen, "no model grid for %g x %g x %g mm at %g x %g x %g mm (nnU-Net's shape rule)",
                 in_spacing[0], in_spacing[1], in_spacing[2], spacing[0], spacing[1], spacing[2]);
        return -1;
    }
    int64_t vox = 1;
    for (int a = 0; a < 3; a++) vox *= r->model[a]; /* each axis <= 2^31: no overflow */
    if (vox > SWI_RESAMPLE_MAX_VOXELS) {
        snprintf(err, errlen, "the model grid %lldx%lldx%lld exceeds 2^40 voxels", (long long)r->model[0],
                 (long long)r->model[1], (long long)r->model[2]);
        return -1;
    }
    memcpy(r->pixdim, spacing, sizeof r->pixdim);
    r->sep_fwd = swi_resample_nnunet_separate_z(in_spacing, spacing, -1, &r->axis_fwd);
    int axis = -1;
    const int sep_back = swi_resample_nnunet_separate_z(spacing, in_spacing, -1, &axis);
    r->nearest_axis = sep_back && r->model[axis] != r->in_size[axis] ? axis : -1;
    memset(r->map, 0, sizeof r->map);
    for (int d = 0; d < 3; d++) {
        const double s = (double)r->model[d] / (double)r->in_size[d];
        r->map[d][d] = s;
        r->map[d][3] = s * 0.5 - 0.5;
    }
    return 0;
}

int bench_rs_setup(bench_rs *r, const int64_t shape[3], const double in_spacing[3], const double spacing[3],
                   int64_t classes, int nnunet, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    memcpy(r->in_size, shape, sizeof r->in_size);
    r->classes = classes;
    r->label_bytes = classes > 256 ? 2 : 1;
    r->nnunet = nnunet;
    r->nearest_axis = r->axis_fwd = -1;
    if (nnunet) return setup_nnunet(r, in_spacing, spacing, err, errlen);
    double a[4][4] = {
        {in_spacing[0], 0, 0, 0}, {0, in_spacing[1], 0, 0}, {0, 0, in_spacing[2], 0}, {0, 0, 0, 1}};
    swi_resample_spacing_grid g;
    if (swi_resample_spacing_grid_make(a, shape, spacing, &g, err, errlen) != SWI_OK) return -1;
    memcpy(r->model, g.size, sizeof r->model);
    memcpy(r->pixdim, g.pixdim, sizeof r->pixdim);
    memcpy(r->map, g.to_new, sizeof r->map);
    return 0;
}

/* never called: the sink runs in its argmax mode */
static int emit_scores(void *user, const int64_t lo[3], const int64_t hi[3], int64_t classes,
                       const float *x) {
    (void)user, (void)lo, (void)hi, (void)classes, (void)x;
    return 1;
}

static int emit_labels(void *user, const int64_t lo[3], const int64_t hi[3], const uint16_t *labels) {
    bench_rs *r = user;
    const int64_t *n = r->in_size;
    int64_t v = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++, v++) {
                const int64_t at = (i * n[1] + j) * n[2] + k;
                if (r->label_bytes == 1)
                    ((uint8_t *)r->labels)[at] = (uint8_t)labels[v];
                else
                    ((uint16_t *)r->labels)[at] = labels[v];
            }
    return 0;
}

int bench_rs_begin(bench_rs *r, char *err, size_t errlen) {
    size_t n = (size_t)r->in_size[0] * (size_t)r->in_size[1] * (size_t)r->in_size[2];
    r->labels = calloc(n, (size_t)r->label_bytes);
    if (!r->labels) {
        snprintf(err, errlen, "out of memory for the input-grid labels");
        return -1;
    }
    if (swi_resample_sink_create(r->model, r->in_size, r->map, r->classes, 0, emit_scores, r, &r->sink, err,
                                 errlen) != SWI_OK)
        return -1;
    if (r->nearest_axis >= 0 && swi_resample_sink_nearest(r->sink, r->nearest_axis, err, errlen) != SWI_OK)
        return -1;
    if (swi_resample_sink_argmax(r->sink, emit_labels, r) != SWI_OK) {
        snprintf(err, errlen, "the resampling sink takes no labels for %lld classes", (long long)r->classes);
        return -1;
    }
    return 0;
}

int bench_rs_region(void *user, const swi_region *region) {
    bench_rs *r = user;
    return swi_resample_sink_feed(r->sink, region->lo, region->hi, region->data);
}

size_t bench_rs_planned(const bench_rs *r, int outer) {
    size_t n = (size_t)r->in_size[0] * (size_t)r->in_size[1] * (size_t)r->in_size[2];
    return n * (size_t)r->label_bytes +
           swi_resample_sink_plan_bytes(r->model, r->in_size, r->map, r->classes, 0, outer);
}

void bench_rs_free(bench_rs *r) {
    swi_resample_sink_free(r->sink);
    free(r->labels);
    r->sink = NULL;
    r->labels = NULL;
}

/* what resampling back and the combinators hold beside the engine under a plan */
static size_t beside_bytes(void *user, const swi_plan *plan) {
    const bench_beside *w = user;
    return (w->rs ? bench_rs_planned(w->rs, plan->order[0]) : 0) +
           (w->tta_bytes ? w->tta_bytes(w->tta_user, plan) : 0);
}

swi_status bench_rs_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *out,
                             swi_plan *plan, const bench_beside *with, size_t *beside, char *err,
                             size_t errlen) {
    const int any = with && (with->rs || with->tta_bytes);
    return cli_plan_fit(ctx, p, in, out, 1, plan, any ? beside_bytes : NULL, (void *)with, beside, err,
                        errlen);
}
