/* sink.c -- resampling a grid that arrives region by region (swi_resample.h).
 *
 * The output grid is cut into tiles of `tile` voxels a side. Each tile reads a box of the
 * source (its corners through the map, one voxel of margin for rounding and the upper
 * trilinear tap); it is ready when every voxel of that box has arrived, counted down as
 * regions are fed. Source voxels are stored in blocks of BLK^3, each allocated when a
 * region first reaches it and freed when the last tile reading it is emitted; blocks no
 * tile reads are never stored. A coarse grid over the source lists the tiles whose box
 * touches each of its cells, so a region visits only the tiles it can complete.
 *
 * The lock guards the bookkeeping only: a region is copied into its blocks outside it (the
 * blocks pinned by a reference meanwhile), and the tiles it completes are interpolated
 * outside it too, on the thread that fed it. */
#include "swi_resample.h"

#include "resample_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLK 4
#define BLK3 (BLK * BLK * BLK)
#define CELL 16

struct swi_resample_sink {
    int64_t src[3], out[3], channels;
    double map[3][4];
    int tl[3]; /* output tile extent per axis */
    swi_sink_emit_fn emit;
    void *user;
    swi_sink_labels_fn labels_fn; /* argmax mode */
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
    int32_t *refs; /* per block: tiles not yet emitted that read it */
    int64_t ng[3], ncells;
    int64_t *cell_start, *cell_tiles;
    size_t held, peak, fixed;
    int64_t maxbox[3]; /* the largest tile source box, per axis */
};

static void tile_out_box(const swi_resample_sink *s, int64_t t, int64_t lo[3], int64_t hi[3]) {
    int64_t q[3] = {t / (s->nt[1] * s->nt[2]), (t / s->nt[2]) % s->nt[1], t % s->nt[2]};
    for (int a = 0; a < 3; a++) {
        lo[a] = q[a] * s->tl[a];
        hi[a] = lo[a] + s->tl[a] < s->out[a] ? lo[a] + s->tl[a] : s->out[a];
    }
}

/* the source box an output box reads, with a voxel of margin, clamped */
static void read_box(const int64_t src[3], const double m[3][4], const int64_t lo[3], const int64_t hi[3],
                     int64_t blo[3], int64_t bhi[3]) {
    for (int r = 0; r < 3; r++) {
        double mn = INFINITY, mx = -INFINITY;
        for (int c = 0; c < 8; c++) {
            double i = (double)((c & 4) ? hi[0] - 1 : lo[0]);
            double j = (double)((c & 2) ? hi[1] - 1 : lo[1]);
            double k = (double)((c & 1) ? hi[2] - 1 : lo[2]);
            double v = m[r][0] * i + m[r][1] * j + m[r][2] * k + m[r][3];
            mn = fmin(mn, v);
            mx = fmax(mx, v);
        }
        double top = (double)(src[r] - 1);
        mn = fmin(fmax(mn, 0), top);
        mx = fmin(fmax(mx, 0), top);
        /* a margin for the rounding of interior voxels' positions, and the upper tap */
        blo[r] = (int64_t)floor(mn - 1e-7);
        bhi[r] = (int64_t)floor(mx + 1e-7) + 2;
        if (blo[r] < 0) blo[r] = 0;
        if (bhi[r] > src[r]) bhi[r] = src[r];
    }
}

static int64_t overlap_voxels(const int64_t *a, const int64_t *blo, const int64_t *bhi) {
    int64_t n = 1;
    for (int r = 0; r < 3; r++) {
        int64_t lo = a[r] > blo[r] ? a[r] : blo[r];
        int64_t hi = a[3 + r] < bhi[r] ? a[3 + r] : bhi[r];
        if (hi <= lo) return 0;
        n *= hi - lo;
    }
    return n;
}

