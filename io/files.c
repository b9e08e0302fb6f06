/* files.c -- opening what a user names without blocking, and refusing what is not a
 * regular file.
 *
 * open(2) on a FIFO blocks until a writer appears, and a read from a character device
 * may never end; a header, chunk, card or data file that is one of these must be refused,
 * not waited for. Files are opened with O_NONBLOCK (which makes open return at once on a
 * FIFO), checked with fstat, and only then put back into blocking mode. Libraries that
 * open by name themselves (ITK, HDF5, niftilib) are handed a path only after
 * swi_io_check_regular has looked at it with stat, which never blocks. The message helper
 * every module reports through lives here too, so a program linking only this file (a
 * fuzz target reading cards) has it; and the whole-file reads and writes the store
 * formats and the ITK and DCMTK writers share. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void io__err(char *err, size_t n, const char *fmt, ...) {
    if (!err || n == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    /* zlib's and libpng's messages, and file names, may hold control bytes */
    swi_message_one_line(err);
}

const char *swi_io_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

int swi_io_open_regular(const char *path, int64_t *size, char *err, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        io__err(err, n, "%s: cannot examine: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: is %s, not a regular file", path, swi_io_file_kind(st.st_mode));
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (size) *size = (int64_t)st.st_size;
    return fd;
}

swi_status swi_io_check_regular(const char *path, int64_t *size, char *err, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: is %s, not a regular file", path, swi_io_file_kind(st.st_mode));
        return SWI_ERR_IO;
    }
    if (size) *size = (int64_t)st.st_size;
    return SWI_OK;
}

int io__join(char *out, size_t n, const char *dir, const char *leaf) {
    int k = snprintf(out, n, "%s/%s", dir, leaf);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int io__write_all(int fd, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

unsigned char *io__read_file(const char *path, size_t max, size_t *len, char *err, size_t n,
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
        io__err(err, n, "%s: %s is %s, more than the %s it can be", path, what,
                swi_format_bytes((size_t)size, b1, sizeof b1), swi_format_bytes(max, b2, sizeof b2));
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

int swi_io_json_depth(const char *text, size_t len) {
    int depth = 0, deepest = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        const char ch = text[i];
        if (in_string) {
            if (ch == '\\')
                i++; /* the escaped byte cannot end the string */
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > deepest) deepest = depth;
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            depth--;
        }
    }
    return deepest;
}

int io__put_file(const char *path, const void *data, size_t len, int exclusive) {
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
    if (io__write_all(fd, data, len) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
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

swi_status io__copy_into(const char *tmp, int fd, const char *name, char *err, size_t n) {
    int in = open(tmp, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        io__err(err, n, "%s: write failed: %s", name, strerror(errno));
        return SWI_ERR_IO;
    }
    const size_t cap = (size_t)1 << 20;
    char *buf = malloc(cap);
    swi_status st = buf ? SWI_OK : SWI_ERR_NOMEM;
    if (!buf) io__err(err, n, "%s: out of memory", name);
    while (st == SWI_OK) {
        ssize_t r = read(in, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            io__err(err, n, "%s: write failed: %s", name, strerror(errno));
            st = SWI_ERR_IO;
            break;
        }
        if (r == 0) break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(fd, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                io__err(err, n, "%s: write failed: %s", name, w < 0 ? strerror(errno) : "no progress");
                st = SWI_ERR_IO;
                break;
            }
            off += w;
        }
    }
    free(buf);
    close(in);
    return st;
}
