/* zarr.c -- Zarr v2 arrays and OME-Zarr 0.4 images: metadata through jansson, chunks
 * through blosc, zstd and zlib (libdeflate when built in: the same streams, several times
 * faster); read with a cache of decoded chunks, written one file per chunk (temporary
 * name, then rename). */
#include "store_internal.h"

#ifdef SWI_HAVE_ZARR

#include <blosc.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#ifdef SWI_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

int zarr__available(void) { return 1; }

#define MARKER ".swi-incomplete"

/* Bounds on what metadata may claim before anything is allocated: a chunk is decoded
 * whole, so its bytes are capped; a chunk larger than the array (Zarr allows it, and edge
 * chunks are stored whole) is taken while it is small, or holds the array's part within a
 * few times over, never 8192^3 over a 19^3 array. */
#define CHUNK_MAX ((size_t)1 << 30)
#define CHUNK_SMALL ((size_t)16 << 20)
#define CHUNK_WASTE 8.0

/* ---- files ---- */

static int join(char *out, size_t n, const char *dir, const char *leaf) {
    int k = snprintf(out, n, "%s/%s", dir, leaf);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* mkdir -p; 0 or -1 with errno. */
static int mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    return 0;
}

/* Metadata files (.zarray, .zattrs, zarr.json) are small; larger ones are refused unread. */
#define META_MAX ((size_t)64 << 20)

/* The whole regular file path, at most max bytes, into a malloc'd buffer. A FIFO, device
 * or directory is refused without blocking (swi_io_open_regular), a file larger than max
 * by its size, unread. NULL with errno (ENOENT: absent) and the reason in err. */
