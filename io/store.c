/* store.c -- chunked stores, the format-independent part: names, the reader adapter, and
 * the writer that gathers the engine's regions into slabs of whole chunks. */
#include "store_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kinds ---- */

static swi_status zarr_open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err,
                            size_t n) {
    return zarr__open(name, 0, impl, size, type, err, n);
}
static swi_status ome_open(const char *name, void **impl, int64_t size[3], swi_io_type *type, char *err,
                           size_t n) {
    return zarr__open(name, 1, impl, size, type, err, n);
}
static swi_status zarr_create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                              int part, int parts, void **impl, char *err, size_t n) {
    return zarr__create(name, 0, spec, chunk, flags, part, parts, impl, err, n);
}
static swi_status ome_create(const char *name, const swi_store_spec *spec, const int64_t chunk[3], int flags,
                             int part, int parts, void **impl, char *err, size_t n) {
    return zarr__create(name, 1, spec, chunk, flags, part, parts, impl, err, n);
}

/* HDF5 datasets carry no geometry swi reads, and absent chunks hold 0. */
static int h5_geometry(void *impl, double scale[3], double trans[3]) {
    (void)impl;
    for (int k = 0; k < 3; k++) scale[k] = 1, trans[k] = 0;
    return 0;
}
static double h5_fill(void *impl) {
    (void)impl;
    return 0;
}

#define ZARR_MISSING "Zarr (install libjansson-dev libblosc-dev libzstd-dev and rebuild)"

static const store_ops zarr_ops = {
    .missing = ZARR_MISSING,
    .available = zarr__available,
    .open = zarr_open,
    .read_box = zarr__read_box,
    .close = zarr__close,
    .geometry = zarr__geometry,
    .fill = zarr__fill,
    .chunk = zarr__chunk,
    .lead = zarr__lead,
    .create = zarr_create,
    .write_box = zarr__write_box,
    .commit = zarr__commit,
    .abort = zarr__abort,
    .replaces = zarr__replaces,
    .temporary = zarr__temporary,
};

static const store_ops ome_ops = {
    .missing = ZARR_MISSING,
    .available = zarr__available,
    .open = ome_open,
    .read_box = zarr__read_box,
    .close = zarr__close,
    .geometry = zarr__geometry,
    .fill = zarr__fill,
    .chunk = zarr__chunk,
    .lead = zarr__lead,
    .create = ome_create,
    .write_box = zarr__write_box,
    .commit = zarr__commit,
    .abort = zarr__abort,
    .replaces = zarr__replaces,
    .temporary = zarr__temporary,
};

static const store_ops h5_ops = {
    .missing = "HDF5 (install libhdf5-dev and rebuild)",
    .available = h5__available,
    .open = h5__open,
    .read_box = h5__read_box,
    .close = h5__close,
    .geometry = h5_geometry,
    .fill = h5_fill,
    .chunk = h5__chunk,
    .create = h5__create,
    .write_box = h5__write_box,
    .commit = h5__commit,
    .abort = h5__abort,
    .replaces = h5__replaces,
    .temporary = h5__temporary,
};

const store_ops *io__store_ops(swi_store_kind k) {
    switch (k) {
    case SWI_STORE_ZARR: return &zarr_ops;
    case SWI_STORE_OME: return &ome_ops;
    case SWI_STORE_HDF5: return &h5_ops;
    default: return NULL;
    }
}

/* The table of a name's kind, or NULL (err set) when it names no store this build has. */
static const store_ops *ops_of(const char *name, char *err, size_t n) {
    const store_ops *ops = io__store_ops(swi_store_kind_of(name));
    if (!ops) {
        io__err(err, n, "%s: not a store name (x.zarr, x.ome.zarr, x.h5:/dataset)", name);
        return NULL;
    }
    if (!ops->available()) {
        io__err(err, n, "%s: swi_io was built without %s", name, ops->missing);
        return NULL;
    }
    return ops;
}

int swi_store_available(swi_store_kind kind) {
    const store_ops *ops = io__store_ops(kind);
    return ops ? ops->available() : 0;
}

