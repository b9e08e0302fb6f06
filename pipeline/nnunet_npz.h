/*
 * nnunet_npz.h -- one float32 array as a NumPy .npz (numpy.savez_compressed's layout: a zip
 * holding NAME.npy, deflated), through libzip (optional: SWI_HAVE_LIBZIP). The archive is
 * built in memory, then written to the descriptor.
 */
#ifndef SWI_PL_NNUNET_NPZ_H
#define SWI_PL_NNUNET_NPZ_H

#include <stdint.h>

/* Whether swi was built with libzip. */
int nn_npz_available(void);

/* Write x [shape] (C order, rank 1..8) as NAME.npy in an .npz to fd (closed in every case);
 * path names it in messages. Returns 0, or 1 with err. */
int nn_npz_write(int fd, const char *path, const char *name, const float *x, const int64_t *shape, int rank,
                 char *err);

#endif
