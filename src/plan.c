/* plan.c -- how a run will go and what it will need, before anything big is
 * allocated: window order, batch size, pipelining, and the byte-exact peak of the open
 * frontier's partial sums under that order, counted in memory and time that follow the
 * window grid's lines, not the volume. */
#include "internal.h"

#include <string.h>

size_t swi__seg_cap(const geom *g) {
    size_t cap = 1;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        int64_t m[2] = {1, 1}; /* the table holds the cells of axes 2 and 3 (blend.c) */
        for (int a = NDIM - 2; a < NDIM; a++)
            for (int64_t t = 0; t < hg->ax[a].n_win; t++)
                if (hg->ax[a].win_ccount[t] > m[a - (NDIM - 2)]) m[a - (NDIM - 2)] = hg->ax[a].win_ccount[t];
        if ((size_t)(m[0] * m[1]) > cap) cap = (size_t)(m[0] * m[1]);
    }
    return cap;
}

void swi__order_coords(const geom *g, const plan_choice *c, int64_t i, int64_t t[NDIM]) {
    const int a0 = c->order[0];
    int64_t inner = 1;
    for (int k = 1; k < NDIM; k++) inner *= g->n_win[c->order[k]];
    const int64_t n0 = g->n_win[a0];
    const int64_t tail = c->tail < 1 ? 1 : (c->tail > n0 ? n0 : c->tail);
    const int64_t head = (n0 - tail) * inner;
    int64_t rest;
    if (i < head) {
        t[a0] = i / inner;
        rest = i % inner;
    } else {
        t[a0] = n0 - tail + (i - head) % tail;
        rest = (i - head) / tail;
    }
    for (int k = NDIM - 1; k >= 1; k--) {
        const int a = c->order[k];
        t[a] = rest % g->n_win[a];
        rest /= g->n_win[a];
    }
}

/* The frontier's peak without a table of cells. A window order is monotone in every
 * grid coordinate (order_coords: plain C order, or the last `tail` windows of the
 * outermost axis interleaved), so a cell's first window is the first window covering it
 * along every axis, and its last window the last one along every axis. The cells a
 * window opens (their first window, covered by more than one) and completes (their last)
 * are thus products of per-axis sets, and their bytes products of per-axis sums of
 * extents. The windows along an axis step evenly, so these sums repeat over long
 * stretches of windows, and a stretch of equal windows is counted at once. This is the
 * frontier's own counting (frontier.c: open at the first landing, count the peak at the
 * end of a batch, release what the batch completed) in memory per window grid line and
 * time per stretch of each row, never per cell or per window. */
enum { Q_FIRST, Q_LAST, Q_ONE, Q_NFIRST, Q_NLAST, N_Q };
typedef struct axis_sums {
    /* [N_Q][n_win]: of the cells along the axis, the extent of those whose first covering
     * window is t, of those whose last one is t, of those covered by t alone; and the
     * number of those whose first window and whose last window is t */
    int64_t *q[N_Q];
    int64_t total; /* extent of all the cells counted */
} axis_sums;

typedef struct sim_heads {
    int n;                     /* heads with known channels */
    size_t bpv[SWI_MAX_HEADS]; /* bytes of partial sums per voxel: (channels + 1) sums */
    axis_sums ax[SWI_MAX_HEADS][NDIM];
    const uint8_t *in_part[NDIM]; /* [n_win] the window runs along this axis (a part), or NULL */
    int64_t *same_until[NDIM];    /* [n_win] the end of the stretch of windows equal to t */
    void *block;
} sim_heads;

static void sim_free(sim_heads *s) {
    swi__free(s->block);
    s->block = NULL;
}

/* The per-axis sums of every head whose channels are known; use_part: only the part's
 * cells and windows. SWI_ERR_OVERFLOW when the cells' bytes could exceed size_t. */
