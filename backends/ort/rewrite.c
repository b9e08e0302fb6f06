/*
 * rewrite.c -- network rewrites that keep the function, applied to the ONNX model in memory
 * before ONNX Runtime loads it (swi_ort_options.rewrite) or saved (swi_ort_optimize).
 *
 * The one rewrite: the sub-pixel form of a ConvTranspose whose strides tile its output,
 * k - pad_begin - pad_end + output_padding == s along every axis (the U-Net up-sampling:
 * kernel 2 stride 2 pads 0, or MONAI's kernel 3 stride 2 pads 1 output_padding 1). Output
 * voxel o = s q + p (phase p in [0, s)) of such a layer is
 *     y[s q + p] = sum_j x[q - j] W[s j + p + pad_begin]      (0 <= s j + p + pad_begin < k)
 * per axis, so one Conv with a kernel of jmax - jmin + 1 taps (pads jmax before, -jmin
 * after) computing the S = prod(s) phases as S x C_out channels, followed by a
 * depth-to-space (Reshape [N, s.., C_out, *M], Transpose to [N, C_out, M0, s0, M1, s1, ..],
 * Reshape [N, C_out, *(s M)]) is the same function up to float rounding. ONNX Runtime's
 * CPU ConvTranspose is a GEMM into a column buffer and a generic col2im; its Conv is
 * several times faster per multiply-add (bench/monai/README.md), so the rewrite pays even
 * where the kernel grows with zero taps (2.4x the multiply-adds for kernel 3 stride 2).
 * The math is bench/monai/subpixel.py's, generalised to any such stride and padding.
 *
 * A layer is rewritten only when every condition is certain: group 1, dilations 1, no
 * auto_pad or output_shape, weights (and bias) float initializers that no graph input can
 * override, 1-3 spatial axes, a stride above 1, at most 3x the original multiply-adds.
 * Spatial sizes come from the input at run time (Shape/Gather), so dynamic windows work.
 * Models with external data are left to ONNX Runtime as they are (it resolves the files
 * relative to the model's path).
 */
#include "ort_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SWI_ORT_HAVE_REWRITE

#include "onnx_io.h"

typedef struct rw {
    arena A;
    jmp_buf oom;
    Onnx__ModelProto *m;
    Onnx__GraphProto *g;
    gbuild b;
    int counter;
    char prefix[32];
} rw;

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
    return NULL;
}

/* INTS attribute `name` into v[want] (absent: every value `dflt`). -1 when present but of
 * another type or length. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int want, int64_t dflt, int64_t *v) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a) {
        for (int i = 0; i < want; i++) v[i] = dflt;
        return 0;
    }
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || a->n_ints != (size_t)want) return -1;
    memcpy(v, a->ints, (size_t)want * sizeof *v);
    return 0;
}

static Onnx__TensorProto *initializer(const rw *r, const char *name) {
    const Onnx__GraphProto *g = r->g;
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name && strcmp(g->input[i]->name, name) == 0)
            return NULL; /* an input may override it at run time */
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0) return g->initializer[i];
    return NULL;
}

/* A float tensor's `count` values (copied into the arena), or NULL. */
static float *tensor_floats(rw *r, const Onnx__TensorProto *t, size_t count) {
    if (!t->has_data_type || t->data_type != OX_FLOAT || count > SIZE_MAX / sizeof(float)) return NULL;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return NULL;
    float *v = arena_alloc(&r->A, count * sizeof *v + 1);
    if (t->has_raw_data && t->raw_data.len == count * sizeof(float))
        memcpy(v, t->raw_data.data, count * sizeof *v); /* little-endian hosts (onnx_io.h) */
    else if (!t->has_raw_data && t->n_float_data == count)
        memcpy(v, t->float_data, count * sizeof *v);
    else
        return NULL;
    return v;
}

static int has_external_data(const Onnx__GraphProto *g) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->has_data_location &&
            g->initializer[i]->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
            return 1;
    return 0;
}

static int starts_with(const char *s, const char *p) { return s && strncmp(s, p, strlen(p)) == 0; }

