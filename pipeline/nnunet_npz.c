/* nnunet_npz.c -- see nnunet_npz.h. */
#include "nnunet_npz.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SWI_HAVE_LIBZIP
#include <zip.h>

int nn_npz_available(void) { return 1; }

/* The .npy header (format 1.0): magic, version, length, the dict padded to 64 bytes. */
static size_t npy_header(char *h, size_t n, const int64_t *shape, int rank) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < rank; i++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld,%s", (long long)shape[i],
                        i + 1 < rank ? " " : "");
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hl = (size_t)len + pad + 1;
    if (10 + hl > n) return 0;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)(hl & 0xff);
    h[9] = (char)(hl >> 8);
    memcpy(h + 10, dict, (size_t)len);
    memset(h + 10 + len, ' ', pad);
    h[10 + hl - 1] = '\n';
    return 10 + hl;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int nn_npz_write(int fd, const char *path, const char *name, const float *x, const int64_t *shape, int rank,
                 char *err) {
    char header[512];
    size_t hl = npy_header(header, sizeof header, shape, rank);
    size_t count = 1;
    for (int i = 0; i < rank; i++) count *= (size_t)shape[i];
    const size_t bytes = hl + count * sizeof(float);
    char *npy = malloc(bytes);
    if (!npy || !hl) {
        free(npy);
        close(fd);
        cli_err(err, "%s: out of memory for the probabilities", path);
        return 1;
    }
    memcpy(npy, header, hl);
    memcpy(npy + hl, x, count * sizeof(float)); /* little-endian hosts */
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *mem = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *z = mem ? zip_open_from_source(mem, ZIP_TRUNCATE, &ze) : NULL;
    int rc = 1;
    char entry[128];
    snprintf(entry, sizeof entry, "%s.npy", name);
    if (!z) goto done;
    zip_source_keep(mem);
    zip_source_t *data = zip_source_buffer(z, npy, bytes, 0);
    zip_int64_t idx = data ? zip_file_add(z, entry, data, ZIP_FL_OVERWRITE) : -1;
    if (idx < 0) {
        zip_source_free(data);
        zip_discard(z);
        goto done;
    }
    zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_DEFLATE, 1);
    if (zip_close(z) != 0) {
        zip_discard(z);
        goto done;
    }
    zip_stat_t st;
    if (zip_source_stat(mem, &st) != 0 || zip_source_open(mem) != 0) goto done;
    char buf[1 << 16];
    zip_int64_t got;
    rc = 0;
    while ((got = zip_source_read(mem, buf, sizeof buf)) > 0)
        if (write_all(fd, buf, (size_t)got)) {
            rc = 1;
            break;
        }
    if (got < 0) rc = 1;
    zip_source_close(mem);
done:
    if (mem) zip_source_free(mem);
    free(npy);
    if (close(fd) != 0) rc = 1;
    if (rc) cli_err(err, "%s: cannot write the probabilities (.npz)", path);
    zip_error_fini(&ze);
    return rc;
}
#else
int nn_npz_available(void) { return 0; }

int nn_npz_write(int fd, const char *path, const char *name, const float *x, const int64_t *shape, int rank,
                 char *err) {
    (void)name;
    (void)x;
    (void)shape;
    (void)rank;
    close(fd);
    cli_err(err, "%s: swi was built without libzip (apt-get install libzip-dev and rebuild)", path);
    return 1;
}
#endif