static swi_status sim_init(const geom *g, int use_part, sim_heads *s) {
    memset(s, 0, sizeof *s);
    const int part = use_part && g->has_part;
    size_t words = 0, flags = 0;
    for (int a = 0; a < NDIM; a++) {
        words += (N_Q * (size_t)g->n_heads + 1) * (size_t)g->n_win[a];
        if (part && g->part_cut[a]) flags += (size_t)g->n_win[a];
    }
    s->block = swi__malloc(words * sizeof(int64_t) + flags + 1);
    if (!s->block) return SWI_ERR_NOMEM;
    int64_t *w = s->block;
    uint8_t *fl = (uint8_t *)(w + words);
    for (int a = 0; a < NDIM; a++) {
        s->same_until[a] = w;
        w += g->n_win[a];
        if (!(part && g->part_cut[a])) continue;
        for (int64_t t = 0; t < g->n_win[a]; t++) fl[t] = (uint8_t)swi__window_in_part_axis(g, a, t);
        s->in_part[a] = fl;
        fl += g->n_win[a];
    }
    size_t all = 0, cells = 0; /* bytes and cells of every image: bounds on what is in use at once */
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        if (hg->channels <= 0 || hg->n_cells == 0) continue; /* unknown until the first call */
        const int i = s->n++;
        size_t head_bytes = 1, head_cells = 1;
        if (!swi__mul_size((size_t)hg->channels, hg->acc_bytes, &s->bpv[i]) ||
            !swi__add_size(s->bpv[i], sizeof(float), &s->bpv[i])) /* swi__cell_bytes */
            return SWI_ERR_OVERFLOW;
        for (int a = 0; a < NDIM; a++) {
            const axis_grid *ax = &hg->ax[a];
            axis_sums *q = &s->ax[i][a];
            for (int k = 0; k < N_Q; k++, w += ax->n_win) q->q[k] = w;
            memset(q->q[0], 0, N_Q * (size_t)ax->n_win * sizeof(int64_t));
            const int64_t lo = part ? hg->part_cell_lo[a] : 0, hi = part ? hg->part_cell_hi[a] : ax->n_cells;
            for (int64_t c = lo; c < hi; c++) {
                const int64_t n = ax->cell_wcount[c], e = ax->cell_hi[c] - ax->cell_lo[c];
                if (n <= 0) continue; /* no window covers it: never landed on */
                const int64_t t0 = ax->cell_wfirst[c], t1 = t0 + n - 1;
                q->q[Q_FIRST][t0] += e;
                q->q[Q_LAST][t1] += e;
                if (n == 1 && g->passes == 1) q->q[Q_ONE][t0] += e; /* swi__cell_stored */
                q->q[Q_NFIRST][t0]++;
                q->q[Q_NLAST][t1]++;
                q->total += e;
            }
            if (!swi__mul_size(head_bytes, (size_t)q->total, &head_bytes) ||
                !swi__mul_size(head_cells, (size_t)(hi > lo ? hi - lo : 0), &head_cells))
                return SWI_ERR_OVERFLOW;
        }
        if (!swi__mul_size(head_bytes, s->bpv[i], &head_bytes) ||
            !swi__mul_size(head_bytes, (size_t)g->batch, &head_bytes) ||
            !swi__add_size(all, head_bytes, &all) ||
            !swi__mul_size(head_cells, (size_t)g->batch, &head_cells) ||
            !swi__add_size(cells, head_cells, &cells))
            return SWI_ERR_OVERFLOW;
    }
    for (int a = 0; a < NDIM; a++) { /* stretches of equal windows, from the back */
        const int64_t n = g->n_win[a];
        for (int64_t t = n - 1; t >= 0; t--) {
            int same = t + 1 < n && (!s->in_part[a] || s->in_part[a][t] == s->in_part[a][t + 1]);
            for (int h = 0; same && h < s->n; h++)
                for (int k = 0; same && k < N_Q; k++) same = s->ax[h][a].q[k][t] == s->ax[h][a].q[k][t + 1];
            s->same_until[a][t] = same ? s->same_until[a][t + 1] : t + 1;
        }
    }
    return SWI_OK;
}

/* One count of the frontier over a dry run: what frontier.c's live/peak/closing count
 * (bytes of partial sums), or the cells its sparse table holds (those open and those
 * the batch touched). Every value they take is a true count within sim_init's bounds, so
 * the unsigned arithmetic below, which may pass through wrapped intermediates, lands on
 * it exactly. */
typedef struct sim_chan {
    size_t live, peak, closing;
} sim_chan;

typedef struct sim_count {
    sim_chan bytes, cells;
    int64_t sw, left; /* batch size; windows still to come in this batch */
} sim_count;

/* m windows in a row, each adding `o` and releasing `c` at its batch's end, `left` of
 * them to come in the batch under way. */
