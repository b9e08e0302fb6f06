/* ort_predictor.c -- see ort_predictor.h. */
#include "ort_predictor.h"

#include "flip.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SWI_HAVE_ORT

int ort_available(void) { return 0; }
const char *ort_version(void) { return "none"; }

int ort_model_open(const char *path, const ort_opts *opts, ort_model **out, char *err)
{
    (void)opts;
    *out = NULL;
    cli_err(err, "%s: swi was built without ONNX Runtime (run scripts/install-deps.sh and "
            "rebuild)", path);
    return -1;
}

void ort_model_free(ort_model *m) { (void)m; }
void ort_model_describe(const ort_model *m, char *buf, size_t n) { (void)m; snprintf(buf, n, "-"); }
int ort_model_prepare(ort_model *m, int64_t channels, int64_t roi[3], int roi_given,
                      swi_head_spec *head, char *err)
{
    (void)m, (void)channels, (void)roi, (void)roi_given, (void)head;
    cli_err(err, "swi was built without ONNX Runtime");
    return -1;
}
int64_t ort_model_calls_per_batch(const ort_model *m, int64_t n) { (void)m; return n > 0; }
int ort_predict(void *user, swi_batch *batch) { (void)user, (void)batch; return 1; }
void ort_model_cancel(void *user) { (void)user; }
int ort_model_run(ort_model *m, const float *in, int64_t n, float *out, char *err)
{
    (void)m, (void)in, (void)n, (void)out;
    cli_err(err, "swi was built without ONNX Runtime");
    return -1;
}

#else /* SWI_HAVE_ORT */

#include <onnxruntime_c_api.h>

struct ort_model {
    const OrtApi *api;
    OrtEnv *env;
    OrtSession *session;
    OrtRunOptions *run_opts;
    OrtMemoryInfo *mem;
    char path[4096];
    ort_opts opts;
    char *in_name;
    char *out_name;
    size_t n_outputs;
    int64_t in_shape[8];   /* -1 = dynamic */
    size_t in_rank;
    int in_type;
    int64_t out_shape[8];
    size_t out_rank;
    int out_type;
    /* settled by prepare */
    int prepared;
    int64_t channels;
    int64_t roi[3];
    int64_t fixed_batch;   /* 0 = dynamic */
    int64_t out_channels;
    int64_t out_spatial[3];
    /* scratch: padded fixed batch, tta */
    float *pad_in, *pad_out;
    float *tta_in, *tta_out;
    int64_t tta_cap;
    char last_error[SWI_ERRLEN];
};

/* Release a status we do not report. */
static void drop(const OrtApi *api, OrtStatus *s)
{
    if (s)
        api->ReleaseStatus(s);
}

static const OrtApi *get_api(void)
{
    const OrtApiBase *base = OrtGetApiBase();
    return base ? base->GetApi(ORT_API_VERSION) : NULL;
}

int ort_available(void) { return 1; }

const char *ort_version(void)
{
    const OrtApiBase *base = OrtGetApiBase();
    return base ? base->GetVersionString() : "unknown";
}

/* Consume an OrtStatus: 0 if NULL, else -1 with "prefix: message" in err. */
static int st_fail(const OrtApi *api, OrtStatus *st, char *err, const char *fmt, const char *a)
{
    if (!st)
        return 0;
    char prefix[4800];
    snprintf(prefix, sizeof prefix, fmt, a);
    cli_err(err, "%s: %s", prefix, api->GetErrorMessage(st));
    api->ReleaseStatus(st);
    return -1;
}

static const char *type_name(int t)
{
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "float64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    default: return "a non-float type";
    }
}

static void shape_str(const int64_t *s, size_t rank, char *buf, size_t n)
{
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "[");
    for (size_t i = 0; i < rank && len < n - 24; i++)
        len += (size_t)(s[i] < 0 ? snprintf(buf + len, n - len, "%s?", i ? "," : "")
                                 : snprintf(buf + len, n - len, "%s%lld", i ? "," : "",
                                            (long long)s[i]));
    snprintf(buf + len, n - len, "]");
}

