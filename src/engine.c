/* engine.c -- run a plan: gather windows -> predictor -> blend into the open cells ->
 * finish completed cells -> reduce -> outputs / region callbacks.
 *
 * Where a voxel's value is computed: a head's output is partitioned into cells by
 * every window edge (layout.c), so each cell is covered by a fixed set of windows.
 * A cell covered by one window is finished straight from that window's prediction
 * ((p*w)/w, as the reference computes it); any other cell gets partial sums
 * [C+1][cell] (C score planes + the weight sum) on first touch, accumulates p*w and w
 * from each covering window (accumulate_item), and when its last window has landed
 * is divided, reduced and freed (finish_item). The full scores of the reference are
 * just one more consumer of finished cells. */
#include "internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* accumulate items per worker thread and batch (load balance) */
#define ACC_ITEMS_PER_THREAD 8
#define CHUNK_VOXELS 4096

typedef struct cell_state {
    float *buf;     /* partial sums [C+1][cell voxels], NULL unless open */
    int32_t rem;    /* windows still to land */
    int32_t stamp;  /* batch that last touched it */
    int32_t task;   /* its task in that batch */
    int32_t pad;
} cell_state;

typedef struct task {
    int head;
    int fresh;      /* buf allocated in this batch: its first window sets instead of adds */
    int completes;  /* last window lands in this batch */
    int64_t image;
    int64_t cell[NDIM];
    int64_t ext[NDIM];
    int64_t vox;
    float *buf;
    int32_t win_off, win_n; /* windows of this batch touching it, in batch order */
} task;

/* Accumulation item: planes [p0, p1) of head `head` (plane C is the weight sum) over
 * the rows [i0lo, i0hi) of the cells in row `c0` along axis 0, for every window of the
 * batch in batch order. Items never share a cell plane row, so they run in any order
 * on any thread and each voxel still sums its windows in batch order. */
typedef struct acc_item {
    int32_t head, p0, p1;
    int64_t c0, i0lo, i0hi;
} acc_item;

/* One cell of a window, as the accumulation walks it. */
typedef struct acc_seg {
    float *buf;     /* its partial sums, NULL if one window covers it (finished directly) */
    int64_t vox;    /* voxels of the cell (the plane stride of buf) */
    int64_t lo2;    /* its first column in the window, along the contiguous axis */
    int64_t e2;     /* its extent along that axis */
    int set;        /* this window is its first since buf was opened: store, not add */
} acc_seg;
_Static_assert(sizeof(acc_seg) <= SWI_ACC_SEG_BYTES, "plan.c counts SWI_ACC_SEG_BYTES per table entry");

typedef struct fin_item { int32_t task; int64_t a0, a1, b0, b1; } fin_item;

typedef struct slot {
    float *input;                 /* [sw, cin, roi] */
    size_t input_bytes;
    float *head[SWI_MAX_HEADS];   /* [sw, C, win] */
    size_t head_cap[SWI_MAX_HEADS];
    int requested[SWI_MAX_HEADS];
    int64_t *image;               /* [sw] */
    int64_t *t;                   /* [sw][NDIM] window grid coords */
    int64_t *ustart;              /* [sw][SWI_MAX_DIMS] start in image coords */
    int n;
} slot;

typedef struct worker_scratch {
    acc_seg *segs; /* [seg_cap] the cells of one window, one axis-0 row of cells */
    float *scores;
    float *soft;   /* [C][chunk] softmax of scores, when an output asks for it */
    reduce_scratch rs;
} worker_scratch;

typedef struct out_spec {
    swi_output o;
    swi_dtype dtype;   /* resolved */
    void *data;        /* where the whole result goes (dst or library-owned), or NULL */
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
    int known[SWI_MAX_HEADS];      /* head shape learned or declared */
    int64_t shape_c[SWI_MAX_HEADS];
    int64_t shape_s[SWI_MAX_HEADS][SWI_MAX_DIMS];
    int setup_done;
    cell_state *state[SWI_MAX_HEADS];
    out_spec *outs;
    int n_outs;
    slot slots[2];
    int n_slots;
    int sw;
    int64_t *idx_scratch;
    swi_pool *pool;
    worker_scratch *ws;
    size_t chunk_cap;
    size_t seg_cap;             /* acc_seg entries per worker */
    /* per-batch work lists */
    task *tasks;
    int32_t *pair_task, *task_wins;
    size_t tasks_cap, pairs_cap, task_wins_cap;
    acc_item *acc;
    fin_item *fin;
    size_t acc_cap, fin_cap;
    int64_t n_acc, n_fin;
    int32_t n_tasks;
    cellmem mem;                /* partial-sum buffers */
    const slot *cur;            /* slot being blended */
    int32_t batch_id;
    /* errors raised inside swi_batch_output or by workers */
    swi_status shape_err;
    atomic_int cb_failed;       /* 1 + index of the first failing output */
    char pred_msg[SWI_ERRMSG_LEN];
} run;

struct swi_batch {
    run *r;
    slot *s;
};

/* ---------------------------------------------------------------- batch API */

int swi_batch_count(const swi_batch *b) { return b ? b->s->n : 0; }
int swi_batch_dims(const swi_batch *b) { return b ? b->r->g.user_dims : 0; }
int64_t swi_batch_channels(const swi_batch *b) { return b ? b->r->g.cin : 0; }
const int64_t *swi_batch_roi(const swi_batch *b) {
    return b ? &b->r->g.roi[NDIM - b->r->g.user_dims] : NULL;
}
const float *swi_batch_input(const swi_batch *b) { return b ? b->s->input : NULL; }
int64_t swi_batch_image(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n) ? b->s->image[i] : -1;
}
const int64_t *swi_batch_start(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n) ? &b->s->ustart[(size_t)i * SWI_MAX_DIMS] : NULL;
}
void swi_batch_set_error(swi_batch *b, const char *message) {
    if (!b || !message) return;
    snprintf(b->r->pred_msg, sizeof b->r->pred_msg, "%s", message);
}

