/*
 * segment.h -- what the parts of `swi segment` and `swi plan` share (segment_setup.c,
 * segment.c, cmd_plan.c): the state of one run and the steps before the engine runs.
 */
#ifndef SWI_CLI_SEGMENT_H
#define SWI_CLI_SEGMENT_H

#include "cli.h"
#include "ensemble.h"
#include "realscan.h"
#include "safety.h"
#include "stores.h"
#include "swi_io.h"
#include "swi_ort.h"

/* Everything a run holds, so one cleanup path frees it. */
typedef struct seg_state {
    swi_volume vols[SEG_MAX_INPUTS];
    swi_ort_model *model;
    swi_ort_model *members[SEG_MAX_MODELS]; /* the ensemble: members[0] == model */
    int n_members;
    int64_t channels; /* input channels: every frame of every --input */
    seg_ensemble ensemble;
    seg_grid grid; /* the model's grid (--orientation, --spacing) */
    swi_ctx *ctx;
    float *input;
    cli_out out_labels, out_scores, out_preview, out_report;
    cli_out out_itk, out_ctbl; /* the card's class names beside the labels */
    char itk_path[4200], ctbl_path[4200];
    int vols_ready;     /* vols are opened (and input, when set, read): seg_setup keeps them */
    int model_borrowed; /* model belongs to the caller (folder mode): not closed here */
    int reader;         /* the inputs are stores, read window by window */
    cli_input store_in;
    swi_store_writer *w_labels, *w_scores; /* store outputs (segment_stores.c) */
    int64_t box_lo[3], box_hi[3];          /* --shard: this part's box */
} seg_state;

/* A zeroed state with no outputs begun; NULL when out of memory. */
seg_state *seg_state_new(void);

/* Abort the outputs not committed, free everything and the state itself. */
void seg_state_free(seg_state *s);

/* Validate every input header and the model, settle the window; fill p, in (data NULL)
 * and the outputs. Returns 0, 1 (runtime error) or 2 (usage error), the message in err. */
int seg_setup(const seg_opts *o, seg_state *s, swi_params *p, swi_tensor *in, swi_output *outs, int *n_outs,
              char *err);

/* seg_run on a state the caller prepared (folder mode: the model opened once, the voxels
 * read ahead) and frees. */
int seg_run_state(const seg_opts *o, const char *who, seg_state *s, seg_result *keep);
/* Read and preprocess every channel into s->input (in's sizes). Returns an exit status,
 * after printing the error. */
int seg_read_inputs(const seg_opts *o, const char *who, seg_state *s, const swi_tensor *in);

/* Print an engine failure as one line, worded for the command line. */
void seg_engine_error(const char *who, const seg_opts *o, swi_status st, const swi_ctx *ctx);

/* Plan the run with --max-memory covering the engine and what is held beside it (the
 * input-grid results and band of --orientation/--spacing, the ensemble's buffer): p's
 * budget becomes the engine's share, *beside the rest. Without --max-memory the run must
 * fit the memory available (cli_plan_available: planned smaller, or refused): with unfit
 * NULL a run that cannot is refused, else the reason goes there and the unbudgeted plan is
 * kept (swi plan reports it). Prints the error itself and returns 1 on failure, else 0. */
int seg_plan(const char *who, const seg_opts *o, const seg_state *s, swi_params *p, const swi_tensor *in,
             const swi_output *outs, int n_outs, swi_plan *plan, size_t *beside, char *unfit,
             size_t unfit_len);

/* Without --max-memory: 1 (the reason in err) when the run cannot fit the memory
 * available (cli_plan_available), checked before outputs are created; else 0. */
int seg_fits_available(const seg_opts *o, const seg_state *s, const swi_params *p, const swi_tensor *in,
                       const swi_output *outs, int n_outs, char *err);

/* Bytes held while the inputs are read, before the engine runs: every channel's voxels as
 * floats and one file's own voxels at a time (0 for stores, read window by window). */
size_t seg_reading_bytes(const seg_opts *o, const seg_state *s);

/* Store inputs and outputs (segment_stores.c). */
/* Usage checks of store names and --shard; 0 or 2 after printing. */
int seg_store_check(const seg_opts *o, const char *who);
/* Does the run write stores? */
int seg_store_outputs(const seg_opts *o);
/* Open the store inputs into s (all inputs are stores). 0 or 1 with err. */
int seg_store_open_inputs(const seg_opts *o, seg_state *s, char *err);
/* Create (or join) the output stores, settle the shard's rows and the order in p, point the
 * outputs at the writers. Returns 0, 1 or 2 with err; *nothing_to_do set for --shard init
 * or a shard without rows (then the outputs are already committed). */
int seg_store_begin(const seg_opts *o, seg_state *s, swi_params *p, const swi_tensor *in, swi_output *outs,
                    int n_outs, int *nothing_to_do, char *err);
/* Commit the output stores (0), or 1 with err. */
int seg_store_commit(seg_state *s, char *err);
/* The writers' first failure, or NULL. */
const char *seg_store_error(const seg_state *s);
/* What a failed run leaves of its store outputs, for the message. */
const char *seg_store_left(const seg_state *s);

/* The card's side files of a label map file OUT.EXT: OUT.label.txt (ITK-SNAP) and OUT.ctbl
 * (3D Slicer), each in n bytes. Returns 0, or -1 when they do not fit. */
int seg_side_names(const char *output, char *itk, char *ctbl, size_t n);

/* Print "who: msg" and return 1. */
int seg_fail(const char *who, const char *msg);

/* The last seg_fail message ("" after seg_clear_error): a failed case's error in folder
 * mode's index page. */
const char *seg_last_error(void);
void seg_clear_error(void);

#endif
