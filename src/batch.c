/* batch.c -- what the predictor sees: one call's windows, gathered through the
 * padding, and the head buffers it fills (the swi_batch_* functions of swi.h); the child
 * batches a predictor runs another predictor on (swi_batch_predict). */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A child batch (swi_batch_predict): its parent's windows with another input; one head
 * goes to the caller's buffer, the others (a multi-head predictor fills them all) to
 * spare buffers nobody reads. It lives on swi_batch_predict's stack, and its failures
 * are its own: the run's error state, stats and head shapes are left alone. */
struct batch_child {
    const float *input;
    int head;
    int64_t channels;
    int64_t spatial[SWI_MAX_DIMS];
    float *output;
    size_t floats; /* of output */
    int given[SWI_MAX_HEADS];
    float *spare[SWI_MAX_HEADS];
    swi_status st; /* the first failure of an output call, described in shape_msg */
    char shape_msg[SWI_ERRMSG_LEN];
    char pred_msg[SWI_ERRMSG_LEN]; /* swi_batch_set_error's */
};

/* Head h's buffer of the slot holds at least `bytes`. */
static int head_buffer(slot *s, int h, size_t bytes) {
    if (s->head_cap[h] >= bytes) return 1;
    swi__big_free(s->head[h], s->head_cap[h]);
    s->head[h] = swi__big_alloc(bytes);
    s->head_cap[h] = s->head[h] ? bytes : 0;
    return s->head[h] != NULL;
}

/* Floats of one window's output of head h, as the predictor gives it (known once the
 * head was first filled). */
static size_t head_floats(const run *r, int h) {
    size_t n = (size_t)r->shape_c[h];
    for (int k = 0; k < r->g.user_dims; k++) n *= (size_t)r->shape_s[h][k];
    return n;
}

/* slot window of the predictor's window i */
static int slot_index(const swi_batch *b, int i) { return b->s->run_idx ? b->s->run_idx[i] : i; }

int swi_batch_count(const swi_batch *b) { return b ? b->s->n_run : 0; }
int swi_batch_dims(const swi_batch *b) { return b ? b->r->g.user_dims : 0; }
int64_t swi_batch_channels(const swi_batch *b) { return b ? b->r->g.cin : 0; }
const int64_t *swi_batch_roi(const swi_batch *b) { return b ? &b->r->g.roi[NDIM - b->r->g.user_dims] : NULL; }
const float *swi_batch_input(const swi_batch *b) {
    return b ? (b->child ? b->child->input : b->s->input) : NULL;
}
int64_t swi_batch_image(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n_run) ? b->s->image[slot_index(b, i)] : -1;
}
const int64_t *swi_batch_start(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n_run) ? &b->s->ustart[(size_t)slot_index(b, i) * SWI_MAX_DIMS] : NULL;
}
void swi_batch_set_error(swi_batch *b, const char *message) {
    if (!b || !message) return;
    if (b->child)
        snprintf(b->child->pred_msg, sizeof b->child->pred_msg, "%s", message);
    else
        snprintf(b->r->pred_msg, sizeof b->r->pred_msg, "%s", message);
}

/* Check a head's output shape (learning it at the first call) and return the bytes of
 * the head's buffer for a full batch, or 0 with r->shape_err set. */
