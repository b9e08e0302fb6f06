/*
 * fault_core.c -- every allocation of a representative swi_run fails once, in turn.
 *
 *     fault_core walk SCENARIO...   count, then re-execute itself once per fault point
 *     fault_core one SCENARIO HASH  one run under SWI_FAULT_ALLOC / SWI_FAULT_THREAD
 *     fault_core count SCENARIO     one fault-free run: what the walk would cover
 *     fault_core list               the scenarios
 *
 * Needs a library built with SWI_FAULT_INJECTION (src/alloc.c): SWI_FAULT_ALLOC=N makes
 * the N-th library allocation of the process fail, and swi__alloc_count() says how many
 * there were. This program also wraps, at link time (-Wl,--wrap), the library's
 * allocation entry points (to learn which call site each N is), pthread_create
 * (SWI_FAULT_THREAD=N fails the N-th thread start) and mmap/munmap (to check that
 * every page-backed buffer is unmapped: LeakSanitizer sees only the heap).
 *
 * `walk` first runs each scenario in-process to count its allocations and thread starts
 * and to hash its results, then for every N runs `one` in a fresh process, which must:
 *   - fail with SWI_ERR_NOMEM (SWI_ERR_THREAD for a thread fault) and a message, report no
 *     result, and have unmapped everything -- or, where the engine absorbs the fault (a
 *     cell that cannot use the partial-sum arena maps its own), succeed with exactly the
 *     expected results;
 *   - then succeed on the same context with the expected results (nothing left broken);
 *   - exit without crashing, hanging (30 s alarm) or leaking (run under ASan/LSan).
 * Finally it lists the library's allocation call sites (from SWI_SOURCE_DIR/src) that no
 * injected fault reached, and fails if there are any (in unoptimised builds, where every
 * site can be told; see SWI_FAULT_STRICT_SITES).
 *
 * Scenarios:
 *   full    2 heads (one learned, half resolution), reflect padding, gaussian, argmax +
 *           scores + max + entropy + confidence + custom outputs to library memory, caller
 *           buffers and region callbacks, 3 threads, pipelining, plan and weights calls
 *   stream  streaming only: argmax without scores into a region-callback sink, custom
 *           weight map, replicate padding, automatic pipelining
 *   big     buffers large enough for the page-backed paths (window batches >= 1 MiB,
 *           partial sums >= 64 KiB: the arena, and cells in mappings of their own)
 *   sparse  stream with the frontier's sparse cell table (forced: swi__sparse_tables),
 *           nnU-Net's grid, mirroring in the engine and float16 partial sums
 * Predictor misbehaviour (a failure, a region-callback stop, a cancel at every call) is
 * walked in-process by `walk` too: each must stop the run with its status, free
 * everything, and leave the context usable.
 */
#define _GNU_SOURCE
#include "swi.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SWI_SOURCE_DIR
#define SWI_SOURCE_DIR "."
#endif
/* 1 when the library is built without optimisation (CMAKE_BUILD_TYPE=Debug): only then do
 * return addresses name every call site (an optimised `return swi__calloc(...)` is a tail
 * call whose site vanishes), so only then is the call-site coverage enforced. */
#ifndef SWI_FAULT_STRICT_SITES
#define SWI_FAULT_STRICT_SITES 0
#endif

/* Exported by src/alloc.c in SWI_FAULT_INJECTION builds; declared nowhere public. */
long long swi__alloc_count(void);

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fault_core: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- link-time wrappers -------------------------------------------------------------- */

static long long fail_alloc_at = -1; /* SWI_FAULT_ALLOC as the library reads it */
static void *injected_site;          /* return address of the call that got the fault */

static void note_site(long long before, int failed, void *ret) {
    if (failed && fail_alloc_at > 0 && before < fail_alloc_at && swi__alloc_count() >= fail_alloc_at &&
        !injected_site)
        injected_site = ret;
}

void *__real_swi__malloc(size_t);
void *__real_swi__calloc(size_t, size_t);
void *__real_swi__big_alloc(size_t);
_Bool __real_swi__fault_point(void);

void *__wrap_swi__malloc(size_t n) {
    long long b = swi__alloc_count();
    void *p = __real_swi__malloc(n);
    note_site(b, p == NULL, __builtin_return_address(0));
    return p;
}

void *__wrap_swi__calloc(size_t n, size_t s) {
    long long b = swi__alloc_count();
    void *p = __real_swi__calloc(n, s);
    note_site(b, p == NULL, __builtin_return_address(0));
    return p;
}