swi_status swi_store_split_h5(const char *name, char *file, size_t fn, char *dset, size_t dn, char *err,
                              size_t errlen) {
    if (!name || !file) {
        io__err(err, errlen, "swi_store_split_h5: %s is NULL", name ? "file" : "name");
        return SWI_ERR_INVALID_ARG;
    }
    const char *c = strstr(name, ".h5:");
    size_t ext = 3;
    if (!c) {
        c = strstr(name, ".hdf5:");
        ext = 5;
    }
    if (!c) {
        c = strstr(name, ".H5:");
        ext = 3;
    }
    const size_t flen = c ? (size_t)(c - name) + ext : 0;
    const char *d = c ? c + ext + 1 : "";
    if (!c || flen >= fn || (dset && strlen(d) + 2 > dn) || !*d) {
        io__err(err, errlen, "%s: name an HDF5 dataset as FILE.h5:/path", name);
        return SWI_ERR_INVALID_ARG;
    }
    memcpy(file, name, flen);
    file[flen] = '\0';
    if (dset) snprintf(dset, dn, "%s%s", *d == '/' ? "" : "/", d);
    return SWI_OK;
}

/* ---- reading ---- */

struct swi_store {
    const store_ops *ops;
    void *impl;
    int64_t size[3];
    swi_io_type type;
    char name[4096];
};

swi_status swi_store_open(const char *name, swi_store **out, char *err, size_t n) {
    if (!out || !name) {
        io__err(err, n, "swi_store_open: %s is NULL", name ? "out" : "name");
        return SWI_ERR_INVALID_ARG;
    }
    *out = NULL;
    const store_ops *ops = ops_of(name, err, n);
    if (!ops) return SWI_ERR_INVALID_ARG;
    swi_store *s = calloc(1, sizeof *s);
    if (!s) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    s->ops = ops;
    snprintf(s->name, sizeof s->name, "%s", name);
    swi_status st = ops->open(name, &s->impl, s->size, &s->type, err, n);
    if (st != SWI_OK) {
        free(s);
        return st;
    }
    *out = s;
    return SWI_OK;
}

void swi_store_size(const swi_store *s, int64_t size[3]) { memcpy(size, s->size, 3 * sizeof *size); }

swi_io_type swi_store_type(const swi_store *s) { return s->type; }

swi_status swi_store_read_box(swi_store *s, const int64_t lo[3], const int64_t hi[3], float *dst, char *err,
                              size_t n) {
    for (int a = 0; a < 3; a++)
        if (lo[a] < 0 || hi[a] > s->size[a] || lo[a] >= hi[a]) {
            io__err(err, n, "%s: box [%lld, %lld) of axis %d is outside the volume (%lld)", s->name,
                    (long long)lo[a], (long long)hi[a], a, (long long)s->size[a]);
            return SWI_ERR_INVALID_ARG;
        }
    return s->ops->read_box(s->impl, lo, hi, dst, err, n);
}

static int reader_read(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                       size_t msg_size) {
    swi_store *s = user;
    if (image != 0) {
        io__err(msg, msg_size, "%s: one image only (asked for %lld)", s->name, (long long)image);
        return 1;
    }
    return swi_store_read_box(s, lo, hi, dst, msg, msg_size) != SWI_OK;
}

swi_reader swi_store_reader(swi_store *s) {
    swi_reader r = {reader_read, s};
    return r;
}

int swi_store_geometry(const swi_store *s, double scale[3], double translation[3]) {
    return s->ops->geometry(s->impl, scale, translation);
}

swi_status swi_store_volume(const swi_store *s, swi_volume *v, char *err, size_t n) {
    swi_volume g;
    memset(&g, 0, sizeof g);
    double scale[3], trans[3];
    swi_store_geometry(s, scale, trans);
    memcpy(g.size, s->size, sizeof g.size);
    /* OME's z, y, x are the store's axes 0, 1, 2 and swi's i, j, k, in that order: each
     * index maps to its own world axis, unflipped (OME-Zarr states no anatomical
     * orientation, so none is invented) */
    for (int k = 0; k < 3; k++) {
        g.spacing[k] = scale[k];
        g.affine[k][k] = scale[k];
        g.affine[k][3] = trans[k];
    }
    g.affine[3][3] = 1;
    char why[512];
    swi_status st = io__nifti_like(&g, v, why, sizeof why);
    if (st != SWI_OK) io__err(err, n, "%s: %s", s->name, why);
    return st;
}

