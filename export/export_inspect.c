/* export_inspect.c -- what the network is, and whether the exporter can take it: weights
 * inside the file, an ai.onnx opset >= 11, one float image input [n, C, *roi] with a batch
 * of 1 or dynamic, and a float output at the window's resolution. */
#include "export_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static char *pfx(arena *A, const char *p, char *s) { return (!s || !*s) ? s : arena_printf(A, "%s%s", p, s); }

/* Prefix every value, node and initializer name of g (and of its subgraphs), so the
 * network cannot clash with the pipeline's names. A uniform prefix keeps every
 * reference (including outer-scope ones from subgraphs) consistent. */
void export_prefix_names(arena *A, Onnx__GraphProto *g, const char *p) {
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) n->input[k] = pfx(A, p, n->input[k]);
        for (size_t k = 0; k < n->n_output; k++) n->output[k] = pfx(A, p, n->output[k]);
        n->name = pfx(A, p, n->name);
        for (size_t a = 0; a < n->n_attribute; a++) {
            Onnx__AttributeProto *at = n->attribute[a];
            if (at->g) export_prefix_names(A, at->g, p);
            for (size_t k = 0; k < at->n_graphs; k++) export_prefix_names(A, at->graphs[k], p);
        }
    }
    for (size_t i = 0; i < g->n_input; i++) g->input[i]->name = pfx(A, p, g->input[i]->name);
    for (size_t i = 0; i < g->n_output; i++) g->output[i]->name = pfx(A, p, g->output[i]->name);
    for (size_t i = 0; i < g->n_value_info; i++) g->value_info[i]->name = pfx(A, p, g->value_info[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++)
        g->initializer[i]->name = pfx(A, p, g->initializer[i]->name);
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
            params[k] =
                d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param : NULL;
    }
    return 0;
}

/* Weights in external data files are not in the model we copy them from. */
static int check_weights_inside(export_job *job) {
    const Onnx__ModelProto *m = job->net.model;
    const char *ext = external_in_graph(m->graph);
    for (size_t f = 0; !ext && f < m->n_functions; f++)
        for (size_t i = 0; !ext && i < m->functions[f]->n_node; i++)
            ext = external_in_node(m->functions[f]->node[i]);
    if (ext)
        return export_fail(job, 1,
                           "%s keeps its weights in external data files (tensor '%s'): not supported; "
                           "save the network with its weights inside the model, e.g. in Python "
                           "onnx.save(onnx.load(path), out, save_as_external_data=False)",
                           job->opt.model, ext);
    return 0;
}

/* The default-domain opset: the pipeline's operators are used as of opset 11. */
static int check_opset(export_job *job) {
    export_network *net = &job->net;
    const Onnx__ModelProto *m = net->model;
    net->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx")) net->opset = (int)m->opset_import[i]->version;
    }
    if (net->opset < 0) return export_fail(job, 1, "%s imports no ai.onnx opset", job->opt.model);
    if (net->opset < 11)
        return export_fail(job, 1,
                           "%s uses ai.onnx opset %d; the exporter needs opset 11 or newer "
                           "(convert it, e.g. onnx.version_converter.convert_version(model, 17))",
                           job->opt.model, net->opset);
    return 0;
}

/* The one real input: the graph inputs that are not initializers. NULL (job->err) unless
 * there is exactly one. */
static const Onnx__ValueInfoProto *find_image_input(export_job *job) {
    const Onnx__GraphProto *g = job->net.model->graph;
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
    if (n_real != 1) {
        export_fail(job, 1, "%s has %d inputs%s%s: exactly one image input [n, C, *roi] is supported",
                    job->opt.model, n_real, n_real ? " " : "", names);
        return NULL;
    }
    return in;
}

