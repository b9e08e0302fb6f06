/*
 * test_cell_table.c -- the frontier's sparse cell table (the cells in use only, chosen
 * where a table of every cell would be large). Random runs are made twice, with the table
 * chosen as usual (dense for these sizes) and with the sparse one forced: results must be
 * bitwise equal, the planned frontier the one reached, and the plan's peak never below
 * what is asked of it. Then a part of a volume whose dense table would take gigabytes
 * runs within an address space of 1 GB (RLIMIT_AS, not under the sanitizers), and the
 * plan of a huge volume counts a small table.
 */
#include "swi.h"
#include "test_predictor.h"

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

extern int swi__sparse_tables;
int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured);

/* Head 0's scores and labels into caller buffers. */
static void outputs(swi_output o[2], float *scores, size_t scores_bytes, unsigned char *labels,
                    size_t label_bytes) {
    swi_output_init(&o[0], 0, SWI_REDUCE_NONE);
    o[0].dst = scores;
    o[0].dst_bytes = scores_bytes;
    swi_output_init(&o[1], 0, SWI_REDUCE_ARGMAX);
    o[1].dst = labels;
    o[1].dst_bytes = label_bytes;
}

/* One run of p into the scores of head 0 (and labels); 0 when it failed, else 1 with the
 * batch size and order it took told by *calls and *front (the planned frontier). */
static int run_once(swi_ctx *ctx, swi_params *p, const swi_tensor *in, pred_state *ps, float *scores,
                    size_t scores_bytes, unsigned char *labels, size_t label_bytes, int sparse,
                    int64_t *calls, size_t *front) {
    swi_output o[2];
    outputs(o, scores, scores_bytes, labels, label_bytes);
    swi_predictor pred = {predict, ps};
    swi__sparse_tables = sparse;
    swi_status st = swi_run(ctx, p, in, &pred, o, 2);
    swi__sparse_tables = 0;
    CHECK(st == SWI_OK, "%s table: %s", sparse ? "sparse" : "dense", swi_last_error(ctx));
    if (st != SWI_OK) return 0;
    size_t planned = 0, measured;
    if (swi__frontier_stats(ctx, &planned, &measured))
        CHECK(planned == measured, "%s table: frontier planned %zu, reached %zu", sparse ? "sparse" : "dense",
              planned, measured);
    swi_stats stats;
    swi_run_stats(ctx, &stats);
    *calls = stats.predictor_calls;
    *front = planned;
    return 1;
}

static void test_random_runs(void) {
    check_rng_state = 0x5EED0C311ull;
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return;
    int compared = 0;
    for (int t = 0; t < 150; t++) {
        const int dims = (int)rnd(1, 3);
        swi_params p;
        swi_params_init(&p, dims);
        swi_tensor in;
        memset(&in, 0, sizeof in);
        in.dims = dims;
        in.batch = rnd(1, 2);
        in.channels = rnd(1, 2);
        int64_t vox = 1;
        for (int k = 0; k < dims; k++) {
            in.size[k] = rnd(1, dims == 3 ? 14 : 40);
            p.roi[k] = rnd(1, dims == 3 ? 7 : 12);
            p.overlap[k] = (double)rnd(0, 3) * 0.25;
            vox *= in.size[k];
        }
        if (rnd(0, 1)) p.mode = SWI_BLEND_GAUSSIAN;
        p.sw_batch_size = (int)rnd(1, 6);
        p.threads = (int)rnd(1, 3);
        pred_state ps = {{rnd(1, 3), rnd(1, 3)}, (int)rnd(1, 2)};
        p.n_heads = ps.heads;
        const int learned = rnd(0, 2) == 0; /* heads learned at the first call */
        for (int h = 0; h < ps.heads; h++) p.heads[h].channels = learned ? 0 : ps.C[h];
        if (rnd(0, 3) == 0) { /* a part: one dim cut */
            const int k = (int)rnd(0, dims - 1);
            p.part_lo[k] = rnd(0, in.size[k] - 1);
            p.part_hi[k] = rnd(p.part_lo[k] + 1, in.size[k]);
        }
        float *x = malloc((size_t)(in.batch * in.channels * vox) * sizeof *x);
        const size_t sb = (size_t)(in.batch * ps.C[0] * vox) * sizeof(float), lb = (size_t)(in.batch * vox);
        float *s1 = malloc(sb), *s2 = malloc(sb);
        unsigned char *l1 = malloc(lb), *l2 = malloc(lb);
        CHECK(x && s1 && s2 && l1 && l2, "malloc");
        if (!x || !s1 || !s2 || !l1 || !l2) return;
        for (int64_t i = 0; i < in.batch * in.channels * vox; i++) x[i] = (float)rnd(-1000, 1000) / 250.0f;
        in.data = x;
        if (rnd(0, 2) == 0) { /* under a budget: the smallest plan; twice it for learned heads (their
                                 first call takes one window, then their order is kept) */
            swi_plan dense, sparse;
            swi_output o[2];
            outputs(o, s1, sb, l1, lb);
            for (int h = 0; h < ps.heads; h++) p.heads[h].channels = ps.C[h];
            swi_status st = swi_plan_run(ctx, &p, &in, o, 2, &dense);
            swi__sparse_tables = 1;
            if (st == SWI_OK) st = swi_plan_run(ctx, &p, &in, o, 2, &sparse);
            swi__sparse_tables = 0;
            for (int h = 0; h < ps.heads; h++) p.heads[h].channels = learned ? 0 : ps.C[h];
            if (st == SWI_OK)
                p.max_memory = (dense.bytes_min > sparse.bytes_min ? dense.bytes_min : sparse.bytes_min) *
                               (learned ? 2 : 1);
        }
        memset(s1, 0xA5, sb); /* outside a part: left as it was */
        memset(s2, 0xA5, sb);
        memset(l1, 0xA5, lb);
        memset(l2, 0xA5, lb);
        int64_t calls[2];
        size_t front[2];
        const int a = run_once(ctx, &p, &in, &ps, s1, sb, l1, lb, 0, &calls[0], &front[0]);
        const int b = run_once(ctx, &p, &in, &ps, s2, sb, l2, lb, 1, &calls[1], &front[1]);
        /* a budget may take another batch size (the tables differ in size), whose order
         * rounds the sums otherwise */
        compared += a && b && calls[0] == calls[1] && front[0] == front[1];
        if (a && b && calls[0] == calls[1] && front[0] == front[1])
            CHECK(memcmp(s1, s2, sb) == 0 && memcmp(l1, l2, lb) == 0,
                  "config %d (dims %d, sw %d, heads %d%s%s): sparse and dense tables differ", t, dims,
                  p.sw_batch_size, ps.heads, learned ? ", learned" : "", p.max_memory ? ", budget" : "");
        free(x);
        free(s1);
        free(s2);
        free(l1);
        free(l2);
    }
    CHECK(compared >= 100, "only %d of 150 configs compared", compared);
    swi_free(ctx);
}

