/*
 * cmd_bench.c -- `swi bench`: size a job without a model.
 *
 * Runs the streaming engine on a synthetic volume with a synthetic predictor
 * (bench_net.h: linear, the worst case for class pruning, or atlas, scores like a
 * network's), prints the plan, progress, and a last line `seconds=... peak_rss_mb=... planned_mb=...`.
 * In the same run it measures the machine's fused-accumulate bandwidth and reports the
 * run time as a multiple of the traffic floor (bench_floor.h). The options are
 * bench_options.c's; here the run, step by step: the volume, the parameters, the output,
 * the plan, the buffers, the run, the results.
 */
#include "bench_floor.h"
#include "bench_io.h"
#include "bench_net.h"
#include "bench_options.h"
#include "bench_resample.h"
#include "bench_tta.h"
#include "swi.h"
#include "termtext.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One run and what it holds; bench_free releases it all. */
typedef struct bench {
    bench_opts o;
    bench_io bio;
    bench_rs rs;
    swi_params p;
    swi_tensor in;
    swi_output out;
    size_t out_bytes; /* the result kept in memory (dst), 0 when it goes elsewhere */
    int64_t vox;      /* voxels of the engine's grid */
    swi_ctx *ctx;
    swi_plan plan;
    size_t rs_planned; /* what resampling back and the combinators hold beside the engine */
    bench_beside with; /* what is beside the engine, for the plan */
    float *vol;        /* the generated volume */
    void *dst;
    bench_tta tta;        /* the synthetic network: its members, mirrored and averaged */
    bench_raw labels_out; /* --labels-raw */
} bench;

static void bench_free(bench *b) {
    free(b->vol);
    free(b->dst);
    bench_tta_free(&b->tta);
    bench_raw_abort(&b->labels_out); /* a run that failed leaves no file */
    bench_rs_free(&b->rs);
    swi_free(b->ctx);
    bench_io_close(&b->bio);
}

typedef struct progress_state {
    double t0;
    int tty;
} progress_state;

static int bench_progress(void *user, int64_t done, int64_t total) {
    progress_state *ps = user;
    if (!ps->tty) return 0;
    double el = cli_now() - ps->t0, rate = el > 0 ? (double)done / el : 0;
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\r[bench] windows %lld/%lld (%3.0f%%)  %.2f win/s  ETA %.0fs   ", (long long)done,
            (long long)total, 100.0 * (double)done / (double)total, rate, eta);
    if (done == total) fputc('\n', stderr);
    return 0;
}

/* The volume: --input opened (its size is the shape), or with --spacing the model grid
 * the generated one is made on. 0 or 1 (printed). */
