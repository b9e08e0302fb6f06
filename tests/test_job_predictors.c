/*
 * test_job_predictors.c -- a job of swi_pipeline.h on the caller's predictors
 * (swi_job_spec.predictors): one C predictor gives bitwise the scores of swi_run on the
 * volume's voxels with the same window; two with tta give those of swi_run on the mean of
 * their mirrors (swi_predictor_mean over swi_predictor_mirror); the plan describes them; a
 * failing predictor's message is the job's and nothing is left behind; bad specs are usage
 * errors.
 *
 * test_job_predictors
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

enum { CLASSES = 3, ROI = 16 };

typedef struct net {
    float bias;
    const char *fail; /* fail with this message */
    int64_t calls;
} net;

/* A position-dependent network: out[c] = (c + 1) x + bias + 0.01 (v mod 5) + 0.001 start_0. */
static int predict(void *user, swi_batch *b) {
    net *m = user;
    m->calls++;
    if (m->fail) {
        swi_batch_set_error(b, m->fail);
        return 1;
    }
    const int n = swi_batch_count(b);
    const int64_t *roi = swi_batch_roi(b), vox = roi[0] * roi[1] * roi[2];
    const float *in = swi_batch_input(b);
    float *out = swi_batch_output(b, 0, CLASSES, roi);
    if (!out) return 1;
    for (int i = 0; i < n; i++)
        for (int64_t c = 0; c < CLASSES; c++)
            for (int64_t v = 0; v < vox; v++)
                out[(i * CLASSES + c) * vox + v] = (float)(c + 1) * in[i * vox + v] + m->bias +
                                                   0.01f * (float)(v % 5) +
                                                   0.001f * (float)swi_batch_start(b, i)[0];
    return 0;
}

static char dir[256];

static int count_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n++;
    if (d) closedir(d);
    return n;
}

static void spec_of(swi_job_spec *sp, const char *input, const char *output, const swi_predictor *preds,
                    int n) {
    swi_job_spec_init(sp);
    sp->inputs[sp->n_inputs++] = input;
    sp->output = output;
    sp->predictors = preds;
    sp->n_predictors = n;
    sp->classes = CLASSES;
    sp->roi[0] = sp->roi[1] = sp->roi[2] = ROI;
    sp->mode = SWI_BLEND_GAUSSIAN;
    sp->sw_batch = 2;
    sp->threads = 2;
    sp->keep_scores = 1;
    sp->quiet = 1;
}

