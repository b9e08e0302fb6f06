/*
 * region.c -- a region of interest (docs/regions.md): a box of the input grid whose voxels
 * get the whole run's values bitwise, computed by exactly the windows of the whole run that
 * touch it.
 *
 * The engine's part (swi_params.part_lo/part_hi) already runs the windows touching a box, in
 * the whole run's order, and writes only the box's voxels: every window covering a voxel of
 * the box touches the box, so each such voxel sums all of its windows, as the whole run
 * does. The region is that box on the model grid: the input box itself; through an
 * orientation its permuted and flipped image; through a resampling the source box the
 * resampling sink's tiles meeting the region read (swi_resample_sink_source_box), so every
 * input voxel of the region is interpolated from complete model voxels. Input voxels outside
 * the region are then set here: 0, or the keep-outside map's labels.
 */
#include "segment.h"

#include "alloc.h"
#include "swi_resample.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pl_region_opts(const swi_job_spec *sp, pl_opts *o, char *err) {
    const int kinds = (sp->region_given != 0) + (sp->region_mm_given != 0) + (sp->region_mask != NULL);
    if (kinds > 1) {
        cli_err(err, "--region, --region-mm and --region-mask name one region: give one");
        return -1;
    }
    if (!kinds && (sp->margin_mm != 0 || sp->keep_outside)) {
        cli_err(err, "%s applies to a region: give --region, --region-mm or --region-mask",
                sp->keep_outside ? "--keep-outside" : "--margin");
        return -1;
    }
    if (!(sp->margin_mm >= 0) || !isfinite(sp->margin_mm)) {
        cli_err(err, "--margin %g: give millimetres, 0 or more", sp->margin_mm);
        return -1;
    }
    for (int a = 0; a < 3; a++) {
        if (sp->region_given && (sp->region_lo[a] < 0 || sp->region_lo[a] >= sp->region_hi[a])) {
            cli_err(err, "--region: axis %d is %lld:%lld; give 0 <= lo < hi (voxels, hi exclusive)", a,
                    (long long)sp->region_lo[a], (long long)sp->region_hi[a]);
            return -1;
        }
        if (sp->region_mm_given && !(sp->region_mm_lo[a] <= sp->region_mm_hi[a] &&
                                     isfinite(sp->region_mm_lo[a]) && isfinite(sp->region_mm_hi[a]))) {
            cli_err(err, "--region-mm: axis %d is %g:%g; give lo <= hi (millimetres)", a, sp->region_mm_lo[a],
                    sp->region_mm_hi[a]);
            return -1;
        }
    }
    o->region_given = sp->region_given != 0;
    o->region_mm_given = sp->region_mm_given != 0;
    memcpy(o->region_lo, sp->region_lo, sizeof o->region_lo);
    memcpy(o->region_hi, sp->region_hi, sizeof o->region_hi);
    memcpy(o->region_mm_lo, sp->region_mm_lo, sizeof o->region_mm_lo);
    memcpy(o->region_mm_hi, sp->region_mm_hi, sizeof o->region_mm_hi);
    o->region_mask = sp->region_mask;
    o->keep_outside = sp->keep_outside;
    o->margin_mm = sp->margin_mm;
    return 0;
}

/* A volume on the input's grid, read whole into *x (malloc'd). 0, or 1 with err. */
static int read_on_grid(const seg_state *s, const char *input, const char *flag, const char *path,
                        swi_volume *v, float **x, char *err) {
    *x = NULL;
    char msg[SWI_ERRLEN];
    if (swi_volume_open(path, v, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "%s: %s", flag, msg);
        return 1;
    }
    if (pl_same_grid(&s->vols[0], input, v, path, msg)) {
        cli_err(err, "%s: %s", flag, msg);
        return 1;
    }
    const int64_t n = swi_volume_voxels(v);
    *x = cli_malloc((size_t)n * sizeof(float));
    if (!*x) {
        cli_err(err, "%s %s: out of memory", flag, path);
        return 1;
    }
    if (swi_volume_read(v, *x, NULL, msg, sizeof msg) != SWI_OK) {
        free(*x);
        *x = NULL;
        cli_err(err, "%s: %s", flag, msg);
        return 1;
    }
    return 0;
}

