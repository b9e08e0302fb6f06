/* zoom.c -- nnU-Net v2's resampling of data (swi_resample.h): skimage.transform.resize as
 * nnU-Net calls it (scipy.ndimage.zoom in grid mode, edge extension, the spline prefilter,
 * clipped to the input's range) and its separate-z path (a 2-D resize of every slice, then
 * scipy.ndimage.map_coordinates along the low-resolution axis).
 *
 * Every step of scipy's spline interpolation acts on one axis (the edge padding, the
 * prefilter, the weights of a tap), so a volume is resampled one axis at a time: the same
 * values as scipy's tensor-product sums up to the rounding of the sums. */
#include "swi_resample.h"

#include "resample_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* scipy pads with edge values before the prefilter (mode 'nearest'): the filter's own
 * boundary rule then acts on the padding, and its effect inside decays as |pole|^NPAD */
#define NPAD 12
#define MAX_ORDER 5

/* ---- the shape rule and the separate-z decision ----------------------------------- */

/* Python's round: half to even (v - floor(v) is exact in the range of shapes) */
static double round_half_even(double v) {
    const double f = floor(v), d = v - f;
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return fmod(f, 2) == 0 ? f : f + 1;
}

swi_status swi_resample_nnunet_shape(const double old_spacing[3], const double new_spacing[3],
                                     const int64_t old_shape[3], int64_t new_shape[3]) {
    for (int a = 0; a < 3; a++) {
        if (!(isfinite(old_spacing[a]) && old_spacing[a] > 0 && isfinite(new_spacing[a]) &&
              new_spacing[a] > 0) ||
            old_shape[a] < 1)
            return SWI_ERR_INVALID_ARG;
        /* i / j * k, left to right, as compute_new_shape */
        const double r = round_half_even(old_spacing[a] / new_spacing[a] * (double)old_shape[a]);
        if (!(r >= 1 && r <= (double)SWI_MAX_AXIS)) return SWI_ERR_OVERFLOW;
        new_shape[a] = (int64_t)r;
    }
    return SWI_OK;
}

static int anisotropic(const double s[3]) {
    const double mx = fmax(fmax(s[0], s[1]), s[2]), mn = fmin(fmin(s[0], s[1]), s[2]);
    return mx / mn > 3; /* ANISO_THRESHOLD */
}

/* the axis whose spacing is the maximum (max / s == 1, as get_lowres_axis), -1 when two or
 * three share it */
static int lowres_axis(const double s[3]) {
    const double mx = fmax(fmax(s[0], s[1]), s[2]);
    int axis = -1, n = 0;
    for (int a = 0; a < 3; a++)
        if (mx / s[a] == 1) {
            axis = a;
            n++;
        }
    return n == 1 ? axis : -1;
}

int swi_resample_nnunet_separate_z(const double current[3], const double target[3], int force, int *axis) {
    int a = -1;
    if (force > 0)
        a = lowres_axis(current);
    else if (force < 0) {
        if (anisotropic(current))
            a = lowres_axis(current);
        else if (anisotropic(target))
            a = lowres_axis(target);
    }
    *axis = a;
    return a >= 0;
}

/* ---- one axis --------------------------------------------------------------------- */

/* The poles of the B-spline prefilter of each order (Unser's; Thevenaz et al. 2000). */
static int spline_poles(int order, double z[2]) {
    switch (order) {
    case 2: z[0] = sqrt(8.0) - 3; return 1;
    case 3: z[0] = sqrt(3.0) - 2; return 1;
    case 4:
        z[0] = sqrt(664 - sqrt(438976.0)) + sqrt(304.0) - 19;
        z[1] = sqrt(664 + sqrt(438976.0)) - sqrt(304.0) - 19;
        return 2;
    case 5:
        z[0] = sqrt(135.0 / 2 - sqrt(17745.0 / 4)) + sqrt(105.0 / 4) - 13.0 / 2;
        z[1] = sqrt(135.0 / 2 + sqrt(17745.0 / 4)) - sqrt(105.0 / 4) - 13.0 / 2;
        return 2;
    default: return 0;
    }
}

/* In place: the B-spline coefficients of c [n] (n > 1) that interpolate it, the signal
 * extended symmetrically about its end samples' outer edges (scipy's 'reflect' boundary,
 * which its 'nearest' mode uses for the filter). */
