/*
 * test_case_file.c -- the golden case parser on good, defaulted and broken case.txt files,
 * and the float32 loader's size checks. Needs no engine and no golden data: it writes its
 * own small files into the working directory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_file.h"
#include "check.h"

#define TMP_CASE "test_case_file.case.txt"
#define TMP_F32 "test_case_file.f32"

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Parse `text` as a case.txt; returns the parser's status, why in `why`. */
static int parse_text(const char *text, golden_case *gc, char *why, size_t why_len) {
    if (write_file(TMP_CASE, text, strlen(text)) != 0) {
        snprintf(why, why_len, "cannot write %s", TMP_CASE);
        return -2;
    }
    why[0] = '\0';
    return golden_case_parse(TMP_CASE, gc, why, why_len);
}

static const char *const pair_case =
    "dims 2\nbatch 1\nin_channels 1\nimage_size 35 30\nroi_size 16 16\nsw_batch_size 4\n"
    "overlap 0.25 0.5\nmode gaussian\nsigma_scale 0.125 0.25\npadding_mode reflect\n"
    "cval 1.5\npredictor pair\nout_channels 2\noutputs 2\noutput0_shape 1 2 35 30\n"
    "output1_shape 1 3 35 30\ntags 2d multi_output\n";

static void test_full_case(void) {
    golden_case gc;
    char why[512];
    int rc = parse_text(pair_case, &gc, why, sizeof(why));
    CHECK(rc == 0, "full case: %s", why);
    if (rc != 0) return;
    CHECK(gc.dims == 2 && gc.batch == 1 && gc.in_channels == 1, "full case: dims/batch/cin");
    CHECK(gc.image_size[0] == 35 && gc.image_size[1] == 30, "full case: image_size");
    CHECK(gc.roi[0] == 16 && gc.roi[1] == 16 && gc.sw_batch_size == 4, "full case: roi, sw_batch");
    CHECK(gc.overlap[0] == 0.25 && gc.overlap[1] == 0.5, "full case: overlap %g %g", gc.overlap[0],
          gc.overlap[1]);
    CHECK(gc.mode == SWI_BLEND_GAUSSIAN && gc.sigma_scale[1] == 0.25, "full case: mode/sigma");
    CHECK(gc.padding == SWI_PAD_REFLECT && gc.cval == 1.5f, "full case: padding/cval");
    CHECK(gc.predictor == GOLDEN_PAIR && gc.n_heads == 2, "full case: predictor");
    CHECK(gc.head_channels[0] == 2 && gc.head_channels[1] == 3, "full case: head channels");
    CHECK(gc.shape[1][0] == 1 && gc.shape[1][1] == 3 && gc.shape[1][2] == 35 && gc.shape[1][3] == 30,
          "full case: output1_shape");
}

static void test_defaults(void) {
    golden_case gc;
    char why[512];
    /* only the structural keys: everything else takes MONAI's defaults */
    int rc = parse_text("dims 3\nbatch 2\nin_channels 3\nimage_size 9 8 7\nroi_size 4 -1 0\n"
                        "predictor coord\nout_channels 5\n",
                        &gc, why, sizeof(why));
    CHECK(rc == 0, "defaults: %s", why);
    if (rc == 0) {
        CHECK(gc.sw_batch_size == 1 && gc.mode == SWI_BLEND_CONSTANT && gc.padding == SWI_PAD_CONSTANT &&
                  gc.cval == 0.0f,
              "defaults: sw_batch/mode/padding/cval");
        for (int k = 0; k < 3; k++)
            CHECK(gc.overlap[k] == 0.25 && gc.sigma_scale[k] == 0.125, "defaults: dim %d", k);
        CHECK(golden_case_window(&gc, 0) == 4 && golden_case_window(&gc, 1) == 8 &&
                  golden_case_window(&gc, 2) == 7,
              "roi <= 0 means the whole dim");
        CHECK(gc.shape[0][0] == 2 && gc.shape[0][1] == 5 && gc.shape[0][2] == 9 && gc.shape[0][3] == 8 &&
                  gc.shape[0][4] == 7,
              "defaults: computed output shape");
    }
    /* one overlap / sigma value for every dim; comments, blank lines, CRLF, unknown keys */
    rc = parse_text("# a comment\r\n\r\ndims 2\r\nbatch 1\r\nin_channels 1\r\nimage_size 10 12\r\n"
                    "roi_size 4 4\r\noverlap 0.5\r\nsigma_scale 0.3\r\npredictor box\r\n"
                    "out_channels 2\r\nfuture_key 1 2 3\r\n",
                    &gc, why, sizeof(why));
    CHECK(rc == 0, "broadcast/CRLF: %s", why);
    if (rc == 0)
        CHECK(gc.overlap[0] == 0.5 && gc.overlap[1] == 0.5 && gc.sigma_scale[1] == 0.3,
              "broadcast overlap/sigma");
}

