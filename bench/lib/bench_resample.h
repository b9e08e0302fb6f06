/*
 * bench_resample.h -- `swi bench --input-spacing X,Y,Z --spacing X,Y,Z`: the engine runs on
 * the model grid (the synthetic volume is made there), and its blended scores are resampled
 * back to the input grid through swi_resample_sink and reduced to an argmax label map there.
 * Two ways, as the jobs do them:
 *  - MONAI's (`swi segment --spacing`): the grid Spacingd makes, the way back its inverse map;
 *  - nnU-Net's (`swi segment --model DIR`, pipeline/nnunet_job.c): the shape rule
 *    swi_resample_nnunet_shape, the way back (o + 0.5) * model / input - 0.5 per axis with
 *    order 1, and with separate z (swi_resample_nnunet_separate_z from the model spacing to the
 *    input's, order_z 0) the nearest model slice along that axis.
 */
#ifndef SWI_CLI_BENCH_RESAMPLE_H
#define SWI_CLI_BENCH_RESAMPLE_H

#include "swi.h"
#include "swi_resample.h"

typedef struct bench_rs {
    int64_t in_size[3];    /* the input grid (--shape) */
    int64_t model[3];      /* the model grid */
    double pixdim[3];      /* its spacing */
    double map[3][4];      /* input voxel -> model-grid coordinate: the sink's map */
    int nnunet;            /* nnU-Net's way (else MONAI's) */
    int sep_fwd, axis_fwd; /* nnU-Net: separate z on the way there (and its axis), for the record */
    int nearest_axis;      /* nnU-Net: the axis taken by the nearest model slice on the way back, or -1 */
    int64_t classes;
    int label_bytes;
    void *labels; /* on the input grid */
    swi_resample_sink *sink;
} bench_rs;

/* The model grid of a --shape volume at in_spacing resampled to spacing, MONAI's way or
 * (nnunet 1) nnU-Net's. 0, or -1 (err). */
int bench_rs_setup(bench_rs *r, const int64_t shape[3], const double in_spacing[3], const double spacing[3],
                   int64_t classes, int nnunet, char *err, size_t errlen);

/* Allocate the labels and the sink. 0, or -1 (err). */
int bench_rs_begin(bench_rs *r, char *err, size_t errlen);

/* on_region of an SWI_REDUCE_CUSTOM output: user is the bench_rs. */
int bench_rs_region(void *user, const swi_region *region);

/* Planned bytes beside the engine: the labels, the sink's band and bookkeeping. */
size_t bench_rs_planned(const bench_rs *r, int outer);

void bench_rs_free(bench_rs *r);

/* What a plan needs beside the engine (bench_rs_planned of r, NULL for none, and
 * tta_bytes(plan) for the mirroring and ensemble scratch, NULL for none). */
typedef struct bench_beside {
    const bench_rs *rs;
    size_t (*tta_bytes)(const void *user, const swi_plan *plan);
    const void *tta_user;
} bench_beside;

/* The plan of one output, fitted to p->max_memory with what is held beside the engine
 * (*beside receives it); as cli_plan_fit (budget.h): SWI_ERR_BUDGET with err saying what
 * would fit, other failures the engine's. */
swi_status bench_rs_plan_fit(swi_ctx *ctx, swi_params *p, const swi_tensor *in, const swi_output *out,
                             swi_plan *plan, const bench_beside *with, size_t *beside, char *err,
                             size_t errlen);

#endif
