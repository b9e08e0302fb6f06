/*
 * test_random.c -- swi_run against a deliberately naive reference, over hundreds of random
 * configurations.
 *
 *     test_random [SEED [CONFIGS]]
 *
 * The reference follows tests/data/golden/README.md step by step with nothing clever: a padded
 * copy of the input, full-size accumulators, every window in turn, zoomed heads by the
 * nearest-exact rule, the crop at the end. The predictor is a deterministic function of a
 * window's contents, its position and its image, so both sides see the same predictions.
 * Each configuration is run twice with different order/threads/sw_batch_size/pipeline,
 * with several reductions and sinks (caller memory, library memory, region callbacks).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "swi.h"

/* from src/internal.h: the last run's planned and measured frontier peaks */
int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured);

#define ABS_TOL 1e-4
#define REL_TOL 1e-4
#define TIE_GAP 1e-4
#define MAX_OUTPUTS 12
#define MAX_DETAILS 4

/* ---- random numbers (splitmix64) ------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]. */
static int64_t rng_int(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* ---- configuration ---------------------------------------------------------- */

/* Every per-dim array is kept in 3-D with leading extent-1 axes: real dim k of a
 * `dims`-D config lives at index k + 3 - dims. */
#define D3(c, k) ((k) + 3 - (c)->dims)

typedef enum head_kind { HEAD_SAME = 0, HEAD_HALF, HEAD_DOUBLE } head_kind;
static const char *const head_kind_name[] = {"same", "half", "double"};

typedef struct config {
    int dims;
    int64_t batch, cin;
    int64_t S[3];         /* image */
    int64_t roi_param[3]; /* as passed (may be <= 0) */
    int64_t r[3];         /* effective window */
    double overlap[3];
    swi_blend mode;
    double sigma[3];
    float *custom_map; /* [*r] for SWI_BLEND_CUSTOM */
    swi_pad pad;
    float cval;
    int n_heads;
    head_kind kind[2];
    int64_t channels[2];
    int declare_channels[2], declare_spatial[2];
    uint64_t salt;
    float *input; /* [batch, cin, *S] */
} config;

typedef struct run_opts {
    int sw_batch, threads, order[3], pipeline;
    int budget; /* run at max_memory = the plan's bytes_min */
} run_opts;

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* Output window of head h (3-D, fake dims 1). */
static void head_window(const config *c, int h, int64_t o[3]) {
    for (int i = 0; i < 3; i++) {
        int real = i >= 3 - c->dims;
        o[i] = c->r[i];
        if (real && c->kind[h] == HEAD_HALF) o[i] = c->r[i] / 2;
        if (real && c->kind[h] == HEAD_DOUBLE) o[i] = c->r[i] * 2;
    }
}

static const char *pad_name(swi_pad p) {
    static const char *const n[] = {"constant", "reflect", "replicate", "circular"};
    return n[p];
}

static void print_config(const config *c, const run_opts *ro, FILE *f) {
    fprintf(f, "  dims %d batch %lld cin %lld size", c->dims, (long long)c->batch, (long long)c->cin);
    for (int k = 0; k < c->dims; k++) fprintf(f, " %lld", (long long)c->S[D3(c, k)]);
    fprintf(f, " roi");
    for (int k = 0; k < c->dims; k++) fprintf(f, " %lld", (long long)c->roi_param[D3(c, k)]);
    fprintf(f, " overlap");
    for (int k = 0; k < c->dims; k++) fprintf(f, " %g", c->overlap[D3(c, k)]);
    fprintf(f, " mode %s",
            c->mode == SWI_BLEND_CONSTANT   ? "constant"
            : c->mode == SWI_BLEND_GAUSSIAN ? "gaussian"
                                            : "custom");
    if (c->mode == SWI_BLEND_GAUSSIAN)
        for (int k = 0; k < c->dims; k++) fprintf(f, "%s%g", k == 0 ? " sigma " : " ", c->sigma[D3(c, k)]);
    fprintf(f, " pad %s cval %g heads", pad_name(c->pad), (double)c->cval);
    for (int h = 0; h < c->n_heads; h++)
        fprintf(f, " [%s C%lld%s%s]", head_kind_name[c->kind[h]], (long long)c->channels[h],
                c->declare_channels[h] ? " declC" : "", c->declare_spatial[h] ? " declS" : "");
    if (ro != NULL)
        fprintf(f, " | sw_batch %d threads %d order %d %d %d pipeline %d%s", ro->sw_batch, ro->threads,
                ro->order[0], ro->order[1], ro->order[2], ro->pipeline,
                ro->budget ? " max_memory=bytes_min" : "");
    fputc('\n', f);
}

/* ---- the predictor: a pure function of (window, image, start, head) ------------- */

static float hash_unit(uint64_t salt, int h, int64_t ch, int64_t image, const int64_t start[3],
                       const int64_t o[3]) {
    uint64_t x = mix(salt, (uint64_t)h);
    x = mix(x, (uint64_t)ch);
    x = mix(x, (uint64_t)image);
    for (int i = 0; i < 3; i++) {
        x = mix(x, (uint64_t)start[i]);
        x = mix(x, (uint64_t)o[i]);
    }
    return (float)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* win: [cin, *r]; out: [C, *o]; start: window start in image coordinates (3-D). */
static void predict_window(const config *c, int h, const float *win, int64_t image, const int64_t start[3],
                           float *out, float *s) {
    const int64_t rv = prod3(c->r);
    int64_t o[3];
    head_window(c, h, o);
    const int64_t ov = prod3(o);
    for (int64_t v = 0; v < rv; v++) {
        float acc = 0.25f * win[v] * win[v];
        for (int64_t ci = 0; ci < c->cin; ci++) acc += win[ci * rv + v] * (1.0f + 0.5f * (float)ci);
        s[v] = acc;
    }
    const int first = 3 - c->dims;
    int64_t j[3];
    for (j[0] = 0; j[0] < o[0]; j[0]++)
        for (j[1] = 0; j[1] < o[1]; j[1]++)
            for (j[2] = 0; j[2] < o[2]; j[2]++) {
                float base;
                if (c->kind[h] == HEAD_SAME) {
                    base = s[(j[0] * c->r[1] + j[1]) * c->r[2] + j[2]];
                } else if (c->kind[h] == HEAD_DOUBLE) {
                    int64_t q[3];
                    for (int i = 0; i < 3; i++) q[i] = i >= first ? j[i] / 2 : j[i];
                    base = s[(q[0] * c->r[1] + q[1]) * c->r[2] + q[2]];
                } else {
                    float sum = 0.0f;
                    int64_t b[3], n = 0;
                    int64_t e[3];
                    for (int i = 0; i < 3; i++) e[i] = i >= first ? 2 : 1;
                    for (b[0] = 0; b[0] < e[0]; b[0]++)
                        for (b[1] = 0; b[1] < e[1]; b[1]++)
                            for (b[2] = 0; b[2] < e[2]; b[2]++) {
                                int64_t q0 = j[0] * e[0] + b[0], q1 = j[1] * e[1] + b[1],
                                        q2 = j[2] * e[2] + b[2];
                                sum += s[(q0 * c->r[1] + q1) * c->r[2] + q2];
                                n++;
                            }
                    base = sum / (float)n;
                }
                int64_t v = (j[0] * o[1] + j[1]) * o[2] + j[2];
                for (int64_t ch = 0; ch < c->channels[h]; ch++)
                    out[ch * ov + v] = base * (0.5f + 0.25f * (float)ch) +
                                       0.75f * hash_unit(c->salt, h, ch, image, start, j);
            }
}

/* ---- the naive reference -------------------------------------------------------- */

typedef struct naive {
    int64_t P[3], before[3];
    int64_t n_win[3];
    int64_t *starts[3]; /* padded coordinates */
    int64_t windows;    /* per image */
    int64_t out[2][3];  /* cropped result size per head */
    int placeable[2];   /* every window lands on integer positions */
    float *scores[2];   /* [batch, C, *out] */
} naive;

static void naive_free(naive *n) {
    for (int i = 0; i < 3; i++) free(n->starts[i]);
    for (int h = 0; h < 2; h++) free(n->scores[h]);
    memset(n, 0, sizeof(*n));
}

/* Source index of padded coordinate p along an axis; -1 for the constant fill. */
static int64_t pad_source(int64_t p, int64_t before, int64_t S, swi_pad mode) {
    int64_t x = p - before;
    if (x >= 0 && x < S) return x;
    switch (mode) {
    case SWI_PAD_CONSTANT: return -1;
    case SWI_PAD_REFLECT:
        while (x < 0 || x >= S) x = x < 0 ? -x : 2 * (S - 1) - x;
        return x;
    case SWI_PAD_REPLICATE: return x < 0 ? 0 : S - 1;
    case SWI_PAD_CIRCULAR: return ((x % S) + S) % S;
    }
    return -1;
}

/* MONAI's importance map in float32. */
static void naive_weights(const config *c, float *w) {
    const int64_t rv = prod3(c->r);
    if (c->mode == SWI_BLEND_CONSTANT) {
        for (int64_t i = 0; i < rv; i++) w[i] = 1.0f;
        return;
    }
    if (c->mode == SWI_BLEND_CUSTOM) {
        memcpy(w, c->custom_map, sizeof(float) * (size_t)rv);
        return;
    }
    float g[3][64];
    for (int i = 0; i < 3; i++) {
        float sigma = (float)(c->sigma[i] * (double)c->r[i]);
        for (int64_t j = 0; j < c->r[i]; j++) {
            float x = (float)j - (float)(c->r[i] - 1) / 2.0f;
            g[i][j] = i < 3 - c->dims ? 1.0f : expf(-(x * x) / (2.0f * sigma * sigma));
        }
    }
    float mn = INFINITY;
    for (int64_t a = 0; a < c->r[0]; a++)
        for (int64_t b = 0; b < c->r[1]; b++)
            for (int64_t e = 0; e < c->r[2]; e++) {
                float v = g[0][a] * g[1][b] * g[2][e];
                w[(a * c->r[1] + b) * c->r[2] + e] = v;
                if (v < mn) mn = v;
            }
    float floor_w = mn > 1e-3f ? mn : 1e-3f;
    for (int64_t i = 0; i < rv; i++)
        if (w[i] < floor_w) w[i] = floor_w;
}

/* Returns 0, or -1 when out of memory. */
static int naive_run(const config *c, naive *n) {
    memset(n, 0, sizeof(*n));
    int any_pad = 0;
    for (int i = 0; i < 3; i++) {
        n->P[i] = c->S[i] > c->r[i] ? c->S[i] : c->r[i];
        n->before[i] = (n->P[i] - c->S[i]) / 2;
        any_pad |= n->P[i] != c->S[i];
        int64_t step = c->r[i];
        if (c->r[i] != n->P[i]) {
            step = (int64_t)((double)c->r[i] * (1.0 - c->overlap[i]));
            if (step <= 0) step = 1;
        }
        int64_t cnt = 1;
        while ((cnt - 1) * step + c->r[i] < n->P[i]) cnt++;
        n->n_win[i] = cnt;
        n->starts[i] = malloc(sizeof(int64_t) * (size_t)cnt);
        if (n->starts[i] == NULL) return -1;
        for (int64_t t = 0; t < cnt; t++)
            n->starts[i][t] = t * step < n->P[i] - c->r[i] ? t * step : n->P[i] - c->r[i];
    }
    n->windows = prod3(n->n_win);

    /* padded copy */
    const int64_t pv = prod3(n->P), sv = prod3(c->S), rv = prod3(c->r);
    float *padded = malloc(sizeof(float) * (size_t)(c->batch * c->cin * pv));
    float *w = malloc(sizeof(float) * (size_t)rv);
    float *win = malloc(sizeof(float) * (size_t)(c->cin * rv));
    float *s = malloc(sizeof(float) * (size_t)rv);
    if (padded == NULL || w == NULL || win == NULL || s == NULL) goto oom;
    for (int64_t bc = 0; bc < c->batch * c->cin; bc++) {
        int64_t p[3];
        for (p[0] = 0; p[0] < n->P[0]; p[0]++)
            for (p[1] = 0; p[1] < n->P[1]; p[1]++)
                for (p[2] = 0; p[2] < n->P[2]; p[2]++) {
                    int64_t x0 = pad_source(p[0], n->before[0], c->S[0], c->pad);
                    int64_t x1 = pad_source(p[1], n->before[1], c->S[1], c->pad);
                    int64_t x2 = pad_source(p[2], n->before[2], c->S[2], c->pad);
                    float v = c->cval;
                    if (x0 >= 0 && x1 >= 0 && x2 >= 0)
                        v = c->input[bc * sv + (x0 * c->S[1] + x1) * c->S[2] + x2];
                    padded[bc * pv + (p[0] * n->P[1] + p[1]) * n->P[2] + p[2]] = v;
                }
    }
    naive_weights(c, w);

    for (int h = 0; h < c->n_heads; h++) {
        int64_t o[3], Q[3], lo_c[3], hi_c[3];
        head_window(c, h, o);
        const int64_t ov = prod3(o), C = c->channels[h];
        for (int i = 0; i < 3; i++) {
            Q[i] = n->P[i] * o[i] / c->r[i]; /* floor(P * z) */
            double z = (double)o[i] / (double)c->r[i];
            lo_c[i] = 0;
            hi_c[i] = Q[i];
            if (any_pad) { /* MONAI crops only when something was padded */
                lo_c[i] = (int64_t)nearbyint((double)n->before[i] * z);
                hi_c[i] = (int64_t)nearbyint((double)(n->before[i] + c->S[i]) * z);
                if (hi_c[i] > Q[i]) hi_c[i] = Q[i];
            }
            n->out[h][i] = hi_c[i] - lo_c[i];
        }
        const int64_t qv = prod3(Q);
        /* weights resized to the head's window (nearest-exact) */
        float *wz = malloc(sizeof(float) * (size_t)ov);
        float *pred = malloc(sizeof(float) * (size_t)(C * ov));
        double *acc = calloc((size_t)(c->batch * C * qv), sizeof(double));
        double *cnt = calloc((size_t)qv, sizeof(double));
        n->scores[h] = malloc(sizeof(float) * (size_t)(c->batch * C * prod3(n->out[h])));
        if (wz == NULL || pred == NULL || acc == NULL || cnt == NULL || n->scores[h] == NULL) {
            free(wz);
            free(pred);
            free(acc);
            free(cnt);
            goto oom;
        }
        int64_t j[3], src[3][128];
        for (int i = 0; i < 3; i++)
            for (int64_t t = 0; t < o[i]; t++) {
                int64_t q = (int64_t)floor(((double)t + 0.5) * (double)c->r[i] / (double)o[i]);
                src[i][t] = q < c->r[i] - 1 ? q : c->r[i] - 1;
            }
        for (j[0] = 0; j[0] < o[0]; j[0]++)
            for (j[1] = 0; j[1] < o[1]; j[1]++)
                for (j[2] = 0; j[2] < o[2]; j[2]++)
                    wz[(j[0] * o[1] + j[1]) * o[2] + j[2]] =
                        w[(src[0][j[0]] * c->r[1] + src[1][j[1]]) * c->r[2] + src[2][j[2]]];

        n->placeable[h] = 1;
        for (int64_t b = 0; b < c->batch; b++) {
            int64_t t[3];
            for (t[0] = 0; t[0] < n->n_win[0]; t[0]++)
                for (t[1] = 0; t[1] < n->n_win[1]; t[1]++)
                    for (t[2] = 0; t[2] < n->n_win[2]; t[2]++) {
                        int64_t ps[3], start[3], lo[3];
                        for (int i = 0; i < 3; i++) {
                            ps[i] = n->starts[i][t[i]];
                            start[i] = ps[i] - n->before[i];
                            lo[i] = ps[i] * o[i] / c->r[i];
                            if ((ps[i] * o[i]) % c->r[i] != 0 || ((ps[i] + c->r[i]) * o[i]) % c->r[i] != 0)
                                n->placeable[h] = 0;
                        }
                        for (int64_t ci = 0; ci < c->cin; ci++)
                            for (j[0] = 0; j[0] < c->r[0]; j[0]++)
                                for (j[1] = 0; j[1] < c->r[1]; j[1]++)
                                    for (j[2] = 0; j[2] < c->r[2]; j[2]++)
                                        win[ci * rv + (j[0] * c->r[1] + j[1]) * c->r[2] + j[2]] =
                                            padded[(b * c->cin + ci) * pv +
                                                   ((ps[0] + j[0]) * n->P[1] + ps[1] + j[1]) * n->P[2] +
                                                   ps[2] + j[2]];
                        predict_window(c, h, win, b, start, pred, s);
                        for (j[0] = 0; j[0] < o[0]; j[0]++)
                            for (j[1] = 0; j[1] < o[1]; j[1]++)
                                for (j[2] = 0; j[2] < o[2]; j[2]++) {
                                    int64_t v = (j[0] * o[1] + j[1]) * o[2] + j[2];
                                    int64_t q = ((lo[0] + j[0]) * Q[1] + lo[1] + j[1]) * Q[2] + lo[2] + j[2];
                                    for (int64_t ch = 0; ch < C; ch++)
                                        acc[(b * C + ch) * qv + q] +=
                                            (double)pred[ch * ov + v] * (double)wz[v];
                                    if (b == 0) /* the count is shared by all images */
                                        cnt[q] += (double)wz[v];
                                }
                    }
        }
        const int64_t *os = n->out[h];
        const int64_t outv = prod3(os);
        for (int64_t bc = 0; bc < c->batch * C; bc++)
            for (j[0] = 0; j[0] < os[0]; j[0]++)
                for (j[1] = 0; j[1] < os[1]; j[1]++)
                    for (j[2] = 0; j[2] < os[2]; j[2]++) {
                        int64_t q = ((lo_c[0] + j[0]) * Q[1] + lo_c[1] + j[1]) * Q[2] + lo_c[2] + j[2];
                        n->scores[h][bc * outv + (j[0] * os[1] + j[1]) * os[2] + j[2]] =
                            (float)(acc[bc * qv + q] / cnt[q]);
                    }
        free(wz);
        free(pred);
        free(acc);
        free(cnt);
    }
    free(padded);
    free(w);
    free(win);
    free(s);
    return 0;
oom:
    free(padded);
    free(w);
    free(win);
    free(s);
    return -1;
}

/* Reductions of one voxel's scores (stride apart), in double. */
typedef struct voxel_red {
    int64_t label;  /* first NaN, else lowest index of the maximum */
    int64_t label2; /* second best, for the tie check */
    double gap;     /* best - second best */
    double max, conf, entropy;
} voxel_red;

static voxel_red reduce_voxel(const float *x, int64_t C, int64_t stride) {
    voxel_red r;
    r.label = 0;
    for (int64_t c = 0; c < C; c++) {
        if (isnan(x[c * stride])) {
            r.label = c;
            break;
        }
        if (x[c * stride] > x[r.label * stride]) r.label = c;
    }
    double best = x[r.label * stride], second = -INFINITY;
    for (int64_t c = 0; c < C; c++)
        if (c != r.label && x[c * stride] > second) second = x[c * stride];
    r.gap = C > 1 ? best - second : INFINITY;
    r.label2 = 0;
    r.max = best;
    double z = 0.0;
    for (int64_t c = 0; c < C; c++) z += exp((double)x[c * stride] - best);
    r.conf = 1.0 / z;
    double ent = 0.0;
    for (int64_t c = 0; c < C; c++) {
        double p = exp((double)x[c * stride] - best) / z;
        if (p > 0.0) ent -= p * log(p);
    }
    r.entropy = ent;
    return r;
}

/* ---- outputs and region sinks --------------------------------------------------- */

typedef enum sink_kind { SINK_DST = 0, SINK_LIB, SINK_REGION, SINK_DST_REGION } sink_kind;
static const char *const sink_name[] = {"dst", "library", "regions", "dst+regions"};
static const char *const reduce_name[] = {"none",    "argmax", "max",    "confidence",
                                          "entropy", "custom", "softmax"};

typedef struct out_spec {
    int head;
    swi_reduce reduce;
    swi_dtype dtype_req, dtype;
    sink_kind sink;
    int twin;       /* output holding the same values in dst, or -1 */
    int64_t planes; /* channels for NONE/CUSTOM, else 1 */
    int64_t vox;    /* voxels per image and plane */
    size_t elem, bytes;
    void *dst;
    /* region sink */
    pthread_mutex_t mu;
    unsigned char *assembled;
    uint8_t *cover;
    int index;
    int64_t batch;
    int64_t out[3]; /* result size (3-D) */
    int dims;
    int64_t region_calls;
    int region_errors;
    char region_error[256];
} out_spec;

static void region_fail(out_spec *os, const char *msg) {
    if (os->region_errors++ == 0) snprintf(os->region_error, sizeof(os->region_error), "%s", msg);
}

static int on_region(void *user, const swi_region *rg) {
    out_spec *os = user;
    char msg[256];
    pthread_mutex_lock(&os->mu);
    os->region_calls++;
    int bad = rg->output != os->index || rg->head != os->head || rg->image < 0 || rg->image >= os->batch ||
              rg->dims != os->dims || rg->channels != os->planes || rg->dtype != os->dtype ||
              rg->data == NULL;
    int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    for (int k = 0; k < os->dims && !bad; k++) {
        int i = k + 3 - os->dims;
        lo[i] = rg->lo[k];
        hi[i] = rg->hi[k];
        bad = lo[i] < 0 || hi[i] > os->out[i] || lo[i] >= hi[i];
    }
    if (bad) {
        snprintf(msg, sizeof(msg),
                 "bad region: output %d head %d image %lld dims %d channels %lld dtype %d "
                 "(expected output %d head %d channels %lld dtype %d)",
                 rg->output, rg->head, (long long)rg->image, rg->dims, (long long)rg->channels,
                 (int)rg->dtype, os->index, os->head, (long long)os->planes, (int)os->dtype);
        region_fail(os, msg);
        pthread_mutex_unlock(&os->mu);
        return 0; /* keep going: the checks after the run report it */
    }
    const int64_t ext[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    const int64_t rvox = prod3(ext);
    const unsigned char *src = rg->data;
    int64_t j[3];
    for (int64_t p = 0; p < os->planes; p++)
        for (j[0] = 0; j[0] < ext[0]; j[0]++)
            for (j[1] = 0; j[1] < ext[1]; j[1]++)
                for (j[2] = 0; j[2] < ext[2]; j[2]++) {
                    int64_t v = ((lo[0] + j[0]) * os->out[1] + lo[1] + j[1]) * os->out[2] + lo[2] + j[2];
                    int64_t full = (rg->image * os->planes + p) * os->vox + v;
                    const unsigned char *from =
                        src + (size_t)(p * rvox + (j[0] * ext[1] + j[1]) * ext[2] + j[2]) * os->elem;
                    memcpy(os->assembled + (size_t)full * os->elem, from, os->elem);
                    if (p == 0) os->cover[rg->image * os->vox + v]++;
                    /* with dst set the region is stored before the callback */
                    if (os->dst != NULL &&
                        memcmp((unsigned char *)os->dst + (size_t)full * os->elem, from, os->elem) != 0) {
                        snprintf(msg, sizeof(msg),
                                 "region data differs from dst at image %lld voxel %lld plane %lld",
                                 (long long)rg->image, (long long)v, (long long)p);
                        region_fail(os, msg);
                    }
                }
    pthread_mutex_unlock(&os->mu);
    return 0;
}

/* ---- predictor wrapper ------------------------------------------------------------ */

typedef struct pred_state {
    const config *c;
    const naive *n;
    int sw_batch;
    int64_t calls, windows;
    int64_t *seen; /* [batch * windows per image] */
    int errors;
    char error[256];
    float *win, *s;
} pred_state;

static void pred_fail(pred_state *ps, const char *msg) {
    if (ps->errors++ == 0) snprintf(ps->error, sizeof(ps->error), "%s", msg);
}

static int random_predict(void *user, swi_batch *b) {
    pred_state *ps = user;
    const config *c = ps->c;
    char msg[256];
    ps->calls++;
    int count = swi_batch_count(b);
    const int64_t *roi = swi_batch_roi(b);
    const float *in = swi_batch_input(b);
    if (count < 1 || count > ps->sw_batch || swi_batch_dims(b) != c->dims ||
        swi_batch_channels(b) != c->cin || roi == NULL || in == NULL) {
        snprintf(msg, sizeof(msg), "batch: count %d (sw_batch %d) dims %d channels %lld", count, ps->sw_batch,
                 swi_batch_dims(b), (long long)swi_batch_channels(b));
        pred_fail(ps, msg);
        swi_batch_set_error(b, msg);
        return 1;
    }
    for (int k = 0; k < c->dims; k++) {
        if (roi[k] != c->r[D3(c, k)]) {
            snprintf(msg, sizeof(msg), "batch roi[%d] = %lld, expected %lld", k, (long long)roi[k],
                     (long long)c->r[D3(c, k)]);
            pred_fail(ps, msg);
            swi_batch_set_error(b, msg);
            return 1;
        }
    }
    float *out[2];
    int64_t ov[2];
    for (int h = 0; h < c->n_heads; h++) {
        int64_t o[3], sp[SWI_MAX_DIMS];
        head_window(c, h, o);
        for (int k = 0; k < c->dims; k++) sp[k] = o[D3(c, k)];
        ov[h] = prod3(o);
        out[h] = swi_batch_output(b, h, c->channels[h], sp);
        if (out[h] == NULL) {
            snprintf(msg, sizeof(msg), "swi_batch_output(head %d) returned NULL", h);
            pred_fail(ps, msg);
            swi_batch_set_error(b, msg);
            return 1;
        }
    }
    const int64_t rv = prod3(c->r);
    for (int i = 0; i < count; i++) {
        int64_t image = swi_batch_image(b, i);
        const int64_t *st = swi_batch_start(b, i);
        int64_t start[3] = {0, 0, 0}, t[3] = {0, 0, 0};
        int ok = image >= 0 && image < c->batch && st != NULL;
        for (int k = 0; k < c->dims && ok; k++) {
            int d3 = D3(c, k);
            start[d3] = st[k];
            /* which window of the grid is this? */
            ok = 0;
            for (int64_t q = 0; q < ps->n->n_win[d3]; q++) {
                if (ps->n->starts[d3][q] - ps->n->before[d3] == st[k]) {
                    t[d3] = q;
                    ok = 1;
                    break;
                }
            }
        }
        if (!ok) {
            snprintf(msg, sizeof(msg), "window %d: image %lld start %lld %lld %lld not on the grid", i,
                     (long long)image, (long long)start[0], (long long)start[1], (long long)start[2]);
            pred_fail(ps, msg);
            swi_batch_set_error(b, msg);
            return 1;
        }
        ps->seen[image * ps->n->windows + (t[0] * ps->n->n_win[1] + t[1]) * ps->n->n_win[2] + t[2]]++;
        ps->windows++;
        const float *x = in + (int64_t)i * c->cin * rv;
        for (int h = 0; h < c->n_heads; h++)
            predict_window(c, h, x, image, start, out[h] + (int64_t)i * c->channels[h] * ov[h], ps->s);
    }
    return 0;
}

/* ---- one configuration ---------------------------------------------------------- */

typedef struct tally {
    int64_t configs, runs, zoom_refused, empty_refused, failures;
    int64_t outputs_checked, values_checked;
    int64_t frontier_compared; /* runs whose planned frontier peak was checked */
} tally;

static int g_details; /* details printed for the current config */

static void report(const config *c, const run_opts *ro, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int g_config_failed;
static int g_config_index;
static uint64_t g_seed;

static void report(const config *c, const run_opts *ro, const char *fmt, ...) {
    check_failures++;
    check_count++;
    if (!g_config_failed) {
        fprintf(stderr, "config %d (seed %llu) FAILED:\n", g_config_index, (unsigned long long)g_seed);
        print_config(c, ro, stderr);
        g_config_failed = 1;
    }
    if (g_details++ >= MAX_DETAILS) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("    ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void pass(void) { check_count++; }

static double label_at(const out_spec *os, const void *data, int64_t i) {
    if (os->dtype == SWI_DTYPE_UINT8) return ((const uint8_t *)data)[i];
    if (os->dtype == SWI_DTYPE_UINT16) return ((const uint16_t *)data)[i];
    return ((const float *)data)[i];
}

/* Compare one output's values (from dst, the library or assembled regions) with the
 * naive reference and, where given, with the run's own scores for the same head. */
static void check_output(const config *c, const run_opts *ro, const naive *n, const out_spec *os,
                         const void *data, const float *own_scores, const char *where, tally *t) {
    const int h = os->head;
    const int64_t C = c->channels[h], vox = os->vox;
    const float *ref = n->scores[h];
    int64_t bad = 0, bad_self = 0;
    char first[256] = "", first_self[256] = "";
    t->outputs_checked++;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t v = 0; v < vox; v++) {
            const float *x = ref + b * C * vox + v;
            if (os->reduce == SWI_REDUCE_NONE || os->reduce == SWI_REDUCE_CUSTOM) {
                for (int64_t ch = 0; ch < C; ch++) {
                    double e = x[ch * vox];
                    double g = ((const float *)data)[(b * C + ch) * vox + v];
                    t->values_checked++;
                    if (!(fabs(g - e) <= ABS_TOL + REL_TOL * fabs(e)) && bad++ == 0)
                        snprintf(first, sizeof(first),
                                 "image %lld channel %lld voxel %lld: got %.7g expected %.7g", (long long)b,
                                 (long long)ch, (long long)v, g, e);
                }
                continue;
            }
            if (os->reduce == SWI_REDUCE_SOFTMAX) {
                /* against the reference's scores (loose: they differ by float rounding) and
                 * against this run's own scores (tight: the same arithmetic on the same bits) */
                for (int pass_ = 0; pass_ < (own_scores ? 2 : 1); pass_++) {
                    const float *y = pass_ ? own_scores + b * C * vox + v : x;
                    double mx = -INFINITY, z = 0.0;
                    for (int64_t ch = 0; ch < C; ch++) mx = y[ch * vox] > mx ? y[ch * vox] : mx;
                    for (int64_t ch = 0; ch < C; ch++) z += exp(y[ch * vox] - mx);
                    for (int64_t ch = 0; ch < C; ch++) {
                        double e = exp(y[ch * vox] - mx) / z;
                        double g = ((const float *)data)[(b * C + ch) * vox + v];
                        double tol = pass_ ? 1e-6 : 5e-4;
                        t->values_checked++;
                        if (!(fabs(g - e) <= tol) && (pass_ ? bad_self++ : bad++) == 0)
                            snprintf(pass_ ? first_self : first, sizeof(first),
                                     "image %lld channel %lld voxel %lld: softmax %.7g expected %.7g%s",
                                     (long long)b, (long long)ch, (long long)v, g, e,
                                     pass_ ? " (from the run's own scores)" : "");
                    }
                }
                continue;
            }
            voxel_red r = reduce_voxel(x, C, vox);
            double g = label_at(os, data, b * vox + v);
            double e = 0.0, tol = 0.0;
            int skip = 0;
            switch (os->reduce) {
            case SWI_REDUCE_ARGMAX:
                e = (double)r.label;
                skip = r.gap < TIE_GAP;
                break;
            case SWI_REDUCE_MAX:
                e = r.max;
                tol = ABS_TOL + REL_TOL * fabs(e);
                break;
            case SWI_REDUCE_CONFIDENCE:
                e = r.conf;
                tol = 5e-4;
                break;
            case SWI_REDUCE_ENTROPY:
                e = r.entropy;
                tol = 1e-3;
                break;
            default: break;
            }
            t->values_checked++;
            if (!skip && !(fabs(g - e) <= tol) && bad++ == 0)
                snprintf(first, sizeof(first), "image %lld voxel %lld: got %.7g expected %.7g", (long long)b,
                         (long long)v, g, e);
            if (own_scores != NULL) {
                /* the same reduction of this run's own blended scores: tight */
                voxel_red s = reduce_voxel(own_scores + b * C * vox + v, C, vox);
                double es = os->reduce == SWI_REDUCE_ARGMAX       ? (double)s.label
                            : os->reduce == SWI_REDUCE_MAX        ? (double)(float)s.max
                            : os->reduce == SWI_REDUCE_CONFIDENCE ? s.conf
                                                                  : s.entropy;
                double ts = os->reduce == SWI_REDUCE_ARGMAX || os->reduce == SWI_REDUCE_MAX
                                ? 0.0
                                : 1e-5 * (1.0 + fabs(es));
                if (!(fabs(g - es) <= ts) && bad_self++ == 0)
                    snprintf(first_self, sizeof(first_self),
                             "image %lld voxel %lld: got %.9g, from the run's own scores %.9g", (long long)b,
                             (long long)v, g, es);
            }
        }
    if (bad)
        report(c, ro, "output head %d %s via %s (%s): %lld values differ from the reference; %s", h,
               reduce_name[os->reduce], sink_name[os->sink], where, (long long)bad, first);
    else
        pass();
    if (bad_self)
        report(c, ro, "output head %d %s via %s (%s): %lld values disagree with the run's own scores; %s", h,
               reduce_name[os->reduce], sink_name[os->sink], where, (long long)bad_self, first_self);
    else if (own_scores != NULL)
        pass();
}

typedef struct run_result {
    int ok;
    float *scores[2]; /* copies of the NONE results per head, for cross-run comparison */
} run_result;

static void run_result_free(run_result *rr) {
    free(rr->scores[0]);
    free(rr->scores[1]);
    memset(rr, 0, sizeof(*rr));
}

static void random_run_opts(const config *c, run_opts *ro) {
    ro->sw_batch = (int)rng_int(1, 7);
    ro->threads = (int)rng_int(0, 3);
    ro->pipeline = (int)rng_int(-1, 1);
    ro->order[0] = ro->order[1] = ro->order[2] = -1;
    ro->budget = 0;
    if (rng_int(0, 1)) {
        int perm[3] = {0, 1, 2};
        for (int i = c->dims - 1; i > 0; i--) {
            int j = (int)rng_int(0, i);
            int tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        for (int i = 0; i < c->dims; i++) ro->order[i] = perm[i];
    }
}

static void fill_params(const config *c, const run_opts *ro, swi_params *p, swi_blend mode,
                        const float *map) {
    swi_params_init(p, c->dims);
    for (int k = 0; k < c->dims; k++) {
        int d3 = D3(c, k);
        p->roi[k] = c->roi_param[d3];
        p->overlap[k] = c->overlap[d3];
        p->sigma_scale[k] = c->sigma[d3];
        if (ro->order[0] >= 0) p->order[k] = ro->order[k];
    }
    p->order_mode = ro->order[0] >= 0 ? SWI_ORDER_FIXED : SWI_ORDER_AUTO;
    p->mode = mode;
    p->weight_map = map;
    p->padding_mode = c->pad;
    p->cval = c->cval;
    p->sw_batch_size = ro->sw_batch;
    p->threads = ro->threads;
    p->pipeline = ro->pipeline < 0 ? SWI_PIPELINE_AUTO : ro->pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    p->n_heads = c->n_heads;
    for (int h = 0; h < c->n_heads; h++) {
        int64_t o[3];
        head_window(c, h, o);
        p->heads[h].channels = c->declare_channels[h] ? c->channels[h] : 0;
        /* a declared head with spatial 0 means "the roi", so a zoomed head whose channels
         * are declared must declare its window too */
        int zoomed = 0;
        for (int k = 0; k < c->dims; k++) zoomed |= o[D3(c, k)] != p->roi[k];
        int decl_s = c->declare_spatial[h] || (c->declare_channels[h] && zoomed);
        for (int k = 0; k < c->dims; k++) p->heads[h].spatial[k] = decl_s ? o[D3(c, k)] : 0;
    }
}

/* Choose this run's outputs: every head's scores, then a few reductions and sinks. */
static int choose_outputs(const config *c, const naive *n, out_spec *os, int simple) {
    int m = 0;
    for (int h = 0; h < c->n_heads; h++) {
        memset(&os[m], 0, sizeof(os[m]));
        os[m].head = h;
        os[m].reduce = SWI_REDUCE_NONE;
        os[m].sink = h == 0 || simple ? SINK_DST : (rng_int(0, 1) ? SINK_DST : SINK_LIB);
        os[m].twin = -1;
        m++;
    }
    int extra = simple ? 0 : (int)rng_int(0, 3);
    for (int e = 0; e < extra; e++) {
        int h = (int)rng_int(0, c->n_heads - 1);
        swi_reduce red = (swi_reduce)rng_int(1, 6);
        sink_kind sk = red == SWI_REDUCE_CUSTOM ? SINK_REGION : (sink_kind)rng_int(0, 3);
        memset(&os[m], 0, sizeof(os[m]));
        os[m].head = h;
        os[m].reduce = red;
        os[m].sink = sk;
        os[m].twin = -1;
        if (red == SWI_REDUCE_ARGMAX)
            os[m].dtype_req = rng_int(0, 3) == 0 ? SWI_DTYPE_UINT16
                              : rng_int(0, 1)    ? SWI_DTYPE_UINT8
                                                 : SWI_DTYPE_AUTO;
        else
            os[m].dtype_req = rng_int(0, 1) ? SWI_DTYPE_FLOAT32 : SWI_DTYPE_AUTO;
        m++;
        if (sk == SINK_REGION) {
            /* the same values stored in dst, to compare the reassembly with */
            if (red == SWI_REDUCE_CUSTOM) {
                os[m - 1].twin = h; /* head h's NONE output has index h */
            } else {
                os[m] = os[m - 1];
                os[m].sink = SINK_DST;
                os[m - 1].twin = m;
                m++;
            }
        }
    }
    for (int i = 0; i < m; i++) {
        out_spec *o = &os[i];
        o->index = i;
        o->batch = c->batch;
        o->dims = c->dims;
        memcpy(o->out, n->out[o->head], sizeof(o->out));
        o->vox = prod3(o->out);
        int none =
            o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_CUSTOM || o->reduce == SWI_REDUCE_SOFTMAX;
        o->planes = none ? c->channels[o->head] : 1;
        if (o->reduce == SWI_REDUCE_ARGMAX)
            o->dtype = o->dtype_req == SWI_DTYPE_UINT16 ? SWI_DTYPE_UINT16
                       : c->channels[o->head] > 256     ? SWI_DTYPE_UINT16
                                                        : SWI_DTYPE_UINT8;
        else
            o->dtype = SWI_DTYPE_FLOAT32;
        o->elem = o->dtype == SWI_DTYPE_UINT8 ? 1 : o->dtype == SWI_DTYPE_UINT16 ? 2 : 4;
        o->bytes = (size_t)(c->batch * o->planes * o->vox) * o->elem;
    }
    return m;
}

/* One swi_run of config c; checks everything it can against the reference. */
static void run_once(const config *c, const naive *n, const run_opts *ro, swi_blend mode, const float *map,
                     int simple, run_result *rr, tally *t) {
    out_spec os[MAX_OUTPUTS];
    swi_output outs[MAX_OUTPUTS];
    int m = choose_outputs(c, n, os, simple);
    int ok_alloc = 1;
    memset(rr, 0, sizeof(*rr));
    pred_state ps;
    memset(&ps, 0, sizeof(ps));
    ps.c = c;
    ps.n = n;
    ps.sw_batch = ro->sw_batch;
    ps.seen = calloc((size_t)(c->batch * n->windows), sizeof(int64_t));
    ps.s = malloc(sizeof(float) * (size_t)prod3(c->r));
    ok_alloc = ps.seen != NULL && ps.s != NULL;

    for (int i = 0; i < m; i++) {
        out_spec *o = &os[i];
        pthread_mutex_init(&o->mu, NULL);
        swi_output_init(&outs[i], o->head, o->reduce);
        outs[i].dtype = o->dtype_req;
        if (o->sink == SINK_DST || o->sink == SINK_DST_REGION) {
            o->dst = malloc(o->bytes);
            ok_alloc &= o->dst != NULL;
            if (o->dst != NULL) memset(o->dst, 0xA5, o->bytes);
            outs[i].dst = o->dst;
            outs[i].dst_bytes = o->bytes;
        }
        if (o->sink == SINK_REGION || o->sink == SINK_DST_REGION) {
            o->assembled = calloc(o->bytes, 1);
            o->cover = calloc((size_t)(c->batch * o->vox), 1);
            ok_alloc &= o->assembled != NULL && o->cover != NULL;
            outs[i].on_region = on_region;
            outs[i].user = o;
        }
    }
    swi_ctx *ctx = swi_create();
    if (!ok_alloc || ctx == NULL) {
        report(c, ro, "out of memory in the test");
        goto done;
    }

    swi_params p;
    fill_params(c, ro, &p, mode, map);
    swi_tensor in = {.data = c->input, .batch = c->batch, .channels = c->cin, .dims = c->dims, .size = {0}};
    for (int k = 0; k < c->dims; k++) in.size[k] = c->S[D3(c, k)];

    int all_placeable = 1;
    for (int h = 0; h < c->n_heads; h++) all_placeable &= n->placeable[h];

    swi_plan plan;
    memset(&plan, 0, sizeof(plan));
    swi_status pst = swi_plan_run(ctx, &p, &in, outs, m, &plan);
    if (ro->budget && pst == SWI_OK) {
        /* the smallest budget the plan admits: the run must fit it and give the same */
        p.max_memory = plan.bytes_min;
        pst = swi_plan_run(ctx, &p, &in, outs, m, &plan);
        if (pst == SWI_OK && plan.bytes_peak > p.max_memory)
            report(c, ro, "plan at max_memory %zu predicts a peak of %zu", p.max_memory, plan.bytes_peak);
    }
    swi_predictor pred = {random_predict, &ps};
    swi_status st = swi_run(ctx, &p, &in, &pred, outs, m);
    t->runs++;
    if (!all_placeable && st == SWI_ERR_SHAPE) {
        /* a window of a zoomed head lands on a fractional position; the header lets the
         * engine refuse it */
        t->zoom_refused++;
        pass();
        goto done;
    }
    if (pst != SWI_OK) report(c, ro, "swi_plan_run: %s: %s", swi_status_name(pst), swi_last_error(ctx));
    if (st != SWI_OK) {
        report(c, ro, "swi_run: %s: %s%s%s", swi_status_name(st), swi_last_error(ctx),
               ps.errors ? " / predictor saw: " : "", ps.errors ? ps.error : "");
        goto done;
    }
    pass();
    if (ps.errors) report(c, ro, "predictor: %s", ps.error);

    /* the planner's frontier is the engine's: the same peak of partial sums, to the byte */
    {
        size_t planned, measured;
        if (swi__frontier_stats(ctx, &planned, &measured)) {
            if (planned != measured)
                report(c, ro, "frontier peak: planned %zu bytes, the run reached %zu", planned, measured);
            else
                pass();
            t->frontier_compared++;
        }
    }

    /* every window exactly once */
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < c->batch * n->windows; i++)
        if (ps.seen[i] != 1 && wrong++ == 0) first = i;
    if (wrong)
        report(c, ro, "%lld windows not seen exactly once (first: image %lld window %lld seen %lld)",
               (long long)wrong, (long long)(first / n->windows), (long long)(first % n->windows),
               (long long)ps.seen[first]);
    else
        pass();

    /* the plan */
    if (pst == SWI_OK) {
        int bad = plan.dims != c->dims || plan.windows_per_image != n->windows ||
                  plan.windows_total != n->windows * c->batch || plan.windows_total != ps.windows ||
                  plan.predictor_calls != ps.calls || plan.sw_batch_size < 1 ||
                  plan.sw_batch_size > ro->sw_batch;
        for (int k = 0; k < c->dims; k++) {
            int d3 = D3(c, k);
            bad |= plan.roi[k] != c->r[d3] || plan.padded[k] != n->P[d3] ||
                   plan.pad_before[k] != n->before[d3] || plan.windows_per_axis[k] != n->n_win[d3];
            if (ro->order[0] >= 0) bad |= plan.order[k] != ro->order[k];
        }
        int seen_axes = 0;
        for (int k = 0; k < c->dims; k++)
            if (plan.order[k] >= 0 && plan.order[k] < c->dims) seen_axes |= 1 << plan.order[k];
        bad |= seen_axes != (1 << c->dims) - 1;
        for (int h = 0; h < c->n_heads; h++)
            bad |= plan.head_channels[h] != (c->declare_channels[h] ? c->channels[h] : 0);
        if (bad)
            report(c, ro,
                   "plan: dims %d windows %lld/%lld (expected %lld/%lld, predictor saw %lld in "
                   "%lld calls, plan says %lld calls) roi[0] %lld padded[0] %lld before[0] %lld "
                   "per_axis[0] %lld (expected %lld %lld %lld %lld) order %d %d %d sw_batch %d",
                   plan.dims, (long long)plan.windows_per_image, (long long)plan.windows_total,
                   (long long)n->windows, (long long)(n->windows * c->batch), (long long)ps.windows,
                   (long long)ps.calls, (long long)plan.predictor_calls, (long long)plan.roi[0],
                   (long long)plan.padded[0], (long long)plan.pad_before[0],
                   (long long)plan.windows_per_axis[0], (long long)c->r[D3(c, 0)], (long long)n->P[D3(c, 0)],
                   (long long)n->before[D3(c, 0)], (long long)n->n_win[D3(c, 0)], plan.order[0],
                   plan.order[1], plan.order[2], plan.sw_batch_size);
        else
            pass();
    }

    for (int h = 0; h < c->n_heads; h++) {
        int64_t size[SWI_MAX_DIMS] = {0};
        int rd = swi_result_size(ctx, h, size);
        int same = rd == c->dims;
        for (int k = 0; k < c->dims && same; k++) same = size[k] == n->out[h][D3(c, k)];
        int64_t want[3] = {0, 0, 0};
        for (int k = 0; k < c->dims; k++) want[k] = n->out[h][D3(c, k)];
        if (!same)
            report(c, ro, "head %d: swi_result_size %d dims [%lld %lld %lld], expected [%lld %lld %lld]", h,
                   rd, (long long)size[0], (long long)size[1], (long long)size[2], (long long)want[0],
                   (long long)want[1], (long long)want[2]);
        else
            pass();
        if (swi_result_channels(ctx, h) != c->channels[h])
            report(c, ro, "head %d: swi_result_channels %lld, expected %lld", h,
                   (long long)swi_result_channels(ctx, h), (long long)c->channels[h]);
        else
            pass();
        if (!same) goto done; /* the layouts would not line up */
    }

    /* where each output's values are */
    const void *data[MAX_OUTPUTS] = {0};
    for (int i = 0; i < m; i++) {
        out_spec *o = &os[i];
        if (o->sink == SINK_DST || o->sink == SINK_DST_REGION) {
            data[i] = o->dst;
        } else if (o->sink == SINK_LIB) {
            size_t bytes = 0;
            data[i] = swi_result(ctx, i, &bytes);
            if (data[i] == NULL || bytes != o->bytes) {
                report(c, ro, "output %d: swi_result gives %p with %zu bytes, expected %zu", i, data[i],
                       bytes, o->bytes);
                data[i] = NULL;
            } else {
                pass();
            }
        } else {
            data[i] = o->assembled;
            if (swi_result(ctx, i, NULL) != NULL)
                report(c, ro, "output %d: region-only output has a library result", i);
        }
        if (o->sink == SINK_REGION || o->sink == SINK_DST_REGION) {
            int64_t uncovered = 0, multi = 0;
            for (int64_t v = 0; v < c->batch * o->vox; v++) {
                uncovered += o->cover[v] == 0;
                multi += o->cover[v] > 1;
            }
            if (uncovered || multi || o->region_errors)
                report(c, ro,
                       "output %d (%s via %s): %lld voxels never delivered, %lld delivered more "
                       "than once, %d bad regions in %lld calls%s%s",
                       i, reduce_name[o->reduce], sink_name[o->sink], (long long)uncovered, (long long)multi,
                       o->region_errors, (long long)o->region_calls, o->region_errors ? ": " : "",
                       o->region_error);
            else
                pass();
        }
    }
    /* head scores of this run (outputs 0..n_heads-1 are NONE) */
    const float *own[2] = {data[0], c->n_heads > 1 ? data[1] : NULL};
    for (int i = 0; i < m; i++) {
        if (data[i] == NULL) continue;
        out_spec *o = &os[i];
        check_output(c, ro, n, o, data[i], o->reduce == SWI_REDUCE_NONE ? NULL : own[o->head], "", t);
        if (o->twin >= 0 && data[o->twin] != NULL) {
            /* reassembled regions must be exactly what dst holds */
            int64_t cnt = (int64_t)(o->bytes / o->elem), diff = 0, at = -1;
            for (int64_t v = 0; v < cnt; v++)
                if (memcmp((const unsigned char *)data[i] + v * (int64_t)o->elem,
                           (const unsigned char *)data[o->twin] + v * (int64_t)o->elem, o->elem) != 0 &&
                    diff++ == 0)
                    at = v;
            if (diff)
                report(c, ro,
                       "output %d (%s via regions): %lld values differ from output %d in "
                       "dst, first at %lld",
                       i, reduce_name[o->reduce], (long long)diff, o->twin, (long long)at);
            else
                pass();
        }
    }
    rr->ok = 1;
    for (int h = 0; h < c->n_heads; h++) {
        size_t bytes = sizeof(float) * (size_t)(c->batch * c->channels[h] * prod3(n->out[h]));
        rr->scores[h] = malloc(bytes);
        if (rr->scores[h] == NULL || own[h] == NULL) {
            rr->ok = 0;
            continue;
        }
        memcpy(rr->scores[h], own[h], bytes);
    }
done:
    swi_free(ctx);
    for (int i = 0; i < m; i++) {
        free(os[i].dst);
        free(os[i].assembled);
        free(os[i].cover);
        pthread_mutex_destroy(&os[i].mu);
    }
    free(ps.seen);
    free(ps.s);
}

/* Results of two runs that differ only in order/threads/sw_batch/pipeline. */
static void compare_runs(const config *c, const naive *n, const run_opts *ro_a, const run_opts *ro_b,
                         const run_result *a, const run_result *b, double rel, double abs_tol,
                         const char *what) {
    for (int h = 0; h < c->n_heads; h++) {
        if (a->scores[h] == NULL || b->scores[h] == NULL) continue;
        int64_t cnt = c->batch * c->channels[h] * prod3(n->out[h]), bad = 0, at = -1;
        for (int64_t i = 0; i < cnt; i++) {
            double x = a->scores[h][i], y = b->scores[h][i];
            double tol = rel * fmax(fabs(x), fabs(y)) + abs_tol;
            if (!(fabs(x - y) <= tol) && bad++ == 0) at = i;
        }
        if (bad)
            report(c, ro_b,
                   "%s: head %d: %lld values differ from the run with sw_batch %d threads %d "
                   "order %d %d %d pipeline %d; first at %lld: %.9g vs %.9g",
                   what, h, (long long)bad, ro_a->sw_batch, ro_a->threads, ro_a->order[0], ro_a->order[1],
                   ro_a->order[2], ro_a->pipeline, (long long)at, (double)a->scores[h][at],
                   (double)b->scores[h][at]);
        else
            pass();
    }
}

/* ---- random configurations ------------------------------------------------------- */

static int pad_ok(const config *c, int i) {
    int64_t P = c->S[i] > c->r[i] ? c->S[i] : c->r[i];
    int64_t total = P - c->S[i], after = total - total / 2;
    if (total == 0) return 1;
    if (c->pad == SWI_PAD_REFLECT) /* F.pad: each side's pad below the size */
        return after < c->S[i];
    if (c->pad == SWI_PAD_CIRCULAR) return after <= c->S[i];
    return 1;
}

static void random_config(config *c) {
    memset(c, 0, sizeof(*c));
    c->dims = (int)rng_int(1, 3);
    static const int64_t max_size[4] = {0, 40, 16, 9};
    c->batch = rng_int(1, 3);
    c->cin = rng_int(1, 3);
    c->n_heads = rng_int(0, 2) == 0 ? 2 : 1;
    for (int h = 0; h < c->n_heads; h++) {
        int zoom = h == 0 ? rng_int(0, 5) == 0 : rng_int(0, 1);
        c->kind[h] = zoom ? (rng_int(0, 2) == 0 ? HEAD_DOUBLE : HEAD_HALF) : HEAD_SAME;
        c->channels[h] = rng_int(0, 4) == 0 ? 1 : rng_int(2, 6);
        c->declare_channels[h] = (int)rng_int(0, 1);
        c->declare_spatial[h] = (int)rng_int(0, 1);
    }
    int need_even = 0;
    for (int h = 0; h < c->n_heads; h++) need_even |= c->kind[h] == HEAD_HALF;
    c->pad = (swi_pad)rng_int(0, 3);
    c->cval = rng_int(0, 1) ? 0.0f : (float)(rng_unit() * 4.0 - 2.0);
    for (int i = 0; i < 3; i++) {
        c->S[i] = c->r[i] = c->roi_param[i] = 1;
        c->overlap[i] = 0.25;
        c->sigma[i] = 0.125;
    }
    for (int k = 0; k < c->dims; k++) {
        int i = D3(c, k);
        c->S[i] = rng_int(1, max_size[c->dims]);
        int64_t pick = rng_int(0, 19);
        if (pick < 3)
            c->roi_param[i] = -rng_int(0, 1); /* whole dim */
        else if (pick < 7)
            c->roi_param[i] = c->S[i] + rng_int(1, 5); /* padded */
        else if (pick < 9)
            c->roi_param[i] = c->S[i];
        else
            c->roi_param[i] = rng_int(1, c->S[i]);
        c->r[i] = c->roi_param[i] <= 0 ? c->S[i] : c->roi_param[i];
        if (need_even && c->r[i] % 2 != 0) {
            c->roi_param[i] = c->r[i] + 1;
            c->r[i] = c->roi_param[i];
        }
        static const double overlaps[] = {0.0, 0.25, 0.5, 0.75, 0.9, 0.6};
        int64_t oi = rng_int(0, 6);
        c->overlap[i] = oi < 6 ? overlaps[oi] : rng_unit() * 0.95;
        c->sigma[i] = rng_int(0, 1) ? 0.125 : 0.05 + rng_unit();
        if (!pad_ok(c, i)) c->pad = c->pad == SWI_PAD_REFLECT ? SWI_PAD_REPLICATE : SWI_PAD_CONSTANT;
    }
    /* a later dim may have changed the mode; re-check the earlier ones */
    for (int i = 0; i < 3; i++)
        if (!pad_ok(c, i)) c->pad = SWI_PAD_CONSTANT;
    c->mode = (swi_blend)rng_int(0, 2);
    c->salt = rng_next();
    int64_t n_in = c->batch * c->cin * prod3(c->S);
    c->input = malloc(sizeof(float) * (size_t)n_in);
    if (c->input != NULL)
        for (int64_t i = 0; i < n_in; i++) c->input[i] = (float)(rng_unit() * 2.0 - 1.0);
    if (c->mode == SWI_BLEND_CUSTOM) {
        c->custom_map = malloc(sizeof(float) * (size_t)prod3(c->r));
        if (c->custom_map != NULL)
            for (int64_t i = 0; i < prod3(c->r); i++) c->custom_map[i] = (float)(0.05 + 2.0 * rng_unit());
    }
}

/* A zoomed head whose crop is empty along some dim (MONAI returns an empty tensor there):
 * the engine refuses it with SWI_ERR_SHAPE. */
static void run_expect_empty(const config *c, tally *t) {
    run_opts ro;
    random_run_opts(c, &ro);
    swi_params p;
    fill_params(c, &ro, &p, c->mode, c->custom_map);
    swi_tensor in = {.data = c->input, .batch = c->batch, .channels = c->cin, .dims = c->dims, .size = {0}};
    for (int k = 0; k < c->dims; k++) in.size[k] = c->S[D3(c, k)];
    swi_output outs[2];
    for (int h = 0; h < c->n_heads; h++) swi_output_init(&outs[h], h, SWI_REDUCE_NONE);
    naive n;
    memset(&n, 0, sizeof(n));
    pred_state ps;
    memset(&ps, 0, sizeof(ps));
    swi_ctx *ctx = swi_create();
    if (ctx == NULL || naive_run(c, &n) != 0) {
        report(c, &ro, "out of memory in the test");
        swi_free(ctx);
        naive_free(&n);
        return;
    }
    ps.c = c;
    ps.n = &n;
    ps.sw_batch = ro.sw_batch;
    ps.seen = calloc((size_t)(c->batch * n.windows), sizeof(int64_t));
    ps.s = malloc(sizeof(float) * (size_t)prod3(c->r));
    swi_predictor pred = {random_predict, &ps};
    swi_status st = SWI_ERR_NOMEM;
    if (ps.seen != NULL && ps.s != NULL) st = swi_run(ctx, &p, &in, &pred, outs, c->n_heads);
    t->runs++;
    if (st != SWI_ERR_SHAPE)
        report(c, &ro, "an empty zoomed result: swi_run gives %s (%s), expected SWI_ERR_SHAPE",
               swi_status_name(st), swi_last_error(ctx));
    else
        pass();
    t->empty_refused++;
    free(ps.seen);
    free(ps.s);
    naive_free(&n);
    swi_free(ctx);
}

static void test_one_config(tally *t) {
    config c;
    naive n;
    memset(&n, 0, sizeof(n));
    random_config(&c);
    g_config_failed = 0;
    g_details = 0;
    t->configs++;
    if (c.input == NULL || (c.mode == SWI_BLEND_CUSTOM && c.custom_map == NULL) || naive_run(&c, &n) != 0) {
        report(&c, NULL, "out of memory in the test");
        naive_free(&n);
        free(c.input);
        free(c.custom_map);
        return;
    }
    int empty = 0;
    for (int h = 0; h < c.n_heads; h++) empty |= prod3(n.out[h]) == 0;
    if (empty) {
        run_expect_empty(&c, t);
        if (g_config_failed) t->failures++;
        naive_free(&n);
        free(c.input);
        free(c.custom_map);
        return;
    }
    run_opts a, b;
    random_run_opts(&c, &a);
    random_run_opts(&c, &b);
    run_result ra, rb;
    int declared = 1;
    for (int h = 0; h < c.n_heads; h++) declared &= c.declare_channels[h] && c.declare_spatial[h];
    b.budget = declared && rng_int(0, 1);
    run_once(&c, &n, &a, c.mode, c.custom_map, 0, &ra, t);
    run_once(&c, &n, &b, c.mode, c.custom_map, 0, &rb, t);
    if (ra.ok && rb.ok) compare_runs(&c, &n, &a, &b, &ra, &rb, 1e-5, 1e-6, "order/threads/sw_batch");

    /* The gaussian map of swi_weights is bit-exact with the one swi_run blends with:
     * the same run with it as a custom map gives the same bits. */
    if (c.mode == SWI_BLEND_GAUSSIAN && ra.ok) {
        int64_t roi[SWI_MAX_DIMS];
        double sig[SWI_MAX_DIMS];
        for (int k = 0; k < c.dims; k++) {
            roi[k] = c.r[D3(&c, k)];
            sig[k] = c.sigma[D3(&c, k)];
        }
        float *map = malloc(sizeof(float) * (size_t)prod3(c.r));
        swi_status st =
            map != NULL ? swi_weights(NULL, SWI_BLEND_GAUSSIAN, c.dims, roi, sig, map) : SWI_ERR_NOMEM;
        if (st != SWI_OK) {
            report(&c, &a, "swi_weights: %s", swi_status_name(st));
        } else {
            run_result rc;
            run_opts one = a;
            one.threads = 1;
            run_result ra1;
            run_once(&c, &n, &one, SWI_BLEND_GAUSSIAN, NULL, 1, &ra1, t);
            run_once(&c, &n, &one, SWI_BLEND_CUSTOM, map, 1, &rc, t);
            if (ra1.ok && rc.ok)
                compare_runs(&c, &n, &one, &one, &ra1, &rc, 0.0, 0.0,
                             "gaussian vs swi_weights as a custom map (must be bit-exact)");
            run_result_free(&ra1);
            run_result_free(&rc);
        }
        free(map);
    }
    run_result_free(&ra);
    run_result_free(&rb);
    if (g_config_failed) t->failures++;
    naive_free(&n);
    free(c.input);
    free(c.custom_map);
}

/* ---- reductions on hand-made scores --------------------------------------------- */

/* One window covering the whole 1-D image with constant weights blends to exactly the
 * predictor's values, so the reductions can be checked on chosen numbers: ties, NaN. */
static const float g_hand[5][3] = {
    {1.0f, 3.0f, 2.0f}, {5.0f, 5.0f, 1.0f}, {1.0f, NAN, NAN}, {0.0f, 0.0f, 0.0f}, {-2.0f, -1.0f, -3.0f}};

static int hand_predict(void *user, swi_batch *b) {
    (void)user;
    int64_t sp[1] = {5};
    float *out = swi_batch_output(b, 0, 3, sp);
    if (out == NULL) return 1;
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 5; v++) out[c * 5 + v] = g_hand[v][c];
    return 0;
}

static void test_hand_reductions(void) {
    float input[5] = {0};
    swi_params p;
    swi_params_init(&p, 1);
    p.roi[0] = 5;
    swi_tensor in = {.data = input, .batch = 1, .channels = 1, .dims = 1, .size = {5}};
    swi_predictor pred = {hand_predict, NULL};
    uint8_t labels[5];
    float mx[5], conf[5], ent[5], scores[15], soft[15];
    swi_output o[6];
    swi_output_init(&o[0], 0, SWI_REDUCE_ARGMAX);
    o[0].dst = labels;
    o[0].dst_bytes = sizeof(labels);
    swi_output_init(&o[1], 0, SWI_REDUCE_MAX);
    o[1].dst = mx;
    o[1].dst_bytes = sizeof(mx);
    swi_output_init(&o[2], 0, SWI_REDUCE_CONFIDENCE);
    o[2].dst = conf;
    o[2].dst_bytes = sizeof(conf);
    swi_output_init(&o[3], 0, SWI_REDUCE_ENTROPY);
    o[3].dst = ent;
    o[3].dst_bytes = sizeof(ent);
    swi_output_init(&o[4], 0, SWI_REDUCE_NONE);
    o[4].dst = scores;
    o[4].dst_bytes = sizeof(scores);
    swi_output_init(&o[5], 0, SWI_REDUCE_SOFTMAX);
    o[5].dst = soft;
    o[5].dst_bytes = sizeof(soft);
    swi_ctx *ctx = swi_create();
    swi_status st = swi_run(ctx, &p, &in, &pred, o, 6);
    CHECK(st == SWI_OK, "hand reductions: %s: %s", swi_status_name(st), swi_last_error(ctx));
    swi_free(ctx);
    if (st != SWI_OK) return;
    for (int v = 0; v < 5; v++)
        for (int c = 0; c < 3; c++) {
            float e = g_hand[v][c], g = scores[c * 5 + v];
            CHECK((isnan(e) && isnan(g)) || e == g, "hand scores voxel %d channel %d: %g vs %g", v, c,
                  (double)g, (double)e);
        }
    static const uint8_t exp_label[5] = {1, 0, 1, 0, 1};
    for (int v = 0; v < 5; v++)
        CHECK(labels[v] == exp_label[v], "argmax voxel %d: %d, expected %d (ties: lowest; NaN first)", v,
              labels[v], exp_label[v]);
    CHECK(mx[0] == 3.0f && mx[1] == 5.0f && isnan(mx[2]) && mx[3] == 0.0f && mx[4] == -1.0f,
          "max: %g %g %g %g %g", (double)mx[0], (double)mx[1], (double)mx[2], (double)mx[3], (double)mx[4]);
    /* voxel 0: 1 / (e^-2 + 1 + e^-1); voxel 3: 1/3, entropy ln 3 */
    double z0 = exp(-2.0) + 1.0 + exp(-1.0);
    double h0 = 0.0;
    for (int c = 0; c < 3; c++) {
        double pc = exp((double)g_hand[0][c] - 3.0) / z0;
        h0 -= pc * log(pc);
    }
    CHECK(fabs(conf[0] - 1.0 / z0) < 1e-6, "confidence voxel 0: %.7g, expected %.7g", (double)conf[0],
          1.0 / z0);
    CHECK(fabs(conf[3] - 1.0 / 3.0) < 1e-6, "confidence voxel 3: %.7g, expected 1/3", (double)conf[3]);
    CHECK(fabs(conf[1] - 1.0 / (2.0 + exp(-4.0))) < 1e-6, "confidence voxel 1: %.7g", (double)conf[1]);
    CHECK(fabs(ent[0] - h0) < 1e-5, "entropy voxel 0: %.7g, expected %.7g", (double)ent[0], h0);
    CHECK(fabs(ent[3] - log(3.0)) < 1e-5, "entropy voxel 3: %.7g, expected ln 3", (double)ent[3]);
    for (int c = 0; c < 3; c++) {
        double e0 = exp((double)g_hand[0][c] - 3.0) / z0;
        CHECK(fabs(soft[c * 5 + 0] - e0) < 1e-6, "softmax voxel 0 channel %d: %.7g, expected %.7g", c,
              (double)soft[c * 5 + 0], e0);
        CHECK(fabs(soft[c * 5 + 3] - 1.0 / 3.0) < 1e-6, "softmax voxel 3 channel %d: %.7g, expected 1/3", c,
              (double)soft[c * 5 + 3]);
        CHECK(isnan(soft[c * 5 + 2]), "softmax of a voxel with a NaN score is NaN (channel %d: %g)", c,
              (double)soft[c * 5 + 2]);
    }
}

/* SWI_ORDER_FIXED with {0, 1, 2} is the reference's enumeration: windows in C order over
 * the start grid (last dim fastest), then over the batch, in chunks of sw_batch_size --
 * whether the heads are declared or learned. */
typedef struct order_log {
    int64_t n, starts[4096][3], image[4096];
    int calls, chunk_bad, sw;
} order_log;

static int order_predict(void *user, swi_batch *b) {
    order_log *lg = user;
    int n = swi_batch_count(b);
    lg->calls++;
    const int64_t *roi = swi_batch_roi(b);
    float *out = swi_batch_output(b, 0, 2, roi);
    if (out == NULL) return 1;
    memset(out, 0, sizeof(float) * (size_t)(2 * n * roi[0] * roi[1] * roi[2]));
    for (int i = 0; i < n && lg->n < 4096; i++, lg->n++) {
        memcpy(lg->starts[lg->n], swi_batch_start(b, i), 3 * sizeof(int64_t));
        lg->image[lg->n] = swi_batch_image(b, i);
    }
    return 0;
}

static void test_reference_order(void) {
    for (int declared = 0; declared <= 1; declared++)
        for (int sw = 1; sw <= 5; sw += 2) {
            static float vol[2 * 30 * 23 * 17];
            swi_params p;
            swi_params_init(&p, 3);
            p.roi[0] = 8, p.roi[1] = 6, p.roi[2] = 5;
            p.sw_batch_size = sw;
            p.order_mode = SWI_ORDER_FIXED; /* order = {0, 1, 2} from swi_params_init */
            if (declared) p.heads[0].channels = 2;
            swi_tensor in = {.data = vol, .batch = 2, .channels = 1, .dims = 3, .size = {30, 23, 17}};
            order_log *lg = calloc(1, sizeof *lg);
            CHECK(lg != NULL, "calloc");
            if (lg == NULL) return;
            swi_predictor pred = {order_predict, lg};
            swi_output o;
            swi_output_init(&o, 0, SWI_REDUCE_ARGMAX);
            swi_ctx *ctx = swi_create();
            swi_status st = swi_run(ctx, &p, &in, &pred, &o, 1);
            CHECK(st == SWI_OK, "reference order run: %s", swi_last_error(ctx));
            int64_t st0[16], st1[16], st2[16], n0, n1, n2, k = 0, bad = 0;
            swi_window_starts(NULL, 30, 8, 0.25, st0, 16, &n0);
            swi_window_starts(NULL, 23, 6, 0.25, st1, 16, &n1);
            swi_window_starts(NULL, 17, 5, 0.25, st2, 16, &n2);
            for (int64_t b = 0; b < 2; b++)
                for (int64_t i = 0; i < n0; i++)
                    for (int64_t j = 0; j < n1; j++)
                        for (int64_t l = 0; l < n2; l++, k++)
                            bad += k >= lg->n || lg->image[k] != b || lg->starts[k][0] != st0[i] ||
                                   lg->starts[k][1] != st1[j] || lg->starts[k][2] != st2[l];
            CHECK(bad == 0 && k == lg->n,
                  "declared %d sw %d: %lld of %lld windows out of the reference's order", declared, sw,
                  (long long)bad, (long long)k);
            CHECK(lg->calls == (int)((k + sw - 1) / sw), "declared %d sw %d: %d calls for %lld windows",
                  declared, sw, lg->calls, (long long)k);
            swi_free(ctx);
            free(lg);
        }
}

int main(int argc, char **argv) {
    g_seed = 20240601;
    int configs = 300;
    if (argc > 1) g_seed = strtoull(argv[1], NULL, 0);
    if (argc > 2) configs = atoi(argv[2]);
    rng_state = g_seed;
    printf("test_random: seed %llu, %d configurations\n", (unsigned long long)g_seed, configs);

    test_hand_reductions();
    test_reference_order();
    tally t;
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < configs; i++) {
        g_config_index = i;
        test_one_config(&t);
    }
    printf("test_random: %lld configs, %lld runs, %lld outputs and %lld values checked, "
           "%lld zoom runs refused (SWI_ERR_SHAPE on fractional placement), %lld empty zoomed "
           "results refused, %lld planned frontier peaks checked, %lld configs failed\n",
           (long long)t.configs, (long long)t.runs, (long long)t.outputs_checked, (long long)t.values_checked,
           (long long)t.zoom_refused, (long long)t.empty_refused, (long long)t.frontier_compared,
           (long long)t.failures);
    return check_report("test_random");
}
