/* nnunet_steps_local.c -- see nnunet_steps_local.h. */
#include "nnunet_steps_local.h"

#include "swi_resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nnl_nonzero_box(const float *x, int64_t c, const int64_t n[3], int64_t lo[3], int64_t hi[3]) {
    const int64_t N = n[0] * n[1] * n[2];
    for (int a = 0; a < 3; a++) {
        lo[a] = n[a];
        hi[a] = 0;
    }
    int64_t v = 0;
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++, v++) {
                int nz = 0;
                for (int64_t ch = 0; ch < c && !nz; ch++) nz = x[ch * N + v] != 0;
                if (!nz) continue;
                const int64_t p[3] = {i, j, k};
                for (int a = 0; a < 3; a++) {
                    if (p[a] < lo[a]) lo[a] = p[a];
                    if (p[a] + 1 > hi[a]) hi[a] = p[a] + 1;
                }
            }
    if (hi[0] == 0)
        for (int a = 0; a < 3; a++) {
            lo[a] = 0;
            hi[a] = n[a];
        }
}

int nnl_fill_holes(uint8_t *m, const int64_t n[3]) {
    const int64_t N = n[0] * n[1] * n[2], st[3] = {n[1] * n[2], n[2], 1};
    int64_t *queue = malloc((size_t)(N > 0 ? N : 1) * sizeof *queue);
    if (!queue) return 1;
    int64_t head = 0, tail = 0, v = 0;
    /* the zero voxels reachable from the border (6-connected) are the outside: 2 */
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++, v++)
                if (!m[v] &&
                    (i == 0 || j == 0 || k == 0 || i == n[0] - 1 || j == n[1] - 1 || k == n[2] - 1)) {
                    m[v] = 2;
                    queue[tail++] = v;
                }
    while (head < tail) {
        const int64_t at = queue[head++];
        const int64_t p[3] = {at / st[0], at / st[1] % n[1], at % n[2]};
        for (int a = 0; a < 3; a++)
            for (int d = -1; d <= 1; d += 2) {
                const int64_t q = p[a] + d;
                if (q < 0 || q >= n[a]) continue;
                const int64_t w = at + d * st[a];
                if (m[w] == 0) {
                    m[w] = 2;
                    queue[tail++] = w;
                }
            }
    }
    free(queue);
    for (int64_t u = 0; u < N; u++) m[u] = m[u] != 2;
    return 0;
}

void nnl_normalize(const nn_card_channel *ch, float *x, const uint8_t *mask, int64_t n) {
    const double eps = 1e-8;
    switch (ch->scheme) {
    case NNC_NORM_CT: {
        const double sd = ch->std > eps ? ch->std : eps;
        for (int64_t v = 0; v < n; v++) {
            double y = x[v] < ch->lo ? ch->lo : x[v] > ch->hi ? ch->hi : x[v];
            x[v] = (float)((y - ch->mean) / sd);
        }
        break;
    }
    case NNC_NORM_ZSCORE: {
        const int m = ch->use_mask && mask;
        double sum = 0, sq = 0;
        int64_t cnt = 0;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) {
                sum += x[v];
                cnt++;
            }
        const double mean = cnt ? sum / (double)cnt : 0;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) sq += ((double)x[v] - mean) * ((double)x[v] - mean);
        double sd = cnt ? sqrt(sq / (double)cnt) : 0;
        if (sd < eps) sd = eps;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) x[v] = (float)(((double)x[v] - mean) / sd);
        break;
    }
    case NNC_NORM_RESCALE: {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t v = 0; v < n; v++) lo = x[v] < lo ? x[v] : lo;
        for (int64_t v = 0; v < n; v++) {
            x[v] -= lo;
            hi = x[v] > hi ? x[v] : hi;
        }
        const double d = hi > eps ? hi : eps;
        for (int64_t v = 0; v < n; v++) x[v] = (float)(x[v] / d);
        break;
    }
    case NNC_NORM_RGB:
        for (int64_t v = 0; v < n; v++) x[v] = x[v] / 255.0f;
        break;
    case NNC_NORM_NONE: break;
    }
}

/* ---- resample_data_or_seg_to_shape: skimage's resize (scipy's zoom, grid_mode, mode
 * 'nearest', clipped to the input's range) and map_coordinates along a separate axis ---- */

#define NNL_PAD 12 /* scipy pads a line by 12 edge values before its spline prefilter */

/* scipy's cubic B-spline prefilter of one line (pole sqrt(3) - 2, the causal init of its
 * 'reflect' boundary and the anticausal init that goes with it). */
