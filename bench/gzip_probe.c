/*
 * gzip_probe.c -- .nii.gz speed: swi_io's libdeflate paths (io/gzip.c) against zlib, the
 * numbers behind the levels in io/io_gzip.h and the read target (bench/RESULTS.md).
 * Not a test; a diagnostic kept with the benchmarks.
 *
 *   cc -O2 -DSWI_HAVE_LIBDEFLATE -Iio -Iinclude bench/gzip_probe.c io/gzip.c io/files.c fuzz/io_err.c \
 *      -ldeflate -lz -lpthread -o gzip_probe
 *   gzip_probe read FILE.gz           zlib gzread vs io__gz_read, whole stream, best of 3
 *   gzip_probe write FILE [LEVEL...]  FILE's bytes to a temporary .gz: zlib gzwrite and
 *                                     libdeflate on 1 thread, on every core, and on every
 *                                     core storing once a batch shrinks by < 10 %
 */
#define _GNU_SOURCE
#include "io_gzip.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) return NULL;
    *len = (size_t)st.st_size;
    unsigned char *b = malloc(*len ? *len : 1);
    if (b && fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static size_t zlib_read(const char *path, unsigned char *dst, size_t cap) {
    gzFile g = gzopen(path, "rb");
    gzbuffer(g, 1u << 20);
    size_t got = 0;
    int r;
    while (got < cap &&
           (r = gzread(g, dst + got, (unsigned)(cap - got > (1u << 30) ? 1u << 30 : cap - got))) > 0)
        got += (size_t)r;
    gzclose(g);
    return got;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: gzip_probe read FILE.gz | write FILE [LEVEL...]\n");
        return 2;
    }
    if (strcmp(argv[1], "read") == 0) {
        size_t cap = (size_t)1 << 34, got;
        unsigned char *dst = malloc(cap); /* lazily backed */
        double tz = 1e9, td = 1e9;
        got = zlib_read(argv[2], dst, cap);
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now();
            zlib_read(argv[2], dst, cap);
            double t1 = now();
            if (io__gz_read(argv[2], dst, got, NULL) != 0) {
                fprintf(stderr, "io__gz_read failed\n");
                return 1;
            }
            double t2 = now();
            tz = t1 - t0 < tz ? t1 - t0 : tz;
            td = t2 - t1 < td ? t2 - t1 : td;
        }
        printf("read %s: %zu bytes: zlib %.3f s, libdeflate %.3f s (%.2fx)\n", argv[2], got, tz, td, tz / td);
        return 0;
    }
    size_t len;
    unsigned char *in = slurp(argv[2], &len);
    if (!in) return 1;
    char tmp[] = "/tmp/gzip_probe_XXXXXX";
    int fd = mkstemp(tmp);
    close(fd);
    for (int a = 3; a < argc; a++) {
        int level = atoi(argv[a]);
        if (level >= 0 && level <= 9) {
            double t0 = now();
            char mode[16];
            snprintf(mode, sizeof mode, "wb%d", level);
            gzFile g = gzopen(tmp, mode);
            gzbuffer(g, 1u << 20);
            for (size_t o = 0; o < len; o += 1u << 20)
                gzwrite(g, in + o, (unsigned)(len - o < (1u << 20) ? len - o : 1u << 20));
            gzclose(g);
            double t = now() - t0;
            struct stat st;
            stat(tmp, &st);
            printf("write level %2d zlib             : %.3f s, %.1f%% of %zu bytes\n", level, t,
                   100.0 * st.st_size / len, len);
        }
        for (int all = 0; all < 3; all++) {
            double t0 = now();
            int wfd = open(tmp, O_WRONLY | O_TRUNC);
            io_gzw *z = io__gzw_open(wfd, level, all == 2, all ? len : 0);
            for (size_t o = 0; o < len; o += 1u << 20)
                io__gzw_write(z, in + o, len - o < (1u << 20) ? len - o : 1u << 20);
            io__gzw_close(z);
            double t = now() - t0;
            struct stat st;
            stat(tmp, &st);
            printf("write level %2d libdeflate, %s: %.3f s, %.1f%%\n", level,
                   all == 2 ? "all cores, adaptive"
                   : all    ? "all cores"
                            : "1 thread ",
                   t, 100.0 * st.st_size / len);
        }
    }
    unlink(tmp);
    free(in);
    return 0;
}
