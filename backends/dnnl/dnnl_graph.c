/* dnnl_graph.c -- reading an ONNX graph into the nodes swi_dnnl runs: every operator and
 * attribute checked here, so that a model either plans or was refused with a message
 * naming the node at fault. */
#include "dnnl_internal.h"
#include "onnx_io.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what a model may hold, far above any real segmentation network; a hostile
 * file is refused before sizes can overflow. */
#define DN_MAX_NODES 100000
#define DN_MAX_ELEMS ((int64_t)1 << 34)

void dn_err(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

typedef struct reader {
    swi_dnnl_model *m;
    const char *path;
    char *err;
    size_t errlen;
    int capv;
} reader;

static int find_value(const swi_dnnl_model *m, const char *name) {
    /* the newest binding wins: names are unique in a valid graph */
    for (int i = m->nv - 1; i >= 0; i--)
        if (strcmp(m->v[i].name, name) == 0) return i;
    return -1;
}

static int add_value(reader *r, const char *name, int producer) {
    swi_dnnl_model *m = r->m;
    if (m->nv == r->capv) {
        int cap = r->capv ? 2 * r->capv : 64;
        dn_value *nv = realloc(m->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        m->v = nv;
        r->capv = cap;
    }
    dn_value *v = &m->v[m->nv];
    memset(v, 0, sizeof *v);
    v->name = strdup(name ? name : "");
    if (!v->name) return -1;
    v->producer = producer;
    v->slot = -1;
    return m->nv++;
}

/* Copy a tensor's values into value k: float32 into data, int64 into idata; of other types
 * only the type is kept (the node that reads one refuses it). 0, or -1 with the message set. */
static int read_tensor(reader *r, const Onnx__TensorProto *t, int k, const char *what) {
    dn_value *v = &r->m->v[k];
    v->elem_type = t->data_type;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        dn_err(r->err, r->errlen,
               "%s: %s '%s' keeps its data in an external file; the oneDNN backend "
               "reads weights stored in the model",
               r->path, what, v->name);
        return -1;
    }
    if (t->n_dims > 8) {
        dn_err(r->err, r->errlen, "%s: %s '%s' has rank %zu (at most 8)", r->path, what, v->name, t->n_dims);
        return -1;
    }
    int64_t count = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || (t->dims[d] && count > DN_MAX_ELEMS / t->dims[d])) {
            dn_err(r->err, r->errlen, "%s: %s '%s' has a bad size", r->path, what, v->name);
            return -1;
        }
        count *= t->dims[d];
        v->init_dims[d] = t->dims[d];
    }
    v->init_rank = (int)t->n_dims;
    v->count = count;
    if (t->data_type == OX_INT64) {
        const void *isrc = NULL;
        if (t->has_raw_data && t->raw_data.len == (size_t)count * sizeof(int64_t))
            isrc = t->raw_data.data;
        else if (!t->has_raw_data && t->n_int64_data == (size_t)count)
            isrc = t->int64_data;
        if (!isrc) {
            dn_err(r->err, r->errlen, "%s: %s '%s' holds the wrong number of values for its shape", r->path,
                   what, v->name);
            return -1;
        }
        if (count > 4096) return 0; /* shapes and pads are short; a long one is never read */
        v->idata = malloc(count ? (size_t)count * sizeof(int64_t) : 1);
        if (!v->idata) {
            dn_err(r->err, r->errlen, "%s: out of memory reading '%s'", r->path, v->name);
            return -1;
        }
        if (count) memcpy(v->idata, isrc, (size_t)count * sizeof(int64_t));
        return 0;
    }
    if (t->data_type != OX_FLOAT) return 0;
    const void *src = NULL;
    if (t->has_raw_data && t->raw_data.len == (size_t)count * sizeof(float))
        src = t->raw_data.data; /* little-endian hosts (onnx_io.h) */
    else if (!t->has_raw_data && t->n_float_data == (size_t)count)
        src = t->float_data;
    if (!src) {
        dn_err(r->err, r->errlen, "%s: %s '%s' holds the wrong number of values for its shape", r->path, what,
               v->name);
        return -1;
    }
    v->data = malloc(count ? (size_t)count * sizeof(float) : 1);
    if (!v->data) {
        dn_err(r->err, r->errlen, "%s: out of memory reading '%s'", r->path, v->name);
        return -1;
    }
    if (count) memcpy(v->data, src, (size_t)count * sizeof(float));
    r->m->model_bytes += (size_t)count * sizeof(float);
    return 0;
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
    return NULL;
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->i : dflt;
}

