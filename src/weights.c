/* weights.c -- blending weights (the reference's importance map, step 5). */
#include "internal.h"

#include <math.h>
#include <string.h>

/* Gaussian map in float32, operation for operation as the reference computes it:
 * x = j - (r-1)/2, g = exp(x^2 / (-2 sigma^2)) per axis, product over axes in axis
 * order, then every weight raised to at least max(min weight, 1e-3). */
static void gaussian(const int64_t roi[NDIM], const double sigma_scale[NDIM], float *out) {
    /* the 1-D profiles live past the map: the caller leaves roi0+..+roi3 floats there */
    int64_t n = roi[0] * roi[1] * roi[2] * roi[3], off = 0;
    float *g[NDIM];
    for (int a = 0; a < NDIM; a++) {
        g[a] = out + n + off;
        double sigma = sigma_scale[a] * (double)roi[a];
        float denom = (float)(-2.0 * sigma * sigma);
        for (int64_t j = 0; j < roi[a]; j++) {
            float x = (float)((double)j - (double)(roi[a] - 1) / 2.0);
            g[a][j] = expf((x * x) / denom);
        }
        off += roi[a];
    }
    float mn = INFINITY;
    int64_t v = 0;
    for (int64_t i = 0; i < roi[0]; i++)
        for (int64_t j = 0; j < roi[1]; j++)
            for (int64_t k = 0; k < roi[2]; k++)
                for (int64_t l = 0; l < roi[3]; l++, v++) {
                    float w = g[0][i] * g[1][j] * g[2][k] * g[3][l];
                    out[v] = w;
                    if (w < mn) mn = w;
                }
    float floor_w = mn > 1e-3f ? mn : 1e-3f;
    for (v = 0; v < n; v++)
        if (out[v] < floor_w) out[v] = floor_w;
}

/* nnU-Net v2's compute_gaussian: scipy's gaussian_filter of a delta on voxel r/2 (rounded
 * down), per axis exp(-x^2 / (2 sigma^2)) out to radius int(4 sigma + 0.5) and 0 beyond, the
 * product divided by its maximum (the centre's), then zeros raised to the smallest nonzero
 * weight. The products are formed in double (as scipy and numpy do) and stored as float. */
static swi_status gaussian_nnunet(swi_ctx *ctx, const int64_t roi[NDIM], const double sigma_scale[NDIM],
                                  float *out) {
    int64_t total = roi[0] + roi[1] + roi[2] + roi[3];
    double *prof = swi__malloc((size_t)total * sizeof(double));
    if (!prof) return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for the gaussian weights");
    double *g[NDIM], low = 1.0;
    int64_t off = 0;
    for (int a = 0; a < NDIM; a++) {
        g[a] = prof + off;
        off += roi[a];
        double sigma = sigma_scale[a] * (double)roi[a];
        int64_t c = roi[a] / 2, radius = (int64_t)(4.0 * sigma + 0.5);
        double mn = 1.0;
        for (int64_t j = 0; j < roi[a]; j++) {
            int64_t x = j - c;
            g[a][j] = (x < -radius || x > radius) ? 0.0 : exp(-0.5 / (sigma * sigma) * (double)(x * x));
            if (g[a][j] > 0.0 && g[a][j] < mn) mn = g[a][j];
        }
        low *= mn;
    }
    int64_t v = 0;
    for (int64_t i = 0; i < roi[0]; i++)
        for (int64_t j = 0; j < roi[1]; j++)
            for (int64_t k = 0; k < roi[2]; k++)
                for (int64_t l = 0; l < roi[3]; l++, v++) {
                    double w = g[0][i] * g[1][j] * g[2][k] * g[3][l];
                    out[v] = (float)(w > 0.0 ? w : low);
                }
    swi__free(prof);
    return SWI_OK;
}