static void prefilter(double *c, int64_t n, int order) {
    double z[2];
    const int np = spline_poles(order, z);
    double gain = 1;
    for (int p = 0; p < np; p++) gain *= (1 - z[p]) * (1 - 1 / z[p]);
    for (int64_t i = 0; i < n; i++) c[i] *= gain;
    for (int p = 0; p < np; p++) {
        const double zp = z[p], zn = pow(zp, (double)n);
        /* causal start: the sum over the reflected signal, in closed form */
        double sum = c[0] + zn * c[n - 1], zi = zp;
        for (int64_t i = 1; i < n; i++) {
            sum += zi * (c[i] + zn * c[n - 1 - i]);
            zi *= zp;
        }
        c[0] += sum * zp / (1 - zn * zn);
        for (int64_t i = 1; i < n; i++) c[i] += zp * c[i - 1];
        c[n - 1] *= zp / (zp - 1);
        for (int64_t i = n - 2; i >= 0; i--) c[i] = zp * (c[i + 1] - c[i]);
    }
}

/* The centred B-spline of the order at t. */
static double bspline(int order, double t) {
    const double x = fabs(t), x2 = x * x;
    switch (order) {
    case 0: return 1;
    case 1: return 1 - x;
    case 2: return x < 0.5 ? 0.75 - x2 : 0.5 * (1.5 - x) * (1.5 - x);
    case 3: return x < 1 ? (x2 * (x - 2) * 3 + 4) / 6 : (2 - x) * (2 - x) * (2 - x) / 6;
    case 4:
        if (x < 0.5) return x2 * (x2 * 0.25 - 0.625) + 115.0 / 192;
        if (x < 1.5) return (55 + x * (20 + x * (-120 + x * (80 - 16 * x)))) / 96;
        return pow(2.5 - x, 4) / 24;
    default:
        if (x < 1) return x2 * (x2 * (0.25 - x / 12) - 0.5) + 0.55;
        if (x < 2) return x * (x * (x * (x * (x / 24 - 0.375) + 1.25) - 1.75) + 0.625) + 0.425;
        return pow(3 - x, 5) / 120;
    }
}

/* How each output sample of an axis of n samples resampled to m reads its line: the first
 * tap (in the padded line for order > 1) and order + 1 weights. */
typedef struct axis_plan {
    int64_t n, m, len; /* len: the line as filtered (n, or n + 2 NPAD) */
    int order;
    int64_t *start;
    double *w;
} axis_plan;

static void plan_free(axis_plan *p) {
    free(p->start);
    free(p->w);
    p->start = NULL;
    p->w = NULL;
}

/* Output o samples (o + 0.5) * n / m - 0.5 (zoom's grid mode, and nnU-Net's map), shifted by
 * the padding; mode 'nearest' leaves it unclamped and clamps the taps. */
static int plan_make(axis_plan *p, int64_t n, int64_t m, int order) {
    p->n = n;
    p->m = m;
    p->order = order;
    p->len = order > 1 ? n + 2 * NPAD : n;
    p->start = malloc((size_t)m * sizeof *p->start);
    p->w = malloc((size_t)m * (size_t)(order + 1) * sizeof *p->w);
    if (!p->start || !p->w) {
        plan_free(p);
        return -1;
    }
    const double zoom = (double)n / (double)m;
    for (int64_t o = 0; o < m; o++) {
        double cc = ((double)o + 0.5) * zoom - 0.5;
        if (order > 1) cc += NPAD;
        const int64_t s = (int64_t)floor(order & 1 ? cc : cc + 0.5) - order / 2;
        double *w = p->w + o * (order + 1), rest = 1;
        for (int j = 0; j < order; j++) {
            w[j] = bspline(order, cc - (double)(s + j));
            rest -= w[j];
        }
        w[order] = rest; /* the weights sum to 1 */
        p->start[o] = s;
    }
    return 0;
}

/* One line: in [n] at stride is, resampled into out [m] at stride os; buf [len]. */
static void resample_line(const axis_plan *p, const double *in, int64_t is, double *out, int64_t os,
                          double *buf) {
    const int64_t n = p->n, len = p->len, pad = len > n ? NPAD : 0;
    for (int64_t i = 0; i < pad; i++) {
        buf[i] = in[0];
        buf[pad + n + i] = in[(n - 1) * is];
    }
    for (int64_t i = 0; i < n; i++) buf[pad + i] = in[i * is];
    if (p->order > 1) prefilter(buf, len, p->order);
    const int k = p->order + 1;
    for (int64_t o = 0; o < p->m; o++) {
        const int64_t s = p->start[o];
        const double *w = p->w + o * k;
        double t = 0;
        if (s >= 0 && s + k <= len)
            for (int j = 0; j < k; j++) t += buf[s + j] * w[j];
        else
            for (int j = 0; j < k; j++) {
                const int64_t at = s + j < 0 ? 0 : s + j >= len ? len - 1 : s + j;
                t += buf[at] * w[j];
            }
        out[o * os] = t;
    }
}

/* Every line of in [shape] along axis, resampled by p into out (shape with axis -> p->m),
 * in float64 (outd) or rounded to float32 (outf), clipped to [clip[0], clip[1]] when clip;
 * buf [len], line [m] */
