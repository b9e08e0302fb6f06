/*
 * segment.h -- what the steps of a job share (segment_setup.c, segment.c, segment_stores.c,
 * job.c, describe.c): the state of one run and the steps before the engine runs.
 */
#ifndef SWI_CLI_SEGMENT_H
#define SWI_CLI_SEGMENT_H

#include "ensemble.h"
#include "internal.h"
#include "masks.h"
#include "realscan.h"
#include "safety.h"
#include "statistics.h"
#include "stores.h"
#include "swi_io.h"
#include "swi_ort.h"
#include "swi_pipeline.h"

/* Everything a run holds, so one cleanup path frees it. */
typedef struct seg_state {
    swi_volume vols[SEG_MAX_INPUTS];
    swi_ort_model *model;
    swi_ort_model *members[SEG_MAX_MODELS]; /* the ensemble: members[0] == model */
    int n_members;
    int64_t channels; /* input channels: every frame of every --input */
    seg_ensemble ensemble;
    /* the caller's predictors (spec.predictors): mirrored each with tta, then their mean */
    swi_predictor mirrors[SEG_MAX_MODELS];
    int n_mirrors;
    swi_predictor mean;
    swi_predictor net; /* what the engine runs */
    seg_grid grid;     /* the model's grid (--orientation, --spacing) */
    swi_ctx *ctx;
    float *input;
    cli_out out_labels, out_scores, out_preview, out_report;
    cli_out out_itk, out_ctbl; /* the card's class names beside the labels */
    cli_out out_stats;         /* --statistics */
    pl_masks masks;            /* --masks: its private folder while written */
    pl_stats *class_stats;     /* gathered as the labels are made (statistics.h) */
    float *raw;                /* the first channel as read, when preprocessing changes it */
    swi_store *stats_store;    /* the first store input, opened again for the statistics */
    char itk_path[4200], ctbl_path[4200];
    int vols_ready;     /* vols are opened (and input, when set, read): seg_setup keeps them */
    int model_borrowed; /* model belongs to the caller (folder mode): not closed here */
    int reader;         /* the inputs are stores, read window by window */
    cli_input store_in;
    swi_store_writer *w_labels, *w_scores; /* store outputs (segment_stores.c) */
    int64_t box_lo[3], box_hi[3];          /* --shard: this part's box */
    /* the region (region.c): its box on the input grid and the model-grid box of the
     * windows touching it (the engine's part) */
    int region;
    int64_t region_lo[3], region_hi[3], model_lo[3], model_hi[3];
    void *region_labels; /* the labels, copied to set the voxels outside the region */
    /* the job's side: where errors go, how it talks back, whether it is cancelled */
    char err[SWI_JOB_ERRLEN];
    swi_status status; /* of the failure in err (set by seg_fail_status) */
    const swi_job_hooks *hooks;
    volatile int cancel; /* swi_job_cancel */
    int count_reuse;     /* the plan read the voxels (swi plan with reuse on) */
    double t0;           /* when the job began running */
    double t_run;        /* seconds the engine ran */
    swi_stats stats;     /* the engine's counters, once run */

    /* the backend (dnnl_choice.c) */
    struct swi_dnnl_model *dnnl; /* oneDNN runs the model, or NULL (ONNX Runtime) */
    char backend_note[320];      /* which backend runs the model and why */
} seg_state;

/* A zeroed state with no outputs begun; NULL when out of memory. */
seg_state *seg_state_new(void);
/* dnnl_choice.c: --backend and --precision. check_opts: the values (0, or -1 with err);
 * choose: after the ONNX Runtime model is prepared, run it with oneDNN where the options
 * ask and the backend covers the graph (0, or 1 with err); predictor: the model's. */
int seg_dnnl_check_opts(const pl_opts *o, char *err);
int seg_dnnl_choose(const pl_opts *o, seg_state *s, const int64_t roi[3], const swi_head_spec *head,
                    char *err);
swi_predictor seg_model_predictor(seg_state *s);
void seg_dnnl_close(seg_state *s);
/* Bytes the oneDNN plan holds (weights, scratch, activations; 0 without one): beside the
 * engine in the memory budget. */
size_t seg_dnnl_bytes(const seg_state *s);

/* Abort the outputs not committed (their temporaries removed). */
void seg_abort_outputs(seg_state *s);

/* Abort the outputs not committed, free everything and the state itself. */
void seg_state_free(seg_state *s);

/* Validate every input header and the model, settle the window; fill p, in (data NULL)
 * and the outputs. Returns 0, 1 (runtime error) or 2 (usage error), the message in err. */
int seg_setup(const pl_opts *o, seg_state *s, swi_params *p, swi_tensor *in, swi_output *outs, int *n_outs,
              char *err);

/* The checks of a run's outputs before anything is opened: formats built in, names that
 * are, hold or lie in an input, existing outputs without force. 0, or 1 with s->err. */
int seg_check_outputs(const pl_opts *o, seg_state *s);

/* The run after seg_setup: stores begun, planned, outputs begun, read, run, written and
 * committed. Returns 0, 1 (s->err, s->status) or 2 (usage). */
