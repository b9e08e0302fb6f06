/*
 * gzip_write.c -- write a generated volume through swi_io, for gzip_check.py:
 *   gzip_write OUT I J K PLANES float|noise|labels
 * Voxel (i, j, k) of plane c holds sin(0.001 x) * 100 (float), a 32-bit hash of x as float
 * bits (noise: what deflate cannot shrink) or x % 7 (labels), with
 * x = ((c * I + i) * J + j) * K + k: the [planes][i][j][k] array in C order.
 */
#include "swi_io.h"

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: gzip_write OUT I J K PLANES float|noise|labels\n");
        return 2;
    }
    int64_t size[3] = {atoll(argv[2]), atoll(argv[3]), atoll(argv[4])}, planes = atoll(argv[5]);
    int labels = strcmp(argv[6], "labels") == 0, noise = strcmp(argv[6], "noise") == 0;
    const double spacing[3] = {1, 1, 1};
    char err[768];
    swi_volume v;
    if (swi_volume_make(&v, size, spacing, err, sizeof err) != SWI_OK) {
        fprintf(stderr, "gzip_write: %s\n", err);
        return 1;
    }
    const int64_t n = size[0] * size[1] * size[2] * planes;
    void *data = malloc((size_t)n * (labels ? 1 : 4));
    if (!data) return 1;
    for (int64_t x = 0; x < n; x++) {
        if (labels) {
            ((uint8_t *)data)[x] = (uint8_t)(x % 7);
        } else if (noise) {
            uint32_t h = (uint32_t)x * 2654435761u;
            h ^= h >> 15;
            h *= 2246822519u;
            h ^= h >> 13;
            memcpy((float *)data + x, &h, 4);
        } else
            ((float *)data)[x] = (float)(sin(0.001 * (double)x) * 100.0);
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || swi_volume_write_fd(fd, argv[1], &v, data, labels ? SWI_DTYPE_UINT8 : SWI_DTYPE_FLOAT32,
                                      labels ? SWI_IO_LABELS : SWI_IO_SCORES, planes, labels ? 7 : planes,
                                      NULL, err, sizeof err) != SWI_OK) {
        fprintf(stderr, "gzip_write: %s\n", fd < 0 ? "cannot create the file" : err);
        free(data);
        return 1;
    }
    free(data);
    return 0;
}