float *swi_batch_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    if (!b) return NULL;
    run *r = b->r;
    swi_ctx *ctx = r->ctx;
    int d = r->g.user_dims;
    if (head < 0 || head >= r->g.n_heads) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d but params.n_heads = %d",
                                 head, r->g.n_heads);
        return NULL;
    }
    if (channels <= 0 || !spatial) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: channels = %lld%s", head,
                                 (long long)channels, spatial ? " must be >= 1" : " with NULL spatial");
        return NULL;
    }
    for (int k = 0; k < d; k++)
        if (spatial[k] <= 0) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: spatial[%d] = %lld must be >= 1",
                                     head, k, (long long)spatial[k]);
            return NULL;
        }
    const swi_head_spec *decl = &r->p->heads[head];
    if (!r->known[head]) {
        if (decl->channels > 0 && decl->channels != channels) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                     "predictor head %d: %lld channels, but params.heads[%d].channels = %lld",
                                     head, (long long)channels, head, (long long)decl->channels);
            return NULL;
        }
        for (int k = 0; k < d; k++)
            if ((decl->spatial[k] > 0 || decl->channels > 0) &&
                (decl->spatial[k] > 0 ? decl->spatial[k] : r->g.roi[swi__axis(&r->g, k)]) != spatial[k]) {
                r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                         "predictor head %d: spatial[%d] = %lld, but params.heads[%d] declares "
                                         "%lld (spatial 0 = the roi)",
                                         head, k, (long long)spatial[k], head,
                                         (long long)(decl->spatial[k] > 0 ? decl->spatial[k]
                                                                          : r->g.roi[swi__axis(&r->g, k)]));
                return NULL;
            }
        r->known[head] = 1;
        r->shape_c[head] = channels;
        for (int k = 0; k < d; k++) r->shape_s[head][k] = spatial[k];
    } else {
        int same = r->shape_c[head] == channels;
        for (int k = 0; k < d; k++) same &= r->shape_s[head][k] == spatial[k];
        if (!same) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                     "predictor head %d changed shape between calls (now %lld channels x "
                                     "%lld x %lld x %lld, first %lld channels x %lld x %lld x %lld)",
                                     head, (long long)channels, (long long)spatial[0],
                                     (long long)(d > 1 ? spatial[1] : 1), (long long)(d > 2 ? spatial[2] : 1),
                                     (long long)r->shape_c[head], (long long)r->shape_s[head][0],
                                     (long long)(d > 1 ? r->shape_s[head][1] : 1),
                                     (long long)(d > 2 ? r->shape_s[head][2] : 1));
            return NULL;
        }
    }
    if (b->s->requested[head]) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d twice in one call", head);
        return NULL;
    }
    size_t n = (size_t)r->sw, v;
    int64_t wv = 1;
    for (int k = 0; k < d; k++)
        if (!swi__mul_i64(wv, spatial[k], &wv)) wv = -1;
    if (wv < 0 || !swi__mul_size(n, (size_t)channels, &v) || !swi__mul_size(v, (size_t)wv, &v) ||
        !swi__mul_size(v, sizeof(float), &v)) {
        r->shape_err = swi__fail(ctx, SWI_ERR_OVERFLOW, "predictor head %d: output size overflows", head);
        return NULL;
    }
    slot *s = b->s;
    if (s->head_cap[head] < v) {
        swi__big_free(s->head[head], s->head_cap[head]);
        s->head[head] = swi__big_alloc(v);
        s->head_cap[head] = s->head[head] ? v : 0;
        if (!s->head[head]) {
            r->shape_err = swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", head);
            return NULL;
        }
    }
    s->requested[head] = 1;
    return s->head[head];
}

/* ---------------------------------------------------------------- helpers */

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    size_t bytes;
    if (!swi__mul_size(n, elem, &bytes)) return 0;
    void *p = swi__malloc(bytes);
    if (!p) return 0;
    if (*arr) memcpy(p, *arr, *cap * elem); /* keep what is there: lists grow while filled */
    swi__free(*arr);
    *arr = p;
    *cap = n;
    return 1;
}

/* Fill a slot with the next windows (gather) and run the predictor on it. */
static swi_status fill_and_predict(run *r, slot *s, int64_t first, int n) {
    const geom *g = &r->g;
    s->n = n;
    for (int j = 0; j < n; j++) {
        int64_t w = first + j;
        int64_t b = w / g->win_per_image, t[NDIM], start[NDIM];
        swi__order_coords(g, &r->choice, w % g->win_per_image, t);
        s->image[j] = b;
        for (int a = 0; a < NDIM; a++) {
            s->t[j * NDIM + a] = t[a];
            start[a] = g->starts[a][t[a]];
        }
        for (int k = 0; k < SWI_MAX_DIMS; k++)
            s->ustart[(size_t)j * SWI_MAX_DIMS + k] =
                k < g->user_dims ? start[swi__axis(g, k)] - g->before[swi__axis(g, k)] : 0;
        swi__gather(g, r->p, r->in->data, b, start, s->input + (size_t)j * (size_t)(g->cin * g->roi_vox),
                    r->idx_scratch);
    }
    for (int h = 0; h < SWI_MAX_HEADS; h++) s->requested[h] = 0;
    r->pred_msg[0] = '\0';
    r->shape_err = SWI_OK;
    swi_batch b = {r, s};
    int rc = r->pred->predict(r->pred->user, &b);
    if (r->shape_err != SWI_OK) return r->shape_err; /* message already set */
    if (rc != 0) {
        if (r->pred_msg[0])
            return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed on windows %lld..%lld: %s",
                             (long long)first, (long long)(first + n - 1), r->pred_msg);
        return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed (returned %d) on windows %lld..%lld", rc,
                         (long long)first, (long long)(first + n - 1));
    }
    for (int h = 0; h < g->n_heads; h++)
        if (!s->requested[h])
            return swi__fail(r->ctx, SWI_ERR_SHAPE,
                             "predictor returned 0 without filling head %d (swi_batch_output not called)", h);
    return SWI_OK;
}

/* ---------------------------------------------------------------- workers */