void *__wrap_swi__big_alloc(size_t n) {
    long long b = swi__alloc_count();
    void *p = __real_swi__big_alloc(n);
    note_site(b, p == NULL, __builtin_return_address(0));
    return p;
}

_Bool __wrap_swi__fault_point(void) {
    long long b = swi__alloc_count();
    _Bool f = __real_swi__fault_point();
    note_site(b, f, __builtin_return_address(0));
    return f;
}

/* pthread_create: counted, and the N-th fails with EAGAIN under SWI_FAULT_THREAD=N. */
static atomic_int thread_starts;
static int fail_thread_at = -1;
static int thread_fault_hit;
int __real_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
    int n = atomic_fetch_add(&thread_starts, 1) + 1;
    if (n == fail_thread_at) {
        thread_fault_hit = 1;
        return EAGAIN;
    }
    return __real_pthread_create(t, a, fn, arg);
}

/* Mapped bytes the library holds (page-rounded). */
static atomic_llong mapped;
static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }
void *__real_mmap(void *, size_t, int, int, int, off_t);
int __real_munmap(void *, size_t);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED) atomic_fetch_add(&mapped, (long long)page_round(len));
    return p;
}
int __wrap_munmap(void *addr, size_t len) {
    int rc = __real_munmap(addr, len);
    if (rc == 0) atomic_fetch_sub(&mapped, (long long)page_round(len));
    return rc;
}

/* ---- the scenarios ------------------------------------------------------------------- */

typedef struct sink {
    int64_t out[3], planes, batch;
    size_t esize;
    unsigned char *data; /* [batch][planes][out] */
    int calls, stop_at, bad;
} sink;

typedef struct scenario {
    const char *name;
    int dims;
    int64_t batch, cin, size[3];
    swi_params p;
    float *input, *weight_map;
    int n_outs;
    swi_output outs[8];
    sink sinks[8];
    void *dst[8];
    int pred_calls, pred_fail_at, cancel_at, progress_calls;
    swi_status weights_status;
    int use_reader; /* the input through a swi_reader */
    int adopt;      /* outputs handed over with swi_batch_set_output */
    int sparse;     /* the frontier's sparse cell table, forced */
} scenario;

