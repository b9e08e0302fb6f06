/* nifti_like.c -- a NIfTI-1 header for an output whose input came from another format
 * (NRRD, MetaImage, DICOM): the sform is the input's affine, the qform its rigid part. */
#include "io_internal.h"

#include <string.h>

#ifndef SWI_HAVE_NIFTI

swi_status io__nifti_like(const swi_volume *src, swi_volume *dst, char *err, size_t n) {
    (void)src;
    memset(dst, 0, sizeof *dst);
    io__err(err, n,
            "swi_io was built without NIfTI support (install libnifti2-dev and "
            "rebuild)");
    return SWI_ERR_INVALID_ARG;
}

#else

#include <nifti2_io.h>

swi_status io__nifti_like(const swi_volume *src, swi_volume *dst, char *err, size_t n) {
    swi_status st = io__nifti_make(dst, src->size, src->spacing, err, n);
    if (st != SWI_OK) return st;
    nifti_1_header *h = (nifti_1_header *)dst->fmt.nifti.hdr;
    nifti_dmat44 R;
    memset(&R, 0, sizeof R);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) R.m[r][c] = src->affine[r][c];
    double qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
    nifti_dmat44_to_quatern(R, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
    h->quatern_b = (float)qb, h->quatern_c = (float)qc, h->quatern_d = (float)qd;
    h->qoffset_x = (float)qx, h->qoffset_y = (float)qy, h->qoffset_z = (float)qz;
    h->pixdim[0] = (float)(qfac < 0 ? -1 : 1);
    h->pixdim[1] = (float)dx, h->pixdim[2] = (float)dy, h->pixdim[3] = (float)dz;
    for (int c = 0; c < 4; c++) {
        h->srow_x[c] = (float)src->affine[0][c];
        h->srow_y[c] = (float)src->affine[1][c];
        h->srow_z[c] = (float)src->affine[2][c];
    }
    h->qform_code = NIFTI_XFORM_SCANNER_ANAT;
    h->sform_code = NIFTI_XFORM_SCANNER_ANAT;
    memcpy(dst->fmt.nifti.raw, dst->fmt.nifti.hdr, sizeof dst->fmt.nifti.raw);
    memcpy(dst->affine, src->affine, sizeof dst->affine);
    memcpy(dst->spacing, src->spacing, sizeof dst->spacing);
    return SWI_OK;
}

#endif
