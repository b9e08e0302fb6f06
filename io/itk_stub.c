/* itk_stub.c -- the ITK module's functions when swi_io is built without ITK: each says
 * how to get NRRD, MetaImage and DICOM support. */
#include "io_internal.h"

#include <string.h>
#include <unistd.h>

static swi_status no_itk(char *err, size_t n, const char *path) {
    io__err(err, n,
            "%s: swi_io was built without ITK (NRRD, MetaImage, DICOM): install "
            "libinsighttoolkit5-dev and rebuild",
            path ? path : "ITK");
    return SWI_ERR_INVALID_ARG;
}

int io__itk_available(void) { return 0; }

swi_status io__itk_open(const char *path, swi_io_format f, swi_volume *v, char *err, size_t n) {
    (void)f;
    memset(v, 0, sizeof *v);
    return no_itk(err, n, path);
}

swi_status io__itk_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err, size_t n) {
    (void)dst, (void)cancel;
    return no_itk(err, n, v->path);
}

swi_status io__itk_write_fd(int fd, const char *name, swi_volume_format f, const swi_volume *like,
                            const void *data, swi_dtype dtype, int64_t planes, const swi_io_cancel *cancel,
                            char *err, size_t n) {
    (void)f, (void)like, (void)data, (void)dtype, (void)planes, (void)cancel;
    if (fd >= 0) close(fd);
    return no_itk(err, n, name);
}

swi_status io__itk_dicom_slice(const char *file, io_slice *s, char *err, size_t n) {
    (void)s;
    return no_itk(err, n, file);
}

swi_status io__itk_dicom_pixels(const io_slice *s, float *dst, char *err, size_t n) {
    (void)dst;
    return no_itk(err, n, s->file);
}

void io__itk_hold(int hold) { (void)hold; }
