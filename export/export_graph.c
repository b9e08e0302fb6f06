/* export_graph.c -- the pipeline as one ONNX model (all standard ai.onnx operators, the
 * network's opset, >= 11), built step by step:
 *
 *   image [N, C, *S]  (the network's input element type)
 *     -> sizes: N, and with --dynamic S, P = max(S, roi), the pads and window counts
 *     -> padding to P: Pad (constant) or one Gather per padded axis with an index map
 *        (reflect, replicate, circular; swi_pad_map's, or computed with --dynamic)
 *     -> the window loops (export_windows.c): the network inlined, names prefixed
 *        "net/", its output cast to float32, weighted and accumulated
 *     -> Slice (crop the padding) -> Div by the count map (a constant, or the weight map
 *        accumulated by the same loops with --dynamic) -> Cast to the network's output
 *        type -> `scores` [N, K, *S];  --argmax: ArgMax -> Cast uint8 -> `labels` [N, *S].
 *
 * The network's initializers live in the outer graph (referenced from the loop bodies),
 * so they are stored once. N is always dynamic; with --dynamic the spatial size is too.
 */
#include "export_internal.h"

#include <stdio.h>
#include <string.h>

#define NET_PREFIX "net/"

/* The main graph and the values every step shares. */
typedef struct pipeline {
    export_job *job;
    const export_layout *L;
    gbuild main;
    int d, dynamic;
    const char *net_in, *net_out;              /* the network's input and output, prefixed */
    const char *c_axes_sp, *c_roi, *c_weights; /* [d] spatial axes 2.., [d] roi, [*roi] weights */
    const char *image;                         /* the graph input */
    const char *n_images;                      /* [1] N */
    /* [d] each, --dynamic: the volume size, its padded size, the pads, windows per axis */
    const char *size, *padded, *before, *after, *n_win;
} pipeline;

/* The network renamed, and the constants of the window. */
static void add_constants(pipeline *p) {
    export_job *job = p->job;
    arena *A = &job->A;
    gbuild *M = &p->main;
    export_prefix_names(A, job->net.model->graph, NET_PREFIX);
    p->net_in = arena_printf(A, "%s%s", NET_PREFIX, job->net.in_name);
    p->net_out = arena_printf(A, "%s%s", NET_PREFIX, job->net.out_name);
    int64_t axes_sp[EXPORT_MAXD];
    for (int k = 0; k < p->d; k++) axes_sp[k] = 2 + k;
    p->c_axes_sp = const_i64(M, p->d, axes_sp);
    p->c_roi = const_i64(M, p->d, p->L->roi);
    p->c_weights = gb_init_tensor(M, "swi/weights", OX_FLOAT, p->d, p->L->roi, p->L->weights);
}

/* N from the image's shape; with --dynamic also the layout of steps 2-4 in the graph:
 * P = max(S, roi), before = (P - S) / 2, n = 1 + ceil((P - roi) / step). */
static void add_sizes(pipeline *p) {
    gbuild *M = &p->main;
    const export_layout *L = p->L;
    int d = p->d;
    const char *c_roi = p->c_roi;
    const char *shp = V(M, "Shape", p->image);
    p->n_images = V(M, "Slice", shp, const_i64_1(M, 0), const_i64_1(M, 1), const_i64_1(M, 0));
    if (!p->dynamic) {
        p->padded = const_i64(M, d, L->padded);
        return;
    }
    p->size = V(M, "Slice", shp, const_i64_1(M, 2), const_i64_1(M, 2 + d), const_i64_1(M, 0));
    p->padded = V(M, "Where", V(M, "Less", p->size, c_roi), c_roi, p->size);
    const char *padv = V(M, "Sub", p->padded, p->size);
    int64_t two[EXPORT_MAXD] = {2, 2, 2}, ones[EXPORT_MAXD] = {1, 1, 1}, stepm1[EXPORT_MAXD];
    for (int k = 0; k < d; k++) stepm1[k] = L->step[k] - 1;
    p->before = V(M, "Div", padv, const_i64(M, d, two));
    p->after = V(M, "Sub", padv, p->before);
    p->n_win = V(M, "Add", const_i64(M, d, ones),
                 V(M, "Div", V(M, "Add", V(M, "Sub", p->padded, c_roi), const_i64(M, d, stepm1)),
                   const_i64(M, d, L->step)));
}

