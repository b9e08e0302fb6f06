/* bench_resample.c -- see bench_resample.h. */
#include "bench_resample.h"

#include "budget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_rs_setup(bench_rs *r, const int64_t shape[3], const double in_spacing[3], const double spacing[3],
                   int64_t classes, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    memcpy(r->in_size, shape, sizeof r->in_size);
    r->classes = classes;
    r->label_bytes = classes > 256 ? 2 : 1;
    double a[4][4] = {
        {in_spacing[0], 0, 0, 0}, {0, in_spacing[1], 0, 0}, {0, 0, in_spacing[2], 0}, {0, 0, 0, 1}};
    return swi_resample_spacing_grid_make(a, shape, spacing, &r->grid, err, errlen) == SWI_OK ? 0 : -1;
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
    if (swi_resample_sink_create(r->grid.size, r->in_size, r->grid.to_new, r->classes, 0, emit_scores, r,
                                 &r->sink, err, errlen) != SWI_OK)
        return -1;
    return swi_resample_sink_argmax(r->sink, emit_labels, r) == SWI_OK ? 0 : -1;
}

int bench_rs_region(void *user, const swi_region *region) {
    bench_rs *r = user;
    return swi_resample_sink_feed(r->sink, region->lo, region->hi, region->data);
}

size_t bench_rs_planned(const bench_rs *r, int outer) {
    size_t n = (size_t)r->in_size[0] * (size_t)r->in_size[1] * (size_t)r->in_size[2];
    return n * (size_t)r->label_bytes +
           swi_resample_sink_plan_bytes(r->grid.size, r->in_size, r->grid.to_new, r->classes, 0, outer);
}

void bench_rs_free(bench_rs *r) {
    swi_resample_sink_free(r->sink);
    free(r->labels);
    r->sink = NULL;
    r->labels = NULL;
}

/* what resampling back holds beside the engine under a plan */
static size_t rs_beside(void *user, const swi_plan *plan) { return bench_rs_planned(user, plan->order[0]); }

swi_status bench_rs_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *out,
                             swi_plan *plan, bench_rs *r, size_t *beside, char *err, size_t errlen) {
    return cli_plan_fit(ctx, p, in, out, 1, plan, r ? rs_beside : NULL, r, beside, err, errlen);
}
