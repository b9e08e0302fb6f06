/* hdf5.c -- HDF5 datasets (file.h5:/path): read by hyperslab with HDF5's own conversion
 * to float, written chunked and deflate-compressed: by one writer into a temporary file
 * renamed at commit, or by several parts in turn under the file's lock (see "several parts
 * into one file" below). Chunks are shuffled and deflated by the thread that finished them,
 * as HDF5's filters would, and handed to HDF5 whole. libhdf5 (serial) is not thread-safe:
 * one lock serialises every call into it. */
#include "store_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

/* The attributes a dataset being written by several parts carries until the last one has
 * written: the marker, and one byte per part (1: done). Removed at completion, so a
 * finished dataset looks like a single writer's. */
#define INCOMPLETE_ATTR "swi_incomplete"
#define PARTS_ATTR "swi_parts_done"
#define INCOMPLETE_TEXT "a run writing this dataset failed or is still running"

int h5__available(void) { return 1; }

/* libhdf5 prints its error stack by default; a library must not. */
static void quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct h5r {
    hid_t file, dset;
    int ndim;
    char name[4200];
} h5r;

swi_status h5__open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err, size_t n) {
    char file[4096], dset[1024];
    if (swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, err, n)) return SWI_ERR_INVALID_ARG;
    if (access(file, R_OK) != 0) {
        io__err(err, n, "%s: %s", file, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    h5r *r = calloc(1, sizeof *r);
    if (!r) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->file = r->dset = -1;
    pthread_mutex_lock(&h5_lock);
    quiet();
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t space = -1, t = -1, dapl = -1;
    r->file = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) {
        io__err(err, n, "%s: not an HDF5 file", file);
        goto done;
    }
    /* a chunk cache for the overlap of neighbouring windows */
    dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl >= 0) H5Pset_chunk_cache(dapl, 12421, (size_t)256 << 20, 1.0);
    r->dset = H5Dopen2(r->file, dset, dapl >= 0 ? dapl : H5P_DEFAULT);
    if (r->dset < 0) {
        io__err(err, n, "%s: no dataset %s in the file", name, dset);
        goto done;
    }
    if (H5Aexists(r->dset, INCOMPLETE_ATTR) > 0) {
        io__err(err, n,
                "%s: the dataset is incomplete (attribute %s: a run writing it failed or is still running)",
                name, INCOMPLETE_ATTR);
        goto done;
    }
    space = H5Dget_space(r->dset);
    t = H5Dget_type(r->dset);
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK];
    if (nd < 3 || nd > STORE_MAX_NDIM || H5Sget_simple_extent_dims(space, dims, NULL) != nd) {
        io__err(err, n, "%s: the dataset has %d dimensions (3, or more with leading sizes of 1)", name, nd);
        goto done;
    }
    for (int k = 0; k < nd - 3; k++)
        if (dims[k] != 1) {
            io__err(err, n, "%s: dimension %d has size %llu (axes before the last 3 must be 1)", name, k,
                    (unsigned long long)dims[k]);
            goto done;
        }
    double vox = 1;
    for (int k = 0; k < 3; k++) {
        size[k] = (int64_t)dims[nd - 3 + k];
        vox *= (double)dims[nd - 3 + k];
        if (size[k] < 1 || size[k] > SWI_MAX_AXIS) {
            io__err(err, n, "%s: dimension %d of size %llu is out of range", name, nd - 3 + k,
                    (unsigned long long)dims[nd - 3 + k]);
            goto done;
        }
    }
    if (vox > (double)IO_MAX_VOXELS) {
        io__err(err, n, "%s: %.0f voxels exceed the limit of 2^40", name, vox);
        goto done;
    }
    H5T_class_t cls = H5Tget_class(t);
    size_t tsz = H5Tget_size(t);
    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        static const swi_io_type ut[] = {
            SWI_IO_TYPE_UINT8, SWI_IO_TYPE_UINT16, 0, SWI_IO_TYPE_UINT32, 0, 0, 0, SWI_IO_TYPE_UINT64};
        static const swi_io_type it[] = {SWI_IO_TYPE_INT8, SWI_IO_TYPE_INT16, 0, SWI_IO_TYPE_INT32, 0, 0, 0,
                                         SWI_IO_TYPE_INT64};
        if (tsz != 1 && tsz != 2 && tsz != 4 && tsz != 8) {
            io__err(err, n, "%s: integer type of %zu bytes", name, tsz);
            goto done;
        }
        *type = sgn ? it[tsz - 1] : ut[tsz - 1];
    } else if (cls == H5T_FLOAT && (tsz == 4 || tsz == 8)) {
        *type = tsz == 4 ? SWI_IO_TYPE_FLOAT32 : SWI_IO_TYPE_FLOAT64;
    } else {
        io__err(err, n, "%s: the dataset's type is not an integer or float type", name);
        goto done;
    }
    r->ndim = nd;
    st = SWI_OK;
