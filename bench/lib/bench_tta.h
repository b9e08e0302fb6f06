/*
 * bench_tta.h -- the synthetic network run as an nnU-Net job runs its model: `folds`
 * members (bench_nets whose class weights differ), each mirrored along `axes` through
 * swi_predictor_mirror (or in the engine: swi_params.mirror_axes, as pipeline/nnunet_job.c
 * mirrors), their mean through swi_predictor_mean, so that `swi bench --mirror-axes
 * --folds` costs what a job's test-time mirroring and ensemble cost.
 */
#ifndef SWI_BENCH_TTA_H
#define SWI_BENCH_TTA_H

#include "bench_net.h"
#include "swi.h"

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_FOLDS 16

typedef struct bench_tta {
    int folds;
    unsigned axes; /* bit a: window axis a mirrored; 0: no mirroring */
    bench_net nets[BENCH_MAX_FOLDS];
    swi_predictor plain[BENCH_MAX_FOLDS], mirrors[BENCH_MAX_FOLDS], mean;
    int n_nets, n_mirrors, has_mean;
    swi_predictor top; /* what the engine runs */
} bench_tta;

/* folds members of kind (1..BENCH_MAX_FOLDS), mirrored along axes (0: none) for windows of
 * `spatial` (dims values) in batches of at most max_batch, each member predicting on
 * `threads` threads. 0, or -1 with err (n bytes) saying why; bench_tta_free either way. */
int bench_tta_init(bench_tta *t, bench_net_kind kind, int64_t classes, int folds, unsigned axes, int dims,
                   const int64_t *spatial, int max_batch, int threads, char *err, size_t n);

/* The same with the mirroring left to the engine (swi_params.mirror_axes = axes, which the
 * caller sets): no mirror combinators, top is the members' mean or the one member. */
int bench_tta_init_engine_mirror(bench_tta *t, bench_net_kind kind, int64_t classes, int folds, int dims,
                                 const int64_t *spatial, int max_batch, int threads, char *err, size_t n);

/* The combinators' scratch for such a model: the mirrors one batch of outputs and one of
 * mirrored inputs (in_channels), shared (swi_predictor_mirror_share), the mean one batch of
 * outputs. axes 0 for the engine's mirroring, which holds no scratch. */
size_t bench_tta_scratch_bytes(int folds, unsigned axes, int64_t classes, int64_t in_channels, int dims,
                               const int64_t *spatial, int max_batch);

/* Windows the members predicted, all runs of every member together. */
int64_t bench_tta_windows(const bench_tta *t);

void bench_tta_free(bench_tta *t);

#endif
