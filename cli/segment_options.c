/*
 * segment_options.c -- the command line of `swi segment` and `swi plan`: defaults and
 * the parser (seg_parse; the help texts are in segment_help.c). It checks the options
 * alone; files and the model are checked by the job (pipeline/).
 */
#include "cli.h"

#include "shard.h"
#include "swi_io.h"
#include "swi_resample.h"
#include "util.h"
#include "window_opts.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    OPT_NO_REWRITE,
    OPT_FOLDS,
    OPT_DISABLE_TTA,
    OPT_TILE_STEP,
    OPT_SAVE_PROBS
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
    {"folds", required_argument, NULL, OPT_FOLDS},
    {"disable-tta", no_argument, NULL, OPT_DISABLE_TTA},
    {"no-mirroring", no_argument, NULL, OPT_DISABLE_TTA},
    {"tile-step-size", required_argument, NULL, OPT_TILE_STEP},
    {"save-probabilities", no_argument, NULL, OPT_SAVE_PROBS},
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

/* The names swi_io writes volumes to (a DICOM SEG, which holds labels only, apart). */
static int is_volume_name(const char *p) {
    const swi_volume_format f = swi_volume_format_of(p);
    return swi_volume_format_writable(f) && f != SWI_VOLUME_DICOM_SEG;
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
        case 'h': fputs(plan ? SEG_PLAN_HELP : SEG_SEGMENT_HELP, stdout); return -1;
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
            if (swi_resample_axcodes_parse(arg, w, sg, msg, sizeof msg) != SWI_OK)
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
        case OPT_FOLDS: o->folds = arg; break;
        case OPT_DISABLE_TTA: o->no_mirroring = 1; break;
        case OPT_SAVE_PROBS: o->save_probabilities = 1; break;
        case OPT_TILE_STEP:
            if (cli_parse_double(arg, &o->tile_step) || !(o->tile_step > 0 && o->tile_step <= 1))
                return usage(who, "--tile-step-size '%s': give a fraction of the patch in (0, 1]", arg, NULL);
            break;
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
    /* a name that is not a volume file may be a store: swi_job_check_names (seg_store_check) decides */
    if (o->output && !is_volume_name(o->output) && swi_volume_format_of(o->output) != SWI_VOLUME_DICOM_SEG &&
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
    if (o->preview && swi_volume_format_of(o->preview) != SWI_VOLUME_PNG)
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
