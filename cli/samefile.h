/*
 * samefile.h -- is an output the same file as, or inside, an input?
 *
 * `cp a a` refuses; so must swi, whatever path names the file: the same name, another
 * relative path, a symbolic link, a hard link. Existing files are compared by device and
 * inode (stat), outputs that do not exist yet by the device and inode of the folder they
 * will be created in plus their name. "Inside" is for inputs that are folders (a DICOM
 * series, a chunked store, an input folder): an output anywhere below one, links
 * resolved, would be read back as input or change it.
 *
 * Nothing here creates, opens or changes a file. A path that cannot be examined (an
 * input that does not exist, an output whose folder is missing) compares as apart: the
 * step that opens or creates it reports the problem in its own words.
 */
#ifndef SWI_CLI_SAMEFILE_H
#define SWI_CLI_SAMEFILE_H

typedef enum cli_relation {
    CLI_APART = 0, /**< different files */
    CLI_SAME = 1,  /**< one file under two names */
    CLI_INSIDE = 2 /**< the input is a folder and the output lies somewhere below it */
} cli_relation;

/** Where the output path `out` lies relative to the input path `in`. */
cli_relation cli_path_relation(const char *out, const char *in);

/** Would the outputs `a` and `b` be one file? (Existing or not.) */
int cli_outputs_same(const char *a, const char *b);

/** A path and the option that named it ("--input", "--model", "--output", ...). */
typedef struct cli_named_path {
    const char *option;
    const char *path; /**< NULL entries are skipped */
} cli_named_path;

/** Refuse outputs that are the same file as an input or lie inside one, and outputs that
 *  are one file. Returns 0, or -1 with a message in err (SWI_ERRLEN) naming both paths. */
int cli_check_outputs_apart(const cli_named_path *inputs, int n_inputs, const cli_named_path *outputs,
                            int n_outputs, char *err);

#endif
