/*
 * test_combine.c -- predictors made of predictors: swi_batch_predict and the combinators
 * swi_predictor_mean and swi_predictor_mirror, through swi_run.
 *
 * The mean of synthetic members equals bitwise a predictor that computes the members and
 * their mean by hand in the documented order (members adopting their outputs or not,
 * pipelining, reuse, 1 to 4 dims); the mirror of a flip-equivariant predictor equals the
 * predictor (integer data: every sum exact); the mirror of a position-dependent one equals
 * bitwise the hand-made mean over mirrored runs (an independent mirroring by coordinates),
 * a zoomed head too; a mean of mirrors nests. A member's failure reaches swi_last_error
 * with its message, wrong shapes and oversized batches are refused, a NaN mean too, and a
 * child batch's failure leaves the run's state alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

/* ---- synthetic predictors: pure functions of a batch's windows ---- */

enum { K_POS, K_POINT, K_CROSS };

typedef struct synth {
    int kind;   /* K_POS position-dependent, K_POINT voxelwise, K_CROSS a symmetric stencil */
    float bias; /* tells members apart */
    int64_t C;  /* channels */
    int zoom;   /* output window = zoom * roi (K_POS only) */
    int adopt;  /* hand the output over (swi_batch_set_output) */
    int fail;   /* return this (non-zero) */
    int bad_shape;
    int nan;         /* give NaN everywhere */
    const char *msg; /* swi_batch_set_error's, with fail */
    int heads;       /* fill this many heads (others: bias + 100) */
    int64_t calls;
    int64_t released;
} synth;

static int64_t win_vox(int d, const int64_t *s) {
    int64_t v = 1;
    for (int k = 0; k < d; k++) v *= s[k];
    return v;
}

/* Coordinates of linear index v in a window of d sizes s, and back. */
static void decode(int64_t v, int d, const int64_t *s, int64_t *c) {
    for (int k = d - 1; k >= 0; k--) {
        c[k] = v % s[k];
        v /= s[k];
    }
}
static int64_t encode(int d, const int64_t *s, const int64_t *c) {
    int64_t v = 0;
    for (int k = 0; k < d; k++) v = v * s[k] + c[k];
    return v;
}

/* The synthetic network on n windows `in` [n, cin, *roi] of batch b: out [n, C, *spatial]. */
static void synth_eval(const synth *s, swi_batch *b, const float *in, float *out) {
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t cin = swi_batch_channels(b), *roi = swi_batch_roi(b);
    const int64_t vox = win_vox(d, roi);
    int64_t sp[SWI_MAX_DIMS];
    for (int k = 0; k < d; k++) sp[k] = roi[k] * s->zoom;
    const int64_t ovox = win_vox(d, sp);
    for (int i = 0; i < n; i++) {
        const int64_t *st = swi_batch_start(b, i);
        const float *x = in + (size_t)(i * cin * vox);
        for (int64_t c = 0; c < s->C; c++)
            for (int64_t u = 0; u < ovox; u++) {
                int64_t cu[SWI_MAX_DIMS], cv[SWI_MAX_DIMS];
                decode(u, d, sp, cu);
                for (int k = 0; k < d; k++) cv[k] = cu[k] / s->zoom;
                const int64_t v = encode(d, roi, cv);
                float sum = 0, y;
                for (int64_t ch = 0; ch < cin; ch++) sum += x[ch * vox + v];
                if (s->kind == K_POS) {
                    y = (float)(c + 1) * sum + s->bias + 0.01f * (float)(u % 7) + 0.001f * (float)st[0];
                } else if (s->kind == K_POINT) {
                    y = (float)(c + 1) * sum - (float)c + s->bias;
                } else { /* the voxel and its neighbours along each axis (zero outside) */
                    y = sum;
                    for (int k = 0; k < d; k++)
                        for (int dir = -1; dir <= 1; dir += 2) {
                            int64_t cw[SWI_MAX_DIMS];
                            memcpy(cw, cv, sizeof cw);
                            cw[k] += dir;
                            if (cw[k] < 0 || cw[k] >= roi[k]) continue;
                            const int64_t w = encode(d, roi, cw);
                            for (int64_t ch = 0; ch < cin; ch++) y += x[ch * vox + w];
                        }
                    y = (float)(c + 1) * y + s->bias;
                }
                out[(size_t)((i * s->C + c) * ovox + u)] = s->nan ? NAN : y;
            }
    }
}

