/* run.c -- the run, as the algorithm reads:
 *
 *   plan (order, batch size, memory)
 *   for each batch of windows:
 *       gather the windows through the padding, call the predictor      (batch.c)
 *       book: the windows land on their cells; cells open               (frontier.c)
 *       blend p*w and w into the open cells                             (blend.c)
 *       finish every completed cell: divide, reduce, hand to the sinks  (finish.c)
 *       release the completed cells
 *
 * with the predictor call of batch k+1 overlapping the blending of batch k when the
 * plan pipelines. Where a voxel's value is computed: blend.c (the sums) and finish.c
 * (the division and every reduction). */
#include "engine.h"

#include <string.h>

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

/* Book the windows of slot s: each lands on the cells it covers (the frontier counts
 * them down and opens the ones that need partial sums), grouped into one task per
 * cell touched, then split into parallel blend and finish items. pair_task holds, for
 * every window and head, the task of each cell of the window's box in C order (-1 for a
 * cell outside the part), from pair_off[window * heads + head] on: the blend finds its
 * cells there, never in the frontier's table. */
static swi_status book_batch(run *r, const slot *s) {
    const geom *g = &r->g;
    r->batch_id++;
    int32_t n_tasks = 0;
    size_t n_pairs = 0;
    if (!swi__grow((void **)&r->pair_off, &r->pair_off_cap, (size_t)s->n * (size_t)g->n_heads,
                   sizeof(size_t)))
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
    for (int j = 0; j < s->n; j++) {
        const int64_t *t = &s->t[j * NDIM];
        int64_t b = s->image[j];
        for (int h = 0; h < g->n_heads; h++) {
            const head_geom *hg = &g->heads[h];
            int64_t lo[NDIM], n[NDIM], c[NDIM];
            swi__window_cells(hg, t, lo, n);
            r->pair_off[(size_t)j * (size_t)g->n_heads + (size_t)h] = n_pairs;
            for (int more = swi__box_first(c, lo, n); more; more = swi__box_next(c, lo, n)) {
                cell_state *st;
                int flags;
                if (!swi__grow((void **)&r->pair_task, &r->pairs_cap, n_pairs + 1, sizeof(int32_t)))
                    return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                if (g->has_part && !swi__cell_in_part(g, hg, c)) {
                    r->pair_task[n_pairs++] = -1;
                    continue;
                }
                swi_status e = swi__frontier_land(&r->front, h, b, c, &st, &flags);
                if (e == SWI_ERR_SHAPE) return swi__fail(r->ctx, e, "internal: cell landed on twice");
                if (e == SWI_ERR_OVERFLOW) return swi__fail(r->ctx, e, "internal: the cell table is full");
                if (e != SWI_OK)
                    return swi__fail(r->ctx, e, "out of memory for partial sums (%zu bytes)",
                                     swi__cell_bytes(hg, c));
                if (st->stamp != r->batch_id) {
                    if (!swi__grow((void **)&r->tasks, &r->tasks_cap, (size_t)n_tasks + 1, sizeof(task)))
                        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                    task *T = &r->tasks[n_tasks];
                    memset(T, 0, sizeof *T);
                    T->head = h;
                    T->image = b;
                    T->vox = 1;
                    for (int a = 0; a < NDIM; a++) {
                        T->cell[a] = c[a];
                        T->ext[a] = hg->ax[a].cell_hi[c[a]] - hg->ax[a].cell_lo[c[a]];
                        T->vox *= T->ext[a];
                    }
                    /* opened now: its first window stores instead of adding */
                    T->fresh = (flags & SWI_LAND_OPENED) != 0;
                    T->buf = st->buf;
                    st->stamp = r->batch_id;
                    st->task = n_tasks++;
                }
                if (flags & SWI_LAND_COMPLETED) r->tasks[st->task].completes = 1;
                r->tasks[st->task].win_n++;
                r->pair_task[n_pairs++] = st->task;
            }
        }
    }
    /* windows of each task in batch order: counting sort of the (task, window) pairs */
    if (!swi__grow((void **)&r->task_wins, &r->task_wins_cap, n_pairs, sizeof(int32_t)))
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
    int32_t off = 0;
    for (int32_t i = 0; i < n_tasks; i++) {
        r->tasks[i].win_off = off;
        off += r->tasks[i].win_n;
        r->tasks[i].win_n = 0;
    }
    /* the pairs in the same order, each with its window */
    for (int j = 0; j < s->n; j++)
        for (int h = 0; h < g->n_heads; h++) {
            const size_t q0 = r->pair_off[(size_t)j * (size_t)g->n_heads + (size_t)h];
            const size_t q1 =
                (size_t)j * (size_t)g->n_heads + (size_t)h + 1 < (size_t)s->n * (size_t)g->n_heads
                    ? r->pair_off[(size_t)j * (size_t)g->n_heads + (size_t)h + 1]
                    : n_pairs;
            for (size_t q = q0; q < q1; q++) {
                if (r->pair_task[q] < 0) continue;
                task *T = &r->tasks[r->pair_task[q]];
                r->task_wins[T->win_off + T->win_n++] = j;
            }
        }
    r->n_tasks = n_tasks;
    swi_status st = swi__blend_items(r, s);
    return st == SWI_OK ? swi__finish_items(r) : st;
}

