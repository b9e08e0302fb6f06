/*
 * preprocess.h -- the intensity preprocessing of `swi segment`, per input channel before
 * the run (MONAI's definitions).
 */
#ifndef SWI_CLI_PREPROCESS_H
#define SWI_CLI_PREPROCESS_H

#include <stdint.h>

#include "internal.h"

/** --clip, --scale, --zscore, in that order, on one channel of n voxels, in place. */
void seg_preprocess(const pl_opts *o, float *x, int64_t n);

#endif
