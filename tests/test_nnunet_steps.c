/*
 * test_nnunet_steps.c -- nnU-Net v2's numeric preprocessing steps against nnU-Net's own
 * functions (tests/data/nnunet-steps, made by tools/make_nnunet_steps.py): the shape rule,
 * the separate-z decision, resample_data_or_seg (skimage resize, scipy map_coordinates),
 * create_nonzero_mask with its box, the normalisation schemes, and the export's labels and
 * probabilities from the resampled logits (LabelManager).
 *
 *   test_nnunet_steps DATA_DIR
 */
#include "check.h"
#include "nnunet_job.h"
#include "nnunet_prep.h"
#include "swi_resample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;

/* the raw file NAME.SUFFIX of n elements of elem bytes; NULL (and a failed check) when it
 * is missing or of another size */
static void *load(const char *name, const char *suffix, size_t n, size_t elem) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, suffix);
    FILE *f = fopen(path, "rb");
    void *buf = malloc(n * elem + 1);
    size_t got = f && buf ? fread(buf, elem, n + 1, f) : 0;
    if (f) fclose(f);
    CHECK(got == n, "%s: %zu elements, expected %zu", path, got, n);
    if (got != n) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* the largest error of each kind of case, for the summary */
static double worst_rel[6], worst_sep_rel[6][6];
static int seen_sep[6][6];

static void check_resize(const char *name, long long planes, const int64_t in[3], const int64_t out[3],
                         int order, int order_z, int axis) {
    const size_t nv = (size_t)(in[0] * in[1] * in[2] * planes),
                 mv = (size_t)(out[0] * out[1] * out[2] * planes);
    float *x = load(name, "in.f32", nv, sizeof(float));
    float *want = load(name, "out.f32", mv, sizeof(float));
    float *got = malloc(mv * sizeof *got);
    if (x && want && got) {
        char err[256] = "";
        swi_status st = swi_resample_nnunet(x, in, got, out, planes, order, order_z, axis, err, sizeof err);
        CHECK(st == SWI_OK, "%s: %s", name, err);
        double amp = 0, worst = 0;
        for (size_t i = 0; i < mv; i++) amp = fmax(amp, fabs((double)want[i]));
        for (size_t i = 0; i < mv; i++) worst = fmax(worst, fabs((double)got[i] - (double)want[i]) / amp);
        /* the float64 sums are scipy's up to their order; 1e-6 of the range is a few float32 steps */
        const double tol = order > 1 || (axis >= 0 && order_z > 1) ? 1e-5 : 1e-6;
        CHECK(worst <= tol, "%s: largest error %.3g of the range (tolerance %g)", name, worst, tol);
        if (axis < 0)
            worst_rel[order] = fmax(worst_rel[order], worst);
        else {
            worst_sep_rel[order][order_z] = fmax(worst_sep_rel[order][order_z], worst);
            seen_sep[order][order_z] = 1;
        }
    }
    free(x);
    free(want);
    free(got);
}

static void check_fill(const char *name, long long channels, const int64_t size[3], const int64_t lo[3],
                       const int64_t hi[3]) {
    const size_t nv = (size_t)(size[0] * size[1] * size[2]);
    float *x = load(name, "in.f32", nv * (size_t)channels, sizeof(float));
    uint8_t *want = load(name, "mask.u8", nv, 1);
    uint8_t *got = malloc(nv);
    if (x && want && got) {
        char err[256] = "";
        int64_t glo[3], ghi[3];
        int rc = nn_nonzero_box(x, channels, size, got, glo, ghi, err, sizeof err);
        CHECK(rc == 0, "%s: %s", name, err);
        size_t diff = 0;
        for (size_t i = 0; i < nv; i++) diff += got[i] != want[i];
        CHECK(diff == 0, "%s: %zu mask voxels differ from binary_fill_holes'", name, diff);
        for (int a = 0; a < 3; a++)
            CHECK(glo[a] == lo[a] && ghi[a] == hi[a], "%s: box axis %d is [%lld, %lld), nnU-Net [%lld, %lld)",
                  name, a, (long long)glo[a], (long long)ghi[a], (long long)lo[a], (long long)hi[a]);
    }
    free(x);
    free(want);
    free(got);
}

