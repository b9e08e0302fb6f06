/* swi_resample.h's example assumes an input grid (affine, size), its image, a voxel of it
 * (i, j, k) and buffers for the oriented (ras) and the resampled (dst) volumes. */
#include <stdio.h>

#include "swi_resample.h"

int header_example(const double affine[4][4], const int64_t size[3], const float *image, float *ras,
                   float *dst, int64_t i, int64_t j, int64_t k);

int header_example(const double affine[4][4], const int64_t size[3], const float *image, float *ras,
                   float *dst, int64_t i, int64_t j, int64_t k) {
#include SWI_HEADER_EXAMPLE
}
