/* export_windows.c -- the window loops of the pipeline: every window sliced from the
 * padded images, run through the inlined network, weighted and accumulated.
 *
 * Nested loops: one Loop per spatial axis, outermost axis 0. The loop of axis k runs over
 * t_k with the windows' starts along axes < k fixed by the enclosing loops and carries
 *     acc_k [Nb, K, r_0..r_{k-1}, P_k..P_{d-1}]
 * (the slab of the current window row: window-sized along the outer axes, padded-size
 * along the others). Each iteration gets the result of the loop of axis k+1 (or, at the
 * bottom, the weighted prediction of one window [Nb, K, *roi]), pads it along axis k to
 * its place and adds it. So a window costs O(its row), a row O(its slab), and only n_0
 * additions touch the whole volume -- instead of one whole-volume pass per window. With
 * count = 1 the same structure accumulates the weight map alone (the count map of
 * --dynamic); its accumulators have no [Nb, K] dims.
 *
 * --unroll: the same folding without Loop (windows_unrolled).
 */
#include "export_internal.h"

/* Names of a Loop body's inputs and outputs. */
typedef struct loop_io {
    const char *iter, *cond, *acc_in, *cond_out, *acc_out;
} loop_io;

/* Close a Loop body that adds x to its carried float32 accumulator (the condition passes
 * through unchanged). */
static Onnx__GraphProto *accumulating_body(gbuild *B, const char *name, const loop_io *io, const char *x) {
    arena *A = B->A;
    OP(B, "Add", io->acc_out, io->acc_in, x);
    OP(B, "Identity", io->cond_out, io->cond);
    Onnx__ValueInfoProto *in[3] = {gb_value_info(A, io->iter, OX_INT64, 0, NULL, NULL),
                                   gb_value_info(A, io->cond, OX_BOOL, 0, NULL, NULL),
                                   gb_value_info(A, io->acc_in, OX_FLOAT, -1, NULL, NULL)};
    Onnx__ValueInfoProto *out[2] = {gb_value_info(A, io->cond_out, OX_BOOL, 0, NULL, NULL),
                                    gb_value_info(A, io->acc_out, OX_FLOAT, -1, NULL, NULL)};
    return gb_graph(B, name, 3, in, 2, out);
}

/* Pad x with zeros, `pads` as the ONNX Pad input. */
static const char *pad_zeros(gbuild *g, const char *x, const char *pads) {
    Onnx__NodeProto *pn = OP(g, "Pad", NULL, x, pads);
    gb_attr_s(g, pn, "mode", "constant");
    return OUT(pn);
}

/* The network's nodes into g (its input, net_in, already set there), then its output cast
 * to float32 and weighted: [n, K, *roi]. The nodes are shared, not copied: each graph
 * that inlines the network holds the same messages. */
static const char *inline_network(window_loops *wl, gbuild *g) {
    arena *A = &wl->job->A;
    for (size_t i = 0; i < wl->net->n_node; i++)
        arr_push(A, (void ***)&g->node, &g->n_node, &g->cap_node, wl->net->node[i]);
    for (size_t i = 0; i < wl->net->n_value_info; i++) gb_add_vi(g, wl->net->value_info[i]);
    const char *y = wl->net_out;
    if (wl->out_type != OX_FLOAT) y = op_cast(g, y, OX_FLOAT, NULL);
    if (wl->gaussian) y = V(g, "Mul", y, wl->c_weights);
    return y;
}

/* The weighted prediction of the current window, [Nb, K, *roi] float32 (the weights
 * alone for the count map). */
static const char *window_prediction(window_loops *wl, gbuild *g) {
    if (wl->count) return wl->c_weights;
    const char *st = wl->d == 1 ? wl->s1[0] : op_concat0(g, wl->d, wl->s1);
    const char *en = V(g, "Add", st, wl->c_roi);
    OP(g, "Slice", wl->net_in, wl->src, st, en, wl->c_axes_sp);
    return inline_network(wl, g);
}

