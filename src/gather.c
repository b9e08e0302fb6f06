/* gather.c -- read one window of the input through the padding (step 2) by index
 * mapping: no padded copy of the input is ever made. The input is the caller's array,
 * or a reader asked for the box the window needs (clipped to the image), so a reader's
 * input is never held whole. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The box of the image window `start` reads: min/max of the mapped indices per axis.
 * Where padding wraps (circular) or mirrors, the box can reach past the window's own
 * extent, but only along axes shorter than the window (the only padded ones). */
static void window_box(const geom *g, int64_t *const map[NDIM], int64_t lo[NDIM], int64_t hi[NDIM]) {
    for (int a = 0; a < NDIM; a++) {
        lo[a] = g->size[a];
        hi[a] = 0;
        for (int64_t j = 0; j < g->roi[a]; j++) {
            int64_t m = map[a][j];
            if (m < 0) continue;
            if (m < lo[a]) lo[a] = m;
            if (m + 1 > hi[a]) hi[a] = m + 1;
        }
    }
}

int swi__gather(const geom *g, const swi_params *p, const swi_tensor *in, int64_t image,
                const int64_t start[NDIM], float *dst, int64_t *idx, float *box, char *msg, size_t msg_len) {
    int64_t *map[NDIM];
    int64_t off = 0;
    for (int a = 0; a < NDIM; a++) {
        map[a] = idx + off;
        for (int64_t j = 0; j < g->roi[a]; j++)
            map[a][j] = swi__pad_index(start[a] + j, g->size[a], g->before[a], p->padding_mode);
        off += g->roi[a];
    }
    const int64_t r0 = g->roi[0], r1 = g->roi[1], r2 = g->roi[2], r3 = g->roi[3];
    const float cval = p->cval;
    /* the source: the whole image, or the box read for this window */
    int64_t lo[NDIM] = {0, 0, 0, 0}, ext[NDIM] = {g->size[0], g->size[1], g->size[2], g->size[3]};
    const float *base;
    if (in->data) {
        base = in->data + image * g->cin * g->image_vox;
    } else {
        int64_t hi[NDIM];
        window_box(g, map, lo, hi);
        int empty = 0;
        for (int a = 0; a < NDIM; a++) {
            ext[a] = hi[a] - lo[a];
            empty |= ext[a] <= 0;
        }
        if (!empty) {
            int64_t ulo[SWI_MAX_DIMS], uhi[SWI_MAX_DIMS];
            for (int k = 0; k < g->user_dims; k++) {
                ulo[k] = lo[swi__axis(g, k)];
                uhi[k] = hi[swi__axis(g, k)];
            }
            msg[0] = '\0';
            if (in->reader->read(in->reader->user, image, ulo, uhi, box, msg, msg_len) != 0) return 1;
        } else {
            for (int a = 0; a < NDIM; a++) ext[a] = 0; /* the window lies wholly in constant padding */
        }
        base = box;
    }
    const int64_t ch_vox = ext[0] * ext[1] * ext[2] * ext[3];
    /* the last axis is a plain copy when it maps to a contiguous in-range run */
    int contiguous = map[3][0] >= 0 && map[3][r3 - 1] == map[3][0] + r3 - 1;
    for (int64_t j = 1; contiguous && j < r3; j++) contiguous = map[3][j] == map[3][0] + j;
    for (int64_t c = 0; c < g->cin; c++) {
        const float *src = base + c * ch_vox;
        for (int64_t i0 = 0; i0 < r0; i0++) {
            int64_t m0 = map[0][i0];
            for (int64_t i1 = 0; i1 < r1; i1++) {
                int64_t m1 = map[1][i1];
                for (int64_t i2 = 0; i2 < r2; i2++, dst += r3) {
                    int64_t m2 = map[2][i2];
                    if (m0 < 0 || m1 < 0 || m2 < 0) {
                        for (int64_t j = 0; j < r3; j++) dst[j] = cval;
                        continue;
                    }
                    const float *row =
                        src + (((m0 - lo[0]) * ext[1] + (m1 - lo[1])) * ext[2] + (m2 - lo[2])) * ext[3];
                    if (contiguous) {
                        memcpy(dst, row + (map[3][0] - lo[3]), (size_t)r3 * sizeof(float));
                    } else {
                        for (int64_t j = 0; j < r3; j++)
                            dst[j] = map[3][j] < 0 ? cval : row[map[3][j] - lo[3]];
                    }
                }
            }
        }
    }
    return 0;
}
