/*
 * fuzz_common.h -- helpers shared by the fuzz targets: the readers under test take
 * paths, so each input is written to a file in a per-process scratch directory.
 */
#ifndef SWI_FUZZ_COMMON_H
#define SWI_FUZZ_COMMON_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The targets' own output is closed by run.sh (-close_fd_mask=3); a failed check must
 * still be seen, so it goes to a copy of stderr taken before libFuzzer closes it. */
static int fuzz_report_fd = 2;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    int fd = dup(2);
    if (fd >= 0) fuzz_report_fd = fd;
    return 0;
}

__attribute__((format(printf, 4, 5), noreturn)) static void
fuzz_check_failed(const char *target, int line, const char *cond, const char *fmt, ...) {
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "%s: check failed at line %d: %s: ", target, line, cond);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg) n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof msg - 1) n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    if (write(fuzz_report_fd, msg, (size_t)n) < 0) {
        /* nothing more to do */
    }
    abort();
}

#define FUZZ_CHECK(target, cond, ...)                                         \
    do {                                                                      \
        if (!(cond)) fuzz_check_failed(target, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

/* A private directory (created once, under $TMPDIR or /tmp), removed at exit. */
static char fuzz_dir_path[512];

static void fuzz_dir_cleanup(void) {
    char cmd[600];
    if (!fuzz_dir_path[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) {
        /* best effort */
    }
}

__attribute__((unused)) static const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/swi-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}

/* Write `data` to fuzz_dir()/name (replacing it); returns the path (static buffer per name
 * slot: callers use at most a few names). */
__attribute__((unused)) static const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size,
                                                           char *path, size_t path_len) {
    snprintf(path, path_len, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            perror(path);
            abort();
        }
        off += (size_t)w;
    }
    close(fd);
    return path;
}

#endif
