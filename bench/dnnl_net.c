/*
 * bench/dnnl_net.c -- the network alone: one ONNX model run on the same random windows by
 * ONNX Runtime (swi_ort, the default load-time rewrites) and by swi_dnnl in fp32 and (where
 * the CPU has it) bf16, at the same thread count. Prints ms per window and GFLOP/s (the
 * convolutions' 2 x multiply-adds, swi_dnnl_flops) per backend, and the ratios to ONNX
 * Runtime. Built beside the dnnl backend (target dnnl_net); driven by bench/dnnl.sh.
 *
 *   dnnl_net MODEL CHANNELS ROI THREADS [WINDOWS [REPS]]
 */
#define _POSIX_C_SOURCE 200809L
#include "swi_dnnl.h"
#include "swi_ort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL CHANNELS ROI THREADS [WINDOWS [REPS]]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    const int64_t ch = atoll(argv[2]), r = atoll(argv[3]);
    const int threads = atoi(argv[4]), nwin = argc > 5 ? atoi(argv[5]) : 4,
              reps = argc > 6 ? atoi(argv[6]) : 3;
    const int64_t roi[3] = {r, r, r};
    char err[512];
    swi_ort_options oo;
    swi_ort_options_init(&oo);
    oo.threads = threads;
    swi_ort_model *om = NULL;
    swi_ort_window w;
    swi_head_spec head;
    swi_ort_window_init(&w, ch);
    memcpy(w.roi, roi, sizeof roi);
    if (swi_ort_open(path, &oo, &om, err, sizeof err) || swi_ort_prepare(om, &w, &head, err, sizeof err)) {
        fprintf(stderr, "ort: %s\n", err);
        return 1;
    }
    const int64_t in_win = ch * r * r * r,
                  out_win = head.channels * head.spatial[0] * head.spatial[1] * head.spatial[2];
    float *in = malloc((size_t)(nwin * in_win) * sizeof *in),
          *out = malloc((size_t)(nwin * out_win) * sizeof *out);
    if (!in || !out) return 1;
    for (int64_t i = 0; i < nwin * in_win; i++) in[i] = (float)((i * 2654435761u) % 1000) / 500.f - 1.f;
    double flops = 0, t_ort = 0;
    const char *names[3] = {"ort", "dnnl-fp32", "dnnl-bf16"};
    double best[3] = {0, 0, 0};
    for (int b = 0; b < 3; b++) {
        swi_dnnl_model *dm = NULL;
        if (b > 0) {
            swi_dnnl_options dopt;
            swi_dnnl_options_init(&dopt);
            dopt.threads = threads;
            dopt.precision = b == 2 ? SWI_DNNL_BF16 : SWI_DNNL_FP32;
            if (b == 2 && !swi_dnnl_bf16_supported()) {
                printf("%-10s skipped: no bf16 on this CPU\n", names[b]);
                continue;
            }
            swi_head_spec dh;
            if (swi_dnnl_open(path, &dopt, &dm, err, sizeof err) ||
                swi_dnnl_prepare(dm, 0, ch, 3, roi, &dh, err, sizeof err)) {
                printf("%-10s refused: %s\n", names[b], err);
                swi_dnnl_close(dm);
                continue;
            }
            flops = swi_dnnl_flops(dm);
        }
        for (int k = 0; k <= reps; k++) { /* the first round warms up */
            double t0 = now();
            swi_status st = b ? swi_dnnl_run(dm, in, nwin, out, err, sizeof err)
                              : swi_ort_run(om, in, nwin, out, err, sizeof err);
            double t = (now() - t0) / nwin;
            if (st) {
                fprintf(stderr, "%s: %s\n", names[b], err);
                return 1;
            }
            if (k && (!best[b] || t < best[b])) best[b] = t;
        }
        swi_dnnl_close(dm);
    }
    t_ort = best[0];
    printf("%s: window %lld^3, %d thread%s, %.2f GFLOP per window (convolutions)\n", path, (long long)r,
           threads, threads == 1 ? "" : "s", flops * 1e-9);
    for (int b = 0; b < 3; b++)
        if (best[b])
            printf("%-10s %8.2f ms/window  %7.1f GFLOP/s  %5.2fx ort\n", names[b], best[b] * 1e3,
                   flops ? flops / best[b] * 1e-9 : 0, t_ort / best[b]);
    swi_ort_close(om);
    free(in);
    free(out);
    return 0;
}