SWI_KERNEL static void accumulate_item(void *arg, int64_t item, int worker) {
    run *r = arg;
    const acc_item *it = &r->acc[item];
    const head_geom *hg = &r->g.heads[it->head];
    const axis_grid *ax = hg->ax;
    const slot *s = r->cur;
    const int64_t C = hg->channels, o1 = hg->win[1], o2 = hg->win[2], c0 = it->c0;
    acc_seg *seg = r->ws[worker].segs;
    /* Plane-outer: for each plane the window's prediction, its weights and each cell's
     * partial sums are read as long forward streams, which the prefetchers follow. A
     * cell-by-cell walk (or plane-inner per row) jumps between ~2C streams of short rows
     * and runs at half the bandwidth. */
    for (int j = 0; j < s->n; j++) {
        const int64_t *t = &s->t[j * NDIM];
        if (c0 < ax[0].win_cfirst[t[0]] || c0 >= ax[0].win_cfirst[t[0]] + ax[0].win_ccount[t[0]]) continue;
        const int64_t b = s->image[j];
        const int64_t cf1 = ax[1].win_cfirst[t[1]], cc1 = ax[1].win_ccount[t[1]];
        const int64_t cf2 = ax[2].win_cfirst[t[2]], cc2 = ax[2].win_ccount[t[2]];
        const int64_t off0 = ax[0].cell_lo[c0] - ax[0].win_lo[t[0]];
        int any = 0;
        for (int64_t k1 = 0; k1 < cc1; k1++)
            for (int64_t k2 = 0; k2 < cc2; k2++) {
                int64_t c1 = cf1 + k1, c2 = cf2 + k2;
                int64_t ci = (c0 * ax[1].n_cells + c1) * ax[2].n_cells + c2;
                const cell_state *st = &r->state[it->head][b * hg->n_cells + ci];
                acc_seg *q = &seg[k1 * cc2 + k2];
                q->buf = st->buf;
                q->vox = (ax[0].cell_hi[c0] - ax[0].cell_lo[c0]) * (ax[1].cell_hi[c1] - ax[1].cell_lo[c1]) *
                         (ax[2].cell_hi[c2] - ax[2].cell_lo[c2]);
                q->lo2 = ax[2].cell_lo[c2] - ax[2].win_lo[t[2]];
                q->e2 = ax[2].cell_hi[c2] - ax[2].cell_lo[c2];
                q->set = 0;
                if (st->buf) {
                    const task *T = &r->tasks[st->task];
                    q->set = T->fresh && r->task_wins[T->win_off] == j;
                    any = 1;
                }
            }
        if (!any) continue;
        const float *P = s->head[it->head] + (size_t)j * (size_t)(C * hg->win_vox);
        for (int32_t pl = it->p0; pl < it->p1; pl++) {
            const float *xp = pl < C ? P + (size_t)pl * (size_t)hg->win_vox : NULL;
            for (int64_t i0 = it->i0lo; i0 < it->i0hi; i0++)
                for (int64_t k1 = 0; k1 < cc1; k1++) {
                    const int64_t c1 = cf1 + k1, e1 = ax[1].cell_hi[c1] - ax[1].cell_lo[c1];
                    const int64_t lo1 = ax[1].cell_lo[c1] - ax[1].win_lo[t[1]];
                    const acc_seg *row = &seg[k1 * cc2];
                    for (int64_t i1 = 0; i1 < e1; i1++) {
                        const size_t wrow = (size_t)(((off0 + i0) * o1 + lo1 + i1) * o2);
                        for (int64_t k2 = 0; k2 < cc2; k2++) {
                            const acc_seg *q = &row[k2];
                            if (!q->buf) continue;
                            const int64_t e2 = q->e2;
                            float *restrict a = q->buf + (size_t)pl * (size_t)q->vox + (size_t)((i0 * e1 + i1) * e2);
                            const float *restrict w = hg->weights + wrow + q->lo2;
                            if (xp) {
                                const float *restrict x = xp + wrow + q->lo2;
                                if (q->set)
                                    for (int64_t v = 0; v < e2; v++) a[v] = x[v] * w[v];
                                else
                                    for (int64_t v = 0; v < e2; v++) a[v] += x[v] * w[v];
                            } else if (q->set) {
                                for (int64_t v = 0; v < e2; v++) a[v] = w[v];
                            } else {
                                for (int64_t v = 0; v < e2; v++) a[v] += w[v];
                            }
                        }
                    }
                }
        }
    }
}

static void store_region(const out_spec *os, const geom *g, const head_geom *hg, int64_t image,
                         const int64_t lo[NDIM], const int64_t ext[NDIM], const void *src, int64_t planes) {
    size_t es = swi__dtype_size(os->dtype);
    int64_t out_vox = hg->out[0] * hg->out[1] * hg->out[2];
    int64_t n = ext[0] * ext[1] * ext[2];
    (void)g;
    for (int64_t c = 0; c < planes; c++) {
        char *base = (char *)os->data + (size_t)((image * planes + c) * out_vox) * es;
        const char *from = (const char *)src + (size_t)(c * n) * es;
        for (int64_t i0 = 0; i0 < ext[0]; i0++)
            for (int64_t i1 = 0; i1 < ext[1]; i1++) {
                size_t at = (size_t)(((lo[0] + i0) * hg->out[1] + lo[1] + i1) * hg->out[2] + lo[2]);
                memcpy(base + at * es, from, (size_t)ext[2] * es);
                from += (size_t)ext[2] * es;
            }
    }
}

