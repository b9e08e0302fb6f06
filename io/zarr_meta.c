/* zarr_meta.c -- Zarr metadata through jansson: a v2 .zarray or v3 zarr.json read and
 * checked, OME-Zarr 0.4/0.5 multiscales and their geometry, and the metadata a writer
 * writes (the array's, an OME image's, a labels group's registration in its image). */
#include "zarr_internal.h"

#ifdef SWI_HAVE_ZARR

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bounds on what metadata may claim before anything is allocated: a chunk is decoded
 * whole, so its bytes are capped; a chunk larger than the array (Zarr allows it, and edge
 * chunks are stored whole) is taken while it is small, or holds the array's part within a
 * few times over, never 8192^3 over a 19^3 array. */
#define CHUNK_MAX ((size_t)1 << 30)
#define CHUNK_SMALL ((size_t)16 << 20)
#define CHUNK_WASTE 8.0

/* Metadata files (.zarray, .zattrs, zarr.json) are small; larger ones are refused unread. */
#define META_MAX ((size_t)64 << 20)

json_t *zarr__load_json(const char *path, char *err, size_t n, const char *what) {
    size_t len = 0;
    unsigned char *b = io__read_file(path, META_MAX, &len, err, n, what);
    if (!b) return NULL;
    const int depth = swi_io_json_depth((const char *)b, len);
    if (depth > SWI_IO_JSON_MAX_DEPTH) {
        io__err(err, n, "%s: %s nests %d levels deep, more than the %d swi reads", path, what, depth,
                SWI_IO_JSON_MAX_DEPTH);
        free(b);
        errno = EBADMSG;
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)b, len, 0, &je);
    free(b);
    if (!j) {
        io__err(err, n, "%s: %s is not JSON: %s (line %d)", path, what, je.text, je.line);
        errno = EBADMSG;
    }
    return j;
}

int zarr__put_json(const char *path, json_t *j, int exclusive) {
    char *s = json_dumps(j, JSON_INDENT(4) | JSON_SORT_KEYS);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    int r = io__put_file(path, s, strlen(s), exclusive);
    int e = errno;
    free(s);
    errno = e;
    return r;
}

/* ---- the array ---- */

/* The parts of a Zarr v3 array's zarr.json that a v2 .zarray holds elsewhere: the data type
 * as a v2 dtype string, the order (from a transpose codec), the compressor, the chunk key
 * separator. Returns the field that cannot be read, or NULL. */
