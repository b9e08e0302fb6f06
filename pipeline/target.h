/*
 * target.h -- an output name classified once (target.c): a store by its kind (x.zarr,
 * x.ome.zarr, x.h5:/path), else a file by its format, both as swi_io says them
 * (swi_store_kind_of, swi_volume_format_of). A job's steps read the target instead of
 * testing the name again, and its writers are handed the target's format.
 */
#ifndef SWI_PIPELINE_TARGET_H
#define SWI_PIPELINE_TARGET_H

#include "swi_io.h"
#include "swi_store.h"

typedef struct pl_target {
    const char *name;         /* as given; NULL: no output named */
    swi_store_kind store;     /* a store's name is a store even when it ends like a file */
    swi_volume_format format; /* a file's format; SWI_VOLUME_UNKNOWN for a store or no name */
} pl_target;

/* Classify name (NULL: no output). */
void pl_target_of(const char *name, pl_target *t);

/* Whether t names a store; a volume file swi_io writes (swi_volume_format_writable); neither
 * (a name with another suffix, .png or a read-only format among them). */
#define PL_TARGET_STORE(t) ((t)->store != SWI_STORE_NONE)
#define PL_TARGET_FILE(t) (!PL_TARGET_STORE(t) && swi_volume_format_writable((t)->format))
#define PL_TARGET_UNKNOWN(t) ((t)->name && !PL_TARGET_STORE(t) && !PL_TARGET_FILE(t))

/* The length of a volume file's suffix (".nii.gz": 7), 0 for any other target: the stem of
 * its side files (OUT.label.txt) is the name without it. */
size_t pl_target_suffix_len(const pl_target *t);

#endif
