/*
 * io_internal.h -- what the format modules of swi_io share (not installed).
 */
#ifndef SWI_IO_INTERNAL_H
#define SWI_IO_INTERNAL_H

#include "swi_io.h"

/* Largest voxel count accepted: keeps every byte count (x 16 bytes per voxel, x channels)
 * far from overflowing int64_t/size_t. 2^40 voxels is 4 TB of float32. */
#define IO_MAX_VOXELS ((int64_t)1 << 40)

/* printf into err (n bytes, NULL = discard), folded onto one line. */
void io__err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Does path end with suffix, compared case-insensitively? */
int io__ends_with(const char *path, const char *suffix);

/* Human-readable bytes ("1.18 GB"), for out-of-memory messages. */
const char *io__bytes(size_t n, char buf[32]);

/* Has the caller asked to stop? */
static inline int io__cancelled(const swi_io_cancel *c)
{
    return c && c->cancelled && c->cancelled(c->user);
}

/* The module's own allocations: malloc/calloc, in a SWI_FAULT_INJECTION build drawing on
 * the library's counter (SWI_FAULT_ALLOC=N fails the N-th allocation of the process). */
#ifdef SWI_FAULT_INJECTION
#include <stdbool.h>
bool swi__fault_point(void); /* src/alloc.c */
#define IO__INJECTED() swi__fault_point()
#else
#define IO__INJECTED() 0
#endif
#include <stdlib.h>
static inline void *io__malloc(size_t bytes)
{
    return IO__INJECTED() ? NULL : malloc(bytes ? bytes : 1);
}
static inline void *io__calloc(size_t n, size_t size)
{
    return IO__INJECTED() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

/* The NIfTI module (nifti_read.c, nifti_write.c). */
int io__nifti_available(void);
swi_status io__nifti_open(const char *path, swi_volume *v, char *err, size_t n);
swi_status io__nifti_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                          char *err, size_t n);
/* io__nifti_read, also counting the non-finite voxels it stored as 0 (NULL: not wanted). */
swi_status io__nifti_read_counted(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                  int64_t *nonfinite, char *err, size_t n);
swi_status io__nifti_make(swi_volume *v, const int64_t size[3], const double spacing[3],
                          char *err, size_t n);
swi_status io__nifti_write_fd(int fd, int gz, const char *name, const swi_volume *like,
                              const void *data, swi_dtype dtype, swi_io_kind kind,
                              int64_t planes, int64_t classes, const swi_io_cancel *cancel,
                              char *err, size_t n);

/* The PNG module (preview.c). */
int io__png_available(void);

#endif