static const char *v3_fields(json_t *j, zarr_array *a, json_t **chunks, char dtype[8], const char **order,
                             const char **sep) {
    static const struct {
        const char *name, *v2;
    } types[] = {{"int8", "i1"},   {"uint8", "u1"}, {"int16", "i2"},  {"uint16", "u2"},  {"int32", "i4"},
                 {"uint32", "u4"}, {"int64", "i8"}, {"uint64", "u8"}, {"float32", "f4"}, {"float64", "f8"}};
    const char *node = json_string_value(json_object_get(j, "node_type"));
    if (!node || strcmp(node, "array"))
        return "node_type (an array, or a group whose attributes hold OME-Zarr multiscales)";
    json_t *grid = json_object_get(j, "chunk_grid");
    const char *gname = json_string_value(json_object_get(grid, "name"));
    *chunks = json_object_get(json_object_get(grid, "configuration"), "chunk_shape");
    if (!gname || strcmp(gname, "regular")) return "chunk_grid (regular)";
    json_t *enc = json_object_get(j, "chunk_key_encoding");
    const char *ename = json_string_value(json_object_get(enc, "name"));
    *sep = json_string_value(json_object_get(json_object_get(enc, "configuration"), "separator"));
    if (!ename || (strcmp(ename, "default") && strcmp(ename, "v2")))
        return "chunk_key_encoding (default or v2)";
    if (!*sep) *sep = strcmp(ename, "default") ? "." : "/";
    if (!strcmp(ename, "default")) snprintf(a->key_prefix, sizeof a->key_prefix, "c%s", *sep);
    const char *dt = json_string_value(json_object_get(j, "data_type"));
    const char *v2 = NULL;
    for (size_t i = 0; dt && i < sizeof types / sizeof *types; i++)
        if (!strcmp(dt, types[i].name)) v2 = types[i].v2;
    if (!v2) return "data_type (an integer or float type, e.g. uint16, float32)";
    json_t *st = json_object_get(j, "storage_transformers");
    if (st && !(json_is_array(st) && json_array_size(st) == 0))
        return "storage_transformers (none are supported)";
    /* codecs: [transpose,] bytes [, one of gzip, zstd, blosc] */
    json_t *codecs = json_object_get(j, "codecs");
    const char *endian = "little";
    int have_bytes = 0, have_comp = 0;
    *order = "C";
    a->codec = C_RAW;
    if (!json_is_array(codecs)) return "codecs";
    for (size_t i = 0; i < json_array_size(codecs); i++) {
        json_t *c = json_array_get(codecs, i), *cfg = json_object_get(c, "configuration");
        const char *name = json_string_value(json_object_get(c, "name"));
        if (!name) return "codecs (each needs a name)";
        if (!strcmp(name, "transpose") && !have_bytes) {
            json_t *ord = json_object_get(cfg, "order");
            size_t nd = json_array_size(json_object_get(j, "shape"));
            int ident = 1, rev = 1;
            if (!json_is_array(ord) || json_array_size(ord) != nd)
                return "codecs: transpose (an order for every axis)";
            for (size_t k = 0; k < nd; k++) {
                json_int_t v = json_integer_value(json_array_get(ord, k));
                ident &= v == (json_int_t)k;
                rev &= v == (json_int_t)(nd - 1 - k);
            }
            if (!ident && !rev) return "codecs: transpose (only the identity or the reversed order, C or F)";
            if (rev && !ident) *order = "F";
        } else if (!strcmp(name, "bytes") && !have_bytes) {
            have_bytes = 1;
            const char *e = json_string_value(json_object_get(cfg, "endian"));
            if (e) endian = e;
            if (strcmp(endian, "little") && strcmp(endian, "big"))
                return "codecs: bytes (endian little or big)";
        } else if (have_bytes && !have_comp &&
                   (!strcmp(name, "gzip") || !strcmp(name, "zstd") || !strcmp(name, "blosc"))) {
            have_comp = 1;
            a->codec = !strcmp(name, "gzip") ? C_GZIP : !strcmp(name, "zstd") ? C_ZSTD : C_BLOSC;
        } else if (!strcmp(name, "sharding_indexed")) {
            return "codecs: sharding_indexed (sharded arrays are not read: rewrite without shards, or as Zarr v2)";
        } else {
            return "codecs (transpose, bytes, then at most one of gzip, zstd or blosc)";
        }
    }
    if (!have_bytes) return "codecs (a bytes codec)";
    snprintf(dtype, 8, "%c%s", !strcmp(endian, "big") ? '>' : '<', v2);
    if (v2[1] == '1') dtype[0] = '|';
    return NULL;
}