static void chan_repeat(sim_chan *k, size_t o, size_t c, int64_t m, int64_t left, int64_t sw) {
    if (m < left) {
        k->live += (size_t)m * o;
        k->closing += (size_t)m * c;
        return;
    }
    /* the batch under way ends: its peak, then what it completed is released */
    k->live += (size_t)left * o;
    k->closing += (size_t)left * c;
    if (k->live > k->peak) k->peak = k->live;
    k->live -= k->closing;
    m -= left;
    /* q whole batches: live grows by sw * (o - c) from one to the next, so the largest of
     * their peaks is the first's or the last's */
    const int64_t q = m / sw, r = m % sw;
    if (q > 0) {
        const size_t so = (size_t)sw * o, sc = (size_t)sw * c;
        const size_t top = o >= c ? k->live + (size_t)q * so - (size_t)(q - 1) * sc : k->live + so;
        if (top > k->peak) k->peak = top;
        k->live += (size_t)q * so - (size_t)q * sc;
    }
    k->live += (size_t)r * o;
    k->closing = (size_t)r * c;
}

static void sim_repeat(sim_count *k, size_t o, size_t c, size_t on, size_t cn, int64_t m) {
    chan_repeat(&k->bytes, o, c, m, k->left, k->sw);
    chan_repeat(&k->cells, on, cn, m, k->left, k->sw);
    k->left = m < k->left ? k->left - m : k->sw - (m - k->left) % k->sw;
}

/* The innermost loop: windows lo..hi-1 along axis a, each head's sums above it multiplied
 * into p[h][...]; a stretch of equal windows at a time. */
static void sim_row(const sim_heads *s, int a, int64_t lo, int64_t hi, size_t p[][N_Q], sim_count *k) {
    for (int64_t t = lo; t < hi;) {
        const int64_t end = s->same_until[a][t] < hi ? s->same_until[a][t] : hi;
        if (!s->in_part[a] || s->in_part[a][t]) { /* else windows outside the part: skipped */
            size_t o = 0, c = 0, on = 0, cn = 0;
            for (int h = 0; h < s->n; h++) {
                int64_t *const *q = s->ax[h][a].q;
                const size_t one = p[h][Q_ONE] * (size_t)q[Q_ONE][t];
                o += (p[h][Q_FIRST] * (size_t)q[Q_FIRST][t] - one) * s->bpv[h];
                c += (p[h][Q_LAST] * (size_t)q[Q_LAST][t] - one) * s->bpv[h];
                on += p[h][Q_NFIRST] * (size_t)q[Q_NFIRST][t];
                cn += p[h][Q_NLAST] * (size_t)q[Q_NLAST][t];
            }
            sim_repeat(k, o, c, on, cn, end - t);
        }
        t = end;
    }
}

/* Level products: p1[h][k] = p0[h][k] * axis a's quantity k at window t. */
static void sim_mul(const sim_heads *s, int a, int64_t t, size_t p0[][N_Q], size_t p1[][N_Q]) {
    for (int h = 0; h < s->n; h++)
        for (int k = 0; k < N_Q; k++) p1[h][k] = p0[h][k] * (size_t)s->ax[h][a].q[k][t];
}

/* The windows of one region of the order: nested loops over axes ax[0] (outermost) ..
 * ax[3] with ax[k] running over [lo[k], hi[k]); the partial products of each head's sums
 * are carried down the levels. A level of one window (the unit axes, a tail of one) is
 * folded into the products, so the innermost loop runs along a real row. */
static void sim_region(const sim_heads *s, const int ax_in[NDIM], const int64_t lo_in[NDIM],
                       const int64_t hi_in[NDIM], sim_count *k) {
    size_t p[NDIM][SWI_MAX_HEADS][N_Q];
    int ax[NDIM], n = 0;
    int64_t lo[NDIM], hi[NDIM], t[NDIM];
    for (int h = 0; h < s->n; h++)
        for (int q = 0; q < N_Q; q++) p[0][h][q] = 1;
    for (int i = 0; i < NDIM; i++) {
        const int a = ax_in[i];
        if (lo_in[i] >= hi_in[i]) return;
        if (hi_in[i] - lo_in[i] > 1 || (i == NDIM - 1 && n == 0)) {
            ax[n] = a;
            lo[n] = lo_in[i];
            hi[n++] = hi_in[i];
            continue;
        }
        if (s->in_part[a] && !s->in_part[a][lo_in[i]]) return; /* outside the part: no window runs here */
        sim_mul(s, a, lo_in[i], p[0], p[0]);
    }
    if (n == 1) {
        sim_row(s, ax[0], lo[0], hi[0], p[0], k);
        return;
    }
    int lvl = 0;
    t[0] = lo[0];
    for (;;) {
        if (t[lvl] >= hi[lvl]) { /* this level is done: back up */
            if (lvl == 0) return;
            t[--lvl]++;
            continue;
        }
        const int a = ax[lvl];
        if (s->in_part[a] && !s->in_part[a][t[lvl]]) { /* a window outside the part: skipped */
            t[lvl]++;
            continue;
        }
        sim_mul(s, a, t[lvl], p[lvl], p[lvl + 1]);
        if (++lvl == n - 1) {
            sim_row(s, ax[lvl], lo[lvl], hi[lvl], p[lvl], k);
            t[--lvl]++;
            continue;
        }
        t[lvl] = lo[lvl];
    }
}