/* The scores of swi_run on the voxels with the job's window, [CLASSES][size]. */
static float *engine_scores(const float *image, const int64_t size[3], const swi_predictor *pred) {
    swi_params p;
    swi_params_init(&p, 3);
    p.roi[0] = p.roi[1] = p.roi[2] = ROI;
    p.mode = SWI_BLEND_GAUSSIAN;
    p.sw_batch_size = 2;
    p.threads = 2;
    p.heads[0].channels = CLASSES; /* declared, as the job does: the plan (and its order) counts them */
    swi_tensor in = {
        .data = image, .batch = 1, .channels = 1, .dims = 3, .size = {size[0], size[1], size[2]}};
    const size_t bytes = (size_t)(CLASSES * size[0] * size[1] * size[2]) * sizeof(float);
    float *out = malloc(bytes);
    swi_ctx *ctx = swi_create();
    swi_output o[2];
    swi_output_init(&o[0], 0, SWI_REDUCE_ARGMAX);
    swi_output_init(&o[1], 0, SWI_REDUCE_NONE);
    o[1].dst = out;
    o[1].dst_bytes = bytes;
    swi_status st = out && ctx ? swi_run(ctx, &p, &in, pred, o, 2) : SWI_ERR_NOMEM;
    CHECK(st == SWI_OK, "swi_run: %s", ctx ? swi_last_error(ctx) : "no memory");
    swi_free(ctx);
    if (st != SWI_OK) {
        free(out);
        return NULL;
    }
    return out;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/swi_test_job_predictors_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char img[512], lab[512], err[SWI_JOB_ERRLEN];
    snprintf(img, sizeof img, "%s/image.nii", dir);
    snprintf(lab, sizeof lab, "%s/labels.nii.gz", dir);
    const int64_t size[3] = {30, 26, 34}, N = size[0] * size[1] * size[2];
    float *image = malloc((size_t)N * sizeof *image);
    uint8_t *truth = malloc((size_t)N);
    CHECK(image && truth && swi_phantom_generate(5, size, image, truth) == 0, "phantom");
    if (!image || !truth) return 1;
    swi_volume like;
    const double spacing[3] = {1, 1, 1};
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "%s", err);
    int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_volume_write_fd(fd, img, &like, image, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                              sizeof err) == SWI_OK,
          "%s", err);

    /* one predictor: the engine's scores, bitwise; labels written */
    net a = {0.25f, NULL, 0}, b = {-0.5f, NULL, 0};
    swi_predictor preds[2] = {{predict, &a}, {predict, &b}};
    swi_job_spec sp;
    spec_of(&sp, img, lab, preds, 1);
    swi_job *job = NULL;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK && job, "open: %s", err);
    swi_job_plan plan;
    CHECK(swi_job_plan_run(job, 0, &plan, err, sizeof err) == SWI_OK && plan.classes == CLASSES &&
              plan.members == 1 && plan.engine.roi[0] == ROI,
          "plan: %s (%lld classes)", err, (long long)plan.classes);
    char text[8192];
    swi_job_describe(job, &plan, text, sizeof text);
    CHECK(strstr(text, "model    the caller's predictor\n") && strstr(text, "reuse    off"), "describe: %s",
          text);
    swi_job_result r;
    CHECK(swi_job_run(job, &r, err, sizeof err) == SWI_OK, "run: %s", err);
    float *want = engine_scores(image, size, &preds[0]);
    CHECK(want && r.scores && r.classes == CLASSES &&
              memcmp(want, r.scores, (size_t)(CLASSES * N) * sizeof(float)) == 0,
          "one predictor: the job's scores are the engine's");
    struct stat st;
    CHECK(stat(lab, &st) == 0 && st.st_size > 0, "labels written");
    swi_job_free(job);
    swi_job_result_free(&r);
    free(want);
    unlink(lab);

    /* two with tta: the mean of their mirrors */
    spec_of(&sp, img, NULL, preds, 2);
    sp.tta = 1;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    CHECK(swi_job_plan_run(job, 0, &plan, err, sizeof err) == SWI_OK && plan.members == 2 &&
              plan.beside_bytes > 0,
          "plan: %s", err);
    CHECK(swi_job_run(job, &r, err, sizeof err) == SWI_OK, "run: %s", err);
    const int64_t roi[3] = {ROI, ROI, ROI};
    swi_predictor mirrors[2], mean;
    CHECK(swi_predictor_mirror(&preds[0], 7, CLASSES, 3, roi, 2, &mirrors[0], err, sizeof err) == SWI_OK &&
              swi_predictor_mirror(&preds[1], 7, CLASSES, 3, roi, 2, &mirrors[1], err, sizeof err) ==
                  SWI_OK &&
              swi_predictor_mean(mirrors, 2, CLASSES, 3, roi, 2, &mean, err, sizeof err) == SWI_OK,
          "%s", err);
    want = engine_scores(image, size, &mean);
    CHECK(want && r.scores && memcmp(want, r.scores, (size_t)(CLASSES * N) * sizeof(float)) == 0,
          "an ensemble with tta: the job's scores are the engine's on the mean of the mirrors");
    swi_predictor_mean_free(&mean);
    swi_predictor_mirror_free(&mirrors[0]);
    swi_predictor_mirror_free(&mirrors[1]);
    swi_job_free(job);
    swi_job_result_free(&r);
    free(want);

    /* a failing member: its message, nothing left */
    b.fail = "member 1 ran out of memory";
    spec_of(&sp, img, lab, preds, 2);
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK, "open: %s", err);
    CHECK(swi_job_run(job, NULL, err, sizeof err) == SWI_ERR_PREDICTOR &&
              strstr(err, "member 1 ran out of memory"),
          "failing member: %s", err);
    swi_job_free(job);
    CHECK(count_entries() == 3, "a failed job leaves nothing: %d entries", count_entries());
    b.fail = NULL;

    /* bad specs: usage errors */
    const char *why[] = {"classes", "--roi is required", "--head", "at most one ONNX model", "predictors"};
    for (int k = 0; k < 5; k++) {
        spec_of(&sp, img, lab, preds, 1);
        if (k == 0) sp.classes = 0;
        if (k == 1) sp.roi[0] = sp.roi[1] = sp.roi[2] = 0;
        if (k == 2) sp.head = 1;
        if (k == 3) sp.models[sp.n_models++] = "a.onnx", sp.models[sp.n_models++] = "b.onnx";
        if (k == 4) sp.predictors = NULL;
        job = (swi_job *)&sp;
        err[0] = '\0';
        CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_ERR_INVALID_ARG && !job &&
                  strstr(err, why[k]),
              "%s: refused (%s)", why[k], err);
    }
    swi_job_spec_init(&sp);
    sp.inputs[sp.n_inputs++] = img;
    sp.models[sp.n_models++] = "m.onnx";
    sp.classes = 2;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "classes goes"),
          "classes without predictors: %s", err);

    unlink(img);
    CHECK(count_entries() == 2, "only . and .. left: %d entries", count_entries());
    rmdir(dir);
    free(image);
    free(truth);
    return check_report("test_job_predictors");
}
