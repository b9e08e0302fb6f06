/*
 * cmd_segment.c -- `swi segment` and `swi plan`.
 *
 * The pipeline: validate every input header and the model before reading any voxel
 * (bad input fails within seconds), create the temporary outputs (an unwritable
 * directory fails before the network runs), read and preprocess the volume, run the
 * engine with the ONNX Runtime predictor, streaming the blended scores into an argmax
 * label map (and the full scores only when --scores asks), then write and commit.
 */
#include "cli.h"

#include "nifti_io.h"
#include "ort_predictor.h"
#include "preview.h"
#include "progress.h"
#include "safety.h"
#include "util.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char SEGMENT_HELP[] =
"usage: swi segment --model M.onnx --input IN.nii.gz --output LABELS.nii.gz [options]\n"
"\n"
"Segment a 3-D NIfTI volume with an ONNX network by sliding-window inference\n"
"(MONAI's sliding_window_inference, streamed). The volume is tiled with overlapping\n"
"windows; the network sees each as [1, channels, i, j, k] (NIfTI voxel indices, k\n"
"fastest, as nibabel/MONAI load it); the blended scores become a label map (argmax)\n"
"with the input's qform/sform, so it overlays the image exactly.\n"
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
"  # two MR contrasts as two channels, z-scored, mirror test-time augmentation\n"
"  swi segment --model m.onnx --input t1.nii.gz --input flair.nii.gz \\\n"
"      --output seg.nii.gz --zscore --tta\n"
"\n"
"  # keep the probabilities and a picture, within 4 GB of engine memory\n"
"  swi segment --model m.onnx --input ct.nii.gz --output seg.nii.gz \\\n"
"      --scores prob.nii.gz --softmax --preview seg.png --max-memory 4G\n"
"\n"
"  # see the window grid and the memory first: swi plan takes the same options\n"
"  swi plan --model m.onnx --input ct.nii.gz --roi 96 --sw-batch 2\n"
"\n"
"Input and output:\n"
"  --model FILE         ONNX model, one float32 input [batch, channels, i, j, k]\n"
"  --input FILE         NIfTI-1/-2 volume (.nii, .nii.gz), any scalar type,\n"
"                       scl_slope/scl_inter applied (NaN/Inf voxels read as 0);\n"
"                       repeat for more channels, in order\n"
"  --output FILE        label map (.nii, .nii.gz): uint8, uint16 above 256 classes\n"
"  --scores FILE        also write the blended scores: float32, classes along dim 4\n"
"  --softmax            apply softmax over the classes to --scores\n"
"  --preview FILE.png   three orthogonal mid-slices with the labels overlaid\n"
"  --force              overwrite existing output files\n"
"  --head N             use the model's output N (default 0, the first)\n"
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
"Resources:\n"
"  --threads N          threads for the network and the blending (default: all cores)\n"
"  --max-memory SIZE    budget for the engine's buffers: 512M, 4G, 1.5G... (default:\n"
"                       none); the batch is lowered to fit, or swi stops at once and\n"
"                       says the smallest budget that works\n"
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
"network or reading the voxels: the window grid, the number of network calls and\n"
"the predicted peak memory, split into input, window buffers, partial sums (the open\n"
"frontier of the streaming reduction) and outputs.\n"
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

void seg_opts_init(seg_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int a = 0; a < 3; a++) {
        o->overlap[a] = 0.25;
        o->sigma_scale[a] = 0.125;
    }
    o->mode = SWI_BLEND_CONSTANT;
    o->padding = SWI_PAD_CONSTANT;
    o->sw_batch = 1;
}

enum {
    OPT_MODEL = 256, OPT_INPUT, OPT_OUTPUT, OPT_SCORES, OPT_PREVIEW, OPT_ROI, OPT_OVERLAP,
    OPT_MODE, OPT_SIGMA, OPT_PADDING, OPT_CVAL, OPT_SWBATCH, OPT_THREADS, OPT_MAXMEM,
    OPT_SOFTMAX, OPT_TTA, OPT_CLIP, OPT_SCALE, OPT_ZSCORE, OPT_FORCE, OPT_DEVICE, OPT_HEAD,
    OPT_HELP
};

