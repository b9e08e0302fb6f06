/*
 * test_errors.c -- every way a run can be refused or stopped returns its own status, a
 * message naming the culprit, and leaves nothing allocated (run under ASan/valgrind).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

#define H 12
#define W 10

static float g_input[2 * 2 * H * W];

/* ---- a small configurable predictor -------------------------------------- */

typedef struct test_pred {
    int64_t channels;     /* channels requested for head 0 (and head 1 + 1) */
    int64_t spatial[3];   /* requested window; 0 = the batch's roi */
    int change_at;        /* call from which channels + 1 is requested; -1 never */
    int fail_at;          /* call that returns failure; -1 never */
    const char *fail_msg; /* given to swi_batch_set_error when failing (NULL: none) */
    int heads;            /* heads requested per call */
    int64_t winner;       /* channel that gets the largest score */
    int calls;
    int null_outputs; /* swi_batch_output returned NULL this many times */
} test_pred;

static void pred_defaults(test_pred *tp, int64_t channels) {
    memset(tp, 0, sizeof(*tp));
    tp->channels = channels;
    tp->change_at = -1;
    tp->fail_at = -1;
    tp->heads = 1;
}

static int test_predict(void *user, swi_batch *b) {
    test_pred *tp = user;
    int call = tp->calls++;
    if (call == tp->fail_at) {
        if (tp->fail_msg != NULL) swi_batch_set_error(b, tp->fail_msg);
        return 1;
    }
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t sp[3], vox = 1;
    for (int k = 0; k < d; k++) {
        sp[k] = tp->spatial[k] > 0 ? tp->spatial[k] : roi[k];
        vox *= sp[k];
    }
    for (int h = 0; h < tp->heads; h++) {
        int64_t c = tp->channels + h + (tp->change_at >= 0 && call >= tp->change_at ? 1 : 0);
        float *out = swi_batch_output(b, h, c, sp);
        if (out == NULL) {
            tp->null_outputs++;
            return 1;
        }
        for (int64_t i = 0; i < (int64_t)n * c * vox; i++) {
            int64_t ch = (i / vox) % c;
            out[i] = (ch == tp->winner ? 2.0f : 0.0f) + 0.001f * (float)(ch % 7);
        }
    }
    return 0;
}

/* ---- setup ---------------------------------------------------------------- */

typedef struct setup {
    swi_params p;
    swi_tensor in;
    test_pred tp;
    swi_predictor pred;
    float *dst;
    swi_output out;
} setup;

/* 2-D, one image of H x W, one input channel, roi 4x4, 2 output channels into dst. */
static void setup_init(setup *s) {
    memset(s, 0, sizeof(*s));
    swi_params_init(&s->p, 2);
    s->p.roi[0] = 4;
    s->p.roi[1] = 4;
    s->p.sw_batch_size = 2;
    s->p.threads = 1;
    s->in.data = g_input;
    s->in.batch = 1;
    s->in.channels = 1;
    s->in.dims = 2;
    s->in.size[0] = H;
    s->in.size[1] = W;
    pred_defaults(&s->tp, 2);
    s->pred.predict = test_predict;
    s->pred.user = &s->tp;
    s->dst = malloc(sizeof(float) * 2 * 2 * 2 * H * W);
    swi_output_init(&s->out, 0, SWI_REDUCE_NONE);
    s->out.dst = s->dst;
    s->out.dst_bytes = sizeof(float) * 2 * H * W;
}

static void setup_free(setup *s) {
    free(s->dst);
    s->dst = NULL;
}

static swi_status run(swi_ctx *ctx, setup *s) {
    s->tp.calls = 0;
    return swi_run(ctx, &s->p, &s->in, &s->pred, &s->out, 1);
}

/* Check status and that the message names `needle` (NULL: only non-empty). */
static void expect_msg(const swi_ctx *ctx, swi_status got, swi_status want, const char *needle,
                       const char *what, int line) {
    const char *msg = swi_last_error(ctx);
    CHECK(got == want, "line %d, %s: status %s, expected %s (message: \"%s\")", line, what,
          swi_status_name(got), swi_status_name(want), msg != NULL ? msg : "(null)");
    CHECK(msg != NULL && msg[0] != '\0', "line %d, %s: empty error message", line, what);
    if (needle != NULL && msg != NULL)
        CHECK(strstr(msg, needle) != NULL, "line %d, %s: message \"%s\" does not name \"%s\"", line, what,
              msg, needle);
}
#define EXPECT(ctx, got, want, needle, what) expect_msg(ctx, got, want, needle, what, __LINE__)