done:
    if (t >= 0) H5Tclose(t);
    if (space >= 0) H5Sclose(space);
    if (dapl >= 0) H5Pclose(dapl);
    if (st != SWI_OK) {
        if (r->dset >= 0) H5Dclose(r->dset);
        if (r->file >= 0) H5Fclose(r->file);
        free(r);
    } else {
        *impl = r;
    }
    pthread_mutex_unlock(&h5_lock);
    return st;
}

swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n) {
    h5r *r = impl;
    hsize_t start[STORE_MAX_NDIM] = {0}, count[STORE_MAX_NDIM];
    for (int k = 0; k < r->ndim; k++) count[k] = 1;
    hsize_t mcount[3];
    for (int k = 0; k < 3; k++) {
        start[r->ndim - 3 + k] = (hsize_t)lo[k];
        count[r->ndim - 3 + k] = mcount[k] = (hsize_t)(hi[k] - lo[k]);
    }
    pthread_mutex_lock(&h5_lock);
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t fs = H5Dget_space(r->dset), ms = H5Screate_simple(3, mcount, NULL);
    if (fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
        H5Dread(r->dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, dst) >= 0)
        st = SWI_OK;
    else
        io__err(err, n,
                "%s: cannot read the box [%lld..%lld, %lld..%lld, %lld..%lld) (corrupt or truncated file)",
                r->name, (long long)lo[0], (long long)hi[0], (long long)lo[1], (long long)hi[1],
                (long long)lo[2], (long long)hi[2]);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    pthread_mutex_unlock(&h5_lock);
    return st;
}

void h5__close(void *impl) {
    h5r *r = impl;
    if (!r) return;
    pthread_mutex_lock(&h5_lock);
    H5Dclose(r->dset);
    H5Fclose(r->file);
    pthread_mutex_unlock(&h5_lock);
    free(r);
}

#define MAX_PARTS 60000 /* one byte each: an attribute stays within HDF5's 64 KiB default */

/* Compressed slabs a part holds before taking the file's lock to write them together, and how
 * long the first may wait: one open and close of the file per batch, not per slab. */
#define BATCH_BYTES ((size_t)64 << 20)
#define BATCH_SECONDS 1.0

/* A slab's chunks as HDF5 stores them, compressed by the thread that finished the slab
 * outside both locks (so parts compress at the same time), written with H5Dwrite_chunk. */
#if !H5_VERSION_GE(1, 10, 3)
#error "swi_io needs libhdf5 1.10.3 or later (H5Dwrite_chunk)"
#endif
typedef struct enc_chunk {
    hsize_t off[4];
    uint32_t mask; /* filters skipped: bit 0 shuffle, bit 1 deflate */
    size_t size;
    unsigned char *buf;
} enc_chunk;

typedef struct pend {
    int64_t lo[3];
    size_t count, bytes;
    enc_chunk *c;
    struct pend *next;
} pend;

typedef struct h5w {
    hid_t file, dset;
    char final[4096], tmp[4200], name[4200], path[1024];
    swi_store_spec spec;
    int64_t chunk[3];
    int force;
    /* one of several parts: the file is opened only while its lock is held */
    int shared, part, parts;
    pthread_mutex_t list_mu; /* the pending list */
    pend *head, **tail;
    size_t pending;
    double first_at;
} h5w;

static hid_t mem_type(swi_dtype t) {
    return t == SWI_DTYPE_FLOAT32  ? H5T_NATIVE_FLOAT
           : t == SWI_DTYPE_UINT16 ? H5T_NATIVE_UINT16
                                   : H5T_NATIVE_UINT8;
}

static int dims_of(const swi_store_spec *spec, const int64_t chunk[3], hsize_t dims[4], hsize_t cdims[4]) {
    int nd = 0;
    if (spec->planes > 1) {
        dims[0] = (hsize_t)spec->planes;
        cdims[0] = 1;
        nd = 1;
    }
    for (int a = 0; a < 3; a++) {
        dims[nd] = (hsize_t)spec->size[a];
        cdims[nd++] = (hsize_t)chunk[a];
    }
    return nd;
}

/* The dataset every writer makes: chunked, shuffled and deflated, fill value 0. Caller
 * holds h5_lock; returns the dataset or -1. */