swi_status zarr__parse_zarray(const char *dir, zarr_array *a, char *err, size_t n) {
    char path[4200];
    if (io__join(path, sizeof path, dir, ".zarray")) {
        io__err(err, n, "%s: name too long", dir);
        return SWI_ERR_INVALID_ARG;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        io__err(err, n, "%s: %s", dir, strerror(errno));
        return SWI_ERR_IO;
    }
    /* Zarr v3 keeps its metadata in zarr.json */
    int v3 = access(path, F_OK) != 0 && io__join(path, sizeof path, dir, "zarr.json") == 0 &&
             access(path, F_OK) == 0;
    if (!v3) io__join(path, sizeof path, dir, ".zarray");
    json_t *j = zarr__load_json(path, err, n, "the array metadata");
    if (!j) return io__errno_status(errno);
    swi_status st_ = SWI_ERR_INVALID_ARG;
    const char *field = NULL;
    json_t *shape = json_object_get(j, "shape"), *chunks = json_object_get(j, "chunks");
    const char *order = json_string_value(json_object_get(j, "order"));
    json_t *filters = json_object_get(j, "filters");
    json_t *fill = json_object_get(j, "fill_value");
    const char *sep = json_string_value(json_object_get(j, "dimension_separator"));
    const char *cid = NULL;
    char dtype[8] = "", fbuf[256];
    a->key_prefix[0] = '\0';
    if (v3) {
        if (json_integer_value(json_object_get(j, "zarr_format")) != 3)
            field = "zarr_format (2 or 3)";
        else
            field = v3_fields(j, a, &chunks, dtype, &order, &sep);
        filters = NULL;
    } else {
        const char *d = json_string_value(json_object_get(j, "dtype"));
        snprintf(dtype, sizeof dtype, "%s", d ? d : "");
        if (json_integer_value(json_object_get(j, "zarr_format")) != 2) field = "zarr_format (2 or 3)";
    }
    if (field) {
        /* named above */
    } else if (!json_is_array(shape) || json_array_size(shape) < 3 ||
               json_array_size(shape) > STORE_MAX_NDIM || !json_is_array(chunks) ||
               json_array_size(chunks) != json_array_size(shape))
        field = "shape/chunks (3 to 5 axes, as many chunks as axes)";
    else if (zarr__parse_dtype(dtype, &a->t))
        field = "dtype (an integer or float type, e.g. <u2, <f4)";
    else if (!order || (strcmp(order, "C") && strcmp(order, "F")))
        field = "order (C or F)";
    else if (filters && !json_is_null(filters) && !(json_is_array(filters) && json_array_size(filters) == 0))
        field = "filters (none are supported)";
    else if (!v3 && zarr__parse_codec(json_object_get(j, "compressor"), &a->codec, &cid))
        field = "compressor (blosc, zstd, zlib, gzip or null)";
    else if (sep && strcmp(sep, ".") && strcmp(sep, "/"))
        field = "dimension_separator";
    if (!field) {
        a->ndim = (int)json_array_size(shape);
        double vox = 1, cbytes = (double)a->t.size, inside = (double)a->t.size;
        for (int k = 0; k < a->ndim; k++) {
            json_t *s = json_array_get(shape, (size_t)k), *c = json_array_get(chunks, (size_t)k);
            a->shape[k] = json_is_integer(s) ? json_integer_value(s) : -1;
            a->chunks[k] = json_is_integer(c) ? json_integer_value(c) : -1;
            if (a->shape[k] < 1 || a->shape[k] > SWI_MAX_AXIS || a->chunks[k] < 1 ||
                a->chunks[k] > SWI_MAX_AXIS) {
                field = "shape/chunks (positive sizes)";
                break;
            }
            if (k < a->ndim - 3 && a->shape[k] != 1 && !a->any_leading) {
                field = "shape (axes before the last 3 must be of size 1)";
                break;
            }
            vox *= (double)a->shape[k];
            if (k >= a->ndim - 3) {
                cbytes *= (double)a->chunks[k];
                inside *= (double)(a->chunks[k] < a->shape[k] ? a->chunks[k] : a->shape[k]);
            }
        }
        if (!field && vox > (double)IO_MAX_VOXELS) field = "shape (more than 2^40 elements)";
        if (!field && cbytes > (double)CHUNK_MAX) {
            snprintf(fbuf, sizeof fbuf, "chunks (a chunk of %.0f bytes; at most %zu)", cbytes, CHUNK_MAX);
            field = fbuf;
        } else if (!field && cbytes > (double)CHUNK_SMALL && cbytes > CHUNK_WASTE * inside) {
            snprintf(fbuf, sizeof fbuf,
                     "chunks (a chunk of %.0f bytes, %.0f times what lies inside the array; chunks may "
                     "exceed the array only while they stay below %zu bytes or %d times that)",
                     cbytes, cbytes / inside, CHUNK_SMALL, (int)CHUNK_WASTE);
            field = fbuf;
        }
        if (!field) a->chunk_bytes = (size_t)cbytes;
        a->fortran = !field && !strcmp(order, "F");
        for (int k = 0; a->fortran && k < a->ndim - 3; k++)
            if (a->chunks[k] != 1)
                field = "chunks (order F needs chunks of 1 along the axes before the last 3)";
    }
    if (!field) {
        a->sep = sep ? sep[0] : '.';
        a->fill = 0;
        if (json_is_number(fill))
            a->fill = json_number_value(fill);
        else if (json_is_string(fill) && !strcmp(json_string_value(fill), "NaN"))
            a->fill = NAN;
        else if (json_is_string(fill) && !strcmp(json_string_value(fill), "Infinity"))
            a->fill = INFINITY;
        else if (json_is_string(fill) && !strcmp(json_string_value(fill), "-Infinity"))
            a->fill = -INFINITY;
        st_ = SWI_OK;
    } else {
        io__err(err, n, "%s: unsupported or invalid %s", path, field);
    }
    json_decref(j);
    return st_;
}

