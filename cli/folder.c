/*
 * folder.c -- `swi segment --input-dir IN --output-dir OUT`: the pipeline's folder mode
 * (swi_folder_*) with the command's hooks: a progress bar per case, its messages as
 * "swi segment: CASE: LINE", a line per case, the summary table, signals as cancellation.
 * Each case's volumes are read in a child process, this program run as
 * `swi --read-volumes-child FILE...` (main.c), so that a library that aborts or hangs on one
 * file fails that case only.
 */
#include "cli.h"

#include "signals.h"
#include "termtext.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define WHO "swi segment"

/* The hooks' state: seg_hooks first, as its own callbacks take the same user pointer. */
typedef struct folder_ui {
    seg_hooks h;
    int bar;         /* draw a progress bar per case */
    int started;     /* the case's job has started (its line follows) */
    char who[320];   /* "swi segment: CASE" while a case runs */
    char label[320]; /* "[3/20] CASE" before the bar */
} folder_ui;

static void on_case_start(void *user, const swi_folder_case *c) {
    folder_ui *u = user;
    snprintf(u->who, sizeof u->who, "%s: %s", WHO, TERM_TEXT(c->name));
    snprintf(u->label, sizeof u->label, "[%d/%d] %s", c->index + 1, c->count, TERM_TEXT(c->name));
    progress_init(&u->h.prog, u->bar);
    u->h.prog.label = u->label;
    u->started = 1;
}

static void on_case_end(void *user, const swi_folder_case *c) {
    folder_ui *u = user;
    progress_clear(&u->h.prog);
    snprintf(u->who, sizeof u->who, "%s: %s", WHO, TERM_TEXT(c->name));
    const int failed = c->status == SWI_CASE_FAILED;
    if (failed && c->error_status == SWI_ERR_CANCELLED && cli_interrupted()) {
        seg_job_exit(u->who, c->error_status, c->error); /* "interrupted by SIGINT ..." */
    } else {
        if (failed) fprintf(stderr, "%s: %s\n", u->who, TERM_TEXT(c->error));
        if (u->started && u->bar)
            fprintf(stderr, "%s: [%d/%d] %s: %s, %.2f s\n", WHO, c->index + 1, c->count, TERM_TEXT(c->name),
                    failed ? "failed" : "done", c->seconds);
    }
    u->started = 0;
    snprintf(u->who, sizeof u->who, "%s", WHO);
}

/* The summary table on stderr. */
static void print_table(const swi_folder_result *r, double seconds, const char *output_dir) {
    int w = 4;
    for (int i = 0; i < r->n_cases; i++)
        if ((int)strlen(TERM_TEXT(r->cases[i].name)) > w) w = (int)strlen(TERM_TEXT(r->cases[i].name));
    if (w > 40) w = 40;
    fprintf(stderr, "%-*s  %-14s %8s  %s\n", w, "case", "size", "time", "status");
    for (int i = 0; i < r->n_cases; i++) {
        const swi_folder_case *c = &r->cases[i];
        if (c->status == SWI_CASE_NOT_RUN) continue;
        char size[48] = "-", t[16] = "-";
        if (c->size[0])
            snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)c->size[0], (long long)c->size[1],
                     (long long)c->size[2]);
        if (c->status != SWI_CASE_SKIPPED) snprintf(t, sizeof t, "%.2f s", c->seconds);
        const char *st = c->status == SWI_CASE_DONE      ? "ok"
                         : c->status == SWI_CASE_SKIPPED ? "skipped (output exists)"
                                                         : "FAILED";
        fprintf(stderr, "%-*.*s  %-14s %8s  %s\n", w, w, TERM_TEXT(c->name), size, t, st);
    }
    fprintf(stderr, "%s: %d done, %d failed, %d skipped in %.2f s -> %s\n", WHO, r->done, r->failed,
            r->skipped, seconds, TERM_TEXT(output_dir));
}

static void cancel_folder(void *folder) { swi_folder_cancel(folder); }

int seg_folder_run(const seg_cmd *o) {
    const double t0 = cli_now();
    if (cli_signals_start() != 0) { /* before the reading thread: it inherits the mask */
        fprintf(stderr, "%s: cannot set up signal handling\n", WHO);
        return 1;
    }
    static const char *const reader_argv[] = {"swi", "--read-volumes-child", NULL};
    swi_folder_spec fs;
    swi_folder_spec_init(&fs);
    fs.job = &o->spec;
    fs.input_dir = o->input_dir;
    fs.output_dir = o->output_dir;
    fs.output_format = o->output_format;
    fs.report_dir = o->report_dir;
    fs.part_index = o->part_index;
    fs.part_count = o->part_count;
    fs.reader = "/proc/self/exe";
    fs.reader_argv = reader_argv;
    folder_ui u;
    swi_folder_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    seg_hooks_init(&u.h, 0, NULL, WHO, &hooks.job); /* hooks.job.user = &u.h = &u */
    u.bar = !o->quiet;
    u.started = 0;
    snprintf(u.who, sizeof u.who, "%s", WHO);
    u.h.who = u.who;
    hooks.case_start = on_case_start;
    hooks.case_end = on_case_end;
    char err[SWI_JOB_ERRLEN];
    swi_folder *f = NULL;
    swi_status st = swi_folder_open(&fs, &hooks, &f, err, sizeof err);
    if (st != SWI_OK) return seg_job_exit(WHO, st, err);
    swi_folder_result r;
    cli_set_cancel_hook(cancel_folder, f);
    st = swi_folder_run(f, &r, err, sizeof err);
    cli_set_cancel_hook(NULL, NULL);
    if (!o->quiet || r.failed) print_table(&r, cli_now() - t0, o->output_dir);
    int rc = r.failed ? 1 : 0;
    if (st == SWI_ERR_CANCELLED && cli_interrupted()) {
        fprintf(stderr, "%s: interrupted; the finished cases are kept, no partial output\n", WHO);
        rc = cli_interrupt_status();
    } else if (st != SWI_OK) {
        fprintf(stderr, "%s: %s\n", WHO, TERM_TEXT(err));
        rc = 1;
    }
    swi_folder_free(f);
    return rc;
}
