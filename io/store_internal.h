/*
 * store_internal.h -- what store.c (dispatch, slabs) shares with the store formats
 * (zarr_*.c, hdf5_*.c). Not installed.
 */
#ifndef SWI_STORE_INTERNAL_H
#define SWI_STORE_INTERNAL_H

#include "io_internal.h"
#include "swi_store.h"

#include <string.h>

#define STORE_MAX_NDIM 5

/* Bytes of one element of a written dtype. */
static inline size_t store__dtype_size(swi_dtype t) {
    return t == SWI_DTYPE_FLOAT32 ? 4 : t == SWI_DTYPE_UINT16 ? 2 : 1;
}

/* The name of label l of a label store (spec->class_names, else "background" / "label_N")
 * into buf (n bytes). */
void store__class_name(const swi_store_spec *spec, int64_t l, char *buf, size_t n);

/* The classes of a label store as JSON text, malloc'd: [{"label-value": L, "name": "..",
 * "rgba": [r, g, b, a]}, ...] (swi_store_spec.class_names); NULL when out of memory. */
char *store__classes_json(const swi_store_spec *spec);

/* Chunk (ci, cj, ck) of plane pl, gathered from box (lo, hi) of buf (planes x box, row-major)
 * into chunk [c0 * c1 * c2] of es-byte elements: the part inside the array of size `size`,
 * the rest zero (edge chunks are stored whole). The box holds every voxel of the chunk that
 * lies inside the array (writers cut boxes at chunk boundaries). */
static inline void store__gather_chunk(unsigned char *chunk, const unsigned char *buf, const int64_t lo[3],
                                       const int64_t hi[3], const int64_t c[3], const int64_t size[3],
                                       int64_t pl, int64_t ci, int64_t cj, int64_t ck, size_t es) {
    const int64_t e0 = hi[0] - lo[0], e1 = hi[1] - lo[1], e2 = hi[2] - lo[2];
    memset(chunk, 0, (size_t)(c[0] * c[1] * c[2]) * es);
    const int64_t ih = (ci + 1) * c[0] < size[0] ? c[0] : size[0] - ci * c[0];
    const int64_t jh = (cj + 1) * c[1] < size[1] ? c[1] : size[1] - cj * c[1];
    const int64_t kw = (ck + 1) * c[2] < size[2] ? c[2] : size[2] - ck * c[2];
    for (int64_t i = 0; i < ih; i++)
        for (int64_t j = 0; j < jh; j++)
            memcpy(chunk + (size_t)((i * c[1] + j) * c[2]) * es,
                   buf + (size_t)(((pl * e0 + ci * c[0] + i - lo[0]) * e1 + cj * c[1] + j - lo[1]) * e2 +
                                  ck * c[2] - lo[2]) *
                             es,
                   (size_t)kw * es);
}

/* Formats. Each returns its handle through *impl. */
swi_status zarr__open(const char *name, int ome, void **impl, int64_t size[3], swi_io_type *type, char *err,
                      size_t n);
swi_status zarr__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                          size_t n);
void zarr__close(void *impl);
/* An OME-Zarr level's scale and translation (mm, axes z y x): 1 if it has them, else 0 (1s and 0s). */
int zarr__geometry(void *impl, double scale[3], double trans[3]);
/* The fill value absent chunks hold. */
double zarr__fill(void *impl);
/* The spatial chunk of an array read (its last three axes). */
void zarr__chunk(void *impl, int64_t chunk[3]);
void zarr__lead(void *impl, char lead[4]);
void h5__chunk(void *impl, int64_t chunk[3]);

swi_status h5__open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err, size_t n);
swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n);
void h5__close(void *impl);

/* Writers: create (or join) the store with chunk `chunk`; write_box writes the box
 * [lo, hi) (lo on chunk boundaries, hi on chunk boundaries or the end of the axis) from buf
 * [planes][*(hi - lo)]; commit finishes (part done), abort drops. They may be called from
 * several threads at once for different boxes. */
/* The refusal zarr__create makes of an existing output (SWI_OK: absent, empty, or with
 * force a store of the kind swi writes), creating nothing. */
swi_status zarr__check_output(const char *name, int ome, int force, char *err, size_t n);
swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n);
swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n);
swi_status zarr__commit(void *impl, char *err, size_t n);
void zarr__abort(void *impl);
int zarr__replaces(const void *impl); /* a hidden replacement of an existing store is written */
int h5__replaces(const void *impl);   /* a copy of the file is written, renamed over it at commit */
/* The hidden folder beside the output the writer alone writes in until it commits, or NULL. */
const char *zarr__temporary(const void *impl);
const char *h5__temporary(const void *impl);

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n);
swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n);
swi_status h5__commit(void *impl, char *err, size_t n);
void h5__abort(void *impl);

int zarr__available(void);
int h5__available(void);

/* What one kind of store does: a name's kind is classified once (swi_store_kind_of), and
 * every later call on its store or writer goes through its kind's table. */
typedef struct store_ops {
    const char *missing; /* what a build without it lacks, and how to get it */
    int (*available)(void);
    swi_status (*open)(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err,
                       size_t n);
    swi_status (*read_box)(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                           size_t n);
    void (*close)(void *impl);
    int (*geometry)(void *impl, double scale[3], double trans[3]);
    double (*fill)(void *impl);
    void (*chunk)(void *impl, int64_t chunk[3]);
    void (*lead)(void *impl, char lead[4]);
    swi_status (*create)(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                         int part, int parts, void **impl, char *err, size_t n);
    swi_status (*write_box)(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                            size_t n);
    swi_status (*commit)(void *impl, char *err, size_t n);
    void (*abort)(void *impl);
    int (*replaces)(const void *impl);
    const char *(*temporary)(const void *impl);
} store_ops;

/* The table of kind k (store.c), or NULL for SWI_STORE_NONE. */
const store_ops *io__store_ops(swi_store_kind k);

#endif
