/*
 * target.h -- an output name classified once (target.c): a store by its kind (x.zarr,
 * x.ome.zarr, x.h5:/path), else a volume file by its suffix. A job's steps read the
 * target instead of testing the name again; the io writers are handed the name the target
 * was made of.
 */
#ifndef SWI_PIPELINE_TARGET_H
#define SWI_PIPELINE_TARGET_H

#include "swi_store.h"

#include <stddef.h>

typedef enum pl_format {
    PL_FORMAT_NONE = 0, /* no output named */
    PL_FORMAT_STORE,    /* a store: pl_target.store says which */
    PL_FORMAT_NIFTI,    /* .nii */
    PL_FORMAT_NIFTI_GZ, /* .nii.gz */
    PL_FORMAT_NRRD,     /* .nrrd */
    PL_FORMAT_MHA,      /* .mha */
    PL_FORMAT_DICOM,    /* .dcm: a DICOM SEG object */
    PL_FORMAT_UNKNOWN   /* a name neither a store nor a volume file */
} pl_format;

typedef struct pl_target {
    const char *name;     /* as given; NULL with PL_FORMAT_NONE */
    pl_format format;     /* a store's name is a store even when it ends like a file */
    swi_store_kind store; /* SWI_STORE_NONE unless format is PL_FORMAT_STORE */
    size_t suffix_len;    /* a volume file's suffix (".nii.gz": 7); 0 otherwise */
} pl_target;

/* Classify name (NULL: no output). Suffixes compare case-insensitively. */
void pl_target_of(const char *name, pl_target *t);

/* Whether t names a store, a volume file swi_io writes. */
#define PL_TARGET_STORE(t) ((t)->format == PL_FORMAT_STORE)
#define PL_TARGET_FILE(t) ((t)->format >= PL_FORMAT_NIFTI && (t)->format <= PL_FORMAT_DICOM)

#endif