/* The input: [n, C, *roi], a float type, a batch of 1 (one image per call) or dynamic. */
static int inspect_input(export_job *job) {
    export_network *net = &job->net;
    const char *model = job->opt.model;
    const Onnx__ValueInfoProto *in = find_image_input(job);
    if (!in) return -1;
    if (!in->name || !*in->name) return export_fail(job, 1, "%s: the input has no name", model);
    int rank;
    int64_t dims[8];
    const char *params[8];
    if (read_tensor_vi(in, &net->in_type, &rank, dims, params, 8) != 0)
        return export_fail(job, 1, "%s: input '%s' is not a tensor", model, in->name);
    if (rank < 0)
        return export_fail(job, 1, "%s: input '%s' has no shape; its rank is needed", model, in->name);
    if (rank < 3 || rank > EXPORT_MAXD + 2)
        return export_fail(job, 1,
                           "%s: input '%s' has rank %d; expected [n, C, *roi] with 1 to 3 spatial dims",
                           model, in->name, rank);
    if (!is_float_type(net->in_type))
        return export_fail(job, 1, "%s: input '%s' is %s; float32, float16, bfloat16 or float64 is supported",
                           model, in->name, ox_type_name(net->in_type));
    net->dims = rank - 2;
    for (int k = 0; k < rank; k++) {
        net->in_dim[k] = dims[k];
        net->in_param[k] = params[k];
    }
    net->in_name = in->name;
    if (net->in_dim[0] == 1 || job->opt.per_image) net->per_image = 1;
    if (job->opt.unroll && net->in_dim[0] == 1)
        return export_fail(job, 1,
                           "--unroll runs all windows as one batch: the network's batch is fixed at 1");
    if (net->in_dim[0] > 1)
        return export_fail(job, 1,
                           "%s: input '%s' has a fixed batch of %lld; only 1 or a dynamic batch is supported",
                           model, in->name, (long long)net->in_dim[0]);
    return 0;
}

/* --head NAME or INDEX (default: the first output). */
static int select_head(export_job *job) {
    const Onnx__GraphProto *g = job->net.model->graph;
    const char *head = job->opt.head;
    if (g->n_output == 0) return export_fail(job, 1, "%s has no outputs", job->opt.model);
    job->net.out_index = 0;
    if (!head) return 0;
    job->net.out_index = -1;
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && !strcmp(g->output[i]->name, head)) job->net.out_index = (int)i;
    if (job->net.out_index < 0) {
        char *end;
        long v = strtol(head, &end, 10);
        if (end != head && !*end && v >= 0 && v < (long)g->n_output) job->net.out_index = (int)v;
    }
    if (job->net.out_index < 0)
        return export_fail(job, 2, "--head '%s': the network has no such output", head);
    return 0;
}

/* The blended output: a float [n, classes, *roi] with a fixed number of classes. */
static int inspect_output(export_job *job) {
    export_network *net = &job->net;
    const char *model = job->opt.model;
    if (select_head(job)) return -1;
    const Onnx__ValueInfoProto *out = net->model->graph->output[net->out_index];
    if (!out->name || !*out->name)
        return export_fail(job, 1, "%s: output %d has no name", model, net->out_index);
    int orank;
    int64_t dims[8];
    if (read_tensor_vi(out, &net->out_type, &orank, dims, NULL, 8) != 0)
        return export_fail(job, 1, "%s: output '%s' is not a tensor", model, out->name);
    if (!is_float_type(net->out_type))
        return export_fail(job, 1, "%s: output '%s' is %s; a floating-point output is needed", model,
                           out->name, ox_type_name(net->out_type));
    if (orank != net->dims + 2)
        return export_fail(job, 1, "%s: output '%s' has rank %d; expected [n, classes, *roi] (rank %d)",
                           model, out->name, orank, net->dims + 2);
    for (int k = 0; k < orank; k++) net->out_dim[k] = dims[k];
    if (net->out_dim[1] < 1)
        return export_fail(job, 1, "%s: output '%s' must declare a fixed number of classes (dim 1)", model,
                           out->name);
    net->out_name = out->name;
    return 0;
}

int export_inspect_network(export_job *job) {
    if (check_weights_inside(job) || check_opset(job) || inspect_input(job) || inspect_output(job)) return -1;
    return 0;
}
