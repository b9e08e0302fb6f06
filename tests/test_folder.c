/*
 * test_folder.c -- swi_pipeline.h's folder mode (swi_folder_*) on the bundled demo model and
 * generated phantoms: every case segmented (each case's labels equal to a job's on that file
 * alone), a case that cannot be read failed and the others done, existing outputs skipped,
 * parts, the hooks' order, a reader program (this test run as one: swi_folder_serve_reader)
 * and one that is none, usage errors, and cancellation leaving nothing behind.
 *
 * test_folder MODEL.onnx
 */
#define _GNU_SOURCE
#include "check.h"
#include "phantom.h"
#include "swi_io.h"
#include "swi_pipeline.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* dir/name */
static const char *at(const char *name, char buf[512]) {
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}

/* Entries of folder sub of the test folder whose name ends in `suffix` ("": every one);
 * suffix "." counts the hidden ones (a temporary is .NAME.swi-XXXXXX). */
static int entries(const char *sub, const char *suffix) {
    char p[512];
    DIR *d = opendir(at(sub, p));
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t l = strlen(e->d_name), ls = strlen(suffix);
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n += strcmp(suffix, ".") == 0 ? e->d_name[0] == '.'
                                      : l >= ls && strcmp(e->d_name + l - ls, suffix) == 0;
    }
    if (d) closedir(d);
    return n;
}

static void write_phantom(const char *path, uint64_t seed, const int64_t size[3]) {
    const int64_t N = size[0] * size[1] * size[2];
    float *image = malloc((size_t)N * sizeof *image);
    uint8_t *truth = malloc((size_t)N);
    char err[SWI_JOB_ERRLEN];
    swi_volume like;
    const double spacing[3] = {1, 1, 1};
    CHECK(image && truth && swi_phantom_generate(seed, size, image, truth) == 0, "phantom");
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "%s", err);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(image && swi_volume_write_fd(fd, path, &like, image, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL,
                                       err, sizeof err) == SWI_OK,
          "%s", err);
    free(image);
    free(truth);
}

/* The labels of a job on `input` alone, as swi_job_run keeps them. */
static swi_job_result alone(const char *model, const char *input) {
    swi_job_spec sp;
    swi_job_spec_init(&sp);
    sp.models[sp.n_models++] = model;
    sp.inputs[sp.n_inputs++] = input;
    sp.threads = 2;
    sp.quiet = 1;
    swi_job *job = NULL;
    swi_job_result r;
    memset(&r, 0, sizeof r);
    char err[SWI_JOB_ERRLEN];
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK &&
              swi_job_run(job, &r, err, sizeof err) == SWI_OK,
          "%s: %s", input, err);
    swi_job_free(job);
    return r;
}

/* A written label file equal to a job's labels. */
static int same_labels(const char *path, const swi_job_result *r) {
    swi_volume v;
    char err[SWI_JOB_ERRLEN];
    if (!r->labels || swi_volume_open(path, &v, err, sizeof err) != SWI_OK) return 0;
    const int64_t N = swi_volume_voxels(&v);
    float *x = malloc((size_t)N * sizeof *x);
    int same = x && N == r->size[0] * r->size[1] * r->size[2] &&
               swi_volume_read(&v, x, NULL, err, sizeof err) == SWI_OK;
    for (int64_t i = 0; same && i < N; i++) same = x[i] == (float)((const uint8_t *)r->labels)[i];
    free(x);
    return same;
}

typedef struct seen {
    int starts, ends, progress, messages, order_ok;
    char last_case[256];
    swi_folder *cancel; /* cancelled at the first window */
} seen;

static void on_start(void *user, const swi_folder_case *c) {
    seen *s = user;
    s->starts++;
    s->order_ok &= c->status == SWI_CASE_NOT_RUN && c->index >= 0 && c->index < c->count;
    snprintf(s->last_case, sizeof s->last_case, "%s", c->name);
}

static void on_end(void *user, const swi_folder_case *c) {
    seen *s = user;
    s->ends++;
    s->order_ok &= c->status == SWI_CASE_DONE || c->status == SWI_CASE_FAILED;
}