static void release(void *user, const float *data) {
    ((synth *)user)->released++;
    free((void *)data);
}

static int synth_predict(void *user, swi_batch *b) {
    synth *s = user;
    s->calls++;
    if (s->fail) {
        if (s->msg) swi_batch_set_error(b, s->msg);
        return s->fail;
    }
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t sp[SWI_MAX_DIMS];
    for (int k = 0; k < d; k++) sp[k] = roi[k] * s->zoom;
    const size_t floats = (size_t)(n * s->C * win_vox(d, sp));
    for (int h = 0; h < (s->heads ? s->heads : 1); h++) {
        int64_t C = s->C + (s->bad_shape && h == 0);
        float *out = s->adopt ? malloc(floats * sizeof(float)) : swi_batch_output(b, h, C, sp);
        if (!out) return 1;
        synth sh = *s;
        sh.bias += (float)(100 * h);
        synth_eval(&sh, b, swi_batch_input(b), out);
        if (s->adopt && swi_batch_set_output(b, h, C, sp, out, release, s) != 0) {
            free(out);
            return 1;
        }
    }
    return 0;
}

/* ---- references, by hand ---- */

/* dst = src mirrored along the axes of mask, by coordinates: `planes` windows of d sizes s. */
static void mirror_ref(const float *src, float *dst, int64_t planes, int d, const int64_t *s, unsigned mask) {
    const int64_t vox = win_vox(d, s);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t v = 0; v < vox; v++) {
            int64_t c[SWI_MAX_DIMS];
            decode(v, d, s, c);
            for (int k = 0; k < d; k++)
                if (mask & (1u << k)) c[k] = s[k] - 1 - c[k];
            dst[p * vox + encode(d, s, c)] = src[p * vox + v];
        }
}

typedef struct ref_state {
    const synth *members;
    int n;
    unsigned axes; /* mirror each member along these (0: none) */
    int64_t calls;
} ref_state;

/* One member, mirrored by hand when axes is set: the plain run, then the mirrored ones in
 * increasing mask, added, times 1 / runs. */
static void member_ref(const synth *s, unsigned axes, swi_batch *b, float *out, float *x, float *y,
                       float *t) {
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t cin = swi_batch_channels(b), *roi = swi_batch_roi(b);
    int64_t sp[SWI_MAX_DIMS];
    for (int k = 0; k < d; k++) sp[k] = roi[k] * s->zoom;
    const size_t total = (size_t)(n * s->C * win_vox(d, sp));
    synth_eval(s, b, swi_batch_input(b), out);
    if (!axes) return;
    int runs = 1;
    for (unsigned mask = 1; mask < (1u << d); mask++) {
        if (mask & ~axes) continue;
        runs++;
        mirror_ref(swi_batch_input(b), x, n * cin, d, roi, mask);
        synth_eval(s, b, x, y);
        mirror_ref(y, t, n * s->C, d, sp, mask);
        for (size_t j = 0; j < total; j++) out[j] += t[j];
    }
    const float k = 1.0f / (float)runs;
    for (size_t j = 0; j < total; j++) out[j] *= k;
}

static int ref_predict(void *user, swi_batch *b) {
    ref_state *r = user;
    r->calls++;
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t cin = swi_batch_channels(b), *roi = swi_batch_roi(b);
    const synth *s0 = &r->members[0];
    int64_t sp[SWI_MAX_DIMS];
    for (int k = 0; k < d; k++) sp[k] = roi[k] * s0->zoom;
    const size_t total = (size_t)(n * s0->C * win_vox(d, sp));
    float *out = swi_batch_output(b, 0, s0->C, sp);
    float *x = malloc((size_t)(n * cin * win_vox(d, roi)) * sizeof(float));
    float *y = malloc(total * sizeof(float)), *t = malloc(total * sizeof(float));
    float *m = malloc(total * sizeof(float));
    int ok = out && x && y && t && m;
    if (ok) {
        member_ref(&r->members[0], r->axes, b, out, x, y, t);
        for (int i = 1; i < r->n; i++) {
            member_ref(&r->members[i], r->axes, b, m, x, y, t);
            for (size_t j = 0; j < total; j++) out[j] += m[j];
        }
        if (r->n > 1)
            for (size_t j = 0; j < total; j++) out[j] /= (float)r->n;
    }
    free(x), free(y), free(t), free(m);
    return ok ? 0 : 1;
}

