/* volume_names.c -- which file format a name means (swi_volume_format_of: the one reading
 * of a name's suffix in swi_io), each format's suffix, family and writability: pure
 * functions, apart from the format modules so that parsers (and their fuzzers) link them
 * alone, as store_names.c is for stores. */
#include "swi_io.h"

#include <string.h>
#include <strings.h>

/* Each format's suffix, by its value: none is the end of another, so at most one matches. */
static const char *const SUFFIX[] = {
    [SWI_VOLUME_UNKNOWN] = "",   [SWI_VOLUME_NIFTI] = ".nii",     [SWI_VOLUME_NIFTI_GZ] = ".nii.gz",
    [SWI_VOLUME_NRRD] = ".nrrd", [SWI_VOLUME_NHDR] = ".nhdr",     [SWI_VOLUME_MHA] = ".mha",
    [SWI_VOLUME_MHD] = ".mhd",   [SWI_VOLUME_DICOM_SEG] = ".dcm", [SWI_VOLUME_PNG] = ".png",
};
#define N_FORMATS (sizeof SUFFIX / sizeof *SUFFIX)

swi_volume_format swi_volume_format_of(const char *name) {
    if (!name) return SWI_VOLUME_UNKNOWN;
    const size_t n = strlen(name);
    for (size_t f = 1; f < N_FORMATS; f++) {
        const size_t m = strlen(SUFFIX[f]);
        if (n >= m && strcasecmp(name + n - m, SUFFIX[f]) == 0) return (swi_volume_format)f;
    }
    return SWI_VOLUME_UNKNOWN;
}

const char *swi_volume_format_suffix(swi_volume_format f) { return (size_t)f < N_FORMATS ? SUFFIX[f] : ""; }

swi_io_format swi_volume_format_family(swi_volume_format f) {
    switch (f) {
    case SWI_VOLUME_NIFTI:
    case SWI_VOLUME_NIFTI_GZ: return SWI_IO_NIFTI;
    case SWI_VOLUME_NRRD:
    case SWI_VOLUME_NHDR: return SWI_IO_NRRD;
    case SWI_VOLUME_MHA:
    case SWI_VOLUME_MHD: return SWI_IO_METAIMAGE;
    case SWI_VOLUME_DICOM_SEG: return SWI_IO_DICOM_SEG;
    case SWI_VOLUME_PNG: return SWI_IO_PNG;
    default: return SWI_IO_UNKNOWN;
    }
}

int swi_volume_format_writable(swi_volume_format f) {
    return f == SWI_VOLUME_NIFTI || f == SWI_VOLUME_NIFTI_GZ || f == SWI_VOLUME_NRRD || f == SWI_VOLUME_MHA ||
           f == SWI_VOLUME_DICOM_SEG;
}

swi_io_format swi_io_format_of(const char *path) {
    return swi_volume_format_family(swi_volume_format_of(path));
}
