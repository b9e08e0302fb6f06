/*
 * test_layout.c -- table tests of the pure layout functions: swi_window_starts and
 * swi_weights, against values worked out by hand from tests/data/golden/README.md
 * (steps 3-5) and MONAI's arithmetic (int(roi * (1 - overlap)) in double precision).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

#define MAX_STARTS 64
#define SENTINEL ((int64_t)-77)

typedef struct starts_case {
    int64_t size, roi;
    double overlap;
    int64_t n;
    int64_t starts[8];
    const char *why;
} starts_case;

static const starts_case starts_table[] = {
    {10, 4, 0.25, 3, {0, 3, 6}, "step 3, last window ends exactly at the edge"},
    {11, 4, 0.25, 4, {0, 3, 6, 7}, "last start 9 moved back to 11-4"},
    {50, 16, 0.25, 4, {0, 12, 24, 34}, "golden 1d_const_box axis"},
    {40, 16, 0.25, 3, {0, 12, 24}, "exact fit"},
    {61, 20, 0.5, 6, {0, 10, 20, 30, 40, 41}, "overlap 0.5, last moved back"},
    {17, 8, 0.5, 4, {0, 4, 8, 9}, "overlap 0.5"},
    {16, 16, 0.25, 1, {0}, "roi == size: step = roi, one window"},
    {16, 16, 0.0, 1, {0}, "roi == size, overlap 0"},
    {10, 16, 0.5, 1, {0}, "roi > size: padded to 16, one window"},
    {1, 5, 0.9, 1, {0}, "roi > size of one voxel"},
    {5, 9, 0.25, 1, {0}, "roi > size"},
    {12, 4, 0.0, 3, {0, 4, 8}, "overlap 0: tiles"},
    {13, 4, 0.0, 4, {0, 4, 8, 9}, "overlap 0, last tile moved back"},
    {6, 3, 0.9, 4, {0, 1, 2, 3}, "int(3 * 0.1) = 0 -> step 1"},
    {3, 1, 0.5, 3, {0, 1, 2}, "roi 1: int(0.5) = 0 -> step 1"},
    {2, 1, 0.0, 2, {0, 1}, "roi 1, overlap 0"},
    {1, 1, 0.0, 1, {0}, "one voxel, one window"},
    {7, 5, 0.8, 3, {0, 1, 2}, "5 * (1 - 0.8) = 0.99999... in double -> 0 -> step 1"},
    {5, 4, 0.99, 2, {0, 1}, "step rounds to 0 -> 1"},
    {20, 10, 0.7, 5, {0, 3, 6, 9, 10}, "10 * (1 - 0.7) = 3.0000000000000004 -> 3"},
    {20, 10, 0.3, 3, {0, 7, 10}, "10 * (1 - 0.3) = 7.000000000000001 -> 7"},
    {16, 15, 0.5, 2, {0, 1}, "step 7, second start moved back to 1"},
    {9, 5, 0.5, 3, {0, 2, 4}, "int(2.5) = 2"},
};

/* swi_window_starts as a count (-1 on failure), to keep the tables short */
static int64_t starts_of(int64_t size, int64_t roi, double overlap, int64_t *starts, int64_t cap) {
    int64_t n = -2;
    swi_status st = swi_window_starts(NULL, size, roi, overlap, starts, cap, &n);
    if (st != SWI_OK) {
        CHECK(n == 0, "a failing swi_window_starts must set the count to 0, not %lld", (long long)n);
        return -1;
    }
    return n;
}