/* Peak bytes of partial sums for one order and batch size (use_part: of the part's own
 * cells and windows), as frontier.c would count them running the windows in that order
 * in batches of sw; and the most cells its sparse table would hold. */
static swi_status simulate(const geom *g, const plan_choice *order, int sw, int use_part, size_t *peak,
                           size_t *cells) {
    sim_heads s;
    swi_status st = sim_init(g, use_part, &s);
    if (st != SWI_OK) {
        sim_free(&s);
        return st;
    }
    sim_count k = {{0, 0, 0}, {0, 0, 0}, sw, sw};
    const int a0 = order->order[0];
    const int64_t n0 = g->n_win[a0];
    const int64_t tail = order->tail < 1 ? 1 : (order->tail > n0 ? n0 : order->tail);
    /* the windows before the tail in C order, then the tail with axis a0 innermost */
    int ax_head[NDIM], ax_tail[NDIM];
    int64_t lo_head[NDIM], hi_head[NDIM], lo_tail[NDIM], hi_tail[NDIM];
    for (int i = 0; i < NDIM; i++) {
        const int a = order->order[i];
        ax_head[i] = a;
        lo_head[i] = 0;
        hi_head[i] = a == a0 ? n0 - tail : g->n_win[a];
        ax_tail[i == 0 ? NDIM - 1 : i - 1] = a;
        lo_tail[i == 0 ? NDIM - 1 : i - 1] = a == a0 ? n0 - tail : 0;
        hi_tail[i == 0 ? NDIM - 1 : i - 1] = a == a0 ? n0 : g->n_win[a];
    }
    for (int64_t b = 0; b < g->batch; b++) { /* images one after the other; batches span them */
        sim_region(&s, ax_head, lo_head, hi_head, &k);
        sim_region(&s, ax_tail, lo_tail, hi_tail, &k);
    }
    if (k.left != sw) { /* the last, partial batch */
        if (k.bytes.live > k.bytes.peak) k.bytes.peak = k.bytes.live;
        if (k.cells.live > k.cells.peak) k.cells.peak = k.cells.live;
    }
    *peak = k.bytes.peak;
    if (cells) *cells = k.cells.peak;
    sim_free(&s);
    return SWI_OK;
}

/* simulate's failure as the plan's message */
static swi_status sim_fail(swi_ctx *ctx, swi_status st) {
    if (st == SWI_ERR_OVERFLOW)
        return swi__fail(ctx, st, "the partial sums' size overflows (channels x output size)");
    return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory while planning");
}

/* Orders to try: every permutation of the internal axes, preferring (on ties) the
 * longest padded axis outermost. */
static int permutations(const geom *g, int perms[SWI_PERMS][NDIM]) {
    /* every order of the image's own axes (lexicographic), the unit axes after them */
    const int lead = NDIM - g->user_dims;
    int cur[NDIM], n = 0;
    for (int k = 0; k < NDIM; k++) cur[k] = k < g->user_dims ? lead + k : k - g->user_dims;
    for (;;) {
        memcpy(perms[n++], cur, sizeof cur);
        /* next permutation of cur[0 .. user_dims) */
        int i = g->user_dims - 2;
        while (i >= 0 && cur[i] > cur[i + 1]) i--;
        if (i < 0) break;
        int j = g->user_dims - 1;
        while (cur[j] < cur[i]) j--;
        int tmp = cur[i];
        cur[i] = cur[j];
        cur[j] = tmp;
        for (int a = i + 1, b = g->user_dims - 1; a < b; a++, b--) {
            tmp = cur[a];
            cur[a] = cur[b];
            cur[b] = tmp;
        }
    }
    /* sort by preference: lexicographically larger (padded[order[0]], padded[order[1]]) first,
     * stable on the natural order */
    for (int i = 1; i < n; i++) {
        int pi[NDIM];
        memcpy(pi, perms[i], sizeof pi);
        int j = i - 1;
        while (j >= 0) {
            int64_t a0 = g->padded[pi[0]], b0 = g->padded[perms[j][0]];
            int64_t a1 = g->padded[pi[1]], b1 = g->padded[perms[j][1]];
            if (a0 > b0 || (a0 == b0 && a1 > b1)) {
                memcpy(perms[j + 1], perms[j], sizeof pi);
                j--;
            } else {
                break;
            }
        }
        memcpy(perms[j + 1], pi, sizeof pi);
    }
    return n;
}

