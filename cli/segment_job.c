/*
 * segment_job.c -- a job of `swi segment` and `swi plan` run with the command's hooks: the progress bar, messages as "WHO: LINE", signals as
 * cancellation, MPI's agreement; a job's status as the exit status.
 */
#include "cli.h"

#include "mpi_job.h"
#include "progress.h"
#include "signals.h"
#include "swi_pipeline.h"
#include "swi_store.h"
#include "termtext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_message(void *user, const char *line) {
    seg_hooks *h = user;
    progress_clear(&h->prog);
    fprintf(stderr, "%s: %s\n", h->who, TERM_TEXT(line));
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

void seg_hooks_init(seg_hooks *h, int bar, const char *label, const char *who, swi_job_hooks *hooks) {
    memset(h, 0, sizeof *h);
    h->who = who;
    progress_init(&h->prog, bar);
    h->prog.label = label;
    h->prog.who = who;
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
    fprintf(stderr, "%s: %s\n", who, TERM_TEXT(err));
    return st == SWI_ERR_INVALID_ARG ? 2 : 1;
}

static void cancel_job(void *job) { swi_job_cancel(job); }

int seg_run_job(swi_job *job, const char *who, seg_hooks *h, swi_job_result *keep, char *err_out) {
    char err[SWI_JOB_ERRLEN];
    cli_set_cancel_hook(cancel_job, job);
    swi_status st = cli_interrupted() ? SWI_ERR_CANCELLED : swi_job_run(job, keep, err, sizeof err);
    cli_set_cancel_hook(NULL, NULL);
    progress_clear(&h->prog);
    if (st == SWI_ERR_CANCELLED && !cli_interrupted()) snprintf(err, sizeof err, "cancelled");
    if (err_out) snprintf(err_out, SWI_JOB_ERRLEN, "%s", st == SWI_OK ? "" : err);
    return seg_job_exit(who, st, err);
}

int seg_run(const swi_job_spec *spec, int quiet, const char *who, swi_job_result *keep) {
    if (cli_signals_start() != 0) {
        fprintf(stderr, "%s: cannot set up signal handling\n", who);
        return 1;
    }
    seg_hooks h;
    swi_job_hooks hooks = {0};
    seg_hooks_init(&h, !quiet, NULL, who, &hooks);
    char err[SWI_JOB_ERRLEN];
    swi_job *job = NULL;
    swi_status st = swi_job_open(spec, &hooks, &job, err, sizeof err);
    int rc = st != SWI_OK ? seg_job_exit(who, st, err) : seg_run_job(job, who, &h, keep, NULL);
    swi_job_free(job);
    return rc;
}

static int is_store(const char *name) { return name && swi_store_kind_of(name) != SWI_STORE_NONE; }

int seg_store_outputs(const swi_job_spec *spec) { return is_store(spec->output) || is_store(spec->scores); }

int seg_store_check(const swi_job_spec *spec, const char *who) {
    char err[SWI_JOB_ERRLEN];
    swi_status st = swi_job_check_names(spec, err, sizeof err);
    if (st == SWI_OK) return 0;
    fprintf(stderr, "%s: %s (see '%s --help')\n", who, TERM_TEXT(err), who);
    return st == SWI_ERR_INVALID_ARG ? 2 : 1;
}
