/* test_job_front.c -- what a front door asks of the pipeline before a job:
 * swi_job_check_names (the spec's names checked alone, nothing opened: the files named
 * here do not exist), swi_job_card_text (argv[1]: a model with a card beside it), and a
 * program's own outputs checked and written as a job's (swi_job_outputs_apart,
 * swi_job_check_output, swi_job_write_volume) in a temporary folder. */
#define _GNU_SOURCE
#include "swi_pipeline.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

/* The check of spec gives want (and, for a failure, a message containing `has`). */
static void expect(const char *what, const swi_job_spec *spec, swi_status want, const char *has) {
    char err[SWI_JOB_ERRLEN];
    swi_status st = swi_job_check_names(spec, err, sizeof err);
    if (st != want || (want == SWI_OK ? err[0] != '\0' : strstr(err, has) == NULL)) {
        fprintf(stderr, "FAIL %s: status %d (want %d), '%s'\n", what, (int)st, (int)want, err);
        failures++;
    }
}

static void base(swi_job_spec *s) {
    swi_job_spec_init(s);
    s->models[s->n_models++] = "model.onnx";
    s->inputs[s->n_inputs++] = "ct.nii.gz";
    s->output = "seg.nii.gz";
}

/* The card of model as text: "card     SOURCE" first, a class line among the others. */
static void card_text(const char *model) {
    char err[SWI_JOB_ERRLEN], *text = NULL;
    swi_status st = swi_job_card_text(model, &text, err, sizeof err);
    if (st != SWI_OK || !text || strncmp(text, "card     ", 9) != 0 || !strstr(text, "\n  class 0 ")) {
        fprintf(stderr, "FAIL card text of %s: status %d, '%s', text '%s'\n", model, (int)st, err,
                text ? text : "(none)");
        failures++;
    }
    free(text);
    if (swi_job_card_text(NULL, &text, err, sizeof err) != SWI_ERR_INVALID_ARG || text) {
        fprintf(stderr, "FAIL card text of no model\n");
        failures++;
    }
}

/* st is want, with a message containing `has` (SWI_OK: none). */
static void expect_st(const char *what, swi_status st, swi_status want, const char *err, const char *has) {
    if (st != want || (want == SWI_OK ? err[0] != '\0' : strstr(err, has) == NULL)) {
        fprintf(stderr, "FAIL %s: status %d (want %d), '%s'\n", what, (int)st, (int)want, err);
        failures++;
    }
}

/* Entries of dir (hidden ones: temporaries, too). */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