void swi_resample_sink_free(swi_resample_sink *s) {
    if (!s) return;
    if (s->blk)
        for (int64_t b = 0; b < s->nblocks; b++) free(s->blk[b]);
    free(s->blk);
    free(s->refs);
    free(s->tbox);
    free(s->missing);
    free(s->stamp);
    free(s->done);
    free(s->cell_start);
    free(s->cell_tiles);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Tile 0: 8 a side. Wider tiles along the first two axes share more of the first passes and
 * read fewer block lines per voxel (16 x 16 x 8 costs 14 % less in the sink alone) but gain
 * nothing in a whole run, where the block reads wait on memory either way, and hold more of
 * the band (tiles straddling a region's edge within a sweep): kept per axis for that trade. */
static void tile_shape(int tile, int tl[3]) {
    for (int a = 0; a < 3; a++) tl[a] = tile > 0 ? tile : 8;
}

swi_status swi_resample_sink_create(const int64_t src_size[3], const int64_t out_size[3],
                                    const double map[3][4], int64_t channels, int tile, swi_sink_emit_fn emit,
                                    void *user, swi_resample_sink **out, char *err, size_t errlen) {
    *out = NULL;
    if (channels < 1 || !emit || tile < 0 || tile > 1024) {
        rs__err(err, errlen, "swi_resample_sink_create: %s",
                channels < 1 ? "channels < 1"
                : !emit      ? "emit is NULL"
                             : "tile must be 0..1024");
        return SWI_ERR_INVALID_ARG;
    }
    for (int a = 0; a < 3; a++)
        if (src_size[a] < 1 || out_size[a] < 1 || src_size[a] > SWI_MAX_AXIS || out_size[a] > SWI_MAX_AXIS) {
            rs__err(err, errlen, "swi_resample_sink_create: grid sizes must be 1..2^31");
            return SWI_ERR_INVALID_ARG;
        }
    swi_resample_sink *s = calloc(1, sizeof *s);
    if (!s) {
        rs__err(err, errlen, "out of memory for the resampling sink");
        return SWI_ERR_NOMEM;
    }
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        rs__err(err, errlen, "cannot create the resampling sink's lock");
        return SWI_ERR_THREAD;
    }
    memcpy(s->src, src_size, sizeof s->src);
    memcpy(s->out, out_size, sizeof s->out);
    memcpy(s->map, map, sizeof s->map);
    s->channels = channels;
    tile_shape(tile, s->tl);
    s->emit = emit;
    s->user = user;
    s->ntiles = s->nblocks = s->ncells = 1;
    for (int a = 0; a < 3; a++) {
        s->nt[a] = ceil_div(out_size[a], s->tl[a]);
        s->nb[a] = ceil_div(src_size[a], BLK);
        s->ng[a] = ceil_div(src_size[a], CELL);
        s->ntiles *= s->nt[a];
        s->nblocks *= s->nb[a];
        s->ncells *= s->ng[a];
    }
    if (s->ntiles > ((int64_t)1 << 40) / 64 || s->nblocks > ((int64_t)1 << 40) / 16 ||
        (size_t)channels > SIZE_MAX / (BLK3 * sizeof(float))) {
        swi_resample_sink_free(s);
        rs__err(err, errlen, "the resampling sink's grids are too large");
        return SWI_ERR_OVERFLOW;
    }
    s->tbox = malloc((size_t)s->ntiles * 6 * sizeof *s->tbox);
    s->missing = malloc((size_t)s->ntiles * sizeof *s->missing);
    s->stamp = calloc((size_t)s->ntiles, sizeof *s->stamp);
    s->done = calloc((size_t)s->ntiles, 1);
    s->blk = calloc((size_t)s->nblocks, sizeof *s->blk);
    s->refs = calloc((size_t)s->nblocks, sizeof *s->refs);
    s->cell_start = calloc((size_t)s->ncells + 1, sizeof *s->cell_start);
    if (!s->tbox || !s->missing || !s->stamp || !s->done || !s->blk || !s->refs || !s->cell_start) {
        swi_resample_sink_free(s);
        rs__err(err, errlen, "out of memory for the resampling sink's tiles");
        return SWI_ERR_NOMEM;
    }
    /* tiles: their boxes, what they wait for, the blocks they read, the cells they touch */
    int64_t entries = 0;
    for (int64_t t = 0; t < s->ntiles; t++) {
        int64_t lo[3], hi[3], *b = s->tbox + 6 * t;
        tile_out_box(s, t, lo, hi);
        read_box(s->src, s->map, lo, hi, b, b + 3);
        /* whole block rows along k: a tile copies block rows whole (see sep_passes12), so it
         * waits for every voxel they hold -- none is then being fed while it is copied */
        b[2] = b[2] / BLK * BLK;
        b[5] = ceil_div(b[5], BLK) * BLK < s->src[2] ? ceil_div(b[5], BLK) * BLK : s->src[2];
        s->missing[t] = (b[3] - b[0]) * (b[4] - b[1]) * (b[5] - b[2]);
        for (int a = 0; a < 3; a++)
            if (b[3 + a] - b[a] > s->maxbox[a]) s->maxbox[a] = b[3 + a] - b[a];
        for (int64_t x = b[0] / BLK; x <= (b[3] - 1) / BLK; x++)
            for (int64_t y = b[1] / BLK; y <= (b[4] - 1) / BLK; y++)
                for (int64_t z = b[2] / BLK; z <= (b[5] - 1) / BLK; z++)
                    s->refs[(x * s->nb[1] + y) * s->nb[2] + z]++;
        for (int64_t x = b[0] / CELL; x <= (b[3] - 1) / CELL; x++)
            for (int64_t y = b[1] / CELL; y <= (b[4] - 1) / CELL; y++)
                for (int64_t z = b[2] / CELL; z <= (b[5] - 1) / CELL; z++) {
                    s->cell_start[(x * s->ng[1] + y) * s->ng[2] + z + 1]++;
                    entries++;
                }
    }
    for (int64_t c = 0; c < s->ncells; c++) s->cell_start[c + 1] += s->cell_start[c];
    s->cell_tiles = malloc((size_t)(entries > 0 ? entries : 1) * sizeof *s->cell_tiles);
    int64_t *fill = calloc((size_t)s->ncells, sizeof *fill);
    if (!s->cell_tiles || !fill) {
        free(fill);
        swi_resample_sink_free(s);
        rs__err(err, errlen, "out of memory for the resampling sink's index");
        return SWI_ERR_NOMEM;
    }
    for (int64_t t = 0; t < s->ntiles; t++) {
        const int64_t *b = s->tbox + 6 * t;
        for (int64_t x = b[0] / CELL; x <= (b[3] - 1) / CELL; x++)
            for (int64_t y = b[1] / CELL; y <= (b[4] - 1) / CELL; y++)
                for (int64_t z = b[2] / CELL; z <= (b[5] - 1) / CELL; z++) {
                    int64_t c = (x * s->ng[1] + y) * s->ng[2] + z;
                    s->cell_tiles[s->cell_start[c] + fill[c]++] = t;
                }
    }
    free(fill);
    s->fixed = sizeof *s + (size_t)s->ntiles * (8 * sizeof(int64_t) + 1) +
               (size_t)s->nblocks * (sizeof(float *) + sizeof(int32_t)) +
               ((size_t)s->ncells + 1 + (size_t)entries) * sizeof(int64_t);
    *out = s;
    return SWI_OK;
}

/* Where voxel (x, y, z) of class 0 lies in its block; class c is c * CSTRIDE further. A block
 * holds its BLK x planes one after the other, each plane every class's BLK x BLK scores: the
 * engine's regions are slabs a few voxels thick along the first axis, and a slab then writes
 * each block's lines in order, where class-major blocks took a line of each class scattered
 * over the whole block (the copy took twice as long). */
#define CSTRIDE (BLK * BLK)
static inline int64_t at(const swi_resample_sink *s, int64_t x, int64_t y, int64_t z) {
    return (x % BLK) * s->channels * CSTRIDE + (y % BLK) * BLK + z % BLK;
}

/* A block: channels x BLK3 scores (laid out as at() says); in argmax mode then each class's
 * largest score fed so far (NaNs skipped) and a flag: 1 once a non-finite score was fed. */
static size_t block_floats(const swi_resample_sink *s) {
    return (size_t)s->channels * BLK3 + (s->labels_fn ? (size_t)s->channels + 1 : 0);
}

swi_status swi_resample_sink_argmax(swi_resample_sink *s, swi_sink_labels_fn fn, void *user) {
    if (!fn || s->channels > 65536 || s->region_id != 0) return SWI_ERR_INVALID_ARG;
    s->labels_fn = fn;
    s->labels_user = user;
    return SWI_OK;
}

/* the tile's bound per class: the largest score of its blocks (under the lock); returns 1
 * when a block held a NaN or an infinity */
static int tile_bounds(const swi_resample_sink *s, int64_t t, float *ub) {
    const int64_t *b = s->tbox + 6 * t;
    int wild = 0;
    for (int64_t c = 0; c < s->channels; c++) ub[c] = -INFINITY;
    for (int64_t x = b[0] / BLK; x <= (b[3] - 1) / BLK; x++)
        for (int64_t y = b[1] / BLK; y <= (b[4] - 1) / BLK; y++)
            for (int64_t z = b[2] / BLK; z <= (b[5] - 1) / BLK; z++) {
                const float *m = s->blk[(x * s->nb[1] + y) * s->nb[2] + z] + s->channels * BLK3;
                for (int64_t c = 0; c < s->channels; c++) ub[c] = m[c] > ub[c] ? m[c] : ub[c];
                wild |= m[s->channels] != 0;
            }
    return wild;
}

/* The eight source voxels and the three weights of an output voxel (general maps). */
typedef struct tap8 {
    float f[3];
    const float *q[8]; /* corner (a, b, c) at q[4a + 2b + c] */
} tap8;

/* classes by bound, largest first: a merge sort (ties in any order: the argmax breaks them
 * by index), tmp [n] */
static void sort_by_bound(int32_t *order, int32_t *tmp, int64_t n, const float *ub) {
    int32_t *a = order, *b = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) b[o++] = ub[a[j]] > ub[a[i]] ? a[j++] : a[i++];
            while (i < mid) b[o++] = a[i++];
            while (j < hi) b[o++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    if (a != order) memcpy(order, a, (size_t)n * sizeof *order);
}

/* the taps of every voxel of tile t (lo, hi) */
static int64_t tile_taps(const swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], tap8 *taps) {
    int64_t o = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++, o++) {
                int64_t tp[3][2];
                for (int r = 0; r < 3; r++)
                    rs__tap(s->map[r][0] * (double)i + s->map[r][1] * (double)j + s->map[r][2] * (double)k +
                                s->map[r][3],
                            s->src[r], &tp[r][0], &tp[r][1], &taps[o].f[r]);
                for (int m = 0; m < 8; m++) {
                    int64_t x = tp[0][(m >> 2) & 1], y = tp[1][(m >> 1) & 1], z = tp[2][m & 1];
                    int64_t bi = ((x / BLK) * s->nb[1] + y / BLK) * s->nb[2] + z / BLK;
                    taps[o].q[m] = s->blk[bi] + at(s, x, y, z);
                }
            }
    return o;
}