SWI_KERNEL static void finish_item(void *arg, int64_t item, int worker) {
    run *r = arg;
    if (atomic_load(&r->cb_failed)) return;
    const fin_item *it = &r->fin[item];
    const task *T = &r->tasks[it->task];
    const geom *g = &r->g;
    const head_geom *hg = &g->heads[T->head];
    const slot *s = r->cur;
    const int64_t C = hg->channels, e1 = T->ext[1], e2 = T->ext[2];
    int64_t ext[NDIM] = {it->a1 - it->a0, it->b1 - it->b0, e2};
    int64_t n = ext[0] * ext[1] * ext[2];
    float *S = r->ws[worker].scores;
    if (T->buf) {
        const float *wsum = T->buf + (size_t)C * (size_t)T->vox;
        for (int64_t c = 0; c < C; c++) {
            const float *acc = T->buf + (size_t)c * (size_t)T->vox;
            float *dst = S + (size_t)(c * n);
            for (int64_t i0 = it->a0; i0 < it->a1; i0++)
                for (int64_t i1 = it->b0; i1 < it->b1; i1++) {
                    size_t at = (size_t)((i0 * e1 + i1) * e2);
                    const float *restrict x = acc + at, *restrict w = wsum + at;
                    float *restrict o = dst;
                    for (int64_t v = 0; v < e2; v++) o[v] = x[v] / w[v];
                    dst += e2;
                }
        }
    } else {
        /* covered by one window: finish from its prediction, (p*w)/w as the reference */
        int32_t j = r->task_wins[T->win_off];
        const int64_t *t = &s->t[j * NDIM];
        int64_t off[NDIM];
        for (int a = 0; a < NDIM; a++) off[a] = hg->ax[a].cell_lo[T->cell[a]] - hg->ax[a].win_lo[t[a]];
        const float *P = s->head[T->head] + (size_t)j * (size_t)(C * hg->win_vox);
        for (int64_t c = 0; c < C; c++) {
            float *dst = S + (size_t)(c * n);
            for (int64_t i0 = it->a0; i0 < it->a1; i0++)
                for (int64_t i1 = it->b0; i1 < it->b1; i1++) {
                    size_t wi = (size_t)(((off[0] + i0) * hg->win[1] + off[1] + i1) * hg->win[2] + off[2]);
                    const float *restrict x = P + (size_t)c * (size_t)hg->win_vox + wi;
                    const float *restrict w = hg->weights + wi;
                    float *restrict o = dst;
                    for (int64_t v = 0; v < e2; v++) o[v] = (x[v] * w[v]) / w[v];
                    dst += e2;
                }
        }
    }
    /* region bounds in the output grid */
    int64_t lo[NDIM];
    lo[0] = hg->ax[0].cell_lo[T->cell[0]] - hg->crop_lo[0] + it->a0;
    lo[1] = hg->ax[1].cell_lo[T->cell[1]] - hg->crop_lo[1] + it->b0;
    lo[2] = hg->ax[2].cell_lo[T->cell[2]] - hg->crop_lo[2];
    for (int i = 0; i < r->n_outs; i++) {
        const out_spec *os = &r->outs[i];
        if (os->o.head != T->head) continue;
        const void *vals = S;
        int64_t planes = C;
        if (os->o.reduce == SWI_REDUCE_SOFTMAX) {
            vals = r->ws[worker].soft;
            swi__softmax(S, C, n, &r->ws[worker].rs, r->ws[worker].soft);
        } else if (os->o.reduce != SWI_REDUCE_NONE && os->o.reduce != SWI_REDUCE_CUSTOM) {
            swi__reduce(os->o.reduce, os->dtype, S, C, n, &r->ws[worker].rs, r->ws[worker].rs.out);
            vals = r->ws[worker].rs.out;
            planes = 1;
        }
        if (os->data && os->o.reduce != SWI_REDUCE_CUSTOM) store_region(os, g, hg, T->image, lo, ext, vals, planes);
        if (os->o.on_region) {
            swi_region reg;
            memset(&reg, 0, sizeof reg);
            reg.output = i;
            reg.head = T->head;
            reg.image = T->image;
            reg.dims = g->user_dims;
            for (int k = 0; k < g->user_dims; k++) {
                int a = swi__axis(g, k);
                reg.lo[k] = lo[a];
                reg.hi[k] = lo[a] + ext[a];
            }
            reg.channels = planes;
            reg.dtype = os->dtype;
            reg.data = vals;
            if (os->o.on_region(os->o.user, &reg) != 0) {
                int expected = 0;
                atomic_compare_exchange_strong(&r->cb_failed, &expected, i + 1);
                return;
            }
        }
    }
}

/* ---------------------------------------------------------------- batches */

/* Book the windows of slot s into tasks: count down every cell they cover, open the
 * cells that need partial sums, and split the work into parallel items. */
