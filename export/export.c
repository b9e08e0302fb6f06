/*
 * export.c -- `swi export`: the sliding-window pipeline as one ONNX model.
 *
 * Graph (all standard ai.onnx operators, opset = the network's, >= 11):
 *
 *   image [N, C, *S]  (the network's input element type)
 *     -> padding to P = max(S, roi): Pad (constant) or one Gather per padded axis
 *        with a precomputed index map (reflect, replicate, circular)
 *     -> nested Loops, one per spatial axis (see nest_level): the innermost one slices
 *        a window [N, C, *roi] at its start (from the starts tables, or computed from
 *        the loop counters with --dynamic), runs the network inlined (names prefixed
 *        "net/"), casts to float32 and multiplies by the weight map; each loop pads
 *        its inner result into its float32 accumulator (row -> slab -> volume)
 *        (networks whose batch is fixed at 1: an outer Loop over the N images)
 *     -> Slice (crop the padding) -> Div by the count map (a constant, or the weight
 *        map accumulated by the same nested loops with --dynamic) -> Cast to the
 *        network's output type -> `scores` [N, K, *S];
 *        --argmax: ArgMax -> Cast uint8 -> `labels` [N, *S].
 *
 * The network's initializers live in the outer graph (referenced from the loop
 * body), so they are stored once. N is always dynamic; with --dynamic the spatial
 * size is too, and the window grid is computed inside the graph.
 */
#include "swi_export.h"

#include "onnx_io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "swi.h"

#define MAXD 3

/* ---- options ---------------------------------------------------------------------- */
typedef struct opts {
    const char *prog;
    const char *model, *output, *head;
    int n_size; int64_t size[MAXD];
    int dynamic;
    int n_roi; int64_t roi[MAXD];
    int n_overlap; double overlap[MAXD];
    int mode;                       /* SWI_BLEND_CONSTANT / GAUSSIAN */
    int n_sigma; double sigma[MAXD];
    int pad_mode;                   /* swi_pad */
    double cval;
    int argmax, force, quiet, per_image, unroll;
} opts;

/* ---- what we learn about the network ------------------------------------------------ */
typedef struct netinfo {
    Onnx__ModelProto *m;
    int dims;                       /* spatial dims (input rank - 2) */
    int64_t in_dim[MAXD + 2];       /* -1: not fixed */
    const char *in_param[MAXD + 2];
    int64_t out_dim[MAXD + 2];
    int in_type, out_type;
    const char *in_name, *out_name;
    int out_index, n_outputs;
    int opset;
    int per_image;                  /* network batch fixed at 1: one window of one image per call */
} netinfo;

typedef struct X {
    arena A;
    jmp_buf oom;
    int counter;
    opts o;
    netinfo ni;
    char err[2048];
    int status;                     /* exit status to return when err is set */
} X;

static int fail(X *x, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(X *x, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    x->status = status;
    return -1;
}

static const char *const pad_names[] = {"constant", "reflect", "replicate", "circular"};

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s --model NET.onnx --output PIPE.onnx --size D,H,W [options]\n"
            "\n"
            "Write the whole sliding-window pipeline (padding, windows, the network, blending,\n"
            "crop) as one ONNX model: input `image` [N, C, D, H, W] in the network's element type\n"
            "(N dynamic), output `scores` [N, classes, D, H, W] in the network's output type\n"
            "(accumulated in float32), and with --argmax `labels` uint8 [N, D, H, W].\n"
            "\n"
            "  --model FILE          the network: one input [n, C, *roi], weights inside the file\n"
            "  --output FILE         the pipeline model to write (exists: needs --force)\n"
            "  --size D,H,W          the volume size the pipeline is built for (one value per\n"
            "                        spatial dim of the network)\n"
            "  --dynamic             instead of --size: any volume size, the window grid is\n"
            "                        computed inside the graph\n"
            "  --roi R[,R,R]         window size (default: the network's input size; <= 0: the\n"
            "                        whole volume along that dim, with --size only)\n"
            "  --overlap O[,O,O]     window overlap in [0, 1) (default 0.25)\n"
            "  --mode M              blending: constant (default) or gaussian\n"
            "  --sigma-scale S[,..]  gaussian sigma / roi (default 0.125)\n"
            "  --padding-mode M      constant (default), reflect, replicate or circular\n"
            "  --cval V              fill value of constant padding (default 0)\n"
            "  --argmax              also output `labels` (uint8, at most 256 classes)\n"
            "  --head NAME|INDEX     the network output to blend (default: the first)\n"
            "  --per-image           one window of one image per network call (automatic when\n"
            "                        the network's batch is fixed at 1; default: the N images'\n"
            "                        windows at the same place go through the network together)\n"
            "  --unroll              no Loop operators (for runtimes without good Loop support):\n"
            "                        all N x windows go through the network as one batch, the\n"
            "                        blending is unrolled; needs --size and a dynamic batch;\n"
            "                        memory grows with the number of windows\n"
            "  --force               overwrite --output\n"
            "  --quiet               no summary line\n",
            prog);
}

static int parse_list_i64(const char *s, int64_t *out, int *n) {
    int k = 0;
    const char *p = s;
    while (*p) {
        if (k == MAXD) return -1;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno) return -1;
        out[k++] = v;
        p = end;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    if (k == 0) return -1;
    *n = k;
    return 0;
}

static int parse_list_f64(const char *s, double *out, int *n) {
    int k = 0;
    const char *p = s;
    while (*p) {
        if (k == MAXD) return -1;
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno) return -1;
        out[k++] = v;
        p = end;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    if (k == 0) return -1;
    *n = k;
    return 0;
}

