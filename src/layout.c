/* layout.c -- window layout: effective roi, padding, steps, starts, and each head's
 * cell grid (the partition of its output by every window boundary). Pure arithmetic
 * following the reference semantics (docs/semantics.md, steps 1-4, 7, 8). */
#include "internal.h"

#include <math.h>
#include <string.h>

/* SWI_MAX_AXIS keeps every product of three axes and the channels far from int64
 * overflow checks failing late. */
#define SWI_AXIS_MAX SWI_MAX_AXIS

void swi_params_init(swi_params *p, int dims) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->dims = dims;
    for (int k = 0; k < SWI_MAX_DIMS; k++) {
        p->overlap[k] = 0.25;
        p->sigma_scale[k] = 0.125;
        p->order[k] = k;
    }
    p->mode = SWI_BLEND_CONSTANT;
    p->padding_mode = SWI_PAD_CONSTANT;
    p->sw_batch_size = 1;
    p->pipeline = SWI_PIPELINE_AUTO;
    p->order_mode = SWI_ORDER_AUTO;
    p->n_heads = 1;
}

/* MONAI's _get_scan_interval for one axis. */
static int64_t axis_step(int64_t roi, int64_t padded, double overlap) {
    if (roi == padded) return roi;
    int64_t s = (int64_t)((double)roi * (1.0 - overlap));
    return s > 0 ? s : 1;
}

/* nnU-Net's target step in voxels, roi * tile_step_size, as Python forms it. Below one voxel
 * its evenly spread starts repeat, and every start 0..padded-roi appears. */
static double nnunet_target(int64_t roi, double tile_step) { return (double)roi * tile_step; }

/* How many distinct starts an axis has; `step` is the overlap (SWI_GRID_MONAI) or nnU-Net's
 * tile step (SWI_GRID_NNUNET). */
static int64_t grid_count(swi_grid grid, int64_t roi, int64_t padded, double step) {
    if (grid == SWI_GRID_NNUNET) {
        double target = nnunet_target(roi, step);
        if (target < 1.0) return padded - roi + 1;
        return (int64_t)ceil((double)(padded - roi) / target) + 1;
    }
    int64_t s = axis_step(roi, padded, step);
    /* n = 1 + smallest t >= 0 with t*s + roi >= padded */
    return 1 + (padded - roi + s - 1) / s;
}

/* Start t of n (grid_count's n, the same `step`). */
static int64_t grid_start(swi_grid grid, int64_t t, int64_t n, int64_t roi, int64_t padded, double step) {
    if (grid == SWI_GRID_NNUNET) {
        if (nnunet_target(roi, step) < 1.0 || n == 1) return n == 1 ? 0 : t;
        double actual = (double)(padded - roi) / (double)(n - 1);
        return (int64_t)nearbyint(actual * (double)t); /* numpy's round: half to even */
    }
    int64_t s = t * axis_step(roi, padded, step);
    return s + roi > padded ? padded - roi : s;
}

/* The `step` grid_count takes for axis k of p. */
static double grid_step(const swi_params *p, int k) {
    if (p->grid != SWI_GRID_NNUNET) return p->overlap[k];
    return p->tile_step[k] > 0.0 ? p->tile_step[k] : 1.0 - p->overlap[k];
}

/* The size and roi of one axis, as every layout function checks them. */
static swi_status check_axis(swi_ctx *ctx, int64_t size, int64_t roi) {
    if (size <= 0 || size > SWI_AXIS_MAX)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "size = %lld: must be 1..2^31", (long long)size);
    if (roi <= 0 || roi > SWI_AXIS_MAX)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "roi = %lld: must be 1..2^31", (long long)roi);
    return SWI_OK;
}

/* Where the starts go. */
static swi_status check_starts(swi_ctx *ctx, const int64_t *starts, int64_t cap, const int64_t *count) {
    if (cap < 0 || (cap > 0 && !starts))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "cap = %lld with starts %s: cap must be >= 0 and starts "
                         "not NULL when cap > 0",
                         (long long)cap, starts ? "set" : "NULL");
    if (!count) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "count is NULL");
    return SWI_OK;
}

/* The starts of `grid` along an axis whose arguments are checked. */
static void starts_of(swi_grid grid, int64_t size, int64_t roi, double step, int64_t *starts, int64_t cap,
                      int64_t *count) {
    int64_t padded = size > roi ? size : roi;
    int64_t n = grid_count(grid, roi, padded, step);
    for (int64_t t = 0; t < n && t < cap; t++) starts[t] = grid_start(grid, t, n, roi, padded, step);
    *count = n;
}

