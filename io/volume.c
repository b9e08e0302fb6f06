/* volume.c -- the format-independent part of swi_io: each call handed to the module of the
 * volume's format (opened), or of the format the caller hands over (written). */
#include "io_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int swi_io_available(swi_io_format format) {
    switch (format) {
    case SWI_IO_NIFTI: return io__nifti_available();
    case SWI_IO_PNG: return io__png_available();
    case SWI_IO_NRRD:
    case SWI_IO_METAIMAGE:
    case SWI_IO_DICOM: return io__itk_available();
    case SWI_IO_DICOM_SEG: return io__dcmseg_available();
    default: return 0;
    }
}

int64_t swi_volume_voxels(const swi_volume *v) { return v->size[0] * v->size[1] * v->size[2]; }

swi_status swi_volume_open(const char *path, swi_volume *v, char *err, size_t n) {
    return swi_volume_open_cancellable(path, v, NULL, err, n);
}

swi_status swi_volume_open_cancellable(const char *path, swi_volume *v, const swi_io_cancel *cancel,
                                       char *err, size_t n) {
    if (!path || !v) {
        io__err(err, n, "swi_volume_open: %s is NULL", path ? "v" : "path");
        return SWI_ERR_INVALID_ARG;
    }
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return io__dicom_open(path, v, cancel, err, n);
    swi_io_format f = swi_io_format_of(path);
    if (f == SWI_IO_NRRD || f == SWI_IO_METAIMAGE) return io__itk_open(path, f, v, err, n);
    if (exists && (f == SWI_IO_DICOM_SEG || (f == SWI_IO_UNKNOWN && io__is_dicom_file(path)))) {
        memset(v, 0, sizeof *v);
        io__err(err, n,
                "%s: a single DICOM file; swi reads a DICOM series from the directory holding its "
                "slices: give that directory as the input",
                path);
        return SWI_ERR_INVALID_ARG;
    }
    /* NIfTI explains a wrong name itself, after checking the file exists (a missing file
     * is the likelier mistake). */
    return io__nifti_open(path, v, err, n);
}

swi_status swi_volume_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err,
                           size_t n) {
    return swi_volume_read_counted(v, dst, cancel, NULL, err, n);
}

swi_status swi_volume_read_counted(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                   int64_t *nonfinite, char *err, size_t n) {
    if (nonfinite) *nonfinite = 0;
    if (!v || !dst) {
        io__err(err, n, "swi_volume_read: %s is NULL", v ? "dst" : "v");
        return SWI_ERR_INVALID_ARG;
    }
    if (!v->path[0]) {
        io__err(err, n, "swi_volume_read: a made volume has no file to read");
        return SWI_ERR_INVALID_ARG;
    }
    swi_status st;
    switch (v->format) {
    case SWI_IO_NIFTI: return io__nifti_read(v, dst, 1, cancel, nonfinite, err, n);
    case SWI_IO_NRRD:
    case SWI_IO_METAIMAGE: st = io__itk_read(v, dst, cancel, err, n); break;
    case SWI_IO_DICOM: st = io__dicom_read(v, dst, cancel, err, n); break;
    default: io__err(err, n, "swi_volume_read: not an opened volume"); return SWI_ERR_INVALID_ARG;
    }
    if (st != SWI_OK) return st;
    /* as NIfTI reads them: non-finite voxels become 0, counted */
    const int64_t vox = v->size[0] * v->size[1] * v->size[2];
    int64_t bad = 0;
    for (int64_t i = 0; i < vox; i++)
        if (!isfinite(dst[i])) {
            dst[i] = 0;
            bad++;
        }
    if (nonfinite) *nonfinite = bad;
    return SWI_OK;
}

swi_status swi_volume_read_frames(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                  int64_t *nonfinite, char *err, size_t n) {
    if (nonfinite) *nonfinite = 0;
    if (!v || !dst) {
        io__err(err, n, "swi_volume_read_frames: %s is NULL", v ? "dst" : "v");
        return SWI_ERR_INVALID_ARG;
    }
    if (v->format != SWI_IO_NIFTI || v->frames <= 1) /* one frame: whatever the format */
        return swi_volume_read_counted(v, dst, cancel, nonfinite, err, n);
    if (!v->path[0]) {
        io__err(err, n, "swi_volume_read_frames: a made volume has no file to read");
        return SWI_ERR_INVALID_ARG;
    }
    return io__nifti_read(v, dst, v->frames, cancel, nonfinite, err, n);
}

