/*
 * test_resample.c -- swi_resample against naive implementations: axis codes, the
 * orientation round trip (exact), boxes read and written through an orientation, the
 * Spacingd grid (shape, start, the centred fallback) and trilinear sampling.
 */
#include "swi_resample.h"

#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void eye(double a[4][4]) {
    memset(a, 0, 16 * sizeof(double));
    for (int i = 0; i < 4; i++) a[i][i] = 1;
}

static void world(const double a[4][4], double x, double y, double z, double w[3]) {
    for (int r = 0; r < 3; r++) w[r] = a[r][0] * x + a[r][1] * y + a[r][2] * z + a[r][3];
}

static void test_axcodes(void) {
    int w[3], s[3];
    char err[256];
    CHECK(swi_resample_axcodes_parse("RAS", w, s, err, sizeof err) == SWI_OK && w[0] == 0 && s[0] == 1 &&
              w[1] == 1 && s[1] == 1 && w[2] == 2 && s[2] == 1,
          "RAS");
    CHECK(swi_resample_axcodes_parse("pil", w, s, err, sizeof err) == SWI_OK && w[0] == 1 && s[0] == -1 &&
              w[1] == 2 && s[1] == -1 && w[2] == 0 && s[2] == -1,
          "pil");
    const char *bad[] = {"RA", "RASS", "RAX", "RRS", "LRS", "", "R S"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(swi_resample_axcodes_parse(bad[i], w, s, err, sizeof err) == SWI_ERR_INVALID_ARG &&
                  strstr(err, "axis codes"),
              "'%s' refused: %s", bad[i], err);
    }
    CHECK(swi_resample_axcodes_parse(NULL, w, s, NULL, 0) == SWI_ERR_INVALID_ARG, "NULL refused");

    double a[4][4];
    char codes[4];
    eye(a);
    a[0][0] = -0.7;
    a[1][1] = -0.7;
    a[2][2] = 5;
    CHECK(swi_resample_axcodes_of(a, codes, err, sizeof err) == SWI_OK && strcmp(codes, "LPS") == 0,
          "LPS: %s", codes);
    /* voxel axes along S, L, A, slightly oblique */
    memset(a, 0, sizeof a);
    a[2][0] = 2;
    a[0][1] = -1;
    a[1][1] = 0.1;
    a[1][2] = 1.5;
    a[0][2] = 0.2;
    a[3][3] = 1;
    CHECK(swi_resample_axcodes_of(a, codes, err, sizeof err) == SWI_OK && strcmp(codes, "SLA") == 0,
          "SLA: %s", codes);
    memset(a, 0, sizeof a);
    a[3][3] = 1;
    CHECK(swi_resample_axcodes_of(a, codes, err, sizeof err) == SWI_ERR_INVALID_ARG, "singular");
}

/* A random oblique affine whose axes are a random permutation with random signs. */
static void random_affine(double a[4][4]) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int *p = perms[(int)(urand() * 6) % 6];
    memset(a, 0, 16 * sizeof(double));
    for (int c = 0; c < 3; c++) {
        double sp = 0.5 + 3 * urand();
        a[p[c]][c] = (urand() < 0.5 ? -1 : 1) * sp;
        for (int r = 0; r < 3; r++)
            if (r != p[c]) a[r][c] += 0.2 * sp * (urand() - 0.5); /* oblique, never past 45 degrees */
        a[c][3] = 100 * (urand() - 0.5);
    }
    a[3][3] = 1;
}

