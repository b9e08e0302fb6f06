/*
 * folder.c -- `swi segment --input-dir IN --output-dir OUT`: every case of a folder, the
 * model loaded once.
 *
 * Cases: each volume file of IN (nnU-Net's CASE_0000.nii.gz, CASE_0001.nii.gz, ... being
 * the channels of CASE) and each subdirectory (a DICOM series), sorted by name; --part I/N
 * keeps every N-th from I. A reader thread opens, reads and preprocesses the next case
 * while the current one runs (one case ahead, so at most two are in memory). Each case
 * runs as a job (swi_pipeline.h) on the shared model; a failure is reported with the case's
 * name and the run goes on. The reader opens and reads each case's volumes in a child
 * process (swi itself, run as `swi --read-volumes-child FILE...`), so that a library that
 * aborts or hangs on one file fails that case only; the voxels come back through a pipe.
 * Outputs that exist are skipped unless --force; an output directory inside IN is left out
 * of the cases, and IN itself is refused as one. The cases and the summary are in
 * folder_cases.c, the reader in folder_child.c.
 */
#include "folder.h"

#include "signals.h"
#include "swi_ort.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Make dir (the folder of `flag`, holding `what`) if missing, as another part or rank may
 * at the same moment; refuse anything else than a directory; its real path into real.
 * Returns 0, or 1 with err set. */
static int make_dir(const char *dir, const char *flag, const char *what, char real[PATH_MAX], char *err) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0777) != 0) {
            const int e = errno;
            if (!(e == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))) {
                cli_err(err, "%s: cannot make the %s directory: %s", dir, what, strerror(e));
                return 1;
            }
        }
    } else if (!S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: not a directory (%s)", dir, flag);
        return 1;
    }
    if (!realpath(dir, real)) {
        cli_err(err, "%s: %s", dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* Make the --report-dir folder if missing; its real path into real ("" without one).
 * Returns 0, or 1 with err set. */
static int report_dir(const seg_cmd *o, const char *real_in, char real[PATH_MAX], char *err) {
    real[0] = '\0';
    if (!o->report_dir) return 0;
    if (make_dir(o->report_dir, "--report-dir", "report", real, err)) return 1;
    if (strcmp(real, real_in) == 0) {
        cli_err(err, "--report-dir %s is the input directory; give another (a subdirectory is fine)",
                o->report_dir);
        return 1;
    }
    return 0;
}

/* Make OUT if missing; its real path into real. Returns 0, or 1/2 with err set. */
static int output_dir(const seg_cmd *o, char real_in[PATH_MAX], char real_out[PATH_MAX], char *err) {
    struct stat st;
    if (stat(o->input_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: %s", o->input_dir,
                stat(o->input_dir, &st) != 0 ? strerror(errno) : "not a directory (--input-dir)");
        return 1;
    }
    if (!realpath(o->input_dir, real_in)) {
        cli_err(err, "%s: %s", o->input_dir, strerror(errno));
        return 1;
    }
    if (make_dir(o->output_dir, "--output-dir", "output", real_out, err)) return 1;
    if (strcmp(real_in, real_out) == 0) {
        cli_err(err,
                "--output-dir %s is the input directory: its outputs would be read as "
                "inputs next time; give another (a subdirectory is fine)",
                o->output_dir);
        return 2;
    }
    return 0;
}

static int folder_fail(const char *who, const char *msg) {
    fprintf(stderr, "%s: %s\n", who, msg);
    return 1;
}

void free_folder(folder *f) {
    seg_cases_free(f->cases, f->n_cases);
    free(f->todo);
    swi_job_free(f->opts_job);
}

/* The summary table on stderr. */
static void print_table(const folder *f, double seconds) {
    int done = 0, failed = 0, skipped = 0, w = 4;
    for (int i = 0; i < f->n_cases; i++)
        if ((int)strlen(f->cases[i].name) > w) w = (int)strlen(f->cases[i].name);
    if (w > 40) w = 40;
    fprintf(stderr, "%-*s  %-14s %8s  %s\n", w, "case", "size", "time", "status");
    for (int i = 0; i < f->n_cases; i++) {
        const fcase *c = &f->cases[i];
        if (c->state == CASE_TODO) continue; /* another part's */
        char size[48] = "-", t[16] = "-";
        if (c->size[0])
            snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)c->size[0], (long long)c->size[1],
                     (long long)c->size[2]);
        if (c->state == CASE_DONE || c->state == CASE_FAILED) snprintf(t, sizeof t, "%.2f s", c->seconds);
        const char *st = c->state == CASE_DONE      ? "ok"
                         : c->state == CASE_SKIPPED ? "skipped (output exists)"
                                                    : "FAILED";
        fprintf(stderr, "%-*.*s  %-14s %8s  %s\n", w, w, c->name, size, t, st);
        done += c->state == CASE_DONE;
        skipped += c->state == CASE_SKIPPED;
        failed += c->state == CASE_FAILED || c->state == CASE_BAD || c->state == CASE_READY;
    }
    fprintf(stderr, "%s: %d done, %d failed, %d skipped in %.2f s -> %s\n", WHO, done, failed, skipped,
            seconds, f->o->output_dir);
}

