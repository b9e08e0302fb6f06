/*
 * test_parts.c -- parts of a run (swi_params.part_lo / part_hi): boxes.
 *
 * Random configurations run whole, then cut into a grid of boxes (random cuts along every
 * dim, some dims left whole), each box run on its own: every box's voxels must be bitwise
 * the whole run's (scores, labels, softmax), nothing outside a box may be written, regions
 * must lie inside it, the windows run must be exactly those touching it (the product of
 * the per-dim counts, so the boxes together repeat only the windows on their boundaries),
 * and the planned frontier must be the box's own. Then: a box across the cross-section of
 * the outermost loop axis plans a smaller frontier than the whole run, and bad boxes are
 * refused.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"
#include "test_predictor.h"

int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured);

typedef struct region_check {
    int dims;
    int64_t lo[SWI_MAX_DIMS], hi[SWI_MAX_DIMS]; /* the box */
    int64_t bad, calls;
} region_check;

/* region callbacks may run on several workers at once (swi.h): count atomically */
static int on_region(void *user, const swi_region *r) {
    region_check *rc = user;
    __atomic_add_fetch(&rc->calls, 1, __ATOMIC_RELAXED);
    for (int k = 0; k < rc->dims; k++)
        if (r->lo[k] < rc->lo[k] || r->hi[k] > rc->hi[k]) __atomic_add_fetch(&rc->bad, 1, __ATOMIC_RELAXED);
    return 0;
}

enum { NOUT = 4, MAXCUT = 4 };

/* A head zoomed 2x along dim 0 of a 2-D run: out = (c + 1) * (start_0 + 3 start_1) + v / 64 */
static int predict_zoom(void *user, swi_batch *b) {
    (void)user;
    const int64_t *roi = swi_batch_roi(b);
    const int64_t sp[2] = {2 * roi[0], roi[1]}, ov = sp[0] * sp[1];
    float *out = swi_batch_output(b, 0, 2, sp);
    if (!out) return 1;
    for (int i = 0; i < swi_batch_count(b); i++) {
        const int64_t *st = swi_batch_start(b, i);
        for (int64_t c = 0; c < 2; c++)
            for (int64_t v = 0; v < ov; v++)
                out[(i * 2 + c) * ov + v] = (float)(c + 1) * (float)(st[0] + 3 * st[1]) + (float)v / 64.0f;
    }
    return 0;
}

/* Windows along one dim whose input rows meet [lo, hi), counted from the public layout. */
static int64_t touching(int64_t size, int64_t roi, double overlap, int64_t lo, int64_t hi) {
    int64_t starts[64], n = 0, before = 0, r = roi > 0 ? roi : size, k = 0;
    swi_window_starts(NULL, size, r, overlap, starts, 64, &n);
    swi_pad_map(NULL, SWI_PAD_CONSTANT, size, r, NULL, 0, NULL, &before);
    for (int64_t w = 0; w < n && w < 64; w++) {
        int64_t a = starts[w] - before, b = a + r;
        if (a < 0) a = 0;
        if (b > size) b = size;
        k += a < hi && b > lo;
    }
    return k;
}

/* Fixed grids first (2x3 in 2-D, 2x2x2 and 3x1x2 in 3-D, 2x1x2x2 in 4-D), then random. */
static const int fixed_grid[][SWI_MAX_DIMS + 1] = {{2, 2, 3},       {3, 2, 2, 2}, {3, 3, 1, 2},
                                                   {4, 2, 1, 2, 2}, {3, 1, 3, 1}, {2, 1, 2}};
enum { N_FIXED = (int)(sizeof fixed_grid / sizeof fixed_grid[0]) };