/* A prefix no name of the graph starts with, for the names the rewrite adds. */
static int unique_prefix(rw *r) {
    const Onnx__GraphProto *g = r->g;
    for (int k = 0; k < 100; k++) {
        snprintf(r->prefix, sizeof r->prefix, k ? "swi_subpixel%d_" : "swi_subpixel_", k);
        int clash = 0;
        for (size_t i = 0; i < g->n_node && !clash; i++) {
            const Onnx__NodeProto *n = g->node[i];
            clash = starts_with(n->name, r->prefix);
            for (size_t o = 0; o < n->n_output && !clash; o++) clash = starts_with(n->output[o], r->prefix);
        }
        for (size_t i = 0; i < g->n_initializer && !clash; i++)
            clash = starts_with(g->initializer[i]->name, r->prefix);
        for (size_t i = 0; i < g->n_input && !clash; i++) clash = starts_with(g->input[i]->name, r->prefix);
        if (!clash) return 0;
    }
    return -1;
}

static int default_opset(const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !*d || strcmp(d, "ai.onnx") == 0)
            return m->opset_import[i]->has_version ? (int)m->opset_import[i]->version : 0;
    }
    return 0;
}

/* The geometry of a rewritable ConvTranspose. */
typedef struct subpixel {
    int nd;                    /* spatial axes */
    int64_t ci, co;            /* channels in, out */
    int64_t k[3], s[3], pb[3]; /* kernel, stride, pad before */
    int64_t jmin[3], jmax[3];  /* taps of the equivalent Conv: j in [jmin, jmax] */
    int64_t S, K;              /* phases prod(s); taps prod(jmax - jmin + 1) */
    const float *w, *bias;     /* [ci, co, *k]; [co] or NULL */
} subpixel;

/* Fill sp when node n is a ConvTranspose the rewrite covers exactly; 0 if so. */
static int match(rw *r, const Onnx__NodeProto *n, subpixel *sp) {
    memset(sp, 0, sizeof *sp);
    if (!n->op_type || strcmp(n->op_type, "ConvTranspose") != 0 ||
        (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) || n->n_input < 2 ||
        n->n_output != 1 || !n->input[0][0] || attr(n, "output_shape"))
        return -1;
    const Onnx__AttributeProto *ap = attr(n, "auto_pad");
    if (ap && !(ap->has_s && ap->s.len == 6 && memcmp(ap->s.data, "NOTSET", 6) == 0)) return -1;
    const Onnx__AttributeProto *gr = attr(n, "group");
    if (gr && !(gr->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && gr->i == 1)) return -1;
    const Onnx__TensorProto *W = initializer(r, n->input[1]);
    if (!W || W->n_dims < 3 || W->n_dims > 5) return -1;
    const int nd = (int)W->n_dims - 2;
    sp->nd = nd;
    sp->ci = W->dims[0];
    sp->co = W->dims[1];
    size_t count = 1;
    for (size_t d = 0; d < W->n_dims; d++) {
        if (W->dims[d] <= 0 || W->dims[d] > (1 << 20) || count > SIZE_MAX / (size_t)W->dims[d]) return -1;
        count *= (size_t)W->dims[d];
    }
    int64_t ks[3], dil[3], pads[6], op[3];
    if (attr_ints(n, "kernel_shape", nd, 0, ks) || attr_ints(n, "strides", nd, 1, sp->s) ||
        attr_ints(n, "dilations", nd, 1, dil) || attr_ints(n, "pads", 2 * nd, 0, pads) ||
        attr_ints(n, "output_padding", nd, 0, op))
        return -1;
    int strided = 0;
    int64_t taps_before = 1;
    sp->S = sp->K = 1;
    for (int a = 0; a < nd; a++) {
        int64_t k = W->dims[2 + a], s = sp->s[a], pb = pads[a], pe = pads[nd + a];
        if ((attr(n, "kernel_shape") && ks[a] != k) || dil[a] != 1 || s < 1 || s > 64 || pb < 0 || pe < 0 ||
            op[a] < 0 || op[a] >= s || k - pb - pe + op[a] != s)
            return -1;
        strided |= s > 1;
        sp->k[a] = k;
        sp->pb[a] = pb;
        /* taps j of phase p: 0 <= s j + p + pb < k; the range always holds j = 0 so the
         * Conv's pads (jmax, -jmin) are never negative */
        int64_t lo = 0, hi = 0;
        for (int64_t p = 0; p < s; p++)
            for (int64_t j = -k; j <= k; j++) {
                int64_t t = s * j + p + pb;
                if (t >= 0 && t < k) {
                    lo = j < lo ? j : lo;
                    hi = j > hi ? j : hi;
                }
            }
        sp->jmin[a] = lo;
        sp->jmax[a] = hi;
        sp->S *= s;
        sp->K *= hi - lo + 1;
        taps_before *= k;
    }
    /* no stride: nothing to gain; many zero taps: the Conv would do too much */
    if (!strided || sp->S * sp->K > 3 * taps_before || sp->S * sp->co > (1 << 24)) return -1;
    if (!(sp->w = tensor_floats(r, W, count))) return -1;
    if (n->n_input > 2 && n->input[2][0]) {
        const Onnx__TensorProto *B = initializer(r, n->input[2]);
        if (!B || B->n_dims != 1 || B->dims[0] != sp->co || !(sp->bias = tensor_floats(r, B, (size_t)sp->co)))
            return -1;
    }
    return 0;
}