static size_t head_request(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    run *r = b->r;
    swi_ctx *ctx = r->ctx;
    int d = r->g.user_dims;
    if (head < 0 || head >= r->g.n_heads) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d but params.n_heads = %d",
                                 head, r->g.n_heads);
        return 0;
    }
    if (channels <= 0 || !spatial) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: channels = %lld%s", head,
                                 (long long)channels, spatial ? " must be >= 1" : " with NULL spatial");
        return 0;
    }
    for (int k = 0; k < d; k++)
        if (spatial[k] <= 0) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: spatial[%d] = %lld must be >= 1",
                                     head, k, (long long)spatial[k]);
            return 0;
        }
    const swi_head_spec *decl = &r->p->heads[head];
    if (!r->known[head]) {
        if (decl->channels > 0 && decl->channels != channels) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                     "predictor head %d: %lld channels, but params.heads[%d].channels = %lld",
                                     head, (long long)channels, head, (long long)decl->channels);
            return 0;
        }
        for (int k = 0; k < d; k++)
            if ((decl->spatial[k] > 0 || decl->channels > 0) &&
                (decl->spatial[k] > 0 ? decl->spatial[k] : r->g.roi[swi__axis(&r->g, k)]) != spatial[k]) {
                r->shape_err = swi__fail(
                    ctx, SWI_ERR_SHAPE,
                    "predictor head %d: spatial[%d] = %lld, but params.heads[%d] declares "
                    "%lld (spatial 0 = the roi)",
                    head, k, (long long)spatial[k], head,
                    (long long)(decl->spatial[k] > 0 ? decl->spatial[k] : r->g.roi[swi__axis(&r->g, k)]));
                return 0;
            }
        r->known[head] = 1;
        r->shape_c[head] = channels;
        for (int k = 0; k < d; k++) r->shape_s[head][k] = spatial[k];
    } else {
        int same = r->shape_c[head] == channels;
        for (int k = 0; k < d; k++) same &= r->shape_s[head][k] == spatial[k];
        if (!same) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                     "predictor head %d changed shape between calls (now %lld channels x "
                                     "%lld x %lld x %lld, first %lld channels x %lld x %lld x %lld)",
                                     head, (long long)channels, (long long)spatial[0],
                                     (long long)(d > 1 ? spatial[1] : 1), (long long)(d > 2 ? spatial[2] : 1),
                                     (long long)r->shape_c[head], (long long)r->shape_s[head][0],
                                     (long long)(d > 1 ? r->shape_s[head][1] : 1),
                                     (long long)(d > 2 ? r->shape_s[head][2] : 1));
            return 0;
        }
    }
    if (b->s->requested[head]) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d twice in one call", head);
        return 0;
    }
    size_t n = (size_t)r->sw, v;
    int64_t wv = 1;
    for (int k = 0; k < d; k++)
        if (!swi__mul_i64(wv, spatial[k], &wv)) wv = -1;
    if (wv < 0 || !swi__mul_size(n, (size_t)channels, &v) || !swi__mul_size(v, (size_t)wv, &v) ||
        !swi__mul_size(v, sizeof(float), &v)) {
        r->shape_err = swi__fail(ctx, SWI_ERR_OVERFLOW, "predictor head %d: output size overflows", head);
        return 0;
    }
    return v;
}

static float *child_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial);
static int child_set_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial,
                            const float *data, void (*release)(void *user, const float *data), void *user);

float *swi_batch_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    if (!b) return NULL;
    if (b->child) return child_output(b, head, channels, spatial);
    size_t v = head_request(b, head, channels, spatial);
    if (!v) return NULL;
    slot *s = b->s;
    if (!head_buffer(s, head, v)) {
        b->r->shape_err =
            swi__fail(b->r->ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", head);
        return NULL;
    }
    s->requested[head] = 1;
    return s->head[head];
}

