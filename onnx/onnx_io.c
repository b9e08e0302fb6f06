/* onnx_io.c -- arena, ONNX model reading/writing through protobuf-c, graph builder. */
#include "onnx_io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- types ------------------------------------------------------------------------- */
const char *ox_type_name(int t) {
    switch (t) {
    case OX_FLOAT: return "float32";
    case OX_UINT8: return "uint8";
    case OX_INT8: return "int8";
    case 4: return "uint16";
    case 5: return "int16";
    case OX_INT32: return "int32";
    case OX_INT64: return "int64";
    case 8: return "string";
    case OX_BOOL: return "bool";
    case OX_FLOAT16: return "float16";
    case OX_DOUBLE: return "float64";
    case 12: return "uint32";
    case 13: return "uint64";
    case 14: return "complex64";
    case 15: return "complex128";
    case OX_BFLOAT16: return "bfloat16";
    default: return "unknown";
    }
}

size_t ox_type_size(int t) {
    switch (t) {
    case OX_FLOAT:
    case OX_INT32:
    case 12: return 4;
    case OX_UINT8:
    case OX_INT8:
    case OX_BOOL: return 1;
    case 4:
    case 5:
    case OX_FLOAT16:
    case OX_BFLOAT16: return 2;
    case OX_INT64:
    case OX_DOUBLE:
    case 13: return 8;
    default: return 0;
    }
}

/* ---- arena ------------------------------------------------------------------------ */
struct arena_chunk {
    arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK (1u << 20)

void arena_init(arena *A, jmp_buf *oom) {
    A->head = NULL;
    A->oom = oom;
    A->bytes = 0;
}

static _Noreturn void arena_oom(arena *A) { longjmp(*A->oom, 1); }

/* NULL when out of memory. */
static void *arena_try_alloc(arena *A, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL;
    arena_chunk *c = A->head;
    if (!c || c->size - c->used < need) {
        size_t sz = need > ARENA_CHUNK / 4 ? need : ARENA_CHUNK;
        if (sz > SIZE_MAX - sizeof(arena_chunk)) return NULL;
        arena_chunk *nc = malloc(sizeof(arena_chunk) + sz);
        if (!nc) return NULL;
        nc->size = sz;
        nc->used = 0;
        if (sz == need && c) {
            /* a big block of its own: keep filling the current chunk afterwards */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            A->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    A->bytes += need;
    return p;
}

void *arena_alloc(arena *A, size_t n) {
    void *p = arena_try_alloc(A, n);
    if (!p) arena_oom(A);
    memset(p, 0, n);
    return p;
}

char *arena_strdup(arena *A, const char *s) {
    size_t n = strlen(s);
    char *p = arena_alloc(A, n + 1);
    memcpy(p, s, n + 1);
    return p;
}

char *arena_printf(arena *A, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) arena_oom(A);
    char *p = arena_alloc(A, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void arena_free(arena *A) {
    arena_chunk *c = A->head;
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    A->head = NULL;
}

/* protobuf-c reports an allocation failure as a failed unpack (NULL): no longjmp here. */
static void *pa_alloc(void *data, size_t n) { return arena_try_alloc(data, n); }
static void pa_free(void *data, void *p) {
    (void)data;
    (void)p;
}

ProtobufCAllocator arena_allocator(arena *A) {
    ProtobufCAllocator a = {pa_alloc, pa_free, A};
    return a;
}

/* ---- load / save ------------------------------------------------------------------- */
Onnx__ModelProto *onnx_load(arena *A, const char *path, char *err, size_t errlen) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "cannot read %s: not a regular file", path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        snprintf(err, errlen, "cannot read %s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "cannot read %s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    unsigned char *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory reading %s (%ld bytes)", path, len);
        fclose(f);
        return NULL;
    }
    size_t got = fread(buf, 1, (size_t)len, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || got != (size_t)len) {
        snprintf(err, errlen, "cannot read %s: short read", path);
        free(buf);
        return NULL;
    }
    if (len == 0) {
        snprintf(err, errlen, "%s is not an ONNX model: the file is empty", path);
        free(buf);
        return NULL;
    }
    ProtobufCAllocator al = arena_allocator(A);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&al, (size_t)len, buf);
    free(buf);
    if (!m) {
        snprintf(err, errlen, "%s is not an ONNX model: it does not parse as an ONNX ModelProto", path);
        return NULL;
    }
    if (!m->graph || m->n_opset_import == 0 || !m->has_ir_version) {
        snprintf(err, errlen, "%s is not an ONNX model: no %s", path,
                 !m->graph            ? "graph"
                 : !m->has_ir_version ? "ir_version"
                                      : "opset_import");
        return NULL;
    }
    return m;
}

typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int failed;
    size_t bytes;
} file_buffer;

static void fb_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_buffer *fb = (file_buffer *)b;
    if (fb->failed) return;
    if (fwrite(data, 1, len, fb->f) != len) fb->failed = errno ? errno : EIO;
    fb->bytes += len;
}