/* 0: go on, 1: --help printed, -1: error in x->err */
static int parse_args(X *x, int argc, char **argv) {
    opts *o = &x->o;
    memset(o, 0, sizeof *o);
    o->prog = argc > 0 && argv[0] ? argv[0] : "swi export";
    if (!strcmp(o->prog, "export")) o->prog = "swi export"; /* dispatched by the swi CLI */
    o->mode = SWI_BLEND_CONSTANT;
    o->pad_mode = SWI_PAD_CONSTANT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, o->prog);
            return 1;
        }
        if (!strcmp(a, "--argmax")) { o->argmax = 1; continue; }
        if (!strcmp(a, "--force")) { o->force = 1; continue; }
        if (!strcmp(a, "--dynamic")) { o->dynamic = 1; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(a, "--per-image")) { o->per_image = 1; continue; }
        if (!strcmp(a, "--unroll")) { o->unroll = 1; continue; }
        if (strncmp(a, "--", 2) != 0)
            return fail(x, 2, "unexpected argument '%s' (options start with --; see --help)", a);
        /* --name value or --name=value */
        char name[64];
        const char *val;
        const char *eq = strchr(a, '=');
        if (eq) {
            size_t len = (size_t)(eq - a);
            if (len >= sizeof name) return fail(x, 2, "unknown option '%s' (see --help)", a);
            memcpy(name, a, len);
            name[len] = 0;
            val = eq + 1;
        } else {
            if (strlen(a) >= sizeof name) return fail(x, 2, "unknown option '%s' (see --help)", a);
            strcpy(name, a);
            if (i + 1 >= argc) {
                static const char *known[] = {"--model", "--output", "--size", "--roi", "--overlap", "--mode",
                                              "--sigma-scale", "--padding-mode", "--cval", "--head"};
                for (size_t k = 0; k < sizeof known / sizeof *known; k++)
                    if (!strcmp(name, known[k])) return fail(x, 2, "%s needs a value", name);
                return fail(x, 2, "unknown option '%s' (see --help)", a);
            }
            val = argv[++i];
        }
        if (!strcmp(name, "--model")) o->model = val;
        else if (!strcmp(name, "--output")) o->output = val;
        else if (!strcmp(name, "--head")) o->head = val;
        else if (!strcmp(name, "--size")) {
            if (parse_list_i64(val, o->size, &o->n_size))
                return fail(x, 2, "--size '%s': expected 1 to 3 comma-separated integers, e.g. 96,96,64", val);
            for (int k = 0; k < o->n_size; k++)
                if (o->size[k] < 1 || o->size[k] > ((int64_t)1 << 31))
                    return fail(x, 2, "--size '%s': sizes must be in 1..2^31", val);
        } else if (!strcmp(name, "--roi")) {
            if (parse_list_i64(val, o->roi, &o->n_roi))
                return fail(x, 2, "--roi '%s': expected 1 to 3 comma-separated integers, e.g. 96,96,96", val);
            for (int k = 0; k < o->n_roi; k++)
                if (o->roi[k] > ((int64_t)1 << 31)) return fail(x, 2, "--roi '%s': too large", val);
        } else if (!strcmp(name, "--overlap")) {
            if (parse_list_f64(val, o->overlap, &o->n_overlap))
                return fail(x, 2, "--overlap '%s': expected 1 to 3 comma-separated numbers", val);
            for (int k = 0; k < o->n_overlap; k++)
                if (!(o->overlap[k] >= 0.0 && o->overlap[k] < 1.0))
                    return fail(x, 2, "--overlap '%s': each value must be in [0, 1)", val);
        } else if (!strcmp(name, "--sigma-scale")) {
            if (parse_list_f64(val, o->sigma, &o->n_sigma))
                return fail(x, 2, "--sigma-scale '%s': expected 1 to 3 comma-separated numbers", val);
            for (int k = 0; k < o->n_sigma; k++)
                if (!(o->sigma[k] > 0.0) || !isfinite(o->sigma[k]))
                    return fail(x, 2, "--sigma-scale '%s': each value must be finite and > 0", val);
        } else if (!strcmp(name, "--mode")) {
            if (!strcmp(val, "constant")) o->mode = SWI_BLEND_CONSTANT;
            else if (!strcmp(val, "gaussian")) o->mode = SWI_BLEND_GAUSSIAN;
            else return fail(x, 2, "--mode '%s': expected constant or gaussian", val);
        } else if (!strcmp(name, "--padding-mode")) {
            int m = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(val, pad_names[k])) m = k;
            if (m < 0) return fail(x, 2, "--padding-mode '%s': expected constant, reflect, replicate or circular", val);
            o->pad_mode = m;
        } else if (!strcmp(name, "--cval")) {
            char *end;
            errno = 0;
            o->cval = strtod(val, &end);
            if (end == val || *end || errno || !isfinite(o->cval))
                return fail(x, 2, "--cval '%s': expected a finite number", val);
        } else {
            return fail(x, 2, "unknown option '%s' (see --help)", name);
        }
    }
    if (!o->model) return fail(x, 2, "--model is required (see --help)");
    if (!o->output) return fail(x, 2, "--output is required (see --help)");
    if (!o->n_size && !o->dynamic) return fail(x, 2, "--size D,H,W (or --dynamic) is required");
    if (o->n_size && o->dynamic) return fail(x, 2, "--size and --dynamic exclude each other");
    if (o->unroll && o->dynamic) return fail(x, 2, "--unroll needs --size: a dynamic grid needs loops");
    if (o->unroll && o->per_image) return fail(x, 2, "--unroll and --per-image exclude each other");
    return 0;
}

/* Broadcast a 1-value list to d values; error when the count is neither 1 nor d. */
static int fit_list(X *x, const char *opt, int n, int d) {
    if (n == 1 || n == d) return 0;
    return fail(x, 2, "%s has %d values but the network has %d spatial dims", opt, n, d);
}

/* ---- the network --------------------------------------------------------------------- */
static int tensor_is_external(const Onnx__TensorProto *t) {
    return t && ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
                 t->n_external_data > 0);
}

static const char *external_in_graph(const Onnx__GraphProto *g);

static const char *external_in_node(const Onnx__NodeProto *n) {
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__AttributeProto *at = n->attribute[a];
        if (tensor_is_external(at->t)) return at->t->name && *at->t->name ? at->t->name : n->name;
        for (size_t k = 0; k < at->n_tensors; k++)
            if (tensor_is_external(at->tensors[k])) return n->name;
        if (at->sparse_tensor && tensor_is_external(at->sparse_tensor->values)) return n->name;
        const char *s;
        if (at->g && (s = external_in_graph(at->g))) return s;
        for (size_t k = 0; k < at->n_graphs; k++)
            if ((s = external_in_graph(at->graphs[k]))) return s;
    }
    return NULL;
}

static const char *external_in_graph(const Onnx__GraphProto *g) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (tensor_is_external(g->initializer[i]))
            return g->initializer[i]->name ? g->initializer[i]->name : "(unnamed)";
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        if (tensor_is_external(g->sparse_initializer[i]->values) ||
            tensor_is_external(g->sparse_initializer[i]->indices))
            return "(a sparse initializer)";
    for (size_t i = 0; i < g->n_node; i++) {
        const char *s = external_in_node(g->node[i]);
        if (s) return s;
    }
    return NULL;
}

static char *pfx(arena *A, const char *p, char *s) {
    return (!s || !*s) ? s : arena_printf(A, "%s%s", p, s);
}

/* Prefix every value, node and initializer name of g (and of its subgraphs), so the
 * network cannot clash with the pipeline's names. A uniform prefix keeps every
 * reference (including outer-scope ones from subgraphs) consistent. */
static void rename_graph(arena *A, Onnx__GraphProto *g, const char *p) {
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) n->input[k] = pfx(A, p, n->input[k]);
        for (size_t k = 0; k < n->n_output; k++) n->output[k] = pfx(A, p, n->output[k]);
        n->name = pfx(A, p, n->name);
        for (size_t a = 0; a < n->n_attribute; a++) {
            Onnx__AttributeProto *at = n->attribute[a];
            if (at->g) rename_graph(A, at->g, p);
            for (size_t k = 0; k < at->n_graphs; k++) rename_graph(A, at->graphs[k], p);
        }
    }
    for (size_t i = 0; i < g->n_input; i++) g->input[i]->name = pfx(A, p, g->input[i]->name);
    for (size_t i = 0; i < g->n_output; i++) g->output[i]->name = pfx(A, p, g->output[i]->name);
    for (size_t i = 0; i < g->n_value_info; i++) g->value_info[i]->name = pfx(A, p, g->value_info[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++) g->initializer[i]->name = pfx(A, p, g->initializer[i]->name);
    for (size_t i = 0; i < g->n_sparse_initializer; i++) {
        Onnx__SparseTensorProto *s = g->sparse_initializer[i];
        if (s->values) s->values->name = pfx(A, p, s->values->name);
        if (s->indices) s->indices->name = pfx(A, p, s->indices->name);
    }
    for (size_t i = 0; i < g->n_quantization_annotation; i++) {
        Onnx__TensorAnnotation *q = g->quantization_annotation[i];
        q->tensor_name = pfx(A, p, q->tensor_name);
        for (size_t k = 0; k < q->n_quant_parameter_tensor_names; k++)
            q->quant_parameter_tensor_names[k]->value = pfx(A, p, q->quant_parameter_tensor_names[k]->value);
    }
}

static int is_float_type(int t) {
    return t == OX_FLOAT || t == OX_FLOAT16 || t == OX_DOUBLE || t == OX_BFLOAT16;
}

/* Read a tensor value's elem type and shape; -1 dims where not fixed. */
static int read_tensor_vi(const Onnx__ValueInfoProto *vi, int *elem, int *rank, int64_t *dims,
                          const char **params, int maxrank) {
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) return -1;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    *elem = tt->has_elem_type ? tt->elem_type : 0;
    if (!tt->shape) {
        *rank = -1;
        return 0;
    }
    *rank = (int)tt->shape->n_dim;
    for (int k = 0; k < *rank && k < maxrank; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        dims[k] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : -1;
        if (params)
            params[k] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param : NULL;
    }
    return 0;
}

