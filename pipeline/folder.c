/*
 * folder.c -- folder mode (swi_pipeline.h: swi_folder_*): every case of a folder, the model
 * loaded once.
 *
 * Cases: each volume file of the input folder (nnU-Net's CASE_0000.nii.gz, CASE_0001.nii.gz,
 * ... being the channels of CASE) and each subdirectory (a DICOM series), sorted by name; a
 * part keeps every N-th from I. A reading thread (folder_reader.c) opens, reads and
 * preprocesses the next case while the current one runs (one case ahead, so at most two are
 * in memory), in the caller's reader program when it names one. Each case runs as a job on
 * the shared model; a failure is reported with the case and the run goes on. Outputs that
 * exist are skipped unless the job has force; an output folder inside the input folder is
 * left out of the cases, and the input folder itself is refused as one.
 */
#include "folder_cases.h"

#include "segment.h"
#include "swi_ort.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void swi_folder_spec_init(swi_folder_spec *spec) { memset(spec, 0, sizeof *spec); }

int folder_cancelled(swi_folder *f) {
    pthread_mutex_lock(&f->mu);
    int c = f->cancel;
    pthread_mutex_unlock(&f->mu);
    return c || (f->hooks.job.cancelled && f->hooks.job.cancelled(f->hooks.job.user));
}

int folder_cancelled_cb(void *folder) { return folder_cancelled(folder); }

