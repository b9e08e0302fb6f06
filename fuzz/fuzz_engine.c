/*
 * fuzz_engine.c -- swi_run with fuzzed parameters, shapes and outputs, checked against
 * a plain reference.
 *
 * The input bytes choose everything a caller can choose (dims 1..3, small image sizes,
 * roi, overlap, blending, padding, batch, channels, heads with declared or learned and
 * zoomed shapes, sw_batch_size, threads, pipelining, loop order, memory budget, and up to
 * four outputs of any reduction going to library memory, a caller buffer or a region
 * callback, test-time mirroring in the engine, float16 partial sums) and, optionally, one
 * misbehaviour (the predictor fails, changes shape or returns NaN at some call, a region
 * callback or the progress callback says stop, some input voxels are NaN). The rest of
 * the bytes are the voxels.
 *
 * The predictor is a pure function of each window, so the expected result can be
 * recomputed here the simple way: pad the whole image, run the same function on every
 * window (mirrored: on each of its flips, flipped back and averaged), accumulate pred * w
 * and w over the padded grid, divide, crop (tests/data/golden/README.md, "What the
 * reference computes"). With float16 sums the values may stray by a bound worked out per
 * voxel (fuzz_engine_ref.c). The run must:
 *   - succeed, or fail with exactly the status the parameters call for (reflect padding
 *     wider than the image, a zoom that does not place, a budget, an injected fault),
 *     with a message, and then report no result;
 *   - on success produce values matching the reference within the golden tolerance for
 *     every reduction (finite for finite voxels; NaN exactly where the reference has NaN,
 *     argmax = the first NaN channel, max = NaN, softmax all NaN), deliver every voxel of a
 *     streamed output exactly once, never write past a caller's buffer, and agree with
 *     swi_plan_run.
 * The reference and the checks of values are in fuzz_engine_ref.c.
 */
#include "fuzz_engine.h"

#include "fuzz_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_engine_failed(int line, const char *cond, const char *fmt, ...) {
    char msg[1800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fuzz_check_failed("fuzz_engine", line, cond, "%s", msg);
}

/* ---- reading the fuzz input ---------------------------------------------------- */

typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;

static unsigned take(bytes *b) {
    if (b->n == 0) return 0;
    b->n--;
    return *b->p++;
}

static unsigned pick(bytes *b, unsigned n) { return n ? take(b) % n : 0; }

/* ---- the predictor (fuzz_net, fuzz_engine_ref.c) over a batch ---------------- */

typedef struct pstate {
    const cfg *c;
    int calls;
    int64_t windows;
    float *scratch;
} pstate;

static int predict(void *user, swi_batch *b) {
    pstate *ps = user;
    const cfg *c = ps->c;
    ps->calls++;
    int n = swi_batch_count(b);
    CHECK(n >= 1 && n <= c->sw, "batch of %d windows, sw_batch_size %d", n, c->sw);
    CHECK(swi_batch_dims(b) == c->dims, "batch dims %d", swi_batch_dims(b));
    CHECK(swi_batch_channels(b) == c->cin, "batch channels");
    const int64_t *roi = swi_batch_roi(b);
    for (int k = 0; k < c->dims; k++)
        CHECK(roi[k] == c->r[k], "batch roi[%d] = %lld, expected %lld", k, (long long)roi[k],
              (long long)c->r[k]);
    for (int j = 0; j < n; j++) {
        int64_t img = swi_batch_image(b, j);
        CHECK(img >= 0 && img < c->batch, "window image %lld", (long long)img);
        CHECK(swi_batch_start(b, j) != NULL, "no start");
    }
    CHECK(swi_batch_image(b, n) == -1 && swi_batch_start(b, -1) == NULL, "out-of-range window");
    ps->windows += n;
    if (c->misb == MISB_PRED_FAIL && ps->calls == c->misb_at) {
        swi_batch_set_error(b, "fuzz predictor gives up");
        return 3;
    }
    const float *in = swi_batch_input(b);
    const int64_t rv = c->r[0] * c->r[1] * c->r[2];
    for (int h = 0; h < c->n_heads; h++) {
        int64_t C = c->C[h], sp[D];
        for (int k = 0; k < D; k++) sp[k] = c->o[h][k];
        if (c->misb == MISB_PRED_SHAPE && ps->calls == c->misb_at && h == c->n_heads - 1) C += 1;
        float *out = swi_batch_output(b, h, C, sp);
        if (!out) return 1; /* the engine has recorded why */
        int64_t ov = C * sp[0] * sp[1] * sp[2];
        for (int j = 0; j < n; j++) {
            if (C != c->C[h]) {
                memset(out + j * ov, 0, (size_t)ov * sizeof(float));
                continue;
            }
            fuzz_net(c, h, in + (int64_t)j * c->cin * rv, out + j * ov);
            if (c->misb == MISB_PRED_NAN && ps->calls == c->misb_at) out[j * ov] = NAN;
        }
    }
    return 0;
}

