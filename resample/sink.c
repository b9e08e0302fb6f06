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
 * outside it too, on the thread that fed it. This file is the bookkeeping; the copy and the
 * interpolation are kernels.c's. */
#include "swi_resample.h"

#include "resample_internal.h"
#include "sink_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* the source box an output box reads, with a voxel of margin, clamped; along a nearest axis
 * (nearest may be NULL) exactly the indices it rounds to: its coordinate follows one output
 * axis, so the corners hold its extremes, computed as the kernels compute them */
static void read_box(const swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], int64_t blo[3],
                     int64_t bhi[3]) {
    const int64_t *src = s->src;
    const double(*m)[4] = s->map;
    for (int r = 0; r < 3; r++) {
        double mn = INFINITY, mx = -INFINITY;
        for (int c = 0; c < 8; c++) {
            const int64_t i = (c & 4) ? hi[0] - 1 : lo[0], j = (c & 2) ? hi[1] - 1 : lo[1],
                          k = (c & 1) ? hi[2] - 1 : lo[2];
            double v = s->halfgrid[r] >= 0
                           ? rs__coord(s, r, i, j, k)
                           : m[r][0] * (double)i + m[r][1] * (double)j + m[r][2] * (double)k + m[r][3];
            mn = fmin(mn, v);
            mx = fmax(mx, v);
        }
        double top = (double)(src[r] - 1);
        if (s->nearest[r]) {
            int64_t a, b;
            float f;
            rs__tap_nearest(mn, src[r], &a, &a, &f);
            rs__tap_nearest(mx, src[r], &b, &b, &f);
            blo[r] = a;
            bhi[r] = b + 1;
            continue;
        }
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
    for (int64_t b = 0; b < s->nspare; b++) free(s->spare[b]);
    free(s->spare);
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

/* The source box tile t waits for, b[0..3) lo and b[3..6) hi. */
static void tile_source_box(const swi_resample_sink *s, int64_t t, int64_t *b) {
    int64_t lo[3], hi[3];
    rs__tile_out_box(s, t, lo, hi);
    read_box(s, lo, hi, b, b + 3);
    /* whole block rows along k: a tile copies block rows whole (kernels.c, sep_passes12), so it
     * waits for every voxel they hold -- none is then being fed while it is copied */
    b[2] = b[2] / BLK * BLK;
    b[5] = ceil_div(b[5], BLK) * BLK < s->src[2] ? ceil_div(b[5], BLK) * BLK : s->src[2];
}

/* Whether tile t's output box meets [lo, hi). */
static int tile_meets(const swi_resample_sink *s, int64_t t, const int64_t lo[3], const int64_t hi[3]) {
    int64_t tlo[3], thi[3];
    rs__tile_out_box(s, t, tlo, thi);
    for (int a = 0; a < 3; a++)
        if (thi[a] <= lo[a] || tlo[a] >= hi[a]) return 0;
    return 1;
}

/* The union of the source boxes of the tiles meeting [lo, hi) into src_lo/src_hi (all 0
 * when none does); *n receives how many do. */
static void union_boxes(const swi_resample_sink *s, const int64_t *tbox, const int64_t lo[3],
                        const int64_t hi[3], int64_t src_lo[3], int64_t src_hi[3], int64_t *n) {
    *n = 0;
    for (int a = 0; a < 3; a++) src_lo[a] = src_hi[a] = 0;
    for (int64_t t = 0; t < s->ntiles; t++) {
        if (!tile_meets(s, t, lo, hi)) continue;
        int64_t own[6];
        const int64_t *b = tbox ? tbox + 6 * t : own;
        if (!tbox) tile_source_box(s, t, own);
        for (int a = 0; a < 3; a++) {
            src_lo[a] = *n == 0 || b[a] < src_lo[a] ? b[a] : src_lo[a];
            src_hi[a] = *n == 0 || b[3 + a] > src_hi[a] ? b[3 + a] : src_hi[a];
        }
        ++*n;
    }
}

/* Each tile's source box, what it waits for and the largest box; each block's count of the
 * tiles reading it; each cell's count of the tiles touching it (cell_start[c + 1]). Returns
 * the number of (cell, tile) entries. */
static int64_t count_tiles(swi_resample_sink *s) {
    int64_t entries = 0;
    for (int64_t t = 0; t < s->ntiles; t++) {
        int64_t *b = s->tbox + 6 * t;
        tile_source_box(s, t, b);
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
    return entries;
}

/* The tiles touching each cell: cell_start made offsets, cell_tiles filled. -1 when memory
 * ran out. */
static int list_cells(swi_resample_sink *s, int64_t entries) {
    for (int64_t c = 0; c < s->ncells; c++) s->cell_start[c + 1] += s->cell_start[c];
    s->cell_tiles = malloc((size_t)(entries > 0 ? entries : 1) * sizeof *s->cell_tiles);
    int64_t *fill = calloc((size_t)s->ncells, sizeof *fill);
    if (!s->cell_tiles || !fill) {
        free(fill);
        return -1;
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
    return 0;
}

/* Tiles: their boxes, what they wait for, the blocks they read, the cells they touch (from
 * scratch: the nearest axes change the boxes). -1 when memory ran out. */
static int index_tiles(swi_resample_sink *s) {
    memset(s->refs, 0, (size_t)s->nblocks * sizeof *s->refs);
    memset(s->cell_start, 0, ((size_t)s->ncells + 1) * sizeof *s->cell_start);
    memset(s->maxbox, 0, sizeof s->maxbox);
    free(s->cell_tiles);
    s->cell_tiles = NULL;
    const int64_t entries = count_tiles(s);
    if (list_cells(s, entries) != 0) return -1;
    s->fixed = sizeof *s + (size_t)s->ntiles * (8 * sizeof(int64_t) + 1) +
               (size_t)s->nblocks * (2 * sizeof(float *) + sizeof(int32_t)) +
               ((size_t)s->ncells + 1 + (size_t)entries) * sizeof(int64_t);
    return 0;
}

swi_status swi_resample_sink_create(const int64_t src_size[3], const int64_t out_size[3],
                                    const double map[3][4], int64_t channels, int tile,
                                    swi_resample_emit_fn emit, void *user, swi_resample_sink **out, char *err,
                                    size_t errlen) {
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
    for (int a = 0; a < 3; a++) s->halfgrid[a] = -1;
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
    s->spare = malloc((size_t)s->nblocks * sizeof *s->spare);
    s->refs = calloc((size_t)s->nblocks, sizeof *s->refs);
    s->cell_start = calloc((size_t)s->ncells + 1, sizeof *s->cell_start);
    if (!s->tbox || !s->missing || !s->stamp || !s->done || !s->blk || !s->spare || !s->refs ||
        !s->cell_start) {
        swi_resample_sink_free(s);
        rs__err(err, errlen, "out of memory for the resampling sink's tiles");
        return SWI_ERR_NOMEM;
    }
    if (index_tiles(s) != 0) {
        swi_resample_sink_free(s);
        rs__err(err, errlen, "out of memory for the resampling sink's index");
        return SWI_ERR_NOMEM;
    }
    *out = s;
    return SWI_OK;
}

swi_status swi_resample_sink_nearest(swi_resample_sink *s, int source_axis, char *err, size_t errlen) {
    if (source_axis < 0 || source_axis > 2 || s->region_id != 0) {
        rs__err(err, errlen, "swi_resample_sink_nearest: %s",
                s->region_id != 0 ? "the sink has been fed already" : "source_axis must be 0..2");
        return SWI_ERR_INVALID_ARG;
    }
    int reads = 0, from = -1;
    for (int c = 0; c < 3; c++)
        if (s->map[source_axis][c] != 0) {
            reads++;
            from = c;
        }
    if (reads > 1) {
        rs__err(err, errlen, "swi_resample_sink_nearest: source axis %d follows more than one output axis",
                source_axis);
        return SWI_ERR_INVALID_ARG;
    }
    s->nearest[source_axis] = 1;
    /* nnU-Net's map: the coordinate rounded as nnU-Net rounds it, so that ties agree */
    const double *row = s->map[source_axis];
    if (from >= 0 && row[3] == 0.5 * row[from] - 0.5) s->halfgrid[source_axis] = (signed char)from;
    /* the tiles read fewer source voxels along that axis: their boxes and indexes again */
    if (index_tiles(s) != 0) {
        s->failed = 1;
        rs__err(err, errlen, "out of memory for the resampling sink's index");
        return SWI_ERR_NOMEM;
    }
    return SWI_OK;
}

/* A block: channels x BLK3 scores (laid out as rs__at() says); in argmax mode then each class's
 * largest score fed so far (NaNs skipped) and a flag: 1 once a non-finite score was fed. */
static size_t block_floats(const swi_resample_sink *s) {
    return (size_t)s->channels * BLK3 + (s->labels_fn ? (size_t)s->channels + 1 : 0);
}

swi_status swi_resample_sink_argmax(swi_resample_sink *s, swi_resample_labels_fn fn, void *user) {
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

/* The tiles a region completed, and in argmax mode their bounds: C per tile, NaN first where
 * the tile is wild. */
typedef struct ready_list {
    int64_t *tiles, n, cap;
    float *bounds;
} ready_list;

/* Drop a reference to block bi (a pin, or a tile that read it); the last frees it. Under the
 * lock. */
static void unref_block(swi_resample_sink *s, int64_t bi, size_t bbytes) {
    if (--s->refs[bi] == 0 && s->blk[bi]) {
        s->spare[s->nspare++] = s->blk[bi]; /* room: a spare was a held block */
        s->blk[bi] = NULL;
        s->held -= bbytes;
    }
}

/* Step 1, under the lock: the blocks of region (lo, hi) that some tile still reads, allocated,
 * and pinned (a reference) while the copy runs outside the lock -- distinct regions write
 * distinct voxels. dst [the region's blocks] gets where each goes (NULL: none reads it).
 * Returns -1 when memory ran out (the pins stay: a failed sink is only freed). */
static int pin_blocks(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], size_t bbytes,
                      float **dst) {
    const int64_t C = s->channels;
    int64_t eb = 0;
    for (int64_t x = lo[0] / BLK; x <= (hi[0] - 1) / BLK; x++)
        for (int64_t y = lo[1] / BLK; y <= (hi[1] - 1) / BLK; y++)
            for (int64_t z = lo[2] / BLK; z <= (hi[2] - 1) / BLK; z++, eb++) {
                int64_t bi = (x * s->nb[1] + y) * s->nb[2] + z;
                if (s->refs[bi] <= 0) continue;
                if (!s->blk[bi]) {
                    s->blk[bi] = s->nspare ? s->spare[--s->nspare] : malloc(bbytes);
                    if (!s->blk[bi]) return -1;
                    s->held += bbytes;
                    if (s->held > s->peak) s->peak = s->held;
                    if (s->labels_fn) {
                        float *m = s->blk[bi] + C * BLK3;
                        for (int64_t c = 0; c < C; c++) m[c] = -INFINITY;
                        m[C] = 0;
                    }
                }
                s->refs[bi]++;
                dst[eb] = s->blk[bi];
            }
    return 0;
}

/* Step 2, outside the lock: the region copied into its pinned blocks dst [nbz per column], a
 * column of blocks at a time; then, under the lock, the column's bounds folded into its blocks
 * (argmax mode: mx [nbz, C + 1] is the room for them) and its pins dropped. */
static void copy_region(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], const float *data,
                        float *const *dst, int64_t nbz, float *mx, size_t bbytes) {
    const int64_t C = s->channels;
    int64_t eb = 0;
    for (int64_t x = lo[0] / BLK; x <= (hi[0] - 1) / BLK; x++)
        for (int64_t y = lo[1] / BLK; y <= (hi[1] - 1) / BLK; y++, eb += nbz) {
            int any = 0;
            for (int64_t q = 0; q < nbz; q++) any |= dst[eb + q] != NULL;
            if (!any) continue;
            if (mx)
                for (int64_t q = 0; q < nbz; q++) {
                    for (int64_t c = 0; c < C; c++) mx[q * (C + 1) + c] = -INFINITY;
                    mx[q * (C + 1) + C] = 0;
                }
            rs__copy_column(s, lo, hi, data, x, y, dst + eb, nbz, mx);
            pthread_mutex_lock(&s->lock);
            for (int64_t q = 0; q < nbz; q++) {
                if (!dst[eb + q]) continue;
                const int64_t bi = (x * s->nb[1] + y) * s->nb[2] + lo[2] / BLK + q;
                if (mx) {
                    float *to = s->blk[bi] + C * BLK3;
                    const float *m = mx + q * (C + 1);
                    for (int64_t c = 0; c < C; c++) to[c] = m[c] > to[c] ? m[c] : to[c];
                    if (m[C] != 0) to[C] = 1;
                }
                unref_block(s, bi, bbytes);
            }
            pthread_mutex_unlock(&s->lock);
        }
}

/* Tile t is complete: onto r, with its bounds in argmax mode. Under the lock; -1 when memory
 * ran out. */
static int ready_push(const swi_resample_sink *s, ready_list *r, int64_t t) {
    const int64_t C = s->channels;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        int64_t *tiles = realloc(r->tiles, (size_t)r->cap * sizeof *tiles);
        if (!tiles) return -1;
        r->tiles = tiles;
        if (s->labels_fn) {
            float *b = realloc(r->bounds, (size_t)r->cap * (size_t)C * sizeof *b);
            if (!b) return -1;
            r->bounds = b;
        }
    }
    if (s->labels_fn && tile_bounds(s, t, r->bounds + r->n * C)) r->bounds[r->n * C] = NAN;
    r->tiles[r->n++] = t;
    return 0;
}

/* Step 3, under the lock: count down the tiles region (lo, hi) reaches (through the cells it
 * touches, each tile once); those it completes onto r. -1 when memory ran out. */
static int count_down(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], ready_list *r) {
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
                    if (s->missing[t] == 0 && ready_push(s, r, t) != 0) return -1;
                }
            }
    return 0;
}

