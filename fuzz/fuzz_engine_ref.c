/*
 * fuzz_engine_ref.c -- fuzz_engine's plain reference: the predictor's pure function, the
 * whole image padded, every window predicted, pred * w and w accumulated over the padded
 * grid, divided and cropped (tests/data/golden/README.md, "What the reference computes"),
 * and a run's stored results checked against it.
 */
#include "fuzz_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the predictor: a pure function of one window ------------------------------- */

void fuzz_net(const cfg *c, int h, const float *win, float *out) {
    const int64_t *r = c->r, *o = c->o[h];
    const int64_t rv = r[0] * r[1] * r[2];
    int64_t i[D];
    for (int64_t ch = 0; ch < c->C[h]; ch++)
        for (i[0] = 0; i[0] < o[0]; i[0]++)
            for (i[1] = 0; i[1] < o[1]; i[1]++)
                for (i[2] = 0; i[2] < o[2]; i[2]++) {
                    int64_t src[D];
                    for (int k = 0; k < D; k++) src[k] = i[k] * r[k] / o[k];
                    int64_t at = (src[0] * r[1] + src[1]) * r[2] + src[2];
                    float s = 0;
                    for (int64_t q = 0; q < c->cin; q++) s += win[q * rv + at];
                    /* position-dependent, so overlapping windows disagree and blending
                     * matters */
                    float pos = 0.03125f * (float)(i[0] - o[0] / 2) - 0.0625f * (float)(i[2] % 3);
                    out[((ch * o[0] + i[0]) * o[1] + i[1]) * o[2] + i[2]] =
                        (float)(ch + 1) * s + 0.25f * (float)ch + 0.125f * (float)h + pos;
                }
}

/* ---- the reference ------------------------------------------------------------------ */

static int64_t imod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

/* Input index of padded coordinate q along a dim, or -1 for the constant fill. */
static int64_t pad_index(swi_pad mode, int64_t q, int64_t before, int64_t S) {
    int64_t i = q - before;
    if (i >= 0 && i < S) return i;
    switch (mode) {
    case SWI_PAD_CONSTANT: return -1;
    case SWI_PAD_REPLICATE: return i < 0 ? 0 : S - 1;
    case SWI_PAD_REFLECT: return i < 0 ? -i : 2 * (S - 1) - i;
    default: return imod(i, S);
    }
}

/* Starts along one dim by the README's rule. */
int64_t fuzz_starts_of(int64_t S, int64_t r, double ov, int64_t *st) {
    int64_t P = S > r ? S : r;
    int64_t step = r == P ? r : (int64_t)floor((double)r * (1.0 - ov));
    if (step < 1) step = 1;
    int64_t n = 0;
    for (int64_t t = 0;; t++) {
        int64_t s = t * step;
        if (s + r > P) s = P - r;
        st[n++] = s;
        if (t * step + r >= P) break;
    }
    return n;
}

/* Weights [r] per the README (constant, gaussian), or the custom map. */
static void ref_weights(const cfg *c, float *w) {
    const int64_t *r = c->r;
    int64_t n = r[0] * r[1] * r[2];
    if (c->mode == SWI_BLEND_CUSTOM) {
        memcpy(w, c->weight_map, (size_t)n * sizeof(float));
        return;
    }
    if (c->mode == SWI_BLEND_CONSTANT) {
        for (int64_t i = 0; i < n; i++) w[i] = 1;
        return;
    }
    float g[D][64];
    for (int k = 0; k < D; k++)
        for (int64_t j = 0; j < r[k]; j++) {
            if (k >= c->dims) {
                g[k][j] = 1;
                continue;
            }
            float sigma = (float)(c->sigma[k] * (double)r[k]);
            float x = (float)j - (float)(r[k] - 1) / 2.0f;
            g[k][j] = expf(-(x * x) / (2.0f * sigma * sigma));
        }
    float mn = INFINITY;
    for (int64_t a = 0; a < r[0]; a++)
        for (int64_t b = 0; b < r[1]; b++)
            for (int64_t d = 0; d < r[2]; d++) {
                float v = g[0][a] * g[1][b] * g[2][d];
                w[(a * r[1] + b) * r[2] + d] = v;
                mn = v < mn ? v : mn;
            }
    float floor_w = mn > 1e-3f ? mn : 1e-3f;
    for (int64_t i = 0; i < n; i++)
        if (w[i] < floor_w) w[i] = floor_w;
}

