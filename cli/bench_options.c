/* bench_options.c -- see bench_options.h. */
#include "bench_options.h"

#include "mpi_job.h"
#include "swi_pipeline.h"
#include "termtext.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    "                       voxel's class scores 2..4, the others -3..-1.5, smooth\n"
    "                       over the volume and drifting across the window\n"
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
    "  --region I0:I1,J0:J1,K0:K1  only the whole run's windows touching this box of --shape's\n"
    "                       voxels (on the model grid with --spacing: the box the way back\n"
    "                       reads for it); prints windows run N of M\n"
    "  --force              overwrite an existing --output-file\n"
    "  --input-spacing X,Y,Z  voxel size of --shape (mm), with --spacing:\n"
    "  --spacing X,Y,Z      run on the grid MONAI's Spacingd makes at this spacing and\n"
    "                       resample the scores back to --shape (streamed) before argmax;\n"
    "                       with --grid nnunet nnU-Net's grid and way back instead\n"
    "  --grid G             monai | nnunet                               (monai)\n"
    "                       nnunet: nnU-Net v2's window starts (tile step 0.5 unless\n"
    "                       --tile-step-size or --overlap says 1 - O), its Gaussian\n"
    "                       (--mode gaussian, then the default), and with --spacing its\n"
    "                       shape round(in / out * size), the logits back along\n"
    "                       (o + 0.5) * in / out - 0.5 with order 1 (the nearest slice\n"
    "                       along a separate-z axis), as 'swi segment --model DIR'\n"
    "  --tile-step-size F   nnU-Net's step as a fraction of the window, in (0, 1]\n"
    "                       (--grid nnunet; the same as --overlap 1-F)   (0.5)\n"
    "  --mirror-axes A,B,C  test-time mirroring: each window is also predicted\n"
    "                       flipped along every non-empty subset of these window axes\n"
    "                       (from 0, outermost first) and the 2^n runs averaged   (none)\n"
    "  --mirror-by M        engine | combinator                         (engine)\n"
    "                       engine: swi_params.mirror_axes, each run blended as it\n"
    "                       comes (one window output held); combinator:\n"
    "                       swi_predictor_mirror, the runs summed in a second buffer\n"
    "  --accumulate T       float32 | float16: the partial sums' type      (float32)\n"
    "                       float16 is nnU-Net's own accumulator, half the bytes\n"
    "  --folds N            an ensemble of N synthetic members (their class weights\n"
    "                       differ), averaged as nnU-Net averages its folds, 1..16  (1)\n"
    "  --labels-raw FILE    also write the argmax label map as raw bytes in C order\n"
    "                       (uint8; uint16 above 256 classes), on --shape's grid, to\n"
    "                       compare runs; refuses an existing FILE unless --force\n"
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
    "  # the same as nnU-Net runs it: its grid at tile step 0.5, its Gaussian, mirroring\n"
    "  # on all three axes (8 network runs a window), its resampling back, atlas scores\n"
    "  swi bench --shape 512,512,400 --input-spacing 0.8,0.8,1 --spacing 1.5 --grid nnunet \\\n"
    "            --classes 118 --roi 128 --mirror-axes 0,1,2 --predictor atlas\n"
    "  # its model grid alone (no way back), five folds\n"
    "  swi bench --shape 273,273,267 --grid nnunet --classes 118 --roi 128 \\\n"
    "            --mirror-axes 0,1,2 --folds 5 --predictor atlas\n"
    "\n"
    "The last line is machine-readable:\n"
    "  seconds=S peak_rss_mb=M planned_mb=P base_rss_mb=B floor_seconds=F floor_multiple=X\n"
    "(B: the process before the run, its code and libraries; planned is compared with\n"
    "the measured peak as P + B)\n";

