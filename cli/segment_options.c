/*
 * segment_options.c -- the command line of `swi segment` and `swi plan`: help texts,
 * defaults and the parser (seg_parse). It checks the options alone; files and the model
 * are checked by segment_setup.c.
 */
#include "cli.h"

#include "shard.h"
#include "stores.h"
#include "swi_resample.h"
#include "util.h"
#include "window_opts.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SEGMENT_HELP[] =
    "usage: swi segment --model M.onnx --input IN.nii.gz --output LABELS.nii.gz [options]\n"
    "       swi segment --model M.onnx --input-dir IN/ --output-dir OUT/ [options]\n"
    "\n"
    "Segment a 3-D volume (NIfTI, NRRD, MetaImage or a DICOM series) with an ONNX\n"
    "network by sliding-window inference (MONAI's sliding_window_inference, streamed).\n"
    "The volume is tiled with overlapping windows; the network sees each as [1, channels, i, j, k] (voxel indices, k fastest,\n"
    "as nibabel/MONAI load a NIfTI file; i, j, k as ITK indexes the other formats); the\n"
    "blended scores become a label map (argmax) with the input's geometry (qform/sform,\n"
    "or origin, spacing and direction), so it overlays the image exactly.\n"
    "\n"
    "Examples:\n"
    "  # the model's own window, 25% overlap, gaussian blending, 4 windows per call\n"
    "  swi segment --model unet.onnx --input ct.nii.gz --output labels.nii.gz \\\n"
    "      --mode gaussian --sw-batch 4\n"
    "\n"
    "  # CT preprocessing like MONAI ScaleIntensityRange(-175, 250, 0, 1, clip=True)\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz \\\n"
    "      --clip -175,250 --scale -175,250,0,1\n"
    "\n"
    "  # a DICOM series (a directory of slices) -> labels for 3D Slicer, as NRRD\n"
    "  swi segment --model m.onnx --input CT_SERIES/ --output labels.nrrd\n"
    "\n"
    "  # two MR contrasts as two channels, z-scored, mirror test-time augmentation\n"
    "  swi segment --model m.onnx --input t1.nii.gz --input flair.nii.gz \\\n"
    "      --output seg.nii.gz --zscore --tta\n"
    "\n"
    "  # keep the probabilities and a picture, within 4 GB of engine memory\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz \\\n"
    "      --scores prob.nii.gz --softmax --preview seg.png --max-memory 4G\n"
    "\n"
    "  # a page to review it in a browser: three planes, 3-D, class volumes (offline)\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz --report seg.html\n"
    "\n"
    "  # in a pipeline: refuse scans with NaN or Inf voxels instead of zeroing them\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz --nonfinite fail\n"
    "\n"
    "  # a model that carries its card (m.json beside m.onnx): its own pipeline\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz\n"
    "\n"
    "  # a model trained on 1.5 mm RAS, an ensemble of two folds, any scan\n"
    "  swi segment --model fold0.onnx --model fold1.onnx --input ct.nii.gz \\\n"
    "      --output seg.nii.gz --orientation RAS --spacing 1.5,1.5,1.5\n"
    "\n"
    "  # a whole folder, the model loaded once: every volume file and every DICOM series\n"
    "  # directory of scans/ -> out/<case>.nii.gz; finished cases are skipped on a rerun\n"
    "  swi segment --model m.onnx --input-dir scans/ --output-dir out/\n"
    "\n"
    "  # two machines share a folder: each takes every 2nd case\n"
    "  swi segment --model m.onnx --input-dir scans/ --output-dir out/ --part 0/2   # one\n"
    "  swi segment --model m.onnx --input-dir scans/ --output-dir out/ --part 1/2   # other\n"
    "  # or 8 ranks of an MPI job, rank I taking --part I/8\n"
    "  mpirun -n 8 swi segment --model m.onnx --input-dir scans/ --output-dir out/\n"
    "\n"
    "  # every window through the network (no reuse of identical windows)\n"
    "  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz --no-reuse\n"
    "\n"
    "  # see the window grid and the memory first: swi plan takes the same options\n"
    "  swi plan --model m.onnx --input ct.nii.gz --roi 96 --sw-batch 2\n"
    "\n"
    "Input and output:\n"
    "  --model FILE         ONNX model, one float32 input [batch, channels, i, j, k]\n"
    "  --input FILE|DIR     NIfTI-1/-2 (.nii, .nii.gz; scl_slope/scl_inter applied,\n"
    "                       NaN/Inf voxels read as 0), NRRD (.nrrd, .nhdr), MetaImage\n"
    "                       (.mha, .mhd), or a directory holding one DICOM series\n"
    "                       (sorted by slice position, rescale slope/intercept applied);\n"
    "                       any scalar type; repeat for more channels, in order; a\n"
    "                       4-D NIfTI's frames are channels (the Decathlon's images)\n"
    "  --nonfinite zero|fail  NaN/Inf voxels in an input: read as 0 with a warning that\n"
    "                       counts them (zero, the default), or refused (fail: exit 1,\n"
    "                       nothing written)\n"
    "  --output FILE        label map (.nii, .nii.gz, .nrrd, .mha, by the name): uint8,\n"
    "                       uint16 above 256 classes, with the input's geometry; or .dcm:\n"
    "                       a DICOM SEG of a DICOM series input, referencing its slices\n"
    "  --scores FILE        also write the blended scores: float32, classes along dim 4\n"
    "                       (.nii, .nii.gz, .nrrd, .mha)\n"
    "  --softmax            apply softmax over the classes to --scores\n"
    "  --preview FILE.png   three orthogonal mid-slices with the labels overlaid\n"
    "  --report FILE.html   a review page that opens offline in a browser: the image and\n"
    "                       labels in three linked planes and 3-D (NiiVue, inlined), each\n"
    "                       class's voxels, mL and bounding box, the run's summary\n"
    "  --force              overwrite existing output files (never an input: an output\n"
    "                       that is, holds or lies in an input, a model or the card,\n"
    "                       under any name, is refused); a store only if it is a kind\n"
    "                       swi writes, swapped in when done\n"
    "  --head N             use the model's output N (default 0, the first)\n"
    "\n"
    "Real scans: the model's grid (outputs always come back on the input's own grid):\n"
    "  --orientation CODES  bring the volume to the model's axis codes first (RAS, LPS,\n"
    "                       ...): axes permuted and flipped only, as MONAI's Orientationd\n"
    "  --spacing X,Y,Z      resample to the model's voxel size in mm (after orientation),\n"
    "                       trilinear, on MONAI Spacingd's grid; the blended scores are\n"
    "                       resampled back (trilinear) before the argmax, as Invertd does\n"
    "  --model FILE         given again: an ensemble (e.g. five folds); each window runs\n"
    "                       through every model and their mean is blended\n"
    "\n"
    "Model card: M.json beside M.onnx (or embedded by swi export --card) gives the roi,\n"
    "overlap, blending, padding, orientation, spacing, preprocessing, channel and class\n"
    "names and the ensemble's members; flags override it (swi info --model M.onnx shows\n"
    "it). With class names, OUT.label.txt (ITK-SNAP) and OUT.ctbl (3D Slicer) are written\n"
    "beside the label map.\n"
    "  --no-card            ignore the model's card\n"
    "Folder mode (instead of --input/--output):\n"
    "  --input-dir DIR      segment every case in DIR: each volume file (.nii, .nii.gz,\n"
    "                       .nrrd, .nhdr, .mha, .mhd) and each subdirectory holding a DICOM\n"
    "                       series; nnU-Net's naming makes channels: case_0000.nii.gz,\n"
    "                       case_0001.nii.gz, ... are the channels of case\n"
    "  --output-dir DIR     where OUT/<case>.<format> go (made if missing; not DIR itself);\n"
    "                       cases whose output exists are skipped unless --force\n"
    "  --output-format F    nii.gz (default), nii, nrrd or mha\n"
    "  --report-dir DIR     a review page per case (DIR/<case>.html) and DIR/index.html, a\n"
    "                       sortable table of the cases (--report DIR does the same)\n"
    "  --part I/N           only cases I, I+N, I+2N, ... of the sorted list (0 <= I < N);\n"
    "                       under mpirun rank I of N takes part I/N\n"
    "                       The model is loaded once and the next case read while one is\n"
    "                       segmented; a failed case is reported and the rest go on (exit\n"
    "                       status 1 at the end); a table of the cases ends the run.\n"

    "Chunked stores, for volumes larger than memory (inputs and outputs named like files):\n"
    "  --input x.zarr | x.ome.zarr | x.h5:/path   read window by window (any integer or\n"
    "                       float type; OME-Zarr: level 0); every --input a store\n"
    "  --output labels.zarr | x.ome.zarr/labels/NAME | y.h5:/labels   written chunk by\n"
    "                       chunk as regions complete; --scores likewise, [classes, D, H, W]\n"
    "  --shard I/N          run part I of N (from 0) along the first axis, cut at output\n"
    "                       chunk rows, into shared stores: the N parts together are\n"
    "                       bitwise one run's result; --shard init creates the stores first\n"
    "  --shard-grid AxBxC   with --shard I/N (N = A*B*C) or under mpirun (N ranks): the\n"
    "                       parts are the boxes of an A x B x C grid, cut at chunk\n"
    "                       boundaries on every axis, part I in row-major order (the last\n"
    "                       axis fastest); a box bounds a part's memory by the box\n"
    "    swi segment --model m.onnx --input ct.zarr --output seg.zarr --shard 2/8\n"
    "    swi segment --model m.onnx --input ct.zarr --output seg.zarr --shard 5/8 --shard-grid 2x2x2\n"
    "    mpirun -n 8 swi segment --model m.onnx --input ct.zarr --output seg.zarr  (MPI builds)\n"
    "  A store being written holds .swi-incomplete until every part has finished.\n"
    "  One run writes y.h5:/labels into a copy of y.h5 renamed over it when done: the\n"
    "  file's other datasets and attributes are kept, --force replaces only a dataset\n"
    "  swi writes, and a failed or interrupted run leaves the file as it was.\n"
    "  Into HDF5 (y.h5:/labels) the parts write one file in turn, each batch under an\n"
    "  exclusive lock of the file; the dataset carries the attribute swi_incomplete until\n"
    "  the last part has written. The lock must work across the machines (NFS: its lock\n"
    "  manager; Lustre: mounted -o flock), a reader holding the file open makes the parts\n"
    "  wait, and HDF5_USE_FILE_LOCKING must be unset or FALSE. On parallel file systems and\n"
    "  for many parts Zarr is the better choice: its parts never wait for one another.\n"
    "\n"
    "Sliding window (MONAI's meaning and defaults):\n"
    "  --roi N | I,J,K      window size (default: the model's static input size;\n"
    "                       0 = the whole volume along that axis)\n"
    "  --overlap F | F,F,F  overlap fraction in [0, 1) (default 0.25)\n"
    "  --mode constant|gaussian      blending weights (default constant)\n"
    "  --sigma-scale F | F,F,F       gaussian sigma / roi (default 0.125)\n"
    "  --padding-mode constant|reflect|replicate|circular\n"
    "                       padding where the window exceeds the volume (default constant)\n"
    "  --cval V             value of constant padding (default 0)\n"
    "  --sw-batch N         windows per network call (default 1)\n"
    "\n"
    "Intensity preprocessing, applied per channel in this order:\n"
    "  --clip A,B           clamp the intensities to [A, B]\n"
    "  --scale A,B,C,D      map [A, B] linearly onto [C, D] (ScaleIntensityRange, no clip)\n"
    "  --zscore             subtract the mean, divide by the standard deviation\n"
    "\n"
    "  --tta                test-time augmentation as nnU-Net does it: every window is also\n"
    "                       predicted mirrored along each subset of the axes, mirrored back,\n"
    "                       and the 8 predictions averaged before blending (8x the work)\n"
    "\n"
    "Speed (window reuse gives bitwise the same results either way):\n"
    "  --no-reuse           run every window through the network; by default a window\n"
    "                       whose preprocessed input equals, byte for byte, one already\n"
    "                       run (air clipped to the window's lower bound, zero padding)\n"
    "                       takes that window's output without a network call\n"
    "  --reuse-cache N      window outputs kept for reuse across network calls, 1..64\n"
    "                       (default 1; each costs one window's input and output, counted\n"
    "                       in the memory plan)\n"
    "  --no-rewrite         load the model as it is; by default each ConvTranspose whose\n"
    "                       stride tiles its kernel (the U-Net up-sampling) runs as the\n"
    "                       equivalent Conv + depth-to-space, which ONNX Runtime computes\n"
    "                       faster (1.4x for bench/monai's U-Net; the same function up to\n"
    "                       float rounding; `swi optimize` saves the rewritten model)\n"
    "\n"
    "Resources:\n"
    "  --threads N          threads for the network and the blending (default: all cores)\n"
    "  --max-memory SIZE    budget for the planned memory: 512M, 4G, 1.5G... (default:\n"
    "                       the memory available, MemAvailable or the memory cgroup's limit):\n"
    "                       the engine's buffers and what is kept beside them (the\n"
    "                       input-grid results and band of --spacing, an ensemble's buffer);\n"
    "                       the batch is lowered to fit, or swi stops at once and says the\n"
    "                       smallest budget that works. A budget given runs as asked, also\n"
    "                       above what is available (SWI_AVAILABLE_MEMORY fakes it, for tests)\n"
    "  --device cpu|cuda    ONNX Runtime execution provider (default cpu)\n"
    "  -q, --quiet          no progress bar and no summary line\n"
    "\n"
    "Environment (advanced): SWI_ORT_CONFIG=\"key=value;...\" adds ONNX Runtime session\n"
    "config entries; SWI_ORT_SPIN=1 lets its threads spin (off: they would take the cores\n"
    "the blending needs); SWI_ORT_NO_ARENA=1 turns off its memory arena (about 25% less\n"
    "peak memory for a 3-D U-Net, about 40% more CPU time).\n"
    "\n"
    "Outputs appear only when complete: they are written to a hidden temporary file in\n"
    "the same directory and renamed; after an error, Ctrl-C or SIGTERM nothing is left.\n"
    "Exit status: 0 done, 1 error (one line on stderr), 2 usage error, 128+N signal N.\n";

