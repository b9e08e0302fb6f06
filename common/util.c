/* util.c -- see util.h. */
#include "util.h"

#include "termtext.h"

#include "swi.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

void cli_one_line(char *s) { swi_message_one_line(s); }

void cli_err(char *err, const char *fmt, ...) {
    char raw[SWI_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    for (char *c = raw; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    swi_term_text(raw, err, SWI_ERRLEN); /* the names it quotes: no other control reaches a terminal */
    cli_one_line(err);
}

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end != '\0' || v < lo || v > hi) return -1;
    *out = (int64_t)v;
    return 0;
}

int cli_parse_double(const char *s, double *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || !end || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Split s at commas into at most cap items of at most 63 chars; call each. */
static int split_list(const char *s, int cap, int (*one)(const char *, void *, int), void *out) {
    if (!s || !*s) return -1;
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item || n >= cap) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (one(item, out, n) != 0) return -1;
        n++;
        if (!q) break;
        p = q + 1;
    }
    return n;
}

static int one_i64(const char *item, void *out, int i) {
    return cli_parse_i64(item, INT32_MIN, INT32_MAX, (int64_t *)out + i);
}

static int one_double(const char *item, void *out, int i) {
    return cli_parse_double(item, (double *)out + i);
}

int cli_parse_i64_list(const char *s, int64_t *out, int cap) { return split_list(s, cap, one_i64, out); }

int cli_parse_double_list(const char *s, double *out, int cap) { return split_list(s, cap, one_double, out); }

int cli_parse_size(const char *s, size_t *out) {
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+') return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end != '\0') return -1;
    double bytes = v * mult;
    if (bytes >= 18446744073709549568.0 || bytes > (double)SIZE_MAX) return -1;
    *out = (size_t)bytes;
    return 0;
}

const char *cli_bytes(size_t n, char buf[32]) { return swi_format_bytes(n, buf, 32); }

size_t cli_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u; /* Linux: kilobytes */
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_ends_with(const char *path, const char *suffix) {
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcasecmp(path + n - m, suffix) == 0;
}

int cli_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)n : 1;
}

void cli_shape_str(const int64_t *s, int rank, char *buf, size_t n) {
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "[");
    for (int i = 0; i < rank && i < 8 && len < n - 24; i++)
        len += (size_t)(s[i] < 0 ? snprintf(buf + len, n - len, "%s?", i ? "," : "")
                                 : snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)s[i]));
    snprintf(buf + len, n - len, "]");
}

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
