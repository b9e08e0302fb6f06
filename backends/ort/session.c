/* session.c -- ONNX Runtime session plumbing: options, loading, the model's signature. */
#include "ort_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ort__err(char *err, size_t n, const char *fmt, ...) {
    if (!err || n == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    /* ONNX Runtime's messages may hold newlines and tabs */
    swi_message_one_line(err);
}

swi_status ort__status(const OrtApi *api, OrtStatus *st, swi_status fail, char *err, size_t n,
                       const char *prefix) {
    if (!st) return SWI_OK;
    ort__err(err, n, "%s: %s", prefix, api->GetErrorMessage(st));
    api->ReleaseStatus(st);
    return fail;
}

#ifdef SWI_FAULT_INJECTION
#include <stdatomic.h>
static atomic_llong fault_calls;

int ort__fault_point(void) {
    static long long fail_at = -2; /* -2: not read yet */
    if (fail_at == -2) {
        const char *s = getenv("SWI_FAULT_ORT");
        fail_at = s && *s ? atoll(s) : -1;
    }
    return atomic_fetch_add(&fault_calls, 1) + 1 == fail_at;
}

OrtStatus *ort__fault_status(const OrtApi *api) {
    return api->CreateStatus(ORT_FAIL, "injected failure (SWI_FAULT_ORT)");
}
#endif

/* Release a status we do not report. */
static void drop(const OrtApi *api, OrtStatus *s) {
    if (s) api->ReleaseStatus(s);
}

static const OrtApi *get_api(void) {
    const OrtApiBase *base = OrtGetApiBase();
    return base ? base->GetApi(ORT_API_VERSION) : NULL;
}

const char *swi_ort_version(void) {
    const OrtApiBase *base = OrtGetApiBase();
    return base ? base->GetVersionString() : "unknown";
}

void swi_ort_options_init(swi_ort_options *o) {
    memset(o, 0, sizeof *o);
    o->device = SWI_ORT_CPU;
    o->graph_opt = SWI_ORT_OPT_ALL;
    o->memory_arena = 1;
    o->rewrite = 1;
}

const char *ort__type_name(int t) {
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

void ort__shape_str(const int64_t *s, size_t rank, char *buf, size_t n) {
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "[");
    for (size_t i = 0; i < rank && len < n - 24; i++)
        len += (size_t)(s[i] < 0 ? snprintf(buf + len, n - len, "%s?", i ? "," : "")
                                 : snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)s[i]));
    snprintf(buf + len, n - len, "]");
}

swi_status ort__tensor_info(const swi_ort_model *m, OrtTypeInfo *ti, const char *what, const char *name,
                            ort_tensor *t, char *err, size_t n) {
    const OrtApi *api = m->api;
    memset(t, 0, sizeof *t);
    enum ONNXType ot;
    swi_status st =
        ort__status(api, api->GetOnnxTypeFromTypeInfo(ti, &ot), SWI_ERR_INVALID_ARG, err, n, m->path);
    if (st) return st;
    if (ot != ONNX_TYPE_TENSOR) {
        ort__err(err, n, "%s: model %s '%s' is not a tensor", m->path, what, name);
        return SWI_ERR_INVALID_ARG;
    }
    const OrtTensorTypeAndShapeInfo *tsi = NULL;
    enum ONNXTensorElementDataType et;
    size_t r = 0;
    if ((st = ort__status(api, api->CastTypeInfoToTensorInfo(ti, &tsi), SWI_ERR_INVALID_ARG, err, n,
                          m->path)) ||
        (st = ort__status(api, api->GetTensorElementType(tsi, &et), SWI_ERR_INVALID_ARG, err, n, m->path)) ||
        (st = ort__status(api, api->GetDimensionsCount(tsi, &r), SWI_ERR_INVALID_ARG, err, n, m->path)))
        return st;
    if (r > 16) {
        ort__err(err, n,
                 "%s: model %s '%s' has rank %zu; swi needs rank 5 [batch, channels, i, "
                 "j, k]",
                 m->path, what, name, r);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t tmp[16];
    if ((st = ort__status(api, api->GetDimensions(tsi, tmp, r), SWI_ERR_INVALID_ARG, err, n, m->path)))
        return st;
    t->is_tensor = 1;
    t->type = (int)et;
    t->rank = r;
    for (size_t i = 0; i < r && i < 8; i++) t->shape[i] = tmp[i] > 0 ? tmp[i] : -1;
    return SWI_OK;
}

swi_status swi_ort_providers(char *buf, size_t n, int *has_cuda, char *err, size_t errlen) {
    if (has_cuda) *has_cuda = 0;
    if (buf && n) buf[0] = '\0';
    const OrtApi *api = get_api();
    if (!api) {
        ort__err(err, errlen,
                 "ONNX Runtime %s is older than the headers swi was built with "
                 "(API %d)",
                 swi_ort_version(), ORT_API_VERSION);
        return SWI_ERR_INVALID_ARG;
    }
    char **prov = NULL;
    int np = 0;
    swi_status st = ort__status(api, api->GetAvailableProviders(&prov, &np), SWI_ERR_PREDICTOR, err, errlen,
                                "ONNX Runtime providers");
    if (st) return st;
    for (int i = 0; i < np; i++) {
        if (has_cuda && strcmp(prov[i], "CUDAExecutionProvider") == 0) *has_cuda = 1;
        if (buf && n) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s", i ? ", " : "", prov[i]);
        }
    }
    drop(api, api->ReleaseAvailableProviders(prov, np));
    return SWI_OK;
}