static void pass_axis(const axis_plan *p, const double *in, const int64_t shape[3], int axis, double *outd,
                      float *outf, const double *clip, double *buf, double *line) {
    int64_t osh[3] = {shape[0], shape[1], shape[2]};
    osh[axis] = p->m;
    const int64_t is[3] = {shape[1] * shape[2], shape[2], 1}, os[3] = {osh[1] * osh[2], osh[2], 1};
    const int u = axis == 0 ? 1 : 0, v = axis == 2 ? 1 : 2; /* the other two axes */
    for (int64_t a = 0; a < shape[u]; a++)
        for (int64_t b = 0; b < shape[v]; b++) {
            const double *from = in + a * is[u] + b * is[v];
            const int64_t at = a * os[u] + b * os[v];
            if (outd && !clip) {
                resample_line(p, from, is[axis], outd + at, os[axis], buf);
                continue;
            }
            resample_line(p, from, is[axis], line, 1, buf);
            for (int64_t o = 0; o < p->m; o++) {
                double x = line[o];
                if (clip) x = x < clip[0] ? clip[0] : x > clip[1] ? clip[1] : x;
                if (outd)
                    outd[at + o * os[axis]] = x;
                else
                    outf[at + o * os[axis]] = (float)x;
            }
        }
}

/* ---- volumes ---------------------------------------------------------------------- */

typedef struct zoom_work {
    axis_plan plan[3]; /* per axis of the pass it serves */
    double *vol;       /* one volume: the in-plane result (B) or the slices (H) */
    double *s, *t, *r; /* a slice: as read, after its first pass, after its second */
    double *buf, *line;
} zoom_work;

/* the 2-D resize of slice w->s [n0, n1] into out [m0, m1] by plans p0 (axis 0) and p1
 * (axis 1), clipped to [clip] when clip; w->t [n0, m1] between */
static void resize2d(zoom_work *w, const axis_plan *p0, const axis_plan *p1, double *out,
                     const double *clip) {
    const int64_t sh1[3] = {1, p0->n, p1->n}, sh2[3] = {1, p0->n, p1->m};
    pass_axis(p1, w->s, sh1, 2, w->t, NULL, NULL, w->buf, w->line);
    pass_axis(p0, w->t, sh2, 1, out, NULL, clip, w->buf, w->line);
}

static void minmax_float(const float *x, int64_t n, int64_t stride, double mm[2]) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, (double)x[i * stride]);
        hi = fmax(hi, (double)x[i * stride]);
    }
    mm[0] = lo;
    mm[1] = hi;
}

/* skimage.transform.resize of one volume: rows along axis 0 resized in 2-D, then axis 0;
 * clipped to the volume's range */
static void resize3d(zoom_work *w, const float *src, const int64_t n[3], float *dst, const int64_t m[3]) {
    const int64_t plane_in = n[1] * n[2], plane_out = m[1] * m[2];
    double mm[2];
    minmax_float(src, n[0] * plane_in, 1, mm);
    for (int64_t i = 0; i < n[0]; i++) {
        for (int64_t q = 0; q < plane_in; q++) w->s[q] = src[i * plane_in + q];
        resize2d(w, &w->plan[1], &w->plan[2], w->vol + i * plane_out, NULL);
    }
    const int64_t sh[3] = {n[0], m[1], m[2]};
    pass_axis(&w->plan[0], w->vol, sh, 0, NULL, dst, mm, w->buf, w->line);
}

/* nnU-Net's separate z along axis a: every slice across a resized in 2-D (clipped to its
 * own range) into vol (the output's shape with axis a as the input's), then axis a */
static void resize_separate(zoom_work *w, const float *src, const int64_t n[3], float *dst,
                            const int64_t m[3], int a) {
    const int u = a == 0 ? 1 : 0, v = a == 2 ? 1 : 2;
    const int64_t is[3] = {n[1] * n[2], n[2], 1};
    int64_t hs[3] = {m[0], m[1], m[2]};
    hs[a] = n[a];
    const int64_t hst[3] = {hs[1] * hs[2], hs[2], 1};
    for (int64_t k = 0; k < n[a]; k++) {
        for (int64_t x = 0; x < n[u]; x++)
            for (int64_t y = 0; y < n[v]; y++) w->s[x * n[v] + y] = src[k * is[a] + x * is[u] + y * is[v]];
        double mm[2] = {INFINITY, -INFINITY};
        for (int64_t q = 0; q < n[u] * n[v]; q++) {
            mm[0] = fmin(mm[0], w->s[q]);
            mm[1] = fmax(mm[1], w->s[q]);
        }
        resize2d(w, &w->plan[u], &w->plan[v], w->r, mm);
        for (int64_t x = 0; x < m[u]; x++)
            for (int64_t y = 0; y < m[v]; y++)
                w->vol[k * hst[a] + x * hst[u] + y * hst[v]] = w->r[x * m[v] + y];
    }
    if (n[a] == m[a]) {
        for (int64_t q = 0; q < hs[0] * hs[1] * hs[2]; q++) dst[q] = (float)w->vol[q];
        return;
    }
    pass_axis(&w->plan[a], w->vol, hs, a, NULL, dst, NULL, w->buf, w->line);
}