swi_status swi__weights(swi_ctx *ctx, const swi_params *p, const int64_t roi[NDIM], float *out) {
    int64_t n = roi[0] * roi[1] * roi[2] * roi[3];
    if (p->mode == SWI_BLEND_CONSTANT) {
        for (int64_t v = 0; v < n; v++) out[v] = 1.0f;
        return SWI_OK;
    }
    if (p->mode == SWI_BLEND_CUSTOM) {
        for (int64_t v = 0; v < n; v++) {
            float w = p->weight_map[v];
            if (!(w > 0.0f) || !isfinite(w))
                return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                                 "params.weight_map[%lld] = %g: weights must be finite and > 0", (long long)v,
                                 (double)w);
            out[v] = w;
        }
        return SWI_OK;
    }
    if (p->mode == SWI_BLEND_GAUSSIAN_NNUNET) {
        double sig[NDIM];
        int lead = NDIM - p->dims;
        for (int a = 0; a < NDIM; a++) sig[a] = a < lead ? 1.0 : p->sigma_scale[a - lead];
        return gaussian_nnunet(ctx, roi, sig, out);
    }
    /* gaussian: the profiles need roi0+..+roi3 floats of scratch */
    float *tmp = swi__malloc((size_t)(n + roi[0] + roi[1] + roi[2] + roi[3]) * sizeof(float));
    if (!tmp) return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for the gaussian weights");
    double sig[NDIM];
    int lead = NDIM - p->dims;
    for (int a = 0; a < NDIM; a++) sig[a] = a < lead ? 1.0 : p->sigma_scale[a - lead];
    gaussian(roi, sig, tmp);
    memcpy(out, tmp, (size_t)n * sizeof(float));
    swi__free(tmp);
    return SWI_OK;
}

swi_status swi_weights(swi_ctx *ctx, swi_blend mode, int dims, const int64_t *roi, const double *sigma_scale,
                       float *out) {
    if (dims < 1 || dims > SWI_MAX_DIMS)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "dims = %d: must be 1 to %d", dims, SWI_MAX_DIMS);
    if (!roi || !out) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "%s is NULL", roi ? "out" : "roi");
    const int gauss = mode == SWI_BLEND_GAUSSIAN || mode == SWI_BLEND_GAUSSIAN_NNUNET;
    if (mode != SWI_BLEND_CONSTANT && !gauss)
        return swi__fail(
            ctx, SWI_ERR_INVALID_ARG,
            "mode = %d: only SWI_BLEND_CONSTANT, SWI_BLEND_GAUSSIAN or SWI_BLEND_GAUSSIAN_NNUNET", (int)mode);
    if (gauss && !sigma_scale)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "sigma_scale is NULL (needed for a gaussian)");
    swi_params p;
    swi_params_init(&p, dims);
    p.mode = mode;
    int64_t r[NDIM] = {1, 1, 1, 1};
    int64_t n = 1;
    for (int k = 0; k < dims; k++) {
        if (roi[k] <= 0 || roi[k] > SWI_MAX_AXIS)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "roi[%d] = %lld: must be 1..2^31", k,
                             (long long)roi[k]);
        r[NDIM - dims + k] = roi[k];
        if (!swi__mul_i64(n, roi[k], &n) || (uint64_t)n > SIZE_MAX / 8)
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "roi product overflows");
        if (gauss) {
            if (!(sigma_scale[k] > 0.0 && isfinite(sigma_scale[k])))
                return swi__fail(ctx, SWI_ERR_INVALID_ARG, "sigma_scale[%d] = %g: must be finite and > 0", k,
                                 sigma_scale[k]);
            p.sigma_scale[k] = sigma_scale[k];
        }
    }
    return swi__weights(ctx, &p, r, out);
}

void swi__weights_resize(const float *w, const int64_t roi[NDIM], const int64_t win[NDIM], float *out) {
    /* nearest-exact: output index o reads min(floor((o + 0.5) * r / n), r - 1) */
    int64_t n = win[0] * win[1] * win[2] * win[3];
    for (int64_t v = 0; v < n; v++) {
        int64_t rest = v, src = 0, stride = 1;
        for (int a = NDIM - 1; a >= 0; a--) {
            int64_t o = rest % win[a];
            rest /= win[a];
            int64_t si = (int64_t)floor(((double)o + 0.5) * ((double)roi[a] / (double)win[a]));
            if (si > roi[a] - 1) si = roi[a] - 1;
            src += si * stride;
            stride *= roi[a];
        }
        out[v] = w[src];
    }
}