swi_status swi_window_starts(swi_ctx *ctx, int64_t size, int64_t roi, double overlap, int64_t *starts,
                             int64_t cap, int64_t *count) {
    return swi_grid_starts(ctx, SWI_GRID_MONAI, size, roi, overlap, starts, cap, count);
}

swi_status swi_grid_starts(swi_ctx *ctx, swi_grid grid, int64_t size, int64_t roi, double overlap,
                           int64_t *starts, int64_t cap, int64_t *count) {
    if (count) *count = 0;
    swi_status st = check_axis(ctx, size, roi);
    if (st != SWI_OK) return st;
    if (!(overlap >= 0.0 && overlap < 1.0))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "overlap = %g: must be in [0, 1)", overlap);
    if ((st = check_starts(ctx, starts, cap, count)) != SWI_OK) return st;
    if ((unsigned)grid > SWI_GRID_NNUNET)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "grid = %d: unknown swi_grid value", (int)grid);
    starts_of(grid, size, roi, grid == SWI_GRID_NNUNET ? 1.0 - overlap : overlap, starts, cap, count);
    return SWI_OK;
}

swi_status swi_nnunet_starts(swi_ctx *ctx, int64_t size, int64_t roi, double tile_step, int64_t *starts,
                             int64_t cap, int64_t *count) {
    if (count) *count = 0;
    swi_status st = check_axis(ctx, size, roi);
    if (st != SWI_OK) return st;
    if (!(tile_step > 0.0 && tile_step <= 1.0))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "tile_step = %g: must be in (0, 1]", tile_step);
    if ((st = check_starts(ctx, starts, cap, count)) != SWI_OK) return st;
    starts_of(SWI_GRID_NNUNET, size, roi, tile_step, starts, cap, count);
    return SWI_OK;
}

int64_t swi__pad_index(int64_t x, int64_t s, int64_t before, swi_pad mode) {
    int64_t i = x - before;
    if (i >= 0 && i < s) return i;
    switch (mode) {
    case SWI_PAD_CONSTANT: return -1;
    case SWI_PAD_REPLICATE: return i < 0 ? 0 : s - 1;
    case SWI_PAD_REFLECT:
        if (s == 1) return 0;
        i = i < 0 ? -i : 2 * (s - 1) - i; /* pad < s: one reflection suffices */
        return i;
    case SWI_PAD_CIRCULAR: {
        int64_t m = i % s;
        return m < 0 ? m + s : m;
    }
    }
    return -1;
}

swi_status swi_pad_map(swi_ctx *ctx, swi_pad mode, int64_t size, int64_t roi, int64_t *map, int64_t cap,
                       int64_t *padded, int64_t *before) {
    if (size <= 0 || size > SWI_AXIS_MAX)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "size = %lld: must be 1..2^31", (long long)size);
    if (roi <= 0 || roi > SWI_AXIS_MAX)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "roi = %lld: must be 1..2^31", (long long)roi);
    if ((unsigned)mode > SWI_PAD_CIRCULAR)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "mode = %d: unknown padding mode", (int)mode);
    if (cap < 0 || (cap > 0 && !map))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "cap = %lld with map %s: cap must be >= 0 and map not "
                         "NULL when cap > 0",
                         (long long)cap, map ? "set" : "NULL");
    int64_t P = size > roi ? size : roi, pad = P - size, b = pad / 2;
    if (mode == SWI_PAD_REFLECT && pad > 0 && pad - b >= size)
        return swi__fail(
            ctx, SWI_ERR_INVALID_ARG,
            "reflect padding needs a pad smaller than the image: size %lld, roi %lld (pad %lld after)",
            (long long)size, (long long)roi, (long long)(pad - b));
    for (int64_t j = 0; j < cap && j < P; j++) map[j] = swi__pad_index(j, size, b, mode);
    if (padded) *padded = P;
    if (before) *before = b;
    return SWI_OK;
}