static void spline_filter3(double *c, int64_t n) {
    if (n < 2) return;
    const double z = sqrt(3.0) - 2.0, gain = (1.0 - z) * (1.0 - 1.0 / z);
    for (int64_t i = 0; i < n; i++) c[i] *= gain;
    const double zn = pow(z, (double)n), c0 = c[0];
    double zi = z;
    c[0] = c[0] + zn * c[n - 1];
    for (int64_t i = 1; i < n; i++) {
        c[0] += zi * (c[i] + zn * c[n - 1 - i]);
        zi *= z;
    }
    c[0] *= z / (1.0 - zn * zn);
    c[0] += c0;
    for (int64_t i = 1; i < n; i++) c[i] += z * c[i - 1];
    c[n - 1] *= z / (z - 1.0);
    for (int64_t i = n - 2; i >= 0; i--) c[i] = z * (c[i + 1] - c[i]);
}

/* One line x[0..n) (stride sx) resized to y[0..m) (stride sy) with spline order 0, 1 or 3;
 * work holds n + 2 * NNL_PAD doubles. */
static void resize_line(const double *x, int64_t sx, int64_t n, double *y, int64_t sy, int64_t m, int order,
                        double *work) {
    const double scale = (double)n / (double)m;
    if (order == 3 && n > 1) {
        const int64_t np = n + 2 * NNL_PAD;
        for (int64_t i = 0; i < np; i++) {
            int64_t k = i - NNL_PAD;
            work[i] = x[(k < 0 ? 0 : k >= n ? n - 1 : k) * sx];
        }
        spline_filter3(work, np);
        for (int64_t o = 0; o < m; o++) {
            double cc = ((double)o + 0.5) * scale - 0.5 + NNL_PAD;
            cc = cc < 0 ? 0 : cc > (double)(np - 1) ? (double)(np - 1) : cc;
            const double f = floor(cc), t = cc - f;
            const int64_t start = (int64_t)f - 1;
            const double w[4] = {(1 - t) * (1 - t) * (1 - t) / 6.0,
                                 (4.0 - 6.0 * t * t + 3.0 * t * t * t) / 6.0,
                                 (1.0 + 3.0 * t + 3.0 * t * t - 3.0 * t * t * t) / 6.0, t * t * t / 6.0};
            double v = 0;
            for (int h = 0; h < 4; h++) {
                int64_t k = start + h;
                k = k < 0 ? -k : k >= np ? 2 * np - 2 - k : k; /* never reached with the padding */
                v += w[h] * work[k];
            }
            y[o * sy] = v;
        }
        return;
    }
    for (int64_t o = 0; o < m; o++) {
        double cc = ((double)o + 0.5) * scale - 0.5;
        cc = cc < 0 ? 0 : cc > (double)(n - 1) ? (double)(n - 1) : cc;
        if (order == 0) {
            y[o * sy] = x[(int64_t)floor(cc + 0.5) * sx];
            continue;
        }
        const int64_t a = (int64_t)floor(cc);
        const double t = cc - (double)a;
        y[o * sy] = a + 1 < n ? x[a * sx] * (1 - t) + x[(a + 1) * sx] * t : x[a * sx];
    }
}

/* src [n0][n1][n2] resized along axis `ax` to m: dst [..m..]. */
static int resize_axis(const double *src, const int64_t n[3], int ax, int64_t m, double *dst, int order) {
    int64_t out[3] = {n[0], n[1], n[2]};
    out[ax] = m;
    const int64_t sin[3] = {n[1] * n[2], n[2], 1}, sout[3] = {out[1] * out[2], out[2], 1};
    double *work = malloc((size_t)(n[ax] + 2 * NNL_PAD) * sizeof *work);
    if (!work) return 1;
    const int a1 = ax == 0 ? 1 : 0, a2 = ax == 2 ? 1 : 2;
    for (int64_t p = 0; p < n[a1]; p++)
        for (int64_t q = 0; q < n[a2]; q++)
            resize_line(src + p * sin[a1] + q * sin[a2], sin[ax], n[ax], dst + p * sout[a1] + q * sout[a2],
                        sout[ax], m, order, work);
    free(work);
    return 0;
}

/* Resize x [n] (doubles) to out along the axes in `axes` (a bit each), clipped to [lo, hi]
 * when clip; the result replaces *x (reallocated). */
