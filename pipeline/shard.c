/*
 * shard.c -- --shard and --shard-grid on the command line: parsing, and the rows or box
 * of a part (no library needed, so the option parser builds alone: fuzz_cli_options).
 */
#include "shard.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

int cli_shard_parse(const char *s, int *part, int *parts, int *init, char *err) {
    *init = 0;
    if (!strcmp(s, "init")) {
        *init = 1;
        *part = 0;
        *parts = 1;
        return 0;
    }
    char a[32], b[32];
    const char *slash = strchr(s, '/');
    int64_t i, n;
    if (!slash || (size_t)(slash - s) >= sizeof a || strlen(slash + 1) >= sizeof b) {
        cli_err(err, "--shard takes I/N (part I of N, counted from 0) or init, e.g. --shard 0/4");
        return -1;
    }
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = '\0';
    snprintf(b, sizeof b, "%s", slash + 1);
    if (cli_parse_i64(b, 1, 1 << 20, &n) || cli_parse_i64(a, 0, n - 1, &i)) {
        cli_err(err, "--shard %s: I/N needs 1 <= N <= 1048576 and 0 <= I < N", s);
        return -1;
    }
    *part = (int)i;
    *parts = (int)n;
    return 0;
}

void cli_shard_rows(int64_t size, int64_t chunk, int part, int parts, int64_t *lo, int64_t *hi) {
    int64_t rows = (size + chunk - 1) / chunk;
    int64_t a = rows * part / parts, b = rows * (part + 1) / parts;
    *lo = a * chunk;
    *hi = b * chunk < size ? b * chunk : size;
    if (*lo > size) *lo = size;
}

int cli_shard_grid_parse(const char *s, int grid[3], char *err) {
    const char *p = s;
    int64_t prod = 1;
    for (int a = 0; a < 3; a++) {
        char v[16];
        size_t len = strcspn(p, "x");
        int64_t g;
        if (len == 0 || len >= sizeof v || (a < 2 && p[len] != 'x') || (a == 2 && p[len] != '\0')) goto bad;
        memcpy(v, p, len);
        v[len] = '\0';
        if (cli_parse_i64(v, 1, 1 << 20, &g)) goto bad;
        prod *= g;
        if (prod > (1 << 20)) goto bad;
        grid[a] = (int)g;
        p += len + (a < 2);
    }
    return 0;
bad:
    cli_err(err,
            "--shard-grid %s: give the parts along each axis as AxBxC (each >= 1, at most 1048576 parts "
            "in all), e.g. --shard-grid 4x2x1",
            s);
    return -1;
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