/* ---- region callbacks -------------------------------------------------------------- */

typedef struct sink {
    const cfg *c;
    int index;
    int64_t out[D]; /* head output grid, user dims then 1 */
    int64_t planes; /* channels stored per voxel */
    size_t esize;
    unsigned char *data; /* [batch][planes][out] */
    int *hits;           /* [batch][out] */
    int calls;
    int fail_at; /* stop on this call (1-based), 0 never */
} sink;

static int on_region(void *user, const swi_region *rg) {
    sink *s = user;
    int call = __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
    const cfg *c = s->c;
    const swi_output *o = &c->outs[s->index];
    CHECK(rg->output == s->index && rg->head == o->head, "region of output %d head %d", rg->output, rg->head);
    CHECK(rg->image >= 0 && rg->image < c->batch, "region image %lld", (long long)rg->image);
    CHECK(rg->dims == c->dims, "region dims %d", rg->dims);
    CHECK(rg->channels == s->planes, "region channels %lld, expected %lld", (long long)rg->channels,
          (long long)s->planes);
    CHECK(rg->data != NULL, "region without data");
    int64_t lo[D] = {0, 0, 0}, hi[D] = {1, 1, 1};
    for (int k = 0; k < c->dims; k++) {
        lo[k] = rg->lo[k];
        hi[k] = rg->hi[k];
        CHECK(0 <= lo[k] && lo[k] < hi[k] && hi[k] <= s->out[k], "region dim %d [%lld, %lld) of %lld", k,
              (long long)lo[k], (long long)hi[k], (long long)s->out[k]);
    }
    size_t es = rg->dtype == SWI_DTYPE_UINT8 ? 1 : rg->dtype == SWI_DTYPE_UINT16 ? 2 : 4;
    CHECK(es == s->esize, "region dtype %d", (int)rg->dtype);
    const int64_t ovol = s->out[0] * s->out[1] * s->out[2];
    const int64_t e[D] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    const unsigned char *src = rg->data;
    for (int64_t p = 0; p < s->planes; p++)
        for (int64_t a = 0; a < e[0]; a++)
            for (int64_t b = 0; b < e[1]; b++)
                for (int64_t d = 0; d < e[2]; d++) {
                    int64_t v = ((lo[0] + a) * s->out[1] + lo[1] + b) * s->out[2] + lo[2] + d;
                    int64_t si = ((p * e[0] + a) * e[1] + b) * e[2] + d;
                    memcpy(s->data + ((rg->image * s->planes + p) * ovol + v) * es, src + si * es, es);
                    if (p == 0) __atomic_add_fetch(&s->hits[rg->image * ovol + v], 1, __ATOMIC_SEQ_CST);
                }
    return s->fail_at && call == s->fail_at;
}

static int cancel_at;
static int progress_cb(void *user, int64_t done, int64_t total) {
    int *calls = user;
    ++*calls;
    CHECK(done >= 1 && done <= total, "progress %lld of %lld", (long long)done, (long long)total);
    return cancel_at && *calls == cancel_at;
}

/* ---- building a case ------------------------------------------------------------------- */

static const double OVERLAPS[] = {0.0, 0.25, 0.5, 0.75, 0.1, 0.33, 0.9, 0.6};

