/*
 * gzip.c -- .nii.gz bytes through libdeflate when swi_io is built with it (io_gzip.h).
 *
 * Writing: the stream is cut into blocks of IO_GZ_BLOCK bytes, each compressed on its own
 * into a complete gzip member, several blocks at once on as many threads as there are
 * cores, and the members written in order. Concatenated members are one valid gzip file
 * (RFC 1952, 2.2): zlib, niftilib, nibabel and gzip -t read it as one stream.
 *
 * Reading: the whole file is mapped and its members decompressed one after the other
 * straight into the caller's buffer, each checked against its CRC (which zlib, reading
 * only the bytes wanted, never reaches: a corrupt member is caught here, not there).
 * Whatever else this path does not handle exactly (a read or map failure, a stream that
 * ends early, more data than the caller wants in one member and not enough room to take
 * it) it reports as IO_GZ_FALLBACK and the caller reads through zlib, which then names
 * the problem as before.
 */
#include "io_gzip.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef SWI_HAVE_LIBDEFLATE
#include <libdeflate.h>

int io__gz_fast(void) { return 1; }

int io__gz_is_gzip(const char *path) {
    int fd = swi_io_open_regular(path, NULL, NULL, 0);
    if (fd < 0) return 0;
    unsigned char m[2];
    ssize_t r = read(fd, m, 2);
    close(fd);
    return r == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

/* ---- reading ----------------------------------------------------------------------- */

int io__gz_read(const char *path, unsigned char *dst, size_t want, const swi_io_cancel *cancel) {
    int fd = swi_io_open_regular(path, NULL, NULL, 0);
    if (fd < 0) return IO_GZ_FALLBACK;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 18) {
        close(fd);
        return IO_GZ_FALLBACK;
    }
    const size_t len = (size_t)st.st_size;
    const unsigned char *in = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (in == MAP_FAILED) return IO_GZ_FALLBACK;
    madvise((void *)in, len, MADV_SEQUENTIAL);
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    int rc = IO_GZ_FALLBACK;
    size_t pos = 0, got = 0;
    unsigned char *spill = NULL; /* a last member larger than what is left of dst */
    if (!d) goto out;
    while (got < want) {
        if (cancel && cancel->cancelled && cancel->cancelled(cancel->user)) {
            rc = IO_GZ_CANCELLED; /* between members: swi's own files stop within 2 MB */
            goto out;
        }
        if (len - pos < 18 || in[pos] != 0x1f || in[pos + 1] != 0x8b) goto out; /* short: zlib reports it */
        size_t used = 0, out = 0;
        enum libdeflate_result r =
            libdeflate_gzip_decompress_ex(d, in + pos, len - pos, dst + got, want - got, &used, &out);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            /* The member holds more than is wanted (data after the voxels): take it into
             * a buffer sized by its trailer's ISIZE when that can be trusted. */
            const unsigned char *t = in + len - 4;
            size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
            if (isize <= want - got || isize > ((size_t)1 << 31)) goto out;
            spill = malloc(isize);
            if (!spill) goto out;
            r = libdeflate_gzip_decompress_ex(d, in + pos, len - pos, spill, isize, &used, &out);
            if (r != LIBDEFLATE_SUCCESS || out < want - got) goto out;
            memcpy(dst + got, spill, want - got);
            got = want;
            break;
        }
        if (r == LIBDEFLATE_BAD_DATA) {
            rc = IO_GZ_CORRUPT; /* a deflate error or a CRC that does not match */
            goto out;
        }
        if (r != LIBDEFLATE_SUCCESS) goto out;
        pos += used;
        got += out;
    }
    rc = 0;
out:
    free(spill);
    libdeflate_free_decompressor(d);
    munmap((void *)in, len);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------- */

typedef struct gz_job {
    struct libdeflate_compressor *c;
    const unsigned char *in;
    size_t in_len;
    unsigned char *out;
    size_t out_cap, out_len;
} gz_job;

struct io_gzw {
    int fd;
    int threads;
    int adaptive;      /* store the rest once a batch compresses by less than 25 % */
    int storing;       /* the jobs' compressors are level 0 now */
    unsigned char *in; /* threads x IO_GZ_BLOCK */
    size_t fill;       /* bytes in `in` */
    gz_job *jobs;
    int failed; /* errno of the first failed write, or ENOMEM */
};

static void *compress_job(void *arg) {
    gz_job *j = arg;
    j->out_len = libdeflate_gzip_compress(j->c, j->in, j->in_len, j->out, j->out_cap);
    return NULL;
}

/* 0, or the errno of the failed write. */
static int write_all(int fd, const unsigned char *p, size_t n) { return io__write_all(fd, p, n) ? errno : 0; }

