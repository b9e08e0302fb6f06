/*
 * test_resample_nnunet.c -- the resampling sink on nnU-Net's way back: with nearest along a
 * source axis it equals swi_resample_nnunet(order 1, order_z 0, separate z along that axis),
 * and without it swi_resample_nnunet(order 1) (both linear with edge clamping), fed region by
 * region in random order, in scores and in argmax mode.
 */
#include "check.h"
#include "swi_resample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sink_out {
    int64_t out[3], channels;
    float *scores;    /* [channels, *out] */
    uint16_t *labels; /* [*out] */
} sink_out;

static int on_scores(void *user, const int64_t lo[3], const int64_t hi[3], int64_t channels,
                     const float *data) {
    sink_out *o = user;
    const int64_t n1 = hi[1] - lo[1], n2 = hi[2] - lo[2], nv = (hi[0] - lo[0]) * n1 * n2;
    const int64_t ov = o->out[0] * o->out[1] * o->out[2];
    for (int64_t c = 0; c < channels; c++)
        for (int64_t i = lo[0]; i < hi[0]; i++)
            for (int64_t j = lo[1]; j < hi[1]; j++)
                for (int64_t k = lo[2]; k < hi[2]; k++)
                    o->scores[c * ov + (i * o->out[1] + j) * o->out[2] + k] =
                        data[c * nv + ((i - lo[0]) * n1 + (j - lo[1])) * n2 + (k - lo[2])];
    return 0;
}

static int on_labels(void *user, const int64_t lo[3], const int64_t hi[3], const uint16_t *labels) {
    sink_out *o = user;
    const int64_t n1 = hi[1] - lo[1], n2 = hi[2] - lo[2];
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++)
                o->labels[(i * o->out[1] + j) * o->out[2] + k] =
                    labels[((i - lo[0]) * n1 + (j - lo[1])) * n2 + (k - lo[2])];
    return 0;
}

/* nnU-Net's map from the output grid back to the source: (o + 0.5) * in / out - 0.5 */
static void diagonal_map(const int64_t src[3], const int64_t out[3], double m[3][4]) {
    memset(m, 0, 12 * sizeof(double));
    for (int r = 0; r < 3; r++) {
        m[r][r] = (double)src[r] / (double)out[r];
        m[r][3] = 0.5 * m[r][r] - 0.5;
    }
}

/* Feed src [C, *n] to a sink cut into random boxes, in random order; 0 on success. */
static int feed_random(swi_resample_sink *s, const float *src, const int64_t n[3], int64_t C) {
    int64_t cuts[3][8], nc[3];
    for (int a = 0; a < 3; a++) {
        nc[a] = 0;
        cuts[a][nc[a]++] = 0;
        for (int64_t p = rnd(1, 5); p < n[a] && nc[a] < 7; p += rnd(1, 6)) cuts[a][nc[a]++] = p;
        cuts[a][nc[a]] = n[a];
    }
    const int64_t nb = nc[0] * nc[1] * nc[2];
    int64_t order[512];
    for (int64_t b = 0; b < nb; b++) order[b] = b;
    for (int64_t b = nb - 1; b > 0; b--) {
        int64_t q = rnd(0, b), t = order[b];
        order[b] = order[q];
        order[q] = t;
    }
    const int64_t nv = n[0] * n[1] * n[2];
    float *box = malloc((size_t)(nv * C) * sizeof *box);
    int rc = box == NULL;
    for (int64_t e = 0; e < nb && !rc; e++) {
        const int64_t b = order[e], q[3] = {b / (nc[1] * nc[2]), (b / nc[2]) % nc[1], b % nc[2]};
        int64_t lo[3], hi[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = cuts[a][q[a]];
            hi[a] = cuts[a][q[a] + 1];
        }
        const int64_t b1 = hi[1] - lo[1], b2 = hi[2] - lo[2], bv = (hi[0] - lo[0]) * b1 * b2;
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = lo[0]; i < hi[0]; i++)
                for (int64_t j = lo[1]; j < hi[1]; j++)
                    for (int64_t k = lo[2]; k < hi[2]; k++)
                        box[c * bv + ((i - lo[0]) * b1 + (j - lo[1])) * b2 + (k - lo[2])] =
                            src[c * nv + (i * n[1] + j) * n[2] + k];
        rc = swi_resample_sink_feed(s, lo, hi, box);
    }
    free(box);
    return rc;
}