static int inspect_network(X *x) {
    netinfo *ni = &x->ni;
    const opts *o = &x->o;
    Onnx__ModelProto *m = ni->m;
    Onnx__GraphProto *g = m->graph;

    const char *ext = external_in_graph(g);
    for (size_t f = 0; !ext && f < m->n_functions; f++)
        for (size_t i = 0; !ext && i < m->functions[f]->n_node; i++) ext = external_in_node(m->functions[f]->node[i]);
    if (ext)
        return fail(x, 1,
                    "%s keeps its weights in external data files (tensor '%s'): not supported; "
                    "save the network with its weights inside the model, e.g. in Python "
                    "onnx.save(onnx.load(path), out, save_as_external_data=False)",
                    o->model, ext);

    /* default-domain opset */
    ni->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx")) ni->opset = (int)m->opset_import[i]->version;
    }
    if (ni->opset < 0) return fail(x, 1, "%s imports no ai.onnx opset", o->model);
    if (ni->opset < 11)
        return fail(x, 1,
                    "%s uses ai.onnx opset %d; the exporter needs opset 11 or newer "
                    "(convert it, e.g. onnx.version_converter.convert_version(model, 17))",
                    o->model, ni->opset);

    /* the one real input: graph inputs that are not initializers */
    const Onnx__ValueInfoProto *in = NULL;
    int n_real = 0;
    char names[512] = "";
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = g->input[i]->name ? g->input[i]->name : "";
        int is_init = 0;
        for (size_t k = 0; k < g->n_initializer && !is_init; k++)
            is_init = g->initializer[k]->name && !strcmp(g->initializer[k]->name, nm);
        if (is_init) continue;
        n_real++;
        in = g->input[i];
        size_t len = strlen(names);
        if (len < sizeof names - 64) snprintf(names + len, sizeof names - len, "%s'%s'", len ? ", " : "", nm);
    }
    if (n_real != 1)
        return fail(x, 1, "%s has %d inputs%s%s: exactly one image input [n, C, *roi] is supported", o->model,
                    n_real, n_real ? " " : "", names);
    if (!in->name || !*in->name) return fail(x, 1, "%s: the input has no name", o->model);
    int rank;
    int64_t dims[8];
    const char *params[8];
    if (read_tensor_vi(in, &ni->in_type, &rank, dims, params, 8) != 0)
        return fail(x, 1, "%s: input '%s' is not a tensor", o->model, in->name);
    if (rank < 0) return fail(x, 1, "%s: input '%s' has no shape; its rank is needed", o->model, in->name);
    if (rank < 3 || rank > MAXD + 2)
        return fail(x, 1, "%s: input '%s' has rank %d; expected [n, C, *roi] with 1 to 3 spatial dims", o->model,
                    in->name, rank);
    if (!is_float_type(ni->in_type))
        return fail(x, 1, "%s: input '%s' is %s; float32, float16, bfloat16 or float64 is supported", o->model,
                    in->name, ox_type_name(ni->in_type));
    ni->dims = rank - 2;
    for (int k = 0; k < rank; k++) {
        ni->in_dim[k] = dims[k];
        ni->in_param[k] = params[k];
    }
    ni->in_name = in->name;
    if (ni->in_dim[0] == 1 || o->per_image) ni->per_image = 1;
    if (o->unroll && ni->in_dim[0] == 1)
        return fail(x, 1, "--unroll runs all windows as one batch: the network's batch is fixed at 1");
    else if (ni->in_dim[0] > 1)
        return fail(x, 1, "%s: input '%s' has a fixed batch of %lld; only 1 or a dynamic batch is supported",
                    o->model, in->name, (long long)ni->in_dim[0]);

    /* the output */
    ni->n_outputs = (int)g->n_output;
    if (g->n_output == 0) return fail(x, 1, "%s has no outputs", o->model);
    ni->out_index = 0;
    if (o->head) {
        ni->out_index = -1;
        for (size_t i = 0; i < g->n_output; i++)
            if (g->output[i]->name && !strcmp(g->output[i]->name, o->head)) ni->out_index = (int)i;
        if (ni->out_index < 0) {
            char *end;
            long v = strtol(o->head, &end, 10);
            if (end != o->head && !*end && v >= 0 && v < (long)g->n_output) ni->out_index = (int)v;
        }
        if (ni->out_index < 0) return fail(x, 2, "--head '%s': the network has no such output", o->head);
    }
    const Onnx__ValueInfoProto *out = g->output[ni->out_index];
    if (!out->name || !*out->name) return fail(x, 1, "%s: output %d has no name", o->model, ni->out_index);
    int orank;
    if (read_tensor_vi(out, &ni->out_type, &orank, dims, NULL, 8) != 0)
        return fail(x, 1, "%s: output '%s' is not a tensor", o->model, out->name);
    if (!is_float_type(ni->out_type))
        return fail(x, 1, "%s: output '%s' is %s; a floating-point output is needed", o->model, out->name,
                    ox_type_name(ni->out_type));
    if (orank != rank)
        return fail(x, 1, "%s: output '%s' has rank %d; expected [n, classes, *roi] (rank %d)", o->model,
                    out->name, orank, rank);
    for (int k = 0; k < orank; k++) ni->out_dim[k] = dims[k];
    if (ni->out_dim[1] < 1)
        return fail(x, 1, "%s: output '%s' must declare a fixed number of classes (dim 1)", o->model, out->name);
    ni->out_name = out->name;
    return 0;
}

