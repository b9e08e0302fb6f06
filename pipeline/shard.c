/*
 * shard.c -- a part of a job (--shard I/N, --shard-grid AxBxC; the flags are parsed in
 * common/util.c): its rows or box, the grid checked against the parts.
 */
#include "shard.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

void cli_shard_rows(int64_t size, int64_t chunk, int part, int parts, int64_t *lo, int64_t *hi) {
    int64_t rows = (size + chunk - 1) / chunk;
    int64_t a = rows * part / parts, b = rows * (part + 1) / parts;
    *lo = a * chunk;
    *hi = b * chunk < size ? b * chunk : size;
    if (*lo > size) *lo = size;
}

int cli_shard_grid_parts(const int grid[3]) { return grid[0] * grid[1] * grid[2]; }

int cli_shard_grid_check(const int grid[3], int parts, int mpi, char *err) {
    const int n = cli_shard_grid_parts(grid);
    if (n == parts) return 0;
    if (mpi)
        cli_err(
            err,
            "under mpirun the ranks are the boxes of --shard-grid %dx%dx%d: start %d ranks (mpirun -n %d), "
            "not %d",
            grid[0], grid[1], grid[2], n, n, parts);
    else
        cli_err(err, "--shard I/%d with --shard-grid %dx%dx%d: N must be the grid's %d boxes (--shard I/%d)",
                parts, grid[0], grid[1], grid[2], n, n);
    return -1;
}

void cli_shard_box(const int64_t size[3], const int64_t chunk[3], int part, const int grid[3], int64_t lo[3],
                   int64_t hi[3]) {
    int rest = part;
    for (int a = 2; a >= 0; a--) {
        cli_shard_rows(size[a], chunk[a], rest % grid[a], grid[a], &lo[a], &hi[a]);
        rest /= grid[a];
    }
}

const char *cli_shard_box_str(const int64_t lo[3], const int64_t hi[3], char *buf, size_t n) {
    snprintf(buf, n, "[%lld, %lld) x [%lld, %lld) x [%lld, %lld)", (long long)lo[0], (long long)hi[0],
             (long long)lo[1], (long long)hi[1], (long long)lo[2], (long long)hi[2]);
    return buf;
}
