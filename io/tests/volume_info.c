/*
 * volume_info.c -- what swi_io reads from each file named, one line per file:
 *   PATH size I J K type T bpv B slope S inter C spacing X Y Z affine A00 .. A33
 * (or PATH error MESSAGE), and with --read the sum of the voxels. geometry.py compares it
 * with nibabel.
 */
#include "swi_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int read = argc > 1 && strcmp(argv[1], "--read") == 0;
    for (int i = 1 + read; i < argc; i++) {
        swi_volume v;
        char err[768];
        if (swi_volume_open(argv[i], &v, err, sizeof err) != SWI_OK) {
            printf("%s error %s\n", argv[i], err);
            continue;
        }
        printf("%s size %lld %lld %lld type %d bpv %d slope %.17g inter %.17g spacing %.17g "
               "%.17g %.17g affine",
               argv[i], (long long)v.size[0], (long long)v.size[1], (long long)v.size[2], (int)v.type,
               v.bytes_per_voxel, v.slope, v.inter, v.spacing[0], v.spacing[1], v.spacing[2]);
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) printf(" %.17g", v.affine[r][c]);
        if (read) {
            float *x = malloc((size_t)swi_volume_voxels(&v) * sizeof *x);
            if (!x || swi_volume_read(&v, x, NULL, err, sizeof err) != SWI_OK) {
                printf(" read-error %s\n", x ? err : "out of memory");
                free(x);
                continue;
            }
            double sum = 0;
            for (int64_t k = 0; k < swi_volume_voxels(&v); k++) sum += (double)x[k] * (double)((k % 7) + 1);
            printf(" sum %.17g", sum);
            free(x);
        }
        printf("\n");
    }
    return 0;
}
