/*
 * segment_options.c -- the command line of `swi segment` and `swi plan`: defaults and
 * the parser (seg_parse; the help texts are in segment_help.c). It checks the options
 * alone; files and the model are checked by the job (pipeline/).
 */
#include "cli.h"

#include "swi_io.h"
#include "swi_resample.h"
#include "termtext.h"
#include "util.h"
#include "window_opts.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The window flags given into the spec; the others stay unset, for the card. */
static void take_window(swi_job_spec *sp, const cli_window *w) {
    for (int a = 0; a < 3; a++) {
        if (w->given & CLI_WINDOW_ROI) sp->roi[a] = w->roi[a] ? w->roi[a] : -1; /* 0: the whole axis */
        if (w->given & CLI_WINDOW_OVERLAP) sp->overlap[a] = w->overlap[a];
        if (w->given & CLI_WINDOW_SIGMA) sp->sigma_scale[a] = w->sigma_scale[a];
    }
    if (w->given & CLI_WINDOW_MODE) sp->mode = (int)w->mode;
    if (w->given & CLI_WINDOW_PADDING) sp->padding = (int)w->padding;
    if (w->given & CLI_WINDOW_CVAL) sp->cval = (float)w->cval; /* swi_params.cval is a float */
    sp->sw_batch = w->sw_batch;
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
    OPT_BACKEND, /* the dnnl backend's options (checked in pipeline/dnnl_choice.c) */
    OPT_PRECISION,
    OPT_FOLDS,
    OPT_DISABLE_TTA,
    OPT_ACCUMULATE,
    OPT_TILE_STEP,
    OPT_SAVE_PROBS,
    OPT_REGION,
    OPT_REGION_MM,
    OPT_REGION_MASK,
    OPT_MARGIN,
    OPT_KEEP_OUTSIDE,
    OPT_STATISTICS,
    OPT_CHUNKS,
    OPT_MASKS
};

static const struct option LONG_OPTS[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"input", required_argument, NULL, OPT_INPUT},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"scores", required_argument, NULL, OPT_SCORES},
    {"preview", required_argument, NULL, OPT_PREVIEW},
    {"statistics", required_argument, NULL, OPT_STATISTICS},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"masks", required_argument, NULL, OPT_MASKS},
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
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"folds", required_argument, NULL, OPT_FOLDS},
    {"disable-tta", no_argument, NULL, OPT_DISABLE_TTA},
    {"accumulate", required_argument, NULL, OPT_ACCUMULATE},
    {"no-mirroring", no_argument, NULL, OPT_DISABLE_TTA},
    {"tile-step-size", required_argument, NULL, OPT_TILE_STEP},
    {"save-probabilities", no_argument, NULL, OPT_SAVE_PROBS},
    {"region", required_argument, NULL, OPT_REGION},
    {"region-mm", required_argument, NULL, OPT_REGION_MM},
    {"region-mask", required_argument, NULL, OPT_REGION_MASK},
    {"margin", required_argument, NULL, OPT_MARGIN},
    {"keep-outside", required_argument, NULL, OPT_KEEP_OUTSIDE},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int usage(const char *who, const char *fmt, const char *a, const char *b) {
    char msg[SWI_ERRLEN];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    cli_one_line(msg);
    fprintf(stderr, "%s: %s (see '%s --help')\n", who, TERM_TEXT(msg), who);
    return 2;
}

/* "A:B,C:D,E:F" into lo, hi: integers 0 <= lo < hi (voxels), or with mm any finite
 * numbers lo <= hi. 0, or -1. */
static int parse_box(const char *s, double lo[3], double hi[3], int mm) {
    const char *p = s;
    for (int a = 0; a < 3; a++) {
        char *end;
        for (int h = 0; h < 2; h++) {
            double v = strtod(p, &end);
            if (end == p || !isfinite(v)) return -1;
            if (!mm && (v != floor(v) || v < 0 || v > (double)SWI_MAX_AXIS)) return -1;
            (h ? hi : lo)[a] = v;
            if (*end != (h ? (a < 2 ? ',' : '\0') : ':')) return -1;
            p = end + (*end != '\0');
        }
        if (mm ? !(lo[a] <= hi[a]) : !(lo[a] < hi[a])) return -1;
    }
    return 0;
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

/* Edit distance of a and b (insertions, deletions, substitutions and swaps of two
 * neighbours; each at most 31 characters considered), for suggestions. */
static int edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 31) na = 31;
    if (nb > 31) nb = 31;
    int d[32][32];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            /* two letters swapped (--modle) count as one edit */
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