int onnx_save(const Onnx__ModelProto *m, const char *path, char *err, size_t errlen, size_t *bytes_written) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(tmp, plen + 32, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    file_buffer fb = {{fb_append}, f, 0, 0};
    errno = 0;
    protobuf_c_message_pack_to_buffer(&m->base, &fb.base);
    if (fflush(f) != 0 && !fb.failed) fb.failed = errno ? errno : EIO;
    if (fclose(f) != 0 && !fb.failed) fb.failed = errno ? errno : EIO;
    if (fb.failed) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(fb.failed));
        remove(tmp);
        free(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    if (bytes_written) *bytes_written = fb.bytes;
    return 0;
}

/* ---- builder -------------------------------------------------------------------- */
void arr_push(arena *A, void ***arr, size_t *n, size_t *cap, void *item) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        void **na = arena_alloc(A, nc * sizeof(void *));
        if (*n) memcpy(na, *arr, *n * sizeof(void *));
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = item;
}

void gb_init(gbuild *g, arena *A, int *counter) {
    memset(g, 0, sizeof *g);
    g->A = A;
    g->counter = counter;
}

Onnx__NodeProto *gb_node(gbuild *g, const char *op, const char *out, int nin, const char *const *in) {
    arena *A = g->A;
    Onnx__NodeProto *n = arena_alloc(A, sizeof *n);
    onnx__node_proto__init(n);
    int k = (*g->counter)++;
    n->op_type = arena_strdup(A, op);
    n->name = arena_printf(A, "swi/%s_%d", op, k);
    n->n_input = (size_t)nin;
    n->input = arena_alloc(A, (size_t)(nin > 0 ? nin : 1) * sizeof(char *));
    for (int i = 0; i < nin; i++) n->input[i] = arena_strdup(A, in[i] ? in[i] : "");
    n->n_output = 1;
    n->output = arena_alloc(A, sizeof(char *));
    n->output[0] = out ? arena_strdup(A, out) : arena_printf(A, "swi/%s_%d_out", op, k);
    arr_push(A, (void ***)&g->node, &g->n_node, &g->cap_node, n);
    return n;
}