extern int swi__sparse_tables; /* src/plan.c: tests force the sparse cell table */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static int on_region(void *user, const swi_region *rg) {
    sink *s = user;
    int call = __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
    int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    for (int k = 0; k < rg->dims; k++) {
        lo[k] = rg->lo[k];
        hi[k] = rg->hi[k];
    }
    for (int k = 0; k < 3; k++)
        if (lo[k] < 0 || hi[k] > s->out[k] || lo[k] >= hi[k]) {
            fprintf(stderr, "region [%lld, %lld) outside the output grid (%lld) along dim %d\n",
                    (long long)lo[k], (long long)hi[k], (long long)s->out[k], k);
            s->bad = 1;
            return 1;
        }
    const int64_t e[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    const int64_t ov = s->out[0] * s->out[1] * s->out[2];
    const unsigned char *src = rg->data;
    for (int64_t p = 0; p < rg->channels; p++)
        for (int64_t a = 0; a < e[0]; a++)
            for (int64_t b = 0; b < e[1]; b++)
                for (int64_t d = 0; d < e[2]; d++) {
                    int64_t v = ((lo[0] + a) * s->out[1] + lo[1] + b) * s->out[2] + lo[2] + d;
                    int64_t si = ((p * e[0] + a) * e[1] + b) * e[2] + d;
                    memcpy(s->data + ((rg->image * s->planes + p) * ov + v) * s->esize,
                           src + si * (int64_t)s->esize, s->esize);
                }
    return s->stop_at && call == s->stop_at;
}

static int progress(void *user, int64_t done, int64_t total) {
    scenario *sc = user;
    (void)done, (void)total;
    sc->progress_calls++;
    return sc->cancel_at && sc->progress_calls == sc->cancel_at;
}

/* Deterministic network: per head, channels C, output window = roi (head 0) or roi/2
 * (head 1 of `full`). Position terms make overlapping windows disagree. */
static void release_output(void *user, const float *data) {
    (void)user;
    free((void *)data);
}

/* the input served box by box, as a chunked store would */
static int read_box(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                    size_t msg_len);

static int predict(void *user, swi_batch *b) {
    scenario *sc = user;
    sc->pred_calls++;
    if (sc->pred_fail_at && sc->pred_calls == sc->pred_fail_at) {
        swi_batch_set_error(b, "injected predictor failure");
        return 1;
    }
    const int n = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t cin = swi_batch_channels(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t r[3] = {1, 1, 1};
    for (int k = 0; k < d; k++) r[k] = roi[k];
    const int64_t rv = r[0] * r[1] * r[2];
    const float *in = swi_batch_input(b);
    for (int h = 0; h < sc->p.n_heads; h++) {
        int64_t C = sc->p.heads[h].channels ? sc->p.heads[h].channels : 2;
        int64_t o[3] = {1, 1, 1}, sp[3];
        for (int k = 0; k < d; k++) {
            o[k] = (h == 1 && !strcmp(sc->name, "full")) ? r[k] / 2 : r[k];
            sp[k] = o[k];
        }
        const int64_t ovx = o[0] * o[1] * o[2];
        float *out =
            sc->adopt ? malloc((size_t)(n * C * ovx) * sizeof(float)) : swi_batch_output(b, h, C, sp);
        if (!out) return 1;
        for (int j = 0; j < n; j++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i0 = 0; i0 < o[0]; i0++)
                    for (int64_t i1 = 0; i1 < o[1]; i1++)
                        for (int64_t i2 = 0; i2 < o[2]; i2++) {
                            int64_t at =
                                ((i0 * r[0] / o[0]) * r[1] + i1 * r[1] / o[1]) * r[2] + i2 * r[2] / o[2];
                            float s = 0;
                            for (int64_t q = 0; q < cin; q++) s += in[((int64_t)j * cin + q) * rv + at];
                            out[(((int64_t)j * C + c) * o[0] + i0) * o[1] * o[2] + i1 * o[2] + i2] =
                                (float)(c + 1) * s + 0.25f * (float)c - 0.03f * (float)(i0 + 2 * i2) +
                                0.01f * (float)h;
                        }
        if (sc->adopt && swi_batch_set_output(b, h, C, sp, out, release_output, NULL) != 0) {
            free(out);
            return 1;
        }
    }
    return 0;
}

static void add_output(scenario *sc, int head, swi_reduce red, int to_dst, int to_sink, const int64_t *out,
                       int64_t C) {
    swi_output *o = &sc->outs[sc->n_outs];
    sink *s = &sc->sinks[sc->n_outs];
    swi_output_init(o, head, red);
    int64_t ov = out[0] * out[1] * out[2];
    int64_t planes =
        (red == SWI_REDUCE_NONE || red == SWI_REDUCE_CUSTOM || red == SWI_REDUCE_SOFTMAX) ? C : 1;
    size_t es = red == SWI_REDUCE_ARGMAX ? 1 : 4;
    size_t bytes = (size_t)(sc->batch * planes * ov) * es;
    if (to_dst) {
        sc->dst[sc->n_outs] = calloc(1, bytes);
        o->dst = sc->dst[sc->n_outs];
        o->dst_bytes = bytes;
    }
    if (to_sink) {
        memcpy(s->out, out, sizeof s->out);
        s->planes = planes;
        s->batch = sc->batch;
        s->esize = es;
        s->data = calloc(1, bytes);
        o->on_region = on_region;
        o->user = s;
    }
    sc->n_outs++;
}

static void make_scenario(scenario *sc, const char *name) {
    memset(sc, 0, sizeof *sc);
    sc->name = name;
    swi_params *p = &sc->p;
    if (!strcmp(name, "full")) {
        sc->dims = 3;
        sc->batch = 2;
        sc->cin = 2;
        int64_t size[3] = {12, 10, 8}, roi[3] = {8, 12, 4};
        memcpy(sc->size, size, sizeof size);
        swi_params_init(p, 3);
        memcpy(p->roi, roi, sizeof roi);
        p->overlap[0] = 0.5, p->overlap[1] = 0.25, p->overlap[2] = 0.5;
        p->mode = SWI_BLEND_GAUSSIAN;
        p->padding_mode = SWI_PAD_REFLECT;
        p->sw_batch_size = 3;
        p->threads = 3;
        p->pipeline = SWI_PIPELINE_ON;
        p->n_heads = 2;
        p->heads[0].channels = 3; /* declared (spatial 0 = the roi) */
        p->heads[1].channels = 0; /* learned: 2 channels at half resolution */
        /* head 0 grid = image; head 1 (z = 1/2) grid from the engine's crop rule */
        /* head 1 grid by the README's rule: [round(before z), round((before + S) z)) */
        int64_t o0[3] = {12, 10, 8}, o1[3] = {6, 6, 4};
        add_output(sc, 0, SWI_REDUCE_ARGMAX, 0, 0, o0, 3);
        add_output(sc, 0, SWI_REDUCE_NONE, 0, 0, o0, 3);
        add_output(sc, 1, SWI_REDUCE_MAX, 1, 0, o1, 2);
        add_output(sc, 1, SWI_REDUCE_ENTROPY, 0, 1, o1, 2);
        add_output(sc, 0, SWI_REDUCE_CONFIDENCE, 1, 1, o0, 3);
        add_output(sc, 1, SWI_REDUCE_CUSTOM, 0, 1, o1, 2);
        add_output(sc, 0, SWI_REDUCE_SOFTMAX, 1, 0, o0, 3);
    } else if (!strcmp(name, "stream") || !strcmp(name, "sparse")) {
        sc->dims = 3;
        sc->batch = 1;
        sc->cin = 1;
        int64_t size[3] = {20, 18, 6}, roi[3] = {8, 8, 8};
        memcpy(sc->size, size, sizeof size);
        swi_params_init(p, 3);
        memcpy(p->roi, roi, sizeof roi);
        p->mode = SWI_BLEND_CUSTOM;
        sc->weight_map = malloc(512 * sizeof(float));
        for (int i = 0; i < 512; i++) sc->weight_map[i] = 0.5f + (float)(i % 7) / 7.0f;
        p->weight_map = sc->weight_map;
        p->padding_mode = SWI_PAD_REPLICATE;
        p->sw_batch_size = 2;
        p->threads = 2;
        p->pipeline = SWI_PIPELINE_AUTO;
        p->n_heads = 1;
        p->heads[0].channels = 4;
        add_output(sc, 0, SWI_REDUCE_ARGMAX, 0, 1, size, 4);
        sc->sparse = !strcmp(name, "sparse");
        if (sc->sparse) { /* nnU-Net's grid and importance map (their own allocation), its
                           * mirroring in the engine and its float16 partial sums */
            p->grid = SWI_GRID_NNUNET;
            p->mode = SWI_BLEND_GAUSSIAN_NNUNET;
            for (int k = 0; k < 3; k++) p->overlap[k] = 0.5;
            p->mirror_axes = 7;
            p->accumulate = SWI_ACCUMULATE_FLOAT16;
        }
    } else if (!strcmp(name, "big")) {
        sc->dims = 3;
        sc->batch = 1;
        sc->cin = 1;
        int64_t size[3] = {48, 44, 40}, roi[3] = {32, 32, 32};
        memcpy(sc->size, size, sizeof size);
        swi_params_init(p, 3);
        memcpy(p->roi, roi, sizeof roi);
        p->overlap[0] = p->overlap[1] = p->overlap[2] = 0.6; /* uneven cells: arena holes of many sizes */
        p->mode = SWI_BLEND_GAUSSIAN;
        p->sw_batch_size = 2;
        p->threads = 2;
        p->pipeline = SWI_PIPELINE_ON;
        p->n_heads = 1;
        p->heads[0].channels = 16;
        add_output(sc, 0, SWI_REDUCE_ARGMAX, 0, 0, size, 16);
        add_output(sc, 0, SWI_REDUCE_NONE, 0, 0, size, 16);
    } else if (!strcmp(name, "reuse")) {
        /* reuse (the cache and the plan's count), a reader input, a part of the output, and
         * outputs handed over, with a head learned under a budget: the first call takes one
         * window and pipelining starts after it */
        sc->dims = 3;
        sc->batch = 1;
        sc->cin = 1;
        sc->use_reader = 1;
        sc->adopt = 1;
        int64_t size[3] = {30, 20, 12}, roi[3] = {6, 6, 6};
        memcpy(sc->size, size, sizeof size);
        swi_params_init(p, 3);
        memcpy(p->roi, roi, sizeof roi);
        p->mode = SWI_BLEND_GAUSSIAN;
        p->sw_batch_size = 3;
        p->threads = 2;
        p->pipeline = SWI_PIPELINE_ON;
        p->reuse = SWI_REUSE_ON;
        p->reuse_cache = 2;
        p->max_memory = (size_t)1 << 30;
        p->part_lo[0] = 4; /* a box cut along two dims */
        p->part_hi[0] = 27;
        p->part_lo[1] = 3;
        p->part_hi[1] = 15;
        p->n_heads = 1;
        p->heads[0].channels = 0; /* learned */
        add_output(sc, 0, SWI_REDUCE_ARGMAX, 1, 0, size, 2);
        add_output(sc, 0, SWI_REDUCE_NONE, 0, 1, size, 2);
    } else {
        die("unknown scenario '%s'", name);
    }
    p->progress = progress;
    p->progress_user = sc;
    int64_t n = sc->batch * sc->cin * sc->size[0] * sc->size[1] * sc->size[2];
    sc->input = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) sc->input[i] = (float)((i * 7919) % 29) / 8.0f - 1.5f;
    if (!strcmp(name, "reuse")) /* a uniform background with a blob: windows that repeat */
        for (int64_t i = 0; i < n; i++)
            if (i % (sc->size[1] * sc->size[2]) > 40) sc->input[i] = 0.5f;
}

static int read_box(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                    size_t msg_len) {
    (void)msg;
    (void)msg_len;
    const scenario *sc = user;
    int64_t e[3] = {1, 1, 1}, l[3] = {0, 0, 0};
    for (int k = 0; k < sc->dims; k++) {
        l[k] = lo[k];
        e[k] = hi[k] - lo[k];
    }
    const int64_t vox = sc->size[0] * sc->size[1] * sc->size[2];
    for (int64_t c = 0; c < sc->cin; c++)
        for (int64_t i0 = 0; i0 < e[0]; i0++)
            for (int64_t i1 = 0; i1 < e[1]; i1++)
                memcpy(dst + ((c * e[0] + i0) * e[1] + i1) * e[2],
                       sc->input + (image * sc->cin + c) * vox +
                           ((l[0] + i0) * sc->size[1] + l[1] + i1) * sc->size[2] + l[2],
                       (size_t)e[2] * sizeof(float));
    return 0;
}

static void free_scenario(scenario *sc) {
    for (int i = 0; i < sc->n_outs; i++) {
        free(sc->dst[i]);
        free(sc->sinks[i].data);
    }
    free(sc->input);
    free(sc->weight_map);
}

/* One run; on success *hash covers every result (library, caller buffers, sinks). */
static swi_status run_scenario(swi_ctx *ctx, scenario *sc, uint64_t *hash) {
    for (int i = 0; i < sc->n_outs; i++) {
        if (sc->dst[i]) memset(sc->dst[i], 0, sc->outs[i].dst_bytes);
        sink *s = &sc->sinks[i];
        if (s->data)
            memset(s->data, 0, (size_t)(s->batch * s->planes * s->out[0] * s->out[1] * s->out[2]) * s->esize);
        s->calls = 0;
    }
    sc->pred_calls = sc->progress_calls = 0;
    swi_tensor t = {
        .data = sc->input, .batch = sc->batch, .channels = sc->cin, .dims = sc->dims, .size = {0}};
    memcpy(t.size, sc->size, sizeof t.size);
    swi_reader reader = {read_box, sc};
    if (sc->use_reader) {
        t.data = NULL;
        t.reader = &reader;
    }
    swi__sparse_tables = sc->sparse;
    /* the other allocating entry points a caller uses */
    swi_plan plan;
    swi_status st = swi_plan_run(ctx, &sc->p, &t, sc->outs, sc->n_outs, &plan);
    if (st != SWI_OK) return st;
    /* swi_weights is called without a context: its failure is checked here, and the run goes on */
    float *w = malloc((size_t)(sc->p.roi[0] * sc->p.roi[1] * sc->p.roi[2]) * sizeof(float));
    st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, sc->dims, sc->p.roi, sc->p.sigma_scale, w);
    free(w);
    if (st != SWI_OK && st != SWI_ERR_NOMEM) return st;
    sc->weights_status = st;
    swi_predictor net = {predict, sc};
    st = swi_run(ctx, &sc->p, &t, &net, sc->outs, sc->n_outs);
    if (st != SWI_OK) return st;
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < sc->n_outs; i++) {
        size_t bytes = 0;
        const void *r = swi_result(ctx, i, &bytes);
        if (r) h = fnv(h, r, bytes);
        if (sc->dst[i]) h = fnv(h, sc->dst[i], sc->outs[i].dst_bytes);
        sink *s = &sc->sinks[i];
        if (s->data)
            h = fnv(h, s->data,
                    (size_t)(s->batch * s->planes * s->out[0] * s->out[1] * s->out[2]) * s->esize);
        if (s->bad) return SWI_ERR_CALLBACK;
    }
    *hash = h;
    return SWI_OK;
}

