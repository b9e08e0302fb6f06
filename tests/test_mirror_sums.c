/*
 * test_mirror_sums.c -- test-time mirroring in the engine (swi_params.mirror_axes) and
 * float16 partial sums (swi_params.accumulate):
 *  - the engine's mirroring against swi_predictor_mirror on the same network, over grids,
 *    batch sizes, threads, pipelining, handed-over outputs, 2-D and 3-D;
 *  - every head (a zoomed one too) mirrored back: a network that commutes with mirroring
 *    gives the unmirrored result;
 *  - float16 sums against float32, their planned and measured bytes, parts bitwise, Inf;
 *  - the binary16 conversions, exhaustively and at the rounding edges;
 *  - the parameter checks.
 */
#include "check.h"
#include "engine.h"
#include "swi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A network that does not commute with mirroring: each output depends on the voxel's
 * position in the window, so a mirrored run mirrored back differs from the plain run.
 * Head 1 (heads == 2) commutes with mirroring instead, at twice the window (zoomed). */
typedef struct net {
    int64_t C;
    int asym;   /* position terms on head 0 */
    int heads;  /* 1, or 2 with a zoomed head 1 */
    int adopt;  /* hand head 0 over with swi_batch_set_output */
    int inf_at; /* >= 0: head 0's channel 0 is +Inf at this window-local voxel */
    int64_t calls, windows;
    int64_t handed, released; /* outputs handed over, and given back */
} net;

static void release_buf(void *user, const float *data) {
    ((net *)user)->released++;
    free((void *)data);
}

static int net_predict(void *user, swi_batch *b) {
    net *m = user;
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b), cin = swi_batch_channels(b);
    const float *in = swi_batch_input(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    m->calls++;
    m->windows += n;
    float *out;
    if (m->adopt) {
        out = malloc((size_t)(n * m->C * vox) * sizeof(float));
        if (!out) return 1;
    } else {
        out = swi_batch_output(b, 0, m->C, roi);
        if (!out) return 1;
    }
    for (int i = 0; i < n; i++)
        for (int64_t c = 0; c < m->C; c++)
            for (int64_t v = 0; v < vox; v++) {
                float x = 0;
                for (int64_t ch = 0; ch < cin; ch++) x += in[(i * cin + ch) * vox + v];
                float y = (float)(c + 1) * x - 0.3f * (float)c;
                if (m->asym) y += 0.01f * (float)((v * (c + 2)) % 17) + 0.002f * (float)v;
                if (m->inf_at == v && c == 0) y = INFINITY;
                out[(i * m->C + c) * vox + v] = y;
            }
    if (m->adopt) {
        if (swi_batch_set_output(b, 0, m->C, roi, out, release_buf, m) != 0) {
            free(out);
            return 1;
        }
        m->handed++;
    }
    if (m->heads == 2) { /* head 1: 2 channels at twice the window, nearest: commutes with mirroring */
        int64_t sp[SWI_MAX_DIMS], zv = 1;
        for (int k = 0; k < d; k++) zv *= sp[k] = 2 * roi[k];
        float *z = swi_batch_output(b, 1, 2, sp);
        if (!z) return 1;
        for (int i = 0; i < n; i++)
            for (int64_t c = 0; c < 2; c++)
                for (int64_t v = 0; v < zv; v++) {
                    int64_t rest = v, src = 0, stride = 1;
                    for (int k = d - 1; k >= 0; k--) {
                        src += (rest % sp[k]) / 2 * stride;
                        rest /= sp[k];
                        stride *= roi[k];
                    }
                    float x = 0;
                    for (int64_t ch = 0; ch < cin; ch++) x += in[(i * cin + ch) * vox + src];
                    z[(i * 2 + c) * zv + v] = (float)(c + 2) * x + 1.0f;
                }
    }
    return 0;
}

typedef struct setup {
    int dims;
    int64_t size[3], roi[3];
    int sw, threads;
    swi_pipeline pipe;
    swi_grid grid;
} setup;

static float *make_input(const setup *u, int64_t *n_out) {
    int64_t n = 2; /* two channels */
    for (int k = 0; k < u->dims; k++) n *= u->size[k];
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)rnd(-1000, 1000) / 300.0f;
    *n_out = n;
    return x;
}