static void test_window_starts_table(void) {
    const int n_cases = (int)(sizeof(starts_table) / sizeof(starts_table[0]));
    for (int i = 0; i < n_cases; i++) {
        const starts_case *c = &starts_table[i];
        int64_t got[MAX_STARTS];
        for (int j = 0; j < MAX_STARTS; j++) got[j] = SENTINEL;
        int64_t asked = starts_of(c->size, c->roi, c->overlap, NULL, 0);
        CHECK(asked == c->n, "size %lld roi %lld overlap %g (%s): count %lld, expected %lld",
              (long long)c->size, (long long)c->roi, c->overlap, c->why, (long long)asked, (long long)c->n);
        int64_t n = starts_of(c->size, c->roi, c->overlap, got, MAX_STARTS);
        CHECK(n == c->n, "size %lld roi %lld overlap %g (%s): returned %lld, expected %lld",
              (long long)c->size, (long long)c->roi, c->overlap, c->why, (long long)n, (long long)c->n);
        for (int64_t j = 0; j < c->n && j < MAX_STARTS; j++)
            CHECK(got[j] == c->starts[j],
                  "size %lld roi %lld overlap %g (%s): start %lld is %lld, expected %lld", (long long)c->size,
                  (long long)c->roi, c->overlap, c->why, (long long)j, (long long)got[j],
                  (long long)c->starts[j]);
        for (int64_t j = c->n; j < MAX_STARTS; j++)
            CHECK(got[j] == SENTINEL, "size %lld roi %lld: wrote past the count at %lld", (long long)c->size,
                  (long long)c->roi, (long long)j);
    }
}

static void test_window_starts_cap(void) {
    /* size 11 roi 4 overlap 0.25 -> 0 3 6 7; with cap 2 only 0 3 are written. */
    int64_t got[6];
    for (int j = 0; j < 6; j++) got[j] = SENTINEL;
    int64_t n = starts_of(11, 4, 0.25, got, 2);
    CHECK(n == 4, "cap 2 must still return the full count 4, got %lld", (long long)n);
    CHECK(got[0] == 0 && got[1] == 3, "cap 2: first starts %lld %lld", (long long)got[0], (long long)got[1]);
    CHECK(got[2] == SENTINEL && got[3] == SENTINEL, "cap 2: wrote beyond the cap");

    /* Only the count is computed for the longest axis: nothing is allocated or written. */
    int64_t big = starts_of(SWI_MAX_AXIS, 1, 0.0, NULL, 0);
    CHECK(big == SWI_MAX_AXIS, "2^31 voxels, roi 1: count %lld", (long long)big);
    big = starts_of(SWI_MAX_AXIS, 1000, 0.5, NULL, 0);
    /* step 500: ceil((2^31 - 1000) / 500) + 1 = 4294967 windows */
    CHECK(big == (int64_t)4294967, "2^31 voxels, roi 1000, overlap .5: count %lld", (long long)big);
    CHECK(starts_of(SWI_MAX_AXIS + 1, 4, 0.0, NULL, 0) == -1, "an axis past SWI_MAX_AXIS must be rejected");

    /* The starts returned for a grid are increasing, in range, and cover the axis. */
    for (int64_t size = 1; size <= 30; size++)
        for (int64_t roi = 1; roi <= 34; roi += 3)
            for (int o = 0; o < 10; o++) {
                double ov = o / 10.0;
                int64_t s[128];
                int64_t cnt = starts_of(size, roi, ov, s, 128);
                int64_t padded = size > roi ? size : roi;
                int ok = cnt >= 1 && cnt <= 128 && s[0] == 0 && s[cnt - 1] == padded - roi;
                for (int64_t j = 1; ok && j < cnt; j++) ok = s[j] > s[j - 1] && s[j] <= s[j - 1] + roi;
                CHECK(ok, "size %lld roi %lld overlap %g: starts not a covering grid (count %lld)",
                      (long long)size, (long long)roi, ov, (long long)cnt);
            }
}

static void test_window_starts_invalid(void) {
    int64_t s[4];
    CHECK(starts_of(10, 0, 0.25, s, 4) == -1, "roi 0 must be rejected");
    CHECK(starts_of(10, -3, 0.25, s, 4) == -1, "roi -3 must be rejected");
    CHECK(starts_of(0, 4, 0.25, s, 4) == -1, "size 0 must be rejected");
    CHECK(starts_of(-5, 4, 0.25, s, 4) == -1, "size -5 must be rejected");
    CHECK(starts_of(10, 4, 1.0, s, 4) == -1, "overlap 1 must be rejected");
    CHECK(starts_of(10, 4, 1.5, s, 4) == -1, "overlap 1.5 must be rejected");
    CHECK(starts_of(10, 4, -0.01, s, 4) == -1, "overlap -0.01 must be rejected");
    CHECK(starts_of(10, 4, NAN, s, 4) == -1, "overlap NaN must be rejected");
    CHECK(starts_of(10, 4, 0.25, NULL, 4) == -1, "NULL starts with cap 4 must be rejected");
    CHECK(starts_of(10, 4, 0.25, s, -1) == -1, "cap -1 must be rejected");
    CHECK(swi_window_starts(NULL, 10, 4, 0.25, s, 4, NULL) == SWI_ERR_INVALID_ARG, "NULL count");

    /* with a context, the message names the parameter */
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return;
    int64_t n;
    CHECK(swi_window_starts(ctx, 10, 0, 0.25, s, 4, &n) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "roi"),
          "roi 0: message '%s'", swi_last_error(ctx));
    CHECK(swi_window_starts(ctx, 10, 4, 1.0, s, 4, &n) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "overlap"),
          "overlap 1: message '%s'", swi_last_error(ctx));
    CHECK(swi_window_starts(ctx, 0, 4, 0.5, s, 4, &n) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "size"),
          "size 0: message '%s'", swi_last_error(ctx));
    swi_free(ctx);
}