/* ---- one fault ------------------------------------------------------------------------ */

static int check_failed_run(swi_ctx *ctx, const scenario *sc, swi_status st, swi_status want1,
                            swi_status want2, const char *what) {
    if (st != want1 && st != want2) {
        fprintf(stderr, "%s: %s (%s), expected %s\n", what, swi_status_name(st), swi_last_error(ctx),
                swi_status_name(want1));
        return 1;
    }
    if (!swi_last_error(ctx)[0]) {
        fprintf(stderr, "%s: %s without a message\n", what, swi_status_name(st));
        return 1;
    }
    for (int i = 0; i < sc->n_outs; i++)
        if (swi_result(ctx, i, NULL)) {
            fprintf(stderr, "%s: a failed run reports result %d\n", what, i);
            return 1;
        }
    if (atomic_load(&mapped) != 0) {
        fprintf(stderr, "%s: %lld mapped bytes still held after the failed run\n", what,
                (long long)atomic_load(&mapped));
        return 1;
    }
    return 0;
}

/* Child: one run with the fault the environment names. Prints "site 0x..." (the call that
 * got the fault, relative to the executable) on stdout. */
static int one(const char *name, uint64_t want) {
    const char *fa = getenv("SWI_FAULT_ALLOC"), *ft = getenv("SWI_FAULT_THREAD");
    fail_alloc_at = fa && *fa ? atoll(fa) : -1;
    fail_thread_at = ft && *ft ? atoi(ft) : -1;
    alarm(60); /* a fault must never hang a run */
    scenario sc;
    make_scenario(&sc, name);
    int bad = 0;
    swi_ctx *ctx = swi_create();
    if (!ctx) {
        if (!(fail_alloc_at > 0 && swi__alloc_count() >= fail_alloc_at)) {
            fprintf(stderr, "swi_create failed without an injected fault\n");
            return 1;
        }
        ctx = swi_create();
        if (!ctx) {
            fprintf(stderr, "swi_create failed twice\n");
            return 1;
        }
    }
    uint64_t h = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        long long before = swi__alloc_count();
        int thread_before = thread_fault_hit;
        sc.weights_status = SWI_OK;
        swi_status st = run_scenario(ctx, &sc, &h);
        int alloc_hit = fail_alloc_at > before && swi__alloc_count() >= fail_alloc_at;
        int thread_hit = thread_fault_hit && !thread_before;
        if (sc.weights_status != SWI_OK && !alloc_hit) {
            fprintf(stderr, "swi_weights: %s without an injected fault\n",
                    swi_status_name(sc.weights_status));
            bad = 1;
            break;
        }
        if (st == SWI_OK && sc.weights_status != SWI_OK)
            continue; /* the fault hit swi_weights, which reported it; run again */
        if (st == SWI_OK) {
            if (h != want) {
                fprintf(stderr, "attempt %d%s: results differ from the fault-free run\n", attempt + 1,
                        alloc_hit ? " (the fault was absorbed)" : "");
                bad = 1;
            }
            break;
        }
        if (!alloc_hit && !thread_hit) {
            fprintf(stderr, "attempt %d: %s (%s) without an injected fault\n", attempt + 1,
                    swi_status_name(st), swi_last_error(ctx));
            bad = 1;
            break;
        }
        bad |= check_failed_run(ctx, &sc, st, thread_hit ? SWI_ERR_THREAD : SWI_ERR_NOMEM,
                                thread_hit ? SWI_ERR_THREAD : SWI_ERR_NOMEM, "faulty run");
        if (bad) break;
    }
    swi_free(ctx);
    if (atomic_load(&mapped) != 0) {
        fprintf(stderr, "%lld mapped bytes never unmapped\n", (long long)atomic_load(&mapped));
        bad = 1;
    }
    free_scenario(&sc);
    if (injected_site) {
        Dl_info info;
        if (dladdr(injected_site, &info) && info.dli_fbase)
            printf("site 0x%lx\n", (unsigned long)((char *)injected_site - (char *)info.dli_fbase - 1));
    }
    return bad;
}

