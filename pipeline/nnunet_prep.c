/* nnunet_prep.c -- nnU-Net v2's nonzero mask and normalisation (nnunet_prep.h). */
#include "nnunet_prep.h"

#include <stdio.h>

int nn_nonzero_box(const float *data, int64_t channels, const int64_t size[3], uint8_t *mask, int64_t lo[3],
                   int64_t hi[3], char *err, size_t errlen) {
    (void)data, (void)channels, (void)size, (void)mask, (void)lo, (void)hi;
    if (err && errlen) snprintf(err, errlen, "nn_nonzero_box: not implemented yet");
    return -1;
}

int nn_normalize(float *x, int64_t n, const uint8_t *mask, const nn_norm *norm, char *err, size_t errlen) {
    (void)x, (void)n, (void)mask, (void)norm;
    if (err && errlen) snprintf(err, errlen, "nn_normalize: not implemented yet");
    return -1;
}