static double worst_linear, worst_nearest;

/* One case: source n (the network's grid), output m; nearest along `axis` (-1: none). */
static void one_case(const int64_t n[3], const int64_t m[3], int64_t C, int axis, int tile) {
    const int64_t nv = n[0] * n[1] * n[2], mv = m[0] * m[1] * m[2];
    float *src = malloc((size_t)(nv * C) * sizeof *src), *want = malloc((size_t)(mv * C) * sizeof *want);
    sink_out o = {{m[0], m[1], m[2]}, C, malloc((size_t)(mv * C) * sizeof(float)), malloc((size_t)mv * 2)};
    CHECK(src && want && o.scores && o.labels, "memory");
    if (!src || !want || !o.scores || !o.labels) goto done;
    for (int64_t v = 0; v < nv * C; v++) src[v] = (float)(rnd(-100000, 100000)) / 7919.0f;
    char err[256] = "";
    CHECK(swi_resample_nnunet(src, n, want, m, C, 1, 0, axis, err, sizeof err) == SWI_OK, "%s", err);
    double map[3][4];
    diagonal_map(n, m, map);
    for (int mode = 0; mode < 2; mode++) {
        swi_resample_sink *s = NULL;
        CHECK(swi_resample_sink_create(n, m, map, C, tile, on_scores, &o, &s, err, sizeof err) == SWI_OK,
              "%s", err);
        if (!s) continue;
        if (mode == 1) CHECK(swi_resample_sink_argmax(s, on_labels, &o) == SWI_OK, "argmax");
        if (axis >= 0) CHECK(swi_resample_sink_nearest(s, axis, err, sizeof err) == SWI_OK, "%s", err);
        CHECK(feed_random(s, src, n, C) == 0, "feed");
        CHECK(swi_resample_sink_finish(s, err, sizeof err) == SWI_OK, "%s", err);
        swi_resample_sink_free(s);
    }
    /* scores: float32 lerps against float64 sums rounded once */
    double worst = 0, amp = 0;
    for (int64_t v = 0; v < mv * C; v++) amp = fmax(amp, fabs((double)want[v]));
    for (int64_t v = 0; v < mv * C; v++)
        worst = fmax(worst, fabs((double)o.scores[v] - (double)want[v]) / amp);
    CHECK(worst <= 1e-6, "%lldx%lldx%lld -> %lldx%lldx%lld nearest %d: largest error %.3g of the range",
          (long long)n[0], (long long)n[1], (long long)n[2], (long long)m[0], (long long)m[1],
          (long long)m[2], axis, worst);
    if (axis < 0)
        worst_linear = fmax(worst_linear, worst);
    else
        worst_nearest = fmax(worst_nearest, worst);
    /* labels: the argmax of the scores the sink emits */
    int64_t wrong = 0;
    for (int64_t v = 0; v < mv; v++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (o.scores[c * mv + v] > o.scores[best * mv + v]) best = c;
        wrong += o.labels[v] != best;
    }
    CHECK(wrong == 0, "nearest %d: %lld labels are not the argmax of the scores", axis, (long long)wrong);
done:
    free(src);
    free(want);
    free(o.scores);
    free(o.labels);
}

