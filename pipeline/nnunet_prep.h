/*
 * nnunet_prep.h -- nnU-Net v2's preprocessing steps before resampling (docs/semantics-nnunet.md,
 * steps 2 and 3): the nonzero mask and its bounding box (crop_to_nonzero), and the
 * normalisation schemes of default_normalization_schemes.py. Internal to the pipeline.
 */
#ifndef SWI_PIPELINE_NNUNET_PREP_H
#define SWI_PIPELINE_NNUNET_PREP_H

#include <stddef.h>
#include <stdint.h>

/** nnU-Net's create_nonzero_mask and its bounding box: data [channels, *size] (C order, the
 *  last axis fastest); mask [*size] (the caller's) receives 1 where any channel is != 0 (NaN
 *  counts as nonzero, as numpy's `!=`) or the voxel is enclosed by such voxels
 *  (scipy.ndimage.binary_fill_holes with its default cross structure: background is what
 *  is face-connected to the volume's border), else 0. [lo, hi) is the mask's bounding box.
 *  A volume without a nonzero voxel gets an all-zero mask and the whole volume as its box
 *  (nnU-Net does not guard that case). Iterative (no recursion); scratch of 9 bytes per row
 *  along the last axis. Returns 0, or -1 with a message in err (bad sizes, out of memory). */
int nn_nonzero_box(const float *data, int64_t channels, const int64_t size[3], uint8_t *mask, int64_t lo[3],
                   int64_t hi[3], char *err, size_t errlen);

enum {
    NN_NORM_NONE = 0,  /**< NoNormalization: values kept (already float32) */
    NN_NORM_CT,        /**< CTNormalization: clip to [p005, p995], (x - mean) / max(std, 1e-8) */
    NN_NORM_ZSCORE,    /**< ZScoreNormalization: the channel's own mean and std (ddof 0) */
    NN_NORM_RESCALE01, /**< RescaleTo01Normalization: (x - min) / max(max - min, 1e-8) */
    NN_NORM_RGB01      /**< RGBTo01Normalization: x / 255, values must lie in [0, 255] */
};

/** One channel's normalisation: scheme NN_NORM_*; use_mask (ZScore only): statistics over
 *  and changes to the mask's voxels alone; mean, std, p005, p995: the plans'
 *  foreground_intensity_properties_per_channel (CT only). */
typedef struct nn_norm {
    int scheme;
    int use_mask;
    double mean, std, p005, p995;
} nn_norm;

/** Normalise x [n] in place as nnU-Net's scheme does, in float32 as its float32 arrays
 *  (the plans' numbers rounded to float32 first, as numpy does with Python floats). mask
 *  [n] is the nonzero mask of nn_nonzero_box cut to the same crop, needed by ZScore with
 *  use_mask (else ignored, may be NULL); a mask without a voxel leaves x as it is (numpy's
 *  empty selection). Mean and std are summed in double and rounded to float32 (numpy's
 *  float32 pairwise sums differ by rounding only). Returns 0, or -1 with a message in err
 *  (an unknown scheme, ZScore with use_mask and no mask, RGB values outside [0, 255]). */
int nn_normalize(float *x, int64_t n, const uint8_t *mask, const nn_norm *norm, char *err, size_t errlen);

#endif