static int resize_axes(double **x, int64_t n[3], const int64_t out[3], unsigned axes, int order, int clip) {
    double lo = INFINITY, hi = -INFINITY;
    const int64_t N = n[0] * n[1] * n[2];
    for (int64_t v = 0; clip && v < N; v++) {
        lo = (*x)[v] < lo ? (*x)[v] : lo;
        hi = (*x)[v] > hi ? (*x)[v] : hi;
    }
    for (int a = 0; a < 3; a++) {
        if (!(axes & (1u << a)) || n[a] == out[a]) continue;
        int64_t sz[3] = {n[0], n[1], n[2]};
        sz[a] = out[a];
        double *y = malloc((size_t)(sz[0] * sz[1] * sz[2]) * sizeof *y);
        if (!y || resize_axis(*x, n, a, out[a], y, order)) {
            free(y);
            return 1;
        }
        free(*x);
        *x = y;
        n[a] = out[a];
    }
    const int64_t M = n[0] * n[1] * n[2];
    for (int64_t v = 0; clip && v < M; v++) (*x)[v] = (*x)[v] < lo ? lo : (*x)[v] > hi ? hi : (*x)[v];
    return 0;
}

int nnl_resize(const float *src, const int64_t in[3], float *dst, const int64_t out[3], int64_t c, int order,
               int separate_z, int axis, int order_z) {
    const int64_t N = in[0] * in[1] * in[2], M = out[0] * out[1] * out[2];
    if (in[0] == out[0] && in[1] == out[1] && in[2] == out[2]) {
        memcpy(dst, src, (size_t)(N * c) * sizeof *src);
        return 0;
    }
    if ((order != 0 && order != 1 && order != 3) || (separate_z && order_z != 0 && order_z != 1)) return 1;
    for (int64_t ch = 0; ch < c; ch++) {
        int64_t n[3] = {in[0], in[1], in[2]};
        double *x = NULL;
        if (!separate_z) {
            x = malloc((size_t)N * sizeof *x);
            if (!x) return 2;
            for (int64_t v = 0; v < N; v++) x[v] = src[ch * N + v];
            if (resize_axes(&x, n, out, 7u, order, 1)) {
                free(x);
                return 2;
            }
        } else {
            /* every slice across `axis` in 2-D (skimage's resize, clipped to the slice's range) */
            int64_t mid[3] = {out[0], out[1], out[2]};
            mid[axis] = in[axis];
            x = malloc((size_t)(mid[0] * mid[1] * mid[2]) * sizeof *x);
            if (!x) return 2;
            int64_t sl[3] = {in[0], in[1], in[2]}, sl_out[3] = {mid[0], mid[1], mid[2]};
            sl[axis] = sl_out[axis] = 1;
            const int64_t ns = sl[0] * sl[1] * sl[2];
            const int64_t st[3] = {in[1] * in[2], in[2], 1}, sm[3] = {mid[1] * mid[2], mid[2], 1};
            for (int64_t k = 0; k < in[axis]; k++) {
                double *s = malloc((size_t)ns * sizeof *s);
                if (!s) {
                    free(x);
                    return 2;
                }
                int64_t v = 0, p[3];
                for (p[0] = 0; p[0] < sl[0]; p[0]++)
                    for (p[1] = 0; p[1] < sl[1]; p[1]++)
                        for (p[2] = 0; p[2] < sl[2]; p[2]++, v++) {
                            int64_t q[3] = {p[0], p[1], p[2]};
                            q[axis] = k;
                            s[v] = src[ch * N + q[0] * st[0] + q[1] * st[1] + q[2] * st[2]];
                        }
                int64_t sn[3] = {sl[0], sl[1], sl[2]};
                if (resize_axes(&s, sn, sl_out, 7u & ~(1u << axis), order, 1)) {
                    free(x);
                    free(s);
                    return 2;
                }
                v = 0;
                for (p[0] = 0; p[0] < sl_out[0]; p[0]++)
                    for (p[1] = 0; p[1] < sl_out[1]; p[1]++)
                        for (p[2] = 0; p[2] < sl_out[2]; p[2]++, v++) {
                            int64_t q[3] = {p[0], p[1], p[2]};
                            q[axis] = k;
                            x[q[0] * sm[0] + q[1] * sm[1] + q[2] * sm[2]] = s[v];
                        }
                free(s);
            }
            memcpy(n, mid, sizeof n);
            /* then that axis alone (map_coordinates, order_z, mode 'nearest'; no clipping) */
            if (resize_axes(&x, n, out, 1u << axis, order_z, 0)) {
                free(x);
                return 2;
            }
        }
        for (int64_t v = 0; v < M; v++) dst[ch * M + v] = (float)x[v];
        free(x);
    }
    return 0;
}
