/*
 * cli.h -- the swi command's subcommands and the segmentation pipeline they share.
 */
#ifndef SWI_CLI_H
#define SWI_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "progress.h"
#include "swi.h"

/* Subcommands: each returns the process exit status (0 ok, 1 runtime error, 2 usage
 * error, 128+N interrupted by signal N). */
int swi_cmd_segment(int argc, char **argv);
int swi_cmd_plan(int argc, char **argv);
int swi_cmd_demo(int argc, char **argv);
int swi_cmd_bench(int argc, char **argv);    /* cli/cmd_bench.c (the lead's) */
int swi_cmd_export(int argc, char **argv);   /* export/ (when built) */
int swi_cmd_info(int argc, char **argv);     /* cli/cmd_info.c: a model and its card */
int swi_cmd_optimize(int argc, char **argv); /* cli/cmd_optimize.c */
int swi_cmd_convert(int argc, char **argv);  /* cli/cmd_convert.c: runs python3 -m swi convert */

/* Whether swi links the ONNX Runtime backend (else pipeline/ort_stub.c stands in for it). */
#ifdef SWI_HAVE_ORT
#define CLI_HAVE_ORT 1
#else
#define CLI_HAVE_ORT 0
#endif

#define SEG_MAX_INPUTS 16
#define SEG_MAX_MODELS 16

/** Everything `swi segment` and `swi plan` take on the command line. */
typedef struct seg_opts {
    const char *model;
    const char *inputs[SEG_MAX_INPUTS];
    int n_inputs;
    const char *output;       /**< labels (.nii / .nii.gz) */
    const char *scores;       /**< blended scores, float32, classes along dim 4; or NULL */
    const char *preview;      /**< PNG; or NULL */
    const char *report;       /**< HTML review page (report/swi_report.h); or NULL */
    const char *report_title; /**< its heading (folder mode: the case); NULL: the input's name */
    int64_t roi[3];
    int roi_given;
    double overlap[3];
    swi_blend mode;
    double sigma_scale[3];
    swi_pad padding;
    float cval;
    int sw_batch;
    int threads;       /**< 0 = number of cores */
    size_t max_memory; /**< 0 = unlimited */
    int softmax, tta, zscore, force, cuda, quiet, head;
    int nonfinite_fail; /**< --nonfinite fail: refuse inputs with NaN/Inf voxels */
    int clip_given;
    double clip[2];
    int scale_given;
    double scale[4];
    const char *models[SEG_MAX_MODELS]; /**< every --model (models[0] == model): an ensemble */
    int n_models;
    const char *orientation; /**< --orientation: the model's axis codes ("RAS"), or NULL */
    int spacing_given;
    double spacing[3];           /**< --spacing: the model's voxel size (mm, after orientation) */
    unsigned given;              /**< SEG_GIVEN_*: flags given on the command line (a card yields) */
    int roi_from_card;           /**< the roi came from the model card */
    int no_card;                 /**< --no-card */
    const struct seg_card *card; /**< the model's card (card.h), or NULL */
    /* folder mode (cli/folder.c) */
    const char *input_dir;      /**< segment every volume in it; or NULL */
    const char *output_dir;     /**< OUT/<case>.<output_format> */
    const char *output_format;  /**< "nii.gz" (default), "nii", "nrrd" or "mha" */
    const char *report_dir;     /**< a page per case and index.html here; or NULL */
    int part_index, part_count; /**< --part I/N: cases I, I+N, I+2N, ... (0-based) */
    int part_given;             /**< --part was on the command line */
    const char *progress_label; /**< drawn before the windows of the progress bar */
    int no_summary;             /**< no summary line (folder mode prints a table) */
    int shard_given, shard_part, shard_parts, shard_init; /**< --shard I/N | init (stores) */
    int shard_grid[3], shard_grid_given;                  /**< --shard-grid AxBxC */
    int no_reuse;                                         /**< --no-reuse: every window reaches the network */
    int reuse_cache;                                      /**< --reuse-cache N (0 = the library's default) */
    int no_rewrite; /**< --no-rewrite: the model as it is, no sub-pixel rewrite */
    /* an nnU-Net model directory (swi_job_spec's fields of the same names) */
    const char *folds;      /**< --folds 0,1 */
    int no_mirroring;       /**< --disable-tta */
    double tile_step;       /**< --tile-step-size (0: the card's) */
    int save_probabilities; /**< --save-probabilities */
} seg_opts;

#define SEG_GIVEN_OVERLAP 1u
#define SEG_GIVEN_SIGMA 2u
#define SEG_GIVEN_MODE 4u
#define SEG_GIVEN_PADDING 8u
#define SEG_GIVEN_CVAL 16u

void seg_opts_init(seg_opts *o);

/** The --help texts of swi segment and swi plan (segment_help.c). */
extern const char SEG_SEGMENT_HELP[];
extern const char SEG_PLAN_HELP[];

/** Parse `swi segment` (plan = 0) or `swi plan` (plan = 1) options. Returns 0 when ready to
 *  run, 2 after printing a usage error, -1 after printing --help. Never exits. */
int seg_parse(int argc, char **argv, seg_opts *o, int plan);

/** What seg_run can hand back to its caller (the demo). */
typedef struct seg_result {
    void *labels; /**< malloc'd [ni][nj][nk], label_bytes per voxel */
    int label_bytes;
    int64_t size[3];
    int64_t classes;
} seg_result;

/** Run a segmentation (a swi_job, cli/segment_job.c); keep != NULL receives a copy of the
 *  labels. Returns an exit status and prints its own one-line error. `who` prefixes messages
 *  ("swi segment"). */
int seg_run(const seg_opts *o, const char *who, seg_result *keep);

/* What segment_job.c needs of swi_pipeline.h, declared apart so this header stands alone. */
struct swi_job_spec;
struct swi_job_hooks;
struct swi_job;

/** The options as a job's spec: what the command line gave, the rest unset (for the card). */
void seg_job_spec(const seg_opts *o, struct swi_job_spec *spec);

/** The command's hooks of a job: the progress bar, messages as "WHO: LINE", signals. */
typedef struct seg_hooks {
    const char *who;
    progress prog;
} seg_hooks;
void seg_hooks_init(seg_hooks *h, const seg_opts *o, const char *who, struct swi_job_hooks *hooks);

/** Run an open job with those hooks (signals cancel it); keep as seg_run; err (SWI_JOB_ERRLEN
 *  bytes, or NULL) receives the failure. Exit status. */
int seg_run_job(struct swi_job *job, const char *who, seg_hooks *h, seg_result *keep, char *err);

/** Print a job's failure as "WHO: ERR" (or the interruption) and return the exit status:
 *  0 for SWI_OK, 2 for SWI_ERR_INVALID_ARG, 128+N after signal N, else 1. */
int seg_job_exit(const char *who, swi_status st, const char *err);

/** Usage checks of store names and --shard; 0 or 2 after printing. */
int seg_store_check(const seg_opts *o, const char *who);
/** Does the run write stores? */
int seg_store_outputs(const seg_opts *o);

/** Folder mode: segment every case of o->input_dir into o->output_dir (cli/folder.c).
 *  Returns 0, 1 if any case failed, 2 on a usage error, 128+N when interrupted. */
int seg_folder_run(const seg_opts *o);

/** `swi --read-volumes-child FILE...` (run by folder mode, not by users): open and read the
 *  volumes, writing each answer and the voxels to stdout for the parent (cli/folder.c). */
int seg_read_volumes_child(int n, char **files);

#endif