/* Step 5, under the lock: the emitted tiles marked done and their blocks' references
 * dropped. */
static void release_tiles(swi_resample_sink *s, const ready_list *r, size_t bbytes) {
    for (int64_t i = 0; i < r->n; i++) {
        int64_t t = r->tiles[i];
        const int64_t *b = s->tbox + 6 * t;
        s->done[t] = 1;
        s->emitted++;
        for (int64_t x = b[0] / BLK; x <= (b[3] - 1) / BLK; x++)
            for (int64_t y = b[1] / BLK; y <= (b[4] - 1) / BLK; y++)
                for (int64_t z = b[2] / BLK; z <= (b[5] - 1) / BLK; z++)
                    unref_block(s, (x * s->nb[1] + y) * s->nb[2] + z, bbytes);
    }
}

int swi_resample_sink_feed(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3],
                           const float *data) {
    for (int a = 0; a < 3; a++)
        if (lo[a] < 0 || hi[a] > s->src[a] || lo[a] >= hi[a]) return 1;
    const size_t bbytes = block_floats(s) * sizeof(float);
    const int amax = s->labels_fn != NULL;
    int64_t nbz = (hi[2] - 1) / BLK - lo[2] / BLK + 1, nblk = nbz;
    for (int a = 0; a < 2; a++) nblk *= (hi[a] - 1) / BLK - lo[a] / BLK + 1;
    float **dst = calloc((size_t)nblk, sizeof *dst); /* per block of the region: where it goes */
    float *mx = amax ? malloc((size_t)nbz * (size_t)(s->channels + 1) * sizeof *mx) : NULL;
    ready_list r = {0};
    pthread_mutex_lock(&s->lock);
    if (s->failed || !dst || (amax && !mx) || pin_blocks(s, lo, hi, bbytes, dst) != 0) goto fail_locked;
    pthread_mutex_unlock(&s->lock);
    copy_region(s, lo, hi, data, dst, nbz, mx, bbytes);
    free(dst);
    free(mx);
    dst = NULL;
    mx = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->failed || count_down(s, lo, hi, &r) != 0) goto fail_locked;
    pthread_mutex_unlock(&s->lock);
    /* step 4, outside the lock: the tiles it completed, their blocks whole and pinned */
    const int failed = rs__emit_tiles(s, r.tiles, r.bounds, r.n);
    pthread_mutex_lock(&s->lock);
    release_tiles(s, &r, bbytes);
    if (failed) s->failed = 1;
    pthread_mutex_unlock(&s->lock);
    free(r.tiles);
    free(r.bounds);
    return failed;

