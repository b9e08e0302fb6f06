/* reduce.c -- what happens to a finished region of blended scores [C, n]: argmax,
 * max, softmax confidence and entropy. Loops run class-outer, voxel-inner so the
 * voxel loop vectorises.
 *
 * NaN: a NaN score ranks above every number and the first NaN wins (as torch.argmax
 * does), so argmax is deterministic; max/confidence/entropy of such a voxel are NaN. */
#include "internal.h"

#include <math.h>

size_t swi__dtype_size(swi_dtype dt) {
    switch (dt) {
    case SWI_DTYPE_UINT8: return 1;
    case SWI_DTYPE_UINT16: return 2;
    default: return 4;
    }
}

SWI_KERNEL static void running_max(const float *s, int64_t C, int64_t n, float *best, int32_t *arg) {
    for (int64_t v = 0; v < n; v++) {
        best[v] = s[v];
        arg[v] = 0;
    }
    for (int64_t c = 1; c < C; c++) {
        const float *x = s + c * n;
        for (int64_t v = 0; v < n; v++) {
            float b = best[v], y = x[v];
            /* take y when best is a number and y is NaN or larger */
            int take = (b == b) & ((y != y) | (y > b));
            best[v] = take ? y : b;
            arg[v] = take ? (int32_t)c : arg[v];
        }
    }
}

SWI_KERNEL void swi__softmax(const float *s, int64_t C, int64_t n, reduce_scratch *rs, float *out) {
    float *best = rs->best, *z = rs->aux;
    running_max(s, C, n, best, rs->arg);
    for (int64_t v = 0; v < n; v++) z[v] = 0.0f;
    for (int64_t c = 0; c < C; c++) {
        const float *x = s + c * n;
        float *e = out + c * n;
        for (int64_t v = 0; v < n; v++) {
            e[v] = expf(x[v] - best[v]);
            z[v] += e[v];
        }
    }
    for (int64_t c = 0; c < C; c++) {
        float *e = out + c * n;
        for (int64_t v = 0; v < n; v++) e[v] /= z[v];
    }
}

SWI_KERNEL void swi__reduce(swi_reduce r, swi_dtype dt, const float *s, int64_t C, int64_t n,
                            reduce_scratch *rs, void *out) {
    float *best = rs->best;
    int32_t *arg = rs->arg;
    running_max(s, C, n, best, arg);
    switch (r) {
    case SWI_REDUCE_ARGMAX:
        if (dt == SWI_DTYPE_UINT8) {
            uint8_t *o = out;
            for (int64_t v = 0; v < n; v++) o[v] = (uint8_t)arg[v];
        } else {
            uint16_t *o = out;
            for (int64_t v = 0; v < n; v++) o[v] = (uint16_t)arg[v];
        }
        return;
    case SWI_REDUCE_MAX: {
        float *o = out;
        for (int64_t v = 0; v < n; v++) o[v] = best[v];
        return;
    }
    case SWI_REDUCE_CONFIDENCE:
    case SWI_REDUCE_ENTROPY: {
        float *z = rs->aux, *t = rs->aux2;
        for (int64_t v = 0; v < n; v++) z[v] = t[v] = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const float *x = s + c * n;
            for (int64_t v = 0; v < n; v++) {
                float d = x[v] - best[v];
                float e = expf(d);
                z[v] += e;
                t[v] += e > 0.0f ? e * d : 0.0f; /* exp(-inf) * -inf is 0 here */
            }
        }
        float *o = out;
        if (r == SWI_REDUCE_CONFIDENCE)
            for (int64_t v = 0; v < n; v++) o[v] = 1.0f / z[v];
        else
            for (int64_t v = 0; v < n; v++) o[v] = logf(z[v]) - t[v] / z[v];
        return;
    }
    default: return;
    }
}