static const struct option LONG_OPTS[] = {
    { "model", required_argument, NULL, OPT_MODEL },
    { "input", required_argument, NULL, OPT_INPUT },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "scores", required_argument, NULL, OPT_SCORES },
    { "preview", required_argument, NULL, OPT_PREVIEW },
    { "roi", required_argument, NULL, OPT_ROI },
    { "overlap", required_argument, NULL, OPT_OVERLAP },
    { "mode", required_argument, NULL, OPT_MODE },
    { "sigma-scale", required_argument, NULL, OPT_SIGMA },
    { "padding-mode", required_argument, NULL, OPT_PADDING },
    { "cval", required_argument, NULL, OPT_CVAL },
    { "sw-batch", required_argument, NULL, OPT_SWBATCH },
    { "threads", required_argument, NULL, OPT_THREADS },
    { "max-memory", required_argument, NULL, OPT_MAXMEM },
    { "softmax", no_argument, NULL, OPT_SOFTMAX },
    { "tta", no_argument, NULL, OPT_TTA },
    { "clip", required_argument, NULL, OPT_CLIP },
    { "scale", required_argument, NULL, OPT_SCALE },
    { "zscore", no_argument, NULL, OPT_ZSCORE },
    { "force", no_argument, NULL, OPT_FORCE },
    { "device", required_argument, NULL, OPT_DEVICE },
    { "head", required_argument, NULL, OPT_HEAD },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static int usage(const char *who, const char *fmt, const char *a, const char *b)
{
    char msg[SWI_ERRLEN];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    cli_one_line(msg);
    fprintf(stderr, "%s: %s (see '%s --help')\n", who, msg, who);
    return 2;
}

/* One value for all axes, or one per axis. */
static int three_doubles(const char *s, double out[3])
{
    double v[3];
    int n = cli_parse_double_list(s, v, 3);
    if (n == 1)
        v[1] = v[2] = v[0];
    else if (n != 3)
        return -1;
    memcpy(out, v, sizeof v);
    return 0;
}

static int is_nifti_name(const char *p)
{
    return cli_ends_with(p, ".nii") || cli_ends_with(p, ".nii.gz");
}