static inline float tap_value(const tap8 *p, int64_t d) {
    const float *const *q = p->q;
    return rs__trilerp(q[0][d], q[1][d], q[2][d], q[3][d], q[4][d], q[5][d], q[6][d], q[7][d], p->f[0],
                       p->f[1], p->f[2]);
}

/* Axis-aligned maps: each output axis reads one source axis, so the tile is interpolated in
 * three passes (k, then j, then i) over its source box, the same operations per voxel as
 * rs__trilerp with the intermediate lerps shared between neighbours. The box's rows along the
 * last axis are copied from the blocks whole (BLK floats at a time), from the block edge
 * at or below the box. */
/* GCC vector types: pass 1's permutes (see pass1) and the copies' bounds (copy_column) */
#define PERM_K 8
#define PERM_ROW 16
#if defined(__GNUC__) && !defined(__clang__)
typedef float rs_v8f __attribute__((vector_size(PERM_K * sizeof(float))));
typedef int32_t rs_v8i __attribute__((vector_size(PERM_K * sizeof(int32_t))));
typedef float rs_v4f __attribute__((vector_size(BLK * sizeof(float)))); /* a block row */
typedef int32_t rs_v4i __attribute__((vector_size(BLK * sizeof(int32_t))));
#define RS_PERMUTE 1
#else
#define RS_PERMUTE 0
#endif

typedef struct sep_taps {
    int64_t n[3], bn[3]; /* the tile's extents; its source box's */
    int64_t nzb, rz;     /* blocks a box row spans; floats per row in the copy */
    const float **rows;  /* [bn[0] * bn[1] * nzb]: each box row's block rows (class 0) */
    const float **lines; /* [nlines]: a row in each cache line the rows lie in (a block's
                               rows of one x share one) */
    int64_t nlines;
    int32_t *t0[3], *t1[3]; /* per output coordinate: taps relative to the box (the last
                               axis: to the block edge its rows start at) */
    float *f[3];
} sep_taps;

typedef struct tile_work {
    tap8 *taps;
    float *buf, *best; /* scores [channels, nv]; argmax: the best value per voxel */
    uint16_t *label;
    int32_t *order, *tmp;     /* argmax: classes in the order tried, and the sort's room */
    int32_t *lab;             /* argmax: labels while classes are tried (int32: vectorised) */
    float *g, *p1, *p2, *out; /* separable: the box, the two passes, one class's values */
    const float **rows;       /* separable: sep_taps.rows, then sep_taps.lines */
    int32_t *ti;              /* 2 taps per output coordinate of each axis */
    float *tf;                /* a weight per output coordinate of each axis */
} tile_work;

static int separable(const double m[3][4]) {
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            if (r != c && m[r][c] != 0) return 0;
    return 1;
}

