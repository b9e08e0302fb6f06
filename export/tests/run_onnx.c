/*
 * run_onnx.c -- test runner: load an ONNX model in ONNX Runtime, feed raw tensors,
 * dump the outputs as raw little-endian files.
 *
 *   run_onnx MODEL [--threads N] [--repeat R]
 *            --in NAME=TYPE:D0xD1x...:FILE ...   (TYPE f32 f16 bf16 f64 u8 i64)
 *            --out NAME=FILE ...
 *
 * Prints one line per output, "output NAME TYPE D0xD1x... FILE", then
 * "time_ms BEST MEAN" over the repeats (the first run included).
 */
#define _POSIX_C_SOURCE 200809L
#include <onnxruntime_c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const OrtApi *ort;

static void check(OrtStatus *st, const char *what) {
    if (!st) return;
    fprintf(stderr, "run_onnx: %s: %s\n", what, ort->GetErrorMessage(st));
    ort->ReleaseStatus(st);
    exit(1);
}

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "run_onnx: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static const struct {
    const char *name;
    ONNXTensorElementDataType t;
    size_t size;
} types[] = {
    {"f32", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 4},     {"f16", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, 2},
    {"bf16", ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, 2}, {"f64", ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, 8},
    {"u8", ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, 1},      {"i64", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 8},
};