static int on_progress(void *user, int64_t done, int64_t total) {
    seen *s = user;
    (void)done, (void)total;
    s->progress++;
    if (s->cancel) swi_folder_cancel(s->cancel);
    return 0;
}

static void on_message(void *user, const char *line) {
    (void)line;
    ((seen *)user)->messages++;
}

/* Open and run a folder of `job` from in/ to out/; the status of the run (or of open). */
static swi_status run_folder(const swi_job_spec *job, swi_folder_spec *fs, seen *s, swi_folder **f,
                             swi_folder_result *r, char *err) {
    static char in[512], out[512];
    fs->job = job;
    fs->input_dir = at("in", in);
    fs->output_dir = at("out", out);
    swi_folder_hooks h;
    memset(&h, 0, sizeof h);
    h.job.message = on_message;
    h.job.progress = on_progress;
    h.job.user = s;
    h.case_start = on_start;
    h.case_end = on_end;
    memset(s, 0, sizeof *s);
    s->order_ok = 1;
    memset(r, 0, sizeof *r);
    swi_status st = swi_folder_open(fs, &h, f, err, SWI_JOB_ERRLEN);
    if (st != SWI_OK) return st;
    return swi_folder_run(*f, r, err, SWI_JOB_ERRLEN);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--reader") == 0) /* this test as a reader program */
        return swi_folder_serve_reader(1, argc - 2, (const char *const *)(argv + 2)) == SWI_OK ? 0 : 1;
    if (argc != 2) {
        fprintf(stderr, "usage: test_folder MODEL.onnx\n");
        return 2;
    }
    const char *model = argv[1];
    snprintf(dir, sizeof dir, "/tmp/swi_test_folder_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char p[512], q[512], err[SWI_JOB_ERRLEN];
    CHECK(mkdir(at("in", p), 0777) == 0, "mkdir in");
    const int64_t sa[3] = {40, 36, 44}, sb[3] = {34, 40, 38};
    write_phantom(at("in/a.nii.gz", p), 11, sa);
    write_phantom(at("in/b.nii.gz", p), 12, sb);
    int fd = open(at("in/bad.nii.gz", p), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && write(fd, "not a volume", 12) == 12, "bad case");
    close(fd);
    swi_job_result ra = alone(model, at("in/a.nii.gz", p)), rb = alone(model, at("in/b.nii.gz", p));

    swi_job_spec job;
    swi_job_spec_init(&job);
    job.models[job.n_models++] = model;
    job.threads = 2;

    /* every case, read in this process: a and b done (as jobs on each alone), bad failed */
    swi_folder_spec fs;
    swi_folder_spec_init(&fs);
    seen s;
    swi_folder *f = NULL;
    swi_folder_result r;
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_OK, "run: %s", err);
    CHECK(r.n_cases == 3 && r.done == 2 && r.failed == 1 && r.skipped == 0, "%d cases: %d done, %d failed",
          r.n_cases, r.done, r.failed);
    CHECK(r.n_cases == 3 && strcmp(r.cases[0].name, "a") == 0 && strcmp(r.cases[2].name, "bad") == 0 &&
              r.cases[2].status == SWI_CASE_FAILED && strstr(r.cases[2].error, "bad.nii.gz") &&
              r.cases[0].size[0] == sa[0] && r.cases[1].size[1] == sb[1] && r.cases[1].seconds > 0,
          "the cases as the result shows them");
    CHECK(s.starts == 2 && s.ends == 3 && s.order_ok && s.progress > 0 && s.messages == 0,
          "hooks: %d starts, %d ends, order %d, %d progress, %d messages", s.starts, s.ends, s.order_ok,
          s.progress, s.messages);
    CHECK(same_labels(at("out/a.nii.gz", p), &ra) && same_labels(at("out/b.nii.gz", q), &rb),
          "each case's labels are those of a job on its file alone");
    CHECK(entries("out", ".nii.gz") == 2 && entries("out", ".") == 0, "out/ holds the two outputs");
    swi_folder_free(f);

    /* again: the outputs exist, so a and b are skipped; with force they are redone */
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_OK && r.skipped == 2 && r.failed == 1 &&
              r.done == 0 && s.starts == 0 && r.cases[0].index == -1,
          "skipped: %d (%s)", r.skipped, err);
    swi_folder_free(f);
    job.force = 1;
    fs.part_index = 1;
    fs.part_count = 2; /* b only */
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_OK && r.n_cases == 1 && r.done == 1 &&
              strcmp(r.cases[0].name, "b") == 0,
          "part 1/2: %d cases (%s)", r.n_cases, err);
    swi_folder_free(f);

    /* read in a reader program: this test, run as one; a program that is none fails each case */
    fs.part_index = fs.part_count = 0;
    const char *reader_argv[] = {"test_folder", "--reader", NULL};
    fs.reader = "/proc/self/exe";
    fs.reader_argv = reader_argv;
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_OK && r.done == 2 && r.failed == 1 &&
              strstr(r.cases[2].error, "bad.nii.gz"),
          "through the reader: %d done (%s)", r.done, err);
    CHECK(same_labels(at("out/a.nii.gz", p), &ra) && same_labels(at("out/b.nii.gz", q), &rb),
          "the same labels through the reader");
    swi_folder_free(f);
    const char *true_argv[] = {"true", NULL};
    fs.reader = "/bin/true";
    fs.reader_argv = true_argv;
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_OK && r.failed == 3 &&
              strstr(r.cases[0].error, "the reader stopped without an answer"),
          "not a reader: %d failed (%s)", r.failed, r.n_cases ? r.cases[0].error : err);
    swi_folder_free(f);
    fs.reader = NULL;
    fs.reader_argv = NULL;

    /* usage errors: nothing opened */
    swi_job_spec bad = job;
    bad.inputs[bad.n_inputs++] = "x.nii.gz";
    CHECK(run_folder(&bad, &fs, &s, &f, &r, err) == SWI_ERR_INVALID_ARG && !f && strstr(err, "no inputs"),
          "a job with inputs: %s", err);
    fs.output_format = "png";
    CHECK(run_folder(&job, &fs, &s, &f, &r, err) == SWI_ERR_INVALID_ARG && !f && strstr(err, "png"),
          "format: %s", err);
    fs.output_format = NULL;
    fs.job = &job;
    fs.input_dir = fs.output_dir = at("in", p);
    CHECK(swi_folder_open(&fs, NULL, &f, err, sizeof err) == SWI_ERR_INVALID_ARG && !f &&
              strstr(err, "is the input directory"),
          "out = in: %s", err);

    /* cancelled at the first window: that case failed, the rest not run, nothing left behind */
    CHECK(mkdir(at("out2", p), 0777) == 0, "mkdir out2");
    memset(&s, 0, sizeof s);
    swi_folder_hooks h;
    memset(&h, 0, sizeof h);
    h.job.progress = on_progress;
    h.job.user = &s;
    fs.input_dir = at("in", p);
    fs.output_dir = at("out2", q);
    CHECK(swi_folder_open(&fs, &h, &f, err, sizeof err) == SWI_OK, "open: %s", err);
    s.cancel = f;
    CHECK(swi_folder_run(f, &r, err, sizeof err) == SWI_ERR_CANCELLED, "cancelled: %s", err);
    CHECK(r.n_cases == 3 && r.cases[0].status == SWI_CASE_FAILED &&
              r.cases[0].error_status == SWI_ERR_CANCELLED && r.cases[2].status == SWI_CASE_NOT_RUN &&
              r.done == 0,
          "the cases after a cancel: %d", r.n_cases);
    CHECK(entries("out2", "") == 0, "a cancelled folder leaves nothing: %d entries", entries("out2", ""));
    swi_folder_free(f);

    swi_job_result_free(&ra);
    swi_job_result_free(&rb);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (check_failures == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("test_folder");
}