static float attr_f(const Onnx__NodeProto *n, const char *name, float dflt) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->f : dflt;
}

/* ints attribute into out[max]; the count, dflt filled when absent; -1 when too long. */
static int attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int want, int64_t dflt) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a) {
        for (int i = 0; i < want; i++) out[i] = dflt;
        return want;
    }
    if ((int64_t)a->n_ints != want) return -1;
    for (int i = 0; i < want; i++) out[i] = a->ints[i];
    return want;
}

static const char *attr_s(const Onnx__NodeProto *n, const char *name, char *buf, size_t len) {
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a || !a->has_s) return NULL;
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    memcpy(buf, a->s.data, k);
    buf[k] = 0;
    return buf;
}

static int refuse(reader *r, const dn_node *d, const char *what) {
    dn_err(r->err, r->errlen, "%s: node '%s': %s", r->path, d->name, what);
    return -1;
}

/* The spatial attributes of Conv, ConvTranspose and the poolings. */
static int window_attrs(reader *r, const Onnx__NodeProto *n, dn_node *d, int nk) {
    char ap[32];
    if (nk < 1 || nk > 3) return refuse(r, d, "the oneDNN backend runs 1-D to 3-D kernels");
    d->nk = nk;
    const char *pad = attr_s(n, "auto_pad", ap, sizeof ap);
    int64_t pads[6];
    if (attr_ints(n, "strides", d->strides, nk, 1) < 0 || attr_ints(n, "dilations", d->dil, nk, 1) < 0 ||
        attr_ints(n, "pads", pads, 2 * nk, 0) < 0)
        return refuse(r, d, "strides, dilations or pads do not match the kernel's dimensions");
    if (pad && strcmp(pad, "NOTSET") != 0 && strcmp(pad, "VALID") != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "auto_pad %s is not supported by the oneDNN backend", pad);
        return refuse(r, d, msg);
    }
    for (int a = 0; a < nk; a++) {
        d->pad_l[a] = pad && strcmp(pad, "VALID") == 0 ? 0 : pads[a];
        d->pad_r[a] = pad && strcmp(pad, "VALID") == 0 ? 0 : pads[nk + a];
        if (d->strides[a] < 1 || d->dil[a] < 1 || d->pad_l[a] < 0 || d->pad_r[a] < 0 ||
            d->strides[a] > 4096 || d->dil[a] > 4096 || d->pad_l[a] > 4096 || d->pad_r[a] > 4096)
            return refuse(r, d, "strides, dilations and pads must be positive, non-negative, at most 4096");
    }
    return 0;
}

static int need_init(reader *r, const dn_node *d, int k, const char *what) {
    if (k >= 0 && k < d->nin && d->in[k] >= 0 && r->m->v[d->in[k]].producer == -2 &&
        !r->m->v[d->in[k]].data) {
        char msg[200];
        snprintf(msg, sizeof msg, "its %s '%s' is %s; the oneDNN backend takes float32", what,
                 r->m->v[d->in[k]].name, ox_type_name(r->m->v[d->in[k]].elem_type));
        return refuse(r, d, msg);
    }
    if (k < 0 || r->m->v[d->in[k]].producer != -2) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "its %s must be a constant (an initializer); the oneDNN backend does not "
                 "take computed %s",
                 what, what);
        return refuse(r, d, msg);
    }
    return 0;
}