int swi_batch_set_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial, const float *data,
                         void (*release)(void *user, const float *data), void *user) {
    if (!b) return 1;
    if (b->child) return child_set_output(b, head, channels, spatial, data, release, user);
    if (!data) {
        b->r->shape_err =
            swi__fail(b->r->ctx, SWI_ERR_INVALID_ARG, "swi_batch_set_output: head %d's data is NULL", head);
        return 1;
    }
    size_t v = head_request(b, head, channels, spatial);
    if (!v) return 1;
    slot *s = b->s;
    if (s->n_run < s->n || b->r->n_slots == 2) {
        /* windows reusing outputs are placed among these, or the next call overlaps this
         * batch's blending (the caller may then reuse data): they go into the slot's buffer */
        if (!head_buffer(s, head, v)) {
            b->r->shape_err =
                swi__fail(b->r->ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", head);
            return 1;
        }
        memcpy(s->head[head], data, (size_t)s->n_run * head_floats(b->r, head) * sizeof(float));
        if (release) release(user, data);
    } else {
        s->adopt[head] = data;
        s->release[head] = release;
        s->release_user[head] = user;
        /* a buffer of ours from an earlier call is not needed while outputs are handed over */
        swi__big_free(s->head[head], s->head_cap[head]);
        s->head[head] = NULL;
        s->head_cap[head] = 0;
    }
    s->requested[head] = 1;
    return 0;
}

swi_status swi__slot_alloc(run *r, slot *s) {
    const geom *g = &r->g;
    size_t n = (size_t)r->sw;
    s->cap = r->sw;
    s->input_bytes = n * (size_t)(g->cin * g->roi_vox) * sizeof(float);
    s->input = swi__big_alloc(s->input_bytes);
    s->image = swi__malloc(n * sizeof(int64_t));
    s->t = swi__malloc(n * NDIM * sizeof(int64_t));
    s->ustart = swi__malloc(n * SWI_MAX_DIMS * sizeof(int64_t));
    if (!s->input || !s->image || !s->t || !s->ustart)
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the window buffers");
    if (r->reuse) {
        s->run_idx = swi__malloc(n * sizeof(int32_t));
        s->src = swi__malloc(n * sizeof(int32_t));
        s->hash = swi__malloc(n * sizeof(uint64_t));
        if (!s->run_idx || !s->src || !s->hash)
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the window buffers");
    }
    return SWI_OK;
}

swi_status swi__slot_own(run *r, slot *s) {
    for (int h = 0; h < r->g.n_heads; h++) {
        if (!s->adopt[h]) continue;
        size_t n = (size_t)s->n * head_floats(r, h) * sizeof(float);
        if (!head_buffer(s, h, (size_t)r->sw * head_floats(r, h) * sizeof(float)) && !head_buffer(s, h, n))
            return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", h);
        memcpy(s->head[h], s->adopt[h], n);
    }
    swi__slot_release(s);
    return SWI_OK;
}

void swi__slot_release(slot *s) {
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        if (s->adopt[h] && s->release[h]) s->release[h](s->release_user[h], s->adopt[h]);
        s->adopt[h] = NULL;
        s->release[h] = NULL;
    }
}

void swi__slot_free(slot *s) {
    swi__slot_release(s);
    swi__big_free(s->input, s->input_bytes);
    swi__free(s->image);
    swi__free(s->t);
    swi__free(s->ustart);
    for (int h = 0; h < SWI_MAX_HEADS; h++) swi__big_free(s->head[h], s->head_cap[h]);
    swi__free(s->run_idx);
    swi__free(s->src);
    swi__free(s->hash);
}

/* Which windows of the slot must reach the predictor: the others repeat an earlier
 * window of the slot or a cached one. The windows to run are moved to the front of
 * the input (the others' inputs are not needed again). */
static void choose_runs(run *r, slot *s) {
    const size_t in_n = (size_t)(r->g.cin * r->g.roi_vox);
    s->n_run = 0;
    for (int j = 0; j < s->n; j++) {
        const float *x = s->input + (size_t)j * in_n;
        uint64_t h = swi__reuse_hash(x, in_n);
        s->hash[j] = h;
        s->src[j] = -1;
        for (int i = 0; i < s->n_run && s->src[j] == -1; i++) {
            int k = s->run_idx[i];
            if (s->hash[k] == h && memcmp(s->input + (size_t)i * in_n, x, in_n * sizeof(float)) == 0)
                s->src[j] = k;
        }
        if (s->src[j] == -1 && r->cache_ready) {
            int e = swi__reuse_find(&r->cache, h, x);
            if (e >= 0) s->src[j] = -2 - e;
        }
        if (s->src[j] != -1) continue;
        if (s->n_run != j) memmove(s->input + (size_t)s->n_run * in_n, x, in_n * sizeof(float));
        s->run_idx[s->n_run++] = j;
    }
}

/* Put every slot window's output in place: the predictor's (written for the windows it
 * saw, in its order) moved to their slot positions, then the repeats copied. */