/* Zeros of the accumulator of axis k's loop, built in the main graph. */
static const char *accumulator_zeros(window_loops *wl, int k) {
    gbuild *M = wl->main;
    const char *parts[EXPORT_MAXD + 2];
    int n = 0;
    if (!wl->count) {
        parts[n++] = wl->batch;
        parts[n++] = const_i64_1(M, wl->classes);
    }
    for (int j = 0; j < wl->d; j++) parts[n++] = j < k ? const_i64_1(M, wl->L->roi[j]) : wl->Pk[j];
    return op_filled(M, op_concat0(M, n, parts), OX_FLOAT, 0.0);
}

/* The start [1] of the window along axis k at loop counter t1 [1]: a table lookup with
 * --size, t * step clamped to P - r with --dynamic (steps 3-4 in the graph). */
static const char *window_start(window_loops *wl, gbuild *B, int k, const char *t1) {
    if (!wl->dynamic) {
        Onnx__NodeProto *gn = OP(B, "Gather", NULL, wl->starts_k[k], t1);
        gb_attr_i(B, gn, "axis", 0);
        return OUT(gn);
    }
    return op_min_i64(B, V(B, "Mul", t1, const_i64_1(wl->main, wl->L->step[k])), wl->Pmr[k]);
}

/* The loop of axis k, in g; returns its accumulated result. */
static const char *axis_loop(window_loops *wl, gbuild *g, int k) {
    if (k == wl->d) return window_prediction(wl, g);
    arena *A = &wl->job->A;
    gbuild *M = wl->main;
    const char *tag = wl->count ? "count" : "acc";
    int id = (*g->counter)++;
    loop_io io = {
        arena_printf(A, "swi/%s%d_t_%d", tag, k, id), arena_printf(A, "swi/%s%d_cond_%d", tag, k, id),
        arena_printf(A, "swi/%s%d_in_%d", tag, k, id), arena_printf(A, "swi/%s%d_cond_out_%d", tag, k, id),
        arena_printf(A, "swi/%s%d_out_%d", tag, k, id)};
    const char *res = arena_printf(A, "swi/%s%d_%d", tag, k, id);
    const char *init = accumulator_zeros(wl, k);

    gbuild B;
    gb_init(&B, A, &wl->job->counter);
    const char *t1 = V(&B, "Reshape", io.iter, const_i64_1(M, 1));
    const char *s1 = wl->s1[k] = window_start(wl, &B, k, t1);
    const char *inner = axis_loop(wl, &B, k + 1);
    /* pad the inner result along axis k to its place: s1 before, P - r - s1 after */
    const char *e1 = V(&B, "Sub", wl->Pmr[k], s1);
    int rank = wl->count ? wl->d : wl->d + 2, a = wl->count ? k : 2 + k;
    const char *pv[2 * (EXPORT_MAXD + 2)];
    for (int i = 0; i < rank; i++) {
        pv[i] = i == a ? s1 : wl->zero1;
        pv[rank + i] = i == a ? e1 : wl->zero1;
    }
    const char *placed = pad_zeros(&B, inner, op_concat0(&B, 2 * rank, pv));
    Onnx__GraphProto *body = accumulating_body(&B, arena_printf(A, "swi_%s_axis%d", tag, k), &io, placed);
    Onnx__NodeProto *loop = OP(g, "Loop", res, wl->trip[k], wl->c_true, init);
    gb_attr_g(g, loop, "body", body);
    return res;
}

const char *windows_nested(window_loops *wl, gbuild *g) { return axis_loop(wl, g, 0); }

/* One image at a time: each image's windows through the nested loops with batch 1, its
 * [1, K, *P] result added at its batch index. */
const char *windows_per_image(window_loops *wl, const char *images, const char *n_images) {
    arena *A = &wl->job->A;
    gbuild *M = wl->main;
    int d = wl->d;
    loop_io io = {"swi/image_n", "swi/image_cond", "swi/image_acc_in", "swi/image_cond_out",
                  "swi/image_acc_out"};
    gbuild I;
    gb_init(&I, A, &wl->job->counter);
    const char *n1 = V(&I, "Reshape", io.iter, const_i64_1(M, 1));
    const char *n1p = V(&I, "Add", n1, const_i64_1(M, 1));
    wl->src = V(&I, "Slice", images, n1, n1p, const_i64_1(M, 0));
    wl->batch = const_i64_1(M, 1);
    const char *one = axis_loop(wl, &I, 0);
    const char *pv[2 * (EXPORT_MAXD + 2)];
    for (int i = 0; i < d + 2; i++) pv[i] = pv[d + 2 + i] = wl->zero1;
    pv[0] = n1;
    pv[d + 2] = V(&I, "Sub", n_images, n1p);
    const char *placed = pad_zeros(&I, one, op_concat0(&I, 2 * (d + 2), pv));
    Onnx__GraphProto *body = accumulating_body(&I, "swi_images", &io, placed);
    wl->batch = n_images;
    const char *init = accumulator_zeros(wl, 0);
    Onnx__NodeProto *loop = OP(M, "Loop", "swi/acc", op_scalar(M, n_images), wl->c_true, init);
    gb_attr_g(M, loop, "body", body);
    return OUT(loop);
}