static void test_orientation_round_trip(void) {
    const char *targets[] = {"RAS", "LPS", "PIR", "SAL", "ILP", "ASR"};
    for (int t = 0; t < 60; t++) {
        double a[4][4];
        random_affine(a);
        int64_t size[3] = {2 + (int64_t)(urand() * 7), 2 + (int64_t)(urand() * 7),
                           2 + (int64_t)(urand() * 7)};
        const char *codes = targets[t % 6];
        swi_resample_orientation o;
        char err[256];
        CHECK(swi_resample_orientation_make(a, size, codes, &o, err, sizeof err) == SWI_OK, "%s", err);
        char got[4];
        CHECK(swi_resample_axcodes_of(o.affine, got, err, sizeof err) == SWI_OK && strcmp(got, codes) == 0,
              "oriented codes %s, want %s", got, codes);
        const int64_t n = size[0] * size[1] * size[2];
        CHECK(o.size[0] * o.size[1] * o.size[2] == n, "voxels kept");
        float *x = malloc((size_t)n * 2 * sizeof *x), *y = malloc((size_t)n * 2 * sizeof *y),
              *z = malloc((size_t)n * 2 * sizeof *z);
        if (!x || !y || !z) {
            CHECK(0, "out of memory");
            return;
        }
        for (int64_t i = 0; i < 2 * n; i++) x[i] = (float)urand();
        swi_resample_orient_copy(&o, x, y, sizeof(float), 2, 0);
        swi_resample_orient_copy(&o, y, z, sizeof(float), 2, 1);
        CHECK(memcmp(x, z, (size_t)n * 2 * sizeof *x) == 0, "round trip exact (%s)", codes);
        /* every voxel keeps its world position and its value */
        int bad = 0;
        for (int64_t i = 0; i < size[0]; i++)
            for (int64_t j = 0; j < size[1]; j++)
                for (int64_t k = 0; k < size[2]; k++) {
                    int64_t v[3] = {i, j, k}, q[3];
                    swi_resample_orient_point(&o, v, q);
                    double w0[3], w1[3];
                    world(a, (double)i, (double)j, (double)k, w0);
                    world(o.affine, (double)q[0], (double)q[1], (double)q[2], w1);
                    for (int r = 0; r < 3; r++) bad += fabs(w0[r] - w1[r]) > 1e-9;
                    bad +=
                        y[(q[0] * o.size[1] + q[1]) * o.size[2] + q[2]] != x[(i * size[1] + j) * size[2] + k];
                }
        CHECK(bad == 0, "%d voxels moved (%s)", bad, codes);
        /* a box read through the orientation equals the box of the oriented copy, and
         * written back lands where it came from */
        int64_t lo[3], hi[3];
        for (int r = 0; r < 3; r++) {
            lo[r] = (int64_t)(urand() * (double)o.size[r]);
            hi[r] = lo[r] + 1 + (int64_t)(urand() * (double)(o.size[r] - lo[r]));
        }
        const int64_t nb = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        float *box = malloc((size_t)nb * 2 * sizeof *box);
        if (!box) {
            CHECK(0, "out of memory");
            return;
        }
        swi_resample_orient_read_box(&o, x, 2, lo, hi, box);
        memset(z, 0, (size_t)n * 2 * sizeof *z);
        swi_resample_orient_write_box(&o, box, sizeof(float), 2, lo, hi, z);
        int64_t b = 0;
        bad = 0;
        for (int p = 0; p < 2; p++)
            for (int64_t i = lo[0]; i < hi[0]; i++)
                for (int64_t j = lo[1]; j < hi[1]; j++)
                    for (int64_t k = lo[2]; k < hi[2]; k++, b++)
                        bad += box[b] != y[p * n + (i * o.size[1] + j) * o.size[2] + k];
        CHECK(bad == 0, "box read: %d wrong", bad);
        float *yz = malloc((size_t)n * 2 * sizeof *yz);
        if (yz) {
            swi_resample_orient_copy(&o, z, yz, sizeof(float), 2, 0);
            int64_t written = 0;
            for (int64_t i = 0; i < 2 * n; i++) written += yz[i] != 0;
            CHECK(written == 2 * nb, "box write touched %lld voxels, want %lld", (long long)written,
                  (long long)(2 * nb));
            free(yz);
        }
        free(box);
        free(x);
        free(y);
        free(z);
    }
    /* an identity and a plain LPS -> RAS flip */
    double a[4][4];
    eye(a);
    swi_resample_orientation o;
    const int64_t size[3] = {3, 4, 5};
    CHECK(swi_resample_orientation_make(a, size, "RAS", &o, NULL, 0) == SWI_OK &&
              swi_resample_orientation_is_identity(&o),
          "RAS to RAS is the identity");
    a[0][0] = a[1][1] = -2;
    CHECK(swi_resample_orientation_make(a, size, "RAS", &o, NULL, 0) == SWI_OK && o.flip[0] && o.flip[1] &&
              !o.flip[2] && o.affine[0][0] == 2 && o.affine[0][3] == -4 && o.affine[1][3] == -6,
          "LPS to RAS flips i and j");
    char err[256];
    CHECK(swi_resample_orientation_make(a, size, "RAX", &o, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "'X'"),
          "bad codes: %s", err);
}

static void test_spacing_grid(void) {
    char err[256];
    swi_resample_spacing_grid g;
    double a[4][4];
    eye(a);
    a[0][0] = 0.8;
    a[1][1] = 0.8;
    a[2][2] = 1.0;
    a[0][3] = 10;
    a[1][3] = 20;
    a[2][3] = 30;
    const int64_t size[3] = {11, 11, 5};
    const double pix[3] = {1.6, 1.6, 1.6};
    CHECK(swi_resample_spacing_grid_make(a, size, pix, &g, err, sizeof err) == SWI_OK, "%s", err);
    /* extent 8 mm / 1.6 + 1 = 6; 4 mm / 1.6 + 1 = 3.5, numpy rounds half to even: 4 */
    CHECK(g.size[0] == 6 && g.size[1] == 6 && g.size[2] == 4, "shape %lldx%lldx%lld", (long long)g.size[0],
          (long long)g.size[1], (long long)g.size[2]);
    CHECK(!g.centred && g.affine[0][3] == 10 && g.affine[1][3] == 20 && g.affine[2][3] == 30,
          "starts at the first corner");
    CHECK(fabs(g.affine[0][0] - 1.6) < 1e-12 && fabs(g.to_src[0][0] - 2.0) < 1e-12 &&
              fabs(g.to_src[2][2] - 1.6) < 1e-12 && fabs(g.to_new[2][2] - 0.625) < 1e-12,
          "maps");
    CHECK(!g.identity, "not the identity");
    /* a spacing within 1e-3 of the input's keeps it: the identity */
    const double same[3] = {0.8005, 0.8, 0.9995};
    CHECK(swi_resample_spacing_grid_make(a, size, same, &g, err, sizeof err) == SWI_OK && g.identity &&
              g.pixdim[0] == 0.8 && g.size[0] == 11 && g.size[2] == 5,
          "identity");
    /* flipped axis: the grid starts at the corner smallest along the new axes */
    a[0][0] = -0.8;
    CHECK(swi_resample_spacing_grid_make(a, size, pix, &g, err, sizeof err) == SWI_OK && !g.centred &&
              g.affine[0][0] < 0 && g.affine[0][3] == 10,
          "flipped");
    /* sheared: no corner is smallest along every new axis, the grid is centred */
    a[0][0] = 0.8;
    a[0][1] = -0.3;
    CHECK(swi_resample_spacing_grid_make(a, size, pix, &g, err, sizeof err) == SWI_OK && g.centred,
          "sheared affine centred");
    double c_in[3], c_new[3];
    world(a, size[0] / 2.0, size[1] / 2.0, size[2] / 2.0, c_in);
    world(g.affine, (double)g.size[0] / 2.0, (double)g.size[1] / 2.0, (double)g.size[2] / 2.0, c_new);
    CHECK(fabs(c_in[0] - c_new[0]) < 1e-9 && fabs(c_in[1] - c_new[1]) < 1e-9 &&
              fabs(c_in[2] - c_new[2]) < 1e-9,
          "centres coincide");
    /* bad spacings and overflowing grids */
    const double zero[3] = {1, 0, 1}, neg[3] = {1, 1, -2}, nan_[3] = {NAN, 1, 1};
    const double tiny[3] = {1e-7, 1e-7, 1e-7};
    CHECK(swi_resample_spacing_grid_make(a, size, zero, &g, err, sizeof err) == SWI_ERR_INVALID_ARG &&
              strstr(err, "axis 1"),
          "zero spacing: %s", err);
    CHECK(swi_resample_spacing_grid_make(a, size, neg, &g, err, sizeof err) == SWI_ERR_INVALID_ARG, "neg");
    CHECK(swi_resample_spacing_grid_make(a, size, nan_, &g, err, sizeof err) == SWI_ERR_INVALID_ARG, "nan");
    CHECK(swi_resample_spacing_grid_make(a, size, tiny, &g, err, sizeof err) == SWI_ERR_OVERFLOW &&
              strstr(err, "2^40"),
          "overflow: %s", err);
}