static void sep_setup(const swi_resample_sink *s, int64_t t, const int64_t lo[3], const int64_t hi[3],
                      tile_work *w, sep_taps *st) {
    const int64_t *b = s->tbox + 6 * t;
    const int64_t zb0 = b[2] / BLK, zb1 = (b[5] - 1) / BLK;
    int32_t *ti = w->ti;
    float *tf = w->tf;
    for (int r = 0; r < 3; r++) {
        st->n[r] = hi[r] - lo[r];
        st->bn[r] = b[3 + r] - b[r];
        const int64_t base = r == 2 ? zb0 * BLK : b[r];
        st->t0[r] = ti;
        st->t1[r] = ti + st->n[r];
        st->f[r] = tf;
        ti += 2 * st->n[r];
        tf += st->n[r];
        for (int64_t o = 0; o < st->n[r]; o++) {
            int64_t a0, a1;
            rs__tap(s->map[r][r] * (double)(lo[r] + o) + s->map[r][3], s->src[r], &a0, &a1, &st->f[r][o]);
            st->t0[r][o] = (int32_t)(a0 - base);
            st->t1[r][o] = (int32_t)(a1 - base);
        }
    }
    st->nzb = zb1 - zb0 + 1;
    /* the rows a permute takes whole (see pass1) are 16 floats apart */
    st->rz = st->nzb * BLK <= PERM_ROW && st->n[2] == PERM_K ? PERM_ROW : st->nzb * BLK;
    st->rows = w->rows;
    int64_t e = 0;
    for (int64_t x = b[0]; x < b[3]; x++)
        for (int64_t y = b[1]; y < b[4]; y++) {
            const int64_t bi = ((x / BLK) * s->nb[1] + y / BLK) * s->nb[2];
            const int64_t in = at(s, x, y, 0);
            for (int64_t z = zb0; z <= zb1; z++) w->rows[e++] = s->blk[bi + z] + in;
        }
    st->lines = w->rows + e;
    st->nlines = 0;
    for (int64_t x = 0; x < st->bn[0]; x++)
        for (int64_t y = 0; y < st->bn[1]; y++)
            if (y == 0 || (b[1] + y) % BLK == 0)
                for (int64_t z = 0; z < st->nzb; z++)
                    w->rows[e + st->nlines++] = st->rows[(x * st->bn[1] + y) * st->nzb + z];
}

/* Pass 1 (along k) of the box rows g [bn0 * bn1, rz] into p1 [bn0 * bn1, n2]. Where a tile
 * is PERM_K long along k and its rows fit in PERM_ROW floats, each row's PERM_K values are two
 * permutes of the row (GCC's vector extensions: AVX2's vpermps in that clone); else one voxel
 * at a time. The same operations either way. */

static inline void pass1(const sep_taps *st, const float *restrict g, float *restrict p1) {
    const int64_t R = st->bn[0] * st->bn[1], N2 = st->n[2], rz = st->rz;
    const int32_t *t0 = st->t0[2], *t1 = st->t1[2];
    const float *f = st->f[2];
#if RS_PERMUTE
    if (N2 == PERM_K && rz == PERM_ROW) {
        rs_v8i i0, i1;
        rs_v8f fv;
        for (int k = 0; k < PERM_K; k++) {
            i0[k] = t0[k];
            i1[k] = t1[k];
            fv[k] = f[k];
        }
        const rs_v8f gv = 1 - fv;
        for (int64_t r = 0; r < R; r++) {
            rs_v8f lo, hi;
            memcpy(&lo, g + r * PERM_ROW, sizeof lo);
            memcpy(&hi, g + r * PERM_ROW + PERM_K, sizeof hi);
            /* rs__lerp's operations, lane by lane */
            const rs_v8f d = __builtin_shuffle(lo, hi, i0) * gv + __builtin_shuffle(lo, hi, i1) * fv;
            memcpy(p1 + r * PERM_K, &d, sizeof d);
        }
        return;
    }
#endif
    for (int64_t r = 0; r < R; r++) {
        const float *row = g + r * rz;
        float *d = p1 + r * N2;
        for (int64_t k = 0; k < N2; k++) d[k] = rs__lerp(row[t0[k]], row[t1[k]], f[k]);
    }
}

/* passes 1 and 2 of class c: the box copied into g, along k into p1 [bn0, bn1, n2], along j
 * into p2 [bn0, n1, n2]; class `next` (-1: none) is fetched into the cache meanwhile (its rows
 * lie in many blocks: the copy would wait on each) */
static inline void sep_passes12(const sep_taps *st, int64_t c, int64_t next, float *restrict g,
                                float *restrict p1, float *restrict p2) {
    const int64_t B0 = st->bn[0], B1 = st->bn[1], N1 = st->n[1], N2 = st->n[2];
    const int64_t nzb = st->nzb, rz = st->rz, off = c * CSTRIDE;
    /* whole block rows (a tile's box is whole blocks along k: every voxel copied has been
     * fed); copying only the voxels the taps read makes the sink 1.7 times slower (narrow
     * stores stall the permutes' wide loads) */
    for (int64_t r = 0; r < B0 * B1; r++)
        for (int64_t z = 0; z < nzb; z++)
            memcpy(g + r * rz + z * BLK, st->rows[r * nzb + z] + off, BLK * sizeof(float));
    if (next >= 0)
        for (int64_t r = 0; r < st->nlines; r++) __builtin_prefetch(st->lines[r] + next * CSTRIDE);
    pass1(st, g, p1);
#if RS_PERMUTE
    if (N2 == PERM_K) { /* a vector per (x, j): no loop to set up for each */
        for (int64_t x = 0; x < B0; x++)
            for (int64_t j = 0; j < N1; j++) {
                rs_v8f a, b;
                memcpy(&a, p1 + (x * B1 + st->t0[1][j]) * PERM_K, sizeof a);
                memcpy(&b, p1 + (x * B1 + st->t1[1][j]) * PERM_K, sizeof b);
                const float fj = st->f[1][j];
                const rs_v8f d = a * (1 - fj) + b * fj; /* rs__lerp's operations, lane by lane */
                memcpy(p2 + (x * N1 + j) * PERM_K, &d, sizeof d);
            }
        return;
    }
#endif
    for (int64_t x = 0; x < B0; x++)
        for (int64_t j = 0; j < N1; j++) {
            const float *a = p1 + (x * B1 + st->t0[1][j]) * N2;
            const float *b = p1 + (x * B1 + st->t1[1][j]) * N2;
            const float fj = st->f[1][j];
            float *d = p2 + (x * N1 + j) * N2;
            for (int64_t k = 0; k < N2; k++) d[k] = rs__lerp(a[k], b[k], fj);
        }
}