/* ---- the walk ------------------------------------------------------------------------- */

typedef struct site_set {
    char (*v)[24];
    int n, cap;
} site_set;

static void site_add(site_set *s, const char *hex) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], hex)) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    snprintf(s->v[s->n++], 24, "%s", hex);
}

/* Run `self one NAME HASH` with one fault variable set; 0 when it passed. */
static int spawn_one(const char *self, const char *name, uint64_t hash, const char *var, long long n,
                     site_set *sites) {
    int pfd[2];
    if (pipe(pfd) != 0) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        char nbuf[32], hbuf[32];
        snprintf(nbuf, sizeof nbuf, "%lld", n);
        snprintf(hbuf, sizeof hbuf, "%llu", (unsigned long long)hash);
        setenv(var, nbuf, 1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execl(self, self, "one", name, hbuf, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while ((r = read(pfd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    buf[len] = '\0';
    close(pfd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    char *s = strstr(buf, "site ");
    if (s) {
        char hex[24];
        if (sscanf(s + 5, "%23s", hex) == 1) site_add(sites, hex);
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "FAIL %s %s=%lld: killed by signal %d%s\n", name, var, n, WTERMSIG(status),
                WTERMSIG(status) == SIGALRM ? " (hung)" : "");
        return 1;
    }
    if (WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL %s %s=%lld: exit %d (reproduce: %s=%lld %s one %s %llu)\n", name, var, n,
                WEXITSTATUS(status), var, n, self, name, (unsigned long long)hash);
        return 1;
    }
    return 0;
}

/* In-process walks of the predictor, callback and progress stops at every call (mirroring
 * makes several predictor calls per progress report, so each is counted on its own). */
static int walk_stops(scenario *sc, uint64_t want, int calls, int reports) {
    int bad = 0;
    swi_ctx *ctx = swi_create();
    if (!ctx) die("swi_create");
    int stop_sink = -1;
    for (int i = 0; i < sc->n_outs; i++)
        if (sc->sinks[i].data && stop_sink < 0) stop_sink = i;
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 1 && stop_sink < 0) continue;
        int limit = kind == 1 ? 1 << 30 : kind == 0 ? calls : reports;
        for (int k = 1; k <= limit; k++) {
            sc->pred_fail_at = kind == 0 ? k : 0;
            sc->cancel_at = kind == 2 ? k : 0;
            if (stop_sink >= 0) sc->sinks[stop_sink].stop_at = kind == 1 ? k : 0;
            uint64_t h;
            swi_status st = run_scenario(ctx, sc, &h);
            swi_status want_st = kind == 0   ? SWI_ERR_PREDICTOR
                                 : kind == 1 ? SWI_ERR_CALLBACK
                                             : SWI_ERR_CANCELLED;
            char what[64];
            snprintf(what, sizeof what, "%s stop %d at %d", sc->name, kind, k);
            if (kind == 1 && st == SWI_OK) break; /* past the last region */
            if (check_failed_run(ctx, sc, st, want_st, want_st, what)) {
                bad = 1;
                break;
            }
        }
    }
    sc->pred_fail_at = sc->cancel_at = 0;
    if (stop_sink >= 0) sc->sinks[stop_sink].stop_at = 0;
    uint64_t h;
    if (run_scenario(ctx, sc, &h) != SWI_OK || h != want) {
        fprintf(stderr, "FAIL %s: the context does not run cleanly after the stops\n", sc->name);
        bad = 1;
    }
    swi_free(ctx);
    return bad;
}

/* Allocation call sites in the library sources: "file:line" of each swi__malloc,
 * swi__calloc, swi__big_alloc and swi__fault_point call in src/ outside alloc.c. */
static int source_sites(char (*out)[128], int cap) {
    static const char *calls[] = {"swi__malloc(", "swi__calloc(", "swi__big_alloc(", "swi__fault_point("};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/src", SWI_SOURCE_DIR);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "FAIL: cannot list %s\n", dir);
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0 || strcmp(e->d_name, "alloc.c") == 0) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *fp = fopen(path, "r");
        if (!fp) continue;
        char line[1024];
        int no = 0;
        while (fgets(line, sizeof line, fp)) {
            no++;
            for (size_t c = 0; c < sizeof calls / sizeof *calls; c++)
                if (strstr(line, calls[c]) && n < cap) {
                    snprintf(out[n++], 128, "%.100s:%d", e->d_name, no);
                    break;
                }
        }
        fclose(fp);
    }
    closedir(d);
    return n;
}