/* Read element type and shape of a type info (tensor only). */
static int read_tensor_info(ort_model *m, OrtTypeInfo *ti, const char *what, const char *name,
                            int *type, int64_t *shape, size_t *rank, char *err)
{
    const OrtApi *api = m->api;
    enum ONNXType ot;
    if (st_fail(api, api->GetOnnxTypeFromTypeInfo(ti, &ot), err, "%s", m->path))
        return -1;
    if (ot != ONNX_TYPE_TENSOR) {
        cli_err(err, "%s: model %s '%s' is not a tensor", m->path, what, name);
        return -1;
    }
    const OrtTensorTypeAndShapeInfo *tsi = NULL;
    if (st_fail(api, api->CastTypeInfoToTensorInfo(ti, &tsi), err, "%s", m->path))
        return -1;
    enum ONNXTensorElementDataType et;
    size_t r = 0;
    if (st_fail(api, api->GetTensorElementType(tsi, &et), err, "%s", m->path) ||
        st_fail(api, api->GetDimensionsCount(tsi, &r), err, "%s", m->path))
        return -1;
    *type = (int)et;
    *rank = r;
    int64_t tmp[16];
    if (r > 16) {
        cli_err(err, "%s: model %s '%s' has rank %zu; swi needs rank 5 [batch, channels, i, j, "
                "k]", m->path, what, name, r);
        return -1;
    }
    if (st_fail(api, api->GetDimensions(tsi, tmp, r), err, "%s", m->path))
        return -1;
    for (size_t i = 0; i < r && i < 8; i++)
        shape[i] = tmp[i] > 0 ? tmp[i] : -1;
    return 0;
}

