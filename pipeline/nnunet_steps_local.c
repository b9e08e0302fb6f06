/* nnunet_steps_local.c -- see nnunet_steps_local.h. */
#include "nnunet_steps_local.h"

#include "swi_resample.h"

#include <math.h>
#include <string.h>

void nnl_nonzero_box(const float *x, int64_t c, const int64_t n[3], int64_t lo[3], int64_t hi[3]) {
    const int64_t N = n[0] * n[1] * n[2];
    for (int a = 0; a < 3; a++) {
        lo[a] = n[a];
        hi[a] = 0;
    }
    int64_t v = 0;
    for (int64_t i = 0; i < n[0]; i++)
        for (int64_t j = 0; j < n[1]; j++)
            for (int64_t k = 0; k < n[2]; k++, v++) {
                int nz = 0;
                for (int64_t ch = 0; ch < c && !nz; ch++) nz = x[ch * N + v] != 0;
                if (!nz) continue;
                const int64_t p[3] = {i, j, k};
                for (int a = 0; a < 3; a++) {
                    if (p[a] < lo[a]) lo[a] = p[a];
                    if (p[a] + 1 > hi[a]) hi[a] = p[a] + 1;
                }
            }
    if (hi[0] == 0)
        for (int a = 0; a < 3; a++) {
            lo[a] = 0;
            hi[a] = n[a];
        }
}

void nnl_normalize(const nn_card_channel *ch, float *x, const uint8_t *mask, int64_t n) {
    const double eps = 1e-8;
    switch (ch->scheme) {
    case NN_NORM_CT: {
        const double sd = ch->std > eps ? ch->std : eps;
        for (int64_t v = 0; v < n; v++) {
            double y = x[v] < ch->lo ? ch->lo : x[v] > ch->hi ? ch->hi : x[v];
            x[v] = (float)((y - ch->mean) / sd);
        }
        break;
    }
    case NN_NORM_ZSCORE: {
        const int m = ch->use_mask && mask;
        double sum = 0, sq = 0;
        int64_t cnt = 0;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) {
                sum += x[v];
                cnt++;
            }
        const double mean = cnt ? sum / (double)cnt : 0;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) sq += ((double)x[v] - mean) * ((double)x[v] - mean);
        double sd = cnt ? sqrt(sq / (double)cnt) : 0;
        if (sd < eps) sd = eps;
        for (int64_t v = 0; v < n; v++)
            if (!m || mask[v]) x[v] = (float)(((double)x[v] - mean) / sd);
        break;
    }
    case NN_NORM_RESCALE: {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t v = 0; v < n; v++) lo = x[v] < lo ? x[v] : lo;
        for (int64_t v = 0; v < n; v++) {
            x[v] -= lo;
            hi = x[v] > hi ? x[v] : hi;
        }
        const double d = hi > eps ? hi : eps;
        for (int64_t v = 0; v < n; v++) x[v] = (float)(x[v] / d);
        break;
    }
    case NN_NORM_RGB:
        for (int64_t v = 0; v < n; v++) x[v] = x[v] / 255.0f;
        break;
    case NN_NORM_NONE: break;
    }
}

int nnl_resize(const float *src, const int64_t in[3], float *dst, const int64_t out[3], int64_t c, int order,
               int separate_z) {
    const int64_t N = in[0] * in[1] * in[2];
    if (in[0] == out[0] && in[1] == out[1] && in[2] == out[2]) {
        memcpy(dst, src, (size_t)(N * c) * sizeof *src);
        return 0;
    }
    if (order != 1 || separate_z) return 1;
    double map[3][4];
    memset(map, 0, sizeof map);
    for (int a = 0; a < 3; a++) {
        const double s = (double)in[a] / (double)out[a];
        map[a][a] = s;
        map[a][3] = 0.5 * s - 0.5;
    }
    swi_resample_trilinear(src, in, dst, out, map, c, 0, out[0]);
    return 0;
}