/* the naive sampler: clamp, then the eight neighbours in double */
static double naive_at(const float *x, const int64_t n[3], double s[3]) {
    int64_t i0[3];
    double f[3];
    for (int r = 0; r < 3; r++) {
        double v = s[r] < 0 ? 0 : s[r] > (double)(n[r] - 1) ? (double)(n[r] - 1) : s[r];
        i0[r] = (int64_t)floor(v);
        f[r] = v - (double)i0[r];
    }
    double sum = 0;
    for (int c = 0; c < 8; c++) {
        int64_t q[3];
        double w = 1;
        for (int r = 0; r < 3; r++) {
            int up = (c >> (2 - r)) & 1;
            q[r] = i0[r] + up;
            if (q[r] > n[r] - 1) q[r] = n[r] - 1;
            w *= up ? f[r] : 1 - f[r];
        }
        sum += w * x[(q[0] * n[1] + q[1]) * n[2] + q[2]];
    }
    return sum;
}

static void test_trilinear(void) {
    for (int t = 0; t < 20; t++) {
        double a[4][4];
        random_affine(a);
        int64_t size[3] = {3 + (int64_t)(urand() * 9), 3 + (int64_t)(urand() * 9),
                           3 + (int64_t)(urand() * 9)};
        double pix[3] = {0.4 + 2 * urand(), 0.4 + 2 * urand(), 0.4 + 2 * urand()};
        swi_resample_spacing_grid g;
        char err[256];
        if (swi_resample_spacing_grid_make(a, size, pix, &g, err, sizeof err) != SWI_OK) {
            CHECK(0, "%s", err);
            continue;
        }
        const int64_t ns = size[0] * size[1] * size[2];
        const int64_t nd = g.size[0] * g.size[1] * g.size[2];
        float *x = malloc((size_t)ns * 2 * sizeof *x), *y = malloc((size_t)nd * 2 * sizeof *y);
        float *back = malloc((size_t)ns * 2 * sizeof *back);
        if (!x || !y || !back) {
            CHECK(0, "out of memory");
            return;
        }
        for (int64_t i = 0; i < 2 * ns; i++) x[i] = (float)(urand() * 10 - 5);
        /* in two bands of rows, as a streaming caller does */
        int64_t mid = g.size[0] / 2;
        swi_resample_trilinear(x, size, y, g.size, g.to_src, 2, 0, mid);
        float *y2 = malloc((size_t)((g.size[0] - mid) * g.size[1] * g.size[2]) * 2 * sizeof *y2);
        if (!y2) {
            CHECK(0, "out of memory");
            return;
        }
        swi_resample_trilinear(x, size, y2, g.size, g.to_src, 2, mid, g.size[0]);
        double worst = 0;
        int outside_band = 0;
        int64_t blo, bhi;
        swi_resample_rows_needed(size, g.size, g.to_src, mid, g.size[0], &blo, &bhi);
        for (int p = 0; p < 2; p++)
            for (int64_t i = 0; i < g.size[0]; i++)
                for (int64_t j = 0; j < g.size[1]; j++)
                    for (int64_t k = 0; k < g.size[2]; k++) {
                        double s[3];
                        for (int r = 0; r < 3; r++)
                            s[r] = g.to_src[r][0] * (double)i + g.to_src[r][1] * (double)j +
                                   g.to_src[r][2] * (double)k + g.to_src[r][3];
                        double want = naive_at(x + p * ns, size, s);
                        float got = i < mid
                                        ? y[(size_t)p * (size_t)(mid * g.size[1] * g.size[2]) +
                                            (size_t)((i * g.size[1] + j) * g.size[2] + k)]
                                        : y2[(size_t)p * (size_t)((g.size[0] - mid) * g.size[1] * g.size[2]) +
                                             (size_t)(((i - mid) * g.size[1] + j) * g.size[2] + k)];
                        worst = fmax(worst, fabs(got - want));
                        if (i >= mid) {
                            double v = s[0] < 0                       ? 0
                                       : s[0] > (double)(size[0] - 1) ? (double)(size[0] - 1)
                                                                      : s[0];
                            int64_t r0 = (int64_t)floor(v), r1 = r0 + 1 < size[0] ? r0 + 1 : r0;
                            outside_band += r0 < blo || r1 >= bhi;
                        }
                    }
        CHECK(worst < 1e-5, "trilinear vs naive: %g", worst);
        CHECK(outside_band == 0, "%d voxels read outside the band [%lld, %lld)", outside_band, (long long)blo,
              (long long)bhi);
        /* and back (Invertd's map), whole: sampled at to_new of every input voxel */
        swi_resample_trilinear(x, size, y, g.size, g.to_src, 2, 0, g.size[0]);
        swi_resample_trilinear(y, g.size, back, size, g.to_new, 1, 0, size[0]);
        double worst_back = 0;
        for (int64_t i = 0; i < size[0]; i++)
            for (int64_t j = 0; j < size[1]; j++)
                for (int64_t k = 0; k < size[2]; k++) {
                    double s[3];
                    for (int r = 0; r < 3; r++)
                        s[r] = g.to_new[r][0] * (double)i + g.to_new[r][1] * (double)j +
                               g.to_new[r][2] * (double)k + g.to_new[r][3];
                    worst_back = fmax(worst_back,
                                      fabs(back[(i * size[1] + j) * size[2] + k] - naive_at(y, g.size, s)));
                }
        CHECK(worst_back < 1e-5, "back vs naive: %g", worst_back);
        free(y2);
        free(back);
        free(x);
        free(y);
    }
    /* a linear function is reproduced exactly where no clamping happens */
    double a[4][4];
    eye(a);
    const int64_t size[3] = {9, 8, 7};
    const double pix[3] = {0.5, 0.75, 1.5};
    swi_resample_spacing_grid g;
    CHECK(swi_resample_spacing_grid_make(a, size, pix, &g, NULL, 0) == SWI_OK, "grid");
    float x[9 * 8 * 7];
    for (int i = 0; i < 9; i++)
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < 7; k++) x[(i * 8 + j) * 7 + k] = (float)(i + 2 * j - 3 * k);
    const int64_t nd = g.size[0] * g.size[1] * g.size[2];
    float *y = malloc((size_t)nd * sizeof *y);
    if (!y) {
        CHECK(0, "out of memory");
        return;
    }
    swi_resample_trilinear(x, size, y, g.size, g.to_src, 1, 0, g.size[0]);
    double worst = 0;
    for (int64_t i = 0; i < g.size[0]; i++)
        for (int64_t j = 0; j < g.size[1]; j++)
            for (int64_t k = 0; k < g.size[2]; k++) {
                double s0 = g.to_src[0][0] * (double)i + g.to_src[0][3];
                double s1 = g.to_src[1][1] * (double)j + g.to_src[1][3];
                double s2 = g.to_src[2][2] * (double)k + g.to_src[2][3];
                worst = fmax(worst, fabs(y[(i * g.size[1] + j) * g.size[2] + k] - (s0 + 2 * s1 - 3 * s2)));
            }
    CHECK(worst < 1e-5, "ramp: %g", worst);
    free(y);
}

