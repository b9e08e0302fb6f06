/*
 * cmd_bench.c -- `swi bench`: size a job without a model.
 *
 * Runs the streaming engine on a synthetic volume with a synthetic predictor
 * (bench_net.h: linear, the worst case for class pruning, or atlas, scores like a
 * network's), prints the plan, progress, and a last line `seconds=... peak_rss_mb=... planned_mb=...`.
 * In the same run it measures the machine's fused-accumulate bandwidth
 * (acc += pred * w over large arrays, with the same thread count) and reports the
 * run time as a multiple of the traffic floor:
 *   predictor writes (4 B per window voxel and class)
 * + one fused accumulate per window voxel and class (12 B: read acc, read pred, write acc)
 * + one reduction read of the blended scores (4 B per voxel and class).
 */
#include "bench_io.h"
#include "bench_net.h"
#include "bench_resample.h"
#include "budget.h"
#include "samefile.h"
#include "swi.h"
#include "util.h"
#include "window_opts.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *BENCH_HELP =
    "usage: swi bench --shape D,H,W --classes C --roi R [options]\n"
    "\n"
    "Size a sliding-window job without a model: runs the engine on a synthetic\n"
    "volume with a synthetic predictor (see --predictor), then prints time, peak\n"
    "memory and the plan's prediction.\n"
    "\n"
    "options:\n"
    "  --shape D,H,W        volume size (1 to 3 dims)                    [required]\n"
    "  --classes C          output channels of the synthetic network     [required]\n"
    "  --roi R[,R,R]        window size, one value or one per dim        [required]\n"
    "  --overlap O          window overlap in [0, 1)                     (0.25)\n"
    "  --mode M             constant | gaussian                          (constant)\n"
    "  --output O           argmax | scores                              (argmax)\n"
    "  --sw-batch N         windows per predictor call                   (1)\n"
    "  --threads T          blending threads, 0 = all cores              (0)\n"
    "  --max-memory SIZE    peak budget, e.g. 4G; the plan is fitted or refused\n"
    "  --order A,B,C        window loop order, outermost axis first      (auto)\n"
    "  --pipeline on|off    predict batch k+1 while batch k blends      (auto)\n"
    "  --no-floor           skip the bandwidth measurement\n"
    "  --predictor P        linear | atlas                              (linear)\n"
    "                       linear: out[c] = x * w[c] (w from 0.5 to 1.5 over the\n"
    "                       classes) on white noise: every class could win anywhere,\n"
    "                       the worst case for --spacing's class pruning;\n"
    "                       atlas: scores like a trained network's on a volume of\n"
    "                       compact regions (about 16 voxels, half background): a\n"
    "                       voxel's class scores 2..4, the others -3..-1.5\n"
    "  --input FILE         run on a real volume instead of a generated one, read\n"
    "                       window by window: x.zarr, x.ome.zarr, x.h5:/path, x.nii.gz\n"
    "                       (--shape is then its size)\n"
    "  --output-file FILE   write the result to a store, chunk by chunk as it\n"
    "                       completes: labels (uint8) for --output argmax, float32\n"
    "                       scores [classes, D, H, W] for --output scores\n"
    "  --shard I/N | init   run part I of N (from 0) of the rows along the first axis,\n"
    "                       cut at output chunk boundaries, into one shared store;\n"
    "                       'init' only creates the store for the shards to fill. Into\n"
    "                       x.h5:/path the parts take turns under a lock of the file\n"
    "                       (see 'swi segment --help'); Zarr's parts never wait\n"
    "  --shard-grid AxBxC   with --shard I/N (N = A*B*C) or under mpirun (N ranks): the\n"
    "                       parts are the boxes of an A x B x C grid, cut at chunk\n"
    "                       boundaries on every axis; part I in row-major order (the\n"
    "                       last axis fastest). A box bounds each part's memory by the\n"
    "                       box, where rows leave it spanning the other two axes\n"
    "  --force              overwrite an existing --output-file\n"
    "  --input-spacing X,Y,Z  voxel size of --shape (mm), with --spacing:\n"
    "  --spacing X,Y,Z      run on the grid MONAI's Spacingd makes at this spacing and\n"
    "                       resample the scores back to --shape (streamed) before argmax\n"
    "  -h, --help           this text\n"
    "\n"
    "examples:\n"
    "  swi bench --shape 384,384,256 --classes 100 --roi 128 --overlap 0.25 \\\n"
    "            --mode gaussian --output argmax\n"
    "  swi bench --shape 256,256,160 --classes 32 --roi 96 --output scores --threads 2\n"
    "  # a real volume to a Zarr label store, in bounded memory\n"
    "  swi bench --input ct.zarr --classes 8 --roi 128 --mode gaussian \\\n"
    "            --output-file labels.zarr\n"
    "  # the same as 3 shards (separate processes, any machines sharing the store)\n"
    "  swi bench --input ct.zarr --classes 8 --roi 128 --output-file labels.zarr --shard init\n"
    "  for i in 0 1 2; do swi bench --input ct.zarr --classes 8 --roi 128 \\\n"
    "            --output-file labels.zarr --shard $i/3 & done; wait\n"
    "  # 4 boxes of a 2x2x1 grid (or: mpirun -n 4 swi bench ... --shard-grid 2x2x1)\n"
    "  for i in 0 1 2 3; do swi bench --input ct.zarr --classes 8 --roi 128 \\\n"
    "            --output-file labels.zarr --shard $i/4 --shard-grid 2x2x1 & done; wait\n"
    "\n"
    "  # a CT at 0.8x0.8x1 mm on a model trained at 1.5 mm, TotalSegmentator's 118 classes\n"
    "  swi bench --shape 512,512,400 --input-spacing 0.8,0.8,1 --spacing 1.5,1.5,1.5 \\\n"
    "            --classes 118 --roi 128\n"
    "\n"
    "The last line is machine-readable:\n"
    "  seconds=S peak_rss_mb=M planned_mb=P base_rss_mb=B floor_seconds=F floor_multiple=X\n"
    "(B: the process before the run, its code and libraries; planned is compared with\n"
    "the measured peak as P + B)\n";

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

