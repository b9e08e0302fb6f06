/* bench_net.c -- see bench_net.h. */
#include "bench_net.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int bench_net_init(bench_net *net, bench_net_kind kind, int64_t classes, int member) {
    *net = (bench_net){.kind = kind, .classes = classes, .threads = 1};
    net->w = malloc((size_t)classes * sizeof *net->w);
    if (!net->w) return -1;
    for (int64_t c = 0; c < classes; c++) {
        const int64_t r = (c + member) % classes;
        net->w[c] = classes == 1 ? 1.0f : 0.5f + (float)r / (float)(classes - 1);
    }
    return 0;
}

void bench_net_free(bench_net *net) {
    free(net->w);
    free(net->drift);
    for (int t = 0; t < BENCH_NET_MAX_THREADS; t++) free(net->fields[t]);
    net->fields_cap = 0;
    net->w = NULL;
    net->drift = NULL;
}

static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Atlas regions: cells of a 16-voxel grid whose walls are bent by slow sines (so regions are
 * not boxes and their boundaries cross windows and tiles at every angle); each cell is a
 * random class, half of them background. Neighbouring cells of one class merge, so sizes
 * vary. */
enum { ATLAS_CELL = 16 };
#define ATLAS_BEND 5.0
#define ATLAS_PERIOD 64.0

static int64_t atlas_class(int64_t classes, int64_t ci, int64_t cj, int64_t ck) {
    uint64_t h = mix((uint64_t)ci * 0x9E3779B97F4A7C15ull ^ mix((uint64_t)cj + 0x632BE59BD9B4E019ull) ^
                     mix((uint64_t)ck * 0x85EBCA77C2B2AE63ull + 1));
    if (classes == 1 || (h & 1) == 0) return 0;
    return 1 + (int64_t)((h >> 1) % (uint64_t)(classes - 1));
}

static int64_t bent_cell(int64_t at, double bend) { return (int64_t)floor(((double)at + bend) / ATLAS_CELL); }

void bench_net_volume(const bench_net *net, int dims, const int64_t *shape, float *vol) {
    int64_t n[3] = {1, 1, 1};
    for (int k = 0; k < dims; k++) n[3 - dims + k] = shape[k];
    uint64_t h = 0x9E3779B97F4A7C15ull;
    int64_t v = 0;
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++, v++) {
                h ^= h >> 12;
                h ^= h << 25;
                h ^= h >> 27;
                const float u = (float)((h * 2685821657736338717ull) >> 40) / (float)(1 << 24);
                if (net->kind == BENCH_NET_LINEAR) {
                    vol[v] = u;
                    continue;
                }
                const double tau = 6.283185307179586 / ATLAS_PERIOD;
                const int64_t ci = bent_cell(i, ATLAS_BEND * sin(tau * (double)j));
                const int64_t cj = bent_cell(j, ATLAS_BEND * sin(tau * (double)k + 1));
                const int64_t ck = bent_cell(k, ATLAS_BEND * sin(tau * (double)i + 2));
                /* the class, and below 0.5 a smooth field in [0, 1) that the scores follow */
                const double f = 0.5 + 0.24 * sin(tau * 0.8 * (double)i + 0.3) +
                                 0.25 * sin(tau * 0.6 * (double)j + tau * 0.5 * (double)k + 1.1);
                vol[v] = (float)atlas_class(net->classes, ci, cj, ck) + 0.5f * (float)f;
            }
}

typedef struct predict_part {
    const bench_net *net;
    const float *in;
    float *out;
    float *u; /* atlas: the thread's fields of a window */
    int n;
    int64_t rv, c0, c1;
} predict_part;

/* Atlas: each voxel's field (x - its class, below 0.5) plus the drift across the window
 * (below 0.5), then every class's losing score from it (one multiply-add per value, as
 * linear's one multiply), then each voxel's own class overwritten with its winning score:
 * the cost of linear's predictor, not more. */
