/* combine.c -- predictors made of predictors (swi_predictor_mean, swi_predictor_mirror):
 * clients of swi.h like any predictor (internal.h only for its error helper), each running
 * the predictors it holds on its batch's windows through swi_batch_predict. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_LEN 512 /* the engine keeps this much of a predictor's message */

static int mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* The output shape every combinator is made for: checked, and the floats of one window
 * (*window) and of max_batch windows (*batch), each overflow-checked. */
typedef struct head_shape {
    int64_t classes;
    int dims;
    int64_t spatial[SWI_MAX_DIMS];
    int max_batch;
    size_t window, batch;
} head_shape;

static swi_status shape_init(head_shape *h, const char *fn, int64_t classes, int dims, const int64_t *spatial,
                             int max_batch, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    if (classes < 1)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: classes = %lld must be >= 1", fn,
                            (long long)classes);
    if (dims < 1 || dims > SWI_MAX_DIMS)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: dims = %d is not in 1..%d", fn, dims,
                            SWI_MAX_DIMS);
    if (!spatial) return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: spatial is NULL", fn);
    if (max_batch < 1)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: max_batch = %d must be >= 1", fn,
                            max_batch);
    size_t v = (uint64_t)classes <= SIZE_MAX ? (size_t)classes : 0;
    int ok = v != 0;
    for (int k = 0; k < dims; k++) {
        if (spatial[k] < 1 || spatial[k] > SWI_MAX_AXIS)
            return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: spatial[%d] = %lld is not in 1..%lld",
                                fn, k, (long long)spatial[k], (long long)SWI_MAX_AXIS);
        ok = ok && mul_size(v, (size_t)spatial[k], &v);
    }
    size_t bytes;
    if (!ok || !mul_size(v, (size_t)max_batch, &h->batch) || !mul_size(h->batch, sizeof(float), &bytes))
        return swi__put_err(err, errlen, SWI_ERR_OVERFLOW, "%s: %d windows of %lld classes overflow", fn,
                            max_batch, (long long)classes);
    h->classes = classes;
    h->dims = dims;
    for (int k = 0; k < dims; k++) h->spatial[k] = spatial[k];
    h->max_batch = max_batch;
    h->window = v;
    return SWI_OK;
}

/* A batch this combinator can take, or non-zero with the batch's error set. */
static int batch_fits(swi_batch *b, const head_shape *h, const char *fn) {
    char m[MSG_LEN];
    if (swi_batch_dims(b) != h->dims)
        snprintf(m, sizeof m, "%s: made for %d spatial dims, the run has %d", fn, h->dims, swi_batch_dims(b));
    else if (swi_batch_count(b) > h->max_batch)
        snprintf(m, sizeof m, "%s: a batch of %d windows, above its max_batch %d", fn, swi_batch_count(b),
                 h->max_batch);
    else
        return 0;
    swi_batch_set_error(b, m);
    return 1;
}

/* ---- the mean ---- */

typedef struct mean_state {
    swi_predictor *members;
    int n;
    head_shape h;
    float *scratch; /* one batch of one member's outputs (n > 1) */
} mean_state;

static int mean_predict(void *user, swi_batch *b) {
    const mean_state *m = user;
    if (batch_fits(b, &m->h, "swi_predictor_mean")) return 1;
    float *out = swi_batch_output(b, 0, m->h.classes, m->h.spatial);
    if (!out) return 1; /* the engine said why */
    const size_t total = (size_t)swi_batch_count(b) * m->h.window;
    char err[MSG_LEN];
    for (int i = 0; i < m->n; i++) {
        float *dst = i == 0 ? out : m->scratch;
        if (swi_batch_predict(b, &m->members[i], NULL, 0, m->h.classes, m->h.spatial, dst, err, sizeof err) !=
            SWI_OK) {
            swi_batch_set_error(b, err);
            return 1;
        }
        if (i > 0)
            for (size_t j = 0; j < total; j++) out[j] += dst[j];
    }
    const float k = (float)m->n;
    for (size_t j = 0; j < total; j++) {
        out[j] /= k;
        /* NaN scores would make a label map that looks fine and is not: stop instead. */
        if (out[j] != out[j]) {
            swi_batch_set_error(b, "the ensemble's mean output is NaN; its labels would be meaningless");
            return 1;
        }
    }
    return 0;
}