/* composing with an orientation: resampling the oriented copy equals resampling the
 * input through the composed maps */
static void test_composed_maps(void) {
    for (int t = 0; t < 10; t++) {
        double a[4][4];
        random_affine(a);
        int64_t size[3] = {3 + (int64_t)(urand() * 6), 3 + (int64_t)(urand() * 6),
                           3 + (int64_t)(urand() * 6)};
        swi_resample_orientation o;
        swi_resample_spacing_grid g;
        const double pix[3] = {1.3, 0.9, 2.1};
        if (swi_resample_orientation_make(a, size, "RAS", &o, NULL, 0) != SWI_OK ||
            swi_resample_spacing_grid_make(o.affine, o.size, pix, &g, NULL, 0) != SWI_OK) {
            CHECK(0, "grids");
            continue;
        }
        const int64_t n = size[0] * size[1] * size[2];
        const int64_t nd = g.size[0] * g.size[1] * g.size[2];
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        float *r1 = malloc((size_t)nd * sizeof *r1), *r2 = malloc((size_t)nd * sizeof *r2);
        float *b1 = malloc((size_t)n * sizeof *b1), *b2 = malloc((size_t)n * sizeof *b2);
        float *b1i = malloc((size_t)n * sizeof *b1i);
        if (!x || !y || !r1 || !r2 || !b1 || !b2 || !b1i) {
            CHECK(0, "out of memory");
            return;
        }
        for (int64_t i = 0; i < n; i++) x[i] = (float)urand();
        swi_resample_orient_copy(&o, x, y, sizeof(float), 1, 0);
        swi_resample_trilinear(y, o.size, r1, g.size, g.to_src, 1, 0, g.size[0]);
        double m[3][4], back[3][4];
        swi_resample_orient_to_input(&o, g.to_src, m);
        swi_resample_trilinear(x, size, r2, g.size, m, 1, 0, g.size[0]);
        double worst = 0;
        for (int64_t i = 0; i < nd; i++) worst = fmax(worst, fabs(r1[i] - r2[i]));
        CHECK(worst < 1e-6, "composed forward map: %g", worst);
        swi_resample_trilinear(r1, g.size, b1, o.size, g.to_new, 1, 0, o.size[0]);
        swi_resample_orient_copy(&o, b1, b1i, sizeof(float), 1, 1);
        swi_resample_orient_from_input(&o, g.to_new, back);
        swi_resample_trilinear(r1, g.size, b2, size, back, 1, 0, size[0]);
        worst = 0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(b1i[i] - b2[i]));
        CHECK(worst < 1e-6, "composed back map: %g", worst);
        free(x);
        free(y);
        free(r1);
        free(r2);
        free(b1);
        free(b2);
        free(b1i);
    }
}

/* ---- the streaming sink against whole-volume resampling ---------------------------- */

/* an affine's voxel axes along the world axes, each flipped or not, in a random order */
static void axis_aligned(double a[4][4]) {
    for (int c = 0; c < 3; c++) {
        int big = 0;
        for (int r = 1; r < 3; r++)
            if (fabs(a[r][c]) > fabs(a[big][c])) big = r;
        for (int r = 0; r < 3; r++)
            if (r != big) a[r][c] = 0;
    }
}

typedef struct sink_out {
    float *dst; /* [channels, *size] */
    int64_t size[3];
    int64_t emits, voxels;
    pthread_mutex_t lock;
} sink_out;

