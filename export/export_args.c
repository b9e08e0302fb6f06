/* export_args.c -- the options of `swi export` (getopt_long, as the rest of swi). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fdopen */
#endif
#include "export_internal.h"
#include "swi_io.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const export_pad_names[4] = {"constant", "reflect", "replicate", "circular"};

const char *export_mode_name(swi_blend mode) { return mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant"; }

enum {
    OPT_MODEL = 256,
    OPT_OUTPUT,
    OPT_SIZE,
    OPT_DYNAMIC,
    OPT_ROI,
    OPT_OVERLAP,
    OPT_MODE,
    OPT_SIGMA,
    OPT_PADDING,
    OPT_CVAL,
    OPT_ARGMAX,
    OPT_HEAD,
    OPT_PER_IMAGE,
    OPT_UNROLL,
    OPT_FORCE,
    OPT_QUIET,
    OPT_CARD
};

static const struct option LONG_OPTS[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"size", required_argument, NULL, OPT_SIZE},
    {"dynamic", no_argument, NULL, OPT_DYNAMIC},
    {"roi", required_argument, NULL, OPT_ROI},
    {"overlap", required_argument, NULL, OPT_OVERLAP},
    {"mode", required_argument, NULL, OPT_MODE},
    {"sigma-scale", required_argument, NULL, OPT_SIGMA},
    {"padding-mode", required_argument, NULL, OPT_PADDING},
    {"cval", required_argument, NULL, OPT_CVAL},
    {"argmax", no_argument, NULL, OPT_ARGMAX},
    {"head", required_argument, NULL, OPT_HEAD},
    {"per-image", no_argument, NULL, OPT_PER_IMAGE},
    {"unroll", no_argument, NULL, OPT_UNROLL},
    {"force", no_argument, NULL, OPT_FORCE},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"card", required_argument, NULL, OPT_CARD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s --model NET.onnx --output PIPE.onnx --size D,H,W [options]\n"
            "       %s --model NET.onnx --output PIPE.onnx --dynamic [options]\n"
            "\n"
            "Write the whole sliding-window pipeline (padding, windows, the network, blending,\n"
            "crop) as one ONNX model of standard operators: input `image` [N, C, D, H, W] in the\n"
            "network's element type (N dynamic), output `scores` [N, classes, D, H, W] in the\n"
            "network's output type (accumulated in float32), and with --argmax `labels` uint8\n"
            "[N, D, H, W]. The result is MONAI's sliding_window_inference, as `swi segment`.\n"
            "\n"
            "Examples:\n"
            "  # a U-Net with a fixed 96^3 input, for 240x240x155 volumes, gaussian blending,\n"
            "  # scores and labels\n"
            "  %s --model unet.onnx --output unet_sw.onnx --size 240,240,155 \\\n"
            "      --mode gaussian --argmax\n"
            "  # one file for every volume size: the window grid is computed in the graph\n"
            "  %s --model unet.onnx --output unet_any.onnx --dynamic --overlap 0.5\n"
            "  # a 2-D network with a free input size: choose the window; the 100-pixel side\n"
            "  # is padded to it by mirroring\n"
            "  %s --model fcn.onnx --output fcn_sw.onnx --size 100,700 --roi 128 \\\n"
            "      --padding-mode reflect\n"
            "  # no Loop operators, for runtimes with weak Loop support (TensorRT)\n"
            "  %s --model unet.onnx --output unet_flat.onnx --size 128,128,64 --unroll\n"
            "\n"
            "Options (MONAI's meanings and defaults; R[,R,R]: one value for every spatial dim,\n"
            "or one per dim):\n"
            "  --model FILE          the network: one input [n, C, *roi], weights inside the file\n"
            "  --output FILE         the pipeline model to write (exists: needs --force)\n"
            "  --size D,H,W          the volume size the pipeline is built for (one value per\n"
            "                        spatial dim of the network)\n"
            "  --dynamic             instead of --size: any volume size, the window grid is\n"
            "                        computed inside the graph\n"
            "  --roi R[,R,R]         window size (default: the network's input size; <= 0: the\n"
            "                        whole volume along that dim, with --size only)\n"
            "  --overlap O[,O,O]     window overlap in [0, 1) (default 0.25)\n"
            "  --mode M              blending: constant (default) or gaussian\n"
            "  --sigma-scale S[,..]  gaussian sigma / roi (default 0.125)\n"
            "  --padding-mode M      constant (default), reflect, replicate or circular\n"
            "  --cval V              fill value of constant padding (default 0)\n"
            "  --argmax              also output `labels` (uint8, at most 256 classes)\n"
            "  --head NAME|INDEX     the network output to blend (default: the first)\n"
            "  --per-image           one window of one image per network call (automatic when\n"
            "                        the network's batch is fixed at 1; default: the N images'\n"
            "                        windows at the same place go through the network together)\n"
            "  --unroll              no Loop operators (for runtimes without good Loop support):\n"
            "                        all N x windows go through the network as one batch, the\n"
            "                        blending is unrolled; needs --size and a dynamic batch;\n"
            "                        memory grows with the number of windows\n"
            "  --card FILE           embed this model card (JSON, see swi segment --help) in the\n"
            "                        output's metadata_props as swi.card; swi info shows it\n"
            "  --force               overwrite --output\n"
            "  --quiet               no summary line\n"
            "\n"
            "Exit status: 0 written, 1 failure (unreadable or unsupported network, I/O error),\n"
            "2 usage error (bad or missing option, options that do not fit the network).\n",
            prog, prog, prog, prog, prog, prog);
}