/* Bytes of an output's stored result (0 when only handed to a callback); SIZE_MAX on
 * overflow. */
static size_t output_bytes(const geom *g, const swi_output *o) {
    const head_geom *hg = &g->heads[o->head];
    if (!o->dst && o->on_region) return 0;
    if (o->reduce == SWI_REDUCE_CUSTOM) return 0;
    size_t vox = (size_t)g->batch;
    for (int a = 0; a < NDIM; a++)
        if (!swi__mul_size(vox, (size_t)hg->out[a], &vox)) return SIZE_MAX;
    swi_dtype dt = o->dtype;
    if (o->reduce == SWI_REDUCE_ARGMAX && dt == SWI_DTYPE_AUTO)
        dt = hg->channels > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
    size_t es = swi__dtype_size(dt == SWI_DTYPE_AUTO ? SWI_DTYPE_FLOAT32 : dt);
    if ((o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_SOFTMAX) &&
        !swi__mul_size(vox, (size_t)hg->channels, &vox))
        return SIZE_MAX;
    return swi__mul_size(vox, es, &vox) ? vox : SIZE_MAX;
}

/* a += b * c, saturating at SIZE_MAX (which the caller reports as overflow) */
static void add_mul(size_t *a, size_t b, size_t c) {
    size_t t;
    if (*a == SIZE_MAX || !swi__mul_size(b, c, &t) || !swi__add_size(*a, t, a)) *a = SIZE_MAX;
}

/* What a run holds whatever its batch size: input, outputs, scratch, and per window of a
 * batch: the window and its predictions. */
typedef struct costs {
    size_t input, outputs, per_window, scratch;
    size_t entry;   /* one window kept for reuse: its input and every head's output */
    int want_cache; /* entries the caller asks for (0: reuse off) */
} costs;

static swi_status plan_costs(swi_ctx *ctx, const swi_params *p, const geom *g, const swi_output *outs,
                             int n_outs, int threads, costs *k) {
    size_t cmax = 1, rowmax = 1, book = 0;
    memset(k, 0, sizeof *k);
    if (!g->reader)
        add_mul(&k->input, (size_t)g->batch * (size_t)g->cin, (size_t)g->image_vox * sizeof(float));
    for (int i = 0; i < n_outs; i++) add_mul(&k->outputs, output_bytes(g, &outs[i]), 1);
    add_mul(&k->per_window, (size_t)g->cin, (size_t)g->roi_vox * sizeof(float));
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        size_t t = 0;
        add_mul(&t, (size_t)hg->channels, (size_t)hg->win_vox);
        add_mul(&k->per_window, t, sizeof(float));
        if ((size_t)hg->channels > cmax) cmax = (size_t)hg->channels;
        if ((size_t)hg->win[NDIM - 1] > rowmax) rowmax = (size_t)hg->win[NDIM - 1];
        add_mul(&book, (size_t)hg->win_vox, sizeof(float)); /* the cell table is the choice's */
    }
    size_t chunk = rowmax > SWI_CHUNK_VOXELS ? rowmax : SWI_CHUNK_VOXELS, t = 0;
    int soft = 0;
    for (int i = 0; i < n_outs; i++) soft |= outs[i].reduce == SWI_REDUCE_SOFTMAX;
    add_mul(&t, chunk, cmax * (soft ? 2 : 1) + 5);
    add_mul(&k->scratch, t, (size_t)threads * sizeof(float));
    add_mul(&k->scratch, book, 1);
    add_mul(&k->scratch, (size_t)g->roi_vox, sizeof(float));
    if (g->reader)
        add_mul(&k->scratch, (size_t)g->cin * (size_t)g->roi_vox, sizeof(float)); /* the read box */
    add_mul(&k->scratch, swi__seg_cap(g) * (size_t)threads, SWI_ACC_SEG_BYTES);
    if (g->acc_bytes != sizeof(float)) /* the workers' share buffers (run.c) */
        add_mul(&k->scratch, swi__share_floats(g) * (size_t)threads, sizeof(float));
    k->want_cache = p->reuse == SWI_REUSE_ON ? (p->reuse_cache > 0 ? p->reuse_cache : 1) : 0;
    add_mul(&k->entry, (size_t)g->cin, (size_t)g->roi_vox * sizeof(float));
    for (int h = 0; h < g->n_heads; h++)
        add_mul(&k->entry, (size_t)g->heads[h].channels * sizeof(float), (size_t)g->heads[h].win_vox);
    add_mul(&k->entry, 1, sizeof(reuse_entry));
    if (k->input == SIZE_MAX || k->outputs == SIZE_MAX || k->per_window == SIZE_MAX ||
        k->scratch == SIZE_MAX || k->entry == SIZE_MAX)
        return swi__fail(ctx, SWI_ERR_OVERFLOW, "the run's memory size overflows (channels x window size)");
    if (k->want_cache)
        k->per_window += 2 * sizeof(int32_t) + sizeof(uint64_t); /* the slot's reuse bookkeeping */
    return SWI_OK;
}