static void place_outputs(run *r, slot *s) {
    const geom *g = &r->g;
    for (int h = 0; h < g->n_heads; h++) {
        const size_t n = head_floats(r, h);
        float *o = s->head[h];
        for (int i = s->n_run - 1; i >= 0; i--) /* from the back: a slot index is >= its run index */
            if (s->run_idx[i] != i)
                memmove(o + (size_t)s->run_idx[i] * n, o + (size_t)i * n, n * sizeof(float));
        for (int j = 0; j < s->n; j++) {
            if (s->src[j] >= 0)
                memcpy(o + (size_t)j * n, o + (size_t)s->src[j] * n, n * sizeof(float));
            else if (s->src[j] <= -2)
                memcpy(o + (size_t)j * n, r->cache.e[-2 - s->src[j]].out[h], n * sizeof(float));
        }
    }
}

/* Offer the windows just run to the cache (swi__reuse_admit decides which it keeps).
 * Their inputs are still at the front of the slot. */
void swi__reuse_keep(run *r, slot *s) {
    const geom *g = &r->g;
    const size_t in_n = (size_t)(g->cin * g->roi_vox);
    for (int i = 0; i < s->n_run; i++) {
        int j = s->run_idx[i];
        int e = swi__reuse_admit(&r->cache, s->hash[j], s->input + (size_t)i * in_n);
        if (e < 0) continue;
        for (int h = 0; h < g->n_heads; h++) {
            const size_t n = head_floats(r, h);
            memcpy(r->cache.e[e].out[h], swi__slot_out(s, h) + (size_t)j * n, n * sizeof(float));
        }
    }
}

static swi_status predict_slot(run *r, slot *s, int64_t first, int n);

/* Fill a slot with the next windows (gather) and run the predictor on it. */
swi_status swi__fill_and_predict(run *r, slot *s, int64_t first, int n) {
    const geom *g = &r->g;
    if (s->cap < r->sw) { /* a slot not used yet, or a batch size grown after the first call */
        swi__slot_free(s);
        memset(s, 0, sizeof *s);
        swi_status st = swi__slot_alloc(r, s);
        if (st != SWI_OK) return st;
    }
    s->n = n;
    s->first = first;
    for (int j = 0; j < n; j++) {
        int64_t w = swi__run_window(r, first + j);
        int64_t b = w / g->win_per_image, t[NDIM], start[NDIM];
        swi__order_coords(g, &r->choice, w % g->win_per_image, t);
        s->image[j] = b;
        for (int a = 0; a < NDIM; a++) {
            s->t[j * NDIM + a] = t[a];
            start[a] = g->starts[a][t[a]];
        }
        for (int k = 0; k < SWI_MAX_DIMS; k++)
            s->ustart[(size_t)j * SWI_MAX_DIMS + k] =
                k < g->user_dims ? start[swi__axis(g, k)] - g->before[swi__axis(g, k)] : 0;
        char msg[SWI_ERRMSG_LEN - 128];
        if (swi__gather(g, r->p, r->in, b, start, s->input + (size_t)j * (size_t)(g->cin * g->roi_vox),
                        r->idx_scratch, r->box, msg, sizeof msg) != 0)
            return swi__fail(r->ctx, SWI_ERR_READ, "the input reader failed on image %lld, window %lld%s%s",
                             (long long)b, (long long)w, msg[0] ? ": " : "", msg);
    }
    s->n_run = n;
    if (r->reuse) choose_runs(r, s);
    r->stats.windows_reused += n - s->n_run;
    if (s->n_run == 0) { /* every window repeats one already predicted (never the first call) */
        for (int h = 0; h < g->n_heads; h++)
            if (!head_buffer(s, h, (size_t)r->sw * head_floats(r, h) * sizeof(float)))
                return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", h);
        place_outputs(r, s);
        return SWI_OK;
    }
    return predict_slot(r, s, first, n);
}

