/* dicom_assemble.c -- the slices of a DICOM series sorted along their normal and checked
 * to make one volume (one series, size, orientation and spacing; even steps, a gap named as
 * missing slices; no tilted gantry), its size, spacing and affine filled in. Pure: no I/O,
 * so fuzz_dicom_series drives it directly. */
#include "io_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double dot3(const double a[3], const double b[3]) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static int cmp_pos(const void *a, const void *b) {
    const io_slice *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos ? 1 : 0;
}

static const char *base(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p ? p : "?";
}

swi_status io__dicom_assemble(io_slice *s, int64_t count, const char *dir, swi_volume *v, char *err,
                              size_t n) {
    if (count < 1) {
        io__err(err, n, "%s: is a directory holding no DICOM series (no DICOM files)", dir);
        return SWI_ERR_INVALID_ARG;
    }
    /* One series. */
    for (int64_t x = 1; x < count; x++)
        if (strcmp(s[x].series_uid, s[0].series_uid) != 0) {
            int64_t other = 0;
            for (int64_t y = 0; y < count; y++) other += strcmp(s[y].series_uid, s[0].series_uid) != 0;
            io__err(err, n,
                    "%s: holds more than one DICOM series (SeriesInstanceUID %s in %lld "
                    "files, %s in %s and %lld more); put each series in its own directory",
                    dir, s[0].series_uid[0] ? s[0].series_uid : "(none)", (long long)(count - other),
                    s[x].series_uid[0] ? s[x].series_uid : "(none)", base(s[x].file), (long long)(other - 1));
            return SWI_ERR_INVALID_ARG;
        }
    const io_slice *f = &s[0];
    if (f->cols < 1 || f->rows < 1) {
        io__err(err, n, "%s: %s has no pixels (%lldx%lld)", dir, base(f->file), (long long)f->cols,
                (long long)f->rows);
        return SWI_ERR_INVALID_ARG;
    }
    if (f->frames != 1) {
        io__err(err, n,
                "%s: %s is a multi-frame image (%lld frames); swi reads series of "
                "single-frame slices",
                dir, base(f->file), (long long)f->frames);
        return SWI_ERR_INVALID_ARG;
    }
    if (count < 2) {
        io__err(err, n, "%s: the series has a single slice (%s); swi segments 3-D volumes", dir,
                base(f->file));
        return SWI_ERR_INVALID_ARG;
    }
    /* Orientation: orthonormal, the same for every slice. */
    double nr = sqrt(dot3(f->row_dir, f->row_dir)), nc = sqrt(dot3(f->col_dir, f->col_dir));
    if (!(fabs(nr - 1) < 1e-3) || !(fabs(nc - 1) < 1e-3) || !(fabs(dot3(f->row_dir, f->col_dir)) < 1e-3)) {
        io__err(err, n, "%s: %s: ImageOrientationPatient is not two orthogonal unit vectors", dir,
                base(f->file));
        return SWI_ERR_INVALID_ARG;
    }
    if (!(f->spacing[0] > 0) || !(f->spacing[1] > 0) || !isfinite(f->spacing[0]) ||
        !isfinite(f->spacing[1])) {
        io__err(err, n, "%s: %s: PixelSpacing %g\\%g is not positive", dir, base(f->file), f->spacing[1],
                f->spacing[0]);
        return SWI_ERR_INVALID_ARG;
    }
    double normal[3] = {
        f->row_dir[1] * f->col_dir[2] - f->row_dir[2] * f->col_dir[1],
        f->row_dir[2] * f->col_dir[0] - f->row_dir[0] * f->col_dir[2],
        f->row_dir[0] * f->col_dir[1] - f->row_dir[1] * f->col_dir[0],
    };
    for (int64_t x = 0; x < count; x++) {
        const io_slice *t = &s[x];
        if (t->frames != 1) {
            io__err(err, n,
                    "%s: %s is a multi-frame image (%lld frames); swi reads series of "
                    "single-frame slices",
                    dir, base(t->file), (long long)t->frames);
            return SWI_ERR_INVALID_ARG;
        }
        if (t->cols != f->cols || t->rows != f->rows) {
            io__err(err, n, "%s: slices differ in size: %s is %lldx%lld, %s %lldx%lld", dir, base(f->file),
                    (long long)f->cols, (long long)f->rows, base(t->file), (long long)t->cols,
                    (long long)t->rows);
            return SWI_ERR_INVALID_ARG;
        }
        for (int a = 0; a < 3; a++)
            if (!(fabs(t->row_dir[a] - f->row_dir[a]) < 1e-4) ||
                !(fabs(t->col_dir[a] - f->col_dir[a]) < 1e-4)) {
                io__err(err, n,
                        "%s: slices differ in orientation (ImageOrientationPatient of "
                        "%s and %s)",
                        dir, base(f->file), base(t->file));
                return SWI_ERR_INVALID_ARG;
            }
        for (int a = 0; a < 2; a++)
            if (!(fabs(t->spacing[a] - f->spacing[a]) < 1e-4 * f->spacing[a] + 1e-6)) {
                io__err(err, n, "%s: slices differ in PixelSpacing (%s and %s)", dir, base(f->file),
                        base(t->file));
                return SWI_ERR_INVALID_ARG;
            }
        for (int a = 0; a < 3; a++)
            if (!isfinite(t->origin[a]) || fabs(t->origin[a]) > 1e9) {
                io__err(err, n, "%s: %s: ImagePositionPatient is not a position", dir, base(t->file));
                return SWI_ERR_INVALID_ARG;
            }
        s[x].pos = dot3(t->origin, normal);
    }
    /* By position along the normal, not by file name or InstanceNumber. */
    qsort(s, (size_t)count, sizeof *s, cmp_pos);
    double step = s[1].pos - s[0].pos;
    for (int64_t x = 1; x < count; x++) {
        double d = s[x].pos - s[x - 1].pos;
        if (d < step) step = d;
    }
    if (!(step > 1e-4)) {
        for (int64_t x = 1; x < count; x++)
            if (!(s[x].pos - s[x - 1].pos > 1e-4)) {
                io__err(err, n,
                        "%s: two slices at the same position (%s and %s, %.4g mm along "
                        "the normal): a duplicate file, or several acquisitions in one series",
                        dir, base(s[x - 1].file), base(s[x].file), s[x].pos);
                return SWI_ERR_INVALID_ARG;
            }
    }
    double tol = 1e-3 * step + 1e-4;
    for (int64_t x = 1; x < count; x++) {
        double d = s[x].pos - s[x - 1].pos;
        if (fabs(d - step) <= tol) continue;
        double missing = d / step - 1;
        if (fabs(missing - floor(missing + 0.5)) < 0.05 && missing > 0.5)
            io__err(err, n,
                    "%s: %lld slice%s missing between %s and %s (%.4g mm apart, the "
                    "others %.4g mm)",
                    dir, (long long)floor(missing + 0.5), floor(missing + 0.5) > 1 ? "s" : "",
                    base(s[x - 1].file), base(s[x].file), d, step);
        else
            io__err(err, n,
                    "%s: uneven slice spacing: %s and %s are %.4g mm apart, others "
                    "%.4g mm; resample the series first",
                    dir, base(s[x - 1].file), base(s[x].file), d, step);
        return SWI_ERR_INVALID_ARG;
    }
    /* Every position on the line through the first along the normal: else the slices are
     * sheared, as with a tilted gantry. */
    for (int64_t x = 1; x < count; x++) {
        double off2 = 0, dp = s[x].pos - s[0].pos;
        for (int a = 0; a < 3; a++) {
            double e = s[x].origin[a] - s[0].origin[a] - dp * normal[a];
            off2 += e * e;
        }
        if (!(sqrt(off2) <= 1e-3 * fabs(dp) + 1e-3)) {
            io__err(err, n,
                    "%s: slice positions do not follow the slice normal (%s is %.3g mm "
                    "off it): a tilted gantry or sheared series, which swi does not resample",
                    dir, base(s[x].file), sqrt(off2));
            return SWI_ERR_INVALID_ARG;
        }
    }
    if (f->cols > IO_MAX_VOXELS / f->rows || f->cols * f->rows > IO_MAX_VOXELS / count) {
        io__err(err, n, "%s: %lld slices of %lldx%lld are more voxels than swi accepts", dir,
                (long long)count, (long long)f->cols, (long long)f->rows);
        return SWI_ERR_INVALID_ARG;
    }
    v->format = SWI_IO_DICOM;
    v->size[0] = s[0].cols;
    v->size[1] = s[0].rows;
    v->size[2] = count;
    v->spacing[0] = s[0].spacing[0];
    v->spacing[1] = s[0].spacing[1];
    v->spacing[2] = step;
    v->type = SWI_IO_TYPE_FLOAT32;
    v->bytes_per_voxel = 4;
    v->slope = 1;
    v->inter = 0;
    v->fmt.itk.slices = count;
    snprintf(v->fmt.itk.series_uid, sizeof v->fmt.itk.series_uid, "%s", s[0].series_uid);
    snprintf(v->fmt.itk.study_uid, sizeof v->fmt.itk.study_uid, "%s", s[0].study_uid);
    snprintf(v->fmt.itk.patient_id, sizeof v->fmt.itk.patient_id, "%s", s[0].patient_id);
    snprintf(v->fmt.itk.study_date, sizeof v->fmt.itk.study_date, "%s", s[0].study_date);
    memset(v->affine, 0, sizeof v->affine);
    for (int r = 0; r < 3; r++) {
        double flip = r < 2 ? -1.0 : 1.0; /* LPS -> RAS */
        v->affine[r][0] = flip * s[0].row_dir[r] * v->spacing[0];
        v->affine[r][1] = flip * s[0].col_dir[r] * v->spacing[1];
        v->affine[r][2] = flip * normal[r] * step;
        v->affine[r][3] = flip * s[0].origin[r];
    }
    v->affine[3][3] = 1;
    return SWI_OK;
}

/* Does the file carry the DICOM Part 10 preamble ("DICM" at byte 128)? Files without it
 * (notes, DICOMDIR's neighbours, thumbnails) are not slices. */