/* The constants that select element k of a [d] vector with Slice. */
static void axis_selector(gbuild *M, int k, const char *sel[3]) {
    sel[0] = const_i64_1(M, k);
    sel[1] = const_i64_1(M, k + 1);
    sel[2] = const_i64_1(M, 0);
}

static const char *slice_axis(gbuild *M, const char *vec, const char *const sel[3]) {
    return V(M, "Slice", vec, sel[0], sel[1], sel[2]);
}

/* Constant padding: one Pad filling cval. */
static const char *pad_constant(pipeline *p) {
    gbuild *M = &p->main;
    const export_layout *L = p->L;
    int d = p->d;
    const char *pads;
    if (p->dynamic) {
        Onnx__NodeProto *c =
            OP(M, "Concat", NULL, const_i64_zeros(M, 2), p->before, const_i64_zeros(M, 2), p->after);
        gb_attr_i(M, c, "axis", 0);
        pads = OUT(c);
    } else {
        int64_t pv[2 * (EXPORT_MAXD + 2)] = {0};
        for (int k = 0; k < d; k++) {
            pv[2 + k] = L->before[k];
            pv[(d + 2) + 2 + k] = L->after[k];
        }
        pads = const_i64(M, 2 * (d + 2), pv);
    }
    Onnx__NodeProto *pn = OP(M, "Pad", "swi/padded", p->image, pads,
                             const_scalar_of_type(M, p->job->net.in_type, p->job->opt.window.cval));
    gb_attr_s(M, pn, "mode", "constant");
    return OUT(pn);
}

/* --dynamic: the source index of every padded coordinate along axis k, the formulas of
 * swi_pad_map in the graph. */
static const char *dynamic_pad_index(pipeline *p, int k) {
    gbuild *M = &p->main;
    const char *sel[3];
    axis_selector(M, k, sel);
    const char *Pk = op_scalar(M, slice_axis(M, p->padded, sel));
    const char *Sk = op_scalar(M, slice_axis(M, p->size, sel));
    const char *Bk = op_scalar(M, slice_axis(M, p->before, sel));
    const char *i = V(M, "Sub", V(M, "Range", const_i64_scalar(M, 0), Pk, const_i64_scalar(M, 1)), Bk);
    const char *sm1 = V(M, "Sub", Sk, const_i64_scalar(M, 1));
    switch (p->job->opt.window.padding) {
    case SWI_PAD_REPLICATE: {
        const char *z = const_i64_scalar(M, 0);
        const char *j = V(M, "Where", V(M, "Less", i, z), z, i);
        return V(M, "Where", V(M, "Less", sm1, j), sm1, j);
    }
    case SWI_PAD_REFLECT: return V(M, "Sub", sm1, V(M, "Abs", V(M, "Sub", sm1, V(M, "Abs", i))));
    default: return V(M, "Mod", i, Sk); /* circular */
    }
}

/* Reflect, replicate, circular: one Gather per padded axis through its index map. */
static const char *pad_gather(pipeline *p) {
    gbuild *M = &p->main;
    const export_layout *L = p->L;
    const char *padded = p->image;
    for (int k = 0; k < p->d; k++) {
        const char *idx;
        if (p->dynamic) {
            idx = dynamic_pad_index(p, k);
        } else {
            if (!L->pad_map[k]) continue; /* no padding along k */
            idx =
                gb_i64(M, arena_printf(&p->job->A, "swi/pad_index_%d", k), (int)L->padded[k], L->pad_map[k]);
        }
        Onnx__NodeProto *gn = OP(M, "Gather", NULL, padded, idx);
        gb_attr_i(M, gn, "axis", 2 + k);
        padded = OUT(gn);
    }
    return padded;
}