/* The message names one of several words. */
static int msg_has_any(const swi_ctx *ctx, const char *a, const char *b, const char *c) {
    const char *m = swi_last_error(ctx);
    return m != NULL && ((a && strstr(m, a)) || (b && strstr(m, b)) || (c && strstr(m, c)));
}

static void expect_ok(swi_ctx *ctx, swi_status st, const char *what, int line) {
    CHECK(st == SWI_OK, "line %d, %s: %s: %s", line, what, swi_status_name(st), swi_last_error(ctx));
    if (st == SWI_OK)
        CHECK(swi_last_error(ctx) != NULL && swi_last_error(ctx)[0] == '\0',
              "line %d, %s: last error not cleared after success: \"%s\"", line, what, swi_last_error(ctx));
}
#define EXPECT_OK(ctx, st, what) expect_ok(ctx, st, what, __LINE__)

/* ---- tests ---------------------------------------------------------------- */

static void test_baseline(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    EXPECT_OK(ctx, run(ctx, &s), "baseline run");
    CHECK(s.tp.calls > 0, "baseline: predictor never called");
    /* windows 0,3,6,8 x 0,3,6 = 12, sw_batch 2 */
    swi_plan plan;
    EXPECT_OK(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), "baseline plan");
    CHECK(plan.windows_total == 12, "baseline plan: %lld windows, expected 12",
          (long long)plan.windows_total);
    setup_free(&s);
}

