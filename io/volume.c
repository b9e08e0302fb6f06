/* volume.c -- the format-independent part of swi_io: choosing a format by name and
 * handing each call to that format's module. */
#include "io_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void io__err(char *err, size_t n, const char *fmt, ...)
{
    if (!err || n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    /* One line: zlib's and libpng's messages, and file names, may hold control bytes. */
    size_t len = strlen(err);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f)
            err[i] = ' ';
    while (len > 0 && err[len - 1] == ' ')
        err[--len] = '\0';
}

int io__ends_with(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcasecmp(path + n - m, suffix) == 0;
}

const char *io__bytes(size_t n, char buf[32])
{
    static const char *unit[] = { "B", "KB", "MB", "GB", "TB", "PB" };
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%zu B", n);
    else if (v < 10)
        snprintf(buf, 32, "%.2f %s", v, unit[u]);
    else if (v < 100)
        snprintf(buf, 32, "%.1f %s", v, unit[u]);
    else
        snprintf(buf, 32, "%.0f %s", v, unit[u]);
    return buf;
}

int swi_io_available(swi_io_format format)
{
    switch (format) {
    case SWI_IO_NIFTI: return io__nifti_available();
    case SWI_IO_PNG: return io__png_available();
    default: return 0;
    }
}

swi_io_format swi_io_format_of(const char *path)
{
    if (!path)
        return SWI_IO_UNKNOWN;
    if (io__ends_with(path, ".nii") || io__ends_with(path, ".nii.gz"))
        return SWI_IO_NIFTI;
    if (io__ends_with(path, ".png"))
        return SWI_IO_PNG;
    return SWI_IO_UNKNOWN;
}

int64_t swi_volume_voxels(const swi_volume *v)
{
    return v->size[0] * v->size[1] * v->size[2];
}

swi_status swi_volume_open(const char *path, swi_volume *v, char *err, size_t n)
{
    if (!path || !v) {
        io__err(err, n, "swi_volume_open: %s is NULL", path ? "v" : "path");
        return SWI_ERR_INVALID_ARG;
    }
    /* The only reader so far; it explains a wrong name itself, after checking the file
     * exists (a missing file is the likelier mistake). */
    return io__nifti_open(path, v, err, n);
}

swi_status swi_volume_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                           char *err, size_t n)
{
    return swi_volume_read_counted(v, dst, cancel, NULL, err, n);
}

swi_status swi_volume_read_counted(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                   int64_t *nonfinite, char *err, size_t n)
{
    if (nonfinite)
        *nonfinite = 0;
    if (!v || !dst) {
        io__err(err, n, "swi_volume_read: %s is NULL", v ? "dst" : "v");
        return SWI_ERR_INVALID_ARG;
    }
    if (v->format != SWI_IO_NIFTI || !v->path[0]) {
        io__err(err, n, "swi_volume_read: %s", v->path[0] ? "not an opened volume"
                : "a made volume has no file to read");
        return SWI_ERR_INVALID_ARG;
    }
    return io__nifti_read_counted(v, dst, cancel, nonfinite, err, n);
}

swi_status swi_volume_make(swi_volume *v, const int64_t size[3], const double spacing[3],
                           char *err, size_t n)
{
    if (!v || !size || !spacing) {
        io__err(err, n, "swi_volume_make: an argument is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    return io__nifti_make(v, size, spacing, err, n);
}

swi_status swi_volume_write_fd(int fd, const char *name, const swi_volume *like,
                               const void *data, swi_dtype dtype, swi_io_kind kind,
                               int64_t planes, int64_t classes, const swi_io_cancel *cancel,
                               char *err, size_t n)
{
    if (!name || !like || !data) {
        if (fd >= 0)
            close(fd);
        io__err(err, n, "swi_volume_write_fd: %s is NULL", !name ? "name" : !like ? "like"
                                                                          : "data");
        return SWI_ERR_INVALID_ARG;
    }
    if (swi_io_format_of(name) != SWI_IO_NIFTI) {
        if (fd >= 0)
            close(fd);
        io__err(err, n, "%s: no volume format for this name (NIfTI: .nii, .nii.gz)", name);
        return SWI_ERR_INVALID_ARG;
    }
    return io__nifti_write_fd(fd, io__ends_with(name, ".gz"), name, like, data, dtype, kind,
                              planes, classes, cancel, err, n);
}