static void params_for(const setup *u, swi_params *p) {
    swi_params_init(p, u->dims);
    for (int k = 0; k < u->dims; k++) {
        p->roi[k] = u->roi[k];
        p->overlap[k] = 0.5;
    }
    p->grid = u->grid;
    p->mode = u->grid == SWI_GRID_NNUNET ? SWI_BLEND_GAUSSIAN_NNUNET : SWI_BLEND_GAUSSIAN;
    p->sw_batch_size = u->sw;
    p->threads = u->threads;
    p->pipeline = u->pipe;
}

/* Run and return the blended scores of `head` (malloc'd), or NULL; stats and plan out. */
static float *run_scores(const swi_params *p, const setup *u, const float *x, const swi_predictor *pred,
                         int head, int heads, swi_stats *stats, size_t sums[2], swi_status *st_out,
                         size_t *n_out) {
    swi_tensor in = {x, 1, 2, u->dims, {0}, NULL};
    for (int k = 0; k < u->dims; k++) in.size[k] = u->size[k];
    swi_params q = *p;
    q.n_heads = heads;
    swi_output o[2];
    memset(o, 0, sizeof o);
    for (int h = 0; h < heads; h++) {
        o[h].head = h;
        o[h].reduce = SWI_REDUCE_NONE;
    }
    swi_ctx *ctx = swi_create();
    swi_status st = swi_run(ctx, &q, &in, pred, o, heads);
    *st_out = st;
    float *res = NULL;
    if (st == SWI_OK) {
        size_t bytes = 0;
        const void *r = swi_result(ctx, head, &bytes);
        res = malloc(bytes);
        memcpy(res, r, bytes);
        *n_out = bytes / sizeof(float);
        if (stats) swi_run_stats(ctx, stats);
        if (sums && !swi__frontier_stats(ctx, &sums[0], &sums[1])) sums[0] = sums[1] = 0;
    } else {
        fprintf(stderr, "run failed: %s\n", swi_last_error(ctx));
    }
    swi_free(ctx);
    return res;
}

