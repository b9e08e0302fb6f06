/* kernels.c -- the resampling sink's loops (sink_internal.h): a tile interpolated from its
 * blocks, separably (three passes) where the map is axis-aligned and by eight taps a voxel
 * otherwise, reduced to labels in argmax mode; and a fed region copied into its blocks.
 * Everything here runs outside the sink's lock, reading blocks the bookkeeping has pinned. */
#include "resample_internal.h"
#include "sink_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
                    rs__sink_tap(s, r, rs__coord(s, r, i, j, k), &tp[r][0], &tp[r][1], &taps[o].f[r]);
                for (int m = 0; m < 8; m++) {
                    int64_t x = tp[0][(m >> 2) & 1], y = tp[1][(m >> 1) & 1], z = tp[2][m & 1];
                    int64_t bi = ((x / BLK) * s->nb[1] + y / BLK) * s->nb[2] + z / BLK;
                    taps[o].q[m] = s->blk[bi] + rs__at(s, x, y, z);
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
/* GCC vector types: pass 1's permutes (see pass1) and the copies' bounds (rs__copy_column) */
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
            const double c = s->halfgrid[r] >= 0 ? ((double)(lo[r] + o) + 0.5) * s->map[r][r] - 0.5
                                                 : s->map[r][r] * (double)(lo[r] + o) + s->map[r][3];
            rs__sink_tap(s, r, c, &a0, &a1, &st->f[r][o]);
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
            const int64_t in = rs__at(s, x, y, 0);
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
    rs__tile_out_box(s, t, lo, hi);
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

void rs__copy_column(const swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], const float *data,
                     int64_t bx, int64_t by, float *const *dst, int64_t nz, float *restrict mx) {
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
                            __builtin_prefetch(dst[p0 + q] + rs__at(s, i, 0, 0) + (ch + 1) * CSTRIDE, 1);
            }
            /* block by block along the column: a line of each (one x, BLK y) at a time, the
             * region's BLK rows read side by side */
            for (int64_t i = x0; i < x1; i++) {
                const float *rows = data + ch * rv + ((i - lo[0]) * rn1 + (y0 - lo[1])) * rn2;
                const int64_t in = rs__at(s, i, y0, 0) + ch * CSTRIDE;
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

static void work_free(tile_work *w) {
    free(w->taps);
    free(w->buf);
    free(w->best);
    free(w->label);
    free(w->order);
    free(w->tmp);
    free(w->lab);
    free(w->g);
    free(w->rows);
    free(w->p1);
    free(w->p2);
    free(w->out);
    free(w->ti);
    free(w->tf);
}

/* room for any tile of s: 0, or -1 when memory ran out (w then holds what was allocated) */
static int work_alloc(const swi_resample_sink *s, tile_work *w) {
    const int amax = s->labels_fn != NULL;
    const int64_t C = s->channels;
    const size_t tv = (size_t)s->tl[0] * (size_t)s->tl[1] * (size_t)s->tl[2];
    const size_t ttaps = (size_t)s->tl[0] + (size_t)s->tl[1] + (size_t)s->tl[2];
    /* the largest source box of a tile (its margins and taps on either side), and the
     * most blocks its rows span */
    const size_t b01 = (size_t)s->maxbox[0] * (size_t)s->maxbox[1];
    const size_t nzb = (size_t)(s->maxbox[2] + 2) / BLK + 1;
    *w = (tile_work){0};
    w->taps = malloc(tv * sizeof(tap8));
    w->buf = amax ? NULL : malloc(tv * (size_t)C * sizeof(float));
    w->best = amax ? malloc(tv * sizeof(float)) : NULL;
    w->label = amax ? malloc(tv * sizeof(uint16_t)) : NULL;
    w->order = amax ? malloc((size_t)C * sizeof(int32_t)) : NULL;
    w->tmp = amax ? malloc((size_t)C * sizeof(int32_t)) : NULL;
    w->lab = amax ? malloc(tv * sizeof(int32_t)) : NULL;
    w->g = malloc(b01 * (nzb * BLK > PERM_ROW ? nzb * BLK : PERM_ROW) * sizeof(float));
    w->rows = malloc(2 * b01 * nzb * sizeof(*w->rows));
    w->p1 = malloc(b01 * (size_t)s->tl[2] * sizeof(float));
    w->p2 = malloc((size_t)s->maxbox[0] * (size_t)s->tl[1] * (size_t)s->tl[2] * sizeof(float));
    w->out = malloc(tv * sizeof(float));
    w->ti = malloc(2 * ttaps * sizeof(int32_t));
    w->tf = malloc(ttaps * sizeof(float));
    if (!w->taps || !w->g || !w->rows || !w->p1 || !w->p2 || !w->out || !w->ti || !w->tf ||
        (amax ? !w->best || !w->label || !w->order || !w->tmp || !w->lab : !w->buf))
        return -1;
    return 0;
}

int rs__emit_tiles(const swi_resample_sink *s, const int64_t *tiles, const float *bounds, int64_t n) {
    if (n == 0) return 0;
    tile_work w;
    int failed = work_alloc(s, &w) != 0;
    for (int64_t r = 0; r < n && !failed; r++) {
        const float *ub = bounds ? bounds + r * s->channels : NULL;
        if (ub && isnan(ub[0])) ub = NULL; /* wild: every class, in index order */
        failed = emit_tile(s, tiles[r], ub, &w) != 0;
    }
    work_free(&w);
    return failed;
}
