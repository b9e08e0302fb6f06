/* io_err.c -- io__err (io/volume.c) for fuzz targets that link io/files.c without the rest
 * of swi_io: fuzz_cli_options reads model cards through swi_io_open_regular (and
 * bench/gzip_probe.c builds with it). */
#include "io_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void io__err(char *err, size_t n, const char *fmt, ...) {
    if (!err || n == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    size_t len = strlen(err); /* one line, as volume.c makes it */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f) err[i] = ' ';
}