static hid_t make_dataset(hid_t file, const char *path, const swi_store_spec *spec, const int64_t chunk[3]) {
    hsize_t dims[4], cdims[4];
    int nd = dims_of(spec, chunk, dims, cdims);
    hid_t space = H5Screate_simple(nd, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE), d = -1;
    const double zero = 0; /* converted to the dataset's type by HDF5 */
    if (space >= 0 && dcpl >= 0 && lcpl >= 0 && H5Pset_chunk(dcpl, nd, cdims) >= 0 &&
        H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0 &&
        H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &zero) >= 0 &&
        H5Pset_create_intermediate_group(lcpl, 1) >= 0)
        d = H5Dcreate2(file, path, mem_type(spec->dtype), space, lcpl, dcpl, H5P_DEFAULT);
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (lcpl >= 0) H5Pclose(lcpl);
    return d;
}

static void free_pend(pend *p) {
    if (!p) return;
    for (size_t i = 0; i < p->count; i++) free(p->c[i].buf);
    free(p->c);
    free(p);
}

static void free_list(pend *p) {
    while (p) {
        pend *next = p->next;
        free_pend(p);
        p = next;
    }
}

/* The chunks of the box [lo, hi) (chunk-aligned; every plane) from buf [planes][hi - lo], each
 * as the dataset's filters make it: byte shuffle, then zlib's compress2 at level 4 (HDF5's
 * deflate); edge chunks are stored whole, zero outside the dataset. A chunk deflate does not
 * shrink is stored raw, both filters marked skipped. */
static swi_status encode_slab(const h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf,
                              pend **out, char *err, size_t n) {
    const int64_t *c = w->chunk, *size = w->spec.size;
    const size_t es = store__dtype_size(w->spec.dtype);
    const size_t cbytes = (size_t)(c[0] * c[1] * c[2]) * es;
    const int64_t e0 = hi[0] - lo[0], e1 = hi[1] - lo[1], e2 = hi[2] - lo[2];
    const int64_t n0 = (e0 + c[0] - 1) / c[0], n1 = (e1 + c[1] - 1) / c[1], n2 = (e2 + c[2] - 1) / c[2];
    const uLong bound = compressBound((uLong)cbytes);
    pend *p = calloc(1, sizeof *p);
    unsigned char *raw = malloc(cbytes), *shuf = es > 1 ? malloc(cbytes) : NULL;
    if (p) {
        memcpy(p->lo, lo, sizeof p->lo);
        p->c = calloc((size_t)(w->spec.planes * n0 * n1 * n2), sizeof *p->c);
    }
    if (!p || !p->c || !raw || (es > 1 && !shuf)) {
        free(raw);
        free(shuf);
        free_pend(p);
        io__err(err, n, "%s: out of memory for a slab", w->name);
        return SWI_ERR_NOMEM;
    }
    const unsigned char *src = buf;
    const size_t ne = cbytes / es;
    swi_status st = SWI_OK;
    for (int64_t pl = 0; pl < w->spec.planes && st == SWI_OK; pl++)
        for (int64_t ci = lo[0] / c[0]; ci * c[0] < hi[0] && st == SWI_OK; ci++)
            for (int64_t cj = lo[1] / c[1]; cj * c[1] < hi[1] && st == SWI_OK; cj++)
                for (int64_t ck = lo[2] / c[2]; ck * c[2] < hi[2] && st == SWI_OK; ck++) {
                    store__gather_chunk(raw, src, lo, hi, c, size, pl, ci, cj, ck, es);
                    const unsigned char *in = raw;
                    if (es > 1) {
                        /* HDF5's shuffle: byte b of every element together, in element order */
                        for (size_t b = 0; b < es; b++)
                            for (size_t i = 0; i < ne; i++) shuf[b * ne + i] = raw[i * es + b];
                        in = shuf;
                    }
                    enc_chunk *e = &p->c[p->count];
                    int k = 0;
                    if (w->spec.planes > 1) e->off[k++] = (hsize_t)pl;
                    e->off[k++] = (hsize_t)(ci * c[0]);
                    e->off[k++] = (hsize_t)(cj * c[1]);
                    e->off[k++] = (hsize_t)(ck * c[2]);
                    e->buf = malloc(bound);
                    uLongf len = bound;
                    if (!e->buf) {
                        io__err(err, n, "%s: out of memory for a chunk", w->name);
                        st = SWI_ERR_NOMEM;
                    } else if (compress2(e->buf, &len, in, (uLong)cbytes, 4) == Z_OK && len < cbytes) {
                        e->size = len;
                        unsigned char *fit = realloc(e->buf, len);
                        if (fit) e->buf = fit;
                    } else {
                        memcpy(e->buf, raw, cbytes);
                        e->size = cbytes;
                        e->mask = 3;
                    }
                    if (e->buf) {
                        p->bytes += e->size;
                        p->count++;
                    }
                }
    free(raw);
    free(shuf);
    if (st != SWI_OK) {
        free_pend(p);
        return st;
    }
    *out = p;
    return SWI_OK;
}