swi_status swi__geom_init(swi_ctx *ctx, const swi_params *p, const swi_tensor *in, geom *g) {
    memset(g, 0, sizeof *g);
    if (!p) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params is NULL");
    if (!in) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "input is NULL");
    if (p->dims < 1 || p->dims > SWI_MAX_DIMS)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.dims = %d: must be 1 to %d", p->dims,
                         SWI_MAX_DIMS);
    if (in->dims != p->dims)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "input.dims = %d does not match params.dims = %d (rank mismatch)", in->dims,
                         p->dims);
    if (in->batch <= 0)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "input.batch = %lld: must be >= 1", (long long)in->batch);
    if (in->channels <= 0)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "input.channels = %lld: must be >= 1",
                         (long long)in->channels);
    if (p->sw_batch_size < 1)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.sw_batch_size = %d: must be >= 1",
                         p->sw_batch_size);
    if (p->threads < 0 || p->threads > 1024)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.threads = %d: must be 0 (all cores) .. 1024",
                         p->threads);
    if (p->n_heads < 1 || p->n_heads > SWI_MAX_HEADS)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.n_heads = %d: must be 1..%d", p->n_heads,
                         SWI_MAX_HEADS);
    if ((unsigned)p->grid > SWI_GRID_NNUNET)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.grid = %d: unknown swi_grid value", (int)p->grid);
    if ((unsigned)p->mode > SWI_BLEND_GAUSSIAN_NNUNET)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.mode = %d: unknown blend mode", (int)p->mode);
    if ((unsigned)p->padding_mode > SWI_PAD_CIRCULAR)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.padding_mode = %d: unknown padding mode",
                         (int)p->padding_mode);
    if ((unsigned)p->pipeline > SWI_PIPELINE_ON)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.pipeline = %d: unknown swi_pipeline value",
                         (int)p->pipeline);
    if ((unsigned)p->reuse > SWI_REUSE_ON)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.reuse = %d: unknown swi_reuse value",
                         (int)p->reuse);
    if (p->reuse_cache < 0 || p->reuse_cache > 64)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.reuse_cache = %d: must be 0..64", p->reuse_cache);
    if ((unsigned)p->order_mode > SWI_ORDER_FIXED)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.order_mode = %d: unknown swi_order_mode value",
                         (int)p->order_mode);
    if (p->mode == SWI_BLEND_CUSTOM && !p->weight_map)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.weight_map is NULL but mode is SWI_BLEND_CUSTOM");
    if (!isfinite(p->cval)) return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.cval is not finite");
    if (p->mirror_axes >= (1u << p->dims))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "params.mirror_axes = %u: names an axis beyond the %d dims (bits below %u)",
                         p->mirror_axes, p->dims, 1u << p->dims);
    if (p->mirror_axes && p->reuse == SWI_REUSE_ON)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "params.mirror_axes with params.reuse = SWI_REUSE_ON: mirrored runs are not "
                         "reused; turn one of them off");
    if ((unsigned)p->accumulate > SWI_ACCUMULATE_FLOAT16)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.accumulate = %d: unknown swi_accumulate value",
                         (int)p->accumulate);

    g->user_dims = p->dims;
    g->mirror = p->mirror_axes << (NDIM - p->dims);
    g->passes = 1;
    for (int k = 0; k < p->dims; k++)
        if (p->mirror_axes & (1u << k)) g->passes *= 2;
    g->acc_bytes = p->accumulate == SWI_ACCUMULATE_FLOAT16 ? sizeof(uint16_t) : sizeof(float);
    g->batch = in->batch;
    g->reader = in->data == NULL && in->reader != NULL;
    g->cin = in->channels;
    for (int a = 0; a < NDIM; a++) {
        g->size[a] = g->roi[a] = g->padded[a] = g->n_win[a] = 1;
        g->step[a] = 0.0;
        g->before[a] = 0;
    }
    for (int k = 0; k < p->dims; k++) {
        int a = swi__axis(g, k);
        int64_t s = in->size[k];
        if (s <= 0)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "input.size[%d] = %lld: must be >= 1", k,
                             (long long)s);
        if (s > SWI_AXIS_MAX)
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "input.size[%d] = %lld: larger than %lld", k,
                             (long long)s, (long long)SWI_AXIS_MAX);
        int64_t r = p->roi[k] <= 0 ? s : p->roi[k];
        if (r > SWI_AXIS_MAX)
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "params.roi[%d] = %lld: larger than %lld", k,
                             (long long)r, (long long)SWI_AXIS_MAX);
        double ov = p->overlap[k], ts = p->tile_step[k];
        if (!(ov >= 0.0 && ov < 1.0))
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.overlap[%d] = %g: must be in [0, 1)", k, ov);
        if (ts != 0.0 && p->grid != SWI_GRID_NNUNET)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "params.tile_step[%d] = %g: only SWI_GRID_NNUNET takes a tile step (0 here)", k,
                             ts);
        if (!(ts >= 0.0 && ts <= 1.0))
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "params.tile_step[%d] = %g: must be in (0, 1], or 0 for 1 - overlap", k, ts);
        if ((p->mode == SWI_BLEND_GAUSSIAN || p->mode == SWI_BLEND_GAUSSIAN_NNUNET) &&
            !(p->sigma_scale[k] > 0.0 && isfinite(p->sigma_scale[k])))
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "params.sigma_scale[%d] = %g: must be > 0", k,
                             p->sigma_scale[k]);
        int64_t P = s > r ? s : r;
        int64_t pad = P - s;
        g->size[a] = s;
        g->roi[a] = r;
        g->padded[a] = P;
        g->before[a] = pad / 2;
        if (p->padding_mode == SWI_PAD_REFLECT && pad > 0 && pad - pad / 2 >= s)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "params.padding_mode = reflect needs a pad smaller than the image: "
                             "dim %d has size %lld and roi %lld (pad %lld after)",
                             k, (long long)s, (long long)r, (long long)(pad - pad / 2));
        g->step[a] = grid_step(p, k);
        g->n_win[a] = grid_count(p->grid, r, P, g->step[a]);
    }
    /* the part: a box of input voxels, each dim cut or whole */
    for (int a = 0; a < NDIM; a++) {
        g->part_lo[a] = 0;
        g->part_hi[a] = g->size[a];
    }
    for (int k = 0; k < p->dims; k++) {
        const int a = swi__axis(g, k);
        const int64_t lo = p->part_lo[k], hi = p->part_hi[k], s = in->size[k];
        if (lo == 0 && hi == 0) continue;
        if (!(lo >= 0 && lo < hi && hi <= s))
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "params.part_lo[%d] = %lld, part_hi[%d] = %lld: the part must be 0 <= lo < hi "
                             "<= %lld (the size of dim %d), or both 0 for the whole dim",
                             k, (long long)lo, k, (long long)hi, (long long)s, k);
        g->has_part = 1;
        g->part_lo[a] = lo;
        g->part_hi[a] = hi;
        g->part_cut[a] = lo > 0 || hi < s; /* the whole dim given explicitly cuts nothing */
    }
    int cut = 0;
    for (int a = 0; a < NDIM; a++) cut |= g->part_cut[a];
    if (cut && p->mirror_axes && p->sw_batch_size > 1)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                         "params.part with mirror_axes needs sw_batch_size 1 (it is %d): a voxel adds its "
                         "windows' mirrored runs batch by batch, and a part batches other windows together "
                         "than the whole run, so it would not give the whole run's values bitwise",
                         p->sw_batch_size);
    int64_t wpi = 1, rv = 1, iv = 1, t;
    for (int a = 0; a < NDIM; a++) {
        if (!swi__mul_i64(wpi, g->n_win[a], &wpi) || !swi__mul_i64(rv, g->roi[a], &rv) ||
            !swi__mul_i64(iv, g->size[a], &iv))
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "input size / roi product overflows");
    }
    if (!swi__mul_i64(iv, g->cin, &t) || !swi__mul_i64(t, g->batch, &t) || !swi__mul_i64(rv, g->cin, &t) ||
        !swi__mul_i64(wpi, g->batch, &t) || (uint64_t)t > (uint64_t)SIZE_MAX / 4)
        return swi__fail(ctx, SWI_ERR_OVERFLOW, "input tensor size overflows (batch x channels x size)");
    g->win_per_image = wpi;
    g->roi_vox = rv;
    g->image_vox = iv;

    size_t nstarts = 0;
    for (int a = 0; a < NDIM; a++) nstarts += (size_t)g->n_win[a];
    g->starts_block = swi__malloc(nstarts * sizeof(int64_t));
    g->weights = swi__malloc((size_t)rv * sizeof(float));
    if (!g->starts_block || !g->weights) {
        swi__geom_free(g);
        return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for the window layout");
    }
    int64_t *sp = g->starts_block;
    for (int a = 0; a < NDIM; a++) {
        g->starts[a] = sp;
        for (int64_t i = 0; i < g->n_win[a]; i++)
            sp[i] = grid_start(p->grid, i, g->n_win[a], g->roi[a], g->padded[a], g->step[a]);
        sp += g->n_win[a];
    }
    swi_status st = swi__weights(ctx, p, g->roi, g->weights);
    if (st != SWI_OK) {
        swi__geom_free(g);
        return st;
    }
    g->n_heads = p->n_heads;
    return SWI_OK;
}