/* The images padded to P (step 2). */
static const char *add_padding(pipeline *p) {
    if (!p->dynamic && !p->L->any_pad) return p->image;
    return p->job->opt.window.padding == SWI_PAD_CONSTANT ? pad_constant(p) : pad_gather(p);
}

/* What the window loops read, built in the main graph. */
static void window_loops_init(pipeline *p, window_loops *wl) {
    export_job *job = p->job;
    gbuild *M = &p->main;
    const export_layout *L = p->L;
    unsigned char tru = 1;
    memset(wl, 0, sizeof *wl);
    wl->job = job;
    wl->L = L;
    wl->main = M;
    wl->d = p->d;
    wl->dynamic = p->dynamic;
    wl->gaussian = job->opt.window.mode == SWI_BLEND_GAUSSIAN;
    wl->out_type = job->net.out_type;
    wl->classes = job->net.out_dim[1];
    wl->c_roi = p->c_roi;
    wl->c_axes_sp = p->c_axes_sp;
    wl->c_weights = p->c_weights;
    wl->c_true = gb_init_tensor(M, "swi/true", OX_BOOL, 0, NULL, &tru);
    wl->zero1 = const_i64_1(M, 0);
    wl->net = job->net.model->graph;
    wl->net_in = p->net_in;
    wl->net_out = p->net_out;
    for (int k = 0; k < p->d; k++) {
        if (p->dynamic) {
            const char *sel[3];
            axis_selector(M, k, sel);
            wl->trip[k] = op_scalar(M, slice_axis(M, p->n_win, sel));
            wl->Pk[k] = slice_axis(M, p->padded, sel);
            wl->Pmr[k] = V(M, "Sub", wl->Pk[k], const_i64_1(M, L->roi[k]));
        } else {
            wl->trip[k] = const_i64_scalar(M, L->n_win[k]);
            wl->Pk[k] = const_i64_1(M, L->padded[k]);
            wl->Pmr[k] = const_i64_1(M, L->padded[k] - L->roi[k]);
            if (!job->opt.unroll)
                wl->starts_k[k] = gb_i64(M, arena_printf(&job->A, "swi/window_starts_%d", k),
                                         (int)L->n_win[k], L->starts[k]);
        }
    }
}

/* Steps 4-6: the accumulated weighted predictions [N, K, *P]. */
static const char *add_windows(pipeline *p, window_loops *wl, const char *padded) {
    if (p->job->opt.unroll) {
        wl->src = padded;
        return windows_unrolled(wl, p->n_images);
    }
    if (p->job->net.per_image) return windows_per_image(wl, padded, p->n_images);
    wl->src = padded;
    wl->batch = p->n_images;
    return windows_nested(wl, &p->main);
}

/* Steps 6-7: crop the padding, divide by the count map; float32 `scores` (or its float32
 * value, cast to the network's type as `scores`). Returns the float32 scores. */
static const char *add_crop_normalise(pipeline *p, const char *acc, const char *count) {
    export_job *job = p->job;
    gbuild *M = &p->main;
    const export_layout *L = p->L;
    int d = p->d, out_type = job->net.out_type;
    const char *cnt;
    if (p->dynamic) {
        int64_t axes_cnt[EXPORT_MAXD];
        for (int k = 0; k < d; k++) axes_cnt[k] = k;
        const char *endv = V(M, "Add", p->before, p->size);
        acc = V(M, "Slice", acc, p->before, endv, p->c_axes_sp);
        cnt = V(M, "Slice", count, p->before, endv, const_i64(M, d, axes_cnt));
    } else {
        if (L->any_pad) {
            int64_t e[EXPORT_MAXD];
            for (int k = 0; k < d; k++) e[k] = L->before[k] + L->size[k];
            acc = V(M, "Slice", acc, const_i64(M, d, L->before), const_i64(M, d, e), p->c_axes_sp);
        }
        cnt = gb_init_tensor(M, "swi/count", OX_FLOAT, d, L->size, export_count_map(job));
    }
    const char *scores32 = OUT(OP(M, "Div", out_type == OX_FLOAT ? "scores" : "swi/scores_f32", acc, cnt));
    if (out_type != OX_FLOAT) op_cast(M, scores32, out_type, "scores");
    return scores32;
}

