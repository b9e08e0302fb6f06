/*
 * nnunet_steps_local.h -- stand-ins for nnU-Net's numeric steps while their full versions
 * (pipeline/nnunet_prep.h, swi_resample_nnunet) are not in this tree: the nonzero box, its
 * mask's binary_fill_holes, the normalisation schemes, and resample_data_or_seg_to_shape's
 * resize of the data (orders 0, 1, 3; separate z with order_z 0 or 1).
 */
#ifndef SWI_PL_NNUNET_STEPS_LOCAL_H
#define SWI_PL_NNUNET_STEPS_LOCAL_H

#include "nnunet_card.h"

#include <stdint.h>

/* The box [lo, hi) of voxels nonzero in any of c channels of x [c][size]; an empty mask
 * gives the whole volume. */
void nnl_nonzero_box(const float *x, int64_t c, const int64_t size[3], int64_t lo[3], int64_t hi[3]);

/* scipy's binary_fill_holes (3-D, the cross-shaped structure) of the mask m [n] (0/1) of
 * the crop box, in place: zero voxels not 6-connected to the box's border become 1 (the
 * outside of the box is all zero, so its border stands for the image's). 0, or 1 when out
 * of memory. */
int nnl_fill_holes(uint8_t *m, const int64_t n[3]);

/* Normalise one channel x of n voxels in place; mask (n bytes, 1 inside) or NULL. */
void nnl_normalize(const nn_card_channel *ch, float *x, const uint8_t *mask, int64_t n);

/* Resize c channels src [c][in] to dst [c][out] as resample_data_or_seg_to_shape (is_seg
 * False): skimage's resize (scipy's zoom, grid_mode, mode 'nearest', clipped to the input's
 * range) of each channel, or with separate_z of each slice across `axis`, then that axis
 * alone with map_coordinates of order_z. In float64. Returns 0, 1 for orders it does not
 * take, 2 when out of memory. */
int nnl_resize(const float *src, const int64_t in[3], float *dst, const int64_t out[3], int64_t c, int order,
               int separate_z, int axis, int order_z);

#endif