/* ---- element conversions ------------------------------------------------------------ */
static uint16_t f32_to_f16(float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    uint32_t sign = (v >> 16) & 0x8000u, e = (v >> 23) & 0xffu, m = v & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 0x1f) return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) {
        if (he < -10) return (uint16_t)sign;
        m |= 0x800000u;
        int shift = 14 - he;
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = sign | ((uint32_t)he << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    if ((v & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v >> 16) | 0x40);
    v += 0x7fffu + ((v >> 16) & 1);
    return (uint16_t)(v >> 16);
}

/* A scalar of element type t holding v. */
static const char *scalar_of_type(gbuild *g, int t, double v) {
    unsigned char buf[8];
    if (t == OX_FLOAT) { float f = (float)v; memcpy(buf, &f, 4); }
    else if (t == OX_DOUBLE) memcpy(buf, &v, 8);
    else if (t == OX_FLOAT16) { uint16_t h = f32_to_f16((float)v); memcpy(buf, &h, 2); }
    else { uint16_t h = f32_to_bf16((float)v); memcpy(buf, &h, 2); }
    return gb_init_tensor(g, NULL, t, 0, NULL, buf);
}

/* ---- graph helpers -------------------------------------------------------------- */
static const char *I64(gbuild *g, int n, const int64_t *v) { return gb_i64(g, NULL, n, v); }
static const char *I64_1(gbuild *g, int64_t a) { return gb_i64(g, NULL, 1, &a); }
static const char *I64_0(gbuild *g, int64_t a) { return gb_i64_scalar(g, NULL, a); }
static const char *I64_zeros(gbuild *g, int n) {
    int64_t z[8] = {0};
    return gb_i64(g, NULL, n, z);
}

static const char *cast_to(gbuild *g, const char *v, int to, const char *out) {
    Onnx__NodeProto *n = OP(g, "Cast", out, v);
    gb_attr_i(g, n, "to", to);
    return OUT(n);
}

static const char *min_i64(gbuild *g, const char *a, const char *b) {
    return V(g, "Where", V(g, "Less", a, b), a, b);
}

static const char *scalar_of(gbuild *g, const char *vec1) {
    return V(g, "Reshape", vec1, I64(g, 0, NULL));
}

/* a constant tensor filled with a value, of shape `shape` (an int64 vector) */
static const char *filled(gbuild *g, const char *shape, int t, double v) {
    Onnx__NodeProto *n = OP(g, "ConstantOfShape", NULL, shape);
    void *p;
    int64_t one = 1;
    Onnx__TensorProto *tv = gb_tensor(g->A, NULL, t, 1, &one, &p);
    if (t == OX_FLOAT) { float f = (float)v; memcpy(p, &f, 4); }
    else if (t == OX_DOUBLE) memcpy(p, &v, 8);
    else if (t == OX_FLOAT16) { uint16_t h = f32_to_f16((float)v); memcpy(p, &h, 2); }
    else if (t == OX_BFLOAT16) { uint16_t h = f32_to_bf16((float)v); memcpy(p, &h, 2); }
    else if (t == OX_INT64) { int64_t i = (int64_t)v; memcpy(p, &i, 8); }
    gb_attr_t(g, n, "value", tv);
    return OUT(n);
}

/* ---- the pipeline -------------------------------------------------------------------- */
typedef struct layout {
    int d;
    int64_t roi[MAXD], size[MAXD], padded[MAXD], before[MAXD], after[MAXD], step[MAXD];
    double overlap[MAXD], sigma[MAXD];
    int64_t n_win[MAXD], W;
    int64_t *starts[MAXD];
    int any_pad;
    float *wmap;      /* [*roi] */
    int64_t roi_vox;
} layout;

static int64_t count_vox(const layout *L) {
    int64_t v = 1;
    for (int k = 0; k < L->d; k++) v *= L->size[k];
    return v;
}

static int plan_layout(X *x, layout *L) {
    const opts *o = &x->o;
    netinfo *ni = &x->ni;
    int d = ni->dims;
    memset(L, 0, sizeof *L);
    L->d = d;
    if (o->n_size && o->n_size != d)
        return fail(x, 2, "--size has %d values but the network has %d spatial dims (input rank %d)", o->n_size, d,
                    d + 2);
    if (o->n_roi && fit_list(x, "--roi", o->n_roi, d)) return -1;
    if (o->n_overlap && fit_list(x, "--overlap", o->n_overlap, d)) return -1;
    if (o->n_sigma && fit_list(x, "--sigma-scale", o->n_sigma, d)) return -1;
    for (int k = 0; k < d; k++) {
        int64_t net_r = ni->in_dim[2 + k];
        int64_t r = o->n_roi ? o->roi[o->n_roi == 1 ? 0 : k] : net_r;
        if (!o->n_roi && net_r < 1)
            return fail(x, 2, "the network's input spatial dim %d is not fixed: give --roi", k);
        if (r <= 0) {
            if (o->dynamic)
                return fail(x, 2, "--roi %lld along dim %d ('whole volume') needs --size, not --dynamic",
                            (long long)r, k);
            r = o->size[k];
        }
        if (net_r >= 1 && r != net_r)
            return fail(x, 2, "--roi: window dim %d is %lld but the network's input is fixed at %lld", k,
                        (long long)r, (long long)net_r);
        int64_t out_r = ni->out_dim[2 + k];
        if (out_r >= 1 && out_r != r)
            return fail(x, 1,
                        "the network's output spatial dim %d is %lld, not the window's %lld: heads of another "
                        "resolution are not supported by the exporter",
                        k, (long long)out_r, (long long)r);
        L->roi[k] = r;
        L->overlap[k] = o->n_overlap ? o->overlap[o->n_overlap == 1 ? 0 : k] : 0.25;
        L->sigma[k] = o->n_sigma ? o->sigma[o->n_sigma == 1 ? 0 : k] : 0.125;
        int64_t st = (int64_t)((double)r * (1.0 - L->overlap[k]));
        L->step[k] = st > 0 ? st : 1;
    }
    L->roi_vox = 1;
    for (int k = 0; k < d; k++) {
        if (L->roi_vox > ((int64_t)1 << 32) / L->roi[k]) return fail(x, 2, "--roi: the window is too large");
        L->roi_vox *= L->roi[k];
    }
    if (!o->dynamic) {
        L->W = 1;
        for (int k = 0; k < d; k++) {
            int64_t s = o->size[k], r = L->roi[k];
            L->size[k] = s;
            L->padded[k] = s > r ? s : r;
            L->before[k] = (L->padded[k] - s) / 2;
            L->after[k] = L->padded[k] - s - L->before[k];
            if (L->padded[k] > s) L->any_pad = 1;
            if (o->pad_mode == SWI_PAD_REFLECT && L->after[k] >= s)
                return fail(x, 2,
                            "--padding-mode reflect needs a pad smaller than the volume: dim %d has size %lld and "
                            "window %lld (pad %lld after)",
                            k, (long long)s, (long long)r, (long long)L->after[k]);
            int64_t n = 0, m = 0;
            if (swi_window_starts(NULL, s, r, L->overlap[k], NULL, 0, &n) != SWI_OK || n < 1)
                return fail(x, 2, "invalid window layout along dim %d", k);
            L->starts[k] = arena_alloc(&x->A, (size_t)n * sizeof(int64_t));
            if (swi_window_starts(NULL, s, r, L->overlap[k], L->starts[k], n, &m) != SWI_OK || m != n)
                return fail(x, 1, "swi_window_starts failed along dim %d", k);
            L->n_win[k] = n;
            if (L->W > ((int64_t)1 << 40) / n) return fail(x, 2, "too many windows");
            L->W *= n;
        }
    }
    if (!o->dynamic && (double)count_vox(L) * 4.0 > (double)INT32_MAX)
        return fail(x, 2,
                    "--size: the count map alone would be %.0f bytes, over protobuf's 2 GiB limit for one "
                    "model: use --dynamic, which computes it in the graph",
                    (double)count_vox(L) * 4.0);
    /* weights, in the library's exact float32 formula */
    L->wmap = arena_alloc(&x->A, (size_t)L->roi_vox * sizeof(float));
    swi_status st = swi_weights(NULL, (swi_blend)o->mode, d, L->roi, L->sigma, L->wmap);
    if (st != SWI_OK) return fail(x, 2, "swi_weights failed: %s", swi_status_name(st));
    return 0;
}

/* count map over the cropped volume [*size]: the sum of the weights of every window
 * covering a voxel, accumulated window by window in float32 like the reference. */
static float *count_map(X *x, const layout *L) {
    int64_t P[3] = {1, 1, 1}, S[3] = {1, 1, 1}, B[3] = {0, 0, 0}, R[3] = {1, 1, 1}, N[3] = {1, 1, 1};
    const int64_t *st[3];
    static const int64_t zero = 0;
    int lead = 3 - L->d;
    for (int a = 0; a < 3; a++) st[a] = &zero;
    for (int k = 0; k < L->d; k++) {
        P[lead + k] = L->padded[k];
        S[lead + k] = L->size[k];
        B[lead + k] = L->before[k];
        R[lead + k] = L->roi[k];
        N[lead + k] = L->n_win[k];
        st[lead + k] = L->starts[k];
    }
    float *cnt = arena_alloc(&x->A, (size_t)(P[0] * P[1] * P[2]) * sizeof(float));
    for (int64_t a = 0; a < N[0]; a++)
        for (int64_t b = 0; b < N[1]; b++)
            for (int64_t c = 0; c < N[2]; c++) {
                const float *w = L->wmap;
                for (int64_t i = 0; i < R[0]; i++)
                    for (int64_t j = 0; j < R[1]; j++) {
                        float *row = cnt + ((st[0][a] + i) * P[1] + st[1][b] + j) * P[2] + st[2][c];
                        for (int64_t k = 0; k < R[2]; k++) row[k] += *w++;
                    }
            }
    float *crop = arena_alloc(&x->A, (size_t)(S[0] * S[1] * S[2]) * sizeof(float));
    float *q = crop;
    for (int64_t i = 0; i < S[0]; i++)
        for (int64_t j = 0; j < S[1]; j++) {
            memcpy(q, cnt + ((B[0] + i) * P[1] + B[1] + j) * P[2] + B[2], (size_t)S[2] * sizeof(float));
            q += S[2];
        }
    return crop;
}

/* index map of a non-constant padding along one axis: padded index -> source index */
static void pad_index_map(int mode, int64_t S, int64_t before, int64_t P, int64_t *idx) {
    for (int64_t p = 0; p < P; p++) {
        int64_t i = p - before, j;
        if (mode == SWI_PAD_REPLICATE) j = i < 0 ? 0 : i >= S ? S - 1 : i;
        else if (mode == SWI_PAD_REFLECT) {
            j = i < 0 ? -i : i;
            j = (S - 1) - llabs((S - 1) - j);
        } else {
            j = i % S;
            if (j < 0) j += S;
        }
        idx[p] = j;
    }
}

static int ir_for_opset(int opset) {
    if (opset <= 11) return 6;
    if (opset <= 14) return 7;
    if (opset <= 18) return 8;
    if (opset <= 20) return 9;
    if (opset <= 22) return 10;
    return 11;
}


/* ---- nested window loops ----------------------------------------------------------
 * One Loop per spatial axis, outermost axis 0. The loop of axis k runs over t_k with the
 * windows' starts along axes < k fixed by the enclosing loops and carries
 *     acc_k [Nb, K, r_0..r_{k-1}, P_k..P_{d-1}]
 * (the slab of the current window row: window-sized along the outer axes, padded-size
 * along the others). Each iteration gets the result of the loop of axis k+1 (or, at
 * the bottom, the weighted prediction of one window [Nb, K, *roi]), pads it along axis
 * k to its place and adds it. So a window costs O(its row), a row O(its slab), and only
 * n_0 additions touch the whole volume -- instead of one whole-volume pass per window.
 * With count = 1 the same structure accumulates the weight map alone (the count map of
 * --dynamic); its accumulators have no [Nb, K] dims. */
typedef struct nest {
    X *x;
    const layout *L;
    gbuild *M;                     /* the main graph: constants and shared values live there */
    int d, dyn, count, gaussian, Tout;
    int64_t K;
    const char *src;               /* the (padded) images the windows are sliced from */
    const char *nb;                /* [1]: batch of the accumulators */
    const char *c_roi, *c_axes_sp, *c_wmap, *c_true, *zero1;
    const char *trip[MAXD];        /* scalar trip count of each axis' loop */
    const char *Pk[MAXD], *Pmr[MAXD]; /* [1]: P_k and P_k - r_k */
    const char *starts_k[MAXD];    /* --size: window starts along axis k [n_k] */
    const char *s1[MAXD];          /* [1]: the current window's start along axis k */
    Onnx__GraphProto *ng;          /* the network (already renamed) */
    const char *net_in, *net_out;
} nest;

static const char *concat0(gbuild *g, int n, const char *const *in) {
    Onnx__NodeProto *c = gb_node(g, "Concat", NULL, n, in);
    gb_attr_i(g, c, "axis", 0);
    return OUT(c);
}

/* the weighted prediction of the current window, [Nb, K, *roi] float32 */
static const char *nest_window(nest *ns, gbuild *g) {
    if (ns->count) return ns->c_wmap;
    arena *A = &ns->x->A;
    const char *st = ns->d == 1 ? ns->s1[0] : concat0(g, ns->d, ns->s1);
    const char *en = V(g, "Add", st, ns->c_roi);
    OP(g, "Slice", ns->net_in, ns->src, st, en, ns->c_axes_sp);
    for (size_t i = 0; i < ns->ng->n_node; i++) arr_push(A, (void ***)&g->node, &g->n_node, &g->cap_node, ns->ng->node[i]);
    for (size_t i = 0; i < ns->ng->n_value_info; i++) gb_add_vi(g, ns->ng->value_info[i]);
    const char *y = ns->net_out;
    if (ns->Tout != OX_FLOAT) y = cast_to(g, y, OX_FLOAT, NULL);
    if (ns->gaussian) y = V(g, "Mul", y, ns->c_wmap);
    return y;
}

/* zeros of the accumulator of axis k's loop, built in the main graph */
static const char *nest_zeros(nest *ns, int k) {
    gbuild *M = ns->M;
    const char *parts[MAXD + 2];
    int n = 0;
    if (!ns->count) {
        parts[n++] = ns->nb;
        parts[n++] = I64_1(M, ns->K);
    }
    for (int j = 0; j < ns->d; j++) parts[n++] = j < k ? I64_1(M, ns->L->roi[j]) : ns->Pk[j];
    return filled(M, concat0(M, n, parts), OX_FLOAT, 0.0);
}

static const char *nest_level(nest *ns, gbuild *g, int k) {
    if (k == ns->d) return nest_window(ns, g);
    X *x = ns->x;
    arena *A = &x->A;
    gbuild *M = ns->M;
    const char *tag = ns->count ? "count" : "acc";
    int id = (*g->counter)++;
    const char *t = arena_printf(A, "swi/%s%d_t_%d", tag, k, id), *ci = arena_printf(A, "swi/%s%d_cond_%d", tag, k, id);
    const char *ai = arena_printf(A, "swi/%s%d_in_%d", tag, k, id), *ao = arena_printf(A, "swi/%s%d_out_%d", tag, k, id);
    const char *co = arena_printf(A, "swi/%s%d_cond_out_%d", tag, k, id);
    const char *res = arena_printf(A, "swi/%s%d_%d", tag, k, id);
    const char *init = nest_zeros(ns, k);

    gbuild B;
    gb_init(&B, A, &x->counter);
    const char *t1 = V(&B, "Reshape", t, I64_1(M, 1));
    if (!ns->dyn) {
        Onnx__NodeProto *gn = OP(&B, "Gather", NULL, ns->starts_k[k], t1);
        gb_attr_i(&B, gn, "axis", 0);
        ns->s1[k] = OUT(gn);
    } else {
        ns->s1[k] = min_i64(&B, V(&B, "Mul", t1, I64_1(M, ns->L->step[k])), ns->Pmr[k]);
    }
    const char *s1 = ns->s1[k];
    const char *inner = nest_level(ns, &B, k + 1);
    const char *e1 = V(&B, "Sub", ns->Pmr[k], s1);
    int rank = ns->count ? ns->d : ns->d + 2, a = ns->count ? k : 2 + k;
    const char *pv[2 * (MAXD + 2)];
    for (int i = 0; i < rank; i++) {
        pv[i] = i == a ? s1 : ns->zero1;
        pv[rank + i] = i == a ? e1 : ns->zero1;
    }
    Onnx__NodeProto *pn = OP(&B, "Pad", NULL, inner, concat0(&B, 2 * rank, pv));
    gb_attr_s(&B, pn, "mode", "constant");
    OP(&B, "Add", ao, ai, OUT(pn));
    OP(&B, "Identity", co, ci);
    Onnx__ValueInfoProto *bin[3] = {gb_value_info(A, t, OX_INT64, 0, NULL, NULL),
                                    gb_value_info(A, ci, OX_BOOL, 0, NULL, NULL),
                                    gb_value_info(A, ai, OX_FLOAT, -1, NULL, NULL)};
    Onnx__ValueInfoProto *bout[2] = {gb_value_info(A, co, OX_BOOL, 0, NULL, NULL),
                                     gb_value_info(A, ao, OX_FLOAT, -1, NULL, NULL)};
    Onnx__GraphProto *body = gb_graph(&B, arena_printf(A, "swi_%s_axis%d", tag, k), 3, bin, 2, bout);
    Onnx__NodeProto *loop = OP(g, "Loop", res, ns->trip[k], ns->c_true, init);
    gb_attr_g(g, loop, "body", body);
    return res;
}


/* ---- --unroll: no Loop ----------------------------------------------------------------
 * All windows, sliced from the padded images at their constant starts and concatenated
 * along the batch (window-major: row w*N + n), go through the network once; the
 * weighted predictions are then folded exactly like the nested loops do, unrolled:
 * along the last axis into rows, rows into slabs, slabs into the volume. */
typedef struct unrolled {
    nest *ns;
    const char *y;       /* [W*N, K, *roi] weighted float32 */
    const char *Nv;      /* [1] */
    int64_t stride[MAXD];
} unrolled;

static const char *unroll_fold(unrolled *u, int k, int64_t w) {
    nest *ns = u->ns;
    gbuild *M = ns->M;
    const layout *L = ns->L;
    int d = ns->d;
    if (k == d) {
        if (L->W == 1) return u->y;
        const char *b = V(M, "Mul", I64_1(M, w), u->Nv), *e = V(M, "Mul", I64_1(M, w + 1), u->Nv);
        return V(M, "Slice", u->y, b, e, ns->zero1);
    }
    const char *acc = NULL;
    for (int64_t t = 0; t < L->n_win[k]; t++) {
        const char *inner = unroll_fold(u, k + 1, w + t * u->stride[k]);
        int64_t s = L->starts[k][t], e = L->padded[k] - L->roi[k] - s;
        const char *p = inner;
        if (L->padded[k] != L->roi[k]) {
            int64_t pv[2 * (MAXD + 2)] = {0};
            pv[2 + k] = s;
            pv[d + 2 + 2 + k] = e;
            Onnx__NodeProto *pn = OP(M, "Pad", NULL, inner, I64(M, 2 * (d + 2), pv));
            gb_attr_s(M, pn, "mode", "constant");
            p = OUT(pn);
        }
        acc = acc ? V(M, "Add", acc, p) : p;
    }
    return acc;
}

static const char *build_unrolled(nest *ns, const char *Nv) {
    X *x = ns->x;
    arena *A = &x->A;
    gbuild *M = ns->M;
    const layout *L = ns->L;
    int d = ns->d;
    const char **wins = arena_alloc(A, (size_t)L->W * sizeof *wins);
    int64_t t[MAXD] = {0};
    for (int64_t w = 0; w < L->W; w++) {
        int64_t st[MAXD], en[MAXD];
        for (int k = 0; k < d; k++) {
            st[k] = L->starts[k][t[k]];
            en[k] = st[k] + L->roi[k];
        }
        wins[w] = V(M, "Slice", ns->src, I64(M, d, st), I64(M, d, en), ns->c_axes_sp);
        for (int k = d - 1; k >= 0; k--) {
            if (++t[k] < L->n_win[k]) break;
            t[k] = 0;
        }
    }
    if (L->W == 1) OP(M, "Identity", ns->net_in, wins[0]);
    else gb_attr_i(M, gb_node(M, "Concat", ns->net_in, (int)L->W, wins), "axis", 0);
    for (size_t i = 0; i < ns->ng->n_node; i++) arr_push(A, (void ***)&M->node, &M->n_node, &M->cap_node, ns->ng->node[i]);
    for (size_t i = 0; i < ns->ng->n_value_info; i++) gb_add_vi(M, ns->ng->value_info[i]);
    const char *y = ns->net_out;
    if (ns->Tout != OX_FLOAT) y = cast_to(M, y, OX_FLOAT, NULL);
    if (ns->gaussian) y = V(M, "Mul", y, ns->c_wmap);
    unrolled u = {ns, y, Nv, {0}};
    int64_t st = 1;
    for (int k = d - 1; k >= 0; k--) {
        u.stride[k] = st;
        st *= L->n_win[k];
    }
    return unroll_fold(&u, 0, 0);
}

static Onnx__ModelProto *build_pipeline(X *x, const layout *L) {
    arena *A = &x->A;
    const opts *o = &x->o;
    netinfo *ni = &x->ni;
    Onnx__ModelProto *net = ni->m;
    Onnx__GraphProto *ng = net->graph;
    const int d = L->d, dyn = o->dynamic, per_image = ni->per_image;
    const int Tin = ni->in_type, Tout = ni->out_type;
    const int64_t K = ni->out_dim[1];

    gbuild M;
    gb_init(&M, A, &x->counter);

    /* the network, renamed */
    const char *P_ = "net/";
    rename_graph(A, ng, P_);
    const char *net_in = arena_printf(A, "%s%s", P_, ni->in_name);
    const char *net_out = arena_printf(A, "%s%s", P_, ni->out_name);

    int64_t axes_sp[MAXD], axes_cnt[MAXD];
    for (int k = 0; k < d; k++) {
        axes_sp[k] = 2 + k;
        axes_cnt[k] = k;
    }
    const char *c_axes_sp = I64(&M, d, axes_sp);
    const char *c_roi = I64(&M, d, L->roi);
    int64_t wdims[MAXD];
    for (int k = 0; k < d; k++) wdims[k] = L->roi[k];
    const char *c_wmap = gb_init_tensor(&M, "swi/weights", OX_FLOAT, d, wdims, L->wmap);

    /* ---- sizes ---- */
    const char *image = "image";
    const char *shp = V(&M, "Shape", image);
    const char *Nv = V(&M, "Slice", shp, I64_1(&M, 0), I64_1(&M, 1), I64_1(&M, 0)); /* [1] */
    const char *Sv = NULL, *Pv, *befv = NULL, *aftv = NULL, *nv = NULL;
    if (dyn) {
        Sv = V(&M, "Slice", shp, I64_1(&M, 2), I64_1(&M, 2 + d), I64_1(&M, 0));
        Pv = V(&M, "Where", V(&M, "Less", Sv, c_roi), c_roi, Sv);
        const char *padv = V(&M, "Sub", Pv, Sv);
        int64_t two[MAXD] = {2, 2, 2}, ones[MAXD] = {1, 1, 1}, stepm1[MAXD];
        for (int k = 0; k < d; k++) stepm1[k] = L->step[k] - 1;
        befv = V(&M, "Div", padv, I64(&M, d, two));
        aftv = V(&M, "Sub", padv, befv);
        nv = V(&M, "Add", I64(&M, d, ones),
               V(&M, "Div", V(&M, "Add", V(&M, "Sub", Pv, c_roi), I64(&M, d, stepm1)), I64(&M, d, L->step)));
    } else {
        Pv = I64(&M, d, L->padded);
    }

    /* ---- padding ---- */
    const char *padded = image;
    if (dyn || L->any_pad) {
        if (o->pad_mode == SWI_PAD_CONSTANT) {
            const char *pads;
            if (dyn) {
                Onnx__NodeProto *c = OP(&M, "Concat", NULL, I64_zeros(&M, 2), befv, I64_zeros(&M, 2), aftv);
                gb_attr_i(&M, c, "axis", 0);
                pads = OUT(c);
            } else {
                int64_t pv[2 * (MAXD + 2)] = {0};
                for (int k = 0; k < d; k++) {
                    pv[2 + k] = L->before[k];
                    pv[(d + 2) + 2 + k] = L->after[k];
                }
                pads = I64(&M, 2 * (d + 2), pv);
            }
            Onnx__NodeProto *p = OP(&M, "Pad", "swi/padded", image, pads, scalar_of_type(&M, Tin, o->cval));
            gb_attr_s(&M, p, "mode", "constant");
            padded = OUT(p);
        } else {
            for (int k = 0; k < d; k++) {
                const char *idx;
                if (dyn) {
                    const char *sel[3] = {I64_1(&M, k), I64_1(&M, k + 1), I64_1(&M, 0)};
                    const char *Pk = scalar_of(&M, V(&M, "Slice", Pv, sel[0], sel[1], sel[2]));
                    const char *Sk = scalar_of(&M, V(&M, "Slice", Sv, sel[0], sel[1], sel[2]));
                    const char *Bk = scalar_of(&M, V(&M, "Slice", befv, sel[0], sel[1], sel[2]));
                    const char *i = V(&M, "Sub", V(&M, "Range", I64_0(&M, 0), Pk, I64_0(&M, 1)), Bk);
                    const char *sm1 = V(&M, "Sub", Sk, I64_0(&M, 1));
                    if (o->pad_mode == SWI_PAD_REPLICATE) {
                        const char *z = I64_0(&M, 0);
                        const char *j = V(&M, "Where", V(&M, "Less", i, z), z, i);
                        idx = V(&M, "Where", V(&M, "Less", sm1, j), sm1, j);
                    } else if (o->pad_mode == SWI_PAD_REFLECT) {
                        idx = V(&M, "Sub", sm1, V(&M, "Abs", V(&M, "Sub", sm1, V(&M, "Abs", i))));
                    } else {
                        idx = V(&M, "Mod", i, Sk);
                    }
                } else {
                    if (L->padded[k] == L->size[k]) continue;
                    int64_t *im = arena_alloc(A, (size_t)L->padded[k] * sizeof(int64_t));
                    pad_index_map(o->pad_mode, L->size[k], L->before[k], L->padded[k], im);
                    idx = gb_i64(&M, arena_printf(A, "swi/pad_index_%d", k), (int)L->padded[k], im);
                }
                Onnx__NodeProto *gn = OP(&M, "Gather", NULL, padded, idx);
                gb_attr_i(&M, gn, "axis", 2 + k);
                padded = OUT(gn);
            }
        }
    }

    /* ---- the window loops ---- */
    unsigned char tru = 1;
    nest ns;
    memset(&ns, 0, sizeof ns);
    ns.x = x;
    ns.L = L;
    ns.M = &M;
    ns.d = d;
    ns.dyn = dyn;
    ns.gaussian = o->mode == SWI_BLEND_GAUSSIAN;
    ns.Tout = Tout;
    ns.K = K;
    ns.c_roi = c_roi;
    ns.c_axes_sp = c_axes_sp;
    ns.c_wmap = c_wmap;
    ns.c_true = gb_init_tensor(&M, "swi/true", OX_BOOL, 0, NULL, &tru);
    ns.zero1 = I64_1(&M, 0);
    ns.ng = ng;
    ns.net_in = net_in;
    ns.net_out = net_out;
    for (int k = 0; k < d; k++) {
        if (dyn) {
            const char *sel[3] = {I64_1(&M, k), I64_1(&M, k + 1), I64_1(&M, 0)};
            ns.trip[k] = scalar_of(&M, V(&M, "Slice", nv, sel[0], sel[1], sel[2]));
            ns.Pk[k] = V(&M, "Slice", Pv, sel[0], sel[1], sel[2]);
            ns.Pmr[k] = V(&M, "Sub", ns.Pk[k], I64_1(&M, L->roi[k]));
        } else {
            ns.trip[k] = I64_0(&M, L->n_win[k]);
            ns.Pk[k] = I64_1(&M, L->padded[k]);
            ns.Pmr[k] = I64_1(&M, L->padded[k] - L->roi[k]);
            if (!o->unroll)
                ns.starts_k[k] = gb_i64(&M, arena_printf(A, "swi/window_starts_%d", k), (int)L->n_win[k], L->starts[k]);
        }
    }
    const char *acc_full, *cnt_full = NULL;
    if (o->unroll) {
        ns.src = padded;
        acc_full = build_unrolled(&ns, Nv);
    } else if (!per_image) {
        ns.src = padded;
        ns.nb = Nv;
        acc_full = nest_level(&ns, &M, 0);
    } else {
        /* one image at a time: an outer loop over the images, each image's windows through
         * the nested loops with batch 1, its [1, K, *P] result added at its batch index */
        const char *it = "swi/image_n", *ci = "swi/image_cond", *ai = "swi/image_acc_in";
        gbuild I;
        gb_init(&I, A, &x->counter);
        const char *n1 = V(&I, "Reshape", it, I64_1(&M, 1));
        const char *n1p = V(&I, "Add", n1, I64_1(&M, 1));
        ns.src = V(&I, "Slice", padded, n1, n1p, I64_1(&M, 0));
        ns.nb = I64_1(&M, 1);
        const char *one = nest_level(&ns, &I, 0);
        const char *pv[2 * (MAXD + 2)];
        for (int i = 0; i < d + 2; i++) pv[i] = pv[d + 2 + i] = ns.zero1;
        pv[0] = n1;
        pv[d + 2] = V(&I, "Sub", Nv, n1p);
        Onnx__NodeProto *pn = OP(&I, "Pad", NULL, one, concat0(&I, 2 * (d + 2), pv));
        gb_attr_s(&I, pn, "mode", "constant");
        OP(&I, "Add", "swi/image_acc_out", ai, OUT(pn));
        OP(&I, "Identity", "swi/image_cond_out", ci);
        Onnx__ValueInfoProto *bin[3] = {gb_value_info(A, it, OX_INT64, 0, NULL, NULL),
                                        gb_value_info(A, ci, OX_BOOL, 0, NULL, NULL),
                                        gb_value_info(A, ai, OX_FLOAT, -1, NULL, NULL)};
        Onnx__ValueInfoProto *bout[2] = {gb_value_info(A, "swi/image_cond_out", OX_BOOL, 0, NULL, NULL),
                                         gb_value_info(A, "swi/image_acc_out", OX_FLOAT, -1, NULL, NULL)};
        Onnx__GraphProto *body = gb_graph(&I, "swi_images", 3, bin, 2, bout);
        ns.nb = Nv;
        const char *init = nest_zeros(&ns, 0);
        Onnx__NodeProto *loop = OP(&M, "Loop", "swi/acc", scalar_of(&M, Nv), ns.c_true, init);
        gb_attr_g(&M, loop, "body", body);
        acc_full = OUT(loop);
    }
    if (dyn) {
        ns.count = 1;
        cnt_full = nest_level(&ns, &M, 0);
    }

    /* ---- crop, normalize, cast ---- */
    const char *acc = acc_full, *cnt;
    if (dyn) {
        const char *endv = V(&M, "Add", befv, Sv);
        acc = V(&M, "Slice", acc, befv, endv, c_axes_sp);
        cnt = V(&M, "Slice", cnt_full, befv, endv, I64(&M, d, axes_cnt));
    } else {
        if (L->any_pad) {
            int64_t e[MAXD];
            for (int k = 0; k < d; k++) e[k] = L->before[k] + L->size[k];
            acc = V(&M, "Slice", acc, I64(&M, d, L->before), I64(&M, d, e), c_axes_sp);
        }
        cnt = gb_init_tensor(&M, "swi/count", OX_FLOAT, d, L->size, count_map(x, L));
    }
    const char *scores32 = OUT(OP(&M, "Div", Tout == OX_FLOAT ? "scores" : "swi/scores_f32", acc, cnt));
    if (Tout != OX_FLOAT) cast_to(&M, scores32, Tout, "scores");
    if (o->argmax) {
        Onnx__NodeProto *am = OP(&M, "ArgMax", NULL, scores32);
        gb_attr_i(&M, am, "axis", 1);
        gb_attr_i(&M, am, "keepdims", 0);
        cast_to(&M, OUT(am), OX_UINT8, "labels");
    }

    /* the network's weights, stored once in the outer graph */
    for (size_t i = 0; i < ng->n_initializer; i++) arr_push(A, (void ***)&M.init, &M.n_init, &M.cap_init, ng->initializer[i]);

    /* ---- graph inputs/outputs ---- */
    static const char *const sp_names[3][3] = {{"W"}, {"H", "W"}, {"D", "H", "W"}};
    int64_t idims[MAXD + 2], odims[MAXD + 2], ldims[MAXD + 1];
    const char *iparams[MAXD + 2], *oparams[MAXD + 2], *lparams[MAXD + 1];
    idims[0] = odims[0] = ldims[0] = -1;
    iparams[0] = oparams[0] = lparams[0] = "N";
    idims[1] = ni->in_dim[1];
    iparams[1] = ni->in_param[1] && *ni->in_param[1] ? arena_printf(A, "C_%s", ni->in_param[1]) : "C";
    odims[1] = K;
    oparams[1] = NULL;
    for (int k = 0; k < d; k++) {
        int64_t s = dyn ? -1 : L->size[k];
        idims[2 + k] = odims[2 + k] = ldims[1 + k] = s;
        iparams[2 + k] = oparams[2 + k] = lparams[1 + k] = sp_names[d - 1][k];
    }
    Onnx__ValueInfoProto *gin[1] = {gb_value_info(A, image, Tin, d + 2, idims, iparams)};
    Onnx__ValueInfoProto *gout[2];
    int ngout = 0;
    gout[ngout++] = gb_value_info(A, "scores", Tout, d + 2, odims, oparams);
    if (o->argmax) gout[ngout++] = gb_value_info(A, "labels", OX_UINT8, d + 1, ldims, lparams);
    Onnx__GraphProto *graph = gb_graph(&M, "swi_sliding_window", 1, gin, ngout, gout);
    graph->n_sparse_initializer = ng->n_sparse_initializer;
    graph->sparse_initializer = ng->sparse_initializer;
    graph->doc_string = arena_printf(A, "Sliding-window inference of '%s' (%s), exported by swi export %s",
                                     ng->name ? ng->name : "network", o->model, swi_version());

    /* ---- model ---- */
    Onnx__ModelProto *m = arena_alloc(A, sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    int ir = ir_for_opset(ni->opset);
    m->ir_version = net->ir_version > ir ? net->ir_version : ir;
    m->n_opset_import = net->n_opset_import;
    m->opset_import = net->opset_import;
    m->producer_name = (char *)"swi export";
    m->producer_version = (char *)swi_version();
    m->graph = graph;
    m->n_functions = net->n_functions;
    m->functions = net->functions;
    /* the export parameters, for whoever inspects the file */
    const char *keys[] = {"swi.roi", "swi.overlap", "swi.mode", "swi.sigma_scale", "swi.padding_mode", "swi.cval",
                          "swi.size", "swi.network"};
    char vals[8][160];
    char *pv[8];
    for (int i = 0; i < 8; i++) pv[i] = vals[i];
    vals[0][0] = vals[1][0] = vals[3][0] = vals[6][0] = 0;
    for (int k = 0; k < d; k++) {
        const char *sep = k ? "," : "";
        snprintf(vals[0] + strlen(vals[0]), 32, "%s%lld", sep, (long long)L->roi[k]);
        snprintf(vals[1] + strlen(vals[1]), 32, "%s%g", sep, L->overlap[k]);
        snprintf(vals[3] + strlen(vals[3]), 32, "%s%g", sep, L->sigma[k]);
        if (dyn) snprintf(vals[6] + strlen(vals[6]), 32, "%s?", sep);
        else snprintf(vals[6] + strlen(vals[6]), 32, "%s%lld", sep, (long long)L->size[k]);
    }
    snprintf(vals[2], sizeof vals[2], "%s", o->mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    snprintf(vals[4], sizeof vals[4], "%s", pad_names[o->pad_mode]);
    snprintf(vals[5], sizeof vals[5], "%g", o->cval);
    snprintf(vals[7], sizeof vals[7], "%s", ng->name ? ng->name + 0 : "");
    size_t nmeta = net->n_metadata_props + 8;
    m->metadata_props = arena_alloc(A, nmeta * sizeof *m->metadata_props);
    for (size_t i = 0; i < net->n_metadata_props; i++) m->metadata_props[m->n_metadata_props++] = net->metadata_props[i];
    for (int i = 0; i < 8; i++) {
        Onnx__StringStringEntryProto *e = arena_alloc(A, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = (char *)keys[i];
        e->value = arena_strdup(A, pv[i]);
        m->metadata_props[m->n_metadata_props++] = e;
    }
    return m;
}

int swi_cmd_export(int argc, char **argv) {
    X *x = calloc(1, sizeof *x);
    if (!x) {
        fprintf(stderr, "swi export: out of memory\n");
        return 1;
    }
    arena_init(&x->A, &x->oom);
    int rc = 0;
    const char *prog = argc > 0 && argv[0] ? argv[0] : "swi export";
    if (setjmp(x->oom)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        arena_free(&x->A);
        free(x);
        return 1;
    }
    int pr = parse_args(x, argc, argv);
    prog = x->o.prog;
    if (pr == 1) goto done;
    if (pr < 0) goto failed;
    struct stat sb;
    if (!x->o.force && stat(x->o.output, &sb) == 0) {
        fail(x, 1, "%s exists (use --force to overwrite)", x->o.output);
        goto failed;
    }
    {
        struct stat mb;
        if (stat(x->o.model, &mb) == 0 && stat(x->o.output, &sb) == 0 && mb.st_dev == sb.st_dev &&
            mb.st_ino == sb.st_ino) {
            fail(x, 2, "--output is the same file as --model");
            goto failed;
        }
    }
    char lerr[1024];
    x->ni.m = onnx_load(&x->A, x->o.model, lerr, sizeof lerr);
    if (!x->ni.m) {
        fail(x, 1, "%s", lerr);
        goto failed;
    }
    if (inspect_network(x)) goto failed;
    layout L;
    if (plan_layout(x, &L)) goto failed;
    if (x->o.argmax && x->ni.out_dim[1] > 256) {
        fail(x, 2, "--argmax: the network has %lld classes; uint8 labels hold at most 256",
             (long long)x->ni.out_dim[1]);
        goto failed;
    }
    Onnx__ModelProto *pm = build_pipeline(x, &L);
    size_t packed = protobuf_c_message_get_packed_size(&pm->base);
    if (packed > (size_t)INT32_MAX) {
        fail(x, 1,
             "the model would be %zu bytes, over protobuf's 2 GiB limit (the count map of --size is %lld "
             "bytes): use --dynamic, which computes it in the graph",
             packed, (long long)(4 * (int64_t)count_vox(&L)));
        goto failed;
    }
    size_t bytes = 0;
    if (onnx_save(pm, x->o.output, lerr, sizeof lerr, &bytes)) {
        fail(x, 1, "%s", lerr);
        goto failed;
    }
    if (!x->o.quiet) {
        char grid[96] = "", roi[64] = "";
        for (int k = 0; k < L.d; k++) {
            snprintf(roi + strlen(roi), sizeof roi - strlen(roi), "%s%lld", k ? "," : "", (long long)L.roi[k]);
            if (!x->o.dynamic)
                snprintf(grid + strlen(grid), sizeof grid - strlen(grid), "%s%lld", k ? "x" : "",
                         (long long)L.n_win[k]);
        }
        char windows[160];
        if (x->o.dynamic) snprintf(windows, sizeof windows, "window grid computed in the graph");
        else snprintf(windows, sizeof windows, "%lld windows (%s)", (long long)L.W, grid);
        printf("%s: wrote %s (%zu bytes): %s%s, roi %s, %s blending, %s padding, %s -> %s%s\n", prog, x->o.output,
               bytes, windows,
               x->o.unroll ? ", unrolled (one network call)" : x->ni.per_image ? ", one image per network call" : "",
               roi,
               x->o.mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant", pad_names[x->o.pad_mode],
               ox_type_name(x->ni.in_type), ox_type_name(x->ni.out_type), x->o.argmax ? " + uint8 labels" : "");
    }
    goto done;
failed:
    fprintf(stderr, "%s: %s\n", prog, x->err);
    rc = x->status ? x->status : 1;
done:
    arena_free(&x->A);
    free(x);
    return rc;
}
