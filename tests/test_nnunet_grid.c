/*
 * test_nnunet_grid.c -- SWI_GRID_NNUNET and SWI_BLEND_GAUSSIAN_NNUNET against nnU-Net v2's
 * own compute_steps_for_sliding_window and compute_gaussian (tests/data/golden-nnunet,
 * made by tools/make_nnunet_cases.py).
 *
 *   test_nnunet_grid DATA_DIR
 */
#include "check.h"
#include "swi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_line(long long padded, long long roi, double step, const char *how, swi_status st,
                       const int64_t *got, int64_t n, const int64_t *want, int64_t n_want) {
    CHECK(st == SWI_OK, "padded %lld roi %lld step %.17g (%s): status %d", padded, roi, step, how, (int)st);
    CHECK(n == n_want, "padded %lld roi %lld step %.17g (%s): %lld starts, nnU-Net %lld", padded, roi, step,
          how, (long long)n, (long long)n_want);
    for (int64_t i = 0; i < n && i < n_want; i++)
        CHECK(got[i] == want[i], "padded %lld roi %lld step %.17g (%s): start %lld is %lld, nnU-Net %lld",
              padded, roi, step, how, (long long)i, (long long)got[i], (long long)want[i]);
}

/* swi_plan with swi_params.tile_step counts the same windows along a 1-D image. */
static void window_count(long long padded, long long roi, double step, int64_t n_want) {
    swi_params p;
    swi_params_init(&p, 1);
    p.roi[0] = roi;
    p.grid = SWI_GRID_NNUNET;
    p.tile_step[0] = step;
    p.overlap[0] = 0.5; /* ignored: the tile step is given */
    swi_tensor in = {.data = NULL, .batch = 1, .channels = 1, .dims = 1, .size = {padded}};
    swi_output out;
    swi_output_init(&out, 0, SWI_REDUCE_NONE);
    p.heads[0].channels = 1;
    swi_ctx *ctx = swi_create();
    swi_plan plan;
    swi_status st = ctx ? swi_plan_run(ctx, &p, &in, &out, 1, &plan) : SWI_ERR_NOMEM;
    CHECK(st == SWI_OK && plan.windows_total == n_want,
          "padded %lld roi %lld tile_step %.17g: plan %s, %lld windows, nnU-Net %lld", padded, roi, step,
          ctx ? swi_last_error(ctx) : "", st == SWI_OK ? (long long)plan.windows_total : -1LL,
          (long long)n_want);
    swi_free(ctx);
}

static void check_starts(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/starts.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char line[8192];
    int lines = 0, overlap_lines = 0, decided_in_last_bit = 0;
    while (fgets(line, sizeof line, f)) {
        long long padded, roi;
        double step;
        int used = 0;
        if (sscanf(line, "%lld %lld %lf : %n", &padded, &roi, &step, &used) != 3) continue;
        int64_t want[4096], n_want = 0;
        char *p = line + used, *end;
        for (long long v = strtoll(p, &end, 10); end != p && n_want < 4096; v = strtoll(p, &end, 10)) {
            want[n_want++] = v;
            p = end;
        }
        int64_t got[4096], n = 0;
        /* the grid works on the padded size; a size below roi pads up to it */
        swi_status st = swi_nnunet_starts(NULL, padded, roi, step, got, 4096, &n);
        check_line(padded, roi, step, "tile step", st, got, n, want, n_want);
        window_count(padded, roi, step, n_want);
        /* as an overlap where 1 - overlap gives the step back: binary fractions */
        if (1.0 - (1.0 - step) == step) {
            st = swi_grid_starts(NULL, SWI_GRID_NNUNET, padded, roi, 1.0 - step, got, 4096, &n);
            check_line(padded, roi, step, "overlap", st, got, n, want, n_want);
            overlap_lines++;
        } else {
            /* the table holds sizes where the overlap's step counts another number of starts */
            int64_t n_overlap = 0;
            st = swi_grid_starts(NULL, SWI_GRID_NNUNET, padded, roi, 1.0 - step, NULL, 0, &n_overlap);
            decided_in_last_bit += st == SWI_OK && n_overlap != n_want;
        }
        lines++;
    }
    fclose(f);
    CHECK(lines > 2000 && overlap_lines > 500 && decided_in_last_bit > 100,
          "only %d grid lines (%d as overlaps, %d decided in the last bit) in %s", lines, overlap_lines,
          decided_in_last_bit, path);
}

/* The decimal steps of docs/semantics-nnunet.md's example (the CT test model's grid) and the
 * arguments swi_nnunet_starts refuses. */