static int parse_node(reader *r, const Onnx__NodeProto *n, dn_node *d) {
    const char *op = n->op_type ? n->op_type : "";
    d->post = -1;
    d->group = 1;
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "operator %s of domain %s is not supported by the oneDNN backend", op,
                 n->domain);
        return refuse(r, d, msg);
    }
    if (n->n_output != 1 && strcmp(op, "BatchNormalization") != 0 && strcmp(op, "MaxPool") != 0) {
        return refuse(r, d, "the oneDNN backend runs nodes with one output");
    }
    int64_t kern[3];
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0) {
        d->op = op[4] ? DN_DECONV : DN_CONV;
        if (d->nin < 2 || d->nin > 3) return refuse(r, d, "Conv takes 2 or 3 inputs");
        if (need_init(r, d, 1, "weights") || (d->nin == 3 && d->in[2] >= 0 && need_init(r, d, 2, "bias")))
            return -1;
        const dn_value *w = &r->m->v[d->in[1]];
        int nk = w->init_rank - 2;
        if (window_attrs(r, n, d, nk)) return -1;
        d->group = (int)attr_i(n, "group", 1);
        if (d->group < 1 || d->group > 65536) return refuse(r, d, "group must be 1..65536");
        if (attr_ints(n, "kernel_shape", kern, nk, 0) < 0)
            return refuse(r, d, "kernel_shape does not match the weights");
        for (int a = 0; a < nk; a++) {
            d->kernel[a] = w->init_dims[2 + a];
            if ((kern[a] && kern[a] != d->kernel[a]) || d->kernel[a] < 1)
                return refuse(r, d, "kernel_shape does not match the weights");
        }
        if (d->op == DN_DECONV) {
            if (attr(n, "output_shape"))
                return refuse(r, d,
                              "ConvTranspose output_shape is not supported by "
                              "the oneDNN backend");
            if (attr_ints(n, "output_padding", d->out_pad, nk, 0) < 0)
                return refuse(r, d, "output_padding does not match the kernel");
            for (int a = 0; a < nk; a++)
                if (d->out_pad[a] < 0 || d->out_pad[a] > d->pad_r[a])
                    return refuse(r, d, "the oneDNN backend needs 0 <= output_padding <= the end pad");
        }
        return 0;
    }
    if (strcmp(op, "InstanceNormalization") == 0 || strcmp(op, "BatchNormalization") == 0) {
        int bn = op[0] == 'B';
        d->op = bn ? DN_BNORM : DN_INORM;
        if (d->nin != (bn ? 5 : 3))
            return refuse(r, d,
                          bn ? "BatchNormalization takes 5 inputs" : "InstanceNormalization takes 3 inputs");
        for (int k = 1; k < d->nin; k++)
            if (need_init(r, d, k, "scale, bias, mean and variance")) return -1;
        if (n->n_output != 1 || attr_i(n, "training_mode", 0) != 0)
            return refuse(r, d, "the oneDNN backend runs BatchNormalization for inference (one output)");
        d->eps = attr_f(n, "epsilon", 1e-5f);
        if (!(d->eps >= 0) || !isfinite(d->eps)) return refuse(r, d, "epsilon must be finite and >= 0");
        return 0;
    }
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) {
        d->op = op[0] == 'M' ? DN_MAXPOOL : DN_AVGPOOL;
        if (n->n_output != 1)
            return refuse(r, d, "MaxPool's Indices output is not supported by the oneDNN backend");
        const Onnx__AttributeProto *k = attr(n, "kernel_shape");
        if (!k) return refuse(r, d, "kernel_shape is required");
        int nk = (int)(k->n_ints < 4 ? k->n_ints : 4);
        if (window_attrs(r, n, d, nk)) return -1;
        for (int a = 0; a < nk; a++) {
            d->kernel[a] = k->ints[a];
            if (d->kernel[a] < 1 || d->kernel[a] > 4096) return refuse(r, d, "kernel_shape must be 1..4096");
        }
        if (attr_i(n, "ceil_mode", 0) != 0)
            return refuse(r, d, "ceil_mode 1 is not supported by the oneDNN backend");
        if (attr_i(n, "storage_order", 0) != 0) return refuse(r, d, "storage_order 1 is not supported");
        d->count_pad = (int)attr_i(n, "count_include_pad", 0);
        return 0;
    }
    static const struct {
        const char *name;
        int op, nin;
    } simple[] = {{"Relu", DN_RELU, 1}, {"LeakyRelu", DN_RELU, 1}, {"Sigmoid", DN_SIGMOID, 1},
                  {"Tanh", DN_TANH, 1}, {"PRelu", DN_PRELU, 2},    {"Add", DN_ADD, 2},
                  {"Mul", DN_MUL, 2},   {"Softmax", DN_SOFTMAX, 1}};
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++) {
        if (strcmp(op, simple[i].name) != 0) continue;
        d->op = simple[i].op;
        if (d->nin != simple[i].nin) return refuse(r, d, "wrong number of inputs");
        for (int k = 0; k < d->nin; k++)
            if (d->in[k] < 0) return refuse(r, d, "an input is missing");
        if (d->op == DN_PRELU && need_init(r, d, 1, "slope")) return -1;
        if (d->op == DN_PRELU && r->m->v[d->in[1]].count == 1 && isfinite(r->m->v[d->in[1]].data[0])) {
            /* one slope for all: LeakyRelu, which oneDNN runs fast and fuses into a Conv */
            d->op = DN_RELU;
            d->alpha = r->m->v[d->in[1]].data[0];
            d->nin = 1;
            return 0;
        }
        d->alpha = strcmp(op, "LeakyRelu") == 0 ? attr_f(n, "alpha", 0.01f) : 0.f;
        if (!isfinite(d->alpha)) return refuse(r, d, "alpha must be finite");
        if (d->op == DN_SOFTMAX) {
            int64_t ax = attr_i(n, "axis", r->m->opset >= 13 ? -1 : 1);
            if (ax < -DN_MAX_RANK || ax >= DN_MAX_RANK) return refuse(r, d, "axis out of range");
            d->axis = (int)ax;
        }
        return 0;
    }
    if (strcmp(op, "Resize") == 0 || strcmp(op, "Upsample") == 0) {
        /* Only what oneDNN's resampling computes the same way: nearest with integer
         * up-scaling where ONNX picks source floor(x / s), and linear with half-pixel
         * centres; the output size from constant scales or sizes. */
        const int up = op[0] == 'U';
        char mode[40], ctm[40], nm[40], kar[40];
        const char *md = attr_s(n, "mode", mode, sizeof mode);
        md = md ? md : "nearest";
        const char *cm = up ? "asymmetric" : attr_s(n, "coordinate_transformation_mode", ctm, sizeof ctm);
        cm = cm ? cm : r->m->opset >= 11 ? "half_pixel" : "asymmetric";
        const char *nr = up ? "floor" : attr_s(n, "nearest_mode", nm, sizeof nm);
        nr = nr ? nr : "round_prefer_floor";
        const char *ka = attr_s(n, "keep_aspect_ratio_policy", kar, sizeof kar);
        d->op = DN_RESIZE;
        d->linear = strcmp(md, "linear") == 0;
        const int half = strcmp(cm, "half_pixel") == 0 || strcmp(cm, "pytorch_half_pixel") == 0;
        const int ok_mode = d->linear ? half
                                      : strcmp(md, "nearest") == 0 &&
                                            ((strcmp(cm, "asymmetric") == 0 && strcmp(nr, "floor") == 0) ||
                                             (half && (strcmp(nr, "round_prefer_floor") == 0 ||
                                                       strcmp(nr, "round_prefer_ceil") == 0)));
        if (!ok_mode || attr_i(n, "antialias", 0) != 0 || attr(n, "axes") ||
            attr_i(n, "exclude_outside", 0) != 0 || (ka && strcmp(ka, "stretch") != 0)) {
            char msg[240];
            snprintf(
                msg, sizeof msg,
                "%s mode %s, coordinate_transformation_mode %s, nearest_mode %s is not supported "
                "by the oneDNN backend (nearest with floor/half-pixel rounding, or linear with half-pixel centres)",
                op, md, cm, nr);
            return refuse(r, d, msg);
        }
        const dn_value *sv = NULL, *zv = NULL;
        if (up && attr(n, "scales")) {
            const Onnx__AttributeProto *a = attr(n, "scales");
            if (a->n_floats < 1 || a->n_floats > DN_MAX_RANK)
                return refuse(r, d, "scales of the wrong length");
            d->nscale = (int)a->n_floats;
            for (int k = 0; k < d->nscale; k++) d->scale[k] = a->floats[k];
        } else {
            int si = up ? 1 : r->m->opset >= 11 ? 2 : 1;
            if (si < d->nin && d->in[si] >= 0) sv = &r->m->v[d->in[si]];
            if (!up && r->m->opset >= 11 && d->nin > 3 && d->in[3] >= 0) zv = &r->m->v[d->in[3]];
            if (sv && sv->count == 0) sv = NULL; /* an empty scales with sizes given */
            if ((sv && (sv->producer != -2 || !sv->data)) || (zv && (zv->producer != -2 || !zv->idata)) ||
                (!sv == !zv))
                return refuse(
                    r, d, "the oneDNN backend takes constant scales (float32) or sizes (int64), one of them");
            const dn_value *t = sv ? sv : zv;
            if (t->count < 1 || t->count > DN_MAX_RANK)
                return refuse(r, d, "scales or sizes of the wrong length");
            for (int k = 0; k < (int)t->count; k++) {
                if (sv)
                    d->scale[k] = sv->data[k];
                else
                    d->size[k] = zv->idata[k];
            }
            if (sv)
                d->nscale = (int)sv->count;
            else
                d->nsize = (int)zv->count;
        }
        if (d->nin < 1 || d->in[0] < 0) return refuse(r, d, "Resize needs its data input");
        d->nin = 1; /* the constants are read here, once */
        return 0;
    }
    if (strcmp(op, "Concat") == 0) {
        d->op = DN_CONCAT;
        if (d->nin < 1) return refuse(r, d, "Concat needs inputs");
        for (int k = 0; k < d->nin; k++)
            if (d->in[k] < 0 || r->m->v[d->in[k]].producer == -2)
                return refuse(r, d, "the oneDNN backend concatenates computed tensors only");
        const Onnx__AttributeProto *a = attr(n, "axis");
        if (!a) return refuse(r, d, "Concat needs an axis");
        if (a->i < -DN_MAX_RANK || a->i >= DN_MAX_RANK) return refuse(r, d, "axis out of range");
        d->axis = (int)a->i;
        return 0;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "operator %s is not supported by the oneDNN backend", op);
    return refuse(r, d, msg);
}