static int collect(void *user, const int64_t lo[3], const int64_t hi[3], int64_t channels,
                   const float *data) {
    sink_out *o = user;
    const int64_t n[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    const int64_t nv = n[0] * n[1] * n[2], v = o->size[0] * o->size[1] * o->size[2];
    int64_t b = 0;
    for (int64_t c = 0; c < channels; c++)
        for (int64_t i = lo[0]; i < hi[0]; i++)
            for (int64_t j = lo[1]; j < hi[1]; j++)
                for (int64_t k = lo[2]; k < hi[2]; k++, b++)
                    o->dst[c * v + (i * o->size[1] + j) * o->size[2] + k] = data[b];
    pthread_mutex_lock(&o->lock);
    o->emits++;
    o->voxels += nv;
    pthread_mutex_unlock(&o->lock);
    return 0;
}

typedef struct feeder {
    swi_resample_sink *sink;
    const float *src;
    int64_t size[3], channels;
    const int64_t (*boxes)[6];
    int64_t first, n, step;
    int failed;
} feeder;

static void *feed_boxes(void *arg) {
    feeder *f = arg;
    const int64_t v = f->size[0] * f->size[1] * f->size[2];
    for (int64_t r = f->first; r < f->n; r += f->step) {
        const int64_t *b = f->boxes[r];
        const int64_t n[3] = {b[3] - b[0], b[4] - b[1], b[5] - b[2]};
        float *buf = malloc((size_t)(n[0] * n[1] * n[2] * f->channels) * sizeof *buf);
        if (!buf) {
            f->failed = 1;
            return NULL;
        }
        int64_t o = 0;
        for (int64_t c = 0; c < f->channels; c++)
            for (int64_t i = b[0]; i < b[3]; i++)
                for (int64_t j = b[1]; j < b[4]; j++)
                    for (int64_t k = b[2]; k < b[5]; k++)
                        buf[o++] = f->src[c * v + (i * f->size[1] + j) * f->size[2] + k];
        if (swi_resample_sink_feed(f->sink, b, b + 3, buf) != 0) f->failed = 1;
        free(buf);
    }
    return NULL;
}

/* boxes [n] in a random order (the sink must not depend on the engine's) */
static void shuffle_boxes(int64_t (*boxes)[6], int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(urand() * (double)(i + 1));
        int64_t t[6];
        memcpy(t, boxes[i], sizeof t);
        memcpy(boxes[i], boxes[j], sizeof t);
        memcpy(boxes[j], t, sizeof t);
    }
}

/* boxes cutting a grid along random planes, shuffled */
static int64_t random_boxes(const int64_t size[3], int64_t (*boxes)[6], int64_t cap) {
    int64_t cuts[3][9], nc[3];
    for (int a = 0; a < 3; a++) {
        nc[a] = 0;
        cuts[a][nc[a]++] = 0;
        for (int64_t x = 1 + (int64_t)(urand() * 5); x < size[a] && nc[a] < 8;
             x += 1 + (int64_t)(urand() * 9))
            cuts[a][nc[a]++] = x;
        cuts[a][nc[a]++] = size[a];
    }
    int64_t n = 0;
    for (int64_t x = 0; x + 1 < nc[0]; x++)
        for (int64_t y = 0; y + 1 < nc[1]; y++)
            for (int64_t z = 0; z + 1 < nc[2] && n < cap; z++, n++) {
                int64_t b[6] = {cuts[0][x],     cuts[1][y],     cuts[2][z],
                                cuts[0][x + 1], cuts[1][y + 1], cuts[2][z + 1]};
                memcpy(boxes[n], b, sizeof b);
            }
    shuffle_boxes(boxes, n);
    return n;
}

/* One random case of the sink tests: an input grid of 4 + up to span voxels per axis
 * under a random affine (axis-aligned for even t), its RAS spacing grid as the model
 * grid the sink is fed on, and the buffers the test fills. */
typedef struct sink_case {
    int64_t size[3];             /* the input grid, the sink's output */
    swi_resample_spacing_grid g; /* the model grid, the sink's source */
    double back[3][4];           /* the model grid -> the input grid, through the orientation */
    int64_t C, vs, vo;           /* channels; voxels of the model grid and of the input grid */
    float *src;                  /* [C, g.size], for the test to fill */
    float *whole;                /* [C, size]: src resampled in one go */
    int64_t (*boxes)[6];         /* room for 512 */
} sink_case;

enum { CASE_NO_MEMORY = -1, CASE_NO_GRIDS = 0, CASE_MADE = 1 };

/* Draws a case and allocates its buffers; a failure has been CHECKed. A made case is freed
 * with sink_case_free. */
static int sink_case_make(sink_case *k, int t, const double span[3], int64_t C) {
    memset(k, 0, sizeof *k);
    double a[4][4];
    random_affine(a);
    if (t % 2 == 0) axis_aligned(a); /* the separable path */
    for (int d = 0; d < 3; d++) k->size[d] = 4 + (int64_t)(urand() * span[d]);
    double pix[3];
    for (int d = 0; d < 3; d++) pix[d] = 0.6 + 2 * urand();
    swi_resample_orientation o;
    if (swi_resample_orientation_make(a, k->size, "RAS", &o, NULL, 0) != SWI_OK ||
        swi_resample_spacing_grid_make(o.affine, o.size, pix, &k->g, NULL, 0) != SWI_OK) {
        CHECK(0, "grids");
        return CASE_NO_GRIDS;
    }
    swi_resample_orient_from_input(&o, k->g.to_new, k->back);
    k->C = C;
    k->vs = k->g.size[0] * k->g.size[1] * k->g.size[2];
    k->vo = k->size[0] * k->size[1] * k->size[2];
    k->src = malloc((size_t)(k->vs * C) * sizeof *k->src);
    k->whole = malloc((size_t)(k->vo * C) * sizeof *k->whole);
    k->boxes = malloc(512 * sizeof *k->boxes);
    if (!k->src || !k->whole || !k->boxes) {
        CHECK(0, "out of memory");
        return CASE_NO_MEMORY;
    }
    return CASE_MADE;
}

static void sink_case_free(sink_case *k) {
    free(k->src);
    free(k->whole);
    free(k->boxes);
}