/* Compress what is buffered (up to `threads` blocks, in parallel) and write it. */
static int flush_blocks(io_gzw *z) {
    if (z->failed || z->fill == 0) return z->failed;
    int nb = (int)((z->fill + IO_GZ_BLOCK - 1) / IO_GZ_BLOCK);
    pthread_t tid[IO_GZ_MAX_THREADS];
    int started[IO_GZ_MAX_THREADS] = {0};
    for (int b = 0; b < nb; b++) {
        gz_job *j = &z->jobs[b];
        j->in = z->in + (size_t)b * IO_GZ_BLOCK;
        j->in_len = b < nb - 1 ? IO_GZ_BLOCK : z->fill - (size_t)b * IO_GZ_BLOCK;
        /* the last block runs here; the others on threads, inline if one cannot start */
        if (b < nb - 1 && pthread_create(&tid[b], NULL, compress_job, j) == 0)
            started[b] = 1;
        else if (b < nb - 1)
            compress_job(j);
    }
    compress_job(&z->jobs[nb - 1]);
    for (int b = 0; b < nb; b++)
        if (started[b]) pthread_join(tid[b], NULL);
    size_t out = 0;
    for (int b = 0; b < nb && !z->failed; b++) {
        out += z->jobs[b].out_len;
        if (z->jobs[b].out_len == 0)
            z->failed = EIO; /* cannot happen with the bound's room; never write a hole */
        else
            z->failed = write_all(z->fd, z->jobs[b].out, z->jobs[b].out_len);
    }
    /* Data that deflate shrinks by less than a quarter (float scores: 7-15 % at level 1, for
     * 5-20x the time of storing) is stored from here on; the stream stays valid gzip. */
    if (z->adaptive && !z->storing && !z->failed && out > z->fill / 4 * 3) {
        for (int b = 0; b < z->threads; b++) {
            struct libdeflate_compressor *c = libdeflate_alloc_compressor(0);
            if (!c) break; /* keep compressing: slower, still right */
            libdeflate_free_compressor(z->jobs[b].c);
            z->jobs[b].c = c;
        }
        z->storing = 1;
    }
    z->fill = 0;
    return z->failed;
}

io_gzw *io__gzw_open(int fd, int level, int adaptive, size_t total_hint) {
    io_gzw *z = calloc(1, sizeof *z);
    if (!z) return NULL;
    z->fd = fd;
    z->adaptive = adaptive;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int t = cpus < 1 ? 1 : cpus > IO_GZ_MAX_THREADS ? IO_GZ_MAX_THREADS : (int)cpus;
    /* no more threads than blocks: a small label map stays one member */
    size_t blocks = total_hint / IO_GZ_BLOCK + 1;
    if ((size_t)t > blocks) t = (int)blocks;
    z->threads = t;
    z->in = malloc((size_t)t * IO_GZ_BLOCK);
    z->jobs = calloc((size_t)t, sizeof *z->jobs);
    if (!z->in || !z->jobs) goto fail;
    for (int b = 0; b < t; b++) {
        gz_job *j = &z->jobs[b];
        if (!(j->c = libdeflate_alloc_compressor(level))) goto fail;
        j->out_cap = libdeflate_gzip_compress_bound(j->c, IO_GZ_BLOCK);
        if (!(j->out = malloc(j->out_cap))) goto fail;
    }
    return z;
fail:
    z->fd = -1;
    io__gzw_close(z);
    return NULL;
}

int io__gzw_write(io_gzw *z, const void *buf, size_t n) {
    const unsigned char *p = buf;
    const size_t cap = (size_t)z->threads * IO_GZ_BLOCK;
    while (n > 0 && !z->failed) {
        size_t take = cap - z->fill < n ? cap - z->fill : n;
        memcpy(z->in + z->fill, p, take);
        z->fill += take;
        p += take;
        n -= take;
        if (z->fill == cap) flush_blocks(z);
    }
    return z->failed;
}

int io__gzw_close(io_gzw *z) {
    if (!z) return 0;
    int rc = 0;
    if (z->fd >= 0) {
        /* an empty stream is still one (empty) member: a valid gzip file */
        if (z->fill == 0 && !z->failed && z->jobs && z->jobs[0].c) {
            z->jobs[0].in = z->in;
            z->jobs[0].in_len = 0;
            compress_job(&z->jobs[0]);
            z->failed = z->jobs[0].out_len ? write_all(z->fd, z->jobs[0].out, z->jobs[0].out_len) : EIO;
        } else {
            flush_blocks(z);
        }
        rc = z->failed;
        if (close(z->fd) != 0 && !rc) rc = errno ? errno : EIO;
    }
    if (z->jobs)
        for (int b = 0; b < z->threads; b++) {
            libdeflate_free_compressor(z->jobs[b].c);
            free(z->jobs[b].out);
        }
    free(z->jobs);
    free(z->in);
    free(z);
    return rc;
}

#else /* without libdeflate: zlib does it all (nifti_read.c, nifti_write.c) */

int io__gz_fast(void) { return 0; }
int io__gz_is_gzip(const char *path) {
    (void)path;
    return 0;
}
int io__gz_read(const char *path, unsigned char *dst, size_t want, const swi_io_cancel *cancel) {
    (void)path, (void)dst, (void)want, (void)cancel;
    return IO_GZ_FALLBACK;
}
io_gzw *io__gzw_open(int fd, int level, int adaptive, size_t total_hint) {
    (void)fd, (void)level, (void)adaptive, (void)total_hint;
    return NULL;
}
int io__gzw_write(io_gzw *z, const void *buf, size_t n) {
    (void)z, (void)buf, (void)n;
    return EINVAL;
}
int io__gzw_close(io_gzw *z) {
    (void)z;
    return 0;
}

#endif
