/* nnunet_prep.c -- nnU-Net v2's nonzero mask and normalisation (nnunet_prep.h), as
 * preprocessing/cropping/cropping.py and normalization/default_normalization_schemes.py
 * compute them. */
#include "nnunet_prep.h"

#include "alloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- the nonzero mask ---------------------------------------------------------------- */

enum { UNSEEN = 0, OBJECT = 1, OUTSIDE = 2 };

/* Row (i, j) of m (the rows run along the last axis): its unseen voxels that touch the
 * border or an outside voxel (in the row, or in a neighbour row at the same k) become
 * outside, runs filled both ways. Returns 1 when a voxel changed. */
static int fill_row(uint8_t *m, const int64_t n[3], int64_t i, int64_t j) {
    uint8_t *row = m + (i * n[1] + j) * n[2];
    const uint8_t *nb[4] = {i > 0 ? row - n[1] * n[2] : NULL, i + 1 < n[0] ? row + n[1] * n[2] : NULL,
                            j > 0 ? row - n[2] : NULL, j + 1 < n[1] ? row + n[2] : NULL};
    const int edge_row = i == 0 || j == 0 || i + 1 == n[0] || j + 1 == n[1];
    int changed = 0;
    for (int64_t k = 0; k < n[2]; k++) {
        if (row[k] != UNSEEN) continue;
        int out = edge_row || k == 0 || k + 1 == n[2] || row[k - 1] == OUTSIDE;
        for (int q = 0; q < 4 && !out; q++) out = nb[q] && nb[q][k] == OUTSIDE;
        if (out) {
            row[k] = OUTSIDE;
            changed = 1;
        }
    }
    for (int64_t k = n[2] - 2; k >= 0; k--)
        if (row[k] == UNSEEN && row[k + 1] == OUTSIDE) {
            row[k] = OUTSIDE;
            changed = 1;
        }
    return changed;
}

/* binary_fill_holes with the cross structure: the background is what the border reaches
 * through face neighbours. A worklist of rows (each on it at most once at a time), a row
 * rescanned whenever a neighbour row gained outside voxels: no recursion, and scratch of
 * 9 bytes per row. */
static int fill_holes(uint8_t *m, const int64_t n[3], char *err, size_t errlen) {
    const int64_t rows = n[0] * n[1];
    int64_t *stack = cli_malloc((size_t)rows * sizeof *stack);
    uint8_t *queued = cli_malloc((size_t)rows);
    if (!stack || !queued) {
        free(stack);
        free(queued);
        return fail(err, errlen, "out of memory for the nonzero mask's fill (%lld rows)", (long long)rows);
    }
    int64_t top = 0;
    for (int64_t r = rows - 1; r >= 0; r--) {
        stack[top++] = r;
        queued[r] = 1;
    }
    while (top > 0) {
        const int64_t r = stack[--top], i = r / n[1], j = r % n[1];
        queued[r] = 0;
        if (!fill_row(m, n, i, j)) continue;
        const int64_t next[4] = {i > 0 ? r - n[1] : -1, i + 1 < n[0] ? r + n[1] : -1, j > 0 ? r - 1 : -1,
                                 j + 1 < n[1] ? r + 1 : -1};
        for (int q = 0; q < 4; q++)
            if (next[q] >= 0 && !queued[next[q]]) {
                queued[next[q]] = 1;
                stack[top++] = next[q];
            }
    }
    free(stack);
    free(queued);
    return 0;
}

