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
 * fuzz target reading cards) has it. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void io__err(char *err, size_t n, const char *fmt, ...) {
    if (!err || n == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    /* One line: zlib's and libpng's messages, and file names, may hold control bytes. */
    size_t len = strlen(err);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f) err[i] = ' ';
    while (len > 0 && err[len - 1] == ' ') err[--len] = '\0';
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