int ort_model_open(const char *path, const ort_opts *opts, ort_model **out, char *err)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        cli_err(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: is a directory, not an ONNX model", path);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_err(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    fclose(f);
    if (st.st_size == 0) {
        cli_err(err, "%s: not an ONNX model (empty file)", path);
        return -1;
    }
    const OrtApi *api = get_api();
    if (!api) {
        cli_err(err, "ONNX Runtime %s is older than the headers swi was built with (API %d)",
                ort_version(), ORT_API_VERSION);
        return -1;
    }
    ort_model *m = calloc(1, sizeof *m);
    if (!m) {
        cli_err(err, "out of memory");
        return -1;
    }
    m->api = api;
    m->opts = *opts;
    snprintf(m->path, sizeof m->path, "%s", path);

    OrtSessionOptions *so = NULL;
    OrtStatus *s;
    /* FATAL only: every error reaches the user once, through our message. */
    if ((s = api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "swi", &m->env)) ||
        (s = api->CreateSessionOptions(&so))) {
        st_fail(api, s, err, "%s: cannot start ONNX Runtime", path);
        goto fail;
    }
    int threads = opts->threads > 0 ? opts->threads : cli_cpu_count();
    if ((s = api->SetIntraOpNumThreads(so, threads)) ||
        (s = api->SetInterOpNumThreads(so, 1)) ||
        (s = api->SetSessionExecutionMode(so, ORT_SEQUENTIAL)) ||
        (s = api->SetSessionGraphOptimizationLevel(so, ORT_ENABLE_ALL)) ||
        (s = api->SetSessionLogSeverityLevel(so, 4))) {
        st_fail(api, s, err, "%s: cannot set session options", path);
        goto fail;
    }
    {
        /* Spinning intra-op threads burn the cores the blending workers need while the
         * pipeline overlaps them; SWI_ORT_SPIN=1 turns it back on. */
        const char *spin = getenv("SWI_ORT_SPIN");
        if ((s = api->AddSessionConfigEntry(so, "session.intra_op.allow_spinning",
                                            spin && *spin == '1' ? "1" : "0"))) {
            st_fail(api, s, err, "%s: cannot set session options", path);
            goto fail;
        }
    }
    if (getenv("SWI_ORT_NO_ARENA") && *getenv("SWI_ORT_NO_ARENA") == '1') {
        /* Lower peak memory, more allocation work: no CPU arena, no memory pattern. */
        if ((s = api->DisableCpuMemArena(so)) || (s = api->DisableMemPattern(so))) {
            st_fail(api, s, err, "%s: cannot set session options", path);
            goto fail;
        }
    }
    {
        /* Advanced: extra session config entries, "key=value;key=value" (see ONNX Runtime's
         * onnxruntime_session_options_config_keys.h). */
        const char *extra = getenv("SWI_ORT_CONFIG");
        char buf[1024];
        if (extra && strlen(extra) < sizeof buf) {
            strcpy(buf, extra);
            for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv;
                 kv = strtok_r(NULL, ";", &save)) {
                char *eq = strchr(kv, '=');
                if (!eq)
                    continue;
                *eq = '\0';
                if ((s = api->AddSessionConfigEntry(so, kv, eq + 1))) {
                    st_fail(api, s, err, "%s: SWI_ORT_CONFIG", path);
                    goto fail;
                }
            }
        }
    }
    if (opts->cuda) {
        char **prov = NULL;
        int np = 0, has = 0;
        char list[256] = "";
        if ((s = api->GetAvailableProviders(&prov, &np))) {
            st_fail(api, s, err, "%s: --device cuda", path);
            goto fail;
        }
        for (int i = 0; i < np; i++) {
            if (strcmp(prov[i], "CUDAExecutionProvider") == 0)
                has = 1;
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", prov[i]);
        }
        drop(api, api->ReleaseAvailableProviders(prov, np));
        if (!has) {
            cli_err(err, "--device cuda: this ONNX Runtime (%s) has no CUDA execution provider "
                    "(it has: %s); use --device cpu", ort_version(), list);
            goto fail;
        }
        OrtCUDAProviderOptionsV2 *cu = NULL;
        if ((s = api->CreateCUDAProviderOptions(&cu))) {
            st_fail(api, s, err, "%s: --device cuda", path);
            goto fail;
        }
        s = api->SessionOptionsAppendExecutionProvider_CUDA_V2(so, cu);
        api->ReleaseCUDAProviderOptions(cu);
        if (s) {
            st_fail(api, s, err, "%s: --device cuda: cannot start the CUDA provider", path);
            goto fail;
        }
    }
    if ((s = api->CreateSession(m->env, path, so, &m->session))) {
        OrtErrorCode code = api->GetErrorCode(s);
        if (code == ORT_INVALID_PROTOBUF || code == ORT_NO_MODEL)
            st_fail(api, s, err, "%s: not an ONNX model (ONNX Runtime", path);
        else
            st_fail(api, s, err, "%s: ONNX Runtime cannot load the model", path);
        if (code == ORT_INVALID_PROTOBUF || code == ORT_NO_MODEL) {
            size_t len = strlen(err);
            if (len + 2 < SWI_ERRLEN) {
                err[len] = ')';
                err[len + 1] = '\0';
            }
        }
        goto fail;
    }
    api->ReleaseSessionOptions(so);
    so = NULL;
    if ((s = api->CreateRunOptions(&m->run_opts)) ||
        (s = api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &m->mem))) {
        st_fail(api, s, err, "%s: cannot start ONNX Runtime", path);
        goto fail;
    }

    /* Signature. */
    size_t n_in = 0, n_out = 0;
    if ((s = api->SessionGetInputCount(m->session, &n_in)) ||
        (s = api->SessionGetOutputCount(m->session, &n_out))) {
        st_fail(api, s, err, "%s", path);
        goto fail;
    }
    if (n_in != 1) {
        cli_err(err, "%s: the model has %zu inputs; swi feeds exactly one (the image, "
                "[batch, channels, i, j, k])", path, n_in);
        goto fail;
    }
    if (n_out < 1) {
        cli_err(err, "%s: the model has no outputs", path);
        goto fail;
    }
    if (opts->head < 0 || (size_t)opts->head >= n_out) {
        cli_err(err, "%s: --head %d: the model has %zu output%s", path, opts->head, n_out,
                n_out == 1 ? "" : "s");
        goto fail;
    }
    m->n_outputs = n_out;
    OrtAllocator *alloc = NULL;
    if ((s = api->GetAllocatorWithDefaultOptions(&alloc)) ||
        (s = api->SessionGetInputName(m->session, 0, alloc, &m->in_name)) ||
        (s = api->SessionGetOutputName(m->session, (size_t)opts->head, alloc, &m->out_name))) {
        st_fail(api, s, err, "%s", path);
        goto fail;
    }
    OrtTypeInfo *ti = NULL;
    if ((s = api->SessionGetInputTypeInfo(m->session, 0, &ti))) {
        st_fail(api, s, err, "%s", path);
        goto fail;
    }
    int rc = read_tensor_info(m, ti, "input", m->in_name, &m->in_type, m->in_shape, &m->in_rank,
                              err);
    api->ReleaseTypeInfo(ti);
    if (rc)
        goto fail;
    if ((s = api->SessionGetOutputTypeInfo(m->session, (size_t)opts->head, &ti))) {
        st_fail(api, s, err, "%s", path);
        goto fail;
    }
    rc = read_tensor_info(m, ti, "output", m->out_name, &m->out_type, m->out_shape, &m->out_rank,
                          err);
    api->ReleaseTypeInfo(ti);
    if (rc)
        goto fail;
    *out = m;
    return 0;