static const char PLAN_HELP[] =
    "usage: swi plan --model M.onnx --input IN.nii.gz [segment options]\n"
    "\n"
    "Show what `swi segment` would do with the same options, without running the\n"
    "network: the window grid, the number of network calls and\n"
    "the predicted peak memory, split into input, window buffers, partial sums (the open\n"
    "frontier of the streaming reduction) and outputs. With window reuse on (the default;\n"
    "--no-reuse turns it off) it reads and preprocesses the voxels to count the windows\n"
    "that will take an earlier window's output instead of a network call.\n"
    "\n"
    "Examples:\n"
    "  swi plan --model unet.onnx --input ct.nii.gz\n"
    "  swi plan --model unet.onnx --input ct.nii.gz --roi 96 --overlap 0.5 --sw-batch 4\n"
    "  # does it fit in 2 GB? (the batch is lowered to fit, or the minimum is printed)\n"
    "  swi plan --model unet.onnx --input ct.nii.gz --max-memory 2G --scores s.nii.gz\n"
    "\n"
    "Options: those of `swi segment` (see swi segment --help); --output is optional,\n"
    "--scores counts the full-scores output in the memory.\n"
    "Exit status: 0 done, 1 error, 2 usage error.\n";

/* The window flags' values into o, and which of them were given (a card yields to those). */
static void take_window(seg_opts *o, const cli_window *w) {
    memcpy(o->roi, w->roi, sizeof o->roi);
    o->roi_given = (w->given & CLI_WINDOW_ROI) != 0;
    memcpy(o->overlap, w->overlap, sizeof o->overlap);
    memcpy(o->sigma_scale, w->sigma_scale, sizeof o->sigma_scale);
    o->mode = w->mode;
    o->padding = w->padding;
    o->cval = (float)w->cval;
    o->sw_batch = w->sw_batch;
    o->given |= (w->given & CLI_WINDOW_OVERLAP ? SEG_GIVEN_OVERLAP : 0u) |
                (w->given & CLI_WINDOW_SIGMA ? SEG_GIVEN_SIGMA : 0u) |
                (w->given & CLI_WINDOW_MODE ? SEG_GIVEN_MODE : 0u) |
                (w->given & CLI_WINDOW_PADDING ? SEG_GIVEN_PADDING : 0u) |
                (w->given & CLI_WINDOW_CVAL ? SEG_GIVEN_CVAL : 0u);
}