int seg_parse(int argc, char **argv, seg_opts *o, int plan)
{
    const char *who = plan ? "swi plan" : "swi segment";
    seg_opts_init(o);
    opterr = 0;
    optind = 0; /* full re-initialisation (GNU): seg_parse may run more than once */
    int c;
    while ((c = getopt_long(argc, argv, ":qh", LONG_OPTS, NULL)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 'h':
            fputs(plan ? PLAN_HELP : SEGMENT_HELP, stdout);
            return -1;
        case 'q': o->quiet = 1; break;
        case OPT_MODEL: o->model = arg; break;
        case OPT_INPUT:
            if (o->n_inputs >= SEG_MAX_INPUTS)
                return usage(who, "too many --input files (at most 16)", NULL, NULL);
            o->inputs[o->n_inputs++] = arg;
            break;
        case OPT_OUTPUT: o->output = arg; break;
        case OPT_SCORES: o->scores = arg; break;
        case OPT_PREVIEW: o->preview = arg; break;
        case OPT_ROI: {
            int64_t v[3];
            int n = cli_parse_i64_list(arg, v, 3);
            if (n == 1)
                v[1] = v[2] = v[0];
            if ((n != 1 && n != 3) || v[0] < 0 || v[1] < 0 || v[2] < 0)
                return usage(who, "--roi '%s': give one size or three (I,J,K), each >= 0", arg,
                             NULL);
            memcpy(o->roi, v, sizeof v);
            o->roi_given = 1;
            break;
        }
        case OPT_OVERLAP:
            if (three_doubles(arg, o->overlap) || o->overlap[0] < 0 || o->overlap[0] >= 1 ||
                o->overlap[1] < 0 || o->overlap[1] >= 1 || o->overlap[2] < 0 ||
                o->overlap[2] >= 1)
                return usage(who, "--overlap '%s': give one fraction or three, each in [0, 1)",
                             arg, NULL);
            break;
        case OPT_MODE:
            if (strcmp(arg, "constant") == 0)
                o->mode = SWI_BLEND_CONSTANT;
            else if (strcmp(arg, "gaussian") == 0)
                o->mode = SWI_BLEND_GAUSSIAN;
            else
                return usage(who, "--mode '%s': use constant or gaussian", arg, NULL);
            break;
        case OPT_SIGMA:
            if (three_doubles(arg, o->sigma_scale) || !(o->sigma_scale[0] > 0) ||
                !(o->sigma_scale[1] > 0) || !(o->sigma_scale[2] > 0))
                return usage(who, "--sigma-scale '%s': give one value or three, each > 0", arg,
                             NULL);
            break;
        case OPT_PADDING:
            if (strcmp(arg, "constant") == 0)
                o->padding = SWI_PAD_CONSTANT;
            else if (strcmp(arg, "reflect") == 0)
                o->padding = SWI_PAD_REFLECT;
            else if (strcmp(arg, "replicate") == 0)
                o->padding = SWI_PAD_REPLICATE;
            else if (strcmp(arg, "circular") == 0)
                o->padding = SWI_PAD_CIRCULAR;
            else
                return usage(who, "--padding-mode '%s': use constant, reflect, replicate or "
                             "circular", arg, NULL);
            break;
        case OPT_CVAL: {
            double v;
            if (cli_parse_double(arg, &v) || fabs(v) > 3.4e38)
                return usage(who, "--cval '%s': not a number", arg, NULL);
            o->cval = (float)v;
            break;
        }
        case OPT_SWBATCH: {
            int64_t v;
            if (cli_parse_i64(arg, 1, 65536, &v))
                return usage(who, "--sw-batch '%s': give a whole number from 1 to 65536", arg,
                             NULL);
            o->sw_batch = (int)v;
            break;
        }
        case OPT_THREADS: {
            int64_t v;
            if (cli_parse_i64(arg, 0, 1024, &v))
                return usage(who, "--threads '%s': give a whole number from 0 (all cores) to "
                             "1024", arg, NULL);
            o->threads = (int)v;
            break;
        }
        case OPT_MAXMEM:
            if (cli_parse_size(arg, &o->max_memory) || o->max_memory == 0)
                return usage(who, "--max-memory '%s': give a size such as 512M, 4G or 1.5G",
                             arg, NULL);
            break;
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
                return usage(who, "--scale '%s': give A,B,C,D (maps [A,B] onto [C,D]; A != B)",
                             arg, NULL);
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
                return usage(who, "--head '%s': give an output index (0 = the first)", arg,
                             NULL);
            o->head = (int)v;
            break;
        }
        case ':':
            return usage(who, "option '%s' needs a value", argv[optind - 1], NULL);
        default:
            return usage(who, "unknown option '%s'", argv[optind - 1], NULL);
        }
    }
    if (optind < argc)
        return usage(who, "unexpected argument '%s'", argv[optind], NULL);
    if (!o->model)
        return usage(who, "--model is required", NULL, NULL);
    if (o->n_inputs == 0)
        return usage(who, "--input is required", NULL, NULL);
    if (!plan && !o->output)
        return usage(who, "--output is required", NULL, NULL);
    if (o->output && !is_nifti_name(o->output))
        return usage(who, "--output '%s': the name must end in .nii or .nii.gz", o->output, NULL);
    if (o->scores && !is_nifti_name(o->scores))
        return usage(who, "--scores '%s': the name must end in .nii or .nii.gz", o->scores, NULL);
    if (o->preview && !cli_ends_with(o->preview, ".png"))
        return usage(who, "--preview '%s': the name must end in .png", o->preview, NULL);
    if (o->softmax && !o->scores)
        return usage(who, "--softmax applies to --scores; give --scores FILE too", NULL, NULL);
    const char *outs[3] = { o->output, o->scores, o->preview };
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (outs[a] && outs[b] && strcmp(outs[a], outs[b]) == 0)
                return usage(who, "'%s' is given as two different outputs", outs[a], NULL);
    return 0;
}

