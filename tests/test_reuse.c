/*
 * test_reuse.c -- exact window reuse (SWI_REUSE_ON).
 *
 * A predictor that is a pure function of its window's input, on volumes with large
 * uniform regions: a run with reuse must give bitwise the results of the same run
 * without it, the predictor must see fewer windows (never two equal ones in one call),
 * the counts of swi_run_stats must add up, and swi_plan_run must predict the reused
 * windows exactly. Also: parameter checks, the cache dropped to fit a budget, and a
 * predictor failing after reuse began (the run stops cleanly).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

typedef struct pred_state {
    int64_t windows, calls;
    int dup_in_call; /* two bitwise-equal windows reached one call */
    int fail_at;     /* fail on this call (1-based), 0 never */
    int64_t C;
} pred_state;

/* out[c][v] = (c + 1) * x[v] + sum of the window / 1000 - c: depends on the window's
 * input only, and on every voxel of it (a whole-window term), so equal outputs mean
 * equal inputs. */
static int pure_predict(void *user, swi_batch *b) {
    pred_state *ps = user;
    ps->calls++;
    if (ps->fail_at && ps->calls == ps->fail_at) {
        swi_batch_set_error(b, "injected failure");
        return 1;
    }
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    int64_t cin = swi_batch_channels(b);
    float *out = swi_batch_output(b, 0, ps->C, roi);
    if (!out) return 1;
    const float *in = swi_batch_input(b);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (memcmp(in + (size_t)(i * cin * vox), in + (size_t)(j * cin * vox),
                       (size_t)(cin * vox) * sizeof(float)) == 0)
                ps->dup_in_call = 1;
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)(i * cin * vox);
        double sum = 0;
        for (int64_t v = 0; v < cin * vox; v++) sum += x[v];
        for (int64_t c = 0; c < ps->C; c++)
            for (int64_t v = 0; v < vox; v++) {
                float s = 0;
                for (int64_t ch = 0; ch < cin; ch++) s += x[ch * vox + v];
                out[(size_t)((i * ps->C + c) * vox + v)] =
                    (float)(c + 1) * s + (float)(sum / 1000.0) - (float)c;
            }
    }
    ps->windows += n;
    return 0;
}

typedef struct result {
    float *scores;
    uint8_t *labels;
    swi_stats stats;
    int64_t pred_windows;
    int dup_in_call;
    swi_status st;
} result;

static void run_one(const swi_params *p, const swi_tensor *in, int64_t C, size_t vox, result *res) {
    memset(res, 0, sizeof *res);
    res->scores = malloc((size_t)in->batch * (size_t)C * vox * sizeof(float));
    res->labels = malloc((size_t)in->batch * vox);
    swi_ctx *ctx = swi_create();
    if (!res->scores || !res->labels || !ctx) {
        res->st = SWI_ERR_NOMEM;
        swi_free(ctx);
        return;
    }
    swi_output o[2];
    swi_output_init(&o[0], 0, SWI_REDUCE_NONE);
    o[0].dst = res->scores;
    o[0].dst_bytes = (size_t)in->batch * (size_t)C * vox * sizeof(float);
    swi_output_init(&o[1], 0, SWI_REDUCE_ARGMAX);
    o[1].dst = res->labels;
    o[1].dst_bytes = (size_t)in->batch * vox;
    pred_state ps = {0, 0, 0, 0, C};
    swi_predictor pred = {pure_predict, &ps};
    res->st = swi_run(ctx, p, in, &pred, o, 2);
    if (res->st != SWI_OK) fprintf(stderr, "swi_run: %s\n", swi_last_error(ctx));
    swi_run_stats(ctx, &res->stats);
    res->pred_windows = ps.windows;
    res->dup_in_call = ps.dup_in_call;
    swi_free(ctx);
}

/* A volume that is mostly background: value `bg` everywhere, a random blob inside. */
static void fill_volume(float *v, int64_t batch, int64_t cin, const int64_t *size, int dims, float bg) {
    int64_t vox = 1;
    for (int k = 0; k < dims; k++) vox *= size[k];
    for (int64_t i = 0; i < batch * cin * vox; i++) v[i] = bg;
    /* the blob: a box in the middle third of every axis */
    for (int64_t b = 0; b < batch * cin; b++)
        for (int64_t i = 0; i < vox; i++) {
            int64_t r = i, inside = 1;
            for (int k = dims - 1; k >= 0; k--) {
                int64_t q = r % size[k];
                r /= size[k];
                inside &= q >= size[k] / 3 && q < 2 * size[k] / 3;
            }
            if (inside) v[b * vox + i] = (float)rnd(0, 1000) / 100.0f;
        }
}

static int64_t g_reused_total;