/* --argmax: uint8 `labels`, the lowest class index winning ties. */
static void add_argmax(pipeline *p, const char *scores32) {
    gbuild *M = &p->main;
    Onnx__NodeProto *am = OP(M, "ArgMax", NULL, scores32);
    gb_attr_i(M, am, "axis", 1);
    gb_attr_i(M, am, "keepdims", 0);
    op_cast(M, OUT(am), OX_UINT8, "labels");
}

/* The main graph with its inputs and outputs; the network's weights stored once in it. */
static Onnx__GraphProto *finish_graph(pipeline *p) {
    export_job *job = p->job;
    arena *A = &job->A;
    gbuild *M = &p->main;
    const export_network *net = &job->net;
    Onnx__GraphProto *ng = net->model->graph;
    int d = p->d;
    for (size_t i = 0; i < ng->n_initializer; i++)
        arr_push(A, (void ***)&M->init, &M->n_init, &M->cap_init, ng->initializer[i]);

    static const char *const sp_names[3][3] = {{"W"}, {"H", "W"}, {"D", "H", "W"}};
    int64_t idims[EXPORT_MAXD + 2], odims[EXPORT_MAXD + 2], ldims[EXPORT_MAXD + 1];
    const char *iparams[EXPORT_MAXD + 2], *oparams[EXPORT_MAXD + 2], *lparams[EXPORT_MAXD + 1];
    idims[0] = odims[0] = ldims[0] = -1;
    iparams[0] = oparams[0] = lparams[0] = "N";
    idims[1] = net->in_dim[1];
    iparams[1] = net->in_param[1] && *net->in_param[1] ? arena_printf(A, "C_%s", net->in_param[1]) : "C";
    odims[1] = net->out_dim[1];
    oparams[1] = NULL;
    for (int k = 0; k < d; k++) {
        int64_t s = p->dynamic ? -1 : p->L->size[k];
        idims[2 + k] = odims[2 + k] = ldims[1 + k] = s;
        iparams[2 + k] = oparams[2 + k] = lparams[1 + k] = sp_names[d - 1][k];
    }
    Onnx__ValueInfoProto *gin[1] = {gb_value_info(A, p->image, net->in_type, d + 2, idims, iparams)};
    Onnx__ValueInfoProto *gout[2];
    int ngout = 0;
    gout[ngout++] = gb_value_info(A, "scores", net->out_type, d + 2, odims, oparams);
    if (job->opt.argmax) gout[ngout++] = gb_value_info(A, "labels", OX_UINT8, d + 1, ldims, lparams);
    Onnx__GraphProto *graph = gb_graph(M, "swi_sliding_window", 1, gin, ngout, gout);
    graph->n_sparse_initializer = ng->n_sparse_initializer;
    graph->sparse_initializer = ng->sparse_initializer;
    graph->doc_string = arena_printf(A, "Sliding-window inference of '%s' (%s), exported by swi export %s",
                                     ng->name ? ng->name : "network", job->opt.model, swi_version());
    return graph;
}

/* The IR version an opset needs (onnx/helper.py's table). */
static int ir_for_opset(int opset) {
    if (opset <= 11) return 6;
    if (opset <= 14) return 7;
    if (opset <= 18) return 8;
    if (opset <= 20) return 9;
    if (opset <= 22) return 10;
    return 11;
}