/* One predictor call on the slot's gathered windows (first..first+n-1 of the run). */
static swi_status predict_slot(run *r, slot *s, int64_t first, int n) {
    const geom *g = &r->g;
    for (int h = 0; h < SWI_MAX_HEADS; h++) s->requested[h] = 0;
    r->pred_msg[0] = '\0';
    r->shape_err = SWI_OK;
    swi_batch b = {r, s, NULL};
    r->stats.predictor_calls++;
    r->stats.windows_predicted += s->n_run;
    int rc = r->pred->predict(r->pred->user, &b);
    if (r->shape_err != SWI_OK || rc != 0) swi__slot_release(s); /* the caller's buffers are not needed */
    if (r->shape_err != SWI_OK) return r->shape_err;             /* message already set */
    if (rc != 0) {
        if (r->pred_msg[0])
            return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed on windows %lld..%lld: %s",
                             (long long)first, (long long)(first + n - 1), r->pred_msg);
        return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed (returned %d) on windows %lld..%lld",
                         rc, (long long)first, (long long)(first + n - 1));
    }
    for (int h = 0; h < g->n_heads; h++)
        if (!s->requested[h])
            return swi__fail(r->ctx, SWI_ERR_SHAPE,
                             "predictor returned 0 without filling head %d (swi_batch_output not called)", h);
    if (r->reuse) {
        place_outputs(r, s);
        if (r->cache_ready) swi__reuse_keep(r, s);
    }
    return SWI_OK;
}

/* ---- mirrored runs (swi_params.mirror_axes) ---- */

/* Planes of one shape, each to be mirrored in place along the axes of a mask. */
typedef struct flip_job {
    float *data;
    int64_t shape[NDIM]; /* of one plane */
    unsigned mask;       /* bit a: axis a */
} flip_job;

/* Mirror plane `item` in place: every row (axes 0..2) trades places with its mirror image,
 * reversed when axis 3 is mirrored too; one pass over the plane. */
static void flip_plane(void *arg, int64_t item, int worker) {
    (void)worker;
    const flip_job *f = arg;
    const int64_t *n = f->shape;
    const int rev = (f->mask >> 3) & 1u;
    const int64_t rows = n[0] * n[1] * n[2], len = n[3];
    float *plane = f->data + (size_t)item * (size_t)(rows * len);
    for (int64_t i0 = 0; i0 < n[0]; i0++)
        for (int64_t i1 = 0; i1 < n[1]; i1++)
            for (int64_t i2 = 0; i2 < n[2]; i2++) {
                const int64_t m0 = (f->mask & 1u) ? n[0] - 1 - i0 : i0,
                              m1 = (f->mask & 2u) ? n[1] - 1 - i1 : i1,
                              m2 = (f->mask & 4u) ? n[2] - 1 - i2 : i2;
                const int64_t here = (i0 * n[1] + i1) * n[2] + i2, there = (m0 * n[1] + m1) * n[2] + m2;
                if (there < here) continue; /* traded when its image came first */
                float *a = plane + (size_t)(here * len), *b = plane + (size_t)(there * len);
                if (there == here) {
                    if (rev)
                        for (int64_t k = 0; k < len / 2; k++) {
                            float t = a[k];
                            a[k] = a[len - 1 - k];
                            a[len - 1 - k] = t;
                        }
                } else if (rev) {
                    for (int64_t k = 0; k < len; k++) {
                        float t = a[k];
                        a[k] = b[len - 1 - k];
                        b[len - 1 - k] = t;
                    }
                } else {
                    for (int64_t k = 0; k < len; k++) {
                        float t = a[k];
                        a[k] = b[k];
                        b[k] = t;
                    }
                }
            }
}

/* Mirror `planes` planes of `shape` in place along `mask`, the planes spread over the workers. */
static void flip_planes(run *r, float *data, int64_t planes, const int64_t shape[NDIM], unsigned mask) {
    if (!mask || planes <= 0) return;
    flip_job f = {data, {shape[0], shape[1], shape[2], shape[3]}, mask};
    swi_phase ph = {flip_plane, &f, planes};
    swi__pool_submit(r->pool, &ph, 1);
    swi__pool_wait(r->pool);
}