fail:
    if (so)
        api->ReleaseSessionOptions(so);
    ort_model_free(m);
    return -1;
}

void ort_model_free(ort_model *m)
{
    if (!m)
        return;
    const OrtApi *api = m->api;
    OrtAllocator *alloc = NULL;
    OrtStatus *s = api->GetAllocatorWithDefaultOptions(&alloc);
    if (s)
        api->ReleaseStatus(s);
    else {
        if (m->in_name)
            drop(api, api->AllocatorFree(alloc, m->in_name));
        if (m->out_name)
            drop(api, api->AllocatorFree(alloc, m->out_name));
    }
    if (m->mem)
        api->ReleaseMemoryInfo(m->mem);
    if (m->run_opts)
        api->ReleaseRunOptions(m->run_opts);
    if (m->session)
        api->ReleaseSession(m->session);
    if (m->env)
        api->ReleaseEnv(m->env);
    free(m->pad_in);
    free(m->pad_out);
    free(m->tta_in);
    free(m->tta_out);
    free(m);
}

void ort_model_describe(const ort_model *m, char *buf, size_t n)
{
    char a[160], b[160];
    shape_str(m->in_shape, m->in_rank, a, sizeof a);
    shape_str(m->out_shape, m->out_rank, b, sizeof b);
    snprintf(buf, n, "input '%s' %s %s -> output '%s' %s %s (%zu output%s, using #%d)",
             m->in_name, a, type_name(m->in_type), m->out_name, b, type_name(m->out_type),
             m->n_outputs, m->n_outputs == 1 ? "" : "s", m->opts.head);
}

/* One network call on nb windows: in [nb, C, roi] -> out [nb, OC, osp] (pre-bound when out
 * is given; else the ORT-allocated result is returned in *value). */