static int64_t round_half_even(double x) { return (int64_t)nearbyint(x); }

void fuzz_reference(const cfg *c, int h, refhead *rh) {
    const int64_t *S = c->size, *r = c->r, *o = c->o[h];
    int64_t P[D], before[D], F[D], crop[D], st[D][64], nw[D];
    double z[D];
    rh->placeable = 1;
    for (int k = 0; k < D; k++) {
        P[k] = S[k] > r[k] ? S[k] : r[k];
        before[k] = (P[k] - S[k]) / 2;
        z[k] = (double)o[k] / (double)r[k];
        F[k] = o[k] == r[k] ? P[k] : (int64_t)((double)P[k] * z[k]);
        nw[k] = fuzz_starts_of(S[k], r[k], c->overlap[k], st[k]);
        if (o[k] == r[k]) {
            crop[k] = before[k];
            rh->out[k] = S[k];
        } else {
            /* [round(before z), round((before + S) z)), clamped to the buffer as Python's
             * slicing clamps it */
            crop[k] = round_half_even((double)before[k] * z[k]);
            int64_t hi = round_half_even((double)(before[k] + S[k]) * z[k]);
            if (hi > F[k]) hi = F[k];
            rh->out[k] = hi - crop[k];
        }
        if (rh->out[k] <= 0) rh->placeable = 0;
        for (int64_t t = 0; t < nw[k]; t++) {
            int64_t lo = (int64_t)((double)st[k][t] * z[k]), hi = (int64_t)((double)(st[k][t] + r[k]) * z[k]);
            if (o[k] == r[k]) {
                lo = st[k][t];
                hi = lo + r[k];
            }
            if (hi - lo != o[k] || lo < 0 || hi > F[k]) rh->placeable = 0;
        }
    }
    if (!rh->placeable) return;
    const int64_t C = c->C[h], rv = r[0] * r[1] * r[2], ovx = o[0] * o[1] * o[2];
    const int64_t fv = F[0] * F[1] * F[2];
    float *w = malloc((size_t)rv * sizeof(float)), *wo = malloc((size_t)ovx * sizeof(float));
    float *win = malloc((size_t)(c->cin * rv) * sizeof(float));
    float *pred = malloc((size_t)(C * ovx) * sizeof(float));
    double *mean = malloc((size_t)(C * ovx) * sizeof(double));
    double *acc = calloc((size_t)(c->batch * C * fv), sizeof(double));
    double *cnt = calloc((size_t)fv, sizeof(double));
    /* float16 sums: per voxel, how many runs it adds and the largest score among them */
    int64_t *adds = c->f16 ? calloc((size_t)fv, sizeof(int64_t)) : NULL;
    double *big = c->f16 ? calloc((size_t)(c->batch * fv), sizeof(double)) : NULL;
    ref_weights(c, w);
    int64_t i[D];
    for (i[0] = 0; i[0] < o[0]; i[0]++)
        for (i[1] = 0; i[1] < o[1]; i[1]++)
            for (i[2] = 0; i[2] < o[2]; i[2]++) {
                int64_t src[D];
                for (int k = 0; k < D; k++) {
                    src[k] = (int64_t)floor(((double)i[k] + 0.5) * (double)r[k] / (double)o[k]);
                    if (src[k] > r[k] - 1) src[k] = r[k] - 1;
                }
                wo[(i[0] * o[1] + i[1]) * o[2] + i[2]] = w[(src[0] * r[1] + src[1]) * r[2] + src[2]];
            }
    const int64_t svol = S[0] * S[1] * S[2];
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t t0 = 0; t0 < nw[0]; t0++)
            for (int64_t t1 = 0; t1 < nw[1]; t1++)
                for (int64_t t2 = 0; t2 < nw[2]; t2++) {
                    const int64_t s0[D] = {st[0][t0], st[1][t1], st[2][t2]};
                    int64_t lo[D];
                    for (int k = 0; k < D; k++)
                        lo[k] = o[k] == r[k] ? s0[k] : (int64_t)((double)s0[k] * z[k]);
                    memset(mean, 0, (size_t)(C * ovx) * sizeof(double));
                    /* the mean of the predictions of the window flipped along each subset of
                     * the mirrored dims, each flipped back */
                    for (unsigned m = 0; m < 1u << D; m++) {
                        if (m & ~c->mirror) continue;
                        for (int64_t q = 0; q < c->cin; q++)
                            for (i[0] = 0; i[0] < r[0]; i[0]++)
                                for (i[1] = 0; i[1] < r[1]; i[1]++)
                                    for (i[2] = 0; i[2] < r[2]; i[2]++) {
                                        int64_t x[D];
                                        int constant = 0;
                                        for (int k = 0; k < D; k++) {
                                            int64_t j = m >> k & 1 ? r[k] - 1 - i[k] : i[k];
                                            x[k] = pad_index(c->pad, s0[k] + j, before[k], S[k]);
                                            constant |= x[k] < 0;
                                        }
                                        float v = constant ? c->cval
                                                           : c->input[(b * c->cin + q) * svol +
                                                                      (x[0] * S[1] + x[1]) * S[2] + x[2]];
                                        win[q * rv + (i[0] * r[1] + i[1]) * r[2] + i[2]] = v;
                                    }
                        fuzz_net(c, h, win, pred);
                        for (i[0] = 0; i[0] < o[0]; i[0]++)
                            for (i[1] = 0; i[1] < o[1]; i[1]++)
                                for (i[2] = 0; i[2] < o[2]; i[2]++) {
                                    int64_t j[D];
                                    for (int k = 0; k < D; k++) j[k] = m >> k & 1 ? o[k] - 1 - i[k] : i[k];
                                    int64_t oi = (i[0] * o[1] + i[1]) * o[2] + i[2];
                                    int64_t oj = (j[0] * o[1] + j[1]) * o[2] + j[2];
                                    int64_t fi = ((lo[0] + j[0]) * F[1] + lo[1] + j[1]) * F[2] + lo[2] + j[2];
                                    for (int64_t ch = 0; ch < C; ch++) {
                                        mean[ch * ovx + oj] += (double)pred[ch * ovx + oi] / c->passes;
                                        if (big && fabs(pred[ch * ovx + oi]) > big[b * fv + fi])
                                            big[b * fv + fi] = fabs(pred[ch * ovx + oi]);
                                    }
                                    if (adds && b == 0) adds[fi]++;
                                }
                    }
                    for (i[0] = 0; i[0] < o[0]; i[0]++)
                        for (i[1] = 0; i[1] < o[1]; i[1]++)
                            for (i[2] = 0; i[2] < o[2]; i[2]++) {
                                int64_t oi = (i[0] * o[1] + i[1]) * o[2] + i[2];
                                int64_t fi = ((lo[0] + i[0]) * F[1] + lo[1] + i[1]) * F[2] + lo[2] + i[2];
                                for (int64_t ch = 0; ch < C; ch++)
                                    acc[(b * C + ch) * fv + fi] += mean[ch * ovx + oi] * wo[oi];
                                if (b == 0) cnt[fi] += wo[oi];
                            }
                }
    const int64_t *out = rh->out;
    const int64_t ov = out[0] * out[1] * out[2];
    rh->scores = malloc((size_t)(c->batch * C * ov) * sizeof(double));
    rh->tol16 = c->f16 ? malloc((size_t)(c->batch * ov) * sizeof(double)) : NULL;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t ch = 0; ch < C; ch++)
            for (i[0] = 0; i[0] < out[0]; i[0]++)
                for (i[1] = 0; i[1] < out[1]; i[1]++)
                    for (i[2] = 0; i[2] < out[2]; i[2]++) {
                        int64_t fi = ((crop[0] + i[0]) * F[1] + crop[1] + i[1]) * F[2] + crop[2] + i[2];
                        CHECK(cnt[fi] > 0, "reference: voxel not covered by any window");
                        int64_t vi = (i[0] * out[1] + i[1]) * out[2] + i[2];
                        rh->scores[(b * C + ch) * ov + vi] = acc[(b * C + ch) * fv + fi] / cnt[fi];
                        /* each binary16 add rounds the running mean (never above the largest
                         * score it takes in) by at most 2^-11 of it: a bound with room */
                        if (rh->tol16)
                            rh->tol16[b * ov + vi] = 2.0 * (double)(adds[fi] + 2) * big[b * fv + fi] / 2048.0;
                    }
    free(w);
    free(wo);
    free(win);
    free(pred);
    free(mean);
    free(adds);
    free(big);
    free(acc);
    free(cnt);
}