static void test_null_arguments(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    swi_plan plan;
    CHECK(swi_run(NULL, &s.p, &s.in, &s.pred, &s.out, 1) == SWI_ERR_INVALID_ARG, "ctx NULL");
    CHECK(swi_plan_run(NULL, &s.p, &s.in, &s.out, 1, &plan) == SWI_ERR_INVALID_ARG, "plan ctx NULL");
    EXPECT(ctx, swi_run(ctx, NULL, &s.in, &s.pred, &s.out, 1), SWI_ERR_INVALID_ARG, "params", "params NULL");
    EXPECT(ctx, swi_run(ctx, &s.p, NULL, &s.pred, &s.out, 1), SWI_ERR_INVALID_ARG, "input", "input NULL");
    EXPECT(ctx, swi_run(ctx, &s.p, &s.in, NULL, &s.out, 1), SWI_ERR_INVALID_ARG, "predictor",
           "predictor NULL");
    swi_predictor nofn = {NULL, NULL};
    EXPECT(ctx, swi_run(ctx, &s.p, &s.in, &nofn, &s.out, 1), SWI_ERR_INVALID_ARG, "predict",
           "predictor->predict NULL");
    EXPECT(ctx, swi_run(ctx, &s.p, &s.in, &s.pred, NULL, 1), SWI_ERR_INVALID_ARG, "outputs", "outputs NULL");
    EXPECT(ctx, swi_run(ctx, &s.p, &s.in, &s.pred, &s.out, -1), SWI_ERR_INVALID_ARG, "outputs",
           "n_outputs -1");
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, NULL), SWI_ERR_INVALID_ARG, "plan", "plan NULL");
    s.in.data = NULL;
    EXPECT(ctx, swi_run(ctx, &s.p, &s.in, &s.pred, &s.out, 1), SWI_ERR_INVALID_ARG, "data",
           "input->data NULL in swi_run");
    /* ...but planning reads shapes only. */
    EXPECT_OK(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), "plan with data NULL");

    CHECK(swi_status_name((swi_status)1234) != NULL, "swi_status_name of an unknown status");
    /* every status has its own name, spelled as in swi.h (callers log and match them) */
    static const struct {
        swi_status st;
        const char *name;
    } names[] = {
        {SWI_OK, "SWI_OK"},
        {SWI_ERR_INVALID_ARG, "SWI_ERR_INVALID_ARG"},
        {SWI_ERR_NOMEM, "SWI_ERR_NOMEM"},
        {SWI_ERR_OVERFLOW, "SWI_ERR_OVERFLOW"},
        {SWI_ERR_PREDICTOR, "SWI_ERR_PREDICTOR"},
        {SWI_ERR_SHAPE, "SWI_ERR_SHAPE"},
        {SWI_ERR_BUDGET, "SWI_ERR_BUDGET"},
        {SWI_ERR_CALLBACK, "SWI_ERR_CALLBACK"},
        {SWI_ERR_CANCELLED, "SWI_ERR_CANCELLED"},
        {SWI_ERR_THREAD, "SWI_ERR_THREAD"},
        {SWI_ERR_READ, "SWI_ERR_READ"},
        {SWI_ERR_IO, "SWI_ERR_IO"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(strcmp(swi_status_name(names[i].st), names[i].name) == 0, "swi_status_name(%d) is \"%s\"",
              (int)names[i].st, swi_status_name(names[i].st));
    CHECK(swi_result(ctx, -1, NULL) == NULL, "swi_result(-1)");
    CHECK(swi_result(ctx, 99, NULL) == NULL, "swi_result(99)");
    int64_t size[SWI_MAX_DIMS];
    CHECK(swi_result_size(ctx, 99, size) == 0, "swi_result_size(head 99)");
    CHECK(swi_result_channels(ctx, -1) == 0, "swi_result_channels(-1)");
    swi_free(NULL);
    setup_free(&s);
}

static void test_params(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    static const double bad_overlaps[] = {-0.1, 1.0, 1.5, NAN, INFINITY};
    for (int i = 0; i < 5; i++) {
        s.p.overlap[1] = bad_overlaps[i];
        EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "overlap", "overlap out of [0,1)");
        CHECK(s.tp.calls == 0, "predictor called despite a bad overlap");
    }
    setup_free(&s);

    setup_init(&s);
    s.p.dims = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dims", "params dims 0");
    s.p.dims = SWI_MAX_DIMS + 1;
    s.in.dims = SWI_MAX_DIMS + 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "params.dims", "params dims 5");
    s.in.dims = 2;
    s.p.dims = 2;
    s.in.dims = 3;
    s.in.size[2] = 5;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dims", "tensor dims 3 vs params dims 2");
    s.in.dims = 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dims", "tensor dims 1 vs params dims 2");
    setup_free(&s);

    setup_init(&s);
    s.in.size[1] = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "size", "image size 0");
    s.in.size[1] = -4;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "size", "image size -4");
    s.in.size[1] = W;
    s.in.batch = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "batch", "batch 0");
    s.in.batch = -1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "batch", "batch -1");
    s.in.batch = 1;
    s.in.channels = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "channels", "input channels 0");
    s.in.channels = 1;
    setup_free(&s);

    setup_init(&s);
    s.p.sw_batch_size = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "sw_batch_size", "sw_batch_size 0");
    s.p.sw_batch_size = -3;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "sw_batch_size", "sw_batch_size -3");
    setup_free(&s);

    setup_init(&s);
    s.p.mode = (swi_blend)9;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "mode", "blend mode 9");
    s.p.mode = SWI_BLEND_GAUSSIAN;
    s.p.sigma_scale[0] = 0.0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "sigma_scale", "sigma_scale 0");
    s.p.sigma_scale[0] = -1.0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "sigma_scale", "sigma_scale -1");
    s.p.sigma_scale[0] = 0.125;
    s.p.mode = SWI_BLEND_CUSTOM;
    s.p.weight_map = NULL;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "weight_map", "custom blend, no map");
    float map[16];
    for (int i = 0; i < 16; i++) map[i] = 0.5f;
    s.p.weight_map = map;
    EXPECT_OK(ctx, run(ctx, &s), "custom blend with a positive map");
    map[5] = 0.0f;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "weight_map", "custom map with a 0");
    map[5] = -1.0f;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "weight_map", "custom map with a -1");
    map[5] = NAN;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "weight_map", "custom map with a NaN");
    map[5] = INFINITY;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "weight_map", "custom map with an inf");
    setup_free(&s);

    setup_init(&s);
    s.p.padding_mode = (swi_pad)7;
    s.p.roi[0] = 16; /* padding actually used */
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "padding", "padding mode 7");
    /* reflect: image 12 x 10, roi 16 x 4: pad 4 (2 + 2) < 12 is fine... */
    s.p.padding_mode = SWI_PAD_REFLECT;
    EXPECT_OK(ctx, run(ctx, &s), "reflect with pad 4 < 12");
    /* ...a pad of 28 (14 + 14) along a dim of 12 is not. */
    s.p.roi[0] = 40;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "padding", "reflect pad 28 >= size 12");
    /* along dim 1 (size 10): roi 31 -> 10 + 11 */
    s.p.roi[0] = 4;
    s.p.roi[1] = 31;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "padding", "reflect pad 21 >= size 10");
    s.p.padding_mode = SWI_PAD_CIRCULAR;
    s.p.roi[1] = 14;
    EXPECT_OK(ctx, run(ctx, &s), "circular with pad 2 + 2");
    setup_free(&s);

    setup_init(&s);
    s.p.cval = NAN;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "cval", "cval NaN");
    s.p.cval = 0.0f;
    s.p.threads = -1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "threads", "threads -1");
    s.p.threads = 1;
    s.p.n_heads = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "n_heads", "n_heads 0");
    s.p.n_heads = SWI_MAX_HEADS + 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "n_heads", "n_heads 9");
    s.p.n_heads = 1;
    s.p.order_mode = SWI_ORDER_FIXED;
    s.p.order[0] = 0;
    s.p.order[1] = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "order", "order {0, 0}");
    s.p.order[1] = 2;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "order", "order {0, 2} in 2-D");
    s.p.order[0] = 1;
    s.p.order[1] = 0;
    EXPECT_OK(ctx, run(ctx, &s), "order {1, 0}");
    s.p.order_mode = (swi_order_mode)2;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "order_mode", "order_mode 2");
    s.p.order_mode = SWI_ORDER_AUTO;
    s.p.pipeline = (swi_pipeline)3;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "pipeline", "pipeline 3");
    s.p.pipeline = SWI_PIPELINE_AUTO;
    s.p.heads[0].channels = -2;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "channels", "declared channels -2");
    s.p.heads[0].channels = 0;
    s.p.heads[0].spatial[1] = -4;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "spatial", "declared spatial -4");
    s.p.heads[0].spatial[1] = 0;
    EXPECT_OK(ctx, run(ctx, &s), "back to valid parameters");
    setup_free(&s);
}

