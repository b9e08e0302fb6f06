/*
 * test_parts.c -- parts of a run (swi_params.part_lo / part_hi).
 *
 * Random configurations run whole, then cut along the first spatial dim into random
 * parts, each run on its own: every part's rows must be bitwise the whole run's (scores,
 * labels, softmax), nothing outside a part may be written, regions must lie inside it,
 * the windows run must be exactly those touching it (so the parts together repeat only
 * the windows on their boundaries), and the planned frontier must be the part's own.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured);

typedef struct pred_state {
    int64_t C[2];
    int heads;
} pred_state;

/* position-dependent, several heads: out[c] = (c + 1) * x + 0.01 * (start_0 + c) */
static int predict(void *user, swi_batch *b) {
    const pred_state *ps = user;
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    int64_t cin = swi_batch_channels(b);
    const float *in = swi_batch_input(b);
    for (int h = 0; h < ps->heads; h++) {
        int64_t C = ps->C[h];
        float *out = swi_batch_output(b, h, C, roi);
        if (!out) return 1;
        for (int i = 0; i < n; i++) {
            const int64_t *st = swi_batch_start(b, i);
            for (int64_t c = 0; c < C; c++)
                for (int64_t v = 0; v < vox; v++) {
                    float s = 0;
                    for (int64_t ch = 0; ch < cin; ch++) s += in[(i * cin + ch) * vox + v];
                    out[(i * C + c) * vox + v] =
                        (float)(c + 1 + h) * s + 0.01f * (float)(st[0] + c) - (float)h;
                }
        }
    }
    return 0;
}

typedef struct region_check {
    int64_t lo, hi; /* the part */
    int64_t bad, calls;
} region_check;

static int on_region(void *user, const swi_region *r) {
    region_check *rc = user;
    rc->calls++;
    if (r->lo[0] < rc->lo || r->hi[0] > rc->hi) rc->bad++;
    return 0;
}

enum { NOUT = 4 };