static int exec(ort_model *m, const float *in, int64_t nb, float *out, OrtValue **value,
                char *err)
{
    const OrtApi *api = m->api;
    int64_t ishape[5] = { nb, m->channels, m->roi[0], m->roi[1], m->roi[2] };
    size_t ibytes = (size_t)(nb * m->channels * m->roi[0] * m->roi[1] * m->roi[2]) * 4;
    OrtValue *iv = NULL, *ov = NULL;
    OrtStatus *s = api->CreateTensorWithDataAsOrtValue(m->mem, (void *)in, ibytes, ishape, 5,
                                                       ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &iv);
    if (s)
        return st_fail(api, s, err, "%s: cannot create the input tensor", m->path);
    if (out) {
        int64_t oshape[5] = { nb, m->out_channels, m->out_spatial[0], m->out_spatial[1],
                              m->out_spatial[2] };
        size_t obytes = (size_t)(nb * m->out_channels * m->out_spatial[0] * m->out_spatial[1] *
                                 m->out_spatial[2]) * 4;
        s = api->CreateTensorWithDataAsOrtValue(m->mem, out, obytes, oshape, 5,
                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &ov);
        if (s) {
            api->ReleaseValue(iv);
            return st_fail(api, s, err, "%s: cannot create the output tensor", m->path);
        }
    }
    const char *in_names[1] = { m->in_name };
    const char *out_names[1] = { m->out_name };
    s = api->Run(m->session, m->run_opts, in_names, (const OrtValue *const *)&iv, 1, out_names,
                 1, &ov);
    api->ReleaseValue(iv);
    if (s) {
        if (ov)
            api->ReleaseValue(ov);
        return st_fail(api, s, err, "%s: the network failed", m->path);
    }
    if (value)
        *value = ov;
    else
        api->ReleaseValue(ov);
    return 0;
}

static int64_t vol3(const int64_t *s) { return s[0] * s[1] * s[2]; }

/* n windows through the network, cut into calls of the fixed batch (the last one padded). */
static int run_plain(ort_model *m, const float *in, int64_t n, float *out, char *err)
{
    const int64_t iw = m->channels * vol3(m->roi), ow = m->out_channels * vol3(m->out_spatial);
    if (!m->fixed_batch)
        return exec(m, in, n, out, NULL, err);
    const int64_t B = m->fixed_batch;
    for (int64_t i = 0; i < n; i += B) {
        int64_t cnt = n - i < B ? n - i : B;
        if (cnt == B) {
            if (exec(m, in + i * iw, B, out + i * ow, NULL, err))
                return -1;
            continue;
        }
        if (!m->pad_in) {
            m->pad_in = calloc((size_t)(B * iw), sizeof(float));
            m->pad_out = malloc((size_t)(B * ow) * sizeof(float));
            if (!m->pad_in || !m->pad_out) {
                cli_err(err, "out of memory");
                return -1;
            }
        }
        memcpy(m->pad_in, in + i * iw, (size_t)(cnt * iw) * sizeof(float));
        memset(m->pad_in + cnt * iw, 0, (size_t)((B - cnt) * iw) * sizeof(float));
        if (exec(m, m->pad_in, B, m->pad_out, NULL, err))
            return -1;
        memcpy(out + i * ow, m->pad_out, (size_t)(cnt * ow) * sizeof(float));
    }
    return 0;
}

int ort_model_run(ort_model *m, const float *in, int64_t n, float *out, char *err)
{
    if (!m->prepared) {
        cli_err(err, "%s: model not prepared", m->path);
        return -1;
    }
    if (run_plain(m, in, n, out, err))
        return -1;
    if (!m->opts.tta)
        return 0;
    const int64_t iw = m->channels * vol3(m->roi), ow = m->out_channels * vol3(m->out_spatial);
    if (n > m->tta_cap) {
        free(m->tta_in);
        free(m->tta_out);
        m->tta_in = malloc((size_t)(n * iw) * sizeof(float));
        m->tta_out = malloc((size_t)(n * ow) * sizeof(float));
        if (!m->tta_in || !m->tta_out) {
            free(m->tta_in), free(m->tta_out);
            m->tta_in = m->tta_out = NULL;
            m->tta_cap = 0;
            cli_err(err, "out of memory (--tta buffers)");
            return -1;
        }
        m->tta_cap = n;
    }
    for (int mask = 1; mask < 8; mask++) {
        flip3_copy(in, m->tta_in, n * m->channels, m->roi, mask);
        if (run_plain(m, m->tta_in, n, m->tta_out, err))
            return -1;
        flip3_accumulate(m->tta_out, out, n * m->out_channels, m->out_spatial, mask);
    }
    const int64_t total = n * ow;
    for (int64_t i = 0; i < total; i++)
        out[i] *= 0.125f;
    return 0;
}

