/* cellmem.c -- memory for the partial sums of open cells.
 *
 * Cells open and close all the time, in many sizes. Returning their memory to the
 * system and faulting fresh (zeroed) pages back in costs more than the blending itself,
 * so closed cells' regions are kept and reused for the next cell whatever its size:
 * a larger region is trimmed to size, a smaller one grown (mremap keeps its pages),
 * so pages are faulted in roughly once per planned peak, not once per cell. Kept
 * regions are given back whenever kept + live bytes would pass the limit (the planned
 * peak of partial sums), so the measured peak stays the planned one. */
#include "internal.h"

#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#define CELLMEM_PAGES 1
#else
#define CELLMEM_PAGES 0
#endif

/* below this, cells come from malloc and are not kept */
#define SMALL_CELL ((size_t)64 << 10)
#define PAGE ((size_t)4096)

static size_t page_round(size_t b) { return (b + PAGE - 1) & ~(PAGE - 1); }

void swi__cellmem_init(cellmem *m, size_t limit) {
    memset(m, 0, sizeof *m);
    m->limit = limit;
}

#if CELLMEM_PAGES
static void drop(cellmem *m, int i) {
    munmap(m->ptr[i], m->size[i]);
    m->cached -= m->size[i];
    m->ptr[i] = m->ptr[m->n - 1];
    m->size[i] = m->size[m->n - 1];
    m->n--;
}

#endif

void *swi__cellmem_get(cellmem *m, size_t bytes) {
#if CELLMEM_PAGES
    if (bytes >= SMALL_CELL) {
        size_t b = page_round(bytes);
        int fit = -1, grow = -1;
        for (int i = 0; i < m->n; i++) {
            if (m->size[i] >= b) {
                if (fit < 0 || m->size[i] < m->size[fit]) fit = i;
            } else if (grow < 0 || m->size[i] > m->size[grow]) {
                grow = i;
            }
        }
        if (fit >= 0) {
            char *p = m->ptr[fit];
            size_t have = m->size[fit];
            m->ptr[fit] = m->ptr[m->n - 1];
            m->size[fit] = m->size[m->n - 1];
            m->n--;
            m->cached -= have;
            if (have > b) munmap(p + b, have - b);
            m->live += b;
            return p;
        }
        /* make room under the limit for what is new: b, or b - kept when growing */
        while (m->n > 0) {
            size_t reuse = grow >= 0 ? m->size[grow] : 0;
            if (m->live + m->cached + (b - reuse) <= m->limit) break;
            int victim = 0;
            for (int i = 1; i < m->n; i++)
                if (i != grow && (victim == grow || m->size[i] < m->size[victim])) victim = i;
            if (victim == grow) { /* only the growable one is left: drop it too */
                drop(m, victim);
                grow = -1;
                break;
            }
            int last = m->n - 1;
            drop(m, victim);
            if (grow == last) grow = victim; /* drop() moved the last entry into victim's place */
        }
        if (grow >= 0 && !swi__fault_point()) {
            void *q = mremap(m->ptr[grow], m->size[grow], b, MREMAP_MAYMOVE);
            if (q != MAP_FAILED) {
                m->cached -= m->size[grow];
                m->ptr[grow] = m->ptr[m->n - 1];
                m->size[grow] = m->size[m->n - 1];
                m->n--;
#ifdef MADV_HUGEPAGE
                if (b >= ((size_t)2 << 20)) madvise(q, b, MADV_HUGEPAGE);
#endif
                m->live += b;
                return q;
            }
        }
        void *p = swi__map(b);
        if (p) m->live += b;
        return p;
    }
#endif
    void *p = swi__malloc(bytes);
    if (p) m->live += bytes;
    return p;
}

void swi__cellmem_put(cellmem *m, void *p, size_t bytes) {
    if (!p) return;
#if CELLMEM_PAGES
    if (bytes >= SMALL_CELL) {
        size_t b = page_round(bytes);
        m->live -= b;
        if (m->n < CELLMEM_SLOTS && m->live + m->cached + b <= m->limit) {
            m->ptr[m->n] = p;
            m->size[m->n] = b;
            m->n++;
            m->cached += b;
        } else {
            munmap(p, b);
        }
        return;
    }
#endif
    m->live -= bytes;
    swi__free(p);
}

void swi__cellmem_free(cellmem *m) {
#if CELLMEM_PAGES
    while (m->n > 0) drop(m, m->n - 1);
#endif
    m->n = 0;
    m->cached = 0;
}

/* Free a cell buffer outside the bookkeeping (teardown after an error). */
void swi__cellmem_release(void *p, size_t bytes) {
    if (!p) return;
#if CELLMEM_PAGES
    if (bytes >= SMALL_CELL) {
        munmap(p, page_round(bytes));
        return;
    }
#endif
    swi__free(p);
}
