/* zarr_codec.c -- Zarr's element types and chunk codecs: dtypes to float, blosc, zstd, zlib
 * and gzip (libdeflate when built in: the same streams, several times faster). */
#include "zarr_internal.h"

#ifdef SWI_HAVE_ZARR

#include <blosc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#ifdef SWI_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

/* ---- dtypes ---- */

int zarr__parse_dtype(const char *s, ztype *t) {
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

int zarr__host_big(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 0;
}

/* n elements of type t at src (stored byte order) to float, as C casts. */
void zarr__to_float(const ztype *t, const unsigned char *src, int64_t n, float *dst) {
    unsigned char tmp[8];
    int swap = t->big != zarr__host_big() && t->size > 1;
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

int zarr__parse_codec(json_t *c, codec *out, const char **id) {
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
size_t zarr__max_stored(codec c, size_t bytes) {
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
int zarr__decode(codec c, const unsigned char *src, size_t len, unsigned char *dst, size_t want, char *why,
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
        z.avail_in = (uInt)len; /* len <= zarr__max_stored(), far below 4 GiB */
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
int zarr__encode(swi_store_codec c, const unsigned char *src, size_t len, int typesize, unsigned char **out,
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

json_t *zarr__codec_json(swi_store_codec c, int typesize) {
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

#endif
