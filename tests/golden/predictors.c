/*
 * predictors.c -- affine, box, coord, down2 and pair in float32, one window at a time.
 *
 * Windows are handled as 3-D with leading extent-1 axes, so dim `3 - dims` is the first
 * spatial dim and dim 2 the last.
 */
#include "predictors.h"

#include <stdlib.h>

int golden_predictor_heads(golden_predictor_kind kind) { return kind == GOLDEN_PAIR ? 2 : 1; }

void golden_predictor_window(golden_predictor_kind kind, int head, int dims, const int64_t *roi,
                             int64_t *out) {
    (void)head;
    for (int k = 0; k < dims; k++) out[k] = kind == GOLDEN_DOWN2 ? roi[k] / 2 : roi[k];
}

/* Kind of one head: pair is box then coord. */
static golden_predictor_kind head_kind(golden_predictor_kind kind, int head) {
    if (kind == GOLDEN_PAIR) return head == 0 ? GOLDEN_BOX : GOLDEN_COORD;
    return kind;
}

/* One head of one window: s is [R], out is [C, O]. */
static void fill_head(golden_predictor_kind kind, int dims, const int64_t R[3], const int64_t O[3], int64_t C,
                      const float *s, float *out) {
    const int64_t rv = R[0] * R[1] * R[2];
    const int64_t ov = O[0] * O[1] * O[2];
    const int first = 3 - dims;

    if (kind == GOLDEN_AFFINE) {
        for (int64_t c = 0; c < C; c++)
            for (int64_t v = 0; v < rv; v++)
                out[c * rv + v] = (float)(c + 1) * s[v] + (float)(0.5 * (double)c);
        return;
    }
    if (kind == GOLDEN_COORD) {
        int64_t idx[3];
        for (idx[0] = 0; idx[0] < R[0]; idx[0]++)
            for (idx[1] = 0; idx[1] < R[1]; idx[1]++)
                for (idx[2] = 0; idx[2] < R[2]; idx[2]++) {
                    int64_t v = (idx[0] * R[1] + idx[1]) * R[2] + idx[2];
                    float g0 = (float)idx[first] / (float)R[first];
                    float gl = (float)idx[2] / (float)R[2];
                    for (int64_t c = 0; c < C; c++) {
                        float a = (float)(c + 1) * g0;
                        float b = (float)(C - c) * gl;
                        float t = s[v] + a;
                        out[c * rv + v] = t - b;
                    }
                }
        return;
    }
    if (kind == GOLDEN_BOX) {
        float div = 1.0f;
        for (int k = 0; k < dims; k++) div *= 3.0f;
        int64_t lo[3], hi[3];
        for (int k = 0; k < 3; k++) {
            lo[k] = k < first ? 0 : -1;
            hi[k] = k < first ? 0 : 1;
        }
        int64_t i[3];
        for (i[0] = 0; i[0] < R[0]; i[0]++)
            for (i[1] = 0; i[1] < R[1]; i[1]++)
                for (i[2] = 0; i[2] < R[2]; i[2]++) {
                    float sum = 0.0f;
                    for (int64_t a = lo[0]; a <= hi[0]; a++)
                        for (int64_t b = lo[1]; b <= hi[1]; b++)
                            for (int64_t e = lo[2]; e <= hi[2]; e++) {
                                int64_t j0 = i[0] + a, j1 = i[1] + b, j2 = i[2] + e;
                                if (j0 < 0 || j0 >= R[0] || j1 < 0 || j1 >= R[1] || j2 < 0 || j2 >= R[2])
                                    continue; /* zero padding at the window border */
                                sum += s[(j0 * R[1] + j1) * R[2] + j2];
                            }
                    float m = sum / div;
                    int64_t v = (i[0] * R[1] + i[1]) * R[2] + i[2];
                    for (int64_t c = 0; c < C; c++)
                        out[c * rv + v] = (float)(c + 1) * m + (float)(0.1 * (double)c);
                }
        return;
    }
    /* GOLDEN_DOWN2: mean over non-overlapping 2^d blocks. */
    float div = 1.0f;
    int64_t bs[3];
    for (int k = 0; k < 3; k++) {
        bs[k] = k < first ? 1 : 2;
        if (k >= first) div *= 2.0f;
    }
    int64_t o[3];
    for (o[0] = 0; o[0] < O[0]; o[0]++)
        for (o[1] = 0; o[1] < O[1]; o[1]++)
            for (o[2] = 0; o[2] < O[2]; o[2]++) {
                float sum = 0.0f;
                for (int64_t a = 0; a < bs[0]; a++)
                    for (int64_t b = 0; b < bs[1]; b++)
                        for (int64_t e = 0; e < bs[2]; e++) {
                            int64_t j0 = o[0] * bs[0] + a, j1 = o[1] * bs[1] + b, j2 = o[2] * bs[2] + e;
                            sum += s[(j0 * R[1] + j1) * R[2] + j2];
                        }
                float m = sum / div;
                int64_t v = (o[0] * O[1] + o[1]) * O[2] + o[2];
                for (int64_t c = 0; c < C; c++) out[c * ov + v] = (float)(c + 1) * m;
            }
}

int golden_predict(void *user, swi_batch *batch) {
    const golden_predictor *gp = user;
    const int n = swi_batch_count(batch);
    const int dims = swi_batch_dims(batch);
    const int64_t cin = swi_batch_channels(batch);
    const int64_t *roi = swi_batch_roi(batch);
    const float *in = swi_batch_input(batch);
    const int heads = golden_predictor_heads(gp->kind);

    if (dims < 1 || dims > 3 || n < 1 || cin < 1 || roi == NULL || in == NULL) {
        swi_batch_set_error(batch, "golden predictor: bad batch description");
        return 1;
    }
    int64_t R[3] = {1, 1, 1};
    for (int k = 0; k < dims; k++) R[3 - dims + k] = roi[k];
    const int64_t rv = R[0] * R[1] * R[2];

    float *out[2];
    int64_t C[2], ov[2], O[2][3];
    for (int h = 0; h < heads; h++) {
        int64_t win[SWI_MAX_DIMS];
        golden_predictor_window(gp->kind, h, dims, roi, win);
        O[h][0] = O[h][1] = O[h][2] = 1;
        for (int k = 0; k < dims; k++) O[h][3 - dims + k] = win[k];
        ov[h] = O[h][0] * O[h][1] * O[h][2];
        C[h] = gp->out_channels + h;
        out[h] = swi_batch_output(batch, h, C[h], win);
        if (out[h] == NULL) {
            swi_batch_set_error(batch, "golden predictor: swi_batch_output refused the shape");
            return 1;
        }
    }

    float *s = malloc((size_t)rv * sizeof(float));
    if (s == NULL) {
        swi_batch_set_error(batch, "golden predictor: out of memory");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const float *x = in + (int64_t)i * cin * rv;
        for (int64_t v = 0; v < rv; v++) {
            float sum = 0.0f;
            for (int64_t c = 0; c < cin; c++) sum += x[c * rv + v];
            s[v] = sum;
        }
        for (int h = 0; h < heads; h++)
            fill_head(head_kind(gp->kind, h), dims, R, O[h], C[h], s, out[h] + (int64_t)i * C[h] * ov[h]);
    }
    free(s);
    return 0;
}