static int set_size(export_job *job, const char *val) {
    export_options *o = &job->opt;
    int n = cli_parse_i64_list(val, o->size, EXPORT_MAXD);
    if (n < 1)
        return export_fail(job, 2, "--size '%s': expected 1 to 3 comma-separated integers, e.g. 96,96,64",
                           val);
    o->n_size = n;
    for (int k = 0; k < o->n_size; k++)
        if (o->size[k] < 1 || o->size[k] > SWI_MAX_AXIS)
            return export_fail(job, 2, "--size '%s': sizes must be in 1..2^31", val);
    return 0;
}

static const char *long_name(int val) {
    for (const struct option *lo = LONG_OPTS; lo->name; lo++)
        if (lo->val == val) return lo->name;
    return "?";
}

/* --roi, --overlap, --mode, --sigma-scale, --padding-mode, --cval: swi segment's parser,
 * with the list lengths matched to the network's dims later (export_layout.c). */
static int set_window(export_job *job, int c, const char *val) {
    char msg[sizeof job->err];
    if (cli_window_option(&job->opt.window, long_name(c), val, msg, sizeof msg) < 0)
        return export_fail(job, 2, "%s", msg);
    return 0;
}

/* getopt_long's complaint about argv[optind - 1] as our message. */
static int bad_option(export_job *job, int c, char **argv) {
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':') return export_fail(job, 2, "--%s needs a value", long_name(optopt));
    if (optopt != 0 && !strncmp(arg, "--", 2) && strchr(arg, '='))
        return export_fail(job, 2, "--%s takes no value (see --help)", long_name(optopt));
    int len = (int)strcspn(arg, "="); /* the name, as typed */
    return export_fail(job, 2, "unknown option '%.*s' (see --help)", len, arg);
}

/* One option. 0, 1 (--help printed) or -1. */
static int apply_option(export_job *job, int c, const char *val, char **argv) {
    export_options *o = &job->opt;
    switch (c) {
    case 'h': usage(stdout, o->prog); return 1;
    case OPT_MODEL: o->model = val; return 0;
    case OPT_OUTPUT: o->output = val; return 0;
    case OPT_HEAD: o->head = val; return 0;
    case OPT_SIZE: return set_size(job, val);
    case OPT_ROI:
    case OPT_OVERLAP:
    case OPT_SIGMA:
    case OPT_MODE:
    case OPT_PADDING:
    case OPT_CVAL: return set_window(job, c, val);
    case OPT_DYNAMIC: o->dynamic = 1; return 0;
    case OPT_ARGMAX: o->argmax = 1; return 0;
    case OPT_PER_IMAGE: o->per_image = 1; return 0;
    case OPT_UNROLL: o->unroll = 1; return 0;
    case OPT_FORCE: o->force = 1; return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_CARD: o->card = val; return 0;
    default: return bad_option(job, c, argv);
    }
}