int seg_run_state(const pl_opts *o, seg_state *s, swi_params *p, swi_tensor *in, swi_output *outs, int n_outs,
                  pl_result *keep);

/* Read and preprocess every channel into s->input (in's sizes). 0, or 1 with s->err. */
int seg_read_inputs(const pl_opts *o, seg_state *s, const swi_tensor *in);

/* An engine failure as one line into s->err, worded for the command line; returns 1. */
int seg_engine_error(const pl_opts *o, seg_state *s, swi_status st, const swi_ctx *ctx);

/* Plan the run with the budget covering the engine and what is held beside it (the
 * input-grid results and band of --orientation/--spacing, the ensemble's buffer): p's
 * budget becomes the engine's share, *beside the rest. Without a budget the run must
 * fit the memory available (cli_plan_available: planned smaller, or refused): with unfit
 * NULL a run that cannot is refused, else the reason goes there and the unbudgeted plan is
 * kept (swi plan reports it). Returns 1 with s->err on failure, else 0. */
int seg_plan(const pl_opts *o, seg_state *s, swi_params *p, const swi_tensor *in, const swi_output *outs,
             int n_outs, swi_plan *plan, size_t *beside, char *unfit, size_t unfit_len);

/* Without a budget: 1 (the reason in err) when the run cannot fit the memory available
 * (cli_plan_available), checked before outputs are created; else 0. */
int seg_fits_available(const pl_opts *o, const seg_state *s, const swi_params *p, const swi_tensor *in,
                       const swi_output *outs, int n_outs, char *err);

/* Bytes held while the inputs are read, before the engine runs: every channel's voxels as
 * floats and one file's own voxels at a time (0 for stores, read window by window). */
size_t seg_reading_bytes(const pl_opts *o, const seg_state *s);

/* The region of interest (region.c). */
/* The spec's region into o, with its usage checks: 0, or -1 with err. */
int pl_region_opts(const swi_job_spec *sp, pl_opts *o, char *err);
/* After the grid is settled: the region's input box (voxels, millimetres or a mask, grown
 * by the margin) and the model-grid box it needs, into s, and that box as p's part. 0, 1
 * (runtime: a file) or 2 (usage: an empty region) with err. */
int seg_region_setup(const pl_opts *o, seg_state *s, swi_params *p, char *err);
/* The voxels outside the region: 0, or keep_outside's labels (scores 0). 0, or 1 with
 * s->err. labels [input voxels] of label_bytes each; scores [classes][voxels] or NULL. */
int seg_region_outside(const pl_opts *o, seg_state *s, void *labels, int label_bytes, float *scores,
                       int64_t classes);

/* Store inputs and outputs (segment_stores.c). */
/* Usage checks of store names and shards: 0, or 2 with the message in err. */
int pl_store_check(const pl_opts *o, char *err);
/* The spec's names (inputs, outputs) and part into o, as every job settles them (job.c). */
void pl_opts_names(const swi_job_spec *sp, pl_opts *o);
/* Does the run write stores? */
int pl_store_outputs(const pl_opts *o);
/* Open the store inputs into s (all inputs are stores). 0 or 1 with err. */
int seg_store_open_inputs(const pl_opts *o, seg_state *s, char *err);
/* Create (or join) the output stores, settle the shard's rows and the order in p, point the
 * outputs at the writers. Returns 0, 1 or 2 with err; *nothing_to_do set for --shard init
 * or a shard without rows (then the outputs are already committed). */
int seg_store_begin(const pl_opts *o, seg_state *s, swi_params *p, const swi_tensor *in, swi_output *outs,
                    int n_outs, int *nothing_to_do, char *err);
/* Commit the output stores (0), or 1 with err. */
int seg_store_commit(seg_state *s, char *err);
/* The writers' first failure, or NULL. */
const char *seg_store_error(const seg_state *s);
/* What a failed run leaves of its store outputs, for the message. */
const char *seg_store_left(const seg_state *s);

/* The card's side files of a label map file OUT.EXT: OUT.label.txt (ITK-SNAP) and OUT.ctbl
 * (3D Slicer), each in n bytes. Returns 0, or -1 when they do not fit. */
int seg_side_names(const pl_target *output, char *itk, char *ctbl, size_t n);

/* msg as the job's error (status SWI_ERR_IO, or what seg_fail_status gives); returns 1. */
int seg_fail(seg_state *s, const char *msg);
int seg_fail_status(seg_state *s, swi_status st, const char *msg);

/* One line to hooks->message (else "swi: LINE" on stderr). */
void seg_message(const seg_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line to hooks->message, or "swi: LINE" on stderr without one (swi_pipeline.h). */
void pl_hook_message(const swi_job_hooks *h, const char *line);

/* Whether the job is cancelled (swi_job_cancel, hooks->cancelled). */
int seg_cancelled(const seg_state *s);
/* The same as a stop test for library calls (swi_io_cancel): user is the state. */
int seg_cancelled_cb(void *state);

#endif
