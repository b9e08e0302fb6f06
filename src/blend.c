/* blend.c -- accumulation: each window's prediction times its weights is added into
 * the partial sums of the open cells it covers (semantics step 6). One kernel, in
 * flat loops the vectoriser handles; SWI_KERNEL is the one SIMD dispatch point. */
#include "engine.h"

#include <string.h>

swi_status swi__blend_items(run *r, const slot *s) {
    const geom *g = &r->g;
    /* accumulation items: per head, every axis-0 row of cells the batch touches, split
     * by planes (and, for few planes, by rows) into about ACC_ITEMS_PER_THREAD items per
     * thread */
    r->n_acc = 0;
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
                    if (!swi__grow((void **)&r->acc, &r->acc_cap, (size_t)r->n_acc + 1, sizeof(acc_item)))
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
    return SWI_OK;
}

SWI_KERNEL void swi__blend_item(void *arg, int64_t item, int worker) {
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
                const int64_t c[NDIM] = {c0, c1, c2};
                const cell_state *st = &r->front.cells[it->head][b * hg->n_cells + swi__cell_index(hg, c)];
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
        const float *P = swi__slot_out(s, it->head) + (size_t)j * (size_t)(C * hg->win_vox);
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