/* The long option nearest to what was typed (dashes, underscores and a value after '='
 * left aside), or NULL when none is near enough to be what was meant. */
static const char *nearest_option(const char *typed) {
    char name[64];
    size_t n = 0;
    while (*typed == '-') typed++;
    for (; *typed && *typed != '=' && n + 1 < sizeof name; typed++) name[n++] = *typed == '_' ? '-' : *typed;
    name[n] = '\0';
    if (n < 2) return NULL;
    const char *best = NULL;
    int best_d = 1 << 30;
    for (const struct option *lo = LONG_OPTS; lo->name; lo++) {
        const int d = edit_distance(name, lo->name);
        if (d < best_d) best_d = d, best = lo->name;
    }
    const int allowed = n <= 4 ? 1 : n <= 8 ? 2 : 3;
    return best_d <= allowed ? best : NULL;
}

/* Spellings of other tools with the same meaning: nnU-Net's and TotalSegmentator's
 * underscores (--save_probabilities, --disable_tta), taken in place as the hyphenated
 * option when that names one of ours. */
static void accept_underscores(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !strchr(a, '_')) continue;
        if (strcmp(a, "--") == 0) break;
        const size_t len = strcspn(a + 2, "=");
        char name[64];
        if (len == 0 || len >= sizeof name) continue;
        for (size_t k = 0; k < len; k++) name[k] = a[2 + k] == '_' ? '-' : a[2 + k];
        name[len] = '\0';
        for (const struct option *lo = LONG_OPTS; lo->name; lo++)
            if (strcmp(lo->name, name) == 0) {
                memcpy(a + 2, name, len);
                break;
            }
    }
}