/* ---- runs ---- */

typedef struct config {
    int dims;
    int64_t size[SWI_MAX_DIMS], roi[SWI_MAX_DIMS];
    int64_t batch, cin;
    int sw, pipeline, reuse, zoom;
} config;

static void random_config(config *c) {
    memset(c, 0, sizeof *c);
    c->dims = (int)rnd(1, 4);
    for (int k = 0; k < c->dims; k++) {
        c->size[k] = rnd(1, c->dims == 4 ? 7 : c->dims == 3 ? 12 : 30);
        c->roi[k] = rnd(1, c->dims == 4 ? 4 : 7);
    }
    c->batch = rnd(1, 2);
    c->cin = rnd(1, 2);
    c->sw = (int)rnd(1, 4);
    c->pipeline = (int)rnd(0, 2);
    c->reuse = (int)rnd(0, 1);
    c->zoom = 1;
}

static float *volume(const config *c) {
    int64_t n = c->batch * c->cin * win_vox(c->dims, c->size);
    float *v = malloc((size_t)n * sizeof(float));
    if (v) /* small integers (every sum exact), a background for reuse */
        for (int64_t i = 0; i < n; i++) v[i] = rnd(0, 2) ? 1.0f : (float)rnd(-9, 9);
    return v;
}

/* Blended scores of `pred` on the config's volume (malloc'd, *bytes), or NULL with the
 * status and message in *st and msg. */
static float *run(const config *c, const float *vol, int64_t C, const swi_predictor *pred, swi_status *st,
                  char *msg, size_t msglen, size_t *bytes) {
    swi_params p;
    swi_params_init(&p, c->dims);
    for (int k = 0; k < c->dims; k++) {
        p.roi[k] = c->roi[k];
        p.overlap[k] = 0.5;
        if (c->zoom > 1) p.heads[0].spatial[k] = c->roi[k] * c->zoom;
    }
    p.mode = SWI_BLEND_GAUSSIAN;
    p.sw_batch_size = c->sw;
    p.threads = 2;
    p.pipeline = (swi_pipeline)c->pipeline;
    p.reuse = c->reuse ? SWI_REUSE_ON : SWI_REUSE_OFF;
    p.heads[0].channels = C;
    swi_tensor in = {.data = vol, .batch = c->batch, .channels = c->cin, .dims = c->dims};
    int64_t out_vox = 1;
    for (int k = 0; k < c->dims; k++) {
        in.size[k] = c->size[k];
        out_vox *= c->size[k] * c->zoom;
    }
    *bytes = (size_t)(c->batch * C * out_vox) * sizeof(float);
    float *dst = malloc(*bytes);
    swi_ctx *ctx = swi_create();
    if (!dst || !ctx) {
        free(dst);
        swi_free(ctx);
        *st = SWI_ERR_NOMEM;
        return NULL;
    }
    swi_output o;
    swi_output_init(&o, 0, SWI_REDUCE_NONE);
    o.dst = dst;
    o.dst_bytes = *bytes;
    *st = swi_run(ctx, &p, &in, pred, &o, 1);
    snprintf(msg, msglen, "%s", swi_last_error(ctx));
    swi_free(ctx);
    if (*st != SWI_OK) {
        free(dst);
        return NULL;
    }
    return dst;
}

/* The combinator's scores equal the reference's bitwise. */
static void compare(const char *what, int t, const config *c, const float *vol, int64_t C,
                    const swi_predictor *comb, ref_state *ref) {
    swi_status s1, s2;
    char m1[600], m2[600];
    size_t b1, b2;
    swi_predictor rp = {ref_predict, ref};
    float *a = run(c, vol, C, comb, &s1, m1, sizeof m1, &b1);
    float *b = run(c, vol, C, &rp, &s2, m2, sizeof m2, &b2);
    CHECK(a && b, "%s %d: %s (%s) / %s (%s)", what, t, swi_status_name(s1), m1, swi_status_name(s2), m2);
    if (a && b)
        CHECK(memcmp(a, b, b1) == 0, "%s %d (dims %d, sw %d): differs from the reference", what, t, c->dims,
              c->sw);
    free(a);
    free(b);
}