/* ---- OME-Zarr geometry ---- */

/* Millimetres per unit of an OME axis unit (UDUNITS names); 1 when absent or unknown. */
static double unit_mm(const char *u) {
    static const struct {
        const char *name;
        double mm;
    } units[] = {{"millimeter", 1},  {"micrometer", 1e-3}, {"nanometer", 1e-6},
                 {"centimeter", 10}, {"meter", 1e3},       {"angstrom", 1e-7},
                 {"decimeter", 100}, {"picometer", 1e-9},  {"inch", 25.4}};
    for (size_t i = 0; u && i < sizeof units / sizeof *units; i++)
        if (!strcmp(u, units[i].name)) return units[i].mm;
    return 1;
}

/* Apply a coordinateTransformations list (scale, then translation) of an `nd`-axis space to
 * g, taking the last three values of each: s' = s * scale, t' = t * scale + translation. */
static void apply_transforms(json_t *list, size_t nd, double s[3], double t[3], int *has) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *tr = json_array_get(list, i);
        const char *type = json_string_value(json_object_get(tr, "type"));
        if (!type) continue;
        int sc = !strcmp(type, "scale"), tl = !strcmp(type, "translation");
        json_t *v = json_object_get(tr, sc ? "scale" : "translation");
        if (!sc && !tl) continue;
        double x[3];
        int ok = json_is_array(v) && json_array_size(v) == nd && nd >= 3;
        for (int k = 0; k < 3 && ok; k++) {
            json_t *e = json_array_get(v, nd - 3 + (size_t)k);
            x[k] = json_number_value(e);
            ok &= json_is_number(e) && isfinite(x[k]) && (!sc || x[k] > 0);
        }
        if (!ok) { /* a transformation swi cannot apply: no geometry rather than a wrong one */
            for (int k = 0; k < 3; k++) s[k] = NAN;
            *has = 1;
            return;
        }
        for (int k = 0; k < 3; k++) {
            if (sc) {
                s[k] *= x[k];
                t[k] *= x[k];
            } else {
                t[k] += x[k];
            }
        }
        *has = 1;
    }
}

/* The geometry of dataset ds of multiscale ms (OME-Zarr 0.4/0.5): the dataset's transforms,
 * then the multiscale's own; in millimetres (to_mm), else in the axes' own units. */