/* The window orders to try, as internal axes: keep's, the caller's fixed one, or every
 * permutation; and the tail interleavings with each. A part takes the order the whole
 * run would take at the requested batch size, so each voxel sums its windows in the
 * same order as the whole run does. */
typedef struct orders {
    int perms[SWI_PERMS][NDIM];
    int n_perms, tail_lo, tail_hi;
} orders;

static swi_status plan_orders(swi_ctx *ctx, const swi_params *p, const geom *g, const plan_choice *keep,
                              orders *o) {
    int have_fixed = p->order_mode == SWI_ORDER_FIXED;
    o->n_perms = 1;
    if (keep) {
        memcpy(o->perms[0], keep->order, sizeof keep->order);
    } else if (have_fixed) {
        int lead = NDIM - g->user_dims, seen[NDIM] = {0};
        for (int a = 0; a < lead; a++) o->perms[0][a] = a;
        for (int k = 0; k < g->user_dims; k++) {
            int u = p->order[k];
            if (u < 0 || u >= g->user_dims || seen[u])
                return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                                 "params.order must be a permutation of 0..%d (order[%d] = %d)",
                                 g->user_dims - 1, k, u);
            seen[u] = 1;
            o->perms[0][lead + k] = lead + u;
        }
    } else {
        o->n_perms = permutations(g, o->perms);
    }
    /* a fixed order is the plain loop nest (with {0, 1, ..} the reference's enumeration):
     * no interleaving of the last windows */
    o->tail_lo = keep ? keep->tail : 1;
    o->tail_hi = keep ? keep->tail : (have_fixed ? 1 : 3);
    if (!g->has_part || keep || have_fixed) return SWI_OK;
    size_t best_rank = SIZE_MAX;
    int best_i = 0, best_tail = 1;
    int64_t whole = g->win_per_image * g->batch;
    int sw_whole = (int64_t)p->sw_batch_size > whole ? (int)whole : p->sw_batch_size;
    for (int i = 0; i < o->n_perms; i++)
        for (int tail = 1; tail <= 3; tail++) {
            plan_choice c = {{0}, tail, sw_whole, 0, 0, 0, 0, 0, 0};
            memcpy(c.order, o->perms[i], sizeof c.order);
            if (tail > 1 && tail > g->n_win[c.order[0]]) break;
            size_t part;
            swi_status st = simulate(g, &c, sw_whole, 0, &part, NULL);
            if (st != SWI_OK) return sim_fail(ctx, st);
            if (part < best_rank) {
                best_rank = part;
                best_i = i;
                best_tail = tail;
            }
        }
    memmove(o->perms[0], o->perms[best_i], sizeof o->perms[0]);
    o->n_perms = 1;
    o->tail_lo = o->tail_hi = best_tail;
    return SWI_OK;
}

/* Windows that run: all, or those touching the part: along each cut axis the windows
 * meeting the box there, all along the others. */
