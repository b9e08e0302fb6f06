/*
 * nifti_io.h -- NIfTI-1/-2 volumes in and out of the swi command.
 *
 * Reading goes through niftilib (libnifti2: NIfTI-1 and -2, gzip), after this
 * module has validated the header itself: niftilib trusts the sizes it reads,
 * so a corrupt or hostile header must be refused before it gets there.
 *
 * Axis convention. A NIfTI file stores voxel (i, j, k) at i + ni*(j + nj*k)
 * (i fastest). The network sees [ni][nj][nk] in C order (k fastest), the layout
 * nibabel/MONAI hand to PyTorch. Reading transposes into that layout; writing
 * transposes back.
 *
 * Writing does not use niftilib (its writer reports no errors): the header is
 * the input's own header, byte for byte, with only the fields describing the
 * data changed (dims, datatype, scaling, intent, offset), so qform, sform,
 * pixdim, units and orientation are kept exactly; the data go through zlib
 * with every write checked.
 */
#ifndef SWI_CLI_NIFTI_IO_H
#define SWI_CLI_NIFTI_IO_H

#include <stddef.h>
#include <stdint.h>

/** A validated NIfTI header (native byte order) and what it describes. */
typedef struct nifti_vol {
    char path[4096];
    int version;               /**< 1 or 2 */
    unsigned char hdr[544];    /**< nifti_1_header (348 B) or nifti_2_header (540 B), native order */
    unsigned char raw[544];    /**< the same header as stored in the file (its byte order) */
    int64_t size[3];           /**< ni, nj, nk */
    int datatype;              /**< NIfTI DT_* code */
    int nbyper;                /**< bytes per voxel */
    double slope, inter;       /**< scaling applied on read (slope 1, inter 0 when none) */
    int64_t offset;            /**< byte offset of the voxel data */
} nifti_vol;

/** Is NIfTI support compiled in? */
int nifti_available(void);

/** Open `path` and validate its header: existence, format, version, dims (3-D, or 4-D with
 *  dim4 = 1), sizes that overflow, datatype, data offset, and for uncompressed files that
 *  the file holds all the voxels. Reads no voxel data. */
int nifti_vol_open(const char *path, nifti_vol *v, char *err);

/** Read the voxels of an opened volume as float32 into dst [ni][nj][nk] (k fastest), with
 *  scl_slope/scl_inter applied. Fails cleanly on truncated or corrupt data. */
int nifti_vol_load(const nifti_vol *v, float *dst, char *err);

/** A fresh NIfTI-1 header for a volume of `size` voxels with `spacing` mm, axis-aligned
 *  (qform and sform = diag(spacing), scanner coordinates). For generated volumes. */
void nifti_vol_make(nifti_vol *v, const int64_t size[3], const double spacing[3]);

typedef enum nifti_out_type {
    NIFTI_OUT_UINT8,
    NIFTI_OUT_UINT16,
    NIFTI_OUT_FLOAT32
} nifti_out_type;

typedef enum nifti_out_kind {
    NIFTI_OUT_LABELS, /**< intent LABEL, cal range [0, channels-1] */
    NIFTI_OUT_SCORES, /**< classes along the 4th dim */
    NIFTI_OUT_IMAGE   /**< plain image */
} nifti_out_kind;

/** Write `data` ([planes][ni][nj][nk], C order, of `type`) as a NIfTI file to the open
 *  descriptor `fd` (gzip-compressed when gz), with the header of `like` (its geometry kept
 *  exactly) and size like->size x planes (planes along dim 4 when > 1). For labels,
 *  `classes` sets the display range [0, classes-1]. `name` is used in error messages.
 *  Closes fd in every case. */
int nifti_write_fd(int fd, int gz, const char *name, const nifti_vol *like, const void *data,
                   nifti_out_type type, nifti_out_kind kind, int64_t planes, int64_t classes,
                   char *err);

#endif