static void test_outputs(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    s.out.dst_bytes = sizeof(float) * 2 * H * W - 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dst_bytes", "dst one byte short");
    s.out.dst_bytes = sizeof(float) * 2 * H * W;

    /* Learned channels: the size check can only happen once they are known. */
    s.out.dst_bytes = sizeof(float) * 1 * H * W;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dst_bytes", "dst for 1 of 2 learned channels");
    s.p.heads[0].channels = 2;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dst_bytes", "dst for 1 of 2 declared channels");
    CHECK(s.tp.calls == 0, "declared channels: dst_bytes must be refused before predicting");
    swi_plan plan;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_INVALID_ARG, "dst_bytes",
           "swi_plan_run: dst for 1 of 2 declared channels");
    s.out.dst_bytes = sizeof(float) * 2 * H * W;

    s.out.head = 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "head", "output of head 1 with one head");
    s.out.head = -1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "head", "output of head -1");
    s.out.head = 0;
    s.out.reduce = (swi_reduce)42;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "reduce", "reduce 42");
    s.out.reduce = SWI_REDUCE_ARGMAX;
    s.out.dtype = SWI_DTYPE_FLOAT32;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dtype", "argmax as float32");
    s.out.reduce = SWI_REDUCE_MAX;
    s.out.dtype = SWI_DTYPE_UINT8;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dtype", "max as uint8");
    s.out.dtype = (swi_dtype)17;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "dtype", "dtype 17");
    s.out.dtype = SWI_DTYPE_AUTO;
    s.out.reduce = SWI_REDUCE_CUSTOM;
    s.out.dst = NULL;
    s.out.on_region = NULL;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_INVALID_ARG, "on_region", "custom reduction, no callback");
    setup_free(&s);
}

