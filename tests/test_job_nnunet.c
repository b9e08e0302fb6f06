/*
 * test_job_nnunet.c -- swi_pipeline.h with an nnU-Net model directory (fold_N.onnx and
 * nnunet.json, here the bundled demo network as both folds): a job opened, planned,
 * described and run (the input's grid and affine kept, background outside the crop box,
 * one fold equal to two identical folds, the probabilities' file); the refusals of the spec
 * and of the card, each naming the flag, the key or the file.
 *
 * test_job_nnunet MODEL.onnx
 */
#define _GNU_SOURCE
#include "check.h"
#include "phantom.h"
#include "swi_io.h"
#include "swi_pipeline.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void write_card(const char *model_dir, const char *dims, const char *models) {
    char path[512];
    snprintf(path, sizeof path, "%s/nnunet.json", model_dir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f,
            "{\"format\": \"swi-nnunet\", \"version\": 1, \"configuration\": \"3d_fullres\",\n"
            " \"dataset_name\": \"Dataset999_Demo\", \"folds\": [0, 1], \"models\": %s,\n"
            " \"dims\": %s, \"patch_size\": [32, 32, 32], \"window\": [32, 32, 32],\n"
            " \"spacing\": [1.0, 1.0, 1.0], \"image_reader_writer\": \"SimpleITKIO\",\n"
            " \"transpose_forward\": [0, 1, 2], \"transpose_backward\": [0, 1, 2],\n"
            " \"channels\": [{\"index\": 0, \"name\": \"CT\", \"normalization\": \"NoNormalization\",\n"
            "   \"use_mask_for_norm\": false}],\n"
            " \"resampling\": {\"resampling_fn_data\": {\"fn\": \"resample_data_or_seg_to_shape\",\n"
            "   \"kwargs\": {\"order\": 3, \"order_z\": 0, \"force_separate_z\": null}},\n"
            "  \"resampling_fn_probabilities\": {\"fn\": \"resample_data_or_seg_to_shape\",\n"
            "   \"kwargs\": {\"order\": 1, \"order_z\": 0, \"force_separate_z\": null}}},\n"
            " \"mirroring_axes\": [0, 1, 2], \"tile_step_size\": 0.5, \"sigma_scale\": 0.125,\n"
            " \"file_ending\": \".nii.gz\", \"has_regions\": false, \"num_segmentation_heads\": 4}\n",
            models, dims);
    fclose(f);
}

static void spec_of(swi_job_spec *sp, const char *model, const char *input, const char *output) {
    swi_job_spec_init(sp);
    sp->models[sp->n_models++] = model;
    sp->inputs[sp->n_inputs++] = input;
    sp->output = output;
    sp->threads = 2;
    sp->quiet = 1;
}

