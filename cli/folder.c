/*
 * folder.c -- `swi segment --input-dir IN --output-dir OUT`: the pipeline's folder mode
 * (swi_folder_*) with the command's hooks: a progress bar per case (lines in a log) with the
 * whole folder's cases done and ETA, its messages as "swi segment: CASE: LINE", a line per
 * case, the summary table (under mpirun one, by rank 0, of every rank's cases), signals as
 * cancellation.
 * Each case's volumes are read in a child process, this program run as
 * `swi --read-volumes-child FILE...` (main.c), so that a library that aborts or hangs on one
 * file fails that case only.
 */
#include "cli.h"

#include "mpi_job.h"
#include "signals.h"
#include "termtext.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO "swi segment"

/* The hooks' state: seg_hooks first, as its own callbacks take the same user pointer. */
typedef struct folder_ui {
    seg_hooks h;
    int bar;         /* draw a progress bar per case */
    int started;     /* the case's job has started (its line follows) */
    char who[320];   /* "swi segment: CASE" while a case runs */
    char label[320]; /* "[3/20] CASE" before the bar */
    double t0;       /* the run's start */
    int finished;    /* cases of this run ended (done or failed) */
    int count;       /* cases this run segments */
} folder_ui;

/* The whole folder's progress for a case's bar or line, and after each case: cases done,
 * and the folder's ETA from the time so far over the cases done (fraction of the current
 * one included). */
static void folder_outer(void *user, double fraction, char *buf, size_t n) {
    const folder_ui *u = user;
    const double units = u->finished + fraction, left = u->count - units;
    char eta[32];
    progress_time(units > 0 && left >= 0 ? (cli_now() - u->t0) / units * left : -1, eta, sizeof eta);
    snprintf(buf, n, "%d/%d cases done, folder ETA %s", u->finished, u->count, eta);
}

static void on_case_start(void *user, const swi_folder_case *c) {
    folder_ui *u = user;
    snprintf(u->who, sizeof u->who, "%s: %s", WHO, TERM_TEXT(c->name));
    snprintf(u->label, sizeof u->label, "[%d/%d] %s", c->index + 1, c->count, TERM_TEXT(c->name));
    progress_init(&u->h.prog, u->bar);
    u->h.prog.label = u->label;
    u->h.prog.who = u->who;
    u->h.prog.outer = folder_outer;
    u->h.prog.outer_user = u;
    u->count = c->count;
    u->started = 1;
}

static void on_case_end(void *user, const swi_folder_case *c) {
    folder_ui *u = user;
    progress_clear(&u->h.prog);
    snprintf(u->who, sizeof u->who, "%s: %s", WHO, TERM_TEXT(c->name));
    const int failed = c->status == SWI_CASE_FAILED;
    if (c->index >= 0) {
        u->finished++;
        u->count = c->count;
    }
    if (failed && c->error_status == SWI_ERR_CANCELLED && cli_interrupted()) {
        seg_job_exit(u->who, c->error_status, c->error); /* "interrupted by SIGINT ..." */
    } else {
        if (failed) fprintf(stderr, "%s: %s\n", u->who, TERM_TEXT(c->error));
        if (u->started && u->bar) {
            char outer[128];
            folder_outer(u, 0, outer, sizeof outer);
            fprintf(stderr, "%s: [%d/%d] %s: %s, %.2f s; %s\n", WHO, c->index + 1, c->count,
                    TERM_TEXT(c->name), failed ? "failed" : "done", c->seconds, outer);
        }
    }
    u->started = 0;
    snprintf(u->who, sizeof u->who, "%s", WHO);
}

/* One row a case run or skipped: "NAME\tSIZE\tTIME\tSTATUS\n" (names escaped: no tab or
 * newline), appended to the buffer; 0 or -1 when out of memory. */