/* Write a slab's encoded chunks. Caller holds h5_lock. */
static int write_chunks(hid_t d, const pend *p) {
    for (size_t i = 0; i < p->count; i++)
        if (H5Dwrite_chunk(d, H5P_DEFAULT, p->c[i].mask, p->c[i].off, p->c[i].size, p->c[i].buf) < 0)
            return -1;
    return 0;
}

/* ---- several parts into one file ----
 *
 * Serial libhdf5 cannot have two writers in one file, so each part takes an exclusive
 * flock(2) on the file itself for every batch it writes: open, write, close, unlock. That is
 * the lock HDF5's own file locking takes (readers hold it shared while the file is open), so
 * readers that lock (HDF5's default) never see a batch half-written. Our opens turn HDF5's locking off, as
 * the process already holds the lock on another descriptor and would conflict with itself. */

/* Does HDF5_USE_FILE_LOCKING turn HDF5's own locking on (it overrides the access property)? */
static const char *env_forces_locking(void) {
    const char *e = getenv("HDF5_USE_FILE_LOCKING");
    if (!e || !*e || !strcmp(e, "FALSE") || !strcmp(e, "0")) return NULL;
    return e;
}

#if H5_VERSION_GE(1, 12, 1) || (H5_VERSION_GE(1, 10, 7) && !H5_VERSION_GE(1, 12, 0))
#define HAVE_FILE_LOCKING_PROPERTY 1
#endif

static int env_allows(const char *name, char *err, size_t n) {
    const char *e = env_forces_locking();
#ifndef HAVE_FILE_LOCKING_PROPERTY
    /* without the access property only the environment can turn HDF5's lock off */
    if (!e && !getenv("HDF5_USE_FILE_LOCKING")) e = "unset";
#endif
    if (!e) return 0;
    io__err(err, n,
            "%s: HDF5_USE_FILE_LOCKING=%s: HDF5's own lock would conflict with the one each part takes "
            "on the file; set HDF5_USE_FILE_LOCKING=FALSE for parts writing one HDF5 file",
            name, e);
    return -1;
}

/* A read-write open of the locked file, HDF5's own lock off. Caller holds h5_lock. */
static hid_t open_locked(const char *file) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
#ifdef HAVE_FILE_LOCKING_PROPERTY
    if (H5Pset_file_locking(fapl, 0, 1) < 0) {
        H5Pclose(fapl);
        return -1;
    }
#endif
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    return f;
}

/* One locked section per process at a time, taken before the file's lock: two writers of
 * one file in a process (labels and scores) would otherwise either conflict (flock on two
 * descriptors) or, where flock is emulated by POSIX locks (NFS), share the lock and lose it
 * when the first one's HDF5 descriptor closes. */
static pthread_mutex_t batch_mu = PTHREAD_MUTEX_INITIALIZER;

/* Open the file and take its lock, waiting for other parts and for readers; -1 with errno
 * (ENOENT: no file yet). */
static int lock_file(const char *file) {
    pthread_mutex_lock(&batch_mu);
    int fd = open(file, O_RDWR | O_CLOEXEC), r = -1;
    if (fd >= 0)
        while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
    if (r != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        pthread_mutex_unlock(&batch_mu);
        errno = e;
        return -1;
    }
    return fd;
}

static void unlock_file(int fd) {
    flock(fd, LOCK_UN);
    close(fd);
    pthread_mutex_unlock(&batch_mu);
}

