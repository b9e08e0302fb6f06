/* dicom_seg_stub.c -- DICOM SEG output when swi_io is built without DCMTK's dcmseg. */
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
