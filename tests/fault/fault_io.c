/*
 * fault_io.c -- LD_PRELOAD shim: write failures on chosen files, one at a time.
 *
 * Counts write(), pwrite(), copy_file_range() (its output), fsync() and fdatasync() calls on
 * descriptors whose file lies under $SWI_FAULT_IO_DIR, and makes the $SWI_FAULT_IO_AT-th of them fail with errno
 * $SWI_FAULT_IO_ERRNO (default ENOSPC, "no space left on device", what /dev/full and a
 * full disk give). With $SWI_FAULT_IO_COUNT set to a file name, the number of counted
 * calls is written there at exit, so a test can walk every one.
 *
 * With $SWI_FAULT_IO_NAMES=1, rename(), renameat2(), link() and mkdir() of names under
 * $SWI_FAULT_IO_DIR are counted (and failed) with them: the steps of a store's commit.
 *
 * Only calls that reach the dynamic symbols are seen: zlib's writes, swi_io's PNG writer
 * (libpng's output goes through write(2), io/preview.c), libhdf5's (its sec2 driver writes
 * with pwrite or write) and the command's own are; stdio's internal writes would not be.
 * Under AddressSanitizer set ASAN_OPTIONS=verify_asan_link_order=0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static const char *dir;
static size_t dir_len;
static long long fail_at = -1;
static int fail_errno = ENOSPC;
static atomic_llong counted;
static const char *count_file;
static int names;

static void report(void) {
    if (!count_file) return;
    FILE *f = fopen(count_file, "w");
    if (f) {
        fprintf(f, "%lld\n", (long long)atomic_load(&counted));
        fclose(f);
    }
}

__attribute__((constructor)) static void init(void) {
    dir = getenv("SWI_FAULT_IO_DIR");
    dir_len = dir ? strlen(dir) : 0;
    const char *s = getenv("SWI_FAULT_IO_AT");
    fail_at = s && *s ? atoll(s) : -1;
    s = getenv("SWI_FAULT_IO_ERRNO");
    if (s && *s) fail_errno = atoi(s);
    s = getenv("SWI_FAULT_IO_NAMES");
    names = s && *s == '1';
    count_file = getenv("SWI_FAULT_IO_COUNT");
    if (count_file && *count_file)
        atexit(report);
    else
        count_file = NULL;
}

/* Is fd a file under dir? Then count the call; 1 when it is the one to fail. */
static int should_fail(int fd) {
    if (!dir_len) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = '\0';
    if (strncmp(target, dir, dir_len) != 0 || target[dir_len] != '/') return 0;
    long long k = atomic_fetch_add(&counted, 1) + 1;
    return k == fail_at;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*copy_fn)(int, off_t *, int, off_t *, size_t, unsigned);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*sync_fn)(int);

ssize_t write(int fd, const void *buf, size_t n) {
    static write_fn real;
    if (!real) real = (write_fn)dlsym(RTLD_NEXT, "write");
    if (should_fail(fd)) {
        errno = fail_errno;
        return -1;
    }
    return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    static pwrite_fn real;
    if (!real) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (should_fail(fd)) {
        errno = fail_errno;
        return -1;
    }
    return real(fd, buf, n, off);
}

/* the kernel's copy (swi_io's HDF5 writer copies a file before adding a dataset to it) */
ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t n, unsigned flags) {
    static copy_fn real;
    if (!real) real = (copy_fn)dlsym(RTLD_NEXT, "copy_file_range");
    if (should_fail(out)) {
        errno = fail_errno;
        return -1;
    }
    return real(in, in_off, out, out_off, n, flags);
}

/* fsync and fdatasync report a failed flush as EIO (ENOSPC shows up at write time) */
static int sync_call(const char *name, sync_fn *real, int fd) {
    if (!*real) *real = (sync_fn)dlsym(RTLD_NEXT, name);
    if (should_fail(fd)) {
        errno = fail_errno == ENOSPC ? EIO : fail_errno;
        return -1;
    }
    return (*real)(fd);
}

int fsync(int fd) {
    static sync_fn real;
    return sync_call("fsync", &real, fd);
}

int fdatasync(int fd) {
    static sync_fn real;
    return sync_call("fdatasync", &real, fd);
}

/* Is path (relative: to the working directory) under dir? Then count the call; 1 when it
 * is the one to fail. */
static int should_fail_name(const char *path) {
    if (!dir_len || !names || !path) return 0;
    char abs[4096];
    if (path[0] != '/') {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) return 0;
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
        path = abs;
    }
    if (strncmp(path, dir, dir_len) != 0 || path[dir_len] != '/') return 0;
    long long k = atomic_fetch_add(&counted, 1) + 1;
    return k == fail_at;
}

typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);
typedef int (*mkdir_fn)(const char *, mode_t);

int rename(const char *from, const char *to) {
    static rename_fn real;
    if (!real) real = (rename_fn)dlsym(RTLD_NEXT, "rename");
    if (should_fail_name(to)) {
        errno = fail_errno == ENOSPC ? EIO : fail_errno;
        return -1;
    }
    return real(from, to);
}

int link(const char *from, const char *to) {
    static rename_fn real;
    if (!real) real = (rename_fn)dlsym(RTLD_NEXT, "link");
    if (should_fail_name(to)) {
        errno = fail_errno;
        return -1;
    }
    return real(from, to);
}

int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags) {
    static renameat2_fn real;
    if (!real) real = (renameat2_fn)dlsym(RTLD_NEXT, "renameat2");
    if (should_fail_name(to)) {
        errno = fail_errno == ENOSPC ? EIO : fail_errno;
        return -1;
    }
    return real(fd1, from, fd2, to, flags);
}

int mkdir(const char *path, mode_t mode) {
    static mkdir_fn real;
    if (!real) real = (mkdir_fn)dlsym(RTLD_NEXT, "mkdir");
    if (should_fail_name(path)) {
        errno = fail_errno;
        return -1;
    }
    return real(path, mode);
}
