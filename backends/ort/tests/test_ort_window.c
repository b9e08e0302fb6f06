/*
 * test_ort_window.c -- swi_ort and swi_io without the engine: run the e2e U-Net on the
 * corner window of the e2e volume and compare with the reference logits where only that
 * window covers the volume (there the blended result is the window's own prediction).
 * Also checks tta against a hand-made average of mirrored runs, and that a batch of
 * several windows equals the windows run one by one.
 *
 *   test_ort_window E2E_DIR
 */
#include "ort_internal.h"
#include "ort_test_util.h"
#include "swi_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWI_ERRLEN 768

/* The old shape of the calls, so the checks below read as before. */
typedef struct ort_opts {
    int threads, cuda, tta, head;
} ort_opts;

static int open_prepared(const char *path, const ort_opts *o, int64_t roi[3], int roi_given,
                         swi_head_spec *head, swi_ort_model **m, char *err) {
    ort_test_spec spec = {.threads = o->threads, .tta = o->tta, .output = o->head, .channels = 1};
    if (roi_given) memcpy(spec.roi, roi, sizeof spec.roi);
    swi_ort_window w;
    if (ort_test_open(path, &spec, m, &w, head, err, SWI_ERRLEN)) return -1;
    memcpy(roi, w.roi, sizeof w.roi);
    return 0;
}

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            failures++;                                          \
        }                                                        \
    } while (0)

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