static int64_t windows_run(const geom *g) {
    int64_t total = g->win_per_image * g->batch;
    if (!g->has_part) return total;
    total = g->batch;
    for (int a = 0; a < NDIM; a++) {
        int64_t n = g->n_win[a];
        if (g->part_cut[a]) {
            n = 0;
            for (int64_t t = 0; t < g->n_win[a]; t++) n += swi__window_in_part_axis(g, a, t);
        }
        total *= n; /* at most win_per_image * batch, checked by swi__geom_init */
    }
    return total;
}

/* The order with the smallest frontier for batch size sw, that frontier's peak, and the
 * most cells in use at once in that order. */
static swi_status best_order(swi_ctx *ctx, const geom *g, const orders *o, int sw, int keep,
                             plan_choice *best, size_t *peak, size_t *cells) {
    *peak = SIZE_MAX;
    for (int i = 0; i < o->n_perms; i++)
        for (int tail = o->tail_lo; tail <= o->tail_hi; tail++) {
            plan_choice c = {{0}, tail, sw, 0, 0, 0, 0, 0, 0};
            memcpy(c.order, o->perms[i], sizeof c.order);
            if (!keep && o->tail_lo != o->tail_hi && tail > 1 && tail > g->n_win[c.order[0]]) break;
            size_t part, n;
            swi_status st = simulate(g, &c, sw, 0, &part, &n);
            if (st != SWI_OK) return sim_fail(ctx, st);
            if (part < *peak) {
                *peak = part;
                *cells = n;
                *best = c;
            }
        }
    if (g->has_part) { /* the part's own frontier, in that order */
        swi_status st = simulate(g, best, sw, 1, peak, cells);
        if (st != SWI_OK) return sim_fail(ctx, st);
    }
    return SWI_OK;
}

/* The cell table for a frontier of `cells` cells in use at most: dense (every cell, *entries
 * 0) up to SWI_DENSE_TABLE_MAX or while no smaller, else sparse; its bytes. */
int swi__sparse_tables;

static size_t cell_table(const geom *g, size_t cells, size_t *entries) {
    size_t dense = 0, slots = swi__cell_slots(cells), sparse = SIZE_MAX;
    for (int h = 0; h < g->n_heads; h++)
        add_mul(&dense, (size_t)g->heads[h].n_cells * (size_t)g->batch, sizeof(cell_state));
    if (slots != SIZE_MAX && !swi__mul_size(slots, sizeof(cell_slot), &sparse)) sparse = SIZE_MAX;
    *entries = 0;
    if (!swi__sparse_tables && (dense <= SWI_DENSE_TABLE_MAX || dense <= sparse)) return dense;
    *entries = cells > 0 ? cells : 1;
    return sparse;
}

/* The plan's description of the choice. */
static void plan_report(const geom *g, const costs *k, const plan_choice *best, int64_t total, int threads,
                        swi_plan *plan) {
    plan->dims = g->user_dims;
    plan->windows_per_image = g->win_per_image;
    plan->windows_total = total;
    plan->sw_batch_size = best->sw;
    plan->predictor_calls = (total + best->sw - 1) / best->sw * g->passes; /* each mirrored run calls */
    plan->pipeline = best->pipeline;
    plan->threads = threads;
    for (int d = 0; d < g->user_dims; d++) {
        int a = swi__axis(g, d);
        plan->roi[d] = g->roi[a];
        plan->padded[d] = g->padded[a];
        plan->pad_before[d] = g->before[a];
        plan->windows_per_axis[d] = g->n_win[a];
    }
    int lead = NDIM - g->user_dims, q = 0;
    for (int i = 0; i < NDIM; i++)
        if (best->order[i] >= lead) plan->order[q++] = best->order[i] - lead;
    for (int h = 0; h < g->n_heads; h++) {
        int64_t C = g->heads[h].channels;
        plan->head_channels[h] = C;
        plan->label_dtype[h] = C <= 0 ? SWI_DTYPE_AUTO : (C > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8);
    }
    plan->bytes_input = k->input;
    plan->bytes_partial = best->partial;
    plan->bytes_outputs = k->outputs;
    plan->bytes_scratch = best->scratch;
    plan->reuse_cache = best->reuse_cache;
}

