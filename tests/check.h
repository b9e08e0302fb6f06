/*
 * check.h -- the few assertion helpers the unit tests share. A failed CHECK prints
 * where and why and is counted; a test's main returns check_report().
 */
#ifndef SWI_TESTS_CHECK_H
#define SWI_TESTS_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_count;

/* CHECK(cond, "printf format", args...): count, and on failure print the location. */
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        check_count++;                                                                    \
        if (!(cond)) {                                                                    \
            check_failures++;                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

/* Print the tally; 0 when nothing failed (the process exit status). */
static inline int check_report(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