static unsigned char *slurp(const char *path, size_t max, size_t *len, char *err, size_t n,
                            const char *what) {
    int64_t size = 0;
    int fd = swi_io_open_regular(path, &size, NULL, 0);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (e == EINVAL && stat(path, &st) == 0)
            io__err(err, n, "%s: %s is %s, not a regular file", path, what, swi_io_file_kind(st.st_mode));
        else
            io__err(err, n, "%s: cannot read %s: %s", path, what, strerror(e));
        errno = e;
        return NULL;
    }
    if (size < 0 || (uint64_t)size > (uint64_t)max) {
        char b1[32], b2[32];
        io__err(err, n, "%s: %s is %s, more than the %s it can be", path, what, io__bytes((size_t)size, b1),
                io__bytes(max, b2));
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    size_t want = (size_t)size;
    unsigned char *b = malloc(want ? want : 1);
    if (!b) {
        io__err(err, n, "%s: out of memory for %s", path, what);
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, b + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            io__err(err, n, "%s: cannot read %s: %s", path, what,
                    r < 0 ? strerror(e) : "shorter than its size");
            free(b);
            close(fd);
            errno = e;
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    *len = want;
    return b;
}

/* Write data to a temporary file beside path, then rename it (replace) or link it
 * (exclusive: EEXIST when path exists). 0 or -1 with errno. */
static int put_file(const char *path, const void *data, size_t len, int exclusive) {
    char tmp[4200];
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    static unsigned long counter;
    unsigned long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int k = snprintf(tmp, sizeof tmp, "%.*s.tmp-%ld-%lu-%s", (int)dl, path, (long)getpid(), c,
                     slash ? slash + 1 : path);
    if (k < 0 || (size_t)k >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    const unsigned char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    int r = exclusive ? link(tmp, path) : rename(tmp, path);
    int e = errno;
    if (exclusive || r != 0) unlink(tmp);
    errno = e;
    return r;
}

static json_t *load_json(const char *path, char *err, size_t n, const char *what) {
    size_t len = 0;
    unsigned char *b = slurp(path, META_MAX, &len, err, n, what);
    if (!b) return NULL;
    json_error_t je;
    json_t *j = json_loadb((const char *)b, len, 0, &je);
    free(b);
    if (!j) io__err(err, n, "%s: %s is not JSON: %s (line %d)", path, what, je.text, je.line);
    return j;
}

static int put_json(const char *path, json_t *j, int exclusive) {
    char *s = json_dumps(j, JSON_INDENT(4) | JSON_SORT_KEYS);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    int r = put_file(path, s, strlen(s), exclusive);
    int e = errno;
    free(s);
    errno = e;
    return r;
}

/* ---- dtypes ---- */

typedef struct ztype {
    swi_io_type type;
    int size;
    int big; /* big-endian stored */
    char str[8];
} ztype;

static int parse_dtype(const char *s, ztype *t) {
    if (!s || strlen(s) < 3 || strlen(s) > 4 || (s[0] != '<' && s[0] != '>' && s[0] != '|')) return -1;
    int size = atoi(s + 2);
    char k = s[1];
    struct {
        char k;
        int size;
        swi_io_type t;
    } table[] = {
        {'u', 1, SWI_IO_TYPE_UINT8},   {'i', 1, SWI_IO_TYPE_INT8},   {'u', 2, SWI_IO_TYPE_UINT16},
        {'i', 2, SWI_IO_TYPE_INT16},   {'u', 4, SWI_IO_TYPE_UINT32}, {'i', 4, SWI_IO_TYPE_INT32},
        {'u', 8, SWI_IO_TYPE_UINT64},  {'i', 8, SWI_IO_TYPE_INT64},  {'f', 4, SWI_IO_TYPE_FLOAT32},
        {'f', 8, SWI_IO_TYPE_FLOAT64},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i].k == k && table[i].size == size) {
            t->type = table[i].t;
            t->size = size;
            t->big = s[0] == '>' && size > 1;
            snprintf(t->str, sizeof t->str, "%s", s);
            return 0;
        }
    return -1;
}

static int host_big(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 0;
}

/* n elements of type t at src (stored byte order) to float, as C casts. */
static void to_float(const ztype *t, const unsigned char *src, int64_t n, float *dst) {
    unsigned char tmp[8];
    int swap = t->big != host_big() && t->size > 1;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *e = src + (size_t)i * (size_t)t->size;
        if (swap) {
            for (int b = 0; b < t->size; b++) tmp[b] = e[t->size - 1 - b];
            e = tmp;
        }
        float v;
        switch (t->type) {
        case SWI_IO_TYPE_UINT8: v = (float)*e; break;
        case SWI_IO_TYPE_INT8: v = (float)*(const int8_t *)e; break;
        case SWI_IO_TYPE_UINT16: {
            uint16_t x;
            memcpy(&x, e, 2);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_INT16: {
            int16_t x;
            memcpy(&x, e, 2);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_UINT32: {
            uint32_t x;
            memcpy(&x, e, 4);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_INT32: {
            int32_t x;
            memcpy(&x, e, 4);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_UINT64: {
            uint64_t x;
            memcpy(&x, e, 8);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_INT64: {
            int64_t x;
            memcpy(&x, e, 8);
            v = (float)x;
            break;
        }
        case SWI_IO_TYPE_FLOAT32: memcpy(&v, e, 4); break;
        case SWI_IO_TYPE_FLOAT64: {
            double x;
            memcpy(&x, e, 8);
            v = (float)x;
            break;
        }
        default: v = 0; break;
        }
        dst[i] = v;
    }
}

/* ---- codecs ---- */

typedef enum codec { C_RAW, C_BLOSC, C_ZSTD, C_ZLIB, C_GZIP } codec;

static int parse_codec(json_t *c, codec *out, const char **id) {
    *id = "null";
    if (!c || json_is_null(c)) {
        *out = C_RAW;
        return 0;
    }
    *id = json_string_value(json_object_get(c, "id"));
    if (!*id) return -1;
    if (!strcmp(*id, "blosc"))
        *out = C_BLOSC;
    else if (!strcmp(*id, "zstd"))
        *out = C_ZSTD;
    else if (!strcmp(*id, "zlib"))
        *out = C_ZLIB;
    else if (!strcmp(*id, "gzip"))
        *out = C_GZIP;
    else
        return -1;
    return 0;
}

/* The largest file a codec can produce for one chunk of `bytes` bytes (compressBound and
 * its kin, plus room for gzip's optional header fields): a chunk file larger than this is
 * not a chunk of this array, and is refused by its size, unread. */
static size_t max_stored(codec c, size_t bytes) {
    switch (c) {
    case C_RAW: return bytes;
    case C_BLOSC: return bytes + BLOSC_MAX_OVERHEAD;
    case C_ZSTD: return ZSTD_compressBound(bytes) + 4096;
    case C_ZLIB:
    case C_GZIP: return (size_t)compressBound((uLong)bytes) + 4096;
    }
    return bytes;
}

/* Decode src into dst of exactly want bytes: 0, or -1 with the reason in why. Every
 * decoder writes into dst's want bytes and no further: a stream that would inflate beyond
 * them is refused, not followed. */
static int decode(codec c, const unsigned char *src, size_t len, unsigned char *dst, size_t want, char *why,
                  size_t wn) {
    switch (c) {
    case C_RAW:
        if (len != want) {
            snprintf(why, wn, "uncompressed chunk of %zu bytes, not %zu", len, want);
            return -1;
        }
        memcpy(dst, src, want);
        return 0;
    case C_BLOSC: {
        size_t nbytes = 0, cbytes = 0, bs = 0;
        if (len < BLOSC_MIN_HEADER_LENGTH) {
            snprintf(why, wn, "blosc header truncated");
            return -1;
        }
        blosc_cbuffer_sizes(src, &nbytes, &cbytes, &bs);
        if (nbytes != want || cbytes != len) {
            snprintf(why, wn, "blosc header claims %zu bytes from %zu, the chunk has %zu from %zu", nbytes,
                     cbytes, want, len);
            return -1;
        }
        if (blosc_cbuffer_validate(src, len, &nbytes) != 0 || nbytes != want ||
            blosc_decompress_ctx(src, dst, want, 1) != (int)want) {
            snprintf(why, wn, "blosc could not decompress it");
            return -1;
        }
        return 0;
    }
    case C_ZSTD: {
        unsigned long long fcs = ZSTD_getFrameContentSize(src, len);
        if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ZSTD_CONTENTSIZE_ERROR &&
            fcs != (unsigned long long)want) {
            snprintf(why, wn, "zstd frame claims %llu bytes, the chunk has %zu", fcs, want);
            return -1;
        }
        size_t r = ZSTD_decompress(dst, want, src, len);
        if (ZSTD_isError(r) || r != want) {
            if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
                snprintf(why, wn, "zstd stream inflates beyond the chunk's %zu bytes", want);
            else if (ZSTD_isError(r))
                snprintf(why, wn, "zstd: %s", ZSTD_getErrorName(r));
            else
                snprintf(why, wn, "zstd chunk of %zu bytes, not %zu", r, want);
            return -1;
        }
        return 0;
    }
    case C_ZLIB:
    case C_GZIP: {
#ifdef SWI_HAVE_LIBDEFLATE
        /* one whole stream of exactly `want` bytes; anything else (several gzip members,
         * trailing bytes, corruption) goes through zlib below, which says what is wrong */
        struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
        if (d) {
            size_t used = 0, got = 0;
            enum libdeflate_result r =
                c == C_GZIP ? libdeflate_gzip_decompress_ex(d, src, len, dst, want, &used, &got)
                            : libdeflate_zlib_decompress_ex(d, src, len, dst, want, &used, &got);
            libdeflate_free_decompressor(d);
            if (r == LIBDEFLATE_SUCCESS && used == len && got == want) return 0;
        }
#endif
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, c == C_GZIP ? 31 : 15) != Z_OK) {
            snprintf(why, wn, "zlib could not start");
            return -1;
        }
        z.next_in = (unsigned char *)src;
        z.avail_in = (uInt)len; /* len <= max_stored(), far below 4 GiB */
        z.next_out = dst;
        z.avail_out = (uInt)want;
        int r = inflate(&z, Z_FINISH);
        size_t out = z.total_out;
        int more = r != Z_STREAM_END && z.avail_out == 0;
        inflateEnd(&z);
        if (more)
            snprintf(why, wn, "zlib stream inflates beyond the chunk's %zu bytes", want);
        else if (r != Z_STREAM_END)
            snprintf(why, wn, "zlib stream corrupt or truncated");
        else if (out != want)
            snprintf(why, wn, "zlib stream of %zu bytes, not %zu", out, want);
        else
            return 0;
        return -1;
    }
    }
    snprintf(why, wn, "unknown codec");
    return -1;
}

/* zlib chunks: level 5 of zlib or of libdeflate (which is smaller and faster at the same
 * level); the level in the metadata is informational for readers. */
#define ZLIB_LEVEL 5

/* Encode: a malloc'd buffer in *out, its length in *olen; 0 or -1. */
static int encode(swi_store_codec c, const unsigned char *src, size_t len, int typesize, unsigned char **out,
                  size_t *olen) {
    size_t cap = len + 64;
    if (c == SWI_STORE_ZSTD)
        cap = ZSTD_compressBound(len);
    else if (c == SWI_STORE_ZLIB)
        cap = compressBound((uLong)len);
    else if (c == SWI_STORE_BLOSC)
        cap = len + BLOSC_MAX_OVERHEAD;
    unsigned char *b = malloc(cap);
    if (!b) return -1;
    size_t n = 0;
    switch (c) {
    case SWI_STORE_RAW:
        memcpy(b, src, len);
        n = len;
        break;
    case SWI_STORE_BLOSC: {
        int r = blosc_compress_ctx(5, BLOSC_SHUFFLE, (size_t)typesize, len, src, b, cap, "lz4", 0, 1);
        if (r <= 0) {
            free(b);
            return -1;
        }
        n = (size_t)r;
        break;
    }
    case SWI_STORE_ZSTD: {
        size_t r = ZSTD_compress(b, cap, src, len, 3);
        if (ZSTD_isError(r)) {
            free(b);
            return -1;
        }
        n = r;
        break;
    }
    case SWI_STORE_ZLIB: {
#ifdef SWI_HAVE_LIBDEFLATE
        struct libdeflate_compressor *z = libdeflate_alloc_compressor(ZLIB_LEVEL);
        size_t r = 0;
        if (z) {
            r = libdeflate_zlib_compress(z, src, len, b, cap); /* 0 when it does not fit: zlib */
            libdeflate_free_compressor(z);
        }
        if (r > 0) {
            n = r;
            break;
        }
#endif
        uLongf dl = (uLongf)cap;
        if (compress2(b, &dl, src, (uLong)len, ZLIB_LEVEL) != Z_OK) {
            free(b);
            return -1;
        }
        n = (size_t)dl;
        break;
    }
    }
    *out = b;
    *olen = n;
    return 0;
}

static json_t *codec_json(swi_store_codec c, int typesize) {
    (void)typesize;
    switch (c) {
    case SWI_STORE_BLOSC:
        return json_pack("{s:s, s:s, s:i, s:i, s:i}", "id", "blosc", "cname", "lz4", "clevel", 5, "shuffle",
                         1, "blocksize", 0);
    case SWI_STORE_ZSTD: return json_pack("{s:s, s:i}", "id", "zstd", "level", 3);
    case SWI_STORE_ZLIB: return json_pack("{s:s, s:i}", "id", "zlib", "level", ZLIB_LEVEL);
    default: return json_null();
    }
}

/* ---- the array ---- */

struct ome_geom {
    int has; /* coordinateTransformations were found */
    double scale[3], trans[3];
    char unit[3][32]; /* the spatial axes' units as the metadata names them ("": none) */
};

typedef struct centry {
    int64_t key[3];
    unsigned char *data;
    uint64_t used;
} centry;

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

/* .zarray of the array at dir into a. */
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

static swi_status parse_zarray(const char *dir, zarr_array *a, char *err, size_t n) {
    char path[4200];
    if (join(path, sizeof path, dir, ".zarray")) {
        io__err(err, n, "%s: name too long", dir);
        return SWI_ERR_INVALID_ARG;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        io__err(err, n, "%s: %s", dir, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    /* Zarr v3 keeps its metadata in zarr.json */
    int v3 =
        access(path, F_OK) != 0 && join(path, sizeof path, dir, "zarr.json") == 0 && access(path, F_OK) == 0;
    if (!v3) join(path, sizeof path, dir, ".zarray");
    json_t *j = load_json(path, err, n, "the array metadata");
    if (!j) return SWI_ERR_INVALID_ARG;
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
    else if (parse_dtype(dtype, &a->t))
        field = "dtype (an integer or float type, e.g. <u2, <f4)";
    else if (!order || (strcmp(order, "C") && strcmp(order, "F")))
        field = "order (C or F)";
    else if (filters && !json_is_null(filters) && !(json_is_array(filters) && json_array_size(filters) == 0))
        field = "filters (none are supported)";
    else if (!v3 && parse_codec(json_object_get(j, "compressor"), &a->codec, &cid))
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

/* The decoded chunk `key` (spatial chunk indices), through the cache. */
static const unsigned char *get_chunk(zarr_array *a, const int64_t key[3], char *err, size_t n) {
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
    unsigned char *raw =
        slurp(path, max_stored(a->codec, a->chunk_bytes), &len, why_read, sizeof why_read, "the chunk");
    if (!raw) {
        if (errno != ENOENT) {
            io__err(err, n, "%s", why_read);
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
            if (a->t.big != host_big() && a->t.size > 1)
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
            return NULL;
        }
        int r =
            decode(a->codec, raw, len, a->fortran ? a->scratch : e->data, a->chunk_bytes, why, sizeof why);
        free(raw);
        if (r) {
            io__err(err, n, "%s: corrupt chunk: %s", path, why);
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

/* ---- OME-Zarr geometry ---- */

/* An OME-Zarr level's spatial geometry: index (z, y, x) -> scale * index + trans, in
 * millimetres (OME's z, y, x are the array's last three axes: swi's i, j, k). */
typedef struct ome_geom ome_geom;

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
static void ome_geometry(json_t *ms, json_t *ds, ome_geom *g, int to_mm) {
    memset(g, 0, sizeof *g);
    for (int k = 0; k < 3; k++) g->scale[k] = 1;
    json_t *axes = json_object_get(ms, "axes");
    size_t nd = json_array_size(axes);
    if (nd < 3) return;
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
static json_t *ome_attrs(const char *group, json_t **root, int *array, char *err, size_t n) {
    char path[4200];
    *array = 0;
    *root = NULL;
    if (join(path, sizeof path, group, ".zattrs")) {
        io__err(err, n, "%s: name too long", group);
        return NULL;
    }
    /* OME-Zarr 0.5 is Zarr v3: the attributes are zarr.json's, under "ome" */
    int v3 = access(path, F_OK) != 0 && join(path, sizeof path, group, "zarr.json") == 0 &&
             access(path, F_OK) == 0;
    if (!v3) join(path, sizeof path, group, ".zattrs");
    json_t *j = load_json(path, err, n, "the OME-Zarr attributes");
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
static int is_array_dir(const char *dir) {
    char path[4200];
    if (join(path, sizeof path, dir, ".zarray") == 0 && access(path, F_OK) == 0) return 1;
    if (join(path, sizeof path, dir, "zarr.json") || access(path, F_OK) != 0) return 0;
    json_t *j = load_json(path, NULL, 0, "the array metadata");
    const char *node = json_string_value(json_object_get(j, "node_type"));
    int r = node && !strcmp(node, "array");
    json_decref(j);
    return r;
}

/* Does dir hold a group's attributes naming multiscales (an OME-Zarr image by its metadata,
 * whatever its name)? */
static int is_ome_dir(const char *dir) {
    json_t *root = NULL;
    int array = 0;
    json_t *attrs = ome_attrs(dir, &root, &array, NULL, 0);
    int r = attrs && !array && json_is_array(json_object_get(attrs, "multiscales"));
    json_decref(root);
    return r;
}

/* The array of an OME-Zarr image group: its first multiscale's first dataset, and its
 * geometry. */
static swi_status ome_level0(const char *group, char *dir, size_t dn, ome_geom *g, char *err, size_t n) {
    json_t *root = NULL;
    int array = 0;
    memset(g, 0, sizeof *g);
    json_t *j = ome_attrs(group, &root, &array, err, n);
    if (!j) return SWI_ERR_INVALID_ARG;
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
    } else if (join(dir, dn, group, p)) {
        io__err(err, n, "%s: name too long", group);
        st = SWI_ERR_INVALID_ARG;
    } else {
        ome_geometry(ms, ds, g, 1);
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

static void strip_slash(const char *in, char *out, size_t n) {
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
    strip_slash(name, base, sizeof base);
    char marker[4200];
    if (join(marker, sizeof marker, base, MARKER) == 0 && access(marker, F_OK) == 0) {
        io__err(err, n, "%s: the store is incomplete (%s: a run writing it failed or is still running)", name,
                MARKER);
        free(a);
        return SWI_ERR_INVALID_ARG;
    }
    swi_status st = SWI_OK;
    char zarray[4200];
    /* an image is known by its metadata: x.zarr holding multiscales is read as OME-Zarr */
    if ((ome && !(join(zarray, sizeof zarray, base, ".zarray") == 0 && access(zarray, F_OK) == 0)) ||
        (!ome && !is_array_dir(base) && is_ome_dir(base)))
        st = ome_level0(base, a->dir, sizeof a->dir, &a->geom, err, n);
    else
        snprintf(a->dir, sizeof a->dir, "%s", base);
    if (st == SWI_OK) st = parse_zarray(a->dir, a, err, n);
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
                const unsigned char *c = get_chunk(a, key, err, n);
                if (!c) return SWI_ERR_INVALID_ARG;
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
                        to_float(&a->t, c + off, b0[2] - a0[2], to);
                    }
            }
    return SWI_OK;
}

void zarr__close(void *impl) { array_free(impl); }

double zarr__fill(void *impl) { return ((const zarr_array *)impl)->fill; }

int zarr__geometry(void *impl, double scale[3], double trans[3]) {
    const zarr_array *a = impl;
    for (int k = 0; k < 3; k++) {
        scale[k] = a->geom.has ? a->geom.scale[k] : 1;
        trans[k] = a->geom.has ? a->geom.trans[k] : 0;
    }
    return a->geom.has;
}

/* ---- writing ---- */

#define JOB_FILE ".swi-job"
#define NEXT_SUFFIX ".swi-next"

typedef struct zarr_writer {
    char store[4096]; /* the directory written, holding the marker: the array, or the OME group */
    char dir[4096];   /* the array */
    char final[4096]; /* the store's name: where `store` is moved at the last commit when swap */
    int swap;         /* 1: store is a hidden replacement of final, swapped in at the last commit
                         (this writer alone; removed on abort); 2: the same, shared by parts */
    swi_store_spec spec;
    int64_t chunk[3];
    int part, parts;
    int committed;
} zarr_writer;

static json_t *zarray_json(const swi_store_spec *spec, const int64_t chunk[3]) {
    json_t *shape = json_array(), *chunks = json_array();
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
                     codec_json(spec->codec, (int)store__dtype_size(spec->dtype)), "fill_value", 0, "order",
                     "C", "filters", "dimension_separator", ".");
}

static json_t *ome_json(const swi_store_spec *spec, const char *name, const ome_geom *g) {
    json_t *axes = json_array(), *scale = json_array(), *trans = json_array();
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
        json_object_set_new(j, "image-label",
                            json_pack("{s:s, s:o, s:{s:s}}", "version", "0.4", "colors", colors, "source",
                                      "image", "../../"));
    }
    return j;
}

/* Create (or for FORCE replace) the small metadata file path from j; report failures. */
static int write_meta(const char *path, json_t *j, char *err, size_t n) {
    if (!j || put_json(path, j, 0) != 0) {
        io__err(err, n, "%s: cannot write: %s", path, j ? strerror(errno) : "out of memory");
        return -1;
    }
    return 0;
}

static swi_status parse_zarray(const char *dir, zarr_array *a, char *err, size_t n);

/* For a labels group image/labels/NAME: the image directory and the leaf NAME; 0, or -1
 * when `group` is not such a name. */
static int labels_parent(const char *group, char *image, size_t in, char *leaf, size_t ln) {
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
static void image_level_geometry(const char *image, const int64_t size[3], ome_geom *g) {
    memset(g, 0, sizeof *g);
    json_t *root = NULL;
    int array = 0;
    json_t *attrs = ome_attrs(image, &root, &array, NULL, 0);
    json_t *ms = attrs && !array ? json_array_get(json_object_get(attrs, "multiscales"), 0) : NULL;
    json_t *dss = json_object_get(ms, "datasets");
    for (size_t i = 0; i < json_array_size(dss) && !g->has; i++) {
        json_t *ds = json_array_get(dss, i);
        const char *p = json_string_value(json_object_get(ds, "path"));
        char dir[4200];
        if (!p || !*p || strstr(p, "..") || join(dir, sizeof dir, image, p)) continue;
        zarr_array *a = calloc(1, sizeof *a);
        if (!a) break;
        a->any_leading = 1;
        if (parse_zarray(dir, a, NULL, 0) == SWI_OK && a->shape[a->ndim - 3] == size[0] &&
            a->shape[a->ndim - 2] == size[1] && a->shape[a->ndim - 1] == size[2]) {
            ome_geometry(ms, ds, g, 0);
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
static int register_label(const char *group, char *err, size_t n) {
    char image[4096], leaf[512], parent[4200], path[4300];
    if (labels_parent(group, image, sizeof image, leaf, sizeof leaf)) return 0;
    if (join(parent, sizeof parent, image, "labels")) return 0;
    json_t *g = json_pack("{s:i}", "zarr_format", 2);
    if (join(path, sizeof path, parent, ".zgroup") || !g || (put_json(path, g, 1) != 0 && errno != EEXIST)) {
        io__err(err, n, "%s: cannot write: %s", path, g ? strerror(errno) : "out of memory");
        json_decref(g);
        return -1;
    }
    json_decref(g);
    join(path, sizeof path, parent, ".zattrs");
    json_t *attrs = NULL;
    struct stat st;
    if (lstat(path, &st) == 0) {
        attrs = load_json(path, err, n, "the labels attributes");
        if (!attrs) return -1;
        if (!json_is_object(attrs)) {
            io__err(err, n, "%s: the labels attributes are not a JSON object; not replaced", path);
            json_decref(attrs);
            return -1;
        }
    } else {
        attrs = json_object();
    }
    json_t *list = json_object_get(attrs, "labels");
    if (list && !json_is_array(list)) {
        io__err(err, n, "%s: \"labels\" is not a list; not replaced", path);
        json_decref(attrs);
        return -1;
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
    int r = 0;
    if (!have) {
        json_array_append_new(list, json_string(leaf));
        r = write_meta(path, attrs, err, n);
    }
    json_decref(attrs);
    return r;
}

static int same_array(const zarr_array *a, const swi_store_spec *spec, const int64_t chunk[3]) {
    int o = spec->planes > 1 ? 1 : 0;
    if (a->ndim != 3 + o || (o && (a->shape[0] != spec->planes || a->chunks[0] != 1))) return 0;
    for (int k = 0; k < 3; k++)
        if (a->shape[o + k] != spec->size[k] || a->chunks[o + k] != chunk[k]) return 0;
    return (size_t)a->t.size == store__dtype_size(spec->dtype);
}

static void part_file(const zarr_writer *z, int part, char *out, size_t n) {
    char leaf[96];
    snprintf(leaf, sizeof leaf, ".swi-part-%d-of-%d", part, z->parts);
    join(out, n, z->store, leaf);
}

/* ---- what an existing output is ---- */

typedef enum target { T_ABSENT, T_EMPTY, T_OURS, T_OTHER } target;

static int is_swi_name(const char *s) { return !strncmp(s, ".swi-", 5) || !strncmp(s, ".tmp-", 5); }

static int is_key_name(const char *s, int dots) {
    if (!(*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (dots && *s == '.'))) return 0;
    return 1;
}

/* Does dir hold only what a Zarr v2 array holds (.zarray, .zattrs, chunk files, nested
 * chunk folders, swi's own markers)? If not, why names the first stranger. */
static int array_entries(const char *dir, int depth, char *why, size_t wn) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, wn, "%s cannot be listed: %s", dir, strerror(errno));
        return 0;
    }
    int ok = 1, meta = depth > 0;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
        char p[4400];
        struct stat st;
        if (join(p, sizeof p, dir, s) || lstat(p, &st) != 0) {
            if (errno == ENOENT && is_swi_name(s)) continue; /* another writer's temporary, renamed */
            snprintf(why, wn, "%s/%s cannot be examined", dir, s);
            ok = 0;
        } else if (depth == 0 && (!strcmp(s, ".zarray") || !strcmp(s, MARKER)) && S_ISREG(st.st_mode)) {
            meta = 1;
        } else if (((depth == 0 && !strcmp(s, ".zattrs")) || is_swi_name(s) || is_key_name(s, 1)) &&
                   S_ISREG(st.st_mode)) {
            /* its own */
        } else if (is_key_name(s, 0) && S_ISDIR(st.st_mode) && depth < STORE_MAX_NDIM) {
            ok = array_entries(p, depth + 1, why, wn);
        } else {
            snprintf(why, wn, "%s, which is not part of a Zarr v2 array", p);
            ok = 0;
        }
    }
    closedir(d);
    if (ok && !meta) {
        snprintf(why, wn, "no .zarray");
        ok = 0;
    }
    return ok;
}

/* Does group hold only what an OME-Zarr 0.4 image (or labels image) that swi could have
 * written holds: .zgroup, .zattrs naming multiscales, the levels they name (each a Zarr
 * array), swi's markers? Anything else (labels of its own, another file, OME 0.5) is kept. */
static int ome_entries(const char *group, char *why, size_t wn) {
    char path[4200];
    json_t *attrs = NULL, *dss = NULL;
    struct stat st;
    if (join(path, sizeof path, group, ".zattrs") == 0 && lstat(path, &st) == 0) {
        attrs = load_json(path, NULL, 0, "the OME-Zarr attributes");
        json_t *ms = json_object_get(attrs, "multiscales");
        if (!json_is_array(ms)) {
            snprintf(why, wn, "%s names no multiscales", path);
            json_decref(attrs);
            return 0;
        }
        dss = json_array(); /* every level of every multiscale */
        for (size_t i = 0; i < json_array_size(ms); i++) {
            json_t *l = json_object_get(json_array_get(ms, i), "datasets");
            for (size_t k = 0; k < json_array_size(l); k++)
                json_array_append(dss, json_object_get(json_array_get(l, k), "path"));
        }
    } else if (join(path, sizeof path, group, MARKER) || lstat(path, &st) != 0) {
        snprintf(why, wn, "no .zattrs");
        return 0;
    }
    DIR *d = opendir(group);
    int ok = d != NULL;
    if (!d) snprintf(why, wn, "%s cannot be listed: %s", group, strerror(errno));
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..")) continue;
        char p[4400];
        if (join(p, sizeof p, group, s) || lstat(p, &st) != 0) {
            if (errno == ENOENT && is_swi_name(s)) continue; /* another writer's temporary, renamed */
            snprintf(why, wn, "%s/%s cannot be examined", group, s);
            ok = 0;
            continue;
        }
        int level = 0;
        for (size_t i = 0; i < json_array_size(dss); i++)
            level |= json_is_string(json_array_get(dss, i)) &&
                     !strcmp(json_string_value(json_array_get(dss, i)), s);
        if (!attrs && !strcmp(s, "0")) level = 1; /* a store swi left incomplete before its metadata */
        if (S_ISREG(st.st_mode) && (!strcmp(s, ".zgroup") || !strcmp(s, ".zattrs") || is_swi_name(s)))
            continue;
        if (level && S_ISDIR(st.st_mode)) {
            ok = array_entries(p, 0, why, wn);
            continue;
        }
        snprintf(why, wn, "%s, which is not part of an OME-Zarr image swi writes", p);
        ok = 0;
    }
    if (d) closedir(d);
    json_decref(dss);
    json_decref(attrs);
    return ok;
}

/* What the output path is now. A symbolic link is another's, whatever it points to. */
static target classify(const char *path, int ome, char *why, size_t wn) {
    struct stat st;
    if (lstat(path, &st) != 0) return T_ABSENT;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, wn, "it is %s", swi_io_file_kind(st.st_mode));
        return T_OTHER;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, wn, "it cannot be listed: %s", strerror(errno));
        return T_OTHER;
    }
    int empty = 1;
    struct dirent *e;
    while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    if (empty) return T_EMPTY;
    return (ome ? ome_entries(path, why, wn) : array_entries(path, 0, why, wn)) ? T_OURS : T_OTHER;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a tree swi made, never following a link out of it. */
static int rm_tree(const char *path) { return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* The sibling `.LEAF<tag>` of path (a hidden name in path's folder). */
static int sibling(const char *path, const char *tag, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) + 1 : 0;
    int k = snprintf(out, n, "%.*s.%s%s", dl, path, slash ? slash + 1 : path, tag);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Put the finished replacement `next` in the place of `final` and remove the old store:
 * exchanged in one step (renameat2 RENAME_EXCHANGE) where the file system can, else the old
 * moved aside, the new moved in (the old moved back if that fails). 0, or -1 with err. */
static int swap_in(const char *next, const char *final, char *err, size_t n) {
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, next, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        rm_tree(next); /* now the old store */
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != ENOENT) {
        io__err(err, n, "%s: cannot move the new store into place: %s", final, strerror(errno));
        return -1;
    }
#endif
    char old[4200];
    if (sibling(final, ".swi-old-XXXXXX", old, sizeof old) || !mkdtemp(old)) {
        io__err(err, n, "%s: cannot move the old store aside: %s", final, strerror(errno));
        return -1;
    }
    int had = rename(final, old) == 0; /* onto the empty folder just made */
    if (!had && errno != ENOENT) {
        io__err(err, n, "%s: cannot move the old store aside: %s", final, strerror(errno));
        rmdir(old);
        return -1;
    }
    if (rename(next, final) != 0) {
        int e = errno;
        if (had)
            rename(old, final);
        else
            rmdir(old);
        io__err(err, n, "%s: cannot move the new store into place: %s", final, strerror(e));
        return -1;
    }
    rm_tree(old);
    return 0;
}

/* The job fingerprint of a shared store: written by whoever creates it, compared by every
 * part that joins. 0, or -1 with err. */
static int check_job(const zarr_writer *z, const char *name, char *err, size_t n) {
    const char *job = z->spec.job;
    if (!job || !*job) return 0;
    char path[4200];
    if (join(path, sizeof path, z->store, JOB_FILE)) {
        io__err(err, n, "%s: name too long", name);
        return -1;
    }
    if (put_file(path, job, strlen(job), 1) == 0) return 0;
    if (errno != EEXIST) {
        io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    size_t len = 0;
    unsigned char *b = slurp(path, (size_t)1 << 16, &len, err, n, "the job fingerprint");
    if (!b) return -1;
    int same = len == strlen(job) && memcmp(b, job, len) == 0;
    if (!same)
        io__err(err, n, "%s was started by another job (%.*s); this part's job: %s", name,
                (int)(len > 400 ? 400 : len), (const char *)b, job);
    free(b);
    return same ? 0 : -1;
}

swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n) {
    zarr_writer *z = calloc(1, sizeof *z);
    if (!z) {
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    strip_slash(name, z->final, sizeof z->final);
    snprintf(z->store, sizeof z->store, "%s", z->final);
    z->spec = *spec;
    memcpy(z->chunk, chunk, sizeof z->chunk);
    z->part = part;
    z->parts = parts;
    swi_status bad = SWI_ERR_INVALID_ARG;
    char why[4600] = "", marker[4200];
    const char *what = ome ? "an OME-Zarr image" : "a Zarr array";
    target t = classify(z->final, ome, why, sizeof why);
    if (t == T_OTHER) {
        io__err(err, n,
                "%s: exists and is not %s that swi writes (%s); swi replaces only its own kind of store, "
                "--force or not: remove it or name another output",
                name, what, why);
        goto fail;
    }
    int incomplete =
        t == T_OURS && join(marker, sizeof marker, z->final, MARKER) == 0 && access(marker, F_OK) == 0;
    if (t == T_OURS && !((flags & SWI_STORE_SHARED) && incomplete)) {
        if (!(flags & SWI_STORE_FORCE)) {
            io__err(err, n, "%s: already exists%s (use --force to overwrite)", name,
                    incomplete ? " and is incomplete" : "");
            goto fail;
        }
        /* --force: the new store is written beside the old one, under a hidden name, and
         * takes its place at the last commit; until then the old one stays as it was */
        struct stat st;
        if (flags & SWI_STORE_SHARED) {
            z->swap = 2; /* one name that every part finds */
            if (sibling(z->final, NEXT_SUFFIX, z->store, sizeof z->store) ||
                (mkdir(z->store, 0777) != 0 && errno != EEXIST) || lstat(z->store, &st) != 0 ||
                !S_ISDIR(st.st_mode)) {
                io__err(err, n, "%s: cannot make the replacement %s: %s", name, z->store,
                        errno ? strerror(errno) : "not a directory");
                goto fail;
            }
            target tn = classify(z->store, ome, why, sizeof why);
            if (tn == T_OTHER) {
                io__err(err, n, "%s: the replacement being written, %s, holds what swi did not write (%s)",
                        name, z->store, why);
                goto fail;
            }
        } else {
            z->swap = 1;
            if (sibling(z->final, ".swi-new-XXXXXX", z->store, sizeof z->store) || !mkdtemp(z->store)) {
                io__err(err, n, "%s: cannot make a replacement beside it: %s", name, strerror(errno));
                z->swap = 0;
                goto fail;
            }
            if (stat(z->final, &st) == 0) chmod(z->store, st.st_mode & 07777);
        }
    }
    char path[4200];
    if ((ome ? join(z->dir, sizeof z->dir, z->store, "0") : join(z->dir, sizeof z->dir, z->store, ".")) ||
        join(path, sizeof path, z->dir, ".zarray") || join(marker, sizeof marker, z->store, MARKER)) {
        io__err(err, n, "%s: name too long", name);
        goto fail;
    }
    if (!ome) snprintf(z->dir, sizeof z->dir, "%s", z->store);
    join(path, sizeof path, z->dir, ".zarray");
    if (mkdirs(z->dir) != 0) {
        io__err(err, n, "%s: cannot create the directory: %s", name, strerror(errno));
        goto fail;
    }
    /* The marker first: whoever sees the metadata also sees that the store is unfinished. */
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        io__err(err, n, "%s: cannot write %s: %s", name, MARKER, strerror(errno));
        goto fail;
    }
    close(fd);
    if ((flags & SWI_STORE_SHARED) && check_job(z, name, err, n)) goto fail;
    if (part >= 0) {
        /* a rerun of this part: its old "done" no longer holds */
        char pf[4200];
        part_file(z, part, pf, sizeof pf);
        unlink(pf);
    }
    json_t *j = zarray_json(spec, chunk);
    if (!j) {
        io__err(err, n, "%s: out of memory", name);
        bad = SWI_ERR_NOMEM;
        goto fail;
    }
    int first = 1;
    /* Parts never replace the metadata: whoever links it first wins, the others must agree. */
    if (put_json(path, j, !(flags & SWI_STORE_FORCE) || (flags & SWI_STORE_SHARED) || z->swap) != 0) {
        if (errno != EEXIST) {
            io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
            json_decref(j);
            goto fail;
        }
        first = 0; /* another part created it: it must describe the same array */
        zarr_array *a = calloc(1, sizeof *a);
        swi_status st = a ? SWI_OK : SWI_ERR_NOMEM;
        if (!a) io__err(err, n, "%s: out of memory", name);
        if (a) {
            a->any_leading = 1;
            st = parse_zarray(z->dir, a, err, n);
        }
        if (st == SWI_OK && !same_array(a, spec, chunk)) {
            io__err(err, n, "%s: exists with another shape, chunk or dtype than this run writes", path);
            st = SWI_ERR_INVALID_ARG;
        }
        free(a);
        if (st != SWI_OK) {
            json_decref(j);
            bad = st;
            goto fail;
        }
    }
    json_decref(j);
    if (first && ome) {
        json_t *g = json_pack("{s:i}", "zarr_format", 2);
        const char *leaf = strrchr(z->final, '/');
        char image[4096], lname[512];
        ome_geom geo;
        memset(&geo, 0, sizeof geo);
        if (spec->labels && labels_parent(z->final, image, sizeof image, lname, sizeof lname) == 0)
            image_level_geometry(image, spec->size, &geo);
        json_t *attrs = ome_json(spec, leaf ? leaf + 1 : z->final, &geo);
        char gp[4200], ap[4200];
        int fault = join(gp, sizeof gp, z->store, ".zgroup") || join(ap, sizeof ap, z->store, ".zattrs") ||
                    write_meta(gp, g, err, n) || write_meta(ap, attrs, err, n) ||
                    (spec->labels && register_label(z->final, err, n));
        json_decref(g);
        json_decref(attrs);
        if (fault) goto fail;
    }
    *impl = z;
    return SWI_OK;
fail:
    if (z->swap == 1) rm_tree(z->store);
    free(z);
    return bad;
}

swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n) {
    zarr_writer *z = impl;
    const int64_t *c = z->chunk, *size = z->spec.size;
    const size_t es = store__dtype_size(z->spec.dtype);
    const size_t cbytes = (size_t)(c[0] * c[1] * c[2]) * es;
    unsigned char *chunk = malloc(cbytes);
    if (!chunk) {
        io__err(err, n, "%s: out of memory for a chunk", z->store);
        return SWI_ERR_NOMEM;
    }
    const unsigned char *src = buf;
    swi_status st = SWI_OK;
    for (int64_t p = 0; p < z->spec.planes && st == SWI_OK; p++)
        for (int64_t ci = lo[0] / c[0]; ci * c[0] < hi[0] && st == SWI_OK; ci++)
            for (int64_t cj = lo[1] / c[1]; cj * c[1] < hi[1] && st == SWI_OK; cj++)
                for (int64_t ck = lo[2] / c[2]; ck * c[2] < hi[2] && st == SWI_OK; ck++) {
                    store__gather_chunk(chunk, src, lo, hi, c, size, p, ci, cj, ck, es);
                    unsigned char *enc = NULL;
                    size_t elen = 0;
                    char path[4400];
                    if (z->spec.planes > 1)
                        snprintf(path, sizeof path, "%s/%lld.%lld.%lld.%lld", z->dir, (long long)p,
                                 (long long)ci, (long long)cj, (long long)ck);
                    else
                        snprintf(path, sizeof path, "%s/%lld.%lld.%lld", z->dir, (long long)ci, (long long)cj,
                                 (long long)ck);
                    if (encode(z->spec.codec, chunk, cbytes, (int)es, &enc, &elen) != 0) {
                        io__err(err, n, "%s: cannot compress a chunk (out of memory)", path);
                        st = SWI_ERR_NOMEM;
                    } else if (put_file(path, enc, elen, 0) != 0) {
                        io__err(err, n, "%s: cannot write: %s", path, strerror(errno));
                        st = SWI_ERR_INVALID_ARG;
                    }
                    free(enc);
                }
    free(chunk);
    return st;
}

void zarr__abort(void *impl);

swi_status zarr__commit(void *impl, char *err, size_t n) {
    zarr_writer *z = impl;
    char pf[4200], marker[4200];
    part_file(z, z->part, pf, sizeof pf);
    join(marker, sizeof marker, z->store, MARKER);
    int fd = open(pf, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 || close(fd) != 0) {
        io__err(err, n, "%s: cannot write: %s", pf, strerror(errno));
        zarr__abort(z);
        return SWI_ERR_INVALID_ARG;
    }
    /* Each part marks itself done before looking at the others, so the last one to finish
     * sees them all and marks the store complete. */
    int all = 1;
    for (int p = 0; p < z->parts && all; p++) {
        char q[4200];
        part_file(z, p, q, sizeof q);
        all = access(q, F_OK) == 0;
    }
    swi_status st = SWI_OK;
    if (all) {
        /* whoever removes the marker finishes the store (and alone swaps it in) */
        int won = unlink(marker) == 0;
        if (!won && errno != ENOENT) {
            io__err(err, n, "%s: cannot remove: %s", marker, strerror(errno));
            st = SWI_ERR_INVALID_ARG;
        }
        for (int p = 0; p < z->parts && st == SWI_OK; p++) {
            char q[4200];
            part_file(z, p, q, sizeof q);
            unlink(q);
        }
        char jf[4200];
        if (won && join(jf, sizeof jf, z->store, JOB_FILE) == 0) unlink(jf);
        if (won && z->swap && swap_in(z->store, z->final, err, n) != 0) {
            st = SWI_ERR_INVALID_ARG;
            if (z->swap == 1) rm_tree(z->store);
        }
    }
    free(z);
    return st;
}

int zarr__replaces(const void *impl) { return ((const zarr_writer *)impl)->swap != 0; }

/* swap 2's replacement is every part's: not one part's to remove */
const char *zarr__temporary(const void *impl) {
    const zarr_writer *z = impl;
    return z->swap == 1 ? z->store : NULL;
}

void zarr__abort(void *impl) {
    zarr_writer *z = impl;
    if (z && z->swap == 1) rm_tree(z->store); /* the replacement never took the old store's place */
    free(z);
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
int zarr__geometry(void *impl, double scale[3], double trans[3]) {
    (void)impl;
    for (int k = 0; k < 3; k++) scale[k] = 1, trans[k] = 0;
    return 0;
}
swi_status zarr__create(const char *name, int ome, const swi_store_spec *spec, const int64_t chunk[3],
                        int flags, int part, int parts, void **impl, char *err, size_t n) {
    (void)name, (void)ome, (void)spec, (void)chunk, (void)flags, (void)part, (void)parts, (void)impl;
    return missing(err, n);
}
swi_status zarr__write_box(void *impl, const int64_t lo[3], const int64_t hi[3], const void *buf, char *err,
                           size_t n) {
    (void)impl, (void)lo, (void)hi, (void)buf;
    return missing(err, n);
}
swi_status zarr__commit(void *impl, char *err, size_t n) {
    (void)impl;
    return missing(err, n);
}
void zarr__abort(void *impl) { (void)impl; }
int zarr__replaces(const void *impl) {
    (void)impl;
    return 0;
}
const char *zarr__temporary(const void *impl) {
    (void)impl;
    return NULL;
}

#endif
