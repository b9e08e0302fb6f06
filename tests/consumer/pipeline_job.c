/*
 * pipeline_job.c -- swi_pipeline.h from a program of your own: a real-scan job (the model's
 * grid PIR at 1.5 mm, a two-model ensemble, the first model's card) through the installed
 * libswi_pipeline, its labels compared byte for byte with `swi segment` given the same
 * options; then, when Zarr is built in, the volume as a Zarr store segmented in three parts
 * (--shard I/3), each a job, compared with the three parts `swi segment` writes.
 *
 *   pipeline_job E2E_DIR DEMO_MODEL SWI WORK
 *
 * E2E_DIR holds volume.nii.gz and unet.onnx; DEMO_MODEL is models/demo.onnx (its card,
 * demo.json, beside it); SWI is the swi command of the same build; WORK a folder to write
 * in. Exit status 0 when the labels agree.
 */
#include <swi.h>
#include <swi_io.h>
#include <swi_pipeline.h>
#include <swi_store.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *msg) {
    fprintf(stderr, "pipeline_job: %s: %s\n", what, msg);
    return 1;
}

static void on_message(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "pipeline_job: %s\n", line);
}

/* The volume x (size) as the float32 Zarr store `name`. */
static int write_store(const char *name, const int64_t size[3], const float *x) {
    char err[512];
    swi_store_spec spec;
    swi_store_spec_init(&spec);
    memcpy(spec.size, size, sizeof spec.size);
    spec.planes = 1;
    spec.dtype = SWI_DTYPE_FLOAT32;
    const int64_t lo[3] = {0, 0, 0};
    swi_store_writer *w = NULL;
    if (swi_store_create(name, &spec, SWI_STORE_FORCE, 0, 1, lo, size, &w, err, sizeof err) != SWI_OK)
        return fail(name, err);
    swi_region r;
    memset(&r, 0, sizeof r);
    r.dims = 3;
    memcpy(r.hi, size, 3 * sizeof *size);
    r.channels = 1;
    r.dtype = SWI_DTYPE_FLOAT32;
    r.data = x;
    if (swi_store_on_region(w, &r) != 0) {
        swi_store_abort(w);
        return fail(name, "the region was refused");
    }
    if (swi_store_commit(w, err, sizeof err) != SWI_OK) return fail(name, err);
    return 0;
}

/* The labels of a store, whole, as floats (malloc'd), or NULL. */
static float *read_store(const char *name, int64_t size[3]) {
    char err[512];
    swi_store *st = NULL;
    if (swi_store_open(name, &st, err, sizeof err) != SWI_OK) {
        fail(name, err);
        return NULL;
    }
    swi_store_size(st, size);
    const int64_t lo[3] = {0, 0, 0};
    float *x = malloc((size_t)(size[0] * size[1] * size[2]) * sizeof *x);
    if (!x || swi_store_read_box(st, lo, size, x, err, sizeof err) != SWI_OK) {
        fail(name, x ? err : "out of memory");
        free(x);
        x = NULL;
    }
    swi_store_close(st);
    return x;
}

