/*
 * store_internal.h -- what store.c (dispatch, slabs) shares with the store formats
 * (zarr.c, hdf5.c). Not installed.
 */
#ifndef SWI_STORE_INTERNAL_H
#define SWI_STORE_INTERNAL_H

#include "io_internal.h"
#include "swi_store.h"

#define STORE_MAX_NDIM 5

/* Bytes of one element of a written dtype. */
static inline size_t store__dtype_size(swi_dtype t) {
    return t == SWI_DTYPE_FLOAT32 ? 4 : t == SWI_DTYPE_UINT16 ? 2 : 1;
}

/* Formats. Each returns its handle through *impl. */
swi_status zarr__open(const char *name, int ome, void **impl, int64_t size[3], swi_io_type *type, char *err,
                      size_t n);
swi_status zarr__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                          size_t n);
void zarr__close(void *impl);

swi_status h5__open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err, size_t n);
swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n);
void h5__close(void *impl);

/* Writers: create (or join) the store with chunk `chunk`; write_box writes the box
 * [lo, hi) (lo on chunk boundaries, hi on chunk boundaries or the end of the axis) from buf
 * [planes][*(hi - lo)]; commit finishes (part done), abort drops. They may be called from
 * several threads at once for different boxes. */
swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n);
swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n);
swi_status zarr__commit(void *impl, char *err, size_t n);
void zarr__abort(void *impl);

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n);
swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n);
swi_status h5__commit(void *impl, char *err, size_t n);
void h5__abort(void *impl);

int zarr__available(void);
int h5__available(void);

#endif