void seg_opts_init(seg_opts *o) {
    memset(o, 0, sizeof *o);
    cli_window w; /* the library's defaults */
    cli_window_init(&w);
    take_window(o, &w);
}

enum {
    OPT_MODEL = 256,
    OPT_INPUT,
    OPT_OUTPUT,
    OPT_SCORES,
    OPT_PREVIEW,
    OPT_REPORT,
    OPT_REPORT_DIR,
    OPT_ROI,
    OPT_OVERLAP,
    OPT_MODE,
    OPT_SIGMA,
    OPT_PADDING,
    OPT_CVAL,
    OPT_SWBATCH,
    OPT_THREADS,
    OPT_MAXMEM,
    OPT_SOFTMAX,
    OPT_TTA,
    OPT_CLIP,
    OPT_SCALE,
    OPT_ZSCORE,
    OPT_FORCE,
    OPT_DEVICE,
    OPT_HEAD,
    OPT_ORIENTATION,
    OPT_SPACING,
    OPT_NO_CARD,
    OPT_HELP,
    OPT_NONFINITE,
    OPT_INPUT_DIR,
    OPT_OUTPUT_DIR,
    OPT_OUTPUT_FORMAT,
    OPT_PART,
    OPT_SHARD,
    OPT_SHARD_GRID,
    OPT_NO_REUSE,
    OPT_REUSE_CACHE,
    OPT_NO_REWRITE
};