/* The session options from opt; the caller releases *out. */
static swi_status make_session_options(const OrtApi *api, const char *path, const swi_ort_options *opt,
                                       OrtSessionOptions **out, char *err, size_t n) {
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s: cannot set session options", path);
    OrtSessionOptions *so = NULL;
    OrtStatus *s;
    swi_status st;
    if ((st = ort__status(api, ORT_CREATE(api, api->CreateSessionOptions(&so)), SWI_ERR_PREDICTOR, err, n,
                          prefix)))
        return st;
    static const GraphOptimizationLevel levels[] = {ORT_DISABLE_ALL, ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED,
                                                    ORT_ENABLE_ALL};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = opt->threads > 0 ? opt->threads : cpus >= 1 ? (int)cpus : 1;
    if ((s = api->SetIntraOpNumThreads(so, threads)) || (s = api->SetInterOpNumThreads(so, 1)) ||
        (s = api->SetSessionExecutionMode(so, ORT_SEQUENTIAL)) ||
        (s = api->SetSessionGraphOptimizationLevel(so, levels[opt->graph_opt])) ||
        (s = api->SetSessionLogSeverityLevel(so, 4)) ||
        /* Spinning intra-op threads burn the cores the blending workers need while the
         * engine overlaps the two. */
        (s = api->AddSessionConfigEntry(so, "session.intra_op.allow_spinning", opt->spin ? "1" : "0")))
        goto fail;
    if (!opt->memory_arena && ((s = api->DisableCpuMemArena(so)) || (s = api->DisableMemPattern(so))))
        goto fail;
    if (opt->config) {
        char buf[1024];
        if (strlen(opt->config) >= sizeof buf) {
            api->ReleaseSessionOptions(so);
            ort__err(err, n, "%s: config: longer than %zu characters", path, sizeof buf - 1);
            return SWI_ERR_INVALID_ARG;
        }
        strcpy(buf, opt->config);
        for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = '\0';
            if ((s = api->AddSessionConfigEntry(so, kv, eq + 1))) {
                snprintf(prefix, sizeof prefix, "%s: config", path);
                goto fail;
            }
        }
    }
    if (opt->device == SWI_ORT_CUDA) {
        char list[256];
        int has = 0;
        if ((st = swi_ort_providers(list, sizeof list, &has, err, n))) {
            api->ReleaseSessionOptions(so);
            return st;
        }
        if (!has) {
            api->ReleaseSessionOptions(so);
            ort__err(err, n,
                     "device cuda: this ONNX Runtime (%s) has no CUDA execution provider "
                     "(it has: %s)",
                     swi_ort_version(), list);
            return SWI_ERR_INVALID_ARG;
        }
        OrtCUDAProviderOptionsV2 *cu = NULL;
        snprintf(prefix, sizeof prefix, "%s: device cuda", path);
        if ((s = api->CreateCUDAProviderOptions(&cu))) goto fail;
        s = api->SessionOptionsAppendExecutionProvider_CUDA_V2(so, cu);
        api->ReleaseCUDAProviderOptions(cu);
        if (s) {
            snprintf(prefix, sizeof prefix, "%s: device cuda: cannot start the CUDA provider", path);
            goto fail;
        }
    }
    *out = so;
    return SWI_OK;
