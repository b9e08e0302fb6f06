/*
 * flip.h -- mirroring of window batches for test-time augmentation.
 *
 * A batch is `planes` arrays (windows x channels) of s[0] x s[1] x s[2] floats in C
 * order. `mask` bit a mirrors spatial axis a.
 */
#ifndef SWI_CLI_FLIP_H
#define SWI_CLI_FLIP_H

#include <stdint.h>

/** dst = mirror(src). dst and src must not overlap. */
void flip3_copy(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask);

/** dst += mirror(src). Mirroring is its own inverse, so this un-mirrors a prediction. */
void flip3_accumulate(const float *src, float *dst, int64_t planes, const int64_t s[3],
                      int mask);

#endif
