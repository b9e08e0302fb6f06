/*
 * onnx_io.h -- ONNX models in memory for swi export and swi_ort's rewrites (not
 * installed): an arena allocator, reading and writing ModelProto with protobuf-c, and a
 * small graph builder.
 *
 * Everything (the unpacked network and every message we build) lives in one
 * arena, so messages may freely share sub-messages and strings and are all
 * released at once by arena_free(). Allocation failure longjmps to the
 * handler installed in the arena (see arena_init), so builder code needs no
 * NULL checks.
 */
#ifndef SWI_ONNX_IO_H
#define SWI_ONNX_IO_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_io reads and writes ONNX raw_data (little-endian) straight from memory: little-endian hosts only"
#endif

/* ONNX TensorProto.DataType values used here. */
enum {
    OX_FLOAT = 1,
    OX_UINT8 = 2,
    OX_INT8 = 3,
    OX_INT32 = 6,
    OX_INT64 = 7,
    OX_BOOL = 9,
    OX_FLOAT16 = 10,
    OX_DOUBLE = 11,
    OX_BFLOAT16 = 16
};
const char *ox_type_name(int elem_type);
/** Bytes per element of a numeric ONNX type, 0 if unknown. */
size_t ox_type_size(int elem_type);

/* ---- arena ----------------------------------------------------------------- */
typedef struct arena_chunk arena_chunk;
typedef struct arena {
    arena_chunk *head;
    jmp_buf *oom; /* longjmp(*oom, 1) when an allocation fails */
    size_t bytes; /* total allocated */
} arena;

void arena_init(arena *A, jmp_buf *oom);
void *arena_alloc(arena *A, size_t n); /* zeroed, 16-byte aligned */
char *arena_strdup(arena *A, const char *s);
char *arena_printf(arena *A, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(arena *A);
ProtobufCAllocator arena_allocator(arena *A);

/* ---- reading and writing ------------------------------------------------------ */
/** Read and unpack an ONNX model. Returns NULL and fills err on failure. */
Onnx__ModelProto *onnx_load(arena *A, const char *path, char *err, size_t errlen);
/** Pack `m` into `path` (written to a temporary file then renamed). 0 on success. */
int onnx_save(const Onnx__ModelProto *m, const char *path, char *err, size_t errlen, size_t *bytes_written);

/* ---- graph builder ----------------------------------------------------------- */
typedef struct gbuild {
    arena *A;
    Onnx__NodeProto **node;
    size_t n_node, cap_node;
    Onnx__TensorProto **init;
    size_t n_init, cap_init;
    Onnx__ValueInfoProto **vi;
    size_t n_vi, cap_vi;
    int *counter; /* shared by nested builders: unique generated names */
} gbuild;

void gb_init(gbuild *g, arena *A, int *counter);
/** Append a node; `out` NULL means a generated "swi/<op>_<k>" name. */
Onnx__NodeProto *gb_node(gbuild *g, const char *op, const char *out, int nin, const char *const *in);
#define GB_NARGS(...) ((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)))
/** OP(g, "Add", NULL, a, b) -> the node; OUT(node) is its (first) output name. */
#define OP(g, op, out, ...) gb_node((g), (op), (out), GB_NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__})
#define OUT(nd) ((const char *)(nd)->output[0])
/** Shorthand: the output name of OP(...). */
#define V(g, op, ...) OUT(OP(g, op, NULL, __VA_ARGS__))

void gb_attr_i(gbuild *g, Onnx__NodeProto *n, const char *name, int64_t v);
void gb_attr_s(gbuild *g, Onnx__NodeProto *n, const char *name, const char *v);
void gb_attr_ints(gbuild *g, Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
void gb_attr_t(gbuild *g, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t);
void gb_attr_g(gbuild *g, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *graph);

/** A tensor with raw_data of the right size (zeroed), returned through *data. */
Onnx__TensorProto *gb_tensor(arena *A, const char *name, int elem_type, int ndims, const int64_t *dims,
                             void **data);
/** Add an initializer (a new tensor) to g; returns its name. data may be NULL (zeros). */
const char *gb_init_tensor(gbuild *g, const char *name, int elem_type, int ndims, const int64_t *dims,
                           const void *data);
/** int64 vector initializer [n]. */
const char *gb_i64(gbuild *g, const char *name, int n, const int64_t *v);
/** int64 scalar (0-d) initializer. */
const char *gb_i64_scalar(gbuild *g, const char *name, int64_t v);

/** A tensor ValueInfo; dims[k] >= 0 is a fixed size, < 0 takes params[k] (NULL -> no
 *  dim info). ndims < 0: no shape at all. */
Onnx__ValueInfoProto *gb_value_info(arena *A, const char *name, int elem_type, int ndims, const int64_t *dims,
                                    const char *const *params);
void gb_add_vi(gbuild *g, Onnx__ValueInfoProto *vi);
/** Assemble a GraphProto from the builder's nodes and initializers. */
Onnx__GraphProto *gb_graph(gbuild *g, const char *name, int n_in, Onnx__ValueInfoProto **in, int n_out,
                           Onnx__ValueInfoProto **out);

/** Append to an arena-allocated pointer array (grows by doubling). */
void arr_push(arena *A, void ***arr, size_t *n, size_t *cap, void *item);

#endif