/* pass 3 (along i) into out [nv] */
static inline void sep_pass3(const sep_taps *st, const float *restrict p2, float *restrict out) {
    const int64_t N12 = st->n[1] * st->n[2];
    for (int64_t i = 0; i < st->n[0]; i++) {
        const float *a = p2 + st->t0[0][i] * N12;
        const float *b = p2 + st->t1[0][i] * N12;
        const float f = st->f[0][i];
        float *d = out + i * N12;
        for (int64_t jk = 0; jk < N12; jk++) d[jk] = rs__lerp(a[jk], b[jk], f);
    }
}

/* pass 3 of class c folded into the running argmax of finite scores, classes out of index
 * order: the lower index wins a tie */
static inline void sep_pass3_argmax(const sep_taps *st, const float *restrict p2, int32_t c,
                                    float *restrict best, int32_t *restrict lab) {
    const int64_t N12 = st->n[1] * st->n[2];
    for (int64_t i = 0; i < st->n[0]; i++) {
        const float *a = p2 + st->t0[0][i] * N12;
        const float *b = p2 + st->t1[0][i] * N12;
        const float f = st->f[0][i];
        float *bo = best + i * N12;
        int32_t *lo = lab + i * N12;
        for (int64_t jk = 0; jk < N12; jk++) {
            const float x = rs__lerp(a[jk], b[jk], f);
            const int take = (x > bo[jk]) | ((x == bo[jk]) & (c < lo[jk]));
            bo[jk] = take ? x : bo[jk];
            lo[jk] = take ? c : lo[jk];
        }
    }
}

/* where the smallest of x [n] (finite) is: the first of the smallest */
static inline int64_t min_at(const float *x, int64_t n) {
    int64_t at = 0;
    for (int64_t v = 1; v < n; v++) at = x[v] < x[at] ? v : at;
    return at;
}

/* the values of class c at every voxel of the tile, into out [nv] */
static inline void class_values(int sep, const sep_taps *st, const tap8 *taps, int64_t nv, int64_t c,
                                int64_t next, tile_work *w, float *out) {
    if (sep) {
        sep_passes12(st, c, next, w->g, w->p1, w->p2);
        sep_pass3(st, w->p2, out);
        return;
    }
    for (int64_t v = 0; v < nv; v++) out[v] = tap_value(&taps[v], c * CSTRIDE);
}

RS_KERNEL static int emit_tile(const swi_resample_sink *s, int64_t t, const float *ub, tile_work *w) {
    int64_t lo[3], hi[3];
    tile_out_box(s, t, lo, hi);
    const int64_t nv = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    const int sep = separable(s->map);
    sep_taps st;
    if (sep)
        sep_setup(s, t, lo, hi, w, &st);
    else
        tile_taps(s, lo, hi, w->taps);
    if (!s->labels_fn) {
        for (int64_t ch = 0; ch < s->channels; ch++)
            class_values(sep, &st, w->taps, nv, ch, ch + 1 < s->channels ? ch + 1 : -1, w, w->buf + ch * nv);
        return s->emit(s->user, lo, hi, s->channels, w->buf);
    }
    /* argmax: classes by their bound, largest first, until none can win anywhere */
    const int wild = ub == NULL;
    for (int64_t c = 0; c < s->channels; c++) w->order[c] = (int32_t)c;
    if (!wild) sort_by_bound(w->order, w->tmp, s->channels, ub);
    float *best = w->best;
    int32_t *lab = w->lab;
    int64_t probe = 0; /* the voxel whose best was the smallest when last looked */
    for (int64_t r = 0; r < s->channels; r++) {
        const int32_t c = w->order[r];
        const int64_t next = r + 1 < s->channels ? w->order[r + 1] : -1;
        /* below every voxel's best, neither this class nor a later one can win; not below
         * the probe's, it may (the smallest best costs as much as a class: looked for only
         * when the probe passes) */
        if (!wild && r > 0 && ub[c] < best[probe]) {
            probe = min_at(best, nv);
            if (ub[c] < best[probe]) break;
        }
        if (sep && !wild && r > 0) {
            sep_passes12(&st, c, next, w->g, w->p1, w->p2);
            sep_pass3_argmax(&st, w->p2, c, best, lab);
        } else {
            const float *x = w->out;
            class_values(sep, &st, w->taps, nv, c, next, w, w->out);
            if (r == 0) {
                for (int64_t v = 0; v < nv; v++) {
                    best[v] = x[v];
                    lab[v] = c;
                }
            } else if (!wild) {
                for (int64_t v = 0; v < nv; v++) {
                    const int take = (x[v] > best[v]) | ((x[v] == best[v]) & (c < lab[v]));
                    best[v] = take ? x[v] : best[v];
                    lab[v] = take ? c : lab[v];
                }
            } else {
                /* index order, as the engine: the first NaN wins, then the first largest */
                for (int64_t v = 0; v < nv; v++)
                    if (!isnan(best[v]) && (isnan(x[v]) || x[v] > best[v])) {
                        best[v] = x[v];
                        lab[v] = c;
                    }
            }
        }
    }
    for (int64_t v = 0; v < nv; v++) w->label[v] = (uint16_t)lab[v];
    return s->labels_fn(s->labels_user, lo, hi, w->label);
}