static int build(cfg *c, bytes *in) {
    memset(c, 0, sizeof *c);
    c->dims = 1 + (int)pick(in, 3);
    c->batch = 1 + pick(in, 2);
    c->cin = 1 + pick(in, 2);
    for (int k = 0; k < D; k++) {
        c->size[k] = c->r[k] = 1;
        c->roi_param[k] = 0;
        c->overlap[k] = 0.25;
        c->sigma[k] = 0.125;
    }
    int64_t vox = 1, rvox = 1;
    for (int k = 0; k < c->dims; k++) {
        int big = c->dims == 1 ? 40 : c->dims == 2 ? 16 : 9;
        c->size[k] = 1 + pick(in, (unsigned)big);
        unsigned rr = take(in);
        /* 0 = whole image; else 1 .. size + 4 */
        c->roi_param[k] = (rr & 7) == 0 ? 0 : 1 + (int64_t)((rr >> 3) % (unsigned)(c->size[k] + 4));
        c->r[k] = c->roi_param[k] <= 0 ? c->size[k] : c->roi_param[k];
        unsigned ob = take(in);
        c->overlap[k] = ob < 128 ? OVERLAPS[ob % 8] : (double)(ob - 128) / 128.0;
        unsigned sb = take(in);
        c->sigma[k] = sb < 200 ? 0.125 : 0.01 + (double)(sb - 200) / 16.0;
        vox *= c->size[k];
        rvox *= c->r[k];
    }
    (void)vox;
    unsigned m = take(in);
    c->mode = (swi_blend)(m % 3);
    c->pad = (swi_pad)((m >> 2) % 4);
    c->cval = (float)((int)take(in) - 128) / 8.0f;
    c->sw = 1 + (int)pick(in, 5);
    c->threads = 1 + (int)pick(in, 3);
    c->pipeline = (int)pick(in, 3) - 1;
    unsigned ord = take(in);
    c->auto_order = ord < 128;
    {
        static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        /* order is over the user dims; keep a permutation of 0..dims-1 */
        int n = 0;
        for (int q = 0; q < 3; q++)
            if (perms[ord % 6][q] < c->dims) c->order[n++] = perms[ord % 6][q];
        for (; n < D; n++) c->order[n] = n;
    }
    unsigned mm = take(in);
    c->max_memory = mm < 200 ? 0 : (size_t)(mm - 199) * 2048;
    c->n_heads = 1 + (int)pick(in, 2);
    for (int h = 0; h < c->n_heads; h++) {
        unsigned hb = take(in);
        c->C[h] = 1 + (hb % 4);
        c->declare_c[h] = (hb >> 2) & 1;
        c->declare_s[h] = (hb >> 3) & 1;
        int zoom = h == 1 && ((hb >> 4) & 1);
        for (int k = 0; k < D; k++)
            c->o[h][k] = k < c->dims && zoom && c->r[k] % 2 == 0 ? c->r[k] / 2 : c->r[k];
        /* with declared channels, spatial 0 means the roi: a zoomed head declares it */
        if (zoom && c->declare_c[h]) c->declare_s[h] = 1;
    }
    if (c->mode == SWI_BLEND_CUSTOM) {
        c->weight_map = malloc((size_t)rvox * sizeof(float));
        for (int64_t i = 0; i < rvox; i++) c->weight_map[i] = 0.05f + (float)(take(in) % 64) / 16.0f;
    }
    c->n_outs = 1 + (int)pick(in, 4);
    for (int i = 0; i < c->n_outs; i++) {
        unsigned ob = take(in), wb = take(in);
        swi_output_init(&c->outs[i], (int)(ob % (unsigned)c->n_heads), (swi_reduce)((ob >> 1) % 7));
        swi_output *o = &c->outs[i];
        if (o->reduce == SWI_REDUCE_ARGMAX)
            o->dtype = (swi_dtype)((int[]){SWI_DTYPE_AUTO, SWI_DTYPE_UINT8, SWI_DTYPE_UINT16})[(ob >> 4) % 3];
        else
            o->dtype = (ob >> 4) & 1 ? SWI_DTYPE_FLOAT32 : SWI_DTYPE_AUTO;
        c->where[i] = o->reduce == SWI_REDUCE_CUSTOM ? 2 : (int)(wb % 4);
    }
    unsigned mb = take(in);
    c->misb = mb < 160 ? MISB_NONE : 1 + (int)(mb % 6);
    c->misb_at = 1 + (int)pick(in, 4);
    /* test-time mirroring in the engine, and float16 partial sums */
    unsigned xb = take(in);
    c->mirror = xb >= 128 ? (xb & 7) & ((1u << c->dims) - 1) : 0;
    c->f16 = (xb >> 3) & 1;
    c->passes = 1 << __builtin_popcount(c->mirror);
    /* a learned head takes its shape from the first call: a change shows from the second */
    if (c->misb == MISB_PRED_SHAPE && c->misb_at == 1 && !c->declare_c[c->n_heads - 1]) c->misb_at = 2;
    /* the voxels */
    int64_t n = c->batch * c->cin * c->size[0] * c->size[1] * c->size[2];
    c->input = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        c->input[i] = in->n ? (float)((int)take(in) - 128) / 16.0f : (float)((i * 7919) % 23) / 4.0f - 2.5f;
    /* NaN voxels: they must propagate exactly as in the reference (MONAI's semantics) */
    if (c->misb == MISB_INPUT_NAN)
        for (int64_t i = c->misb_at - 1; i < n; i += 7 * c->misb_at + 3) c->input[i] = NAN;
    return 0;
}

