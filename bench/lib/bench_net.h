/* bench_net.h -- the synthetic networks of `swi bench`: a generated volume and a predictor
 * that reads it, cheap enough that the engine's own costs (and resampling's) are visible. */
#ifndef SWI_CLI_BENCH_NET_H
#define SWI_CLI_BENCH_NET_H

#include "swi.h"

#include <stdint.h>

typedef enum bench_net_kind {
    /* out[c] = x * w[c] (w evenly spaced from 0.5 to 1.5) on white noise in [0, 1): every
     * class is within reach of winning everywhere, the worst case for pruning classes */
    BENCH_NET_LINEAR,
    /* scores like a trained network's: the volume is a map of compact regions (about 16
     * voxels a side, half of them background, class 0) and each voxel's own class scores
     * 2..4, every other class -3..-1.5; within those ranges the scores vary smoothly over
     * the volume and drift across the window (as a network's do near its edges), so the
     * window grid, the weights and mirroring change the blended scores */
    BENCH_NET_ATLAS
} bench_net_kind;

#define BENCH_NET_MAX_THREADS 64

typedef struct bench_net {
    bench_net_kind kind;
    int64_t classes;
    float *w; /* [classes] */
    int threads;
    float *drift; /* atlas: the drift across the window, per window voxel */
    int64_t drift_roi[3];
    float *fields[BENCH_NET_MAX_THREADS]; /* atlas: each thread's window of fields, kept
                                             between calls (fresh pages are slow to fault in) */
    int64_t fields_cap;
    int64_t windows; /* windows predicted so far (the engine calls one batch at a time) */
} bench_net;

/* 0, or -1 out of memory. Members 0, 1, ... of an ensemble (folds) differ: member m takes
 * the class weights rotated by m. */
int bench_net_init(bench_net *net, bench_net_kind kind, int64_t classes, int member);
void bench_net_free(bench_net *net);

/* the kind's volume, shape[0..dims) (row-major, the last axis fastest) */
void bench_net_volume(const bench_net *net, int dims, const int64_t *shape, float *vol);

/* swi_predictor.predict for user = a bench_net: it uses net->threads threads, as a real
 * network uses the cores it is given */
int bench_net_predict(void *user, swi_batch *b);

#endif
