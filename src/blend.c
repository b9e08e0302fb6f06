/* blend.c -- accumulation: each window's prediction times its weights is added into
 * the partial sums of the open cells it covers (semantics step 6); with mirroring, each
 * of a window's runs with its share of the weight; with float16 sums, into the running
 * weighted means (engine.h). One kernel, in flat loops the vectoriser handles;
 * SWI_KERNEL is the one SIMD dispatch point. */
#include "engine.h"

#include <string.h>

swi_status swi__blend_items(run *r, const slot *s) {
    const geom *g = &r->g;
    /* items: per head, every (axis 0, axis 1) pair of cell rows the batch touches, split by
     * planes (and, for few planes, by rows of axis 1) into about ACC_ITEMS_PER_THREAD items
     * per thread */
    r->n_acc = 0;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        int64_t lo[2] = {INT64_MAX, INT64_MAX}, hi[2] = {INT64_MIN, INT64_MIN};
        for (int j = 0; j < s->n; j++) {
            const int64_t *t = &s->t[j * NDIM];
            if (hg->ax[0].win_ccount[t[0]] <= 0 || hg->ax[1].win_ccount[t[1]] <= 0) continue;
            for (int a = 0; a < 2; a++) {
                const axis_grid *ax = &hg->ax[a];
                if (ax->win_cfirst[t[a]] < lo[a]) lo[a] = ax->win_cfirst[t[a]];
                if (ax->win_cfirst[t[a]] + ax->win_ccount[t[a]] > hi[a])
                    hi[a] = ax->win_cfirst[t[a]] + ax->win_ccount[t[a]];
            }
        }
        if (lo[0] >= hi[0] || lo[1] >= hi[1]) continue;
        const int64_t pairs = (hi[0] - lo[0]) * (hi[1] - lo[1]);
        int64_t planes = hg->channels + 1, want = (int64_t)r->threads * ACC_ITEMS_PER_THREAD;
        int64_t per_row = (want + pairs - 1) / pairs;
        int64_t groups = per_row < planes ? per_row : planes;
        /* float16 means read the weight sum before it grows: an item holds every plane */
        if (hg->acc_bytes != sizeof(float)) groups = 1;
        int64_t pp = (planes + groups - 1) / groups;
        int64_t splits = (per_row + groups - 1) / groups;
        for (int64_t c0 = lo[0]; c0 < hi[0]; c0++)
            for (int64_t c1 = lo[1]; c1 < hi[1]; c1++) {
                int64_t e1 = hg->ax[1].cell_hi[c1] - hg->ax[1].cell_lo[c1];
                int64_t rows = splits < e1 ? (e1 + splits - 1) / splits : 1;
                for (int64_t p0 = 0; p0 < planes; p0 += pp)
                    for (int64_t i1 = 0; i1 < e1; i1 += rows) {
                        if (!swi__grow((void **)&r->acc, &r->acc_cap, (size_t)r->n_acc + 1, sizeof(acc_item)))
                            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                        acc_item *it = &r->acc[r->n_acc++];
                        it->head = h;
                        it->p0 = (int32_t)p0;
                        it->p1 = (int32_t)(p0 + pp < planes ? p0 + pp : planes);
                        it->c0 = c0;
                        it->c1 = c1;
                        it->i1lo = i1;
                        it->i1hi = i1 + rows < e1 ? i1 + rows : e1;
                    }
            }
    }
    return SWI_OK;
}

static inline int in_window(const axis_grid *ax, const int64_t *t, int a, int64_t c) {
    return c >= ax[a].win_cfirst[t[a]] && c < ax[a].win_cfirst[t[a]] + ax[a].win_ccount[t[a]];
}

