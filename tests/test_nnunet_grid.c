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

static void check_starts(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/starts.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char line[8192];
    int lines = 0;
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
        swi_status st = swi_grid_starts(NULL, SWI_GRID_NNUNET, padded, roi, 1.0 - step, got, 4096, &n);
        CHECK(st == SWI_OK, "padded %lld roi %lld step %g: status %d", padded, roi, step, (int)st);
        CHECK(n == n_want, "padded %lld roi %lld step %g: %lld starts, nnU-Net %lld", padded, roi, step,
              (long long)n, (long long)n_want);
        for (int64_t i = 0; i < n && i < n_want; i++)
            CHECK(got[i] == want[i], "padded %lld roi %lld step %g: start %lld is %lld, nnU-Net %lld", padded,
                  roi, step, (long long)i, (long long)got[i], (long long)want[i]);
        lines++;
    }
    fclose(f);
    CHECK(lines > 500, "only %d grid lines in %s", lines, path);
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