#if RS_PERMUTE
/* Fold lanes mv (largest scores) and av (0, or NaN where a lane saw a NaN or an infinity) into
 * block bounds mo [C + 1] at class ch, without a branch per lane. */
static inline void fold_lanes(float *mo, int64_t ch, int64_t C, rs_v4f mv, rs_v4f av) {
    rs_v4f sh = __builtin_shuffle(mv, (rs_v4i){2, 3, 0, 1});
    rs_v4i up = sh > mv;
    mv = (rs_v4f)(((rs_v4i)sh & up) | ((rs_v4i)mv & ~up));
    sh = __builtin_shuffle(mv, (rs_v4i){1, 0, 3, 2});
    up = sh > mv;
    mv = (rs_v4f)(((rs_v4i)sh & up) | ((rs_v4i)mv & ~up));
    mo[ch] = mv[0] > mo[ch] ? mv[0] : mo[ch];
    const rs_v4i wild = av != 0;
    if (wild[0] | wild[1] | wild[2] | wild[3]) mo[C] = 1;
}
#endif

/* Copy what region (lo, hi, data) holds of the blocks of one column (bx, by) into dst [nz]
 * (the column's blocks along the last axis, from the region's first; NULL: not kept), reading
 * the region's rows in order; in argmax mode fold each block's largest score per class, and
 * whether one is not finite, into mx [nz, channels + 1]. */
static void copy_column(const swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3],
                        const float *data, int64_t bx, int64_t by, float *const *dst, int64_t nz,
                        float *restrict mx) {
    const int64_t C = s->channels;
    const int64_t x0 = bx * BLK > lo[0] ? bx * BLK : lo[0],
                  x1 = (bx + 1) * BLK < hi[0] ? (bx + 1) * BLK : hi[0];
    const int64_t y0 = by * BLK > lo[1] ? by * BLK : lo[1],
                  y1 = (by + 1) * BLK < hi[1] ? (by + 1) * BLK : hi[1];
    const int64_t rn1 = hi[1] - lo[1], rn2 = hi[2] - lo[2], rv = (hi[0] - lo[0]) * rn1 * rn2;
    const int64_t zb0 = lo[2] / BLK;
    enum { MAXQ = 256 };                           /* blocks of a column at once: longer ones in pieces */
    int64_t from_at[MAXQ], to_at[MAXQ], len[MAXQ]; /* per block: its part of a row */
    for (int64_t p0 = 0; p0 < nz; p0 += MAXQ) {
        const int64_t pn = nz - p0 < MAXQ ? nz - p0 : MAXQ;
        for (int64_t q = 0; q < pn; q++) {
            const int64_t zb = zb0 + p0 + q;
            const int64_t z0 = zb * BLK > lo[2] ? zb * BLK : lo[2];
            const int64_t z1 = (zb + 1) * BLK < hi[2] ? (zb + 1) * BLK : hi[2];
            from_at[q] = z0 - lo[2];
            to_at[q] = z0 % BLK;
            len[q] = z1 - z0;
        }
        for (int64_t ch = 0; ch < C; ch++) {
            /* the next class's rows and block lines, into the cache meanwhile: the column
             * reads short runs of the region and writes lines of many blocks */
            if (ch + 1 < C) {
                for (int64_t i = x0; i < x1; i++)
                    for (int64_t j = y0; j < y1; j++) {
                        const float *row = data + (ch + 1) * rv + ((i - lo[0]) * rn1 + (j - lo[1])) * rn2;
                        for (int64_t z = 0; z < rn2; z += 16) __builtin_prefetch(row + z);
                        __builtin_prefetch(row + rn2 - 1);
                    }
                for (int64_t q = 0; q < pn; q++)
                    if (dst[p0 + q])
                        for (int64_t i = x0; i < x1; i++)
                            __builtin_prefetch(dst[p0 + q] + at(s, i, 0, 0) + (ch + 1) * CSTRIDE, 1);
            }
            /* block by block along the column: a line of each (one x, BLK y) at a time, the
             * region's BLK rows read side by side */
            for (int64_t i = x0; i < x1; i++) {
                const float *rows = data + ch * rv + ((i - lo[0]) * rn1 + (y0 - lo[1])) * rn2;
                const int64_t in = at(s, i, y0, 0) + ch * CSTRIDE;
                for (int64_t q = 0; q < pn; q++) {
                    if (!dst[p0 + q]) continue;
                    float *restrict to0 = dst[p0 + q] + in + to_at[q];
                    const float *restrict from0 = rows + from_at[q];
                    /* a NaN or an infinity makes the tiles reading it take every class, so the
                     * bound may ignore them (v - v is 0 for finite v, else NaN) */
#if RS_PERMUTE
                    if (len[q] == BLK) { /* whole block rows: the lanes stay in registers */
                        rs_v4f mv = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, av = {0, 0, 0, 0};
                        for (int64_t j = 0; j < y1 - y0; j++) {
                            rs_v4f v;
                            memcpy(&v, from0 + j * rn2, sizeof v);
                            memcpy(to0 + j * BLK, &v, sizeof v);
                            const rs_v4i up = v > mv; /* v > m ? v : m, lane by lane */
                            mv = (rs_v4f)(((rs_v4i)v & up) | ((rs_v4i)mv & ~up));
                            av += v - v;
                        }
                        if (mx) fold_lanes(mx + (p0 + q) * (C + 1), ch, C, mv, av);
                        continue;
                    }
#endif
                    float m[BLK] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, acc[BLK] = {0, 0, 0, 0};
                    for (int64_t j = 0; j < y1 - y0; j++) {
                        const float *restrict from = from0 + j * rn2;
                        float *restrict to = to0 + j * BLK;
                        for (int64_t l = 0; l < len[q]; l++) {
                            to[l] = from[l];
                            m[l] = from[l] > m[l] ? from[l] : m[l];
                            acc[l] += from[l] - from[l];
                        }
                    }
                    if (!mx) continue;
                    float *mo = mx + (p0 + q) * (C + 1);
                    for (int l = 0; l < BLK; l++) {
                        mo[ch] = m[l] > mo[ch] ? m[l] : mo[ch];
                        if (acc[l] != 0) mo[C] = 1;
                    }
                }
            }
        }
    }
}