static Onnx__NodeProto *node(rw *r, const char *op, const char *out, int nin, const char **in) {
    Onnx__NodeProto *n = gb_node(&r->b, op, out, nin, in);
    n->name = arena_printf(&r->A, "%s%s", out, "_node");
    return n;
}

/* Append the sub-pixel replacement of node n (matched as sp) to the builder. */
static void emit(rw *r, const Onnx__NodeProto *n, const subpixel *sp, int index) {
    arena *A = &r->A;
    const int nd = sp->nd;
    char *base = arena_printf(A, "%s%d", r->prefix, index);
#define NAME(suffix) arena_printf(A, "%s_%s", base, suffix)
    /* weights [S * co, ci, *K]: channel (phase, co), phase in C order over the axes */
    int64_t K[3] = {1, 1, 1}, dims[5];
    for (int a = 0; a < nd; a++) K[a] = sp->jmax[a] - sp->jmin[a] + 1;
    dims[0] = sp->S * sp->co;
    dims[1] = sp->ci;
    for (int a = 0; a < nd; a++) dims[2 + a] = K[a];
    float *wp;
    Onnx__TensorProto *wt = gb_tensor(A, NAME("weight"), OX_FLOAT, 2 + nd, dims, (void **)&wp);
    arr_push(A, (void ***)&r->b.init, &r->b.n_init, &r->b.cap_init, wt);
    const int64_t k1 = nd > 1 ? sp->k[1] : 1, k2 = nd > 2 ? sp->k[2] : 1;
    const int64_t K0 = K[0], K1 = K[1], K2 = K[2];
    const int64_t s1 = nd > 1 ? sp->s[1] : 1, s2 = nd > 2 ? sp->s[2] : 1;
    for (int64_t ph = 0; ph < sp->S; ph++) {
        const int64_t p[3] = {ph / (s1 * s2), (ph / s2) % s1, ph % s2};
        for (int64_t co = 0; co < sp->co; co++)
            for (int64_t ci = 0; ci < sp->ci; ci++)
                for (int64_t u0 = 0; u0 < K0; u0++)
                    for (int64_t u1 = 0; u1 < K1; u1++)
                        for (int64_t u2 = 0; u2 < K2; u2++) {
                            const int64_t u[3] = {u0, u1, u2};
                            int64_t t[3] = {0, 0, 0};
                            int ok = 1;
                            for (int a = 0; a < nd && ok; a++) {
                                t[a] = sp->s[a] * (sp->jmax[a] - u[a]) + p[a] + sp->pb[a];
                                ok = t[a] >= 0 && t[a] < sp->k[a];
                            }
                            if (!ok) continue; /* a zero tap (arena memory is zeroed) */
                            const int64_t src =
                                (((ci * sp->co + co) * sp->k[0] + t[0]) * k1 + t[1]) * k2 + t[2];
                            const int64_t dst =
                                ((((ph * sp->co + co) * sp->ci + ci) * K0 + u0) * K1 + u1) * K2 + u2;
                            wp[dst] = sp->w[src];
                        }
    }
    const char *bias = NULL;
    if (sp->bias) {
        int64_t nb = sp->S * sp->co;
        float *bp;
        Onnx__TensorProto *bt = gb_tensor(A, NAME("bias"), OX_FLOAT, 1, &nb, (void **)&bp);
        arr_push(A, (void ***)&r->b.init, &r->b.n_init, &r->b.cap_init, bt);
        for (int64_t ph = 0; ph < sp->S; ph++)
            memcpy(bp + ph * sp->co, sp->bias, (size_t)sp->co * sizeof *bp);
        bias = bt->name;
    }
    const char *x = n->input[0];
    const char *cin[3] = {x, wt->name, bias};
    Onnx__NodeProto *conv = node(r, "Conv", NAME("conv"), bias ? 3 : 2, cin);
    int64_t pads[6], ones[3] = {1, 1, 1};
    for (int a = 0; a < nd; a++) {
        pads[a] = sp->jmax[a];
        pads[nd + a] = -sp->jmin[a];
    }
    gb_attr_ints(&r->b, conv, "kernel_shape", nd, K);
    gb_attr_ints(&r->b, conv, "pads", 2 * nd, pads);
    gb_attr_ints(&r->b, conv, "strides", nd, ones);
    gb_attr_ints(&r->b, conv, "dilations", nd, ones);
    gb_attr_i(&r->b, conv, "group", 1);

    /* the spatial sizes M of x, at run time */
    const char *shape = OUT(node(r, "Shape", NAME("shape"), 1, &x));
    int64_t sp_idx[3] = {2, 3, 4};
    const char *gin[2] = {shape, gb_i64(&r->b, NAME("spatial_axes"), nd, sp_idx)};
    Onnx__NodeProto *gat = node(r, "Gather", NAME("spatial"), 2, gin);
    gb_attr_i(&r->b, gat, "axis", 0);
    /* [N, s.., co, *M] */
    int64_t head1[5] = {-1};
    for (int a = 0; a < nd; a++) head1[1 + a] = sp->s[a];
    head1[1 + nd] = sp->co;
    const char *c1in[2] = {gb_i64(&r->b, NAME("head1"), 2 + nd, head1), OUT(gat)};
    Onnx__NodeProto *t1 = node(r, "Concat", NAME("shape1"), 2, c1in);
    gb_attr_i(&r->b, t1, "axis", 0);
    const char *r1in[2] = {OUT(conv), OUT(t1)};
    const char *r1 = OUT(node(r, "Reshape", NAME("phases"), 2, r1in));
    /* [N, co, M0, s0, M1, s1, ..] */
    int64_t perm[8];
    perm[0] = 0;
    perm[1] = 1 + nd;
    for (int a = 0; a < nd; a++) {
        perm[2 + 2 * a] = 2 + nd + a;
        perm[3 + 2 * a] = 1 + a;
    }
    Onnx__NodeProto *tr = node(r, "Transpose", NAME("interleaved"), 1, &r1);
    gb_attr_ints(&r->b, tr, "perm", 2 + 2 * nd, perm);
    /* [N, co, *(s M)] */
    const char *min[2] = {OUT(gat), gb_i64(&r->b, NAME("strides"), nd, sp->s)};
    const char *sm = OUT(node(r, "Mul", NAME("out_spatial"), 2, min));
    int64_t head2[2] = {-1, sp->co};
    const char *c2in[2] = {gb_i64(&r->b, NAME("head2"), 2, head2), sm};
    Onnx__NodeProto *t2 = node(r, "Concat", NAME("shape2"), 2, c2in);
    gb_attr_i(&r->b, t2, "axis", 0);
    const char *r2in[2] = {OUT(tr), OUT(t2)};
    node(r, "Reshape", n->output[0], 2, r2in);
#undef NAME
}