int main(void) {
    check_rng_state = 0x9E3779B97F4A7C15ull;
    int64_t whole_windows = 0, part_windows = 0, boxes = 0;
    for (int t = 0; t < 120; t++) {
        const int fixed = t < N_FIXED;
        int dims = fixed ? fixed_grid[t][0] : (int)rnd(1, 4);
        int grid[SWI_MAX_DIMS];
        swi_params p;
        swi_params_init(&p, dims);
        int64_t size[SWI_MAX_DIMS], vox = 1;
        int n_boxes = 1;
        for (int k = 0; k < dims; k++) {
            grid[k] = fixed ? fixed_grid[t][k + 1] : (int)rnd(1, dims >= 3 ? 2 : 3);
            int64_t lo = grid[k] > 2 ? grid[k] : 2;
            size[k] = rnd(k == 0 ? lo : grid[k], dims == 4 ? 9 : dims == 3 ? 16 : 40);
            p.roi[k] = rnd(1, 9);
            p.overlap[k] = (double)rnd(0, 3) / 4.0;
            vox *= size[k];
            n_boxes *= grid[k];
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

        /* random cuts of each dim into grid[k] pieces */
        int64_t cuts[SWI_MAX_DIMS][MAXCUT + 1];
        for (int k = 0; k < dims; k++) {
            cuts[k][0] = 0;
            cuts[k][grid[k]] = size[k];
            for (int i = 1; i < grid[k]; i++)
                cuts[k][i] = cuts[k][i - 1] + rnd(1, size[k] - cuts[k][i - 1] - (grid[k] - i));
        }
        int64_t whole_spec = rnd(0, 1); /* a dim left whole: as 0, 0 or as 0, size */
        for (int q = 0; q < n_boxes && st == SWI_OK; q++) {
            swi_params pp = p;
            region_check rc = {dims, {0}, {0}, 0, 0};
            int64_t expect = batch;
            for (int k = dims - 1, rest = q; k >= 0; k--) { /* box q in row-major order */
                int i = rest % grid[k];
                rest /= grid[k];
                rc.lo[k] = cuts[k][i];
                rc.hi[k] = cuts[k][i + 1];
                if (grid[k] > 1 || whole_spec) {
                    pp.part_lo[k] = rc.lo[k];
                    pp.part_hi[k] = rc.hi[k];
                }
                expect *= touching(size[k], p.roi[k], p.overlap[k], rc.lo[k], rc.hi[k]);
            }
            boxes++;
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
            CHECK(s2 == SWI_OK, "config %d box %d: %s", t, q, swi_last_error(ctx));
            if (s2 != SWI_OK) continue;
            swi_stats pst;
            swi_run_stats(ctx, &pst);
            part_windows += pst.windows_total;
            size_t planned, measured;
            if (swi__frontier_stats(ctx, &planned, &measured))
                CHECK(planned == measured, "config %d box %d: frontier planned %zu, reached %zu", t, q,
                      planned, measured);
            CHECK(rc.bad == 0 && rc.calls > 0, "config %d box %d: %lld of %lld regions outside the box", t, q,
                  (long long)rc.bad, (long long)rc.calls);
            /* voxel by voxel: inside the box the whole run's bytes, outside the pattern */
            for (int i = 0; i < NOUT; i++) {
                const size_t es = i == 1 ? 1 : 4;
                const int64_t planes = (int64_t)(bytes[i] / ((size_t)vox * es)); /* batch x channels */
                int64_t inside_bad = 0, outside_bad = 0;
                for (int64_t v = 0; v < vox; v++) {
                    int in_box = 1;
                    int64_t rest = v;
                    for (int k = dims - 1; k >= 0; k--) {
                        int64_t x = rest % size[k];
                        rest /= size[k];
                        in_box &= x >= rc.lo[k] && x < rc.hi[k];
                    }
                    for (int64_t pl = 0; pl < planes; pl++) {
                        const size_t at = (size_t)(pl * vox + v) * es;
                        if (in_box)
                            inside_bad += memcmp(part[i] + at, whole[i] + at, es) != 0;
                        else
                            for (size_t z = 0; z < es; z++) outside_bad += part[i][at + z] != 0xA5;
                    }
                }
                CHECK(inside_bad == 0, "config %d box %d output %d: %lld values differ from the whole run", t,
                      q, i, (long long)inside_bad);
                CHECK(outside_bad == 0, "config %d box %d output %d: %lld bytes written outside the box", t,
                      q, i, (long long)outside_bad);
            }
            /* exactly the windows meeting the box run: the product of the per-dim counts */
            CHECK(pst.windows_total == expect, "config %d box %d: %lld windows ran, %lld touch the box", t, q,
                  (long long)pst.windows_total, (long long)expect);
            /* the plan agrees on the windows that run */
            swi_plan plan;
            CHECK(swi_plan_run(ctx, &pp, &in, o, NOUT, &plan) == SWI_OK &&
                      plan.windows_total == pst.windows_total,
                  "config %d box %d: plan %lld windows, run %lld", t, q, (long long)plan.windows_total,
                  (long long)pst.windows_total);
        }
        swi_free(ctx);
        for (int i = 0; i < NOUT; i++) {
            free(whole[i]);
            free(part[i]);
        }
        free(vol);
    }
    /* A box across the cross-section of the outermost loop axis holds a smaller frontier
     * than the whole run; a cut along that axis alone does not bound it so. */
    {
        swi_params p;
        swi_params_init(&p, 3);
        for (int k = 0; k < 3; k++) {
            p.roi[k] = 16;
            p.overlap[k] = 0.5;
        }
        p.mode = SWI_BLEND_GAUSSIAN;
        p.heads[0].channels = 100; /* partial sums well above the allocator's fixed allowance */
        swi_tensor in = {.data = NULL, .batch = 1, .channels = 1, .dims = 3, .size = {96, 80, 64}};
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
        swi_ctx *ctx = swi_create();
        swi_plan whole, box, slab;
        CHECK(ctx && swi_plan_run(ctx, &p, &in, &o, 1, &whole) == SWI_OK, "whole plan: %s",
              ctx ? swi_last_error(ctx) : "no context");
        const int outer = whole.order[0];
        swi_params pb = p, ps = p;
        for (int k = 0; k < 3; k++)
            if (k != outer) { /* the half of each cross-section axis */
                pb.part_lo[k] = 0;
                pb.part_hi[k] = in.size[k] / 2;
            }
        ps.part_lo[outer] = 0;
        ps.part_hi[outer] = in.size[outer] / 2;
        CHECK(swi_plan_run(ctx, &pb, &in, &o, 1, &box) == SWI_OK, "box plan: %s", swi_last_error(ctx));
        CHECK(swi_plan_run(ctx, &ps, &in, &o, 1, &slab) == SWI_OK, "slab plan: %s", swi_last_error(ctx));
        CHECK(box.order[0] == outer, "a box keeps the whole run's order: %d, whole %d", box.order[0], outer);
        CHECK((double)box.bytes_partial < 0.6 * (double)whole.bytes_partial,
              "box across the cross-section: %zu bytes of partial sums, the whole run %zu", box.bytes_partial,
              whole.bytes_partial);
        CHECK(box.bytes_partial < slab.bytes_partial,
              "box %zu bytes of partial sums, a cut along the outermost axis %zu", box.bytes_partial,
              slab.bytes_partial);
        CHECK(box.windows_total < whole.windows_total, "box %lld windows, whole %lld",
              (long long)box.windows_total, (long long)whole.windows_total);
        swi_free(ctx);
    }
    /* A head zoomed along a dim the boxes leave whole: boxes cut along the other dim are
     * bitwise the whole run inside them. */
    {
        float v[12 * 20] = {0};
        swi_params p;
        swi_params_init(&p, 2);
        p.roi[0] = 4;
        p.roi[1] = 6;
        p.mode = SWI_BLEND_GAUSSIAN;
        p.heads[0].channels = 2;
        p.heads[0].spatial[0] = 8;
        p.heads[0].spatial[1] = 6;
        swi_tensor in = {.data = v, .batch = 1, .channels = 1, .dims = 2, .size = {12, 20}};
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_NONE);
        swi_predictor pred = {predict_zoom, NULL};
        swi_ctx *ctx = swi_create();
        int64_t osz[SWI_MAX_DIMS] = {0};
        size_t nb = 0;
        CHECK(ctx && swi_run(ctx, &p, &in, &pred, &o, 1) == SWI_OK, "zoomed whole run: %s",
              ctx ? swi_last_error(ctx) : "no context");
        const float *r = ctx ? swi_result(ctx, 0, &nb) : NULL;
        float *whole = r ? malloc(nb) : NULL;
        CHECK(whole && swi_result_size(ctx, 0, osz) == 2 && osz[0] == 24 && osz[1] == 20,
              "zoomed grid %lldx%lld", (long long)osz[0], (long long)osz[1]);
        if (whole) {
            memcpy(whole, r, nb);
            const int64_t cuts[] = {0, 7, 13, 20};
            for (int q = 0; q < 3; q++) {
                swi_params pp = p;
                pp.part_lo[1] = cuts[q];
                pp.part_hi[1] = cuts[q + 1];
                CHECK(swi_run(ctx, &pp, &in, &pred, &o, 1) == SWI_OK, "zoomed box %d: %s", q,
                      swi_last_error(ctx));
                const float *pr = swi_result(ctx, 0, NULL);
                int64_t bad = 0;
                for (int64_t c = 0; pr && c < 2; c++)
                    for (int64_t i = 0; i < osz[0]; i++)
                        for (int64_t j = cuts[q]; j < cuts[q + 1]; j++) {
                            const int64_t at = (c * osz[0] + i) * osz[1] + j;
                            bad += memcmp(&pr[at], &whole[at], sizeof(float)) != 0;
                        }
                CHECK(pr && bad == 0, "zoomed box %d: %lld values differ from the whole run", q,
                      (long long)bad);
            }
        }
        free(whole);
        swi_free(ctx);
    }
    /* bad boxes, along either dim */
    {
        float v[70] = {0};
        swi_params p;
        swi_params_init(&p, 2);
        p.roi[0] = p.roi[1] = 4;
        p.heads[0].channels = 2;
        swi_tensor in = {.data = v, .batch = 1, .channels = 1, .dims = 2, .size = {10, 7}};
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
        swi_ctx *ctx = swi_create();
        swi_plan plan;
        for (int k = 0; k < 2; k++) {
            const int64_t bad[][2] = {{3, 3}, {5, 2}, {-1, 4}, {0, in.size[k] + 1}, {0, -1}};
            char name[32];
            snprintf(name, sizeof name, "part_lo[%d]", k);
            for (int i = 0; i < 5; i++) {
                swi_params pb = p;
                pb.part_lo[k] = bad[i][0];
                pb.part_hi[k] = bad[i][1];
                CHECK(swi_plan_run(ctx, &pb, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
                          strstr(swi_last_error(ctx), name),
                      "dim %d: part [%lld, %lld) must be refused naming %s: %s", k, (long long)bad[i][0],
                      (long long)bad[i][1], name, swi_last_error(ctx));
            }
        }
        swi_params pz = p;
        pz.part_lo[1] = 0;
        pz.part_hi[1] = 5;
        pz.heads[0].spatial[0] = 4;
        pz.heads[0].spatial[1] = 8; /* zoomed along the cut dim */
        CHECK(swi_plan_run(ctx, &pz, &in, &o, 1, &plan) == SWI_ERR_INVALID_ARG &&
                  strstr(swi_last_error(ctx), "zoom") && strstr(swi_last_error(ctx), "dim 1"),
              "a head zoomed along a cut dim must be refused: %s", swi_last_error(ctx));
        pz.heads[0].spatial[0] = 8; /* zoomed along the whole dim only */
        pz.heads[0].spatial[1] = 4;
        CHECK(swi_plan_run(ctx, &pz, &in, &o, 1, &plan) == SWI_OK,
              "a head zoomed along a dim the box does not cut is fine: %s", swi_last_error(ctx));
        pz.part_lo[1] = 0; /* the whole dim given explicitly cuts nothing */
        pz.part_hi[1] = 7;
        pz.heads[0].spatial[0] = 4;
        pz.heads[0].spatial[1] = 8;
        CHECK(swi_plan_run(ctx, &pz, &in, &o, 1, &plan) == SWI_OK,
              "a box that is the whole dim does not cut it: %s", swi_last_error(ctx));
        swi_free(ctx);
    }
    printf("test_parts: %lld windows whole, %lld in %lld boxes (%.1f %% run twice on box boundaries)\n",
           (long long)whole_windows, (long long)part_windows, (long long)boxes,
           100.0 * (double)(part_windows - whole_windows) / (double)whole_windows);
    return check_report("test_parts");
}