void swi_store_chunk(const swi_store *s, int64_t chunk[3]) {
    for (int a = 0; a < 3; a++) chunk[a] = s ? s->size[a] : 0;
    if (s && s->ops->chunk) s->ops->chunk(s->impl, chunk);
    for (int a = 0; s && a < 3; a++)
        if (chunk[a] < 1 || chunk[a] > s->size[a]) chunk[a] = s->size[a];
}

void swi_store_lead_axes(const swi_store *s, char lead[4]) {
    lead[0] = '\0';
    if (s && s->ops->lead) s->ops->lead(s->impl, lead);
}

double swi_store_fill_value(const swi_store *s) { return s->ops->fill(s->impl); }

void swi_store_close(swi_store *s) {
    if (!s) return;
    s->ops->close(s->impl);
    free(s);
}

/* ---- writing ---- */

void store__class_name(const swi_store_spec *spec, int64_t l, char *buf, size_t n) {
    if (spec->class_names && l < spec->n_class_names && spec->class_names[l])
        snprintf(buf, n, "%s", spec->class_names[l]);
    else if (l == 0)
        snprintf(buf, n, "background");
    else
        snprintf(buf, n, "label_%lld", (long long)l);
}

/* s appended to *buf (length *len, capacity *cap), growing it; -1 when out of memory. */
static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t sn) {
    if (*len + sn + 1 > *cap) {
        size_t c = (*cap ? *cap : 256);
        while (*len + sn + 1 > c) c *= 2;
        char *b = realloc(*buf, c);
        if (!b) return -1;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, sn);
    *len += sn;
    (*buf)[*len] = '\0';
    return 0;
}

