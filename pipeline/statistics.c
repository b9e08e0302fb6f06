/*
 * statistics.c -- per-class statistics gathered region by region (statistics.h).
 */
#include "statistics.h"

#include "swi_pipeline.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One class's running figures: count, mean and the sum of squared deviations (merged as
 * Chan et al.'s parallel variance), the extremes of the intensity, the voxel box. */
typedef struct acc {
    int64_t voxels;  /* labelled voxels */
    int64_t n;       /* of them with an intensity (all, once an intensity source is set) */
    double mean, m2; /* of those intensities */
    double min, max;
    int64_t lo[3], hi[3]; /* inclusive voxel box */
} acc;

/* One region's figures for one class, kept until the end: merged in the order of the
 * regions' corners, so the result does not depend on which thread finished first. */
typedef struct entry {
    int64_t lo[3], c;
    acc a;
} entry;

struct pl_stats {
    int64_t classes;
    const char *const *names;
    double affine[4][4];
    int64_t size[3];
    const float *x;
    swi_store *store;
    pthread_mutex_t mu; /* guards all, and the store's reads */
    acc *a;
    entry *pending;
    size_t n_pending, cap_pending;
    char error[512];
};

static void acc_reset(acc *a, int64_t n) {
    for (int64_t c = 0; c < n; c++) {
        memset(&a[c], 0, sizeof a[c]);
        a[c].min = INFINITY;
        a[c].max = -INFINITY;
        for (int d = 0; d < 3; d++) {
            a[c].lo[d] = INT64_MAX;
            a[c].hi[d] = -1;
        }
    }
}

pl_stats *pl_stats_new(int64_t classes, const char *const *names, const double affine[4][4],
                       const int64_t size[3]) {
    if (classes < 1 || classes > 65536) return NULL;
    pl_stats *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->a = calloc((size_t)classes, sizeof *st->a);
    if (!st->a || pthread_mutex_init(&st->mu, NULL) != 0) {
        free(st->a);
        free(st);
        return NULL;
    }
    st->classes = classes;
    st->names = names;
    memcpy(st->affine, affine, sizeof st->affine);
    memcpy(st->size, size, sizeof st->size);
    acc_reset(st->a, classes);
    return st;
}

void pl_stats_intensity_array(pl_stats *st, const float *x) { st->x = x; }
void pl_stats_intensity_store(pl_stats *st, swi_store *store) { st->store = store; }

/* b merged into a. */
static void acc_merge(acc *a, const acc *b) {
    a->voxels += b->voxels;
    if (b->n > 0) {
        const double n = (double)(a->n + b->n), d = b->mean - a->mean;
        a->m2 += b->m2 + d * d * (double)a->n * (double)b->n / n;
        a->mean += d * (double)b->n / n;
        a->n += b->n;
        if (b->min < a->min) a->min = b->min;
        if (b->max > a->max) a->max = b->max;
    }
    for (int k = 0; k < 3; k++) {
        if (b->lo[k] < a->lo[k]) a->lo[k] = b->lo[k];
        if (b->hi[k] > a->hi[k]) a->hi[k] = b->hi[k];
    }
}