/* ---- preprocessing ----------------------------------------------------------------- */

static void preprocess(const seg_opts *o, float *x, int64_t n)
{
    if (o->clip_given) {
        float lo = (float)o->clip[0], hi = (float)o->clip[1];
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    }
    if (o->scale_given) {
        /* MONAI ScaleIntensityRange: (x - a) / (b - a) * (d - c) + c */
        double a = o->scale[0], b = o->scale[1], c = o->scale[2], d = o->scale[3];
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(((double)x[i] - a) / (b - a) * (d - c) + c);
    }
    if (o->zscore) {
        /* MONAI NormalizeIntensity: population standard deviation; 0 leaves the scale. */
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; i++)
            sum += x[i];
        double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++) {
            double d = x[i] - mean;
            sq += d * d;
        }
        double sd = sqrt(sq / (double)n);
        if (!(sd > 0))
            sd = 1;
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(((double)x[i] - mean) / sd);
    }
}

/* ---- the pipeline --------------------------------------------------------------------- */

static int fail(const char *who, const char *msg)
{
    fprintf(stderr, "%s: %s\n", who, msg);
    return 1;
}

static const char *pad_name(swi_pad p)
{
    static const char *n[] = { "constant", "reflect", "replicate", "circular" };
    return (unsigned)p < 4 ? n[p] : "?";
}

/* Everything a run holds, so one cleanup path frees it. */
typedef struct seg_state {
    nifti_vol vols[SEG_MAX_INPUTS];
    ort_model *model;
    swi_ctx *ctx;
    float *input;
    cli_out out_labels, out_scores, out_preview;
} seg_state;

static void state_free(seg_state *s)
{
    cli_set_cancel_hook(NULL, NULL);
    cli_out_abort(&s->out_labels);
    cli_out_abort(&s->out_scores);
    cli_out_abort(&s->out_preview);
    swi_free(s->ctx);
    ort_model_free(s->model);
    free(s->input);
}

/* Validate inputs and model, settle the window; fills p, in (data NULL), outputs. */
static int setup(const seg_opts *o, const char *who, seg_state *s, swi_params *p,
                 swi_tensor *in, swi_output *outs, int *n_outs, char *err)
{
    if (!nifti_available()) {
        cli_err(err, "swi was built without NIfTI support (install libnifti2-dev and rebuild)");
        return 1;
    }
    if (!ort_available()) {
        cli_err(err, "swi was built without ONNX Runtime (run scripts/install-deps.sh and "
                "rebuild)");
        return 1;
    }
    for (int c = 0; c < o->n_inputs; c++) {
        if (nifti_vol_open(o->inputs[c], &s->vols[c], err))
            return 1;
        const int64_t *a = s->vols[0].size, *b = s->vols[c].size;
        if (c > 0 && (a[0] != b[0] || a[1] != b[1] || a[2] != b[2])) {
            cli_err(err, "%s: size %lldx%lldx%lld differs from %s's %lldx%lldx%lld; channels "
                    "must share one grid", o->inputs[c], (long long)b[0], (long long)b[1],
                    (long long)b[2], o->inputs[0], (long long)a[0], (long long)a[1],
                    (long long)a[2]);
            return 1;
        }
    }
    const int64_t *size = s->vols[0].size;
    int64_t roi[3];
    for (int a = 0; a < 3; a++)
        roi[a] = o->roi_given && o->roi[a] == 0 ? size[a] : o->roi[a];
    ort_opts oo = { o->threads, o->cuda, o->tta, o->head };
    if (ort_model_open(o->model, &oo, &s->model, err))
        return 1;
    swi_head_spec head;
    memset(&head, 0, sizeof head);
    int rc = ort_model_prepare(s->model, o->n_inputs, roi, o->roi_given, &head, err);
    if (rc)
        return rc == -2 ? 2 : 1;
    (void)who;

    swi_params_init(p, 3);
    for (int a = 0; a < 3; a++) {
        p->roi[a] = roi[a];
        p->overlap[a] = o->overlap[a];
        p->sigma_scale[a] = o->sigma_scale[a];
    }
    p->mode = o->mode;
    p->padding_mode = o->padding;
    p->cval = o->cval;
    p->sw_batch_size = o->sw_batch;
    p->threads = o->threads;
    p->max_memory = o->max_memory;
    p->n_heads = 1;
    p->heads[0] = head;

    memset(in, 0, sizeof *in);
    in->data = NULL;
    in->batch = 1;
    in->channels = o->n_inputs;
    in->dims = 3;
    memcpy(in->size, size, sizeof in->size);

    swi_output_init(&outs[0], 0, SWI_REDUCE_ARGMAX);
    *n_outs = 1;
    if (o->scores) {
        /* softmax is streamed by the engine region by region, like the labels */
        swi_output_init(&outs[1], 0, o->softmax ? SWI_REDUCE_SOFTMAX : SWI_REDUCE_NONE);
        *n_outs = 2;
    }
    return 0;
}