static int walk(const char *self, int nnames, char **names) {
    int bad = 0;
    long long points = 0;
    site_set sites = {0};
    for (int s = 0; s < nnames; s++) {
        scenario sc;
        make_scenario(&sc, names[s]);
        swi_ctx *ctx = swi_create();
        if (!ctx) die("swi_create");
        long long a0 = swi__alloc_count();
        int t0 = atomic_load(&thread_starts);
        uint64_t hash;
        swi_status st = run_scenario(ctx, &sc, &hash);
        if (st != SWI_OK)
            die("%s: the fault-free run fails: %s: %s", names[s], swi_status_name(st), swi_last_error(ctx));
        long long allocs = swi__alloc_count() - a0 + 1; /* + swi_create */
        int threads = atomic_load(&thread_starts) - t0;
        int calls = sc.pred_calls, reports = sc.progress_calls;
        uint64_t h2;
        if (run_scenario(ctx, &sc, &h2) != SWI_OK || h2 != hash)
            die("%s: two fault-free runs differ (the walk needs deterministic results)", names[s]);
        swi_free(ctx);
        if (atomic_load(&mapped) != 0)
            die("%s: %lld mapped bytes never unmapped by a fault-free run", names[s],
                (long long)atomic_load(&mapped));
        int sbad = 0;
        for (long long n = 1; n <= allocs; n++)
            sbad |= spawn_one(self, names[s], hash, "SWI_FAULT_ALLOC", n, &sites);
        for (int n = 1; n <= threads; n++)
            sbad |= spawn_one(self, names[s], hash, "SWI_FAULT_THREAD", n, &sites);
        sbad |= walk_stops(&sc, hash, calls, reports);
        printf("%s %s: %lld allocation faults, %d thread-start faults, %d predictor calls, %d progress "
               "reports, region stops\n",
               sbad ? "FAIL" : "PASS", names[s], allocs, threads, calls, reports);
        fflush(stdout);
        points += allocs + threads;
        bad |= sbad;
        free_scenario(&sc);
    }

    /* Which call sites got a fault: addr2line on the recorded return addresses. */
    char(*src)[128] = calloc(256, sizeof *src);
    int nsrc = source_sites(src, 256);
    if (nsrc < 0) {
        bad = 1;
        nsrc = 0;
    }
    int *hit = calloc((size_t)(nsrc > 0 ? nsrc : 1), sizeof(int));
    int resolved = 0;
    if (sites.n > 0) {
        char cmd[65536];
        size_t len = (size_t)snprintf(cmd, sizeof cmd, "addr2line -e '%s'", self);
        for (int i = 0; i < sites.n && len < sizeof cmd - 32; i++)
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, " %s", sites.v[i]);
        FILE *p = popen(cmd, "r");
        char line[1024];
        while (p && fgets(line, sizeof line, p)) {
            char *slash = strrchr(line, '/');
            char *file = slash ? slash + 1 : line;
            char *disc = strstr(file, " (discriminator");
            if (disc) *disc = '\0';
            file[strcspn(file, "\n")] = '\0';
            int matched = 0;
            for (int i = 0; i < nsrc; i++)
                if (!strcmp(src[i], file)) {
                    hit[i] = 1;
                    matched = 1;
                }
            resolved += matched;
            if (!matched) printf("(a fault site outside the list: %s)\n", line);
        }
        if (p) pclose(p);
    }
    int covered = 0;
    for (int i = 0; i < nsrc; i++) covered += hit[i];
    printf("%lld fault points; %d distinct call sites got a fault; %d of the %d allocation call sites in "
           "src/ covered\n",
           points, sites.n, covered, nsrc);
    if (nsrc == 0 || resolved == 0) {
        printf("(call-site coverage not checked: sources or addr2line unavailable)\n");
    } else if (nnames >= 3) {
        for (int i = 0; i < nsrc; i++)
            if (!hit[i]) {
                printf("%s: src/%s\n", SWI_FAULT_STRICT_SITES ? "NOT COVERED" : "not seen", src[i]);
                bad |= SWI_FAULT_STRICT_SITES;
            }
        if (!SWI_FAULT_STRICT_SITES && covered < nsrc)
            printf("(optimised library: tail calls hide some call sites, so coverage is not enforced; "
                   "configure with -DCMAKE_BUILD_TYPE=Debug to check it)\n");
    }
    free(src);
    free(hit);
    free(sites.v);
    return bad;
}