/* A fold: a whole number or "all" (nnU-Net's -f 0 1 2 spelling gives them one a word). */
static int is_fold_word(const char *s) {
    if (strcmp(s, "all") == 0) return 1;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* The usage error for the unknown option getopt_long just met: the token at fault as
 * typed (a short option in a group, -xyz, named with its group) and the nearest option. */
static int unknown_option(const char *who, int argc, char **argv, int scanned) {
    char what[160], hint[96] = "";
    const char *tok = scanned < argc ? argv[scanned] : argv[argc - 1];
    if (optopt && tok[0] == '-' && tok[1] != '-' && strlen(tok) > 2)
        snprintf(what, sizeof what, "unknown option '-%c' (in '%.64s')", optopt, tok);
    else if (optopt)
        snprintf(what, sizeof what, "unknown option '-%c'", optopt);
    else
        snprintf(what, sizeof what, "unknown option '%.100s'", tok);
    /* -model or --modle: the option meant */
    const char *near = optopt && strlen(tok) <= 2 ? NULL : nearest_option(tok);
    if (near) snprintf(hint, sizeof hint, "; did you mean --%s?", near);
    char msg[SWI_ERRLEN];
    snprintf(msg, sizeof msg, "%s%s", what, hint);
    return usage(who, "%s", msg, NULL);
}

int seg_parse(int argc, char **argv, seg_cmd *o, int plan) {
    const char *who = plan ? "swi plan" : "swi segment";
    memset(o, 0, sizeof *o);
    swi_job_spec *sp = &o->spec;
    swi_job_spec_init(sp);
    cli_window window;
    cli_window_init(&window);
    opterr = 0;
    optind = 0; /* full re-initialisation (GNU): seg_parse may run more than once */
    accept_underscores(argc, argv);
    int c, li = 0;
    /* the word getopt_long is on: a token at fault is named as typed */
    int scanned = optind ? optind : 1;
    while ((c = getopt_long(argc, argv, ":qhi:o:m:", LONG_OPTS, &li)) != -1) {
        const char *arg = optarg;
        /* -i, -o, -m: the short forms of nnU-Net's and TotalSegmentator's commands; -input
         * or -model (one dash) is a long option misspelt, not -i with the value "nput" */
        if ((c == 'i' || c == 'o' || c == 'm') && scanned < argc && arg == argv[scanned] + 2 &&
            nearest_option(argv[scanned])) {
            optopt = 0;
            return unknown_option(who, argc, argv, scanned);
        }
        if (c == 'i') c = OPT_INPUT;
        if (c == 'o') c = OPT_OUTPUT;
        if (c == 'm') c = OPT_MODEL;
        switch (c) {
        case 'h': fputs(plan ? SEG_PLAN_HELP : SEG_SEGMENT_HELP, stdout); return -1;
        case 'q': o->quiet = sp->quiet = 1; break;
        case OPT_MODEL:
            if (sp->n_models >= SWI_JOB_MAX_MODELS)
                return usage(who, "too many --model files (at most 16)", NULL, NULL);
            sp->models[sp->n_models++] = arg;
            break;
        case OPT_ORIENTATION: {
            int w[3], sg[3];
            char msg[256];
            if (swi_resample_axcodes_parse(arg, w, sg, msg, sizeof msg) != SWI_OK)
                return usage(who, "--orientation: %s", msg, NULL);
            sp->orientation = arg;
            break;
        }
        case OPT_SPACING: {
            double v[3];
            if (three_doubles(arg, v) || !(v[0] > 0) || !(v[1] > 0) || !(v[2] > 0) ||
                !isfinite(v[0] + v[1] + v[2]))
                return usage(who, "--spacing '%s': give one size or three (X,Y,Z) in mm, each > 0", arg,
                             NULL);
            memcpy(sp->spacing, v, sizeof v);
            break;
        }
        case OPT_INPUT:
            if (sp->n_inputs >= SWI_JOB_MAX_INPUTS)
                return usage(who, "too many --input files (at most 16)", NULL, NULL);
            sp->inputs[sp->n_inputs++] = arg;
            break;
        case OPT_OUTPUT: sp->output = arg; break;
        case OPT_SCORES: sp->scores = arg; break;
        case OPT_PREVIEW: sp->preview = arg; break;
        case OPT_STATISTICS: sp->statistics = arg; break;
        case OPT_MASKS: sp->masks = arg; break;
        case OPT_REPORT: sp->report = arg; break;
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
        case OPT_NO_CARD: sp->no_card = 1; break;
        case OPT_THREADS: {
            int64_t v;
            if (cli_parse_i64(arg, 0, 1024, &v))
                return usage(who,
                             "--threads '%s': give a whole number from 0 (all cores) to "
                             "1024",
                             arg, NULL);
            sp->threads = (int)v;
            break;
        }
        case OPT_MAXMEM:
            if (cli_parse_size(arg, &sp->max_memory) || sp->max_memory == 0)
                return usage(who, "--max-memory '%s': give a size such as 512M, 4G or 1.5G", arg, NULL);
            break;
        case OPT_NO_REUSE: sp->no_reuse = 1; break;
        case OPT_NO_REWRITE: sp->no_rewrite = 1; break;
        case OPT_BACKEND: sp->backend = arg; break;
        case OPT_PRECISION: sp->precision = arg; break;
        case OPT_REUSE_CACHE: {
            int64_t v;
            if (cli_parse_i64(arg, 1, 64, &v))
                return usage(who, "--reuse-cache '%s': give a whole number from 1 to 64", arg, NULL);
            sp->reuse_cache = (int)v;
            break;
        }
        case OPT_SOFTMAX: sp->softmax = 1; break;
        case OPT_FOLDS: {
            /* --folds 0,1 or, as nnU-Net spells it, --folds 0 1 */
            size_t used = (size_t)snprintf(o->folds, sizeof o->folds, "%s", arg);
            while (optind < argc && is_fold_word(argv[optind]) && used < sizeof o->folds) {
                used += (size_t)snprintf(o->folds + used, sizeof o->folds - used, ",%s", argv[optind]);
                optind++;
            }
            if (used >= sizeof o->folds) return usage(who, "--folds: too many folds", NULL, NULL);
            sp->folds = o->folds;
            break;
        }
        case OPT_DISABLE_TTA: sp->no_mirroring = 1; break;
        case OPT_ACCUMULATE:
            if (strcmp(arg, "float16") == 0)
                sp->accumulate_float16 = 1;
            else if (strcmp(arg, "float32") == 0)
                sp->accumulate_float16 = 0;
            else
                return usage(who, "--accumulate '%s': takes float32 or float16", arg, NULL);
            break;
        case OPT_SAVE_PROBS: sp->save_probabilities = 1; break;
        case OPT_TILE_STEP:
            if (cli_parse_double(arg, &sp->tile_step) || !(sp->tile_step > 0 && sp->tile_step <= 1))
                return usage(who, "--tile-step-size '%s': give a fraction of the patch in (0, 1]", arg, NULL);
            break;
        case OPT_TTA: sp->tta = 1; break;
        case OPT_ZSCORE: sp->zscore = 1; break;
        case OPT_FORCE: sp->force = 1; break;
        case OPT_CLIP:
            if (cli_parse_double_list(arg, sp->clip, 2) != 2 || sp->clip[0] > sp->clip[1])
                return usage(who, "--clip '%s': give A,B with A <= B", arg, NULL);
            sp->clip_given = 1;
            break;
        case OPT_SCALE:
            if (cli_parse_double_list(arg, sp->scale, 4) != 4 || sp->scale[0] == sp->scale[1])
                return usage(who, "--scale '%s': give A,B,C,D (maps [A,B] onto [C,D]; A != B)", arg, NULL);
            sp->scale_given = 1;
            break;
        case OPT_DEVICE:
            if (strcmp(arg, "cpu") == 0)
                sp->cuda = 0;
            else if (strcmp(arg, "cuda") == 0)
                sp->cuda = 1;
            else
                return usage(who, "--device '%s': use cpu or cuda", arg, NULL);
            break;
        case OPT_HEAD: {
            int64_t v;
            if (cli_parse_i64(arg, 0, 1000, &v))
                return usage(who, "--head '%s': give an output index (0 = the first)", arg, NULL);
            sp->head = (int)v;
            break;
        }
        case OPT_NONFINITE:
            if (strcmp(arg, "zero") == 0)
                sp->nonfinite_fail = 0;
            else if (strcmp(arg, "fail") == 0)
                sp->nonfinite_fail = 1;
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
            int part, parts, init;
            if (cli_shard_parse(arg, &part, &parts, &init, msg)) return usage(who, "%s", msg, NULL);
            sp->shard_init = init; /* "init": no part, the stores only */
            sp->shard_part = init ? 0 : part;
            sp->shard_parts = init ? 0 : parts;
            break;
        }
        case OPT_REGION:
        case OPT_REGION_MM: {
            double lo[3], hi[3];
            const int mm = c == OPT_REGION_MM;
            if (parse_box(arg, lo, hi, mm))
                return usage(who,
                             mm ? "--region-mm '%s': give X0:X1,Y0:Y1,Z0:Z1 (millimetres, lo <= hi)"
                                : "--region '%s': give I0:I1,J0:J1,K0:K1 (voxels, 0 <= lo < hi)",
                             arg, NULL);
            for (int a = 0; a < 3; a++) {
                if (mm) {
                    sp->region_mm_lo[a] = lo[a];
                    sp->region_mm_hi[a] = hi[a];
                } else {
                    sp->region_lo[a] = (int64_t)lo[a];
                    sp->region_hi[a] = (int64_t)hi[a];
                }
            }
            if (mm)
                sp->region_mm_given = 1;
            else
                sp->region_given = 1;
            break;
        }
        case OPT_REGION_MASK: sp->region_mask = arg; break;
        case OPT_KEEP_OUTSIDE: sp->keep_outside = arg; break;
        case OPT_MARGIN: {
            double v[3];
            if (cli_parse_double_list(arg, v, 3) != 1 || !(v[0] >= 0) || !isfinite(v[0]))
                return usage(who, "--margin '%s': give millimetres, 0 or more", arg, NULL);
            sp->margin_mm = v[0];
            break;
        }
        case OPT_CHUNKS: {
            int64_t v[4];
            if (cli_parse_i64_list(arg, v, 4) != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1 ||
                v[0] > SWI_MAX_AXIS || v[1] > SWI_MAX_AXIS || v[2] > SWI_MAX_AXIS)
                return usage(who, "--chunks '%s': give three chunk sizes A,B,C, each 1 or more", arg, NULL);
            memcpy(sp->chunks, v, sizeof sp->chunks);
            break;
        }
        case OPT_SHARD_GRID: {
            char msg[SWI_ERRLEN];
            if (cli_shard_grid_parse(arg, sp->shard_grid, msg)) return usage(who, "%s", msg, NULL);
            break;
        }
        case ':':
            if (optopt && optopt != OPT_MODEL && optopt < 256) {
                char flag[3] = {'-', (char)optopt, '\0'};
                return usage(who, "option '%s' needs a value", flag, NULL);
            }
            return usage(who, "option '%s' needs a value", argv[optind - 1], NULL);
        default: return unknown_option(who, argc, argv, scanned);
        }
        scanned = optind;
    }
    if (optind < argc) {
        if (argv[optind][0] == '-' && argv[optind][1] != '-' && nearest_option(argv[optind]))
            return unknown_option(who, argc, argv, optind); /* after "--" */
        return usage(who, "unexpected argument '%s' (every value follows its option: --input FILE)",
                     argv[optind], NULL);
    }
    take_window(sp, &window);
    if (sp->n_models == 0) return usage(who, "--model is required", NULL, NULL);
    if (plan && (sp->report || o->report_dir)) return usage(who, "--report is for swi segment", NULL, NULL);
    if (o->input_dir || o->output_dir || o->output_format || o->part_count) {
        /* folder mode: the cases are the folder's, their outputs OUT/<case>.<format> */
        if (plan) return usage(who, "folder mode (--input-dir) is for swi segment", NULL, NULL);
        if (sp->report && o->report_dir && strcmp(sp->report, o->report_dir) != 0)
            return usage(who, "--report and --report-dir name two folders: give one", NULL, NULL);
        /* in folder mode --report names the pages' folder */
        if (sp->report && !o->report_dir) o->report_dir = sp->report;
        sp->report = NULL;
        if (!o->input_dir)
            return usage(who, "--output-dir, --output-format and --part need --input-dir", NULL, NULL);
        if (!o->output_dir) return usage(who, "--input-dir needs --output-dir", NULL, NULL);
        if (sp->n_inputs || sp->output || sp->scores || sp->preview || sp->statistics || sp->masks)
            return usage(
                who,
                "--input-dir takes no --input, --output, --scores, --preview, --statistics or --masks "
                "(outputs are OUTPUT_DIR/<case>.nii.gz)",
                NULL, NULL);
        if (sp->softmax)
            return usage(who, "--softmax applies to --scores, which folder mode does not write", NULL, NULL);
        if (sp->shard_parts || sp->shard_init || sp->shard_grid[0])
            return usage(who,
                         "--shard and --shard-grid cut one volume into parts of shared stores; folder "
                         "mode divides its cases with --part I/N (or between the ranks of mpirun)",
                         NULL, NULL);
        if (sp->region_mask || sp->keep_outside)
            return usage(who,
                         "--region-mask and --keep-outside name one case's files; folder mode takes "
                         "--region or --region-mm (the same box for every case)",
                         NULL, NULL);
        o->part_given = o->part_count != 0;
        if (!o->output_format) o->output_format = "nii.gz";
        if (!o->part_count) o->part_count = 1;
        return 0; /* every case is run as swi segment runs one: with the model's card */
    }
    if (o->report_dir) return usage(who, "--report-dir is for folder mode (--input-dir)", NULL, NULL);
    if (sp->n_inputs == 0) return usage(who, "--input is required", NULL, NULL);
    if (!plan && !sp->output) return usage(who, "--output is required", NULL, NULL);
    /* a name that is not a volume file may be a store: swi_job_check_names (seg_store_check) decides */
    if (sp->output && !is_volume_name(sp->output) &&
        swi_volume_format_of(sp->output) != SWI_VOLUME_DICOM_SEG && !cli_is_store(sp->output))
        return usage(who,
                     "--output '%s': the name must end in .nii, .nii.gz, .nrrd, .mha or "
                     ".dcm (DICOM SEG), or name a store (x.zarr, x.ome.zarr/labels/NAME, y.h5:/path)",
                     sp->output, NULL);
    if (sp->scores && !is_volume_name(sp->scores) && !cli_is_store(sp->scores))
        return usage(who,
                     "--scores '%s': the name must end in .nii, .nii.gz, .nrrd or .mha, or name a "
                     "store",
                     sp->scores, NULL);
    if (sp->preview && swi_volume_format_of(sp->preview) != SWI_VOLUME_PNG)
        return usage(who, "--preview '%s': the name must end in .png", sp->preview, NULL);
    if (sp->softmax && !sp->scores)
        return usage(who, "--softmax applies to --scores; give --scores FILE too", NULL, NULL);
    if (sp->report && !cli_ends_with(sp->report, ".html"))
        return usage(who, "--report '%s': the name must end in .html", sp->report, NULL);
    if (plan && (sp->statistics || sp->masks))
        return usage(who, "--statistics and --masks are for swi segment", NULL, NULL);
    const char *outs[6] = {sp->output, sp->scores, sp->preview, sp->report, sp->statistics, sp->masks};
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++)
            if (outs[a] && outs[b] && strcmp(outs[a], outs[b]) == 0)
                return usage(who, "'%s' is given as two different outputs", outs[a], NULL);
    return 0; /* the job reads the model's card */
}