swi_status swi__plan(swi_ctx *ctx, const swi_params *p, const geom *g, const swi_output *outs, int n_outs,
                     swi_plan *plan, plan_choice *choice, const plan_choice *keep) {
    memset(plan, 0, sizeof *plan);
    const int threads = p->threads > 0 ? p->threads : swi__cpu_count();
    costs k;
    orders o;
    swi_status st = plan_costs(ctx, p, g, outs, n_outs, threads, &k);
    if (st == SWI_OK) st = plan_orders(ctx, p, g, keep, &o);
    if (st != SWI_OK) return st;
    const int64_t total = windows_run(g);
    if (total == 0)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.part_lo/part_hi: no window touches the part");
    int sw_req = (int64_t)p->sw_batch_size > total ? (int)total : p->sw_batch_size;

    /* The first choice that fits wins, preferring the largest batch, then the reuse cache,
     * then pipelining; every smaller choice is still planned for bytes_min. */
    int found = 0;
    size_t best_min = SIZE_MAX;
    plan_choice best = {{0, 1, 2, 3}, 1, 1, 0, 0, 0, 0, 0, 0};
    for (int sw = sw_req; sw >= 1; sw = sw > 1 ? sw / 2 : 0) {
        plan_choice order = {{0, 1, 2, 3}, 1, 1, 0, 0, 0, 0, 0, 0};
        size_t front, cells, entries;
        if ((st = best_order(ctx, g, &o, sw, keep != NULL, &order, &front, &cells)) != SWI_OK) return st;
        /* what the engine reserves for that frontier (fragmentation allowance included) */
        size_t partial = swi__cellmem_bytes(front), one_slot = 0, peak_serial = k.input, scratch = k.scratch;
        add_mul(&scratch, cell_table(g, cells, &entries), 1);
        add_mul(&one_slot, (size_t)sw, k.per_window);
        add_mul(&peak_serial, one_slot, 1);
        add_mul(&peak_serial, partial, 1);
        add_mul(&peak_serial, k.outputs, 1);
        add_mul(&peak_serial, scratch, 1);
        if (peak_serial == SIZE_MAX)
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "the run's memory size overflows");
        for (int cache = k.want_cache;; cache = 0) {
            size_t reuse = 0, with_cache = peak_serial;
            add_mul(&reuse, (size_t)cache, k.entry);
            add_mul(&with_cache, reuse, 1);
            if (with_cache == SIZE_MAX)
                return swi__fail(ctx, SWI_ERR_OVERFLOW, "the run's memory size overflows");
            for (int pipe = 1; pipe >= 0; pipe--) {
                if ((p->pipeline == SWI_PIPELINE_OFF && pipe == 1) ||
                    (p->pipeline == SWI_PIPELINE_ON && pipe == 0))
                    continue;
                /* automatic pipelining only where the second window slot is cheap (<= 1/8 of
                 * the peak): with a many-class network it would double the largest buffers */
                if (p->pipeline == SWI_PIPELINE_AUTO && pipe == 1 && one_slot > with_cache / 8) continue;
                size_t windows = one_slot * (size_t)(pipe ? 2 : 1);
                size_t peak = with_cache + (pipe ? one_slot : 0);
                if (peak < with_cache)
                    return swi__fail(ctx, SWI_ERR_OVERFLOW, "the run's memory size overflows");
                if (peak < best_min) best_min = peak;
                if (!found && (p->max_memory == 0 || peak <= p->max_memory)) {
                    found = 1;
                    best = order;
                    best.sw = sw;
                    best.pipeline = pipe;
                    best.partial = partial;
                    best.frontier = front;
                    best.reuse_cache = cache;
                    best.table = entries;
                    best.scratch = scratch;
                    plan->bytes_windows = windows;
                    plan->bytes_reuse = reuse;
                    plan->bytes_peak = peak;
                }
            }
            if (cache == 0) break;
        }
    }
    plan->bytes_min = best_min;
    if (!found) {
        char a[32], b[32];
        return swi__fail(ctx, SWI_ERR_BUDGET,
                         "params.max_memory = %s is below the smallest plan: at least %s (%zu bytes) is "
                         "needed (sw_batch_size 1%s)",
                         swi_format_bytes(p->max_memory, a, sizeof a),
                         swi_format_bytes(best_min, b, sizeof b), best_min,
                         p->pipeline == SWI_PIPELINE_ON ? ", pipelined" : ", no pipelining");
    }
    plan_report(g, &k, &best, total, threads, plan);
    if (choice) *choice = best;
    return SWI_OK;
}