static void *predict_part_run(void *arg) {
    const predict_part *pp = arg;
    const bench_net *net = pp->net;
    float *u = pp->u;
    for (int i = 0; i < pp->n; i++) {
        const float *x = pp->in + (size_t)i * (size_t)pp->rv;
        float *win = pp->out + (size_t)i * (size_t)net->classes * (size_t)pp->rv;
        if (u) /* x >= 0: truncation is the floor, and vectorises */
            for (int64_t v = 0; v < pp->rv; v++) u[v] = (x[v] - (float)(int32_t)x[v]) + net->drift[v];
        for (int64_t c = pp->c0; c < pp->c1; c++) {
            float *restrict o = win + (size_t)c * (size_t)pp->rv;
            const float wc = net->w[c];
            if (u)
                for (int64_t v = 0; v < pp->rv; v++) o[v] = -3 + u[v] * wc;
            else
                for (int64_t v = 0; v < pp->rv; v++) o[v] = x[v] * wc;
        }
        if (u)
            for (int64_t v = 0; v < pp->rv; v++) {
                const int64_t c = (int32_t)x[v];
                if (c >= pp->c0 && c < pp->c1) win[(size_t)c * (size_t)pp->rv + (size_t)v] = 2 + 2 * u[v];
            }
    }
    return NULL;
}

/* The atlas's drift across a window of roi[0..d), below 0.5: per axis a rise t = i / roi
 * and a bump 4 t (1 - t) (a network is surest in its window's centre), the axes weighed 1, 2
 * and 4 of 7 -- so no mirroring leaves it as it was, nor makes it constant, and the window
 * grid and the weights change the blended scores. 0, or -1 out of memory. */
static double drift_axis(int64_t i, int64_t n) {
    const double t = (double)i / (double)n; /* [0, 1): the term stays below 1 */
    return 0.5 * (t + 4 * t * (1 - t));
}

static int drift_make(bench_net *net, int d, const int64_t *roi, int64_t rv) {
    int64_t r[3] = {1, 1, 1};
    for (int k = 0; k < d; k++) r[3 - d + k] = roi[k];
    if (net->drift && !memcmp(r, net->drift_roi, sizeof r)) return 0;
    free(net->drift);
    net->drift = malloc((size_t)rv * sizeof *net->drift);
    if (!net->drift) return -1;
    memcpy(net->drift_roi, r, sizeof r);
    int64_t v = 0;
    for (int64_t i = 0; i < r[0]; i++)
        for (int64_t j = 0; j < r[1]; j++)
            for (int64_t k = 0; k < r[2]; k++, v++)
                net->drift[v] = (float)(0.5 / 7 *
                                        (1.0 * drift_axis(i, r[0]) + 2.0 * drift_axis(j, r[1]) +
                                         4.0 * drift_axis(k, r[2])));
    return 0;
}

int bench_net_predict(void *user, swi_batch *b) {
    bench_net *net = user;
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t rv = 1;
    for (int k = 0; k < d; k++) rv *= roi[k];
    float *out = swi_batch_output(b, 0, net->classes, roi);
    if (!out) return 1;
    if (net->kind == BENCH_NET_ATLAS && drift_make(net, d, roi, rv) != 0) {
        swi_batch_set_error(b, "out of memory in the synthetic network");
        return 1;
    }
    net->windows += n;
    enum { MAXT = BENCH_NET_MAX_THREADS };
    int t = net->threads < 1 ? 1 : (net->threads > MAXT ? MAXT : net->threads);
    if (t > net->classes) t = (int)net->classes;
    if (net->kind == BENCH_NET_ATLAS && rv > net->fields_cap) { /* every thread's room grows */
        for (int i = 0; i < MAXT; i++) {
            free(net->fields[i]);
            net->fields[i] = NULL;
        }
        net->fields_cap = rv;
    }
    for (int i = 0; net->kind == BENCH_NET_ATLAS && i < t; i++)
        if (!net->fields[i] && !(net->fields[i] = malloc((size_t)net->fields_cap * sizeof(float)))) {
            swi_batch_set_error(b, "out of memory in the synthetic network");
            return 1;
        }
    predict_part parts[MAXT];
    pthread_t th[MAXT];
    int started[MAXT] = {0}, failed = 0;
    for (int i = 0; i < t; i++) {
        parts[i] = (predict_part){net,
                                  swi_batch_input(b),
                                  out,
                                  net->fields[i],
                                  n,
                                  rv,
                                  net->classes * i / t,
                                  net->classes * (i + 1) / t};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, predict_part_run, &parts[i]) == 0;
        if (i > 0 && !started[i]) failed |= predict_part_run(&parts[i]) != NULL; /* no thread: here */
    }
    failed |= predict_part_run(&parts[0]) != NULL;
    for (int i = 1; i < t; i++) {
        void *r = NULL;
        if (started[i]) pthread_join(th[i], &r);
        failed |= r != NULL;
    }
    if (failed) swi_batch_set_error(b, "the synthetic network failed");
    return failed;
}