/* what resampling back holds beside the engine under a plan */
static size_t rs_beside(void *user, const swi_plan *plan) { return bench_rs_planned(user, plan->order[0]); }

/* ---- fused-accumulate bandwidth ---- */
typedef struct bw_job {
    float *acc;
    const float *pred;
    const float *w;
    size_t n, wn;
    int reps;
} bw_job;

static void *bw_thread(void *arg) {
    bw_job *j = arg;
    for (int r = 0; r < j->reps; r++) {
        for (size_t i = 0; i < j->n; i += j->wn) {
            size_t m = j->n - i < j->wn ? j->n - i : j->wn;
            float *restrict a = j->acc + i;
            const float *restrict p = j->pred + i;
            const float *restrict w = j->w;
            for (size_t v = 0; v < m; v++) a[v] += p[v] * w[v];
        }
    }
    return NULL;
}

/* Elements per array of the bandwidth test: both arrays together at least 4x the
 * last-level cache (some servers have 512 MiB of it), at least 2 x 192 MiB. */
static size_t bandwidth_elements(void) {
    size_t n = (size_t)48 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0 && (size_t)l3 * 2 / sizeof(float) > n) n = (size_t)l3 * 2 / sizeof(float);
#endif
    if (n > ((size_t)512 << 20)) n = (size_t)512 << 20;
    return n;
}

/* Let a large malloc'd buffer fault in huge pages, as a performance-minded caller's
 * allocator would: in virtual machines 4 KiB first-touch faults cost more than the
 * whole blending of a voxel. */
static void hint_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (p && e > a + ((size_t)2 << 20)) madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Bytes per second of acc += pred * w over arrays far larger than the caches, counted
 * as 12 bytes per element (read acc, read pred, write acc; w is a cached row). */