swi_status swi__mirror_run(run *r, slot *s, unsigned from, unsigned to) {
    const geom *g = &r->g;
    swi__slot_release(s); /* the run before is blended: what it handed over goes back */
    flip_planes(r, s->input, (int64_t)s->n * g->cin, g->roi, from ^ to);
    swi_status st = predict_slot(r, s, s->first, s->n);
    if (st != SWI_OK) return st;
    if ((st = swi__slot_own(r, s)) != SWI_OK) return st; /* handed-over outputs: mirrored in our buffers */
    for (int h = 0; h < g->n_heads; h++)
        flip_planes(r, s->head[h], (int64_t)s->n * g->heads[h].channels, g->heads[h].win, to);
    return SWI_OK;
}

/* ---- child batches (swi_batch_predict) ---- */

/* Bytes of n windows of a head's output, 0 when they do not fit in size_t. */
static size_t shape_bytes(int n, int64_t channels, const int64_t *spatial, int d) {
    size_t v = (size_t)n;
    if ((uint64_t)channels > SIZE_MAX || !swi__mul_size(v, (size_t)channels, &v)) return 0;
    for (int k = 0; k < d; k++)
        if ((uint64_t)spatial[k] > SIZE_MAX || !swi__mul_size(v, (size_t)spatial[k], &v)) return 0;
    return swi__mul_size(v, sizeof(float), &v) ? v : 0;
}

/* "C channels x s0 x s1 ..." for messages. */
static void shape_text(char *buf, size_t n, int64_t channels, const int64_t *spatial, int d) {
    int k = snprintf(buf, n, "%lld channels", (long long)channels);
    for (int i = 0; i < d && k >= 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, " x %lld", (long long)spatial[i]);
}

/* Check a head the child's predictor gives and return its bytes, or 0 with the child's
 * failure recorded (the first one is kept). */
static size_t child_request(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    batch_child *c = b->child;
    const int d = b->r->g.user_dims;
    char m[SWI_ERRMSG_LEN];
    swi_status st = SWI_OK;
    if (head < 0 || head >= SWI_MAX_HEADS)
        st = swi__put_err(m, sizeof m, SWI_ERR_SHAPE, "predictor asked for head %d (heads are 0..%d)", head,
                          SWI_MAX_HEADS - 1);
    else if (channels <= 0 || !spatial)
        st = swi__put_err(m, sizeof m, SWI_ERR_SHAPE, "predictor head %d: channels = %lld%s", head,
                          (long long)channels, spatial ? " must be >= 1" : " with NULL spatial");
    for (int k = 0; st == SWI_OK && k < d; k++)
        if (spatial[k] <= 0)
            st =
                swi__put_err(m, sizeof m, SWI_ERR_SHAPE, "predictor head %d: spatial[%d] = %lld must be >= 1",
                             head, k, (long long)spatial[k]);
    if (st == SWI_OK && c->given[head])
        st = swi__put_err(m, sizeof m, SWI_ERR_SHAPE, "predictor asked for head %d twice in one call", head);
    if (st == SWI_OK && head == c->head) {
        int same = channels == c->channels;
        for (int k = 0; k < d; k++) same &= spatial[k] == c->spatial[k];
        if (same) return c->floats * sizeof(float);
        char got[160], want[160];
        shape_text(got, sizeof got, channels, spatial, d);
        shape_text(want, sizeof want, c->channels, c->spatial, d);
        st = swi__put_err(m, sizeof m, SWI_ERR_SHAPE,
                          "predictor head %d: %s per window, but the caller expects %s", head, got, want);
    }
    size_t v = 0;
    if (st == SWI_OK && !(v = shape_bytes(b->s->n_run, channels, spatial, d)))
        st = swi__put_err(m, sizeof m, SWI_ERR_OVERFLOW, "predictor head %d: output size overflows", head);
    if (st == SWI_OK) return v;
    if (c->st == SWI_OK) {
        c->st = st;
        memcpy(c->shape_msg, m, sizeof m);
    }
    return 0;
}