static swi_status book_batch(run *r, const slot *s) {
    const geom *g = &r->g;
    r->batch_id++;
    int32_t n_tasks = 0;
    size_t n_pairs = 0;
    for (int j = 0; j < s->n; j++) {
        const int64_t *t = &s->t[j * NDIM];
        int64_t b = s->image[j];
        for (int h = 0; h < g->n_heads; h++) {
            const head_geom *hg = &g->heads[h];
            const axis_grid *ax = hg->ax;
            int64_t c[NDIM];
            for (c[0] = ax[0].win_cfirst[t[0]]; c[0] < ax[0].win_cfirst[t[0]] + ax[0].win_ccount[t[0]]; c[0]++)
                for (c[1] = ax[1].win_cfirst[t[1]]; c[1] < ax[1].win_cfirst[t[1]] + ax[1].win_ccount[t[1]]; c[1]++)
                    for (c[2] = ax[2].win_cfirst[t[2]]; c[2] < ax[2].win_cfirst[t[2]] + ax[2].win_ccount[t[2]];
                         c[2]++) {
                        int64_t ci = (c[0] * ax[1].n_cells + c[1]) * ax[2].n_cells + c[2];
                        cell_state *st = &r->state[h][b * hg->n_cells + ci];
                        if (st->rem <= 0)
                            return swi__fail(r->ctx, SWI_ERR_SHAPE, "internal: cell landed on twice");
                        if (!grow((void **)&r->pair_task, &r->pairs_cap, n_pairs + 1, sizeof(int32_t)))
                            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                        if (st->stamp != r->batch_id) {
                            size_t cap = r->tasks_cap;
                            if (!grow((void **)&r->tasks, &cap, (size_t)n_tasks + 1, sizeof(task)))
                                return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                            r->tasks_cap = cap;
                            task *T = &r->tasks[n_tasks];
                            memset(T, 0, sizeof *T);
                            T->head = h;
                            T->image = b;
                            T->vox = 1;
                            for (int a = 0; a < NDIM; a++) {
                                T->cell[a] = c[a];
                                T->ext[a] = ax[a].cell_hi[c[a]] - ax[a].cell_lo[c[a]];
                                T->vox *= T->ext[a];
                            }
                            int64_t full = ax[0].cell_wcount[c[0]] * ax[1].cell_wcount[c[1]] * ax[2].cell_wcount[c[2]];
                            if (full > 1 && !st->buf) {
                                size_t bytes = swi__cell_bytes(hg, c);
                                st->buf = swi__cellmem_get(&r->mem, bytes);
                                if (!st->buf)
                                    return swi__fail(r->ctx, SWI_ERR_NOMEM,
                                                     "out of memory for partial sums (%zu bytes)", bytes);
                                T->fresh = 1;
                            }
                            T->buf = st->buf;
                            st->stamp = r->batch_id;
                            st->task = n_tasks++;
                        }
                        st->rem--;
                        if (st->rem == 0) r->tasks[st->task].completes = 1;
                        r->tasks[st->task].win_n++;
                        r->pair_task[n_pairs++] = st->task;
                    }
        }
    }
    /* windows of each task in batch order: counting sort of the (task, window) pairs */
    if (!grow((void **)&r->task_wins, &r->task_wins_cap, n_pairs, sizeof(int32_t)))
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
    int32_t off = 0;
    for (int32_t i = 0; i < n_tasks; i++) {
        r->tasks[i].win_off = off;
        off += r->tasks[i].win_n;
        r->tasks[i].win_n = 0;
    }
    /* replay the same loop order to recover each pair's window */
    size_t q = 0;
    for (int j = 0; j < s->n; j++) {
        const int64_t *t = &s->t[j * NDIM];
        for (int h = 0; h < g->n_heads; h++) {
            const axis_grid *ax = g->heads[h].ax;
            int64_t cells = ax[0].win_ccount[t[0]] * ax[1].win_ccount[t[1]] * ax[2].win_ccount[t[2]];
            for (int64_t k = 0; k < cells; k++, q++) {
                task *T = &r->tasks[r->pair_task[q]];
                r->task_wins[T->win_off + T->win_n++] = j;
            }
        }
    }
    /* accumulation items: per head, every axis-0 row of cells the batch touches, split
     * by planes (and, for few planes, by rows) into about ACC_ITEMS_PER_THREAD items per
     * thread */
    r->n_acc = r->n_fin = 0;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        const axis_grid *ax0 = &hg->ax[0];
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int j = 0; j < s->n; j++) {
            const int64_t *t = &s->t[j * NDIM];
            if (ax0->win_ccount[t[0]] <= 0) continue;
            if (ax0->win_cfirst[t[0]] < lo) lo = ax0->win_cfirst[t[0]];
            if (ax0->win_cfirst[t[0]] + ax0->win_ccount[t[0]] > hi) hi = ax0->win_cfirst[t[0]] + ax0->win_ccount[t[0]];
        }
        if (lo >= hi) continue;
        int64_t planes = hg->channels + 1, want = (int64_t)r->threads * ACC_ITEMS_PER_THREAD;
        int64_t per_row = (want + (hi - lo) - 1) / (hi - lo);
        int64_t groups = per_row < planes ? per_row : planes;
        int64_t pp = (planes + groups - 1) / groups;
        int64_t splits = (per_row + groups - 1) / groups;
        for (int64_t c0 = lo; c0 < hi; c0++) {
            int64_t e0 = ax0->cell_hi[c0] - ax0->cell_lo[c0];
            int64_t rows = splits < e0 ? (e0 + splits - 1) / splits : 1;
            for (int64_t p0 = 0; p0 < planes; p0 += pp)
                for (int64_t i0 = 0; i0 < e0; i0 += rows) {
                    if (!grow((void **)&r->acc, &r->acc_cap, (size_t)r->n_acc + 1, sizeof(acc_item)))
                        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                    acc_item *it = &r->acc[r->n_acc++];
                    it->head = h;
                    it->p0 = (int32_t)p0;
                    it->p1 = (int32_t)(p0 + pp < planes ? p0 + pp : planes);
                    it->c0 = c0;
                    it->i0lo = i0;
                    it->i0hi = i0 + rows < e0 ? i0 + rows : e0;
                }
        }
    }
    for (int32_t i = 0; i < n_tasks; i++) {
        task *T = &r->tasks[i];
        if (T->completes) {
            int64_t e0 = T->ext[0], e1 = T->ext[1], e2 = T->ext[2];
            int64_t rows = (int64_t)r->chunk_cap / e2;
            if (rows < 1) rows = 1;
            int64_t step0 = e1 <= rows ? rows / e1 : 1, step1 = e1 <= rows ? e1 : rows;
            for (int64_t a0 = 0; a0 < e0; a0 += step0)
                for (int64_t b0 = 0; b0 < e1; b0 += step1) {
                    if (!grow((void **)&r->fin, &r->fin_cap, (size_t)r->n_fin + 1, sizeof(fin_item)))
                        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                    fin_item *it = &r->fin[r->n_fin++];
                    it->task = i;
                    it->a0 = a0;
                    it->a1 = a0 + step0 < e0 ? a0 + step0 : e0;
                    it->b0 = b0;
                    it->b1 = b0 + step1 < e1 ? b0 + step1 : e1;
                }
        }
    }
    r->n_tasks = n_tasks;
    return SWI_OK;
}

/* After a batch is blended: free the cells it completed. */
static void close_batch(run *r) {
    for (int32_t i = 0; i < r->n_tasks; i++) {
        task *T = &r->tasks[i];
        if (!T->completes || !T->buf) continue;
        const head_geom *hg = &r->g.heads[T->head];
        int64_t ci = (T->cell[0] * hg->ax[1].n_cells + T->cell[1]) * hg->ax[2].n_cells + T->cell[2];
        cell_state *st = &r->state[T->head][T->image * hg->n_cells + ci];
        swi__cellmem_put(&r->mem, st->buf, swi__cell_bytes(hg, T->cell));
        st->buf = NULL;
    }
    r->n_tasks = 0;
}

/* ---------------------------------------------------------------- setup */