/* Whether a node of g, or of a graph inside one of its nodes (which may read the outer
 * scope), reads `name`. */
static int graph_uses(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (strcmp(n->input[k], name) == 0) return 1;
        for (size_t k = 0; k < n->n_attribute; k++) {
            const Onnx__AttributeProto *a = n->attribute[k];
            if (a->g && graph_uses(a->g, name)) return 1;
            for (size_t j = 0; j < a->n_graphs; j++)
                if (graph_uses(a->graphs[j], name)) return 1;
        }
    }
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && strcmp(g->output[i]->name, name) == 0) return 1;
    return 0;
}

/* Drop the initializers nothing reads any more (the replaced layers' weights), so a saved
 * model does not carry them. */
static void drop_unused(rw *r, const char **names, size_t n_names) {
    Onnx__GraphProto *g = r->g;
    size_t kept = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const char *nm = g->initializer[i]->name;
        int drop = 0;
        for (size_t k = 0; k < n_names && !drop && nm; k++)
            drop = strcmp(nm, names[k]) == 0 && !graph_uses(g, nm);
        if (!drop) g->initializer[kept++] = g->initializer[i];
    }
    g->n_initializer = kept;
}

/* Rewrite r->m in place; the number of layers rewritten. */
static int rewrite_graph(rw *r) {
    Onnx__GraphProto *g = r->g;
    if (default_opset(r->m) < 7 || has_external_data(g) || unique_prefix(r)) return 0;
    gb_init(&r->b, &r->A, &r->counter);
    int done = 0;
    const char **replaced = arena_alloc(&r->A, (2 * g->n_node + 1) * sizeof *replaced);
    size_t n_replaced = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        subpixel sp;
        if (match(r, g->node[i], &sp) == 0) {
            emit(r, g->node[i], &sp, done++);
            for (size_t k = 1; k < g->node[i]->n_input && k < 3; k++)
                replaced[n_replaced++] = g->node[i]->input[k];
        } else
            arr_push(&r->A, (void ***)&r->b.node, &r->b.n_node, &r->b.cap_node, g->node[i]);
    }
    if (!done) return 0;
    g->node = r->b.node;
    g->n_node = r->b.n_node;
    size_t n_init = g->n_initializer + r->b.n_init;
    Onnx__TensorProto **inits = arena_alloc(&r->A, n_init * sizeof *inits);
    if (g->n_initializer) memcpy(inits, g->initializer, g->n_initializer * sizeof *inits);
    memcpy(inits + g->n_initializer, r->b.init, r->b.n_init * sizeof *inits);
    g->initializer = inits;
    g->n_initializer = n_init;
    drop_unused(r, replaced, n_replaced);
    return done;
}