/* ---- padding maps -------------------------------------------------------- */

static void test_pad_map(void) {
    /* size 3 padded to 8 by roi 8: 2 before, 3 after (F.pad semantics) */
    static const struct {
        swi_pad mode;
        int64_t map[8];
    } table[] = {
        {SWI_PAD_CONSTANT, {-1, -1, 0, 1, 2, -1, -1, -1}},
        {SWI_PAD_REPLICATE, {0, 0, 0, 1, 2, 2, 2, 2}},
        {SWI_PAD_CIRCULAR, {1, 2, 0, 1, 2, 0, 1, 2}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int64_t map[8], padded = 0, before = 0;
        swi_status st = swi_pad_map(NULL, table[i].mode, 3, 8, map, 8, &padded, &before);
        CHECK(st == SWI_OK && padded == 8 && before == 2, "pad map mode %d: %s, padded %lld before %lld",
              (int)table[i].mode, swi_status_name(st), (long long)padded, (long long)before);
        for (int j = 0; j < 8 && st == SWI_OK; j++)
            CHECK(map[j] == table[i].map[j], "pad map mode %d: map[%d] = %lld, expected %lld",
                  (int)table[i].mode, j, (long long)map[j], (long long)table[i].map[j]);
    }
    /* reflect mirrors without repeating the edge: size 4, roi 8 -> 2 before, 2 after */
    int64_t map[8], padded, before;
    const int64_t reflect[8] = {2, 1, 0, 1, 2, 3, 2, 1};
    CHECK(swi_pad_map(NULL, SWI_PAD_REFLECT, 4, 8, map, 8, &padded, &before) == SWI_OK, "reflect 4 -> 8");
    for (int j = 0; j < 8; j++) CHECK(map[j] == reflect[j], "reflect map[%d] = %lld", j, (long long)map[j]);
    /* no padding when the window fits: the identity */
    CHECK(swi_pad_map(NULL, SWI_PAD_REFLECT, 6, 4, map, 8, &padded, &before) == SWI_OK && padded == 6 &&
              before == 0 && map[0] == 0 && map[5] == 5,
          "roi inside the image: identity map");
    /* only `cap` entries are written */
    for (int j = 0; j < 8; j++) map[j] = SENTINEL;
    CHECK(swi_pad_map(NULL, SWI_PAD_CONSTANT, 3, 8, map, 3, NULL, NULL) == SWI_OK && map[2] == 0 &&
              map[3] == SENTINEL,
          "cap 3 writes 3 entries");
    /* the reference refuses reflect pads not smaller than the image; so does swi_run */
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (!ctx) return;
    CHECK(swi_pad_map(ctx, SWI_PAD_REFLECT, 2, 8, map, 8, NULL, NULL) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "reflect"),
          "reflect pad 3 after on size 2: message '%s'", swi_last_error(ctx));
    CHECK(swi_pad_map(ctx, (swi_pad)9, 2, 8, map, 8, NULL, NULL) == SWI_ERR_INVALID_ARG &&
              strstr(swi_last_error(ctx), "mode"),
          "unknown mode: message '%s'", swi_last_error(ctx));
    CHECK(swi_pad_map(ctx, SWI_PAD_CONSTANT, 2, 8, NULL, 8, NULL, NULL) == SWI_ERR_INVALID_ARG,
          "NULL map with cap 8");
    swi_free(ctx);
}

