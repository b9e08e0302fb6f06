/*
 * test_cellmem.c -- the partial-sum allocator (src/cellmem.c) on its own: blocks never
 * overlap, freed blocks coalesce back into the whole arena, a frontier that fits its
 * planned peak is served from the arena alone, and a fragmented arena falls back to
 * mappings of their own that are given back on release.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define MAXLIVE 64

typedef struct block {
    uint32_t *p;
    size_t bytes;
    uint32_t tag;
} block;

static size_t page_round(size_t b) { return (b + 4095) / 4096 * 4096; }

static void fill(block *b) {
    size_t n = b->bytes / sizeof(uint32_t);
    for (size_t i = 0; i < n; i += 1021) b->p[i] = b->tag ^ (uint32_t)i;
    b->p[n - 1] = b->tag;
}

static int intact(const block *b) {
    size_t n = b->bytes / sizeof(uint32_t);
    for (size_t i = 0; i < n; i += 1021)
        if (b->p[i] != (b->tag ^ (uint32_t)i) && i != n - 1) return 0;
    return b->p[n - 1] == b->tag;
}

static int in_arena(const cellmem *m, const void *p) {
    return m->base && (const char *)p >= m->base && (const char *)p < m->base + m->arena;
}

/* Live bytes as the allocator counts them (large blocks are page-rounded). */
static size_t counted(const block *b, int n) {
    size_t s = 0;
    for (int i = 0; i < n; i++) s += b[i].bytes >= 64 * KIB ? page_round(b[i].bytes) : b[i].bytes;
    return s;
}

/* A frontier under its planned peak: random sizes (small ones from malloc included),
 * frees first-in first-out, as cells complete in a sweep (fifo), or also at random.
 * Every block stays intact and counted; a cell leaves the arena only when no free
 * block can hold it; how often that happens is printed (the fragmentation allowance
 * makes it rare, nothing makes it impossible). */
static void test_frontier(int fifo) {
    const size_t peak = 48 * MIB;
    cellmem m;
    swi__cellmem_init(&m, swi__cellmem_bytes(peak));
    CHECK(m.limit >= peak + peak / 8, "arena %zu for a peak of %zu", m.limit, peak);
    block live[MAXLIVE];
    int n = 0;
    uint32_t tag = 1;
    unsigned seed = 12345;
    size_t outside_seen = 0, max_live = 0;
    for (int step = 0; step < 4000; step++) {
        seed = seed * 1103515245u + 12345u;
        size_t sizes[] = {40 * KIB, 96 * KIB, 300 * KIB, 1 * MIB + 4100, 3 * MIB, 5 * MIB + 12};
        size_t want = sizes[(seed >> 16) % 6];
        /* free the oldest (sometimes a random one) until the new block fits the peak */
        while (n > 0 && (counted(live, n) + page_round(want) > peak || ((seed >> 8) & 7) == 0)) {
            int k = !fifo && ((seed >> 4) & 3) == 0 ? (int)((seed >> 20) % (unsigned)n) : 0;
            CHECK(intact(&live[k]), "block %u overwritten", live[k].tag);
            swi__cellmem_put(&m, live[k].p, live[k].bytes);
            memmove(&live[k], &live[k + 1], (size_t)(n - k - 1) * sizeof live[0]);
            n--;
            seed = seed * 1103515245u + 12345u;
        }
        if (n == MAXLIVE) continue;
        size_t largest = 0;
        for (int i = 0; i < m.n; i++)
            if (m.size[i] > largest) largest = m.size[i];
        int fits = m.base && largest >= page_round(want);
        block b = {swi__cellmem_get(&m, want), want, tag++};
        CHECK(b.p != NULL, "get(%zu) failed at step %d", want, step);
        if (!b.p) break;
        fill(&b);
        live[n++] = b;
        if (want >= 64 * KIB && !in_arena(&m, b.p)) {
            outside_seen++;
            CHECK(!fits, "a %zu-byte cell left the arena though a %zu-byte block was free", want, largest);
        }
        CHECK(m.live == counted(live, n), "live %zu, blocks hold %zu", m.live, counted(live, n));
        if (m.live > max_live) max_live = m.live;
    }
    CHECK(max_live <= peak, "the frontier peaked at %zu over %zu", max_live, peak);
    CHECK(m.touched <= m.arena, "touched %zu beyond the arena %zu", m.touched, m.arena);
    /* the allowance is meant to absorb this kind of fragmentation */
    printf("test_cellmem: %s frees, %zu of 4000 cells outside the arena, arena touched %zu of %zu bytes\n",
           fifo ? "fifo" : "random", outside_seen, m.touched, m.arena);
    for (int k = 0; k < n; k++) {
        CHECK(intact(&live[k]), "block %u overwritten", live[k].tag);
        swi__cellmem_put(&m, live[k].p, live[k].bytes);
    }
    CHECK(m.live == 0 && m.outside == 0, "live %zu outside %zu after freeing all", m.live, m.outside);
    CHECK(m.n == 1 && m.off[0] == 0 && m.size[0] == m.arena, "free list did not coalesce: %d blocks", m.n);
    swi__cellmem_free(&m);
}