static void lock_error(const h5w *w, char *err, size_t n) {
    io__err(err, n, "%s: cannot lock the file: %s%s", w->final, strerror(errno),
            errno == ENOLCK ? " (on NFS, locks need the lock manager: rpc.statd / lockd)" : "");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int put_string_attr(hid_t obj, const char *key, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = -1;
    int ok = 0;
    if (t >= 0 && s >= 0 && H5Tset_size(t, strlen(value) + 1) >= 0 &&
        (a = H5Acreate2(obj, key, t, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, t, value) >= 0)
        ok = 1;
    if (a >= 0) ok &= H5Aclose(a) >= 0;
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    return ok ? 0 : -1;
}

/* The done flags of `parts` parts: the attribute's if it has that length, else all 0. */
static int read_parts(hid_t d, int parts, unsigned char *done) {
    memset(done, 0, (size_t)parts);
    htri_t has = H5Aexists(d, PARTS_ATTR);
    if (has < 0) return -1;
    if (!has) return 0;
    hid_t a = H5Aopen(d, PARTS_ATTR, H5P_DEFAULT);
    hid_t s = a >= 0 ? H5Aget_space(a) : -1;
    int ok = s >= 0;
    if (ok && H5Sget_simple_extent_npoints(s) == parts) ok = H5Aread(a, H5T_NATIVE_UCHAR, done) >= 0;
    if (s >= 0) H5Sclose(s);
    if (a >= 0) H5Aclose(a);
    return ok ? 0 : -1;
}

static int write_parts(hid_t d, int parts, const unsigned char *done) {
    if (H5Aexists(d, PARTS_ATTR) > 0 && H5Adelete(d, PARTS_ATTR) < 0) return -1;
    hsize_t len = (hsize_t)parts;
    hid_t s = H5Screate_simple(1, &len, NULL), a = -1;
    int ok = s >= 0 && (a = H5Acreate2(d, PARTS_ATTR, H5T_STD_U8LE, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, H5T_NATIVE_UCHAR, done) >= 0;
    if (a >= 0) ok &= H5Aclose(a) >= 0;
    if (s >= 0) H5Sclose(s);
    return ok ? 0 : -1;
}

/* Does the dataset hold what this run writes: shape, element type and chunk? */
static int same_dataset(hid_t d, const swi_store_spec *spec, const int64_t chunk[3]) {
    hsize_t dims[4], cdims[4], got[H5S_MAX_RANK], gotc[H5S_MAX_RANK];
    int nd = dims_of(spec, chunk, dims, cdims);
    hid_t s = H5Dget_space(d), t = H5Dget_type(d), p = H5Dget_create_plist(d);
    int ok = s >= 0 && t >= 0 && p >= 0 && H5Sget_simple_extent_ndims(s) == nd &&
             H5Sget_simple_extent_dims(s, got, NULL) == nd && H5Pget_layout(p) == H5D_CHUNKED &&
             H5Pget_chunk(p, nd, gotc) == nd && H5Tget_size(t) == store__dtype_size(spec->dtype) &&
             H5Tget_class(t) == (spec->dtype == SWI_DTYPE_FLOAT32 ? H5T_FLOAT : H5T_INTEGER) &&
             (spec->dtype == SWI_DTYPE_FLOAT32 || H5Tget_sign(t) == H5T_SGN_NONE);
    for (int k = 0; ok && k < nd; k++) ok = got[k] == dims[k] && gotc[k] == cdims[k];
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    if (p >= 0) H5Pclose(p);
    return ok;
}

/* Create the file whole under a temporary name and link it into place: link(2) fails if
 * another part was first. 0 created, 1 another part's file is there, -1 error. */
static int create_shared(h5w *w, char *err, size_t n) {
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    const char *slash = strrchr(w->final, '/');
    int dl = slash ? (int)(slash - w->final) + 1 : 0;
    /* host and pid: parts on several machines share the directory */
    snprintf(w->tmp, sizeof w->tmp, "%.*s.%s.tmp-%.64s-%ld", dl, w->final, slash ? slash + 1 : w->final, host,
             (long)getpid());
    pthread_mutex_lock(&h5_lock);
    quiet();
    int bad = 1;
    hid_t f = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), d = -1;
    if (f < 0)
        io__err(err, n, "%s: cannot create the file: %s", w->tmp, strerror(errno));
    else if ((d = make_dataset(f, w->path, &w->spec, w->chunk)) < 0)
        io__err(err, n, "%s: cannot create the dataset %s", w->name, w->path);
    else if (put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0)
        io__err(err, n, "%s: cannot write the attribute %s", w->name, INCOMPLETE_ATTR);
    else
        bad = 0;
    if (d >= 0 && H5Dclose(d) < 0) bad = 1;
    if (f >= 0 && H5Fclose(f) < 0 && !bad) {
        io__err(err, n, "%s: cannot finish the file (disk full?)", w->tmp);
        bad = 1;
    }
    pthread_mutex_unlock(&h5_lock);
    int r = bad ? -1 : 0;
    if (!bad && link(w->tmp, w->final) != 0) {
        if (errno == EEXIST) {
            r = 1;
        } else {
            io__err(err, n, "%s: cannot put the file in place: %s", w->final, strerror(errno));
            r = -1;
        }
    }
    if (f >= 0) unlink(w->tmp);
    return r;
}

/* Does the path exist (every group on the way too)? H5Lexists fails on a missing group. */
static htri_t path_exists(hid_t f, const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *c = buf + 1;; c++) {
        if (*c != '/' && *c) continue;
        char keep = *c;
        *c = '\0';
        htri_t e = H5Lexists(f, buf, H5P_DEFAULT);
        *c = keep;
        if (e <= 0 || !keep) return e;
    }
}

/* The dataset and the file closed and HDF5's lock released; a failing close fails st (what
 * HDF5 still held may not be on disk). */
static swi_status close_h5(h5w *w, hid_t f, hid_t d, swi_status st, char *err, size_t n) {
    if (d >= 0) H5Dclose(d);
    if (f >= 0 && H5Fclose(f) < 0 && st == SWI_OK) {
        io__err(err, n, "%s: cannot finish writing the file (disk full?)", w->final);
        st = SWI_ERR_INVALID_ARG;
    }
    pthread_mutex_unlock(&h5_lock);
    return st;
}
/* Join an existing file, its lock held: a dataset of this run's layout that is incomplete
 * (or --force) is marked incomplete and this part not done; a missing one is created beside
 * the file's other datasets. */
static swi_status join_locked(h5w *w, int flags, char *err, size_t n) {
    pthread_mutex_lock(&h5_lock);
    quiet();
    swi_status st = SWI_ERR_INVALID_ARG;
    unsigned char *done = NULL;
    hid_t f = open_locked(w->final), d = -1;
    htri_t inc = -1;
    if (f < 0) {
        io__err(err, n, "%s: exists and is not an HDF5 file this run can open", w->final);
        goto out;
    }
    htri_t there = path_exists(f, w->path);
    if (there < 0) {
        io__err(err, n, "%s: cannot look up %s in the file", w->name, w->path);
        goto out;
    }
    if (!there) {
        /* another dataset of the file (labels and scores in one file): added beside the others */
        d = make_dataset(f, w->path, &w->spec, w->chunk);
        if (d < 0 || put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0) {
            io__err(err, n, "%s: cannot create the dataset %s in the file", w->name, w->path);
            goto out;
        }
        st = SWI_OK; /* new: no part done */
        goto out;
    }
    if ((d = H5Dopen2(f, w->path, H5P_DEFAULT)) < 0) {
        io__err(err, n, "%s: %s is not a dataset", w->name, w->path);
        goto out;
    }
    inc = H5Aexists(d, INCOMPLETE_ATTR);
    if (inc == 0 && !(flags & SWI_STORE_FORCE)) {
        io__err(err, n, "%s: already exists (use --force to overwrite)", w->name);
        goto out;
    }
    if (!same_dataset(d, &w->spec, w->chunk)) {
        io__err(err, n,
                "%s: exists with another shape, chunk or dtype than this run writes (a part of another "
                "run, or another --classes/--output)",
                w->name);
        goto out;
    }
    if (inc < 0 || (inc == 0 && put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0)) {
        io__err(err, n, "%s: cannot write the attribute %s", w->name, INCOMPLETE_ATTR);
        goto out;
    }
    if (w->part >= 0) {
        /* a rerun of this part: its old "done" no longer holds */
        done = malloc((size_t)w->parts);
        if (!done) {
            io__err(err, n, "%s: out of memory", w->name);
            st = SWI_ERR_NOMEM;
            goto out;
        }
        if (read_parts(d, w->parts, done) != 0 ||
            (done[w->part] && (done[w->part] = 0, write_parts(d, w->parts, done) != 0))) {
            io__err(err, n, "%s: cannot update the attribute %s", w->name, PARTS_ATTR);
            goto out;
        }
    }
    st = SWI_OK;
out:
    st = close_h5(w, f, d, st, err, n);
    free(done);
    return st;
}

static swi_status shared_create(h5w *w, int flags, char *err, size_t n) {
    if (env_allows(w->name, err, n)) return SWI_ERR_INVALID_ARG;
    if (w->parts > MAX_PARTS) {
        io__err(err, n, "%s: %d parts; one HDF5 dataset takes at most %d (use Zarr)", w->name, w->parts,
                MAX_PARTS);
        return SWI_ERR_INVALID_ARG;
    }
    /* a file that vanishes between the attempts (removed by hand) is retried a few times */
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = lock_file(w->final);
        if (fd < 0 && errno != ENOENT) {
            lock_error(w, err, n);
            return SWI_ERR_INVALID_ARG;
        }
        if (fd < 0) {
            int r = create_shared(w, err, n);
            if (r < 0) return SWI_ERR_INVALID_ARG;
            if (r == 0) return SWI_OK; /* new: incomplete, no part done */
            continue;
        }
        swi_status st = join_locked(w, flags, err, n);
        unlock_file(fd);
        return st;
    }
    io__err(err, n, "%s: the file keeps appearing and vanishing", w->final);
    return SWI_ERR_INVALID_ARG;
}