static void test_sink(void) {
    static const double span[3] = {30, 20, 20};
    for (int t = 0; t < 12; t++) {
        sink_case k;
        const int made = sink_case_make(&k, t, span, 1 + t % 3);
        if (made == CASE_NO_MEMORY) return;
        if (made == CASE_NO_GRIDS) continue;
        const int64_t C = k.C, vo = k.vo;
        sink_out so = {.dst = calloc((size_t)(vo * C), sizeof(float))};
        if (!so.dst) {
            CHECK(0, "out of memory");
            return;
        }
        memcpy(so.size, k.size, sizeof so.size);
        pthread_mutex_init(&so.lock, NULL);
        for (int64_t i = 0; i < k.vs * C; i++) k.src[i] = (float)(urand() * 4 - 2);
        swi_resample_trilinear(k.src, k.g.size, k.whole, k.size, k.back, C, 0, k.size[0]);
        swi_resample_sink *sink;
        char err[256];
        CHECK(swi_resample_sink_create(k.g.size, k.size, k.back, C, 1 + t % 8, collect, &so, &sink, err,
                                       sizeof err) == SWI_OK,
              "%s", err);
        const int64_t *gs = k.g.size;
        int64_t nbox = random_boxes(gs, k.boxes, 512);
        pthread_t th[3];
        feeder fd[3];
        for (int i = 0; i < 3; i++) {
            fd[i] =
                (feeder){sink, k.src, {gs[0], gs[1], gs[2]}, C, (const int64_t(*)[6])k.boxes, i, nbox, 3, 0};
            pthread_create(&th[i], NULL, feed_boxes, &fd[i]);
        }
        for (int i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
            CHECK(!fd[i].failed, "feed failed");
        }
        CHECK(swi_resample_sink_finish(sink, err, sizeof err) == SWI_OK, "finish: %s", err);
        CHECK(so.voxels == vo, "emitted %lld voxels of %lld", (long long)so.voxels, (long long)vo);
        double worst = 0;
        for (int64_t i = 0; i < vo * C; i++) worst = fmax(worst, fabs(so.dst[i] - k.whole[i]));
        CHECK(worst == 0, "streamed vs whole: %g", worst);
        swi_resample_sink_free(sink);
        pthread_mutex_destroy(&so.lock);
        free(so.dst);
        sink_case_free(&k);
    }
    /* the band: a long grid fed in order keeps a few slabs, not the whole source */
    const int64_t src[3] = {200, 20, 20}, out[3] = {300, 30, 30};
    double m[3][4] = {{2.0 / 3, 0, 0, 0}, {0, 2.0 / 3, 0, 0}, {0, 0, 2.0 / 3, 0}};
    sink_out so = {.dst = calloc(300 * 30 * 30, sizeof(float))};
    memcpy(so.size, out, sizeof so.size);
    pthread_mutex_init(&so.lock, NULL);
    swi_resample_sink *sink;
    float *slab = malloc(10 * 20 * 20 * sizeof *slab);
    if (!so.dst || !slab ||
        swi_resample_sink_create(src, out, m, 1, 0, collect, &so, &sink, NULL, 0) != SWI_OK) {
        CHECK(0, "sink");
        return;
    }
    for (int i = 0; i < 10 * 20 * 20; i++) slab[i] = 1.0f;
    for (int64_t x = 0; x < 200; x += 10) {
        const int64_t lo[3] = {x, 0, 0}, hi[3] = {x + 10, 20, 20};
        CHECK(swi_resample_sink_feed(sink, lo, hi, slab) == 0, "feed");
    }
    CHECK(swi_resample_sink_finish(sink, NULL, 0) == SWI_OK, "finish");
    size_t whole = 200 * 20 * 20 * sizeof(float);
    CHECK(swi_resample_sink_peak_bytes(sink) < whole / 4, "band %zu of %zu bytes",
          swi_resample_sink_peak_bytes(sink), whole);
    CHECK(swi_resample_sink_peak_bytes(sink) <= swi_resample_sink_plan_bytes(src, out, m, 1, 0, 0),
          "planned band below the peak");
    int64_t off = 0, first = -1;
    for (int64_t i = 0; i < 300 * 30 * 30; i++)
        if (fabsf(so.dst[i] - 1.0f) > 1e-6f) {
            off++;
            if (first < 0) first = i;
        }
    CHECK(off == 0, "a constant stays constant: %lld voxels off, the first %lld (%g)", (long long)off,
          (long long)first, first >= 0 ? so.dst[first] : 0.0);
    /* a region outside the grid is refused */
    const int64_t blo[3] = {0, 0, 0}, bhi[3] = {1, 1, 21};
    CHECK(swi_resample_sink_feed(sink, blo, bhi, slab) != 0, "region outside refused");
    swi_resample_sink_free(sink);
    pthread_mutex_destroy(&so.lock);
    free(so.dst);
    free(slab);
}

/* ---- the sink fed by the engine ------------------------------------------------------ */

static int synth_predict(void *user, swi_batch *b) {
    const int64_t C = *(const int64_t *)user;
    const int64_t *roi = swi_batch_roi(b);
    int64_t sp[3] = {roi[0], roi[1], roi[2]};
    float *out = swi_batch_output(b, 0, C, sp);
    if (!out) return 1;
    const float *in = swi_batch_input(b);
    const int64_t rv = roi[0] * roi[1] * roi[2];
    for (int w = 0; w < swi_batch_count(b); w++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t v = 0; v < rv; v++)
                out[(w * C + c) * rv + v] = in[w * rv + v] * (float)(c + 1) - (float)c;
    return 0;
}

static int to_sink(void *user, const swi_region *r) {
    return swi_resample_sink_feed(user, r->lo, r->hi, r->data);
}