char *store__classes_json(const swi_store_spec *spec) {
    char *buf = NULL, name[1024], item[64];
    size_t len = 0, cap = 0;
    int bad = append(&buf, &len, &cap, "[", 1);
    for (int64_t l = 0; l < spec->classes && !bad; l++) {
        store__class_name(spec, l, name, sizeof name);
        snprintf(item, sizeof item, "%s{\"label-value\": %lld, \"name\": \"", l ? ", " : "", (long long)l);
        bad |= append(&buf, &len, &cap, item, strlen(item));
        for (const unsigned char *c = (const unsigned char *)name; *c && !bad; c++) {
            /* JSON string escapes: quote, backslash, control characters */
            if (*c == '"' || *c == '\\')
                snprintf(item, sizeof item, "\\%c", *c);
            else if (*c < 0x20)
                snprintf(item, sizeof item, "\\u%04x", *c);
            else
                snprintf(item, sizeof item, "%c", *c);
            bad |= append(&buf, &len, &cap, item, strlen(item));
        }
        unsigned char rgb[3] = {0, 0, 0};
        if (l > 0) swi_io_label_color(l, rgb);
        snprintf(item, sizeof item, "\", \"rgba\": [%d, %d, %d, %d]}", rgb[0], rgb[1], rgb[2],
                 l > 0 ? 255 : 0);
        bad |= append(&buf, &len, &cap, item, strlen(item));
    }
    bad |= append(&buf, &len, &cap, "]", 1);
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

void swi_store_spec_init(swi_store_spec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->planes = 1;
    spec->dtype = SWI_DTYPE_UINT8;
    spec->codec = SWI_STORE_BLOSC;
}

void swi_store_default_chunk(const swi_store_spec *spec, int64_t chunk[3]) {
    for (int a = 0; a < 3; a++) chunk[a] = spec->size[a] < 64 ? (spec->size[a] > 0 ? spec->size[a] : 1) : 64;
    const int a = spec->slab_axis >= 0 && spec->slab_axis < 3 ? spec->slab_axis : 0;
    double layer = (double)(spec->planes > 0 ? spec->planes : 1) * (double)store__dtype_size(spec->dtype);
    for (int d = 0; d < 3; d++)
        if (d != a) layer *= (double)spec->size[d];
    const double cap = 256.0 * 1024 * 1024;
    while (chunk[a] > 1 && layer * (double)chunk[a] > cap) chunk[a] /= 2;
}

/* One slab: a layer of whole chunks along the slab axis, across the part's box on the
 * other axes, every plane; and how many of its voxels arrived. */
typedef struct slab {
    unsigned char *buf;
    int64_t got;
} slab;

struct swi_store_writer {
    const store_ops *ops;
    void *impl;
    char name[4096];
    swi_store_spec spec;
    int64_t chunk[3];
    size_t esize;
    int axis;                     /* the slab axis */
    int64_t box_lo[3], box_hi[3]; /* the part, on chunk boundaries */
    int64_t n_slabs;
    slab *slabs;
    int64_t slabs_done, slabs_expected;
    pthread_mutex_t mu;
    swi_status failed; /* the first failure's status (SWI_OK: none) */
    char error[1024];
};

static void fail_locked(swi_store_writer *w, swi_status st, const char *msg) {
    if (!w->failed) {
        w->failed = st;
        snprintf(w->error, sizeof w->error, "%s", msg);
    }
}

static swi_status check_spec(const char *name, const swi_store_spec *spec, char *err, size_t n) {
    for (int a = 0; a < 3; a++)
        if (spec->size[a] < 1 || spec->size[a] > SWI_MAX_AXIS || spec->chunk[a] < 0) {
            io__err(err, n, "%s: size or chunk of axis %d out of range", name, a);
            return SWI_ERR_INVALID_ARG;
        }
    if (spec->planes < 1 || spec->planes > 65536) {
        io__err(err, n, "%s: planes must be 1..65536 (got %lld)", name, (long long)spec->planes);
        return SWI_ERR_INVALID_ARG;
    }
    if (spec->dtype != SWI_DTYPE_UINT8 && spec->dtype != SWI_DTYPE_UINT16 &&
        spec->dtype != SWI_DTYPE_FLOAT32) {
        io__err(err, n, "%s: dtype must be uint8, uint16 or float32", name);
        return SWI_ERR_INVALID_ARG;
    }
    const size_t nl = strnlen(spec->lead_axes, sizeof spec->lead_axes);
    if (nl >= sizeof spec->lead_axes || (nl && (swi_store_kind_of(name) != SWI_STORE_OME ||
                                                spec->planes != 1 || strspn(spec->lead_axes, "tc") != nl ||
                                                (nl == 2 && spec->lead_axes[0] == spec->lead_axes[1])))) {
        io__err(err, n, "%s: leading axes (\"%.3s\") are for OME-Zarr label maps: t and c, each once", name,
                spec->lead_axes);
        return SWI_ERR_INVALID_ARG;
    }
    if (spec->slab_axis < 0 || spec->slab_axis > 2) {
        io__err(err, n, "%s: slab_axis must be 0, 1 or 2 (got %d)", name, spec->slab_axis);
        return SWI_ERR_INVALID_ARG;
    }
    double vox = (double)spec->size[0] * (double)spec->size[1] * (double)spec->size[2] * (double)spec->planes;
    if (vox > (double)IO_MAX_VOXELS) {
        io__err(err, n, "%s: %.0f values exceed the limit of 2^40", name, vox);
        return SWI_ERR_OVERFLOW;
    }
    return SWI_OK;
}

static void chunk_of(const swi_store_spec *spec, int64_t chunk[3]) {
    swi_store_default_chunk(spec, chunk);
    for (int a = 0; a < 3; a++)
        if (spec->chunk[a] > 0) chunk[a] = spec->chunk[a] < spec->size[a] ? spec->chunk[a] : spec->size[a];
}

swi_status swi_store_check_output(const char *name, int force, char *err, size_t n) {
    if (!name) {
        io__err(err, n, "swi_store_check_output: name is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    const swi_store_kind k = swi_store_kind_of(name);
    if (k == SWI_STORE_ZARR || k == SWI_STORE_OME)
        return zarr__check_output(name, k == SWI_STORE_OME, force, err, n);
    return ops_of(name, err, n) ? SWI_OK : SWI_ERR_INVALID_ARG;
}

swi_status swi_store_create_metadata(const char *name, const swi_store_spec *spec, int flags, char *err,
                                     size_t n) {
    const store_ops *ops = ops_of(name, err, n);
    swi_status st = ops ? check_spec(name, spec, err, n) : SWI_ERR_INVALID_ARG;
    if (st != SWI_OK) return st;
    int64_t chunk[3];
    chunk_of(spec, chunk);
    void *impl = NULL;
    /* part -1: metadata and marker only */
    st = ops->create(name, spec, chunk, flags | SWI_STORE_SHARED, -1, 0, &impl, err, n);
    if (st == SWI_OK) ops->abort(impl);
    return st;
}

/* The box of slab s. */
static void slab_box(const swi_store_writer *w, int64_t s, int64_t lo[3], int64_t hi[3]) {
    for (int d = 0; d < 3; d++) {
        lo[d] = w->box_lo[d];
        hi[d] = w->box_hi[d];
    }
    const int a = w->axis;
    lo[a] = s * w->chunk[a]; /* the box's edges are chunk edges, so this stays inside it */
    hi[a] = lo[a] + w->chunk[a] < w->box_hi[a] ? lo[a] + w->chunk[a] : w->box_hi[a];
}

swi_status swi_store_create(const char *name, const swi_store_spec *spec, int flags, int part, int parts,
                            const int64_t box_lo[3], const int64_t box_hi[3], swi_store_writer **out,
                            char *err, size_t n) {
    if (!name || !spec || !out) {
        io__err(err, n, "swi_store_create: an argument is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    *out = NULL;
    const store_ops *ops = ops_of(name, err, n);
    swi_status st = ops ? check_spec(name, spec, err, n) : SWI_ERR_INVALID_ARG;
    if (st != SWI_OK) return st;
    if (parts < 1 || part < 0 || part >= parts) {
        io__err(err, n, "%s: part %d of %d is out of range", name, part, parts);
        return SWI_ERR_INVALID_ARG;
    }
    swi_store_writer *w = calloc(1, sizeof *w);
    if (!w) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    w->ops = ops;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->spec = *spec;
    chunk_of(spec, w->chunk);
    w->esize = store__dtype_size(spec->dtype);
    w->axis = spec->slab_axis;
    int empty = 0;
    for (int d = 0; d < 3; d++) {
        const int64_t lo = box_lo ? box_lo[d] : 0, hi = box_hi ? box_hi[d] : spec->size[d], c = w->chunk[d];
        if (lo < 0 || hi > spec->size[d] || lo > hi || lo % c != 0 || (hi % c != 0 && hi != spec->size[d])) {
            io__err(err, n,
                    "%s: the part [%lld, %lld) of axis %d is not on chunk boundaries (chunk %lld, size %lld)",
                    name, (long long)lo, (long long)hi, d, (long long)c, (long long)spec->size[d]);
            free(w);
            return SWI_ERR_INVALID_ARG;
        }
        w->box_lo[d] = lo;
        w->box_hi[d] = hi;
        empty |= lo == hi;
    }
    const int a = w->axis;
    w->n_slabs = (spec->size[a] + w->chunk[a] - 1) / w->chunk[a];
    w->slabs_expected =
        empty ? 0 : (w->box_hi[a] + w->chunk[a] - 1) / w->chunk[a] - w->box_lo[a] / w->chunk[a];
    w->slabs = calloc((size_t)w->n_slabs, sizeof *w->slabs);
    if (!w->slabs || pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w->slabs);
        free(w);
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    st = ops->create(name, spec, w->chunk, flags, part, parts, &w->impl, err, n);
    if (st != SWI_OK) {
        pthread_mutex_destroy(&w->mu);
        free(w->slabs);
        free(w);
        return st;
    }
    *out = w;
    return SWI_OK;
}

void swi_store_writer_chunk(const swi_store_writer *w, int64_t chunk[3]) {
    memcpy(chunk, w->chunk, 3 * sizeof *chunk);
}

const char *swi_store_writer_error(const swi_store_writer *w) { return w ? w->error : ""; }

int swi_store_writer_replaces(const swi_store_writer *w) { return w && w->ops->replaces(w->impl); }

const char *swi_store_writer_temporary(const swi_store_writer *w) {
    return w ? w->ops->temporary(w->impl) : NULL;
}

int swi_store_on_region(void *user, const swi_region *r) {
    swi_store_writer *w = user;
    const int a = w->axis;
    const int64_t ca = w->chunk[a];
    const int64_t planes = w->spec.planes;
    const size_t es = w->esize;
    char msg[1024];
    if (r->dims != 3 || r->image != 0 || r->channels != planes || store__dtype_size(r->dtype) != es ||
        r->lo[0] < w->box_lo[0] || r->hi[0] > w->box_hi[0] || r->lo[1] < w->box_lo[1] ||
        r->hi[1] > w->box_hi[1] || r->lo[2] < w->box_lo[2] || r->hi[2] > w->box_hi[2]) {
        pthread_mutex_lock(&w->mu);
        fail_locked(w, SWI_ERR_INVALID_ARG, "a region does not fit the store (internal error)");
        pthread_mutex_unlock(&w->mu);
        return 1;
    }
    const int64_t rd = r->hi[0] - r->lo[0], rh = r->hi[1] - r->lo[1], rw = r->hi[2] - r->lo[2];
    const unsigned char *src = r->data;
    for (int64_t s = r->lo[a] / ca; s * ca < r->hi[a]; s++) {
        int64_t lo[3], hi[3], x0[3], x1[3];
        slab_box(w, s, lo, hi);
        for (int d = 0; d < 3; d++) {
            x0[d] = r->lo[d] > lo[d] ? r->lo[d] : lo[d];
            x1[d] = r->hi[d] < hi[d] ? r->hi[d] : hi[d];
        }
        const int64_t e1 = hi[1] - lo[1], e2 = hi[2] - lo[2], e0 = hi[0] - lo[0];
        const size_t slab_vals = (size_t)(planes * e0 * e1 * e2);
        unsigned char *done = NULL;
        pthread_mutex_lock(&w->mu);
        if (w->failed) {
            pthread_mutex_unlock(&w->mu);
            return 1;
        }
        slab *sl = &w->slabs[s];
        if (!sl->buf) {
            sl->buf = calloc(slab_vals, es);
            if (!sl->buf) {
                char b32[32];
                snprintf(msg, sizeof msg, "%.900s: out of memory for a slab of %s", w->name,
                         swi_format_bytes(slab_vals * es, b32, sizeof b32));
                fail_locked(w, SWI_ERR_NOMEM, msg);
                pthread_mutex_unlock(&w->mu);
                return 1;
            }
        }
        const size_t run = (size_t)(x1[2] - x0[2]) * es;
        for (int64_t p = 0; p < planes; p++)
            for (int64_t i = x0[0]; i < x1[0]; i++)
                for (int64_t j = x0[1]; j < x1[1]; j++) {
                    const int64_t at =
                        ((p * rd + (i - r->lo[0])) * rh + (j - r->lo[1])) * rw + (x0[2] - r->lo[2]);
                    const unsigned char *from = src + (size_t)at * es;
                    unsigned char *to =
                        sl->buf +
                        (size_t)(((p * e0 + (i - lo[0])) * e1 + (j - lo[1])) * e2 + (x0[2] - lo[2])) * es;
                    memcpy(to, from, run);
                }
        sl->got += (x1[0] - x0[0]) * (x1[1] - x0[1]) * (x1[2] - x0[2]);
        if (sl->got == e0 * e1 * e2) {
            done = sl->buf;
            sl->buf = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        if (done) {
            swi_status st = w->ops->write_box(w->impl, lo, hi, done, msg, sizeof msg);
            free(done);
            pthread_mutex_lock(&w->mu);
            if (st != SWI_OK)
                fail_locked(w, st, msg);
            else
                w->slabs_done++;
            int failed = w->failed != SWI_OK;
            pthread_mutex_unlock(&w->mu);
            if (failed) return 1;
        }
    }
    return 0;
}

static void free_writer(swi_store_writer *w) {
    for (int64_t s = 0; s < w->n_slabs; s++) free(w->slabs[s].buf);
    free(w->slabs);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

swi_status swi_store_commit(swi_store_writer *w, char *err, size_t n) {
    if (!w) {
        io__err(err, n, "swi_store_commit: w is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    if (w->failed || w->slabs_done != w->slabs_expected) {
        if (w->failed)
            io__err(err, n, "%s", w->error);
        else
            io__err(err, n, "%s: %lld of %lld slabs of chunks were written; the store stays incomplete",
                    w->name, (long long)w->slabs_done, (long long)w->slabs_expected);
        swi_status st = w->failed ? w->failed : SWI_ERR_INVALID_ARG;
        swi_store_abort(w);
        return st;
    }
    swi_status st = w->ops->commit(w->impl, err, n);
    free_writer(w);
    return st;
}

void swi_store_abort(swi_store_writer *w) {
    if (!w) return;
    w->ops->abort(w->impl);
    free_writer(w);
}