/* Fold Relu/LeakyRelu/Sigmoid/Tanh into the Conv, ConvTranspose or normalisation that feeds
 * only them (a post-op: one pass over the tensor instead of two). */
static void fuse(swi_dnnl_model *m) {
    int *readers = calloc((size_t)m->nv, sizeof *readers);
    if (!readers) return; /* no fusion: the same results, a little slower */
    for (int i = 0; i < m->nn; i++)
        for (int k = 0; k < m->nd[i].nin; k++)
            if (m->nd[i].in[k] >= 0) readers[m->nd[i].in[k]]++;
    for (int k = 0; k < m->nout; k++) readers[m->outputs[k]] += 2;
    for (int i = 0; i < m->nn; i++) {
        dn_node *a = &m->nd[i];
        if (a->op != DN_RELU && a->op != DN_SIGMOID && a->op != DN_TANH) continue;
        int p = m->v[a->in[0]].producer;
        if (p < 0) continue;
        dn_node *c = &m->nd[p];
        if ((c->op != DN_CONV && c->op != DN_DECONV && c->op != DN_INORM && c->op != DN_BNORM) ||
            c->post >= 0 || readers[c->out] != 1)
            continue;
        c->post = a->op;
        c->post_alpha = a->alpha;
        m->v[a->out].producer = p;
        c->out = a->out;
        a->fused = 1;
    }
    free(readers);
}

