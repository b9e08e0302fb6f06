/*
 * ort_internal.h -- what session.c, predictor.c and tta.c share (not installed).
 */
#ifndef SWI_ORT_INTERNAL_H
#define SWI_ORT_INTERNAL_H

#include "swi_ort.h"

#include <onnxruntime_c_api.h>

/* Length of the messages the model keeps for the predictor callback. */
#define ORT_ERRLEN 768

typedef struct ort_tensor {
    int is_tensor;
    int type; /* ONNXTensorElementDataType */
    size_t rank;
    int64_t shape[8]; /* -1 = dynamic */
} ort_tensor;

struct swi_ort_model {
    const OrtApi *api;
    OrtEnv *env;
    OrtSession *session;
    OrtRunOptions *run_opts;
    OrtMemoryInfo *mem;
    char path[4096];
    swi_ort_options opts;
    char *in_name;
    ort_tensor in;
    char **out_names; /* n_outputs names, ORT-allocated */
    size_t n_outputs;
    /* settled by swi_ort_prepare */
    int prepared;
    int output;     /* the output used */
    ort_tensor out; /* its declared signature */
    int64_t channels;
    int64_t roi[3];
    int64_t fixed_batch; /* 0 = dynamic */
    int64_t out_channels;
    int64_t out_spatial[3];
    int64_t in_window;  /* floats per input window: channels x roi */
    int64_t out_window; /* floats per output window: classes x out_spatial */
    /* scratch: a padded fixed batch, the tta buffers */
    float *pad_in, *pad_out;
    float *tta_in, *tta_out;
    int64_t tta_cap;
    int rewrites; /* layers rewritten at load (rewrite.c) */
    char last_error[ORT_ERRLEN];
};

/* Fault injection, in SWI_FAULT_INJECTION builds only (tests/fault):
 * - ORT_CREATE(api, call) stands for an ONNX Runtime call that creates an object or
 *   allocates (environment, session options, session, run options, memory info, names,
 *   type infos, tensors, a run's output): with SWI_FAULT_ORT=N the N-th such call of the
 *   process is not made and fails as ONNX Runtime fails, with an OrtStatus (ORT_FAIL).
 * - ort__malloc/ort__calloc are the module's own allocations, on the core's allocation
 *   counter (SWI_FAULT_ALLOC=N fails the N-th allocation of the process). */
#ifdef SWI_FAULT_INJECTION
int ort__fault_point(void);
OrtStatus *ort__fault_status(const OrtApi *api);
#include <stdbool.h>
bool swi__fault_point(void); /* src/alloc.c */
#define ORT_CREATE(api, call) (ort__fault_point() ? ort__fault_status(api) : (call))
#define ORT__INJECTED() swi__fault_point()
#else
#define ORT_CREATE(api, call) (call)
#define ORT__INJECTED() 0
#endif
#include <stdlib.h>
static inline void *ort__malloc(size_t bytes) { return ORT__INJECTED() ? NULL : malloc(bytes ? bytes : 1); }
static inline void *ort__calloc(size_t n, size_t size) {
    return ORT__INJECTED() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

/* printf into err (n bytes, NULL = discard), folded onto one line. */
void ort__err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Consume an OrtStatus: SWI_OK if NULL, else `fail` with "<prefix>: <ORT's message>". */
swi_status ort__status(const OrtApi *api, OrtStatus *st, swi_status fail, char *err, size_t n,
                       const char *prefix);

const char *ort__type_name(int type);
void ort__shape_str(const int64_t *s, size_t rank, char *buf, size_t n);

/* Read the type and shape of an input or output. */
swi_status ort__tensor_info(const swi_ort_model *m, OrtTypeInfo *ti, const char *what, const char *name,
                            ort_tensor *t, char *err, size_t n);

/* Mirroring for tta (tta.c). A batch is `planes` arrays of s[0] x s[1] x s[2] floats in C
 * order; bit a of `mask` mirrors spatial axis a. */
void ort__flip3_copy(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask);
/* dst += mirror(src): mirroring is its own inverse, so this un-mirrors a prediction. */
void ort__flip3_accumulate(const float *src, float *dst, int64_t planes, const int64_t s[3], int mask);

/* The model at `path` with the rewrites of rewrite.c applied, serialized into *bytes
 * (malloc'd, *len bytes; *rewritten layers), or *bytes NULL when there is nothing to rewrite
 * or the file does not parse (ONNX Runtime then loads the file and names the problem).
 * Fails only when out of memory. */
swi_status ort__rewrite(const char *path, unsigned char **bytes, size_t *len, int *rewritten);

#endif
