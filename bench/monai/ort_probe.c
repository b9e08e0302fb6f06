/*
 * ort_probe.c -- time ONNX Runtime alone on the benchmark network, with the session
 * options swi uses or others, to see what the network costs and what the options buy.
 *
 *   cc -O2 -I$ORT/include ort_probe.c -L$ORT/lib -lonnxruntime -Wl,-rpath,$ORT/lib -o ort_probe
 *   ort_probe MODEL.onnx [--batch 2] [--roi 96] [--calls 9] [--threads 2] [--opt 0|1|2|99]
 *             [--no-arena] [--spin 0|1] [--no-mempattern] [--parallel] [--inter N]
 *             [--profile PREFIX] [--denormal-zero] [--arena-same]
 *
 * --arena-same: a shared CPU arena with arena_extend_strategy kSameAsRequested (grow by
 * what is asked, not by powers of two) registered in the env, session.use_env_allocators.
 *
 * Prints per-call wall times (and process CPU seconds, which mean more than wall
 * times on shared cores) and their sums (swi's run is 9 calls of 2 windows).
 * Not a test; a diagnostic kept with the benchmark.
 */
#define _POSIX_C_SOURCE 200809L
#include <onnxruntime_c_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const OrtApi *api;
#define CK(x)                                                                     \
    do {                                                                          \
        OrtStatus *s_ = (x);                                                      \
        if (s_) {                                                                 \
            fprintf(stderr, "ort_probe: %s: %s\n", #x, api->GetErrorMessage(s_)); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }
static double cpu(void) { return clk(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ort_probe MODEL.onnx [options]\n");
        return 2;
    }
    const char *model = argv[1], *profile = NULL;
    int batch = 2, roi = 96, calls = 9, threads = 2, opt = 99, arena = 1, spin = 0, mempat = 1;
    int parallel = 0, inter = 1, denorm = 0, classes = 14, same = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--batch"))
            batch = atoi(v), i++;
        else if (!strcmp(a, "--roi"))
            roi = atoi(v), i++;
        else if (!strcmp(a, "--calls"))
            calls = atoi(v), i++;
        else if (!strcmp(a, "--threads"))
            threads = atoi(v), i++;
        else if (!strcmp(a, "--opt"))
            opt = atoi(v), i++;
        else if (!strcmp(a, "--spin"))
            spin = atoi(v), i++;
        else if (!strcmp(a, "--inter"))
            inter = atoi(v), i++;
        else if (!strcmp(a, "--classes"))
            classes = atoi(v), i++;
        else if (!strcmp(a, "--profile"))
            profile = v, i++;
        else if (!strcmp(a, "--no-arena"))
            arena = 0;
        else if (!strcmp(a, "--arena-same"))
            same = 1;
        else if (!strcmp(a, "--no-mempattern"))
            mempat = 0;
        else if (!strcmp(a, "--parallel"))
            parallel = 1;
        else if (!strcmp(a, "--denormal-zero"))
            denorm = 1;
        else {
            fprintf(stderr, "ort_probe: unknown option %s\n", a);
            return 2;
        }
    }
    api = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    OrtEnv *env;
    OrtSessionOptions *so;
    CK(api->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "probe", &env));
    CK(api->CreateSessionOptions(&so));
    CK(api->SetIntraOpNumThreads(so, threads));
    CK(api->SetInterOpNumThreads(so, inter));
    CK(api->SetSessionExecutionMode(so, parallel ? ORT_PARALLEL : ORT_SEQUENTIAL));
    CK(api->SetSessionGraphOptimizationLevel(so, (GraphOptimizationLevel)opt));
    CK(api->AddSessionConfigEntry(so, "session.intra_op.allow_spinning", spin ? "1" : "0"));
    if (denorm) CK(api->AddSessionConfigEntry(so, "session.set_denormal_as_zero", "1"));
    if (!arena) CK(api->DisableCpuMemArena(so));
    if (same) {
        const char *keys[] = {"arena_extend_strategy"};
        const size_t vals[] = {1};
        OrtArenaCfg *cfg;
        OrtMemoryInfo *ami;
        CK(api->CreateArenaCfgV2(keys, vals, 1, &cfg));
        CK(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &ami));
        CK(api->CreateAndRegisterAllocator(env, ami, cfg));
        CK(api->AddSessionConfigEntry(so, "session.use_env_allocators", "1"));
    }
    if (!mempat) CK(api->DisableMemPattern(so));
    if (profile) CK(api->EnableProfiling(so, profile));
    double t0 = now(), c0 = cpu();
    OrtSession *sess;
    CK(api->CreateSession(env, model, so, &sess));
    double t_load = now() - t0, c_load = cpu() - c0;

    size_t n_in = (size_t)batch * roi * roi * roi;
    float *x = malloc(n_in * sizeof *x);
    unsigned r = 12345;
    for (size_t i = 0; i < n_in; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = (float)((r >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    size_t n_out = n_in * (size_t)classes;
    float *y = malloc(n_out * sizeof *y);
    OrtMemoryInfo *mi;
    CK(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mi));
    int64_t ish[5] = {batch, 1, roi, roi, roi}, osh[5] = {batch, classes, roi, roi, roi};
    OrtValue *in, *out;
    CK(api->CreateTensorWithDataAsOrtValue(mi, x, n_in * sizeof *x, ish, 5,
                                           ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &in));
    CK(api->CreateTensorWithDataAsOrtValue(mi, y, n_out * sizeof *y, osh, 5,
                                           ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &out));
    OrtAllocator *al;
    char *iname, *oname;
    CK(api->GetAllocatorWithDefaultOptions(&al));
    CK(api->SessionGetInputName(sess, 0, al, &iname));
    CK(api->SessionGetOutputName(sess, 0, al, &oname));
    const char *in_names[1] = {iname}, *out_names[1] = {oname};
    double sum = 0, first = 0, csum = 0, cfirst = 0;
    printf("threads %d opt %d arena %d spin %d mempattern %d batch %d; wall(cpu) per call:", threads, opt,
           arena, spin, mempat, batch);
    for (int c = 0; c < calls; c++) {
        double t = now(), ct = cpu();
        CK(api->Run(sess, NULL, in_names, (const OrtValue *const *)&in, 1, out_names, 1, &out));
        t = now() - t;
        ct = cpu() - ct;
        if (!c) first = t, cfirst = ct;
        sum += t;
        csum += ct;
        printf(" %.2f(%.2f)", t, ct);
        fflush(stdout);
    }
    printf("\n  session %.2f s (cpu %.2f); %d calls wall %.2f s (first %.2f, rest mean %.2f), "
           "cpu %.2f s (first %.2f, rest mean %.2f)\n",
           t_load, c_load, calls, sum, first, calls > 1 ? (sum - first) / (calls - 1) : 0, csum, cfirst,
           calls > 1 ? (csum - cfirst) / (calls - 1) : 0);
    if (profile) {
        char *path;
        CK(api->SessionEndProfiling(sess, al, &path));
        printf("  profile %s\n", path);
    }
    return 0;
}
