/*
 * samefile.h -- is an output the same file as an input, inside one, or around one?
 *
 * `cp a a` refuses; so must swi, whatever path names the file: the same name, another
 * relative path, a symbolic link, a hard link. Existing files are compared by device and
 * inode (stat); every path is also compared as the real path of its longest existing part
 * (each link resolved) followed by the rest of its name, so an output that does not exist
 * yet, even below folders that do not exist yet, is placed where it will be created.
 * "Inside" is for inputs that are folders (a DICOM series, a chunked store, an input
 * folder): an output anywhere below one would be read back as input or change it.
 * "Contains" is for outputs that are (or will be) folders, such as a Zarr store: an input
 * below one would be replaced with it.
 *
 * Stores are named like files (swi_store.h): x.zarr and x.ome.zarr are folders; an HDF5
 * dataset FILE.h5:/path is the file FILE.h5 and the path inside it, so two datasets of one
 * file are apart unless one path is the other or lies below it. An OME-Zarr labels output
 * IMG.ome.zarr/labels/NAME may lie inside its own image when that image is the input: that
 * is where such labels belong.
 *
 * Nothing here creates, opens or changes a file. An input that cannot be examined (it does
 * not exist) compares as apart: the step that opens it reports the problem in its words.
 */
#ifndef SWI_CLI_SAMEFILE_H
#define SWI_CLI_SAMEFILE_H

#include "swi_pipeline.h"

typedef enum cli_relation {
    CLI_APART = 0,   /**< different files */
    CLI_SAME = 1,    /**< one file (or one HDF5 dataset) under two names */
    CLI_INSIDE = 2,  /**< the output lies somewhere below the input (a folder, an HDF5 group) */
    CLI_CONTAINS = 3 /**< the input lies somewhere below the output */
} cli_relation;

/** Where the output `out` lies relative to the input `in` (file or store names). */
cli_relation cli_path_relation(const char *out, const char *in);

/** Where the output `a` lies relative to the output `b` (existing or not). */
cli_relation cli_outputs_relation(const char *a, const char *b);

/** Would the outputs `a` and `b` be one file? (Existing or not.) */
int cli_outputs_same(const char *a, const char *b);

/** A path and the option that named it ("--input", "--model", "--output", ...): swi_pipeline.h's. */
typedef swi_job_path cli_named_path;

/** Refuse outputs that are the same file as an input, lie inside one or contain one, and
 *  outputs that are one file or lie one inside another. Returns 0, or -1 with a message in
 *  err (SWI_ERRLEN) naming both paths. */
int cli_check_outputs_apart(const cli_named_path *inputs, int n_inputs, const cli_named_path *outputs,
                            int n_outputs, char *err);

#endif
