/* dnnl_internal.h -- the graph swi_dnnl reads (dnnl_graph.c) and the plan it runs
 * (dnnl_plan.c). Not installed. */
#ifndef SWI_DNNL_INTERNAL_H
#define SWI_DNNL_INTERNAL_H

#include "swi_dnnl.h"

#include <oneapi/dnnl/dnnl.h>

#define DN_MAX_RANK 5
#define DN_MAX_IN 5

enum dn_op {
    DN_CONV,
    DN_DECONV,
    DN_INORM,
    DN_BNORM,
    DN_RELU, /* also LeakyRelu (alpha) */
    DN_SIGMOID,
    DN_TANH,
    DN_PRELU,
    DN_ADD,
    DN_MUL,
    DN_CONCAT,
    DN_SOFTMAX,
    DN_MAXPOOL,
    DN_AVGPOOL,
    DN_RESIZE /* Resize, Upsample: nearest (integer up-scaling) or linear, half-pixel centres */
};

/* A tensor of the graph: the input, an initializer (weights) or a node's output. */
typedef struct dn_value {
    char *name;
    int producer;   /* node index, -1: the graph input, -2: an initializer */
    float *data;    /* initializer values when float32 (owned), else NULL */
    int64_t *idata; /* initializer values when int64 (owned: Pad's pads), else NULL */
    int elem_type;  /* initializer's ONNX element type */
    int64_t count;
    int init_rank;
    int64_t init_dims[8];
    /* plan */
    int rank;
    int64_t dims[DN_MAX_RANK];
    int uses; /* readers left while planning */
    int slot; /* activation buffer, -1 none */
    dnnl_memory_desc_t md;
    dnnl_memory_t mem;
} dn_value;

typedef struct dn_node {
    int op;
    char *name; /* for messages */
    int nin;
    int in[DN_MAX_IN]; /* value indices, -1 for an absent optional input */
    int out;
    int group, count_pad, axis;
    int nk; /* spatial dims of the kernel attributes */
    int64_t kernel[3], strides[3], dil[3], pad_l[3], pad_r[3], out_pad[3];
    float alpha, eps;
    /* an elementwise node folded into this Conv/ConvTranspose as a post-op */
    /* Resize: linear (else nearest); the output size per axis given as scales or sizes */
    int linear, nscale, nsize;
    float scale[DN_MAX_RANK];
    int64_t size[DN_MAX_RANK];
    int post;         /* -1 none, else DN_RELU / DN_SIGMOID / DN_TANH */
    float post_alpha; /* LeakyRelu's slope */
    int fused;        /* 1: this node was folded into its producer */
} dn_node;

typedef struct dn_step {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[10];
    int reorder;
    int threads; /* OpenMP threads it runs on: fewer for a small layer (see add_step) */
} dn_step;

struct swi_dnnl_model {
    char *path;
    swi_dnnl_options opt;
    int opset;
    dn_value *v;
    int nv;
    dn_node *nd;
    int nn;
    int input;           /* value index of the graph input */
    int in_rank;         /* rank the model declares for it (0: unknown) */
    int64_t in_channels; /* declared channels, -1 unknown */
    int *outputs;        /* value indices of the graph outputs */
    int nout;
    size_t model_bytes; /* initializers as read */
    /* the plan */
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    int planned, out_index, dims;
    int64_t channels, roi[3], classes, ospatial[3];
    int64_t in_window, out_window; /* elements per window */
    dn_step *steps;
    int nsteps, capsteps;
    dnnl_memory_t *mems; /* every memory object the plan made (to destroy) */
    int *mem_slot;       /* its activation slot, -1: its own buffer or the caller's */
    int nmems, capmems;
    void **bufs; /* persistent buffers (weights, statistics) */
    int nbufs, capbufs;
    size_t *slot_bytes;
    void **slot_ptr;
    int nslots, capslots;
    int *slot_free;
    void *scratch;
    size_t scratch_bytes, weight_bytes, stat_bytes, act_bytes;
    dnnl_memory_t scratch_mem, in_mem, out_mem;
    int reorders;
    double flops; /* per window: 2 x the multiply-adds of the convolutions */
};

void dn_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* dnnl_graph.c: read `path` into m (v, nd, input, outputs, opset). */
swi_status dn_read_graph(swi_dnnl_model *m, const char *path, char *err, size_t errlen);
/* dnnl_plan.c */
void dn_plan_free(swi_dnnl_model *m);

#endif