static int zero_reader(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                       size_t msg_size) {
    (void)user, (void)image, (void)msg, (void)msg_size;
    int64_t n = 1;
    for (int k = 0; k < 3; k++) n *= hi[k] - lo[k];
    memset(dst, 0, (size_t)n * sizeof *dst);
    return 0;
}

/* region callbacks may run on several workers at once (swi.h): count atomically */
static int count_region(void *user, const swi_region *r) {
    int64_t *n = user;
    __atomic_add_fetch(n, (r->hi[0] - r->lo[0]) * (r->hi[1] - r->lo[1]) * (r->hi[2] - r->lo[2]),
                       __ATOMIC_RELAXED);
    return 0;
}

/* 8192^3 voxels, roi 32: 317 M cells, 7.6 GB as a dense table. A part of 64^3 runs its
 * few windows with a table of the cells in use, streaming its labels to a callback. */
static void test_huge_part(void) {
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return;
    swi_params p;
    swi_params_init(&p, 3);
    swi_tensor in;
    memset(&in, 0, sizeof in);
    in.dims = 3;
    in.batch = 1;
    in.channels = 1;
    swi_reader rd = {zero_reader, NULL};
    in.reader = &rd;
    for (int k = 0; k < 3; k++) {
        in.size[k] = 8192;
        p.roi[k] = 32;
        p.part_lo[k] = 4000;
        p.part_hi[k] = 4064;
    }
    pred_state ps = {{2, 0}, 1};
    p.heads[0].channels = 2;
    p.threads = 2;
    p.reuse = SWI_REUSE_OFF;
    swi_output o;
    int64_t got = 0;
    swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
    o.on_region = count_region;
    o.user = &got;
    swi_predictor pred = {predict, &ps};
    swi_plan plan;
    swi_status st = swi_plan_run(ctx, &p, &in, &o, 1, &plan);
    CHECK(st == SWI_OK, "plan: %s", swi_last_error(ctx));
    CHECK(st != SWI_OK || plan.bytes_scratch < ((size_t)64 << 20), "plan: scratch %zu", plan.bytes_scratch);
    st = swi_run(ctx, &p, &in, &pred, &o, 1);
    CHECK(st == SWI_OK, "run: %s", swi_last_error(ctx));
    CHECK(got == 64 * 64 * 64, "run: %lld voxels delivered, expected 64^3", (long long)got);
    /* and the whole volume's plan counts a table of the frontier's cells, not of all */
    for (int k = 0; k < 3; k++) p.part_lo[k] = p.part_hi[k] = 0;
    st = swi_plan_run(ctx, &p, &in, &o, 1, &plan);
    CHECK(st == SWI_OK, "plan: %s", swi_last_error(ctx));
    CHECK(st != SWI_OK || plan.bytes_scratch < ((size_t)1 << 30), "plan: scratch %zu for 8192^3",
          plan.bytes_scratch);
    swi_free(ctx);
}

int main(void) {
    alarm(300); /* a hang guard */
    test_random_runs();
    if (!SANITIZED) {
        struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
        if (setrlimit(RLIMIT_AS, &rl) != 0) perror("setrlimit (the huge part runs unbounded)");
    }
    test_huge_part();
    return check_report("test_cell_table");
}