/* The shared file's lock taken, HDF5's held, the file and the dataset opened (*d < 0 when they
 * could not be): the lock's descriptor, or -1 (said in err) when the lock could not be had. */
static int open_shared(h5w *w, hid_t *f, hid_t *d, char *err, size_t n) {
    const int fd = lock_file(w->final);
    if (fd < 0) {
        lock_error(w, err, n);
        return -1;
    }
    pthread_mutex_lock(&h5_lock);
    quiet();
    *f = open_locked(w->final);
    *d = *f >= 0 ? H5Dopen2(*f, w->path, H5P_DEFAULT) : -1;
    return fd;
}

/* What open_shared opened, closed and unlocked (see close_h5). */
static swi_status close_shared(h5w *w, int fd, hid_t f, hid_t d, swi_status st, char *err, size_t n) {
    st = close_h5(w, f, d, st, err, n);
    unlock_file(fd);
    return st;
}

/* Write a batch of slabs in one open of the file. */
static swi_status write_batch(h5w *w, const pend *list, char *err, size_t n) {
    hid_t f, d;
    const int fd = open_shared(w, &f, &d, err, n);
    if (fd < 0) return SWI_ERR_INVALID_ARG;
    swi_status st = SWI_ERR_INVALID_ARG;
    if (d < 0) {
        io__err(err, n, "%s: cannot open the dataset to write (removed or replaced while running?)", w->name);
    } else {
        st = SWI_OK;
        for (const pend *p = list; p && st == SWI_OK; p = p->next)
            if (write_chunks(d, p) != 0) {
                io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                        (long long)p->lo[0], (long long)p->lo[1], (long long)p->lo[2]);
                st = SWI_ERR_INVALID_ARG;
            }
    }
    return close_shared(w, fd, f, d, st, err, n);
}

