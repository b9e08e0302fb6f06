/* dicom_seg_stub.c -- DICOM SEG output and the DICOM header screen when swi_io is built
 * without DCMTK. */
#include "io_internal.h"

#include <unistd.h>

int io__dcmseg_available(void) { return 0; }

swi_status io__dcmseg_write_fd(int fd, const char *name, const swi_volume *like, const void *labels,
                               swi_dtype dtype, int64_t classes, const char *const *names,
                               const swi_io_cancel *cancel, char *err, size_t n) {
    (void)like, (void)labels, (void)dtype, (void)classes, (void)names, (void)cancel;
    if (fd >= 0) close(fd);
    io__err(err, n,
            "%s: swi_io was built without DICOM SEG output (install libdcmtk-dev, with "
            "ITK, and rebuild)",
            name);
    return SWI_ERR_INVALID_ARG;
}

int io__dicom_screen_available(void) { return 0; }

/* GDCM aborts the process on some headers: without DCMTK to check them first, none is read. */
swi_status io__dicom_screen(const char *file, io_slice *s, char *err, size_t n) {
    (void)s;
    io__err(err, n,
            "%s: reading DICOM needs DCMTK (libdcmtk-dev) to check each header before GDCM reads it: "
            "swi_io was built without it",
            file);
    return SWI_ERR_INVALID_ARG;
}