static double max_rel(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static unsigned n_axes(unsigned mask) { return (unsigned)__builtin_popcount(mask); }

/* The engine's mirroring equals swi_predictor_mirror's up to rounding, and counts its runs. */
static void engine_vs_combinator(const setup *u, unsigned axes, int adopt) {
    int64_t nx;
    float *x = make_input(u, &nx);
    swi_params p;
    params_for(u, &p);
    net a = {3, 1, 1, adopt, -1, 0, 0, 0, 0}, b = {3, 1, 1, 0, -1, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a}, pb = {net_predict, &b}, mir;
    char err[256];
    CHECK(swi_predictor_mirror(&pb, axes, 3, u->dims, u->roi, u->sw, &mir, err, sizeof err) == SWI_OK, "%s",
          err);
    swi_status st;
    size_t n1 = 0, n2 = 0;
    swi_stats s1;
    swi_plan plan;
    swi_params pm = p;
    pm.mirror_axes = axes;
    {
        swi_tensor in = {x, 1, 2, u->dims, {0}, NULL};
        for (int k = 0; k < u->dims; k++) in.size[k] = u->size[k];
        swi_ctx *ctx = swi_create();
        swi_output o = {0};
        o.reduce = SWI_REDUCE_NONE;
        CHECK(swi_plan_run(ctx, &pm, &in, &o, 1, &plan) == SWI_OK, "plan: %s", swi_last_error(ctx));
        swi_free(ctx);
    }
    float *eng = run_scores(&pm, u, x, &pa, 0, 1, &s1, NULL, &st, &n1);
    CHECK(st == SWI_OK, "engine mirroring failed");
    float *com = run_scores(&p, u, x, &mir, 0, 1, NULL, NULL, &st, &n2);
    CHECK(st == SWI_OK, "combinator failed");
    if (eng && com && n1 == n2) {
        double e = max_rel(eng, com, n1);
        CHECK(e <= 2e-6, "dims %d axes %u sw %d threads %d pipe %d adopt %d: engine vs combinator %.3g",
              u->dims, axes, u->sw, u->threads, (int)u->pipe, adopt, e);
        const int64_t runs = (int64_t)1 << n_axes(axes);
        CHECK(a.windows == s1.windows_total * runs, "the network saw %lld windows, not %lld x %lld",
              (long long)a.windows, (long long)s1.windows_total, (long long)runs);
        CHECK(s1.predictor_calls == a.calls && plan.predictor_calls == a.calls,
              "calls: stats %lld plan %lld network %lld", (long long)s1.predictor_calls,
              (long long)plan.predictor_calls, (long long)a.calls);
        CHECK(s1.windows_predicted == a.windows, "windows_predicted %lld", (long long)s1.windows_predicted);
        CHECK(a.handed == a.released, "%lld outputs handed over, %lld given back", (long long)a.handed,
              (long long)a.released);
    } else {
        CHECK(0, "results missing or of different sizes (%zu, %zu)", n1, n2);
    }
    /* and the mirroring matters here: without it the result differs */
    float *plain = run_scores(&p, u, x, &pb, 0, 1, NULL, NULL, &st, &n2);
    if (plain && com) CHECK(max_rel(plain, com, n2) > 1e-3, "the network commutes with mirroring: no test");
    swi_predictor_mirror_free(&mir);
    free(eng);
    free(com);
    free(plain);
    free(x);
}

/* A network that commutes with mirroring gives, mirrored, its unmirrored result on every head. */
static void heads_mirrored_back(const setup *u, unsigned axes, swi_accumulate acc) {
    int64_t nx;
    float *x = make_input(u, &nx);
    swi_params p;
    params_for(u, &p);
    p.accumulate = acc;
    net a = {3, 0, 2, 0, -1, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a};
    swi_params pm = p;
    pm.mirror_axes = axes;
    for (int h = 0; h < 2; h++) {
        swi_status st;
        size_t n1 = 0, n2 = 0;
        float *m = run_scores(&pm, u, x, &pa, h, 2, NULL, NULL, &st, &n1);
        float *o = run_scores(&p, u, x, &pa, h, 2, NULL, NULL, &st, &n2);
        CHECK(m && o && n1 == n2, "head %d: runs failed", h);
        if (m && o && n1 == n2) {
            double e = max_rel(m, o, n1);
            double tol = acc == SWI_ACCUMULATE_FLOAT16 ? 4e-3 : 2e-5;
            CHECK(e <= tol, "head %d axes %u acc %d: mirrored %.3g from unmirrored", h, axes, (int)acc, e);
        }
        free(m);
        free(o);
    }
    free(x);
}

/* float16 sums: close to float32's, half the partial-sum bytes as planned, and measured as planned. */
static void float16_vs_float32(const setup *u, unsigned axes) {
    int64_t nx;
    float *x = make_input(u, &nx);
    swi_params p;
    params_for(u, &p);
    p.mirror_axes = axes;
    net a = {8, 1, 1, 0, -1, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a};
    swi_params ph = p;
    ph.accumulate = SWI_ACCUMULATE_FLOAT16;
    swi_status st;
    size_t n1 = 0, n2 = 0;
    size_t f32[2] = {0, 0}, f16[2] = {0, 0}; /* planned, measured */
    float *f = run_scores(&p, u, x, &pa, 0, 1, NULL, f32, &st, &n1);
    float *h = run_scores(&ph, u, x, &pa, 0, 1, NULL, f16, &st, &n2);
    CHECK(f && h && n1 == n2, "runs failed");
    if (f && h && n1 == n2) {
        double worst = 0, big = 0;
        for (size_t i = 0; i < n1; i++) {
            double d = fabs((double)h[i] - (double)f[i]);
            if (d > worst) worst = d;
            if (fabs((double)f[i]) > big) big = fabs((double)f[i]);
        }
        /* 11 significant bits, a few roundings a voxel: well within 1/256 of the range */
        CHECK(worst <= big / 256, "float16 sums %.4g from float32's (scores up to %.3g)", worst, big);
        CHECK(worst > 0, "float16 sums equal float32's bitwise: were they used?");
        /* 8 channels: (8 x 2 + 4) / (9 x 4) of the bytes */
        CHECK(f16[0] > 0 && f16[0] * 36 == f32[0] * 20, "planned partial sums %zu (float16) vs %zu", f16[0],
              f32[0]);
        CHECK(f16[1] == f16[0] && f32[1] == f32[0], "measured partial sums %zu / %zu, planned %zu / %zu",
              f16[1], f32[1], f16[0], f32[0]);
    }
    free(f);
    free(h);
    free(x);
}

/* Parts of a float16, mirrored run give the whole run's values bitwise. */
static void parts_bitwise(const setup *u, unsigned axes, swi_accumulate acc) {
    int64_t nx;
    float *x = make_input(u, &nx);
    swi_params p;
    params_for(u, &p);
    p.mirror_axes = axes;
    p.accumulate = acc;
    net a = {3, 1, 1, 0, -1, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a};
    swi_status st;
    size_t n = 0, np = 0;
    float *whole = run_scores(&p, u, x, &pa, 0, 1, NULL, NULL, &st, &n);
    int64_t cut = u->size[0] / 2 + 1;
    int same = whole != NULL;
    for (int part = 0; part < 2 && whole; part++) {
        swi_params q = p;
        q.part_lo[0] = part ? cut : 0;
        q.part_hi[0] = part ? u->size[0] : cut;
        float *got = run_scores(&q, u, x, &pa, 0, 1, NULL, NULL, &st, &np);
        if (!got || np != n) {
            same = 0;
            free(got);
            break;
        }
        int64_t inner = n / 3 / (size_t)u->size[0]; /* voxels of one slice of axis 0 */
        for (int64_t c = 0; c < 3; c++)
            for (int64_t i0 = q.part_lo[0]; i0 < q.part_hi[0]; i0++) {
                size_t at = (size_t)((c * u->size[0] + i0) * inner);
                for (int64_t v = 0; v < inner; v++)
                    if (memcmp(got + at + v, whole + at + v, sizeof(float)) != 0) {
                        if (same)
                            fprintf(stderr, "part %d channel %lld slice %lld voxel %lld: %.9g, whole %.9g\n",
                                    part, (long long)c, (long long)i0, (long long)v, (double)got[at + v],
                                    (double)whole[at + v]);
                        same = 0;
                    }
            }
        free(got);
    }
    CHECK(same, "dims %d sw %d axes %u acc %d: parts differ from the whole run", u->dims, u->sw, axes,
          (int)acc);
    free(whole);
    free(x);
}

/* An Inf score stays Inf in float16 sums, as in float32 sums. */
static void float16_inf(void) {
    setup u = {3, {9, 10, 8}, {4, 6, 4}, 1, 1, SWI_PIPELINE_OFF, SWI_GRID_MONAI};
    int64_t nx;
    float *x = make_input(&u, &nx);
    swi_params p;
    params_for(&u, &p);
    net a = {2, 0, 1, 0, 5, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a};
    swi_status st;
    size_t n1 = 0, n2 = 0;
    float *f = run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n1);
    p.accumulate = SWI_ACCUMULATE_FLOAT16;
    float *h = run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n2);
    CHECK(f && h && n1 == n2, "runs failed");
    int64_t infs = 0, agree = 0;
    for (size_t i = 0; f && h && i < n1; i++) {
        if (isinf(f[i])) {
            infs++;
            agree += isinf(h[i]) && h[i] > 0;
        } else {
            agree += isfinite(h[i]);
        }
    }
    CHECK(infs > 0 && agree == (int64_t)n1, "Inf in %lld voxels, float16 agrees on %lld of %zu",
          (long long)infs, (long long)agree, n1);
    free(f);
    free(h);
    free(x);
}