static const struct option LONG_OPTS[] = {{"shape", required_argument, 0, 's'},
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
                                          {"region", required_argument, 0, 'R'},
                                          {"force", no_argument, 0, 'f'},
                                          {"input-spacing", required_argument, 0, 'P'},
                                          {"spacing", required_argument, 0, 'G'},
                                          {"predictor", required_argument, 0, 'N'},
                                          {"grid", required_argument, 0, 'g'},
                                          {"tile-step-size", required_argument, 0, 'T'},
                                          {"mirror-axes", required_argument, 0, 'A'},
                                          {"folds", required_argument, 0, 'K'},
                                          {"labels-raw", required_argument, 0, 'L'},
                                          {"mirror-by", required_argument, 0, 'B'},
                                          {"accumulate", required_argument, 0, 'U'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};

static int usage_error(const char *msg) {
    fprintf(stderr, "swi bench: %s\n(see swi bench --help)\n", TERM_TEXT(msg));
    return 2;
}

/* The index of s in names[0..n-1], or -1. */
static int choice(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* --input-spacing ('P') or --spacing ('G'): one size or three, in mm. */
static int spacing_option(bench_opts *o, int ch, const char *arg) {
    double *v = ch == 'P' ? o->in_spacing : o->spacing;
    int n = cli_parse_double_list(arg, v, 3);
    if (n == 1) v[1] = v[2] = v[0];
    if ((n != 1 && n != 3) || !(v[0] > 0) || !(v[1] > 0) || !(v[2] > 0))
        return usage_error(ch == 'P' ? "--input-spacing takes one or three sizes in mm, each > 0"
                                     : "--spacing takes one or three sizes in mm, each > 0");
    *(ch == 'P' ? &o->n_in_spacing : &o->n_spacing) = 1;
    return 0;
}

/* --mirror-axes: distinct window axes 0..2 (matched to the dims later). */
static int mirror_option(bench_opts *o, const char *arg) {
    int64_t a[4];
    const int n = cli_parse_i64_list(arg, a, 4);
    if (n < 1 || n > 3) return usage_error("--mirror-axes takes 1 to 3 window axes, e.g. 0,1,2");
    o->mirror_axes = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] < 0 || a[i] > 2) return usage_error("--mirror-axes: axes are 0, 1 or 2");
        if (o->mirror_axes & (1u << a[i])) return usage_error("--mirror-axes: an axis given twice");
        o->mirror_axes |= 1u << a[i];
    }
    return 0;
}

