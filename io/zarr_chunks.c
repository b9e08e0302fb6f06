/* zarr_chunks.c -- a Zarr v2/v3 array or OME-Zarr image read box by box: its chunk files
 * decoded through a cache of decoded chunks (order F transposed), absent chunks as the
 * fill value. */
#include "zarr_internal.h"

#ifdef SWI_HAVE_ZARR

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int zarr__available(void) { return 1; }

static void chunk_path(const zarr_array *a, const int64_t key[3], char *out, size_t n) {
    int k = snprintf(out, n, "%s/%s", a->dir, a->key_prefix);
    for (int d = 0; d < a->ndim && k > 0 && (size_t)k < n; d++) {
        long long idx = d < a->ndim - 3 ? 0 : (long long)key[d - (a->ndim - 3)];
        k += snprintf(out + k, n - (size_t)k, "%s%lld", d ? (char[]){a->sep, 0} : "", idx);
    }
}

/* A chunk stored first axis fastest (order "F") into C order: element (i, j, k) of the
 * spatial chunk moves from i + c0 (j + c1 k) to (i c1 + j) c2 + k. */
static void fortran_to_c(const zarr_array *a, const unsigned char *src, unsigned char *dst) {
    const int64_t c0 = a->chunks[a->ndim - 3], c1 = a->chunks[a->ndim - 2], c2 = a->chunks[a->ndim - 1];
    const size_t es = (size_t)a->t.size;
    for (int64_t i = 0; i < c0; i++)
        for (int64_t j = 0; j < c1; j++)
            for (int64_t k = 0; k < c2; k++)
                memcpy(dst + (size_t)((i * c1 + j) * c2 + k) * es, src + (size_t)(i + c0 * (j + c1 * k)) * es,
                       es);
}

/* The decoded chunk `key` (spatial chunk indices), through the cache; NULL with *st. */
static const unsigned char *get_chunk(zarr_array *a, const int64_t key[3], swi_status *st, char *err,
                                      size_t n) {
    a->tick++;
    int victim = 0;
    for (int i = 0; i < a->cache_n; i++) {
        centry *e = &a->cache[i];
        if (e->key[0] == key[0] && e->key[1] == key[1] && e->key[2] == key[2]) {
            e->used = a->tick;
            return e->data;
        }
        if (e->used < a->cache[victim].used) victim = i;
    }
    centry *e;
    if (a->cache_n < a->cache_cap) {
        e = &a->cache[a->cache_n];
        e->data = malloc(a->chunk_bytes);
        if (!e->data) {
            io__err(err, n, "%s: out of memory for a chunk", a->dir);
            *st = SWI_ERR_NOMEM;
            return NULL;
        }
        a->cache_n++;
    } else {
        e = &a->cache[victim];
    }
    e->used = 0;
    e->key[0] = e->key[1] = e->key[2] = -1;
    char path[4400];
    chunk_path(a, key, path, sizeof path);
    size_t len = 0;
    char why_read[1024];
    unsigned char *raw = io__read_file(path, zarr__max_stored(a->codec, a->chunk_bytes), &len, why_read,
                                       sizeof why_read, "the chunk");
    if (!raw) {
        if (errno != ENOENT) {
            io__err(err, n, "%s", why_read);
            *st = io__errno_status(errno);
            return NULL;
        }
        /* a missing chunk holds the fill value */
        size_t count = a->chunk_bytes / (size_t)a->t.size;
        for (size_t i = 0; i < count; i++) {
            unsigned char *p = e->data + i * (size_t)a->t.size;
            switch (a->t.type) {
            case SWI_IO_TYPE_FLOAT32: {
                float v = (float)a->fill;
                memcpy(p, &v, 4);
                break;
            }
            case SWI_IO_TYPE_FLOAT64: {
                double v = a->fill;
                memcpy(p, &v, 8);
                break;
            }
            default: {
                int64_t v = (int64_t)a->fill;
                memcpy(p, &v, (size_t)a->t.size); /* little-endian host: low bytes first */
                break;
            }
            }
            if (a->t.big != zarr__host_big() && a->t.size > 1)
                for (int b = 0; b < a->t.size / 2; b++) {
                    unsigned char c = p[b];
                    p[b] = p[a->t.size - 1 - b];
                    p[a->t.size - 1 - b] = c;
                }
        }
    } else {
        char why[160] = "";
        if (a->fortran && !a->scratch && !(a->scratch = malloc(a->chunk_bytes))) {
            free(raw);
            io__err(err, n, "%s: out of memory for a chunk", a->dir);
            *st = SWI_ERR_NOMEM;
            return NULL;
        }
        int r = zarr__decode(a->codec, raw, len, a->fortran ? a->scratch : e->data, a->chunk_bytes, why,
                             sizeof why);
        free(raw);
        if (r) {
            io__err(err, n, "%s: corrupt chunk: %s", path, why);
            *st = SWI_ERR_INVALID_ARG;
            return NULL;
        }
        if (a->fortran) fortran_to_c(a, a->scratch, e->data);
    }
    memcpy(e->key, key, sizeof e->key);
    e->used = a->tick;
    return e->data;
}