static void conversions(void) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t hb = (uint16_t)i;
        const float f = swi__h2f(hb);
        if (isnan(f)) {
            bad += (hb & 0x7c00u) != 0x7c00u || !(hb & 0x3ffu);
            continue;
        }
        bad += swi__f2h(f) != hb;
    }
    CHECK(bad == 0, "%d half values do not survive half -> float -> half", bad);
    struct {
        float f;
        uint16_t h;
    } cases[] = {{1.0f, 0x3c00},
                 {-2.0f, 0xc000},
                 {65504.0f, 0x7bff},
                 {65519.99f, 0x7bff},
                 {65520.0f, 0x7c00}, /* rounds past the largest: Inf */
                 {1e30f, 0x7c00},
                 {-INFINITY, 0xfc00},
                 {ldexpf(1, -24), 0x0001},
                 {ldexpf(1, -25), 0x0000},        /* tie: to even (zero) */
                 {ldexpf(3, -25), 0x0002},        /* tie: to even (2) */
                 {ldexpf(1, -14), 0x0400},        /* the smallest normal */
                 {1.0f + ldexpf(1, -11), 0x3c00}, /* tie: to even */
                 {1.0f + ldexpf(3, -11), 0x3c02}, /* tie: to even */
                 {1.0f + ldexpf(1, -11) + ldexpf(1, -20), 0x3c01},
                 {-0.0f, 0x8000},
                 {1e-40f, 0x0000}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(swi__f2h(cases[i].f) == cases[i].h, "f2h(%.9g) = 0x%04x, not 0x%04x", (double)cases[i].f,
              swi__f2h(cases[i].f), cases[i].h);
    CHECK((swi__f2h(NAN) & 0x7e00u) == 0x7e00u, "NaN is not a quiet half NaN");
    CHECK(isinf(swi__h2f(0x7c00)) && swi__h2f(0x0001) == ldexpf(1, -24) &&
              swi__h2f(0x3c01) == 1.0f + ldexpf(1, -10),
          "h2f edge values");
    CHECK(swi__mean_step(INFINITY, 3.0f, 0.5f) == INFINITY, "Inf + finite");
    CHECK(isnan(swi__mean_step(INFINITY, -INFINITY, 0.5f)), "Inf - Inf");
    CHECK(swi__mean_step(1.0f, 3.0f, 0.5f) == 2.0f, "the mean of 1 and 3");
}