int nn_nonzero_box(const float *data, int64_t channels, const int64_t size[3], uint8_t *mask, int64_t lo[3],
                   int64_t hi[3], char *err, size_t errlen) {
    if (!data || !mask || channels < 1) return fail(err, errlen, "nn_nonzero_box: no data, mask or channels");
    int64_t nv = 1;
    for (int a = 0; a < 3; a++) {
        if (size[a] < 1 || size[a] > ((int64_t)1 << 31))
            return fail(err, errlen, "nn_nonzero_box: sizes must be 1..2^31");
        if (nv > ((int64_t)1 << 40) / size[a])
            return fail(err, errlen, "nn_nonzero_box: the volume is too large");
        nv *= size[a];
    }
    for (int64_t v = 0; v < nv; v++) mask[v] = UNSEEN;
    for (int64_t c = 0; c < channels; c++) {
        const float *x = data + c * nv;
        for (int64_t v = 0; v < nv; v++)
            if (x[v] != 0) mask[v] = OBJECT; /* NaN != 0, as numpy's */
    }
    if (fill_holes(mask, size, err, errlen) != 0) return -1;
    for (int a = 0; a < 3; a++) {
        lo[a] = size[a];
        hi[a] = 0;
    }
    for (int64_t i = 0, v = 0; i < size[0]; i++)
        for (int64_t j = 0; j < size[1]; j++)
            for (int64_t k = 0; k < size[2]; k++, v++) {
                mask[v] = mask[v] != OUTSIDE;
                if (!mask[v]) continue;
                const int64_t p[3] = {i, j, k};
                for (int a = 0; a < 3; a++) {
                    lo[a] = p[a] < lo[a] ? p[a] : lo[a];
                    hi[a] = p[a] + 1 > hi[a] ? p[a] + 1 : hi[a];
                }
            }
    if (hi[0] == 0) /* nothing nonzero: the whole volume */
        for (int a = 0; a < 3; a++) {
            lo[a] = 0;
            hi[a] = size[a];
        }
    return 0;
}

/* ---- normalisation ------------------------------------------------------------------- */

#define NN_EPS 1e-8

/* max(std, eps) as numpy divides by it: a float32 std, or the Python float eps cast to
 * float32 */
static float divisor(float std) { return (double)std > NN_EPS ? std : (float)NN_EPS; }

/* numpy's mean and std (ddof 0) of the float32 voxels x where mask (NULL: all), in float32:
 * returns the count */
static int64_t mean_std(const float *x, int64_t n, const uint8_t *mask, float *mean, float *std) {
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++)
        if (!mask || mask[i]) {
            sum += x[i];
            cnt++;
        }
    if (cnt == 0) return 0;
    const float m = (float)(sum / (double)cnt);
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        if (!mask || mask[i]) {
            const double d = (float)(x[i] - m); /* numpy's x - mean in float32 */
            ss += d * d;
        }
    *mean = m;
    *std = (float)sqrt(ss / (double)cnt);
    return cnt;
}

int nn_normalize(float *x, int64_t n, const uint8_t *mask, const nn_norm *norm, char *err, size_t errlen) {
    if (!x || !norm || n < 0) return fail(err, errlen, "nn_normalize: no data or scheme");
    switch (norm->scheme) {
    case NN_NORM_NONE: return 0;
    case NN_NORM_CT: {
        /* the plans' numbers as numpy takes Python floats with a float32 array */
        const float lo = (float)norm->p005, hi = (float)norm->p995, mean = (float)norm->mean;
        const float d = (float)fmax(norm->std, NN_EPS);
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] < lo ? lo : x[i];
            v = v > hi ? hi : v;
            x[i] = (v - mean) / d;
        }
        return 0;
    }
    case NN_NORM_ZSCORE: {
        if (norm->use_mask && !mask)
            return fail(err, errlen, "ZScoreNormalization with use_mask_for_norm needs the mask");
        const uint8_t *m = norm->use_mask ? mask : NULL;
        float mean = 0, std = 0;
        if (mean_std(x, n, m, &mean, &std) == 0) return 0; /* an empty selection changes nothing */
        const float d = divisor(std);
        for (int64_t i = 0; i < n; i++)
            if (!m || m[i]) x[i] = (x[i] - mean) / d;
        return 0;
    }
    case NN_NORM_RESCALE01: {
        if (n == 0) return 0;
        float mn = x[0];
        for (int64_t i = 1; i < n; i++) mn = x[i] < mn ? x[i] : mn;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            x[i] -= mn;
            mx = x[i] > mx ? x[i] : mx;
        }
        const float d = divisor(mx);
        for (int64_t i = 0; i < n; i++) x[i] /= d;
        return 0;
    }
    case NN_NORM_RGB01:
        for (int64_t i = 0; i < n; i++)
            if (!(x[i] >= 0 && x[i] <= 255))
                return fail(
                    err, errlen,
                    "RGBTo01Normalization: value %g at voxel %lld is outside [0, 255] (not an RGB image)",
                    (double)x[i], (long long)i);
        for (int64_t i = 0; i < n; i++) x[i] /= 255.0f;
        return 0;
    default: return fail(err, errlen, "nn_normalize: unknown scheme %d", norm->scheme);
    }
}
