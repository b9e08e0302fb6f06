/* hdf5.c -- HDF5 datasets (file.h5:/path). Read chunk by chunk as stored, each inflated by
 * zlib within the size it must have (see "reading"), or by hyperslab when contiguous, and
 * converted to float by HDF5. Written chunked, shuffled and deflated: by one writer (or the
 * writers of one file in a process) into a copy of the file, or a new file, renamed over it
 * at commit (see "one writer"), or by several parts in turn in place under the file's lock
 * (see "several parts into one file"). Chunks are shuffled and deflated by the thread that
 * finished them, as HDF5's filters would, and handed to HDF5 whole. libhdf5 (serial) is not
 * thread-safe: one lock serialises every call into it. */
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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef __linux__
#include <linux/fs.h> /* FICLONE */
#endif

#if !H5_VERSION_GE(1, 10, 5)
#error "swi_io needs libhdf5 1.10.5 or later (H5Dwrite_chunk, H5Dread_chunk, H5Dget_chunk_info_by_coord)"
#endif
#if H5_VERSION_GE(1, 12, 1) || (H5_VERSION_GE(1, 10, 7) && !H5_VERSION_GE(1, 12, 0))
#define HAVE_FILE_LOCKING_PROPERTY 1
#endif

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

/* The attributes a dataset being written by several parts carries until the last one has
 * written: the marker, and one byte per part (1: done). Removed at completion, so a
 * finished dataset looks like a single writer's. */
#define INCOMPLETE_ATTR "swi_incomplete"
#define PARTS_ATTR "swi_parts_done"
#define INCOMPLETE_TEXT "a run writing this dataset failed or is still running"

int h5__available(void) { return 1; }

/* Close a file HDF5 may still write to. After a failed H5Fclose libhdf5 keeps a file it can
 * neither close again nor survive closing at exit (1.10: a crash in its exit handler), so the
 * file is flushed first and, if that fails, left open (never closed at exit: h5_enter). 0: closed. */
static int close_file(hid_t f) {
    if (H5Fflush(f, H5F_SCOPE_LOCAL) < 0) return -1;
    return H5Fclose(f) < 0 ? -1 : 0;
}

/* libhdf5 prints its error stack by default; a library must not. The setting is per thread
 * in a thread-safe libhdf5: every entry takes h5_lock through here. */
static void h5_enter(void) {
    static int started;
    pthread_mutex_lock(&h5_lock);
    if (!started) {
        /* no library close at exit: after a failed H5Fclose (a full disk) libhdf5's exit
         * handler dies on the half-closed file; the process's end frees everything anyway */
        H5dont_atexit();
        started = 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* The messages of a failure are dropped: a worker thread's stack is otherwise never freed. */
static void h5_leave(void) {
    H5Eclear2(H5E_DEFAULT);
    pthread_mutex_unlock(&h5_lock);
}

/* An object's identity within its file (its header's address), to tell whether a path in a
 * byte-for-byte copy of the file names the same dataset. */
typedef struct obj_key {
    unsigned char b[16];
} obj_key;

static int key_of(hid_t obj, obj_key *k) {
    memset(k, 0, sizeof *k);
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t i;
    if (H5Oget_info3(obj, &i, H5O_INFO_BASIC) < 0) return -1;
    memcpy(k->b, &i.token, sizeof i.token < sizeof k->b ? sizeof i.token : sizeof k->b);
#else
    H5O_info_t i;
    if (H5Oget_info2(obj, &i, H5O_INFO_BASIC) < 0) return -1;
    memcpy(k->b, &i.addr, sizeof i.addr);
#endif
    return 0;
}

/* Is every link on the way to path (the last one too) a hard link? A soft or external link
 * could lead elsewhere, an external one to another file opened by name (a FIFO would block).
 * 1 yes, 0 a component is missing, -2 a link that is not hard, -1 error. Caller holds h5_lock. */
static int hard_path(hid_t f, const char *path) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *c = buf + 1;; c++) {
        if (*c != '/' && *c) continue;
        char keep = *c;
        *c = '\0';
        if (c > buf + 1 && c[-1] != '/') {
            htri_t e = H5Lexists(f, buf, H5P_DEFAULT);
            if (e <= 0) return e < 0 ? -1 : 0;
            H5L_info_t li;
            if (H5Lget_info(f, buf, &li, H5P_DEFAULT) < 0) return -1;
            if (li.type != H5L_TYPE_HARD) return -2;
        }
        *c = keep;
        if (!keep) return 1;
    }
}

/* ---- reading ----
 *
 * Chunked datasets are read chunk by chunk as stored (H5Dread_chunk) and unfiltered here:
 * deflate inflated by zlib into a buffer of the size the chunk must have (a stream that
 * would inflate beyond it is refused, never followed), shuffle undone; other filters are
 * refused. Chunks are converted to float by HDF5 (H5Tconvert) and kept in a small cache for
 * the overlap of neighbouring windows. Contiguous and compact datasets, unfiltered by
 * definition, are read by hyperslab once their claimed size is checked against the file. */

#define CHUNK_CAP ((size_t)1 << 30) /* bytes of one chunk, unfiltered */
#define MAX_FILTERS 8

typedef struct centry {
    int64_t key[3];
    uint64_t used;
    float *data;
} centry;

typedef struct h5r {
    hid_t file, dset, ftype;
    int ndim, chunked, nfilters;
    H5Z_filter_t filters[MAX_FILTERS];
    hsize_t dims[STORE_MAX_NDIM], cdims[STORE_MAX_NDIM];
    size_t tsz, chunk_elems, chunk_bytes;
    int64_t file_size;
    float fill;
    centry *cache;
    int cache_cap, cache_n;
    uint64_t tick;
    unsigned char *stored, *work[2]; /* one chunk as stored, and two of chunk_bytes */
    size_t stored_cap;
    dev_t dev;
    ino_t ino;
    obj_key key;
    struct h5r *next;
    char name[4200];
} h5r;

