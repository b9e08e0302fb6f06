/*
 * swi_ref.c -- test reference for `swi export`: the same sliding-window inference run
 * by libswi (swi_run) with an ONNX Runtime predictor on the raw network.
 *
 *   swi_export_ref NET.onnx IN.f32 NxCxDxHxW OUT.f32 [--roi R[,R,R]] [--overlap O[,..]]
 *                  [--mode constant|gaussian] [--sigma-scale S[,..]]
 *                  [--padding-mode constant|reflect|replicate|circular] [--cval V]
 *
 * IN.f32 is float32 [N, C, *size]; OUT.f32 receives the blended scores [N, K, *size].
 * The window defaults to the network's input size. float32 networks only.
 */
#define _POSIX_C_SOURCE 200809L
#include <onnxruntime_c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swi.h"

static const OrtApi *ort;

static void check(OrtStatus *st, const char *what) {
    if (!st) return;
    fprintf(stderr, "swi_export_ref: %s: %s\n", what, ort->GetErrorMessage(st));
    exit(1);
}

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "swi_export_ref: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

typedef struct net {
    OrtSession *sess;
    OrtMemoryInfo *mi;
    char *in_name, *out_name;
} net;

static int predict(void *user, swi_batch *b) {
    net *n = user;
    int count = swi_batch_count(b), d = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    int64_t shape[5] = {count, swi_batch_channels(b)};
    size_t elems = (size_t)count * (size_t)shape[1];
    for (int k = 0; k < d; k++) {
        shape[2 + k] = roi[k];
        elems *= (size_t)roi[k];
    }
    OrtValue *in = NULL, *out = NULL;
    OrtStatus *st =
        ort->CreateTensorWithDataAsOrtValue(n->mi, (void *)swi_batch_input(b), elems * sizeof(float), shape,
                                            (size_t)(2 + d), ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &in);
    if (!st) {
        const char *in_names[1] = {n->in_name}, *out_names[1] = {n->out_name};
        st = ort->Run(n->sess, NULL, in_names, (const OrtValue *const *)&in, 1, out_names, 1, &out);
    }
    if (st) {
        swi_batch_set_error(b, ort->GetErrorMessage(st));
        ort->ReleaseStatus(st);
        if (in) ort->ReleaseValue(in);
        return 1;
    }
    OrtTensorTypeAndShapeInfo *info;
    check(ort->GetTensorTypeAndShape(out, &info), "GetTensorTypeAndShape");
    int64_t od[8];
    size_t rank, oelems;
    check(ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
    check(ort->GetDimensions(info, od, rank), "GetDimensions");
    check(ort->GetTensorShapeElementCount(info, &oelems), "GetTensorShapeElementCount");
    ort->ReleaseTensorTypeAndShapeInfo(info);
    float *dst = swi_batch_output(b, 0, od[1], od + 2);
    int rc = 0;
    if (!dst)
        rc = 1;
    else {
        float *src;
        check(ort->GetTensorMutableData(out, (void **)&src), "GetTensorMutableData");
        memcpy(dst, src, oelems * sizeof(float));
    }
    ort->ReleaseValue(out);
    ort->ReleaseValue(in);
    return rc;
}

static int parse_list(const char *s, double *v, int max) {
    int n = 0;
    char *end;
    while (*s && n < max) {
        v[n++] = strtod(s, &end);
        if (end == s) die("bad list", s);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 5) die("usage: swi_export_ref NET.onnx IN.f32 NxCxDxHxW OUT.f32 [options]", NULL);
    const char *model = argv[1], *in_file = argv[2], *shape_s = argv[3], *out_file = argv[4];
    int64_t shp[5];
    int rank = 0;
    for (const char *p = shape_s; *p && rank < 5;) {
        char *end;
        shp[rank++] = strtoll(p, &end, 10);
        p = *end == 'x' ? end + 1 : end;
    }
    if (rank < 3) die("bad shape", shape_s);
    int d = rank - 2;
    swi_params p;
    swi_params_init(&p, d);
    p.sw_batch_size = 4;
    p.threads = 2;
    double roi[3] = {0}, v[3];
    int n_roi = 0;
    for (int i = 5; i < argc; i++) {
        const char *o = argv[i];
        if (i + 1 >= argc) die("option needs a value", o);
        const char *val = argv[++i];
        if (!strcmp(o, "--roi"))
            n_roi = parse_list(val, roi, 3);
        else if (!strcmp(o, "--overlap")) {
            int n = parse_list(val, v, 3);
            for (int k = 0; k < d; k++) p.overlap[k] = v[n == 1 ? 0 : k];
        } else if (!strcmp(o, "--sigma-scale")) {
            int n = parse_list(val, v, 3);
            for (int k = 0; k < d; k++) p.sigma_scale[k] = v[n == 1 ? 0 : k];
        } else if (!strcmp(o, "--mode"))
            p.mode = !strcmp(val, "gaussian") ? SWI_BLEND_GAUSSIAN : SWI_BLEND_CONSTANT;
        else if (!strcmp(o, "--padding-mode")) {
            p.padding_mode = !strcmp(val, "reflect")     ? SWI_PAD_REFLECT
                             : !strcmp(val, "replicate") ? SWI_PAD_REPLICATE
                             : !strcmp(val, "circular")  ? SWI_PAD_CIRCULAR
                                                         : SWI_PAD_CONSTANT;
        } else if (!strcmp(o, "--cval"))
            p.cval = strtof(val, NULL);
        else
            die("unknown option", o);
    }

    ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    OrtEnv *env;
    check(ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "swi_export_ref", &env), "CreateEnv");
    OrtSessionOptions *so;
    check(ort->CreateSessionOptions(&so), "CreateSessionOptions");
    check(ort->SetIntraOpNumThreads(so, 2), "SetIntraOpNumThreads");
    net n;
    check(ort->CreateSession(env, model, so, &n.sess), "CreateSession");
    check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &n.mi), "CreateCpuMemoryInfo");
    OrtAllocator *al;
    check(ort->GetAllocatorWithDefaultOptions(&al), "GetAllocatorWithDefaultOptions");
    check(ort->SessionGetInputName(n.sess, 0, al, &n.in_name), "SessionGetInputName");
    check(ort->SessionGetOutputName(n.sess, 0, al, &n.out_name), "SessionGetOutputName");
    /* the window: --roi, else the network's input size */
    OrtTypeInfo *ti;
    check(ort->SessionGetInputTypeInfo(n.sess, 0, &ti), "SessionGetInputTypeInfo");
    const OrtTensorTypeAndShapeInfo *tsi;
    check(ort->CastTypeInfoToTensorInfo(ti, &tsi), "CastTypeInfoToTensorInfo");
    int64_t nd[8];
    size_t nrank;
    check(ort->GetDimensionsCount(tsi, &nrank), "GetDimensionsCount");
    if ((int)nrank != rank) die("the network's input rank differs from the data's", NULL);
    check(ort->GetDimensions(tsi, nd, nrank), "GetDimensions");
    for (int k = 0; k < d; k++) p.roi[k] = n_roi ? (int64_t)roi[n_roi == 1 ? 0 : k] : nd[2 + k];
    ort->ReleaseTypeInfo(ti);

    size_t elems = 1;
    for (int k = 0; k < rank; k++) elems *= (size_t)shp[k];
    float *x = malloc(elems * sizeof(float));
    FILE *f = fopen(in_file, "rb");
    if (!f || fread(x, sizeof(float), elems, f) != elems) die("cannot read", in_file);
    fclose(f);
    swi_tensor t = {.data = x, .batch = shp[0], .channels = shp[1], .dims = d, .size = {0}};
    for (int k = 0; k < d; k++) t.size[k] = shp[2 + k];
    swi_ctx *ctx = swi_create();
    swi_output out;
    swi_output_init(&out, 0, SWI_REDUCE_NONE);
    swi_predictor pr = {predict, &n};
    swi_status st = swi_run(ctx, &p, &t, &pr, &out, 1);
    if (st != SWI_OK) {
        fprintf(stderr, "swi_export_ref: swi_run: %s\n", swi_last_error(ctx));
        return 1;
    }
    size_t bytes;
    const void *res = swi_result(ctx, 0, &bytes);
    f = fopen(out_file, "wb");
    if (!f || fwrite(res, 1, bytes, f) != bytes || fclose(f) != 0) die("cannot write", out_file);
    swi_free(ctx);
    free(x);
    al->Free(al, n.in_name);
    al->Free(al, n.out_name);
    ort->ReleaseMemoryInfo(n.mi);
    ort->ReleaseSession(n.sess);
    ort->ReleaseSessionOptions(so);
    ort->ReleaseEnv(env);
    return 0;
}