int main(void) {
    check_rng_state = 0x9E3779B97F4A7C15ull;
    int64_t whole_windows = 0, part_windows = 0;
    for (int t = 0; t < 120; t++) {
        int dims = (int)rnd(1, 4);
        swi_params p;
        swi_params_init(&p, dims);
        int64_t size[SWI_MAX_DIMS], vox = 1;
        for (int k = 0; k < dims; k++) {
            size[k] = rnd(k == 0 ? 2 : 1, dims == 4 ? 9 : dims == 3 ? 16 : 40);
            p.roi[k] = rnd(1, 9);
            p.overlap[k] = (double)rnd(0, 3) / 4.0;
            vox *= size[k];
        }
        p.padding_mode = (swi_pad)rnd(0, 3);
        if (p.padding_mode == SWI_PAD_REFLECT)
            for (int k = 0; k < dims; k++) {
                int64_t pad = p.roi[k] > size[k] ? p.roi[k] - size[k] : 0;
                if (pad - pad / 2 >= size[k]) p.padding_mode = SWI_PAD_CONSTANT;
            }
        p.mode = rnd(0, 1) ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
        p.sw_batch_size = (int)rnd(1, 5);
        p.threads = (int)rnd(1, 3);
        p.pipeline = (swi_pipeline)rnd(0, 2);
        if (rnd(0, 1)) {
            p.order_mode = SWI_ORDER_FIXED;
            for (int k = 0; k < dims; k++) p.order[k] = k;
        }
        pred_state ps = {{rnd(1, 4), rnd(1, 3)}, (int)rnd(1, 2)};
        p.n_heads = ps.heads;
        for (int h = 0; h < ps.heads; h++) p.heads[h].channels = ps.C[h];
        int64_t batch = rnd(1, 2), cin = rnd(1, 2);
        float *vol = malloc((size_t)(batch * cin * vox) * sizeof(float));
        CHECK(vol != NULL, "malloc");
        if (!vol) return 1;
        for (int64_t i = 0; i < batch * cin * vox; i++) vol[i] = (float)rnd(-400, 400) / 40.0f;
        swi_tensor in = {.data = vol, .batch = batch, .channels = cin, .dims = dims};
        for (int k = 0; k < dims; k++) in.size[k] = size[k];

        /* outputs: head 0 scores, labels, softmax; the last head's scores */
        size_t bytes[NOUT] = {(size_t)(batch * ps.C[0] * vox) * 4, (size_t)(batch * vox),
                              (size_t)(batch * ps.C[0] * vox) * 4,
                              (size_t)(batch * ps.C[ps.heads - 1] * vox) * 4};
        unsigned char *whole[NOUT], *part[NOUT];
        for (int i = 0; i < NOUT; i++) {
            whole[i] = malloc(bytes[i]);
            part[i] = malloc(bytes[i]);
            CHECK(whole[i] && part[i], "malloc");
            if (!whole[i] || !part[i]) return 1;
        }
        swi_output o[NOUT];
        swi_output_init(&o[0], 0, SWI_REDUCE_NONE);
        swi_output_init(&o[1], 0, SWI_REDUCE_ARGMAX);
        swi_output_init(&o[2], 0, SWI_REDUCE_SOFTMAX);
        swi_output_init(&o[3], ps.heads - 1, SWI_REDUCE_NONE);
        for (int i = 0; i < NOUT; i++) {
            o[i].dst = whole[i];
            o[i].dst_bytes = bytes[i];
        }
        swi_predictor pred = {predict, &ps};
        swi_ctx *ctx = swi_create();
        CHECK(ctx != NULL, "swi_create");
        if (!ctx) return 1;
        swi_status st = swi_run(ctx, &p, &in, &pred, o, NOUT);
        CHECK(st == SWI_OK, "config %d: whole run: %s", t, swi_last_error(ctx));
        swi_stats ws;
        swi_run_stats(ctx, &ws);
        whole_windows += ws.windows_total;

        /* random cuts of the first dim into 1..4 parts */
        int64_t cuts[6];
        int n_parts = (int)rnd(1, size[0] < 4 ? size[0] : 4);
        cuts[0] = 0;
        cuts[n_parts] = size[0];
        for (int i = 1; i < n_parts; i++)
            cuts[i] = cuts[i - 1] + rnd(1, size[0] - cuts[i - 1] - (n_parts - i));
        int64_t row = vox / size[0]; /* voxels per row of the first dim */
        for (int q = 0; q < n_parts && st == SWI_OK; q++) {
            swi_params pp = p;
            pp.part_lo = cuts[q];
            pp.part_hi = cuts[q + 1];
            region_check rc = {cuts[q], cuts[q + 1], 0, 0};
            swi_output po[NOUT + 1];
            for (int i = 0; i < NOUT; i++) {
                memset(part[i], 0xA5, bytes[i]); /* a pattern no result has */
                po[i] = o[i];
                po[i].dst = part[i];
            }
            swi_output_init(&po[NOUT], 0, SWI_REDUCE_ARGMAX);
            po[NOUT].on_region = on_region;
            po[NOUT].user = &rc;
            swi_status s2 = swi_run(ctx, &pp, &in, &pred, po, NOUT + 1);
            CHECK(s2 == SWI_OK, "config %d part %d [%lld, %lld): %s", t, q, (long long)cuts[q],
                  (long long)cuts[q + 1], swi_last_error(ctx));
            if (s2 != SWI_OK) continue;
            swi_stats pst;
            swi_run_stats(ctx, &pst);
            part_windows += pst.windows_total;
            size_t planned, measured;
            if (swi__frontier_stats(ctx, &planned, &measured))
                CHECK(planned == measured, "config %d part %d: frontier planned %zu, reached %zu", t, q,
                      planned, measured);
            CHECK(rc.bad == 0 && rc.calls > 0, "config %d part %d: %lld of %lld regions outside the part", t,
                  q, (long long)rc.bad, (long long)rc.calls);
            for (int i = 0; i < NOUT; i++) {
                int64_t planes =
                    (int64_t)(bytes[i] / (size_t)(batch * vox)); /* bytes per voxel, all planes */
                size_t es = i == 1 ? 1 : 4;
                int64_t per_plane = planes / (int64_t)es;
                int64_t inside_bad = 0, outside_bad = 0;
                for (int64_t pl = 0; pl < batch * per_plane; pl++)
                    for (int64_t r0 = 0; r0 < size[0]; r0++) {
                        size_t at = (size_t)((pl * size[0] + r0) * row) * es, n = (size_t)row * es;
                        if (r0 >= cuts[q] && r0 < cuts[q + 1]) {
                            inside_bad += memcmp(part[i] + at, whole[i] + at, n) != 0;
                        } else {
                            for (size_t z = 0; z < n; z++) outside_bad += part[i][at + z] != 0xA5;
                        }
                    }
                CHECK(inside_bad == 0, "config %d part %d output %d: %lld rows differ from the whole run", t,
                      q, i, (long long)inside_bad);
                CHECK(outside_bad == 0, "config %d part %d output %d: %lld bytes written outside the part", t,
                      q, i, (long long)outside_bad);
            }
            /* exactly the windows whose rows meet the part run (counted here independently) */
            {
                int64_t expect = batch, starts[64], n = 0, before = 0;
                for (int k = 1; k < dims; k++) {
                    int64_t r = p.roi[k] > 0 ? p.roi[k] : size[k];
                    swi_window_starts(NULL, size[k], r, p.overlap[k], NULL, 0, &n);
                    expect *= n;
                }
                int64_t r0w = p.roi[0] > 0 ? p.roi[0] : size[0], touching = 0;
                swi_window_starts(NULL, size[0], r0w, p.overlap[0], starts, 64, &n);
                swi_pad_map(NULL, SWI_PAD_CONSTANT, size[0], r0w, NULL, 0, NULL, &before);
                for (int64_t w = 0; w < n && w < 64; w++) {
                    int64_t lo = starts[w] - before, hi = lo + r0w;
                    if (lo < 0) lo = 0;
                    if (hi > size[0]) hi = size[0];
                    touching += lo < cuts[q + 1] && hi > cuts[q];
                }
                CHECK(pst.windows_total == expect * touching,
                      "config %d part %d: %lld windows ran, %lld touch the part", t, q,
                      (long long)pst.windows_total, (long long)(expect * touching));
            }
            /* the plan agrees on the windows that run */
            swi_plan plan;
            CHECK(swi_plan_run(ctx, &pp, &in, o, NOUT, &plan) == SWI_OK &&
                      plan.windows_total == pst.windows_total,
                  "config %d part %d: plan %lld windows, run %lld", t, q, (long long)plan.windows_total,
                  (long long)pst.windows_total);
        }
        swi_free(ctx);
        for (int i = 0; i < NOUT; i++) {
            free(whole[i]);
            free(part[i]);
        }
        free(vol);
    }
    /* bad parts */
    {
        float v[10] = {0};
        swi_params p;
        swi_params_init(&p, 1);
        p.roi[0] = 4;
        p.heads[0].channels = 2;
        swi_tensor in = {.data = v, .batch = 1, .channels = 1, .dims = 1, .size = {10}};
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
        swi_ctx *ctx = swi_create();
        swi_plan plan;
        const int64_t bad[][2] = {{3, 3}, {5, 2}, {-1, 4}, {0, 11}};
        for (int i = 0; i < 4; i++) {
            p.part_lo = bad[i][0];
            p.part_hi = bad[i][1];
            CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
                      strstr(swi_last_error(ctx), "part"),
                  "part [%lld, %lld) must be refused: %s", (long long)bad[i][0], (long long)bad[i][1],
                  swi_last_error(ctx));
        }
        p.part_lo = 0;
        p.part_hi = 5;
        p.heads[0].spatial[0] = 2; /* zoomed */
        CHECK(swi_plan_run(ctx, &p, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
                  strstr(swi_last_error(ctx), "zoom"),
              "a zoomed head with a part must be refused: %s", swi_last_error(ctx));
        swi_free(ctx);
    }
    printf("test_parts: %lld windows whole, %lld in parts (%.1f %% run twice on part boundaries)\n",
           (long long)whole_windows, (long long)part_windows,
           100.0 * (double)(part_windows - whole_windows) / (double)whole_windows);
    return check_report("test_parts");
}
