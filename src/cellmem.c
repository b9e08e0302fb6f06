/* cellmem.c -- memory for the partial sums of open cells.
 *
 * Cells open and close all the time, in many sizes. A page the system hands out is
 * zeroed and mapped on first touch, which costs several times the blending itself
 * (in virtual machines over ten times: 1.5 GB/s with huge pages, 0.26 GB/s without),
 * so no page is given back and faulted in again while a run lasts. All cells come
 * from one arena, reserved at the first large cell and faulted in at most once:
 * swi__cellmem_bytes(peak) bytes for a frontier whose partial sums peak at `peak`,
 * which is what the planner counts. Blocks are handed out best-fit (the smallest free
 * block that holds the cell) and coalesce when freed; cells vary in size, so the arena
 * carries an allowance for fragmentation of 1/32 of the peak. A larger one (1/8, first-fit)
 * kept every benchmark inside the arena but cost its pages in the peak: with this one the
 * seed case peaks 130 MB lower and the 118-class resampled CT case 150 MB lower, at the
 * same CPU time (bench/RESULTS.md).
 *
 * If the arena is still too fragmented for a cell, that cell gets its own mapping and
 * as many free arena pages as there are are given back (MADV_DONTNEED), so the
 * resident total stays near the plan: correctness never depends on the fit, only the
 * speed does. Small cells come from malloc. */
#include "internal.h"

#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#define CELLMEM_PAGES 1
#else
#define CELLMEM_PAGES 0
#endif

/* below this, cells come from malloc */
#define SMALL_CELL ((size_t)64 << 10)
#define PAGE ((size_t)4096)
#define HUGE_PAGE ((size_t)2 << 20)

static size_t round_to(size_t b, size_t unit) { return (b + unit - 1) / unit * unit; }

size_t swi__cellmem_bytes(size_t peak) {
    if (peak == 0) return 0;
    size_t extra = peak / 32 + 4 * HUGE_PAGE;
    if (peak > SIZE_MAX - extra - HUGE_PAGE) return SIZE_MAX;
    return round_to(peak + extra, HUGE_PAGE);
}

void swi__cellmem_init(cellmem *m, size_t limit) {
    memset(m, 0, sizeof *m);
    m->limit = limit;
}

#if CELLMEM_PAGES
static int in_arena(const cellmem *m, const void *p) {
    return m->base && (const char *)p >= m->base && (const char *)p < m->base + m->arena;
}

/* Remove free block i. */
static void take(cellmem *m, int i) {
    memmove(&m->off[i], &m->off[i + 1], (size_t)(m->n - i - 1) * sizeof m->off[0]);
    memmove(&m->size[i], &m->size[i + 1], (size_t)(m->n - i - 1) * sizeof m->size[0]);
    m->n--;
}

/* Insert [off, off + size) into the address-ordered free list, merging neighbours.
 * Returns 0 when the list is full and the block cannot be recorded (it is lost to
 * this run, which costs memory reuse, never correctness). */
static int give(cellmem *m, size_t off, size_t size) {
    int i = 0;
    while (i < m->n && m->off[i] < off) i++;
    int left = i > 0 && m->off[i - 1] + m->size[i - 1] == off;
    int right = i < m->n && off + size == m->off[i];
    if (left && right) {
        m->size[i - 1] += size + m->size[i];
        take(m, i);
        return 1;
    }
    if (left) {
        m->size[i - 1] += size;
        return 1;
    }
    if (right) {
        m->off[i] = off;
        m->size[i] += size;
        return 1;
    }
    if (m->n == CELLMEM_SLOTS) return 0;
    memmove(&m->off[i + 1], &m->off[i], (size_t)(m->n - i) * sizeof m->off[0]);
    memmove(&m->size[i + 1], &m->size[i], (size_t)(m->n - i) * sizeof m->size[0]);
    m->off[i] = off;
    m->size[i] = size;
    m->n++;
    return 1;
}

/* Reserve the arena: address space only, pages come on first touch. */
static void reserve(cellmem *m) {
    m->tried = 1;
    size_t bytes = m->limit;
    if (bytes == 0 || bytes == SIZE_MAX) return; /* no arena: cells map their own */
    void *p = swi__map(bytes);
    if (!p) return;
    m->base = p;
    m->arena = bytes;
    m->n = 0;
    give(m, 0, bytes);
}

/* Give back free arena pages that may be resident, worth `bytes` at least. Pages
 * given back earlier may be counted again (free blocks do not remember it), so this
 * can give back less than asked: the fallback then costs memory, never correctness. */
static void shed(cellmem *m, size_t bytes) {
    size_t done = 0;
    for (int i = 0; i < m->n && done < bytes; i++) {
        size_t lo = m->off[i], hi = m->off[i] + m->size[i];
        if (hi > m->touched) hi = m->touched; /* never touched beyond the high-water mark */
        if (lo >= hi) continue;
        madvise(m->base + lo, hi - lo, MADV_DONTNEED);
        done += hi - lo;
    }
}
#endif

void *swi__cellmem_get(cellmem *m, size_t bytes) {
#if CELLMEM_PAGES
    if (bytes >= SMALL_CELL) {
        size_t b = round_to(bytes, PAGE);
        if (!m->tried) reserve(m);
        if (!swi__fault_point()) {
            int best = -1;
            for (int i = 0; i < m->n; i++)
                if (m->size[i] >= b && (best < 0 || m->size[i] < m->size[best])) best = i;
            if (best >= 0) {
                size_t off = m->off[best];
                if (m->size[best] == b) {
                    take(m, best);
                } else {
                    m->off[best] += b;
                    m->size[best] -= b;
                }
                if (off + b > m->touched) m->touched = off + b;
                m->live += b;
                return m->base + off;
            }
        }
        /* no room in the arena: a mapping of its own, and as much arena given back */
        void *p = swi__map(b);
        if (!p) return NULL;
        shed(m, b);
        m->live += b;
        m->outside += b;
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
        size_t b = round_to(bytes, PAGE);
        m->live -= b;
        if (in_arena(m, p)) {
            size_t off = (size_t)((char *)p - m->base);
            if (!give(m, off, b)) madvise(p, b, MADV_DONTNEED); /* unrecorded: at least not resident */
        } else {
            m->outside -= b;
            munmap(p, b);
        }
        return;
    }
#endif
    m->live -= bytes;
    swi__free(p);
}

/* Free a cell buffer outside the bookkeeping (teardown after an error), before
 * swi__cellmem_free. */
void swi__cellmem_release(cellmem *m, void *p, size_t bytes) {
    if (!p) return;
#if CELLMEM_PAGES
    if (bytes >= SMALL_CELL) {
        if (!in_arena(m, p)) munmap(p, round_to(bytes, PAGE));
        return;
    }
#else
    (void)m;
#endif
    swi__free(p);
}

void swi__cellmem_free(cellmem *m) {
#if CELLMEM_PAGES
    if (m->base) munmap(m->base, m->arena);
#endif
    m->base = NULL;
    m->arena = 0;
    m->n = 0;
}