/* within tol (absolute and relative), and e (float16 sums' bound, 0 for float32) */
static int close_enough(double got, double want, double tol, double e) {
    return fabs(got - want) <= tol + tol * fabs(want) + e;
}

/* A voxel whose blended scores include NaN (NaN input voxels under the window). */
static void check_nan_voxel(const cfg *c, int idx, const void *data, swi_dtype dt, int64_t b, int64_t v,
                            int64_t ov, const double *x, int64_t first_nan, double e) {
    const swi_output *o = &c->outs[idx];
    const int64_t C = c->C[o->head];
    switch (o->reduce) {
    case SWI_REDUCE_NONE:
    case SWI_REDUCE_CUSTOM:
        for (int64_t ch = 0; ch < C; ch++) {
            float got = ((const float *)data)[(b * C + ch) * ov + v];
            if (isnan(x[ch * ov]))
                CHECK(isnan(got), "output %d channel %lld voxel %lld: %g where the reference is NaN", idx,
                      (long long)ch, (long long)v, got);
            else
                CHECK(close_enough(got, x[ch * ov], 1e-4, e),
                      "output %d channel %lld voxel %lld: %.9g, expected %.9g", idx, (long long)ch,
                      (long long)v, got, x[ch * ov]);
        }
        break;
    case SWI_REDUCE_ARGMAX: {
        int64_t got = dt == SWI_DTYPE_UINT8 ? ((const uint8_t *)data)[b * ov + v]
                                            : ((const uint16_t *)data)[b * ov + v];
        CHECK(got == first_nan, "output %d voxel %lld: label %lld, expected the first NaN channel %lld", idx,
              (long long)v, (long long)got, (long long)first_nan);
        break;
    }
    case SWI_REDUCE_MAX:
        CHECK(isnan(((const float *)data)[b * ov + v]), "output %d voxel %lld: max of NaN scores is %g", idx,
              (long long)v, ((const float *)data)[b * ov + v]);
        break;
    case SWI_REDUCE_SOFTMAX:
        for (int64_t ch = 0; ch < C; ch++) {
            float got = ((const float *)data)[(b * C + ch) * ov + v];
            CHECK(isnan(got), "output %d channel %lld voxel %lld: softmax %g where a score is NaN", idx,
                  (long long)ch, (long long)v, got);
        }
        break;
    default: break; /* confidence and entropy of NaN scores: not specified */
    }
}

