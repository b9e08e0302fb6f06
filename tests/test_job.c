/*
 * test_job.c -- swi_pipeline.h on the bundled demo model and a generated phantom: a job
 * opened, planned, described and run (its labels equal to a second run's, the file written);
 * bad specs refused as usage errors with a message; an existing output without force
 * refused and left as it was; a cancelled job ending SWI_ERR_CANCELLED with nothing left.
 *
 * test_job MODEL.onnx
 */
#define _GNU_SOURCE
#include "check.h"
#include "phantom.h"
#include "swi_io.h"
#include "swi_pipeline.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char *path_in(const char *name, char *buf) {
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}

/* Entries of the test folder whose name starts with prefix. */
static int count_named(const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

typedef struct seen {
    int messages, progress;
    char last[SWI_JOB_ERRLEN];
    swi_job *cancel; /* cancelled at the first progress call */
} seen;

static void on_message(void *user, const char *line) {
    seen *s = user;
    s->messages++;
    snprintf(s->last, sizeof s->last, "%s", line);
}

static int on_progress(void *user, int64_t done, int64_t total) {
    seen *s = user;
    (void)done, (void)total;
    s->progress++;
    if (s->cancel) swi_job_cancel(s->cancel);
    return 0;
}

static void spec_of(swi_job_spec *sp, const char *model, const char *input, const char *output) {
    swi_job_spec_init(sp);
    sp->models[sp->n_models++] = model;
    sp->inputs[sp->n_inputs++] = input;
    sp->output = output;
    sp->threads = 2;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_job MODEL.onnx\n");
        return 2;
    }
    const char *model = argv[1];
    snprintf(dir, sizeof dir, "/tmp/swi_test_job_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char img[512], lab[512], lab2[512], kept[512], gone[512], err[SWI_JOB_ERRLEN];
    path_in("image.nii.gz", img);
    path_in("labels.nii.gz", lab);
    path_in("labels2.nii", lab2);
    path_in("kept.nii.gz", kept);
    path_in("gone.nii.gz", gone);

    /* the phantom, written as the demo writes it */
    const int64_t size[3] = {40, 36, 44}, N = size[0] * size[1] * size[2];
    float *image = malloc((size_t)N * sizeof *image);
    uint8_t *truth = malloc((size_t)N);
    CHECK(image && truth && swi_phantom_generate(11, size, image, truth) == 0, "phantom");
    swi_volume like;
    const double spacing[3] = {1, 1, 1};
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "%s", err);
    int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_volume_write_fd(fd, img, &like, image, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                              sizeof err) == SWI_OK,
          "%s", err);

    /* a plain job: open, plan, describe, run */
    swi_job_spec sp;
    spec_of(&sp, model, img, lab);
    seen s = {0};
    swi_job_hooks hooks = {on_message, on_progress, NULL, NULL, &s};
    swi_job *job = NULL;
    CHECK(swi_job_open(&sp, &hooks, &job, err, sizeof err) == SWI_OK && job, "open: %s", err);
    swi_job_plan plan;
    CHECK(swi_job_plan_run(job, 1, &plan, err, sizeof err) == SWI_OK, "plan: %s", err);
    CHECK(plan.fits && plan.engine.windows_total > 0 && plan.classes == SWI_PHANTOM_CLASSES,
          "plan: fits %d, %lld windows, %lld classes", plan.fits, (long long)plan.engine.windows_total,
          (long long)plan.classes);
    CHECK(plan.input_size[0] == size[0] && plan.input_size[1] == size[1] && plan.input_size[2] == size[2],
          "plan: input grid");
    CHECK(plan.engine.roi[0] == 32, "the card's roi: %lld", (long long)plan.engine.roi[0]);
    char text[8192];
    size_t len = swi_job_describe(job, &plan, text, sizeof text);
    CHECK(len > 0 && len < sizeof text && strncmp(text, "model    ", 9) == 0 &&
              strstr(text, "\nwindow   32 x 32 x 32"),
          "describe: %s", text);
    char tiny[16];
    CHECK(swi_job_describe(job, &plan, tiny, sizeof tiny) == len && strlen(tiny) == sizeof tiny - 1,
          "describe truncates as snprintf");
    swi_job_result r;
    CHECK(swi_job_run(job, &r, err, sizeof err) == SWI_OK, "run: %s", err);
    CHECK(r.labels && r.label_bytes == 1 && r.size[0] == size[0] && r.classes == SWI_PHANTOM_CLASSES,
          "result");
    CHECK(s.progress > 0 && s.messages == 1 && strstr(s.last, "voxels"),
          "hooks: %d progress, %d messages (%s)", s.progress, s.messages, s.last);
    int64_t agree = 0;
    for (int64_t v = 0; r.labels && v < N; v++) agree += ((uint8_t *)r.labels)[v] == truth[v];
    CHECK(agree > N * 9 / 10, "the demo network finds the phantom: %lld of %lld", (long long)agree,
          (long long)N);
    struct stat st;
    CHECK(stat(lab, &st) == 0 && st.st_size > 0, "labels written");
    CHECK(swi_job_run(job, NULL, err, sizeof err) == SWI_ERR_INVALID_ARG, "a second run is refused");
    swi_job_free(job);

    /* the same job quiet, to a .nii, its softmax scores kept: the same labels, their argmax */
    spec_of(&sp, model, img, lab2);
    sp.quiet = 1;
    sp.keep_scores = 1;
    sp.softmax = 1;
    s.messages = 0;
    CHECK(swi_job_open(&sp, &hooks, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    swi_job_result r2;
    CHECK(swi_job_run(job, &r2, err, sizeof err) == SWI_OK, "run: %s", err);
    CHECK(s.messages == 0, "quiet: %d messages", s.messages);
    CHECK(r.labels && r2.labels && memcmp(r.labels, r2.labels, (size_t)N) == 0, "two runs agree");
    CHECK(!r.scores && r2.scores && r2.classes == SWI_PHANTOM_CLASSES, "scores kept only when asked");
    int64_t off = 0;
    for (int64_t v = 0; r2.scores && r2.labels && v < N; v++) {
        double sum = 0;
        int best = 0;
        for (int k = 0; k < SWI_PHANTOM_CLASSES; k++) {
            const float x = r2.scores[(size_t)k * (size_t)N + (size_t)v];
            sum += x;
            if (x > r2.scores[(size_t)best * (size_t)N + (size_t)v]) best = k;
        }
        off += fabs(sum - 1) > 1e-4 || best != ((uint8_t *)r2.labels)[v];
    }
    CHECK(off == 0, "softmax scores sum to 1 and their argmax is the label: %lld voxels off", (long long)off);
    swi_job_free(job);
    swi_job_result_free(&r);
    swi_job_result_free(&r2);

    /* bad specs: usage errors with a message, no job */
    const char *why[] = {"no input", "overlap", "softmax", "shard"};
    for (int k = 0; k < 4; k++) {
        spec_of(&sp, model, img, gone);
        if (k == 0) sp.n_inputs = 0;
        if (k == 1) sp.overlap[0] = sp.overlap[1] = sp.overlap[2] = 1.5;
        if (k == 2) sp.softmax = 1;
        if (k == 3) sp.shard_part = 1, sp.shard_parts = 2; /* parts of stores only */
        job = (swi_job *)&sp;
        err[0] = '\0';
        CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_ERR_INVALID_ARG && !job && err[0],
              "%s: refused (%s)", why[k], err);
    }
    spec_of(&sp, model, img, gone);
    sp.roi[0] = sp.roi[1] = sp.roi[2] = 0;
    sp.head = 3;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    CHECK(swi_job_run(job, NULL, err, sizeof err) != SWI_OK && strstr(err, "--head 3"), "head: %s", err);
    swi_job_free(job);
    CHECK(stat(gone, &st) != 0 && count_named(".gone") == 0, "a failed job leaves nothing");

    /* an existing output without force: refused, untouched */
    fd = open(kept, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0 && write(fd, "mine", 4) == 4, "write kept");
    close(fd);
    spec_of(&sp, model, img, kept);
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    CHECK(swi_job_run(job, NULL, err, sizeof err) == SWI_ERR_IO && strstr(err, "already exists"), "kept: %s",
          err);
    swi_job_free(job);
    char back[8] = {0};
    fd = open(kept, O_RDONLY);
    CHECK(fd >= 0 && read(fd, back, sizeof back) == 4 && memcmp(back, "mine", 4) == 0, "kept untouched");
    close(fd);

    /* cancelled at the first window: SWI_ERR_CANCELLED, no output, no temporary */
    spec_of(&sp, model, img, gone);
    sp.quiet = 1;
    CHECK(swi_job_open(&sp, &hooks, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    s.cancel = job;
    CHECK(swi_job_run(job, NULL, err, sizeof err) == SWI_ERR_CANCELLED && err[0], "cancel: %s", err);
    CHECK(stat(gone, &st) != 0 && count_named(".gone") == 0, "a cancelled job leaves nothing");
    swi_job_free(job);

    /* the folder holds only what the test made: the card's class names beside each label map */
    const char *made[] = {"image.nii.gz", "labels.nii.gz", "labels.label.txt",  "labels.ctbl",
                          "labels2.nii",  "labels2.ctbl",  "labels2.label.txt", "kept.nii.gz"};
    char p[512];
    for (size_t k = 0; k < sizeof made / sizeof *made; k++)
        CHECK(unlink(path_in(made[k], p)) == 0, "%s was written", made[k]);
    CHECK(count_named("") == 2, "only . and .. left: %d entries", count_named(""));
    rmdir(dir);
    free(image);
    free(truth);
    return check_report("test_job");
}