static void refusals(void) {
    setup u = {2, {9, 10}, {4, 6}, 1, 1, SWI_PIPELINE_OFF, SWI_GRID_MONAI};
    int64_t nx;
    float *x = make_input(&u, &nx);
    net a = {2, 0, 1, 0, -1, 0, 0, 0, 0};
    swi_predictor pa = {net_predict, &a};
    swi_params p;
    params_for(&u, &p);
    swi_status st;
    size_t n;
    p.mirror_axes = 4; /* axis 2 of a 2-D input */
    free(run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n));
    CHECK(st == SWI_ERR_INVALID_ARG, "mirror_axes beyond dims: %d", (int)st);
    p.mirror_axes = 1;
    p.reuse = SWI_REUSE_ON;
    free(run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n));
    CHECK(st == SWI_ERR_INVALID_ARG, "mirror_axes with reuse: %d", (int)st);
    p.reuse = SWI_REUSE_OFF;
    p.sw_batch_size = 2;
    p.part_lo[0] = 3;
    p.part_hi[0] = 7;
    free(run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n));
    CHECK(st == SWI_ERR_INVALID_ARG, "a part, mirror_axes and sw_batch_size 2: %d", (int)st);
    p.sw_batch_size = 1;
    free(run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n));
    CHECK(st == SWI_OK, "a part, mirror_axes and sw_batch_size 1: %d", (int)st);
    p.part_lo[0] = p.part_hi[0] = 0;
    p.accumulate = (swi_accumulate)2;
    free(run_scores(&p, &u, x, &pa, 0, 1, NULL, NULL, &st, &n));
    CHECK(st == SWI_ERR_INVALID_ARG, "unknown accumulate: %d", (int)st);
    free(x);
}

int main(void) {
    fprintf(stderr, "(failed runs below are the refusals' own)\n");
    conversions();
    refusals();
    const setup three[] = {
        {3, {13, 17, 11}, {6, 8, 5}, 1, 1, SWI_PIPELINE_OFF, SWI_GRID_MONAI},
        {3, {13, 17, 11}, {6, 8, 5}, 3, 2, SWI_PIPELINE_ON, SWI_GRID_MONAI},
        {3, {13, 17, 11}, {6, 8, 5}, 2, 2, SWI_PIPELINE_OFF, SWI_GRID_NNUNET},
        {3, {5, 17, 11}, {8, 8, 5}, 1, 2, SWI_PIPELINE_AUTO, SWI_GRID_NNUNET}, /* padded along axis 0 */
    };
    const unsigned axes3[] = {1, 2, 4, 5, 7};
    for (size_t i = 0; i < sizeof three / sizeof three[0]; i++)
        for (size_t k = 0; k < sizeof axes3 / sizeof axes3[0]; k++)
            engine_vs_combinator(&three[i], axes3[k], 0);
    engine_vs_combinator(&three[1], 7, 1);
    engine_vs_combinator(&three[0], 3, 1);
    const setup two = {2, {23, 19}, {8, 6}, 2, 2, SWI_PIPELINE_OFF, SWI_GRID_MONAI};
    engine_vs_combinator(&two, 1, 0);
    engine_vs_combinator(&two, 3, 0);
    for (int acc = 0; acc < 2; acc++) {
        heads_mirrored_back(&three[0], 7, (swi_accumulate)acc);
        heads_mirrored_back(&three[1], 6, (swi_accumulate)acc);
        heads_mirrored_back(&two, 3, (swi_accumulate)acc);
    }
    for (size_t i = 0; i < 4; i++) {
        float16_vs_float32(&three[i], 0);
        float16_vs_float32(&three[i], 7);
        for (int acc = 0; acc < 2; acc++) {
            if (three[i].sw == 1) parts_bitwise(&three[i], 7, (swi_accumulate)acc); /* else refused */
            parts_bitwise(&three[i], 0, (swi_accumulate)acc);
        }
    }
    float16_vs_float32(&two, 2);
    float16_inf();
    return check_report("test_mirror_sums");
}
