/* resample_internal.h -- what the files of resample/ share. */
#ifndef SWI_RESAMPLE_INTERNAL_H
#define SWI_RESAMPLE_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The interpolation kernels are compiled twice on x86-64 (AVX2 and baseline) and picked at
 * load time, as the core's (swi's SWI_KERNEL). Neither target contracts a * b + c. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(SWI_NO_CLONES) && !defined(__SANITIZE_ADDRESS__)
#define RS_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define RS_KERNEL
#endif

/* printf into err (errlen bytes; err may be NULL). */
void rs__err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* inv = m^-1; -1 when m is singular (|det| below 1e-12 of its scale). */
int rs__inv3(const double m[3][3], double inv[3][3]);

/* inv = a^-1 for an affine a (last row 0 0 0 1); -1 when singular. */
int rs__inv_affine(const double a[4][4], double inv[4][4]);

/* a * (1 - f) + b * f: the one interpolation step every trilinear value here is made of */
static inline float rs__lerp(float a, float b, float f) { return a * (1 - f) + b * f; }

/* Trilinear from corners x_abc (a along the first axis): along the last axis, then the
 * middle, then the first -- the order the separable passes take, so both give the same
 * bits. */
static inline float rs__trilerp(float x000, float x001, float x010, float x011, float x100, float x101,
                                float x110, float x111, float fa, float fb, float fc) {
    return rs__lerp(rs__lerp(rs__lerp(x000, x001, fc), rs__lerp(x010, x011, fc), fb),
                    rs__lerp(rs__lerp(x100, x101, fc), rs__lerp(x110, x111, fc), fb), fa);
}

/* Coordinate s clamped to [0, n - 1] (NaN -> 0): its lower and upper taps and the weight of
 * the upper one. */
static inline void rs__tap(double s, int64_t n, int64_t *i0, int64_t *i1, float *f) {
    if (!(s > 0)) s = 0;
    if (s > (double)(n - 1)) s = (double)(n - 1);
    double fl = floor(s);
    *i0 = (int64_t)fl;
    *i1 = *i0 + 1 < n ? *i0 + 1 : *i0;
    *f = (float)(s - fl);
}

/* Coordinate s (clamped as rs__tap) to its nearest index, as scipy's order 0: floor(s + 0.5),
 * both taps on it and no weight -- the sink's nearest axes. */
static inline void rs__tap_nearest(double s, int64_t n, int64_t *i0, int64_t *i1, float *f) {
    if (!(s > 0)) s = 0;
    if (s > (double)(n - 1)) s = (double)(n - 1);
    int64_t i = (int64_t)floor(s + 0.5);
    if (i > n - 1) i = n - 1;
    *i0 = *i1 = i;
    *f = 0;
}

#endif