static void sweep(int configs) {
    for (int t = 0; t < configs; t++) {
        int dims = (int)rnd(1, 4);
        int64_t size[SWI_MAX_DIMS], vox = 1;
        swi_params p;
        swi_params_init(&p, dims);
        for (int k = 0; k < dims; k++) {
            size[k] = rnd(dims >= 3 ? 6 : 10, dims == 4 ? 10 : dims == 3 ? 24 : 60);
            p.roi[k] = rnd(2, size[k] > 8 ? 8 : size[k] + 2); /* some windows larger than the image */
            p.overlap[k] = (double)rnd(0, 3) / 4.0;
            vox *= size[k];
        }
        p.mode = rnd(0, 1) ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
        p.padding_mode = (swi_pad)rnd(0, 3);
        p.cval = (float)rnd(-2, 2);
        p.sw_batch_size = (int)rnd(1, 6);
        p.threads = (int)rnd(1, 3);
        p.pipeline = (swi_pipeline)rnd(0, 2);
        p.order_mode = SWI_ORDER_FIXED;
        for (int k = 0; k < dims; k++) p.order[k] = k;
        int64_t C = rnd(1, 4);
        p.heads[0].channels = rnd(0, 1) ? C : 0; /* declared, or learned from the first call */
        int64_t batch = rnd(1, 2), cin = rnd(1, 2);
        swi_tensor in = {.data = NULL, .batch = batch, .channels = cin, .dims = dims, .size = {0}};
        for (int k = 0; k < dims; k++) in.size[k] = size[k];
        float *vol = malloc((size_t)(batch * cin * vox) * sizeof(float));
        CHECK(vol != NULL, "malloc");
        if (!vol) return;
        fill_volume(vol, batch, cin, size, dims, (float)rnd(-3, 3));
        in.data = vol;
        int reflect_ok = 1;
        for (int k = 0; k < dims; k++) {
            int64_t r = p.roi[k] > size[k] ? p.roi[k] : size[k], pad = r - size[k];
            reflect_ok &= !(pad > 0 && pad - pad / 2 >= size[k]);
        }
        if (!reflect_ok && p.padding_mode == SWI_PAD_REFLECT) p.padding_mode = SWI_PAD_REPLICATE;

        result a, b;
        run_one(&p, &in, C, (size_t)vox, &a);
        swi_params q = p;
        q.reuse = SWI_REUSE_ON;
        q.reuse_cache = (int)rnd(0, 3);
        run_one(&q, &in, C, (size_t)vox, &b);
        /* what the plan predicts, for a declared head (a learned one may re-plan the batch) */
        int64_t predicted = -1;
        if (q.heads[0].channels > 0) {
            swi_ctx *ctx = swi_create();
            swi_plan plan;
            swi_output o;
            swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
            if (ctx && swi_plan_run(ctx, &q, &in, &o, 1, &plan) == SWI_OK) predicted = plan.windows_reused;
            swi_free(ctx);
        }
        CHECK(a.st == SWI_OK && b.st == SWI_OK, "config %d: runs failed (%s / %s)", t, swi_status_name(a.st),
              swi_status_name(b.st));
        if (a.st == SWI_OK && b.st == SWI_OK) {
            size_t n = (size_t)(batch * C * vox);
            CHECK(memcmp(a.scores, b.scores, n * sizeof(float)) == 0,
                  "config %d (dims %d, sw %d, cache %d): scores with reuse are not bitwise those without", t,
                  dims, p.sw_batch_size, q.reuse_cache);
            CHECK(memcmp(a.labels, b.labels, (size_t)(batch * vox)) == 0,
                  "config %d: labels differ with reuse", t);
            CHECK(a.stats.windows_reused == 0 && a.stats.windows_predicted == a.stats.windows_total,
                  "config %d: a run without reuse reused %lld windows", t, (long long)a.stats.windows_reused);
            CHECK(b.stats.windows_predicted + b.stats.windows_reused == b.stats.windows_total,
                  "config %d: %lld predicted + %lld reused != %lld windows", t,
                  (long long)b.stats.windows_predicted, (long long)b.stats.windows_reused,
                  (long long)b.stats.windows_total);
            CHECK(b.pred_windows == b.stats.windows_predicted,
                  "config %d: predictor saw %lld windows, stats say %lld", t, (long long)b.pred_windows,
                  (long long)b.stats.windows_predicted);
            CHECK(!b.dup_in_call, "config %d: two equal windows reached one predictor call", t);
            CHECK(a.stats.windows_total == b.stats.windows_total, "config %d: window totals differ", t);
            if (predicted >= 0)
                CHECK(predicted == b.stats.windows_reused,
                      "config %d: plan predicted %lld reused windows, the run %lld", t, (long long)predicted,
                      (long long)b.stats.windows_reused);
            g_reused_total += b.stats.windows_reused;
        }
        free(a.scores);
        free(a.labels);
        free(b.scores);
        free(b.labels);
        free(vol);
    }
}

