/* hdf5_encode.c -- the dataset as swi writes it (chunked, shuffled and deflated, fill 0),
 * its chunks shuffled and deflated by the thread that finished them, as HDF5's filters
 * would, and handed to HDF5 whole; and the private temporaries new files are made in. */
#include "hdf5_internal.h"

#ifdef SWI_HAVE_HDF5

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* ---- temporaries ----
 *
 * A file is written in a private directory beside its final name, .NAME.swi-XXXXXX, made by
 * mkdtemp: an unpredictable name created exclusively, mode 0700, so nothing (no link) can be
 * planted in it; the file inside is created exclusively too. */

int h5__make_tmp(const char *final, tmp_place *t, char *err, size_t n) {
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

void h5__drop_tmp(tmp_place *t) {
    if (!t->dir[0]) return;
    unlink(t->file);
    rmdir(t->dir);
    t->dir[0] = '\0';
}

/* HDF5's own lock off: the temporary is private; parts lock the final file themselves. */
hid_t h5__no_lock_fapl(void) {
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
hid_t h5__create_tmp(const tmp_place *t) {
    hid_t fapl = h5__no_lock_fapl();
    if (fapl < 0) return -1;
    hid_t f = H5Fcreate(t->file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    return f;
}

/* ---- the dataset ---- */

static hid_t mem_type(swi_dtype t) {
    return t == SWI_DTYPE_FLOAT32  ? H5T_NATIVE_FLOAT
           : t == SWI_DTYPE_UINT16 ? H5T_NATIVE_UINT16
                                   : H5T_NATIVE_UINT8;
}

int h5__dims_of(const swi_store_spec *spec, const int64_t chunk[3], hsize_t dims[4], hsize_t cdims[4]) {
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
/* A label dataset's classes: the attribute swi_classes, a JSON string (store__classes_json)
 * that h5py reads as str. 0, or -1. */
static int classes_attr(hid_t d, const swi_store_spec *spec) {
    char *text = store__classes_json(spec);
    if (!text) return -1;
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int rc = -1;
    if (t >= 0 && sp >= 0 && H5Tset_size(t, strlen(text) + 1) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
        H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0)
        a = H5Acreate2(d, "swi_classes", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && H5Awrite(a, t, text) >= 0) rc = 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    free(text);
    return rc;
}

hid_t h5__make_dataset(hid_t file, const char *path, const swi_store_spec *spec, const int64_t chunk[3]) {
    hsize_t dims[4], cdims[4];
    int nd = h5__dims_of(spec, chunk, dims, cdims);
    hid_t space = H5Screate_simple(nd, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), lcpl = H5Pcreate(H5P_LINK_CREATE), d = -1;
    const double zero = 0; /* converted to the dataset's type by HDF5 */
    if (space >= 0 && dcpl >= 0 && lcpl >= 0 && H5Pset_chunk(dcpl, nd, cdims) >= 0 &&
        H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0 &&
        H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &zero) >= 0 &&
        H5Pset_create_intermediate_group(lcpl, 1) >= 0)
        d = H5Dcreate2(file, path, mem_type(spec->dtype), space, lcpl, dcpl, H5P_DEFAULT);
    if (d >= 0 && spec->labels && classes_attr(d, spec) != 0) {
        H5Dclose(d);
        d = -1;
    }
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (lcpl >= 0) H5Pclose(lcpl);
    return d;
}

void h5__free_pend(pend *p) {
    if (!p) return;
    for (size_t i = 0; i < p->count; i++) free(p->c[i].buf);
    free(p->c);
    free(p);
}

void h5__free_list(pend *p) {
    while (p) {
        pend *next = p->next;
        h5__free_pend(p);
        p = next;
    }
}

/* The chunks of the box [lo, hi) (chunk-aligned; every plane) from buf [planes][hi - lo], each
 * as the dataset's filters make it: byte shuffle, then zlib's compress2 at level 4 (HDF5's
 * deflate); edge chunks are stored whole, zero outside the dataset. A chunk deflate does not
 * shrink is stored raw, both filters marked skipped. */
swi_status h5__encode_slab(const h5w *w, const int64_t lo[3], const int64_t hi[3], const void *buf,
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
        h5__free_pend(p);
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
        h5__free_pend(p);
        return st;
    }
    *out = p;
    return SWI_OK;
}

/* Write a slab's encoded chunks. Caller holds h5_lock. */
int h5__write_chunks(hid_t d, const pend *p) {
    for (size_t i = 0; i < p->count; i++)
        if (H5Dwrite_chunk(d, H5P_DEFAULT, p->c[i].mask, p->c[i].off, p->c[i].size, p->c[i].buf) < 0)
            return -1;
    return 0;
}

#endif