SWI_KERNEL void swi__blend_item(void *arg, int64_t item, int worker) {
    run *r = arg;
    const acc_item *it = &r->acc[item];
    const head_geom *hg = &r->g.heads[it->head];
    const axis_grid *ax = hg->ax;
    const slot *s = r->cur;
    const int64_t C = hg->channels, o1 = hg->win[1], o2 = hg->win[2], o3 = hg->win[3];
    const int64_t c0 = it->c0, c1 = it->c1;
    const int64_t e0 = ax[0].cell_hi[c0] - ax[0].cell_lo[c0], e1 = ax[1].cell_hi[c1] - ax[1].cell_lo[c1];
    acc_seg *seg = r->ws[worker].segs;
    const int pass = r->pass, half = hg->acc_bytes != sizeof(float);
    const float sc = r->pass_w;
    float *share = r->ws[worker].share;
    /* Plane-outer: for each plane the window's prediction, its weights and each cell's
     * partial sums are read as long forward streams, which the prefetchers follow. A
     * cell-by-cell walk (or plane-inner per row) jumps between ~2C streams of short rows
     * and runs at half the bandwidth. */
    for (int j = 0; j < s->n; j++) {
        const int64_t *t = &s->t[j * NDIM];
        if (!in_window(ax, t, 0, c0) || !in_window(ax, t, 1, c1)) continue;
        const int64_t cf2 = ax[2].win_cfirst[t[2]], cc2 = ax[2].win_ccount[t[2]];
        const int64_t cf3 = ax[3].win_cfirst[t[3]], cc3 = ax[3].win_ccount[t[3]];
        /* this (axis 0, axis 1) row of the window's cells in its booked pairs (run.c) */
        const int32_t *pairs =
            r->pair_task + r->pair_off[(size_t)j * (size_t)r->g.n_heads + (size_t)it->head] +
            (size_t)(((c0 - ax[0].win_cfirst[t[0]]) * ax[1].win_ccount[t[1]] + c1 - ax[1].win_cfirst[t[1]]) *
                     cc2 * cc3);
        const int64_t off0 = ax[0].cell_lo[c0] - ax[0].win_lo[t[0]];
        const int64_t off1 = ax[1].cell_lo[c1] - ax[1].win_lo[t[1]];
        int any = 0;
        for (int64_t k2 = 0; k2 < cc2; k2++)
            for (int64_t k3 = 0; k3 < cc3; k3++) {
                int64_t c2 = cf2 + k2, c3 = cf3 + k3;
                const int32_t ti = pairs[k2 * cc3 + k3];
                acc_seg *q = &seg[k2 * cc3 + k3];
                q->buf = ti >= 0 ? r->tasks[ti].buf : NULL;
                q->vox = e0 * e1 * (ax[2].cell_hi[c2] - ax[2].cell_lo[c2]) *
                         (ax[3].cell_hi[c3] - ax[3].cell_lo[c3]);
                q->lo3 = ax[3].cell_lo[c3] - ax[3].win_lo[t[3]];
                q->e3 = ax[3].cell_hi[c3] - ax[3].cell_lo[c3];
                q->set = 0;
                if (q->buf) {
                    const task *T = &r->tasks[ti];
                    q->set = T->fresh && r->task_wins[T->win_off] == j;
                    any = 1;
                }
            }
        if (!any) continue;
        const float *P = swi__slot_out(s, it->head) + (size_t)j * (size_t)(C * hg->win_vox);
        for (int32_t pl = it->p0; pl < it->p1; pl++) {
            /* float32 sums take a window's weight once, with its first run */
            if (pl == C && !half && pass > 0) continue;
            const float *xp = pl < C ? P + (size_t)pl * (size_t)hg->win_vox : NULL;
            size_t fi = 0; /* float16: where this row's factors are in the share buffer */
            for (int64_t i0 = 0; i0 < e0; i0++)
                for (int64_t i1 = it->i1lo; i1 < it->i1hi; i1++)
                    for (int64_t k2 = 0; k2 < cc2; k2++) {
                        const int64_t c2 = cf2 + k2, e2 = ax[2].cell_hi[c2] - ax[2].cell_lo[c2];
                        const int64_t lo2 = ax[2].cell_lo[c2] - ax[2].win_lo[t[2]];
                        const acc_seg *row = &seg[k2 * cc3];
                        for (int64_t i2 = 0; i2 < e2; i2++) {
                            const size_t wrow =
                                (size_t)((((off0 + i0) * o1 + off1 + i1) * o2 + lo2 + i2) * o3);
                            const size_t crow = (size_t)((i0 * e1 + i1) * e2 + i2);
                            for (int64_t k3 = 0; k3 < cc3; k3++) {
                                const acc_seg *q = &row[k3];
                                if (!q->buf) continue;
                                const int64_t e3 = q->e3;
                                const int set = q->set && pass == 0;
                                const float *restrict w = hg->weights + wrow + q->lo3;
                                if (half) {
                                    float *restrict W = q->buf + crow * (size_t)e3;
                                    if (xp) {
                                        uint16_t *restrict m = (uint16_t *)(q->buf + q->vox) +
                                                               (size_t)pl * (size_t)q->vox +
                                                               crow * (size_t)e3;
                                        const float *restrict x = xp + wrow + q->lo3;
                                        float *restrict f = share + fi;
                                        fi += (size_t)e3;
                                        if (set) {
                                            for (int64_t v = 0; v < e3; v++) m[v] = swi__f2h(x[v]);
                                        } else {
                                            /* each voxel's factor once, with the item's first plane */
                                            if (pl == it->p0)
                                                for (int64_t v = 0; v < e3; v++)
                                                    f[v] = w[v] * sc / (W[v] + w[v] * sc);
                                            for (int64_t v = 0; v < e3; v++)
                                                m[v] = swi__f2h(swi__mean_step(swi__h2f(m[v]), x[v], f[v]));
                                        }
                                    } else if (set) {
                                        for (int64_t v = 0; v < e3; v++) W[v] = w[v] * sc;
                                    } else {
                                        for (int64_t v = 0; v < e3; v++) W[v] += w[v] * sc;
                                    }
                                    continue;
                                }
                                float *restrict a = q->buf + (size_t)pl * (size_t)q->vox + crow * (size_t)e3;
                                if (xp) {
                                    /* sc is a power of two: x * w * sc rounds as x * w does */
                                    const float *restrict x = xp + wrow + q->lo3;
                                    if (set)
                                        for (int64_t v = 0; v < e3; v++) a[v] = x[v] * w[v] * sc;
                                    else
                                        for (int64_t v = 0; v < e3; v++) a[v] += x[v] * w[v] * sc;
                                } else if (set) {
                                    for (int64_t v = 0; v < e3; v++) a[v] = w[v];
                                } else {
                                    for (int64_t v = 0; v < e3; v++) a[v] += w[v];
                                }
                            }
                        }
                    }
        }
    }
}