static swi_status check_outputs(swi_ctx *ctx, const swi_params *p, const swi_output *outs, int n_outs) {
    if (n_outs < 0 || (n_outs > 0 && !outs))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs is NULL or n_outputs = %d is negative", n_outs);
    if (n_outs > SWI_MAX_OUTPUTS)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "n_outputs = %d: at most %d", n_outs, SWI_MAX_OUTPUTS);
    for (int i = 0; i < n_outs; i++) {
        const swi_output *o = &outs[i];
        if (o->head < 0 || o->head >= p->n_heads)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].head = %d: params.n_heads is %d", i, o->head,
                             p->n_heads);
        if ((unsigned)o->reduce > SWI_REDUCE_SOFTMAX)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].reduce = %d: unknown reduction", i,
                             (int)o->reduce);
        if ((unsigned)o->dtype > SWI_DTYPE_UINT16)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dtype = %d: unknown dtype", i, (int)o->dtype);
        if (o->reduce == SWI_REDUCE_CUSTOM && !o->on_region)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d]: SWI_REDUCE_CUSTOM needs on_region", i);
        int is_label = o->reduce == SWI_REDUCE_ARGMAX;
        if (o->dtype != SWI_DTYPE_AUTO && o->dtype != SWI_DTYPE_FLOAT32 && !is_label)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "outputs[%d].dtype: integer types are only for SWI_REDUCE_ARGMAX", i);
        if (is_label && o->dtype == SWI_DTYPE_FLOAT32)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dtype: argmax labels are uint8 or uint16", i);
    }
    return SWI_OK;
}

/* Heads: build each head's grid from what is declared (or assumed: spatial = roi). */
static swi_status build_heads(run *r) {
    for (int h = 0; h < r->g.n_heads; h++) {
        const swi_head_spec *d = &r->p->heads[h];
        int64_t ch = r->known[h] ? r->shape_c[h] : (d->channels > 0 ? d->channels : 0);
        const int64_t *sp = r->known[h] ? r->shape_s[h] : d->spatial;
        swi_status st = swi__geom_head(r->ctx, &r->g, h, ch, sp);
        if (st != SWI_OK) return st;
    }
    return SWI_OK;
}

/* An output's element type and stored size, and whether dst can hold it. */
static swi_status resolve_output(swi_ctx *ctx, const geom *g, const swi_output *o, int i, swi_dtype *dtype,
                                 size_t *bytes_out) {
    const head_geom *hg = &g->heads[o->head];
    int64_t C = hg->channels;
    swi_dtype dt = o->dtype;
    if (o->reduce == SWI_REDUCE_ARGMAX) {
        if (dt == SWI_DTYPE_AUTO) dt = C > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
        int64_t lim = dt == SWI_DTYPE_UINT8 ? 256 : 65536;
        if (C > lim)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "outputs[%d]: head %d has %lld channels, too many classes for %s labels", i, o->head,
                             (long long)C, lim == 256 ? "uint8" : "uint16");
    } else {
        dt = SWI_DTYPE_FLOAT32;
    }
    *dtype = dt;
    *bytes_out = 0;
    if (o->reduce == SWI_REDUCE_CUSTOM) return SWI_OK;
    size_t bytes = (size_t)g->batch * swi__dtype_size(dt);
    for (int a = 0; a < NDIM; a++)
        if (!swi__mul_size(bytes, (size_t)hg->out[a], &bytes))
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "outputs[%d]: result size overflows", i);
    if ((o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_SOFTMAX) && !swi__mul_size(bytes, (size_t)C, &bytes))
        return swi__fail(ctx, SWI_ERR_OVERFLOW, "outputs[%d]: result size overflows", i);
    if (o->dst && o->dst_bytes < bytes)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dst_bytes = %zu: the result needs %zu bytes", i,
                         o->dst_bytes, bytes);
    *bytes_out = bytes;
    return SWI_OK;
}

/* Resolve output dtypes and destinations once every head's channels are known. */
static swi_status setup_outputs(run *r, const swi_output *outs) {
    for (int i = 0; i < r->n_outs; i++) {
        out_spec *os = &r->outs[i];
        os->o = outs[i];
        size_t bytes;
        swi_status st = resolve_output(r->ctx, &r->g, &os->o, i, &os->dtype, &bytes);
        if (st != SWI_OK) return st;
        if (os->o.reduce == SWI_REDUCE_CUSTOM) continue;
        if (os->o.dst) {
            os->data = os->o.dst;
        } else if (!os->o.on_region) {
            os->data = swi__calloc(1, bytes);
            if (!os->data)
                return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for outputs[%d] (%zu bytes)", i, bytes);
            os->owned = 1;
            r->ctx->results[i].data = os->data;
            r->ctx->results[i].bytes = bytes;
        }
    }
    return SWI_OK;
}