void zarr__ome_geometry(json_t *ms, json_t *ds, ome_geom *g, int to_mm) {
    memset(g, 0, sizeof *g);
    for (int k = 0; k < 3; k++) g->scale[k] = 1;
    json_t *axes = json_object_get(ms, "axes");
    size_t nd = json_array_size(axes);
    if (nd < 3) return;
    /* the non-spatial axes: kept on labels only when they are time and channel */
    if (nd <= 5) {
        int k = 0, ok = 1;
        for (; k < (int)nd - 3; k++) {
            const char *an = json_string_value(json_object_get(json_array_get(axes, (size_t)k), "name"));
            ok &= an && (!strcmp(an, "t") || !strcmp(an, "c")) && !strchr(g->lead, an[0]);
            if (ok) g->lead[k] = an[0];
        }
        g->lead[ok ? k : 0] = '\0';
    }
    apply_transforms(json_object_get(ds, "coordinateTransformations"), nd, g->scale, g->trans, &g->has);
    apply_transforms(json_object_get(ms, "coordinateTransformations"), nd, g->scale, g->trans, &g->has);
    for (int k = 0; k < 3; k++) {
        const char *u = json_string_value(json_object_get(json_array_get(axes, nd - 3 + (size_t)k), "unit"));
        snprintf(g->unit[k], sizeof g->unit[k], "%s", u && strlen(u) < sizeof g->unit[k] ? u : "");
        double mm = to_mm ? unit_mm(u) : 1;
        g->scale[k] *= mm;
        g->trans[k] *= mm;
    }
}

/* The attributes of an OME-Zarr group (0.4: .zattrs; 0.5: zarr.json's attributes.ome), or
 * NULL (err set). *array: the group's zarr.json says it is an array. */
json_t *zarr__ome_attrs(const char *group, json_t **root, int *array, char *err, size_t n) {
    char path[4200];
    *array = 0;
    *root = NULL;
    if (io__join(path, sizeof path, group, ".zattrs")) {
        io__err(err, n, "%s: name too long", group);
        return NULL;
    }
    /* OME-Zarr 0.5 is Zarr v3: the attributes are zarr.json's, under "ome" */
    int v3 = access(path, F_OK) != 0 && io__join(path, sizeof path, group, "zarr.json") == 0 &&
             access(path, F_OK) == 0;
    if (!v3) io__join(path, sizeof path, group, ".zattrs");
    json_t *j = zarr__load_json(path, err, n, "the OME-Zarr attributes");
    if (!j) return NULL;
    *root = j;
    const char *node = json_string_value(json_object_get(j, "node_type"));
    if (v3 && node && !strcmp(node, "array")) {
        *array = 1;
        return j;
    }
    return v3 ? json_object_get(json_object_get(j, "attributes"), "ome") : j;
}

/* Does dir hold a Zarr array's own metadata (.zarray, or a zarr.json of an array)? */
int zarr__is_array_dir(const char *dir) {
    char path[4200];
    if (io__join(path, sizeof path, dir, ".zarray") == 0 && access(path, F_OK) == 0) return 1;
    if (io__join(path, sizeof path, dir, "zarr.json") || access(path, F_OK) != 0) return 0;
    json_t *j = zarr__load_json(path, NULL, 0, "the array metadata");
    const char *node = json_string_value(json_object_get(j, "node_type"));
    int r = node && !strcmp(node, "array");
    json_decref(j);
    return r;
}

/* Does dir hold a group's attributes naming multiscales (an OME-Zarr image by its metadata,
 * whatever its name)? */
int zarr__is_ome_dir(const char *dir) {
    json_t *root = NULL;
    int array = 0;
    json_t *attrs = zarr__ome_attrs(dir, &root, &array, NULL, 0);
    int r = attrs && !array && json_is_array(json_object_get(attrs, "multiscales"));
    json_decref(root);
    return r;
}

/* The array of an OME-Zarr image group: its first multiscale's first dataset, and its
 * geometry. */