/* The voxel box of the input covering the millimetre box (its 8 corners through the inverse
 * affine; a voxel spans its index +- 1/2), not clamped. 1 when the affine has no inverse. */
static int mm_box(const double A[4][4], const double lo[3], const double hi[3], int64_t blo[3],
                  int64_t bhi[3]) {
    const double a = A[0][0], b = A[0][1], c = A[0][2], d = A[1][0], e = A[1][1], f = A[1][2], g = A[2][0],
                 h = A[2][1], i = A[2][2];
    const double det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
    if (!(fabs(det) > 0) || !isfinite(det)) return 1;
    const double inv[3][3] = {{(e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det},
                              {(f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det},
                              {(d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det}};
    double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int k = 0; k < 8; k++) {
        const double p[3] = {((k & 4) ? hi[0] : lo[0]) - A[0][3], ((k & 2) ? hi[1] : lo[1]) - A[1][3],
                             ((k & 1) ? hi[2] : lo[2]) - A[2][3]};
        for (int r = 0; r < 3; r++) {
            const double v = inv[r][0] * p[0] + inv[r][1] * p[1] + inv[r][2] * p[2];
            mn[r] = fmin(mn[r], v);
            mx[r] = fmax(mx[r], v);
        }
    }
    for (int r = 0; r < 3; r++) {
        if (mn[r] < -1e15 || mx[r] > 1e15) return 1;
        blo[r] = (int64_t)floor(mn[r] + 0.5);
        bhi[r] = (int64_t)floor(mx[r] + 0.5) + 1;
    }
    return 0;
}

/* The bounding box of the nonzero voxels of x [size]; 0 when there is none. */
static int nonzero_box(const float *x, const int64_t size[3], int64_t lo[3], int64_t hi[3]) {
    int any = 0;
    for (int64_t i = 0, n = 0; i < size[0]; i++)
        for (int64_t j = 0; j < size[1]; j++)
            for (int64_t k = 0; k < size[2]; k++, n++) {
                if (x[n] == 0) continue;
                const int64_t v[3] = {i, j, k};
                for (int a = 0; a < 3; a++) {
                    if (!any || v[a] < lo[a]) lo[a] = v[a];
                    if (!any || v[a] + 1 > hi[a]) hi[a] = v[a] + 1;
                }
                any = 1;
            }
    return any;
}

/* The region's box on the input grid, grown by the margin and clamped. 0, 1 or 2. */
static int input_box(const pl_opts *o, seg_state *s, const int64_t size[3], int64_t lo[3], int64_t hi[3],
                     char *err) {
    if ((o->region_mm_given || o->region_mask || o->margin_mm > 0 || o->keep_outside) && s->reader) {
        cli_err(err, "%s takes a volume file or DICOM series input (a store has no millimetres here)",
                o->region_mm_given ? "--region-mm"
                : o->region_mask   ? "--region-mask"
                : o->keep_outside  ? "--keep-outside"
                                   : "--margin");
        return 2;
    }
    if (o->region_given) {
        memcpy(lo, o->region_lo, 3 * sizeof *lo);
        memcpy(hi, o->region_hi, 3 * sizeof *hi);
    } else if (o->region_mm_given) {
        if (mm_box(s->vols[0].affine, o->region_mm_lo, o->region_mm_hi, lo, hi)) {
            cli_err(err, "--region-mm: %s: its affine cannot be inverted", o->inputs[0]);
            return 1;
        }
    } else {
        swi_volume v;
        float *x;
        if (read_on_grid(s, o->inputs[0], "--region-mask", o->region_mask, &v, &x, err)) return 1;
        const int any = nonzero_box(x, size, lo, hi);
        free(x);
        if (!any) {
            cli_err(err, "--region-mask %s: no voxel is nonzero (an empty region)", o->region_mask);
            return 2;
        }
    }
    for (int a = 0; a < 3; a++) {
        if (o->margin_mm > 0) {
            const double *A = s->vols[0].affine[0];
            const double step = sqrt(A[a] * A[a] + A[4 + a] * A[4 + a] + A[8 + a] * A[8 + a]);
            const double grow = step > 0 ? ceil(o->margin_mm / step - 1e-9) : 0;
            const int64_t g = grow < (double)size[a] ? (int64_t)grow : size[a];
            lo[a] -= g;
            hi[a] += g;
        }
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] > size[a]) hi[a] = size[a];
        if (lo[a] >= hi[a]) {
            cli_err(err, "the region holds no voxel of %s (%lldx%lldx%lld): axis %d is empty", o->inputs[0],
                    (long long)size[0], (long long)size[1], (long long)size[2], a);
            return 2;
        }
    }
    return 0;
}