/* Everything that needs the heads' real shapes: called after the first predictor call. */
static swi_status setup_after_first_call(run *r, const swi_output *outs) {
    swi_status st = build_heads(r);
    if (st != SWI_OK) return st;
    const geom *g = &r->g;
    size_t cmax = 1, rowmax = 1;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        if ((size_t)hg->channels > cmax) cmax = (size_t)hg->channels;
        if ((size_t)hg->win[NDIM - 1] > rowmax) rowmax = (size_t)hg->win[NDIM - 1];
        r->ctx->out_channels[h] = hg->channels;
        for (int k = 0; k < g->user_dims; k++) r->ctx->out_size[h][k] = hg->out[swi__axis(g, k)];
    }
    r->chunk_cap = rowmax > SWI_CHUNK_VOXELS ? rowmax : SWI_CHUNK_VOXELS;
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
        if (g->acc_bytes != sizeof(float) && !(w->share = swi__malloc(swi__share_floats(g) * sizeof(float))))
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for worker scratch");
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
    st = swi__setup_outputs(r, outs);
    if (st != SWI_OK) return st;
    /* heads learned from this call: plan again with their real sizes, keeping the window
     * order already used, so a budget is still honoured (or refused now, after one call) */
    int learned = 0;
    for (int h = 0; h < g->n_heads; h++) learned |= r->p->heads[h].channels <= 0;
    if (learned) {
        /* the batch size and pipelining are chosen again from what was asked for (the
         * second slot is allocated at its first use) */
        swi_plan plan;
        plan_choice c;
        st = swi__plan(r->ctx, r->p, g, outs, r->n_outs, &plan, &c, &r->choice);
        if (st != SWI_OK) return st;
        r->replanned_sw = c.sw != r->sw;
        r->sw = c.sw;
        r->n_slots = c.pipeline ? 2 : 1;
        /* the next call will overlap the first batch's blending: its outputs must be ours */
        if (r->n_slots == 2 && (st = swi__slot_own(r, &r->slots[0])) != SWI_OK) return st;
        r->mem.limit = c.partial;
        r->choice.frontier = c.frontier;
        r->choice.reuse_cache = c.reuse_cache;
        r->choice.table = c.table;
    }
    /* the cell table, as planned for the heads' real shapes */
    st = swi__frontier_init(&r->front, g, &r->mem, r->choice.table);
    if (st != SWI_OK)
        return swi__fail(r->ctx, st,
                         st == SWI_ERR_NOMEM ? "out of memory for the cell tables"
                                             : "the cell tables' size overflows");
    if (r->reuse) {
        size_t out_floats[SWI_MAX_HEADS];
        for (int h = 0; h < g->n_heads; h++)
            out_floats[h] = (size_t)(g->heads[h].channels * g->heads[h].win_vox);
        if (swi__reuse_init(&r->cache, r->choice.reuse_cache, (size_t)(g->cin * g->roi_vox), g->n_heads,
                            out_floats) != SWI_OK)
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the reuse cache");
        r->cache_ready = 1;
        swi__reuse_keep(r, &r->slots[0]); /* the first batch, still in its slot */
    }
    r->setup_done = 1;
    return SWI_OK;
}