static void engine_error(const char *who, const seg_opts *o, swi_status st, const swi_ctx *ctx)
{
    const char *msg = swi_last_error(ctx);
    switch (st) {
    case SWI_ERR_BUDGET:
        fprintf(stderr, "%s: --max-memory is too small: %s\n", who, msg);
        break;
    case SWI_ERR_SHAPE:
        fprintf(stderr, "%s: %s: the model's output cannot be placed: %s\n", who, o->model, msg);
        break;
    case SWI_ERR_NOMEM:
        fprintf(stderr, "%s: out of memory: %s\n", who, msg);
        break;
    case SWI_ERR_PREDICTOR:
        fprintf(stderr, "%s: %s\n", who, msg);
        break;
    default:
        fprintf(stderr, "%s: %s (%s)\n", who, msg, swi_status_name(st));
        break;
    }
}

static int interrupted_exit(const char *who)
{
    int sig = cli_interrupted();
    fprintf(stderr, "%s: interrupted by %s; no output written\n", who,
            sig == 2 ? "SIGINT" : sig == 15 ? "SIGTERM" : sig == 1 ? "SIGHUP" : "a signal");
    return cli_interrupt_status();
}

int seg_run(const seg_opts *o, const char *who, seg_result *keep)
{
    char err[SWI_ERRLEN];
    seg_state *s = calloc(1, sizeof *s);
    if (!s)
        return fail(who, "out of memory");
    s->out_labels.fd = s->out_scores.fd = s->out_preview.fd = -1;
    int status = 1;
    double t0 = cli_now();

    if (cli_signals_start() != 0) {
        status = fail(who, "cannot set up signal handling");
        goto done;
    }
    if (o->preview && !preview_available()) {
        cli_err(err, "%s: swi was built without PNG support (install libpng-dev and rebuild)",
                o->preview);
        status = fail(who, err);
        goto done;
    }
    /* Existing outputs are refused before anything else happens. */
    const char *finals[3] = { o->output, o->scores, o->preview };
    for (int i = 0; i < 3; i++)
        if (finals[i] && cli_out_check(finals[i], o->force, err)) {
            status = fail(who, err);
            goto done;
        }

    swi_params p;
    swi_tensor in;
    swi_output outs[2];
    int n_outs = 0;
    int rc = setup(o, who, s, &p, &in, outs, &n_outs, err);
    if (rc) {
        status = rc == 2 ? (fprintf(stderr, "%s: %s\n", who, err), 2) : fail(who, err);
        goto done;
    }
    /* Plan before anything big happens: a budget that cannot be met, or an output grid
     * other than the volume's, fails now rather than after the network ran. */
    s->ctx = swi_create();
    if (!s->ctx) {
        status = fail(who, "out of memory");
        goto done;
    }
    swi_plan plan;
    swi_status st = swi_plan_run(s->ctx, &p, &in, outs, n_outs, &plan);
    if (st != SWI_OK) {
        engine_error(who, o, st, s->ctx);
        goto done;
    }
    int64_t osz[SWI_MAX_DIMS] = { 0 };
    if (swi_result_size(s->ctx, 0, osz) == 3 &&
        (osz[0] != in.size[0] || osz[1] != in.size[1] || osz[2] != in.size[2])) {
        cli_err(err, "%s: the model's output grid %lldx%lldx%lld differs from the volume's "
                "%lldx%lldx%lld (a zoomed output); swi segment writes labels on the input grid",
                o->model, (long long)osz[0], (long long)osz[1], (long long)osz[2],
                (long long)in.size[0], (long long)in.size[1], (long long)in.size[2]);
        status = fail(who, err);
        goto done;
    }

    if ((o->output && cli_out_begin(&s->out_labels, o->output, o->force, err)) ||
        (o->scores && cli_out_begin(&s->out_scores, o->scores, o->force, err)) ||
        (o->preview && cli_out_begin(&s->out_preview, o->preview, o->force, err))) {
        status = fail(who, err);
        goto done;
    }

    /* Read and preprocess the channels. */
    const int64_t N = in.size[0] * in.size[1] * in.size[2];
    s->input = malloc((size_t)(N * in.channels) * sizeof(float));
    if (!s->input) {
        char b[32];
        cli_err(err, "%s: out of memory reading the volume (%s)", o->inputs[0],
                cli_bytes((size_t)(N * in.channels) * sizeof(float), b));
        status = fail(who, err);
        goto done;
    }
    for (int c = 0; c < o->n_inputs; c++) {
        if (nifti_vol_load(&s->vols[c], s->input + c * N, err)) {
            status = cli_interrupted() ? interrupted_exit(who) : fail(who, err);
            goto done;
        }
        if (cli_interrupted()) {
            status = interrupted_exit(who);
            goto done;
        }
        preprocess(o, s->input + c * N, N);
    }
    in.data = s->input;

    /* Run. */
    progress prog;
    progress_init(&prog, !o->quiet);
    p.progress = progress_update;
    p.progress_user = &prog;
    swi_predictor net = { ort_predict, s->model };
    cli_set_cancel_hook(ort_model_cancel, s->model);
    if (cli_interrupted()) {
        status = interrupted_exit(who);
        goto done;
    }
    st = swi_run(s->ctx, &p, &in, &net, outs, n_outs);
    cli_set_cancel_hook(NULL, NULL);
    progress_clear(&prog);
    double t_run = progress_elapsed(&prog);
    if (cli_interrupted()) {
        status = interrupted_exit(who);
        goto done;
    }
    if (st != SWI_OK) {
        engine_error(who, o, st, s->ctx);
        status = 1;
        goto done;
    }

    /* Results: the label grid must be the input grid (zoomed heads are not written). */
    swi_result_size(s->ctx, 0, osz);
    if (osz[0] != in.size[0] || osz[1] != in.size[1] || osz[2] != in.size[2]) {
        cli_err(err, "%s: the model's output grid %lldx%lldx%lld differs from the volume's "
                "%lldx%lldx%lld (a zoomed output); swi segment writes labels on the input grid",
                o->model, (long long)osz[0], (long long)osz[1], (long long)osz[2],
                (long long)in.size[0], (long long)in.size[1], (long long)in.size[2]);
        status = fail(who, err);
        goto done;
    }
    int64_t classes = swi_result_channels(s->ctx, 0);
    size_t lbytes = 0, sbytes = 0;
    const void *labels = swi_result(s->ctx, 0, &lbytes);
    int label_bytes = N > 0 ? (int)(lbytes / (size_t)N) : 0;
    if (!labels || (label_bytes != 1 && label_bytes != 2) || lbytes != (size_t)N * label_bytes) {
        status = fail(who, "internal error: unexpected label map from the engine");
        goto done;
    }
    const float *scores = NULL;
    if (o->scores) {
        /* library-owned, ours to read until swi_free */
        scores = swi_result(s->ctx, 1, &sbytes);
        if (!scores || sbytes != (size_t)(classes * N) * sizeof(float)) {
            status = fail(who, "internal error: unexpected scores from the engine");
            goto done;
        }
    }

    /* Write, then commit everything. */
    if (o->output &&
        nifti_write_fd(cli_out_take_fd(&s->out_labels), cli_ends_with(o->output, ".gz"),
                       o->output, &s->vols[0], labels,
                       label_bytes == 1 ? NIFTI_OUT_UINT8 : NIFTI_OUT_UINT16, NIFTI_OUT_LABELS,
                       1, classes, err)) {
        status = cli_interrupted() ? interrupted_exit(who) : fail(who, err);
        goto done;
    }
    if (o->scores &&
        nifti_write_fd(cli_out_take_fd(&s->out_scores), cli_ends_with(o->scores, ".gz"),
                       o->scores, &s->vols[0], scores, NIFTI_OUT_FLOAT32, NIFTI_OUT_SCORES,
                       classes, classes, err)) {
        status = cli_interrupted() ? interrupted_exit(who) : fail(who, err);
        goto done;
    }
    if (o->preview &&
        preview_write_fd(cli_out_take_fd(&s->out_preview), o->preview, in.size, s->input,
                         labels, label_bytes, err)) {
        status = fail(who, err);
        goto done;
    }
    cli_out *all[3] = { o->output ? &s->out_labels : NULL, o->scores ? &s->out_scores : NULL,
                        o->preview ? &s->out_preview : NULL };
    if (cli_out_commit_all(all, 3, o->force, err)) {
        status = cli_interrupted() ? interrupted_exit(who) : fail(who, err);
        goto done;
    }
    if (keep) {
        keep->labels = malloc(lbytes);
        if (keep->labels)
            memcpy(keep->labels, labels, lbytes);
        keep->label_bytes = label_bytes;
        memcpy(keep->size, in.size, sizeof keep->size);
        keep->classes = classes;
    }
    if (!o->quiet) {
        int64_t windows = plan.windows_total, calls = plan.predictor_calls;
        char rss[32];
        fprintf(stderr, "%s: %lldx%lldx%lld voxels, %lld classes, %lld windows in %lld calls: "
                "%.2f s (network+blending %.2f s, %.1f windows/s), peak RSS %s -> %s\n", who,
                (long long)in.size[0], (long long)in.size[1], (long long)in.size[2],
                (long long)classes, (long long)windows,
                (long long)(calls * ort_model_calls_per_batch(s->model, plan.sw_batch_size)),
                cli_now() - t0, t_run, t_run > 0 ? (double)windows / t_run : 0.0,
                cli_bytes(cli_peak_rss(), rss), o->output ? o->output : "-");
    }
    status = 0;
done:
    state_free(s);
    free(s);
    return status;
}

