/*
 * test_adopt.c -- outputs handed to the engine (swi_batch_set_output).
 *
 * A predictor that allocates its own output for every call and hands it over must give
 * bitwise the results of one filling swi_batch_output's buffer, over random
 * configurations (pipelining, several heads, reuse on and off); every buffer handed over
 * must be released exactly once, after its batch was blended (never while the engine
 * may still read it: the buffer is poisoned on release), also when the run fails or is
 * cancelled midway.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

typedef struct pred_state {
    int adopt; /* hand buffers over instead of filling the engine's */
    int64_t C[2];
    int heads;
    int64_t handed, released, calls;
    int fail_at;                /* fail on this call, after handing head 0 over */
    int64_t unreleased_at_call; /* calls that began with a buffer not yet given back */
} pred_state;

static void release(void *user, const float *data) {
    pred_state *ps = user;
    ps->released++;
    /* poison: a read after release changes the results */
    size_t n = ((const size_t *)data)[-2];
    memset((void *)data, 0xFF, n);
    free((size_t *)data - 2);
}

static float *own_buffer(size_t bytes) {
    size_t *p = malloc(bytes + 2 * sizeof(size_t));
    if (!p) return NULL;
    p[0] = bytes;
    return (float *)(p + 2);
}

static int predict(void *user, swi_batch *b) {
    pred_state *ps = user;
    ps->calls++;
    /* every buffer handed over is given back before the next call (so a predictor may
     * reuse its buffers from call to call) */
    ps->unreleased_at_call += ps->handed != ps->released;
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    int64_t cin = swi_batch_channels(b);
    const float *in = swi_batch_input(b);
    for (int h = 0; h < ps->heads; h++) {
        int64_t C = ps->C[h];
        size_t bytes = (size_t)(n * C * vox) * sizeof(float);
        float *out = ps->adopt ? own_buffer(bytes) : swi_batch_output(b, h, C, roi);
        if (!out) return 1;
        for (int i = 0; i < n; i++) {
            const int64_t *st = swi_batch_start(b, i);
            for (int64_t c = 0; c < C; c++)
                for (int64_t v = 0; v < vox; v++) {
                    float s = 0;
                    for (int64_t ch = 0; ch < cin; ch++) s += in[(i * cin + ch) * vox + v];
                    out[(i * C + c) * vox + v] =
                        (float)(c + 1 + h) * s - 0.5f * (float)h + 0.001f * (float)st[0];
                }
        }
        if (ps->adopt) {
            ((size_t *)out)[-2] = bytes;
            if (swi_batch_set_output(b, h, C, roi, out, release, ps) != 0) {
                free((size_t *)out - 2);
                return 1;
            }
            ps->handed++;
        }
        if (ps->fail_at && ps->calls == ps->fail_at) return 1;
    }
    return 0;
}

static int cancel_at;
static int progress(void *user, int64_t done, int64_t total) {
    (void)total;
    (void)done;
    int *calls = user;
    return ++*calls == cancel_at;
}

int main(void) {
    check_rng_state = 0xC0FFEE123456789ull;
    int64_t handed = 0;
    for (int t = 0; t < 150; t++) {
        int dims = (int)rnd(1, 4);
        swi_params p;
        swi_params_init(&p, dims);
        int64_t size[SWI_MAX_DIMS], vox = 1;
        for (int k = 0; k < dims; k++) {
            size[k] = rnd(1, dims == 4 ? 8 : dims == 3 ? 14 : 40);
            p.roi[k] = rnd(1, 8);
            p.overlap[k] = (double)rnd(0, 3) / 4.0;
            vox *= size[k];
        }
        p.mode = rnd(0, 1) ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
        p.sw_batch_size = (int)rnd(1, 5);
        p.threads = (int)rnd(1, 3);
        p.pipeline = (swi_pipeline)rnd(0, 2);
        p.reuse = rnd(0, 1) ? SWI_REUSE_ON : SWI_REUSE_OFF;
        pred_state ps = {0, {rnd(1, 4), rnd(1, 3)}, (int)rnd(1, 2), 0, 0, 0, 0, 0};
        p.n_heads = ps.heads;
        for (int h = 0; h < ps.heads; h++) p.heads[h].channels = rnd(0, 1) ? ps.C[h] : 0;
        int64_t batch = rnd(1, 2);
        float *vol = malloc((size_t)(batch * vox) * sizeof(float));
        size_t bytes = (size_t)(batch * ps.C[0] * vox) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes);
        CHECK(vol && a && b, "malloc");
        if (!vol || !a || !b) return 1;
        /* a background and some values, so reuse has windows to reuse */
        for (int64_t i = 0; i < batch * vox; i++) vol[i] = rnd(0, 2) ? 1.0f : (float)rnd(-50, 50) / 10.0f;
        swi_tensor in = {.data = vol, .batch = batch, .channels = 1, .dims = dims};
        for (int k = 0; k < dims; k++) in.size[k] = size[k];
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_NONE);
        o.dst_bytes = bytes;
        swi_ctx *ctx = swi_create();
        CHECK(ctx != NULL, "swi_create");
        if (!ctx) return 1;
        swi_predictor pred = {predict, &ps};
        o.dst = a;
        swi_status s1 = swi_run(ctx, &p, &in, &pred, &o, 1);
        ps.adopt = 1;
        o.dst = b;
        swi_status s2 = swi_run(ctx, &p, &in, &pred, &o, 1);
        CHECK(s1 == SWI_OK && s2 == SWI_OK, "config %d: %s / %s: %s", t, swi_status_name(s1),
              swi_status_name(s2), swi_last_error(ctx));
        CHECK(memcmp(a, b, bytes) == 0, "config %d: results with handed-over outputs differ", t);
        CHECK(ps.handed == ps.released && ps.handed > 0, "config %d: %lld buffers handed over, %lld released",
              t, (long long)ps.handed, (long long)ps.released);
        CHECK(ps.unreleased_at_call == 0,
              "config %d: %lld calls began before an earlier buffer was given back", t,
              (long long)ps.unreleased_at_call);
        handed += ps.handed;
        /* a failure on a later call, after handing head 0 over */
        pred_state pf = ps;
        pf.handed = pf.released = pf.calls = 0;
        pf.fail_at = (int)rnd(1, 3);
        swi_predictor predf = {predict, &pf};
        swi_status s3 = swi_run(ctx, &p, &in, &predf, &o, 1);
        CHECK((s3 == SWI_ERR_PREDICTOR || pf.calls < pf.fail_at) && pf.handed == pf.released,
              "config %d: failing predictor: %s, %lld handed, %lld released", t, swi_status_name(s3),
              (long long)pf.handed, (long long)pf.released);
        /* cancelled by the progress callback */
        pred_state pc = ps;
        pc.handed = pc.released = pc.calls = 0;
        int calls = 0;
        cancel_at = 1;
        swi_params pp = p;
        pp.progress = progress;
        pp.progress_user = &calls;
        swi_predictor predc = {predict, &pc};
        swi_status s4 = swi_run(ctx, &pp, &in, &predc, &o, 1);
        CHECK((s4 == SWI_ERR_CANCELLED || s4 == SWI_OK) && pc.handed == pc.released,
              "config %d: cancelled run: %s, %lld handed, %lld released", t, swi_status_name(s4),
              (long long)pc.handed, (long long)pc.released);
        swi_free(ctx);
        free(vol);
        free(a);
        free(b);
    }
    printf("test_adopt: %lld buffers handed over and released\n", (long long)handed);
    return check_report("test_adopt");
}
