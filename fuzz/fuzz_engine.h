/*
 * fuzz_engine.h -- what fuzz_engine.c (the fuzzed runs) and fuzz_engine_ref.c (the plain
 * reference they are checked against) share: a case's configuration, the predictor's pure
 * function, the reference's scores and checks.
 */
#ifndef SWI_FUZZ_ENGINE_H
#define SWI_FUZZ_ENGINE_H

#include "swi.h"

#include <stdint.h>

#define D 3

/* A failed check, reported as fuzz_common.h reports one, then abort (fuzz_engine.c). */
__attribute__((format(printf, 3, 4), noreturn)) void fuzz_engine_failed(int line, const char *cond,
                                                                        const char *fmt, ...);
#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond)) fuzz_engine_failed(__LINE__, #cond, __VA_ARGS__); \
    } while (0)

/* ---- the configuration ----------------------------------------------------------- */

enum {
    MISB_NONE,
    MISB_PRED_FAIL,
    MISB_PRED_SHAPE,
    MISB_PRED_NAN,
    MISB_CALLBACK,
    MISB_CANCEL,
    MISB_INPUT_NAN
};

typedef struct cfg {
    int dims; /* user dims */
    int64_t batch, cin;
    int64_t size[D], roi_param[D], r[D]; /* size and effective roi in user order (1 beyond dims) */
    double overlap[D], sigma[D];
    swi_blend mode;
    swi_pad pad;
    float cval;
    int sw, threads, pipeline, order[D], auto_order;
    size_t max_memory;
    int n_heads;
    int64_t C[2];    /* true channels */
    int64_t o[2][D]; /* true head window */
    int declare_c[2], declare_s[2];
    int n_outs;
    swi_output outs[4];
    int where[4]; /* 0 library, 1 dst, 2 callback only, 3 dst + callback */
    int misb, misb_at;
    unsigned mirror;   /* swi_params.mirror_axes: bit k mirrors user dim k */
    int passes;        /* runs per window, each mirrored run sees it: 2^(mirrored dims) */
    int f16;           /* swi_params.accumulate = SWI_ACCUMULATE_FLOAT16 */
    float *weight_map; /* SWI_BLEND_CUSTOM */
    float *input;
} cfg;

/* ---- fuzz_engine_ref.c ------------------------------------------------------------ */

/* Head h's output for one window `win` [cin][r]: out [C][o] (the predictor's function). */
void fuzz_net(const cfg *c, int h, const float *win, float *out);

/* Starts along one dim by the README's rule; how many. */
int64_t fuzz_starts_of(int64_t S, int64_t r, double ov, int64_t *st);

typedef struct refhead {
    int placeable;
    int64_t out[D]; /* cropped output grid */
    double *scores; /* [batch][C][out] */
    double *tol16;  /* [batch][out]: float16 sums' bound on a score's error, else NULL */
} refhead;

/* Blended scores of head h, or placeable = 0 when a window does not land whole. */
void fuzz_reference(const cfg *c, int h, refhead *rh);

/* Check one stored result `data` ([batch][planes][out] of dtype) against the reference. */
void fuzz_check_values(const cfg *c, int idx, const refhead *rh, const void *data, swi_dtype dt);

#endif