swi_status zarr__ome_level0(const char *group, char *dir, size_t dn, ome_geom *g, char *err, size_t n) {
    json_t *root = NULL;
    int array = 0;
    memset(g, 0, sizeof *g);
    json_t *j = zarr__ome_attrs(group, &root, &array, err, n);
    if (!j) {
        swi_status st = root ? SWI_ERR_INVALID_ARG : io__errno_status(errno);
        json_decref(root);
        return st;
    }
    if (array) { /* an array named x.ome.zarr: read it as such */
        json_decref(root);
        if (snprintf(dir, dn, "%s", group) >= (int)dn) {
            io__err(err, n, "%s: name too long", group);
            return SWI_ERR_INVALID_ARG;
        }
        return SWI_OK;
    }
    json_t *ms = json_array_get(json_object_get(j, "multiscales"), 0);
    json_t *ds = json_array_get(json_object_get(ms, "datasets"), 0);
    const char *p = json_string_value(json_object_get(ds, "path"));
    swi_status st = SWI_OK;
    if (!p || !*p || strstr(p, "..") || p[0] == '/') {
        io__err(err, n, "%s: no multiscales[0].datasets[0].path in its attributes (not an OME-Zarr image)",
                group);
        st = SWI_ERR_INVALID_ARG;
    } else if (io__join(dir, dn, group, p)) {
        io__err(err, n, "%s: name too long", group);
        st = SWI_ERR_INVALID_ARG;
    } else {
        zarr__ome_geometry(ms, ds, g, 1);
        for (int k = 0; k < 3 && st == SWI_OK; k++)
            if (!(g->scale[k] > 0) || !isfinite(g->scale[k]) || g->scale[k] > 1e30 ||
                !isfinite(g->trans[k]) || fabs(g->trans[k]) > 1e30) {
                io__err(
                    err, n,
                    "%s: coordinateTransformations of %s give axis %d a scale of %g mm and a translation of "
                    "%g mm (a scale must be positive, both finite)",
                    group, p, k, g->scale[k], g->trans[k]);
                st = SWI_ERR_INVALID_ARG;
            }
    }
    json_decref(root);
    return st;
}

/* ---- what a writer writes ---- */

json_t *zarr__zarray_json(const swi_store_spec *spec, const int64_t chunk[3]) {
    json_t *shape = json_array(), *chunks = json_array();
    for (size_t k = 0; k < strlen(spec->lead_axes); k++) {
        json_array_append_new(shape, json_integer(1));
        json_array_append_new(chunks, json_integer(1));
    }
    if (spec->planes > 1) {
        json_array_append_new(shape, json_integer(spec->planes));
        json_array_append_new(chunks, json_integer(1));
    }
    for (int a = 0; a < 3; a++) {
        json_array_append_new(shape, json_integer(spec->size[a]));
        json_array_append_new(chunks, json_integer(chunk[a]));
    }
    const char *dt = spec->dtype == SWI_DTYPE_FLOAT32  ? "<f4"
                     : spec->dtype == SWI_DTYPE_UINT16 ? "<u2"
                                                       : "|u1";
    return json_pack("{s:i, s:o, s:o, s:s, s:o, s:i, s:s, s:n, s:s}", "zarr_format", 2, "shape", shape,
                     "chunks", chunks, "dtype", dt, "compressor",
                     zarr__codec_json(spec->codec, (int)store__dtype_size(spec->dtype)), "fill_value", 0,
                     "order", "C", "filters", "dimension_separator", ".");
}