/* The datasets this process has open for reading (under h5_lock): a writer never replaces
 * one, and parts never write into their file (see h5__create). */
static h5r *readers;

static int is_read(dev_t dev, ino_t ino, const obj_key *key) {
    for (const h5r *r = readers; r; r = r->next)
        if (r->dev == dev && r->ino == ino && (!key || !memcmp(&r->key, key, sizeof *key))) return 1;
    return 0;
}

static void free_reader(h5r *r) {
    if (r->ftype >= 0) H5Tclose(r->ftype);
    if (r->dset >= 0) H5Dclose(r->dset);
    if (r->file >= 0) H5Fclose(r->file);
    for (int i = 0; i < r->cache_n; i++) free(r->cache[i].data);
    free(r->cache);
    free(r->stored);
    free(r->work[0]);
    free(r->work[1]);
    free(r);
}

static const char *filter_name(H5Z_filter_t f) {
    switch (f) {
    case H5Z_FILTER_DEFLATE: return "deflate";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32015: return "zstd";
    default: return "a third-party filter";
    }
}

/* The storage checks: layout, chunk shape and size, filters, claimed size against the file. */
static swi_status check_layout(h5r *r, hid_t dcpl, char *err, size_t n) {
    const int nd = r->ndim;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_VIRTUAL) {
        io__err(err, n, "%s: a virtual dataset (its data lie in other files); swi reads only its own",
                r->name);
        return SWI_ERR_INVALID_ARG;
    }
    int ext = H5Pget_external_count(dcpl);
    if (ext != 0) {
        io__err(err, n, "%s: its data lie in %d external file(s); swi reads only datasets stored in the file",
                r->name, ext);
        return SWI_ERR_INVALID_ARG;
    }
    /* below 2^40 voxels of at most 8 bytes (checked): no overflow */
    uint64_t total = r->tsz;
    for (int k = 0; k < nd; k++) total *= (uint64_t)r->dims[k];
    if (layout == H5D_CONTIGUOUS) {
        haddr_t off = H5Dget_offset(r->dset);
        /* unallocated: every voxel is the fill value */
        if (off != HADDR_UNDEF &&
            (total > (uint64_t)r->file_size || (uint64_t)off > (uint64_t)r->file_size - total)) {
            io__err(err, n, "%s: the dataset claims %llu bytes at offset %llu; the file holds %lld", r->name,
                    (unsigned long long)total, (unsigned long long)off, (long long)r->file_size);
            return SWI_ERR_INVALID_ARG;
        }
        return SWI_OK;
    }
    if (layout == H5D_COMPACT) return SWI_OK; /* inside the object header: at most 64 KiB */
    if (layout != H5D_CHUNKED || H5Pget_chunk(dcpl, nd, r->cdims) != nd) {
        io__err(err, n, "%s: unknown storage layout %d", r->name, (int)layout);
        return SWI_ERR_INVALID_ARG;
    }
    r->chunked = 1;
    r->chunk_elems = 1;
    for (int k = 0; k < nd; k++) {
        if (r->cdims[k] < 1 || r->cdims[k] > r->dims[k]) {
            io__err(err, n, "%s: chunk dimension %d of %llu is larger than the dataset's %llu", r->name, k,
                    (unsigned long long)r->cdims[k], (unsigned long long)r->dims[k]);
            return SWI_ERR_INVALID_ARG;
        }
        r->chunk_elems *= (size_t)r->cdims[k]; /* <= the dataset's voxels: no overflow */
    }
    if (r->chunk_elems > CHUNK_CAP / r->tsz) {
        io__err(err, n, "%s: a chunk holds %zu values of %zu bytes, over the %zu MiB a chunk may hold",
                r->name, r->chunk_elems, r->tsz, CHUNK_CAP >> 20);
        return SWI_ERR_INVALID_ARG;
    }
    r->chunk_bytes = r->chunk_elems * r->tsz;
    int nf = H5Pget_nfilters(dcpl);
    if (nf < 0 || nf > MAX_FILTERS) {
        io__err(err, n, "%s: %d filters", r->name, nf);
        return SWI_ERR_INVALID_ARG;
    }
    r->nfilters = nf;
    for (int i = 0; i < nf; i++) {
        unsigned flags = 0, conf = 0, cd[8];
        size_t ncd = 8;
        char fname[64];
        H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, &conf);
        if (f != H5Z_FILTER_DEFLATE && f != H5Z_FILTER_SHUFFLE) {
            io__err(err, n,
                    "%s: its chunks use the HDF5 filter %d (%s); swi reads chunks filtered by deflate and "
                    "shuffle only (h5repack -f NONE or -f GZIP=4 converts the file)",
                    r->name, (int)f, filter_name(f));
            return SWI_ERR_INVALID_ARG;
        }
        r->filters[i] = f;
    }
    /* enough decoded chunks for the overlap of neighbouring windows: 256 MiB, 1 to 4096 */
    size_t cap = ((size_t)256 << 20) / (r->chunk_elems * sizeof(float));
    r->cache_cap = cap < 1 ? 1 : cap > 4096 ? 4096 : (int)cap;
    r->cache = calloc((size_t)r->cache_cap, sizeof *r->cache);
    if (!r->cache) {
        io__err(err, n, "%s: out of memory", r->name);
        return SWI_ERR_NOMEM;
    }
    return SWI_OK;
}