swi_status swi_predictor_mean(const swi_predictor *members, int n, int64_t classes, int dims,
                              const int64_t *spatial, int max_batch, swi_predictor *out, char *err,
                              size_t errlen) {
    static const char fn[] = "swi_predictor_mean";
    if (err && errlen) err[0] = '\0';
    if (!out) return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!members || n < 1)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: %s", fn,
                            !members ? "members is NULL" : "an ensemble needs n >= 1 members");
    for (int i = 0; i < n; i++)
        if (!members[i].predict)
            return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: member %d has no predict function", fn,
                                i);
    head_shape h;
    swi_status st = shape_init(&h, fn, classes, dims, spatial, max_batch, err, errlen);
    if (st != SWI_OK) return st;
    mean_state *m = calloc(1, sizeof *m);
    if (!m) return swi__put_err(err, errlen, SWI_ERR_NOMEM, "%s: out of memory", fn);
    m->members = malloc((size_t)n * sizeof *m->members);
    m->scratch = n > 1 ? malloc(h.batch * sizeof(float)) : NULL;
    if (!m->members || (n > 1 && !m->scratch)) {
        free(m->members);
        free(m->scratch);
        free(m);
        return swi__put_err(err, errlen, SWI_ERR_NOMEM, "%s: out of memory for %d windows of scratch", fn,
                            max_batch);
    }
    memcpy(m->members, members, (size_t)n * sizeof *m->members);
    m->n = n;
    m->h = h;
    out->predict = mean_predict;
    out->user = m;
    return SWI_OK;
}

void swi_predictor_mean_free(swi_predictor *mean) {
    if (!mean || mean->predict != mean_predict) return;
    mean_state *m = mean->user;
    if (m) {
        free(m->members);
        free(m->scratch);
        free(m);
    }
    memset(mean, 0, sizeof *mean);
}

/* ---- mirroring ---- */

/* dst = src or dst += src, mirrored: `planes` arrays of s[0] x s[1] x s[2] x s[3] floats in C
 * order, bit a of `mask` mirroring axis a. Mirroring is its own inverse, so the same walk
 * mirrors an input and adds a prediction back in the input's orientation. */
static void flip(const float *src, float *dst, int64_t planes, const int64_t s[4], unsigned mask, int add) {
    const int64_t n0 = s[0], n1 = s[1], n2 = s[2], n3 = s[3];
    const int64_t vol = n0 * n1 * n2 * n3;
    for (int64_t p = 0; p < planes; p++) {
        const float *a = src + p * vol;
        float *b = dst + p * vol;
        for (int64_t i0 = 0; i0 < n0; i0++) {
            const int64_t j0 = (mask & 1) ? n0 - 1 - i0 : i0;
            for (int64_t i1 = 0; i1 < n1; i1++) {
                const int64_t j1 = (mask & 2) ? n1 - 1 - i1 : i1;
                for (int64_t i2 = 0; i2 < n2; i2++) {
                    const int64_t j2 = (mask & 4) ? n2 - 1 - i2 : i2;
                    const float *row = a + ((i0 * n1 + i1) * n2 + i2) * n3;
                    float *o = b + ((j0 * n1 + j1) * n2 + j2) * n3;
                    if (mask & 8) {
                        if (add)
                            for (int64_t k = 0; k < n3; k++) o[n3 - 1 - k] += row[k];
                        else
                            for (int64_t k = 0; k < n3; k++) o[n3 - 1 - k] = row[k];
                    } else if (add) {
                        for (int64_t k = 0; k < n3; k++) o[k] += row[k];
                    } else {
                        memcpy(o, row, (size_t)n3 * sizeof *row);
                    }
                }
            }
        }
    }
}

/* A window of `dims` sizes as four (leading axes of 1), and a mask of its axes as theirs. */
static unsigned as_four(int dims, const int64_t *size, unsigned mask, int64_t s4[4]) {
    const int lead = 4 - dims;
    for (int k = 0; k < 4; k++) s4[k] = k < lead ? 1 : size[k - lead];
    return mask << lead;
}

/* A mirror's scratch; mirrors that never run at once may share one (swi_predictor_mirror_share):
 * the last of them to be freed frees it. */
typedef struct mirror_scratch {
    float *out;    /* one batch of inner's outputs */
    float *in;     /* one batch of mirrored windows */
    size_t in_cap; /* floats of in */
    int refs;
} mirror_scratch;

static void scratch_drop(mirror_scratch *s) {
    if (s && --s->refs == 0) {
        free(s->out);
        free(s->in);
        free(s);
    }
}

typedef struct mirror_state {
    swi_predictor inner;
    unsigned axes;
    int runs; /* 2^(axes set) */
    head_shape h;
    mirror_scratch *s;
} mirror_state;