fail_locked:
    s->failed = 1;
    pthread_mutex_unlock(&s->lock);
    free(dst);
    free(mx);
    free(r.tiles);
    free(r.bounds);
    return 1;
}

static int box_ok(const int64_t size[3], const int64_t lo[3], const int64_t hi[3]) {
    for (int a = 0; a < 3; a++)
        if (lo[a] < 0 || hi[a] > size[a] || lo[a] >= hi[a]) return 0;
    return 1;
}

swi_status swi_resample_sink_restrict(swi_resample_sink *s, const int64_t out_lo[3], const int64_t out_hi[3],
                                      int64_t src_lo[3], int64_t src_hi[3]) {
    if (s->region_id != 0 || !box_ok(s->out, out_lo, out_hi)) return SWI_ERR_INVALID_ARG;
    int64_t n;
    union_boxes(s, s->tbox, out_lo, out_hi, src_lo, src_hi, &n);
    const size_t bbytes = block_floats(s) * sizeof(float);
    for (int64_t t = 0; t < s->ntiles; t++) {
        if (s->done[t] || tile_meets(s, t, out_lo, out_hi)) continue;
        /* never emitted, counted as if it were: its blocks lose its reference (none is
         * allocated yet, so none is freed) */
        const int64_t *b = s->tbox + 6 * t;
        s->done[t] = 1;
        s->emitted++;
        for (int64_t x = b[0] / BLK; x <= (b[3] - 1) / BLK; x++)
            for (int64_t y = b[1] / BLK; y <= (b[4] - 1) / BLK; y++)
                for (int64_t z = b[2] / BLK; z <= (b[5] - 1) / BLK; z++)
                    unref_block(s, (x * s->nb[1] + y) * s->nb[2] + z, bbytes);
    }
    return SWI_OK;
}

