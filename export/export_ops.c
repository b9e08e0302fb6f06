/* export_ops.c -- small graph helpers of `swi export`: constants, typed scalars, and
 * one-node operations the pipeline uses often. */
#include "export_internal.h"

#include <string.h>

/* float32 -> float16, round to nearest even (the fill values of float16 networks). */
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

/* float32 -> bfloat16, round to nearest even, NaN kept quiet. */
static uint16_t f32_to_bf16(float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    if ((v & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v >> 16) | 0x40);
    v += 0x7fffu + ((v >> 16) & 1);
    return (uint16_t)(v >> 16);
}

/* v as one element of type t at p (numeric types; others are left as they are). */
static void encode_value(int t, double v, void *p) {
    if (t == OX_FLOAT) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (t == OX_DOUBLE)
        memcpy(p, &v, 8);
    else if (t == OX_FLOAT16) {
        uint16_t h = f32_to_f16((float)v);
        memcpy(p, &h, 2);
    } else if (t == OX_BFLOAT16) {
        uint16_t h = f32_to_bf16((float)v);
        memcpy(p, &h, 2);
    } else if (t == OX_INT64) {
        int64_t i = (int64_t)v;
        memcpy(p, &i, 8);
    }
}

const char *const_scalar_of_type(gbuild *g, int t, double v) {
    unsigned char buf[8] = {0};
    encode_value(t, v, buf);
    return gb_init_tensor(g, NULL, t, 0, NULL, buf);
}

const char *const_i64(gbuild *g, int n, const int64_t *v) { return gb_i64(g, NULL, n, v); }
const char *const_i64_1(gbuild *g, int64_t a) { return gb_i64(g, NULL, 1, &a); }
const char *const_i64_scalar(gbuild *g, int64_t a) { return gb_i64_scalar(g, NULL, a); }
const char *const_i64_zeros(gbuild *g, int n) {
    int64_t z[8] = {0};
    return gb_i64(g, NULL, n, z);
}

const char *op_cast(gbuild *g, const char *v, int to, const char *out) {
    Onnx__NodeProto *n = OP(g, "Cast", out, v);
    gb_attr_i(g, n, "to", to);
    return OUT(n);
}

const char *op_min_i64(gbuild *g, const char *a, const char *b) {
    return V(g, "Where", V(g, "Less", a, b), a, b);
}

const char *op_scalar(gbuild *g, const char *vec1) { return V(g, "Reshape", vec1, const_i64(g, 0, NULL)); }

/* A tensor of shape `shape` (an int64 vector) filled with v. */
const char *op_filled(gbuild *g, const char *shape, int t, double v) {
    Onnx__NodeProto *n = OP(g, "ConstantOfShape", NULL, shape);
    void *p;
    int64_t one = 1;
    Onnx__TensorProto *tv = gb_tensor(g->A, NULL, t, 1, &one, &p);
    encode_value(t, v, p);
    gb_attr_t(g, n, "value", tv);
    return OUT(n);
}

const char *op_concat0(gbuild *g, int n, const char *const *in) {
    Onnx__NodeProto *c = gb_node(g, "Concat", NULL, n, in);
    gb_attr_i(g, c, "axis", 0);
    return OUT(c);
}