static float *child_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    batch_child *c = b->child;
    size_t v = child_request(b, head, channels, spatial);
    if (!v) return NULL;
    if (head != c->head) { /* a head the caller does not want: somewhere to write it */
        /* plain malloc: a rare path of the combinators (src/combine.c allocates likewise),
         * outside the engine's fault-injected allocations */
        c->spare[head] = malloc(v);
        if (!c->spare[head]) {
            if (c->st == SWI_OK) {
                c->st = SWI_ERR_NOMEM;
                snprintf(c->shape_msg, sizeof c->shape_msg, "out of memory for head %d's output buffer",
                         head);
            }
            return NULL;
        }
    }
    c->given[head] = 1;
    return head == c->head ? c->output : c->spare[head];
}

static int child_set_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial,
                            const float *data, void (*release)(void *user, const float *data), void *user) {
    batch_child *c = b->child;
    if (!data) {
        if (c->st == SWI_OK) {
            c->st = SWI_ERR_INVALID_ARG;
            snprintf(c->shape_msg, sizeof c->shape_msg, "swi_batch_set_output: head %d's data is NULL", head);
        }
        return 1;
    }
    size_t v = child_request(b, head, channels, spatial);
    if (!v) return 1;
    /* the values are needed only until the caller reads output: copied, given back at once */
    if (head == c->head && data != c->output) memmove(c->output, data, v);
    if (release) release(user, data);
    c->given[head] = 1;
    return 0;
}

swi_status swi_batch_predict(swi_batch *b, const swi_predictor *inner, const float *input, int head,
                             int64_t channels, const int64_t *spatial, float *output, char *err,
                             size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!b || !inner || !inner->predict || !output || !spatial)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "swi_batch_predict: %s is NULL",
                            !b                ? "the batch"
                            : !inner          ? "the predictor"
                            : !inner->predict ? "the predictor's predict"
                            : !output         ? "output"
                                              : "spatial");
    const int d = b->r->g.user_dims;
    if (head < 0 || head >= SWI_MAX_HEADS)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG, "swi_batch_predict: head = %d is not in 0..%d",
                            head, SWI_MAX_HEADS - 1);
    if (channels <= 0)
        return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG,
                            "swi_batch_predict: channels = %lld must be >= 1", (long long)channels);
    for (int k = 0; k < d; k++)
        if (spatial[k] <= 0)
            return swi__put_err(err, errlen, SWI_ERR_INVALID_ARG,
                                "swi_batch_predict: spatial[%d] = %lld must be >= 1", k,
                                (long long)spatial[k]);
    const size_t bytes = shape_bytes(b->s->n_run, channels, spatial, d);
    if (!bytes)
        return swi__put_err(err, errlen, SWI_ERR_OVERFLOW,
                            "swi_batch_predict: the output of %d windows of %lld channels overflows",
                            b->s->n_run, (long long)channels);

    batch_child c;
    memset(&c, 0, sizeof c);
    c.input = input ? input : swi_batch_input(b);
    c.head = head;
    c.channels = channels;
    for (int k = 0; k < d; k++) c.spatial[k] = spatial[k];
    c.output = output;
    c.floats = bytes / sizeof(float);
    swi_batch cb = {b->r, b->s, &c};
    int rc = inner->predict(inner->user, &cb);
    for (int h = 0; h < SWI_MAX_HEADS; h++) free(c.spare[h]);
    if (c.st != SWI_OK) return swi__put_err(err, errlen, c.st, "%s", c.shape_msg);
    if (rc != 0) {
        if (c.pred_msg[0]) return swi__put_err(err, errlen, SWI_ERR_PREDICTOR, "%s", c.pred_msg);
        return swi__put_err(err, errlen, SWI_ERR_PREDICTOR, "the predictor failed (returned %d)", rc);
    }
    if (!c.given[head])
        return swi__put_err(err, errlen, SWI_ERR_SHAPE, "the predictor returned 0 without filling head %d",
                            head);
    return SWI_OK;
}
