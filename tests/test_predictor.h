/*
 * test_predictor.h -- the position-dependent predictor the part and cell-table tests share:
 * one or two heads, out[c] = (c + 1 + h) * x + 0.01 * (start_0 + c) - h, x the window's sum
 * over input channels, so every window's contribution to a voxel differs.
 */
#ifndef SWI_TESTS_PREDICTOR_H
#define SWI_TESTS_PREDICTOR_H

#include "swi.h"

typedef struct pred_state {
    int64_t C[2]; /* channels of each head */
    int heads;    /* 1 or 2 */
} pred_state;

static inline int predict(void *user, swi_batch *b) {
    const pred_state *ps = user;
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    int64_t cin = swi_batch_channels(b);
    const float *in = swi_batch_input(b);
    for (int h = 0; h < ps->heads; h++) {
        int64_t C = ps->C[h];
        float *out = swi_batch_output(b, h, C, roi);
        if (!out) return 1;
        for (int i = 0; i < n; i++) {
            const int64_t *st = swi_batch_start(b, i);
            for (int64_t c = 0; c < C; c++)
                for (int64_t v = 0; v < vox; v++) {
                    float s = 0;
                    for (int64_t ch = 0; ch < cin; ch++) s += in[(i * cin + ch) * vox + v];
                    out[(i * C + c) * vox + v] =
                        (float)(c + 1 + h) * s + 0.01f * (float)(st[0] + c) - (float)h;
                }
        }
    }
    return 0;
}

#endif
