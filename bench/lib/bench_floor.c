/* bench_floor.c -- see bench_floor.h. Built with -O3, like the library's blending kernel
 * whose traffic it stands for (cli/CMakeLists.txt). */
#include "bench_floor.h"

#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct bw_job {
    float *acc;
    const float *pred;
    const float *w;
    size_t n, wn;
    int reps;
} bw_job;

static void *bw_thread(void *arg) {
    bw_job *j = arg;
    for (int r = 0; r < j->reps; r++) {
        for (size_t i = 0; i < j->n; i += j->wn) {
            size_t m = j->n - i < j->wn ? j->n - i : j->wn;
            float *restrict a = j->acc + i;
            const float *restrict p = j->pred + i;
            const float *restrict w = j->w;
            for (size_t v = 0; v < m; v++) a[v] += p[v] * w[v];
        }
    }
    return NULL;
}

/* Elements per array of the bandwidth test: both arrays together at least 4x the
 * last-level cache (some servers have 512 MiB of it), at least 2 x 192 MiB. */
static size_t bandwidth_elements(void) {
    size_t n = (size_t)48 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0 && (size_t)l3 * 2 / sizeof(float) > n) n = (size_t)l3 * 2 / sizeof(float);
#endif
    if (n > ((size_t)512 << 20)) n = (size_t)512 << 20;
    return n;
}

/* As a performance-minded caller's allocator would: in virtual machines 4 KiB first-touch
 * faults cost more than the whole blending of a voxel. */
void bench_hint_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (p && e > a + ((size_t)2 << 20)) madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* The best of three passes over the arrays, split between `threads` threads. */
static double best_of_three(float *acc, const float *pred, const float *w, size_t n, size_t wn, int threads) {
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        pthread_t th[64];
        bw_job jobs[64];
        int t = threads > 64 ? 64 : threads;
        double t0 = cli_now();
        int started = 0;
        for (int i = 0; i < t; i++) {
            size_t lo = n / (size_t)t * (size_t)i, hi = i == t - 1 ? n : n / (size_t)t * (size_t)(i + 1);
            jobs[i] = (bw_job){acc + lo, pred + lo, w, hi - lo, wn, 2};
            if (pthread_create(&th[i], NULL, bw_thread, &jobs[i]) != 0) break;
            started++;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        if (started < t) bw_thread(&jobs[started]);
        double el = cli_now() - t0;
        double bw = el > 0 ? (double)n * 2 * 12.0 / el : 0;
        if (bw > best) best = bw;
    }
    return best;
}

/* Bytes per second of acc += pred * w over arrays far larger than the caches, counted
 * as 12 bytes per element (read acc, read pred, write acc; w is a cached row). */
static double fused_bandwidth(int threads) {
    size_t n = bandwidth_elements();
    size_t wn = 4096;
    float *acc = malloc(n * sizeof(float)), *pred = malloc(n * sizeof(float)),
          *w = malloc(wn * sizeof(float));
    bench_hint_huge(acc, n * sizeof(float)); /* page faults are not what is measured */
    bench_hint_huge(pred, n * sizeof(float));
    if (!acc || !pred || !w) {
        free(acc);
        free(pred);
        free(w);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        acc[i] = 0.0f;
        pred[i] = (float)(i & 1023) * 0.001f;
    }
    for (size_t i = 0; i < wn; i++) w[i] = 0.5f + (float)i / (float)wn;
    double best = best_of_three(acc, pred, w, n, wn, threads);
    volatile float sink = acc[n / 2];
    (void)sink;
    free(acc);
    free(pred);
    free(w);
    return best;
}

double bench_traffic_floor(const swi_plan *plan, int dims, int64_t classes, int64_t voxels) {
    int t = plan->threads;
    double bw = fused_bandwidth(t);
    double per_win = (double)plan->windows_total * (double)classes;
    for (int k = 0; k < dims; k++) per_win *= (double)plan->roi[k];
    double bytes = per_win * 4.0 + per_win * 12.0 + (double)classes * (double)voxels * 4.0;
    double floor_s = bw > 0 ? bytes / bw : 0;
    printf("floor: fused accumulate %.2f GB/s on %d threads; traffic %.2f GB -> floor %.3f s\n", bw / 1e9, t,
           bytes / 1e9, floor_s);
    return floor_s;
}