static const char *type_name(ONNXTensorElementDataType t, size_t *size) {
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (types[i].t == t) {
            if (size) *size = types[i].size;
            return types[i].name;
        }
    if (size) *size = 0;
    return "?";
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define MAXIO 16

int main(int argc, char **argv) {
    if (argc < 2)
        die("usage: run_onnx MODEL [--threads N] [--repeat R] --in NAME=TYPE:SHAPE:FILE --out NAME=FILE",
            NULL);
    const char *model = argv[1];
    int threads = 0, repeat = 1;
    const char *in_names[MAXIO], *out_names[MAXIO], *out_files[MAXIO];
    void *in_data[MAXIO];
    size_t in_bytes[MAXIO];
    int64_t in_shape[MAXIO][8];
    size_t in_rank[MAXIO];
    ONNXTensorElementDataType in_type[MAXIO];
    int n_in = 0, n_out = 0;

    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--in") && i + 1 < argc) {
            if (n_in == MAXIO) die("too many inputs", NULL);
            char *spec = strdup(argv[++i]);
            char *eq = strchr(spec, '=');
            if (!eq) die("--in NAME=TYPE:SHAPE:FILE", argv[i]);
            *eq = 0;
            char *ty = eq + 1, *c1 = strchr(ty, ':');
            if (!c1) die("--in NAME=TYPE:SHAPE:FILE", argv[i]);
            *c1 = 0;
            char *sh = c1 + 1, *c2 = strchr(sh, ':');
            if (!c2) die("--in NAME=TYPE:SHAPE:FILE", argv[i]);
            *c2 = 0;
            const char *file = c2 + 1;
            size_t es = 0;
            int found = 0;
            for (size_t k = 0; k < sizeof types / sizeof *types; k++)
                if (!strcmp(types[k].name, ty)) {
                    in_type[n_in] = types[k].t;
                    es = types[k].size;
                    found = 1;
                }
            if (!found) die("unknown type", ty);
            size_t rank = 0, count = 1;
            for (char *p = sh; *p;) {
                char *end;
                long long v = strtoll(p, &end, 10);
                if (end == p || v < 0 || rank == 8) die("bad shape", sh);
                in_shape[n_in][rank++] = v;
                count *= (size_t)v;
                p = *end == 'x' ? end + 1 : end;
                if (*end && *end != 'x') die("bad shape", sh);
            }
            in_rank[n_in] = rank;
            in_bytes[n_in] = count * es;
            in_data[n_in] = malloc(in_bytes[n_in] ? in_bytes[n_in] : 1);
            FILE *f = fopen(file, "rb");
            if (!f) die("cannot open", file);
            if (fread(in_data[n_in], 1, in_bytes[n_in], f) != in_bytes[n_in])
                die("input file too short", file);
            fclose(f);
            in_names[n_in++] = spec;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            if (n_out == MAXIO) die("too many outputs", NULL);
            char *spec = strdup(argv[++i]);
            char *eq = strchr(spec, '=');
            if (!eq) die("--out NAME=FILE", argv[i]);
            *eq = 0;
            out_names[n_out] = spec;
            out_files[n_out++] = eq + 1;
        } else {
            die("unknown argument", argv[i]);
        }
    }

    ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    if (!ort) die("this libonnxruntime does not provide the API version of the headers", NULL);
    OrtEnv *env;
    check(ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "run_onnx", &env), "CreateEnv");
    OrtSessionOptions *so;
    check(ort->CreateSessionOptions(&so), "CreateSessionOptions");
    if (threads > 0) check(ort->SetIntraOpNumThreads(so, threads), "SetIntraOpNumThreads");
    OrtSession *sess;
    double t0 = now_ms();
    check(ort->CreateSession(env, model, so, &sess), "CreateSession");
    double t_load = now_ms() - t0;

    OrtMemoryInfo *mi;
    check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mi), "CreateCpuMemoryInfo");
    OrtValue *inputs[MAXIO];
    for (int i = 0; i < n_in; i++)
        check(ort->CreateTensorWithDataAsOrtValue(mi, in_data[i], in_bytes[i], in_shape[i], in_rank[i],
                                                  in_type[i], &inputs[i]),
              "CreateTensorWithDataAsOrtValue");

    OrtValue *outputs[MAXIO];
    double best = 0, sum = 0;
    for (int r = 0; r < (repeat > 0 ? repeat : 1); r++) {
        for (int k = 0; k < n_out; k++) outputs[k] = NULL;
        double t1 = now_ms();
        check(ort->Run(sess, NULL, in_names, (const OrtValue *const *)inputs, (size_t)n_in, out_names,
                       (size_t)n_out, outputs),
              "Run");
        double dt = now_ms() - t1;
        if (r == 0 || dt < best) best = dt;
        sum += dt;
        if (r + 1 < repeat)
            for (int k = 0; k < n_out; k++) ort->ReleaseValue(outputs[k]);
    }

    for (int k = 0; k < n_out; k++) {
        OrtTensorTypeAndShapeInfo *info;
        check(ort->GetTensorTypeAndShape(outputs[k], &info), "GetTensorTypeAndShape");
        ONNXTensorElementDataType t;
        check(ort->GetTensorElementType(info, &t), "GetTensorElementType");
        size_t rank, count, es;
        check(ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
        int64_t dims[16];
        if (rank > 16) die("output rank too large", NULL);
        check(ort->GetDimensions(info, dims, rank), "GetDimensions");
        check(ort->GetTensorShapeElementCount(info, &count), "GetTensorShapeElementCount");
        ort->ReleaseTensorTypeAndShapeInfo(info);
        const char *tn = type_name(t, &es);
        if (!es) die("unsupported output element type", out_names[k]);
        void *p;
        check(ort->GetTensorMutableData(outputs[k], &p), "GetTensorMutableData");
        FILE *f = fopen(out_files[k], "wb");
        if (!f || fwrite(p, es, count, f) != count || fclose(f) != 0) die("cannot write", out_files[k]);
        printf("output %s %s ", out_names[k], tn);
        for (size_t i = 0; i < rank; i++) printf("%s%lld", i ? "x" : "", (long long)dims[i]);
        printf(" %s\n", out_files[k]);
        ort->ReleaseValue(outputs[k]);
    }
    printf("load_ms %.1f\ntime_ms %.1f %.1f\n", t_load, best, sum / (repeat > 0 ? repeat : 1));

    for (int i = 0; i < n_in; i++) {
        ort->ReleaseValue(inputs[i]);
        free(in_data[i]);
        free((void *)in_names[i]);
    }
    for (int k = 0; k < n_out; k++) free((void *)out_names[k]);
    ort->ReleaseMemoryInfo(mi);
    ort->ReleaseSession(sess);
    ort->ReleaseSessionOptions(so);
    ort->ReleaseEnv(env);
    return 0;
}