/* Too many classes for a uint8 label map. */
static void test_label_range(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    uint8_t *labels8 = malloc((size_t)H * W);
    uint16_t *labels16 = malloc((size_t)H * W * 2);
    s.tp.channels = 300;
    s.tp.winner = 280;
    s.out.reduce = SWI_REDUCE_ARGMAX;
    s.out.dtype = SWI_DTYPE_UINT8;
    s.out.dst = labels8;
    s.out.dst_bytes = (size_t)H * W;

    s.p.heads[0].channels = 300;
    swi_status st = run(ctx, &s);
    EXPECT(ctx, st, SWI_ERR_INVALID_ARG, NULL, "uint8 labels for 300 declared channels");
    CHECK(msg_has_any(ctx, "channels", "dtype", "uint8"),
          "uint8 for 300 classes: message \"%s\" names neither channels nor dtype", swi_last_error(ctx));
    CHECK(s.tp.calls == 0, "declared 300 channels: refused only after predicting");

    s.p.heads[0].channels = 0; /* learned at the first call */
    st = run(ctx, &s);
    CHECK(st != SWI_OK, "uint8 labels for 300 learned channels must fail");
    CHECK(msg_has_any(ctx, "channels", "dtype", "uint8"),
          "uint8 for 300 learned classes: message \"%s\" names neither channels nor dtype",
          swi_last_error(ctx));

    /* AUTO gives uint16 past 256 classes; uint16 explicitly as well. */
    s.out.dtype = SWI_DTYPE_AUTO;
    s.out.dst = labels16;
    s.out.dst_bytes = (size_t)H * W; /* a uint8 map's size is too small */
    st = run(ctx, &s);
    EXPECT(ctx, st, SWI_ERR_INVALID_ARG, "dst_bytes", "AUTO labels of 300 classes in H*W bytes");
    s.out.dst_bytes = (size_t)H * W * 2;
    for (int pass = 0; pass < 2; pass++) {
        memset(labels16, 0, (size_t)H * W * 2);
        st = run(ctx, &s);
        EXPECT_OK(ctx, st, pass == 0 ? "AUTO labels of 300 classes" : "UINT16 labels");
        int64_t wrong = 0;
        for (int i = 0; i < H * W; i++) wrong += labels16[i] != 280;
        CHECK(st != SWI_OK || wrong == 0, "uint16 labels: %lld voxels not 280", (long long)wrong);
        s.out.dtype = SWI_DTYPE_UINT16;
    }
    /* 256 classes still fit uint8. */
    s.tp.channels = 256;
    s.tp.winner = 255;
    s.p.heads[0].channels = 256;
    s.out.dtype = SWI_DTYPE_UINT8;
    s.out.dst = labels8;
    s.out.dst_bytes = (size_t)H * W;
    memset(labels8, 0, (size_t)H * W);
    st = run(ctx, &s);
    EXPECT_OK(ctx, st, "uint8 labels for 256 classes");
    int64_t wrong = 0;
    for (int i = 0; i < H * W; i++) wrong += labels8[i] != 255;
    CHECK(st != SWI_OK || wrong == 0, "uint8 labels: %lld voxels not 255", (long long)wrong);
    free(labels8);
    free(labels16);
    setup_free(&s);
}

static void test_overflow(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    swi_plan plan;
    s.p.dims = 3;
    s.in.dims = 3;
    s.in.data = NULL;
    s.out.dst = NULL; /* library-owned */
    s.out.dst_bytes = 0;
    s.p.roi[0] = s.p.roi[1] = s.p.roi[2] = 4;
    s.in.size[0] = s.in.size[1] = s.in.size[2] = (int64_t)1 << 30;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_OVERFLOW, NULL,
           "image 2^90 voxels");
    s.in.size[0] = s.in.size[1] = s.in.size[2] = 8;
    s.in.batch = (int64_t)1 << 40;
    s.in.channels = (int64_t)1 << 40;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_OVERFLOW, NULL,
           "batch * channels = 2^80");
    s.in.batch = 1;
    s.in.channels = 1;
    s.p.roi[0] = s.p.roi[1] = s.p.roi[2] = (int64_t)1 << 25;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_OVERFLOW, "roi",
           "window 2^75 voxels");
    s.p.roi[0] = s.p.roi[1] = s.p.roi[2] = 4;
    s.p.heads[0].channels = (int64_t)1 << 62;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_OVERFLOW, NULL,
           "2^62 declared channels");
    s.p.heads[0].channels = 0;
    s.in.size[0] = INT64_MAX;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_OVERFLOW, NULL, "size INT64_MAX");
    /* swi_run must refuse before touching the data pointer. */
    s.in.data = g_input;
    s.in.size[0] = s.in.size[1] = s.in.size[2] = (int64_t)1 << 30;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_OVERFLOW, NULL, "swi_run on 2^90 voxels");
    CHECK(s.tp.calls == 0, "predictor called on an overflowing image");
    setup_free(&s);
}