static void array_free(zarr_array *a) {
    if (!a) return;
    for (int i = 0; i < a->cache_n; i++) free(a->cache[i].data);
    free(a->cache);
    free(a->scratch);
    free(a);
}

void zarr__strip_slash(const char *in, char *out, size_t n) {
    snprintf(out, n, "%s", in);
    size_t l = strlen(out);
    while (l > 1 && out[l - 1] == '/') out[--l] = '\0';
}

swi_status zarr__open(const char *name, int ome, void **impl, int64_t size[3], swi_io_type *type, char *err,
                      size_t n) {
    zarr_array *a = calloc(1, sizeof *a);
    if (!a) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    char base[4096];
    zarr__strip_slash(name, base, sizeof base);
    char marker[4200];
    if (io__join(marker, sizeof marker, base, ZARR_MARKER) == 0 && access(marker, F_OK) == 0) {
        io__err(err, n, "%s: the store is incomplete (%s: a run writing it failed or is still running)", name,
                ZARR_MARKER);
        free(a);
        return SWI_ERR_INVALID_ARG;
    }
    swi_status st = SWI_OK;
    char zarray[4200];
    /* an image is known by its metadata: x.zarr holding multiscales is read as OME-Zarr */
    if ((ome && !(io__join(zarray, sizeof zarray, base, ".zarray") == 0 && access(zarray, F_OK) == 0)) ||
        (!ome && !zarr__is_array_dir(base) && zarr__is_ome_dir(base)))
        st = zarr__ome_level0(base, a->dir, sizeof a->dir, &a->geom, err, n);
    else
        snprintf(a->dir, sizeof a->dir, "%s", base);
    if (st == SWI_OK) st = zarr__parse_zarray(a->dir, a, err, n);
    if (st == SWI_OK) {
        /* enough decoded chunks for the overlap of neighbouring windows: 256 MiB, at least 8 */
        size_t cap = ((size_t)256 << 20) / a->chunk_bytes;
        a->cache_cap = cap < 8 ? 8 : cap > 4096 ? 4096 : (int)cap;
        a->cache = calloc((size_t)a->cache_cap, sizeof *a->cache);
        if (!a->cache) {
            io__err(err, n, "%s: out of memory", name);
            st = SWI_ERR_NOMEM;
        }
    }
    if (st != SWI_OK) {
        array_free(a);
        return st;
    }
    for (int k = 0; k < 3; k++) size[k] = a->shape[a->ndim - 3 + k];
    *type = a->t.type;
    *impl = a;
    return SWI_OK;
}