swi_status h5__open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err, size_t n) {
    char file[4096], dset[1024];
    if (swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, err, n)) return SWI_ERR_INVALID_ARG;
    /* a FIFO or device would block H5Fopen, and is no HDF5 file */
    int64_t fsize = 0;
    struct stat fst;
    if (swi_io_check_regular(file, &fsize, err, n) != SWI_OK) return SWI_ERR_INVALID_ARG;
    if (stat(file, &fst) != 0 || access(file, R_OK) != 0) {
        io__err(err, n, "%s: %s", file, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    h5r *r = calloc(1, sizeof *r);
    if (!r) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->file = r->dset = r->ftype = -1;
    r->file_size = fsize;
    r->dev = fst.st_dev;
    r->ino = fst.st_ino;
    h5_enter();
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t space = -1, dcpl = -1;
    r->file = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) {
        io__err(err, n, "%s: not an HDF5 file", file);
        goto done;
    }
    int hp = hard_path(r->file, dset);
    if (hp == -2) {
        io__err(err, n, "%s: the path %s goes through a soft or external link; give the dataset's own path",
                name, dset);
        goto done;
    }
    r->dset = hp == 1 ? H5Dopen2(r->file, dset, H5P_DEFAULT) : -1;
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
    r->ftype = H5Dget_type(r->dset);
    int nd = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t *dims = r->dims;
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
    H5T_class_t cls = r->ftype >= 0 ? H5Tget_class(r->ftype) : H5T_NO_CLASS;
    size_t tsz = r->ftype >= 0 ? H5Tget_size(r->ftype) : 0;
    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(r->ftype) == H5T_SGN_2;
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
    r->tsz = tsz;
    dcpl = H5Dget_create_plist(r->dset);
    H5D_fill_value_t fdef = H5D_FILL_VALUE_UNDEFINED;
    if (dcpl < 0 || H5Pfill_value_defined(dcpl, &fdef) < 0 ||
        (fdef != H5D_FILL_VALUE_UNDEFINED && H5Pget_fill_value(dcpl, H5T_NATIVE_FLOAT, &r->fill) < 0)) {
        io__err(err, n, "%s: cannot read the dataset's storage properties", name);
        goto done;
    }
    st = check_layout(r, dcpl, err, n);
    if (st == SWI_OK && key_of(r->dset, &r->key) != 0) {
        io__err(err, n, "%s: cannot identify the dataset", name);
        st = SWI_ERR_INVALID_ARG;
    }
done:
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (st != SWI_OK) {
        free_reader(r);
    } else {
        r->next = readers;
        readers = r;
        *impl = r;
    }
    h5_leave();
    return st;
}

/* Undo the filters of a chunk stored in r->stored (len bytes, filters skipped per mask) into
 * r->work[]: *out receives the unfiltered chunk, exactly chunk_bytes long, or NULL with the
 * reason in why. */
static const unsigned char *unfilter(h5r *r, size_t len, unsigned mask, const char **why, char *whybuf,
                                     size_t wn) {
    const unsigned char *cur = r->stored;
    size_t cur_len = len;
    int next = 0;
    for (int i = r->nfilters - 1; i >= 0; i--) {
        if (mask & (1u << i)) continue;
        unsigned char *out = r->work[next];
        next ^= 1;
        if (r->filters[i] == H5Z_FILTER_DEFLATE) {
            z_stream z;
            memset(&z, 0, sizeof z);
            if (inflateInit(&z) != Z_OK) {
                *why = "cannot start zlib";
                return NULL;
            }
            z.next_in = (Bytef *)cur;
            z.avail_in = (uInt)cur_len;
            z.next_out = out;
            z.avail_out = (uInt)r->chunk_bytes;
            int zr = inflate(&z, Z_FINISH);
            const size_t got = z.total_out;
            const uInt left = z.avail_out;
            inflateEnd(&z);
            if ((zr == Z_OK || zr == Z_BUF_ERROR) && left == 0) {
                snprintf(whybuf, wn, "it inflates beyond the %zu bytes a chunk holds", r->chunk_bytes);
                *why = whybuf;
                return NULL;
            }
            if (zr != Z_STREAM_END) {
                *why = "corrupt deflate data";
                return NULL;
            }
            cur_len = got;
        } else {
            /* HDF5's shuffle: byte b of every element together, in element order */
            const size_t es = r->tsz, ne = cur_len / es;
            if (cur_len != r->chunk_bytes) break; /* said below */
            for (size_t b = 0; b < es; b++)
                for (size_t e = 0; e < ne; e++) out[e * es + b] = cur[b * ne + e];
        }
        cur = out;
    }
    if (cur_len != r->chunk_bytes) {
        snprintf(whybuf, wn, "it holds %zu bytes unfiltered, a chunk %zu", cur_len, r->chunk_bytes);
        *why = whybuf;
        return NULL;
    }
    return cur;
}