/* ---- weights ------------------------------------------------------------- */

static int close_rel(double got, double exp, double rel) { return fabs(got - exp) <= rel * fabs(exp); }

static void check_map(const char *what, const float *got, const double *exp, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        CHECK(close_rel(got[i], exp[i], 2e-6), "%s: weight %lld is %.9g, expected %.9g", what, (long long)i,
              (double)got[i], exp[i]);
}

static void test_weights_constant(void) {
    const int64_t roi[3] = {3, 4, 2};
    const double sig[3] = {0.125, 0.125, 0.125};
    float w[24];
    for (int d = 1; d <= 3; d++) {
        for (int i = 0; i < 24; i++) w[i] = -1.0f;
        swi_status st = swi_weights(NULL, SWI_BLEND_CONSTANT, d, roi, sig, w);
        CHECK(st == SWI_OK, "constant dims %d: %s", d, swi_status_name(st));
        int64_t n = 1;
        for (int k = 0; k < d; k++) n *= roi[k];
        for (int64_t i = 0; i < n; i++)
            CHECK(w[i] == 1.0f, "constant dims %d: weight %lld is %g", d, (long long)i, (double)w[i]);
        for (int64_t i = n; i < 24; i++)
            CHECK(w[i] == -1.0f, "constant dims %d: wrote past the map at %lld", d, (long long)i);
    }
}

static void test_weights_gaussian_by_hand(void) {
    float w[64];
    swi_status st;

    /* 1-D roi 5, sigma 0.125*5 = 0.625: exp(-x^2 / 0.78125) for x = -2..2. The minimum
     * 0.005976 is above 1e-3, so the floor changes nothing. */
    {
        const int64_t roi[1] = {5};
        const double sig[1] = {0.125};
        const double exp5[5] = {0.005976022895005943, 0.27803730045319414, 1.0, 0.27803730045319414,
                                0.005976022895005943};
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 1, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian roi 5: %s", swi_status_name(st));
        check_map("gaussian roi 5", w, exp5, 5);
    }
    /* 1-D roi 6, sigma 0.75: x = -2.5..2.5, not normalised (the peak is below 1). */
    {
        const int64_t roi[1] = {6};
        const double sig[1] = {0.125};
        const double exp6[6] = {0.0038659201394728076, 0.1353352832366127, 0.8007374029168081,
                                0.8007374029168081,    0.1353352832366127, 0.0038659201394728076};
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 1, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian roi 6: %s", swi_status_name(st));
        check_map("gaussian roi 6", w, exp6, 6);
    }
    /* 2-D roi 4x4, sigma 0.5: 1-D exp(-2 x^2) = {0.011109, 0.606531, 0.606531, 0.011109}.
     * The corners 0.011109^2 = 1.234e-4 fall below 1e-3 and are raised to
     * max(min weight, 1e-3) = 1e-3; everything else is untouched. */
    {
        const int64_t roi[2] = {4, 4};
        const double sig[2] = {0.125, 0.125};
        const double g[4] = {0.011108996538242306, 0.6065306597126334, 0.6065306597126334,
                             0.011108996538242306};
        double exp16[16];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                double v = g[i] * g[j];
                exp16[i * 4 + j] = v < 1e-3 ? (double)1e-3f : v;
            }
        CHECK(exp16[0] == (double)1e-3f && exp16[1] > 6.7e-3 && exp16[1] < 6.8e-3,
              "hand values of the 4x4 map are off");
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 2, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian 4x4: %s", swi_status_name(st));
        check_map("gaussian 4x4 (corners floored at 1e-3)", w, exp16, 16);
    }
    /* 2-D roi 3x2 with sigma_scale per dim {0.5, 1.0}: sigmas 1.5 and 2. */
    {
        const int64_t roi[2] = {3, 2};
        const double sig[2] = {0.5, 1.0};
        const double a[3] = {0.8007374029168081, 1.0, 0.8007374029168081};
        const double b[2] = {0.9692332344763441, 0.9692332344763441};
        double exp6[6];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) exp6[i * 2 + j] = a[i] * b[j];
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 2, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian 3x2: %s", swi_status_name(st));
        check_map("gaussian 3x2 sigma {0.5, 1}", w, exp6, 6);
    }
    /* 3-D roi 1x2x3, sigma 0.125: dim 0 is {1}; dim 1 (sigma 0.25) exp(-2) twice;
     * dim 2 (sigma 0.375) {exp(-32/9), 1, exp(-32/9)}. Minimum 0.0038659 > 1e-3. */
    {
        const int64_t roi[3] = {1, 2, 3};
        const double sig[3] = {0.125, 0.125, 0.125};
        const double b[2] = {0.1353352832366127, 0.1353352832366127};
        const double c[3] = {0.028565500784550377, 1.0, 0.028565500784550377};
        double exp6[6];
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) exp6[j * 3 + k] = b[j] * c[k];
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian 1x2x3: %s", swi_status_name(st));
        check_map("gaussian 1x2x3", w, exp6, 6);
    }
    /* A sigma so small that every weight is below 1e-3 (the outer ones underflow to 0):
     * min weight 0 -> floor max(0, 1e-3) = 1e-3 everywhere. */
    {
        const int64_t roi[1] = {4};
        const double sig[1] = {0.01};
        const double exp4[4] = {1e-3f, 1e-3f, 1e-3f, 1e-3f};
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 1, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian roi 4 sigma 0.01: %s", swi_status_name(st));
        check_map("gaussian roi 4 sigma 0.01 (all floored)", w, exp4, 4);
    }
    /* roi 1 along every dim: the single weight exp(0) = 1. */
    {
        const int64_t roi[3] = {1, 1, 1};
        const double sig[3] = {0.125, 0.125, 0.125};
        const double one[1] = {1.0};
        st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, roi, sig, w);
        CHECK(st == SWI_OK, "gaussian 1x1x1: %s", swi_status_name(st));
        check_map("gaussian 1x1x1", w, one, 1);
    }
}