static int open_volume(bench *b) {
    bench_opts *o = &b->o;
    char msg[1024];
    if (b->bio.input && bench_io_open_input(&b->bio, o->shape, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        return 1;
    }
    if (!o->n_spacing) return 0;
    const int nnunet = o->grid == SWI_GRID_NNUNET;
    if (bench_rs_setup(&b->rs, o->shape, o->in_spacing, o->spacing, o->classes, nnunet, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: --spacing: %s\n", TERM_TEXT(msg));
        return 1;
    }
    const bench_rs *r = &b->rs;
    printf("resample: input %lldx%lldx%lld at %g,%g,%g mm -> model grid %lldx%lldx%lld at "
           "%g,%g,%g mm (%s)\n",
           (long long)o->shape[0], (long long)o->shape[1], (long long)o->shape[2], o->in_spacing[0],
           o->in_spacing[1], o->in_spacing[2], (long long)r->model[0], (long long)r->model[1],
           (long long)r->model[2], r->pixdim[0], r->pixdim[1], r->pixdim[2],
           nnunet ? "nnU-Net's shape rule" : "MONAI's Spacingd");
    if (nnunet) {
        char there[32] = "no", back[64] = "order 1 on every axis";
        if (r->sep_fwd) snprintf(there, sizeof there, "axis %d", r->axis_fwd);
        if (r->nearest_axis >= 0)
            snprintf(back, sizeof back, "order 1, the nearest slice along axis %d", r->nearest_axis);
        printf("resample: separate z there %s; back (o + 0.5) * model / input - 0.5, %s\n", there, back);
    }
    memcpy(o->shape, r->model, sizeof r->model); /* the engine runs there */
    return 0;
}

/* The engine's parameters and input from the options. */
static void set_params(bench *b) {
    const bench_opts *o = &b->o;
    swi_params *p = &b->p;
    int dims = o->dims;
    swi_params_init(p, dims);
    for (int k = 0; k < dims; k++) {
        p->roi[k] = o->win.roi[k];
        p->overlap[k] = o->win.overlap[0];
        if (o->n_order) p->order[k] = (int)o->order[k];
    }
    if (o->n_order) p->order_mode = SWI_ORDER_FIXED;
    p->grid = o->grid;
    for (int k = 0; k < dims && o->tile_step > 0; k++) p->tile_step[k] = o->tile_step;
    p->mode = o->win.mode;
    p->sw_batch_size = o->win.sw_batch;
    p->threads = (int)o->threads;
    p->max_memory = o->max_memory;
    p->pipeline = o->pipeline < 0 ? SWI_PIPELINE_AUTO : o->pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    p->mirror_axes = o->mirror_combinator ? 0 : o->mirror_axes;
    p->accumulate = o->accumulate;
    p->heads[0].channels = o->classes;
    for (int k = 0; k < dims; k++) p->heads[0].spatial[k] = p->roi[k] > 0 ? p->roi[k] : o->shape[k];
    b->vox = 1;
    for (int k = 0; k < dims; k++) b->vox *= o->shape[k];
    b->in = (swi_tensor){.data = NULL,
                         .batch = 1,
                         .channels = 1,
                         .dims = dims,
                         .size = {o->shape[0], o->shape[1], o->shape[2]}};
    if (b->bio.input) bench_io_tensor(&b->bio, &b->in);
    if (o->region_given) {
        /* the model-grid box: the region itself, or what the way back reads for it (linear
         * boxes: a superset of a nearest axis's, so every tile meeting the region completes) */
        int64_t lo[3], hi[3];
        memcpy(lo, o->region_lo, sizeof lo);
        memcpy(hi, o->region_hi, sizeof hi);
        if (o->n_spacing)
            swi_resample_sink_source_box(b->rs.model, b->rs.in_size, (const double(*)[4])b->rs.map, 0,
                                         o->region_lo, o->region_hi, lo, hi);
        for (int k = 0; k < 3; k++) {
            p->part_lo[k] = lo[k];
            p->part_hi[k] = hi[k];
        }
    }
}

/* The output: labels or scores in memory, the resampling sink (--spacing) or a store
 * (--output-file). Returns 0 to run, else the exit status; *done when nothing is left to
 * run (a shard store created, or this shard empty). */
static int set_output(bench *b, int *done) {
    const bench_opts *o = &b->o;
    swi_output *out = &b->out;
    int scores = o->scores;
    int64_t classes = o->classes;
    char msg[1024];
    *done = 0;
    swi_output_init(out, 0, scores ? SWI_REDUCE_NONE : SWI_REDUCE_ARGMAX);
    b->out_bytes = (size_t)b->vox * (scores ? (size_t)classes * sizeof(float) : (classes > 256 ? 2u : 1u));
    out->dst_bytes = b->out_bytes; /* planned as a stored result; dst is set once allocated */
    if (o->n_spacing) {
        /* the blended scores go to the resampling sink; the labels live on the input grid */
        swi_output_init(out, 0, SWI_REDUCE_CUSTOM);
        out->on_region = bench_rs_region;
        out->user = &b->rs;
        b->out_bytes = 1;
    }
    if (!b->bio.output) return 0;
    out->dtype = scores ? SWI_DTYPE_FLOAT32 : classes > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
    out->dst_bytes = 0;
    out->on_region = swi_store_on_region;
    b->out_bytes = 0;
    int rc = bench_io_begin_output(&b->bio, &b->p, &b->in, out, scores, classes, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        return rc;
    }
    if (b->bio.init || b->bio.empty) {
        *done = 1;
        rc = bench_io_finish(&b->bio, SWI_OK, NULL, msg, sizeof msg);
        if (rc)
            fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        else
            printf("%s: %s\n", b->bio.output,
                   b->bio.init ? "created for the shards" : "this shard has no voxels");
        return rc;
    }
    out->user = b->bio.writer;
    return 0;
}

/* The mirroring and ensemble scratch under a plan (its window and batch). */
static size_t tta_bytes(const void *user, const swi_plan *plan) {
    const bench *b = user;
    return bench_tta_scratch_bytes((int)b->o.folds, b->o.mirror_combinator ? b->o.mirror_axes : 0,
                                   b->o.classes, b->in.channels, b->o.dims, plan->roi, plan->sw_batch_size);
}

/* The plan, fitted to --max-memory with what resampling back and the combinators hold. 0, 1
 * or 2 (printed). */
static int fit_plan(bench *b) {
    b->ctx = swi_create();
    if (!b->ctx) {
        fprintf(stderr, "swi bench: out of memory\n");
        return 1;
    }
    char fit[SWI_ERRLEN];
    b->with = (bench_beside){b->o.n_spacing ? &b->rs : NULL, tta_bytes, b};
    swi_status st = bench_rs_plan_fit(b->ctx, &b->p, &b->in, &b->out, &b->plan, &b->with, &b->rs_planned, fit,
                                      sizeof fit);
    if (st == SWI_OK) return 0;
    /* a budget's refusal names the input it is about (--input, or the synthetic --shape) */
    if (st == SWI_ERR_BUDGET)
        fprintf(stderr, "swi bench: %s: %s\n", TERM_TEXT(b->bio.input ? b->bio.input : "--shape"),
                TERM_TEXT(fit[0] ? fit : swi_last_error(b->ctx)));
    else
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(swi_last_error(b->ctx)));
    return st == SWI_ERR_INVALID_ARG ? 2 : 1;
}

static void print_plan(const bench *b) {
    const swi_plan *plan = &b->plan;
    const bench_opts *o = &b->o;
    int dims = o->dims;
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    printf("plan: shape");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)o->shape[k]);
    printf("  roi");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)plan->roi[k]);
    const int nn = o->grid == SWI_GRID_NNUNET;
    printf("  classes %lld  %s %g  %s\n", (long long)o->classes, nn ? "nnU-Net's grid, tile step" : "overlap",
           nn ? (o->tile_step > 0 ? o->tile_step : 1.0 - o->win.overlap[0]) : o->win.overlap[0],
           o->win.mode == SWI_BLEND_GAUSSIAN_NNUNET ? "nnU-Net's gaussian"
           : o->win.mode == SWI_BLEND_GAUSSIAN      ? "gaussian"
                                                    : "constant");
    if (o->mirror_axes || o->folds > 1) {
        int runs = 1;
        printf("plan: network %lld member%s", (long long)o->folds, o->folds == 1 ? "" : "s");
        if (o->mirror_axes) {
            printf(", mirrored along axes");
            for (int k = 0, first = 1; k < dims; k++)
                if (o->mirror_axes & (1u << k)) {
                    printf("%s%d", first ? " " : ",", k);
                    first = 0;
                    runs *= 2;
                }
        }
        printf(": %lld network runs a window%s\n", (long long)o->folds * runs,
               !o->mirror_axes        ? ""
               : o->mirror_combinator ? " (mirrored by swi_predictor_mirror)"
                                      : " (mirrored by the engine)");
    }
    if (o->accumulate == SWI_ACCUMULATE_FLOAT16) {
        printf("plan: partial sums in float16 (running weighted means; weight sums float32)\n");
    }
    printf("plan: windows");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)plan->windows_per_axis[k]);
    printf(" = %lld, predictor calls %lld (sw-batch %d), order", (long long)plan->windows_total,
           (long long)plan->predictor_calls, plan->sw_batch_size);
    for (int k = 0; k < dims; k++) printf("%s%d", k ? "," : " ", plan->order[k]);
    printf(", pipeline %s, threads %d\n", plan->pipeline ? "on" : "off", plan->threads);
    printf("plan: peak %s = input %s + windows %s + partial sums %s + outputs %s + scratch %s\n",
           cli_bytes(plan->bytes_peak, b1), cli_bytes(plan->bytes_input, b2),
           cli_bytes(plan->bytes_windows, b3), cli_bytes(plan->bytes_partial, b4),
           cli_bytes(plan->bytes_outputs, b5), cli_bytes(plan->bytes_scratch, b6));
    if (b->bio.sharded) bench_io_report_shards(&b->bio, b->ctx, &b->p, &b->in, &b->out, plan);
}