json_t *zarr__ome_json(const swi_store_spec *spec, const char *name, const ome_geom *g) {
    json_t *axes = json_array(), *scale = json_array(), *trans = json_array();
    for (size_t k = 0; k < strlen(spec->lead_axes); k++) {
        const int t = spec->lead_axes[k] == 't';
        json_array_append_new(axes,
                              json_pack("{s:s, s:s}", "name", t ? "t" : "c", "type", t ? "time" : "channel"));
        json_array_append_new(scale, json_real(1.0));
        json_array_append_new(trans, json_real(0.0));
    }
    if (spec->planes > 1) {
        json_array_append_new(axes, json_pack("{s:s, s:s}", "name", "c", "type", "channel"));
        json_array_append_new(scale, json_real(1.0));
        json_array_append_new(trans, json_real(0.0));
    }
    const char *an[3] = {"z", "y", "x"};
    for (int a = 0; a < 3; a++) {
        json_array_append_new(
            axes, g && g->has && g->unit[a][0]
                      ? json_pack("{s:s, s:s, s:s}", "name", an[a], "type", "space", "unit", g->unit[a])
                      : json_pack("{s:s, s:s}", "name", an[a], "type", "space"));
        json_array_append_new(scale, json_real(g && g->has ? g->scale[a] : 1.0));
        json_array_append_new(trans, json_real(g && g->has ? g->trans[a] : 0.0));
    }
    json_t *ct = json_pack("[{s:s, s:o}]", "type", "scale", "scale", scale);
    if (g && g->has)
        json_array_append_new(ct, json_pack("{s:s, s:o}", "type", "translation", "translation", trans));
    else
        json_decref(trans);
    json_t *ds = json_pack("[{s:s, s:o}]", "path", "0", "coordinateTransformations", ct);
    json_t *j = json_pack("{s:[{s:s, s:s, s:o, s:o}]}", "multiscales", "version", "0.4", "name", name, "axes",
                          axes, "datasets", ds);
    if (j && spec->labels) {
        json_t *colors = json_array();
        for (int64_t l = 1; l < spec->classes && l < 256; l++) {
            unsigned char rgb[3];
            swi_io_label_color(l, rgb);
            json_array_append_new(colors, json_pack("{s:I, s:[i,i,i,i]}", "label-value", (json_int_t)l,
                                                    "rgba", rgb[0], rgb[1], rgb[2], 255));
        }
        /* properties: every label value with its class name (the colours stay in colors) */
        json_t *props = json_array();
        char cname[1024];
        for (int64_t l = 0; props && l < spec->classes; l++) {
            store__class_name(spec, l, cname, sizeof cname);
            json_array_append_new(props,
                                  json_pack("{s:I, s:s}", "label-value", (json_int_t)l, "name", cname));
        }
        json_object_set_new(j, "image-label",
                            json_pack("{s:s, s:o, s:o, s:{s:s}}", "version", "0.4", "colors", colors,
                                      "properties", props, "source", "image", "../../"));
    }
    return j;
}

json_t *zarr__classes_attrs(const swi_store_spec *spec) {
    char *text = store__classes_json(spec);
    json_t *list = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return list ? json_pack("{s:o}", "swi_classes", list) : NULL;
}

/* Create (or for FORCE replace) the small metadata file path from j; report failures. */
swi_status zarr__write_meta(const char *path, json_t *j, char *err, size_t n) {
    if (!j || zarr__put_json(path, j, 0) != 0) {
        swi_status st = j ? io__errno_status(errno) : SWI_ERR_NOMEM;
        io__err(err, n, "%s: cannot write: %s", path, j ? strerror(errno) : "out of memory");
        return st;
    }
    return SWI_OK;
}

/* For a labels group image/labels/NAME: the image directory and the leaf NAME; 0, or -1
 * when `group` is not such a name. */
int zarr__labels_parent(const char *group, char *image, size_t in, char *leaf, size_t ln) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", group);
    char *slash = strrchr(buf, '/');
    if (!slash || !slash[1]) return -1;
    snprintf(leaf, ln, "%s", slash + 1);
    *slash = '\0';
    char *pl = strrchr(buf, '/');
    if (strcmp(pl ? pl + 1 : buf, "labels") != 0) return -1;
    if (pl)
        *pl = '\0';
    else
        snprintf(buf, sizeof buf, ".");
    snprintf(image, in, "%s", buf);
    return 0;
}

/* Labels written into an image carry the geometry of the image's level they were computed
 * on (the first level whose spatial shape is the labels' size), in the image's own units. */
