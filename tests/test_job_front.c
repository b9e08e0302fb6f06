/* test_job_front.c -- what a front door asks of the pipeline before a job:
 * swi_job_check_names (the spec's names checked alone, nothing opened: the files named
 * here do not exist) and swi_job_card_text (argv[1]: a model with a card beside it). */
#include "swi_pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    expect("no spec", NULL, SWI_ERR_INVALID_ARG, "spec is required");
    if (swi_job_check_names(&s, NULL, 0) != SWI_ERR_INVALID_ARG) {
        fprintf(stderr, "FAIL no err buffer\n");
        failures++;
    }
    if (failures) return 1;
    printf("job_front: ok\n");
    return 0;
}