static int mirror_predict(void *user, swi_batch *b) {
    static const char fn[] = "swi_predictor_mirror";
    mirror_state *m = user;
    mirror_scratch *s = m->s;
    if (batch_fits(b, &m->h, fn)) return 1;
    const int n = swi_batch_count(b), d = m->h.dims;
    const int64_t cin = swi_batch_channels(b);
    const int64_t *roi = swi_batch_roi(b);
    char err[MSG_LEN];
    size_t win = (size_t)cin, need, bytes;
    int ok = 1;
    for (int k = 0; k < d; k++) ok = ok && mul_size(win, (size_t)roi[k], &win);
    if (!ok || !mul_size(win, (size_t)n, &need) || !mul_size(need, sizeof(float), &bytes)) {
        swi_batch_set_error(b, "swi_predictor_mirror: the mirrored windows' size overflows");
        return 1;
    }
    if (need > s->in_cap) { /* room for max_batch windows when that fits, else for this batch */
        size_t cap, cap_bytes;
        if (mul_size(win, (size_t)m->h.max_batch, &cap) && mul_size(cap, sizeof(float), &cap_bytes))
            need = cap, bytes = cap_bytes;
        free(s->in);
        s->in_cap = 0;
        s->in = malloc(bytes);
        if (!s->in) {
            snprintf(err, sizeof err, "%s: out of memory for %d mirrored windows", fn, m->h.max_batch);
            swi_batch_set_error(b, err);
            return 1;
        }
        s->in_cap = need;
    }
    float *out = swi_batch_output(b, 0, m->h.classes, m->h.spatial);
    if (!out) return 1;
    const float *in = swi_batch_input(b);
    int64_t in4[4], out4[4];
    for (unsigned mask = 0; mask < (1u << d); mask++) {
        if (mask & ~m->axes) continue;
        const float *x = in;
        float *y = mask ? s->out : out;
        if (mask) {
            flip(in, s->in, (int64_t)n * cin, in4, as_four(d, roi, mask, in4), 0);
            x = s->in;
        }
        if (swi_batch_predict(b, &m->inner, x, 0, m->h.classes, m->h.spatial, y, err, sizeof err) != SWI_OK) {
            swi_batch_set_error(b, err);
            return 1;
        }
        if (mask) flip(y, out, (int64_t)n * m->h.classes, out4, as_four(d, m->h.spatial, mask, out4), 1);
    }
    /* 1 / 2^k is exact: the same as dividing by the number of runs */
    const float k = 1.0f / (float)m->runs;
    const size_t total = (size_t)n * m->h.window;
    for (size_t j = 0; j < total; j++) out[j] *= k;
    return 0;
}

swi_status swi_predictor_mirror(const swi_predictor *inner, unsigned axes, int64_t classes, int dims,
                                const int64_t *spatial, int max_batch, swi_predictor *out, char *err,
                                size_t errlen) {
    static const char fn[] = "swi_predictor_mirror";
    if (err && errlen) err[0] = '\0';
    if (!out) return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!inner || !inner->predict)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: %s", fn,
                            !inner ? "inner is NULL" : "inner has no predict function");
    head_shape h;
    swi_status st = shape_init(&h, fn, classes, dims, spatial, max_batch, err, errlen);
    if (st != SWI_OK) return st;
    if (axes == 0 || axes >= (1u << dims))
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG,
                            "%s: axes = %u must name 1 or more of the %d axes (1..%u)", fn, axes, dims,
                            (1u << dims) - 1);
    mirror_state *m = calloc(1, sizeof *m);
    if (!m) return swi__put_err(err, errlen, SWI_ERR_NOMEM, "%s: out of memory", fn);
    m->s = calloc(1, sizeof *m->s);
    if (m->s) m->s->out = malloc(h.batch * sizeof(float));
    if (!m->s || !m->s->out) {
        free(m->s);
        free(m);
        return swi__put_err(err, errlen, SWI_ERR_NOMEM, "%s: out of memory for %d windows of scratch", fn,
                            max_batch);
    }
    m->s->refs = 1;
    m->inner = *inner;
    m->axes = axes;
    m->runs = 1;
    for (int k = 0; k < dims; k++)
        if (axes & (1u << k)) m->runs *= 2;
    m->h = h;
    out->predict = mirror_predict;
    out->user = m;
    return SWI_OK;
}

swi_status swi_predictor_mirror_share(swi_predictor *mirrors, int n, char *err, size_t errlen) {
    static const char fn[] = "swi_predictor_mirror_share";
    if (err && errlen) err[0] = '\0';
    if (!mirrors || n < 1)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: %s", fn,
                            !mirrors ? "mirrors is NULL" : "n must be >= 1");
    for (int i = 0; i < n; i++) {
        if (mirrors[i].predict != mirror_predict || !mirrors[i].user)
            return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "%s: mirrors[%d] is not a mirror", fn, i);
        const head_shape *a = &((mirror_state *)mirrors[0].user)->h,
                         *b = &((mirror_state *)mirrors[i].user)->h;
        int same = a->classes == b->classes && a->dims == b->dims && a->max_batch == b->max_batch;
        for (int k = 0; same && k < a->dims; k++) same = a->spatial[k] == b->spatial[k];
        if (!same)
            return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG,
                                "%s: mirrors[%d] was made for other outputs or batches than mirrors[0]", fn,
                                i);
    }
    mirror_scratch *s = ((mirror_state *)mirrors[0].user)->s;
    for (int i = 1; i < n; i++) {
        mirror_state *m = mirrors[i].user;
        if (m->s == s) continue;
        scratch_drop(m->s);
        m->s = s;
        s->refs++;
    }
    return SWI_OK;
}

void swi_predictor_mirror_free(swi_predictor *mirror) {
    if (!mirror || mirror->predict != mirror_predict) return;
    mirror_state *m = mirror->user;
    if (m) {
        scratch_drop(m->s);
        free(m);
    }
    memset(mirror, 0, sizeof *mirror);
}