static void test_mean(void) {
    for (int t = 0; t < 60; t++) {
        config c;
        random_config(&c);
        float *vol = volume(&c);
        CHECK(vol != NULL, "malloc");
        if (!vol) return;
        const int n = (int)rnd(1, 3);
        const int64_t C = rnd(1, 3);
        synth m[3];
        swi_predictor preds[3];
        for (int i = 0; i < n; i++) {
            memset(&m[i], 0, sizeof m[i]);
            m[i].kind = K_POS;
            m[i].bias = 0.25f * (float)i - 0.1f;
            m[i].C = C;
            m[i].zoom = 1;
            m[i].adopt = (int)rnd(0, 1);
            m[i].heads = (int)rnd(1, 2); /* a second head is filled and discarded */
            preds[i] = (swi_predictor){synth_predict, &m[i]};
        }
        swi_predictor mean;
        char err[256];
        swi_status st = swi_predictor_mean(preds, n, C, c.dims, c.roi, c.sw, &mean, err, sizeof err);
        CHECK(st == SWI_OK, "mean %d: %s", t, err);
        if (st == SWI_OK) {
            ref_state ref = {m, n, 0, 0};
            compare("mean", t, &c, vol, C, &mean, &ref);
            for (int i = 0; i < n; i++)
                CHECK(m[i].calls == ref.calls && (!m[i].adopt || m[i].released == m[i].calls * m[i].heads),
                      "mean %d: member %d called %lld times (the reference %lld), released %lld", t, i,
                      (long long)m[i].calls, (long long)ref.calls, (long long)m[i].released);
        }
        swi_predictor_mean_free(&mean);
        CHECK(mean.predict == NULL && mean.user == NULL, "mean_free zeroes the predictor");
        free(vol);
    }
}

static void test_mirror(void) {
    for (int t = 0; t < 60; t++) {
        config c;
        random_config(&c);
        if (t % 4 == 3 && c.dims <= 3) c.zoom = 2;
        float *vol = volume(&c);
        CHECK(vol != NULL, "malloc");
        if (!vol) return;
        const int64_t C = rnd(1, 2);
        const unsigned axes = (unsigned)rnd(1, (1 << c.dims) - 1);
        int64_t sp[SWI_MAX_DIMS];
        for (int k = 0; k < c.dims; k++) sp[k] = c.roi[k] * c.zoom;

        /* position-dependent: the hand-made mean over mirrored runs */
        synth s = {.kind = K_POS, .bias = 0.5f, .C = C, .zoom = c.zoom, .adopt = (int)rnd(0, 1)};
        swi_predictor inner = {synth_predict, &s}, mir;
        char err[256];
        swi_status st = swi_predictor_mirror(&inner, axes, C, c.dims, sp, c.sw, &mir, err, sizeof err);
        CHECK(st == SWI_OK, "mirror %d: %s", t, err);
        if (st == SWI_OK) {
            ref_state ref = {&s, 1, axes, 0};
            compare("mirror", t, &c, vol, C, &mir, &ref);
        }

        /* flip-equivariant predictors: the mirror is the predictor */
        for (int kind = K_POINT; kind <= K_CROSS && c.zoom == 1; kind++) {
            synth e = {.kind = kind, .bias = 1, .C = C, .zoom = 1};
            swi_predictor ep = {synth_predict, &e}, em;
            st = swi_predictor_mirror(&ep, axes, C, c.dims, sp, c.sw, &em, err, sizeof err);
            CHECK(st == SWI_OK, "mirror %d: %s", t, err);
            if (st == SWI_OK) {
                ref_state ref = {&e, 1, 0, 0};
                compare(kind == K_POINT ? "mirror of a voxelwise predictor" : "mirror of a symmetric stencil",
                        t, &c, vol, C, &em, &ref);
            }
            swi_predictor_mirror_free(&em);
        }

        /* nested: the mean of two mirrors, each with its scratch or sharing one */
        for (int share = 0; share <= 1 && c.zoom == 1; share++) {
            synth m2[2] = {{.kind = K_POS, .bias = 0, .C = C, .zoom = 1},
                           {.kind = K_POS, .bias = 0.75f, .C = C, .zoom = 1, .adopt = 1}};
            swi_predictor in2[2] = {{synth_predict, &m2[0]}, {synth_predict, &m2[1]}}, mirs[2], mean;
            int ok = swi_predictor_mirror(&in2[0], axes, C, c.dims, sp, c.sw, &mirs[0], err, sizeof err) ==
                         SWI_OK &&
                     swi_predictor_mirror(&in2[1], axes, C, c.dims, sp, c.sw, &mirs[1], err, sizeof err) ==
                         SWI_OK &&
                     (!share || swi_predictor_mirror_share(mirs, 2, err, sizeof err) == SWI_OK) &&
                     swi_predictor_mean(mirs, 2, C, c.dims, sp, c.sw, &mean, err, sizeof err) == SWI_OK;
            CHECK(ok, "nested %d: %s", t, err);
            if (ok) {
                ref_state ref = {m2, 2, axes, 0};
                compare(share ? "mean of mirrors sharing their scratch" : "mean of mirrors", t, &c, vol, C,
                        &mean, &ref);
                swi_predictor_mean_free(&mean);
            }
            swi_predictor_mirror_free(&mirs[0]);
            if (ok && share) { /* the scratch outlives the mirror that made it */
                ref_state ref = {&m2[1], 1, axes, 0};
                compare("a sharing mirror after the first is freed", t, &c, vol, C, &mirs[1], &ref);
            }
            swi_predictor_mirror_free(&mirs[1]);
        }
        swi_predictor_mirror_free(&mir);
        free(vol);
    }
}

