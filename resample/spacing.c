/* spacing.c -- Spacingd's grid and trilinear resampling (swi_resample.h). */
#include "swi_resample.h"

#include "resample_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* MONAI's AFFINE_TOL: spacings this close to the input's are kept, maps this close to the
 * identity leave the volume alone. */
#define AFFINE_TOL 1e-3

void rs__err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int rs__inv3(const double m[3][3], double inv[3][3]) {
    double c00 = m[1][1] * m[2][2] - m[1][2] * m[2][1];
    double c01 = m[1][2] * m[2][0] - m[1][0] * m[2][2];
    double c02 = m[1][0] * m[2][1] - m[1][1] * m[2][0];
    double det = m[0][0] * c00 + m[0][1] * c01 + m[0][2] * c02;
    double scale = 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) scale = fmax(scale, fabs(m[r][c]));
    if (!isfinite(det) || !(fabs(det) > 1e-12 * scale * scale * scale)) return -1;
    inv[0][0] = c00 / det;
    inv[1][0] = c01 / det;
    inv[2][0] = c02 / det;
    inv[0][1] = (m[0][2] * m[2][1] - m[0][1] * m[2][2]) / det;
    inv[1][1] = (m[0][0] * m[2][2] - m[0][2] * m[2][0]) / det;
    inv[2][1] = (m[0][1] * m[2][0] - m[0][0] * m[2][1]) / det;
    inv[0][2] = (m[0][1] * m[1][2] - m[0][2] * m[1][1]) / det;
    inv[1][2] = (m[0][2] * m[1][0] - m[0][0] * m[1][2]) / det;
    inv[2][2] = (m[0][0] * m[1][1] - m[0][1] * m[1][0]) / det;
    return 0;
}

int rs__inv_affine(const double a[4][4], double inv[4][4]) {
    double m[3][3], mi[3][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) m[r][c] = a[r][c];
    if (rs__inv3(m, mi) != 0) return -1;
    memset(inv, 0, 16 * sizeof(double));
    for (int r = 0; r < 3; r++) {
        double t = 0;
        for (int c = 0; c < 3; c++) {
            inv[r][c] = mi[r][c];
            t += mi[r][c] * a[c][3];
        }
        inv[r][3] = -t;
    }
    inv[3][3] = 1;
    return 0;
}

static void mul_affine(const double a[4][4], const double b[4][4], double out[4][4]) {
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += a[r][k] * b[k][c];
            out[r][c] = s;
        }
}

/* numpy's allclose(a, b, atol): |a - b| <= atol + 1e-5 |b| everywhere */
static int allclose(const double *a, const double *b, int n, double atol) {
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= atol + 1e-5 * fabs(b[i]))) return 0;
    return 1;
}