static void free_run(run *r) {
    if (r->pool) swi__pool_destroy(r->pool);
    swi__frontier_free(&r->front);
    for (int i = 0; i < 2; i++) swi__slot_free(&r->slots[i]);
    if (r->ws) {
        for (int i = 0; i < r->threads; i++) {
            worker_scratch *w = &r->ws[i];
            swi__free(w->segs);
            swi__free(w->share);
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
    swi__reuse_free(&r->cache);
    swi__free(r->outs);
    swi__free(r->idx_scratch);
    swi__free(r->wlist);
    swi__big_free(r->box, (size_t)(r->g.cin * r->g.roi_vox) * sizeof(float));
    swi__free(r->tasks);
    swi__free(r->pair_task);
    swi__free(r->pair_off);
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
    st = swi__check_outputs(ctx, p, outs, n_outs);
    if (st != SWI_OK) return st;
    for (int h = 0; h < p->n_heads; h++) {
        const swi_head_spec *d = &p->heads[h];
        if (d->channels < 0)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.heads[%d].channels is negative", h);
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
        if (p->heads[outs[i].head].channels > 0 &&
            (st = swi__resolve_output(ctx, &r->g, &outs[i], i, &dt, &bytes)) != SWI_OK)
            return st;
    }
    return swi__plan(ctx, p, &r->g, outs, n_outs, plan, &r->choice, NULL);
}

/* The windows that run, in order: all of them, or (a part) those touching the part. */
static swi_status window_list(run *r) {
    const geom *g = &r->g;
    const int64_t all = g->win_per_image * g->batch;
    r->n_windows = all;
    if (!g->has_part) return SWI_OK;
    int64_t n = g->batch; /* those of the part: the product of the per-axis counts */
    for (int a = 0; a < NDIM; a++) {
        int64_t m = g->n_win[a];
        if (g->part_cut[a]) {
            m = 0;
            for (int64_t t = 0; t < g->n_win[a]; t++) m += swi__window_in_part_axis(g, a, t);
        }
        n *= m;
    }
    r->wlist = swi__malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!r->wlist) return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the part's window list");
    r->n_windows = 0;
    for (int64_t w = 0; w < all && r->n_windows < n; w++) {
        int64_t t[NDIM];
        swi__order_coords(g, &r->choice, w % g->win_per_image, t);
        if (swi__window_in_part(g, t)) r->wlist[r->n_windows++] = w;
    }
    return SWI_OK;
}

/* The windows a run will reuse: the run's own choice (batch.c), replayed on the input
 * without a predictor -- the same batches, the first of which meets an empty cache (its
 * windows are offered to the cache after it, as the run does once the cache exists). */
static swi_status count_reuse(run *r, const swi_plan *plan, int64_t *reused) {
    const geom *g = &r->g;
    const size_t in_n = (size_t)(g->cin * g->roi_vox);
    const int sw = plan->sw_batch_size;
    const int64_t total = r->n_windows;
    *reused = 0;
    reuse_cache c;
    size_t bytes;
    if (!swi__mul_size((size_t)sw, in_n * sizeof(float), &bytes))
        return swi__fail(r->ctx, SWI_ERR_OVERFLOW, "window buffer size overflows");
    float *win = swi__big_alloc(bytes);
    int64_t *idx = swi__malloc((size_t)(g->roi[0] + g->roi[1] + g->roi[2] + g->roi[3]) * sizeof(int64_t));
    float *box = r->in->data ? NULL : swi__big_alloc(in_n * sizeof(float));
    uint64_t *hash = swi__malloc((size_t)sw * sizeof(uint64_t));
    swi_status st = swi__reuse_init(&c, plan->reuse_cache, in_n, g->n_heads, NULL);
    if (!win || !idx || !hash || st != SWI_OK || (!r->in->data && !box)) {
        st = swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory while counting reusable windows");
        goto out;
    }
    for (int64_t first = 0; first < total; first += sw) {
        int n = (int)(total - first < sw ? total - first : sw), n_run = 0;
        for (int j = 0; j < n; j++) {
            int64_t w = swi__run_window(r, first + j), b = w / g->win_per_image, t[NDIM], start[NDIM];
            swi__order_coords(g, &r->choice, w % g->win_per_image, t);
            for (int a = 0; a < NDIM; a++) start[a] = g->starts[a][t[a]];
            float *x = win + (size_t)n_run * in_n;
            char msg[SWI_ERRMSG_LEN - 128];
            if (swi__gather(g, r->p, r->in, b, start, x, idx, box, msg, sizeof msg) != 0) {
                st = swi__fail(r->ctx, SWI_ERR_READ, "the input reader failed on image %lld, window %lld%s%s",
                               (long long)b, (long long)w, msg[0] ? ": " : "", msg);
                goto out;
            }
            uint64_t h = swi__reuse_hash(x, in_n);
            int dup = 0;
            for (int i = 0; i < n_run && !dup; i++)
                dup = hash[i] == h && memcmp(win + (size_t)i * in_n, x, in_n * sizeof(float)) == 0;
            if (!dup && first > 0) dup = swi__reuse_find(&c, h, x) >= 0;
            if (dup) {
                (*reused)++;
                continue;
            }
            hash[n_run++] = h;
        }
        for (int i = 0; i < n_run; i++) swi__reuse_admit(&c, hash[i], win + (size_t)i * in_n);
    }
out:
    swi__reuse_free(&c);
    swi__big_free(win, bytes);
    swi__big_free(box, in_n * sizeof(float));
    swi__free(idx);
    swi__free(hash);
    return st;
}

swi_status swi_plan_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                        const swi_output *outputs, int n_outputs, swi_plan *plan) {
    if (!ctx) return SWI_ERR_INVALID_ARG;
    swi__clear_error(ctx);
    if (!plan) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "plan is NULL");
    run r;
    swi_status st = prepare(&r, ctx, params, input, outputs, n_outputs, plan);
    if (st == SWI_OK && params->reuse == SWI_REUSE_ON &&
        (input->data || (input->reader && input->reader->read))) {
        st = window_list(&r);
        if (st == SWI_OK) st = count_reuse(&r, plan, &plan->windows_reused);
    }
    if (st == SWI_OK) {
        ctx->dims = r.g.user_dims;
        memset(ctx->out_size, 0, sizeof ctx->out_size);
        memset(ctx->out_channels, 0, sizeof ctx->out_channels);
        for (int h = 0; h < r.g.n_heads; h++) {
            ctx->out_channels[h] = r.g.heads[h].channels;
            for (int k = 0; k < r.g.user_dims; k++)
                ctx->out_size[h][k] = r.g.heads[h].out[swi__axis(&r.g, k)];
        }
    }
    free_run(&r);
    return st;
}

