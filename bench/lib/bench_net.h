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
     * 2..4, every other class -3..-1.5 */
    BENCH_NET_ATLAS
} bench_net_kind;

typedef struct bench_net {
    bench_net_kind kind;
    int64_t classes;
    float *w; /* [classes] */
    int threads;
} bench_net;

/* 0, or -1 out of memory */
int bench_net_init(bench_net *net, bench_net_kind kind, int64_t classes);
void bench_net_free(bench_net *net);

/* the kind's volume, shape[0..dims) (row-major, the last axis fastest) */
void bench_net_volume(const bench_net *net, int dims, const int64_t *shape, float *vol);

/* swi_predictor.predict for user = a bench_net: it uses net->threads threads, as a real
 * network uses the cores it is given */
int bench_net_predict(void *user, swi_batch *b);

#endif
