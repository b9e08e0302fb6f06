/* frontier.c -- which cells are open, and what their partial sums cost.
 *
 * Every cell starts with the count of windows that cover it. A window landing on a
 * cell counts it down; the first landing on a cell covered by several windows opens
 * it (partial sums [C+1][cell]), the last one completes it, and completed cells are
 * released when their batch is done. A cell covered by one window is never stored:
 * it is finished straight from that window's prediction.
 *
 * The planner (plan.c) counts the same quantities without a table of cells: with the
 * order monotone along every axis, what a window opens and completes is a product of
 * per-axis sums, so the planned peak is the peak this code reaches for the same order
 * and batch size (test_random, test_parts and fuzz_engine compare the two). */
#include "internal.h"

#include <string.h>

size_t swi__cell_bytes(const head_geom *hg, const int64_t cell[NDIM]) {
    size_t vox = 1;
    for (int a = 0; a < NDIM; a++) vox *= (size_t)(hg->ax[a].cell_hi[cell[a]] - hg->ax[a].cell_lo[cell[a]]);
    return vox * (size_t)(hg->channels + 1) * sizeof(float);
}

swi_status swi__frontier_init(frontier *f, const geom *g, cellmem *mem) {
    memset(f, 0, sizeof *f);
    f->g = g;
    f->mem = mem;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        if (hg->channels <= 0 || hg->n_cells == 0) continue; /* unknown until the first call */
        size_t n;
        if (!swi__mul_size((size_t)hg->n_cells, (size_t)g->batch, &n) ||
            !swi__mul_size(n, sizeof(cell_state), &n))
            return SWI_ERR_OVERFLOW;
        f->cells[h] = swi__malloc(n);
        if (!f->cells[h]) return SWI_ERR_NOMEM;
        int64_t i = 0, c[NDIM], lo[NDIM] = {0}, n_cells[NDIM];
        for (int a = 0; a < NDIM; a++) n_cells[a] = hg->ax[a].n_cells;
        for (int more = swi__box_first(c, lo, n_cells); more; more = swi__box_next(c, lo, n_cells), i++) {
            int32_t full = (int32_t)swi__cell_windows(hg, c);
            for (int64_t b = 0; b < g->batch; b++) {
                cell_state *cs = &f->cells[h][b * hg->n_cells + i];
                memset(cs, 0, sizeof *cs);
                cs->rem = full;
                cs->stamp = -1;
            }
        }
    }
    return SWI_OK;
}

swi_status swi__frontier_land(frontier *f, int h, int64_t image, const int64_t c[NDIM], cell_state **state,
                              int *flags) {
    const head_geom *hg = &f->g->heads[h];
    cell_state *st = &f->cells[h][image * hg->n_cells + swi__cell_index(hg, c)];
    *state = st;
    *flags = 0;
    if (st->rem <= 0) return SWI_ERR_SHAPE; /* a window landed twice: an engine bug */
    int32_t full = (int32_t)swi__cell_windows(hg, c);
    if (full > 1 && st->rem == full) {
        size_t bytes = swi__cell_bytes(hg, c);
        if (f->mem) {
            st->buf = swi__cellmem_get(f->mem, bytes);
            if (!st->buf) return SWI_ERR_NOMEM;
        }
        f->live += bytes;
        *flags |= SWI_LAND_OPENED;
    }
    st->rem--;
    if (st->rem == 0) {
        *flags |= SWI_LAND_COMPLETED;
        if (full > 1) {
            size_t bytes = swi__cell_bytes(hg, c);
            f->closing += bytes;
            if (f->mem) {
                if (f->n_done == f->done_cap) {
                    size_t cap = f->done_cap ? f->done_cap * 2 : 64, n;
                    if (!swi__mul_size(cap, sizeof *f->done, &n)) return SWI_ERR_OVERFLOW;
                    frontier_done *d = swi__malloc(n);
                    if (!d) return SWI_ERR_NOMEM;
                    if (f->n_done) memcpy(d, f->done, f->n_done * sizeof *f->done);
                    swi__free(f->done);
                    f->done = d;
                    f->done_cap = cap;
                }
                f->done[f->n_done].state = st;
                f->done[f->n_done].bytes = bytes;
                f->n_done++;
            }
        }
    }
    return SWI_OK;
}

void swi__frontier_end_batch(frontier *f) {
    if (f->live > f->peak) f->peak = f->live;
    f->live -= f->closing;
    f->closing = 0;
    for (size_t i = 0; i < f->n_done; i++) {
        swi__cellmem_put(f->mem, f->done[i].state->buf, f->done[i].bytes);
        f->done[i].state->buf = NULL;
    }
    f->n_done = 0;
}

void swi__frontier_free(frontier *f) {
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        if (!f->cells[h]) continue;
        const head_geom *hg = &f->g->heads[h];
        int64_t n = hg->n_cells * f->g->batch;
        for (int64_t i = 0; f->mem && i < n; i++)
            if (f->cells[h][i].buf) {
                int64_t ci = i % hg->n_cells, c[NDIM];
                for (int a = NDIM - 1; a >= 0; a--) {
                    c[a] = ci % hg->ax[a].n_cells;
                    ci /= hg->ax[a].n_cells;
                }
                swi__cellmem_release(f->mem, f->cells[h][i].buf, swi__cell_bytes(hg, c));
            }
        swi__free(f->cells[h]);
    }
    swi__free(f->done);
    memset(f, 0, sizeof *f);
}