static void test_sink_engine(void) {
    const int64_t C = 3, m[3] = {37, 23, 29}, out[3] = {50, 31, 19};
    double map[3][4] = {{0.73, 0.02, 0, 0.1}, {-0.01, 0.74, 0, -0.2}, {0, 0, 1.52, 0.3}};
    const int64_t vm = m[0] * m[1] * m[2], vo = out[0] * out[1] * out[2];
    float *x = malloc((size_t)vm * sizeof *x), *want = malloc((size_t)(vo * C) * sizeof *want);
    sink_out so = {.dst = calloc((size_t)(vo * C), sizeof(float))};
    if (!x || !want || !so.dst) {
        CHECK(0, "out of memory");
        return;
    }
    memcpy(so.size, out, sizeof so.size);
    pthread_mutex_init(&so.lock, NULL);
    for (int64_t i = 0; i < vm; i++) x[i] = (float)urand();
    swi_params p;
    swi_params_init(&p, 3);
    p.roi[0] = p.roi[1] = p.roi[2] = 12;
    p.mode = SWI_BLEND_GAUSSIAN;
    p.threads = 2;
    p.n_heads = 1;
    p.heads[0].channels = C;
    swi_tensor in = {.data = x, .batch = 1, .channels = 1, .dims = 3, .size = {m[0], m[1], m[2]}};
    swi_predictor net = {synth_predict, (void *)&C};
    swi_ctx *ctx = swi_create();
    swi_output whole;
    swi_output_init(&whole, 0, SWI_REDUCE_NONE);
    CHECK(ctx && swi_run(ctx, &p, &in, &net, &whole, 1) == SWI_OK, "whole run");
    const float *scores = swi_result(ctx, 0, NULL);
    if (!scores) {
        CHECK(0, "no scores");
        return;
    }
    swi_resample_trilinear(scores, m, want, out, map, C, 0, out[0]);
    swi_resample_sink *sink;
    CHECK(swi_resample_sink_create(m, out, map, C, 5, collect, &so, &sink, NULL, 0) == SWI_OK, "sink");
    swi_output streamed;
    swi_output_init(&streamed, 0, SWI_REDUCE_CUSTOM);
    streamed.on_region = to_sink;
    streamed.user = sink;
    swi_ctx *ctx2 = swi_create();
    CHECK(ctx2 && swi_run(ctx2, &p, &in, &net, &streamed, 1) == SWI_OK, "streamed run: %s",
          ctx2 ? swi_last_error(ctx2) : "");
    CHECK(swi_resample_sink_finish(sink, NULL, 0) == SWI_OK, "finish");
    double worst = 0;
    for (int64_t i = 0; i < vo * C; i++) worst = fmax(worst, fabs(so.dst[i] - want[i]));
    CHECK(worst == 0, "engine + sink vs whole scores resampled: %g", worst);
    CHECK(swi_resample_sink_peak_bytes(sink) < (size_t)(vm * C) * sizeof(float),
          "the sink held %zu bytes of %zu", swi_resample_sink_peak_bytes(sink),
          (size_t)(vm * C) * sizeof(float));
    swi_resample_sink_free(sink);
    swi_free(ctx);
    swi_free(ctx2);
    pthread_mutex_destroy(&so.lock);
    free(x);
    free(want);
    free(so.dst);
}

/* ---- argmax mode against the argmax of whole resampled scores ------------------------- */

typedef struct label_out {
    uint16_t *dst;
    int64_t size[3];
} label_out;

static int collect_labels(void *user, const int64_t lo[3], const int64_t hi[3], const uint16_t *labels) {
    label_out *o = user;
    int64_t b = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++)
                o->dst[(i * o->size[1] + j) * o->size[2] + k] = labels[b++];
    return 0;
}

static void test_sink_argmax(void) {
    static const double span[3] = {24, 16, 16};
    for (int t = 0; t < 16; t++) {
        sink_case k;
        const int made = sink_case_make(&k, t, span, 2 + t % 9);
        if (made == CASE_NO_MEMORY) return;
        if (made == CASE_NO_GRIDS) continue;
        const int64_t C = k.C, vs = k.vs, vo = k.vo;
        label_out lo = {calloc((size_t)vo, sizeof(uint16_t)), {k.size[0], k.size[1], k.size[2]}};
        if (!lo.dst) {
            CHECK(0, "out of memory");
            return;
        }
        /* few distinct values: ties everywhere; a class that dominates in places; and in
         * some cases a NaN and infinities */
        for (int64_t i = 0; i < vs * C; i++)
            k.src[i] = (float)(int)(urand() * 4) + ((i / vs) == (i % vs) % C ? 2.0f : 0.0f);
        if (t % 4 == 3) {
            k.src[(int64_t)(urand() * (double)(vs * C))] = NAN;
            k.src[(int64_t)(urand() * (double)(vs * C))] = INFINITY;
            k.src[(int64_t)(urand() * (double)(vs * C))] = -INFINITY;
        }
        swi_resample_trilinear(k.src, k.g.size, k.whole, k.size, k.back, C, 0, k.size[0]);
        swi_resample_sink *sink;
        CHECK(swi_resample_sink_create(k.g.size, k.size, k.back, C, 1 + t % 8, collect, NULL, &sink, NULL,
                                       0) == SWI_OK,
              "sink");
        CHECK(swi_resample_sink_argmax(sink, collect_labels, &lo) == SWI_OK, "argmax mode");
        const int64_t *gs = k.g.size;
        int64_t nbox = random_boxes(gs, k.boxes, 512);
        pthread_t th[2];
        feeder fd[2];
        for (int i = 0; i < 2; i++) {
            fd[i] =
                (feeder){sink, k.src, {gs[0], gs[1], gs[2]}, C, (const int64_t(*)[6])k.boxes, i, nbox, 2, 0};
            pthread_create(&th[i], NULL, feed_boxes, &fd[i]);
        }
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        CHECK(!fd[0].failed && !fd[1].failed, "feed");
        CHECK(swi_resample_sink_finish(sink, NULL, 0) == SWI_OK, "finish");
        const float *whole = k.whole;
        int64_t bad = 0;
        for (int64_t v = 0; v < vo; v++) {
            int64_t best = 0;
            float bx = whole[v];
            for (int64_t c = 1; c < C && !isnan(bx); c++)
                if (isnan(whole[c * vo + v]) || whole[c * vo + v] > bx) {
                    bx = whole[c * vo + v];
                    best = c;
                }
            bad += lo.dst[v] != best;
        }
        CHECK(bad == 0, "case %d: %lld labels differ from the argmax of the whole scores", t, (long long)bad);
        swi_resample_sink_free(sink);
        free(lo.dst);
        sink_case_free(&k);
    }
}