int pl_stats_add(pl_stats *st, const int64_t lo[3], const int64_t hi[3], const void *labels, int label_bytes,
                 const int64_t lab_origin[3], const int64_t lab_size[3], char *err, size_t n) {
    const int64_t e0 = hi[0] - lo[0], e1 = hi[1] - lo[1], e2 = hi[2] - lo[2];
    if (e0 <= 0 || e1 <= 0 || e2 <= 0) return 0;
    const int64_t C = st->classes;
    /* per region: shifted sums (the first intensity as the shift keeps them small) */
    typedef struct part {
        int64_t voxels, n;
        double s, s2, shift, min, max;
        int64_t lo[3], hi[3];
    } part;
    part *p = calloc((size_t)C, sizeof *p);
    float *box = NULL;
    if (!p) {
        snprintf(err, n, "out of memory for the statistics");
        return -1;
    }
    if (!st->x && st->store) {
        box = malloc((size_t)(e0 * e1 * e2) * sizeof *box);
        char msg[512] = "out of memory";
        int bad = !box;
        if (box) {
            pthread_mutex_lock(&st->mu);
            bad = swi_store_read_box(st->store, lo, hi, box, msg, sizeof msg) != SWI_OK;
            pthread_mutex_unlock(&st->mu);
        }
        if (bad) {
            snprintf(err, n, "statistics: %s", msg);
            free(box);
            free(p);
            return -1;
        }
    }
    for (int64_t c = 0; c < C; c++) {
        p[c].min = INFINITY;
        p[c].max = -INFINITY;
        for (int k = 0; k < 3; k++) {
            p[c].lo[k] = INT64_MAX;
            p[c].hi[k] = -1;
        }
    }
    const uint8_t *l8 = labels;
    const uint16_t *l16 = labels;
    const int64_t *g = st->size;
    int64_t v = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t j = lo[1]; j < hi[1]; j++)
            for (int64_t k = lo[2]; k < hi[2]; k++, v++) {
                const int64_t at =
                    ((i - lab_origin[0]) * lab_size[1] + j - lab_origin[1]) * lab_size[2] + k - lab_origin[2];
                const int64_t c = label_bytes == 1 ? l8[at] : l16[at];
                if (c >= C) continue;
                part *q = &p[c];
                q->voxels++;
                if (i < q->lo[0]) q->lo[0] = i;
                if (i > q->hi[0]) q->hi[0] = i;
                if (j < q->lo[1]) q->lo[1] = j;
                if (j > q->hi[1]) q->hi[1] = j;
                if (k < q->lo[2]) q->lo[2] = k;
                if (k > q->hi[2]) q->hi[2] = k;
                double x;
                if (st->x)
                    x = st->x[(i * g[1] + j) * g[2] + k];
                else if (box)
                    x = box[v];
                else
                    continue;
                if (!isfinite(x)) x = 0; /* as the run reads it (--nonfinite zero) */
                if (q->n == 0) q->shift = x;
                const double y = x - q->shift;
                q->n++;
                q->s += y;
                q->s2 += y * y;
                if (x < q->min) q->min = x;
                if (x > q->max) q->max = x;
            }
    free(box);
    int64_t present = 0;
    for (int64_t c = 0; c < C; c++) present += p[c].voxels > 0;
    pthread_mutex_lock(&st->mu);
    if (st->n_pending + (size_t)present > st->cap_pending) {
        size_t cap = st->cap_pending ? st->cap_pending : 256;
        while (cap < st->n_pending + (size_t)present) cap *= 2;
        entry *e = realloc(st->pending, cap * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&st->mu);
            free(p);
            snprintf(err, n, "out of memory for the statistics");
            return -1;
        }
        st->pending = e;
        st->cap_pending = cap;
    }
    for (int64_t c = 0; c < C; c++) {
        if (!p[c].voxels) continue;
        acc b = {.voxels = p[c].voxels, .n = p[c].n, .min = p[c].min, .max = p[c].max};
        if (b.n > 0) {
            const double m = p[c].s / (double)b.n;
            b.mean = p[c].shift + m;
            b.m2 = p[c].s2 - m * p[c].s;
            if (b.m2 < 0) b.m2 = 0;
        }
        memcpy(b.lo, p[c].lo, sizeof b.lo);
        memcpy(b.hi, p[c].hi, sizeof b.hi);
        entry *e = &st->pending[st->n_pending++];
        memcpy(e->lo, lo, sizeof e->lo);
        e->c = c;
        e->a = b;
    }
    pthread_mutex_unlock(&st->mu);
    free(p);
    return 0;
}

int pl_stats_region(void *user, const swi_region *r) {
    pl_stats *st = user;
    int64_t size[3];
    for (int d = 0; d < 3; d++) size[d] = r->hi[d] - r->lo[d];
    char msg[512];
    if (r->dims != 3 || r->channels != 1 ||
        pl_stats_add(st, r->lo, r->hi, r->data, r->dtype == SWI_DTYPE_UINT16 ? 2 : 1, r->lo, size, msg,
                     sizeof msg)) {
        pthread_mutex_lock(&st->mu);
        if (!st->error[0])
            snprintf(st->error, sizeof st->error, "%s",
                     r->dims != 3 || r->channels != 1 ? "statistics: unexpected label region" : msg);
        pthread_mutex_unlock(&st->mu);
        return 1;
    }
    return 0;
}

static int entry_order(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a->lo[k] != b->lo[k]) return a->lo[k] < b->lo[k] ? -1 : 1;
    return a->c < b->c ? -1 : a->c > b->c;
}

/* The regions' figures merged into the totals, in the order of their corners. */
static void settle(pl_stats *st) {
    pthread_mutex_lock(&st->mu);
    qsort(st->pending, st->n_pending, sizeof *st->pending, entry_order);
    for (size_t i = 0; i < st->n_pending; i++) acc_merge(&st->a[st->pending[i].c], &st->pending[i].a);
    st->n_pending = 0;
    pthread_mutex_unlock(&st->mu);
}

const char *pl_stats_error(const pl_stats *st) { return st && st->error[0] ? st->error : NULL; }

/* ---- the text ---- */

typedef struct text {
    char *buf;
    size_t len, cap;
    int bad;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->bad) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->bad = 1;
            return;
        }
        if (t->buf && t->len + (size_t)k < t->cap) {
            t->len += (size_t)k;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap <= t->len + (size_t)k) cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->bad = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(text *t, const char *s) {
    put(t, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(t, "\\%c", *c);
        else if (*c < 0x20)
            put(t, "\\u%04x", *c);
        else
            put(t, "%c", *c);
    }
    put(t, "\"");
}