/* nnU-Net's grid takes its tile step itself, per dim or one for all; 0 or absent: 1 - overlap. */
static void test_tile_step(void) {
    golden_case gc;
    char why[512];
    const char *base = "dims 2\nbatch 1\nin_channels 1\nimage_size 48 13\nroi_size 16 8\n"
                       "predictor box\nout_channels 2\ngrid nnunet\n";
    char text[1024];
    snprintf(text, sizeof text, "%stile_step 0.2 0.1\n", base);
    int rc = parse_text(text, &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.grid == SWI_GRID_NNUNET && gc.tile_step[0] == 0.2 && gc.tile_step[1] == 0.1,
          "tile_step per dim: %s", why);
    snprintf(text, sizeof text, "%stile_step 0.3\n", base);
    rc = parse_text(text, &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.tile_step[0] == 0.3 && gc.tile_step[1] == 0.3, "one tile_step: %s", why);
    rc = parse_text(base, &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.tile_step[0] == 0 && gc.tile_step[1] == 0, "tile_step absent: %s", why);
    static const char *const bad[] = {"tile_step 1.5\n", "tile_step -0.2\n", "tile_step 0.2 0.2 0.2\n",
                                      "tile_step nan\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, "%s%s", base, bad[i]);
        CHECK(parse_text(text, &gc, why, sizeof(why)) == -1 && why[0], "accepted %s", bad[i]);
    }
}

/* down2's computed output size follows MONAI (buffer floor(P/2), crop by round()). */
static void test_down2_shape(void) {
    golden_case gc;
    char why[512];
    int rc = parse_text("dims 2\nbatch 1\nin_channels 1\nimage_size 40 36\nroi_size 16 16\n"
                        "predictor down2\nout_channels 2\n",
                        &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.shape[0][2] == 20 && gc.shape[0][3] == 18, "down2 40x36: %s [%lld %lld]", why,
          (long long)gc.shape[0][2], (long long)gc.shape[0][3]);
    /* 1-D, image 5 in roi 8: padded 8 (1 before), buffer 4, crop [round(0.5), round(3)) */
    rc = parse_text("dims 1\nbatch 1\nin_channels 1\nimage_size 5\nroi_size 8\n"
                    "predictor down2\nout_channels 1\n",
                    &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.shape[0][2] == 3, "down2 5 in 8: %s %lld", why, (long long)gc.shape[0][2]);
    /* image 15, roi 2: no padding, no crop: floor(15 / 2) = 7 */
    rc = parse_text("dims 1\nbatch 1\nin_channels 1\nimage_size 15\nroi_size 2\n"
                    "predictor down2\nout_channels 1\n",
                    &gc, why, sizeof(why));
    CHECK(rc == 0 && gc.shape[0][2] == 7, "down2 15 in 2: %s %lld", why, (long long)gc.shape[0][2]);
}