/* A mostly-uniform 3-D volume with a large cache: background windows are reused. */
static void test_background(void) {
    enum { D = 40, H = 40, W = 40 };
    float *vol = malloc(sizeof(float) * D * H * W);
    CHECK(vol != NULL, "malloc");
    if (!vol) return;
    int64_t size[3] = {D, H, W};
    fill_volume(vol, 1, 1, size, 3, -1.0f);
    swi_params p;
    swi_params_init(&p, 3);
    p.roi[0] = p.roi[1] = p.roi[2] = 8;
    p.overlap[0] = p.overlap[1] = p.overlap[2] = 0.5;
    p.sw_batch_size = 4;
    p.heads[0].channels = 3;
    p.reuse = SWI_REUSE_ON;
    swi_tensor in = {.data = vol, .batch = 1, .channels = 1, .dims = 3, .size = {D, H, W}};
    result r;
    run_one(&p, &in, 3, D * H * W, &r);
    CHECK(r.st == SWI_OK, "background run: %s", swi_status_name(r.st));
    /* 9^3 = 729 windows; the blob's windows (middle third) are the only distinct ones */
    CHECK(r.stats.windows_total == 729, "729 windows, got %lld", (long long)r.stats.windows_total);
    CHECK(r.stats.windows_reused > 500, "background windows reused: only %lld of 729",
          (long long)r.stats.windows_reused);
    CHECK(r.stats.predictor_calls < 183, "fewer predictor calls than without reuse (183): %lld",
          (long long)r.stats.predictor_calls);
    printf("test_reuse: background volume: %lld of %lld windows reused, %lld predictor calls\n",
           (long long)r.stats.windows_reused, (long long)r.stats.windows_total,
           (long long)r.stats.predictor_calls);
    free(r.scores);
    free(r.labels);

    /* the predictor failing after reuse began: a clean error, nothing reported */
    swi_ctx *ctx = swi_create();
    pred_state ps = {0, 0, 0, 5, 3};
    swi_predictor pred = {pure_predict, &ps};
    swi_output o;
    swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
    swi_status st = ctx ? swi_run(ctx, &p, &in, &pred, &o, 1) : SWI_ERR_NOMEM;
    CHECK(st == SWI_ERR_PREDICTOR && strstr(swi_last_error(ctx), "injected"), "failing predictor: %s: %s",
          swi_status_name(st), ctx ? swi_last_error(ctx) : "");
    CHECK(swi_result(ctx, 0, NULL) == NULL, "no result after a failed run");
    swi_stats stats;
    CHECK(swi_run_stats(ctx, &stats) == SWI_OK && stats.predictor_calls == 5,
          "stats of the failed run count its 5 calls (got %lld)", (long long)stats.predictor_calls);
    swi_free(ctx);
    free(vol);
}

static void test_params(void) {
    float vol[64] = {0};
    swi_params p;
    swi_params_init(&p, 1);
    p.roi[0] = 8;
    p.heads[0].channels = 2;
    swi_tensor in = {.data = vol, .batch = 1, .channels = 1, .dims = 1, .size = {64}};
    swi_output o;
    swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return;
    swi_plan plan;
    p.pipeline = SWI_PIPELINE_OFF;
    p.reuse = (swi_reuse)7;
    CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "reuse"),
          "reuse 7: %s", swi_last_error(ctx));
    p.reuse = SWI_REUSE_ON;
    p.reuse_cache = 65;
    CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "reuse_cache"),
          "reuse_cache 65: %s", swi_last_error(ctx));
    p.reuse_cache = 4;
    CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_OK, "plan with reuse: %s", swi_last_error(ctx));
    CHECK(plan.reuse_cache == 4 && plan.bytes_reuse > 4 * (8 + 2 * 8) * sizeof(float),
          "4 entries planned: %d, %zu B", plan.reuse_cache, plan.bytes_reuse);
    CHECK(plan.bytes_peak == plan.bytes_input + plan.bytes_windows + plan.bytes_partial + plan.bytes_outputs +
                                 plan.bytes_scratch + plan.bytes_reuse,
          "bytes_peak is the sum of its parts with the reuse cache");
    /* all zeros, one window a call: the first call's window is run and kept (the cache
     * has free slots); every later one is reused */
    CHECK(plan.windows_reused == plan.windows_total - 1, "uniform input: %lld of %lld windows reused",
          (long long)plan.windows_reused, (long long)plan.windows_total);
    /* a budget just below the plan drops the cache before anything else */
    size_t full = plan.bytes_peak;
    p.max_memory = full - 1;
    CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_OK && plan.reuse_cache == 0 &&
              plan.bytes_reuse == 0 && plan.sw_batch_size == 1,
          "budget below the cache: cache %d, %zu B, sw %d", plan.reuse_cache, plan.bytes_reuse,
          plan.sw_batch_size);
    swi_free(ctx);
}

int main(void) {
    check_rng_state = 88172645463325252ull;
    test_params();
    test_background();
    sweep(150);
    printf("test_reuse: sweep reused %lld windows in all\n", (long long)g_reused_total);
    CHECK(g_reused_total > 0, "the sweep must reuse something");
    return check_report("test_reuse");
}
