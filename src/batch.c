/* batch.c -- what the predictor sees: one call's windows, gathered through the
 * padding, and the head buffers it fills (the swi_batch_* functions of swi.h). */
#include "engine.h"

#include <stdio.h>
#include <string.h>

int swi_batch_count(const swi_batch *b) { return b ? b->s->n : 0; }
int swi_batch_dims(const swi_batch *b) { return b ? b->r->g.user_dims : 0; }
int64_t swi_batch_channels(const swi_batch *b) { return b ? b->r->g.cin : 0; }
const int64_t *swi_batch_roi(const swi_batch *b) {
    return b ? &b->r->g.roi[NDIM - b->r->g.user_dims] : NULL;
}
const float *swi_batch_input(const swi_batch *b) { return b ? b->s->input : NULL; }
int64_t swi_batch_image(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n) ? b->s->image[i] : -1;
}
const int64_t *swi_batch_start(const swi_batch *b, int i) {
    return (b && i >= 0 && i < b->s->n) ? &b->s->ustart[(size_t)i * SWI_MAX_DIMS] : NULL;
}
void swi_batch_set_error(swi_batch *b, const char *message) {
    if (!b || !message) return;
    snprintf(b->r->pred_msg, sizeof b->r->pred_msg, "%s", message);
}

float *swi_batch_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial) {
    if (!b) return NULL;
    run *r = b->r;
    swi_ctx *ctx = r->ctx;
    int d = r->g.user_dims;
    if (head < 0 || head >= r->g.n_heads) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d but params.n_heads = %d",
                                 head, r->g.n_heads);
        return NULL;
    }
    if (channels <= 0 || !spatial) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: channels = %lld%s", head,
                                 (long long)channels, spatial ? " must be >= 1" : " with NULL spatial");
        return NULL;
    }
    for (int k = 0; k < d; k++)
        if (spatial[k] <= 0) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor head %d: spatial[%d] = %lld must be >= 1",
                                     head, k, (long long)spatial[k]);
            return NULL;
        }
    const swi_head_spec *decl = &r->p->heads[head];
    if (!r->known[head]) {
        if (decl->channels > 0 && decl->channels != channels) {
            r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                     "predictor head %d: %lld channels, but params.heads[%d].channels = %lld",
                                     head, (long long)channels, head, (long long)decl->channels);
            return NULL;
        }
        for (int k = 0; k < d; k++)
            if ((decl->spatial[k] > 0 || decl->channels > 0) &&
                (decl->spatial[k] > 0 ? decl->spatial[k] : r->g.roi[swi__axis(&r->g, k)]) != spatial[k]) {
                r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE,
                                         "predictor head %d: spatial[%d] = %lld, but params.heads[%d] declares "
                                         "%lld (spatial 0 = the roi)",
                                         head, k, (long long)spatial[k], head,
                                         (long long)(decl->spatial[k] > 0 ? decl->spatial[k]
                                                                          : r->g.roi[swi__axis(&r->g, k)]));
                return NULL;
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
            return NULL;
        }
    }
    if (b->s->requested[head]) {
        r->shape_err = swi__fail(ctx, SWI_ERR_SHAPE, "predictor asked for head %d twice in one call", head);
        return NULL;
    }
    size_t n = (size_t)r->sw, v;
    int64_t wv = 1;
    for (int k = 0; k < d; k++)
        if (!swi__mul_i64(wv, spatial[k], &wv)) wv = -1;
    if (wv < 0 || !swi__mul_size(n, (size_t)channels, &v) || !swi__mul_size(v, (size_t)wv, &v) ||
        !swi__mul_size(v, sizeof(float), &v)) {
        r->shape_err = swi__fail(ctx, SWI_ERR_OVERFLOW, "predictor head %d: output size overflows", head);
        return NULL;
    }
    slot *s = b->s;
    if (s->head_cap[head] < v) {
        swi__big_free(s->head[head], s->head_cap[head]);
        s->head[head] = swi__big_alloc(v);
        s->head_cap[head] = s->head[head] ? v : 0;
        if (!s->head[head]) {
            r->shape_err = swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for head %d's output buffer", head);
            return NULL;
        }
    }
    s->requested[head] = 1;
    return s->head[head];
}

swi_status swi__slot_alloc(run *r, slot *s) {
    const geom *g = &r->g;
    size_t n = (size_t)r->sw;
    s->input_bytes = n * (size_t)(g->cin * g->roi_vox) * sizeof(float);
    s->input = swi__big_alloc(s->input_bytes);
    s->image = swi__malloc(n * sizeof(int64_t));
    s->t = swi__malloc(n * NDIM * sizeof(int64_t));
    s->ustart = swi__malloc(n * SWI_MAX_DIMS * sizeof(int64_t));
    if (!s->input || !s->image || !s->t || !s->ustart)
        return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for the window buffers");
    return SWI_OK;
}

void swi__slot_free(slot *s) {
    swi__big_free(s->input, s->input_bytes);
    swi__free(s->image);
    swi__free(s->t);
    swi__free(s->ustart);
    for (int h = 0; h < SWI_MAX_HEADS; h++) swi__big_free(s->head[h], s->head_cap[h]);
}

/* Fill a slot with the next windows (gather) and run the predictor on it. */
swi_status swi__fill_and_predict(run *r, slot *s, int64_t first, int n) {
    const geom *g = &r->g;
    s->n = n;
    for (int j = 0; j < n; j++) {
        int64_t w = first + j;
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
        swi__gather(g, r->p, r->in->data, b, start, s->input + (size_t)j * (size_t)(g->cin * g->roi_vox),
                    r->idx_scratch);
    }
    for (int h = 0; h < SWI_MAX_HEADS; h++) s->requested[h] = 0;
    r->pred_msg[0] = '\0';
    r->shape_err = SWI_OK;
    swi_batch b = {r, s};
    int rc = r->pred->predict(r->pred->user, &b);
    if (r->shape_err != SWI_OK) return r->shape_err; /* message already set */
    if (rc != 0) {
        if (r->pred_msg[0])
            return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed on windows %lld..%lld: %s",
                             (long long)first, (long long)(first + n - 1), r->pred_msg);
        return swi__fail(r->ctx, SWI_ERR_PREDICTOR, "predictor failed (returned %d) on windows %lld..%lld", rc,
                         (long long)first, (long long)(first + n - 1));
    }
    for (int h = 0; h < g->n_heads; h++)
        if (!s->requested[h])
            return swi__fail(r->ctx, SWI_ERR_SHAPE,
                             "predictor returned 0 without filling head %d (swi_batch_output not called)", h);
    return SWI_OK;
}

