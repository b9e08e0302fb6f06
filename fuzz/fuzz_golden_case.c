/*
 * fuzz_golden_case.c -- the golden runner's case.txt parser (tests/golden/case_file.c),
 * and, for small cases, the run that swi-golden makes of them.
 *
 * Each input is a case.txt. golden_case_parse must accept it with every field in range
 * or reject it with a reason. An accepted case small enough to run cheaply is then run
 * the way swi-golden runs it (its predictors, on a synthetic input): the engine must
 * succeed or refuse with the one status the case calls for (reflect padding wider than
 * the image, a half-resolution head whose windows do not land on whole voxels), give
 * finite results, and -- when the case gives no outputK_shape, so the parser computed
 * the shapes by the README's rules -- agree with the parser on every head's shape.
 */
#include "case_file.h"
#include "predictors.h"
#include "swi.h"

#include "fuzz_common.h"

#include <math.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_golden_case", cond, __VA_ARGS__)

static void run_case(const golden_case *gc, int shapes_computed) {
    const int d = gc->dims;
    int64_t in_shape[2 + SWI_MAX_DIMS] = {gc->batch, gc->in_channels};
    for (int k = 0; k < d; k++) in_shape[2 + k] = gc->image_size[k];
    int64_t n_in = golden_count(in_shape, 2 + d);
    if (n_in <= 0 || n_in > 4096 || gc->out_channels > 16) return;
    int64_t win[SWI_MAX_DIMS], wvox = 1;
    for (int k = 0; k < d; k++) {
        win[k] = golden_case_window(gc, k);
        if (win[k] > 64) return;
        wvox *= win[k];
    }
    if (wvox > 4096) return;
    int64_t n_out[SWI_MAX_HEADS];
    for (int h = 0; h < gc->n_heads; h++) {
        n_out[h] = golden_count(gc->shape[h], 2 + d);
        if (n_out[h] <= 0 || n_out[h] > 65536) return;
    }

    float *input = malloc((size_t)n_in * sizeof(float));
    for (int64_t i = 0; i < n_in; i++) input[i] = (float)((i * 37) % 11) - 5.0f;

    swi_params p;
    swi_params_init(&p, d);
    for (int k = 0; k < d; k++) {
        p.roi[k] = gc->roi[k];
        p.overlap[k] = gc->overlap[k];
        p.tile_step[k] = gc->tile_step[k];
        p.sigma_scale[k] = gc->sigma_scale[k];
    }
    p.mode = gc->mode;
    p.grid = gc->grid;
    p.padding_mode = gc->padding;
    p.cval = gc->cval;
    p.sw_batch_size = gc->sw_batch_size > 64 ? 64 : gc->sw_batch_size;
    p.threads = 2;
    p.n_heads = gc->n_heads;
    int down2_odd = 0;
    for (int h = 0; h < gc->n_heads; h++) {
        p.heads[h].channels = gc->head_channels[h];
        golden_predictor_window(gc->predictor, h, d, win, p.heads[h].spatial);
        for (int k = 0; k < d; k++) down2_odd |= p.heads[h].spatial[k] != win[k];
    }
    int reflect_bad = 0;
    for (int k = 0; k < d; k++) {
        int64_t pad = win[k] > gc->image_size[k] ? win[k] - gc->image_size[k] : 0;
        reflect_bad |= gc->padding == SWI_PAD_REFLECT && pad > 0 && pad - pad / 2 >= gc->image_size[k];
    }

    swi_output outs[SWI_MAX_HEADS];
    for (int h = 0; h < gc->n_heads; h++) swi_output_init(&outs[h], h, SWI_REDUCE_NONE);
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    swi_tensor in = {.data = input, .batch = gc->batch, .channels = gc->in_channels, .dims = d, .size = {0}};
    for (int k = 0; k < d; k++) in.size[k] = gc->image_size[k];
    golden_predictor gp = {gc->predictor, gc->out_channels};
    swi_predictor pred = {golden_predict, &gp};
    swi_status st = swi_run(ctx, &p, &in, &pred, outs, gc->n_heads);
    if (st != SWI_OK) {
        CHECK(swi_last_error(ctx)[0] != '\0', "%s without a message", swi_status_name(st));
        CHECK((st == SWI_ERR_INVALID_ARG && reflect_bad) || (st == SWI_ERR_SHAPE && down2_odd),
              "swi_run: %s: %s", swi_status_name(st), swi_last_error(ctx));
    } else {
        CHECK(!reflect_bad, "reflect padding wider than the image accepted");
        for (int h = 0; h < gc->n_heads; h++) {
            int64_t size[SWI_MAX_DIMS] = {0};
            CHECK(swi_result_size(ctx, h, size) == d, "swi_result_size");
            CHECK(swi_result_channels(ctx, h) == gc->head_channels[h], "channels");
            int64_t shape[2 + SWI_MAX_DIMS] = {gc->batch, gc->head_channels[h]};
            for (int k = 0; k < d; k++) {
                shape[2 + k] = size[k];
                if (shapes_computed)
                    CHECK(size[k] == gc->shape[h][2 + k],
                          "head %d dim %d: engine gives %lld, the parser computed %lld", h, k,
                          (long long)size[k], (long long)gc->shape[h][2 + k]);
            }
            size_t bytes = 0;
            const float *r = swi_result(ctx, h, &bytes);
            int64_t count = golden_count(shape, 2 + d);
            CHECK(r != NULL && bytes == (size_t)count * sizeof(float), "result %d: %zu bytes", h, bytes);
            for (int64_t i = 0; i < count; i++)
                CHECK(isfinite(r[i]), "head %d value %lld is %g", h, (long long)i, r[i]);
        }
    }
    swi_free(ctx);
    free(input);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char path[600], why[512];
    fuzz_write_file("case.txt", data, size, path, sizeof path);
    golden_case gc;
    memset(&gc, 0x5a, sizeof gc);
    why[0] = '\0';
    if (golden_case_parse(path, &gc, why, sizeof why) != 0) {
        CHECK(why[0] != '\0', "rejected without a reason");
        return 0;
    }
    const int d = gc.dims;
    CHECK(d >= 1 && d <= SWI_MAX_DIMS, "dims %d", d);
    CHECK(gc.batch >= 1 && gc.in_channels >= 1, "batch/in_channels");
    CHECK(gc.sw_batch_size >= 1, "sw_batch_size %d", gc.sw_batch_size);
    CHECK(gc.mode == SWI_BLEND_CONSTANT || gc.mode == SWI_BLEND_GAUSSIAN ||
              gc.mode == SWI_BLEND_GAUSSIAN_NNUNET,
          "mode");
    CHECK(gc.grid == SWI_GRID_MONAI || gc.grid == SWI_GRID_NNUNET, "grid");
    CHECK((unsigned)gc.padding <= SWI_PAD_CIRCULAR, "padding");
    CHECK(isfinite(gc.cval), "cval");
    CHECK(gc.n_heads >= 1 && gc.n_heads <= SWI_MAX_HEADS, "n_heads %d", gc.n_heads);
    CHECK(gc.n_heads == golden_predictor_heads(gc.predictor), "heads of the predictor");
    for (int k = 0; k < d; k++) {
        CHECK(gc.image_size[k] >= 1, "image_size");
        CHECK(gc.overlap[k] >= 0 && gc.overlap[k] < 1, "overlap %g", gc.overlap[k]);
        CHECK(gc.tile_step[k] >= 0 && gc.tile_step[k] <= 1 &&
                  (gc.tile_step[k] == 0 || gc.grid == SWI_GRID_NNUNET),
              "tile_step %g", gc.tile_step[k]);
        CHECK(gc.sigma_scale[k] > 0, "sigma_scale");
        CHECK(golden_case_window(&gc, k) >= 1, "window");
    }
    for (int h = 0; h < gc.n_heads; h++) {
        CHECK(gc.head_channels[h] >= 1, "head channels");
        int64_t n = golden_count(gc.shape[h], 2 + d);
        CHECK(n > 0, "head %d shape has a non-positive entry or overflows", h);
    }
    /* "outputK_shape" absent: the parser computed the shapes itself. */
    int given = 0;
    for (size_t i = 0; i + 6 <= size && !given; i++) given = memcmp(data + i, "_shape", 6) == 0;
    run_case(&gc, !given);
    return 0;
}