/* Everything that needs the heads' real shapes: called after the first predictor call. */
static swi_status setup_after_first_call(run *r, const swi_output *outs) {
    swi_status st = build_heads(r);
    if (st != SWI_OK) return st;
    const geom *g = &r->g;
    size_t cmax = 1, rowmax = 1;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        size_t n;
        if (!swi__mul_size((size_t)hg->n_cells, (size_t)g->batch, &n) ||
            !swi__mul_size(n, sizeof(cell_state), &n))
            return swi__fail(r->ctx, SWI_ERR_OVERFLOW, "head %d: too many cells", h);
        r->state[h] = swi__malloc(n);
        if (!r->state[h]) return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for head %d's cell table", h);
        const axis_grid *ax = hg->ax;
        int64_t i = 0, c[NDIM];
        for (c[0] = 0; c[0] < ax[0].n_cells; c[0]++)
            for (c[1] = 0; c[1] < ax[1].n_cells; c[1]++)
                for (c[2] = 0; c[2] < ax[2].n_cells; c[2]++, i++) {
                    int32_t full = (int32_t)(ax[0].cell_wcount[c[0]] * ax[1].cell_wcount[c[1]] *
                                             ax[2].cell_wcount[c[2]]);
                    for (int64_t b = 0; b < g->batch; b++) {
                        cell_state *cs = &r->state[h][b * hg->n_cells + i];
                        cs->buf = NULL;
                        cs->rem = full;
                        cs->stamp = -1;
                        cs->task = 0;
                        cs->pad = 0;
                    }
                }
        if ((size_t)hg->channels > cmax) cmax = (size_t)hg->channels;
        if ((size_t)hg->win[2] > rowmax) rowmax = (size_t)hg->win[2];
        r->ctx->out_channels[h] = hg->channels;
        for (int k = 0; k < g->user_dims; k++) r->ctx->out_size[h][k] = hg->out[swi__axis(g, k)];
    }
    r->chunk_cap = rowmax > CHUNK_VOXELS ? rowmax : CHUNK_VOXELS;
    r->seg_cap = swi__seg_cap(g);
    int want_soft = 0;
    for (int i = 0; i < r->n_outs; i++) want_soft |= outs[i].reduce == SWI_REDUCE_SOFTMAX;
    r->ws = swi__calloc((size_t)r->threads, sizeof *r->ws);
    if (!r->ws) return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for worker scratch");
    for (int i = 0; i < r->threads; i++) {
        worker_scratch *w = &r->ws[i];
        size_t n = r->chunk_cap;
        w->segs = swi__calloc(r->seg_cap, sizeof(acc_seg));
        if (!w->segs) return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for worker scratch");
        w->scores = swi__malloc(n * cmax * sizeof(float));
        if (want_soft && !(w->soft = swi__malloc(n * cmax * sizeof(float))))
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for worker scratch");
        w->rs.best = swi__malloc(n * sizeof(float));
        w->rs.arg = swi__malloc(n * sizeof(int32_t));
        w->rs.aux = swi__malloc(n * sizeof(float));
        w->rs.aux2 = swi__malloc(n * sizeof(float));
        w->rs.out = swi__malloc(n * sizeof(float));
        if (!w->scores || !w->rs.best || !w->rs.arg || !w->rs.aux || !w->rs.aux2 || !w->rs.out)
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for worker scratch");
    }
    st = setup_outputs(r, outs);
    if (st != SWI_OK) return st;
    /* heads learned from this call: plan again with their real sizes, keeping the window
     * order already used, so a budget is still honoured (or refused now, after one call) */
    int learned = 0;
    for (int h = 0; h < g->n_heads; h++) learned |= r->p->heads[h].channels <= 0;
    if (learned) {
        swi_params q = *r->p;
        int lead = NDIM - g->user_dims, k = 0;
        for (int i = 0; i < NDIM; i++)
            if (r->choice.order[i] >= lead) q.order[k++] = r->choice.order[i] - lead;
        q.order_mode = SWI_ORDER_FIXED;
        q.sw_batch_size = r->sw;
        q.pipeline = r->n_slots == 2 ? (r->p->pipeline == SWI_PIPELINE_ON ? SWI_PIPELINE_ON : SWI_PIPELINE_AUTO)
                                     : SWI_PIPELINE_OFF;
        swi_plan plan;
        plan_choice c;
        st = swi__plan(r->ctx, &q, g, outs, r->n_outs, &plan, &c);
        if (st != SWI_OK) return st;
        r->sw = c.sw;
        if (!c.pipeline) r->n_slots = 1;
        r->mem.limit = c.partial;
    }
    r->setup_done = 1;
    return SWI_OK;
}

static swi_status alloc_slot(run *r, slot *s) {
    const geom *g = &r->g;
    size_t n = (size_t)r->sw;
    s->input_bytes = n * (size_t)(g->cin * g->roi_vox) * sizeof(float);
    s->input = swi__big_alloc(s->input_bytes);
    s->image = swi__malloc(n * sizeof(int64_t));
    s->t = swi__malloc(n * NDIM * sizeof(int64_t));
    s->ustart = swi__malloc(n * SWI_MAX_DIMS * sizeof(int64_t));
    if (!s->input || !s->image || !s->t || !s->ustart)
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the window buffers");
    return SWI_OK;
}

static void free_run(run *r) {
    if (r->pool) swi__pool_destroy(r->pool);
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        if (!r->state[h]) continue;
        int64_t n = r->g.heads[h].n_cells * r->g.batch;
        for (int64_t i = 0; i < n; i++)
            if (r->state[h][i].buf) {
                const head_geom *hg = &r->g.heads[h];
                int64_t ci = i % hg->n_cells, c[NDIM];
                c[2] = ci % hg->ax[2].n_cells;
                c[1] = (ci / hg->ax[2].n_cells) % hg->ax[1].n_cells;
                c[0] = ci / (hg->ax[2].n_cells * hg->ax[1].n_cells);
                size_t bytes = swi__cell_bytes(hg, c);
                swi__cellmem_release(&r->mem, r->state[h][i].buf, bytes);
            }
        swi__free(r->state[h]);
    }
    for (int i = 0; i < 2; i++) {
        slot *s = &r->slots[i];
        swi__big_free(s->input, s->input_bytes);
        swi__free(s->image);
        swi__free(s->t);
        swi__free(s->ustart);
        for (int h = 0; h < SWI_MAX_HEADS; h++) swi__big_free(s->head[h], s->head_cap[h]);
    }
    if (r->ws) {
        for (int i = 0; i < r->threads; i++) {
            worker_scratch *w = &r->ws[i];
            swi__free(w->segs);
            swi__free(w->scores);
            swi__free(w->soft);
            swi__free(w->rs.best);
            swi__free(w->rs.arg);
            swi__free(w->rs.aux);
            swi__free(w->rs.aux2);
            swi__free(w->rs.out);
        }
        swi__free(r->ws);
    }
    swi__cellmem_free(&r->mem);
    swi__free(r->outs);
    swi__free(r->idx_scratch);
    swi__free(r->tasks);
    swi__free(r->pair_task);
    swi__free(r->task_wins);
    swi__free(r->acc);
    swi__free(r->fin);
    swi__geom_free(&r->g);
}

/* ---------------------------------------------------------------- public */