/* The chunk at spatial chunk index key as float, through the cache. Caller holds h5_lock. */
static const float *get_chunk(h5r *r, const int64_t key[3], char *err, size_t n) {
    r->tick++;
    int victim = 0;
    for (int i = 0; i < r->cache_n; i++) {
        centry *e = &r->cache[i];
        if (e->key[0] == key[0] && e->key[1] == key[1] && e->key[2] == key[2]) {
            e->used = r->tick;
            return e->data;
        }
        if (e->used < r->cache[victim].used) victim = i;
    }
    const size_t fbytes = r->chunk_elems * (r->tsz > sizeof(float) ? r->tsz : sizeof(float));
    if (!r->work[0]) r->work[0] = malloc(r->chunk_bytes);
    if (!r->work[1]) r->work[1] = malloc(fbytes); /* also where 8-byte values are converted */
    centry *e;
    if (r->cache_n < r->cache_cap) {
        e = &r->cache[r->cache_n];
        e->data = malloc(r->chunk_elems * sizeof(float));
        if (e->data) r->cache_n++;
    } else {
        e = &r->cache[victim];
    }
    if (!r->work[0] || !r->work[1] || !e->data) {
        io__err(err, n, "%s: out of memory for a chunk", r->name);
        return NULL;
    }
    e->used = 0;
    e->key[0] = e->key[1] = e->key[2] = -1;
    hsize_t off[STORE_MAX_NDIM] = {0};
    for (int k = 0; k < 3; k++) off[r->ndim - 3 + k] = (hsize_t)key[k] * r->cdims[r->ndim - 3 + k];
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t stored = 0;
    char whybuf[128];
    const char *why = NULL;
    if (H5Dget_chunk_info_by_coord(r->dset, off, &mask, &addr, &stored) < 0) {
        why = "cannot look it up in the chunk index";
    } else if (addr == HADDR_UNDEF || stored == 0) {
        for (size_t i = 0; i < r->chunk_elems; i++) e->data[i] = r->fill; /* never written */
    } else if (stored > (hsize_t)r->file_size || addr > (haddr_t)r->file_size - stored) {
        snprintf(whybuf, sizeof whybuf, "it claims %llu bytes at offset %llu; the file holds %lld",
                 (unsigned long long)stored, (unsigned long long)addr, (long long)r->file_size);
        why = whybuf;
    } else if (stored > compressBound((uLong)r->chunk_bytes) + 4096) {
        snprintf(whybuf, sizeof whybuf, "%llu bytes stored for a chunk of %zu", (unsigned long long)stored,
                 r->chunk_bytes);
        why = whybuf;
    } else {
        if (stored > r->stored_cap) {
            unsigned char *b = realloc(r->stored, (size_t)stored);
            if (!b) {
                io__err(err, n, "%s: out of memory for a chunk", r->name);
                return NULL;
            }
            r->stored = b;
            r->stored_cap = (size_t)stored;
        }
        uint32_t m2 = 0;
        const unsigned char *raw = NULL;
        if (H5Dread_chunk(r->dset, H5P_DEFAULT, off, &m2, r->stored) < 0)
            why = "cannot read it (corrupt or truncated file)";
        else
            raw = unfilter(r, (size_t)stored, m2, &why, whybuf, sizeof whybuf);
        if (raw) {
            /* HDF5 converts in place in a buffer of the larger of the two sizes */
            unsigned char *conv = r->tsz > sizeof(float) ? r->work[1] : (unsigned char *)e->data;
            if (raw != conv) memmove(conv, raw, r->chunk_bytes);
            if (H5Tconvert(r->ftype, H5T_NATIVE_FLOAT, r->chunk_elems, conv, NULL, H5P_DEFAULT) < 0)
                why = "cannot convert its values to float";
            else if (conv != (unsigned char *)e->data)
                memcpy(e->data, conv, r->chunk_elems * sizeof(float));
        }
    }
    if (why) {
        io__err(err, n, "%s: chunk (%lld, %lld, %lld): %s", r->name, (long long)key[0], (long long)key[1],
                (long long)key[2], why);
        return NULL;
    }
    memcpy(e->key, key, sizeof e->key);
    e->used = r->tick;
    return e->data;
}

static swi_status read_chunked(h5r *r, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                               size_t n) {
    int64_t c[3];
    for (int k = 0; k < 3; k++) c[k] = (int64_t)r->cdims[r->ndim - 3 + k];
    const int64_t bh = hi[1] - lo[1], bw = hi[2] - lo[2];
    int64_t key[3];
    for (key[0] = lo[0] / c[0]; key[0] * c[0] < hi[0]; key[0]++)
        for (key[1] = lo[1] / c[1]; key[1] * c[1] < hi[1]; key[1]++)
            for (key[2] = lo[2] / c[2]; key[2] * c[2] < hi[2]; key[2]++) {
                const float *ch = get_chunk(r, key, err, n);
                if (!ch) return SWI_ERR_INVALID_ARG;
                int64_t a0[3], a1[3];
                for (int k = 0; k < 3; k++) {
                    a0[k] = key[k] * c[k] > lo[k] ? key[k] * c[k] : lo[k];
                    a1[k] = (key[k] + 1) * c[k] < hi[k] ? (key[k] + 1) * c[k] : hi[k];
                }
                for (int64_t i = a0[0]; i < a1[0]; i++)
                    for (int64_t j = a0[1]; j < a1[1]; j++)
                        memcpy(dst + ((i - lo[0]) * bh + (j - lo[1])) * bw + (a0[2] - lo[2]),
                               ch + ((i - key[0] * c[0]) * c[1] + (j - key[1] * c[1])) * c[2] +
                                   (a0[2] - key[2] * c[2]),
                               (size_t)(a1[2] - a0[2]) * sizeof(float));
            }
    return SWI_OK;
}

swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n) {
    h5r *r = impl;
    h5_enter();
    if (r->chunked) {
        swi_status st = read_chunked(r, lo, hi, dst, err, n);
        h5_leave();
        return st;
    }
    hsize_t start[STORE_MAX_NDIM] = {0}, count[STORE_MAX_NDIM];
    for (int k = 0; k < r->ndim; k++) count[k] = 1;
    hsize_t mcount[3];
    for (int k = 0; k < 3; k++) {
        start[r->ndim - 3 + k] = (hsize_t)lo[k];
        count[r->ndim - 3 + k] = mcount[k] = (hsize_t)(hi[k] - lo[k]);
    }
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
    h5_leave();
    return st;
}