/* The error convention: a status and one line naming the file and the field. */
static void check_errors(const char *model) {
    char err[SWI_ERRLEN];
    swi_ort_options opt;
    swi_ort_options_init(&opt);
    swi_ort_model *m = NULL;
    CHECK(swi_ort_open("no/such.onnx", &opt, &m, err, sizeof err) == SWI_ERR_IO && !m &&
              strstr(err, "no/such.onnx: cannot open"),
          "missing model: %s", err);
    CHECK(swi_ort_open("no/such.onnx", &opt, &m, NULL, 0) == SWI_ERR_IO, "err may be NULL");
    opt.graph_opt = (swi_ort_graph_opt)7;
    CHECK(swi_ort_open(model, &opt, &m, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "graph_opt"),
          "bad graph_opt: %s", err);
    swi_ort_options_init(&opt);
    opt.config = "session.no_such_key_of_swi=1;no_equals_sign";
    if (swi_ort_open(model, &opt, &m, err, sizeof err) != SWI_OK) {
        fprintf(stderr, "%s\n", err);
        failures++;
        return;
    }
    CHECK(swi_ort_output_count(m) == 1, "outputs");
    float x[1] = {0};
    CHECK(swi_ort_run(m, x, 1, x, err, sizeof err) == SWI_ERR_INVALID_ARG && strstr(err, "not prepared"),
          "run before prepare: %s", err);
    swi_ort_window w;
    swi_head_spec head;
    swi_ort_window_init(&w, 2);
    CHECK(swi_ort_prepare(m, &w, &head, err, sizeof err) == SWI_ERR_SHAPE &&
              strstr(err, "expects 1 input channel"),
          "channels: %s", err);
    swi_ort_window_init(&w, 1);
    w.roi[0] = 16;
    CHECK(swi_ort_prepare(m, &w, &head, err, sizeof err) == SWI_ERR_SHAPE && strstr(err, "fixed at"),
          "roi: %s", err);
    swi_ort_window_init(&w, 1);
    w.output = 1;
    CHECK(swi_ort_prepare(m, &w, &head, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "output 1: the model has 1 output"),
          "output: %s", err);
    swi_ort_tensor_info info;
    CHECK(swi_ort_input_info(m, &info, err, sizeof err) == SWI_OK && info.rank == 5 && info.shape[0] == -1 &&
              info.shape[1] == 1 && info.shape[2] == 32 && strcmp(info.type_name, "float32") == 0,
          "input info");
    CHECK(swi_ort_output_info(m, 0, &info, err, sizeof err) == SWI_OK && info.shape[1] == 4, "output info");
    char desc[512];
    swi_ort_describe(m, desc, sizeof desc);
    CHECK(strstr(desc, "input 'image'") != NULL, "describe: %s", desc);
    swi_ort_close(m);
    swi_ort_close(NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_ort_window E2E_DIR\n");
        return 2;
    }
    char path[4096], err[SWI_ERRLEN];
    snprintf(path, sizeof path, "%s/volume.nii.gz", argv[1]);
    swi_volume v;
    if (swi_volume_open(path, &v, err, SWI_ERRLEN)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const int64_t ni = v.size[0], nj = v.size[1], nk = v.size[2], N = ni * nj * nk;
    float *vol = malloc((size_t)N * sizeof *vol);
    if (!vol || swi_volume_read(&v, vol, NULL, err, SWI_ERRLEN)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/logits.f32", argv[1]);
    float *ref = read_f32(path, (size_t)(4 * N));
    if (!ref) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }

    snprintf(path, sizeof path, "%s/unet.onnx", argv[1]);
    check_errors(path);
    ort_opts o = {2, 0, 0, 0};
    swi_ort_model *m;
    int64_t roi[3] = {0, 0, 0};
    swi_head_spec head = {0, {0, 0, 0}};
    if (open_prepared(path, &o, roi, 0, &head, &m, err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CHECK(roi[0] == 32 && roi[1] == 32 && roi[2] == 32, "roi from model");
    CHECK(head.channels == 4 && head.spatial[0] == 32, "head spec");
    const int64_t R = 32, W = R * R * R;

    /* Window at (0,0,0) and at (17,34,8) (last starts along each axis). */
    int64_t starts[2][3] = {{0, 0, 0}, {ni - R, nj - R, nk - R}};
    float *win = malloc((size_t)(2 * W) * sizeof *win);
    float *out = malloc((size_t)(2 * 4 * W) * sizeof *out);
    float *one = malloc((size_t)(4 * W) * sizeof *one);
    for (int w = 0; w < 2; w++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < R; j++)
                for (int64_t k = 0; k < R; k++)
                    win[w * W + (i * R + j) * R + k] =
                        vol[((starts[w][0] + i) * nj + starts[w][1] + j) * nk + starts[w][2] + k];
    if (swi_ort_run(m, win, 2, out, err, SWI_ERRLEN)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* Only window (0,0,0) covers i < 17 (next start 17), j < 24, k < 8. */
    double maxerr = 0;
    int64_t bad = 0;
    for (int64_t c = 0; c < 4; c++)
        for (int64_t i = 0; i < ni - R; i++)
            for (int64_t j = 0; j < 24; j++)
                for (int64_t k = 0; k < nk - R; k++) {
                    float got = out[c * W + (i * R + j) * R + k];
                    float exp = ref[c * N + (i * nj + j) * nk + k];
                    double e = fabs((double)got - exp);
                    if (e > maxerr) maxerr = e;
                    if (e > 1e-4 + 1e-4 * fabs(exp)) bad++;
                }
    CHECK(bad == 0, "%lld voxels differ from logits.f32 (max error %g)", (long long)bad, maxerr);
    printf("corner window vs logits.f32: max abs error %.3g\n", maxerr);

    /* Batch of 2 == two runs of 1. */
    if (swi_ort_run(m, win + W, 1, one, err, SWI_ERRLEN)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double d = 0;
    for (int64_t x = 0; x < 4 * W; x++) d = fmax(d, fabs((double)one[x] - out[4 * W + x]));
    CHECK(d < 1e-4, "batch of 2 vs single run differ by %g", d);
    swi_ort_close(m);

    /* TTA == average of the 8 mirrored runs, done by hand. */
    o.tta = 1;
    if (open_prepared(path, &o, roi, 1, &head, &m, err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (swi_ort_run(m, win, 1, out, err, SWI_ERRLEN)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    swi_ort_close(m);
    o.tta = 0;
    if (open_prepared(path, &o, roi, 1, &head, &m, err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    float *acc = calloc((size_t)(4 * W), sizeof *acc);
    float *fw = malloc((size_t)W * sizeof *fw);
    for (int mask = 0; mask < 8; mask++) {
        ort__flip3_copy(win, fw, 1, roi, mask);
        if (swi_ort_run(m, fw, 1, one, err, SWI_ERRLEN)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        ort__flip3_accumulate(one, acc, 4, roi, mask);
    }
    d = 0;
    for (int64_t x = 0; x < 4 * W; x++) {
        d = fmax(d, fabs((double)acc[x] / 8 - out[x]));
    }
    CHECK(d < 1e-5, "tta differs from the hand-made average by %g", d);
    swi_ort_close(m);

    /* flip3 is an involution. */
    float *back = malloc((size_t)W * sizeof *back);
    for (int mask = 0; mask < 8; mask++) {
        ort__flip3_copy(win, fw, 1, roi, mask);
        ort__flip3_copy(fw, back, 1, roi, mask);
        CHECK(memcmp(back, win, (size_t)W * sizeof *win) == 0, "flip %d twice", mask);
    }
    free(back), free(acc), free(fw), free(one), free(out), free(win), free(ref), free(vol);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_ort_window: ok\n");
    return 0;
}