swi_status swi_resample_sink_source_box(const int64_t src_size[3], const int64_t out_size[3],
                                        const double map[3][4], int tile, const int64_t out_lo[3],
                                        const int64_t out_hi[3], int64_t src_lo[3], int64_t src_hi[3]) {
    if (tile < 0 || tile > 1024) return SWI_ERR_INVALID_ARG;
    for (int a = 0; a < 3; a++)
        if (src_size[a] < 1 || out_size[a] < 1 || src_size[a] > SWI_MAX_AXIS || out_size[a] > SWI_MAX_AXIS)
            return SWI_ERR_INVALID_ARG;
    if (!box_ok(out_size, out_lo, out_hi)) return SWI_ERR_INVALID_ARG;
    /* the bookkeeping a sink of these grids would make, without its tables */
    swi_resample_sink s;
    memset(&s, 0, sizeof s);
    memcpy(s.src, src_size, sizeof s.src);
    memcpy(s.out, out_size, sizeof s.out);
    memcpy(s.map, map, sizeof s.map);
    for (int a = 0; a < 3; a++) s.halfgrid[a] = -1;
    tile_shape(tile, s.tl);
    s.ntiles = 1;
    for (int a = 0; a < 3; a++) {
        s.nt[a] = ceil_div(out_size[a], s.tl[a]);
        s.ntiles *= s.nt[a];
    }
    int64_t n;
    union_boxes(&s, NULL, out_lo, out_hi, src_lo, src_hi, &n);
    return SWI_OK;
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
           blocks * (2 * sizeof(float *) + sizeof(int32_t));
}
