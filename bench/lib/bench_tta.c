/* bench_tta.c -- see bench_tta.h. */
#include "bench_tta.h"

#include <stdio.h>
#include <string.h>

int bench_tta_init_engine_mirror(bench_tta *t, bench_net_kind kind, int64_t classes, int folds, int dims,
                                 const int64_t *spatial, int max_batch, int threads, char *err, size_t n) {
    return bench_tta_init(t, kind, classes, folds, 0, dims, spatial, max_batch, threads, err, n);
}

int bench_tta_init(bench_tta *t, bench_net_kind kind, int64_t classes, int folds, unsigned axes, int dims,
                   const int64_t *spatial, int max_batch, int threads, char *err, size_t n) {
    memset(t, 0, sizeof *t);
    if (folds < 1 || folds > BENCH_MAX_FOLDS) {
        snprintf(err, n, "folds must be 1..%d", BENCH_MAX_FOLDS);
        return -1;
    }
    t->folds = folds;
    t->axes = axes;
    for (int f = 0; f < folds; f++) {
        if (bench_net_init(&t->nets[f], kind, classes, f) != 0) {
            snprintf(err, n, "out of memory for the synthetic network");
            return -1;
        }
        t->n_nets = f + 1;
        t->nets[f].threads = threads;
        t->plain[f] = (swi_predictor){bench_net_predict, &t->nets[f]};
    }
    const swi_predictor *members = t->plain;
    if (axes) {
        for (int f = 0; f < folds; f++) {
            if (swi_predictor_mirror(&t->plain[f], axes, classes, dims, spatial, max_batch, &t->mirrors[f],
                                     err, n) != SWI_OK)
                return -1;
            t->n_mirrors = f + 1;
        }
        /* the mean runs the members one after another: one mirror scratch for all, as the
         * nnU-Net job shares it */
        if (swi_predictor_mirror_share(t->mirrors, folds, err, n) != SWI_OK) return -1;
        members = t->mirrors;
    }
    if (folds > 1) {
        if (swi_predictor_mean(members, folds, classes, dims, spatial, max_batch, &t->mean, err, n) != SWI_OK)
            return -1;
        t->has_mean = 1;
        t->top = t->mean;
    } else {
        t->top = members[0];
    }
    return 0;
}

size_t bench_tta_scratch_bytes(int folds, unsigned axes, int64_t classes, int64_t in_channels, int dims,
                               const int64_t *spatial, int max_batch) {
    size_t win = (size_t)max_batch;
    for (int k = 0; k < dims; k++) win *= (size_t)spatial[k];
    size_t n = axes ? win * (size_t)(classes + in_channels) : 0;
    if (folds > 1) n += win * (size_t)classes;
    return n * sizeof(float);
}

int64_t bench_tta_windows(const bench_tta *t) {
    int64_t w = 0;
    for (int f = 0; f < t->n_nets; f++) w += t->nets[f].windows;
    return w;
}

void bench_tta_free(bench_tta *t) {
    if (t->has_mean) swi_predictor_mean_free(&t->mean);
    for (int f = 0; f < t->n_mirrors; f++) swi_predictor_mirror_free(&t->mirrors[f]);
    for (int f = 0; f < t->n_nets; f++) bench_net_free(&t->nets[f]);
    memset(t, 0, sizeof *t);
}
