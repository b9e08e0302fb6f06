/* preprocess.c -- see preprocess.h. */
#include "preprocess.h"

#include <math.h>

void seg_preprocess(const pl_opts *o, float *x, int64_t n) {
    if (o->clip_given) {
        float lo = (float)o->clip[0], hi = (float)o->clip[1];
        for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    }
    if (o->scale_given) {
        /* MONAI ScaleIntensityRange: (x - a) / (b - a) * (d - c) + c */
        double a = o->scale[0], b = o->scale[1], c = o->scale[2], d = o->scale[3];
        for (int64_t i = 0; i < n; i++) x[i] = (float)(((double)x[i] - a) / (b - a) * (d - c) + c);
    }
    if (o->zscore) {
        /* MONAI NormalizeIntensity: population standard deviation; 0 leaves the scale. */
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; i++) sum += x[i];
        double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++) {
            double d = x[i] - mean;
            sq += d * d;
        }
        double sd = sqrt(sq / (double)n);
        if (!(sd > 0)) sd = 1;
        for (int64_t i = 0; i < n; i++) x[i] = (float)(((double)x[i] - mean) / sd);
    }
}