int64_t ort_model_calls_per_batch(const ort_model *m, int64_t n)
{
    int64_t calls = m->fixed_batch ? (n + m->fixed_batch - 1) / m->fixed_batch : 1;
    return m->opts.tta ? 8 * calls : calls;
}

int ort_model_prepare(ort_model *m, int64_t channels, int64_t roi[3], int roi_given,
                      swi_head_spec *head, char *err)
{
    char shp[160];
    shape_str(m->in_shape, m->in_rank, shp, sizeof shp);
    if (m->in_rank != 5) {
        cli_err(err, "%s: the model input '%s' has rank %zu %s; swi needs rank 5 "
                "[batch, channels, i, j, k]", m->path, m->in_name, m->in_rank, shp);
        return -1;
    }
    if (m->in_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        cli_err(err, "%s: the model input '%s' is %s; swi feeds float32", m->path, m->in_name,
                type_name(m->in_type));
        return -1;
    }
    if (m->in_shape[1] > 0 && m->in_shape[1] != channels) {
        cli_err(err, "%s: the model expects %lld input channel%s %s, but %lld --input file%s "
                "given", m->path, (long long)m->in_shape[1], m->in_shape[1] == 1 ? "" : "s",
                shp, (long long)channels, channels == 1 ? " was" : "s were");
        return -1;
    }
    char oshp[160];
    shape_str(m->out_shape, m->out_rank, oshp, sizeof oshp);
    if (m->out_rank != 5) {
        cli_err(err, "%s: the model output '%s' has rank %zu %s; swi needs rank 5 "
                "[batch, classes, i, j, k]", m->path, m->out_name, m->out_rank, oshp);
        return -1;
    }
    if (m->out_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        cli_err(err, "%s: the model output '%s' is %s; swi needs float32 scores", m->path,
                m->out_name, type_name(m->out_type));
        return -1;
    }
    for (int a = 0; a < 3; a++) {
        int64_t fixed = m->in_shape[2 + a];
        if (roi_given) {
            if (fixed > 0 && roi[a] != fixed) {
                cli_err(err, "%s: the model's window is fixed at %s; --roi %lld,%lld,%lld does "
                        "not fit (leave --roi out to use the model's)", m->path, shp,
                        (long long)roi[0], (long long)roi[1], (long long)roi[2]);
                return -1;
            }
            if (roi[a] <= 0) {
                cli_err(err, "--roi must be positive for an ONNX model (got %lld)",
                        (long long)roi[a]);
                return -2;
            }
        } else {
            if (fixed <= 0) {
                cli_err(err, "%s: the model's window size is dynamic %s; give one with --roi",
                        m->path, shp);
                return -2;
            }
            roi[a] = fixed;
        }
        m->roi[a] = roi[a];
    }
    m->channels = channels;
    m->fixed_batch = m->in_shape[0] > 0 ? m->in_shape[0] : 0;
    if (m->out_shape[0] > 0 && m->out_shape[0] != m->in_shape[0]) {
        cli_err(err, "%s: the model's output batch %s does not follow its input batch %s",
                m->path, oshp, shp);
        return -1;
    }
    int known = m->out_shape[1] > 0;
    for (int a = 0; a < 3; a++)
        known = known && m->out_shape[2 + a] > 0;
    /* Static output sizes describe the declared input window; with a dynamic input they
     * may not hold for the --roi chosen, so probe then too. */
    for (int a = 0; a < 3; a++)
        known = known && m->in_shape[2 + a] > 0;
    if (known) {
        m->out_channels = m->out_shape[1];
        for (int a = 0; a < 3; a++)
            m->out_spatial[a] = m->out_shape[2 + a];
    } else {
        /* Probe: one batch of zeros tells the output shape. */
        int64_t nb = m->fixed_batch ? m->fixed_batch : 1;
        size_t cnt = (size_t)(nb * channels * vol3(m->roi));
        float *zeros = calloc(cnt, sizeof(float));
        if (!zeros) {
            cli_err(err, "out of memory");
            return -1;
        }
        OrtValue *v = NULL;
        int rc = exec(m, zeros, nb, NULL, &v, err);
        free(zeros);
        if (rc)
            return -1;
        const OrtApi *api = m->api;
        OrtTensorTypeAndShapeInfo *info = NULL;
        OrtStatus *s = api->GetTensorTypeAndShape(v, &info);
        size_t r = 0;
        int64_t got[8] = { 0 };
        if (!s)
            s = api->GetDimensionsCount(info, &r);
        if (!s && r == 5)
            s = api->GetDimensions(info, got, 5);
        if (info)
            api->ReleaseTensorTypeAndShapeInfo(info);
        api->ReleaseValue(v);
        if (s)
            return st_fail(api, s, err, "%s: probing the output shape", m->path);
        if (r != 5 || got[0] != nb || got[1] < 1 || got[2] < 1 || got[3] < 1 || got[4] < 1) {
            shape_str(got, r < 8 ? r : 8, oshp, sizeof oshp);
            cli_err(err, "%s: for a window of %lldx%lldx%lld the model returns %s; swi needs "
                    "[%lld, classes, i, j, k]", m->path, (long long)m->roi[0],
                    (long long)m->roi[1], (long long)m->roi[2], oshp, (long long)nb);
            return -1;
        }
        m->out_channels = got[1];
        for (int a = 0; a < 3; a++)
            m->out_spatial[a] = got[2 + a];
    }
    head->channels = m->out_channels;
    for (int a = 0; a < 3; a++)
        head->spatial[a] = m->out_spatial[a];
    m->prepared = 1;
    return 0;
}