static void test_predictor_shape(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    s.out.dst = NULL;
    s.out.dst_bytes = 0;

    /* learned channels: 2 at the first call, 3 from the third on */
    s.tp.change_at = 2;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_SHAPE, NULL, "channels change from 2 to 3 at call 3");
    CHECK(s.tp.null_outputs == 1, "swi_batch_output must return NULL on the changed shape");
    CHECK(swi_result(ctx, 0, NULL) == NULL, "failed run left a library-owned result");

    /* declared channels disagree at the first call */
    s.tp.change_at = -1;
    s.p.heads[0].channels = 3;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_SHAPE, NULL, "declared 3 channels, predictor gives 2");
    s.p.heads[0].channels = 0;

    /* declared spatial disagrees */
    s.p.heads[0].spatial[0] = 4;
    s.p.heads[0].spatial[1] = 4;
    s.tp.spatial[0] = 4;
    s.tp.spatial[1] = 3;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_SHAPE, NULL, "declared 4x4, predictor gives 4x3");
    s.p.heads[0].spatial[0] = s.p.heads[0].spatial[1] = 0;

    /* A zoom with fractional positions is placed like MONAI does (floor), so 4 -> 3 works
     * (starts 3 and 6 land at 2 and 4)... */
    s.tp.spatial[0] = 3;
    s.tp.spatial[1] = 4;
    EXPECT_OK(ctx, run(ctx, &s), "zoom 3/4 with starts 3, 6");
    s.tp.spatial[0] = s.tp.spatial[1] = 0;
    setup_free(&s);

    /* ...but a window whose zoomed extent comes out wrong cannot be placed: roi 49 -> 1
     * gives z = 1/49 and 49 * z = 0.9999999999999999, so [0, 49) maps to [0, 0). */
    setup_init(&s);
    static float line[49];
    s.p.dims = 1;
    s.in.dims = 1;
    s.in.data = line;
    s.in.size[0] = 49;
    s.p.roi[0] = 49;
    s.tp.spatial[0] = 1;
    s.out.dst = NULL;
    s.out.dst_bytes = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_SHAPE, NULL, "roi 49 -> 1 maps the window to [0, 0)");
    setup_free(&s);
    setup_init(&s);
    s.out.dst = NULL;
    s.out.dst_bytes = 0;

    /* zero channels */
    s.tp.channels = 0;
    swi_status st = run(ctx, &s);
    CHECK(st != SWI_OK, "a predictor asking for 0 channels must fail the run");
    CHECK(s.tp.null_outputs >= 1, "swi_batch_output(channels 0) must return NULL");
    s.tp.channels = 2;

    /* a head never requested */
    s.p.n_heads = 2;
    s.tp.heads = 1;
    st = run(ctx, &s);
    CHECK(st != SWI_OK, "a predictor that never fills head 1 must fail the run");
    s.tp.heads = 2;
    EXPECT_OK(ctx, run(ctx, &s), "two heads filled");
    /* asking for head 2 of 2 */
    s.tp.heads = 3;
    st = run(ctx, &s);
    CHECK(st != SWI_OK, "swi_batch_output(head 2) with 2 heads must fail the run");
    CHECK(s.tp.null_outputs >= 1, "swi_batch_output(head 2) with 2 heads must return NULL");
    setup_free(&s);
}

static void test_predictor_failure(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    /* a successful run with a library-owned result, then a failing one drops it */
    s.out.dst = NULL;
    s.out.dst_bytes = 0;
    EXPECT_OK(ctx, run(ctx, &s), "library-owned result");
    size_t bytes = 0;
    CHECK(swi_result(ctx, 0, &bytes) != NULL && bytes == sizeof(float) * 2 * H * W,
          "library-owned result missing or %zu bytes", bytes);

    s.tp.fail_at = 2;
    s.tp.fail_msg = "model exploded at call 3";
    EXPECT(ctx, run(ctx, &s), SWI_ERR_PREDICTOR, "model exploded at call 3", "predictor fails at call 3");
    CHECK(s.tp.calls == 3, "predictor called %d times after failing at call 3", s.tp.calls);
    CHECK(swi_result(ctx, 0, NULL) == NULL, "failed run left a library-owned result");

    s.tp.fail_at = 0;
    s.tp.fail_msg = NULL;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_PREDICTOR, NULL, "predictor fails at once, no message");

    /* with threads and pipelining the failure must still stop everything cleanly */
    s.p.threads = 3;
    s.p.pipeline = SWI_PIPELINE_ON;
    s.tp.fail_at = 4;
    s.tp.fail_msg = "late failure";
    s.out.dst = s.dst;
    s.out.dst_bytes = sizeof(float) * 2 * H * W;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_PREDICTOR, "late failure", "predictor fails at call 5");

    s.tp.fail_at = -1;
    EXPECT_OK(ctx, run(ctx, &s), "the context is usable after a failure");
    setup_free(&s);
}

typedef struct cb_state {
    atomic_int calls;
    int fail_at;
} cb_state;

static int failing_region(void *user, const swi_region *r) {
    (void)r;
    cb_state *cs = user;
    /* calls may come from several threads; only "some call fails" matters here */
    int c = atomic_fetch_add(&cs->calls, 1);
    return c >= cs->fail_at ? 1 : 0;
}

