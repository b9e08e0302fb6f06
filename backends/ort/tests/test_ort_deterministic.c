/*
 * test_ort_deterministic.c -- what `swi segment` relies on when it turns window reuse on
 * (SWI_REUSE_ON): the ONNX Runtime predictor gives bitwise the same output for a window
 * whatever else is in its call. The e2e U-Net runs windows alone, in batches of several
 * sizes and positions, with a uniform (background) window among them; every copy of a
 * window must come out byte for byte the same.
 *
 *   test_ort_deterministic MODEL.onnx [THREADS...]
 */
#include "ort_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            failures++;                                          \
        }                                                        \
    } while (0)

/* Run the windows idx[0..n) of `wins` as one call; out receives n outputs. */
static int run_some(swi_ort_model *m, const float *wins, int64_t in_w, const int *idx, int n, float *scratch,
                    float *out) {
    for (int i = 0; i < n; i++) memcpy(scratch + i * in_w, wins + idx[i] * in_w, (size_t)in_w * sizeof *wins);
    char err[512];
    if (swi_ort_run(m, scratch, n, out, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int check_threads(const char *path, int threads) {
    char err[512];
    const ort_test_spec spec = {.threads = threads, .channels = 1};
    swi_ort_model *m;
    swi_ort_window w;
    swi_head_spec head;
    if (ort_test_open(path, &spec, &m, &w, &head, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    const int64_t in_w = w.roi[0] * w.roi[1] * w.roi[2];
    const int64_t out_w = head.channels * head.spatial[0] * head.spatial[1] * head.spatial[2];
    enum { NW = 3, MAXB = 5 };
    float *wins = malloc((size_t)(NW * in_w) * sizeof *wins);
    float *scratch = malloc((size_t)(MAXB * in_w) * sizeof *scratch);
    float *ref = malloc((size_t)(NW * out_w) * sizeof *ref);
    float *out = malloc((size_t)(MAXB * out_w) * sizeof *out);
    int rc = -1;
    if (!wins || !scratch || !ref || !out) goto done;
    /* two textured windows (a fixed LCG) and a uniform one, as clipped air is */
    uint32_t s = 12345;
    for (int64_t x = 0; x < 2 * in_w; x++) {
        s = s * 1664525u + 1013904223u;
        wins[x] = (float)(s >> 8) / 16777216.0f * 4.0f - 2.0f;
    }
    for (int64_t x = 0; x < in_w; x++) wins[2 * in_w + x] = -1.0f;
    for (int i = 0; i < NW; i++)
        if (run_some(m, wins, in_w, &i, 1, scratch, ref + i * out_w)) goto done;
    static const int calls[][MAXB + 1] = {
        {2, 0, 1}, {2, 1, 0}, {3, 2, 0, 1}, {4, 0, 2, 2, 1}, {5, 1, 1, 2, 0, 2}, {2, 2, 2},
    };
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        int n = calls[c][0];
        if (run_some(m, wins, in_w, calls[c] + 1, n, scratch, out)) goto done;
        for (int i = 0; i < n; i++) {
            int wi = calls[c][1 + i];
            CHECK(memcmp(out + i * out_w, ref + wi * out_w, (size_t)out_w * sizeof *out) == 0,
                  "threads %d: window %d at position %d of a call of %d differs from it run alone", threads,
                  wi, i, n);
        }
    }
    /* the same window again, alone: no state carried between calls */
    int zero = 0;
    if (run_some(m, wins, in_w, &zero, 1, scratch, out)) goto done;
    CHECK(memcmp(out, ref, (size_t)out_w * sizeof *out) == 0, "threads %d: a rerun differs", threads);
    rc = 0;
done:
    free(wins);
    free(scratch);
    free(ref);
    free(out);
    swi_ort_close(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_ort_deterministic MODEL.onnx [THREADS...]\n");
        return 2;
    }
    int n_threads = argc > 2 ? argc - 2 : 1;
    for (int t = 0; t < n_threads; t++) {
        int threads = argc > 2 ? atoi(argv[2 + t]) : 0;
        if (check_threads(argv[1], threads)) {
            fprintf(stderr, "FAIL: could not run %s\n", argv[1]);
            return 1;
        }
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ort_deterministic: every window bitwise equal alone and in calls of 2-5\n");
    return 0;
}
