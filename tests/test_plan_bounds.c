/*
 * test_plan_bounds.c -- the planner's memory follows the frontier, not the volume: a plan
 * for any size a header may claim answers, within an address space of a few hundred MB,
 * in seconds (a generous hang guard), and a size whose partial sums cannot be counted
 * in size_t is refused as an overflow instead of planned with wrapped numbers.
 *
 * Memory is bounded with RLIMIT_AS (not under the sanitizers, which reserve terabytes of
 * address space). The planned numbers themselves are checked elsewhere: test_random and
 * test_parts compare every planned frontier with the one the run reaches.
 */
#include "swi.h"

#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define AS_LIMIT ((rlim_t)512 << 20)

static int never_read(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                      size_t msg_size) {
    (void)user, (void)image, (void)lo, (void)hi, (void)dst;
    snprintf(msg, msg_size, "a plan reads nothing");
    return 1;
}

static const swi_reader reader = {never_read, NULL};

/* Plan a 3-D input of `size` read through a reader, windows `roi`, `channels` classes. */
static swi_status plan_of(swi_ctx *ctx, const int64_t size[3], int64_t roi, int64_t channels, int sw,
                          const int64_t *part_lo, const int64_t *part_hi, swi_plan *plan) {
    swi_params p;
    swi_params_init(&p, 3);
    for (int k = 0; k < 3; k++) p.roi[k] = roi;
    p.heads[0].channels = channels;
    p.sw_batch_size = sw;
    p.reuse = SWI_REUSE_OFF;
    p.threads = 2;
    if (part_lo)
        for (int k = 0; k < 3; k++) {
            p.part_lo[k] = part_lo[k];
            p.part_hi[k] = part_hi[k];
        }
    swi_tensor in;
    memset(&in, 0, sizeof in);
    in.dims = 3;
    in.batch = 1;
    in.channels = 1;
    in.reader = &reader;
    memcpy(in.size, size, 3 * sizeof *size);
    return swi_plan_run(ctx, &p, &in, NULL, 0, plan);
}

static void test_huge_headers(swi_ctx *ctx) {
    static const struct {
        int64_t size[3], roi;
        int sw;
    } cases[] = {
        {{8192, 8192, 8192}, 32, 1},     /* 40 M windows, 317 M cells */
        {{8192, 8192, 8192}, 128, 4},    /* the 155-byte .zarray */
        {{65536, 65536, 4096}, 128, 4},  /* 20 M windows, 160 M cells */
        {{1 << 20, 1 << 20, 64}, 64, 1}, /* 2^46 voxels */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        swi_plan plan;
        swi_status st = plan_of(ctx, cases[i].size, cases[i].roi, 4, cases[i].sw, NULL, NULL, &plan);
        CHECK(st == SWI_OK, "case %zu (%lld x %lld x %lld, roi %lld): status %d: %s", i,
              (long long)cases[i].size[0], (long long)cases[i].size[1], (long long)cases[i].size[2],
              (long long)cases[i].roi, (int)st, swi_last_error(ctx));
        if (st != SWI_OK) continue;
        CHECK(plan.bytes_partial > 0 && plan.bytes_peak >= plan.bytes_partial,
              "case %zu: partial %zu, peak %zu", i, plan.bytes_partial, plan.bytes_peak);
    }
    /* a part of a huge volume plans its own frontier the same way */
    const int64_t size[3] = {8192, 8192, 8192}, lo[3] = {0, 0, 4000}, hi[3] = {0, 0, 4500};
    swi_plan whole, part;
    swi_status st = plan_of(ctx, size, 64, 4, 2, NULL, NULL, &whole);
    CHECK(st == SWI_OK, "whole: %s", swi_last_error(ctx));
    st = plan_of(ctx, size, 64, 4, 2, lo, hi, &part);
    CHECK(st == SWI_OK, "part: %s", swi_last_error(ctx));
    if (st == SWI_OK)
        CHECK(part.bytes_partial <= whole.bytes_partial && part.windows_total < whole.windows_total,
              "part: partial %zu of the whole's %zu, %lld windows of %lld", part.bytes_partial,
              whole.bytes_partial, (long long)part.windows_total, (long long)whole.windows_total);
}

/* Partial sums of 2^50 voxels x 2^14 classes: 2^66 bytes, which size_t cannot count. */
static void test_overflow(swi_ctx *ctx) {
    const int64_t size[3] = {(int64_t)1 << 17, (int64_t)1 << 17, (int64_t)1 << 16};
    swi_params p;
    swi_params_init(&p, 3);
    for (int k = 0; k < 3; k++) p.roi[k] = 256;
    p.heads[0].channels = (int64_t)1 << 14;
    p.reuse = SWI_REUSE_OFF;
    p.threads = 1;
    swi_tensor in;
    memset(&in, 0, sizeof in);
    in.dims = 3;
    in.batch = 1;
    in.channels = 1;
    in.reader = &reader;
    memcpy(in.size, size, sizeof size);
    swi_plan plan;
    swi_status st = swi_plan_run(ctx, &p, &in, NULL, 0, &plan);
    CHECK(st == SWI_ERR_OVERFLOW, "status %d (%s), peak %zu: expected SWI_ERR_OVERFLOW", (int)st,
          swi_last_error(ctx), plan.bytes_peak);
    CHECK(strstr(swi_last_error(ctx), "overflow") != NULL, "message: %s", swi_last_error(ctx));
}

int main(void) {
    alarm(120); /* a hang guard: each plan takes seconds at most */
    if (!SANITIZED) {
        struct rlimit rl = {AS_LIMIT, AS_LIMIT};
        if (setrlimit(RLIMIT_AS, &rl) != 0) perror("setrlimit (the plans run unbounded)");
    }
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return check_report("test_plan_bounds");
    test_huge_headers(ctx);
    test_overflow(ctx);
    swi_free(ctx);
    return check_report("test_plan_bounds");
}