/* ---- --unroll: no Loop ----------------------------------------------------------------
 * All windows, sliced from the padded images at their constant starts and concatenated
 * along the batch (window-major: row w*N + n), go through the network once; the
 * weighted predictions are then folded exactly like the nested loops do, unrolled:
 * along the last axis into rows, rows into slabs, slabs into the volume. */
typedef struct unrolled {
    window_loops *wl;
    const char *y;        /* [W*N, K, *roi] weighted float32 */
    const char *n_images; /* [1] */
    int64_t stride[EXPORT_MAXD];
} unrolled;

/* The sum of the windows w + t * stride[k] over the axes >= k, placed along those axes. */
static const char *unroll_fold(unrolled *u, int k, int64_t w) {
    window_loops *wl = u->wl;
    gbuild *M = wl->main;
    const export_layout *L = wl->L;
    int d = wl->d;
    if (k == d) {
        if (L->windows == 1) return u->y;
        const char *b = V(M, "Mul", const_i64_1(M, w), u->n_images);
        const char *e = V(M, "Mul", const_i64_1(M, w + 1), u->n_images);
        return V(M, "Slice", u->y, b, e, wl->zero1);
    }
    const char *acc = NULL;
    for (int64_t t = 0; t < L->n_win[k]; t++) {
        const char *inner = unroll_fold(u, k + 1, w + t * u->stride[k]);
        int64_t s = L->starts[k][t], e = L->padded[k] - L->roi[k] - s;
        const char *p = inner;
        if (L->padded[k] != L->roi[k]) {
            int64_t pv[2 * (EXPORT_MAXD + 2)] = {0};
            pv[2 + k] = s;
            pv[d + 2 + 2 + k] = e;
            p = pad_zeros(M, inner, const_i64(M, 2 * (d + 2), pv));
        }
        acc = acc ? V(M, "Add", acc, p) : p;
    }
    return acc;
}

/* Every window sliced at its start and concatenated along the batch, into the network. */
static void slice_all_windows(window_loops *wl) {
    gbuild *M = wl->main;
    const export_layout *L = wl->L;
    int d = wl->d;
    const char **wins = arena_alloc(&wl->job->A, (size_t)L->windows * sizeof *wins);
    int64_t t[EXPORT_MAXD] = {0};
    for (int64_t w = 0; w < L->windows; w++) {
        int64_t st[EXPORT_MAXD], en[EXPORT_MAXD];
        for (int k = 0; k < d; k++) {
            st[k] = L->starts[k][t[k]];
            en[k] = st[k] + L->roi[k];
        }
        wins[w] = V(M, "Slice", wl->src, const_i64(M, d, st), const_i64(M, d, en), wl->c_axes_sp);
        for (int k = d - 1; k >= 0; k--) { /* next window, last dim fastest */
            if (++t[k] < L->n_win[k]) break;
            t[k] = 0;
        }
    }
    if (L->windows == 1)
        OP(M, "Identity", wl->net_in, wins[0]);
    else
        gb_attr_i(M, gb_node(M, "Concat", wl->net_in, (int)L->windows, wins), "axis", 0);
}

const char *windows_unrolled(window_loops *wl, const char *n_images) {
    slice_all_windows(wl);
    unrolled u = {wl, inline_network(wl, wl->main), n_images, {0}};
    int64_t st = 1;
    for (int k = wl->d - 1; k >= 0; k--) {
        u.stride[k] = st;
        st *= wl->L->n_win[k];
    }
    return unroll_fold(&u, 0, 0);
}