static void check_decimal_steps(void) {
    static const struct {
        int64_t padded, roi;
        double step;
        int64_t n; /* nnU-Net's count (starts.txt) */
    } t[] = {{48, 16, 0.2, 11}, {13, 8, 0.2, 5}, {42, 16, 0.2, 10}, {48, 16, 0.1, 21}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        int64_t n = 0;
        CHECK(swi_nnunet_starts(NULL, t[i].padded, t[i].roi, t[i].step, NULL, 0, &n) == SWI_OK && n == t[i].n,
              "%lld/%lld at %g: %lld starts, nnU-Net %lld", (long long)t[i].padded, (long long)t[i].roi,
              t[i].step, (long long)n, (long long)t[i].n);
    }
    int64_t n = 0;
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    CHECK(swi_nnunet_starts(ctx, 48, 16, 0.0, NULL, 0, &n) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "tile_step"),
          "tile step 0");
    CHECK(swi_nnunet_starts(ctx, 48, 16, 1.5, NULL, 0, &n) == SWI_ERR_INVALID_ARG, "tile step 1.5");
    CHECK(swi_nnunet_starts(ctx, 48, 16, NAN, NULL, 0, &n) == SWI_ERR_INVALID_ARG, "tile step NaN");
    CHECK(swi_nnunet_starts(ctx, 48, 16, 1.0, NULL, 0, &n) == SWI_OK && n == 3, "tile step 1");
    CHECK(swi_nnunet_starts(ctx, 0, 16, 0.5, NULL, 0, &n) == SWI_ERR_INVALID_ARG, "size 0");
    CHECK(swi_nnunet_starts(ctx, 48, 16, 0.5, NULL, 2, &n) == SWI_ERR_INVALID_ARG, "cap without starts");
    CHECK(swi_nnunet_starts(ctx, 48, 16, 0.5, NULL, 0, NULL) == SWI_ERR_INVALID_ARG, "count NULL");
    /* swi_params.tile_step: nnU-Net's grid only, in (0, 1] or 0 */
    swi_params p;
    swi_params_init(&p, 1);
    CHECK(p.tile_step[0] == 0.0, "swi_params_init: tile_step 0 (1 - overlap)");
    p.roi[0] = 16;
    p.heads[0].channels = 1;
    swi_tensor in = {.data = NULL, .batch = 1, .channels = 1, .dims = 1, .size = {48}};
    swi_output out;
    swi_output_init(&out, 0, SWI_REDUCE_NONE);
    swi_plan plan;
    p.tile_step[0] = 0.2;
    CHECK(swi_plan_run(ctx, &p, &in, &out, 1, &plan) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "params.tile_step[0]") &&
              strstr(swi_last_error(ctx), "SWI_GRID_NNUNET"),
          "a tile step with MONAI's grid: %s", swi_last_error(ctx));
    p.grid = SWI_GRID_NNUNET;
    const double bad[] = {1.5, -0.2, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p.tile_step[0] = bad[i];
        CHECK(swi_plan_run(ctx, &p, &in, &out, 1, &plan) == SWI_ERR_INVALID_ARG &&
                  strstr(swi_last_error(ctx), "params.tile_step[0]"),
              "tile step %g: %s", bad[i], swi_last_error(ctx));
    }
    p.tile_step[0] = 0.0; /* 1 - overlap: 1 - (1 - 0.2) counts one start more here */
    p.overlap[0] = 0.8;
    CHECK(swi_plan_run(ctx, &p, &in, &out, 1, &plan) == SWI_OK && plan.windows_total == 12,
          "tile step 0 takes 1 - overlap: %lld windows", (long long)plan.windows_total);
    p.tile_step[0] = 0.2;
    CHECK(swi_plan_run(ctx, &p, &in, &out, 1, &plan) == SWI_OK && plan.windows_total == 11,
          "tile step 0.2: %lld windows, nnU-Net 11", (long long)plan.windows_total);
    swi_free(ctx);
}

static void check_gaussian(const char *dir, const char *name, int dims, const int64_t *roi, double sigma) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gaussian/%s", dir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    int64_t n = 1;
    for (int k = 0; k < dims; k++) n *= roi[k];
    double *want = malloc((size_t)n * sizeof *want);
    float *got = malloc((size_t)n * sizeof *got);
    double sig[SWI_MAX_DIMS];
    for (int k = 0; k < dims; k++) sig[k] = sigma;
    CHECK(want && got && fread(want, sizeof *want, (size_t)n, f) == (size_t)n, "%s: short", path);
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN_NNUNET, dims, roi, sig, got) == SWI_OK, "%s: swi_weights",
          name);
    /* nnU-Net scales its map by 10; swi's centre weighs 1 (the blend divides the scale out) */
    double worst = 0;
    for (int64_t v = 0; v < n; v++) {
        double e = fabs((double)got[v] * 10.0 - want[v]) / want[v];
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-6, "%s: worst relative difference %g", name, worst);
    free(want);
    free(got);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_nnunet_grid DATA_DIR\n");
        return 2;
    }
    check_starts(argv[1]);
    check_decimal_steps();
    check_gaussian(argv[1], "5_0.125.f64", 1, (const int64_t[]){5}, 0.125);
    check_gaussian(argv[1], "16_0.125.f64", 1, (const int64_t[]){16}, 0.125);
    check_gaussian(argv[1], "9x14_0.125.f64", 2, (const int64_t[]){9, 14}, 0.125);
    check_gaussian(argv[1], "10x7x12_0.125.f64", 3, (const int64_t[]){10, 7, 12}, 0.125);
    check_gaussian(argv[1], "24x20x17_0.125.f64", 3, (const int64_t[]){24, 20, 17}, 0.125);
    check_gaussian(argv[1], "12x11x16_0.0625.f64", 3, (const int64_t[]){12, 11, 16}, 0.0625);
    check_gaussian(argv[1], "7x30_0.05.f64", 2, (const int64_t[]){7, 30}, 0.05);
    /* MONAI's grid is unchanged by the new entry point */
    int64_t a[8], b[8], na = 0, nb = 0;
    CHECK(swi_window_starts(NULL, 50, 16, 0.25, a, 8, &na) == SWI_OK &&
              swi_grid_starts(NULL, SWI_GRID_MONAI, 50, 16, 0.25, b, 8, &nb) == SWI_OK && na == nb &&
              memcmp(a, b, (size_t)na * sizeof *a) == 0,
          "swi_window_starts is the MONAI grid");
    CHECK(swi_grid_starts(NULL, (swi_grid)7, 50, 16, 0.25, b, 8, &nb) == SWI_ERR_INVALID_ARG, "unknown grid");
    return check_report("test_nnunet_grid");
}