int swi_resample_sink_feed(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3],
                           const float *data) {
    for (int a = 0; a < 3; a++)
        if (lo[a] < 0 || hi[a] > s->src[a] || lo[a] >= hi[a]) return 1;
    int64_t cap = 0, nready = 0, *ready = NULL;
    float *bounds = NULL; /* argmax: C per ready tile; NaN first where the tile is wild */
    const size_t bbytes = block_floats(s) * sizeof(float);
    const int amax = s->labels_fn != NULL;
    const int64_t C = s->channels;
    int64_t nbz = (hi[2] - 1) / BLK - lo[2] / BLK + 1, nblk = nbz;
    for (int a = 0; a < 2; a++) nblk *= (hi[a] - 1) / BLK - lo[a] / BLK + 1;
    float **dst = calloc((size_t)nblk, sizeof *dst); /* per block of the region: where it goes */
    float *mx = amax ? malloc((size_t)nbz * (size_t)(C + 1) * sizeof *mx) : NULL;
    pthread_mutex_lock(&s->lock);
    if (s->failed || !dst || (amax && !mx)) goto fail_locked;
    /* 1. the blocks some tile still reads, allocated, and pinned (a reference) while the copy
     *    runs outside the lock: distinct regions write distinct voxels */
    int64_t eb = 0;
    for (int64_t x = lo[0] / BLK; x <= (hi[0] - 1) / BLK; x++)
        for (int64_t y = lo[1] / BLK; y <= (hi[1] - 1) / BLK; y++)
            for (int64_t z = lo[2] / BLK; z <= (hi[2] - 1) / BLK; z++, eb++) {
                int64_t bi = (x * s->nb[1] + y) * s->nb[2] + z;
                if (s->refs[bi] <= 0) continue;
                if (!s->blk[bi]) {
                    s->blk[bi] = malloc(bbytes);
                    if (!s->blk[bi]) goto fail_locked; /* pins stay: a failed sink is only freed */
                    s->held += bbytes;
                    if (s->held > s->peak) s->peak = s->held;
                    if (amax) {
                        float *m = s->blk[bi] + C * BLK3;
                        for (int64_t c = 0; c < C; c++) m[c] = -INFINITY;
                        m[C] = 0;
                    }
                }
                s->refs[bi]++;
                dst[eb] = s->blk[bi];
            }
    pthread_mutex_unlock(&s->lock);
    /* 2. the copies, a column of blocks at a time: their bounds folded in, their pins dropped */
    eb = 0;
    for (int64_t x = lo[0] / BLK; x <= (hi[0] - 1) / BLK; x++)
        for (int64_t y = lo[1] / BLK; y <= (hi[1] - 1) / BLK; y++, eb += nbz) {
            int any = 0;
            for (int64_t q = 0; q < nbz; q++) any |= dst[eb + q] != NULL;
            if (!any) continue;
            if (amax)
                for (int64_t q = 0; q < nbz; q++) {
                    for (int64_t c = 0; c < C; c++) mx[q * (C + 1) + c] = -INFINITY;
                    mx[q * (C + 1) + C] = 0;
                }
            copy_column(s, lo, hi, data, x, y, dst + eb, nbz, mx);
            pthread_mutex_lock(&s->lock);
            for (int64_t q = 0; q < nbz; q++) {
                if (!dst[eb + q]) continue;
                const int64_t bi = (x * s->nb[1] + y) * s->nb[2] + lo[2] / BLK + q;
                if (amax) {
                    float *to = s->blk[bi] + C * BLK3;
                    const float *m = mx + q * (C + 1);
                    for (int64_t c = 0; c < C; c++) to[c] = m[c] > to[c] ? m[c] : to[c];
                    if (m[C] != 0) to[C] = 1;
                }
                if (--s->refs[bi] == 0) {
                    free(s->blk[bi]);
                    s->blk[bi] = NULL;
                    s->held -= bbytes;
                }
            }
            pthread_mutex_unlock(&s->lock);
        }
    free(dst);
    free(mx);
    dst = NULL;
    mx = NULL;
    /* 3. count down the tiles it reaches */
    pthread_mutex_lock(&s->lock);
    if (s->failed) goto fail_locked;
    const int64_t rid = ++s->region_id;
    for (int64_t x = lo[0] / CELL; x <= (hi[0] - 1) / CELL; x++)
        for (int64_t y = lo[1] / CELL; y <= (hi[1] - 1) / CELL; y++)
            for (int64_t z = lo[2] / CELL; z <= (hi[2] - 1) / CELL; z++) {
                int64_t c = (x * s->ng[1] + y) * s->ng[2] + z;
                for (int64_t e = s->cell_start[c]; e < s->cell_start[c + 1]; e++) {
                    int64_t t = s->cell_tiles[e];
                    if (s->stamp[t] == rid || s->done[t]) continue;
                    s->stamp[t] = rid;
                    int64_t got = overlap_voxels(s->tbox + 6 * t, lo, hi);
                    if (got == 0) continue;
                    s->missing[t] -= got;
                    if (s->missing[t] == 0) {
                        if (nready == cap) {
                            cap = cap ? 2 * cap : 64;
                            int64_t *r = realloc(ready, (size_t)cap * sizeof *r);
                            if (!r) goto fail_locked;
                            ready = r;
                            if (amax) {
                                float *b = realloc(bounds, (size_t)cap * (size_t)C * sizeof *b);
                                if (!b) goto fail_locked;
                                bounds = b;
                            }
                        }
                        if (amax && tile_bounds(s, t, bounds + nready * C)) bounds[nready * C] = NAN;
                        ready[nready++] = t;
                    }
                }
            }
    pthread_mutex_unlock(&s->lock);

    /* 4. the tiles it completed, outside the lock: their blocks are whole and stay */
    int failed = 0;
    if (nready > 0) {
        const size_t tv = (size_t)s->tl[0] * (size_t)s->tl[1] * (size_t)s->tl[2];
        const size_t ttaps = (size_t)s->tl[0] + (size_t)s->tl[1] + (size_t)s->tl[2];
        /* the largest source box of a tile (its margins and taps on either side), and the
         * most blocks its rows span */
        const size_t b01 = (size_t)s->maxbox[0] * (size_t)s->maxbox[1];
        const size_t nzb = (size_t)(s->maxbox[2] + 2) / BLK + 1;
        tile_work w = {0};
        w.taps = malloc(tv * sizeof(tap8));
        w.buf = amax ? NULL : malloc(tv * (size_t)C * sizeof(float));
        w.best = amax ? malloc(tv * sizeof(float)) : NULL;
        w.label = amax ? malloc(tv * sizeof(uint16_t)) : NULL;
        w.order = amax ? malloc((size_t)C * sizeof(int32_t)) : NULL;
        w.tmp = amax ? malloc((size_t)C * sizeof(int32_t)) : NULL;
        w.lab = amax ? malloc(tv * sizeof(int32_t)) : NULL;
        w.g = malloc(b01 * (nzb * BLK > PERM_ROW ? nzb * BLK : PERM_ROW) * sizeof(float));
        w.rows = malloc(2 * b01 * nzb * sizeof(*w.rows));
        w.p1 = malloc(b01 * (size_t)s->tl[2] * sizeof(float));
        w.p2 = malloc((size_t)s->maxbox[0] * (size_t)s->tl[1] * (size_t)s->tl[2] * sizeof(float));
        w.out = malloc(tv * sizeof(float));
        w.ti = malloc(2 * ttaps * sizeof(int32_t));
        w.tf = malloc(ttaps * sizeof(float));
        if (!w.taps || !w.g || !w.rows || !w.p1 || !w.p2 || !w.out || !w.ti || !w.tf ||
            (amax ? !w.best || !w.label || !w.order || !w.tmp || !w.lab : !w.buf))
            failed = 1;
        for (int64_t r = 0; r < nready && !failed; r++) {
            const float *ub = amax ? bounds + r * C : NULL;
            if (ub && isnan(ub[0])) ub = NULL; /* wild: every class, in index order */
            failed = emit_tile(s, ready[r], ub, &w) != 0;
        }
        free(w.taps);
        free(w.buf);
        free(w.best);
        free(w.label);
        free(w.order);
        free(w.tmp);
        free(w.lab);
        free(w.g);
        free(w.rows);
        free(w.p1);
        free(w.p2);
        free(w.out);
        free(w.ti);
        free(w.tf);
    }
    /* 5. release what they read */
    pthread_mutex_lock(&s->lock);
    for (int64_t r = 0; r < nready; r++) {
        int64_t t = ready[r];
        const int64_t *b = s->tbox + 6 * t;
        s->done[t] = 1;
        s->emitted++;
        for (int64_t x = b[0] / BLK; x <= (b[3] - 1) / BLK; x++)
            for (int64_t y = b[1] / BLK; y <= (b[4] - 1) / BLK; y++)
                for (int64_t z = b[2] / BLK; z <= (b[5] - 1) / BLK; z++) {
                    int64_t bi = (x * s->nb[1] + y) * s->nb[2] + z;
                    if (--s->refs[bi] == 0 && s->blk[bi]) {
                        free(s->blk[bi]);
                        s->blk[bi] = NULL;
                        s->held -= bbytes;
                    }
                }
    }
    if (failed) s->failed = 1;
    pthread_mutex_unlock(&s->lock);
    free(ready);
    free(bounds);
    return failed;

fail_locked:
    s->failed = 1;
    pthread_mutex_unlock(&s->lock);
    free(dst);
    free(mx);
    free(ready);
    free(bounds);
    return 1;
}

