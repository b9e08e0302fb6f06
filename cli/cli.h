/*
 * cli.h -- the swi command's subcommands, and what swi segment and swi plan share: their
 * options (a job's spec and the command's own settings) and a job run with the command's hooks.
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
int swi_cmd_card(int argc, char **argv);     /* cli/cmd_card.c: swi card --check */

/* Whether swi links the ONNX Runtime backend (else pipeline/ort_stub.c stands in for it). */
#ifdef SWI_HAVE_ORT
#define CLI_HAVE_ORT 1
#else
#define CLI_HAVE_ORT 0
#endif

#include "swi_pipeline.h"

/** What `swi segment` and `swi plan` take: the job's spec as the command line gives it (a
 *  flag not given leaves its field unset, for the model's card), and the command's own
 *  settings. */
typedef struct seg_cmd {
    swi_job_spec spec;
    int quiet; /**< -q: no progress bar (spec.quiet: no summary line either) */
    /* folder mode (cli/folder.c) */
    const char *input_dir;      /**< segment every volume in it; or NULL */
    const char *output_dir;     /**< OUT/<case>.<output_format> */
    const char *output_format;  /**< "nii.gz" (default), "nii", "nrrd" or "mha" */
    const char *report_dir;     /**< a page per case and index.html here; or NULL */
    int part_index, part_count; /**< --part I/N: cases I, I+N, I+2N, ... (0-based) */
    int part_given;             /**< --part was on the command line */
    char folds[128];            /**< --folds as given, its words joined by commas (spec.folds) */
} seg_cmd;

/** The --help texts of swi segment and swi plan (segment_help.c). */
extern const char SEG_SEGMENT_HELP[];
extern const char SEG_PLAN_HELP[];

/** Parse `swi segment` (plan = 0) or `swi plan` (plan = 1) options. Returns 0 when ready to
 *  run, 2 after printing a usage error, -1 after printing --help. Never exits. */
int seg_parse(int argc, char **argv, seg_cmd *o, int plan);

/** Run a job of `spec` (cli/segment_job.c) with the command's hooks (a progress bar unless
 *  quiet); keep != NULL receives the labels (swi_job_result_free). Returns an exit status and
 *  prints its own one-line error. `who` prefixes messages ("swi segment"). */
int seg_run(const swi_job_spec *spec, int quiet, const char *who, swi_job_result *keep);

/** The command's hooks of a job: the progress bar, messages as "WHO: LINE", signals. */
typedef struct seg_hooks {
    const char *who;
    progress prog;
} seg_hooks;
/** bar: draw the progress bar (on a terminal); label: drawn before it, or NULL. */
void seg_hooks_init(seg_hooks *h, int bar, const char *label, const char *who, swi_job_hooks *hooks);

/** Run an open job with those hooks (signals cancel it); keep as seg_run; err (SWI_JOB_ERRLEN
 *  bytes, or NULL) receives the failure. Exit status. */
int seg_run_job(swi_job *job, const char *who, seg_hooks *h, swi_job_result *keep, char *err);

/** Print a job's failure as "WHO: ERR" (or the interruption) and return the exit status:
 *  0 for SWI_OK, 2 for SWI_ERR_INVALID_ARG, 128+N after signal N, else 1. */
int seg_job_exit(const char *who, swi_status st, const char *err);

/** Usage checks of store names and --shard (swi_job_check_names); 0 or 2 after printing. */
int seg_store_check(const swi_job_spec *spec, const char *who);
/** Does the run write stores? */
int seg_store_outputs(const swi_job_spec *spec);

/** Folder mode: segment every case of o->input_dir into o->output_dir (cli/folder.c: the
 *  pipeline's swi_folder_run). Returns 0, 1 if any case failed, 2 on a usage error, 128+N
 *  when interrupted. */
int seg_folder_run(const seg_cmd *o);

#endif
