/* finish.c -- a cell whose last window has landed: divide its partial sums by the
 * weight sum (or take (p*w)/w from its one window), reduce, and hand the region to
 * every output of its head: stored (caller or library memory) and/or given to the
 * region callback (semantics steps 6-7 and the reductions of docs/semantics.md). */
#include "engine.h"

#include <string.h>

swi_status swi__finish_items(run *r) {
    r->n_fin = 0;
    for (int32_t i = 0; i < r->n_tasks; i++) {
        task *T = &r->tasks[i];
        if (T->completes) {
            int64_t e0 = T->ext[0], e1 = T->ext[1], e2 = T->ext[2];
            int64_t rows = (int64_t)r->chunk_cap / e2;
            if (rows < 1) rows = 1;
            int64_t step0 = e1 <= rows ? rows / e1 : 1, step1 = e1 <= rows ? e1 : rows;
            for (int64_t a0 = 0; a0 < e0; a0 += step0)
                for (int64_t b0 = 0; b0 < e1; b0 += step1) {
                    if (!swi__grow((void **)&r->fin, &r->fin_cap, (size_t)r->n_fin + 1, sizeof(fin_item)))
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
    return SWI_OK;
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

SWI_KERNEL void swi__finish_item(void *arg, int64_t item, int worker) {
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
        const float *P = swi__slot_out(s, T->head) + (size_t)j * (size_t)(C * hg->win_vox);
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