static void own_outputs(void) {
    char dir[] = "/tmp/swi_job_front_XXXXXX", in[256], same[256], sub[256], out[256], err[SWI_JOB_ERRLEN];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "FAIL mkdtemp\n");
        failures++;
        return;
    }
    snprintf(in, sizeof in, "%s/m.onnx", dir);
    snprintf(same, sizeof same, "%s/./m.onnx", dir);
    snprintf(sub, sizeof sub, "%s/series", dir);
    snprintf(out, sizeof out, "%s/v.nii", dir);
    FILE *f = fopen(in, "w");
    if (!f || fputs("model", f) < 0 || fclose(f) != 0 || mkdir(sub, 0777) != 0) {
        fprintf(stderr, "FAIL set up %s\n", dir);
        failures++;
        return;
    }
    swi_job_path ins[2] = {{"--model", in}, {"--input", sub}},
                 outs[2] = {{"--output", same}, {"--scores", NULL}};
    expect_st("apart: the model under another name", swi_job_outputs_apart(ins, 2, outs, 1, err, sizeof err),
              SWI_ERR_IO, err, "is the same file as --model");
    char inside[300];
    snprintf(inside, sizeof inside, "%s/new/x.nii", sub);
    outs[0].path = inside;
    expect_st("apart: inside an input folder", swi_job_outputs_apart(ins, 2, outs, 2, err, sizeof err),
              SWI_ERR_IO, err, "lies inside --input");
    outs[0].path = out;
    outs[1].path = out;
    expect_st("apart: two outputs one file", swi_job_outputs_apart(ins, 2, outs, 2, err, sizeof err),
              SWI_ERR_IO, err, "give each output its own name");
    expect_st("apart", swi_job_outputs_apart(ins, 2, outs, 1, err, sizeof err), SWI_OK, err, NULL);
    expect_st("check: new", swi_job_check_output(out, 0, err, sizeof err), SWI_OK, err, NULL);
    expect_st("check: existing", swi_job_check_output(in, 0, err, sizeof err), SWI_ERR_IO, err,
              "already exists");
    expect_st("check: existing, force", swi_job_check_output(in, 1, err, sizeof err), SWI_OK, err, NULL);
    expect_st("check: a folder", swi_job_check_output(sub, 1, err, sizeof err), SWI_ERR_IO, err,
              "is a directory");
    if (swi_io_available(SWI_IO_NIFTI)) {
        swi_volume like;
        const int64_t size[3] = {4, 3, 2};
        const double spacing[3] = {1, 1, 1};
        float x[24];
        for (int i = 0; i < 24; i++) x[i] = (float)i;
        err[0] = '\0'; /* swi_io's calls leave err as it was when they succeed */
        expect_st("make", swi_volume_make(&like, size, spacing, err, sizeof err), SWI_OK, err, NULL);
        expect_st("write",
                  swi_job_write_volume(out, 0, &like, x, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                                       sizeof err),
                  SWI_OK, err, NULL);
        swi_volume v;
        float back[24] = {0};
        expect_st("read back", swi_volume_open(out, &v, err, sizeof err), SWI_OK, err, NULL);
        expect_st("read back", swi_volume_read(&v, back, NULL, err, sizeof err), SWI_OK, err, NULL);
        if (memcmp(back, x, sizeof x) != 0) {
            fprintf(stderr, "FAIL the written volume's voxels\n");
            failures++;
        }
        expect_st("write over, no force",
                  swi_job_write_volume(out, 0, &like, x, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                                       sizeof err),
                  SWI_ERR_IO, err, "already exists");
        expect_st("write over, force",
                  swi_job_write_volume(out, 1, &like, x, SWI_DTYPE_FLOAT32, SWI_IO_IMAGE, 1, 1, NULL, err,
                                       sizeof err),
                  SWI_OK, err, NULL);
        if (entries(dir) != 3) {
            fprintf(stderr, "FAIL %s holds %d entries, not m.onnx, series and v.nii\n", dir, entries(dir));
            failures++;
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    if (argc > 1) card_text(argv[1]);
    swi_job_spec s;
    base(&s);
    expect("volume file", &s, SWI_OK, NULL);
    s.output = "seg.zarr";
    expect("store output", &s, SWI_OK, NULL);
    s.output = "seg.png";
    expect("unknown suffix", &s, SWI_ERR_INVALID_ARG, "--output 'seg.png': the name must end in .nii");
    /* the names classified once (swi_volume_format_of, swi_store_kind_of) */
    s.output = "SEG.NII.GZ";
    expect("suffix in capitals", &s, SWI_OK, NULL);
    s.output = "seg.dcm";
    expect("DICOM SEG", &s, SWI_OK, NULL);
    s.output = "seg.nhdr";
    expect("read-only format", &s, SWI_ERR_INVALID_ARG, "--output 'seg.nhdr': the name must end in .nii");
    s.output = "seg.gz";
    expect(".gz alone", &s, SWI_ERR_INVALID_ARG, "--output 'seg.gz': the name must end in .nii");
    s.output = "run.nii.gz/seg";
    expect("suffix of a directory", &s, SWI_ERR_INVALID_ARG, "the name must end in .nii");
    s.output = "seg.h5:/labels.nii";
    expect("a store named like a file", &s, SWI_OK, NULL);
    base(&s);
    s.scores = "scores.mhd";
    expect("read-only scores", &s, SWI_ERR_INVALID_ARG, "--scores 'scores.mhd': the name must end in .nii");
    base(&s);
    s.output = "seg.zarr";
    s.scores = "scores.nii.gz";
    expect("mixed outputs", &s, SWI_ERR_INVALID_ARG, "write both to stores or both to NIfTI");
    base(&s);
    s.inputs[s.n_inputs++] = "t2.zarr";
    expect("mixed inputs", &s, SWI_ERR_INVALID_ARG, "not a mix");
    base(&s);
    s.inputs[0] = "ct.zarr";
    s.zscore = 1;
    expect("zscore on a store", &s, SWI_ERR_INVALID_ARG, "--zscore needs the whole volume");
    base(&s);
    s.output = "seg.ome.zarr";
    s.preview = "p.png";
    expect("preview of a store", &s, SWI_ERR_INVALID_ARG, "--preview needs the whole label map");
    base(&s);
    s.shard_part = 0;
    s.shard_parts = 2;
    expect("shard of a file", &s, SWI_ERR_INVALID_ARG, "--shard writes parts of shared stores");
    s.output = "seg.h5:/labels";
    expect("shard of a store", &s, SWI_OK, NULL);
    s.shard_grid[0] = 3, s.shard_grid[1] = 1, s.shard_grid[2] = 1;
    expect("grid of other parts", &s, SWI_ERR_INVALID_ARG, "");
    s.shard_collective = 1; /* the parts are MPI ranks */
    expect("grid of other ranks", &s, SWI_ERR_INVALID_ARG,
           "under mpirun the ranks are the boxes of --shard-grid 3x1x1");
    s.shard_collective = 0;
    expect("no spec", NULL, SWI_ERR_INVALID_ARG, "spec is required");
    if (swi_job_check_names(&s, NULL, 0) != SWI_ERR_INVALID_ARG) {
        fprintf(stderr, "FAIL no err buffer\n");
        failures++;
    }
    own_outputs();
    if (failures) return 1;
    printf("job_front: ok\n");
    return 0;
}
