/* progress.c -- see progress.h. */
#include "progress.h"

#include "signals.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void progress_init(progress *p, int want_bar) {
    memset(p, 0, sizeof *p);
    p->t0 = cli_now();
    p->enabled = want_bar && isatty(STDERR_FILENO);
    p->width = 80;
    struct winsize ws;
    if (p->enabled && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) p->width = ws.ws_col;
}

double progress_elapsed(const progress *p) { return cli_now() - p->t0; }

static void fmt_time(double s, char *buf, size_t n) {
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
    fmt_time(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
    snprintf(tail, sizeof tail, " %lld/%lld windows  %.1f/s  ETA %s", (long long)p->done, (long long)p->total,
             rate, eta);
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

int progress_update(void *user, int64_t done, int64_t total) {
    progress *p = user;
    if (p) {
        p->done = done;
        p->total = total;
        if (p->enabled && (cli_now() - p->last_draw >= 0.1 || done == total)) draw(p);
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
