/* hdf5_read.c -- HDF5 datasets (file.h5:/path) read: chunk by chunk as stored, each
 * inflated by zlib within the size it must have (see "reading"), or by hyperslab when
 * contiguous, and converted to float by HDF5. The writer is hdf5_write.c; libhdf5 (serial)
 * is not thread-safe: one lock (hdf5_lock.c) serialises every call into it. */
#include "hdf5_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int h5__available(void) { return 1; }

int h5__key_of(hid_t obj, obj_key *k) {
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
int h5__hard_path(hid_t f, const char *path) {
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

void h5__chunk(void *impl, int64_t chunk[3]) {
    const h5r *r = impl;
    for (int k = 0; k < 3; k++) chunk[k] = (int64_t)(r->chunked ? r->cdims : r->dims)[r->ndim - 3 + k];
}

/* The datasets this process has open for reading (under h5_lock): a writer never replaces
 * one, and parts never write into their file (see h5__create). */
static h5r *readers;

int h5__is_read(dev_t dev, ino_t ino, const obj_key *key) {
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
    swi_status rs = swi_io_check_regular(file, &fsize, err, n);
    if (rs != SWI_OK) return rs;
    if (stat(file, &fst) != 0 || access(file, R_OK) != 0) {
        io__err(err, n, "%s: %s", file, strerror(errno));
        return SWI_ERR_IO;
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
    h5__enter();
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t space = -1, dcpl = -1;
    r->file = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) {
        io__err(err, n, "%s: not an HDF5 file", file);
        goto done;
    }
    int hp = h5__hard_path(r->file, dset);
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
    if (st == SWI_OK && h5__key_of(r->dset, &r->key) != 0) {
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
    h5__leave();
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
    h5__enter();
    if (r->chunked) {
        swi_status st = read_chunked(r, lo, hi, dst, err, n);
        h5__leave();
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
    h5__leave();
    return st;
}

void h5__close(void *impl) {
    h5r *r = impl;
    if (!r) return;
    h5__enter();
    for (h5r **p = &readers; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    free_reader(r);
    h5__leave();
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
void h5__chunk(void *impl, int64_t chunk[3]) { (void)impl, (void)chunk; }
swi_status h5__read_box(void *impl, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                        size_t n) {
    (void)impl, (void)lo, (void)hi, (void)dst;
    return missing(err, n);
}
void h5__close(void *impl) { (void)impl; }

#endif