static const struct option LONG_OPTS[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"scores", required_argument, NULL, OPT_SCORES},
    {"preview", required_argument, NULL, OPT_PREVIEW},
    {"report", required_argument, NULL, OPT_REPORT},
    {"report-dir", required_argument, NULL, OPT_REPORT_DIR},
    {"roi", required_argument, NULL, OPT_ROI},
    {"overlap", required_argument, NULL, OPT_OVERLAP},
    {"mode", required_argument, NULL, OPT_MODE},
    {"sigma-scale", required_argument, NULL, OPT_SIGMA},
    {"padding-mode", required_argument, NULL, OPT_PADDING},
    {"cval", required_argument, NULL, OPT_CVAL},
    {"sw-batch", required_argument, NULL, OPT_SWBATCH},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"max-memory", required_argument, NULL, OPT_MAXMEM},
    {"softmax", no_argument, NULL, OPT_SOFTMAX},
    {"tta", no_argument, NULL, OPT_TTA},
    {"clip", required_argument, NULL, OPT_CLIP},
    {"scale", required_argument, NULL, OPT_SCALE},
    {"zscore", no_argument, NULL, OPT_ZSCORE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"head", required_argument, NULL, OPT_HEAD},
    {"nonfinite", required_argument, NULL, OPT_NONFINITE},
    {"orientation", required_argument, NULL, OPT_ORIENTATION},
    {"spacing", required_argument, NULL, OPT_SPACING},
    {"no-card", no_argument, NULL, OPT_NO_CARD},
    {"input-dir", required_argument, NULL, OPT_INPUT_DIR},
    {"output-dir", required_argument, NULL, OPT_OUTPUT_DIR},
    {"output-format", required_argument, NULL, OPT_OUTPUT_FORMAT},
    {"part", required_argument, NULL, OPT_PART},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"shard-grid", required_argument, NULL, OPT_SHARD_GRID},
    {"no-reuse", no_argument, NULL, OPT_NO_REUSE},
    {"reuse-cache", required_argument, NULL, OPT_REUSE_CACHE},
    {"no-rewrite", no_argument, NULL, OPT_NO_REWRITE},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int usage(const char *who, const char *fmt, const char *a, const char *b) {
    char msg[SWI_ERRLEN];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    cli_one_line(msg);
    fprintf(stderr, "%s: %s (see '%s --help')\n", who, msg, who);
    return 2;
}