int seg_region_setup(const pl_opts *o, seg_state *s, swi_params *p, char *err) {
    if (!PL_REGION(o)) return 0;
    const int64_t *size = s->reader ? s->store_in.size : s->vols[0].size;
    int rc = input_box(o, s, size, s->region_lo, s->region_hi, err);
    if (rc) return rc;
    seg_grid *g = &s->grid;
    if (g->resampled) {
        /* the source box of the sink's tiles meeting the region (realscan.c restricts the
         * sink to the same tiles) */
        if (swi_resample_sink_source_box(g->size, g->in_size, (const double(*)[4])g->to_model, 0,
                                         s->region_lo, s->region_hi, s->model_lo, s->model_hi) != SWI_OK) {
            cli_err(err, "internal error: the region's box on the model grid");
            return 1;
        }
        g->region = 1;
        memcpy(g->region_lo, s->region_lo, sizeof g->region_lo);
        memcpy(g->region_hi, s->region_hi, sizeof g->region_hi);
    } else if (g->oriented) {
        int64_t a[3], b[3], last[3];
        for (int d = 0; d < 3; d++) last[d] = s->region_hi[d] - 1;
        swi_resample_orient_point(&g->orient, s->region_lo, a);
        swi_resample_orient_point(&g->orient, last, b);
        for (int d = 0; d < 3; d++) {
            s->model_lo[d] = a[d] < b[d] ? a[d] : b[d];
            s->model_hi[d] = (a[d] < b[d] ? b[d] : a[d]) + 1;
        }
    } else {
        memcpy(s->model_lo, s->region_lo, sizeof s->model_lo);
        memcpy(s->model_hi, s->region_hi, sizeof s->model_hi);
    }
    s->region = 1;
    for (int d = 0; d < 3; d++) {
        p->part_lo[d] = s->model_lo[d];
        p->part_hi[d] = s->model_hi[d];
    }
    return 0;
}

/* Whether voxel (i, j, k) lies in the region. */
static int inside(const seg_state *s, int64_t i, int64_t j, int64_t k) {
    return i >= s->region_lo[0] && i < s->region_hi[0] && j >= s->region_lo[1] && j < s->region_hi[1] &&
           k >= s->region_lo[2] && k < s->region_hi[2];
}

int seg_region_outside(const pl_opts *o, seg_state *s, void *labels, int label_bytes, float *scores,
                       int64_t classes) {
    if (!s->region) return 0;
    const int64_t *size = s->vols[0].size;
    const int64_t n = size[0] * size[1] * size[2];
    float *keep = NULL;
    if (o->keep_outside) {
        swi_volume v;
        char err[SWI_ERRLEN];
        if (read_on_grid(s, o->inputs[0], "--keep-outside", o->keep_outside, &v, &keep, err))
            return seg_fail(s, err);
        const double top = label_bytes == 1 ? 255 : 65535;
        for (int64_t x = 0; x < n; x++)
            if (!(keep[x] >= 0 && keep[x] <= top && keep[x] == floor(keep[x]))) {
                cli_err(err, "--keep-outside %s: voxel %lld is %g, not a label of 0..%g", o->keep_outside,
                        (long long)x, (double)keep[x], top);
                free(keep);
                return seg_fail_status(s, SWI_ERR_INVALID_ARG, err);
            }
    }
    for (int64_t i = 0, x = 0; i < size[0]; i++)
        for (int64_t j = 0; j < size[1]; j++)
            for (int64_t k = 0; k < size[2]; k++, x++) {
                if (inside(s, i, j, k)) continue;
                const unsigned v = keep ? (unsigned)keep[x] : 0;
                if (label_bytes == 1)
                    ((uint8_t *)labels)[x] = (uint8_t)v;
                else
                    ((uint16_t *)labels)[x] = (uint16_t)v;
                for (int64_t c = 0; scores && c < classes; c++) scores[c * n + x] = 0;
            }
    free(keep);
    return 0;
}