int seg_folder_run(const seg_cmd *o) {
    char err[SWI_ERRLEN], real_in[PATH_MAX], real_out[PATH_MAX], real_rep[PATH_MAX];
    double t0 = cli_now();
    if (cli_signals_start() != 0) /* before the reader thread: it inherits the mask */
        return folder_fail(WHO, "cannot set up signal handling");
    /* pages that cannot be written (no NiiVue) are refused before anything is made */
    if (o->report_dir && seg_report_check(o->report_dir, err)) return folder_fail(WHO, err);
    int rc = output_dir(o, real_in, real_out, err);
    if (rc) {
        fprintf(stderr, "%s: %s%s\n", WHO, err, rc == 2 ? " (see 'swi segment --help')" : "");
        return rc;
    }
    if (report_dir(o, real_in, real_rep, err)) return folder_fail(WHO, err);
    folder f;
    memset(&f, 0, sizeof f);
    f.o = o;
    /* the options as every case runs them, with the model's card: a job on no case yet */
    swi_job_spec spec = o->spec;
    spec.inputs[spec.n_inputs++] = o->input_dir;
    swi_job *opts_job = NULL;
    swi_status jst = swi_job_open(&spec, NULL, &opts_job, err, sizeof err);
    if (jst != SWI_OK) return seg_job_exit(WHO, jst, err);
    f.opts_job = opts_job;
    if (seg_list_cases(&f.cases, &f.n_cases, o->input_dir, real_out, real_rep, err)) {
        free_folder(&f);
        return folder_fail(WHO, err);
    }
    int nn_channels = 0;
    const char *nn_ending = NULL;
    const int nnunet = swi_job_nnunet(opts_job, &nn_channels, &nn_ending);
    if (nnunet) folder_nnunet_cases(&f, nn_channels, nn_ending, err);
    f.todo = malloc((size_t)(f.n_cases + 1) * sizeof *f.todo);
    if (!f.todo) {
        free_folder(&f);
        return folder_fail(WHO, "out of memory");
    }
    for (int i = 0; i < f.n_cases; i++) {
        fcase *c = &f.cases[i];
        if (i % o->part_count != o->part_index) continue;
        if (nnunet ? folder_nnunet_output(&f, c, nn_ending, c->out, sizeof c->out)
                   : snprintf(c->out, sizeof c->out, "%s/%s.%s", o->output_dir, c->name, o->output_format) >=
                         (int)sizeof c->out) {
            cli_err(c->problem, "%s: output path too long", c->name);
        }
        struct stat st;
        if (!o->spec.force && !c->problem[0] && lstat(c->out, &st) == 0) {
            c->state = CASE_SKIPPED;
            continue;
        }
        f.todo[f.n_todo++] = i;
    }
    if (f.n_cases == 0) {
        free_folder(&f);
        cli_err(err,
                "%s: no cases (volume files .nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd or "
                "DICOM series directories)",
                o->input_dir);
        return folder_fail(WHO, err);
    }
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    pthread_t th;
    int have_thread = f.n_todo > 0 && pthread_create(&th, NULL, folder_reader, &f) == 0;
    if (f.n_todo > 0 && !have_thread) {
        pthread_mutex_destroy(&f.mu);
        pthread_cond_destroy(&f.cv);
        free_folder(&f);
        return folder_fail(WHO, "cannot start the reader thread");
    }

    swi_ort_model *model = NULL;
    int failed = 0, interrupted = 0;
    for (int t = 0; t < f.n_todo; t++) {
        fcase *c = &f.cases[f.todo[t]];
        pthread_mutex_lock(&f.mu);
        f.taken = t; /* the reader may now read case t (and t + 1 once we start) */
        pthread_cond_broadcast(&f.cv);
        while (c->state == CASE_TODO && !f.stop) pthread_cond_wait(&f.cv, &f.mu);
        f.taken = t + 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        if (cli_interrupted()) {
            interrupted = 1;
            break;
        }
        char who[320];
        snprintf(who, sizeof who, "%s: %s", WHO, c->name);
        if (c->state != CASE_READY) {
            fprintf(stderr, "%s: %s\n", who, c->state == CASE_TODO ? "not read" : c->err);
            c->state = CASE_FAILED;
            failed++;
            seg_case_free_data(c);
            continue;
        }
        spec = o->spec;
        spec.n_inputs = c->n_files;
        for (int k = 0; k < c->n_files; k++) spec.inputs[k] = c->files[k];
        spec.output = c->out;
        spec.quiet = 1; /* no summary line: the table follows */
        if (o->report_dir) {
            if (snprintf(c->page, sizeof c->page, "%s/%s.html", o->report_dir, c->name) >=
                (int)sizeof c->page) {
                cli_err(c->err, "%s: report path too long", c->name);
                fprintf(stderr, "%s: %s\n", who, c->err);
                c->state = CASE_FAILED;
                failed++;
                seg_case_free_data(c);
                continue;
            }
            spec.report = c->page;
            spec.report_title = c->name;
        }
        char label[320];
        snprintf(label, sizeof label, "[%d/%d] %s", t + 1, f.n_todo, c->name);
        double t1 = cli_now();
        seg_hooks h;
        swi_job_hooks hooks = {0};
        seg_hooks_init(&h, !o->quiet, label, who, &hooks);
        swi_job *job = NULL;
        char jerr[SWI_JOB_ERRLEN];
        jst = swi_job_open(&spec, &hooks, &job, jerr, sizeof jerr);
        swi_job_result keep;
        memset(&keep, 0, sizeof keep);
        int r;
        if (jst != SWI_OK) {
            r = seg_job_exit(who, jst, jerr);
            snprintf(c->err, sizeof c->err, "%s", jerr);
        } else {
            /* the case as the reader left it, on the model opened once */
            const float *image = c->input; /* the job's from here on, readable until swi_job_free */
            swi_job_use_model(job, model);
            swi_job_give_inputs(job, c->vols, c->input, NULL, 0);
            c->input = NULL;
            r = seg_run_job(job, who, &h, o->report_dir ? &keep : NULL, jerr);
            if (r != 0) snprintf(c->err, sizeof c->err, "%s", jerr);
            /* the index's volumes and thumbnail, while the case's image is still held */
            if (r == 0 && keep.labels &&
                seg_case_summarize(c->vols[0].affine, image, keep.labels, keep.label_bytes, keep.size,
                                   keep.classes, &c->sum, c->err))
                fprintf(stderr, "%s: %s\n", who, c->err);
            if (!model) model = swi_job_take_model(job); /* opened by the first case that got that far */
        }
        c->seconds += cli_now() - t1;
        swi_job_result_free(&keep);
        swi_job_free(job);
        seg_case_free_data(c);
        if (cli_interrupted()) {
            interrupted = 1;
            c->state = CASE_FAILED;
            break;
        }
        c->state = r == 0 ? CASE_DONE : CASE_FAILED;
        failed += r != 0;
        if (!o->quiet)
            fprintf(stderr, "%s: [%d/%d] %s: %s, %.2f s\n", WHO, t + 1, f.n_todo, c->name,
                    r == 0 ? "done" : "failed", c->seconds);
    }
    if (have_thread) {
        pthread_mutex_lock(&f.mu);
        f.stop = 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        pthread_join(th, NULL);
    }
    swi_ort_close(model);
    if (!o->quiet || failed) print_table(&f, cli_now() - t0);
    const seg_cases_where where = {o->report_dir, o->input_dir, o->part_index, o->part_count};
    if (o->report_dir && !interrupted && seg_cases_index(f.cases, f.n_cases, f.opts_job, &where, err)) {
        fprintf(stderr, "%s: %s\n", WHO, err);
        failed++;
    }
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
    free_folder(&f);
    if (interrupted) {
        fprintf(stderr, "%s: interrupted; the finished cases are kept, no partial output\n", WHO);
        return cli_interrupt_status();
    }
    return failed ? 1 : 0;
}