/* One value for all axes, or one per axis. */
static int three_doubles(const char *s, double out[3]) {
    double v[3];
    int n = cli_parse_double_list(s, v, 3);
    if (n == 1)
        v[1] = v[2] = v[0];
    else if (n != 3)
        return -1;
    memcpy(out, v, sizeof v);
    return 0;
}

/* The names swi_io writes volumes to. */
static int is_volume_name(const char *p) {
    return cli_ends_with(p, ".nii") || cli_ends_with(p, ".nii.gz") || cli_ends_with(p, ".nrrd") ||
           cli_ends_with(p, ".mha");
}

int seg_parse(int argc, char **argv, seg_opts *o, int plan) {
    const char *who = plan ? "swi plan" : "swi segment";
    seg_opts_init(o);
    cli_window window;
    cli_window_init(&window);
    opterr = 0;
    optind = 0; /* full re-initialisation (GNU): seg_parse may run more than once */
    int c, li = 0;
    while ((c = getopt_long(argc, argv, ":qh", LONG_OPTS, &li)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 'h': fputs(plan ? PLAN_HELP : SEGMENT_HELP, stdout); return -1;
        case 'q': o->quiet = 1; break;
        case OPT_MODEL:
            if (o->n_models >= SEG_MAX_MODELS)
                return usage(who, "too many --model files (at most 16)", NULL, NULL);
            o->models[o->n_models++] = arg;
            o->model = o->models[0];
            break;
        case OPT_ORIENTATION: {
            int w[3], sg[3];
            char msg[256];
            if (swi_axcodes_parse(arg, w, sg, msg, sizeof msg) != SWI_OK)
                return usage(who, "--orientation: %s", msg, NULL);
            o->orientation = arg;
            break;
        }
        case OPT_SPACING:
            if (three_doubles(arg, o->spacing) || !(o->spacing[0] > 0) || !(o->spacing[1] > 0) ||
                !(o->spacing[2] > 0) || !isfinite(o->spacing[0] + o->spacing[1] + o->spacing[2]))
                return usage(who, "--spacing '%s': give one size or three (X,Y,Z) in mm, each > 0", arg,
                             NULL);
            o->spacing_given = 1;
            break;
        case OPT_INPUT:
            if (o->n_inputs >= SEG_MAX_INPUTS)
                return usage(who, "too many --input files (at most 16)", NULL, NULL);
            o->inputs[o->n_inputs++] = arg;
            break;
        case OPT_OUTPUT: o->output = arg; break;
        case OPT_SCORES: o->scores = arg; break;
        case OPT_PREVIEW: o->preview = arg; break;
        case OPT_REPORT: o->report = arg; break;
        case OPT_REPORT_DIR: o->report_dir = arg; break;
        case OPT_ROI:
        case OPT_OVERLAP:
        case OPT_MODE:
        case OPT_SIGMA:
        case OPT_PADDING:
        case OPT_CVAL:
        case OPT_SWBATCH: {
            char msg[SWI_ERRLEN];
            if (cli_window_option(&window, LONG_OPTS[li].name, arg, msg, sizeof msg) < 0)
                return usage(who, "%s", msg, NULL);
            break;
        }
        case OPT_NO_CARD: o->no_card = 1; break;
        case OPT_THREADS: {
            int64_t v;
            if (cli_parse_i64(arg, 0, 1024, &v))
                return usage(who,
                             "--threads '%s': give a whole number from 0 (all cores) to "
                             "1024",
                             arg, NULL);
            o->threads = (int)v;
            break;
        }
        case OPT_MAXMEM:
            if (cli_parse_size(arg, &o->max_memory) || o->max_memory == 0)
                return usage(who, "--max-memory '%s': give a size such as 512M, 4G or 1.5G", arg, NULL);
            break;
        case OPT_NO_REUSE: o->no_reuse = 1; break;
        case OPT_NO_REWRITE: o->no_rewrite = 1; break;
        case OPT_REUSE_CACHE: {
            int64_t v;
            if (cli_parse_i64(arg, 1, 64, &v))
                return usage(who, "--reuse-cache '%s': give a whole number from 1 to 64", arg, NULL);
            o->reuse_cache = (int)v;
            break;
        }
        case OPT_SOFTMAX: o->softmax = 1; break;
        case OPT_TTA: o->tta = 1; break;
        case OPT_ZSCORE: o->zscore = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case OPT_CLIP:
            if (cli_parse_double_list(arg, o->clip, 2) != 2 || o->clip[0] > o->clip[1])
                return usage(who, "--clip '%s': give A,B with A <= B", arg, NULL);
            o->clip_given = 1;
            break;
        case OPT_SCALE:
            if (cli_parse_double_list(arg, o->scale, 4) != 4 || o->scale[0] == o->scale[1])
                return usage(who, "--scale '%s': give A,B,C,D (maps [A,B] onto [C,D]; A != B)", arg, NULL);
            o->scale_given = 1;
            break;
        case OPT_DEVICE:
            if (strcmp(arg, "cpu") == 0)
                o->cuda = 0;
            else if (strcmp(arg, "cuda") == 0)
                o->cuda = 1;
            else
                return usage(who, "--device '%s': use cpu or cuda", arg, NULL);
            break;
        case OPT_HEAD: {
            int64_t v;
            if (cli_parse_i64(arg, 0, 1000, &v))
                return usage(who, "--head '%s': give an output index (0 = the first)", arg, NULL);
            o->head = (int)v;
            break;
        }
        case OPT_NONFINITE:
            if (strcmp(arg, "zero") == 0)
                o->nonfinite_fail = 0;
            else if (strcmp(arg, "fail") == 0)
                o->nonfinite_fail = 1;
            else
                return usage(who, "--nonfinite '%s': use zero or fail", arg, NULL);
            break;
        case OPT_INPUT_DIR: o->input_dir = arg; break;
        case OPT_OUTPUT_DIR: o->output_dir = arg; break;
        case OPT_OUTPUT_FORMAT:
            if (strcmp(arg, "nii.gz") != 0 && strcmp(arg, "nii") != 0 && strcmp(arg, "nrrd") != 0 &&
                strcmp(arg, "mha") != 0)
                return usage(who, "--output-format '%s': use nii.gz, nii, nrrd or mha", arg, NULL);
            o->output_format = arg;
            break;
        case OPT_PART: {
            int64_t v[2];
            const char *slash = strchr(arg, '/');
            char first[32];
            if (!slash || (size_t)(slash - arg) >= sizeof first)
                return usage(who, "--part '%s': give I/N (cases I, I+N, ...; 0 <= I < N)", arg, NULL);
            memcpy(first, arg, (size_t)(slash - arg));
            first[slash - arg] = '\0';
            if (cli_parse_i64(first, 0, 1000000, &v[0]) || cli_parse_i64(slash + 1, 1, 1000000, &v[1]) ||
                v[0] >= v[1])
                return usage(who, "--part '%s': give I/N (cases I, I+N, ...; 0 <= I < N)", arg, NULL);
            o->part_index = (int)v[0];
            o->part_count = (int)v[1];
            break;
        }
        case OPT_SHARD: {
            char msg[SWI_ERRLEN];
            if (cli_shard_parse(arg, &o->shard_part, &o->shard_parts, &o->shard_init, msg))
                return usage(who, "%s", msg, NULL);
            o->shard_given = 1;
            break;
        }
        case OPT_SHARD_GRID: {
            char msg[SWI_ERRLEN];
            if (cli_shard_grid_parse(arg, o->shard_grid, msg)) return usage(who, "%s", msg, NULL);
            o->shard_grid_given = 1;
            break;
        }
        case ':': return usage(who, "option '%s' needs a value", argv[optind - 1], NULL);
        default: return usage(who, "unknown option '%s'", argv[optind - 1], NULL);
        }
    }
    if (optind < argc) return usage(who, "unexpected argument '%s'", argv[optind], NULL);
    take_window(o, &window);
    if (!o->model) return usage(who, "--model is required", NULL, NULL);
    if (plan && (o->report || o->report_dir)) return usage(who, "--report is for swi segment", NULL, NULL);
    if (o->input_dir || o->output_dir || o->output_format || o->part_count) {
        /* folder mode: the cases are the folder's, their outputs OUT/<case>.<format> */
        if (plan) return usage(who, "folder mode (--input-dir) is for swi segment", NULL, NULL);
        if (o->report && o->report_dir && strcmp(o->report, o->report_dir) != 0)
            return usage(who, "--report and --report-dir name two folders: give one", NULL, NULL);
        /* in folder mode --report names the pages' folder */
        if (o->report && !o->report_dir) o->report_dir = o->report;
        o->report = NULL;
        if (!o->input_dir)
            return usage(who, "--output-dir, --output-format and --part need --input-dir", NULL, NULL);
        if (!o->output_dir) return usage(who, "--input-dir needs --output-dir", NULL, NULL);
        if (o->n_inputs || o->output || o->scores || o->preview)
            return usage(who,
                         "--input-dir takes no --input, --output, --scores or --preview "
                         "(outputs are OUTPUT_DIR/<case>.nii.gz)",
                         NULL, NULL);
        if (o->softmax)
            return usage(who, "--softmax applies to --scores, which folder mode does not write", NULL, NULL);
        if (o->shard_given || o->shard_grid_given)
            return usage(who,
                         "--shard and --shard-grid cut one volume into parts of shared stores; folder "
                         "mode divides its cases with --part I/N (or between the ranks of mpirun)",
                         NULL, NULL);
        o->part_given = o->part_count != 0;
        if (!o->output_format) o->output_format = "nii.gz";
        if (!o->part_count) o->part_count = 1;
        return 0; /* every case is run as swi segment runs one: with the model's card */
    }
    if (o->report_dir) return usage(who, "--report-dir is for folder mode (--input-dir)", NULL, NULL);
    if (o->n_inputs == 0) return usage(who, "--input is required", NULL, NULL);
    if (!plan && !o->output) return usage(who, "--output is required", NULL, NULL);
    /* a name that is not a volume file may be a store: segment_stores.c (seg_store_check) decides */
    if (o->output && !is_volume_name(o->output) && !cli_ends_with(o->output, ".dcm") &&
        !cli_is_store(o->output))
        return usage(who,
                     "--output '%s': the name must end in .nii, .nii.gz, .nrrd, .mha or "
                     ".dcm (DICOM SEG), or name a store (x.zarr, x.ome.zarr/labels/NAME, y.h5:/path)",
                     o->output, NULL);
    if (o->scores && !is_volume_name(o->scores) && !cli_is_store(o->scores))
        return usage(who,
                     "--scores '%s': the name must end in .nii, .nii.gz, .nrrd or .mha, or name a "
                     "store",
                     o->scores, NULL);
    if (o->preview && !cli_ends_with(o->preview, ".png"))
        return usage(who, "--preview '%s': the name must end in .png", o->preview, NULL);
    if (o->softmax && !o->scores)
        return usage(who, "--softmax applies to --scores; give --scores FILE too", NULL, NULL);
    if (o->report && !cli_ends_with(o->report, ".html"))
        return usage(who, "--report '%s': the name must end in .html", o->report, NULL);
    const char *outs[4] = {o->output, o->scores, o->preview, o->report};
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            if (outs[a] && outs[b] && strcmp(outs[a], outs[b]) == 0)
                return usage(who, "'%s' is given as two different outputs", outs[a], NULL);
    return 0; /* the job reads the model's card */
}