static void test_broken(void) {
    static const struct {
        const char *from, *to, *what;
    } edits[] = {
        {"dims 2\n", "", "missing dims"},
        {"dims 2\n", "dims 4\n", "dims 4"},
        {"dims 2\n", "dims two\n", "dims not a number"},
        {"dims 2\n", "dims 2 3\n", "dims with two values"},
        {"dims 2\n", "dims\n", "dims without a value"},
        {"batch 1\n", "batch 0\n", "batch 0"},
        {"batch 1\n", "batch 99999999999999999999\n", "batch beyond int64"},
        {"in_channels 1\n", "", "missing in_channels"},
        {"image_size 35 30\n", "image_size 35\n", "image_size with one value in 2-D"},
        {"image_size 35 30\n", "image_size 35 30 7\n", "image_size with three values"},
        {"image_size 35 30\n", "image_size 35 -30\n", "negative image size"},
        {"image_size 35 30\n", "image_size 4294967296 4294967296\n", "2^64 voxels"},
        {"image_size 35 30\n", "image_size 9223372036854775807 2\n", "int64 max voxels"},
        {"roi_size 16 16\n", "", "missing roi_size"},
        {"roi_size 16 16\n", "roi_size 16 x\n", "roi_size not a number"},
        {"sw_batch_size 4\n", "sw_batch_size 0\n", "sw_batch_size 0"},
        {"overlap 0.25 0.5\n", "overlap 0.25 1.0\n", "overlap 1"},
        {"overlap 0.25 0.5\n", "overlap -0.1 0.5\n", "overlap < 0"},
        {"overlap 0.25 0.5\n", "overlap 0.25 0.5 0.5\n", "three overlaps in 2-D"},
        {"overlap 0.25 0.5\n", "overlap nan 0.5\n", "overlap NaN"},
        {"mode gaussian\n", "mode cosine\n", "unknown mode"},
        {"sigma_scale 0.125 0.25\n", "sigma_scale 0 0.25\n", "sigma 0"},
        {"padding_mode reflect\n", "padding_mode mirror\n", "unknown padding"},
        {"cval 1.5\n", "cval 1e39\n", "cval beyond float"},
        {"cval 1.5\n", "cval\n", "cval without a value"},
        {"predictor pair\n", "", "missing predictor"},
        {"predictor pair\n", "predictor unet\n", "unknown predictor"},
        {"out_channels 2\n", "out_channels 0\n", "out_channels 0"},
        {"outputs 2\n", "outputs 1\n", "outputs disagrees with pair"},
        {"output1_shape 1 3 35 30\n", "output1_shape 1 3 35\n", "short output shape"},
        {"output1_shape 1 3 35 30\n", "output1_shape 1 4 35 30\n", "wrong channels in shape"},
        {"output1_shape 1 3 35 30\n", "output1_shape 2 3 35 30\n", "wrong batch in shape"},
        {"output1_shape 1 3 35 30\n", "output1_shape 1 3 0 30\n", "zero in shape"},
        {"tags 2d multi_output\n", "dims 2\n", "duplicate key"},
        {"mode gaussian\n", "mode gaussian\ntile_step 0.2\n", "tile_step without grid nnunet"},
    };
    char text[2048];
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        const char *at = strstr(pair_case, edits[i].from);
        if (at == NULL) {
            CHECK(0, "edit %zu (%s): anchor missing", i, edits[i].what);
            continue;
        }
        size_t head = (size_t)(at - pair_case);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)head, pair_case, edits[i].to,
                 at + strlen(edits[i].from));
        golden_case gc;
        char why[512];
        int rc = parse_text(text, &gc, why, sizeof(why));
        CHECK(rc == -1, "broken case '%s' was accepted", edits[i].what);
        CHECK(rc != -1 || why[0] != '\0', "broken case '%s': no reason given", edits[i].what);
    }
    /* binary junk, an empty file, a missing file */
    golden_case gc;
    char why[512];
    char junk[300];
    for (int i = 0; i < 300; i++) junk[i] = (char)((i * 131 + 7) % 256);
    CHECK(write_file(TMP_CASE, junk, sizeof(junk)) == 0 &&
              golden_case_parse(TMP_CASE, &gc, why, sizeof(why)) == -1,
          "binary case.txt accepted");
    CHECK(parse_text("", &gc, why, sizeof(why)) == -1, "empty case.txt accepted");
    CHECK(golden_case_parse("no/such/dir/case.txt", &gc, why, sizeof(why)) == -1,
          "missing case.txt accepted");
}

static void test_load_f32(void) {
    const float vals[3] = {1.5f, -2.0f, 3.25f};
    char why[512];
    float *got = NULL;
    CHECK(write_file(TMP_F32, vals, sizeof(vals)) == 0, "cannot write %s", TMP_F32);
    CHECK(golden_load_f32(TMP_F32, 3, &got, why, sizeof(why)) == 0, "load 3 floats: %s", why);
    CHECK(got != NULL && got[0] == 1.5f && got[1] == -2.0f && got[2] == 3.25f, "loaded values wrong");
    free(got);
    got = NULL;
    CHECK(golden_load_f32(TMP_F32, 4, &got, why, sizeof(why)) == -1 && got == NULL,
          "a 12-byte file read as 4 floats");
    CHECK(golden_load_f32(TMP_F32, 2, &got, why, sizeof(why)) == -1 && got == NULL,
          "a 12-byte file read as 2 floats");
    CHECK(golden_load_f32(TMP_F32, -1, &got, why, sizeof(why)) == -1, "count -1");
    CHECK(golden_load_f32(TMP_F32, INT64_MAX, &got, why, sizeof(why)) == -1, "count INT64_MAX");
    CHECK(golden_load_f32("no/such/file.f32", 1, &got, why, sizeof(why)) == -1, "missing file");
    int64_t shape[3] = {4, 5, 6}, neg[2] = {3, -1}, big[3] = {INT64_MAX / 2, 3, 1};
    CHECK(golden_count(shape, 3) == 120, "golden_count 4*5*6");
    CHECK(golden_count(neg, 2) == -1, "golden_count with a negative entry");
    CHECK(golden_count(big, 3) == -1, "golden_count overflow");
}

int main(void) {
    test_full_case();
    test_defaults();
    test_down2_shape();
    test_tile_step();
    test_broken();
    test_load_f32();
    remove(TMP_CASE);
    remove(TMP_F32);
    return check_report("test_case_file");
}
