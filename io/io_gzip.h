/*
 * io_gzip.h -- gzip through libdeflate for the NIfTI module (gzip.c; not installed).
 * Without libdeflate every function reports that it cannot help and zlib does the work.
 */
#ifndef SWI_IO_GZIP_H
#define SWI_IO_GZIP_H

#include <stddef.h>

#include "swi_io.h"

/* Bytes per independently compressed gzip member: large enough that the members cost
 * nothing in ratio (< 0.1 %), small enough that a few cores share a label map. */
#define IO_GZ_BLOCK ((size_t)1 << 21)
#define IO_GZ_MAX_THREADS 16
/* libdeflate levels of .nii.gz outputs (bench/RESULTS.md, "Compression"): float scores,
 * the fastest level, stored once they prove to shrink by less than 25 % (adaptive);
 * label maps, level 6 (smaller than zlib's 6, faster than zlib's 1). */
#define IO_GZ_LEVEL_FLOAT 1
#define IO_GZ_LEVEL_LABELS 6
/* io__gz_read could not do it exactly: read through zlib instead. */
#define IO_GZ_FALLBACK 1
/* io__gz_read found corrupt data (a deflate error or a CRC mismatch). */
#define IO_GZ_CORRUPT 2
/* io__gz_read was cancelled (checked between gzip members). */
#define IO_GZ_CANCELLED 3

/* Whether libdeflate is built in. */
int io__gz_fast(void);

/* Whether the file at `path` starts like gzip data (0 without libdeflate). */
int io__gz_is_gzip(const char *path);

/* The first `want` decompressed bytes of the gzip file at `path` into dst: 0,
 * IO_GZ_CORRUPT, IO_GZ_CANCELLED (cancel, NULL: none, asked between members), or
 * IO_GZ_FALLBACK (not a regular file, not gzip, unreadable, short, or without libdeflate).
 * Never blocks on a FIFO or device. */
int io__gz_read(const char *path, unsigned char *dst, size_t want, const swi_io_cancel *cancel);

/* A gzip writer on fd (owned from now on: closed by io__gzw_close): blocks compressed at
 * `level` (0..12) on up to one thread per core; adaptive: once a batch of blocks shrinks
 * by less than 25 %, the rest is stored (level 0). total_hint is the expected stream size
 * (it sets how many threads are worth starting). NULL when out of memory or without
 * libdeflate (fd is then still the caller's). */
typedef struct io_gzw io_gzw;
io_gzw *io__gzw_open(int fd, int level, int adaptive, size_t total_hint);
/* 0, or the errno of the first failure (later calls keep returning it). */
int io__gzw_write(io_gzw *z, const void *buf, size_t n);
/* Write what is buffered, close fd and free z: 0 or an errno. */
int io__gzw_close(io_gzw *z);

#endif
