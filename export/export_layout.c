/* export_layout.c -- the window layout of the pipeline, taken from libswi's public layout
 * functions so the graph tiles, pads and weighs exactly as swi_run does (semantics steps
 * 1-5): swi_window_starts, swi_pad_map, swi_weights. */
#include "export_internal.h"

#include <string.h>

/* A refusal of the library, with its message. */
static int library_refused(export_job *job, swi_status st, const char *what) {
    int status = st == SWI_ERR_NOMEM ? 1 : 2; /* otherwise the options do not fit */
    return export_fail(job, status, "%s: %s", what, swi_last_error(job->swi));
}

/* A list option has one value (for every dim) or one per dim. */
static int check_count(export_job *job, const char *opt, int n, int d) {
    if (n == 0 || n == 1 || n == d) return 0;
    return export_fail(job, 2, "%s has %d values but the network has %d spatial dims", opt, n, d);
}

static int check_list_counts(export_job *job) {
    const export_options *o = &job->opt;
    int d = job->net.dims;
    if (o->n_size && o->n_size != d)
        return export_fail(job, 2, "--size has %d values but the network has %d spatial dims (input rank %d)",
                           o->n_size, d, d + 2);
    if (check_count(job, "--roi", o->window.n_roi, d) ||
        check_count(job, "--overlap", o->window.n_overlap, d) ||
        check_count(job, "--sigma-scale", o->window.n_sigma, d))
        return -1;
    return 0;
}

/* The window along dim k (step 1: <= 0 means the whole volume); it must be what the
 * network takes and gives. 0 or -1. */
static int resolve_roi(export_job *job, int k, int64_t *roi) {
    const export_options *o = &job->opt;
    const export_network *net = &job->net;
    int64_t net_r = net->in_dim[2 + k];
    int64_t r = o->window.n_roi ? o->window.roi[k] : net_r;
    if (!o->window.n_roi && net_r < 1)
        return export_fail(job, 2, "the network's input spatial dim %d is not fixed: give --roi", k);
    if (r <= 0) {
        if (o->dynamic)
            return export_fail(job, 2, "--roi %lld along dim %d ('whole volume') needs --size, not --dynamic",
                               (long long)r, k);
        r = o->size[k];
    }
    if (net_r >= 1 && r != net_r)
        return export_fail(job, 2, "--roi: window dim %d is %lld but the network's input is fixed at %lld", k,
                           (long long)r, (long long)net_r);
    int64_t out_r = net->out_dim[2 + k];
    if (out_r >= 1 && out_r != r)
        return export_fail(
            job, 1,
            "the network's output spatial dim %d is %lld, not the window's %lld: heads of another "
            "resolution are not supported by the exporter",
            k, (long long)out_r, (long long)r);
    *roi = r;
    return 0;
}

/* --dynamic: the volume size, hence the padded size, is unknown here, so the graph steps
 * by the library's step on an axis longer than the window: the distance of its first two
 * window starts on an axis of twice the window (capped at SWI_MAX_AXIS; the weight map
 * keeps every window the 2 GiB model limit allows far below the cap). */
static int window_step(export_job *job, int k) {
    export_layout *L = &job->layout;
    int64_t r = L->roi[k], size = r <= SWI_MAX_AXIS / 2 ? 2 * r : SWI_MAX_AXIS, starts[2], n = 0;
    swi_status st = swi_window_starts(job->swi, size, r, L->overlap[k], starts, 2, &n);
    if (st != SWI_OK) return library_refused(job, st, arena_printf(&job->A, "window layout along dim %d", k));
    L->step[k] = n >= 2 ? starts[1] - starts[0] : r;
    return 0;
}

/* The window, its overlap and gaussian scale along every dim, and the weight map. */
static int plan_window(export_job *job) {
    const export_options *o = &job->opt;
    export_layout *L = &job->layout;
    for (int k = 0; k < L->d; k++) {
        if (resolve_roi(job, k, &L->roi[k])) return -1;
        L->overlap[k] = o->window.overlap[k];
        L->sigma[k] = o->window.sigma_scale[k];
    }
    L->roi_vox = 1;
    for (int k = 0; k < L->d; k++) {
        if (L->roi_vox > ((int64_t)1 << 32) / L->roi[k])
            return export_fail(job, 2, "--roi: the window is too large");
        L->roi_vox *= L->roi[k];
    }
    for (int k = 0; k < L->d && o->dynamic; k++)
        if (window_step(job, k)) return -1;
    return 0;
}

