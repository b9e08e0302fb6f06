/* dicom_screen_stub.c -- the DICOM header screen when swi_io is built without DCMTK. */
#include "io_internal.h"

int io__dicom_screen_available(void) { return 0; }

void io__dicom_screen_warm(void) {}

/* GDCM aborts the process on some headers: without DCMTK to check them first, none is read. */
swi_status io__dicom_screen(const char *file, io_slice *s, char *err, size_t n) {
    (void)s;
    io__err(err, n,
            "%s: reading DICOM needs DCMTK (libdcmtk-dev) to check each header before GDCM reads it: "
            "swi_io was built without it",
            file);
    return SWI_ERR_INVALID_ARG;
}