static void check_refusals(void) {
    const int64_t n[3] = {4, 5, 6}, m[3] = {7, 3, 9};
    double map[3][4];
    diagonal_map(n, m, map);
    map[1][2] = 0.1; /* source axis 1 follows two output axes */
    char err[256];
    swi_resample_sink *s = NULL;
    sink_out o = {{7, 3, 9}, 1, NULL, NULL};
    CHECK(swi_resample_sink_create(n, m, map, 1, 0, on_scores, &o, &s, err, sizeof err) == SWI_OK, "%s", err);
    if (!s) return;
    CHECK(swi_resample_sink_nearest(s, 1, err, sizeof err) == SWI_ERR_INVALID_ARG, "an oblique axis");
    CHECK(swi_resample_sink_nearest(s, 3, err, sizeof err) == SWI_ERR_INVALID_ARG, "axis 3");
    CHECK(swi_resample_sink_nearest(s, 0, err, sizeof err) == SWI_OK, "%s", err);
    swi_resample_sink_free(s);
}

/* A tile with nearest along an axis reads fewer source voxels, so it is ready sooner: the
 * first two slabs of an upsampling complete more output along the nearest axis. */
static int64_t emitted;
static int count_voxels(void *user, const int64_t lo[3], const int64_t hi[3], int64_t channels,
                        const float *data) {
    (void)user, (void)channels, (void)data;
    emitted += (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    return 0;
}

static void check_band(void) {
    const int64_t n[3] = {9, 12, 12}, m[3] = {45, 12, 12};
    double map[3][4];
    diagonal_map(n, m, map);
    int64_t done[2];
    float *src = calloc((size_t)(n[1] * n[2]), sizeof *src);
    CHECK(src != NULL, "memory");
    for (int near = 0; near < 2 && src; near++) {
        char err[256];
        swi_resample_sink *s = NULL;
        emitted = 0;
        CHECK(swi_resample_sink_create(n, m, map, 1, 0, count_voxels, NULL, &s, err, sizeof err) == SWI_OK,
              "%s", err);
        if (!s) continue;
        if (near) CHECK(swi_resample_sink_nearest(s, 0, err, sizeof err) == SWI_OK, "%s", err);
        for (int64_t i = 0; i < 2; i++) {
            const int64_t lo[3] = {i, 0, 0}, hi[3] = {i + 1, n[1], n[2]};
            CHECK(swi_resample_sink_feed(s, lo, hi, src) == 0, "feed");
        }
        done[near] = emitted;
        swi_resample_sink_free(s);
    }
    const int ok = src != NULL;
    free(src);
    /* output rows 0..7 sample -0.4..1.0: linear waits for slab 2 (the upper tap), nearest not */
    if (ok)
        CHECK(done[0] == 0 && done[1] == 8 * 12 * 12, "after two slabs: linear %lld, nearest %lld voxels",
              (long long)done[0], (long long)done[1]);
}

int main(void) {
    /* even sizes too: 16 -> 21 and 14 -> 19 put coordinates on half-integers (ties), which
     * the sink rounds as nnU-Net does with nnU-Net's map */
    const int64_t cases[][6] = {
        {5, 12, 11, 13, 17, 9}, {7, 9, 10, 22, 5, 16}, {9, 16, 14, 3, 21, 19}, {3, 8, 9, 11, 8, 9},
        {13, 6, 7, 5, 11, 12},  {1, 9, 8, 1, 12, 6},   {11, 7, 5, 8, 9, 15},   {5, 5, 5, 17, 13, 11},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t n[3] = {cases[c][0], cases[c][1], cases[c][2]},
                      m[3] = {cases[c][3], cases[c][4], cases[c][5]};
        for (int axis = -1; axis < 3; axis++) {
            check_rng_state = 0x5eed + 977 * c + (uint64_t)(axis + 1);
            one_case(n, m, 3, axis, c % 2 ? 0 : 4);
        }
    }
    check_refusals();
    check_band();
    printf("sink vs swi_resample_nnunet order 1: largest error %.3g of the range; nearest, order_z 0: %.3g\n",
           worst_linear, worst_nearest);
    return check_report("test_resample_nnunet");
}
