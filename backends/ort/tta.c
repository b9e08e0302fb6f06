/* tta.c -- the mirroring of window batches that test-time augmentation needs. */
#include "ort_internal.h"

#include <string.h>

static void flip3(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask,
                  int accumulate) {
    const int64_t n0 = s[0], n1 = s[1], n2 = s[2], vol = n0 * n1 * n2;
    for (int64_t p = 0; p < planes; p++) {
        const float *a = src + p * vol;
        float *b = dst + p * vol;
        for (int64_t i = 0; i < n0; i++) {
            int64_t bi = (mask & 1) ? n0 - 1 - i : i;
            for (int64_t j = 0; j < n1; j++) {
                int64_t bj = (mask & 2) ? n1 - 1 - j : j;
                const float *row = a + (i * n1 + j) * n2;
                float *out = b + (bi * n1 + bj) * n2;
                if (mask & 4) {
                    if (accumulate)
                        for (int64_t k = 0; k < n2; k++) out[n2 - 1 - k] += row[k];
                    else
                        for (int64_t k = 0; k < n2; k++) out[n2 - 1 - k] = row[k];
                } else if (accumulate) {
                    for (int64_t k = 0; k < n2; k++) out[k] += row[k];
                } else {
                    memcpy(out, row, (size_t)n2 * sizeof *row);
                }
            }
        }
    }
}

void ort__flip3_copy(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask) {
    flip3(src, dst, planes, s, mask, 0);
}

void ort__flip3_accumulate(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask) {
    flip3(src, dst, planes, s, mask, 1);
}
