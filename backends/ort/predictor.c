/* predictor.c -- settling the window, running windows through the session, the
 * swi_predictor callback. */
#include "ort_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Products of sizes the model or the caller chose: refused past 2^62 elements, so that the
 * byte counts (x 4) fit in int64_t and size_t. */
static int mul_ok(int64_t a, int64_t b, int64_t *out) {
    const int64_t lim = (int64_t)1 << 62;
    if (a < 0 || b < 0 || (a && b > lim / a)) return 0;
    *out = a * b;
    return 1;
}

void swi_ort_window_init(swi_ort_window *w, int64_t channels) {
    memset(w, 0, sizeof *w);
    w->channels = channels;
}

swi_status swi_ort_check(const swi_ort_model *m, int output, char *err, size_t n) {
    if (!m) {
        ort__err(err, n, "swi_ort_check: model is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    char shp[160];
    ort__shape_str(m->in.shape, m->in.rank, shp, sizeof shp);
    if (m->in.rank != 5) {
        ort__err(err, n,
                 "%s: the model input '%s' has rank %zu %s; swi needs rank 5 "
                 "[batch, channels, i, j, k]",
                 m->path, m->in_name, m->in.rank, shp);
        return SWI_ERR_SHAPE;
    }
    if (m->in.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        ort__err(err, n, "%s: the model input '%s' is %s; swi feeds float32", m->path, m->in_name,
                 ort__type_name(m->in.type));
        return SWI_ERR_SHAPE;
    }
    swi_ort_tensor_info o;
    swi_status st = swi_ort_output_info(m, output, &o, err, n);
    if (st) return st;
    char oshp[160];
    ort__shape_str(o.shape, (size_t)o.rank, oshp, sizeof oshp);
    if (o.rank != 5) {
        ort__err(err, n,
                 "%s: the model output '%s' has rank %d %s; swi needs rank 5 "
                 "[batch, classes, i, j, k]",
                 m->path, o.name, o.rank, oshp);
        return SWI_ERR_SHAPE;
    }
    if (o.elem_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        ort__err(err, n, "%s: the model output '%s' is %s; swi needs float32 scores", m->path, o.name,
                 o.type_name);
        return SWI_ERR_SHAPE;
    }
    return SWI_OK;
}

/* One network call on nb windows: in [nb, C, roi] -> out [nb, OC, osp] (pre-bound when out
 * is given; else the ORT-allocated result is returned in *value). */
static swi_status exec(swi_ort_model *m, const float *in, int64_t nb, float *out, OrtValue **value, char *err,
                       size_t n) {
    const OrtApi *api = m->api;
    char prefix[4200];
    int64_t ishape[5] = {nb, m->channels, m->roi[0], m->roi[1], m->roi[2]};
    size_t ibytes = (size_t)(nb * m->in_window) * sizeof(float);
    OrtValue *iv = NULL, *ov = NULL;
    OrtStatus *s =
        ORT_CREATE(api, api->CreateTensorWithDataAsOrtValue(m->mem, (void *)in, ibytes, ishape, 5,
                                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &iv));
    if (s) {
        snprintf(prefix, sizeof prefix, "%s: cannot create the input tensor", m->path);
        return ort__status(api, s, SWI_ERR_PREDICTOR, err, n, prefix);
    }
    if (out) {
        int64_t oshape[5] = {nb, m->out_channels, m->out_spatial[0], m->out_spatial[1], m->out_spatial[2]};
        size_t obytes = (size_t)(nb * m->out_window) * sizeof(float);
        s = ORT_CREATE(api, api->CreateTensorWithDataAsOrtValue(m->mem, out, obytes, oshape, 5,
                                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &ov));
        if (s) {
            api->ReleaseValue(iv);
            snprintf(prefix, sizeof prefix, "%s: cannot create the output tensor", m->path);
            return ort__status(api, s, SWI_ERR_PREDICTOR, err, n, prefix);
        }
    }
    const char *in_names[1] = {m->in_name};
    const char *out_names[1] = {m->out_names[m->output]};
    s = ORT_CREATE(
        api, api->Run(m->session, m->run_opts, in_names, (const OrtValue *const *)&iv, 1, out_names, 1, &ov));
    api->ReleaseValue(iv);
    if (s) {
        if (ov) api->ReleaseValue(ov);
        snprintf(prefix, sizeof prefix, "%s: the network failed", m->path);
        return ort__status(api, s, SWI_ERR_PREDICTOR, err, n, prefix);
    }
    if (value)
        *value = ov;
    else
        api->ReleaseValue(ov);
    return SWI_OK;
}

/* One probe call on zeros tells the output shape the model leaves open. */
static swi_status probe(swi_ort_model *m, char *err, size_t n) {
    const int64_t nb = m->fixed_batch ? m->fixed_batch : 1;
    int64_t cnt;
    if (!mul_ok(nb, m->in_window, &cnt)) {
        ort__err(err, n, "%s: the probe batch is too large", m->path);
        return SWI_ERR_OVERFLOW;
    }
    float *zeros = ort__calloc((size_t)cnt, sizeof(float));
    if (!zeros) {
        ort__err(err, n, "%s: out of memory", m->path);
        return SWI_ERR_NOMEM;
    }
    OrtValue *v = NULL;
    swi_status st = exec(m, zeros, nb, NULL, &v, err, n);
    free(zeros);
    if (st) return st;
    const OrtApi *api = m->api;
    OrtTensorTypeAndShapeInfo *info = NULL;
    OrtStatus *s = ORT_CREATE(api, api->GetTensorTypeAndShape(v, &info));
    size_t r = 0;
    int64_t got[8] = {0};
    if (!s) s = api->GetDimensionsCount(info, &r);
    if (!s && r == 5) s = api->GetDimensions(info, got, 5);
    if (info) api->ReleaseTensorTypeAndShapeInfo(info);
    api->ReleaseValue(v);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s: probing the output shape", m->path);
    if ((st = ort__status(api, s, SWI_ERR_PREDICTOR, err, n, prefix))) return st;
    if (r != 5 || got[0] != nb || got[1] < 1 || got[2] < 1 || got[3] < 1 || got[4] < 1) {
        char oshp[160];
        ort__shape_str(got, r < 8 ? r : 8, oshp, sizeof oshp);
        ort__err(err, n,
                 "%s: for a window of %lldx%lldx%lld the model returns %s; swi needs "
                 "[%lld, classes, i, j, k]",
                 m->path, (long long)m->roi[0], (long long)m->roi[1], (long long)m->roi[2], oshp,
                 (long long)nb);
        return SWI_ERR_SHAPE;
    }
    m->out_channels = got[1];
    for (int a = 0; a < 3; a++) m->out_spatial[a] = got[2 + a];
    return SWI_OK;
}

swi_status swi_ort_prepare(swi_ort_model *m, swi_ort_window *w, swi_head_spec *head, char *err, size_t n) {
    if (!m || !w || !head) {
        ort__err(err, n, "swi_ort_prepare: %s is NULL", !m ? "model" : !w ? "window" : "head");
        return SWI_ERR_INVALID_ARG;
    }
    m->prepared = 0;
    swi_status st = swi_ort_check(m, w->output, err, n);
    if (st) return st;
    char shp[160];
    ort__shape_str(m->in.shape, m->in.rank, shp, sizeof shp);
    if (w->channels < 1) {
        ort__err(err, n, "%s: channels = %lld (must be >= 1)", m->path, (long long)w->channels);
        return SWI_ERR_INVALID_ARG;
    }
    if (m->in.shape[1] > 0 && m->in.shape[1] != w->channels) {
        ort__err(err, n, "%s: the model expects %lld input channel%s %s, but %lld %s given", m->path,
                 (long long)m->in.shape[1], m->in.shape[1] == 1 ? "" : "s", shp, (long long)w->channels,
                 w->channels == 1 ? "was" : "were");
        return SWI_ERR_SHAPE;
    }
    int64_t roi[3];
    for (int a = 0; a < 3; a++) {
        int64_t fixed = m->in.shape[2 + a];
        if (w->roi[a] < 0) {
            ort__err(err, n, "%s: roi[%d] = %lld (must be >= 0)", m->path, a, (long long)w->roi[a]);
            return SWI_ERR_INVALID_ARG;
        }
        if (w->roi[a] == 0 && fixed <= 0) {
            ort__err(err, n, "%s: the model's window size is dynamic %s; give roi", m->path, shp);
            return SWI_ERR_INVALID_ARG;
        }
        if (w->roi[a] > 0 && fixed > 0 && w->roi[a] != fixed) {
            ort__err(err, n,
                     "%s: the model's window is fixed at %s; roi %lld,%lld,%lld does not "
                     "fit",
                     m->path, shp, (long long)w->roi[0], (long long)w->roi[1], (long long)w->roi[2]);
            return SWI_ERR_SHAPE;
        }
        roi[a] = w->roi[a] > 0 ? w->roi[a] : fixed;
    }
    swi_ort_tensor_info o;
    if ((st = swi_ort_output_info(m, w->output, &o, err, n))) return st;
    char oshp[160];
    ort__shape_str(o.shape, (size_t)o.rank, oshp, sizeof oshp);
    if (o.shape[0] > 0 && o.shape[0] != m->in.shape[0]) {
        ort__err(err, n, "%s: the model's output batch %s does not follow its input batch %s", m->path, oshp,
                 shp);
        return SWI_ERR_SHAPE;
    }
    int64_t in_window;
    if (!mul_ok(w->channels, roi[0], &in_window) || !mul_ok(in_window, roi[1], &in_window) ||
        !mul_ok(in_window, roi[2], &in_window)) {
        ort__err(err, n, "%s: a window of %lld channels x %lldx%lldx%lld is too large", m->path,
                 (long long)w->channels, (long long)roi[0], (long long)roi[1], (long long)roi[2]);
        return SWI_ERR_OVERFLOW;
    }
    m->output = w->output;
    m->out.is_tensor = 1;
    m->out.type = o.elem_type;
    m->out.rank = (size_t)o.rank;
    memcpy(m->out.shape, o.shape, sizeof m->out.shape);
    memcpy(m->roi, roi, sizeof m->roi);
    m->channels = w->channels;
    m->in_window = in_window;
    m->fixed_batch = m->in.shape[0] > 0 ? m->in.shape[0] : 0;

    /* Static output sizes describe the declared input window; with a dynamic input they
     * may not hold for the roi chosen, so probe then too. */
    int known = o.shape[1] > 0;
    for (int a = 0; a < 3; a++) known = known && o.shape[2 + a] > 0 && m->in.shape[2 + a] > 0;
    if (known) {
        m->out_channels = o.shape[1];
        for (int a = 0; a < 3; a++) m->out_spatial[a] = o.shape[2 + a];
    } else if ((st = probe(m, err, n))) {
        return st;
    }
    int64_t out_window;
    if (!mul_ok(m->out_channels, m->out_spatial[0], &out_window) ||
        !mul_ok(out_window, m->out_spatial[1], &out_window) ||
        !mul_ok(out_window, m->out_spatial[2], &out_window)) {
        ort__err(err, n, "%s: the model's output window is too large", m->path);
        return SWI_ERR_OVERFLOW;
    }
    m->out_window = out_window;
    /* The padded fixed batch is sized for this window: drop any earlier one. */
    free(m->pad_in);
    free(m->pad_out);
    m->pad_in = m->pad_out = NULL;
    free(m->tta_in);
    free(m->tta_out);
    m->tta_in = m->tta_out = NULL;
    m->tta_cap = 0;

    memcpy(w->roi, roi, sizeof w->roi);
    memset(head, 0, sizeof *head);
    head->channels = m->out_channels;
    for (int a = 0; a < 3; a++) head->spatial[a] = m->out_spatial[a];
    m->prepared = 1;
    return SWI_OK;
}

/* n windows through the network, cut into calls of the fixed batch (the last one padded). */
static swi_status run_plain(swi_ort_model *m, const float *in, int64_t n, float *out, char *err,
                            size_t errlen) {
    const int64_t iw = m->in_window, ow = m->out_window;
    if (!m->fixed_batch) return exec(m, in, n, out, NULL, err, errlen);
    const int64_t B = m->fixed_batch;
    for (int64_t i = 0; i < n; i += B) {
        int64_t cnt = n - i < B ? n - i : B;
        swi_status st;
        if (cnt == B) {
            if ((st = exec(m, in + i * iw, B, out + i * ow, NULL, err, errlen))) return st;
            continue;
        }
        if (!m->pad_in) {
            int64_t bi, bo;
            if (!mul_ok(B, iw, &bi) || !mul_ok(B, ow, &bo)) {
                ort__err(err, errlen, "%s: the model's fixed batch %lld is too large", m->path, (long long)B);
                return SWI_ERR_OVERFLOW;
            }
            m->pad_in = ort__calloc((size_t)bi, sizeof(float));
            m->pad_out = ort__malloc((size_t)bo * sizeof(float));
            if (!m->pad_in || !m->pad_out) {
                free(m->pad_in), free(m->pad_out);
                m->pad_in = m->pad_out = NULL;
                ort__err(err, errlen, "out of memory");
                return SWI_ERR_NOMEM;
            }
        }
        memcpy(m->pad_in, in + i * iw, (size_t)(cnt * iw) * sizeof(float));
        memset(m->pad_in + cnt * iw, 0, (size_t)((B - cnt) * iw) * sizeof(float));
        if ((st = exec(m, m->pad_in, B, m->pad_out, NULL, err, errlen))) return st;
        memcpy(out + i * ow, m->pad_out, (size_t)(cnt * ow) * sizeof(float));
    }
    return SWI_OK;
}

/* tta: the 7 mirrored runs added to the plain one in out, then the average. */
static swi_status run_tta(swi_ort_model *m, const float *in, int64_t n, float *out, char *err,
                          size_t errlen) {
    const int64_t iw = m->in_window, ow = m->out_window;
    if (n > m->tta_cap) {
        int64_t ni, no;
        free(m->tta_in);
        free(m->tta_out);
        m->tta_in = m->tta_out = NULL;
        m->tta_cap = 0;
        if (!mul_ok(n, iw, &ni) || !mul_ok(n, ow, &no)) {
            ort__err(err, errlen, "%s: tta buffers for %lld windows are too large", m->path, (long long)n);
            return SWI_ERR_OVERFLOW;
        }
        m->tta_in = ort__malloc((size_t)ni * sizeof(float));
        m->tta_out = ort__malloc((size_t)no * sizeof(float));
        if (!m->tta_in || !m->tta_out) {
            free(m->tta_in), free(m->tta_out);
            m->tta_in = m->tta_out = NULL;
            ort__err(err, errlen, "out of memory (tta buffers)");
            return SWI_ERR_NOMEM;
        }
        m->tta_cap = n;
    }
    for (int mask = 1; mask < 8; mask++) {
        ort__flip3_copy(in, m->tta_in, n * m->channels, m->roi, mask);
        swi_status st = run_plain(m, m->tta_in, n, m->tta_out, err, errlen);
        if (st) return st;
        ort__flip3_accumulate(m->tta_out, out, n * m->out_channels, m->out_spatial, mask);
    }
    const int64_t total = n * ow;
    for (int64_t i = 0; i < total; i++) out[i] *= 0.125f;
    return SWI_OK;
}

swi_status swi_ort_run(swi_ort_model *m, const float *in, int64_t n, float *out, char *err, size_t errlen) {
    if (!m || !in || !out || n < 0) {
        ort__err(err, errlen, "swi_ort_run: %s", !m ? "model is NULL" : n < 0 ? "n < 0" : "a buffer is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    if (!m->prepared) {
        ort__err(err, errlen, "%s: model not prepared", m->path);
        return SWI_ERR_INVALID_ARG;
    }
    if (n == 0) return SWI_OK;
    swi_status st = run_plain(m, in, n, out, err, errlen);
    if (st || !m->opts.tta) return st;
    return run_tta(m, in, n, out, err, errlen);
}

int64_t swi_ort_calls_per_batch(const swi_ort_model *m, int64_t n) {
    int64_t calls = m->fixed_batch ? (n + m->fixed_batch - 1) / m->fixed_batch : 1;
    return m->opts.tta ? 8 * calls : calls;
}

static int predict(void *user, swi_batch *b) {
    swi_ort_model *m = user;
    if (!m->prepared) {
        swi_batch_set_error(b, "swi_ort predictor: the model was not prepared (swi_ort_prepare)");
        return 1;
    }
    int64_t n = swi_batch_count(b);
    const float *in = swi_batch_input(b);
    float *out = swi_batch_output(b, 0, m->out_channels, m->out_spatial);
    if (!out) {
        swi_batch_set_error(b, "the engine refused the model's output shape");
        return 1;
    }
    if (swi_ort_run(m, in, n, out, m->last_error, sizeof m->last_error) != SWI_OK) {
        swi_batch_set_error(b, m->last_error);
        return 1;
    }
    /* NaN scores would make a label map that looks fine and is not: stop instead. */
    const int64_t per = m->out_window;
    for (int64_t w = 0; w < n; w++) {
        const float *o = out + w * per;
        for (int64_t x = 0; x < per; x++)
            if (o[x] != o[x]) {
                const int64_t *st = swi_batch_start(b, (int)w);
                ort__err(m->last_error, sizeof m->last_error,
                         "%s: the network returned NaN for "
                         "the window at (%lld, %lld, %lld); its labels would be meaningless",
                         m->path, (long long)st[0], (long long)st[1], (long long)st[2]);
                swi_batch_set_error(b, m->last_error);
                return 1;
            }
    }
    return 0;
}

swi_predictor swi_ort_predictor(swi_ort_model *m) {
    swi_predictor p = {predict, m};
    return p;
}

void swi_ort_cancel(swi_ort_model *m) {
    if (m && m->run_opts) {
        OrtStatus *s = m->api->RunOptionsSetTerminate(m->run_opts);
        if (s) m->api->ReleaseStatus(s);
    }
}
