/* hdf5.c -- HDF5 datasets (file.h5:/path): read by hyperslab with HDF5's own conversion
 * to float, written chunked and deflate-compressed into a temporary file renamed at
 * commit. libhdf5 (serial) is not thread-safe: one lock serialises every call into it. */
#include "store_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

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
    if (store__split_h5(name, file, sizeof file, dset, sizeof dset)) {
        io__err(err, n, "%s: name an HDF5 dataset as FILE.h5:/path", name);
        return SWI_ERR_INVALID_ARG;
    }
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

typedef struct h5w {
    hid_t file, dset;
    char final[4096], tmp[4200], name[4200];
    swi_store_spec spec;
    int force;
} h5w;

static hid_t mem_type(swi_dtype t) {
    return t == SWI_DTYPE_FLOAT32  ? H5T_NATIVE_FLOAT
           : t == SWI_DTYPE_UINT16 ? H5T_NATIVE_UINT16
                                   : H5T_NATIVE_UINT8;
}

swi_status h5__create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                      void **impl, char *err, size_t n) {
    char dset[1024];
    h5w *w = calloc(1, sizeof *w);
    if (!w) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    if (store__split_h5(name, w->final, sizeof w->final, dset, sizeof dset)) {
        io__err(err, n, "%s: name an HDF5 dataset as FILE.h5:/path", name);
        free(w);
        return SWI_ERR_INVALID_ARG;
    }
    if (!(flags & SWI_STORE_FORCE) && access(w->final, F_OK) == 0) {
        io__err(err, n, "%s: already exists (use --force to overwrite)", w->final);
        free(w);
        return SWI_ERR_INVALID_ARG;
    }
    snprintf(w->name, sizeof w->name, "%s", name);
    w->spec = *spec;
    w->force = flags & SWI_STORE_FORCE;
    const char *slash = strrchr(w->final, '/');
    int dl = slash ? (int)(slash - w->final) + 1 : 0;
    snprintf(w->tmp, sizeof w->tmp, "%.*s.%s.tmp-%ld", dl, w->final, slash ? slash + 1 : w->final,
             (long)getpid());
    pthread_mutex_lock(&h5_lock);
    quiet();
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t space = -1, dcpl = -1, lcpl = -1;
    w->dset = -1;
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        io__err(err, n, "%s: cannot create the file: %s", w->tmp, strerror(errno));
        goto done;
    }
    hsize_t dims[4], cdims[4];
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
    space = H5Screate_simple(nd, dims, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (space < 0 || dcpl < 0 || lcpl < 0 || H5Pset_chunk(dcpl, nd, cdims) < 0 || H5Pset_shuffle(dcpl) < 0 ||
        H5Pset_deflate(dcpl, 4) < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        io__err(err, n, "%s: cannot set up the dataset", name);
        goto done;
    }
    w->dset = H5Dcreate2(w->file, dset, mem_type(spec->dtype), space, lcpl, dcpl, H5P_DEFAULT);
    if (w->dset < 0) {
        io__err(err, n, "%s: cannot create the dataset %s", name, dset);
        goto done;
    }
    st = SWI_OK;
done:
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (st != SWI_OK) {
        if (w->dset >= 0) H5Dclose(w->dset);
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
    hsize_t start[4] = {0}, count[4];
    int nd = 0;
    if (w->spec.planes > 1) count[nd++] = (hsize_t)w->spec.planes;
    for (int a = 0; a < 3; a++) {
        start[nd] = (hsize_t)lo[a];
        count[nd++] = (hsize_t)(hi[a] - lo[a]);
    }
    pthread_mutex_lock(&h5_lock);
    swi_status st = SWI_ERR_INVALID_ARG;
    hid_t fs = H5Dget_space(w->dset), ms = H5Screate_simple(nd, count, NULL);
    if (fs >= 0 && ms >= 0 && H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
        H5Dwrite(w->dset, mem_type(w->spec.dtype), ms, fs, H5P_DEFAULT, buf) >= 0)
        st = SWI_OK;
    else
        io__err(err, n, "%s: cannot write the box from (%lld, %lld, %lld) (disk full?)", w->name,
                (long long)lo[0], (long long)lo[1], (long long)lo[2]);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    pthread_mutex_unlock(&h5_lock);
    return st;
}

swi_status h5__commit(void *impl, char *err, size_t n) {
    h5w *w = impl;
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
                      void **impl, char *err, size_t n) {
    (void)name, (void)spec, (void)chunk, (void)flags, (void)impl;
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