/* A finite number as JSON (17 significant digits: read back exactly), else null. */
static void put_num(text *t, double v) {
    if (isfinite(v))
        put(t, "%.17g", v);
    else
        put(t, "null");
}

char *pl_stats_json(pl_stats *st, const char *input, const char *labels) {
    settle(st);
    text t = {0};
    const double(*A)[4] = st->affine;
    double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                 A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                 A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    const double voxel_mm3 = fabs(det);
    put(&t, "{\n  \"input\": ");
    if (input)
        put_string(&t, input);
    else
        put(&t, "null");
    put(&t, ",\n  \"labels\": ");
    if (labels)
        put_string(&t, labels);
    else
        put(&t, "null");
    put(&t, ",\n  \"size\": [%lld, %lld, %lld],\n  \"voxel_volume_mm3\": ", (long long)st->size[0],
        (long long)st->size[1], (long long)st->size[2]);
    put_num(&t, voxel_mm3);
    put(&t, ",\n  \"classes\": {");
    char fallback[32];
    for (int64_t c = 0; c < st->classes; c++) {
        const acc *a = &st->a[c];
        const char *name = st->names && st->names[c] ? st->names[c] : NULL;
        if (!name) {
            if (c == 0)
                snprintf(fallback, sizeof fallback, "background");
            else
                snprintf(fallback, sizeof fallback, "label_%lld", (long long)c);
            name = fallback;
        }
        put(&t, "%s\n    ", c ? "," : "");
        put_string(&t, name);
        put(&t, ": {\"label-value\": %lld, \"voxels\": %lld, \"volume_ml\": ", (long long)c,
            (long long)a->voxels);
        put_num(&t, (double)a->voxels * voxel_mm3 / 1000.0);
        put(&t, ", \"volume\": ");
        put_num(&t, (double)a->voxels * voxel_mm3);
        const int any = a->n > 0;
        put(&t, ", \"intensity\": ");
        put_num(&t, any ? a->mean : NAN);
        put(&t, ", \"intensity_std\": ");
        put_num(&t, any ? sqrt(a->m2 / (double)a->n) : NAN);
        put(&t, ", \"intensity_min\": ");
        put_num(&t, any ? a->min : NAN);
        put(&t, ", \"intensity_max\": ");
        put_num(&t, any ? a->max : NAN);
        if (!a->voxels) {
            put(&t, ", \"bbox_voxels\": null, \"bbox_mm\": null}");
            continue;
        }
        put(&t, ", \"bbox_voxels\": [[%lld, %lld, %lld], [%lld, %lld, %lld]]", (long long)a->lo[0],
            (long long)a->lo[1], (long long)a->lo[2], (long long)a->hi[0], (long long)a->hi[1],
            (long long)a->hi[2]);
        /* the box's corner voxel centres in scanner coordinates: their extremes per axis */
        double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (int corner = 0; corner < 8; corner++) {
            double v[3];
            for (int d = 0; d < 3; d++) v[d] = (double)((corner >> d) & 1 ? a->hi[d] : a->lo[d]);
            for (int r = 0; r < 3; r++) {
                double w = A[r][0] * v[0] + A[r][1] * v[1] + A[r][2] * v[2] + A[r][3];
                if (w < mn[r]) mn[r] = w;
                if (w > mx[r]) mx[r] = w;
            }
        }
        put(&t, ", \"bbox_mm\": [[");
        for (int r = 0; r < 3; r++) {
            put_num(&t, mn[r]);
            put(&t, r < 2 ? ", " : "], [");
        }
        for (int r = 0; r < 3; r++) {
            put_num(&t, mx[r]);
            put(&t, r < 2 ? ", " : "]]}");
        }
    }
    put(&t, "\n  }\n}\n");
    if (t.bad) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}

int pl_write_text(int fd, const char *path, const char *body, char *err) {
    size_t len = strlen(body), done = 0;
    int e = 0;
    while (fd >= 0 && done < len) {
        ssize_t k = write(fd, body + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            e = k < 0 ? errno : EIO;
            break;
        }
        done += (size_t)k;
    }
    if (fd < 0) e = EBADF;
    if (fd >= 0 && close(fd) != 0 && !e) e = errno;
    if (!e) return 0;
    snprintf(err, SWI_JOB_ERRLEN, "%s: cannot write: %s", path, strerror(e));
    return 1;
}

void pl_stats_free(pl_stats *st) {
    if (!st) return;
    pthread_mutex_destroy(&st->mu);
    free(st->pending);
    free(st->a);
    free(st);
}
