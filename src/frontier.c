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
    return vox * ((size_t)hg->channels * hg->acc_bytes + sizeof(float)); /* the weight sum is float32 */
}

size_t swi__cell_slots(size_t entries) {
    /* at most half full; a batch that starts off the planned boundaries (the first call of
     * a run that learns its heads under a budget) holds at most two planned batches' cells */
    size_t want, n = 16;
    if (!swi__mul_size(entries, 4, &want)) return SIZE_MAX;
    while (n < want) {
        if (n > SIZE_MAX / 2) return SIZE_MAX;
        n *= 2;
    }
    return n;
}

static size_t slot_hash(int64_t key, size_t mask) {
    uint64_t x = (uint64_t)key + 0x9E3779B97F4A7C15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (size_t)(x ^ (x >> 31)) & mask;
}

/* The slot of key, or the empty one where it would go. */
static size_t slot_find(const frontier *f, int64_t key) {
    const size_t mask = f->n_slots - 1;
    size_t i = slot_hash(key, mask);
    while (f->slots[i].key >= 0 && f->slots[i].key != key) i = (i + 1) & mask;
    return i;
}

/* Empty slot i, moving back the entries after it that probed past it. */
static void slot_drop(frontier *f, size_t i) {
    const size_t mask = f->n_slots - 1;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (f->slots[j].key < 0) break;
        const size_t k = slot_hash(f->slots[j].key, mask);
        /* j's entry may fill i unless its home k lies cyclically in (i, j] */
        if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
            f->slots[i] = f->slots[j];
            i = j;
        }
    }
    f->slots[i].key = -1;
    f->used--;
}

swi_status swi__frontier_init(frontier *f, const geom *g, cellmem *mem, size_t entries) {
    memset(f, 0, sizeof *f);
    f->g = g;
    f->mem = mem;
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        if (hg->channels <= 0 || hg->n_cells == 0) continue;
        size_t n;
        int64_t k;
        /* every cell has its windows counted in rem, and its key must fit */
        if (!swi__mul_i64(hg->n_cells, g->batch, &k) || !swi__mul_i64(k, SWI_MAX_HEADS, &k))
            return SWI_ERR_OVERFLOW;
        int64_t most = 1; /* the most windows over one cell */
        for (int a = 0; a < NDIM; a++) {
            int64_t m = 1;
            for (int64_t c = 0; c < hg->ax[a].n_cells; c++)
                if (hg->ax[a].cell_wcount[c] > m) m = hg->ax[a].cell_wcount[c];
            if (!swi__mul_i64(most, m, &most)) return SWI_ERR_OVERFLOW;
        }
        if (!swi__mul_size((size_t)hg->n_cells, (size_t)g->batch, &n) ||
            !swi__mul_size(n, sizeof(cell_state), &n))
            return SWI_ERR_OVERFLOW;
    }
    if (entries) {
        f->n_slots = swi__cell_slots(entries);
        size_t n;
        if (f->n_slots == SIZE_MAX || !swi__mul_size(f->n_slots, sizeof(cell_slot), &n))
            return SWI_ERR_OVERFLOW;
        f->slots = swi__malloc(n);
        if (!f->slots) return SWI_ERR_NOMEM;
        for (size_t i = 0; i < f->n_slots; i++) f->slots[i].key = -1;
        return SWI_OK;
    }
    for (int h = 0; h < g->n_heads; h++) {
        const head_geom *hg = &g->heads[h];
        if (hg->channels <= 0 || hg->n_cells == 0) continue; /* unknown until the first call */
        f->cells[h] = swi__malloc((size_t)hg->n_cells * (size_t)g->batch * sizeof(cell_state));
        if (!f->cells[h]) return SWI_ERR_NOMEM;
        int64_t i = 0, c[NDIM], lo[NDIM] = {0}, n_cells[NDIM];
        for (int a = 0; a < NDIM; a++) n_cells[a] = hg->ax[a].n_cells;
        for (int more = swi__box_first(c, lo, n_cells); more; more = swi__box_next(c, lo, n_cells), i++) {
            const int64_t full = swi__cell_windows(hg, c);
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
    const int64_t full = swi__cell_windows(hg, c);
    cell_state *st;
    int64_t key = -1;
    *flags = 0;
    if (f->slots) {
        key = (image * hg->n_cells + swi__cell_index(hg, c)) * SWI_MAX_HEADS + h;
        const size_t i = slot_find(f, key);
        if (f->slots[i].key < 0) { /* first landing: the cell comes into use */
            if (f->used + 1 >= f->n_slots) return SWI_ERR_OVERFLOW;
            f->slots[i].key = key;
            memset(&f->slots[i].st, 0, sizeof f->slots[i].st);
            f->slots[i].st.rem = full;
            f->slots[i].st.stamp = -1;
            f->used++;
        }
        st = &f->slots[i].st;
    } else {
        st = &f->cells[h][image * hg->n_cells + swi__cell_index(hg, c)];
    }
    *state = st;
    if (st->rem <= 0) return SWI_ERR_SHAPE; /* a window landed twice: an engine bug */
    const int stored = swi__cell_stored(f->g, full);
    if (stored && st->rem == full) {
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
        size_t bytes = stored ? swi__cell_bytes(hg, c) : 0;
        f->closing += bytes;
        if (f->mem && (stored || f->slots)) { /* released (and, sparse, dropped) at the batch's end */
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
            f->done[f->n_done].key = key;
            f->done[f->n_done].bytes = bytes;
            f->n_done++;
        }
    }
    return SWI_OK;
}

void swi__frontier_end_batch(frontier *f) {
    if (f->live > f->peak) f->peak = f->live;
    f->live -= f->closing;
    f->closing = 0;
    /* the buffers first: dropping sparse entries moves others */
    for (size_t i = 0; i < f->n_done; i++) {
        if (f->done[i].bytes) swi__cellmem_put(f->mem, f->done[i].state->buf, f->done[i].bytes);
        f->done[i].state->buf = NULL;
    }
    for (size_t i = 0; f->slots && i < f->n_done; i++) {
        const size_t at = slot_find(f, f->done[i].key);
        if (f->slots[at].key >= 0) slot_drop(f, at);
    }
    f->n_done = 0;
}

/* Give back the buffer of the cell of head h at index i of its table (image * n_cells + cell). */
static void release_cell(frontier *f, int h, int64_t i, float *buf) {
    const head_geom *hg = &f->g->heads[h];
    int64_t ci = i % hg->n_cells, c[NDIM];
    for (int a = NDIM - 1; a >= 0; a--) {
        c[a] = ci % hg->ax[a].n_cells;
        ci /= hg->ax[a].n_cells;
    }
    swi__cellmem_release(f->mem, buf, swi__cell_bytes(hg, c));
}

void swi__frontier_free(frontier *f) {
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        if (!f->cells[h]) continue;
        int64_t n = f->g->heads[h].n_cells * f->g->batch;
        for (int64_t i = 0; f->mem && i < n; i++)
            if (f->cells[h][i].buf) release_cell(f, h, i, f->cells[h][i].buf);
        swi__free(f->cells[h]);
    }
    for (size_t i = 0; f->slots && f->mem && i < f->n_slots; i++)
        if (f->slots[i].key >= 0 && f->slots[i].st.buf)
            release_cell(f, (int)(f->slots[i].key % SWI_MAX_HEADS), f->slots[i].key / SWI_MAX_HEADS,
                         f->slots[i].st.buf);
    swi__free(f->slots);
    swi__free(f->done);
    memset(f, 0, sizeof *f);
}