/* Everything a run holds before its first predictor call. */
static swi_status start_run(run *r, swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                            const swi_predictor *predictor, int n_outputs, const swi_plan *plan) {
    r->pred = predictor;
    r->reuse = params->reuse == SWI_REUSE_ON;
    /* the mirrored runs: every subset of the mirrored axes, in increasing mask order */
    for (unsigned m = 0, k = 0; m < (1u << NDIM); m++)
        if (!(m & ~r->g.mirror)) r->pass_mask[k++] = m;
    r->pass_w = 1.0f / (float)r->g.passes;
    swi_status st = window_list(r);
    if (st != SWI_OK) return st;
    r->stats.windows_total = r->n_windows;
    /* With a budget and head shapes still to learn, the first call takes one window: its
     * buffers are sized before the heads are known, and one window is within any plan
     * made once they are. */
    int learned = 0;
    for (int h = 0; h < r->g.n_heads; h++) learned |= params->heads[h].channels <= 0;
    r->sw = learned && params->max_memory > 0 ? 1 : r->choice.sw;
    r->threads = plan->threads;
    r->n_outs = n_outputs;
    r->n_slots = r->choice.pipeline && r->sw == r->choice.sw ? 2 : 1;
    swi__cellmem_init(&r->mem, plan->bytes_partial);
    r->outs = swi__calloc((size_t)(n_outputs > 0 ? n_outputs : 1), sizeof(out_spec));
    ctx->results = swi__calloc((size_t)(n_outputs > 0 ? n_outputs : 1), sizeof(swi_result_buf));
    r->idx_scratch =
        swi__malloc((size_t)(r->g.roi[0] + r->g.roi[1] + r->g.roi[2] + r->g.roi[3]) * sizeof(int64_t));
    if (!input->data) r->box = swi__big_alloc((size_t)(r->g.cin * r->g.roi_vox) * sizeof(float));
    if (!r->outs || !ctx->results || !r->idx_scratch || (!input->data && !r->box))
        return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory");
    ctx->n_results = n_outputs;
    ctx->dims = r->g.user_dims;
    st = swi__slot_alloc(r, &r->slots[0]); /* the second, when pipelining, at its first use */
    if (st != SWI_OK) return st;
    st = swi__pool_create(&r->pool, r->threads);
    if (st != SWI_OK)
        return swi__fail(ctx, st,
                         st == SWI_ERR_THREAD ? "could not start %d worker threads" : "out of memory",
                         r->threads);
    return SWI_OK;
}

