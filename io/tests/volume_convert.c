/*
 * volume_convert.c -- for formats.py: read a volume with swi_io and write it again.
 *   volume_convert IN OUT        OUT in the format its name asks for (float32 image, or
 *                                uint8 labels with --labels), with IN's geometry
 *   volume_convert --raw IN OUT  the voxels as float32, [i][j][k], k fastest
 * Prints nothing on success; one line and exit 1 on error.
 */
#include "swi_io.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int raw = argc > 1 && strcmp(argv[1], "--raw") == 0;
    int labels = argc > 1 && strcmp(argv[1], "--labels") == 0;
    int a = 1 + (raw || labels);
    if (argc != a + 2) {
        fprintf(stderr, "usage: volume_convert [--raw | --labels] IN OUT\n");
        return 2;
    }
    swi_volume v;
    char err[768];
    if (swi_volume_open(argv[a], &v, err, sizeof err) != SWI_OK) {
        printf("error %s\n", err);
        return 1;
    }
    int64_t n = swi_volume_voxels(&v);
    float *x = malloc((size_t)n * sizeof *x);
    if (!x || swi_volume_read(&v, x, NULL, err, sizeof err) != SWI_OK) {
        printf("read-error %s\n", x ? err : "out of memory");
        free(x);
        return 1;
    }
    int rc = 0;
    if (raw) {
        FILE *f = fopen(argv[a + 1], "wb");
        if (!f || fwrite(x, sizeof *x, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
            printf("error %s: cannot write\n", argv[a + 1]);
            rc = 1;
        }
    } else {
        int fd = open(argv[a + 1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        void *data = x;
        unsigned char *l = NULL;
        if (labels) {
            l = malloc((size_t)n);
            for (int64_t i = 0; l && i < n; i++)
                l[i] = (unsigned char)lrintf(x[i] < 0 ? 0 : x[i] > 255 ? 255 : x[i]);
            data = l;
        }
        if (fd < 0 || !data ||
            swi_volume_write_fd(fd, argv[a + 1], &v, data, labels ? SWI_DTYPE_UINT8 : SWI_DTYPE_FLOAT32,
                                labels ? SWI_IO_LABELS : SWI_IO_IMAGE, 1, 4, NULL, err,
                                sizeof err) != SWI_OK) {
            printf("write-error %s\n", fd < 0 ? "cannot create" : err);
            rc = 1;
        }
        free(l);
    }
    free(x);
    return rc;
}