/* The window's defaults are the library's (MONAI's). */
static void options_init(export_options *o, const char *prog) {
    memset(o, 0, sizeof *o);
    o->prog = !strcmp(prog, "export") ? "swi export" : prog; /* dispatched by the swi CLI */
    cli_window_init(&o->window);
    o->window.axes = 0; /* one value per dim of the network: checked once it is read */
    o->window.roi_negative = 1;
    o->window.cval_float = 0;
}

/* Options that exclude or need each other. */
static int check_combination(export_job *job) {
    const export_options *o = &job->opt;
    if (!o->model) return export_fail(job, 2, "--model is required (see --help)");
    if (!o->output) return export_fail(job, 2, "--output is required (see --help)");
    if (!o->n_size && !o->dynamic) return export_fail(job, 2, "--size D,H,W (or --dynamic) is required");
    if (o->n_size && o->dynamic) return export_fail(job, 2, "--size and --dynamic exclude each other");
    if (o->unroll && o->dynamic)
        return export_fail(job, 2, "--unroll needs --size: a dynamic grid needs loops");
    if (o->unroll && o->per_image) return export_fail(job, 2, "--unroll and --per-image exclude each other");
    return 0;
}

/* --card: a JSON object of at most 1 MB nested at most SWI_IO_JSON_MAX_DEPTH deep (swi info
 * and swi segment check its keys). A FIFO or device named so is refused without blocking. */
static int read_card(export_job *job) {
    const char *path = job->opt.card;
    char why[SWI_ERRLEN];
    int fd = swi_io_open_regular(path, NULL, why, sizeof why);
    if (fd < 0) return export_fail(job, 1, "--card %s", why);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return export_fail(job, 1, "--card %s: %s", path, strerror(e));
    }
    char *text = arena_alloc(&job->A, (1 << 20) + 1);
    size_t n = fread(text, 1, 1 << 20, f);
    int bad = ferror(f), more = fgetc(f) != EOF;
    fclose(f);
    if (bad) return export_fail(job, 1, "--card %s: cannot read it", path);
    if (more) return export_fail(job, 1, "--card %s: larger than 1 MB", path);
    text[n] = '\0';
    if (strlen(text) != n) return export_fail(job, 1, "--card %s: not a text file", path);
    size_t i = strspn(text, " \t\r\n");
    if (text[i] != '{' || !strrchr(text, '}'))
        return export_fail(job, 1, "--card %s: a model card is a JSON object ({...})", path);
    const int depth = swi_io_json_depth(text, n);
    if (depth > SWI_IO_JSON_MAX_DEPTH)
        return export_fail(job, 1, "--card %s: the JSON nests %d levels deep, more than the %d swi reads",
                           path, depth, SWI_IO_JSON_MAX_DEPTH);
    job->opt.card_text = text;
    return 0;
}

int export_parse_args(export_job *job, int argc, char **argv) {
    options_init(&job->opt, argc > 0 && argv[0] ? argv[0] : "swi export");
    opterr = 0; /* our messages, not getopt's */
    optind = 0; /* full re-initialisation (GNU): the command may run more than once */
    int c;
    while ((c = getopt_long(argc, argv, ":h", LONG_OPTS, NULL)) != -1) {
        int r = apply_option(job, c, optarg, argv);
        if (r) return r;
    }
    if (optind < argc)
        return export_fail(job, 2, "unexpected argument '%s' (options start with --; see --help)",
                           argv[optind]);
    if (job->opt.card && read_card(job) != 0) return -1;
    return check_combination(job);
}