/* --size, one axis: padding (step 2) and window starts (steps 3-4). */
static int plan_fixed_axis(export_job *job, int k) {
    export_layout *L = &job->layout;
    swi_pad mode = job->opt.window.padding;
    int64_t s = job->opt.size[k], r = L->roi[k];
    L->size[k] = s;
    swi_status st = swi_pad_map(job->swi, mode, s, r, NULL, 0, &L->padded[k], &L->before[k]);
    if (st != SWI_OK)
        return library_refused(
            job, st, arena_printf(&job->A, "--padding-mode %s along dim %d", export_pad_names[mode], k));
    L->after[k] = L->padded[k] - s - L->before[k];
    if (L->padded[k] > s) {
        L->any_pad = 1;
        if (mode != SWI_PAD_CONSTANT) { /* constant padding is a Pad node, the others a Gather */
            L->pad_map[k] = arena_alloc(&job->A, (size_t)L->padded[k] * sizeof(int64_t));
            st = swi_pad_map(job->swi, mode, s, r, L->pad_map[k], L->padded[k], NULL, NULL);
            if (st != SWI_OK) return library_refused(job, st, "padding");
        }
    }
    int64_t n = 0, m = 0;
    st = swi_window_starts(job->swi, s, r, L->overlap[k], NULL, 0, &n);
    if (st != SWI_OK) return library_refused(job, st, arena_printf(&job->A, "window layout along dim %d", k));
    L->starts[k] = arena_alloc(&job->A, (size_t)n * sizeof(int64_t));
    st = swi_window_starts(job->swi, s, r, L->overlap[k], L->starts[k], n, &m);
    if (st != SWI_OK) return library_refused(job, st, arena_printf(&job->A, "window layout along dim %d", k));
    L->n_win[k] = n;
    if (L->windows > ((int64_t)1 << 40) / n) return export_fail(job, 2, "too many windows");
    L->windows *= n;
    return 0;
}

static int plan_fixed_volume(export_job *job) {
    export_layout *L = &job->layout;
    L->windows = 1;
    for (int k = 0; k < L->d; k++)
        if (plan_fixed_axis(job, k)) return -1;
    double count_bytes = (double)export_volume_voxels(L) * 4.0;
    if (count_bytes > (double)INT32_MAX)
        return export_fail(
            job, 2,
            "--size: the count map alone would be %.0f bytes, over protobuf's 2 GiB limit for one "
            "model: use --dynamic, which computes it in the graph",
            count_bytes);
    return 0;
}

int export_plan_layout(export_job *job) {
    export_layout *L = &job->layout;
    memset(L, 0, sizeof *L);
    L->d = job->net.dims;
    if (check_list_counts(job) || plan_window(job)) return -1;
    if (!job->opt.dynamic && plan_fixed_volume(job)) return -1;
    L->weights = arena_alloc(&job->A, (size_t)L->roi_vox * sizeof(float));
    swi_status st = swi_weights(job->swi, job->opt.window.mode, L->d, L->roi, L->sigma, L->weights);
    if (st != SWI_OK) return library_refused(job, st, "weights");
    return 0;
}

int64_t export_volume_voxels(const export_layout *L) {
    int64_t v = 1;
    for (int k = 0; k < L->d; k++) v *= L->size[k];
    return v;
}

/* The sum of the weights of every window covering a voxel, accumulated window by window
 * in float32 as swi_run does (step 6), cropped (step 7). */
float *export_count_map(export_job *job) {
    const export_layout *L = &job->layout;
    int64_t P[3] = {1, 1, 1}, S[3] = {1, 1, 1}, B[3] = {0, 0, 0}, R[3] = {1, 1, 1}, N[3] = {1, 1, 1};
    const int64_t *st[3];
    static const int64_t zero = 0;
    int lead = 3 - L->d; /* leading dims of 1 make every case 3-d */
    for (int a = 0; a < 3; a++) st[a] = &zero;
    for (int k = 0; k < L->d; k++) {
        P[lead + k] = L->padded[k];
        S[lead + k] = L->size[k];
        B[lead + k] = L->before[k];
        R[lead + k] = L->roi[k];
        N[lead + k] = L->n_win[k];
        st[lead + k] = L->starts[k];
    }
    float *cnt = arena_alloc(&job->A, (size_t)(P[0] * P[1] * P[2]) * sizeof(float));
    for (int64_t a = 0; a < N[0]; a++)
        for (int64_t b = 0; b < N[1]; b++)
            for (int64_t c = 0; c < N[2]; c++) {
                const float *w = L->weights;
                for (int64_t i = 0; i < R[0]; i++)
                    for (int64_t j = 0; j < R[1]; j++) {
                        float *row = cnt + ((st[0][a] + i) * P[1] + st[1][b] + j) * P[2] + st[2][c];
                        for (int64_t k = 0; k < R[2]; k++) row[k] += *w++;
                    }
            }
    float *crop = arena_alloc(&job->A, (size_t)(S[0] * S[1] * S[2]) * sizeof(float));
    float *q = crop;
    for (int64_t i = 0; i < S[0]; i++)
        for (int64_t j = 0; j < S[1]; j++) {
            memcpy(q, cnt + ((B[0] + i) * P[1] + B[1] + j) * P[2] + B[2], (size_t)S[2] * sizeof(float));
            q += S[2];
        }
    return crop;
}