/* With --spacing: what resampling back holds, and its labels and sink. 0 or 1 (printed). */
static int begin_resampling(bench *b) {
    char b1[32], b2[32], msg[1024];
    printf("plan: resampling back %s beside the engine (input-grid labels and the sink's band%s)"
           ", total %s\n",
           cli_bytes(b->rs_planned, b1),
           b->o.mirror_axes || b->o.folds > 1 ? ", mirroring and ensemble scratch" : "",
           cli_bytes(b->plan.bytes_peak + b->rs_planned, b2));
    if (bench_rs_begin(&b->rs, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        return 1;
    }
    int64_t lo[3], hi[3];
    if (b->o.region_given &&
        swi_resample_sink_restrict(b->rs.sink, b->o.region_lo, b->o.region_hi, lo, hi) != SWI_OK) {
        fprintf(stderr, "swi bench: the resampling sink refused --region\n");
        return 1;
    }
    return 0;
}

/* The generated volume, the result's memory and the synthetic network. 0 or 1 (printed). */
static int make_buffers(bench *b) {
    const bench_opts *o = &b->o;
    b->vol = b->in.data || b->in.reader ? NULL : malloc((size_t)b->vox * sizeof(float));
    b->dst = b->out_bytes ? malloc(b->out_bytes) : NULL;
    bench_hint_huge(b->vol, (size_t)b->vox * sizeof(float));
    bench_hint_huge(b->dst, b->out_bytes);
    if ((!b->vol && !b->in.data && !b->in.reader) || (!b->dst && b->out_bytes)) {
        char b1[32];
        fprintf(stderr, "swi bench: out of memory for the %s volume\n", cli_bytes((size_t)b->vox * 4, b1));
        return 1;
    }
    /* the combinators' scratch for the plan's window and batch, as tta_bytes counted it */
    char msg[SWI_ERRLEN];
    if (o->mirror_combinator
            ? bench_tta_init(&b->tta, o->kind, o->classes, (int)o->folds, o->mirror_axes, o->dims,
                             b->plan.roi, b->plan.sw_batch_size, b->plan.threads, msg, sizeof msg)
            : bench_tta_init_engine_mirror(&b->tta, o->kind, o->classes, (int)o->folds, o->dims, b->plan.roi,
                                           b->plan.sw_batch_size, b->plan.threads, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        return 1;
    }
    if (b->vol) bench_net_volume(&b->tta.nets[0], o->dims, o->shape, b->vol);
    if (b->dst) memset(b->dst, 0, b->out_bytes);
    if (b->vol) b->in.data = b->vol;
    b->out.dst = o->n_spacing ? NULL : b->dst;
    return 0;
}

/* The run, timed, then the sink or the store finished. 0 or 1 (printed). */
static int run(bench *b, double *secs, size_t *peak) {
    char msg[1024];
    progress_state ps = {cli_now(), isatty(2)};
    b->p.progress = bench_progress;
    b->p.progress_user = &ps;
    double t0 = cli_now();
    swi_status st = swi_run(b->ctx, &b->p, &b->in, &b->tta.top, &b->out, 1);
    *secs = cli_now() - t0;
    *peak = cli_peak_rss();
    if (st == SWI_OK && b->o.n_spacing && swi_resample_sink_finish(b->rs.sink, msg, sizeof msg) != SWI_OK) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        st = SWI_ERR_CALLBACK;
    } else if (b->bio.output && bench_io_finish(&b->bio, st, b->ctx, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
        st = st == SWI_OK ? SWI_ERR_CALLBACK : st;
    } else if (st != SWI_OK) {
        fprintf(stderr, "swi bench: %s\n", TERM_TEXT(swi_last_error(b->ctx)));
    }
    return st == SWI_OK ? 0 : 1;
}

/* --labels-raw: the label map as raw bytes (the input grid's with --spacing), written as a
 * job's outputs are: its temporary made before the run, the bytes committed after it. 0 or 1
 * (printed). */
static int labels_raw_begin(bench *b) {
    char err[SWI_ERRLEN];
    if (!b->o.labels_raw ||
        bench_raw_begin(&b->labels_out, b->o.labels_raw, b->bio.force, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "swi bench: --labels-raw %s\n", TERM_TEXT(err));
    return 1;
}

static int labels_raw_finish(bench *b) {
    char err[SWI_ERRLEN];
    if (!b->o.labels_raw) return 0;
    const void *labels = b->o.n_spacing ? b->rs.labels : b->dst;
    const size_t bytes = b->o.n_spacing ? (size_t)b->rs.in_size[0] * (size_t)b->rs.in_size[1] *
                                              (size_t)b->rs.in_size[2] * (size_t)b->rs.label_bytes
                                        : b->out_bytes;
    if (bench_raw_finish(&b->labels_out, labels, bytes, b->bio.force, err, sizeof err) == 0) return 0;
    fprintf(stderr, "swi bench: --labels-raw %s\n", TERM_TEXT(err));
    return 1;
}

/* The sink's peak, the floor, and the run against the plan: the last line is
 * machine-readable. */
static void print_results(bench *b, double secs, size_t peak, size_t base_rss) {
    char b1[32], b2[32], b4[32];
    swi_plan *plan = &b->plan;
    if (b->o.n_spacing)
        printf("resample: the sink held at most %s of model-grid scores (+ %s of bookkeeping)\n",
               cli_bytes(swi_resample_sink_peak_bytes(b->rs.sink), b1),
               cli_bytes(swi_resample_sink_fixed_bytes(b->rs.sink), b2));
    if (b->o.mirror_axes || b->o.folds > 1)
        printf("network: %lld windows predicted (%lld windows, each run %lld times)\n",
               (long long)bench_tta_windows(&b->tta), (long long)plan->windows_total,
               plan->windows_total ? (long long)(bench_tta_windows(&b->tta) / plan->windows_total) : 0LL);
    plan->bytes_peak += b->rs_planned; /* planned vs measured: the whole process */
    double floor_s = b->o.floor_on ? bench_traffic_floor(plan, b->o.dims, b->o.classes, b->vox) : 0;
    printf("run: %.3f s, %.2f windows/s, peak RSS %s, planned %s + %s before the run (%.1f%% of measured)\n",
           secs, (double)plan->windows_total / secs, cli_bytes(peak, b1), cli_bytes(plan->bytes_peak, b2),
           cli_bytes(base_rss, b4), 100.0 * (double)(plan->bytes_peak + base_rss) / (double)peak);
    printf("seconds=%.3f peak_rss_mb=%.1f planned_mb=%.1f base_rss_mb=%.1f", secs, (double)peak / 1048576.0,
           (double)plan->bytes_peak / 1048576.0, (double)base_rss / 1048576.0);
    if (b->o.floor_on)
        printf(" floor_seconds=%.3f floor_multiple=%.2f", floor_s, floor_s > 0 ? secs / floor_s : 0);
    printf("\n");
}

/* The steps of a run once the options are settled; the exit status. */
static int bench_steps(bench *b, size_t base_rss) {
    int rc, done;
    if ((rc = labels_raw_begin(b))) return rc;
    if ((rc = open_volume(b))) return rc;
    set_params(b);
    if ((rc = set_output(b, &done)) || done) return rc;
    if ((rc = fit_plan(b))) return rc;
    print_plan(b);
    if (b->o.region_given) {
        swi_params q = b->p;
        memset(q.part_lo, 0, sizeof q.part_lo);
        memset(q.part_hi, 0, sizeof q.part_hi);
        swi_plan wp;
        swi_ctx *c = swi_create();
        const int64_t whole =
            c && swi_plan_run(c, &q, &b->in, &b->out, 1, &wp) == SWI_OK ? wp.windows_total : -1;
        swi_free(c);
        const int64_t *r0 = b->o.region_lo, *r1 = b->o.region_hi, *m0 = b->p.part_lo, *m1 = b->p.part_hi;
        printf("region: [%lld, %lld) x [%lld, %lld) x [%lld, %lld) of --shape, [%lld, %lld) x [%lld, %lld) x "
               "[%lld, %lld) of the model grid: windows run %lld of %lld\n",
               (long long)r0[0], (long long)r1[0], (long long)r0[1], (long long)r1[1], (long long)r0[2],
               (long long)r1[2], (long long)m0[0], (long long)m1[0], (long long)m0[1], (long long)m1[1],
               (long long)m0[2], (long long)m1[2], (long long)b->plan.windows_total, (long long)whole);
    }
    if (!b->o.n_spacing && b->rs_planned) {
        char b1[32], b2[32];
        printf("plan: mirroring and ensemble scratch %s beside the engine, total %s\n",
               cli_bytes(b->rs_planned, b1), cli_bytes(b->plan.bytes_peak + b->rs_planned, b2));
    }
    if (b->o.n_spacing && (rc = begin_resampling(b))) return rc;
    fflush(stdout);
    if ((rc = make_buffers(b))) return rc;
    double secs;
    size_t peak;
    if ((rc = run(b, &secs, &peak))) return rc;
    print_results(b, secs, peak, base_rss);
    return labels_raw_finish(b);
}

int swi_cmd_bench(int argc, char **argv) {
    /* the process before the run: code and data of swi and its libraries, counted beside
     * the plan when planned and measured peaks are compared */
    const size_t base_rss = cli_peak_rss();
    bench b;
    memset(&b, 0, sizeof b);
    int rc = bench_parse(argc, argv, &b.o, &b.bio);
    if (rc == 0)
        rc = bench_steps(&b, base_rss);
    else if (rc < 0)
        rc = 0; /* --help */
    bench_free(&b);
    return rc;
}