static void test_callbacks(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    s.in.batch = 2;
    for (int threads = 1; threads <= 3; threads += 2) {
        for (int with_dst = 0; with_dst < 2; with_dst++) {
            cb_state cs;
            atomic_init(&cs.calls, 0);
            cs.fail_at = 1;
            s.p.threads = threads;
            s.out.reduce = SWI_REDUCE_CUSTOM;
            s.out.dst = NULL;
            s.out.dst_bytes = 0;
            if (with_dst) {
                s.out.reduce = SWI_REDUCE_NONE;
                s.out.dst = s.dst;
                s.out.dst_bytes = sizeof(float) * 2 * 2 * H * W;
            }
            s.out.on_region = failing_region;
            s.out.user = &cs;
            EXPECT(ctx, run(ctx, &s), SWI_ERR_CALLBACK, NULL, "region callback fails");
            CHECK(atomic_load(&cs.calls) >= 2, "region callback called %d times", atomic_load(&cs.calls));
        }
    }
    setup_free(&s);
}

typedef struct progress_state {
    int calls;
    int cancel_at;
    int64_t last_done, total;
    int monotonic;
} progress_state;

static int progress_cb(void *user, int64_t done, int64_t total) {
    progress_state *ps = user;
    if (done < ps->last_done || done > total || (ps->total != 0 && ps->total != total)) ps->monotonic = 0;
    ps->last_done = done;
    ps->total = total;
    return ps->calls++ == ps->cancel_at ? 1 : 0;
}

static void test_progress(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    progress_state ps = {0, -1, 0, 0, 1};
    s.p.progress = progress_cb;
    s.p.progress_user = &ps;
    EXPECT_OK(ctx, run(ctx, &s), "run with progress");
    CHECK(ps.monotonic, "progress not monotonic or total changed");
    CHECK(ps.total == 12 && ps.last_done == 12, "progress ended at %lld of %lld, expected 12/12",
          (long long)ps.last_done, (long long)ps.total);
    CHECK(ps.calls == s.tp.calls, "progress called %d times for %d batches", ps.calls, s.tp.calls);

    memset(&ps, 0, sizeof(ps));
    ps.cancel_at = 1;
    ps.monotonic = 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_CANCELLED, NULL, "progress cancels after batch 2");
    CHECK(s.tp.calls <= 3, "predictor called %d times after cancelling at batch 2", s.tp.calls);

    /* cancelling at the very first report, with pipelining and threads */
    memset(&ps, 0, sizeof(ps));
    ps.monotonic = 1;
    s.p.threads = 2;
    s.p.pipeline = SWI_PIPELINE_ON;
    s.out.dst = NULL;
    s.out.dst_bytes = 0;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_CANCELLED, NULL, "progress cancels after batch 1");
    CHECK(swi_result(ctx, 0, NULL) == NULL, "cancelled run left a library-owned result");
    setup_free(&s);
}

/* Does `msg` state v bytes: as the exact number, or rounded with a unit (B, KiB, MiB,
 * GiB, kB, MB, GB) to within 0.5%? */
static int has_number(const char *msg, uint64_t v) {
    char num[32];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    if (msg == NULL) return 0;
    if (strstr(msg, num) != NULL) return 1;
    for (const char *p = msg; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || (p > msg && ((p[-1] >= '0' && p[-1] <= '9') || p[-1] == '.'))) continue;
        char *end;
        double x = strtod(p, &end);
        while (*end == ' ') end++;
        static const struct {
            const char *unit;
            double scale;
        } units[] = {{"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"GB", 1e9},
                     {"MB", 1e6},           {"kB", 1e3},        {"KB", 1e3},     {"B", 1.0}};
        for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            if (strncmp(end, units[u].unit, strlen(units[u].unit)) == 0) {
                double bytes = x * units[u].scale;
                if (fabs(bytes - (double)v) <= 0.005 * (double)v) return 1;
                break;
            }
        }
    }
    return 0;
}