/* The README's formula in double for many small windows (the map is float32, so a
 * relative 1e-6 covers the rounding of x^2, the division and exp). */
static void test_weights_gaussian_formula(void) {
    static const double sigmas[] = {0.125, 0.3, 1.0, 0.05};
    float *w = malloc(sizeof(float) * 13 * 13 * 13);
    double *e = malloc(sizeof(double) * 13 * 13 * 13);
    if (w == NULL || e == NULL) {
        CHECK(0, "out of memory");
        free(w);
        free(e);
        return;
    }
    for (int d = 1; d <= 3; d++)
        for (int64_t r = 1; r <= 13; r += (d == 3 ? 4 : 1))
            for (int si = 0; si < 4; si++) {
                int64_t roi[3] = {r, r + 1 > 13 ? 13 : r + 1, r > 2 ? r - 2 : 1};
                double sig[3] = {sigmas[si], sigmas[(si + 1) % 4], sigmas[(si + 2) % 4]};
                double g[3][13];
                for (int k = 0; k < d; k++)
                    for (int64_t j = 0; j < roi[k]; j++) {
                        double x = (double)j - (double)(roi[k] - 1) / 2.0;
                        double s = sig[k] * (double)roi[k];
                        g[k][j] = exp(-x * x / (2.0 * s * s));
                    }
                int64_t n0 = d >= 1 ? roi[0] : 1, n1 = d >= 2 ? roi[1] : 1, n2 = d >= 3 ? roi[2] : 1;
                double mn = INFINITY;
                for (int64_t a = 0; a < n0; a++)
                    for (int64_t b = 0; b < n1; b++)
                        for (int64_t c = 0; c < n2; c++) {
                            double v = g[0][a] * (d >= 2 ? g[1][b] : 1.0) * (d >= 3 ? g[2][c] : 1.0);
                            e[(a * n1 + b) * n2 + c] = v;
                            if (v < mn) mn = v;
                        }
                double floor_w = mn > 1e-3 ? mn : 1e-3;
                int64_t n = n0 * n1 * n2;
                for (int64_t i = 0; i < n; i++)
                    if (e[i] < floor_w) e[i] = floor_w;
                swi_status st = swi_weights(NULL, SWI_BLEND_GAUSSIAN, d, roi, sig, w);
                CHECK(st == SWI_OK, "gaussian dims %d roi %lld: %s", d, (long long)r, swi_status_name(st));
                if (st != SWI_OK) continue;
                int64_t bad = 0, first = -1;
                for (int64_t i = 0; i < n; i++) {
                    /* Weights within a few float ulps of the floor may land on either side. */
                    double tol = e[i] < 1.001e-3 ? 1e-5 : 3e-6;
                    if (!close_rel(w[i], e[i], tol) && bad++ == 0) first = i;
                }
                CHECK(bad == 0,
                      "gaussian dims %d roi [%lld %lld %lld] sigma [%g %g %g]: %lld weights off, "
                      "first %lld: %.9g vs %.9g",
                      d, (long long)roi[0], (long long)roi[1], (long long)roi[2], sig[0], sig[1], sig[2],
                      (long long)bad, (long long)first, first >= 0 ? (double)w[first] : 0.0,
                      first >= 0 ? e[first] : 0.0);
            }
    free(w);
    free(e);
}

