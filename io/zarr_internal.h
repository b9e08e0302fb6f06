/*
 * zarr_internal.h -- what the Zarr modules share: the array read (zarr_chunks.c), its
 * metadata (zarr_meta.c), dtypes and codecs (zarr_codec.c), the writer (zarr_write.c).
 * Not installed.
 */
#ifndef SWI_ZARR_INTERNAL_H
#define SWI_ZARR_INTERNAL_H

#include "store_internal.h"

#ifdef SWI_HAVE_ZARR

#include <jansson.h>

/* The file a store holds while a run writing it has not finished. */
#define ZARR_MARKER ".swi-incomplete"

/* An element type as stored. */
typedef struct ztype {
    swi_io_type type;
    int size;
    int big; /* big-endian stored */
    char str[8];
} ztype;

/* A chunk's compressor. */
typedef enum codec { C_RAW, C_BLOSC, C_ZSTD, C_ZLIB, C_GZIP } codec;

/* An OME-Zarr level's spatial geometry: index (z, y, x) -> scale * index + trans, in
 * millimetres (OME's z, y, x are the array's last three axes: swi's i, j, k). */
typedef struct ome_geom {
    int has; /* coordinateTransformations were found */
    double scale[3], trans[3];
    char unit[3][32]; /* the spatial axes' units as the metadata names them ("": none) */
    char lead[4];     /* the axes before z, y, x when each is named t or c ("tc"), else "" */
} ome_geom;

/* One decoded chunk of the reader's cache. */
typedef struct centry {
    int64_t key[3];
    unsigned char *data;
    uint64_t used;
} centry;

/* An array being read (or its metadata, checked by a writer). */
typedef struct zarr_array {
    char dir[4096];
    int ndim;
    int64_t shape[STORE_MAX_NDIM], chunks[STORE_MAX_NDIM];
    ztype t;
    codec codec;
    char sep;
    double fill;
    size_t chunk_bytes;
    centry *cache;
    int cache_cap, cache_n;
    uint64_t tick;
    int any_leading;        /* set before parse_zarray: leading axes of any size (a written store's planes) */
    int fortran;            /* order "F": chunks are stored first axis fastest */
    char key_prefix[3];     /* "c" and the separator for v3's default chunk keys, else "" */
    unsigned char *scratch; /* order "F": one chunk, decoded before its transposition */
    struct ome_geom geom;   /* an OME-Zarr level's scale and translation */
} zarr_array;

/* ---- dtypes and codecs (zarr_codec.c) ---- */

/* A v2 dtype string ("<u2", "|u1", ">f8") into t: 0, or -1 when it is not one swi reads. */
int zarr__parse_dtype(const char *s, ztype *t);
/* Is the host big-endian? */
int zarr__host_big(void);
/* n elements of type t at src (stored byte order) to float, as C casts. */
void zarr__to_float(const ztype *t, const unsigned char *src, int64_t n, float *dst);
/* A v2 compressor object (or null) into *out; *id names it: 0, or -1 when unknown. */
int zarr__parse_codec(json_t *c, codec *out, const char **id);
/* The largest file codec c can produce for a chunk of `bytes` bytes. */
size_t zarr__max_stored(codec c, size_t bytes);
/* src (len bytes) decoded into dst of exactly want bytes: 0, or -1 with the reason in why. */
int zarr__decode(codec c, const unsigned char *src, size_t len, unsigned char *dst, size_t want, char *why,
                 size_t wn);
/* src encoded into a malloc'd *out of *olen bytes: 0, or -1. */
int zarr__encode(swi_store_codec c, const unsigned char *src, size_t len, int typesize, unsigned char **out,
                 size_t *olen);
/* The compressor object of the metadata swi writes for codec c. */
json_t *zarr__codec_json(swi_store_codec c, int typesize);

/* ---- metadata (zarr_meta.c) ---- */

/* A JSON file of at most 64 MiB, or NULL with err set (what names it) and errno (EBADMSG:
 * not JSON; see io__errno_status). */
json_t *zarr__load_json(const char *path, char *err, size_t n, const char *what);
/* j written to path through io__put_file: 0 or -1 with errno. */
int zarr__put_json(const char *path, json_t *j, int exclusive);
/* The metadata (.zarray, or Zarr v3's zarr.json) of the array at dir into a. */
swi_status zarr__parse_zarray(const char *dir, zarr_array *a, char *err, size_t n);
/* The geometry of dataset ds of multiscale ms, in millimetres (to_mm) or the axes' units. */
void zarr__ome_geometry(json_t *ms, json_t *ds, ome_geom *g, int to_mm);
/* An OME-Zarr group's attributes (*root: the JSON to free), or NULL; *array: it is an array. */
json_t *zarr__ome_attrs(const char *group, json_t **root, int *array, char *err, size_t n);
int zarr__is_array_dir(const char *dir);
int zarr__is_ome_dir(const char *dir);
/* The array directory of an OME-Zarr image's first level into dir, its geometry into g. */
swi_status zarr__ome_level0(const char *group, char *dir, size_t dn, ome_geom *g, char *err, size_t n);
/* The metadata a writer writes: the array's .zarray, an OME image's .zattrs. */
/* A plain Zarr label array's .zattrs: {"swi_classes": [...]} (store__classes_json), or NULL. */
json_t *zarr__classes_attrs(const swi_store_spec *spec);
json_t *zarr__zarray_json(const swi_store_spec *spec, const int64_t chunk[3]);
json_t *zarr__ome_json(const swi_store_spec *spec, const char *name, const ome_geom *g);
swi_status zarr__write_meta(const char *path, json_t *j, char *err, size_t n);
/* image/labels/NAME: the image's folder and NAME; -1 when group is not such a name. */
int zarr__labels_parent(const char *group, char *image, size_t in, char *leaf, size_t ln);
void zarr__image_level_geometry(const char *image, const int64_t size[3], ome_geom *g);
/* A labels group recorded in its image's labels/.zattrs (SWI_OK, or a status with err). */
swi_status zarr__register_label(const char *group, char *err, size_t n);

/* A name without its trailing slashes (zarr_chunks.c). */
void zarr__strip_slash(const char *in, char *out, size_t n);

#endif /* SWI_HAVE_ZARR */

#endif