/* The export parameters as metadata, after the network's own, for whoever inspects the file. */
static void add_metadata(export_job *job, Onnx__ModelProto *m) {
    arena *A = &job->A;
    const export_layout *L = &job->layout;
    const Onnx__ModelProto *net = job->net.model;
    const char *keys[] = {"swi.roi",          "swi.overlap", "swi.mode", "swi.sigma_scale",
                          "swi.padding_mode", "swi.cval",    "swi.size", "swi.network"};
    char vals[8][160];
    vals[0][0] = vals[1][0] = vals[3][0] = vals[6][0] = 0;
    for (int k = 0; k < L->d; k++) {
        const char *sep = k ? "," : "";
        snprintf(vals[0] + strlen(vals[0]), 32, "%s%lld", sep, (long long)L->roi[k]);
        snprintf(vals[1] + strlen(vals[1]), 32, "%s%g", sep, L->overlap[k]);
        snprintf(vals[3] + strlen(vals[3]), 32, "%s%g", sep, L->sigma[k]);
        if (job->opt.dynamic)
            snprintf(vals[6] + strlen(vals[6]), 32, "%s?", sep);
        else
            snprintf(vals[6] + strlen(vals[6]), 32, "%s%lld", sep, (long long)L->size[k]);
    }
    snprintf(vals[2], sizeof vals[2], "%s", export_mode_name(job->opt.window.mode));
    snprintf(vals[4], sizeof vals[4], "%s", export_pad_names[job->opt.window.padding]);
    snprintf(vals[5], sizeof vals[5], "%g", job->opt.window.cval);
    snprintf(vals[7], sizeof vals[7], "%s", net->graph->name ? net->graph->name : "");
    m->metadata_props = arena_alloc(A, (net->n_metadata_props + 9) * sizeof *m->metadata_props);
    for (size_t i = 0; i < net->n_metadata_props; i++)
        if (!job->opt.card_text || !net->metadata_props[i]->key ||
            strcmp(net->metadata_props[i]->key, "swi.card") != 0) /* a new card replaces it */
            m->metadata_props[m->n_metadata_props++] = net->metadata_props[i];
    if (job->opt.card_text) {
        Onnx__StringStringEntryProto *e = arena_alloc(A, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = (char *)"swi.card";
        e->value = job->opt.card_text;
        m->metadata_props[m->n_metadata_props++] = e;
    }
    for (int i = 0; i < 8; i++) {
        Onnx__StringStringEntryProto *e = arena_alloc(A, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = (char *)keys[i];
        e->value = arena_strdup(A, vals[i]);
        m->metadata_props[m->n_metadata_props++] = e;
    }
}

/* The model around the graph: the network's opsets, functions and IR version (at least
 * what its opset needs). */
static Onnx__ModelProto *wrap_model(export_job *job, Onnx__GraphProto *graph) {
    const Onnx__ModelProto *net = job->net.model;
    Onnx__ModelProto *m = arena_alloc(&job->A, sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    int ir = ir_for_opset(job->net.opset);
    m->ir_version = net->ir_version > ir ? net->ir_version : ir;
    m->n_opset_import = net->n_opset_import;
    m->opset_import = net->opset_import;
    m->producer_name = (char *)"swi export";
    m->producer_version = (char *)swi_version();
    m->graph = graph;
    m->n_functions = net->n_functions;
    m->functions = net->functions;
    add_metadata(job, m);
    return m;
}

Onnx__ModelProto *export_build_model(export_job *job) {
    pipeline p;
    memset(&p, 0, sizeof p);
    p.job = job;
    p.L = &job->layout;
    p.d = job->layout.d;
    p.dynamic = job->opt.dynamic;
    p.image = "image";
    gb_init(&p.main, &job->A, &job->counter);

    add_constants(&p);
    add_sizes(&p);
    const char *padded = add_padding(&p);
    window_loops wl;
    window_loops_init(&p, &wl);
    const char *acc = add_windows(&p, &wl, padded), *count = NULL;
    if (p.dynamic) { /* the count map, by the same loops over the weights */
        wl.count = 1;
        count = windows_nested(&wl, &p.main);
    }
    const char *scores32 = add_crop_normalise(&p, acc, count);
    if (job->opt.argmax) add_argmax(&p, scores32);
    return wrap_model(job, finish_graph(&p));
}