static void test_weights_invalid(void) {
    float w[16];
    const int64_t roi[3] = {2, 2, 2};
    const int64_t bad_roi[3] = {2, 0, 2};
    const int64_t neg_roi[3] = {2, 2, -1};
    const double sig[3] = {0.125, 0.125, 0.125};
    const double zero_sig[3] = {0.125, 0.0, 0.125};
    const double neg_sig[3] = {-0.1, 0.125, 0.125};
    const int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40};

    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 0, roi, sig, w) == SWI_ERR_INVALID_ARG, "dims 0");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, SWI_MAX_DIMS + 1, roi, sig, w) == SWI_ERR_INVALID_ARG,
          "dims 5");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, bad_roi, sig, w) == SWI_ERR_INVALID_ARG, "roi 0");
    CHECK(swi_weights(NULL, SWI_BLEND_CONSTANT, 3, neg_roi, sig, w) == SWI_ERR_INVALID_ARG, "roi -1");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, NULL, sig, w) == SWI_ERR_INVALID_ARG, "roi NULL");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, roi, sig, NULL) == SWI_ERR_INVALID_ARG, "out NULL");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, roi, zero_sig, w) == SWI_ERR_INVALID_ARG, "sigma_scale 0");
    CHECK(swi_weights(NULL, SWI_BLEND_GAUSSIAN, 3, roi, neg_sig, w) == SWI_ERR_INVALID_ARG,
          "sigma_scale -0.1");
    CHECK(swi_weights(NULL, SWI_BLEND_CUSTOM, 3, roi, sig, w) == SWI_ERR_INVALID_ARG,
          "SWI_BLEND_CUSTOM has no computed map");
    CHECK(swi_weights(NULL, (swi_blend)42, 3, roi, sig, w) == SWI_ERR_INVALID_ARG, "mode 42");
    CHECK(swi_weights(NULL, SWI_BLEND_CONSTANT, 3, huge, sig, w) == SWI_ERR_INVALID_ARG,
          "roi past SWI_MAX_AXIS must be rejected");
    const int64_t wide[3] = {SWI_MAX_AXIS, SWI_MAX_AXIS, SWI_MAX_AXIS};
    CHECK(swi_weights(NULL, SWI_BLEND_CONSTANT, 3, wide, sig, w) == SWI_ERR_OVERFLOW,
          "2^93 voxels must overflow");
    const double inf_sig[3] = {0.125, INFINITY, 0.125};
    swi_ctx *ctx = swi_create();
    CHECK(ctx != NULL, "swi_create");
    if (ctx) {
        CHECK(swi_weights(ctx, SWI_BLEND_GAUSSIAN, 3, roi, inf_sig, w) == SWI_ERR_INVALID_ARG &&
                  strstr(swi_last_error(ctx), "sigma_scale[1]"),
              "infinite sigma_scale: message '%s'", swi_last_error(ctx));
        CHECK(swi_weights(ctx, SWI_BLEND_GAUSSIAN, 3, bad_roi, sig, w) == SWI_ERR_INVALID_ARG &&
                  strstr(swi_last_error(ctx), "roi[1]"),
              "roi 0: message '%s'", swi_last_error(ctx));
        swi_free(ctx);
    }
}

int main(void) {
    test_window_starts_table();
    test_window_starts_cap();
    test_window_starts_invalid();
    test_pad_map();
    test_weights_constant();
    test_weights_gaussian_by_hand();
    test_weights_gaussian_formula();
    test_weights_invalid();
    return check_report("test_layout");
}