swi_status swi_resample_spacing_grid_make(const double affine[4][4], const int64_t size[3],
                                          const double pixdim[3], swi_resample_spacing_grid *g, char *err,
                                          size_t errlen) {
    memset(g, 0, sizeof *g);
    for (int a = 0; a < 3; a++)
        if (!isfinite(pixdim[a]) || !(pixdim[a] > 0) || pixdim[a] > 1e6) {
            rs__err(err, errlen,
                    "spacing %g along axis %d: must be a finite number of "
                    "millimetres > 0",
                    pixdim[a], a);
            return SWI_ERR_INVALID_ARG;
        }
    /* zoom_affine(diagonal=False): the rotation of rzs = Q R (R upper triangular, positive
     * diagonal: numpy's cholesky(rzs^T rzs)^T), by Gram-Schmidt on the columns. */
    double q[3][3];
    for (int c = 0; c < 3; c++) {
        double v[3];
        for (int r = 0; r < 3; r++) v[r] = affine[r][c];
        for (int p = 0; p < c; p++) {
            double d = 0;
            for (int r = 0; r < 3; r++) d += q[r][p] * v[r];
            for (int r = 0; r < 3; r++) v[r] -= d * q[r][p];
        }
        double nrm = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        double orig =
            sqrt(affine[0][c] * affine[0][c] + affine[1][c] * affine[1][c] + affine[2][c] * affine[2][c]);
        if (!(nrm > 1e-9 * orig) || !isfinite(nrm)) {
            rs__err(err, errlen, "the affine's direction part is singular: cannot resample");
            return SWI_ERR_INVALID_ARG;
        }
        for (int r = 0; r < 3; r++) q[r][c] = v[r] / nrm;
        /* a target within AFFINE_TOL of the input's spacing keeps the input's */
        g->pixdim[c] = fabs(orig - pixdim[c]) <= AFFINE_TOL ? orig : pixdim[c];
    }
    double out[4][4] = {{0}};
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) out[r][c] = q[r][c] * g->pixdim[c];
    out[3][3] = 1;

    /* compute_shape_offset(scale_extent=False): the input's corner voxels in new voxels */
    double inv_out[4][4];
    if (rs__inv_affine(out, inv_out) != 0) {
        rs__err(err, errlen, "the affine's direction part is singular: cannot resample");
        return SWI_ERR_INVALID_ARG;
    }
    double m[4][4];
    mul_affine(inv_out, affine, m);
    double corner[8][3], dist[8][3];
    for (int i = 0; i < 8; i++) {
        /* numpy meshgrid(indexing="ij") order: axis 0 slowest */
        corner[i][0] = (i & 4) ? (double)(size[0] - 1) : 0.0;
        corner[i][1] = (i & 2) ? (double)(size[1] - 1) : 0.0;
        corner[i][2] = (i & 1) ? (double)(size[2] - 1) : 0.0;
        for (int r = 0; r < 3; r++)
            dist[i][r] = m[r][0] * corner[i][0] + m[r][1] * corner[i][1] + m[r][2] * corner[i][2] + m[r][3];
    }
    double out_shape[3];
    for (int r = 0; r < 3; r++) {
        double lo = dist[0][r], hi = dist[0][r];
        for (int i = 1; i < 8; i++) {
            lo = fmin(lo, dist[i][r]);
            hi = fmax(hi, dist[i][r]);
        }
        out_shape[r] = nearbyint(hi - lo + 1.0); /* np.round: half to even */
        if (!isfinite(out_shape[r]) || out_shape[r] < 1 || out_shape[r] > (double)SWI_MAX_AXIS) {
            rs__err(err, errlen,
                    "the resampled grid would have %.0f voxels along axis %d (at "
                    "most %lld)",
                    out_shape[r], r, (long long)SWI_MAX_AXIS);
            return SWI_ERR_OVERFLOW;
        }
        g->size[r] = (int64_t)out_shape[r];
    }
    if (g->size[0] > SWI_RESAMPLE_MAX_VOXELS / g->size[1] ||
        g->size[0] * g->size[1] > SWI_RESAMPLE_MAX_VOXELS / g->size[2]) {
        rs__err(err, errlen, "the resampled grid %lldx%lldx%lld would be more than 2^40 voxels",
                (long long)g->size[0], (long long)g->size[1], (long long)g->size[2]);
        return SWI_ERR_OVERFLOW;
    }
    int found = -1;
    for (int i = 0; i < 8 && found < 0; i++) {
        int ok = 1;
        for (int r = 0; r < 3 && ok; r++) {
            double mn = dist[0][r] - dist[i][r];
            for (int k = 1; k < 8; k++) mn = fmin(mn, dist[k][r] - dist[i][r]);
            ok = fabs(mn) <= 1e-8; /* np.allclose(x, 0, rtol=AFFINE_TOL): atol 1e-8 alone */
        }
        if (ok) found = i;
    }
    double offset[3];
    for (int r = 0; r < 3; r++) {
        if (found >= 0) {
            offset[r] = affine[r][0] * corner[found][0] + affine[r][1] * corner[found][1] +
                        affine[r][2] * corner[found][2] + affine[r][3];
        } else {
            offset[r] = affine[r][3];
            for (int c = 0; c < 3; c++)
                offset[r] += affine[r][c] * ((double)size[c] / 2.0) - out[r][c] * (out_shape[c] / 2.0);
        }
        out[r][3] = offset[r];
    }
    g->centred = found < 0;
    memcpy(g->affine, out, sizeof out);

    double inv_src[4][4], inv_new[4][4], a[4][4], b[4][4];
    if (rs__inv_affine(affine, inv_src) != 0 || rs__inv_affine(out, inv_new) != 0) {
        rs__err(err, errlen, "the affine's direction part is singular: cannot resample");
        return SWI_ERR_INVALID_ARG;
    }
    mul_affine(inv_src, out, a);
    mul_affine(inv_new, affine, b);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            g->to_src[r][c] = a[r][c];
            g->to_new[r][c] = b[r][c];
        }
    /* spatial_resample's "affine unchanged" test */
    static const double eye[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    int same_size = g->size[0] == size[0] && g->size[1] == size[1] && g->size[2] == size[2];
    g->identity = same_size && (allclose(&affine[0][0], &out[0][0], 16, AFFINE_TOL) ||
                                allclose(&a[0][0], eye, 16, AFFINE_TOL));
    return SWI_OK;
}