static void test_budget(swi_ctx *ctx) {
    setup s;
    setup_init(&s);
    swi_plan plan;
    s.p.heads[0].channels = 2;
    s.p.sw_batch_size = 8;
    EXPECT_OK(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), "plan without budget");
    size_t min = plan.bytes_min;
    CHECK(min > 0 && min <= plan.bytes_peak, "bytes_min %zu vs bytes_peak %zu", min, plan.bytes_peak);
    CHECK(plan.bytes_peak == plan.bytes_input + plan.bytes_windows + plan.bytes_partial + plan.bytes_outputs +
                                 plan.bytes_scratch + plan.bytes_reuse,
          "bytes_peak %zu is not the sum of its parts", plan.bytes_peak);

    /* bytes_min is the smallest peak of any choice, so no smaller than one window per call
     * without pipelining */
    s.p.sw_batch_size = 1;
    s.p.pipeline = SWI_PIPELINE_OFF;
    EXPECT_OK(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), "plan sw_batch 1, no pipeline");
    CHECK(min <= plan.bytes_peak,
          "bytes_min %zu (planned with sw_batch_size 8) exceeds the peak %zu of sw_batch_size 1 "
          "without pipelining",
          min, plan.bytes_peak);
    if (plan.bytes_peak < min) min = plan.bytes_peak;
    s.p.sw_batch_size = 8;
    s.p.pipeline = SWI_PIPELINE_AUTO;

    s.p.max_memory = min - 1;
    EXPECT(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), SWI_ERR_BUDGET, NULL,
           "plan with a budget one byte below the minimum");
    CHECK(has_number(swi_last_error(ctx), min), "budget message \"%s\" does not state %zu",
          swi_last_error(ctx), min);
    EXPECT(ctx, run(ctx, &s), SWI_ERR_BUDGET, NULL, "run with a budget one byte below the minimum");
    CHECK(has_number(swi_last_error(ctx), min), "budget message \"%s\" does not state %zu",
          swi_last_error(ctx), min);
    CHECK(s.tp.calls == 0, "predictor called despite an impossible budget");
    s.p.max_memory = 1;
    EXPECT(ctx, run(ctx, &s), SWI_ERR_BUDGET, NULL, "run with budget 1 byte");
    CHECK(has_number(swi_last_error(ctx), min), "budget message \"%s\" does not state %zu",
          swi_last_error(ctx), min);

    s.p.max_memory = min;
    EXPECT_OK(ctx, swi_plan_run(ctx, &s.p, &s.in, &s.out, 1, &plan), "plan at the minimum");
    CHECK(plan.bytes_peak <= min, "plan at budget %zu predicts %zu", min, plan.bytes_peak);
    CHECK(plan.sw_batch_size >= 1 && plan.sw_batch_size <= 8, "sw_batch_size %d", plan.sw_batch_size);
    EXPECT_OK(ctx, run(ctx, &s), "run at the minimum");
    setup_free(&s);
}

/* The message helpers every library shares: one byte formatter, one line per message. */
static void test_message_helpers(void) {
    static const struct {
        size_t bytes;
        const char *text;
    } cases[] = {{0, "0 B"},
                 {1023, "1023 B"},
                 {1024, "1.00 KiB"},
                 {1536, "1.50 KiB"},
                 {48023142, "45.8 MiB"},
                 {(size_t)128 << 30, "128 GiB"},
                 {SIZE_MAX, "16.0 EiB"}};
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(strcmp(swi_format_bytes(cases[i].bytes, buf, sizeof buf), cases[i].text) == 0,
              "swi_format_bytes(%zu) = '%s', not '%s'", cases[i].bytes, buf, cases[i].text);
    char tiny[4];
    CHECK(strcmp(swi_format_bytes(1536, tiny, sizeof tiny), "1.5") == 0, "truncated: '%s'", tiny);
    char msg[] = "model.onnx: line 1\nline 2\t\x7f end\r\n ";
    CHECK(strcmp(swi_message_one_line(msg), "model.onnx: line 1 line 2   end") == 0, "one line: '%s'", msg);
    CHECK(swi_message_one_line(NULL) == NULL, "NULL message");
}

int main(void) {
    test_message_helpers();
    for (int i = 0; i < (int)(sizeof(g_input) / sizeof(g_input[0])); i++)
        g_input[i] = (float)((i * 37) % 101) / 101.0f;
    swi_ctx *ctx = swi_create();
    if (ctx == NULL) {
        fprintf(stderr, "swi_create failed\n");
        return 1;
    }
    CHECK(swi_last_error(ctx) != NULL && swi_last_error(ctx)[0] == '\0',
          "a new context has an error message");
    test_baseline(ctx);
    test_null_arguments(ctx);
    test_params(ctx);
    test_outputs(ctx);
    test_label_range(ctx);
    test_predictor_shape(ctx);
    test_predictor_failure(ctx);
    test_callbacks(ctx);
    test_progress(ctx);
    test_budget(ctx);
    test_overflow(ctx);
    swi_free(ctx);
    return check_report("test_errors");
}
