/* zoom.c -- nnU-Net v2's resampling (swi_resample.h). */
#include "swi_resample.h"

#include "resample_internal.h"

swi_status swi_resample_nnunet_shape(const double old_spacing[3], const double new_spacing[3],
                                     const int64_t old_shape[3], int64_t new_shape[3]) {
    (void)old_spacing, (void)new_spacing, (void)old_shape, (void)new_shape;
    return SWI_ERR_INVALID_ARG;
}

int swi_resample_nnunet_separate_z(const double current[3], const double target[3], int force, int *axis) {
    (void)current, (void)target, (void)force;
    *axis = -1;
    return 0;
}

swi_status swi_resample_nnunet(const float *src, const int64_t src_size[3], float *dst, const int64_t dst_size[3],
                               int64_t planes, int order, int order_z, int separate_axis, char *err,
                               size_t errlen) {
    (void)src, (void)src_size, (void)dst, (void)dst_size, (void)planes, (void)order, (void)order_z,
        (void)separate_axis;
    rs__err(err, errlen, "swi_resample_nnunet: not implemented yet");
    return SWI_ERR_INVALID_ARG;
}