void h5__close(void *impl) {
    h5r *r = impl;
    if (!r) return;
    h5_enter();
    for (h5r **p = &readers; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    free_reader(r);
    h5_leave();
}

/* ---- temporaries ----
 *
 * A file is written in a private directory beside its final name, .NAME.swi-XXXXXX, made by
 * mkdtemp: an unpredictable name created exclusively, mode 0700, so nothing (no link) can be
 * planted in it; the file inside is created exclusively too. */

typedef struct tmp_place {
    char dir[4200], file[4400];
} tmp_place;

static int make_tmp(const char *final, tmp_place *t, char *err, size_t n) {
    const char *slash = strrchr(final, '/');
    const char *base = slash ? slash + 1 : final;
    int dl = slash ? (int)(slash - final) + 1 : 0;
    if (snprintf(t->dir, sizeof t->dir, "%.*s.%s.swi-XXXXXX", dl, final, base) >= (int)sizeof t->dir ||
        snprintf(t->file, sizeof t->file, "%s/%s", t->dir, base) >= (int)sizeof t->file) {
        io__err(err, n, "%s: the path is too long", final);
        return -1;
    }
    if (!mkdtemp(t->dir)) {
        io__err(err, n, "%s: cannot create a temporary beside it: %s", final, strerror(errno));
        t->dir[0] = '\0';
        return -1;
    }
    snprintf(t->file, sizeof t->file, "%s/%s", t->dir, base);
    return 0;
}

static void drop_tmp(tmp_place *t) {
    if (!t->dir[0]) return;
    unlink(t->file);
    rmdir(t->dir);
    t->dir[0] = '\0';
}

/* HDF5's own lock off: the temporary is private; parts lock the final file themselves. */
static hid_t no_lock_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef HAVE_FILE_LOCKING_PROPERTY
    if (fapl >= 0 && H5Pset_file_locking(fapl, 0, 1) < 0) {
        H5Pclose(fapl);
        return -1;
    }
#endif
    return fapl;
}

/* A new file at t->file (O_CREAT | O_EXCL: never an existing name or a link). Caller holds
 * h5_lock. */
static hid_t create_tmp(const tmp_place *t) {
    hid_t fapl = no_lock_fapl();
    if (fapl < 0) return -1;
    hid_t f = H5Fcreate(t->file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    return f;
}

/* Copy size bytes of in to out: a reflink where the file system shares blocks, else
 * copy_file_range (in the kernel, server-side on NFS 4.2), else read and write. */
static int copy_fd(int in, int out, off_t size) {
#ifdef FICLONE
    if (ioctl(out, FICLONE, in) == 0) return 0;
#endif
    off_t done = 0;
    int kernel = 1;
    static unsigned char buf[1 << 16]; /* under h5_lock */
    while (done < size) {
        ssize_t k;
        size_t want = (size_t)(size - done);
        if (kernel) {
            off_t a = done, b = done;
            k = copy_file_range(in, &a, out, &b, want, 0);
            if (k < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP ||
                          errno == EPERM || errno == ETXTBSY)) {
                kernel = 0;
                continue;
            }
        } else {
            k = pread(in, buf, want < sizeof buf ? want : sizeof buf, done);
            for (ssize_t w = 0; k > 0 && w < k;) {
                ssize_t r = pwrite(out, buf + w, (size_t)(k - w), done + w);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    if (r == 0) errno = EIO;
                    return -1;
                }
                w += r;
            }
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            errno = EIO; /* the file shrank while it was copied */
            return -1;
        }
        done += k;
    }
    return 0;
}

/* The lock HDF5's readers take (shared): no HDF5 writer is midway while it is held. Waits up
 * to a second for one to finish; -1 if it does not. */
static int share_lock(int fd) {
    for (int i = 0; i < 20; i++) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) return errno == ENOLCK || errno == EOPNOTSUPP ? 0 : -1;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = EWOULDBLOCK;
    return -1;
}