swi_status ort__rewrite(const char *path, unsigned char **bytes, size_t *len, int *rewritten) {
    *bytes = NULL;
    *len = 0;
    *rewritten = 0;
    rw *r = calloc(1, sizeof *r);
    if (!r) return SWI_ERR_NOMEM;
    arena_init(&r->A, &r->oom);
    swi_status st = SWI_OK;
    if (setjmp(r->oom)) {
        st = SWI_ERR_NOMEM;
        goto out;
    }
    char err[256];
    r->m = onnx_load(&r->A, path, err, sizeof err);
    if (!r->m || !r->m->graph) goto out; /* ONNX Runtime will say what is wrong with it */
    r->g = r->m->graph;
    int done = rewrite_graph(r);
    if (!done) goto out;
    size_t n = protobuf_c_message_get_packed_size(&r->m->base);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        st = SWI_ERR_NOMEM;
        goto out;
    }
    if (protobuf_c_message_pack(&r->m->base, buf) != n) {
        free(buf);
        goto out;
    }
    *bytes = buf;
    *len = n;
    *rewritten = done;
out:
    arena_free(&r->A);
    free(r);
    return st;
}

swi_status swi_ort_optimize(const char *path, const char *out, int *rewritten, char *err, size_t errlen) {
    if (rewritten) *rewritten = 0;
    if (!path || !out) {
        ort__err(err, errlen, "swi_ort_optimize: %s is NULL", path ? "out" : "path");
        return SWI_ERR_INVALID_ARG;
    }
    rw *r = calloc(1, sizeof *r);
    if (!r) {
        ort__err(err, errlen, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    arena_init(&r->A, &r->oom);
    swi_status st = SWI_OK;
    char msg[ORT_ERRLEN];
    if (setjmp(r->oom)) {
        ort__err(err, errlen, "%s: out of memory rewriting the model", path);
        st = SWI_ERR_NOMEM;
        goto out;
    }
    r->m = onnx_load(&r->A, path, msg, sizeof msg);
    if (!r->m) {
        ort__err(err, errlen, "%s", msg);
        st = SWI_ERR_INVALID_ARG;
        goto out;
    }
    r->g = r->m->graph;
    if (has_external_data(r->g)) {
        ort__err(err, errlen,
                 "%s: the model keeps tensors in external data files, which swi "
                 "optimize does not rewrite",
                 path);
        st = SWI_ERR_INVALID_ARG;
        goto out;
    }
    int done = rewrite_graph(r);
    if (onnx_save(r->m, out, msg, sizeof msg, NULL)) {
        ort__err(err, errlen, "%s", msg);
        st = SWI_ERR_INVALID_ARG;
        goto out;
    }
    if (rewritten) *rewritten = done;
out:
    arena_free(&r->A);
    free(r);
    return st;
}

#else /* without protobuf-c: models load as they are */

swi_status ort__rewrite(const char *path, unsigned char **bytes, size_t *len, int *rewritten) {
    (void)path;
    *bytes = NULL;
    *len = 0;
    *rewritten = 0;
    return SWI_OK;
}

swi_status swi_ort_optimize(const char *path, const char *out, int *rewritten, char *err, size_t errlen) {
    (void)out;
    if (rewritten) *rewritten = 0;
    ort__err(err, errlen,
             "%s: swi_ort was built without protobuf-c, so it cannot rewrite "
             "models (install libprotobuf-c-dev protobuf-c-compiler libonnx-dev and rebuild)",
             path ? path : "(null)");
    return SWI_ERR_INVALID_ARG;
}

#endif
