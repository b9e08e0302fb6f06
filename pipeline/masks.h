/*
 * masks.h -- --masks DIR: one binary mask a class (DIR/NAME.nii.gz, uint8 0/1, the labels'
 * geometry), NAME the card's class name (else label_N), the background left out. The folder
 * is written whole or not at all: the masks go into a private folder beside DIR
 * (.DIR.swi-XXXXXX) that is renamed to DIR when every mask is written. An existing DIR is
 * refused unless empty, or with force when it holds only .nii.gz files (a folder of masks);
 * it is then swapped for the new one.
 */
#ifndef SWI_PL_MASKS_H
#define SWI_PL_MASKS_H

#include <stdint.h>

#include "swi_io.h"

typedef struct pl_masks {
    char dir[4096]; /* the final folder */
    char tmp[4200]; /* the private folder being written, "" when none */
} pl_masks;

/* The refusal of an existing dir (see above), creating nothing. 0, or 1 with err (SWI_ERRLEN). */
int pl_masks_check(const char *dir, int force, char *err);

/* Make the private folder beside dir. 0, or 1 with err. */
int pl_masks_begin(pl_masks *m, const char *dir, int force, char *err);

/* Write the masks of labels (`like`'s grid, label_bytes each) into the private folder;
 * names[c] (or NULL) names class c. 0, or 1 with err. */
int pl_masks_write(pl_masks *m, const swi_volume *like, const void *labels, int label_bytes, int64_t classes,
                   const char *const *names, const swi_io_cancel *cancel, char *err);

/* Put the folder in place (force: over an existing folder of masks). 0, or 1 with err. */
int pl_masks_commit(pl_masks *m, int force, char *err);

/* Remove the private folder, if any. */
void pl_masks_abort(pl_masks *m);

#endif