void swi_folder_cancel(swi_folder *f) {
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->cancel = 1;
    if (f->current) swi_job_cancel(f->current);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static swi_status fail(swi_status st, const char *msg, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}

/* Make dir (named by `flag`, holding `what`) if missing, as another part or process may at
 * the same moment; refuse anything else than a directory; its real path into real. Returns
 * 0, or 1 with err set. */
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

/* The input folder's real path, the output and report folders made. SWI_OK, or a status
 * with err (SWI_ERR_INVALID_ARG: the output folder is the input folder). */
static swi_status make_dirs(const swi_folder_spec *sp, char real_in[PATH_MAX], char real_out[PATH_MAX],
                            char real_rep[PATH_MAX], char *err) {
    struct stat st;
    if (stat(sp->input_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: %s", sp->input_dir,
                stat(sp->input_dir, &st) != 0 ? strerror(errno) : "not a directory (--input-dir)");
        return SWI_ERR_IO;
    }
    if (!realpath(sp->input_dir, real_in)) {
        cli_err(err, "%s: %s", sp->input_dir, strerror(errno));
        return SWI_ERR_IO;
    }
    if (make_dir(sp->output_dir, "--output-dir", "output", real_out, err)) return SWI_ERR_IO;
    if (strcmp(real_in, real_out) == 0) {
        cli_err(err,
                "--output-dir %s is the input directory: its outputs would be read as "
                "inputs next time; give another (a subdirectory is fine)",
                sp->output_dir);
        return SWI_ERR_INVALID_ARG;
    }
    real_rep[0] = '\0';
    if (!sp->report_dir) return SWI_OK;
    if (make_dir(sp->report_dir, "--report-dir", "report", real_rep, err)) return SWI_ERR_IO;
    if (strcmp(real_rep, real_in) == 0) {
        cli_err(err, "--report-dir %s is the input directory; give another (a subdirectory is fine)",
                sp->report_dir);
        return SWI_ERR_IO;
    }
    return SWI_OK;
}

/* The spec's own faults, as usage errors: 0, or 1 with err. */
static int check_spec(const swi_folder_spec *sp, char *err) {
    const swi_job_spec *j = sp->job;
    const char *fmt = sp->output_format;
    if (!j || !sp->input_dir || !sp->output_dir)
        cli_err(err, "folder mode needs the job, the input directory and the output directory");
    else if (j->n_inputs || j->output || j->scores || j->preview || j->report || j->keep_scores ||
             j->statistics || j->keep_statistics || j->masks)
        cli_err(err, "folder mode's job takes no inputs or outputs: each case gets its own "
                     "(OUTPUT_DIR/<case>.nii.gz)");
    else if (j->shard_parts || j->shard_init || j->shard_grid[0] || j->shard_collective)
        cli_err(err, "folder mode divides its cases into parts (part_index, part_count), not a volume");
    else if (fmt && strcmp(fmt, "nii.gz") != 0 && strcmp(fmt, "nii") != 0 && strcmp(fmt, "nrrd") != 0 &&
             strcmp(fmt, "mha") != 0)
        cli_err(err, "--output-format '%s': use nii.gz, nii, nrrd or mha", fmt);
    else if (sp->part_count < 0 || sp->part_index < 0 ||
             (sp->part_count && sp->part_index >= sp->part_count) || (!sp->part_count && sp->part_index))
        cli_err(err, "--part %d/%d: give I/N with 0 <= I < N", sp->part_index, sp->part_count);
    else
        return 0;
    return 1;
}

/* Each case's output, and which of this part's cases are to run (an existing output is
 * skipped without force). 0, or 1 when out of memory. */
static int plan_cases(swi_folder *f) {
    const swi_folder_spec *sp = &f->spec;
    const int parts = sp->part_count ? sp->part_count : 1;
    const char *fmt = sp->output_format ? sp->output_format : "nii.gz";
    f->todo = malloc((size_t)(f->n_cases + 1) * sizeof *f->todo);
    f->view = calloc((size_t)(f->n_cases + 1), sizeof *f->view);
    if (!f->todo || !f->view) return 1;
    for (int i = 0; i < f->n_cases; i++) {
        fcase *c = &f->cases[i];
        c->index = -1;
        if (i % parts != sp->part_index) continue;
        c->mine = 1;
        /* OUT/ as typed gives OUT/case, not OUT//case */
        const char *sep = dir_sep(sp->output_dir);
        if ((f->nnunet
                 ? snprintf(c->out, sizeof c->out, "%s%s%s%s", sp->output_dir, sep, c->name, f->nn_ending)
                 : snprintf(c->out, sizeof c->out, "%s%s%s.%s", sp->output_dir, sep, c->name, fmt)) >=
            (int)sizeof c->out)
            cli_err(c->problem, "%s: output path too long", c->name);
        struct stat st;
        if (!f->job.force && !c->problem[0] && lstat(c->out, &st) == 0) {
            c->state = CASE_SKIPPED;
            continue;
        }
        c->index = f->n_todo;
        f->todo[f->n_todo++] = i;
    }
    return 0;
}

swi_status swi_folder_open(const swi_folder_spec *spec, const swi_folder_hooks *hooks, swi_folder **out,
                           char *err, size_t errlen) {
    char msg[SWI_ERRLEN], real_in[PATH_MAX], real_out[PATH_MAX], real_rep[PATH_MAX];
    if (out) *out = NULL;
    if (!spec || !out)
        return fail(SWI_ERR_INVALID_ARG, "swi_folder_open: spec and folder are required", err, errlen);
    if (check_spec(spec, msg)) return fail(SWI_ERR_INVALID_ARG, msg, err, errlen);
    /* pages that cannot be written (no NiiVue) are refused before anything is made */
    if (spec->report_dir && seg_report_check(spec->report_dir, msg))
        return fail(SWI_ERR_IO, msg, err, errlen);
    swi_status st = make_dirs(spec, real_in, real_out, real_rep, msg);
    if (st != SWI_OK) return fail(st, msg, err, errlen);
    swi_folder *f = calloc(1, sizeof *f);
    if (!f) return fail(SWI_ERR_NOMEM, "out of memory", err, errlen);
    f->spec = *spec;
    f->job = *spec->job;
    f->spec.job = &f->job;
    if (hooks) f->hooks = *hooks;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return fail(SWI_ERR_NOMEM, "cannot make a mutex", err, errlen);
    }
    if (pthread_cond_init(&f->cv, NULL) != 0) {
        pthread_mutex_destroy(&f->mu);
        free(f);
        return fail(SWI_ERR_NOMEM, "cannot make a condition variable", err, errlen);
    }
    /* the job as every case runs it, with the model's card: a job on no case yet */
    swi_job_spec js = f->job;
    js.inputs[js.n_inputs++] = spec->input_dir;
    char jerr[SWI_JOB_ERRLEN];
    st = swi_job_open(&js, &f->hooks.job, &f->opts_job, jerr, sizeof jerr);
    if (st != SWI_OK) {
        swi_folder_free(f);
        return fail(st, jerr, err, errlen);
    }
    if (seg_list_cases(&f->cases, &f->n_cases, spec->input_dir, real_out, real_rep, msg)) {
        swi_folder_free(f);
        return fail(SWI_ERR_IO, msg, err, errlen);
    }
    int nn_channels = 0;
    f->nnunet = swi_job_nnunet(f->opts_job, &nn_channels, &f->nn_ending);
    if (f->nnunet) seg_cases_nnunet(f->cases, f->n_cases, nn_channels, f->nn_ending);
    if (plan_cases(f)) {
        swi_folder_free(f);
        return fail(SWI_ERR_NOMEM, "out of memory", err, errlen);
    }
    if (f->n_cases == 0) {
        cli_err(msg,
                "%s: no cases (volume files .nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd or "
                "DICOM series directories)",
                spec->input_dir);
        swi_folder_free(f);
        return fail(SWI_ERR_IO, msg, err, errlen);
    }
    *out = f;
    return fail(SWI_OK, "", err, errlen);
}