/* A run of `pred` that must fail with `want` and a message containing `needle`. */
static void expect_fail(const char *what, const config *c, const float *vol, int64_t C,
                        const swi_predictor *pred, swi_status want, const char *needle) {
    swi_status st;
    char msg[600];
    size_t bytes;
    float *r = run(c, vol, C, pred, &st, msg, sizeof msg, &bytes);
    CHECK(!r && st == want && strstr(msg, needle), "%s: %s (%s), wanted %s with \"%s\"", what,
          swi_status_name(st), msg, swi_status_name(want), needle);
    free(r);
}

/* swi_batch_predict's own checks, and a child's failure the caller ignores. */
typedef struct probe_state {
    synth *inner;
    int64_t C;
    int ok; /* every check held */
} probe_state;

static int probe_predict(void *user, swi_batch *b) {
    probe_state *ps = user;
    const int d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    float *out = swi_batch_output(b, 0, ps->C, roi);
    if (!out) return 1;
    swi_predictor in = {synth_predict, ps->inner}, none = {NULL, NULL};
    char err[300];
    int64_t bad[SWI_MAX_DIMS] = {0};
    int ok = 1;
    ok &= swi_batch_predict(b, NULL, NULL, 0, ps->C, roi, out, err, sizeof err) == SWI_ERR_INVALID_ARG &&
          strstr(err, "predictor is NULL");
    ok &= swi_batch_predict(b, &none, NULL, 0, ps->C, roi, out, err, sizeof err) == SWI_ERR_INVALID_ARG;
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, roi, NULL, err, sizeof err) == SWI_ERR_INVALID_ARG;
    ok &= swi_batch_predict(b, &in, NULL, SWI_MAX_HEADS, ps->C, roi, out, err, sizeof err) ==
          SWI_ERR_INVALID_ARG;
    ok &= swi_batch_predict(b, &in, NULL, 0, 0, roi, out, err, sizeof err) == SWI_ERR_INVALID_ARG;
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, bad, out, err, sizeof err) == SWI_ERR_INVALID_ARG &&
          strstr(err, "spatial[0] = 0");
    int64_t huge[SWI_MAX_DIMS] = {INT64_MAX / 2, INT64_MAX / 2, INT64_MAX / 2, INT64_MAX / 2};
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, huge, out, err, sizeof err) == SWI_ERR_OVERFLOW;
    /* the inner gives another shape: refused in the child, the run not told */
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C + 1, roi, out, err, sizeof err) == SWI_ERR_SHAPE &&
          strstr(err, "but the caller expects");
    /* a head of a multi-head inner: head 1 (bias + 100) where the caller wants it */
    ps->inner->heads = 2;
    ok &= swi_batch_predict(b, &in, NULL, 1, ps->C, roi, out, err, sizeof err) == SWI_OK;
    float *want = malloc((size_t)swi_batch_count(b) * (size_t)(ps->C * win_vox(d, roi)) * sizeof(float));
    if (want) {
        synth s1 = *ps->inner;
        s1.bias += 100;
        synth_eval(&s1, b, swi_batch_input(b), want);
        ok &= memcmp(want, out,
                     (size_t)swi_batch_count(b) * (size_t)(ps->C * win_vox(d, roi)) * sizeof(float)) == 0;
        free(want);
    }
    /* the inner fails (its own message), then the caller fills its head itself */
    ps->inner->heads = 1;
    ps->inner->fail = 7;
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, roi, out, err, sizeof err) == SWI_ERR_PREDICTOR &&
          strstr(err, "the predictor failed (returned 7)");
    ps->inner->msg = "the inner net broke";
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, roi, out, err, sizeof err) == SWI_ERR_PREDICTOR &&
          strcmp(err, "the inner net broke") == 0;
    ps->inner->fail = 0;
    ps->inner->msg = NULL;
    ok &= swi_batch_predict(b, &in, NULL, 0, ps->C, roi, out, NULL, 0) == SWI_OK;
    if (!ok) ps->ok = 0;
    return 0;
}

