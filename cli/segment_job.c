/*
 * segment_job.c -- the options of `swi segment` and `swi plan` as a swi_job_spec, and a job
 * run with the command's hooks: the progress bar, messages as "WHO: LINE", signals as
 * cancellation, MPI's agreement; a job's status as the exit status.
 */
#include "cli.h"

#include "mpi_job.h"
#include "progress.h"
#include "signals.h"
#include "swi_pipeline.h"
#include "swi_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void seg_job_spec(const seg_opts *o, swi_job_spec *sp) {
    swi_job_spec_init(sp);
    for (int c = 0; c < o->n_inputs && c < SWI_JOB_MAX_INPUTS; c++) sp->inputs[sp->n_inputs++] = o->inputs[c];
    if (o->n_models > 0)
        for (int m = 0; m < o->n_models && m < SWI_JOB_MAX_MODELS; m++)
            sp->models[sp->n_models++] = o->models[m];
    else if (o->model)
        sp->models[sp->n_models++] = o->model;
    sp->no_card = o->no_card;
    sp->tta = o->tta;
    sp->head = o->head;
    sp->cuda = o->cuda;
    sp->no_rewrite = o->no_rewrite;
    sp->clip_given = o->clip_given;
    memcpy(sp->clip, o->clip, sizeof sp->clip);
    sp->scale_given = o->scale_given;
    memcpy(sp->scale, o->scale, sizeof sp->scale);
    sp->zscore = o->zscore;
    sp->nonfinite_fail = o->nonfinite_fail;
    sp->orientation = o->orientation;
    if (o->spacing_given) memcpy(sp->spacing, o->spacing, sizeof sp->spacing);
    /* flags the command line gave; the others stay unset, for the card */
    for (int a = 0; a < 3; a++) {
        if (o->roi_given) sp->roi[a] = o->roi[a] ? o->roi[a] : -1; /* -1: the whole axis */
        if (o->given & SEG_GIVEN_OVERLAP) sp->overlap[a] = o->overlap[a];
        if (o->given & SEG_GIVEN_SIGMA) sp->sigma_scale[a] = o->sigma_scale[a];
    }
    if (o->given & SEG_GIVEN_MODE) sp->mode = (int)o->mode;
    if (o->given & SEG_GIVEN_PADDING) sp->padding = (int)o->padding;
    if (o->given & SEG_GIVEN_CVAL) sp->cval = o->cval;
    sp->sw_batch = o->sw_batch;
    sp->no_reuse = o->no_reuse;
    sp->reuse_cache = o->reuse_cache;
    if (o->shard_given && !o->shard_init) {
        sp->shard_part = o->shard_part;
        sp->shard_parts = o->shard_parts;
    }
    sp->shard_init = o->shard_init;
    if (o->shard_grid_given) memcpy(sp->shard_grid, o->shard_grid, sizeof sp->shard_grid);
    sp->shard_collective = cli_mpi_active();
    sp->output = o->output;
    sp->scores = o->scores;
    sp->preview = o->preview;
    sp->report = o->report;
    sp->report_title = o->report_title;
    sp->softmax = o->softmax;
    sp->force = o->force;
    sp->quiet = o->quiet || o->no_summary;
    sp->threads = o->threads;
    sp->max_memory = o->max_memory;
    sp->folds = o->folds;
    sp->no_mirroring = o->no_mirroring;
    sp->tile_step = o->tile_step;
    sp->save_probabilities = o->save_probabilities;
}

static void on_message(void *user, const char *line) {
    seg_hooks *h = user;
    progress_clear(&h->prog);
    fprintf(stderr, "%s: %s\n", h->who, line);
}

static int on_progress(void *user, int64_t done, int64_t total) {
    seg_hooks *h = user;
    return progress_update(&h->prog, done, total);
}

static int on_cancelled(void *user) {
    (void)user;
    return cli_interrupted();
}

static int on_all_ok(void *user, int ok) {
    (void)user;
    return cli_mpi_all_ok(ok);
}

void seg_hooks_init(seg_hooks *h, const seg_opts *o, const char *who, swi_job_hooks *hooks) {
    memset(h, 0, sizeof *h);
    h->who = who;
    progress_init(&h->prog, !o->quiet);
    h->prog.label = o->progress_label;
    hooks->message = on_message;
    hooks->progress = on_progress;
    hooks->cancelled = on_cancelled;
    hooks->all_ok = on_all_ok;
    hooks->user = h;
}

int seg_job_exit(const char *who, swi_status st, const char *err) {
    if (st == SWI_OK) return 0;
    int sig = cli_interrupted();
    if (sig) {
        fprintf(stderr, "%s: interrupted by %s; no output written\n", who,
                sig == 2    ? "SIGINT"
                : sig == 15 ? "SIGTERM"
                : sig == 1  ? "SIGHUP"
                            : "a signal");
        return cli_interrupt_status();
    }
    fprintf(stderr, "%s: %s\n", who, err);
    return st == SWI_ERR_INVALID_ARG ? 2 : 1;
}

static void cancel_job(void *job) { swi_job_cancel(job); }

int seg_run_job(swi_job *job, const char *who, seg_hooks *h, seg_result *keep, char *err_out) {
    char err[SWI_JOB_ERRLEN];
    swi_job_result r;
    cli_set_cancel_hook(cancel_job, job);
    swi_status st =
        cli_interrupted() ? SWI_ERR_CANCELLED : swi_job_run(job, keep ? &r : NULL, err, sizeof err);
    cli_set_cancel_hook(NULL, NULL);
    progress_clear(&h->prog);
    if (st == SWI_OK && keep) {
        keep->labels = r.labels;
        keep->label_bytes = r.label_bytes;
        memcpy(keep->size, r.size, sizeof keep->size);
        keep->classes = r.classes;
    }
    if (st == SWI_ERR_CANCELLED && !cli_interrupted()) snprintf(err, sizeof err, "cancelled");
    if (err_out) snprintf(err_out, SWI_JOB_ERRLEN, "%s", st == SWI_OK ? "" : err);
    return seg_job_exit(who, st, err);
}

int seg_run(const seg_opts *o, const char *who, seg_result *keep) {
    if (cli_signals_start() != 0) {
        fprintf(stderr, "%s: cannot set up signal handling\n", who);
        return 1;
    }
    swi_job_spec spec;
    seg_job_spec(o, &spec);
    seg_hooks h;
    swi_job_hooks hooks;
    seg_hooks_init(&h, o, who, &hooks);
    char err[SWI_JOB_ERRLEN];
    swi_job *job = NULL;
    swi_status st = swi_job_open(&spec, &hooks, &job, err, sizeof err);
    int rc = st != SWI_OK ? seg_job_exit(who, st, err) : seg_run_job(job, who, &h, keep, NULL);
    swi_job_free(job);
    return rc;
}

static int is_store(const char *name) { return name && swi_store_kind_of(name) != SWI_STORE_NONE; }

int seg_store_outputs(const seg_opts *o) { return is_store(o->output) || is_store(o->scores); }

int seg_store_check(const seg_opts *o, const char *who) {
    swi_job_spec spec;
    seg_job_spec(o, &spec);
    char err[SWI_JOB_ERRLEN];
    swi_status st = swi_job_check_names(&spec, err, sizeof err);
    if (st == SWI_OK) return 0;
    fprintf(stderr, "%s: %s (see '%s --help')\n", who, err, who);
    return st == SWI_ERR_INVALID_ARG ? 2 : 1;
}