/* First index i in the increasing array v[0..n) with v[i] >= x (n if none). */
static int64_t lower_bound(const int64_t *v, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Python's round(): half to even. */
static int64_t round_half_even(double x) { return (int64_t)nearbyint(x); }

swi_status swi__geom_head(swi_ctx *ctx, geom *g, int h, int64_t channels, const int64_t *user_spatial) {
    head_geom *hg = &g->heads[h];
    swi__free(hg->block);
    swi__free(hg->weights);
    memset(hg, 0, sizeof *hg);
    hg->channels = channels;
    hg->acc_bytes = g->acc_bytes;
    for (int a = 0; a < NDIM; a++) hg->win[a] = 1;
    for (int k = 0; k < g->user_dims; k++) {
        int64_t o = user_spatial ? user_spatial[k] : 0;
        int a = swi__axis(g, k);
        if (o <= 0) o = g->roi[a];
        if (o > SWI_AXIS_MAX)
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "head %d: spatial[%d] = %lld is too large", h, k,
                             (long long)o);
        hg->win[a] = o;
    }
    size_t total = 0;
    for (int a = 0; a < NDIM; a++) total += (size_t)g->n_win[a] * 3 + (size_t)(2 * g->n_win[a] + 4) * 4;
    hg->block = swi__malloc(total * sizeof(int64_t));
    int64_t wv = 1;
    for (int a = 0; a < NDIM; a++)
        if (!swi__mul_i64(wv, hg->win[a], &wv))
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "head %d: window size overflows", h);
    hg->win_vox = wv;
    if ((uint64_t)wv > SIZE_MAX / sizeof(float))
        return swi__fail(ctx, SWI_ERR_OVERFLOW, "head %d: window size overflows", h);
    hg->weights = swi__malloc((size_t)wv * sizeof(float));
    if (!hg->block || !hg->weights)
        return swi__fail(ctx, SWI_ERR_NOMEM, "out of memory for head %d's layout", h);
    int64_t *mem = hg->block;
    int64_t ncells_total = 1;
    for (int a = 0; a < NDIM; a++) {
        axis_grid *ax = &hg->ax[a];
        int64_t nw = g->n_win[a], r = g->roi[a], o = hg->win[a];
        double z = (double)o / (double)r;
        int k = a - (NDIM - g->user_dims);
        ax->n_win = nw;
        ax->win_lo = mem;
        mem += nw;
        ax->win_cfirst = mem;
        mem += nw;
        ax->win_ccount = mem;
        mem += nw;
        ax->cell_lo = mem;
        mem += 2 * nw + 4;
        ax->cell_hi = mem;
        mem += 2 * nw + 4;
        ax->cell_wfirst = mem;
        mem += 2 * nw + 4;
        ax->cell_wcount = mem;
        mem += 2 * nw + 4;
        hg->full[a] = (int64_t)((double)g->padded[a] * z);
        if (o == r) {
            hg->crop_lo[a] = g->before[a];
            hg->out[a] = g->size[a];
        } else {
            /* the reference slices its buffer of floor(P*z), so the end is capped there */
            int64_t hi = round_half_even((double)(g->before[a] + g->size[a]) * z);
            if (hi > hg->full[a]) hi = hg->full[a];
            hg->crop_lo[a] = round_half_even((double)g->before[a] * z);
            hg->out[a] = hi - hg->crop_lo[a];
        }
        for (int64_t t = 0; t < nw; t++) {
            int64_t s = g->starts[a][t];
            int64_t lo = o == r ? s : (int64_t)((double)s * z);
            int64_t hi = o == r ? s + r : (int64_t)((double)(s + r) * z);
            if (hi - lo != o || lo < 0 || hi > hg->full[a])
                return swi__fail(ctx, SWI_ERR_SHAPE,
                                 "head %d: output size %lld along dim %d is not a whole zoom of roi %lld "
                                 "(the window at %lld maps to [%lld, %lld))",
                                 h, (long long)o, k, (long long)r, (long long)s, (long long)lo,
                                 (long long)hi);
            ax->win_lo[t] = lo;
        }
        if (hg->out[a] <= 0)
            return swi__fail(ctx, SWI_ERR_SHAPE, "head %d: output along dim %d would be empty", h, k);
        /* Cell boundaries: every window edge inside the crop, plus the crop's edges. The
         * window starts are increasing and all windows have length o, so the sorted edges
         * come from merging the starts and the ends. */
        int64_t c0 = hg->crop_lo[a], c1 = c0 + hg->out[a];
        int64_t nb = 0, i = 0, j = 0;
        int64_t *b = ax->cell_wfirst; /* borrow as edge list, 2nw+4 long */
        b[nb++] = c0;
        while (i < nw || j < nw) {
            int64_t v;
            if (j >= nw || (i < nw && ax->win_lo[i] <= ax->win_lo[j] + o))
                v = ax->win_lo[i++];
            else
                v = ax->win_lo[j++] + o;
            if (v > c0 && v < c1 && v != b[nb - 1]) b[nb++] = v;
        }
        if (b[nb - 1] != c1) b[nb++] = c1;
        /* a part's edges cut cells too, so every cell lies wholly inside or outside it */
        if (g->part_cut[a]) {
            if (o != r)
                return swi__fail(
                    ctx, SWI_ERR_INVALID_ARG,
                    "params.part_lo/part_hi: head %d is zoomed along dim %d (output %lld for roi "
                    "%lld), which the part cuts; parts need heads at the window's resolution "
                    "along every cut dim",
                    h, k, (long long)o, (long long)r);
            const int64_t cut[2] = {g->part_lo[a] + c0, g->part_hi[a] + c0};
            for (int q = 0; q < 2; q++) {
                int64_t at = lower_bound(b, nb, cut[q]);
                if (at < nb && b[at] == cut[q]) continue;
                memmove(b + at + 1, b + at, (size_t)(nb - at) * sizeof *b);
                b[at] = cut[q];
                nb++;
            }
        }
        ax->n_cells = nb - 1;
        for (int64_t c = 0; c < ax->n_cells; c++) {
            ax->cell_lo[c] = b[c];
            ax->cell_hi[c] = b[c + 1];
        }
        for (int64_t c = 0; c < ax->n_cells; c++) {
            /* covering windows: win_lo in [hi - o, lo] (win_lo is increasing) */
            int64_t first = lower_bound(ax->win_lo, nw, ax->cell_hi[c] - o);
            int64_t end = lower_bound(ax->win_lo, nw, ax->cell_lo[c] + 1);
            ax->cell_wfirst[c] = first;
            ax->cell_wcount[c] = end > first ? end - first : 0;
        }
        for (int64_t t = 0; t < nw; t++) {
            /* cells inside: cell_lo >= win_lo and cell_hi <= win_lo + o */
            int64_t first = lower_bound(ax->cell_lo, ax->n_cells, ax->win_lo[t]);
            int64_t end = lower_bound(ax->cell_hi, ax->n_cells, ax->win_lo[t] + o + 1);
            ax->win_cfirst[t] = first;
            ax->win_ccount[t] = end > first ? end - first : 0;
        }
        if (g->part_cut[a]) {
            hg->part_cell_lo[a] = lower_bound(ax->cell_lo, ax->n_cells, g->part_lo[a] + c0);
            hg->part_cell_hi[a] = lower_bound(ax->cell_lo, ax->n_cells, g->part_hi[a] + c0);
        } else {
            hg->part_cell_lo[a] = 0;
            hg->part_cell_hi[a] = ax->n_cells;
        }
        if (!swi__mul_i64(ncells_total, ax->n_cells, &ncells_total))
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "head %d: too many cells", h);
    }
    hg->n_cells = ncells_total;
    int same = 1;
    for (int a = 0; a < NDIM; a++) same &= hg->win[a] == g->roi[a];
    if (same)
        memcpy(hg->weights, g->weights, (size_t)wv * sizeof(float));
    else
        swi__weights_resize(g->weights, g->roi, hg->win, hg->weights);
    return SWI_OK;
}

void swi__geom_free(geom *g) {
    if (!g) return;
    for (int h = 0; h < SWI_MAX_HEADS; h++) {
        swi__free(g->heads[h].block);
        swi__free(g->heads[h].weights);
        g->heads[h].block = NULL;
        g->heads[h].weights = NULL;
    }
    swi__free(g->starts_block);
    swi__free(g->weights);
    g->starts_block = NULL;
    g->weights = NULL;
}