/* The job's status and message when it is opened (and, if that works, run). */
static swi_status try_job(const swi_job_spec *sp, char *err, size_t n) {
    swi_job *job = NULL;
    swi_status st = swi_job_open(sp, NULL, &job, err, n);
    if (st == SWI_OK) st = swi_job_run(job, NULL, err, n);
    swi_job_free(job);
    return st;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_job_nnunet MODEL.onnx\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "/tmp/swi_test_nnunet_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char mdir[300], img[300], lab[300], lab1[300], npz[300], props[300], f0[320], f1[320],
        err[SWI_JOB_ERRLEN];
    snprintf(mdir, sizeof mdir, "%s/model", dir);
    snprintf(img, sizeof img, "%s/case_0000.nii.gz", dir);
    snprintf(lab, sizeof lab, "%s/case.nii.gz", dir);
    snprintf(lab1, sizeof lab1, "%s/one.nii.gz", dir);
    snprintf(npz, sizeof npz, "%s/case.npz", dir);
    snprintf(props, sizeof props, "%s/case.json", dir);
    CHECK(mkdir(mdir, 0777) == 0, "mkdir");
    snprintf(f0, sizeof f0, "%s/fold_0.onnx", mdir);
    snprintf(f1, sizeof f1, "%s/fold_1.onnx", mdir);
    CHECK(symlink(argv[1], f0) == 0 && symlink(argv[1], f1) == 0, "symlink");
    write_card(mdir, "3", "[\"fold_0.onnx\", \"fold_1.onnx\"]");

    /* the phantom with a zero border: the crop box leaves 3 voxels out on every side */
    const int64_t size[3] = {40, 36, 44}, N = size[0] * size[1] * size[2];
    float *image = malloc((size_t)N * sizeof *image);
    uint8_t *truth = malloc((size_t)N);
    CHECK(image && truth && swi_phantom_generate(11, size, image, truth) == 0, "phantom");
    for (int64_t i = 0; i < size[0]; i++)
        for (int64_t j = 0; j < size[1]; j++)
            for (int64_t k = 0; k < size[2]; k++)
                if (i < 3 || j < 3 || k < 3 || i >= size[0] - 3 || j >= size[1] - 3 || k >= size[2] - 3)
                    image[(i * size[1] + j) * size[2] + k] = 0;
    swi_volume like;
    const double spacing[3] = {1, 1, 1};
    CHECK(swi_volume_make(&like, size, spacing, err, sizeof err) == SWI_OK, "%s", err);
    int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(swi_volume_write_fd(fd, img, &like, image, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                              sizeof err) == SWI_OK,
          "%s", err);

    /* open, plan, describe, run */
    swi_job_spec sp;
    spec_of(&sp, mdir, img, lab);
    sp.save_probabilities = 1;
    swi_job *job = NULL;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK && job, "open: %s", err);
    int channels = 0;
    const char *ending = NULL;
    CHECK(swi_job_nnunet(job, &channels, &ending) == 1 && channels == 1 && ending &&
              !strcmp(ending, ".nii.gz"),
          "swi_job_nnunet");
    swi_job_plan plan;
    CHECK(swi_job_plan_run(job, 0, &plan, err, sizeof err) == SWI_OK, "plan: %s", err);
    CHECK(plan.fits && plan.members == 2 && plan.classes == 4 && plan.size[0] == 38 && plan.size[1] == 30 &&
              plan.size[2] == 34,
          "plan: fits %d, members %d, classes %lld, model grid %lld", plan.fits, plan.members,
          (long long)plan.classes, (long long)plan.size[0]);
    char text[8192];
    size_t len = swi_job_describe(job, &plan, text, sizeof text);
    CHECK(len > 0 && len < sizeof text && strstr(text, "crop to the nonzero box [3:37, 3:33, 3:41]") &&
              strstr(text, "mirror   axes 0 1 2 (8 network calls a window)") && strstr(text, "folds 0,1"),
          "describe: %s", text);
    swi_job_result r;
    CHECK(swi_job_run(job, &r, err, sizeof err) == SWI_OK, "run: %s", err);
    CHECK(r.labels && r.size[0] == size[0] && r.size[1] == size[1] && r.size[2] == size[2] &&
              r.label_bytes == 1,
          "the input's grid");
    int outside = 0, inside = 0;
    for (int64_t i = 0; r.labels && i < size[0]; i++)
        for (int64_t j = 0; j < size[1]; j++)
            for (int64_t k = 0; k < size[2]; k++) {
                const uint8_t l = ((const uint8_t *)r.labels)[(i * size[1] + j) * size[2] + k];
                if (i < 3 || j < 3 || k < 3 || i >= size[0] - 3 || j >= size[1] - 3 || k >= size[2] - 3)
                    outside += l != 0;
                else
                    inside += l != 0;
            }
    CHECK(outside == 0 && inside > 0, "background outside the box: %d outside, %d inside", outside, inside);
    swi_volume out;
    CHECK(swi_volume_open(lab, &out, err, sizeof err) == SWI_OK, "%s", err);
    CHECK(!memcmp(out.affine, like.affine, sizeof out.affine) && out.size[2] == size[2], "affine kept");
    struct stat st;
    CHECK(stat(npz, &st) == 0 && st.st_size > 0 && stat(props, &st) == 0, "the .npz and .json");
    swi_job_free(job);

    /* nnU-Net's tile step itself reaches the grid: at 0.0375 the target step is 1.2 voxels and
     * (38 - 32) / 1.2 is 5 in decimal, nnU-Net's 6 starts along 38 (1 - (1 - 0.0375) would
     * count 7); 1 along 32 (30 padded), 3 along 34 (tests/data/golden-nnunet/starts.txt) */
    spec_of(&sp, mdir, img, lab);
    sp.tile_step = 0.0375;
    job = NULL;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK &&
              swi_job_plan_run(job, 0, &plan, err, sizeof err) == SWI_OK,
          "plan at tile step 0.0375: %s", err);
    CHECK(plan.engine.windows_per_axis[0] == 6 && plan.engine.windows_per_axis[1] == 1 &&
              plan.engine.windows_per_axis[2] == 3 && plan.engine.windows_total == 18,
          "tile step 0.0375: %lld x %lld x %lld windows, nnU-Net 6 x 1 x 3",
          (long long)plan.engine.windows_per_axis[0], (long long)plan.engine.windows_per_axis[1],
          (long long)plan.engine.windows_per_axis[2]);
    swi_job_free(job);

    /* one fold of two identical ones, mirroring off: a second job, the same labels */
    spec_of(&sp, mdir, img, lab1);
    sp.folds = "1";
    swi_job_result r1;
    job = NULL;
    CHECK(swi_job_open(&sp, NULL, &job, err, sizeof err) == SWI_OK &&
              swi_job_run(job, &r1, err, sizeof err) == SWI_OK,
          "one fold: %s", err);
    CHECK(r1.labels && r.labels && !memcmp(r1.labels, r.labels, (size_t)N), "one fold = two identical folds");
    swi_job_free(job);
    swi_job_result_free(&r1);
    swi_job_result_free(&r);

    /* refusals: the spec's flags, the folds, the card, a fold's file */
    struct {
        const char *what, *want;
        swi_status st;
    } cases[] = {
        {"orientation", "--orientation does not apply to an nnU-Net model", SWI_ERR_INVALID_ARG},
        {"spacing", "--spacing does not apply", SWI_ERR_INVALID_ARG},
        {"clip", "--clip does not apply", SWI_ERR_INVALID_ARG},
        {"roi", "--roi does not apply", SWI_ERR_INVALID_ARG},
        {"mode", "--mode does not apply", SWI_ERR_INVALID_ARG},
        {"tta", "--tta does not apply", SWI_ERR_INVALID_ARG},
        {"scores", "--scores does not apply", SWI_ERR_INVALID_ARG},
        {"folds", "--folds 0,7: the model has no fold 7", SWI_ERR_INVALID_ARG},
        {"tile", "--tile-step-size must be in (0, 1]", SWI_ERR_INVALID_ARG},
        {"probs", "--save-probabilities needs --output", SWI_ERR_INVALID_ARG},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        spec_of(&sp, mdir, img, lab1);
        sp.force = 1;
        const char *w = cases[c].what;
        if (!strcmp(w, "orientation")) sp.orientation = "RAS";
        if (!strcmp(w, "spacing")) sp.spacing[0] = sp.spacing[1] = sp.spacing[2] = 2;
        if (!strcmp(w, "clip")) sp.clip_given = 1;
        if (!strcmp(w, "roi")) sp.roi[0] = sp.roi[1] = sp.roi[2] = 16;
        if (!strcmp(w, "mode")) sp.mode = SWI_BLEND_GAUSSIAN;
        if (!strcmp(w, "tta")) sp.tta = 1;
        if (!strcmp(w, "scores")) sp.scores = npz;
        if (!strcmp(w, "folds")) sp.folds = "0,7";
        if (!strcmp(w, "tile")) sp.tile_step = 1.5;
        if (!strcmp(w, "probs")) {
            sp.output = NULL;
            sp.save_probabilities = 1;
        }
        swi_status got = try_job(&sp, err, sizeof err);
        CHECK(got == cases[c].st && strstr(err, cases[c].want), "%s: %s (%s)", w, err, swi_status_name(got));
    }
    write_card(mdir, "4", "[\"fold_0.onnx\", \"fold_1.onnx\"]");
    spec_of(&sp, mdir, img, lab1);
    CHECK(try_job(&sp, err, sizeof err) == SWI_ERR_IO && strstr(err, "nnunet.json: \"dims\" must be 2 or 3"),
          "dims: %s", err);
    write_card(mdir, "3", "[\"fold_0.onnx\", \"fold_1.onnx\"]");
    CHECK(unlink(f1) == 0, "unlink");
    CHECK(try_job(&sp, err, sizeof err) == SWI_ERR_IO && strstr(err, "fold 1's model") &&
              strstr(err, "is missing"),
          "missing fold: %s", err);
    spec_of(&sp, f0, img, lab1);
    sp.no_mirroring = 1;
    CHECK(try_job(&sp, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "--disable-tta applies to an nnU-Net model directory"),
          "an ONNX model with --disable-tta: %s", err);

    free(image);
    free(truth);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("test_job_nnunet");
}
