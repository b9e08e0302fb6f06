/*
 * consumer.c -- libswi + swi_ort + swi_io from a program of your own: segment a NIfTI
 * volume with an ONNX model, 32^3 windows, gaussian blending, 4 windows per call.
 *
 *   consumer E2E_DIR
 *
 * As a test (install_consumer) it builds against an installed libswi and checks the
 * blended scores against E2E_DIR/logits.f32 (within 1e-4 + 1e-4|x|) and the argmax
 * against E2E_DIR/labels.nii.gz (the lowest index wins ties; voxels whose two best
 * reference scores are closer than 1e-4 are not judged). Exit status 0 when both hold.
 */
#include <swi.h>
#include <swi_io.h>
#include <swi_ort.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, const char *msg) {
    fprintf(stderr, "consumer: %s: %s\n", what, msg);
    return 1;
}

/* The whole volume as float32 [ni][nj][nk]; NULL on failure (message printed). */
static float *read_volume(const char *path, swi_volume *v) {
    char err[512];
    if (swi_volume_open(path, v, err, sizeof err) != SWI_OK) {
        fail("open", err);
        return NULL;
    }
    float *x = malloc((size_t)swi_volume_voxels(v) * sizeof *x);
    if (!x) {
        fail(path, "out of memory");
        return NULL;
    }
    if (swi_volume_read(v, x, NULL, err, sizeof err) != SWI_OK) {
        free(x);
        fail("read", err);
        return NULL;
    }
    return x;
}

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *d = malloc(n * sizeof *d);
    if (d && fread(d, sizeof *d, n, f) != n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    return d;
}

/* Compare scores [C][N] and labels [N] with the reference; returns the number of misses. */
static int64_t check(const float *scores, const uint8_t *labels, const float *ref, const float *ref_labels,
                     int64_t C, int64_t N, double *max_err) {
    int64_t bad = 0;
    *max_err = 0;
    for (int64_t x = 0; x < C * N; x++) {
        double e = fabs((double)scores[x] - ref[x]);
        *max_err = e > *max_err ? e : *max_err;
        bad += e > 1e-4 + 1e-4 * fabs((double)ref[x]);
    }
    for (int64_t v = 0; v < N; v++) {
        float best = -INFINITY, second = -INFINITY;
        for (int64_t c = 0; c < C; c++) {
            float s = ref[c * N + v];
            if (s > best)
                second = best, best = s;
            else if (s > second)
                second = s;
        }
        if (best - second >= 1e-4f && labels[v] != (uint8_t)ref_labels[v]) bad++;
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer E2E_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[4096], err[512];

    swi_volume vol;
    snprintf(path, sizeof path, "%s/volume.nii.gz", dir);
    float *image = read_volume(path, &vol);
    if (!image) return 1;

    swi_ort_options opt;
    swi_ort_options_init(&opt);
    swi_ort_model *model = NULL;
    snprintf(path, sizeof path, "%s/unet.onnx", dir);
    if (swi_ort_open(path, &opt, &model, err, sizeof err) != SWI_OK) return fail("model", err);
    swi_ort_window win;
    swi_ort_window_init(&win, 1);
    win.roi[0] = win.roi[1] = win.roi[2] = 32;
    swi_head_spec head;
    if (swi_ort_prepare(model, &win, &head, err, sizeof err) != SWI_OK) return fail("model", err);

    swi_params p;
    swi_params_init(&p, 3);
    for (int a = 0; a < 3; a++) p.roi[a] = win.roi[a];
    p.mode = SWI_BLEND_GAUSSIAN;
    p.sw_batch_size = 4;
    p.n_heads = 1;
    p.heads[0] = head;
    swi_tensor in = {
        .data = image, .batch = 1, .channels = 1, .dims = 3, .size = {vol.size[0], vol.size[1], vol.size[2]}};
    swi_output outs[2];
    swi_output_init(&outs[0], 0, SWI_REDUCE_ARGMAX);
    swi_output_init(&outs[1], 0, SWI_REDUCE_NONE);
    swi_predictor net = swi_ort_predictor(model);
    swi_ctx *ctx = swi_create();
    if (!ctx) return fail("swi_create", "out of memory");
    swi_status st = swi_run(ctx, &p, &in, &net, outs, 2);
    if (st != SWI_OK) return fail(swi_status_name(st), swi_last_error(ctx));

    const int64_t N = swi_volume_voxels(&vol), C = swi_result_channels(ctx, 0);
    size_t lbytes = 0, sbytes = 0;
    const uint8_t *labels = swi_result(ctx, 0, &lbytes);
    const float *scores = swi_result(ctx, 1, &sbytes);
    if (!labels || !scores || lbytes != (size_t)N || sbytes != (size_t)(C * N) * sizeof(float))
        return fail("results", "unexpected sizes");

    snprintf(path, sizeof path, "%s/logits.f32", dir);
    float *ref = read_f32(path, (size_t)(C * N));
    if (!ref) return fail(path, "cannot read");
    swi_volume lv;
    snprintf(path, sizeof path, "%s/labels.nii.gz", dir);
    float *ref_labels = read_volume(path, &lv);
    if (!ref_labels) return 1;
    if (swi_volume_voxels(&lv) != N) return fail(path, "not the volume's size");
    double max_err;
    int64_t bad = check(scores, labels, ref, ref_labels, C, N, &max_err);
    printf("consumer: %lldx%lldx%lld voxels, %lld classes, max |score - reference| %.3g, "
           "%lld mismatches\n",
           (long long)vol.size[0], (long long)vol.size[1], (long long)vol.size[2], (long long)C, max_err,
           (long long)bad);
    free(ref_labels), free(ref), free(image);
    swi_free(ctx);
    swi_ort_close(model);
    return bad == 0 ? 0 : 1;
}