swi_status dn_read_graph(swi_dnnl_model *m, const char *path, char *err, size_t errlen) {
    arena A;
    jmp_buf oom;
    reader r = {m, path, err, errlen, 0};
    arena_init(&A, &oom);
    if (setjmp(oom)) {
        arena_free(&A);
        dn_err(err, errlen, "%s: out of memory reading the model", path);
        return SWI_ERR_NOMEM;
    }
    char msg[512];
    Onnx__ModelProto *mp = onnx_load(&A, path, msg, sizeof msg);
    if (!mp) {
        arena_free(&A);
        dn_err(err, errlen, "%s", msg);
        /* unreadable files are I/O errors; a file that reads but does not parse is not a model */
        return strncmp(msg, "cannot ", 7) == 0 ? SWI_ERR_IO : SWI_ERR_INVALID_ARG;
    }
    swi_status st = SWI_ERR_INVALID_ARG;
    const Onnx__GraphProto *g = mp->graph;
    m->opset = 0;
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (!mp->opset_import[i]->domain || !*mp->opset_import[i]->domain ||
            strcmp(mp->opset_import[i]->domain, "ai.onnx") == 0)
            m->opset = (int)mp->opset_import[i]->version;
    if (!g) {
        dn_err(err, errlen, "%s: the model has no graph", path);
        goto out;
    }
    if (g->n_node > DN_MAX_NODES) {
        dn_err(err, errlen, "%s: %zu nodes (at most %d)", path, g->n_node, DN_MAX_NODES);
        goto out;
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        int k = add_value(&r, g->initializer[i]->name, -2);
        if (k < 0) goto nomem;
        if (read_tensor(&r, g->initializer[i], k, "initializer")) goto out;
    }
    m->input = -1;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || find_value(m, vi->name) >= 0) continue; /* an initializer listed as input */
        if (m->input >= 0) {
            dn_err(err, errlen, "%s: the model has more than one input; swi feeds one", path);
            goto out;
        }
        int k = add_value(&r, vi->name, -1);
        if (k < 0) goto nomem;
        m->input = k;
        m->in_channels = -1;
        const Onnx__TypeProto *t = vi->type;
        if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type) {
            if (t->tensor_type->elem_type != OX_FLOAT) {
                dn_err(err, errlen, "%s: the model input '%s' is %s; swi feeds float32", path, vi->name,
                       ox_type_name(t->tensor_type->elem_type));
                goto out;
            }
            const Onnx__TensorShapeProto *s = t->tensor_type->shape;
            if (s) {
                m->in_rank = (int)s->n_dim;
                if (s->n_dim >= 2 &&
                    s->dim[1]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
                    m->in_channels = s->dim[1]->dim_value;
            }
        }
    }
    if (m->input < 0) {
        dn_err(err, errlen, "%s: the model has no input", path);
        goto out;
    }
    m->nd = calloc(g->n_node ? g->n_node : 1, sizeof *m->nd);
    if (!m->nd) goto nomem;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        dn_node *d = &m->nd[m->nn];
        memset(d, 0, sizeof *d);
        d->name = strdup(n->name && *n->name ? n->name : (n->n_output && n->output[0] ? n->output[0] : op));
        if (!d->name) goto nomem;
        m->nn++;
        if (n->n_input > DN_MAX_IN) {
            refuse(&r, d, "too many inputs");
            goto out;
        }
        d->nin = (int)n->n_input;
        for (int k = 0; k < d->nin; k++) {
            if (!n->input[k] || !*n->input[k]) {
                d->in[k] = -1;
                continue;
            }
            d->in[k] = find_value(m, n->input[k]);
            if (d->in[k] < 0) {
                dn_err(err, errlen, "%s: node '%s' reads '%s', which no earlier node gives", path, d->name,
                       n->input[k]);
                goto out;
            }
        }
        if (n->n_output < 1 || !n->output[0] || !*n->output[0]) {
            refuse(&r, d, "the node has no output");
            goto out;
        }
        if (strcmp(op, "Constant") == 0) {
            const Onnx__AttributeProto *a = attr(n, "value");
            if (!a || !a->t) {
                refuse(&r, d, "the oneDNN backend reads Constant nodes with a tensor 'value'");
                goto out;
            }
            int k = add_value(&r, n->output[0], -2);
            if (k < 0) goto nomem;
            if (read_tensor(&r, a->t, k, "constant")) goto out;
            free(d->name);
            m->nn--;
            continue;
        }
        if (strcmp(op, "Pad") == 0) {
            /* zero pads (what exporters leave before a pooling) are an Identity; others are
             * refused for now */
            int zero =
                d->nin >= 2 && d->in[0] >= 0 && d->in[1] >= 0 && m->v[d->in[1]].idata && n->n_output == 1;
            char mode[32];
            const char *md = attr_s(n, "mode", mode, sizeof mode);
            if (md && strcmp(md, "constant") != 0) zero = 0;
            for (int64_t k = 0; zero && k < m->v[d->in[1]].count; k++)
                if (m->v[d->in[1]].idata[k] != 0) zero = 0;
            if (!zero) {
                refuse(&r, d, "Pad is supported by the oneDNN backend only with constant all-zero pads");
                goto out;
            }
        }
        if (strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0 || strcmp(op, "Pad") == 0) {
            /* an alias: readers of the output read the input (Dropout is Identity at inference) */
            if (d->nin < 1 || d->in[0] < 0 || n->n_output != 1) {
                refuse(&r, d, "an Identity needs one input and one output");
                goto out;
            }
            int src = d->in[0];
            int k = add_value(&r, n->output[0], -2);
            if (k < 0) goto nomem;
            dn_value *v = &m->v[k];
            if (m->v[src].producer == -2) {
                /* a copy of a constant (its values: float32 or int64; else its type alone) */
                v->count = m->v[src].count;
                v->elem_type = m->v[src].elem_type;
                if (m->v[src].data) {
                    v->data = malloc(v->count ? (size_t)v->count * sizeof(float) : 1);
                    if (!v->data) goto nomem;
                    if (v->count) memcpy(v->data, m->v[src].data, (size_t)v->count * sizeof(float));
                }
                if (m->v[src].idata) {
                    v->idata = malloc(v->count ? (size_t)v->count * sizeof(int64_t) : 1);
                    if (!v->idata) goto nomem;
                    if (v->count) memcpy(v->idata, m->v[src].idata, (size_t)v->count * sizeof(int64_t));
                }
                v->init_rank = m->v[src].init_rank;
                memcpy(v->init_dims, m->v[src].init_dims, sizeof v->init_dims);
            } else {
                v->producer = -3 - src; /* an alias of a computed tensor, resolved below */
            }
            free(d->name);
            m->nn--;
            continue;
        }
        if (parse_node(&r, n, d)) goto out;
        int k = add_value(&r, n->output[0], m->nn - 1);
        if (k < 0) goto nomem;
        d->out = k;
    }
    /* resolve aliases of computed tensors: every reader reads the source */
    for (int i = 0; i < m->nn; i++)
        for (int k = 0; k < m->nd[i].nin; k++)
            while (m->nd[i].in[k] >= 0 && m->v[m->nd[i].in[k]].producer <= -3)
                m->nd[i].in[k] = -3 - m->v[m->nd[i].in[k]].producer;
    m->outputs = calloc(g->n_output ? g->n_output : 1, sizeof *m->outputs);
    if (!m->outputs) goto nomem;
    for (size_t i = 0; i < g->n_output; i++) {
        int k = g->output[i]->name ? find_value(m, g->output[i]->name) : -1;
        while (k >= 0 && m->v[k].producer <= -3) k = -3 - m->v[k].producer;
        if (k < 0 || m->v[k].producer < -1) {
            dn_err(err, errlen, "%s: output '%s' is not computed by the graph", path,
                   g->output[i]->name ? g->output[i]->name : "");
            goto out;
        }
        m->outputs[m->nout++] = k;
    }
    if (!m->nout) {
        dn_err(err, errlen, "%s: the model has no output", path);
        goto out;
    }
    fuse(m);
    st = SWI_OK;
    goto out;
nomem:
    dn_err(err, errlen, "%s: out of memory reading the model", path);
    st = SWI_ERR_NOMEM;
out:
    arena_free(&A);
    return st;
}