int swi_cmd_segment(int argc, char **argv)
{
    seg_opts o;
    int rc = seg_parse(argc, argv, &o, 0);
    if (rc)
        return rc < 0 ? 0 : rc;
    return seg_run(&o, "swi segment", NULL);
}

/* ---- swi plan ---------------------------------------------------------------------- */

int swi_cmd_plan(int argc, char **argv)
{
    const char *who = "swi plan";
    seg_opts o;
    int rc = seg_parse(argc, argv, &o, 1);
    if (rc)
        return rc < 0 ? 0 : rc;
    char err[SWI_ERRLEN];
    seg_state *s = calloc(1, sizeof *s);
    if (!s)
        return fail(who, "out of memory");
    s->out_labels.fd = s->out_scores.fd = s->out_preview.fd = -1;
    swi_params p;
    swi_tensor in;
    swi_output outs[2];
    int n_outs = 0, status = 1;
    rc = setup(&o, who, s, &p, &in, outs, &n_outs, err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", who, err);
        status = rc;
        goto done;
    }
    s->ctx = swi_create();
    if (!s->ctx) {
        status = fail(who, "out of memory");
        goto done;
    }
    swi_plan plan;
    swi_status st = swi_plan_run(s->ctx, &p, &in, outs, n_outs, &plan);
    if (st != SWI_OK) {
        engine_error(who, &o, st, s->ctx);
        goto done;
    }
    char desc[1024], b[6][32];
    ort_model_describe(s->model, desc, sizeof desc);
    const int64_t *sz = in.size;
    size_t vol_native = (size_t)(sz[0] * sz[1] * sz[2]) * (size_t)s->vols[0].nbyper;
    int64_t per_batch = ort_model_calls_per_batch(s->model, plan.sw_batch_size);
    printf("model    %s\n", o.model);
    printf("         %s\n", desc);
    for (int c = 0; c < o.n_inputs; c++)
        printf("input    %s: %lld x %lld x %lld voxels, %s\n", o.inputs[c], (long long)sz[0],
               (long long)sz[1], (long long)sz[2], c == 0 ? "channel 0" : "next channel");
    printf("window   %lld x %lld x %lld, overlap %g,%g,%g, %s blending", (long long)plan.roi[0],
           (long long)plan.roi[1], (long long)plan.roi[2], o.overlap[0], o.overlap[1],
           o.overlap[2], o.mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    if (o.mode == SWI_BLEND_GAUSSIAN)
        printf(" (sigma %g,%g,%g x roi)", o.sigma_scale[0], o.sigma_scale[1], o.sigma_scale[2]);
    printf(", %s padding\n", pad_name(o.padding));
    printf("padded   %lld x %lld x %lld (before: %lld,%lld,%lld)\n", (long long)plan.padded[0],
           (long long)plan.padded[1], (long long)plan.padded[2], (long long)plan.pad_before[0],
           (long long)plan.pad_before[1], (long long)plan.pad_before[2]);
    printf("grid     %lld x %lld x %lld = %lld windows, order %c,%c,%c (outermost first)\n",
           (long long)plan.windows_per_axis[0], (long long)plan.windows_per_axis[1],
           (long long)plan.windows_per_axis[2], (long long)plan.windows_total,
           "ijk"[plan.order[0] % 3], "ijk"[plan.order[1] % 3], "ijk"[plan.order[2] % 3]);
    printf("calls    %lld engine batches of up to %d windows -> %lld network runs%s\n",
           (long long)plan.predictor_calls, plan.sw_batch_size,
           (long long)(plan.predictor_calls * per_batch), o.tta ? " (x8 for --tta)" : "");
    printf("threads  %d blending, %d network; pipeline %s\n", plan.threads,
           o.threads > 0 ? o.threads : cli_cpu_count(), plan.pipeline ? "on" : "off");
    printf("classes  %lld%s\n", (long long)plan.head_channels[0],
           plan.head_channels[0] > 256 ? " (uint16 labels)" : " (uint8 labels)");
    printf("memory   predicted peak %s%s\n", cli_bytes(plan.bytes_peak, b[0]),
           o.max_memory ? "" : "");
    printf("  input         %12s\n", cli_bytes(plan.bytes_input, b[0]));
    printf("  windows       %12s   (window inputs and network outputs)\n",
           cli_bytes(plan.bytes_windows, b[1]));
    printf("  partial sums  %12s   (open frontier)\n", cli_bytes(plan.bytes_partial, b[2]));
    printf("  outputs       %12s   (labels%s)\n", cli_bytes(plan.bytes_outputs, b[3]),
           o.scores ? " + scores" : "");
    printf("  scratch       %12s\n", cli_bytes(plan.bytes_scratch, b[4]));
    printf("  smallest plan %12s   (any batch size / pipeline)\n",
           cli_bytes(plan.bytes_min, b[5]));
    printf("not counted: the file's own voxels while reading (%s), ONNX Runtime's "
           "working memory\n", cli_bytes(vol_native, b[0]));
    status = 0;
done:
    state_free(s);
    free(s);
    return status;
}