static void test_errors(void) {
    config c = {.dims = 3, .size = {9, 8, 7}, .roi = {4, 4, 3}, .batch = 1, .cin = 1, .sw = 2, .zoom = 1};
    float *vol = volume(&c);
    CHECK(vol != NULL, "malloc");
    if (!vol) return;
    const int64_t C = 2;
    char err[256];
    synth good = {.kind = K_POS, .C = C, .zoom = 1};
    synth bad = {.kind = K_POS, .C = C, .zoom = 1, .fail = 3, .msg = "member 1 ran out of GPU memory"};
    swi_predictor two[2] = {{synth_predict, &good}, {synth_predict, &bad}}, mean, mir;

    /* a member's message is the run's */
    CHECK(swi_predictor_mean(two, 2, C, 3, c.roi, c.sw, &mean, err, sizeof err) == SWI_OK, "%s", err);
    expect_fail("failing member", &c, vol, C, &mean, SWI_ERR_PREDICTOR, "member 1 ran out of GPU memory");
    bad.msg = NULL;
    expect_fail("failing member, no message", &c, vol, C, &mean, SWI_ERR_PREDICTOR,
                "the predictor failed (returned 3)");
    bad.fail = 0;
    bad.bad_shape = 1;
    expect_fail(
        "member of another shape", &c, vol, C, &mean, SWI_ERR_PREDICTOR,
        "predictor head 0: 3 channels x 4 x 4 x 3 per window, but the caller expects 2 channels x 4 x 4 x 3");
    bad.bad_shape = 0;
    bad.nan = 1;
    expect_fail("NaN member", &c, vol, C, &mean, SWI_ERR_PREDICTOR,
                "the ensemble's mean output is NaN; its labels would be meaningless");
    bad.nan = 0;
    /* a batch larger than the combinator was made for */
    config big = c;
    big.sw = 3;
    expect_fail("batch above max_batch", &big, vol, C, &mean, SWI_ERR_PREDICTOR,
                "swi_predictor_mean: a batch of 3 windows, above its max_batch 2");
    swi_predictor_mean_free(&mean);

    bad.fail = 5;
    bad.msg = "the mirrored net broke";
    swi_predictor bp = {synth_predict, &bad};
    CHECK(swi_predictor_mirror(&bp, 7, C, 3, c.roi, c.sw, &mir, err, sizeof err) == SWI_OK, "%s", err);
    expect_fail("failing inner", &c, vol, C, &mir, SWI_ERR_PREDICTOR, "the mirrored net broke");
    expect_fail("mirror above max_batch", &big, vol, C, &mir, SWI_ERR_PREDICTOR,
                "swi_predictor_mirror: a batch of 3 windows, above its max_batch 2");
    config flat = c;
    flat.dims = 2;
    expect_fail("mirror of other dims", &flat, vol, C, &mir, SWI_ERR_PREDICTOR,
                "made for 3 spatial dims, the run has 2");
    swi_predictor_mirror_free(&mir);

    /* swi_batch_predict's checks; a child's failures do not fail the run */
    synth probe_inner = {.kind = K_POS, .C = C, .zoom = 1};
    probe_state ps = {&probe_inner, C, 1};
    swi_predictor probe = {probe_predict, &ps};
    swi_status st;
    char msg[600];
    size_t bytes;
    float *r = run(&c, vol, C, &probe, &st, msg, sizeof msg, &bytes);
    CHECK(r && st == SWI_OK, "probe: %s (%s)", swi_status_name(st), msg);
    CHECK(ps.ok, "swi_batch_predict's checks");
    free(r);

    /* making combinators */
    swi_predictor p = {synth_predict, &good};
    int64_t roi[3] = {4, 4, 3}, zero[3] = {4, 0, 3};
    CHECK(swi_predictor_mean(NULL, 1, C, 3, roi, 1, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              mean.predict == NULL,
          "mean of NULL");
    CHECK(swi_predictor_mean(&p, 0, C, 3, roi, 1, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG, "n 0");
    CHECK(swi_predictor_mean(&p, 1, 0, 3, roi, 1, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "classes = 0"),
          "classes 0: %s", err);
    CHECK(swi_predictor_mean(&p, 1, C, 5, roi, 1, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG, "dims 5");
    CHECK(swi_predictor_mean(&p, 1, C, 3, zero, 1, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "spatial[1] = 0"),
          "spatial 0: %s", err);
    CHECK(swi_predictor_mean(&p, 1, C, 3, roi, 0, &mean, err, sizeof err) == SWI_ERR_INVALID_ARG,
          "max_batch 0");
    CHECK(swi_predictor_mean(&p, 1, INT64_MAX / 4, 3, roi, 1 << 30, &mean, err, sizeof err) ==
              SWI_ERR_OVERFLOW,
          "overflow: %s", err);
    CHECK(swi_predictor_mirror(&p, 0, C, 3, roi, 1, &mir, err, sizeof err) == SWI_ERR_INVALID_ARG, "axes 0");
    CHECK(swi_predictor_mirror(&p, 8, C, 3, roi, 1, &mir, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "axes = 8"),
          "axes 8: %s", err);
    CHECK(swi_predictor_mirror(NULL, 1, C, 3, roi, 1, &mir, err, sizeof err) == SWI_ERR_INVALID_ARG,
          "inner NULL");
    /* sharing: mirrors only, made alike */
    swi_predictor mirs[3];
    const int64_t roi2[3] = {roi[0], roi[1], roi[2] + 1};
    CHECK(swi_predictor_mirror(&p, 1, C, 3, roi, 2, &mirs[0], err, sizeof err) == SWI_OK &&
              swi_predictor_mirror(&p, 3, C, 3, roi, 2, &mirs[1], err, sizeof err) == SWI_OK &&
              swi_predictor_mirror(&p, 1, C, 3, roi2, 2, &mirs[2], err, sizeof err) == SWI_OK,
          "mirrors to share: %s", err);
    CHECK(swi_predictor_mirror_share(mirs, 3, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "mirrors[2] was made for other outputs or batches"),
          "share another spatial: %s", err);
    swi_predictor pair[2] = {mirs[0], p};
    CHECK(swi_predictor_mirror_share(pair, 2, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "mirrors[1] is not a mirror"),
          "share a non-mirror: %s", err);
    CHECK(swi_predictor_mirror_share(NULL, 2, err, sizeof err) == SWI_ERR_INVALID_ARG, "share NULL");
    CHECK(swi_predictor_mirror_share(mirs, 0, err, sizeof err) == SWI_ERR_INVALID_ARG, "share 0");
    CHECK(swi_predictor_mirror_share(mirs, 2, err, sizeof err) == SWI_OK &&
              swi_predictor_mirror_share(mirs, 2, err, sizeof err) == SWI_OK,
          "share twice: %s", err);
    for (int i = 0; i < 3; i++) swi_predictor_mirror_free(&mirs[i]);
    /* the frees leave other predictors alone */
    swi_predictor other = p;
    swi_predictor_mean_free(&other);
    swi_predictor_mirror_free(&other);
    swi_predictor_mean_free(NULL);
    swi_predictor_mirror_free(NULL);
    CHECK(other.predict == synth_predict && other.user == &good, "a foreign predictor is left alone");
    free(vol);
}

int main(void) {
    check_rng_state = 0x5EED0F1A77E2B0ull;
    test_mean();
    test_mirror();
    test_errors();
    return check_report("test_combine");
}