/* ---- one run ----------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || size > 4096) return 0;
    bytes in = {data, size};
    cfg c;
    build(&c, &in);

    swi_params p;
    swi_params_init(&p, c.dims);
    for (int k = 0; k < c.dims; k++) {
        p.roi[k] = c.roi_param[k];
        p.overlap[k] = c.overlap[k];
        p.sigma_scale[k] = c.sigma[k];
        if (!c.auto_order) p.order[k] = c.order[k];
    }
    p.order_mode = c.auto_order ? SWI_ORDER_AUTO : SWI_ORDER_FIXED;
    p.mode = c.mode;
    p.weight_map = c.weight_map;
    p.padding_mode = c.pad;
    p.cval = c.cval;
    p.sw_batch_size = c.sw;
    p.threads = c.threads;
    p.pipeline = c.pipeline < 0 ? SWI_PIPELINE_AUTO : c.pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    p.max_memory = c.max_memory;
    p.mirror_axes = c.mirror;
    p.accumulate = c.f16 ? SWI_ACCUMULATE_FLOAT16 : SWI_ACCUMULATE_FLOAT32;
    p.n_heads = c.n_heads;
    for (int h = 0; h < c.n_heads; h++) {
        p.heads[h].channels = c.declare_c[h] ? c.C[h] : 0;
        for (int k = 0; k < c.dims; k++) p.heads[h].spatial[k] = c.declare_s[h] ? c.o[h][k] : 0;
    }
    int progress_calls = 0;
    cancel_at = c.misb == MISB_CANCEL ? c.misb_at : 0;
    p.progress = progress_cb;
    p.progress_user = &progress_calls;

    swi_tensor t = {.data = c.input, .batch = c.batch, .channels = c.cin, .dims = c.dims, .size = {0}};
    for (int k = 0; k < c.dims; k++) t.size[k] = c.size[k];

    /* What the parameters call for. */
    int reflect_bad = 0;
    for (int k = 0; k < c.dims; k++) {
        int64_t pad = (c.size[k] > c.r[k] ? c.size[k] : c.r[k]) - c.size[k];
        if (c.pad == SWI_PAD_REFLECT && pad > 0 && pad - pad / 2 >= c.size[k]) reflect_bad = 1;
    }
    refhead rh[2];
    memset(rh, 0, sizeof rh);
    int placeable = 1;
    for (int h = 0; h < c.n_heads; h++) {
        if (!reflect_bad) fuzz_reference(&c, h, &rh[h]);
        placeable &= rh[h].placeable;
    }

    /* Outputs and their destinations. */
    sink sinks[4];
    void *dst[4] = {0};
    size_t need[4] = {0};
    memset(sinks, 0, sizeof sinks);
    for (int i = 0; i < c.n_outs; i++) {
        swi_output *o = &c.outs[i];
        int h = o->head;
        int64_t ov = rh[h].out[0] * rh[h].out[1] * rh[h].out[2];
        swi_dtype dt = o->reduce == SWI_REDUCE_ARGMAX
                           ? (o->dtype == SWI_DTYPE_AUTO ? SWI_DTYPE_UINT8 : o->dtype)
                           : SWI_DTYPE_FLOAT32;
        size_t es = dt == SWI_DTYPE_UINT8 ? 1 : dt == SWI_DTYPE_UINT16 ? 2 : 4;
        int64_t planes = (o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_CUSTOM ||
                          o->reduce == SWI_REDUCE_SOFTMAX)
                             ? c.C[h]
                             : 1;
        if (!rh[h].placeable || reflect_bad) {
            /* no grid, the run must fail; a buffer the size of the image (every head here
             * is at most the image's resolution) leaves it no other reason than the real one */
            ov = c.size[0] * c.size[1] * c.size[2];
        }
        need[i] = (size_t)(c.batch * planes * ov) * es;
        if (c.where[i] & 1 && o->reduce != SWI_REDUCE_CUSTOM) {
            /* exactly the size needed: ASan catches a write past it */
            dst[i] = malloc(need[i]);
            memset(dst[i], 0xAB, need[i]);
            o->dst = dst[i];
            o->dst_bytes = need[i];
        }
        if (c.where[i] >= 2) {
            sink *s = &sinks[i];
            s->c = &c;
            s->index = i;
            for (int k = 0; k < D; k++) s->out[k] = k < c.dims ? rh[h].out[k] : 1;
            s->planes = planes;
            s->esize = es;
            s->data = calloc(1, need[i] ? need[i] : 1);
            s->hits = calloc((size_t)(c.batch * ov), sizeof(int));
            s->fail_at = c.misb == MISB_CALLBACK && i == 0 ? c.misb_at : 0;
            o->on_region = on_region;
            o->user = s;
        }
    }
    int any_callback_stops = 0;
    for (int i = 0; i < c.n_outs; i++) any_callback_stops |= sinks[i].fail_at > 0;

    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");

    /* Plan first: it must agree with the run on the grid. */
    swi_plan plan;
    swi_status pst = swi_plan_run(ctx, &p, &t, c.outs, c.n_outs, &plan);
    int64_t nwin = 1;
    for (int k = 0; k < c.dims; k++) {
        int64_t st[64];
        int64_t n = fuzz_starts_of(c.size[k], c.r[k], c.overlap[k], st);
        int64_t got[64];
        int64_t m = -1;
        CHECK(swi_window_starts(NULL, c.size[k], c.r[k], c.overlap[k], got, 64, &m) == SWI_OK,
              "swi_window_starts dim %d failed", k);
        CHECK(m == n, "swi_window_starts dim %d: %lld starts, expected %lld", k, (long long)m, (long long)n);
        for (int64_t q = 0; q < n; q++)
            CHECK(got[q] == st[q], "swi_window_starts dim %d start %lld", k, (long long)q);
        nwin *= n;
    }
    if (pst == SWI_OK) {
        CHECK(plan.windows_per_image == nwin, "plan: %lld windows per image, expected %lld",
              (long long)plan.windows_per_image, (long long)nwin);
        CHECK(plan.windows_total == nwin * c.batch, "plan: windows_total");
        CHECK(plan.sw_batch_size >= 1 && plan.sw_batch_size <= c.sw, "plan: sw_batch_size %d",
              plan.sw_batch_size);
        CHECK(plan.predictor_calls ==
                  (plan.windows_total + plan.sw_batch_size - 1) / plan.sw_batch_size * c.passes,
              "plan: predictor_calls");
        CHECK(c.max_memory == 0 || plan.bytes_peak <= c.max_memory, "plan: peak %zu over budget %zu",
              plan.bytes_peak, c.max_memory);
    } else {
        CHECK(swi_last_error(ctx)[0] != '\0', "plan failed without a message");
        CHECK(pst == SWI_ERR_BUDGET || (pst == SWI_ERR_INVALID_ARG && reflect_bad) ||
                  (pst == SWI_ERR_SHAPE && !placeable),
              "plan failed: %s: %s", swi_status_name(pst), swi_last_error(ctx));
    }

    pstate ps = {&c, 0, 0, NULL};
    swi_predictor net_ = {predict, &ps};
    swi_status st = swi_run(ctx, &p, &t, &net_, c.outs, c.n_outs);

    if (st != SWI_OK) {
        const char *msg = swi_last_error(ctx);
        CHECK(msg[0] != '\0', "%s without a message", swi_status_name(st));
        int ok = 0;
        switch (st) {
        case SWI_ERR_INVALID_ARG: ok = reflect_bad; break;
        case SWI_ERR_SHAPE: ok = !placeable || c.misb == MISB_PRED_SHAPE; break;
        case SWI_ERR_BUDGET: ok = c.max_memory > 0; break;
        case SWI_ERR_PREDICTOR: ok = c.misb == MISB_PRED_FAIL; break;
        case SWI_ERR_CALLBACK: ok = any_callback_stops; break;
        case SWI_ERR_CANCELLED: ok = c.misb == MISB_CANCEL; break;
        default: ok = 0; break;
        }
        CHECK(ok, "unexpected %s: %s", swi_status_name(st), msg);
        for (int i = 0; i < c.n_outs; i++)
            CHECK(swi_result(ctx, i, NULL) == NULL, "a failed run reports result %d", i);
    } else {
        CHECK(!reflect_bad && placeable, "run succeeded where it must fail");
        CHECK(c.misb != MISB_PRED_FAIL || ps.calls < c.misb_at, "predictor failure ignored");
        CHECK(c.misb != MISB_PRED_SHAPE || ps.calls < c.misb_at, "shape change ignored");
        CHECK(ps.windows == nwin * c.batch * c.passes, "predictor saw %lld windows, expected %lld",
              (long long)ps.windows, (long long)(nwin * c.batch * c.passes));
        if (pst == SWI_OK && c.max_memory == 0)
            CHECK(ps.calls == plan.predictor_calls, "%d predictor calls, plan said %lld", ps.calls,
                  (long long)plan.predictor_calls);
        for (int i = 0; i < c.n_outs; i++)
            CHECK(!sinks[i].fail_at || sinks[i].calls < sinks[i].fail_at, "callback stop ignored");
        int nan_run = c.misb == MISB_PRED_NAN && ps.calls >= c.misb_at;
        for (int h = 0; h < c.n_heads; h++) {
            int64_t sz[SWI_MAX_DIMS];
            CHECK(swi_result_size(ctx, h, sz) == c.dims, "swi_result_size dims");
            for (int k = 0; k < c.dims; k++)
                CHECK(sz[k] == rh[h].out[k], "head %d output size[%d] = %lld, expected %lld", h, k,
                      (long long)sz[k], (long long)rh[h].out[k]);
            CHECK(swi_result_channels(ctx, h) == c.C[h], "head %d channels", h);
        }
        for (int i = 0; i < c.n_outs; i++) {
            const swi_output *o = &c.outs[i];
            const refhead *r = &rh[o->head];
            swi_dtype dt = o->reduce == SWI_REDUCE_ARGMAX
                               ? (o->dtype == SWI_DTYPE_AUTO ? SWI_DTYPE_UINT8 : o->dtype)
                               : SWI_DTYPE_FLOAT32;
            size_t bytes = 0;
            const void *res = swi_result(ctx, i, &bytes);
            if (o->reduce == SWI_REDUCE_CUSTOM || o->dst || o->on_region) {
                CHECK(res == NULL, "output %d: a library result for a caller-owned output", i);
            } else {
                CHECK(res != NULL && bytes == need[i],
                      "output %d: library result %p of %zu bytes, expected %zu", i, res, bytes, need[i]);
                if (!nan_run) fuzz_check_values(&c, i, r, res, dt);
            }
            if (o->dst && !nan_run) fuzz_check_values(&c, i, r, o->dst, dt);
            if (o->on_region) {
                int64_t ov = r->out[0] * r->out[1] * r->out[2];
                for (int64_t v = 0; v < c.batch * ov; v++)
                    CHECK(sinks[i].hits[v] == 1, "output %d: voxel %lld delivered %d times", i, (long long)v,
                          sinks[i].hits[v]);
                if (!nan_run) fuzz_check_values(&c, i, r, sinks[i].data, dt);
                if (o->dst)
                    CHECK(memcmp(sinks[i].data, o->dst, need[i]) == 0, "output %d: regions differ from dst",
                          i);
            }
        }
    }
    swi_free(ctx);

    for (int i = 0; i < c.n_outs; i++) {
        free(dst[i]);
        free(sinks[i].data);
        free(sinks[i].hits);
    }
    for (int h = 0; h < 2; h++) {
        free(rh[h].scores);
        free(rh[h].tol16);
    }
    free(c.weight_map);
    free(c.input);
    return 0;
}