/* Write what is pending (slabs finished meanwhile wait for the next batch). */
static swi_status flush(h5w *w, char *err, size_t n) {
    pthread_mutex_lock(&w->list_mu);
    pend *list = w->head;
    w->head = NULL;
    w->tail = &w->head;
    w->pending = 0;
    pthread_mutex_unlock(&w->list_mu);
    swi_status st = list ? write_batch(w, list, err, n) : SWI_OK;
    free_list(list);
    return st;
}

static swi_status shared_write(h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                               size_t n) {
    pend *p = NULL;
    swi_status st = encode_slab(w, lo, hi, buf, &p, err, n);
    if (st != SWI_OK) return st;
    const double t = now_s();
    pthread_mutex_lock(&w->list_mu);
    if (!w->head) w->first_at = t;
    *w->tail = p;
    w->tail = &p->next;
    w->pending += p->bytes;
    int due = w->pending >= BATCH_BYTES || t - w->first_at >= BATCH_SECONDS;
    pthread_mutex_unlock(&w->list_mu);
    return due ? flush(w, err, n) : SWI_OK;
}

/* The last slabs, then this part's done flag; the part that finds every flag set removes
 * the flags and the marker. */
static swi_status shared_commit(h5w *w, char *err, size_t n) {
    swi_status st = flush(w, err, n);
    if (st != SWI_OK) return st;
    unsigned char *done = malloc((size_t)w->parts);
    if (!done) {
        io__err(err, n, "%s: out of memory", w->name);
        return SWI_ERR_NOMEM;
    }
    hid_t f, d;
    const int fd = open_shared(w, &f, &d, err, n);
    if (fd < 0) {
        free(done);
        return SWI_ERR_INVALID_ARG;
    }
    st = SWI_ERR_INVALID_ARG;
    if (d < 0) {
        io__err(err, n, "%s: cannot open the dataset to commit (removed or replaced while running?)",
                w->name);
    } else if (read_parts(d, w->parts, done) != 0) {
        io__err(err, n, "%s: cannot read the attribute %s", w->name, PARTS_ATTR);
    } else {
        done[w->part] = 1;
        int all = 1;
        for (int p = 0; p < w->parts; p++) all &= done[p];
        int bad = all ? (H5Aexists(d, PARTS_ATTR) > 0 && H5Adelete(d, PARTS_ATTR) < 0) ||
                            (H5Aexists(d, INCOMPLETE_ATTR) > 0 && H5Adelete(d, INCOMPLETE_ATTR) < 0)
                      : write_parts(d, w->parts, done) != 0;
        if (bad)
            io__err(err, n, "%s: cannot update the attributes %s/%s", w->name, PARTS_ATTR, INCOMPLETE_ATTR);
        else
            st = SWI_OK;
    }
    st = close_shared(w, fd, f, d, st, err, n);
    free(done);
    return st;
}

static void free_writer(h5w *w) {
    if (w->shared) {
        free_list(w->head);
        pthread_mutex_destroy(&w->list_mu);
    }
    free(w);
}

