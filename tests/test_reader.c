/*
 * test_reader.c -- inputs read region by region (swi_tensor.reader).
 *
 * The same random configurations run once on an in-memory array and once through a
 * reader serving boxes of that array: the results must be bitwise identical, every box
 * asked for must lie inside the image and hold at most one window, and the plan must not
 * count the input. A reader that fails midway stops the run with SWI_ERR_READ and its
 * message, nothing reported.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

typedef struct src {
    const float *data;
    int64_t batch, cin, size[SWI_MAX_DIMS];
    int dims;
    int64_t reads, fail_at, bad_box, max_box;
    int64_t roi_vox;
} src;

static int read_box(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                    size_t msg_size) {
    src *s = user;
    s->reads++;
    if (s->fail_at && s->reads == s->fail_at) {
        snprintf(msg, msg_size, "disk on fire at read %lld", (long long)s->reads);
        return 1;
    }
    int64_t ext[SWI_MAX_DIMS] = {1, 1, 1}, n = 1, vox = 1;
    if (image < 0 || image >= s->batch) s->bad_box++;
    for (int k = 0; k < s->dims; k++) {
        if (lo[k] < 0 || hi[k] > s->size[k] || lo[k] >= hi[k]) {
            s->bad_box++;
            return 1;
        }
        ext[k] = hi[k] - lo[k];
        n *= ext[k];
        vox *= s->size[k];
    }
    if (n > s->roi_vox) s->bad_box++;
    if (n > s->max_box) s->max_box = n;
    /* copy the box, C order, channel planes */
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t i = 0; i < n; i++) {
            int64_t r = i, at = 0, stride = 1;
            for (int k = s->dims - 1; k >= 0; k--) {
                at += (lo[k] + r % ext[k]) * stride;
                r /= ext[k];
                stride *= s->size[k];
            }
            dst[c * n + i] = s->data[(image * s->cin + c) * vox + at];
        }
    return 0;
}

/* out[c] = (c + 1) * x + window position term: position-dependent, so a box read at the
 * wrong place shows */
static int predict(void *user, swi_batch *b) {
    const int64_t C = *(const int64_t *)user;
    int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t vox = 1;
    for (int k = 0; k < d; k++) vox *= roi[k];
    int64_t cin = swi_batch_channels(b);
    float *out = swi_batch_output(b, 0, C, roi);
    if (!out) return 1;
    const float *in = swi_batch_input(b);
    for (int i = 0; i < n; i++) {
        const int64_t *st = swi_batch_start(b, i);
        for (int64_t c = 0; c < C; c++)
            for (int64_t v = 0; v < vox; v++) {
                float s = 0;
                for (int64_t ch = 0; ch < cin; ch++) s += in[(i * cin + ch) * vox + v];
                out[(i * C + c) * vox + v] = (float)(c + 1) * s + 0.01f * (float)(st[0] + c);
            }
    }
    return 0;
}

static swi_status run(const swi_params *p, const swi_tensor *in, int64_t C, float *scores, size_t bytes,
                      char *err, size_t err_len) {
    swi_ctx *ctx = swi_create();
    if (!ctx) return SWI_ERR_NOMEM;
    swi_output o;
    swi_output_init(&o, 0, SWI_REDUCE_NONE);
    o.dst = scores;
    o.dst_bytes = bytes;
    swi_predictor pred = {predict, &C};
    swi_status st = swi_run(ctx, p, in, &pred, &o, 1);
    snprintf(err, err_len, "%s", swi_last_error(ctx));
    swi_free(ctx);
    return st;
}

