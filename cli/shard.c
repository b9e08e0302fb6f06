/*
 * shard.c -- --shard on the command line: parsing, and the rows of a part (no library
 * needed, so the option parser builds alone: fuzz_cli_options).
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