swi_status swi_resample_sink_finish(swi_resample_sink *s, char *err, size_t errlen) {
    if (s->failed) {
        rs__err(err, errlen, "resampling back to the input grid failed");
        return SWI_ERR_CALLBACK;
    }
    if (s->emitted != s->ntiles) {
        rs__err(err, errlen, "resampling back: %lld of %lld output tiles never had their inputs",
                (long long)(s->ntiles - s->emitted), (long long)s->ntiles);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

size_t swi_resample_sink_peak_bytes(const swi_resample_sink *s) { return s->peak; }

size_t swi_resample_sink_fixed_bytes(const swi_resample_sink *s) { return s->fixed; }

size_t swi_resample_sink_plan_bytes(const int64_t src_size[3], const int64_t out_size[3],
                                    const double map[3][4], int64_t channels, int tile, int outer) {
    int tl[3];
    tile_shape(tile, tl);
    if (outer < 0 || outer > 2) outer = 0;
    /* a tile's box along the outer axis (its extent and the upper tap), in whole blocks:
     * the tiles straddling the edge of a sweep hold a slab that thick until the next one */
    double ext = 0;
    for (int k = 0; k < 3; k++) ext += fabs(map[outer][k]) * (double)(tl[k] - 1);
    int64_t slab = (ceil_div((int64_t)ceil(ext) + 2, BLK) + 1) * BLK;
    if (slab > src_size[outer]) slab = src_size[outer];
    size_t plane = 1;
    for (int a = 0; a < 3; a++)
        if (a != outer) plane *= (size_t)(ceil_div(src_size[a], BLK) * BLK);
    size_t tiles = 1, blocks = 1;
    for (int a = 0; a < 3; a++) {
        tiles *= (size_t)ceil_div(out_size[a], tl[a]);
        blocks *= (size_t)ceil_div(src_size[a], BLK);
    }
    return (size_t)slab * plane * (size_t)(channels + 1) * sizeof(float) +
           tiles * (8 * sizeof(int64_t) + 1 + 8 * sizeof(int64_t)) +
           blocks * (sizeof(float *) + sizeof(int32_t));
}