swi_status swi_volume_make(swi_volume *v, const int64_t size[3], const double spacing[3], char *err,
                           size_t n) {
    if (!v || !size || !spacing) {
        io__err(err, n, "swi_volume_make: an argument is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    return io__nifti_make(v, size, spacing, err, n);
}

/* The writers' one body; `who` names the public call in the messages about its arguments. */
static swi_status write_volume(const char *who, int fd, swi_volume_format format, const char *name,
                               const swi_volume *like, const void *data, swi_dtype dtype, swi_io_kind kind,
                               int64_t planes, int64_t classes, const char *const *class_names,
                               const swi_io_cancel *cancel, char *err, size_t n) {
    if (!name || !like || !data) {
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: %s is NULL", who, !name ? "name" : !like ? "like" : "data");
        return SWI_ERR_INVALID_ARG;
    }
    swi_volume nl; /* another format's geometry, in a NIfTI header */
    swi_status st;
    switch (format) {
    case SWI_VOLUME_NRRD:
    case SWI_VOLUME_MHA: return io__itk_write_fd(fd, name, format, like, data, dtype, planes, cancel, err, n);
    case SWI_VOLUME_DICOM_SEG:
        if (kind != SWI_IO_LABELS || planes != 1) {
            if (fd >= 0) close(fd);
            io__err(err, n, "%s: a DICOM SEG (.dcm) holds a label map, not scores or images", name);
            return SWI_ERR_INVALID_ARG;
        }
        return io__dcmseg_write_fd(fd, name, like, data, dtype, classes, class_names, cancel, err, n);
    case SWI_VOLUME_NIFTI:
    case SWI_VOLUME_NIFTI_GZ:
        if (like->format == SWI_IO_NIFTI)
            return io__nifti_write_fd(fd, format == SWI_VOLUME_NIFTI_GZ, name, like, data, dtype, kind,
                                      planes, classes, cancel, err, n);
        if ((st = io__nifti_like(like, &nl, err, n)) != SWI_OK) {
            if (fd >= 0) close(fd);
            return st;
        }
        return io__nifti_write_fd(fd, format == SWI_VOLUME_NIFTI_GZ, name, &nl, data, dtype, kind, planes,
                                  classes, cancel, err, n);
    default:
        /* read-only formats (.nhdr, .mhd), previews and unknown names alike */
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: no volume format for this name (.nii, .nii.gz, .nrrd, .mha)", name);
        return SWI_ERR_INVALID_ARG;
    }
}

swi_status swi_volume_write_as_fd(int fd, swi_volume_format format, const char *name, const swi_volume *like,
                                  const void *data, swi_dtype dtype, swi_io_kind kind, int64_t planes,
                                  int64_t classes, const swi_io_cancel *cancel, char *err, size_t n) {
    return write_volume("swi_volume_write_as_fd", fd, format, name, like, data, dtype, kind, planes, classes,
                        NULL, cancel, err, n);
}

swi_status swi_volume_write_fd(int fd, const char *name, const swi_volume *like, const void *data,
                               swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                               const swi_io_cancel *cancel, char *err, size_t n) {
    return write_volume("swi_volume_write_fd", fd, swi_volume_format_of(name), name, like, data, dtype, kind,
                        planes, classes, NULL, cancel, err, n);
}

swi_status swi_volume_write_labels_as_fd(int fd, swi_volume_format format, const char *name,
                                         const swi_volume *like, const void *labels, swi_dtype dtype,
                                         int64_t classes, const char *const *names,
                                         const swi_io_cancel *cancel, char *err, size_t n) {
    return write_volume("swi_volume_write_labels_as_fd", fd, format, name, like, labels, dtype, SWI_IO_LABELS,
                        1, classes, names, cancel, err, n);
}

swi_status swi_volume_write_labels_fd(int fd, const char *name, const swi_volume *like, const void *labels,
                                      swi_dtype dtype, int64_t classes, const char *const *names,
                                      const swi_io_cancel *cancel, char *err, size_t n) {
    return write_volume("swi_volume_write_fd", fd, swi_volume_format_of(name), name, like, labels, dtype,
                        SWI_IO_LABELS, 1, classes, names, cancel, err, n);
}