int main(int argc, char **argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) die("readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    if (argc >= 2 && !strcmp(argv[1], "list")) {
        puts("full\nstream\nbig\nsparse");
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "count")) {
        scenario sc;
        make_scenario(&sc, argv[2]);
        swi_ctx *ctx = swi_create();
        long long a0 = swi__alloc_count();
        int t0 = atomic_load(&thread_starts);
        uint64_t h = 0;
        swi_status st = run_scenario(ctx, &sc, &h);
        printf("%s: %s, %lld allocations, %d thread starts, %d predictor calls, hash %llu\n", argv[2],
               swi_status_name(st), swi__alloc_count() - a0 + 1, atomic_load(&thread_starts) - t0,
               sc.pred_calls, (unsigned long long)h);
        swi_free(ctx);
        free_scenario(&sc);
        return st != SWI_OK;
    }
    if (argc == 4 && !strcmp(argv[1], "one")) return one(argv[2], strtoull(argv[3], NULL, 10));
    if (argc >= 3 && !strcmp(argv[1], "walk")) {
        if (getenv("SWI_FAULT_ALLOC") || getenv("SWI_FAULT_THREAD"))
            die("walk counts fault-free runs: unset SWI_FAULT_ALLOC and SWI_FAULT_THREAD");
        return walk(self, argc - 2, argv + 2) ? 1 : 0;
    }
    fprintf(stderr, "usage: fault_core walk SCENARIO... | one SCENARIO HASH | count SCENARIO | list\n");
    return 2;
}