/* The case as the hooks (final 0: a case not ended is not run) or the result (final 1: a
 * case read but not run failed) show it. */
static const swi_folder_case *view_of(swi_folder *f, fcase *c, int final, swi_folder_case *v) {
    v->name = c->name;
    v->output = c->out;
    v->index = c->index;
    v->count = f->n_todo;
    v->status = c->state == CASE_DONE             ? SWI_CASE_DONE
                : c->state == CASE_SKIPPED        ? SWI_CASE_SKIPPED
                : c->state == CASE_FAILED         ? SWI_CASE_FAILED
                : c->state == CASE_TODO || !final ? SWI_CASE_NOT_RUN
                                                  : SWI_CASE_FAILED;
    if (v->status == SWI_CASE_FAILED && !c->err_status) { /* read, then the run was cancelled */
        c->err_status = SWI_ERR_CANCELLED;
        if (!c->err[0]) snprintf(c->err, sizeof c->err, "cancelled");
    }
    v->error_status = v->status == SWI_CASE_FAILED ? c->err_status : SWI_OK;
    v->error = v->status == SWI_CASE_FAILED ? c->err : "";
    memcpy(v->size, c->size, sizeof v->size);
    v->seconds = c->seconds;
    return v;
}

/* A case that ends failed before its job: why into c->err, then case_end. */
static void end_failed(swi_folder *f, fcase *c, swi_status st, const char *why) {
    if (why != c->err) snprintf(c->err, sizeof c->err, "%s", why);
    c->err_status = st;
    c->state = CASE_FAILED;
    seg_case_free_data(c);
    swi_folder_case v;
    if (f->hooks.case_end) f->hooks.case_end(f->hooks.job.user, view_of(f, c, 0, &v));
}

/* Run one case the reader has left ready, on *model (opened by the first case that gets so
 * far). Returns the job's status. */
static swi_status run_case(swi_folder *f, fcase *c, swi_ort_model **model) {
    const swi_folder_spec *sp = &f->spec;
    swi_job_spec spec = f->job;
    spec.n_inputs = c->n_files;
    for (int k = 0; k < c->n_files; k++) spec.inputs[k] = c->files[k];
    spec.output = c->out;
    spec.quiet = 1; /* no summary line per case: the run's result sums them up */
    if (sp->report_dir) {
        spec.report = c->page;
        spec.report_title = c->name;
    }
    swi_folder_case v;
    if (f->hooks.case_start) f->hooks.case_start(f->hooks.job.user, view_of(f, c, 0, &v));
    const double t1 = cli_now();
    swi_job *job = NULL;
    char jerr[SWI_JOB_ERRLEN];
    swi_job_result keep;
    memset(&keep, 0, sizeof keep);
    swi_status st = swi_job_open(&spec, &f->hooks.job, &job, jerr, sizeof jerr);
    if (st == SWI_OK) {
        /* the case as the reader left it, on the model opened once */
        const float *image = c->input; /* the job's from here on, readable until swi_job_free */
        swi_job_use_model(job, *model);
        st = swi_job_give_inputs(job, c->vols, c->input, jerr, sizeof jerr);
        c->input = NULL;
        pthread_mutex_lock(&f->mu);
        f->current = job;
        const int stop = f->cancel;
        pthread_mutex_unlock(&f->mu);
        if (st == SWI_OK)
            st = stop || folder_cancelled(f)
                     ? SWI_ERR_CANCELLED
                     : swi_job_run(job, sp->report_dir ? &keep : NULL, jerr, sizeof jerr);
        pthread_mutex_lock(&f->mu);
        f->current = NULL;
        pthread_mutex_unlock(&f->mu);
        if (st == SWI_ERR_CANCELLED) snprintf(jerr, sizeof jerr, "cancelled");
        /* the index's volumes and thumbnail, while the case's image is still held */
        if (st == SWI_OK && keep.labels &&
            seg_case_summarize(c->vols[0].affine, image, keep.labels, keep.label_bytes, keep.size,
                               keep.classes, &c->sum, c->err))
            pl_hook_message(&f->hooks.job, c->err);
        if (!*model) *model = swi_job_take_model(job);
    }
    c->seconds += cli_now() - t1;
    swi_job_result_free(&keep);
    swi_job_free(job);
    seg_case_free_data(c);
    c->state = st == SWI_OK ? CASE_DONE : CASE_FAILED;
    if (st != SWI_OK) {
        snprintf(c->err, sizeof c->err, "%s", jerr);
        c->err_status = st;
    }
    if (f->hooks.case_end) f->hooks.case_end(f->hooks.job.user, view_of(f, c, 0, &v));
    return st;
}