/* ---- the writer ---- */

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n) {
    h5w *w = calloc(1, sizeof *w);
    if (!w) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    w->file = w->dset = -1;
    if (swi_store_split_h5(name, w->final, sizeof w->final, w->path, sizeof w->path, err, n)) {
        free(w);
        return SWI_ERR_INVALID_ARG;
    }
    snprintf(w->name, sizeof w->name, "%s", name);
    w->spec = *spec;
    memcpy(w->chunk, chunk, sizeof w->chunk);
    w->force = flags & SWI_STORE_FORCE;
    if (flags & SWI_STORE_SHARED) {
        w->shared = 1;
        w->part = part;
        w->parts = part < 0 ? 1 : parts;
        w->tail = &w->head;
        if (pthread_mutex_init(&w->list_mu, NULL) != 0) {
            free(w);
            io__err(err, n, "%s: out of memory", name);
            return SWI_ERR_NOMEM;
        }
        swi_status st = shared_create(w, flags, err, n);
        if (st != SWI_OK)
            free_writer(w);
        else
            *impl = w;
        return st;
    }
    if (!(flags & SWI_STORE_FORCE) && access(w->final, F_OK) == 0) {
        io__err(err, n, "%s: already exists (use --force to overwrite)", w->final);
        free(w);
        return SWI_ERR_INVALID_ARG;
    }
    const char *slash = strrchr(w->final, '/');
    int dl = slash ? (int)(slash - w->final) + 1 : 0;
    snprintf(w->tmp, sizeof w->tmp, "%.*s.%s.tmp-%ld", dl, w->final, slash ? slash + 1 : w->final,
             (long)getpid());
    pthread_mutex_lock(&h5_lock);
    quiet();
    swi_status st = SWI_ERR_INVALID_ARG;
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        io__err(err, n, "%s: cannot create the file: %s", w->tmp, strerror(errno));
        goto done;
    }
    w->dset = make_dataset(w->file, w->path, spec, chunk);
    if (w->dset < 0) {
        io__err(err, n, "%s: cannot create the dataset %s", name, w->path);
        goto done;
    }
    st = SWI_OK;
done:
    if (st != SWI_OK) {
        if (w->file >= 0) {
            H5Fclose(w->file);
            unlink(w->tmp);
        }
        free(w);
    } else {
        *impl = w;
    }
    pthread_mutex_unlock(&h5_lock);
    return st;
}

swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n) {
    h5w *w = impl;
    if (w->shared) return shared_write(w, lo, hi, buf, err, n);
    pend *p = NULL;
    swi_status st = encode_slab(w, lo, hi, buf, &p, err, n);
    if (st != SWI_OK) return st;
    pthread_mutex_lock(&h5_lock);
    if (write_chunks(w->dset, p) != 0) {
        io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                (long long)lo[0], (long long)lo[1], (long long)lo[2]);
        st = SWI_ERR_INVALID_ARG;
    }
    pthread_mutex_unlock(&h5_lock);
    free_pend(p);
    return st;
}

swi_status h5__commit(void *impl, char *err, size_t n) {
    h5w *w = impl;
    if (w->shared) {
        swi_status st = shared_commit(w, err, n);
        free_writer(w);
        return st;
    }
    pthread_mutex_lock(&h5_lock);
    int bad = H5Dclose(w->dset) < 0;
    bad |= H5Fclose(w->file) < 0;
    pthread_mutex_unlock(&h5_lock);
    swi_status st = SWI_OK;
    if (bad) {
        io__err(err, n, "%s: cannot finish the file (disk full?)", w->tmp);
        unlink(w->tmp);
        st = SWI_ERR_INVALID_ARG;
    } else if (!w->force ? link(w->tmp, w->final) != 0 : rename(w->tmp, w->final) != 0) {
        io__err(err, n, "%s: cannot put the file in place: %s", w->final, strerror(errno));
        unlink(w->tmp);
        st = SWI_ERR_INVALID_ARG;
    } else if (!w->force) {
        unlink(w->tmp);
    }
    free(w);
    return st;
}

void h5__abort(void *impl) {
    h5w *w = impl;
    if (!w) return;
    if (w->shared) {
        /* the part's unwritten slabs are dropped: the file stays marked incomplete */
        free_writer(w);
        return;
    }
    pthread_mutex_lock(&h5_lock);
    H5Dclose(w->dset);
    H5Fclose(w->file);
    pthread_mutex_unlock(&h5_lock);
    unlink(w->tmp);
    free(w);
}

#else /* !SWI_HAVE_HDF5 */

static swi_status missing(char *err, size_t n) {
    io__err(err, n, "swi_io was built without HDF5 (install libhdf5-dev and rebuild)");
    return SWI_ERR_INVALID_ARG;
}
int h5__available(void) { return 0; }
swi_status h5__open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err, size_t n) {
    (void)name, (void)impl, (void)size, (void)type;
    return missing(err, n);
}
swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n) {
    (void)impl, (void)lo, (void)hi, (void)dst;
    return missing(err, n);
}
void h5__close(void *impl) { (void)impl; }
swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n) {
    (void)name, (void)spec, (void)chunk, (void)flags, (void)part, (void)parts, (void)impl;
    return missing(err, n);
}
swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n) {
    (void)impl, (void)lo, (void)hi, (void)buf;
    return missing(err, n);
}
swi_status h5__commit(void *impl, char *err, size_t n) {
    (void)impl;
    return missing(err, n);
}
void h5__abort(void *impl) { (void)impl; }

#endif
