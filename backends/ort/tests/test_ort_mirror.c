/*
 * test_ort_mirror.c -- swi_predictor_mirror over an ONNX model is the model's own tta:
 * the e2e U-Net run with swi_ort_options.tta and, without it, wrapped in
 * swi_predictor_mirror (all three axes) give bitwise the same blended scores through
 * swi_run (the same runs, summed in the same order, scaled the same way).
 *
 *   test_ort_mirror MODEL.onnx
 */
#include "ort_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *scores(swi_ort_model *m, const swi_predictor *pred, const swi_ort_window *w, int64_t C,
                     const float *vol, const int64_t size[3], size_t *bytes) {
    (void)m;
    swi_params p;
    swi_params_init(&p, 3);
    for (int k = 0; k < 3; k++) p.roi[k] = w->roi[k];
    p.mode = SWI_BLEND_GAUSSIAN;
    p.sw_batch_size = 2;
    p.threads = 2;
    swi_tensor in = {.data = vol, .batch = 1, .channels = 1, .dims = 3, .size = {size[0], size[1], size[2]}};
    *bytes = (size_t)(C * size[0] * size[1] * size[2]) * sizeof(float);
    float *out = malloc(*bytes);
    swi_ctx *ctx = swi_create();
    swi_output o;
    swi_output_init(&o, 0, SWI_REDUCE_NONE);
    o.dst = out;
    o.dst_bytes = *bytes;
    swi_status st = out && ctx ? swi_run(ctx, &p, &in, pred, &o, 1) : SWI_ERR_NOMEM;
    if (st != SWI_OK) {
        fprintf(stderr, "swi_run: %s\n", ctx ? swi_last_error(ctx) : "out of memory");
        free(out);
        out = NULL;
    }
    swi_free(ctx);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_ort_mirror MODEL.onnx\n");
        return 2;
    }
    char err[512];
    swi_ort_model *plain, *tta;
    swi_ort_window w, wt;
    swi_head_spec head, ht;
    ort_test_spec spec = {.threads = 1, .channels = 1};
    if (ort_test_open(argv[1], &spec, &plain, &w, &head, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    spec.tta = 1;
    if (ort_test_open(argv[1], &spec, &tta, &wt, &ht, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* windows overlapping along every axis, and a batch of 2 windows and one of 1 */
    int64_t size[3], vox = 1;
    for (int k = 0; k < 3; k++) vox *= size[k] = w.roi[k] + w.roi[k] / 2 + (k == 0);
    float *vol = malloc((size_t)vox * sizeof *vol);
    if (!vol) return 1;
    uint32_t s = 2024;
    for (int64_t x = 0; x < vox; x++) {
        s = s * 1664525u + 1013904223u;
        vol[x] = (float)(s >> 8) / 16777216.0f * 4.0f - 2.0f;
    }
    swi_predictor inner = swi_ort_predictor(plain), mirror, own = swi_ort_predictor(tta);
    if (swi_predictor_mirror(&inner, 7, head.channels, 3, head.spatial, 2, &mirror, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t b1, b2;
    float *a = scores(tta, &own, &w, head.channels, vol, size, &b1);
    float *b = scores(plain, &mirror, &w, head.channels, vol, size, &b2);
    int fail = !a || !b || memcmp(a, b, b1) != 0;
    if (a && b && fail) {
        size_t n = b1 / sizeof(float), diff = 0;
        for (size_t i = 0; i < n; i++) diff += a[i] != b[i];
        fprintf(stderr, "FAIL: %zu of %zu scores differ between tta and swi_predictor_mirror\n", diff, n);
    }
    printf("test_ort_mirror: %s (window %lld x %lld x %lld, %lld classes)\n", fail ? "FAILED" : "ok",
           (long long)w.roi[0], (long long)w.roi[1], (long long)w.roi[2], (long long)head.channels);
    free(a), free(b), free(vol);
    swi_predictor_mirror_free(&mirror);
    swi_ort_close(plain);
    swi_ort_close(tta);
    return fail;
}