void fuzz_check_values(const cfg *c, int idx, const refhead *rh, const void *data, swi_dtype dt) {
    const swi_output *o = &c->outs[idx];
    const int64_t C = c->C[o->head], ov = rh->out[0] * rh->out[1] * rh->out[2];
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t v = 0; v < ov; v++) {
            const double *x = rh->scores + b * C * ov + v;
            const double e = rh->tol16 ? rh->tol16[b * ov + v] : 0;
            int64_t first_nan = -1;
            for (int64_t ch = 0; ch < C && first_nan < 0; ch++)
                if (isnan(x[ch * ov])) first_nan = ch;
            if (first_nan >= 0) {
                /* NaN ranks above every number; NONE keeps NaN where the reference has it */
                check_nan_voxel(c, idx, data, dt, b, v, ov, x, first_nan, e);
                continue;
            }
            double mx = x[0], second = -INFINITY;
            int64_t arg = 0;
            for (int64_t ch = 1; ch < C; ch++) {
                double y = x[ch * ov];
                if (y > mx) {
                    second = mx;
                    mx = y;
                    arg = ch;
                } else if (y > second) {
                    second = y;
                }
            }
            double sum = 0;
            for (int64_t ch = 0; ch < C; ch++) sum += exp(x[ch * ov] - mx);
            switch (o->reduce) {
            case SWI_REDUCE_NONE:
            case SWI_REDUCE_CUSTOM:
                for (int64_t ch = 0; ch < C; ch++) {
                    float got = ((const float *)data)[(b * C + ch) * ov + v];
                    CHECK(isfinite(got) && close_enough(got, x[ch * ov], 1e-4, e),
                          "output %d scores image %lld channel %lld voxel %lld: %.9g, expected %.9g", idx,
                          (long long)b, (long long)ch, (long long)v, got, x[ch * ov]);
                }
                break;
            case SWI_REDUCE_ARGMAX: {
                int64_t got = dt == SWI_DTYPE_UINT8 ? ((const uint8_t *)data)[b * ov + v]
                                                    : ((const uint16_t *)data)[b * ov + v];
                CHECK(got >= 0 && got < C, "output %d label %lld of %lld classes", idx, (long long)got,
                      (long long)C);
                if (mx - second > 1e-4 + 1e-4 * fabs(mx) + 2 * e)
                    CHECK(got == arg, "output %d image %lld voxel %lld: label %lld, expected %lld", idx,
                          (long long)b, (long long)v, (long long)got, (long long)arg);
                break;
            }
            case SWI_REDUCE_MAX: {
                float got = ((const float *)data)[b * ov + v];
                CHECK(isfinite(got) && close_enough(got, mx, 1e-4, e), "output %d max %.9g, expected %.9g",
                      idx, got, mx);
                break;
            }
            case SWI_REDUCE_CONFIDENCE: {
                float got = ((const float *)data)[b * ov + v];
                /* a softmax moves by at most twice its scores' largest error */
                CHECK(isfinite(got) && close_enough(got, 1.0 / sum, 1e-4, 2 * e),
                      "output %d confidence %.9g, expected %.9g", idx, got, 1.0 / sum);
                break;
            }
            case SWI_REDUCE_SOFTMAX:
                for (int64_t ch = 0; ch < C; ch++) {
                    float got = ((const float *)data)[(b * C + ch) * ov + v];
                    double p = exp(x[ch * ov] - mx) / sum;
                    CHECK(isfinite(got) && fabs(got - p) <= 1e-4 + 2 * e,
                          "output %d softmax image %lld channel %lld voxel %lld: %.9g, expected %.9g", idx,
                          (long long)b, (long long)ch, (long long)v, got, p);
                }
                break;
            case SWI_REDUCE_ENTROPY: {
                double h = 0;
                for (int64_t ch = 0; ch < C; ch++) {
                    double p = exp(x[ch * ov] - mx) / sum;
                    if (p > 0) h -= p * log(p);
                }
                float got = ((const float *)data)[b * ov + v];
                CHECK(isfinite(got) && fabs(got - h) <= 1e-3 + 4 * e * (1 + log((double)C)),
                      "output %d entropy %.9g, expected %.9g", idx, got, h);
                break;
            }
            }
        }
}