static double fused_bandwidth(int threads) {
    size_t n = bandwidth_elements();
    size_t wn = 4096;
    float *acc = malloc(n * sizeof(float)), *pred = malloc(n * sizeof(float)),
          *w = malloc(wn * sizeof(float));
    hint_huge(acc, n * sizeof(float)); /* page faults are not what is measured */
    hint_huge(pred, n * sizeof(float));
    if (!acc || !pred || !w) {
        free(acc);
        free(pred);
        free(w);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        acc[i] = 0.0f;
        pred[i] = (float)(i & 1023) * 0.001f;
    }
    for (size_t i = 0; i < wn; i++) w[i] = 0.5f + (float)i / (float)wn;
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        pthread_t th[64];
        bw_job jobs[64];
        int t = threads > 64 ? 64 : threads;
        double t0 = cli_now();
        int started = 0;
        for (int i = 0; i < t; i++) {
            size_t lo = n / (size_t)t * (size_t)i, hi = i == t - 1 ? n : n / (size_t)t * (size_t)(i + 1);
            jobs[i] = (bw_job){acc + lo, pred + lo, w, hi - lo, wn, 2};
            if (pthread_create(&th[i], NULL, bw_thread, &jobs[i]) != 0) break;
            started++;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        if (started < t) bw_thread(&jobs[started]);
        double el = cli_now() - t0;
        double bw = el > 0 ? (double)n * 2 * 12.0 / el : 0;
        if (bw > best) best = bw;
    }
    volatile float sink = acc[n / 2];
    (void)sink;
    free(acc);
    free(pred);
    free(w);
    return best;
}

static int usage_error(const char *msg) {
    fprintf(stderr, "swi bench: %s\n(see swi bench --help)\n", msg);
    return 2;
}

