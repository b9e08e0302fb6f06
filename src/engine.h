/* engine.h -- the run's state, shared by the engine's modules (not installed):
 * batch.c (what the predictor sees), blend.c (accumulation into open cells),
 * finish.c (divide, reduce, hand to sinks), outputs.c (where results go) and run.c
 * (the loop). The frontier (cell state) and the planner are in internal.h. */
#ifndef SWI_ENGINE_H
#define SWI_ENGINE_H

#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* ---- float16 partial sums (SWI_ACCUMULATE_FLOAT16) ----
 * A cell's buffer then holds its weight sum as float32 first, then C planes of binary16:
 * the weighted mean of each score so far (not the weighted sum: a mean stays in the
 * scores' range, where a sum of tiny weights at a window's edge would leave binary16's).
 * The conversions are branch-free integer code the vectoriser turns into SIMD, exact
 * (round to nearest, ties to even, subnormals, Inf and NaN kept); no F16C needed. */
static inline uint32_t swi__fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float swi__bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline float swi__h2f(uint16_t h) {
    const uint32_t em = (uint32_t)(h & 0x7fffu) << 13, exp = em & 0x0f800000u;
    const uint32_t normal = em + 0x38000000u;  /* exponent bias 15 -> 127 */
    const uint32_t special = em + 0x70000000u; /* Inf, NaN: exponent 31 -> 255 */
    /* zero and subnormals: the mantissa as a float of exponent -14, minus 2^-14 */
    const uint32_t tiny = swi__fbits(swi__bitsf(em + 0x38800000u) - swi__bitsf(0x38800000u));
    const uint32_t is_special = 0u - (uint32_t)(exp == 0x0f800000u), is_tiny = 0u - (uint32_t)(exp == 0);
    const uint32_t r = (special & is_special) | (tiny & is_tiny) | (normal & ~(is_special | is_tiny));
    return swi__bitsf(r | (uint32_t)(h & 0x8000u) << 16);
}
static inline uint16_t swi__f2h(float v) {
    uint32_t f = swi__fbits(v);
    const uint32_t sign = f & 0x80000000u;
    f ^= sign;
    /* >= 65520 (rounds past the largest half): Inf, or a quiet NaN */
    const uint32_t big = 0x7c00u | ((0u - (uint32_t)(f > 0x7f800000u)) & 0x0200u);
    /* below 2^-14: adding 0.5 lines the half's subnormal bits up with the float's low bits
     * and rounds them to nearest even in hardware */
    const uint32_t tiny = swi__fbits(swi__bitsf(f) + 0.5f) - 0x3f000000u;
    /* normal: rebias, round to nearest even on the 13 dropped bits */
    const uint32_t normal = (f + 0xc8000fffu + ((f >> 13) & 1u)) >> 13;
    const uint32_t is_big = 0u - (uint32_t)(f >= 0x47800000u), is_tiny = 0u - (uint32_t)(f < 0x38800000u);
    return (uint16_t)(((big & is_big) | (tiny & is_tiny) | (normal & ~(is_big | is_tiny))) | sign >> 16);
}
/* The weighted mean m of the scores so far (weight sum W) after one more score x of weight
 * w: m + (x - m) * f, f = w / (W + w) being the same for every class of the voxel. Where m
 * or x is not finite it is the sum's rule instead (Inf + finite = Inf, Inf - Inf = NaN, NaN
 * stays), as the float32 sums behave. */
static inline float swi__mean_step(float m, float x, float f) {
    const float stepped = m + (x - m) * f, summed = m + x;
    /* a mask, not a branch: the loop stays vectorisable */
    const uint32_t finite = 0u - (uint32_t)((fabsf(m) <= FLT_MAX) & (fabsf(x) <= FLT_MAX));
    return swi__bitsf((swi__fbits(stepped) & finite) | (swi__fbits(summed) & ~finite));
}

/* accumulate items per worker thread and batch (load balance) */
#define ACC_ITEMS_PER_THREAD 8

typedef struct task {
    int head;
    int fresh;     /* buf allocated in this batch: its first window sets instead of adds */
    int completes; /* last window lands in this batch */
    int64_t image;
    int64_t cell[NDIM];
    int64_t ext[NDIM];
    int64_t vox;
    float *buf;
    int32_t win_off, win_n; /* windows of this batch touching it, in batch order */
} task;

/* Accumulation item: planes [p0, p1) of head `head` (plane C is the weight sum) over
 * the rows [i1lo, i1hi) along axis 1 of the cells (c0, c1) of axes 0 and 1, for every
 * window of the batch in batch order. (Inputs of fewer than 4 dims have a unit axis 0,
 * so axis 1 is their first.) Items never share a cell plane row, so they run in any order
 * on any thread and each voxel still sums its windows in batch order. */
typedef struct acc_item {
    int32_t head, p0, p1;
    int64_t c0, c1, i1lo, i1hi;
} acc_item;

/* One cell of a window, as the accumulation walks it. */
typedef struct acc_seg {
    float *buf;  /* its partial sums, NULL if one window covers it (finished directly) */
    int64_t vox; /* voxels of the cell (the plane stride of buf) */
    int64_t lo3; /* its first column in the window, along the contiguous axis 3 */
    int64_t e3;  /* its extent along that axis */
    int set;     /* this window is its first since buf was opened: store, not add */
} acc_seg;
_Static_assert(sizeof(acc_seg) <= SWI_ACC_SEG_BYTES, "plan.c counts SWI_ACC_SEG_BYTES per table entry");

/* Finishing item: rows [lo[a], hi[a]) of axes 0..2 of a task's cell, the contiguous axis
 * 3 whole; small enough for a worker's chunk. */
typedef struct fin_item {
    int32_t task;
    int64_t lo[NDIM - 1], hi[NDIM - 1];
} fin_item;

typedef struct slot {
    float *input; /* [sw, cin, roi] */
    size_t input_bytes;
    float *head[SWI_MAX_HEADS]; /* [sw, C, win] */
    size_t head_cap[SWI_MAX_HEADS];
    int requested[SWI_MAX_HEADS];
    /* outputs the predictor handed over (swi_batch_set_output): read in place of head[],
     * released once the batch is blended */
    const float *adopt[SWI_MAX_HEADS];
    void (*release[SWI_MAX_HEADS])(void *user, const float *data);
    void *release_user[SWI_MAX_HEADS];
    int64_t *image;  /* [sw] */
    int64_t *t;      /* [sw][NDIM] window grid coords */
    int64_t *ustart; /* [sw][SWI_MAX_DIMS] start in image coords */
    int n;           /* windows in the slot */
    int64_t first;   /* the run's index of the first */
    int cap;         /* windows its buffers hold (0: not allocated yet) */
    /* reuse (SWI_REUSE_ON): the predictor sees the n_run windows to run, run_idx[i] being
     * the slot window of its window i; src[j] says where slot window j's output comes
     * from: -1 the predictor, k >= 0 slot window k, -2 - e reuse cache entry e */
    int n_run;
    int32_t *run_idx, *src;
    uint64_t *hash;
} slot;

typedef struct worker_scratch {
    acc_seg *segs; /* [seg_cap] the cells of one window, one axis-0 row of cells */
    float *share;  /* float16 sums: each voxel's w / (W + w) for one window of an item,
                      computed with its first plane and read by the others */
    float *scores;
    float *soft; /* [C][chunk] softmax of scores, when an output asks for it */
    reduce_scratch rs;
} worker_scratch;

typedef struct out_spec {
    swi_output o;
    swi_dtype dtype; /* resolved */
    void *data;      /* where the whole result goes (dst or library-owned), or NULL */
    int owned;
} out_spec;

typedef struct run {
    swi_ctx *ctx;
    const swi_params *p;
    const swi_tensor *in;
    const swi_predictor *pred;
    geom g;
    plan_choice choice;
    int threads;
    int known[SWI_MAX_HEADS]; /* head shape learned or declared */
    int64_t shape_c[SWI_MAX_HEADS];
    int64_t shape_s[SWI_MAX_HEADS][SWI_MAX_DIMS];
    int setup_done;
    int replanned_sw; /* the batch size changed after the first call */
    frontier front;   /* cell state: open/close (frontier.c) */
    out_spec *outs;
    int n_outs;
    slot slots[2];
    int n_slots;
    int sw;
    int64_t n_windows; /* windows that run */
    int64_t *wlist;    /* with a part: the order positions of the windows that run */
    int64_t *idx_scratch;
    float *box; /* a reader input: the box one window reads [cin, <= roi] */
    swi_pool *pool;
    worker_scratch *ws;
    size_t chunk_cap;
    size_t seg_cap; /* acc_seg entries per worker */
    /* per-batch work lists */
    task *tasks;
    int32_t *pair_task, *task_wins; /* pair_task: the task of each cell of each window's box, or -1 */
    size_t *pair_off;               /* [window * heads + head] where its cells start in pair_task */
    size_t tasks_cap, pairs_cap, task_wins_cap, pair_off_cap;
    acc_item *acc;
    fin_item *fin;
    size_t acc_cap, fin_cap;
    int64_t n_acc, n_fin;
    int32_t n_tasks;
    cellmem mem;       /* partial-sum buffers the frontier opens cells in */
    int reuse;         /* SWI_REUSE_ON */
    reuse_cache cache; /* outputs kept for reuse across batches */
    int cache_ready;   /* the cache knows the heads' output sizes */
    swi_stats stats;
    const slot *cur;                /* slot being blended */
    int pass;                       /* which mirrored run of the batch is blended (0: the plain one) */
    float pass_w;                   /* its share of a window's weight: 1 / passes (exact) */
    unsigned pass_mask[1u << NDIM]; /* the mirror mask of each run, increasing */
    int32_t batch_id;
    /* errors raised inside swi_batch_output or by workers */
    swi_status shape_err;
    atomic_int cb_failed; /* 1 + index of the first failing output */
    char pred_msg[SWI_ERRMSG_LEN];
} run;

/* A batch one predictor made for another (swi_batch_predict, batch.c): the windows of
 * its parent, its own input and destination; NULL in the engine's batches. */
typedef struct batch_child batch_child;

struct swi_batch {
    run *r;
    slot *s;
    batch_child *child;
};

/* Head h's outputs of the slot's windows, [n, C, win]. */
static inline const float *swi__slot_out(const slot *s, int h) {
    return s->adopt[h] ? s->adopt[h] : s->head[h];
}

/* Order position of the i-th window that runs. */
static inline int64_t swi__run_window(const run *r, int64_t i) { return r->wlist ? r->wlist[i] : i; }

/* ---- batch.c ---- */
swi_status swi__slot_alloc(run *r, slot *s);
void swi__slot_free(slot *s);
/* Copy the outputs the predictor handed over into the slot's own buffers, and give them
 * back (the next call is about to overlap this slot's blending). */
swi_status swi__slot_own(run *r, slot *s);
/* Give back the outputs the predictor handed over (their batch is blended). */
void swi__slot_release(slot *s);
/* Fill a slot with windows first..first+n-1 (gather) and run the predictor on it. */
swi_status swi__fill_and_predict(run *r, slot *s, int64_t first, int n);
/* The slot's next mirrored run: its input, mirrored along `from` (the run before), is
 * mirrored along `to` instead, the predictor runs on it and its outputs are mirrored back
 * in place (copied into the slot's own buffers first when handed over). */
swi_status swi__mirror_run(run *r, slot *s, unsigned from, unsigned to);
/* Offer the windows slot s just ran to the reuse cache (the first batch's too, once the
 * cache exists after the first call). */
void swi__reuse_keep(run *r, slot *s);

/* ---- blend.c ---- */
/* The accumulation items of the booked batch in slot s (r->acc). */
swi_status swi__blend_items(run *r, const slot *s);
/* Worker: add one item's p*w and w into the open cells (a swi_item_fn). */
void swi__blend_item(void *arg, int64_t item, int worker);

/* ---- finish.c ---- */
/* The finishing items of the cells the booked batch completes (r->fin). */
swi_status swi__finish_items(run *r);
/* Worker: divide, reduce and deliver one finished piece of a cell (a swi_item_fn). */
void swi__finish_item(void *arg, int64_t item, int worker);

/* ---- outputs.c ---- */
swi_status swi__check_outputs(swi_ctx *ctx, const swi_params *p, const swi_output *outs, int n_outs);
/* An output's element type and stored size, and whether dst can hold it. */
swi_status swi__resolve_output(swi_ctx *ctx, const geom *g, const swi_output *o, int i, swi_dtype *dtype,
                               size_t *bytes_out);
/* Resolve output dtypes and destinations once every head's channels are known. */
swi_status swi__setup_outputs(run *r, const swi_output *outs);

#endif