/* The option `ch` with its argument: 0, or 2 after a usage error. */
static int one_option(bench_opts *o, bench_io *bio, int ch, const char *arg, const char *name) {
    static const char *const OUTPUTS[] = {"argmax", "scores"}, *const PIPELINES[] = {"off", "on", "auto"},
                             *const PREDICTORS[] = {"linear", "atlas"}, *const GRIDS[] = {"monai", "nnunet"},
                             *const MIRROR_BY[] = {"engine", "combinator"},
                             *const ACCUMULATE[] = {"float32", "float16"};
    char msg[1024];
    int i;
    switch (ch) {
    case 's':
        o->dims = cli_parse_i64_list(arg, o->shape, 3);
        if (o->dims < 1) return usage_error("--shape takes 1 to 3 positive sizes, e.g. 384,384,256");
        for (int k = 0; k < o->dims; k++)
            if (o->shape[k] < 1) return usage_error("--shape: sizes must be >= 1");
        return 0;
    case 'c':
        if (cli_parse_i64(arg, 1, 65536, &o->classes)) return usage_error("--classes takes 1..65536");
        return 0;
    case 'r':
    case 'o':
    case 'm':
    case 'b': return cli_window_option(&o->win, name, arg, msg, sizeof msg) < 0 ? usage_error(msg) : 0;
    case 'O':
        if ((i = choice(arg, OUTPUTS, 2)) < 0) return usage_error("--output takes argmax or scores");
        o->scores = i;
        return 0;
    case 't':
        if (cli_parse_i64(arg, 0, 1024, &o->threads)) return usage_error("--threads takes 0..1024");
        return 0;
    case 'M':
        if (cli_parse_size(arg, &o->max_memory))
            return usage_error("--max-memory takes a size like 4G or 512M");
        return 0;
    case 'x':
        o->n_order = cli_parse_i64_list(arg, o->order, 3);
        if (o->n_order < 1) return usage_error("--order takes a permutation of the dims, e.g. 0,1,2");
        return 0;
    case 'p':
        if ((i = choice(arg, PIPELINES, 3)) < 0) return usage_error("--pipeline takes on, off or auto");
        o->pipeline = i == 2 ? -1 : i;
        return 0;
    case 'F': o->floor_on = 0; return 0;
    case 'N':
        if ((i = choice(arg, PREDICTORS, 2)) < 0) return usage_error("--predictor takes linear or atlas");
        o->kind = i ? BENCH_NET_ATLAS : BENCH_NET_LINEAR;
        return 0;
    case 'I': bio->input = arg; return 0;
    case 'W': bio->output = arg; return 0;
    case 'f': bio->force = 1; return 0;
    case 'S':
        if (cli_shard_parse(arg, &bio->part, &bio->parts, &bio->init, msg)) return usage_error(msg);
        bio->sharded = 1;
        return 0;
    case 'R': {
        /* I0:I1,J0:J1,K0:K1 (hi exclusive); checked against --shape once it is known */
        const char *q = arg;
        for (int a = 0; a < 3; a++) {
            char *end;
            long long lo = strtoll(q, &end, 10), hi;
            if (end == q || *end != ':') return usage_error("--region: give I0:I1,J0:J1,K0:K1 (voxels)");
            q = end + 1;
            hi = strtoll(q, &end, 10);
            if (end == q || *end != (a < 2 ? ',' : '\0') || lo < 0 || lo >= hi)
                return usage_error("--region: give I0:I1,J0:J1,K0:K1 (voxels, 0 <= lo < hi)");
            q = end + 1;
            o->region_lo[a] = lo;
            o->region_hi[a] = hi;
        }
        o->region_given = 1;
        return 0;
    }
    case 'Q':
        if (cli_shard_grid_parse(arg, bio->grid, msg)) return usage_error(msg);
        bio->grid_given = 1;
        return 0;
    case 'P':
    case 'G': return spacing_option(o, ch, arg);
    case 'g':
        if ((i = choice(arg, GRIDS, 2)) < 0) return usage_error("--grid takes monai or nnunet");
        o->grid = i ? SWI_GRID_NNUNET : SWI_GRID_MONAI;
        return 0;
    case 'T':
        if (cli_parse_double(arg, &o->tile_step) || !(o->tile_step > 0 && o->tile_step <= 1))
            return usage_error("--tile-step-size takes a fraction of the window in (0, 1], e.g. 0.5");
        return 0;
    case 'A': return mirror_option(o, arg);
    case 'K':
        if (cli_parse_i64(arg, 1, BENCH_MAX_FOLDS, &o->folds)) return usage_error("--folds takes 1..16");
        return 0;
    case 'B':
        if ((i = choice(arg, MIRROR_BY, 2)) < 0) return usage_error("--mirror-by takes engine or combinator");
        o->mirror_combinator = i;
        return 0;
    case 'U':
        if ((i = choice(arg, ACCUMULATE, 2)) < 0) return usage_error("--accumulate takes float32 or float16");
        o->accumulate = i ? SWI_ACCUMULATE_FLOAT16 : SWI_ACCUMULATE_FLOAT32;
        return 0;
    case 'L':
        if (!arg[0]) return usage_error("--labels-raw takes a file name");
        o->labels_raw = arg;
        return 0;
    default: return -1;
    }
}

/* Under mpirun (MPI built in): start MPI, make this rank's shard. 0, or 2 (usage) with err. */
static int bench_mpi(bench_io *b, char *err, size_t n) {
    int rank = 0, size = 1;
    if (!cli_mpi_start(&rank, &size)) return 0;
    if (b->sharded) {
        snprintf(err, n, "under mpirun the ranks are the shards: leave --shard out");
        return 2;
    }
    if (!b->output) {
        snprintf(err, n, "under mpirun each rank writes its part of one store: give --output-file");
        return 2;
    }
    b->sharded = 1;
    b->mpi = 1;
    b->all_ok = cli_mpi_all_ok;
    b->part = rank;
    b->parts = size;
    return 0;
}

/* nnU-Net's grid, mirroring, folds and the raw labels: what goes with what. 0 or 2 (printed). */
static int check_nnunet(bench_opts *o, const bench_io *bio) {
    if (o->tile_step > 0 && o->grid != SWI_GRID_NNUNET)
        return usage_error("--tile-step-size is nnU-Net's step: give --grid nnunet (or --overlap)");
    if (o->tile_step > 0 && (o->win.given & CLI_WINDOW_OVERLAP))
        return usage_error("--tile-step-size is 1 - overlap: give one of it and --overlap");
    if (o->grid == SWI_GRID_NNUNET) {
        /* nnU-Net's own number goes to the grid (swi_params.tile_step): 1 - (1 - t) is not
         * always t in double */
        if (!(o->win.given & CLI_WINDOW_OVERLAP) && !(o->tile_step > 0)) o->tile_step = 0.5;
        /* nnU-Net's Gaussian unless --mode constant */
        if (!(o->win.given & CLI_WINDOW_MODE) || o->win.mode == SWI_BLEND_GAUSSIAN)
            o->win.mode = SWI_BLEND_GAUSSIAN_NNUNET;
    }
    if (o->mirror_axes >> o->dims)
        return usage_error("--mirror-axes: an axis beyond --shape's dims (axes count from 0)");
    if (o->labels_raw && (o->scores || bio->output))
        return usage_error(
            "--labels-raw writes argmax labels held in memory: no --output scores or --output-file");
    return 0;
}

