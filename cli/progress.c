/* progress.c -- see progress.h. */
#include "progress.h"

#include "signals.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

double progress_period(void) {
    const char *v = getenv("SWI_PROGRESS_PERIOD");
    char *end = NULL;
    double d = v ? strtod(v, &end) : 0;
    return v && end != v && *end == '\0' && d > 0 && d < 1e6 ? d : 10.0;
}

void progress_init(progress *p, int want) {
    memset(p, 0, sizeof *p);
    p->t0 = cli_now();
    p->last_draw = p->t0;
    p->enabled = want && isatty(STDERR_FILENO);
    p->log = want && !p->enabled;
    p->period = progress_period();
    p->width = 80;
    struct winsize ws;
    if (p->enabled && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) p->width = ws.ws_col;
}

size_t progress_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    const long page = sysconf(_SC_PAGESIZE);
    int got = f ? fscanf(f, "%llu %llu", &size, &res) : 0;
    if (f) fclose(f);
    return got == 2 && page > 0 ? (size_t)(res * (unsigned long long)page) : cli_peak_rss();
}

double progress_elapsed(const progress *p) { return cli_now() - p->t0; }

void progress_time(double s, char *buf, size_t n) {
    if (s < 0 || s > 359999)
        snprintf(buf, n, "--:--");
    else if (s >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
    else
        snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void draw(progress *p) {
    double el = cli_now() - p->t0;
    double rate = el > 0 ? (double)p->done / el : 0;
    char eta[32], tail[256];
    progress_time(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
    snprintf(tail, sizeof tail, " %lld/%lld windows  %.1f/s  ETA %s", (long long)p->done, (long long)p->total,
             rate, eta);
    if (p->outer) {
        char o[128];
        p->outer(p->outer_user, p->total > 0 ? (double)p->done / (double)p->total : 0, o, sizeof o);
        size_t tl = strlen(tail);
        snprintf(tail + tl, sizeof tail - tl, "  %s", o);
    }
    if (p->label) {
        char lab[96];
        int ll = snprintf(lab, sizeof lab, " %.80s", p->label);
        size_t tl = strlen(tail);
        if (ll > 0 && (size_t)ll + tl < sizeof tail) {
            memmove(tail + ll, tail, tl + 1);
            memcpy(tail, lab, (size_t)ll);
        }
    }
    int bar = p->width - 3 - (int)strlen(tail) - 1;
    if (bar > 50) bar = 50;
    char line[512];
    int len = 0;
    line[len++] = '\r';
    if (bar >= 10) {
        int fill = p->total > 0 ? (int)((double)bar * (double)p->done / (double)p->total) : 0;
        line[len++] = '[';
        for (int i = 0; i < bar; i++) line[len++] = i < fill ? '#' : '.';
        line[len++] = ']';
    }
    len += snprintf(line + len, sizeof line - (size_t)len, "%s\033[K", tail);
    fwrite(line, 1, (size_t)len, stderr);
    fflush(stderr);
    p->drawn = 1;
    p->last_draw = cli_now();
}

/* A line for a log: "WHO: 120/400 windows (30 %), 8.1 windows/s, ETA 0:35, RSS 1.2 GB". */
static void line(progress *p, double now) {
    const double el = now - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    char eta[32], rss[32], outer[128] = "";
    progress_time(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
    const double frac = p->total > 0 ? (double)p->done / (double)p->total : 0;
    if (p->outer) {
        outer[0] = ';';
        outer[1] = ' ';
        p->outer(p->outer_user, frac, outer + 2, sizeof outer - 2);
    }
    fprintf(stderr, "%s: %lld/%lld windows (%d %%), %.1f windows/s, ETA %s, RSS %s%s\n",
            p->who ? p->who : "swi", (long long)p->done, (long long)p->total, (int)(100.0 * frac), rate, eta,
            cli_bytes(progress_rss(), rss), outer);
    fflush(stderr);
    p->last_draw = now;
}

int progress_update(void *user, int64_t done, int64_t total) {
    progress *p = user;
    if (p) {
        p->done = done;
        p->total = total;
        if (p->enabled && (cli_now() - p->last_draw >= 0.1 || done == total)) draw(p);
        if (p->log && total > 0) {
            const double now = cli_now();
            const int step = (int)(10 * done / total);
            /* nothing before one period: a short run says its summary alone */
            if (now - p->t0 >= p->period && (now - p->last_draw >= p->period || step > p->step)) line(p, now);
            p->step = step;
        }
    }
    return cli_interrupted() ? 1 : 0;
}

void progress_clear(progress *p) {
    if (p->enabled && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = 0;
    }
}