void swi_resample_trilinear(const float *src, const int64_t src_size[3], float *dst,
                            const int64_t dst_size[3], const double map[3][4], int64_t planes, int64_t row_lo,
                            int64_t row_hi) {
    const int64_t n0 = src_size[0], n1 = src_size[1], n2 = src_size[2];
    const int64_t vs = n0 * n1 * n2;
    const int64_t vd = (row_hi - row_lo) * dst_size[1] * dst_size[2];
    int64_t o = 0;
    for (int64_t i = row_lo; i < row_hi; i++)
        for (int64_t j = 0; j < dst_size[1]; j++)
            for (int64_t k = 0; k < dst_size[2]; k++, o++) {
                int64_t t[3][2];
                float f[3];
                for (int r = 0; r < 3; r++)
                    rs__tap(map[r][0] * (double)i + map[r][1] * (double)j + map[r][2] * (double)k + map[r][3],
                            src_size[r], &t[r][0], &t[r][1], &f[r]);
                const int64_t r00 = (t[0][0] * n1 + t[1][0]) * n2, r01 = (t[0][0] * n1 + t[1][1]) * n2;
                const int64_t r10 = (t[0][1] * n1 + t[1][0]) * n2, r11 = (t[0][1] * n1 + t[1][1]) * n2;
                const int64_t c0 = t[2][0], c1 = t[2][1];
                for (int64_t p = 0; p < planes; p++) {
                    const float *x = src + p * vs;
                    dst[p * vd + o] =
                        rs__trilerp(x[r00 + c0], x[r00 + c1], x[r01 + c0], x[r01 + c1], x[r10 + c0],
                                    x[r10 + c1], x[r11 + c0], x[r11 + c1], f[0], f[1], f[2]);
                }
            }
}

void swi_resample_rows_needed(const int64_t src_size[3], const int64_t dst_size[3], const double map[3][4],
                              int64_t row_lo, int64_t row_hi, int64_t *lo, int64_t *hi) {
    double mn = INFINITY, mx = -INFINITY;
    for (int c = 0; c < 8; c++) {
        double i = (double)((c & 4) ? row_hi - 1 : row_lo);
        double j = (double)((c & 2) ? dst_size[1] - 1 : 0);
        double k = (double)((c & 1) ? dst_size[2] - 1 : 0);
        double s = map[0][0] * i + map[0][1] * j + map[0][2] * k + map[0][3];
        mn = fmin(mn, s);
        mx = fmax(mx, s);
    }
    double top = (double)(src_size[0] - 1);
    mn = fmin(fmax(mn, 0), top);
    mx = fmin(fmax(mx, 0), top);
    *lo = (int64_t)floor(mn);
    *hi = (int64_t)floor(mx) + 2;
    if (*hi > src_size[0]) *hi = src_size[0];
}
