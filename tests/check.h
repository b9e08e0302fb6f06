/*
 * check.h -- the few assertion helpers the unit tests share. A failed CHECK prints
 * where and why and is counted; a test's main returns check_report().
 */
#ifndef SWI_TESTS_CHECK_H
#define SWI_TESTS_CHECK_H

#include <stdint.h>
#include <stdio.h>

/* SANITIZED: 1 in AddressSanitizer/ThreadSanitizer/MemorySanitizer builds (gcc or clang),
 * whose shadow memory rules out address-space limits (RLIMIT_AS). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int check_failures;
static int check_count;

/* CHECK(cond, "printf format", args...): count, and on failure print the location. */
#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

/* A small reproducible generator for randomised tests (xorshift64): each test seeds its
 * own state, so a failing configuration can be replayed. */
static uint64_t check_rng_state = 0x9E3779B97F4A7C15ull;
static inline int64_t rnd(int64_t lo, int64_t hi) {
    check_rng_state ^= check_rng_state << 13;
    check_rng_state ^= check_rng_state >> 7;
    check_rng_state ^= check_rng_state << 17;
    return lo + (int64_t)(check_rng_state % (uint64_t)(hi - lo + 1));
}

/* Print the tally; 0 when nothing failed (the process exit status). */
static inline int check_report(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