int main(void) {
    check_rng_state = 0x243F6A8885A308D3ull;
    int64_t total_reads = 0;
    for (int t = 0; t < 200; t++) {
        int dims = (int)rnd(1, 4);
        swi_params p;
        swi_params_init(&p, dims);
        src s = {0};
        s.dims = dims;
        s.batch = rnd(1, 2);
        s.cin = rnd(1, 3);
        int64_t vox = 1;
        s.roi_vox = 1;
        for (int k = 0; k < dims; k++) {
            s.size[k] = rnd(1, dims == 4 ? 8 : dims == 3 ? 14 : 40);
            p.roi[k] = rnd(1, 9);
            p.overlap[k] = (double)rnd(0, 3) / 4.0;
            vox *= s.size[k];
            s.roi_vox *= p.roi[k];
        }
        p.padding_mode = (swi_pad)rnd(0, 3);
        if (p.padding_mode == SWI_PAD_REFLECT)
            for (int k = 0; k < dims; k++) {
                int64_t pad = p.roi[k] > s.size[k] ? p.roi[k] - s.size[k] : 0;
                if (pad - pad / 2 >= s.size[k]) p.padding_mode = SWI_PAD_CIRCULAR;
            }
        p.cval = (float)rnd(-3, 3);
        p.mode = rnd(0, 1) ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
        p.sw_batch_size = (int)rnd(1, 4);
        p.threads = (int)rnd(1, 2);
        p.pipeline = (swi_pipeline)rnd(0, 2);
        int64_t C = rnd(1, 3);
        p.heads[0].channels = C;
        float *vol = malloc((size_t)(s.batch * s.cin * vox) * sizeof(float));
        size_t bytes = (size_t)(s.batch * C * vox) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes);
        CHECK(vol && a && b, "malloc");
        if (!vol || !a || !b) return 1;
        for (int64_t i = 0; i < s.batch * s.cin * vox; i++) vol[i] = (float)rnd(-500, 500) / 50.0f;
        s.data = vol;
        swi_tensor mem = {.data = vol, .batch = s.batch, .channels = s.cin, .dims = dims};
        for (int k = 0; k < dims; k++) mem.size[k] = s.size[k];
        swi_reader reader = {read_box, &s};
        swi_tensor rd = mem;
        rd.data = NULL;
        rd.reader = &reader;
        char e1[512], e2[512];
        swi_status s1 = run(&p, &mem, C, a, bytes, e1, sizeof e1);
        swi_status s2 = run(&p, &rd, C, b, bytes, e2, sizeof e2);
        CHECK(s1 == SWI_OK && s2 == SWI_OK, "config %d: %s (%s) / %s (%s)", t, swi_status_name(s1), e1,
              swi_status_name(s2), e2);
        if (s1 == SWI_OK && s2 == SWI_OK)
            CHECK(memcmp(a, b, bytes) == 0,
                  "config %d (dims %d, pad %d): reader results differ from the array's", t, dims,
                  (int)p.padding_mode);
        CHECK(s.bad_box == 0, "config %d: %lld boxes outside the image or larger than a window", t,
              (long long)s.bad_box);
        total_reads += s.reads;

        /* the plan of a reader input holds no input, but the box one window reads */
        swi_ctx *ctx = swi_create();
        swi_plan pm, pr;
        swi_output o;
        swi_output_init(&o, 0, SWI_REDUCE_NONE);
        CHECK(ctx && swi_plan_run(ctx, &p, &mem, &o, 1, &pm) == SWI_OK &&
                  swi_plan_run(ctx, &p, &rd, &o, 1, &pr) == SWI_OK,
              "config %d: plans", t);
        CHECK(pr.bytes_input == 0 && pm.bytes_input == (size_t)(s.batch * s.cin * vox) * sizeof(float) &&
                  pr.bytes_scratch == pm.bytes_scratch + (size_t)(s.cin * s.roi_vox) * sizeof(float),
              "config %d: reader plan input %zu scratch %zu vs array %zu / %zu", t, pr.bytes_input,
              pr.bytes_scratch, pm.bytes_input, pm.bytes_scratch);
        swi_free(ctx);

        /* a reader failing midway */
        if (s.reads > 1) {
            src f = s;
            f.reads = 0;
            f.fail_at = rnd(1, s.reads);
            swi_reader fr = {read_box, &f};
            rd.reader = &fr;
            swi_status s3 = run(&p, &rd, C, b, bytes, e2, sizeof e2);
            CHECK(s3 == SWI_ERR_READ && strstr(e2, "disk on fire"), "config %d: failing reader: %s (%s)", t,
                  swi_status_name(s3), e2);
            CHECK(f.reads == f.fail_at,
                  "config %d: the run went on reading after a failure (%lld reads, failed at %lld)", t,
                  (long long)f.reads, (long long)f.fail_at);
        }
        free(vol);
        free(a);
        free(b);
    }
    /* a reader with no read function is refused */
    float one = 0;
    swi_params p;
    swi_params_init(&p, 1);
    swi_reader none = {NULL, NULL};
    swi_tensor in = {.batch = 1, .channels = 1, .dims = 1, .size = {1}, .reader = &none};
    char e[512];
    CHECK(run(&p, &in, 1, &one, sizeof one, e, sizeof e) == SWI_ERR_INVALID_ARG && strstr(e, "reader"),
          "reader without read: %s", e);
    printf("test_reader: %lld boxes read\n", (long long)total_reads);
    return check_report("test_reader");
}
