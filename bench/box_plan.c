/*
 * box_plan.c -- what the planner says a box part of a large volume needs, without running:
 * the numbers behind docs/cluster.md's per-box table. Not a test; a diagnostic kept with
 * the benchmarks. The boxes are cut as `swi --shard I/N --shard-grid AxBxC` cuts them (at
 * 64-voxel output chunks, pipeline/shard.c), and each is planned with swi_plan_run exactly as a
 * rank would plan it; the largest box of each grid is shown (the part whose rows are the
 * most along every axis: the parts differ by a chunk row at most).
 *
 *   cc -O2 -std=c11 -Iinclude bench/box_plan.c build/lib/libswi.a -lm -lpthread -o box_plan
 *   box_plan D,H,W CLASSES ROI OVERLAP [order=A,B,C] AxBxC [AxBxC...]
 *   box_plan 20000,20000,10000 8 128 0.25 1x1x1 10x10x8
 * order=A,B,C fixes the window loop order (--order) for the grids after it; else the
 * planner picks the whole run's.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include "swi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* cli_shard_rows: part i of n of `size` cut at multiples of `chunk` */
static void rows(int64_t size, int64_t chunk, int64_t i, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t r = (size + chunk - 1) / chunk, a = r * i / n, b = r * (i + 1) / n;
    *lo = a * chunk < size ? a * chunk : size;
    *hi = b * chunk < size ? b * chunk : size;
}

/* planned only: the region sink and the reader are never called */
static int sink(void *user, const swi_region *r) {
    (void)user, (void)r;
    return 0;
}
static int no_read(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                   size_t n) {
    (void)user, (void)image, (void)lo, (void)hi, (void)dst, (void)msg, (void)n;
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: box_plan D,H,W CLASSES ROI OVERLAP [order=A,B,C] AxBxC [AxBxC...]\n");
        return 2;
    }
    long long d, h, w;
    if (sscanf(argv[1], "%lld,%lld,%lld", &d, &h, &w) != 3) return 2;
    const int64_t size[3] = {d, h, w};
    swi_params p;
    swi_params_init(&p, 3);
    for (int k = 0; k < 3; k++) {
        p.roi[k] = atoll(argv[3]);
        p.overlap[k] = atof(argv[4]);
    }
    p.mode = SWI_BLEND_GAUSSIAN;
    p.heads[0].channels = atoll(argv[2]);
    p.threads = 1;
    const swi_reader rd = {no_read, NULL};
    swi_tensor in = {.data = NULL,
                     .batch = 1,
                     .channels = 1,
                     .dims = 3,
                     .size = {size[0], size[1], size[2]},
                     .reader = &rd};
    swi_output o; /* regions to a sink, as a store writer takes them */
    swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
    o.on_region = sink;
    swi_ctx *ctx = swi_create();
    if (!ctx) return 1;
    printf("%-10s %-26s %12s %14s %14s %8s\n", "grid", "largest box I: size", "windows", "partial sums",
           "scratch", "plan s");
    for (int a = 5; a < argc; a++) {
        int g[3];
        if (!strncmp(argv[a], "order=", 6)) {
            if (sscanf(argv[a] + 6, "%d,%d,%d", &p.order[0], &p.order[1], &p.order[2]) != 3) return 2;
            p.order_mode = SWI_ORDER_FIXED;
            printf("(window loop order fixed: %s)\n", argv[a] + 6);
            continue;
        }
        if (sscanf(argv[a], "%dx%dx%d", &g[0], &g[1], &g[2]) != 3) return 2;
        swi_params q = p;
        int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
        int64_t part = 0; /* its index I in the grid, row-major */
        for (int k = 0; k < 3; k++) {
            int64_t best = 0, at = 0;
            for (int64_t i = 0; i < g[k]; i++) {
                int64_t rl, rh;
                rows(size[k], 64, i, g[k], &rl, &rh);
                if (rh - rl > best) {
                    best = rh - rl;
                    lo[k] = rl;
                    hi[k] = rh;
                    at = i;
                }
            }
            part = part * g[k] + at;
            if (g[k] > 1) {
                q.part_lo[k] = lo[k];
                q.part_hi[k] = hi[k];
            }
        }
        swi_plan plan;
        double t0 = now();
        if (swi_plan_run(ctx, &q, &in, &o, 1, &plan) != SWI_OK) {
            fprintf(stderr, "%s: %s\n", argv[a], swi_last_error(ctx));
            return 1;
        }
        char box[64];
        snprintf(box, sizeof box, "%lld: %lldx%lldx%lld", (long long)part, (long long)(hi[0] - lo[0]),
                 (long long)(hi[1] - lo[1]), (long long)(hi[2] - lo[2]));
        printf("%-10s %-26s %12lld %11.2f GB %11.2f GB %8.1f   order %d,%d,%d\n", argv[a], box,
               (long long)plan.windows_total, (double)plan.bytes_partial / 1e9,
               (double)plan.bytes_scratch / 1e9, now() - t0, plan.order[0], plan.order[1], plan.order[2]);
        fflush(stdout);
    }
    swi_free(ctx);
    return 0;
}