void zarr__image_level_geometry(const char *image, const int64_t size[3], ome_geom *g) {
    memset(g, 0, sizeof *g);
    json_t *root = NULL;
    int array = 0;
    json_t *attrs = zarr__ome_attrs(image, &root, &array, NULL, 0);
    json_t *ms = attrs && !array ? json_array_get(json_object_get(attrs, "multiscales"), 0) : NULL;
    json_t *dss = json_object_get(ms, "datasets");
    for (size_t i = 0; i < json_array_size(dss) && !g->has; i++) {
        json_t *ds = json_array_get(dss, i);
        const char *p = json_string_value(json_object_get(ds, "path"));
        char dir[4200];
        if (!p || !*p || strstr(p, "..") || io__join(dir, sizeof dir, image, p)) continue;
        zarr_array *a = calloc(1, sizeof *a);
        if (!a) break;
        a->any_leading = 1;
        if (zarr__parse_zarray(dir, a, NULL, 0) == SWI_OK && a->shape[a->ndim - 3] == size[0] &&
            a->shape[a->ndim - 2] == size[1] && a->shape[a->ndim - 1] == size[2]) {
            zarr__ome_geometry(ms, ds, g, 0);
            for (int k = 0; k < 3; k++)
                if (!(g->scale[k] > 0) || !isfinite(g->scale[k]) || !isfinite(g->trans[k])) g->has = 0;
            free(a);
            break;
        }
        free(a);
    }
    json_decref(root);
}

/* An OME labels group inside an image: x.ome.zarr/labels/NAME -> record NAME in
 * labels/.zattrs, keeping whatever else the file holds; a labels/.zattrs that cannot be
 * read is refused, never replaced. */
swi_status zarr__register_label(const char *group, char *err, size_t n) {
    char image[4096], leaf[512], parent[4200], path[4300];
    if (zarr__labels_parent(group, image, sizeof image, leaf, sizeof leaf)) return SWI_OK;
    if (io__join(parent, sizeof parent, image, "labels")) return SWI_OK;
    json_t *g = json_pack("{s:i}", "zarr_format", 2);
    if (io__join(path, sizeof path, parent, ".zgroup") || !g ||
        (zarr__put_json(path, g, 1) != 0 && errno != EEXIST)) {
        swi_status st = g ? io__errno_status(errno) : SWI_ERR_NOMEM;
        io__err(err, n, "%s: cannot write: %s", path, g ? strerror(errno) : "out of memory");
        json_decref(g);
        return st;
    }
    json_decref(g);
    io__join(path, sizeof path, parent, ".zattrs");
    json_t *attrs = NULL;
    struct stat st;
    if (lstat(path, &st) == 0) {
        attrs = zarr__load_json(path, err, n, "the labels attributes");
        if (!attrs) return io__errno_status(errno);
        if (!json_is_object(attrs)) {
            io__err(err, n, "%s: the labels attributes are not a JSON object; not replaced", path);
            json_decref(attrs);
            return SWI_ERR_INVALID_ARG;
        }
    } else {
        attrs = json_object();
    }
    json_t *list = json_object_get(attrs, "labels");
    if (list && !json_is_array(list)) {
        io__err(err, n, "%s: \"labels\" is not a list; not replaced", path);
        json_decref(attrs);
        return SWI_ERR_INVALID_ARG;
    }
    if (!list) {
        list = json_array();
        json_object_set_new(attrs, "labels", list);
    }
    int have = 0;
    for (size_t i = 0; i < json_array_size(list); i++)
        if (json_is_string(json_array_get(list, i)) &&
            !strcmp(json_string_value(json_array_get(list, i)), leaf))
            have = 1;
    swi_status r = SWI_OK;
    if (!have) {
        json_array_append_new(list, json_string(leaf));
        r = zarr__write_meta(path, attrs, err, n);
    }
    json_decref(attrs);
    return r;
}

#endif