/* The volume as a store, segmented part by part by jobs and by swi segment: equal labels. */
static int store_parts(const char *volume, const char *demo, const char *member, const char *swi,
                       const char *work) {
    char in[4096], job_out[4096], cli_out[4096], cmd[20000], err[SWI_JOB_ERRLEN];
    snprintf(in, sizeof in, "%s/volume.zarr", work);
    snprintf(job_out, sizeof job_out, "%s/job_labels.zarr", work);
    snprintf(cli_out, sizeof cli_out, "%s/cli_labels.zarr", work);
    swi_volume v;
    if (swi_volume_open(volume, &v, err, sizeof err) != SWI_OK) return fail("open", err);
    float *x = malloc((size_t)swi_volume_voxels(&v) * sizeof *x);
    if (!x || swi_volume_read(&v, x, NULL, err, sizeof err) != SWI_OK)
        return fail("read", x ? err : "memory");
    int rc = write_store(in, v.size, x);
    free(x);
    if (rc) return rc;
    for (int part = 0; part < 3; part++) {
        swi_job_spec spec;
        swi_job_spec_init(&spec);
        spec.models[spec.n_models++] = demo;
        spec.models[spec.n_models++] = member;
        spec.inputs[spec.n_inputs++] = in;
        spec.output = job_out;
        spec.shard_part = part;
        spec.shard_parts = 3;
        spec.force = 1;
        spec.quiet = 1;
        swi_job *job = NULL;
        if (swi_job_open(&spec, NULL, &job, err, sizeof err) != SWI_OK ||
            swi_job_run(job, NULL, err, sizeof err) != SWI_OK)
            return fail("store job", err);
        swi_job_free(job);
        snprintf(cmd, sizeof cmd,
                 "'%s' segment --quiet --force --model '%s' --model '%s' --input '%s' --shard %d/3 "
                 "--output '%s'",
                 swi, demo, member, in, part, cli_out);
        if (system(cmd) != 0) return fail("swi segment", cmd);
    }
    int64_t a[3], b[3];
    float *ja = read_store(job_out, a), *cb = read_store(cli_out, b);
    if (!ja || !cb || memcmp(a, b, sizeof a) != 0) return fail("stores", "unreadable, or of two sizes");
    const int64_t n = a[0] * a[1] * a[2];
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += ja[i] != cb[i];
    free(ja);
    free(cb);
    if (differ) {
        fprintf(stderr, "pipeline_job: %lld of %lld store labels differ from swi segment's\n",
                (long long)differ, (long long)n);
        return 1;
    }
    printf("pipeline_job: %lld store labels equal to swi segment's (three parts, an ensemble of 2)\n",
           (long long)n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) return fail("usage", "pipeline_job E2E_DIR DEMO_MODEL SWI WORK");
    char volume[4096], member[4096], out[4096], cli_out[4096], cmd[20000], err[SWI_JOB_ERRLEN];
    snprintf(volume, sizeof volume, "%s/volume.nii.gz", argv[1]);
    snprintf(member, sizeof member, "%s/unet.onnx", argv[1]);
    snprintf(out, sizeof out, "%s/job_labels.nii.gz", argv[4]);
    snprintf(cli_out, sizeof cli_out, "%s/cli_labels.nii.gz", argv[4]);

    swi_job_spec spec;
    swi_job_spec_init(&spec);
    spec.models[spec.n_models++] = argv[2];
    spec.models[spec.n_models++] = member;
    spec.inputs[spec.n_inputs++] = volume;
    spec.output = out;
    spec.orientation = "PIR";
    spec.spacing[0] = spec.spacing[1] = spec.spacing[2] = 1.5;
    spec.force = 1;
    swi_job_hooks hooks = {on_message, NULL, NULL, NULL, NULL};
    swi_job *job = NULL;
    swi_job_result r;
    memset(&r, 0, sizeof r);
    if (swi_job_open(&spec, &hooks, &job, err, sizeof err) != SWI_OK) return fail("open", err);
    swi_job_plan plan;
    if (swi_job_plan_run(job, 0, &plan, err, sizeof err) != SWI_OK) return fail("plan", err);
    if (plan.members != 2 || plan.engine.roi[0] != 32)
        return fail("plan", "expected an ensemble of 2 on the card's 32^3 window");
    if (swi_job_run(job, &r, err, sizeof err) != SWI_OK) return fail("run", err);
    swi_job_free(job);

    snprintf(cmd, sizeof cmd,
             "'%s' segment --quiet --force --model '%s' --model '%s' --input '%s' --orientation PIR "
             "--spacing 1.5 --output '%s'",
             argv[3], argv[2], member, volume, cli_out);
    if (system(cmd) != 0) return fail("swi segment", cmd);
    swi_volume v;
    if (swi_volume_open(cli_out, &v, err, sizeof err) != SWI_OK) return fail("open", err);
    const int64_t n = swi_volume_voxels(&v);
    if (n != r.size[0] * r.size[1] * r.size[2]) return fail(cli_out, "another grid than the job's");
    float *x = malloc((size_t)n * sizeof *x);
    if (!x || swi_volume_read(&v, x, NULL, err, sizeof err) != SWI_OK)
        return fail("read", x ? err : "memory");
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t l = r.label_bytes == 1 ? ((const uint8_t *)r.labels)[i] : ((const uint16_t *)r.labels)[i];
        differ += (float)l != x[i];
    }
    free(x);
    swi_job_result_free(&r);
    if (differ) {
        fprintf(stderr, "pipeline_job: %lld of %lld labels differ from swi segment's\n", (long long)differ,
                (long long)n);
        return 1;
    }
    printf("pipeline_job: %lld labels equal to swi segment's (PIR, 1.5 mm, an ensemble of 2 with a card)\n",
           (long long)n);
    if (!swi_store_available(SWI_STORE_ZARR)) {
        printf("pipeline_job: no Zarr in this build; the store parts are not compared\n");
        return 0;
    }
    return store_parts(volume, argv[2], member, argv[3], argv[4]);
}
