/* window_opts.c -- see window_opts.h. */
#include "window_opts.h"

#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const MODES[] = {"constant", "gaussian"}; /* SWI_BLEND_CONSTANT, _GAUSSIAN */
static const char *const PADS[] = {"constant", "reflect", "replicate", "circular"}; /* swi_pad */

void cli_window_init(cli_window *w) {
    swi_params p;
    swi_params_init(&p, SWI_MAX_DIMS);
    memset(w, 0, sizeof *w);
    for (int a = 0; a < SWI_MAX_DIMS; a++) {
        w->roi[a] = p.roi[a];
        w->overlap[a] = p.overlap[a];
        w->sigma_scale[a] = p.sigma_scale[a];
    }
    w->mode = p.mode;
    w->padding = p.padding_mode;
    w->cval = p.cval;
    w->sw_batch = p.sw_batch_size;
    w->axes = 3;
    w->sw_batch_max = 65536;
    w->cval_float = 1;
}

static int bad(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    cli_one_line(err); /* a value may hold a line break */
    return -1;
}

/* Does a list of k values (-1: no list) suit w: one for every axis, or one per axis? */
static int count_ok(const cli_window *w, int k) { return k == 1 || (k > 1 && (w->axes != 3 || k == 3)); }

#define STR_(x) #x
#define STR(x) STR_(x)
/* What a list of more than one value holds: `three`, or one per axis. */
static const char *per_axis(const cli_window *w, const char *three) {
    return w->axes == 3 ? three : "one per axis (at most " STR(SWI_MAX_DIMS) ")";
}

/* v[0..k-1] into dst: one value into every axis, else the first k. */
static void take_i64(int64_t *dst, const int64_t *v, int k) {
    for (int a = 0; a < SWI_MAX_DIMS; a++)
        if (k == 1 || a < k) dst[a] = v[k == 1 ? 0 : a];
}
static void take_f64(double *dst, const double *v, int k) {
    for (int a = 0; a < SWI_MAX_DIMS; a++)
        if (k == 1 || a < k) dst[a] = v[k == 1 ? 0 : a];
}

static int set_roi(cli_window *w, const char *s, char *err, size_t n) {
    int64_t v[SWI_MAX_DIMS];
    int k = cli_parse_i64_list(s, v, SWI_MAX_DIMS), ok = count_ok(w, k);
    for (int a = 0; ok && a < k; a++) ok = w->roi_negative || v[a] >= 0;
    if (!ok)
        return bad(err, n, "--roi '%s': give one size or %s%s", s, per_axis(w, "three (I,J,K)"),
                   w->roi_negative ? " (<= 0: the whole axis)" : ", each >= 0");
    take_i64(w->roi, v, k);
    w->n_roi = k;
    w->given |= CLI_WINDOW_ROI;
    return 0;
}

static int set_overlap(cli_window *w, const char *s, char *err, size_t n) {
    double v[SWI_MAX_DIMS];
    int k = cli_parse_double_list(s, v, SWI_MAX_DIMS), ok = w->overlap_one ? k == 1 : count_ok(w, k);
    for (int a = 0; ok && a < k; a++) ok = v[a] >= 0 && v[a] < 1;
    if (!ok && w->overlap_one) return bad(err, n, "--overlap '%s': give one fraction in [0, 1)", s);
    if (!ok)
        return bad(err, n, "--overlap '%s': give one fraction or %s, each in [0, 1)", s,
                   per_axis(w, "three"));
    take_f64(w->overlap, v, k);
    w->n_overlap = k;
    w->given |= CLI_WINDOW_OVERLAP;
    return 0;
}

static int set_sigma(cli_window *w, const char *s, char *err, size_t n) {
    double v[SWI_MAX_DIMS];
    int k = cli_parse_double_list(s, v, SWI_MAX_DIMS), ok = count_ok(w, k);
    for (int a = 0; ok && a < k; a++) ok = v[a] > 0;
    if (!ok)
        return bad(err, n, "--sigma-scale '%s': give one value or %s, each > 0", s, per_axis(w, "three"));
    take_f64(w->sigma_scale, v, k);
    w->n_sigma = k;
    w->given |= CLI_WINDOW_SIGMA;
    return 0;
}

/* The index of s in names[0..count-1], or -1. */
static int name_index(const char *s, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static int set_mode(cli_window *w, const char *s, char *err, size_t n) {
    int i = name_index(s, MODES, 2);
    if (i < 0) return bad(err, n, "--mode '%s': use constant or gaussian", s);
    w->mode = i == 1 ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
    w->given |= CLI_WINDOW_MODE;
    return 0;
}

static int set_padding(cli_window *w, const char *s, char *err, size_t n) {
    int i = name_index(s, PADS, 4);
    if (i < 0) return bad(err, n, "--padding-mode '%s': use constant, reflect, replicate or circular", s);
    w->padding = (swi_pad)i;
    w->given |= CLI_WINDOW_PADDING;
    return 0;
}

static int set_cval(cli_window *w, const char *s, char *err, size_t n) {
    double v;
    if (cli_parse_double(s, &v)) return bad(err, n, "--cval '%s': give a finite number", s);
    if (w->cval_float && fabs(v) > 3.4e38)
        return bad(err, n, "--cval '%s': beyond float32 (|V| <= 3.4e38)", s);
    w->cval = v;
    w->given |= CLI_WINDOW_CVAL;
    return 0;
}

static int set_sw_batch(cli_window *w, const char *s, char *err, size_t n) {
    int64_t v;
    if (cli_parse_i64(s, 1, w->sw_batch_max, &v))
        return bad(err, n, "--sw-batch '%s': give a whole number from 1 to %d", s, w->sw_batch_max);
    w->sw_batch = (int)v;
    w->given |= CLI_WINDOW_SW_BATCH;
    return 0;
}

int cli_window_option(cli_window *w, const char *flag, const char *value, char *err, size_t n) {
    static const struct {
        const char *flag;
        int (*set)(cli_window *, const char *, char *, size_t);
    } FLAGS[] = {{"roi", set_roi},           {"overlap", set_overlap},      {"mode", set_mode},
                 {"sigma-scale", set_sigma}, {"padding-mode", set_padding}, {"cval", set_cval},
                 {"sw-batch", set_sw_batch}};
    for (size_t i = 0; i < sizeof FLAGS / sizeof *FLAGS; i++)
        if (strcmp(flag, FLAGS[i].flag) == 0) return FLAGS[i].set(w, value, err, n) ? -1 : 1;
    return 0;
}