fail:
    api->ReleaseSessionOptions(so);
    return ort__status(api, s, SWI_ERR_PREDICTOR, err, n, prefix);
}

/* The file must exist, be a regular non-empty file and be readable, so a wrong path gets a
 * plain message rather than ONNX Runtime's. */
static swi_status check_file(const char *path, char *err, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) {
        ort__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        ort__err(err, n, "%s: is a directory, not an ONNX model", path);
        return SWI_ERR_IO;
    }
    /* a FIFO or a device would block the open below (and ONNX Runtime's) forever */
    if (!S_ISREG(st.st_mode)) {
        ort__err(err, n, "%s: is %s, not a regular file", path,
                 S_ISFIFO(st.st_mode)   ? "a FIFO (named pipe)"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                 : S_ISCHR(st.st_mode)  ? "a character device"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                                        : "a special file");
        return SWI_ERR_IO;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        ort__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    fclose(f);
    if (st.st_size == 0) {
        ort__err(err, n, "%s: not an ONNX model (empty file)", path);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

static swi_status check_options(const char *path, const swi_ort_options *opt, char *err, size_t n) {
    if (opt->threads < 0) {
        ort__err(err, n, "%s: threads = %d (must be >= 0)", path, opt->threads);
        return SWI_ERR_INVALID_ARG;
    }
    if (opt->device != SWI_ORT_CPU && opt->device != SWI_ORT_CUDA) {
        ort__err(err, n, "%s: device = %d (SWI_ORT_CPU or SWI_ORT_CUDA)", path, (int)opt->device);
        return SWI_ERR_INVALID_ARG;
    }
    if ((unsigned)opt->graph_opt > SWI_ORT_OPT_ALL) {
        ort__err(err, n, "%s: graph_opt = %d (0..3)", path, (int)opt->graph_opt);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

/* Read the names and the input signature of a loaded session. */
static swi_status read_signature(swi_ort_model *m, char *err, size_t n) {
    const OrtApi *api = m->api;
    const char *path = m->path;
    size_t n_in = 0, n_out = 0;
    swi_status st;
    if ((st = ort__status(api, api->SessionGetInputCount(m->session, &n_in), SWI_ERR_PREDICTOR, err, n,
                          path)) ||
        (st = ort__status(api, api->SessionGetOutputCount(m->session, &n_out), SWI_ERR_PREDICTOR, err, n,
                          path)))
        return st;
    if (n_in != 1) {
        ort__err(err, n,
                 "%s: the model has %zu inputs; swi feeds exactly one (the image, "
                 "[batch, channels, i, j, k])",
                 path, n_in);
        return SWI_ERR_INVALID_ARG;
    }
    if (n_out < 1) {
        ort__err(err, n, "%s: the model has no outputs", path);
        return SWI_ERR_INVALID_ARG;
    }
    if (n_out > 1000000) {
        ort__err(err, n, "%s: the model has %zu outputs", path, n_out);
        return SWI_ERR_INVALID_ARG;
    }
    m->out_names = ort__calloc(n_out, sizeof *m->out_names);
    if (!m->out_names) {
        ort__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    m->n_outputs = n_out;
    OrtAllocator *alloc = NULL;
    if ((st = ort__status(api, api->GetAllocatorWithDefaultOptions(&alloc), SWI_ERR_PREDICTOR, err, n,
                          path)) ||
        (st = ort__status(api, ORT_CREATE(api, api->SessionGetInputName(m->session, 0, alloc, &m->in_name)),
                          SWI_ERR_PREDICTOR, err, n, path)))
        return st;
    for (size_t i = 0; i < n_out; i++)
        if ((st = ort__status(
                 api, ORT_CREATE(api, api->SessionGetOutputName(m->session, i, alloc, &m->out_names[i])),
                 SWI_ERR_PREDICTOR, err, n, path)))
            return st;
    OrtTypeInfo *ti = NULL;
    if ((st = ort__status(api, ORT_CREATE(api, api->SessionGetInputTypeInfo(m->session, 0, &ti)),
                          SWI_ERR_PREDICTOR, err, n, path)))
        return st;
    st = ort__tensor_info(m, ti, "input", m->in_name, &m->in, err, n);
    api->ReleaseTypeInfo(ti);
    return st;
}

swi_status swi_ort_open(const char *path, const swi_ort_options *opt, swi_ort_model **out, char *err,
                        size_t n) {
    if (!out) {
        ort__err(err, n, "swi_ort_open: out is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (!path || !opt) {
        ort__err(err, n, "swi_ort_open: %s is NULL", path ? "opt" : "path");
        return SWI_ERR_INVALID_ARG;
    }
    if (strlen(path) >= sizeof((swi_ort_model *)0)->path) {
        ort__err(err, n, "%.200s...: path too long", path);
        return SWI_ERR_INVALID_ARG;
    }
    swi_status st;
    if ((st = check_file(path, err, n)) || (st = check_options(path, opt, err, n))) return st;
    const OrtApi *api = get_api();
    if (!api) {
        ort__err(err, n, "ONNX Runtime %s is older than the headers swi was built with (API %d)",
                 swi_ort_version(), ORT_API_VERSION);
        return SWI_ERR_INVALID_ARG;
    }
    swi_ort_model *m = ort__calloc(1, sizeof *m);
    if (!m) {
        ort__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    m->api = api;
    m->opts = *opt;
    m->opts.config = NULL; /* the caller's string need not outlive the call */
    strcpy(m->path, path);

    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s: cannot start ONNX Runtime", path);
    OrtSessionOptions *so = NULL;
    /* FATAL only: every error reaches the caller once, through our message. */
    if ((st = ort__status(api, ORT_CREATE(api, api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "swi", &m->env)),
                          SWI_ERR_PREDICTOR, err, n, prefix)) ||
        (st = make_session_options(api, path, opt, &so, err, n)))
        goto fail;
    /* The rewritten model when there is something to rewrite, else the file; a rewrite
     * that cannot be made (out of memory) leaves the model as it is. */
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (opt->rewrite && ort__rewrite(path, &bytes, &len, &m->rewrites) != SWI_OK) m->rewrites = 0;
    OrtStatus *s = bytes ? ORT_CREATE(api, api->CreateSessionFromArray(m->env, bytes, len, so, &m->session))
                         : ORT_CREATE(api, api->CreateSession(m->env, path, so, &m->session));
    free(bytes);
    api->ReleaseSessionOptions(so);
    if (s) {
        OrtErrorCode code = api->GetErrorCode(s);
        if (code == ORT_INVALID_PROTOBUF || code == ORT_NO_MODEL) {
            ort__err(err, n, "%s: not an ONNX model (ONNX Runtime: %s)", path, api->GetErrorMessage(s));
            api->ReleaseStatus(s);
            st = SWI_ERR_INVALID_ARG;
        } else {
            snprintf(prefix, sizeof prefix, "%s: ONNX Runtime cannot load the model", path);
            st = ort__status(api, s, SWI_ERR_INVALID_ARG, err, n, prefix);
        }
        goto fail;
    }
    snprintf(prefix, sizeof prefix, "%s: cannot start ONNX Runtime", path);
    if ((st = ort__status(api, ORT_CREATE(api, api->CreateRunOptions(&m->run_opts)), SWI_ERR_PREDICTOR, err,
                          n, prefix)) ||
        (st = ort__status(
             api, ORT_CREATE(api, api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &m->mem)),
             SWI_ERR_PREDICTOR, err, n, prefix)) ||
        (st = read_signature(m, err, n)))
        goto fail;
    *out = m;
    return SWI_OK;
fail:
    swi_ort_close(m);
    return st;
}

void swi_ort_close(swi_ort_model *m) {
    if (!m) return;
    const OrtApi *api = m->api;
    OrtAllocator *alloc = NULL;
    OrtStatus *s = api->GetAllocatorWithDefaultOptions(&alloc);
    if (s) {
        api->ReleaseStatus(s);
    } else {
        if (m->in_name) drop(api, api->AllocatorFree(alloc, m->in_name));
        for (size_t i = 0; i < m->n_outputs; i++)
            if (m->out_names[i]) drop(api, api->AllocatorFree(alloc, m->out_names[i]));
    }
    free(m->out_names);
    if (m->mem) api->ReleaseMemoryInfo(m->mem);
    if (m->run_opts) api->ReleaseRunOptions(m->run_opts);
    if (m->session) api->ReleaseSession(m->session);
    if (m->env) api->ReleaseEnv(m->env);
    free(m->pad_in);
    free(m->pad_out);
    free(m->tta_in);
    free(m->tta_out);
    free(m);
}

int swi_ort_output_count(const swi_ort_model *m) { return m ? (int)m->n_outputs : 0; }

static void fill_info(const ort_tensor *t, const char *name, swi_ort_tensor_info *info) {
    memset(info, 0, sizeof *info);
    info->name = name;
    info->is_tensor = t->is_tensor;
    info->elem_type = t->type;
    info->type_name = t->is_tensor ? ort__type_name(t->type) : "";
    info->rank = (int)t->rank;
    memcpy(info->shape, t->shape, sizeof info->shape);
}

swi_status swi_ort_input_info(const swi_ort_model *m, swi_ort_tensor_info *info, char *err, size_t n) {
    if (!m || !info) {
        ort__err(err, n, "swi_ort_input_info: %s is NULL", m ? "info" : "model");
        return SWI_ERR_INVALID_ARG;
    }
    fill_info(&m->in, m->in_name, info);
    return SWI_OK;
}

swi_status swi_ort_output_info(const swi_ort_model *m, int index, swi_ort_tensor_info *info, char *err,
                               size_t n) {
    if (!m || !info) {
        ort__err(err, n, "swi_ort_output_info: %s is NULL", m ? "info" : "model");
        return SWI_ERR_INVALID_ARG;
    }
    if (index < 0 || (size_t)index >= m->n_outputs) {
        ort__err(err, n, "%s: output %d: the model has %zu output%s", m->path, index, m->n_outputs,
                 m->n_outputs == 1 ? "" : "s");
        return SWI_ERR_INVALID_ARG;
    }
    const OrtApi *api = m->api;
    OrtTypeInfo *ti = NULL;
    swi_status st =
        ort__status(api, ORT_CREATE(api, api->SessionGetOutputTypeInfo(m->session, (size_t)index, &ti)),
                    SWI_ERR_PREDICTOR, err, n, m->path);
    if (st) return st;
    ort_tensor t;
    st = ort__tensor_info(m, ti, "output", m->out_names[index], &t, err, n);
    api->ReleaseTypeInfo(ti);
    if (st) return st;
    fill_info(&t, m->out_names[index], info);
    return SWI_OK;
}

int swi_ort_rewrites(const swi_ort_model *m) { return m ? m->rewrites : 0; }

void swi_ort_describe(const swi_ort_model *m, char *buf, size_t n) {
    char a[160], b[160];
    ort__shape_str(m->in.shape, m->in.rank, a, sizeof a);
    if (!m->prepared) {
        snprintf(buf, n, "input '%s' %s %s (%zu output%s)", m->in_name, a, ort__type_name(m->in.type),
                 m->n_outputs, m->n_outputs == 1 ? "" : "s");
        return;
    }
    ort__shape_str(m->out.shape, m->out.rank, b, sizeof b);
    snprintf(buf, n, "input '%s' %s %s -> output '%s' %s %s (%zu output%s, using #%d)", m->in_name, a,
             ort__type_name(m->in.type), m->out_names[m->output], b, ort__type_name(m->out.type),
             m->n_outputs, m->n_outputs == 1 ? "" : "s", m->output);
}
