/* finish.c -- a cell whose last window has landed: divide its partial sums by the
 * weight sum (or take (p*w)/w from its one window), reduce, and hand the region to
 * every output of its head: stored (caller or library memory) and/or given to the
 * region callback (semantics steps 6-7 and the reductions of docs/semantics.md). */
#include "engine.h"

#include <string.h>

/* Steps along axes 0..2 so one item covers at most `rows` rows of the contiguous axis:
 * whole inner axes first, the outer ones split. */
static void finish_steps(const int64_t ext[NDIM], int64_t rows, int64_t step[NDIM - 1]) {
    for (int a = NDIM - 2; a >= 0; a--) {
        if (ext[a] <= rows) {
            step[a] = ext[a];
            rows = rows / ext[a];
            if (rows < 1) rows = 1;
        } else {
            step[a] = rows;
            rows = 1;
        }
    }
}

swi_status swi__finish_items(run *r) {
    r->n_fin = 0;
    for (int32_t i = 0; i < r->n_tasks; i++) {
        task *T = &r->tasks[i];
        if (!T->completes) continue;
        int64_t rows = (int64_t)r->chunk_cap / T->ext[NDIM - 1], step[NDIM - 1], at[NDIM - 1];
        finish_steps(T->ext, rows < 1 ? 1 : rows, step);
        for (at[0] = 0; at[0] < T->ext[0]; at[0] += step[0])
            for (at[1] = 0; at[1] < T->ext[1]; at[1] += step[1])
                for (at[2] = 0; at[2] < T->ext[2]; at[2] += step[2]) {
                    if (!swi__grow((void **)&r->fin, &r->fin_cap, (size_t)r->n_fin + 1, sizeof(fin_item)))
                        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the batch work list");
                    fin_item *it = &r->fin[r->n_fin++];
                    it->task = i;
                    for (int a = 0; a < NDIM - 1; a++) {
                        it->lo[a] = at[a];
                        it->hi[a] = at[a] + step[a] < T->ext[a] ? at[a] + step[a] : T->ext[a];
                    }
                }
    }
    return SWI_OK;
}

static void store_region(const out_spec *os, const head_geom *hg, int64_t image, const int64_t lo[NDIM],
                         const int64_t ext[NDIM], const void *src, int64_t planes) {
    size_t es = swi__dtype_size(os->dtype);
    const int64_t *out = hg->out;
    int64_t out_vox = out[0] * out[1] * out[2] * out[3];
    int64_t n = ext[0] * ext[1] * ext[2] * ext[3];
    for (int64_t c = 0; c < planes; c++) {
        char *base = (char *)os->data + (size_t)((image * planes + c) * out_vox) * es;
        const char *from = (const char *)src + (size_t)(c * n) * es;
        for (int64_t i0 = 0; i0 < ext[0]; i0++)
            for (int64_t i1 = 0; i1 < ext[1]; i1++)
                for (int64_t i2 = 0; i2 < ext[2]; i2++) {
                    size_t at =
                        (size_t)((((lo[0] + i0) * out[1] + lo[1] + i1) * out[2] + lo[2] + i2) * out[3] +
                                 lo[3]);
                    memcpy(base + at * es, from, (size_t)ext[3] * es);
                    from += (size_t)ext[3] * es;
                }
    }
}