/* Is the file as it was when copied? */
static int same_state(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The folder of path, opened (for its lock and its fsync), or -1. */
static int open_parent(const char *path) {
    char d[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(d, sizeof d, ".");
    else
        snprintf(d, sizeof d, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

#define MAX_PARTS 60000 /* one byte each: an attribute stays within HDF5's 64 KiB default */

/* Compressed slabs a part holds before taking the file's lock to write them together, and how
 * long the first may wait: one open and close of the file per batch, not per slab. */
#define BATCH_BYTES ((size_t)64 << 20)
#define BATCH_SECONDS 1.0

/* A slab's chunks as HDF5 stores them, compressed by the thread that finished the slab
 * outside both locks (so parts compress at the same time), written with H5Dwrite_chunk. */
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

struct h5out;

typedef struct h5w {
    hid_t dset;
    char final[4096], name[4200], path[1024];
    tmp_place tmp;
    struct h5out *out; /* one writer: the copy it writes into */
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
    hid_t fapl = no_lock_fapl();
    if (fapl < 0) return -1;
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

/* Create the file whole in a temporary (see "temporaries") and link it into place: link(2)
 * fails if another part was first. 0 created, 1 another part's file is there, -1 error. */
/* A single writer works on a copy of the file, renamed over it only at commit: a writer that
 * does not commit leaves the file as it was. Parts write the file in place. */
int h5__replaces(const void *impl) { return !((const h5w *)impl)->shared; }

static int create_shared(h5w *w, char *err, size_t n) {
    if (make_tmp(w->final, &w->tmp, err, n)) return -1;
    h5_enter();
    int bad = 1;
    hid_t f = create_tmp(&w->tmp), d = -1;
    if (f < 0)
        io__err(err, n, "%s: cannot create the file (in %s): %s", w->final, w->tmp.dir, strerror(errno));
    else if ((d = make_dataset(f, w->path, &w->spec, w->chunk)) < 0)
        io__err(err, n, "%s: cannot create the dataset %s", w->name, w->path);
    else if (put_string_attr(d, INCOMPLETE_ATTR, INCOMPLETE_TEXT) != 0)
        io__err(err, n, "%s: cannot write the attribute %s", w->name, INCOMPLETE_ATTR);
    else
        bad = 0;
    if (d >= 0 && H5Dclose(d) < 0) bad = 1;
    if (f >= 0 && close_file(f) != 0 && !bad) {
        io__err(err, n, "%s: cannot finish the file (disk full?)", w->tmp.file);
        bad = 1;
    }
    h5_leave();
    int r = bad ? -1 : 0;
    if (!bad && link(w->tmp.file, w->final) != 0) {
        if (errno == EEXIST) {
            r = 1;
        } else {
            io__err(err, n, "%s: cannot put the file in place: %s", w->final, strerror(errno));
            r = -1;
        }
    }
    drop_tmp(&w->tmp);
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
    if (f >= 0 && close_file(f) != 0 && st == SWI_OK) {
        io__err(err, n, "%s: cannot finish writing the file (disk full?)", w->final);
        st = SWI_ERR_INVALID_ARG;
    }
    h5_leave();
    return st;
}
/* Join an existing file, its lock held: a dataset of this run's layout that is incomplete
 * (or --force) is marked incomplete and this part not done; a missing one is created beside
 * the file's other datasets. */
static swi_status join_locked(h5w *w, int flags, char *err, size_t n) {
    h5_enter();
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
    /* The lock a part takes would wait forever on the one HDF5 holds for this process's own
     * reader of the file. */
    struct stat fs;
    h5_enter();
    int input = stat(w->final, &fs) == 0 && is_read(fs.st_dev, fs.st_ino, NULL);
    h5_leave();
    if (input) {
        io__err(err, n,
                "%s: the file is also an input of this run; parts (--shard, mpirun) write into it in place "
                "under its lock, which the input's reader holds: write them into another file",
                w->name);
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
    h5_enter();
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

/* ---- one writer, or several of one file in one process ----
 *
 * The previous file is never written. An existing file is copied into a temporary (see
 * "temporaries") under the shared lock HDF5's readers take, so no HDF5 writer is midway; a
 * new one is created there. The dataset is written into the copy, replacing (--force) only
 * a dataset of the kind swi writes; every other object and attribute is copied as it was.
 * At commit the copy is fsynced and renamed over the file if the file is still the one
 * copied (same inode, size, times: else another program wrote it meanwhile and the run
 * fails), a new file linked into place if the name is still free; this check and the rename
 * are done under a flock of the folder, which serialises swi's commits there. A failed,
 * aborted or interrupted run removes the temporary: the file is as it was. Writers of one
 * file open at once in a process (labels and scores) share the copy, which is put in place
 * when the last one commits and not at all if one fails or is aborted. The cost: a read and
 * a write of the whole file (none where reflinks work), and its size in free space until
 * commit; a replaced dataset's space is reused for the new one where HDF5 can. */

typedef struct h5out {
    char final[4096];
    tmp_place tmp;
    hid_t file;
    int users, failed, existed, fd; /* fd: the previous file, -1 if none */
    struct stat was;                /* the previous file as copied */
    char (*paths)[1024];            /* the datasets being written */
    int npaths;
    struct h5out *next;
} h5out;

static h5out *outs; /* under h5_lock */

const char *h5__temporary(const void *impl) {
    const h5w *w = impl;
    return !w->shared && w->out && w->out->tmp.dir[0] ? w->out->tmp.dir : NULL;
}

static void out_free(h5out *o) {
    for (h5out **p = &outs; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    if (o->file >= 0) close_file(o->file);
    drop_tmp(&o->tmp);
    if (o->fd >= 0) close(o->fd);
    free(o->paths);
    free(o);
}

/* Does the file start with HDF5's signature (at 0, 512, 1024, 2048, ...: after a user block)? */
static int hdf5_signature(int fd, off_t size) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (off_t at = 0; at + 8 <= size; at = at ? 2 * at : 512) {
        unsigned char b[8];
        if (pread(fd, b, 8, at) != 8) return 0;
        if (!memcmp(b, sig, 8)) return 1;
    }
    return 0;
}

/* The copy of final (or a new file) to write into. Caller holds h5_lock. */
static h5out *out_open(const char *final, const struct stat *st, char *err, size_t n) {
    h5out *o = calloc(1, sizeof *o);
    if (!o) {
        io__err(err, n, "%s: out of memory", final);
        return NULL;
    }
    snprintf(o->final, sizeof o->final, "%s", final);
    o->file = -1;
    o->fd = -1;
    o->existed = st != NULL;
    o->next = outs;
    outs = o;
    if (make_tmp(final, &o->tmp, err, n)) goto fail;
    if (!st) {
        if ((o->file = create_tmp(&o->tmp)) < 0) {
            io__err(err, n, "%s: cannot create the file (in %s): %s", final, o->tmp.dir, strerror(errno));
            goto fail;
        }
        return o;
    }
    int64_t size = 0;
    if ((o->fd = swi_io_open_regular(final, &size, err, n)) < 0) goto fail;
    if (!hdf5_signature(o->fd, (off_t)size)) {
        io__err(err, n, "%s: exists and is not an HDF5 file; not replaced, --force or not", final);
        goto fail;
    }
    if (share_lock(o->fd) != 0) {
        io__err(err, n, "%s: another program is writing the file (HDF5's lock is held): %s", final,
                strerror(errno));
        goto fail;
    }
    int out = -1, bad = fstat(o->fd, &o->was) != 0;
    if (!bad) out = open(o->tmp.file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bad = bad || out < 0 || copy_fd(o->fd, out, o->was.st_size) != 0 ||
          fchmod(out, o->was.st_mode & 07777) != 0;
    int e = errno;
    if (out >= 0 && close(out) != 0 && !bad) {
        e = errno;
        bad = 1;
    }
    flock(o->fd, LOCK_UN);
    if (bad) {
        io__err(err, n, "%s: cannot copy the file to add the dataset: %s", final, strerror(e));
        goto fail;
    }
    hid_t fapl = no_lock_fapl();
    o->file = fapl >= 0 ? H5Fopen(o->tmp.file, H5F_ACC_RDWR, fapl) : -1;
    if (fapl >= 0) H5Pclose(fapl);
    if (o->file < 0) {
        io__err(err, n, "%s: cannot open the file's copy to add the dataset (a corrupt file, or disk full?)",
                final);
        goto fail;
    }
    return o;
fail:
    out_free(o);
    return NULL;
}

#define WHY_LEN 160

/* An attribute swi does not write: named in op (WHY_LEN bytes), the iteration stopped. */
static herr_t foreign_attr(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
    (void)loc, (void)info;
    if (strncmp(name, "swi_", 4) == 0) return 0;
    snprintf(op, WHY_LEN, "it carries the attribute %.100s", name);
    return 1;
}

/* Why the dataset d is not one swi writes (and so is never replaced), or NULL; why holds
 * WHY_LEN bytes. */
static const char *not_swi_kind(hid_t d, char *why) {
    hid_t p = H5Dget_create_plist(d), t = H5Dget_type(d), s = H5Dget_space(d);
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    const char *r = NULL;
    if (p < 0 || t < 0 || s < 0)
        r = "it cannot be examined";
    else if (H5Pget_layout(p) != H5D_CHUNKED)
        r = "it is not chunked";
    else if (H5Pget_nfilters(p) != 2 ||
             H5Pget_filter2(p, 0, NULL, NULL, NULL, 0, NULL, NULL) != H5Z_FILTER_SHUFFLE ||
             H5Pget_filter2(p, 1, NULL, NULL, NULL, 0, NULL, NULL) != H5Z_FILTER_DEFLATE)
        r = "its filters are not shuffle and deflate";
    else if (H5Tequal(t, H5T_NATIVE_UINT8) <= 0 && H5Tequal(t, H5T_NATIVE_UINT16) <= 0 &&
             H5Tequal(t, H5T_NATIVE_FLOAT) <= 0)
        r = "its type is not uint8, uint16 or float32";
    else if (nd != 3 && nd != 4)
        r = "it has neither 3 nor 4 dimensions";
    else {
        hsize_t idx = 0;
        why[0] = '\0';
        if (H5Aiterate2(d, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, foreign_attr, why) != 0)
            r = why[0] ? why : "its attributes cannot be listed";
    }
    if (p >= 0) H5Pclose(p);
    if (t >= 0) H5Tclose(t);
    if (s >= 0) H5Sclose(s);
    return r;
}

/* Make w's dataset in the copy: an existing one is replaced with --force if swi wrote it and
 * it is not an input of this run. Caller holds h5_lock. */
static swi_status place_dataset(h5w *w, h5out *o, char *err, size_t n) {
    int hp = hard_path(o->file, w->path);
    if (hp == -2) {
        io__err(err, n, "%s: the path %s goes through a soft or external link in the file; not written",
                w->name, w->path);
        return SWI_ERR_INVALID_ARG;
    }
    if (hp < 0) {
        io__err(err, n, "%s: cannot look up %s in the file (is a part of the path a dataset?)", w->name,
                w->path);
        return SWI_ERR_INVALID_ARG;
    }
    if (hp == 1) {
        H5O_info_t info;
        if (H5Oget_info_by_name2(o->file, w->path, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
            info.type != H5O_TYPE_DATASET) {
            io__err(err, n, "%s: %s is a group or another object in the file, not a dataset; not replaced",
                    w->name, w->path);
            return SWI_ERR_INVALID_ARG;
        }
        hid_t d = H5Dopen2(o->file, w->path, H5P_DEFAULT);
        obj_key k;
        char why[WHY_LEN];
        const char *no = NULL;
        int input = d >= 0 && key_of(d, &k) == 0 && o->existed && is_read(o->was.st_dev, o->was.st_ino, &k);
        if (d >= 0 && !input && w->force) no = not_swi_kind(d, why);
        if (d >= 0) H5Dclose(d);
        if (d < 0) {
            io__err(err, n, "%s: cannot open the existing dataset", w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (input) {
            io__err(err, n, "%s: is an input of this run; swi never writes over its inputs, --force or not",
                    w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (!w->force) {
            io__err(err, n, "%s: already exists (use --force to overwrite)", w->name);
            return SWI_ERR_INVALID_ARG;
        }
        if (no) {
            io__err(err, n, "%s: exists and is not a dataset swi writes (%s); not replaced, --force or not",
                    w->name, no);
            return SWI_ERR_INVALID_ARG;
        }
    }
    /* the copy changes from here on: if this fails, it must not be put in place */
    if (hp == 1 && H5Ldelete(o->file, w->path, H5P_DEFAULT) < 0) {
        o->failed = 1;
        io__err(err, n, "%s: cannot remove the old dataset from the copy", w->name);
        return SWI_ERR_INVALID_ARG;
    }
    w->dset = make_dataset(o->file, w->path, &w->spec, w->chunk);
    if (w->dset < 0) {
        o->failed = 1;
        io__err(err, n, "%s: cannot create the dataset %s in the file", w->name, w->path);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

static swi_status single_create(h5w *w, char *err, size_t n) {
    struct stat st;
    int exists = stat(w->final, &st) == 0;
    if (!exists && errno != ENOENT) {
        io__err(err, n, "%s: cannot examine: %s", w->final, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: exists and is %s, not a regular file; swi writes only regular files", w->final,
                swi_io_file_kind(st.st_mode));
        return SWI_ERR_INVALID_ARG;
    }
    h5_enter();
    swi_status rc = SWI_ERR_INVALID_ARG;
    h5out *o = NULL;
    for (h5out *q = outs; q && !o; q = q->next)
        if (!strcmp(q->final, w->final) ||
            (exists && q->existed && q->was.st_dev == st.st_dev && q->was.st_ino == st.st_ino))
            o = q;
    if (o) {
        for (int i = 0; i < o->npaths; i++)
            if (!strcmp(o->paths[i], w->path)) {
                io__err(err, n, "%s: is already being written by this process", w->name);
                goto out;
            }
    } else if (!(o = out_open(w->final, exists ? &st : NULL, err, n))) {
        goto out;
    }
    char(*p)[1024] = realloc(o->paths, (size_t)(o->npaths + 1) * sizeof *p);
    if (!p) {
        io__err(err, n, "%s: out of memory", w->name);
        if (!o->users) out_free(o);
        goto out;
    }
    o->paths = p;
    snprintf(o->paths[o->npaths++], sizeof *p, "%s", w->path);
    o->users++;
    w->out = o;
    rc = place_dataset(w, o, err, n);
out:
    h5_leave();
    return rc;
}

/* Put the finished copy in place. Caller holds h5_lock. */
static swi_status out_finish(h5out *o, char *err, size_t n) {
    int bad = close_file(o->file) != 0;
    o->file = -1;
    if (bad) {
        io__err(err, n, "%s: cannot finish writing the file (disk full?)", o->final);
        return SWI_ERR_INVALID_ARG;
    }
    int fd = open(o->tmp.file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        io__err(err, n, "%s: cannot complete the output: %s", o->final, strerror(errno));
        if (fd >= 0) close(fd);
        return SWI_ERR_INVALID_ARG;
    }
    close(fd);
    int dfd = open_parent(o->final);
    if (dfd >= 0)
        while (flock(dfd, LOCK_EX) != 0 && errno == EINTR) {}
    struct stat now;
    swi_status st = SWI_OK;
    if (o->existed) {
        if (stat(o->final, &now) != 0 || !same_state(&now, &o->was)) {
            io__err(err, n,
                    "%s: the file changed while swi was running (another run or program wrote it); not "
                    "replaced",
                    o->final);
            st = SWI_ERR_INVALID_ARG;
        } else if (rename(o->tmp.file, o->final) != 0) {
            io__err(err, n, "%s: cannot put the file in place: %s", o->final, strerror(errno));
            st = SWI_ERR_INVALID_ARG;
        }
    } else if (link(o->tmp.file, o->final) != 0) {
        if (errno == EEXIST)
            io__err(err, n, "%s: appeared while swi was running (another run?); not overwritten", o->final);
        else
            io__err(err, n, "%s: cannot put the file in place: %s", o->final, strerror(errno));
        st = SWI_ERR_INVALID_ARG;
    }
    if (dfd >= 0) {
        if (st == SWI_OK) fsync(dfd); /* the rename on disk; a failure here loses nothing */
        flock(dfd, LOCK_UN);
        close(dfd);
    }
    return st;
}

static swi_status single_commit(h5w *w, char *err, size_t n) {
    h5_enter();
    h5out *o = w->out;
    swi_status st = SWI_OK;
    if (w->dset >= 0 && H5Dclose(w->dset) < 0) {
        io__err(err, n, "%s: cannot finish the dataset (disk full?)", w->name);
        o->failed = 1;
        st = SWI_ERR_INVALID_ARG;
    }
    w->dset = -1;
    if (--o->users == 0) {
        if (!o->failed)
            st = out_finish(o, err, n);
        else if (st == SWI_OK) {
            io__err(err, n, "%s: not written: another dataset written into the file failed", w->name);
            st = SWI_ERR_INVALID_ARG;
        }
        out_free(o);
    }
    h5_leave();
    return st;
}

static void single_abort(h5w *w) {
    h5_enter();
    h5out *o = w->out;
    if (w->dset >= 0) H5Dclose(w->dset);
    w->dset = -1;
    if (o) {
        o->failed = 1;
        if (--o->users == 0) out_free(o);
    }
    h5_leave();
}

/* ---- the writer ---- */

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      int part, int parts, void **impl, char *err, size_t n) {
    h5w *w = calloc(1, sizeof *w);
    if (!w) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    w->dset = -1;
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
    swi_status st = single_create(w, err, n);
    if (st != SWI_OK) {
        single_abort(w);
        free(w);
    } else {
        *impl = w;
    }
    return st;
}

swi_status h5__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                         size_t n) {
    h5w *w = impl;
    if (w->shared) return shared_write(w, lo, hi, buf, err, n);
    pend *p = NULL;
    swi_status st = encode_slab(w, lo, hi, buf, &p, err, n);
    if (st != SWI_OK) return st;
    h5_enter();
    if (write_chunks(w->dset, p) != 0) {
        io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                (long long)lo[0], (long long)lo[1], (long long)lo[2]);
        st = SWI_ERR_INVALID_ARG;
    }
    h5_leave();
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
    swi_status st = single_commit(w, err, n);
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
    single_abort(w);
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
int h5__replaces(const void *impl) {
    (void)impl;
    return 0;
}
const char *h5__temporary(const void *impl) {
    (void)impl;
    return NULL;
}

#endif
