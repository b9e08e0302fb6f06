/* gather.c -- read one window of the input through the padding (step 2) by index
 * mapping: no padded copy of the input is ever made. */
#include "internal.h"

#include <string.h>

void swi__gather(const geom *g, const swi_params *p, const float *input, int64_t image,
                 const int64_t start[NDIM], float *dst, int64_t *idx) {
    int64_t *map[NDIM];
    int64_t off = 0;
    for (int a = 0; a < NDIM; a++) {
        map[a] = idx + off;
        for (int64_t j = 0; j < g->roi[a]; j++)
            map[a][j] = swi__pad_index(start[a] + j, g->size[a], g->before[a], p->padding_mode);
        off += g->roi[a];
    }
    const int64_t r0 = g->roi[0], r1 = g->roi[1], r2 = g->roi[2];
    const int64_t s1 = g->size[1], s2 = g->size[2];
    /* the last axis is a plain copy when it maps to a contiguous in-range run */
    int contiguous = map[2][0] >= 0 && map[2][r2 - 1] == map[2][0] + r2 - 1;
    for (int64_t j = 1; contiguous && j < r2; j++) contiguous = map[2][j] == map[2][0] + j;
    const float cval = p->cval;
    for (int64_t c = 0; c < g->cin; c++) {
        const float *src = input + (image * g->cin + c) * g->image_vox;
        for (int64_t i0 = 0; i0 < r0; i0++) {
            int64_t m0 = map[0][i0];
            for (int64_t i1 = 0; i1 < r1; i1++, dst += r2) {
                int64_t m1 = map[1][i1];
                if (m0 < 0 || m1 < 0) {
                    for (int64_t j = 0; j < r2; j++) dst[j] = cval;
                    continue;
                }
                const float *row = src + (m0 * s1 + m1) * s2;
                if (contiguous) {
                    memcpy(dst, row + map[2][0], (size_t)r2 * sizeof(float));
                } else {
                    for (int64_t j = 0; j < r2; j++) dst[j] = map[2][j] < 0 ? cval : row[map[2][j]];
                }
            }
        }
    }
}
