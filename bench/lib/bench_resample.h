/*
 * bench_resample.h -- `swi bench --input-spacing X,Y,Z --spacing X,Y,Z`: the engine runs on
 * the grid Spacingd makes of the input (the synthetic volume is made there), and its
 * blended scores are resampled back to the input grid through swi_resample_sink and
 * reduced to an argmax label map there, as `swi segment --spacing` does.
 */
#ifndef SWI_CLI_BENCH_RESAMPLE_H
#define SWI_CLI_BENCH_RESAMPLE_H

#include "swi.h"
#include "swi_resample.h"

typedef struct bench_rs {
    int64_t in_size[3];             /* the input grid (--shape) */
    swi_resample_spacing_grid grid; /* the model grid */
    int64_t classes;
    int label_bytes;
    void *labels; /* on the input grid */
    swi_resample_sink *sink;
} bench_rs;

/* The model grid of a --shape volume at in_spacing resampled to spacing. 0, or -1 (err). */
int bench_rs_setup(bench_rs *r, const int64_t shape[3], const double in_spacing[3], const double spacing[3],
                   int64_t classes, char *err, size_t errlen);

/* Allocate the labels and the sink. 0, or -1 (err). */
int bench_rs_begin(bench_rs *r, char *err, size_t errlen);

/* on_region of an SWI_REDUCE_CUSTOM output: user is the bench_rs. */
int bench_rs_region(void *user, const swi_region *region);

/* Planned bytes beside the engine: the labels, the sink's band and bookkeeping. */
size_t bench_rs_planned(const bench_rs *r, int outer);

void bench_rs_free(bench_rs *r);

/* The plan of one output, fitted to p->max_memory with what r holds beside the engine (r
 * NULL: nothing beside; *beside receives it); as cli_plan_fit (budget.h): SWI_ERR_BUDGET with
 * err saying what would fit, other failures the engine's. */
swi_status bench_rs_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *out,
                             swi_plan *plan, bench_rs *r, size_t *beside, char *err, size_t errlen);

#endif