static int table_rows(const swi_folder_result *r, char **text, size_t *len) {
    FILE *f = open_memstream(text, len);
    if (!f) return -1;
    for (int i = 0; r && i < r->n_cases; i++) {
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
        fprintf(f, "%s\t%s\t%s\t%s\n", TERM_TEXT(c->name), size, t, st);
    }
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(*text);
        *text = NULL;
        return -1;
    }
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The summary table on stderr from the rows (every rank's under mpirun, sorted by name as the
 * cases are). */
static void print_table(char *rows, const int sums[3], int ranks, double seconds, const char *output_dir) {
    int n = 0, w = 4;
    for (const char *p = rows; *p; p++) n += *p == '\n';
    char **row = calloc((size_t)n + 1, sizeof *row);
    n = 0;
    for (char *p = rows, *nl; row && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        row[n++] = p;
        const char *tab = strchr(p, '\t');
        const int l = tab ? (int)(tab - p) : (int)strlen(p);
        if (l > w) w = l;
    }
    if (w > 40) w = 40;
    if (row) {
        if (ranks > 1) qsort(row, (size_t)n, sizeof *row, by_name); /* the ranks' rows interleaved */
        fprintf(stderr, "%-*s  %-14s %8s  %s\n", w, "case", "size", "time", "status");
    }
    for (int i = 0; row && i < n; i++) {
        char *f[4] = {row[i], "", "", ""};
        for (int k = 1; k < 4; k++) {
            char *tab = strchr(f[k - 1], '\t');
            if (!tab) break;
            *tab = '\0';
            f[k] = tab + 1;
        }
        fprintf(stderr, "%-*.*s  %-14s %8s  %s\n", w, w, f[0], f[1], f[2], f[3]);
    }
    free(row);
    char of[32] = "";
    if (ranks > 1) snprintf(of, sizeof of, " by %d ranks", ranks);
    fprintf(stderr, "%s: %d done, %d failed, %d skipped in %.2f s%s -> %s\n", WHO, sums[0], sums[1], sums[2],
            seconds, of, TERM_TEXT(output_dir));
}

/* The table once: under mpirun every rank's rows and counts go to rank 0, which prints
 * them (every rank calls this once, whatever happened to it). */
static void finish_table(const swi_folder_result *r, int quiet, double t0, const char *output_dir) {
    char *rows = NULL, *all = NULL;
    size_t len = 0;
    int sums[3] = {r ? r->done : 0, r ? r->failed : 0, r ? r->skipped : 0};
    if (table_rows(r, &rows, &len)) {
        rows = NULL;
        len = 0;
    }
    int rank = 0, ranks = cli_launcher_ranks(&rank);
    const int got = cli_mpi_gather(rows ? rows : "", len, &all, sums, 3) == 0 && all;
    if (got && rank == 0 && (!quiet || sums[1] > 0))
        print_table(all, sums, cli_mpi_active() ? ranks : 1, cli_now() - t0, output_dir);
    else if (!got && rank == 0 && r && (!quiet || r->failed))
        fprintf(stderr, "%s: %d done, %d failed, %d skipped -> %s\n", WHO, r->done, r->failed, r->skipped,
                TERM_TEXT(output_dir));
    free(all);
    free(rows);
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
    u.t0 = t0;
    u.finished = u.count = 0;
    char err[SWI_JOB_ERRLEN];
    swi_folder *f = NULL;
    swi_status st = swi_folder_open(&fs, &hooks, &f, err, sizeof err);
    if (st != SWI_OK) {
        const int rc = seg_job_exit(WHO, st, err);
        if (cli_mpi_active()) finish_table(NULL, 1, t0, o->output_dir); /* the others wait for it */
        return rc;
    }
    swi_folder_result r;
    cli_set_cancel_hook(cancel_folder, f);
    st = swi_folder_run(f, &r, err, sizeof err);
    cli_set_cancel_hook(NULL, NULL);
    finish_table(&r, o->quiet, t0, o->output_dir);
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