static double worst_norm;

static void check_norm(const char *name, const char *scheme, int use_mask, const double p[4], long long n) {
    float *x = load(name, "in.f32", (size_t)n, sizeof(float));
    uint8_t *mask = load(name, "mask.u8", (size_t)n, 1);
    float *want = load(name, "out.f32", (size_t)n, sizeof(float));
    nn_norm nm = {.use_mask = use_mask, .mean = p[0], .std = p[1], .p005 = p[2], .p995 = p[3]};
    nm.scheme = !strcmp(scheme, "ct")          ? NN_NORM_CT
                : !strcmp(scheme, "zscore")    ? NN_NORM_ZSCORE
                : !strcmp(scheme, "rescale01") ? NN_NORM_RESCALE01
                : !strcmp(scheme, "rgb01")     ? NN_NORM_RGB01
                                               : NN_NORM_NONE;
    if (x && mask && want) {
        char err[256] = "";
        int rc = nn_normalize(x, n, mask, &nm, err, sizeof err);
        CHECK(rc == 0, "%s: %s", name, err);
        double worst = 0;
        for (long long i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)x[i] - (double)want[i]) / fmax(1, fabs((double)want[i])));
        /* numpy's float32 mean and std differ from double sums rounded to float32 by rounding */
        CHECK(worst <= 1e-5, "%s: largest error %.3g", name, worst);
        if (nm.scheme == NN_NORM_ZSCORE)
            worst_norm = fmax(worst_norm, worst);
        else
            CHECK(worst == 0, "%s: not bitwise numpy's (%.3g)", name, worst);
    }
    free(x);
    free(mask);
    free(want);
}

/* nnU-Net's labels from K x N logits, with and without the probabilities (the float32
 * sigmoid or softmax, which decide the last bit: a region at a logit of 5e-8 is not above
 * 0.5, classes one ulp apart tie), and the probabilities themselves. */
static nn_card card; /* large: not on the stack */

static void check_label(const char *name, const char *kind, long long K, long long N, const int *order) {
    const size_t n = (size_t)(K * N);
    float *x = load(name, "in.f32", n, sizeof(float));
    float *want_p = load(name, "out.f32", n, sizeof(float));
    uint8_t *want = load(name, "seg.u8", (size_t)N, 1);
    uint8_t *want_wp = load(name, "segp.u8", (size_t)N, 1);
    float *p = malloc(n * sizeof *p);
    if (x && want_p && want && want_wp && p) {
        memset(&card, 0, sizeof card);
        card.heads = K;
        card.has_regions = !strcmp(kind, "regions");
        card.threshold = 0.5;
        for (long long r = 0; card.has_regions && r < K; r++) card.regions_class_order[r] = order[r];
        int wrong = 0, wrong_wp = 0, ulps = 0;
        for (long long v = 0; v < N; v++) {
            const int64_t l = nn_voxel_label(&card, x + v, N, NULL, 0);
            const int64_t lp = nn_voxel_label(&card, x + v, N, p + v, N);
            if (wrong < 5)
                CHECK(l == want[v], "%s voxel %lld (logits %.9g %.9g ...): label %lld, nnU-Net %d", name, v,
                      (double)x[v], (double)x[N + v], (long long)l, want[v]);
            if (wrong_wp < 5)
                CHECK(lp == want_wp[v],
                      "%s voxel %lld (logits %.9g %.9g ...): label %lld with probabilities, nnU-Net %d", name,
                      v, (double)x[v], (double)x[N + v], (long long)lp, want_wp[v]);
            wrong += l != want[v];
            wrong_wp += lp != want_wp[v];
        }
        /* torch's exp is Sleef's (within an ulp) in its vectorised loop, the C library's in the
         * tail: a probability may be an ulp or two apart */
        for (size_t i = 0; i < n; i++) {
            const float d = fabsf(p[i] - want_p[i]);
            ulps += d != 0;
            CHECK(d <= 2 * nextafterf(fabsf(want_p[i]), INFINITY) - 2 * fabsf(want_p[i]),
                  "%s value %zu: probability %.9g, nnU-Net %.9g", name, i, (double)p[i], (double)want_p[i]);
        }
        CHECK(wrong == 0 && wrong_wp == 0, "%s: %d labels wrong, %d with probabilities", name, wrong,
              wrong_wp);
        printf("%s: labels equal nnU-Net's, %d of %zu probabilities an ulp apart\n", name, ulps, n);
    }
    free(x);
    free(want_p);
    free(want);
    free(want_wp);
    free(p);
}