/* Wait until the reader is done with case t (and let it read case t + 1). */
static void take_case(swi_folder *f, int t) {
    fcase *c = &f->cases[f->todo[t]];
    pthread_mutex_lock(&f->mu);
    f->taken = t; /* the reader may now read case t (and t + 1 once we start) */
    pthread_cond_broadcast(&f->cv);
    while (c->state == CASE_TODO && !f->stop && !f->cancel) pthread_cond_wait(&f->cv, &f->mu);
    f->taken = t + 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

swi_status swi_folder_run(swi_folder *f, swi_folder_result *res, char *err, size_t errlen) {
    if (res) memset(res, 0, sizeof *res);
    if (!f || f->ran)
        return fail(SWI_ERR_INVALID_ARG, "swi_folder_run: an open folder, run once", err, errlen);
    f->ran = 1;
    const swi_folder_spec *sp = &f->spec;
    pthread_t th;
    const int have_thread = f->n_todo > 0 && pthread_create(&th, NULL, folder_reader, f) == 0;
    if (f->n_todo > 0 && !have_thread)
        return fail(SWI_ERR_NOMEM, "cannot start the reading thread", err, errlen);
    swi_ort_model *model = NULL;
    int cancelled = 0;
    for (int t = 0; t < f->n_todo; t++) {
        fcase *c = &f->cases[f->todo[t]];
        take_case(f, t);
        if (folder_cancelled(f)) {
            cancelled = 1;
            break;
        }
        if (c->state != CASE_READY) {
            end_failed(f, c, c->err_status ? c->err_status : SWI_ERR_IO,
                       c->state == CASE_TODO ? "not read" : c->err);
            continue;
        }
        if (sp->report_dir && snprintf(c->page, sizeof c->page, "%s%s%s.html", sp->report_dir,
                                       dir_sep(sp->report_dir), c->name) >= (int)sizeof c->page) {
            char why[SWI_ERRLEN];
            cli_err(why, "%s: report path too long", c->name);
            end_failed(f, c, SWI_ERR_INVALID_ARG, why);
            continue;
        }
        if (run_case(f, c, &model) == SWI_ERR_CANCELLED || folder_cancelled(f)) {
            cancelled = 1;
            break;
        }
    }
    if (have_thread) {
        pthread_mutex_lock(&f->mu);
        f->stop = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(th, NULL);
    }
    swi_ort_close(model);
    /* this part's cases as the result shows them */
    swi_folder_result r = {f->view, 0, 0, 0, 0};
    for (int i = 0; i < f->n_cases; i++) {
        fcase *c = &f->cases[i];
        if (!c->mine) continue;
        seg_case_free_data(c);
        const swi_folder_case *v = view_of(f, c, 1, &f->view[r.n_cases++]);
        r.done += v->status == SWI_CASE_DONE;
        r.failed += v->status == SWI_CASE_FAILED;
        r.skipped += v->status == SWI_CASE_SKIPPED;
    }
    if (res) *res = r;
    if (cancelled) return fail(SWI_ERR_CANCELLED, "cancelled; the finished cases are kept", err, errlen);
    char msg[SWI_ERRLEN];
    const seg_cases_where where = {sp->report_dir, sp->input_dir, sp->part_index, sp->part_count};
    if (sp->report_dir && seg_cases_index(f->cases, f->n_cases, f->opts_job, &where, msg))
        return fail(SWI_ERR_IO, msg, err, errlen);
    return fail(SWI_OK, "", err, errlen);
}

void swi_folder_free(swi_folder *f) {
    if (!f) return;
    seg_cases_free(f->cases, f->n_cases);
    free(f->todo);
    free(f->view);
    swi_job_free(f->opts_job);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}