/* Holes too small for the next cell: it gets a mapping of its own, and every block
 * stays intact; releasing it returns the allocator to an empty state. */
static void test_fragmented(void) {
    cellmem m;
    swi__cellmem_init(&m, swi__cellmem_bytes(8 * MIB));
    block b[64];
    int n = 0;
    size_t piece = 1 * MIB;
    while (n < 64) {
        b[n] = (block){swi__cellmem_get(&m, piece), piece, (uint32_t)(100 + n)};
        CHECK(b[n].p != NULL, "get failed");
        if (!b[n].p) return;
        fill(&b[n]);
        if (!in_arena(&m, b[n].p)) { /* the arena is full: this one lives outside */
            n++;
            break;
        }
        n++;
    }
    CHECK(n < 64 && !in_arena(&m, b[n - 1].p), "the arena never filled (%d blocks)", n);
    CHECK(m.outside == piece, "outside %zu, expected %zu", m.outside, piece);
    /* free every other arena block: holes of 1 MiB, none fits 3 MiB */
    for (int k = 0; k < n - 1; k += 2) {
        swi__cellmem_put(&m, b[k].p, b[k].bytes);
        b[k].p = NULL;
    }
    block big = {swi__cellmem_get(&m, 3 * MIB), 3 * MIB, 999};
    CHECK(big.p != NULL && !in_arena(&m, big.p), "a 3 MiB cell in 1 MiB holes: %p", (void *)big.p);
    if (big.p) fill(&big);
    /* a 1 MiB cell still fits a hole */
    block small = {swi__cellmem_get(&m, piece), piece, 1000};
    CHECK(small.p != NULL && in_arena(&m, small.p), "a 1 MiB cell did not reuse a hole");
    if (small.p) fill(&small);
    for (int k = 0; k < n; k++)
        if (b[k].p) {
            CHECK(intact(&b[k]), "block %u overwritten", b[k].tag);
            swi__cellmem_put(&m, b[k].p, b[k].bytes);
        }
    if (big.p) {
        CHECK(intact(&big), "the outside block was overwritten");
        swi__cellmem_release(&m, big.p, big.bytes); /* teardown path */
    }
    if (small.p) {
        CHECK(intact(&small), "the reused hole was overwritten");
        swi__cellmem_put(&m, small.p, small.bytes);
    }
    CHECK(m.live == big.bytes, "live %zu: only the released (untracked) block remains counted", m.live);
    swi__cellmem_free(&m);
}

/* No arena at all (a zero peak): every cell maps its own and is given back. */
static void test_no_arena(void) {
    cellmem m;
    swi__cellmem_init(&m, swi__cellmem_bytes(0));
    CHECK(m.limit == 0, "arena for a zero peak: %zu", m.limit);
    block b = {swi__cellmem_get(&m, 2 * MIB), 2 * MIB, 7};
    CHECK(b.p != NULL && m.base == NULL, "no arena expected");
    if (b.p) {
        fill(&b);
        CHECK(intact(&b), "block overwritten");
        swi__cellmem_put(&m, b.p, b.bytes);
    }
    CHECK(m.live == 0 && m.outside == 0, "live %zu outside %zu", m.live, m.outside);
    swi__cellmem_free(&m);
    CHECK(swi__cellmem_bytes(SIZE_MAX - 1) == SIZE_MAX, "overflow not reported");
}

int main(void) {
    test_frontier(1);
    test_frontier(0);
    test_fragmented();
    test_no_arena();
    return check_report("test_cellmem");
}
