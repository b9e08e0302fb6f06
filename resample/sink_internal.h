/* sink_internal.h -- what the sink's bookkeeping (sink.c) and its kernels (kernels.c) share:
 * the sink itself, its block layout and the two loops the bookkeeping hands work to. */
#ifndef SWI_RESAMPLE_SINK_INTERNAL_H
#define SWI_RESAMPLE_SINK_INTERNAL_H

#include "swi_resample.h"

#include "resample_internal.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define BLK 4
#define BLK3 (BLK * BLK * BLK)
#define CELL 16

struct swi_resample_sink {
    int64_t src[3], out[3], channels;
    double map[3][4];
    int tl[3]; /* output tile extent per axis */
    swi_resample_emit_fn emit;
    void *user;
    swi_resample_labels_fn labels_fn; /* argmax mode */
    void *labels_user;
    pthread_mutex_t lock;
    int failed;
    int64_t nt[3], ntiles, emitted, region_id;
    int64_t *tbox;    /* per tile: source box lo[3], hi[3] */
    int64_t *missing; /* per tile: voxels of its box not yet fed */
    int64_t *stamp;   /* per tile: the last region that counted it */
    unsigned char *done;
    int64_t nb[3], nblocks;
    float **blk;
    float **spare; /* blocks freed by their last tile, kept for the next region: a block
                      given back to the allocator is faulted in again on its next use */
    int64_t nspare;
    int32_t *refs; /* per block: tiles not yet emitted that read it */
    int64_t ng[3], ncells;
    int64_t *cell_start, *cell_tiles;
    size_t held, peak, fixed;
    int64_t maxbox[3];        /* the largest tile source box, per axis */
    unsigned char nearest[3]; /* per source axis: the nearest index instead of linear */
    signed char halfgrid[3];  /* per nearest axis: the output axis its coordinate is computed
                                 from as (o + 0.5) * scale - 0.5 (nnU-Net's map), or -1 */
};

/* Source coordinate r of output voxel (i, j, k): the map, or on a half-grid axis nnU-Net's
 * own rounding of it (ties then go the same way). */
static inline double rs__coord(const swi_resample_sink *s, int r, int64_t i, int64_t j, int64_t k) {
    const int c = s->halfgrid[r];
    if (c >= 0) return ((double)(c == 0 ? i : c == 1 ? j : k) + 0.5) * s->map[r][c] - 0.5;
    return s->map[r][0] * (double)i + s->map[r][1] * (double)j + s->map[r][2] * (double)k + s->map[r][3];
}

/* Source axis r's taps of coordinate c: linear (rs__tap) or nearest. */
static inline void rs__sink_tap(const swi_resample_sink *s, int r, double c, int64_t *i0, int64_t *i1,
                                float *f) {
    if (s->nearest[r])
        rs__tap_nearest(c, s->src[r], i0, i1, f);
    else
        rs__tap(c, s->src[r], i0, i1, f);
}

/* The output box of tile t. */
static inline void rs__tile_out_box(const swi_resample_sink *s, int64_t t, int64_t lo[3], int64_t hi[3]) {
    int64_t q[3] = {t / (s->nt[1] * s->nt[2]), (t / s->nt[2]) % s->nt[1], t % s->nt[2]};
    for (int a = 0; a < 3; a++) {
        lo[a] = q[a] * s->tl[a];
        hi[a] = lo[a] + s->tl[a] < s->out[a] ? lo[a] + s->tl[a] : s->out[a];
    }
}

/* Where voxel (x, y, z) of class 0 lies in its block; class c is c * CSTRIDE further. A block
 * holds its BLK x planes one after the other, each plane every class's BLK x BLK scores: the
 * engine's regions are slabs a few voxels thick along the first axis, and a slab then writes
 * each block's lines in order, where class-major blocks took a line of each class scattered
 * over the whole block (the copy took twice as long). */
#define CSTRIDE (BLK * BLK)
static inline int64_t rs__at(const swi_resample_sink *s, int64_t x, int64_t y, int64_t z) {
    return (x % BLK) * s->channels * CSTRIDE + (y % BLK) * BLK + z % BLK;
}

/* Copy what region (lo, hi, data) holds of the blocks of one column (bx, by) into dst [nz]
 * (the column's blocks along the last axis, from the region's first; NULL: not kept), reading
 * the region's rows in order; in argmax mode fold each block's largest score per class, and
 * whether one is not finite, into mx [nz, channels + 1]. Touches no bookkeeping: runs outside
 * the lock. */
void rs__copy_column(const swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], const float *data,
                     int64_t bx, int64_t by, float *const *dst, int64_t nz, float *restrict mx);

/* Interpolate tiles [n] (their blocks whole and pinned) and hand each to the sink's emit or
 * labels callback, outside the lock. In argmax mode bounds [n, channels] holds each tile's
 * bound per class, NaN first where the tile read a NaN or an infinity (then every class is
 * tried in index order); NULL otherwise. Returns 1 when a callback failed or memory ran out. */
int rs__emit_tiles(const swi_resample_sink *s, const int64_t *tiles, const float *bounds, int64_t n);

#endif