static swi_status prepare(run *r, swi_ctx *ctx, const swi_params *p, const swi_tensor *in,
                          const swi_output *outs, int n_outs, swi_plan *plan) {
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->p = p;
    r->in = in;
    atomic_init(&r->cb_failed, 0);
    swi_status st = swi__geom_init(ctx, p, in, &r->g);
    if (st != SWI_OK) return st;
    st = check_outputs(ctx, p, outs, n_outs);
    if (st != SWI_OK) return st;
    for (int h = 0; h < p->n_heads; h++) {
        const swi_head_spec *d = &p->heads[h];
        if (d->channels < 0) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.heads[%d].channels is negative", h);
        for (int k = 0; k < p->dims; k++)
            if (d->spatial[k] < 0)
                return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.heads[%d].spatial[%d] is negative", h, k);
    }
    st = build_heads(r);
    if (st != SWI_OK) return st;
    /* outputs of fully declared heads are checked now, before any network call */
    for (int i = 0; i < n_outs; i++) {
        swi_dtype dt;
        size_t bytes;
        if (p->heads[outs[i].head].channels > 0 && (st = resolve_output(ctx, &r->g, &outs[i], i, &dt, &bytes)) != SWI_OK) return st;
    }
    return swi__plan(ctx, p, &r->g, outs, n_outs, plan, &r->choice);
}

swi_status swi_plan_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                        const swi_output *outputs, int n_outputs, swi_plan *plan) {
    if (!ctx) return SWI_ERR_INVALID_ARG;
    swi__clear_error(ctx);
    if (!plan) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "plan is NULL");
    run r;
    swi_status st = prepare(&r, ctx, params, input, outputs, n_outputs, plan);
    if (st == SWI_OK) {
        ctx->dims = r.g.user_dims;
        memset(ctx->out_size, 0, sizeof ctx->out_size);
        memset(ctx->out_channels, 0, sizeof ctx->out_channels);
        for (int h = 0; h < r.g.n_heads; h++) {
            ctx->out_channels[h] = r.g.heads[h].channels;
            for (int k = 0; k < r.g.user_dims; k++) ctx->out_size[h][k] = r.g.heads[h].out[swi__axis(&r.g, k)];
        }
    }
    free_run(&r);
    return st;
}

swi_status swi_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                   const swi_predictor *predictor, const swi_output *outputs, int n_outputs) {
    if (!ctx) return SWI_ERR_INVALID_ARG;
    swi__clear_error(ctx);
    swi__drop_results(ctx);
    memset(ctx->out_size, 0, sizeof ctx->out_size);
    memset(ctx->out_channels, 0, sizeof ctx->out_channels);
    ctx->dims = 0;
    if (!predictor || !predictor->predict)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "predictor is NULL or has no predict function");
    if (input && !input->data) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "input.data is NULL");
    run r;
    swi_plan plan;
    swi_status st = prepare(&r, ctx, params, input, outputs, n_outputs, &plan);
    if (st != SWI_OK) goto done;
    r.pred = predictor;
    r.sw = r.choice.sw;
    r.threads = plan.threads;
    r.n_outs = n_outputs;
    r.n_slots = r.choice.pipeline ? 2 : 1;
    swi__cellmem_init(&r.mem, plan.bytes_partial);
    r.outs = swi__calloc((size_t)(n_outputs > 0 ? n_outputs : 1), sizeof(out_spec));
    ctx->results = swi__calloc((size_t)(n_outputs > 0 ? n_outputs : 1), sizeof(swi_result_buf));
    r.idx_scratch = swi__malloc((size_t)(r.g.roi[0] + r.g.roi[1] + r.g.roi[2]) * sizeof(int64_t));
    if (!r.outs || !ctx->results || !r.idx_scratch) {
        st = swi__fail(ctx, SWI_ERR_NOMEM, "out of memory");
        goto done;
    }
    ctx->n_results = n_outputs;
    ctx->dims = r.g.user_dims;
    for (int i = 0; i < r.n_slots && st == SWI_OK; i++) st = alloc_slot(&r, &r.slots[i]);
    if (st != SWI_OK) goto done;
    st = swi__pool_create(&r.pool, r.threads);
    if (st != SWI_OK) {
        st = swi__fail(ctx, st, st == SWI_ERR_THREAD ? "could not start %d worker threads" : "out of memory",
                       r.threads);
        goto done;
    }
    int64_t total = r.g.win_per_image * r.g.batch, next = 0, done_w = 0;
    int cur = 0;
    int n = (int)(total - next < r.sw ? total - next : r.sw);
    st = fill_and_predict(&r, &r.slots[cur], next, n);
    next += n;
    if (st == SWI_OK) st = setup_after_first_call(&r, outputs);
    while (st == SWI_OK) {
        slot *s = &r.slots[cur];
        st = book_batch(&r, s);
        if (st != SWI_OK) break;
        r.cur = s;
        swi_phase phases[2] = {{accumulate_item, &r, r.n_acc}, {finish_item, &r, r.n_fin}};
        swi__pool_submit(r.pool, phases, 2);
        int other = r.n_slots == 2 ? 1 - cur : cur;
        int more = next < total;
        int pred_n = more ? (int)(total - next < r.sw ? total - next : r.sw) : 0;
        if (more && r.n_slots == 2) st = fill_and_predict(&r, &r.slots[other], next, pred_n);
        swi__pool_wait(r.pool);
        close_batch(&r);
        done_w += s->n;
        int failed = atomic_load(&r.cb_failed);
        if (failed && st == SWI_OK)
            st = swi__fail(ctx, SWI_ERR_CALLBACK, "outputs[%d].on_region returned non-zero", failed - 1);
        if (st != SWI_OK) break;
        if (params->progress && params->progress(params->progress_user, done_w, total) != 0) {
            st = swi__fail(ctx, SWI_ERR_CANCELLED, "cancelled by the progress callback after %lld of %lld windows",
                           (long long)done_w, (long long)total);
            break;
        }
        if (!more) break;
        if (r.n_slots == 1) st = fill_and_predict(&r, &r.slots[other], next, pred_n);
        next += pred_n;
        cur = other;
    }
done:
    if (st != SWI_OK) {
        swi__drop_results(ctx); /* nothing half-done is reported as a result */
        memset(ctx->out_size, 0, sizeof ctx->out_size);
    }
    free_run(&r);
    return st;
}