SWI_KERNEL void swi__finish_item(void *arg, int64_t item, int worker) {
    run *r = arg;
    if (atomic_load(&r->cb_failed)) return;
    const fin_item *it = &r->fin[item];
    const task *T = &r->tasks[it->task];
    const geom *g = &r->g;
    const head_geom *hg = &g->heads[T->head];
    const slot *s = r->cur;
    const int64_t C = hg->channels, e1 = T->ext[1], e2 = T->ext[2], e3 = T->ext[3];
    int64_t ext[NDIM] = {it->hi[0] - it->lo[0], it->hi[1] - it->lo[1], it->hi[2] - it->lo[2], e3};
    int64_t n = ext[0] * ext[1] * ext[2] * ext[3];
    float *S = r->ws[worker].scores;
    if (T->buf && hg->acc_bytes != sizeof(float)) {
        /* float16: the planes hold the weighted means themselves */
        for (int64_t c = 0; c < C; c++) {
            const uint16_t *mean = (const uint16_t *)(T->buf + T->vox) + (size_t)c * (size_t)T->vox;
            float *dst = S + (size_t)(c * n);
            for (int64_t i0 = it->lo[0]; i0 < it->hi[0]; i0++)
                for (int64_t i1 = it->lo[1]; i1 < it->hi[1]; i1++)
                    for (int64_t i2 = it->lo[2]; i2 < it->hi[2]; i2++) {
                        const uint16_t *restrict x = mean + (size_t)(((i0 * e1 + i1) * e2 + i2) * e3);
                        float *restrict o = dst;
                        for (int64_t v = 0; v < e3; v++) o[v] = swi__h2f(x[v]);
                        dst += e3;
                    }
        }
    } else if (T->buf) {
        const float *wsum = T->buf + (size_t)C * (size_t)T->vox;
        for (int64_t c = 0; c < C; c++) {
            const float *acc = T->buf + (size_t)c * (size_t)T->vox;
            float *dst = S + (size_t)(c * n);
            for (int64_t i0 = it->lo[0]; i0 < it->hi[0]; i0++)
                for (int64_t i1 = it->lo[1]; i1 < it->hi[1]; i1++)
                    for (int64_t i2 = it->lo[2]; i2 < it->hi[2]; i2++) {
                        size_t at = (size_t)(((i0 * e1 + i1) * e2 + i2) * e3);
                        const float *restrict x = acc + at, *restrict w = wsum + at;
                        float *restrict o = dst;
                        for (int64_t v = 0; v < e3; v++) o[v] = x[v] / w[v];
                        dst += e3;
                    }
        }
    } else {
        /* covered by one window: finish from its prediction, (p*w)/w as the reference */
        int32_t j = r->task_wins[T->win_off];
        const int64_t *t = &s->t[j * NDIM];
        int64_t off[NDIM];
        for (int a = 0; a < NDIM; a++) off[a] = hg->ax[a].cell_lo[T->cell[a]] - hg->ax[a].win_lo[t[a]];
        const float *P = swi__slot_out(s, T->head) + (size_t)j * (size_t)(C * hg->win_vox);
        const int64_t *o = hg->win;
        for (int64_t c = 0; c < C; c++) {
            float *dst = S + (size_t)(c * n);
            for (int64_t i0 = it->lo[0]; i0 < it->hi[0]; i0++)
                for (int64_t i1 = it->lo[1]; i1 < it->hi[1]; i1++)
                    for (int64_t i2 = it->lo[2]; i2 < it->hi[2]; i2++) {
                        size_t wi =
                            (size_t)((((off[0] + i0) * o[1] + off[1] + i1) * o[2] + off[2] + i2) * o[3] +
                                     off[3]);
                        const float *restrict x = P + (size_t)c * (size_t)hg->win_vox + wi;
                        const float *restrict w = hg->weights + wi;
                        float *restrict out = dst;
                        for (int64_t v = 0; v < e3; v++) out[v] = (x[v] * w[v]) / w[v];
                        dst += e3;
                    }
        }
    }
    /* region bounds in the output grid */
    int64_t lo[NDIM];
    for (int a = 0; a < NDIM; a++)
        lo[a] = hg->ax[a].cell_lo[T->cell[a]] - hg->crop_lo[a] + (a < NDIM - 1 ? it->lo[a] : 0);
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
        if (os->data && os->o.reduce != SWI_REDUCE_CUSTOM)
            store_region(os, hg, T->image, lo, ext, vals, planes);
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