static void check_refusals(void) {
    char err[256] = "";
    float x[4] = {0, 12, 255, 256};
    nn_norm rgb = {.scheme = NN_NORM_RGB01};
    CHECK(nn_normalize(x, 4, NULL, &rgb, err, sizeof err) != 0 && strstr(err, "255"), "RGB above 255: %s",
          err);
    x[3] = -1;
    CHECK(nn_normalize(x, 4, NULL, &rgb, err, sizeof err) != 0, "RGB below 0");
    nn_norm z = {.scheme = NN_NORM_ZSCORE, .use_mask = 1};
    CHECK(nn_normalize(x, 4, NULL, &z, err, sizeof err) != 0, "ZScore with use_mask and no mask");
    nn_norm bad = {.scheme = 99};
    CHECK(nn_normalize(x, 4, NULL, &bad, err, sizeof err) != 0, "an unknown scheme");
    /* an empty mask leaves the values (numpy's empty selection) */
    uint8_t none[4] = {0, 0, 0, 0};
    float y[4] = {1, 2, 3, 4};
    CHECK(nn_normalize(y, 4, none, &z, err, sizeof err) == 0 && y[0] == 1 && y[3] == 4, "empty mask: %s",
          err);
    const int64_t sz[3] = {2, 2, 2}, big[3] = {4, 5, 6};
    float dst[8];
    CHECK(swi_resample_nnunet(x, sz, dst, sz, 1, 6, 0, -1, err, sizeof err) == SWI_ERR_INVALID_ARG,
          "order 6");
    CHECK(swi_resample_nnunet(x, sz, dst, sz, 1, 3, 0, 3, err, sizeof err) == SWI_ERR_INVALID_ARG, "axis 3");
    int64_t ns[3];
    const double one[3] = {1, 1, 1}, zero[3] = {1, 0, 1};
    CHECK(swi_resample_nnunet_shape(one, zero, big, ns) == SWI_ERR_INVALID_ARG, "a zero spacing");
    /* equal sizes copy */
    float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(swi_resample_nnunet(src, sz, dst, sz, 1, 3, 0, -1, err, sizeof err) == SWI_OK &&
              !memcmp(src, dst, 32),
          "equal sizes copy");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return check_report("test_nnunet_steps");
    char line[1024];
    int counts[6] = {0};
    while (fgets(line, sizeof line, f)) {
        char kind[16], name[128], scheme[32];
        double s[6], p[4];
        long long v[12], planes;
        int order, order_z, axis, force, use_mask;
        if (line[0] == '#' || sscanf(line, "%15s", kind) != 1) continue;
        if (!strcmp(kind, "shape") &&
            sscanf(line, "shape %lf %lf %lf %lf %lf %lf %lld %lld %lld %lld %lld %lld", &s[0], &s[1], &s[2],
                   &s[3], &s[4], &s[5], &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) == 12) {
            const int64_t old[3] = {v[0], v[1], v[2]};
            int64_t got[3];
            swi_status st = swi_resample_nnunet_shape(s, s + 3, old, got);
            if (v[3] < 1 || v[4] < 1 || v[5] < 1)
                CHECK(st == SWI_ERR_OVERFLOW, "%s: a zero axis is refused (%d)", line, (int)st);
            else
                CHECK(st == SWI_OK && got[0] == v[3] && got[1] == v[4] && got[2] == v[5],
                      "%sgot %lld %lld %lld", line, (long long)got[0], (long long)got[1], (long long)got[2]);
            counts[0]++;
        } else if (!strcmp(kind, "sepz") &&
                   sscanf(line, "sepz %d %lf %lf %lf %lf %lf %lf %lld %lld", &force, &s[0], &s[1], &s[2],
                          &s[3], &s[4], &s[5], &v[0], &v[1]) == 9) {
            int a = 7;
            int d = swi_resample_nnunet_separate_z(s, s + 3, force, &a);
            CHECK(d == v[0] && a == v[1], "%sgot %d %d", line, d, a);
            counts[1]++;
        } else if (!strcmp(kind, "resize") &&
                   sscanf(line, "resize %127s %lld %lld %lld %lld %lld %lld %lld %d %d %d", name, &planes,
                          &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &order, &order_z, &axis) == 11) {
            const int64_t in[3] = {v[0], v[1], v[2]}, out[3] = {v[3], v[4], v[5]};
            check_resize(name, planes, in, out, order, order_z, axis);
            counts[2]++;
        } else if (!strcmp(kind, "fill") &&
                   sscanf(line, "fill %127s %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", name, &planes,
                          &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 11) {
            const int64_t size[3] = {v[0], v[1], v[2]}, lo[3] = {v[3], v[4], v[5]},
                          hi[3] = {v[6], v[7], v[8]};
            check_fill(name, planes, size, lo, hi);
            counts[3]++;
        } else if (!strcmp(kind, "norm") &&
                   sscanf(line, "norm %127s %31s %d %lf %lf %lf %lf %lld", name, scheme, &use_mask, &p[0],
                          &p[1], &p[2], &p[3], &v[0]) == 8) {
            check_norm(name, scheme, use_mask, p, v[0]);
            counts[4]++;
        } else if (!strcmp(kind, "label") &&
                   sscanf(line, "label %127s %31s %lld %lld", name, scheme, &v[0], &v[1]) == 4 && v[0] >= 1 &&
                   v[0] <= 8 && v[1] >= 1) {
            int rco[8] = {0}, at = 0; /* regions_class_order */
            char *q = line;
            for (int w = 0; w < 5 && q; w++) q = strchr(q + 1, ' '); /* past the five words above */
            for (int r = 0; q && r < v[0] && sscanf(q, " %d%n", &rco[r], &at) == 1; r++) q += at;
            check_label(name, scheme, v[0], v[1], rco);
            counts[5]++;
        } else
            CHECK(0, "unreadable line in %s: %s", path, line);
    }
    fclose(f);
    CHECK(counts[0] >= 10 && counts[1] >= 10 && counts[2] >= 20 && counts[3] >= 6 && counts[4] >= 8 &&
              counts[5] >= 2,
          "too few cases: %d shape, %d sepz, %d resize, %d fill, %d norm, %d label", counts[0], counts[1],
          counts[2], counts[3], counts[4], counts[5]);
    check_refusals();
    for (int o = 0; o < 6; o++) printf("resize order %d: largest error %.3g of the range\n", o, worst_rel[o]);
    for (int o = 0; o < 6; o++)
        for (int z = 0; z < 6; z++)
            if (seen_sep[o][z])
                printf("separate z, order %d, order_z %d: largest error %.3g of the range\n", o, z,
                       worst_sep_rel[o][z]);
    printf("zscore: largest error %.3g\n", worst_norm);
    return check_report("test_nnunet_steps");
}
