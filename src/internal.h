/*
 * internal.h -- shared declarations of libswi's modules. Not installed.
 *
 * Internally every problem has exactly three spatial axes: a d-dimensional one is
 * embedded as [1, ..., 1, *size] (leading unit axes with roi 1), so every loop is
 * written once. `user_dims` remembers d for messages and the public API.
 */
#ifndef SWI_INTERNAL_H
#define SWI_INTERNAL_H

#include "swi.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NDIM 4
#define SWI_PERMS 24 /* orders of NDIM axes */

/* Hot kernels are compiled twice on x86-64 (AVX2 and baseline) and picked at load
 * time: the one dispatch point for SIMD, no intrinsics in the code. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(SWI_NO_CLONES) && !defined(__SANITIZE_ADDRESS__)
#define SWI_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define SWI_KERNEL
#endif

/* printf into err (errlen bytes; err NULL or errlen 0: nothing), then return st: the one
 * line a function that fails leaves its caller. */
static inline swi_status swi__put_err(char *err, size_t errlen, swi_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static inline swi_status swi__put_err(char *err, size_t errlen, swi_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ---- alloc.c: every library allocation goes through here (fault injection) ---- */
void *swi__malloc(size_t bytes);
void *swi__calloc(size_t n, size_t size);
void swi__free(void *p);
/* Large buffers: page-backed, released to the system on free; pass the same size. */
void *swi__big_alloc(size_t bytes);
/* Fresh zeroed pages straight from the system (huge pages advised from 2 MiB; unix). */
void *swi__map(size_t bytes);
/* true when fault injection says this allocation fails */
bool swi__fault_point(void);
void swi__big_free(void *p, size_t bytes);
/* Overflow-checked arithmetic: return false on overflow. */
bool swi__mul_size(size_t a, size_t b, size_t *out);
bool swi__add_size(size_t a, size_t b, size_t *out);
bool swi__mul_i64(int64_t a, int64_t b, int64_t *out);
/* Grow *arr (of *cap elements of `elem` bytes, contents kept) to hold at least `need`;
 * returns 0 when out of memory (the array is then unchanged). */
int swi__grow(void **arr, size_t *cap, size_t need, size_t elem);

/* ---- status.c: the context's error message ---- */
#define SWI_ERRMSG_LEN 512
swi_status swi__fail(swi_ctx *ctx, swi_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void swi__clear_error(swi_ctx *ctx);
/* Human size "1.25 GiB" into buf. */

/* ---- layout.c: pure geometry ---- */
typedef struct axis_grid {
    int64_t n_win;    /* windows along this axis */
    int64_t *win_lo;  /* [n_win] window start in the head's padded grid */
    int64_t n_cells;  /* cells inside the crop along this axis */
    int64_t *cell_lo; /* [n_cells] cell bounds in the head's padded grid */
    int64_t *cell_hi;
    int64_t *cell_wfirst; /* [n_cells] first window covering the cell */
    int64_t *cell_wcount; /* [n_cells] windows covering it (contiguous run) */
    int64_t *win_cfirst;  /* [n_win] first cell inside the window */
    int64_t *win_ccount;  /* [n_win] cells inside it (0 if it lies in the padding) */
} axis_grid;

typedef struct head_geom {
    int64_t channels;      /* 0 while unknown */
    int64_t win[NDIM];     /* head window size o_k */
    int64_t full[NDIM];    /* head padded grid floor(P_k * z_k) */
    int64_t crop_lo[NDIM]; /* first kept index of the padded grid */
    int64_t out[NDIM];     /* output (cropped) size */
    int64_t win_vox;       /* prod(win) */
    axis_grid ax[NDIM];
    int64_t n_cells;            /* prod(ax[k].n_cells) */
    int64_t part_cell_lo[NDIM]; /* cells of the part along each axis (all where not cut) */
    int64_t part_cell_hi[NDIM];
    size_t acc_bytes; /* bytes of one partial sum (the geom's) */
    float *weights;   /* [win] blending weights of this head */
    void *block;      /* one allocation holding the axis arrays */
} head_geom;

typedef struct geom {
    int user_dims;
    unsigned mirror;                      /* params.mirror_axes over the internal axes (bit a: axis a) */
    int passes;                           /* predictor runs per window: 2^(mirrored axes) */
    size_t acc_bytes;                     /* bytes of one partial sum: 4 (float32) or 2 (float16) */
    int reader;                           /* the input comes through a reader (data NULL) */
    int has_part;                         /* only the box [part_lo, part_hi) is computed */
    int part_cut[NDIM];                   /* the box is not the whole of this axis */
    int64_t part_lo[NDIM], part_hi[NDIM]; /* the box, per internal axis (input voxels) */
    int64_t batch, cin;
    int64_t size[NDIM], roi[NDIM], padded[NDIM], before[NDIM];
    double step[NDIM]; /* per internal axis, grid_count's step: the overlap, or nnU-Net's tile step */
    int64_t n_win[NDIM];
    int64_t *starts[NDIM]; /* window starts in padded coordinates */
    int64_t win_per_image;
    int64_t roi_vox, image_vox;
    int n_heads;
    head_geom heads[SWI_MAX_HEADS];
    float *weights; /* [roi] base importance map */
    void *starts_block;
} geom;

/* Validate params + input shape and fill the input side of g (starts, weights are
 * allocated). Heads are not built. */
swi_status swi__geom_init(swi_ctx *ctx, const swi_params *p, const swi_tensor *in, geom *g);
/* Build head h's grid for `channels` and user-dims `spatial` (window output size). */
swi_status swi__geom_head(swi_ctx *ctx, geom *g, int h, int64_t channels, const int64_t *user_spatial);
void swi__geom_free(geom *g);
/* Internal axis of user axis k. */
static inline int swi__axis(const geom *g, int k) { return NDIM - g->user_dims + k; }
/* Cell c of head hg lies in the part being computed (the part's edges cut cells). */
static inline int swi__cell_in_part(const geom *g, const head_geom *hg, const int64_t c[NDIM]) {
    for (int a = NDIM - g->user_dims; a < NDIM; a++)
        if (c[a] < hg->part_cell_lo[a] || c[a] >= hg->part_cell_hi[a]) return 0;
    return 1;
}
/* Window ta along cut axis a covers a cell of the part there. The cells along a cut axis
 * are the same for every head (a cut axis is never zoomed), so head 0's decide. */
static inline int swi__window_in_part_axis(const geom *g, int a, int64_t ta) {
    const head_geom *hg = &g->heads[0];
    const int64_t lo = hg->ax[a].win_cfirst[ta], hi = lo + hg->ax[a].win_ccount[ta];
    return lo < hg->part_cell_hi[a] && hi > hg->part_cell_lo[a];
}
/* Window t (grid coordinates) covers a cell of the part, so it runs: it meets the box
 * along every cut axis (cells are boxes, so that is meeting the box). */
static inline int swi__window_in_part(const geom *g, const int64_t t[NDIM]) {
    if (!g->has_part) return 1;
    for (int a = NDIM - g->user_dims; a < NDIM; a++)
        if (g->part_cut[a] && !swi__window_in_part_axis(g, a, t[a])) return 0;
    return 1;
}

/* ---- weights.c ---- */
swi_status swi__weights(swi_ctx *ctx, const swi_params *p, const int64_t roi[NDIM], float *out);
/* Nearest-exact resize of the importance map to a head's window size. */
void swi__weights_resize(const float *w, const int64_t roi[NDIM], const int64_t win[NDIM], float *out);

/* Input index of padded coordinate x along an axis of size s with `before` voxels of
 * padding, or -1 for "constant fill". Mirrors PyTorch's F.pad modes. */
int64_t swi__pad_index(int64_t x, int64_t s, int64_t before, swi_pad mode);

/* ---- gather.c ---- */
/* Copy the window at `start` of image `image` through the padding into dst [cin, *roi].
 * A reader input is read first into box (cin x roi floats). Returns non-zero when the
 * reader failed (its message in msg). */
int swi__gather(const geom *g, const swi_params *p, const swi_tensor *in, int64_t image,
                const int64_t start[NDIM], float *dst, int64_t *idx_scratch, float *box, char *msg,
                size_t msg_len);

/* ---- pool.c ---- */
typedef struct swi_pool swi_pool;
typedef void (*swi_item_fn)(void *arg, int64_t item, int worker);
typedef struct swi_phase {
    swi_item_fn fn;
    void *arg;
    int64_t n;
} swi_phase;
swi_status swi__pool_create(swi_pool **out, int threads);
/* Run the phases one after the other, items of one phase in parallel; returns at once. */
void swi__pool_submit(swi_pool *pool, const swi_phase *phases, int n_phases);
void swi__pool_wait(swi_pool *pool);
void swi__pool_destroy(swi_pool *pool);
int swi__cpu_count(void);

/* ---- reduce.c: consumers of finished scores ---- */
typedef struct reduce_scratch {
    float *best;  /* [chunk] running max */
    int32_t *arg; /* [chunk] running argmax */
    float *aux;   /* [chunk] sums */
    float *aux2;
    void *out; /* [chunk] reduced values (4 bytes each at most) */
} reduce_scratch;
/* Reduce scores [C, n] into out (n values of dtype). */
void swi__reduce(swi_reduce r, swi_dtype dt, const float *scores, int64_t channels, int64_t n,
                 reduce_scratch *rs, void *out);
/* Softmax over channels of scores [C, n] into out [C, n]. */
void swi__softmax(const float *scores, int64_t channels, int64_t n, reduce_scratch *rs, float *out);
size_t swi__dtype_size(swi_dtype dt);

/* ---- plan.c ---- */
typedef struct plan_choice {
    int order[NDIM]; /* internal axes, outermost first */
    int tail;        /* the last `tail` windows along the outermost axis are interleaved
                         (that axis innermost within them): where the last window was moved
                         back and overlaps more, this keeps its thick overlap from being
                         open across the whole cross-section at once */
    int sw;
    int pipeline;
    size_t frontier; /* planned peak of the partial sums (frontier.c's count) */
    size_t partial;  /* what the engine reserves for them: frontier + allocator allowance */
    int reuse_cache; /* window outputs kept for reuse (SWI_REUSE_ON) */
    size_t table;    /* entries of the frontier's sparse cell table, or 0: a dense table of every cell */
    size_t scratch;  /* bytes_scratch of this choice (the cell table included) */
} plan_choice;
/* Grid coordinates of the i-th window of an image in the processing order `c`. */
void swi__order_coords(const geom *g, const plan_choice *c, int64_t i, int64_t t[NDIM]);
/* keep != NULL: plan only keep's window order and tail (a run re-planned after its first
 * call goes on in the order it started with); its batch size and pipelining are chosen
 * again. */
swi_status swi__plan(swi_ctx *ctx, const swi_params *p, const geom *g, const swi_output *outs, int n_outs,
                     swi_plan *plan, plan_choice *choice, const plan_choice *keep);
/* Cells of one window in one axis-0 row of cells, at most, over all heads and windows:
 * the entries of each worker's accumulation table (SWI_ACC_SEG_BYTES each). */
size_t swi__seg_cap(const geom *g);
#define SWI_ACC_SEG_BYTES 40
/* Voxels of each worker's finishing chunk (at least one row of a cell). */
#define SWI_CHUNK_VOXELS 4096

/* ---- cellmem.c: partial-sum buffers, reused across cells within a byte limit ---- */
#define CELLMEM_SLOTS 512
typedef struct cellmem {
    size_t limit;          /* the arena's size: swi__cellmem_bytes(planned peak) */
    size_t live;           /* bytes handed out */
    size_t outside;        /* of those, in mappings of their own (arena too fragmented) */
    char *base;            /* the arena, or NULL */
    size_t arena, touched; /* its size; high-water mark of what was handed out */
    int tried;             /* the arena was reserved (or could not be) */
    int n;                 /* free blocks, address-ordered, coalesced */
    size_t off[CELLMEM_SLOTS];
    size_t size[CELLMEM_SLOTS];
} cellmem;
/* Bytes of the arena for partial sums that peak at `peak` (fragmentation allowance
 * included; SIZE_MAX on overflow): what the planner counts and the engine reserves. */
size_t swi__cellmem_bytes(size_t peak);
void swi__cellmem_init(cellmem *m, size_t limit);
void *swi__cellmem_get(cellmem *m, size_t bytes);
void swi__cellmem_put(cellmem *m, void *p, size_t bytes);
void swi__cellmem_free(cellmem *m);
void swi__cellmem_release(cellmem *m, void *p, size_t bytes);

/* ---- frontier.c: cell state, open and close; plan.c counts the same without cells ---- */
/* Index of cell c in its head's cell table (C order over the three axes). */
static inline int64_t swi__cell_index(const head_geom *hg, const int64_t c[NDIM]) {
    return ((c[0] * hg->ax[1].n_cells + c[1]) * hg->ax[2].n_cells + c[2]) * hg->ax[3].n_cells + c[3];
}
/* Windows covering cell c. */
static inline int64_t swi__cell_windows(const head_geom *hg, const int64_t c[NDIM]) {
    return hg->ax[0].cell_wcount[c[0]] * hg->ax[1].cell_wcount[c[1]] * hg->ax[2].cell_wcount[c[2]] *
           hg->ax[3].cell_wcount[c[3]];
}
/* A cell of `windows` windows keeps partial sums: several windows blend there, or one
 * window's several mirrored runs do. A cell of one plain window is finished from its
 * prediction. */
static inline int swi__cell_stored(const geom *g, int64_t windows) { return windows > 1 || g->passes > 1; }
/* The cells inside window t: first[a] .. first[a] + count[a] - 1 along each axis. */
static inline void swi__window_cells(const head_geom *hg, const int64_t t[NDIM], int64_t first[NDIM],
                                     int64_t count[NDIM]) {
    for (int a = 0; a < NDIM; a++) {
        first[a] = hg->ax[a].win_cfirst[t[a]];
        count[a] = hg->ax[a].win_ccount[t[a]];
    }
}
/* The first cell c of the box lo + [0, n) (C order); 0 when the box is empty. */
static inline int swi__box_first(int64_t c[NDIM], const int64_t lo[NDIM], const int64_t n[NDIM]) {
    for (int a = 0; a < NDIM; a++) {
        if (n[a] <= 0) return 0;
        c[a] = lo[a];
    }
    return 1;
}
/* The next cell c of the box in C order; 0 after the last. */
static inline int swi__box_next(int64_t c[NDIM], const int64_t lo[NDIM], const int64_t n[NDIM]) {
    for (int a = NDIM - 1; a >= 0; a--) {
        if (++c[a] < lo[a] + n[a]) return 1;
        c[a] = lo[a];
    }
    return 0;
}
/* Floats of a worker's share buffer (float16 sums): one window of the largest head. */
static inline size_t swi__share_floats(const geom *g) {
    size_t n = (size_t)g->roi_vox;
    for (int h = 0; h < g->n_heads; h++)
        if ((size_t)g->heads[h].win_vox > n) n = (size_t)g->heads[h].win_vox;
    return n;
}
/* Bytes of a cell's partial sums: channels planes of acc_bytes each and the float32 weight sum. */
size_t swi__cell_bytes(const head_geom *hg, const int64_t cell[NDIM]);

typedef struct cell_state {
    float *buf;    /* partial sums [C+1][cell voxels] (float16: engine.h's layout), NULL unless
                      open (or in a dry run) */
    int64_t rem;   /* windows still to land */
    int32_t stamp; /* engine: batch that last touched it */
    int32_t task;  /* engine: its task in that batch */
} cell_state;

/* An entry of the sparse cell table: the cells in use only (open, or touched by the
 * batch), found by key = (image * n_cells + cell index) * SWI_MAX_HEADS + head. */
typedef struct cell_slot {
    int64_t key; /* -1: empty */
    cell_state st;
} cell_slot;

/* A sparse table of `entries` cells in use at most has this many slots (a power of two,
 * at most half full); SIZE_MAX on overflow. */
size_t swi__cell_slots(size_t entries);
/* Dense cell tables of at most this many bytes are kept whatever the frontier. */
#define SWI_DENSE_TABLE_MAX ((size_t)64 << 20)
/* For tests: non-zero plans every run with the sparse cell table. */
extern int swi__sparse_tables;

typedef struct frontier_done {
    cell_state *state;
    int64_t key; /* sparse: the entry to drop at the end of the batch */
    size_t bytes;
} frontier_done;

typedef struct frontier {
    const geom *g;
    cell_state *cells[SWI_MAX_HEADS]; /* dense: [batch][n_cells] per head; NULL while channels are unknown */
    cell_slot *slots;                 /* sparse: the cells in use, open addressing */
    size_t n_slots, used;             /* a power of two; entries held */
    cellmem *mem;                     /* NULL: dry run, bytes are counted and nothing allocated */
    size_t live;                      /* bytes of the open cells */
    size_t peak;                      /* largest `live` at the end of a batch */
    size_t closing;                   /* bytes completed in this batch, released at its end */
    frontier_done *done;              /* the cells to release at the end of the batch */
    size_t n_done, done_cap;
} frontier;

#define SWI_LAND_OPENED 1    /* this landing opened the cell's partial sums */
#define SWI_LAND_COMPLETED 2 /* this was the cell's last window */

/* Cell tables of every head whose channels are known; mem NULL for a dry run. entries 0:
 * dense tables of every cell; else one sparse table for that many cells in use at once
 * (the plan's count: swi__cell_slots(entries) slots). Returns SWI_ERR_NOMEM /
 * SWI_ERR_OVERFLOW without a message. */
swi_status swi__frontier_init(frontier *f, const geom *g, cellmem *mem, size_t entries);
/* A window of image `image` lands on cell c of head h: *state is the cell (valid until
 * the end of the batch), *flags says what happened (SWI_LAND_*). Fails (no message) when a
 * buffer cannot be had, with SWI_ERR_SHAPE when the cell has no window left to land, or
 * SWI_ERR_OVERFLOW when the sparse table is full (engine bugs: the plan bounds it). */
swi_status swi__frontier_land(frontier *f, int h, int64_t image, const int64_t c[NDIM], cell_state **state,
                              int *flags);
/* The batch is blended: count its peak, release the cells it completed. */
void swi__frontier_end_batch(frontier *f);
/* Release every cell still open (a failed run) and the tables. */
void swi__frontier_free(frontier *f);

/* ---- reuse.c: exact window reuse ---- */
#define SWI_REUSE_SEEN 64 /* hashes of windows run once, remembered for admission */
typedef struct reuse_entry {
    uint64_t hash;
    int64_t hits, stamp;
    float *input;              /* [cin][roi] the window, for the byte comparison */
    float *out[SWI_MAX_HEADS]; /* [C][win] per head (engine only) */
} reuse_entry;
typedef struct reuse_cache {
    int cap, n;       /* entries allowed, entries held */
    int with_outputs; /* 0: the planner's dry run */
    reuse_entry *e;
    uint64_t seen[SWI_REUSE_SEEN];
    int seen_n, seen_next;
    int64_t clock;
    size_t in_floats;
    int n_heads;
    size_t out_floats[SWI_MAX_HEADS];
} reuse_cache;
uint64_t swi__reuse_hash(const float *x, size_t n);
/* out_floats NULL: a dry run that keeps inputs only. Fails only with SWI_ERR_NOMEM. */
swi_status swi__reuse_init(reuse_cache *c, int cap, size_t in_floats, int n_heads, const size_t *out_floats);
void swi__reuse_free(reuse_cache *c);
/* The entry equal to `input` (a hit is counted), or -1. */
int swi__reuse_find(reuse_cache *c, uint64_t hash, const float *input);
/* A window that was run: the entry to store its outputs in, or -1. */
int swi__reuse_admit(reuse_cache *c, uint64_t hash, const float *input);

/* ---- context ---- */
typedef struct swi_result_buf {
    void *data;
    size_t bytes;
} swi_result_buf;

struct swi_ctx {
    char err[SWI_ERRMSG_LEN];
    swi_result_buf *results;
    int n_results;
    int dims;
    int64_t out_size[SWI_MAX_HEADS][SWI_MAX_DIMS];
    int64_t out_channels[SWI_MAX_HEADS];
    /* the last successful run's frontier: as planned, and as the engine counted it */
    size_t frontier_planned, frontier_peak;
    int frontier_comparable; /* 0 when the batch size was re-planned midway */
    swi_stats stats;         /* of the last run */
};
/* For tests: the last successful run's planned and measured frontier peaks (bytes of
 * partial sums); returns 0 when they are not comparable (no run yet, or the batch size
 * was re-planned after the first call). */
int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured);
void swi__drop_results(swi_ctx *ctx);

#endif