swi_status swi_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                   const swi_predictor *predictor, const swi_output *outputs, int n_outputs) {
    if (!ctx) return SWI_ERR_INVALID_ARG;
    swi__clear_error(ctx);
    swi__drop_results(ctx);
    memset(ctx->out_size, 0, sizeof ctx->out_size);
    memset(ctx->out_channels, 0, sizeof ctx->out_channels);
    ctx->dims = 0;
    ctx->frontier_comparable = 0;
    memset(&ctx->stats, 0, sizeof ctx->stats);
    if (!predictor || !predictor->predict)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "predictor is NULL or has no predict function");
    if (input && !input->data && !(input->reader && input->reader->read))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "input.data is NULL and input.reader has no read function");
    run r;
    swi_plan plan;
    swi_status st = prepare(&r, ctx, params, input, outputs, n_outputs, &plan);
    if (st != SWI_OK) goto done;
    st = start_run(&r, ctx, params, input, predictor, n_outputs, &plan);
    if (st != SWI_OK) goto done;
    int64_t total = r.n_windows, next = 0, done_w = 0;
    int cur = 0;
    int n = (int)(total - next < r.sw ? total - next : r.sw);
    st = swi__fill_and_predict(&r, &r.slots[cur], next, n);
    next += n;
    if (st == SWI_OK) st = setup_after_first_call(&r, outputs);
    while (st == SWI_OK) {
        slot *s = &r.slots[cur];
        st = book_batch(&r, s);
        if (st != SWI_OK) break;
        r.cur = s;
        /* every mirrored run but the last is blended on its own; the last is blended and
         * finished while the next batch's first call runs, when pipelining */
        for (r.pass = 0; r.pass < r.g.passes - 1 && st == SWI_OK; r.pass++) {
            swi_phase blend = {swi__blend_item, &r, r.n_acc};
            swi__pool_submit(r.pool, &blend, 1);
            swi__pool_wait(r.pool);
            st = swi__mirror_run(&r, s, r.pass_mask[r.pass], r.pass_mask[r.pass + 1]);
        }
        if (st != SWI_OK) break;
        swi_phase phases[2] = {{swi__blend_item, &r, r.n_acc}, {swi__finish_item, &r, r.n_fin}};
        swi__pool_submit(r.pool, phases, 2);
        int other = r.n_slots == 2 ? 1 - cur : cur;
        int more = next < total;
        int pred_n = more ? (int)(total - next < r.sw ? total - next : r.sw) : 0;
        if (more && r.n_slots == 2) st = swi__fill_and_predict(&r, &r.slots[other], next, pred_n);
        swi__pool_wait(r.pool);
        swi__slot_release(s);
        swi__frontier_end_batch(&r.front);
        r.n_tasks = 0;
        done_w += s->n;
        int failed = atomic_load(&r.cb_failed);
        if (failed && st == SWI_OK)
            st = swi__fail(ctx, SWI_ERR_CALLBACK, "outputs[%d].on_region returned non-zero", failed - 1);
        if (st != SWI_OK) break;
        if (params->progress && params->progress(params->progress_user, done_w, total) != 0) {
            st = swi__fail(ctx, SWI_ERR_CANCELLED,
                           "cancelled by the progress callback after %lld of %lld windows", (long long)done_w,
                           (long long)total);
            break;
        }
        if (!more) break;
        if (r.n_slots == 1) st = swi__fill_and_predict(&r, &r.slots[other], next, pred_n);
        next += pred_n;
        cur = other;
    }
done:
    ctx->stats = r.stats;
    ctx->stats.bytes_partial_peak = r.front.peak;
    if (st == SWI_OK) {
        ctx->frontier_planned = r.choice.frontier;
        ctx->frontier_peak = r.front.peak;
        ctx->frontier_comparable = !r.replanned_sw;
    }
    if (st != SWI_OK) {
        swi__drop_results(ctx); /* nothing half-done is reported as a result */
        memset(ctx->out_size, 0, sizeof ctx->out_size);
    }
    free_run(&r);
    return st;
}
