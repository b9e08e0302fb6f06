/* alloc.c -- the library's allocator front, with optional fault injection.
 *
 * In a build with SWI_FAULT_INJECTION, the environment variable SWI_FAULT_ALLOC=N
 * makes the N-th allocation (1-based, counted per process) fail, so tests can walk
 * every allocation point. SWI_FAULT_ALLOC_COUNT=1 prints nothing but lets
 * swi__alloc_count() report how many allocations a run made. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef SWI_FAULT_INJECTION
#include <stdatomic.h>
static atomic_llong alloc_calls;
static long long fail_at = -2; /* -2: not read yet, -1: never */

static bool should_fail(void) {
    if (fail_at == -2) {
        const char *s = getenv("SWI_FAULT_ALLOC");
        fail_at = (s && *s) ? atoll(s) : -1;
    }
    long long n = atomic_fetch_add(&alloc_calls, 1) + 1;
    return fail_at > 0 && n == fail_at;
}
long long swi__alloc_count(void) { return atomic_load(&alloc_calls); }
#else
static inline bool should_fail(void) { return false; }
#endif

bool swi__fault_point(void) { return should_fail(); }

void *swi__malloc(size_t bytes) {
    if (should_fail()) return NULL;
    return malloc(bytes ? bytes : 1);
}

void *swi__calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    if (n == 0 || size == 0) return calloc(1, 1);
    return calloc(n, size);
}

void swi__free(void *p) { free(p); }

bool swi__mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

bool swi__add_size(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return false;
    *out = a + b;
    return true;
}

bool swi__mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return false;
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

/* Big buffers (partial sums, window batches) come straight from the system, so that
 * freeing them really lowers the resident size (no heap fragmentation between the
 * planned and the measured peak) and, where the system offers transparent huge
 * pages, so that first touches fault 2 MiB at a time instead of 4 KiB. */
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define BIG_MIN ((size_t)1 << 20)

void *swi__map(size_t bytes) {
    if (should_fail()) return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= ((size_t)2 << 20)) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void *swi__big_alloc(size_t bytes) {
    if (bytes < BIG_MIN) return swi__malloc(bytes);
    return swi__map(bytes);
}

void swi__big_free(void *p, size_t bytes) {
    if (!p) return;
    if (bytes < BIG_MIN)
        swi__free(p);
    else
        munmap(p, bytes);
}
#else
void *swi__big_alloc(size_t bytes) { return swi__malloc(bytes); }
void swi__big_free(void *p, size_t bytes) {
    (void)bytes;
    swi__free(p);
}
#endif

int swi__grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > SIZE_MAX / 2) return 0;
        n *= 2;
    }
    size_t bytes;
    if (!swi__mul_size(n, elem, &bytes)) return 0;
    void *p = swi__malloc(bytes);
    if (!p) return 0;
    if (*arr) memcpy(p, *arr, *cap * elem); /* keep what is there: lists grow while filled */
    swi__free(*arr);
    *arr = p;
    *cap = n;
    return 1;
}
