/*
 * fuzz_store_meta.c -- Zarr v2, Zarr v3 and OME-Zarr metadata and chunk decoding
 * (io/zarr_*.c through swi_store_open and swi_store_read_box).
 *
 * Input: one mode byte, a 2-byte little-endian length L, L bytes of metadata, and the rest
 * as one chunk file. Mode % 3 picks the layout, written into a fresh store each time:
 *     0  s.zarr/.zarray = metadata, s.zarr/0.0.0 = chunk           (Zarr v2)
 *     1  s.zarr/zarr.json = metadata, s.zarr/c/0/0/0 = chunk        (Zarr v3)
 *     2  s.ome.zarr/.zattrs = metadata, a fixed level "0" (8^3 uint16, zlib) whose chunk
 *        0.0.0 = chunk                                              (OME-Zarr 0.4)
 * swi_store_open must refuse with a message or describe a volume within the limits; an
 * accepted small volume is read over a box of up to 16^3 from the origin (swi_store_read_box
 * succeeds or fails with a message), and its geometry is positive and finite.
 */
#include "swi_store.h"

#include "fuzz_common.h"

#include <ftw.h>
#include <math.h>
#include <sys/stat.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_store_meta", cond, __VA_ARGS__)

/* Largest volume read (every chunk it touches is decoded; their size is bounded by the
 * reader's own caps relative to the array). */
#define MAX_READ_VOXELS ((int64_t)1 << 18)

static void put(const char *dir, const char *leaf, const uint8_t *data, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "cannot create %s", path);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        CHECK(w > 0, "cannot write %s", path);
        off += (size_t)w;
    }
    close(fd);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void mk(const char *path) { CHECK(mkdir(path, 0700) == 0, "mkdir %s", path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const int mode = data[0] % 3;
    size_t len = (size_t)data[1] | (size_t)data[2] << 8;
    if (len > size - 3) len = size - 3;
    const uint8_t *meta = data + 3, *chunk = data + 3 + len;
    const size_t clen = size - 3 - len;

    char root[600], store[700], sub[800];
    snprintf(root, sizeof root, "%s/s", fuzz_dir());
    struct stat rs;
    CHECK(lstat(root, &rs) != 0 || nftw(root, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0, "cleaning %s", root);
    mk(root);
    snprintf(store, sizeof store, "%s/%s", root, mode == 2 ? "s.ome.zarr" : "s.zarr");
    mk(store);
    if (mode == 0) {
        put(store, ".zarray", meta, len);
        put(store, "0.0.0", chunk, clen);
    } else if (mode == 1) {
        put(store, "zarr.json", meta, len);
        snprintf(sub, sizeof sub, "%s/c", store);
        mk(sub);
        snprintf(sub, sizeof sub, "%s/c/0", store);
        mk(sub);
        snprintf(sub, sizeof sub, "%s/c/0/0", store);
        mk(sub);
        put(sub, "0", chunk, clen);
    } else {
        static const char level[] = "{\"zarr_format\": 2, \"shape\": [8, 8, 8], \"chunks\": [8, 8, 8], "
                                    "\"dtype\": \"<u2\", \"compressor\": {\"id\": \"zlib\", \"level\": 1}, "
                                    "\"fill_value\": 0, \"order\": \"C\", \"filters\": null}";
        put(store, ".zattrs", meta, len);
        put(store, ".zgroup", (const uint8_t *)"{\"zarr_format\": 2}", 18);
        snprintf(sub, sizeof sub, "%s/0", store);
        mk(sub);
        put(sub, ".zarray", (const uint8_t *)level, sizeof level - 1);
        put(sub, "0.0.0", chunk, clen);
    }

    char err[1024] = "";
    swi_store *s = NULL;
    swi_status st = swi_store_open(store, &s, err, sizeof err);
    if (st != SWI_OK) {
        CHECK(s == NULL && err[0], "refused without a message (status %d)", (int)st);
        return 0;
    }
    int64_t sz[3];
    swi_store_size(s, sz);
    double vox = 1;
    for (int a = 0; a < 3; a++) {
        CHECK(sz[a] >= 1 && sz[a] <= SWI_MAX_AXIS, "size[%d] = %lld", a, (long long)sz[a]);
        vox *= (double)sz[a];
    }
    CHECK(vox <= (double)((int64_t)1 << 40), "%.0f voxels accepted", vox);
    double scale[3], trans[3];
    swi_store_geometry(s, scale, trans);
    for (int a = 0; a < 3; a++)
        CHECK(scale[a] > 0 && isfinite(scale[a]) && isfinite(trans[a]), "geometry of axis %d: %g %g", a,
              scale[a], trans[a]);
    (void)swi_store_fill_value(s);
    if (vox <= (double)MAX_READ_VOXELS) {
        int64_t lo[3] = {0, 0, 0}, hi[3];
        for (int a = 0; a < 3; a++) hi[a] = sz[a] < 16 ? sz[a] : 16;
        float *buf = malloc((size_t)(hi[0] * hi[1] * hi[2]) * sizeof *buf);
        if (buf) {
            err[0] = '\0';
            st = swi_store_read_box(s, lo, hi, buf, err, sizeof err);
            CHECK(st == SWI_OK || err[0], "read_box failed without a message (status %d)", (int)st);
            free(buf);
        }
    }
    swi_store_close(s);
    return 0;
}