int ort_predict(void *user, swi_batch *b)
{
    ort_model *m = user;
    int64_t n = swi_batch_count(b);
    const float *in = swi_batch_input(b);
    float *out = swi_batch_output(b, 0, m->out_channels, m->out_spatial);
    if (!out) {
        swi_batch_set_error(b, "the engine refused the model's output shape");
        return 1;
    }
    if (ort_model_run(m, in, n, out, m->last_error) != 0) {
        swi_batch_set_error(b, m->last_error);
        return 1;
    }
    /* NaN scores would make a label map that looks fine and is not: stop instead. */
    const int64_t per = m->out_channels * vol3(m->out_spatial);
    for (int64_t w = 0; w < n; w++) {
        const float *o = out + w * per;
        for (int64_t x = 0; x < per; x++)
            if (o[x] != o[x]) {
                const int64_t *st = swi_batch_start(b, (int)w);
                cli_err(m->last_error, "%s: the network returned NaN for the window at "
                        "(%lld, %lld, %lld); its labels would be meaningless", m->path,
                        (long long)st[0], (long long)st[1], (long long)st[2]);
                swi_batch_set_error(b, m->last_error);
                return 1;
            }
    }
    return 0;
}

void ort_model_cancel(void *user)
{
    ort_model *m = user;
    if (m && m->run_opts) {
        OrtStatus *s = m->api->RunOptionsSetTerminate(m->run_opts);
        if (s)
            m->api->ReleaseStatus(s);
    }
}

#endif /* SWI_HAVE_ORT */