/* What goes together, in the order the messages come: the volume, the output store, the
 * launcher and the shards, then the lists against the dims. 0, 1 or 2 (printed). */
static int check_combination(bench_opts *o, bench_io *bio) {
    char msg[1024];
    if (bio->input) {
        if (o->dims) return usage_error("--input gives the shape: leave --shape out");
        if (o->kind != BENCH_NET_LINEAR)
            return usage_error("--predictor atlas makes its own volume: leave --input out");
        o->dims = 3;
    }
    if (!o->dims || !o->classes || !o->win.n_roi)
        return usage_error("--shape (or --input), --classes and --roi are required");
    if (bio->sharded && !bio->output) return usage_error("--shard needs --output-file (the shared store)");
    if (o->region_given && (bio->sharded || bio->output))
        return usage_error("--region runs in memory: no --shard or --output-file");
    for (int a = 0; o->region_given && a < 3; a++)
        if (o->dims != 3 || (o->shape[a] > 0 && o->region_hi[a] > o->shape[a]))
            return usage_error("--region: a box of a 3-D --shape, inside it");
    if (bio->output && !cli_is_store(bio->output))
        return usage_error("--output-file takes a store: x.zarr, x.ome.zarr or x.h5:/path");
    if (bio->output || o->labels_raw) {
        /* an output that is, holds or lies in the input: refused, --force or not */
        const swi_job_path in_p[1] = {{"--input", bio->input}},
                           out_p[2] = {{"--output-file", bio->output}, {"--labels-raw", o->labels_raw}};
        if (swi_job_outputs_apart(in_p, 1, out_p, 2, msg, sizeof msg) != SWI_OK) {
            fprintf(stderr, "swi bench: %s\n", TERM_TEXT(msg));
            return 1;
        }
    }
    if (!cli_mpi_built() && cli_refuse_mpi_without_support("swi bench")) return 1;
    if (bench_mpi(bio, msg, sizeof msg)) return usage_error(msg);
    if (bench_io_grid(bio, msg, sizeof msg)) return usage_error(msg);
    if (o->win.n_roi != 1 && o->win.n_roi != o->dims)
        return usage_error("--roi needs one value or one per dim of --shape");
    if (o->n_order && o->n_order != o->dims) return usage_error("--order needs one axis per dim of --shape");
    if (o->n_in_spacing != o->n_spacing) return usage_error("--input-spacing and --spacing go together");
    if (o->n_spacing && (o->dims != 3 || o->scores))
        return usage_error("--spacing needs a 3-D --shape and --output argmax");
    if (o->n_spacing && (bio->input || bio->output || bio->sharded))
        return usage_error("--spacing runs on a generated volume: no --input, --output-file or --shard");
    return check_nnunet(o, bio);
}

int bench_parse(int argc, char **argv, bench_opts *o, bench_io *bio) {
    memset(o, 0, sizeof *o);
    o->order[0] = o->order[1] = o->order[2] = -1;
    o->pipeline = -1;
    o->floor_on = 1;
    o->kind = BENCH_NET_LINEAR;
    o->grid = SWI_GRID_MONAI;
    o->folds = 1;
    cli_window_init(&o->win);
    o->win.axes = 0; /* one per dim of --shape, checked once it is known */
    o->win.roi_negative = 1;
    o->win.overlap_one = 1;
    o->win.sw_batch_max = 4096;
    bench_io_init(bio);
    optind = 1;
    opterr = 0;
    int ch, li = 0;
    while ((ch = getopt_long(argc, argv, "h", LONG_OPTS, &li)) != -1) {
        if (ch == 'h') {
            fputs(BENCH_HELP, stdout);
            return -1;
        }
        int rc = one_option(o, bio, ch, optarg, LONG_OPTS[li].name);
        if (rc > 0) return rc;
        if (rc < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "unknown or incomplete option '%s'", argv[optind - 1]);
            return usage_error(msg);
        }
    }
    if (optind < argc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return usage_error(msg);
    }
    return check_combination(o, bio);
}