int swi_cmd_bench(int argc, char **argv) {
    /* the process before the run: code and data of swi and its libraries, counted beside
     * the plan when planned and measured peaks are compared */
    const size_t base_rss = cli_peak_rss();
    int64_t shape[3] = {0}, order[3] = {-1, -1, -1};
    int dims = 0, n_order = 0;
    int64_t classes = 0, threads = 0;
    cli_window win; /* --roi, --overlap, --mode, --sw-batch */
    cli_window_init(&win);
    win.axes = 0; /* one per dim of --shape, checked once it is known */
    win.roi_negative = 1;
    win.overlap_one = 1;
    win.sw_batch_max = 4096;
    double in_spacing[3] = {0}, spacing[3] = {0};
    int n_in_spacing = 0, n_spacing = 0;
    int scores = 0, pipeline = -1, floor_on = 1;
    bench_net_kind kind = BENCH_NET_LINEAR;
    size_t max_memory = 0;
    static const struct option opts[] = {{"shape", required_argument, 0, 's'},
                                         {"classes", required_argument, 0, 'c'},
                                         {"roi", required_argument, 0, 'r'},
                                         {"overlap", required_argument, 0, 'o'},
                                         {"mode", required_argument, 0, 'm'},
                                         {"output", required_argument, 0, 'O'},
                                         {"sw-batch", required_argument, 0, 'b'},
                                         {"threads", required_argument, 0, 't'},
                                         {"max-memory", required_argument, 0, 'M'},
                                         {"order", required_argument, 0, 'x'},
                                         {"pipeline", required_argument, 0, 'p'},
                                         {"no-floor", no_argument, 0, 'F'},
                                         {"input", required_argument, 0, 'I'},
                                         {"output-file", required_argument, 0, 'W'},
                                         {"shard", required_argument, 0, 'S'},
                                         {"shard-grid", required_argument, 0, 'Q'},
                                         {"force", no_argument, 0, 'f'},
                                         {"input-spacing", required_argument, 0, 'P'},
                                         {"spacing", required_argument, 0, 'G'},
                                         {"predictor", required_argument, 0, 'N'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    bench_io bio;
    bench_io_init(&bio);
    optind = 1;
    opterr = 0;
    int ch;
    char msg[1024];
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            dims = cli_parse_i64_list(optarg, shape, 3);
            if (dims < 1) return usage_error("--shape takes 1 to 3 positive sizes, e.g. 384,384,256");
            for (int k = 0; k < dims; k++)
                if (shape[k] < 1) return usage_error("--shape: sizes must be >= 1");
            break;
        case 'c':
            if (cli_parse_i64(optarg, 1, 65536, &classes)) return usage_error("--classes takes 1..65536");
            break;
        case 'r':
        case 'o':
        case 'm':
        case 'b': {
            const char *flag = ch == 'r' ? "roi" : ch == 'o' ? "overlap" : ch == 'm' ? "mode" : "sw-batch";
            if (cli_window_option(&win, flag, optarg, msg, sizeof msg) < 0) return usage_error(msg);
            break;
        }
        case 'O':
            if (!strcmp(optarg, "scores"))
                scores = 1;
            else if (!strcmp(optarg, "argmax"))
                scores = 0;
            else
                return usage_error("--output takes argmax or scores");
            break;
        case 't':
            if (cli_parse_i64(optarg, 0, 1024, &threads)) return usage_error("--threads takes 0..1024");
            break;
        case 'M':
            if (cli_parse_size(optarg, &max_memory))
                return usage_error("--max-memory takes a size like 4G or 512M");
            break;
        case 'x':
            n_order = cli_parse_i64_list(optarg, order, 3);
            if (n_order < 1) return usage_error("--order takes a permutation of the dims, e.g. 0,1,2");
            break;
        case 'p':
            if (!strcmp(optarg, "on"))
                pipeline = 1;
            else if (!strcmp(optarg, "off"))
                pipeline = 0;
            else if (!strcmp(optarg, "auto"))
                pipeline = -1;
            else
                return usage_error("--pipeline takes on, off or auto");
            break;
        case 'F': floor_on = 0; break;
        case 'N':
            if (!strcmp(optarg, "linear"))
                kind = BENCH_NET_LINEAR;
            else if (!strcmp(optarg, "atlas"))
                kind = BENCH_NET_ATLAS;
            else
                return usage_error("--predictor takes linear or atlas");
            break;
        case 'I': bio.input = optarg; break;
        case 'W': bio.output = optarg; break;
        case 'f': bio.force = 1; break;
        case 'S':
            if (cli_shard_parse(optarg, &bio.part, &bio.parts, &bio.init, msg)) return usage_error(msg);
            bio.sharded = 1;
            break;
        case 'Q':
            if (cli_shard_grid_parse(optarg, bio.grid, msg)) return usage_error(msg);
            bio.grid_given = 1;
            break;
        case 'P':
        case 'G': {
            double *v = ch == 'P' ? in_spacing : spacing;
            int n = cli_parse_double_list(optarg, v, 3);
            if (n == 1) v[1] = v[2] = v[0];
            if ((n != 1 && n != 3) || !(v[0] > 0) || !(v[1] > 0) || !(v[2] > 0))
                return usage_error(ch == 'P' ? "--input-spacing takes one or three sizes in mm, each > 0"
                                             : "--spacing takes one or three sizes in mm, each > 0");
            *(ch == 'P' ? &n_in_spacing : &n_spacing) = 1;
            break;
        }
        case 'h': fputs(BENCH_HELP, stdout); return 0;
        default:
            snprintf(msg, sizeof msg, "unknown or incomplete option '%s'", argv[optind - 1]);
            return usage_error(msg);
        }
    }
    if (optind < argc) {
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return usage_error(msg);
    }
    if (bio.input) {
        if (dims) return usage_error("--input gives the shape: leave --shape out");
        if (kind != BENCH_NET_LINEAR)
            return usage_error("--predictor atlas makes its own volume: leave --input out");
        dims = 3;
    }
    if (!dims || !classes || !win.n_roi)
        return usage_error("--shape (or --input), --classes and --roi are required");
    if (bio.sharded && !bio.output) return usage_error("--shard needs --output-file (the shared store)");
    if (bio.output && !cli_is_store(bio.output))
        return usage_error("--output-file takes a store: x.zarr, x.ome.zarr or x.h5:/path");
    if (bio.output) {
        /* an output store that is, holds or lies in the input: refused, --force or not */
        const cli_named_path in_p[1] = {{"--input", bio.input}}, out_p[1] = {{"--output-file", bio.output}};
        if (cli_check_outputs_apart(in_p, 1, out_p, 1, msg)) {
            fprintf(stderr, "swi bench: %s\n", msg);
            return 1;
        }
    }
    if (bench_io_refuse_launcher()) return 1;
    if (bench_io_mpi(&bio, msg, sizeof msg)) return usage_error(msg);
    if (bench_io_grid(&bio, msg, sizeof msg)) return usage_error(msg);
    if (win.n_roi != 1 && win.n_roi != dims)
        return usage_error("--roi needs one value or one per dim of --shape");
    if (n_order && n_order != dims) return usage_error("--order needs one axis per dim of --shape");
    if (n_in_spacing != n_spacing) return usage_error("--input-spacing and --spacing go together");
    if (n_spacing && (dims != 3 || scores))
        return usage_error("--spacing needs a 3-D --shape and --output argmax");
    if (n_spacing && (bio.input || bio.output || bio.sharded))
        return usage_error("--spacing runs on a generated volume: no --input, --output-file or --shard");
    if (bio.input && bench_io_open_input(&bio, shape, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", msg);
        bench_io_close(&bio);
        return 1;
    }
    bench_rs rs;
    memset(&rs, 0, sizeof rs);
    if (n_spacing) {
        if (bench_rs_setup(&rs, shape, in_spacing, spacing, classes, msg, sizeof msg)) {
            fprintf(stderr, "swi bench: --spacing: %s\n", msg);
            return 1;
        }
        printf("resample: input %lldx%lldx%lld at %g,%g,%g mm -> model grid %lldx%lldx%lld at "
               "%g,%g,%g mm\n",
               (long long)shape[0], (long long)shape[1], (long long)shape[2], in_spacing[0], in_spacing[1],
               in_spacing[2], (long long)rs.grid.size[0], (long long)rs.grid.size[1],
               (long long)rs.grid.size[2], rs.grid.pixdim[0], rs.grid.pixdim[1], rs.grid.pixdim[2]);
        memcpy(shape, rs.grid.size, sizeof rs.grid.size); /* the engine runs there */
    }

    swi_params p;
    swi_params_init(&p, dims);
    for (int k = 0; k < dims; k++) {
        p.roi[k] = win.roi[k];
        p.overlap[k] = win.overlap[0];
        if (n_order) p.order[k] = (int)order[k];
    }
    if (n_order) p.order_mode = SWI_ORDER_FIXED;

    p.mode = win.mode;
    p.sw_batch_size = win.sw_batch;
    p.threads = (int)threads;
    p.max_memory = max_memory;
    p.pipeline = pipeline < 0 ? SWI_PIPELINE_AUTO : pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    p.heads[0].channels = classes;
    for (int k = 0; k < dims; k++) p.heads[0].spatial[k] = p.roi[k] > 0 ? p.roi[k] : shape[k];

    int64_t vox = 1;
    for (int k = 0; k < dims; k++) vox *= shape[k];
    swi_tensor in = {
        .data = NULL, .batch = 1, .channels = 1, .dims = dims, .size = {shape[0], shape[1], shape[2]}};
    swi_output out;
    swi_output_init(&out, 0, scores ? SWI_REDUCE_NONE : SWI_REDUCE_ARGMAX);
    size_t out_bytes = (size_t)vox * (scores ? (size_t)classes * sizeof(float) : (classes > 256 ? 2u : 1u));
    out.dst_bytes = out_bytes; /* planned as a stored result; dst is set once allocated */
    if (n_spacing) {
        /* the blended scores go to the resampling sink; the labels live on the input grid */
        swi_output_init(&out, 0, SWI_REDUCE_CUSTOM);
        out.on_region = bench_rs_region;
        out.user = &rs;
        out_bytes = 1;
    }
    if (bio.input) bench_io_tensor(&bio, &in);
    if (bio.output) {
        out.dtype = scores ? SWI_DTYPE_FLOAT32 : classes > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
        out.dst_bytes = 0;
        out.on_region = swi_store_on_region;
        out_bytes = 0;
        int rc = bench_io_begin_output(&bio, &p, &in, &out, scores, classes, msg, sizeof msg);
        if (rc) {
            fprintf(stderr, "swi bench: %s\n", msg);
            bench_io_close(&bio);
            return rc;
        }
        if (bio.init || bio.empty) {
            rc = bench_io_finish(&bio, SWI_OK, NULL, msg, sizeof msg);
            if (rc)
                fprintf(stderr, "swi bench: %s\n", msg);
            else
                printf("%s: %s\n", bio.output,
                       bio.init ? "created for the shards" : "this shard has no voxels");
            bench_io_close(&bio);
            return rc;
        }
        out.user = bio.writer;
    }

    swi_ctx *ctx = swi_create();
    if (!ctx) {
        fprintf(stderr, "swi bench: out of memory\n");
        bench_io_close(&bio);
        return 1;
    }
    swi_plan plan;
    size_t rs_planned = 0;
    char fit[SWI_ERRLEN];
    swi_status st = cli_plan_fit(ctx, &p, &in, &out, 1, &plan, n_spacing ? rs_beside : NULL, &rs, &rs_planned,
                                 fit, sizeof fit);
    if (st != SWI_OK) {
        fprintf(stderr, "swi bench: %s\n", st == SWI_ERR_BUDGET && fit[0] ? fit : swi_last_error(ctx));
        swi_free(ctx);
        bench_io_close(&bio);
        return st == SWI_ERR_INVALID_ARG ? 2 : 1;
    }
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    printf("plan: shape");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)shape[k]);
    printf("  roi");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)plan.roi[k]);
    printf("  classes %lld  overlap %g  %s\n", (long long)classes, win.overlap[0],
           win.mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    printf("plan: windows");
    for (int k = 0; k < dims; k++) printf("%s%lld", k ? "x" : " ", (long long)plan.windows_per_axis[k]);
    printf(" = %lld, predictor calls %lld (sw-batch %d), order", (long long)plan.windows_total,
           (long long)plan.predictor_calls, plan.sw_batch_size);
    for (int k = 0; k < dims; k++) printf("%s%d", k ? "," : " ", plan.order[k]);
    printf(", pipeline %s, threads %d\n", plan.pipeline ? "on" : "off", plan.threads);
    char b6[32];
    printf("plan: peak %s = input %s + windows %s + partial sums %s + outputs %s + scratch %s\n",
           cli_bytes(plan.bytes_peak, b1), cli_bytes(plan.bytes_input, b2), cli_bytes(plan.bytes_windows, b3),
           cli_bytes(plan.bytes_partial, b4), cli_bytes(plan.bytes_outputs, b5),
           cli_bytes(plan.bytes_scratch, b6));
    if (bio.sharded) bench_io_report_shards(&bio, ctx, &p, &in, &out, &plan);
    if (n_spacing) {
        printf("plan: resampling back %s beside the engine (input-grid labels and the sink's band)"
               ", total %s\n",
               cli_bytes(rs_planned, b1), cli_bytes(plan.bytes_peak + rs_planned, b2));
        if (bench_rs_begin(&rs, msg, sizeof msg)) {
            fprintf(stderr, "swi bench: %s\n", msg);
            bench_rs_free(&rs);
            swi_free(ctx);
            return 1;
        }
    }
    fflush(stdout);

    float *vol = in.data || in.reader ? NULL : malloc((size_t)vox * sizeof(float));
    void *dst = out_bytes ? malloc(out_bytes) : NULL;
    bench_net net;
    const int net_ok = bench_net_init(&net, kind, classes) == 0;
    hint_huge(vol, (size_t)vox * sizeof(float));
    hint_huge(dst, out_bytes);
    if ((!vol && !in.data && !in.reader) || (!dst && out_bytes) || !net_ok) {
        fprintf(stderr, "swi bench: out of memory for the %s volume\n", cli_bytes((size_t)vox * 4, b1));
        free(vol);
        free(dst);
        bench_net_free(&net);
        swi_free(ctx);
        bench_io_close(&bio);
        return 1;
    }
    if (vol) bench_net_volume(&net, dims, shape, vol);
    if (dst) memset(dst, 0, out_bytes);
    if (vol) in.data = vol;
    net.threads = plan.threads;
    out.dst = n_spacing ? NULL : dst;
    progress_state ps = {cli_now(), isatty(2)};
    p.progress = bench_progress;
    p.progress_user = &ps;
    swi_predictor pred = {bench_net_predict, &net};
    double t0 = cli_now();
    st = swi_run(ctx, &p, &in, &pred, &out, 1);
    double secs = cli_now() - t0;
    size_t peak = cli_peak_rss();
    if (st == SWI_OK && n_spacing && swi_resample_sink_finish(rs.sink, msg, sizeof msg) != SWI_OK) {
        fprintf(stderr, "swi bench: %s\n", msg);
        st = SWI_ERR_CALLBACK;
    } else if (bio.output && bench_io_finish(&bio, st, ctx, msg, sizeof msg)) {
        fprintf(stderr, "swi bench: %s\n", msg);
        st = st == SWI_OK ? SWI_ERR_CALLBACK : st;
    } else if (st != SWI_OK) {
        fprintf(stderr, "swi bench: %s\n", swi_last_error(ctx));
    }
    if (st != SWI_OK) {
        free(vol);
        free(dst);
        bench_net_free(&net);
        bench_rs_free(&rs);
        swi_free(ctx);
        bench_io_close(&bio);
        return 1;
    }
    if (n_spacing)
        printf("resample: the sink held at most %s of model-grid scores (+ %s of bookkeeping)\n",
               cli_bytes(swi_resample_sink_peak_bytes(rs.sink), b1),
               cli_bytes(swi_resample_sink_fixed_bytes(rs.sink), b2));
    plan.bytes_peak += rs_planned; /* planned vs measured: the whole process */
    /* traffic floor */
    double floor_s = 0, bw = 0;
    if (floor_on) {
        int t = plan.threads;
        bw = fused_bandwidth(t);
        double per_win = (double)plan.windows_total * (double)classes;
        for (int k = 0; k < dims; k++) per_win *= (double)plan.roi[k];
        double bytes = per_win * 4.0 + per_win * 12.0 + (double)classes * (double)vox * 4.0;
        floor_s = bw > 0 ? bytes / bw : 0;
        printf("floor: fused accumulate %.2f GB/s on %d threads; traffic %.2f GB -> floor %.3f s\n", bw / 1e9,
               t, bytes / 1e9, floor_s);
    }
    printf("run: %.3f s, %.2f windows/s, peak RSS %s, planned %s + %s before the run (%.1f%% of measured)\n",
           secs, (double)plan.windows_total / secs, cli_bytes(peak, b1), cli_bytes(plan.bytes_peak, b2),
           cli_bytes(base_rss, b4), 100.0 * (double)(plan.bytes_peak + base_rss) / (double)peak);
    printf("seconds=%.3f peak_rss_mb=%.1f planned_mb=%.1f base_rss_mb=%.1f", secs, (double)peak / 1048576.0,
           (double)plan.bytes_peak / 1048576.0, (double)base_rss / 1048576.0);
    if (floor_on)
        printf(" floor_seconds=%.3f floor_multiple=%.2f", floor_s, floor_s > 0 ? secs / floor_s : 0);
    printf("\n");
    free(vol);
    free(dst);
    bench_net_free(&net);
    bench_rs_free(&rs);
    swi_free(ctx);
    bench_io_close(&bio);
    return 0;
}