/* ---- separable maps: the sink's passes against rs__trilerp, bit for bit --------------- */

/* slabs one voxel thick along the first axis, cut in two along the second (the engine's
 * regions), shuffled */
static int64_t slab_boxes(const int64_t size[3], int64_t (*boxes)[6], int64_t cap) {
    int64_t n = 0;
    const int64_t cut = size[1] / 3 + 1;
    for (int64_t x = 0; x < size[0]; x++)
        for (int64_t y = 0; y < size[1] && n < cap; y += cut, n++) {
            int64_t b[6] = {x, y, 0, x + 1, y + cut < size[1] ? y + cut : size[1], size[2]};
            memcpy(boxes[n], b, sizeof b);
        }
    shuffle_boxes(boxes, n);
    return n;
}

static void test_sink_separable(void) {
    /* tiles of 8 (0 and 8) take the permuted first pass; 3 and 5 divide no grid below */
    static const int tiles[4] = {0, 3, 5, 8};
    for (int t = 0; t < 16; t++) {
        const int tile = tiles[t % 4], argmax = t / 4 % 2;
        const int64_t src[3] = {9 + t, 12 + t % 5, 10 + 2 * (t % 3)};
        const int64_t out[3] = {19 + 3 * t, 21 + t, 23 + 2 * t};
        /* up- and downsampling, flips where bit a of t is set, borders clamped on both sides */
        double map[3][4] = {{0}};
        for (int a = 0; a < 3; a++) {
            double scale = (double)src[a] / (double)out[a] * (t == 7 && a == 2 ? 2.2 : 1.1);
            if ((t >> a) & 1) {
                map[a][a] = -scale;
                map[a][3] = (double)src[a] - 0.6;
            } else {
                map[a][a] = scale;
                map[a][3] = -0.4;
            }
        }
        const int64_t C = argmax ? 2 + t % 7 : 1 + t % 3;
        const int64_t vs = src[0] * src[1] * src[2], vo = out[0] * out[1] * out[2];
        float *x = malloc((size_t)(vs * C) * sizeof *x), *want = malloc((size_t)(vo * C) * sizeof *want);
        sink_out so = {.dst = calloc((size_t)(vo * C), sizeof(float))};
        label_out lo = {calloc((size_t)vo, sizeof(uint16_t)), {out[0], out[1], out[2]}};
        int64_t(*boxes)[6] = malloc(1024 * sizeof *boxes);
        if (!x || !want || !so.dst || !lo.dst || !boxes) {
            CHECK(0, "out of memory");
            return;
        }
        memcpy(so.size, out, sizeof so.size);
        pthread_mutex_init(&so.lock, NULL);
        /* argmax: few distinct values, so ties everywhere */
        for (int64_t i = 0; i < vs * C; i++)
            x[i] = argmax ? (float)(int)(urand() * 5) * 0.25f : (float)(urand() * 4 - 2);
        swi_resample_trilinear(x, src, want, out, map, C, 0, out[0]);
        swi_resample_sink *sink;
        CHECK(swi_resample_sink_create(src, out, map, C, tile, collect, &so, &sink, NULL, 0) == SWI_OK,
              "sink");
        if (argmax) CHECK(swi_resample_sink_argmax(sink, collect_labels, &lo) == SWI_OK, "argmax mode");
        int64_t nbox = t % 2 ? slab_boxes(src, boxes, 1024) : random_boxes(src, boxes, 1024);
        pthread_t th[3];
        feeder fd[3];
        for (int k = 0; k < 3; k++) {
            fd[k] = (feeder){sink, x, {src[0], src[1], src[2]}, C, (const int64_t(*)[6])boxes, k, nbox, 3, 0};
            pthread_create(&th[k], NULL, feed_boxes, &fd[k]);
        }
        for (int k = 0; k < 3; k++) {
            pthread_join(th[k], NULL);
            CHECK(!fd[k].failed, "feed failed");
        }
        CHECK(swi_resample_sink_finish(sink, NULL, 0) == SWI_OK, "finish");
        if (!argmax) {
            CHECK(so.voxels == vo, "case %d: emitted %lld voxels of %lld", t, (long long)so.voxels,
                  (long long)vo);
            CHECK(memcmp(so.dst, want, (size_t)(vo * C) * sizeof(float)) == 0,
                  "case %d (tile %d): the scores differ from rs__trilerp's bits", t, tile);
        } else {
            int64_t bad = 0;
            for (int64_t v = 0; v < vo; v++) {
                int64_t best = 0;
                for (int64_t c = 1; c < C; c++)
                    if (want[c * vo + v] > want[best * vo + v]) best = c;
                bad += lo.dst[v] != best;
            }
            CHECK(bad == 0, "case %d (tile %d): %lld labels differ from the argmax of rs__trilerp", t, tile,
                  (long long)bad);
        }
        swi_resample_sink_free(sink);
        pthread_mutex_destroy(&so.lock);
        free(x);
        free(want);
        free(so.dst);
        free(lo.dst);
        free(boxes);
    }
}

int main(void) {
    test_sink_separable();
    test_sink_argmax();
    test_sink_engine();
    test_sink();
    test_composed_maps();
    test_axcodes();
    test_orientation_round_trip();
    test_spacing_grid();
    test_trilinear();
    return check_report("test_resample");
}