static void work_free(zoom_work *w) {
    for (int a = 0; a < 3; a++) plan_free(&w->plan[a]);
    free(w->vol);
    free(w->s);
    free(w->t);
    free(w->r);
    free(w->buf);
    free(w->line);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

swi_status swi_resample_nnunet(const float *src, const int64_t src_size[3], float *dst,
                               const int64_t dst_size[3], int64_t planes, int order, int order_z,
                               int separate_axis, char *err, size_t errlen) {
    if (!src || !dst || planes < 0 || order < 0 || order > MAX_ORDER || order_z < 0 || order_z > MAX_ORDER ||
        separate_axis < -1 || separate_axis > 2) {
        rs__err(err, errlen, "swi_resample_nnunet: %s",
                !src || !dst                              ? "src or dst is NULL"
                : planes < 0                              ? "planes < 0"
                : separate_axis < -1 || separate_axis > 2 ? "separate_axis must be -1..2"
                                                          : "order and order_z must be 0..5");
        return SWI_ERR_INVALID_ARG;
    }
    int64_t nv = 1, mv = 1, same = 1;
    for (int a = 0; a < 3; a++) {
        if (src_size[a] < 1 || dst_size[a] < 1 || src_size[a] > SWI_MAX_AXIS || dst_size[a] > SWI_MAX_AXIS) {
            rs__err(err, errlen, "swi_resample_nnunet: grid sizes must be 1..2^31");
            return SWI_ERR_INVALID_ARG;
        }
        same &= src_size[a] == dst_size[a];
    }
    /* the largest volume held: the output, the input and everything between */
    int64_t big = 1, top = 1;
    for (int a = 0; a < 3; a++) {
        big = max64(src_size[a], dst_size[a]);
        if (top > SWI_RESAMPLE_MAX_VOXELS / big) {
            rs__err(err, errlen, "swi_resample_nnunet: the grids are too large");
            return SWI_ERR_OVERFLOW;
        }
        top *= big;
        nv *= src_size[a];
        mv *= dst_size[a];
    }
    if (planes > 0 && (nv > INT64_MAX / planes || mv > INT64_MAX / planes)) {
        rs__err(err, errlen, "swi_resample_nnunet: too many planes");
        return SWI_ERR_OVERFLOW;
    }
    if (same) { /* nnU-Net returns the data as they are */
        memmove(dst, src, (size_t)(nv * planes) * sizeof *dst);
        return SWI_OK;
    }
    const int64_t *n = src_size, *m = dst_size;
    zoom_work w = {0};
    int bad = 0;
    int64_t slice = 0, line = 1, vol;
    const int sep = separate_axis >= 0;
    for (int a = 0; a < 3; a++) {
        const int ord = sep && a == separate_axis ? order_z : order;
        bad |= plan_make(&w.plan[a], n[a], m[a], ord) != 0;
        line = max64(line, max64(n[a] + 2 * NPAD, m[a]));
    }
    if (sep) {
        const int a = separate_axis, u = a == 0 ? 1 : 0, v = a == 2 ? 1 : 2;
        slice = max64(n[u], m[u]) * max64(n[v], m[v]);
        vol = n[a] * m[u] * m[v];
    } else {
        slice = max64(n[1], m[1]) * max64(n[2], m[2]);
        vol = n[0] * m[1] * m[2];
    }
    w.vol = malloc((size_t)vol * sizeof *w.vol);
    w.s = malloc((size_t)slice * sizeof *w.s);
    w.t = malloc((size_t)slice * sizeof *w.t);
    w.r = malloc((size_t)slice * sizeof *w.r);
    w.buf = malloc((size_t)line * sizeof *w.buf);
    w.line = malloc((size_t)line * sizeof *w.line);
    if (bad || !w.vol || !w.s || !w.t || !w.r || !w.buf || !w.line) {
        work_free(&w);
        rs__err(err, errlen, "swi_resample_nnunet: out of memory (%lld voxels of float64 scratch)",
                (long long)vol);
        return SWI_ERR_NOMEM;
    }
    for (int64_t p = 0; p < planes; p++) {
        if (sep)
            resize_separate(&w, src + p * nv, n, dst + p * mv, m, separate_axis);
        else
            resize3d(&w, src + p * nv, n, dst + p * mv, m);
    }
    work_free(&w);
    return SWI_OK;
}