swi_status zarr__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                          size_t n) {
    zarr_array *a = impl;
    const int o = a->ndim - 3;
    const int64_t *cs = a->chunks + o;
    const int64_t bh = hi[1] - lo[1], bw = hi[2] - lo[2];
    int64_t key[3];
    for (key[0] = lo[0] / cs[0]; key[0] * cs[0] < hi[0]; key[0]++)
        for (key[1] = lo[1] / cs[1]; key[1] * cs[1] < hi[1]; key[1]++)
            for (key[2] = lo[2] / cs[2]; key[2] * cs[2] < hi[2]; key[2]++) {
                swi_status st = SWI_ERR_INVALID_ARG;
                const unsigned char *c = get_chunk(a, key, &st, err, n);
                if (!c) return st;
                int64_t a0[3], b0[3];
                for (int d = 0; d < 3; d++) {
                    a0[d] = key[d] * cs[d] > lo[d] ? key[d] * cs[d] : lo[d];
                    b0[d] = (key[d] + 1) * cs[d] < hi[d] ? (key[d] + 1) * cs[d] : hi[d];
                }
                for (int64_t i = a0[0]; i < b0[0]; i++)
                    for (int64_t j = a0[1]; j < b0[1]; j++) {
                        size_t off = (size_t)((((i - key[0] * cs[0]) * cs[1] + (j - key[1] * cs[1])) * cs[2] +
                                               (a0[2] - key[2] * cs[2]))) *
                                     (size_t)a->t.size;
                        float *to = dst + ((i - lo[0]) * bh + (j - lo[1])) * bw + (a0[2] - lo[2]);
                        zarr__to_float(&a->t, c + off, b0[2] - a0[2], to);
                    }
            }
    return SWI_OK;
}

void zarr__close(void *impl) { array_free(impl); }

double zarr__fill(void *impl) { return ((const zarr_array *)impl)->fill; }

void zarr__lead(void *impl, char lead[4]) {
    const zarr_array *a = impl;
    /* only axes of size 1: the array's leading axes are all of size 1 when read */
    if (a->ndim - 3 == (int)strlen(a->geom.lead)) memcpy(lead, a->geom.lead, 4);
}

void zarr__chunk(void *impl, int64_t chunk[3]) {
    const zarr_array *a = impl;
    for (int k = 0; k < 3; k++) chunk[k] = a->chunks[a->ndim - 3 + k];
}

int zarr__geometry(void *impl, double scale[3], double trans[3]) {
    const zarr_array *a = impl;
    for (int k = 0; k < 3; k++) {
        scale[k] = a->geom.has ? a->geom.scale[k] : 1;
        trans[k] = a->geom.has ? a->geom.trans[k] : 0;
    }
    return a->geom.has;
}

#else /* !SWI_HAVE_ZARR */

static swi_status missing(char *err, size_t n) {
    io__err(err, n, "swi_io was built without Zarr (install libjansson-dev libblosc-dev libzstd-dev)");
    return SWI_ERR_INVALID_ARG;
}
int zarr__available(void) { return 0; }
swi_status zarr__open(const char *name, int ome, void **impl, int64_t size[3], swi_io_type *type, char *err,
                      size_t n) {
    (void)name, (void)ome, (void)impl, (void)size, (void)type;
    return missing(err, n);
}
swi_status zarr__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                          size_t n) {
    (void)impl, (void)lo, (void)hi, (void)dst;
    return missing(err, n);
}
void zarr__close(void *impl) { (void)impl; }
double zarr__fill(void *impl) {
    (void)impl;
    return 0;
}
void zarr__chunk(void *impl, int64_t chunk[3]) { (void)impl, (void)chunk; }
void zarr__lead(void *impl, char lead[4]) { (void)impl, (void)lead; }
int zarr__geometry(void *impl, double scale[3], double trans[3]) {
    (void)impl;
    for (int k = 0; k < 3; k++) scale[k] = 1, trans[k] = 0;
    return 0;
}

#endif