static Onnx__AttributeProto *new_attr(gbuild *g, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = arena_alloc(g->A, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = arena_strdup(g->A, name);
    a->has_type = 1;
    a->type = type;
    size_t cap = n->n_attribute; /* arrays here are exact-size: reallocate */
    Onnx__AttributeProto **na = arena_alloc(g->A, (cap + 1) * sizeof *na);
    if (cap) memcpy(na, n->attribute, cap * sizeof *na);
    na[cap] = a;
    n->attribute = na;
    n->n_attribute = cap + 1;
    return a;
}

void gb_attr_i(gbuild *g, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = new_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void gb_attr_s(gbuild *g, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = new_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)arena_strdup(g->A, v);
}

void gb_attr_ints(gbuild *g, Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
    Onnx__AttributeProto *a = new_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = arena_alloc(g->A, (size_t)(count ? count : 1) * sizeof(int64_t));
    memcpy(a->ints, v, (size_t)count * sizeof(int64_t));
}

void gb_attr_t(gbuild *g, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
    Onnx__AttributeProto *a = new_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

void gb_attr_g(gbuild *g, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *graph) {
    Onnx__AttributeProto *a = new_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = graph;
}

Onnx__TensorProto *gb_tensor(arena *A, const char *name, int elem_type, int ndims, const int64_t *dims,
                             void **data) {
    Onnx__TensorProto *t = arena_alloc(A, sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = arena_strdup(A, name);
    t->has_data_type = 1;
    t->data_type = elem_type;
    t->n_dims = (size_t)ndims;
    t->dims = arena_alloc(A, (size_t)(ndims > 0 ? ndims : 1) * sizeof(int64_t));
    size_t count = 1;
    for (int k = 0; k < ndims; k++) {
        t->dims[k] = dims[k];
        if (dims[k] > 0 && count > SIZE_MAX / (size_t)dims[k]) longjmp(*A->oom, 1);
        count *= (size_t)(dims[k] > 0 ? dims[k] : 0);
    }
    size_t es = ox_type_size(elem_type);
    if (es && count > SIZE_MAX / es) longjmp(*A->oom, 1);
    t->has_raw_data = 1;
    t->raw_data.len = count * es;
    t->raw_data.data = arena_alloc(A, t->raw_data.len ? t->raw_data.len : 1);
    if (data) *data = t->raw_data.data;
    return t;
}

const char *gb_init_tensor(gbuild *g, const char *name, int elem_type, int ndims, const int64_t *dims,
                           const void *data) {
    const char *nm = name ? name : arena_printf(g->A, "swi/const_%d", (*g->counter)++);
    void *p;
    Onnx__TensorProto *t = gb_tensor(g->A, nm, elem_type, ndims, dims, &p);
    if (data) memcpy(p, data, t->raw_data.len);
    arr_push(g->A, (void ***)&g->init, &g->n_init, &g->cap_init, t);
    return t->name;
}

const char *gb_i64(gbuild *g, const char *name, int n, const int64_t *v) {
    int64_t d = n;
    return gb_init_tensor(g, name, OX_INT64, 1, &d, v);
}

const char *gb_i64_scalar(gbuild *g, const char *name, int64_t v) {
    return gb_init_tensor(g, name, OX_INT64, 0, NULL, &v);
}

Onnx__ValueInfoProto *gb_value_info(arena *A, const char *name, int elem_type, int ndims, const int64_t *dims,
                                    const char *const *params) {
    Onnx__ValueInfoProto *vi = arena_alloc(A, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = arena_strdup(A, name);
    Onnx__TypeProto *tp = arena_alloc(A, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = arena_alloc(A, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    if (ndims >= 0) {
        Onnx__TensorShapeProto *sh = arena_alloc(A, sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->n_dim = (size_t)ndims;
        sh->dim = arena_alloc(A, (size_t)(ndims ? ndims : 1) * sizeof *sh->dim);
        for (int k = 0; k < ndims; k++) {
            Onnx__TensorShapeProto__Dimension *d = arena_alloc(A, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[k] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[k];
            } else if (params && params[k]) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = arena_strdup(A, params[k]);
            }
            sh->dim[k] = d;
        }
        tt->shape = sh;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

void gb_add_vi(gbuild *g, Onnx__ValueInfoProto *vi) {
    arr_push(g->A, (void ***)&g->vi, &g->n_vi, &g->cap_vi, vi);
}

Onnx__GraphProto *gb_graph(gbuild *g, const char *name, int n_in, Onnx__ValueInfoProto **in, int n_out,
                           Onnx__ValueInfoProto **out) {
    arena *A = g->A;
    Onnx__GraphProto *gr = arena_alloc(A, sizeof *gr);
    onnx__graph_proto__init(gr);
    gr->name = arena_strdup(A, name);
    gr->n_node = g->n_node;
    gr->node = g->node;
    gr->n_initializer = g->n_init;
    gr->initializer = g->init;
    gr->n_value_info = g->n_vi;
    gr->value_info = g->vi;
    gr->n_input = (size_t)n_in;
    gr->input = arena_alloc(A, (size_t)(n_in ? n_in : 1) * sizeof *gr->input);
    memcpy(gr->input, in, (size_t)n_in * sizeof *in);
    gr->n_output = (size_t)n_out;
    gr->output = arena_alloc(A, (size_t)(n_out ? n_out : 1) * sizeof *gr->output);
    memcpy(gr->output, out, (size_t)n_out * sizeof *out);
    return gr;
}
