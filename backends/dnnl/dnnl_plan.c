/* dnnl_plan.c -- planning a window shape into oneDNN primitives, running windows through
 * the plan, the swi_predictor callback. */
#include "dnnl_internal.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DN_ALIGN 64
#define DN_LIVE 1000000 /* reader count that keeps a value alive (graph outputs) */

/* ------------------------------------------------------------------------- */
/* bookkeeping                                                                */
/* ------------------------------------------------------------------------- */

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void *dn_alloc(size_t bytes) {
    size_t n = (bytes + DN_ALIGN - 1) / DN_ALIGN * DN_ALIGN;
    return aligned_alloc(DN_ALIGN, n ? n : DN_ALIGN);
}

static int keep_buf(swi_dnnl_model *m, void *p) {
    if (grow((void **)&m->bufs, &m->capbufs, m->nbufs + 1, sizeof *m->bufs)) return -1;
    m->bufs[m->nbufs++] = p;
    return 0;
}

/* A memory object: slot >= 0 an activation buffer (bound when the plan is complete),
 * slot -1 with own != NULL a persistent buffer, slot -1 and own NULL the caller's. */
static dnnl_memory_t new_mem(swi_dnnl_model *m, const dnnl_memory_desc_t *md, int slot, void *own) {
    /* both arrays share one capacity: grow the second from the same old value */
    int cap = m->capmems, cap2 = m->capmems;
    if (grow((void **)&m->mems, &cap, m->nmems + 1, sizeof *m->mems)) return NULL;
    if (grow((void **)&m->mem_slot, &cap2, m->nmems + 1, sizeof *m->mem_slot)) {
        m->capmems = cap < cap2 ? cap : cap2; /* mem_slot kept its old size */
        return NULL;
    }
    m->capmems = cap;
    dnnl_memory_t mem = NULL;
    if (dnnl_memory_create(&mem, md, m->eng, own ? own : DNNL_MEMORY_NONE) != dnnl_success) return NULL;
    m->mems[m->nmems] = mem;
    m->mem_slot[m->nmems] = slot;
    m->nmems++;
    return mem;
}

static int slot_get(swi_dnnl_model *m, size_t bytes) {
    int best = -1;
    for (int s = 0; s < m->nslots; s++) {
        if (!m->slot_free[s]) continue;
        /* the smallest free slot that fits, else the largest free one (grown) */
        if (best < 0)
            best = s;
        else if (m->slot_bytes[s] >= bytes &&
                 (m->slot_bytes[best] < bytes || m->slot_bytes[s] < m->slot_bytes[best]))
            best = s;
        else if (m->slot_bytes[best] < bytes && m->slot_bytes[s] > m->slot_bytes[best])
            best = s;
    }
    if (best < 0) {
        int cap = m->capslots;
        if (grow((void **)&m->slot_bytes, &cap, m->nslots + 1, sizeof *m->slot_bytes)) return -1;
        cap = m->capslots;
        if (grow((void **)&m->slot_ptr, &cap, m->nslots + 1, sizeof *m->slot_ptr)) return -1;
        cap = m->capslots;
        if (grow((void **)&m->slot_free, &cap, m->nslots + 1, sizeof *m->slot_free)) return -1;
        m->capslots = cap;
        best = m->nslots++;
        m->slot_bytes[best] = 0;
        m->slot_ptr[best] = NULL;
    }
    m->slot_free[best] = 0;
    if (m->slot_bytes[best] < bytes) m->slot_bytes[best] = bytes;
    return best;
}

static void slot_put(swi_dnnl_model *m, int s) {
    if (s >= 0) m->slot_free[s] = 1;
}

/* One reader of value k is done. */
static void release(swi_dnnl_model *m, int k) {
    dn_value *v = &m->v[k];
    if (v->producer == -2) return;
    if (--v->uses == 0 && v->slot >= 0) {
        slot_put(m, v->slot);
        v->slot = -1;
    }
}

typedef struct plan_ctx {
    int nt; /* OpenMP threads of the primitives being created (threads_for) */
    swi_dnnl_model *m;
    char *err;
    size_t errlen;
    const dn_node *node;
    dnnl_data_type_t act; /* activation type */
} plan_ctx;

static int fail(plan_ctx *c, const char *what, dnnl_status_t s) {
    if (c->node)
        dn_err(c->err, c->errlen, "%s: node '%s': %s (oneDNN: %s)", c->m->path, c->node->name, what,
               dnnl_status2str(s));
    else
        dn_err(c->err, c->errlen, "%s: %s (oneDNN: %s)", c->m->path, what, dnnl_status2str(s));
    return -1;
}

static int add_step(plan_ctx *c, dnnl_primitive_desc_t pd, const dnnl_exec_arg_t *args, int nargs,
                    int reorder) {
    swi_dnnl_model *m = c->m;
    dnnl_primitive_t prim = NULL;
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    if (s != dnnl_success) return fail(c, "cannot create a primitive", s);
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sb = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sb > m->scratch_bytes) m->scratch_bytes = sb;
    if (grow((void **)&m->steps, &m->capsteps, m->nsteps + 1, sizeof *m->steps)) {
        dnnl_primitive_destroy(prim);
        return fail(c, "out of memory", dnnl_out_of_memory);
    }
    dn_step *st = &m->steps[m->nsteps++];
    memset(st, 0, sizeof *st);
    st->prim = prim;
    st->reorder = reorder;
    for (int i = 0; i < nargs; i++) st->args[st->nargs++] = args[i];
    /* the scratchpad memory is made when its size is known (bind_buffers) */
    if (sb) st->args[st->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, NULL};
    if (reorder) m->reorders++;
    st->threads = c->nt;
    return 0;
}

/* The threads of the primitives created next, for `work` (elements touched; a convolution's
 * multiply-adds / 32): at least 2^17 each, at most the run's. A small layer is not worth
 * sharing: each OpenMP region ends in a barrier, a scheduler round trip on a loaded
 * machine. oneDNN sizes its kernels by the threads in effect when a primitive is created,
 * so this is set then, and again before it runs. */
static void threads_for(plan_ctx *c, double work) {
    double t = work / (double)(1 << 17);
    c->nt = t >= c->m->opt.threads ? c->m->opt.threads : t >= 1 ? (int)t : 1;
#ifdef _OPENMP
    omp_set_num_threads(c->nt);
#endif
}

static dnnl_primitive_attr_t new_attr(void) {
    dnnl_primitive_attr_t a = NULL;
    if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user) != dnnl_success) {
        dnnl_primitive_attr_destroy(a);
        return NULL;
    }
    return a;
}

static int pd_create(plan_ctx *c, dnnl_primitive_desc_t *pd, const void *desc, dnnl_primitive_attr_t attr,
                     const char *what) {
    dnnl_primitive_attr_t own = attr ? NULL : new_attr();
    dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, attr ? attr : own, c->m->eng, NULL);
    if (own) dnnl_primitive_attr_destroy(own);
    if (s != dnnl_success) return fail(c, what, s);
    return 0;
}

static dnnl_format_tag_t plain_tag(int rank) {
    static const dnnl_format_tag_t t[] = {dnnl_a,    dnnl_a,     dnnl_ab,    dnnl_abc,
                                          dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    return t[rank < 1 ? 1 : rank > 6 ? 6 : rank];
}

static void md_init(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_data_type_t dt,
                    dnnl_format_tag_t tag) {
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    if (dnnl_memory_desc_init_by_tag(md, rank, d, dt, tag) != dnnl_success) memset(md, 0, sizeof *md);
}

/* A reorder from `src` into a new memory of md `want` (persistent when own_buf, else in a
 * fresh activation slot returned through *slot). Executed now when `now`, else a step. */
static dnnl_memory_t reorder_to(plan_ctx *c, dnnl_memory_t src, const dnnl_memory_desc_t *src_md,
                                const dnnl_memory_desc_t *want, int now, int *slot) {
    swi_dnnl_model *m = c->m;
    size_t bytes = dnnl_memory_desc_get_size(want);
    dnnl_memory_t dst;
    if (now) {
        void *buf = dn_alloc(bytes);
        if (!buf || keep_buf(m, buf)) {
            free(buf);
            fail(c, "out of memory for the weights", dnnl_out_of_memory);
            return NULL;
        }
        m->weight_bytes += bytes;
        dst = new_mem(m, want, -1, buf);
    } else {
        *slot = slot_get(m, bytes);
        if (*slot < 0) {
            fail(c, "out of memory", dnnl_out_of_memory);
            return NULL;
        }
        dst = new_mem(m, want, *slot, NULL);
    }
    if (!dst) {
        fail(c, "cannot create a memory", dnnl_out_of_memory);
        return NULL;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    dnnl_primitive_desc_t pd = NULL;
    /* a layout change between layers: threads by its size, the layer's restored after */
    const double saved_work = (double)c->nt * (double)(1 << 17);
    if (!now) threads_for(c, (double)bytes / 4);
    /* a one-off (weights) keeps its scratchpad inside; a step shares the plan's */
    dnnl_primitive_attr_t attr = now ? NULL : new_attr();
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, src_md, m->eng, want, m->eng, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        fail(c, "no reorder between these layouts", s);
        return NULL;
    }
    if (now) {
        dnnl_primitive_t p = NULL;
        s = dnnl_primitive_create(&p, pd);
        dnnl_primitive_desc_destroy(pd);
        if (s == dnnl_success) s = dnnl_primitive_execute(p, m->stream, 2, args);
        if (s == dnnl_success) s = dnnl_stream_wait(m->stream);
        if (p) dnnl_primitive_destroy(p);
        if (s != dnnl_success) {
            fail(c, "reordering the weights failed", s);
            return NULL;
        }
        return dst;
    }
    int r = add_step(c, pd, args, 2, 1);
    threads_for(c, saved_work);
    dnnl_primitive_desc_destroy(pd);
    return r ? NULL : dst;
}

/* Value k's memory in layout `want`: its own, or a reordered copy (a step) whose slot is
 * returned in *tmp (to be released after the reader's step). */
static dnnl_memory_t as_layout(plan_ctx *c, int k, const dnnl_memory_desc_t *want, int *tmp) {
    dn_value *v = &c->m->v[k];
    *tmp = -1;
    if (dnnl_memory_desc_equal(&v->md, want)) return v->mem;
    return reorder_to(c, v->mem, &v->md, want, 0, tmp);
}

/* A constant (value k) as a memory of `want`, reordered once from its plain float32 form
 * of `rank` x dims. */
static dnnl_memory_t constant_as(plan_ctx *c, int k, int rank, const int64_t *dims, dnnl_format_tag_t tag,
                                 const dnnl_memory_desc_t *want) {
    swi_dnnl_model *m = c->m;
    dn_value *v = &m->v[k];
    dnnl_memory_desc_t plain;
    md_init(&plain, rank, dims, dnnl_f32, tag);
    if (dnnl_memory_desc_get_size(&plain) != (size_t)v->count * sizeof(float)) {
        fail(c, "a constant's size does not match its use", dnnl_invalid_arguments);
        return NULL;
    }
    dnnl_memory_t src = new_mem(m, &plain, -1, v->data);
    if (!src) {
        fail(c, "cannot create a memory", dnnl_out_of_memory);
        return NULL;
    }
    if (dnnl_memory_desc_equal(&plain, want)) return src;
    return reorder_to(c, src, &plain, want, 1, NULL);
}

static dnnl_memory_t constant(plan_ctx *c, int k, int rank, const int64_t *dims,
                              const dnnl_memory_desc_t *want) {
    return constant_as(c, k, rank, dims, plain_tag(rank), want);
}

/* The constant k broadcast against a tensor of rank x dims (ONNX rules: aligned right,
 * sizes equal or 1) into out[rank]; -1 when it does not broadcast. */
static int broadcast_dims(const dn_value *v, int rank, const int64_t *dims, int64_t *out) {
    if (v->init_rank > rank) {
        /* leading ones beyond the rank are harmless */
        for (int i = 0; i < v->init_rank - rank; i++)
            if (v->init_dims[i] != 1) return -1;
    }
    for (int i = 0; i < rank; i++) {
        int j = v->init_rank - rank + i;
        int64_t d = j >= 0 ? v->init_dims[j] : 1;
        if (d != 1 && d != dims[i]) return -1;
        out[i] = d;
    }
    return 0;
}

/* The output value of the current node: md given, slot fresh or (inplace >= 0) taken over
 * from value `inplace` when this node is its last reader and the layouts agree. */
static int produce(plan_ctx *c, int k, const dnnl_memory_desc_t *md, int inplace) {
    swi_dnnl_model *m = c->m;
    dn_value *v = &m->v[k];
    v->md = *md;
    if (inplace >= 0) {
        dn_value *src = &m->v[inplace];
        if (src->producer >= 0 && src->uses == 1 && src->slot >= 0 && dnnl_memory_desc_equal(&src->md, md)) {
            v->slot = src->slot;
            src->slot = -1; /* handed over: the release after the step frees nothing */
            v->mem = new_mem(m, md, v->slot, NULL);
            return v->mem ? 0 : fail(c, "cannot create a memory", dnnl_out_of_memory);
        }
    }
    v->slot = slot_get(m, dnnl_memory_desc_get_size(md));
    if (v->slot < 0) return fail(c, "out of memory", dnnl_out_of_memory);
    v->mem = new_mem(m, md, v->slot, NULL);
    return v->mem ? 0 : fail(c, "cannot create a memory", dnnl_out_of_memory);
}

static int too_small(plan_ctx *c) {
    dn_err(c->err, c->errlen, "%s: node '%s': the window is too small for this layer", c->m->path,
           c->node->name);
    return -1;
}

/* Sizes a layer computed: each dimension at most 2^24 and the tensor at most 2^40 elements,
 * so that later layers' arithmetic cannot overflow (a hostile graph can chain strides). */
static int dims_ok(plan_ctx *c, const dn_value *y) {
    int64_t n = 1;
    for (int i = 0; i < y->rank; i++) {
        if (y->dims[i] < 1 || y->dims[i] > ((int64_t)1 << 24) || n > ((int64_t)1 << 40) / y->dims[i]) {
            dn_err(c->err, c->errlen,
                   "%s: node '%s': an output of more than 2^40 elements or 2^24 along an axis", c->m->path,
                   c->node->name);
            return -1;
        }
        n *= y->dims[i];
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* the operators                                                              */
/* ------------------------------------------------------------------------- */

static dnnl_alg_kind_t eltwise_alg(int op) {
    return op == DN_RELU ? dnnl_eltwise_relu : op == DN_SIGMOID ? dnnl_eltwise_logistic : dnnl_eltwise_tanh;
}

static int plan_conv(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x = &m->v[d->in[0]], *w = &m->v[d->in[1]], *y = &m->v[d->out];
    const int deconv = d->op == DN_DECONV;
    const int nk = d->nk, rank = x->rank, g = d->group;
    if (rank != nk + 2) {
        dn_err(c->err, c->errlen, "%s: node '%s': %d-D kernel on a rank-%d tensor", m->path, d->name, nk,
               rank);
        return -1;
    }
    const int64_t cin = x->dims[1];
    const int64_t cout = deconv ? w->init_dims[1] * g : w->init_dims[0];
    if (cin % g || cout % g || (deconv ? w->init_dims[0] != cin : w->init_dims[1] * g != cin)) {
        dn_err(c->err, c->errlen, "%s: node '%s': weights %lld x %lld for %lld input channels in %d group%s",
               m->path, d->name, (long long)w->init_dims[0], (long long)w->init_dims[1], (long long)cin, g,
               g == 1 ? "" : "s");
        return -1;
    }
    int64_t ydims[DN_MAX_RANK] = {1, cout};
    dnnl_dims_t strides, dil, pl, pr;
    for (int a = 0; a < nk; a++) {
        int64_t ext = (d->kernel[a] - 1) * d->dil[a] + 1;
        if (deconv)
            ydims[2 + a] =
                (x->dims[2 + a] - 1) * d->strides[a] + ext - d->pad_l[a] - d->pad_r[a] + d->out_pad[a];
        else
            ydims[2 + a] = (x->dims[2 + a] + d->pad_l[a] + d->pad_r[a] - ext) / d->strides[a] + 1;
        if (ydims[2 + a] < 1 || (!deconv && x->dims[2 + a] + d->pad_l[a] + d->pad_r[a] < ext))
            return too_small(c);
        strides[a] = d->strides[a];
        dil[a] = d->dil[a] - 1;
        pl[a] = d->pad_l[a];
        pr[a] = d->pad_r[a] - (deconv ? d->out_pad[a] : 0);
    }
    y->rank = rank;
    memcpy(y->dims, ydims, sizeof ydims);
    if (dims_ok(c, y)) return -1;
    double macs = (double)(deconv ? cin : cout) * (double)((deconv ? cout : cin) / g);
    for (int a = 0; a < nk; a++)
        macs *= (double)d->kernel[a] * (double)(deconv ? x->dims[2 + a] : ydims[2 + a]);
    m->flops += 2 * macs;
    /* weights: logical [G,] OC/G, IC/G, k...; the ONNX layout named by tag */
    int64_t wd[6];
    int wr = 0;
    if (g > 1) wd[wr++] = g;
    wd[wr++] = cout / g;
    wd[wr++] = cin / g;
    for (int a = 0; a < nk; a++) wd[wr++] = d->kernel[a];
    dnnl_format_tag_t wtag = plain_tag(wr);
    if (deconv) {
        static const dnnl_format_tag_t io[] = {0, 0, 0, dnnl_bac, dnnl_bacd, dnnl_bacde};
        static const dnnl_format_tag_t gio[] = {0, 0, 0, 0, dnnl_acbd, dnnl_acbde, dnnl_acbdef};
        wtag = g > 1 ? gio[wr] : io[wr];
    }
    dnnl_memory_desc_t src_any, w_any, b_md, dst_any, w_plain;
    md_init(&src_any, rank, x->dims, c->act, dnnl_format_tag_any);
    md_init(&w_any, wr, wd, c->act, dnnl_format_tag_any);
    md_init(&dst_any, rank, ydims, c->act, dnnl_format_tag_any);
    md_init(&w_plain, wr, wd, dnnl_f32, wtag);
    const int has_bias = d->nin == 3 && d->in[2] >= 0;
    if (has_bias) {
        if (m->v[d->in[2]].count != cout) {
            dn_err(c->err, c->errlen, "%s: node '%s': bias of %lld values for %lld channels", m->path,
                   d->name, (long long)m->v[d->in[2]].count, (long long)cout);
            return -1;
        }
        md_init(&b_md, 1, &cout, dnnl_f32, dnnl_a);
    }
    if ((size_t)w->count * sizeof(float) != dnnl_memory_desc_get_size(&w_plain)) {
        dn_err(c->err, c->errlen, "%s: node '%s': the weights' size does not match", m->path, d->name);
        return -1;
    }
    dnnl_primitive_attr_t attr = new_attr();
    if (!attr) return fail(c, "out of memory", dnnl_out_of_memory);
    if (d->post >= 0) {
        dnnl_post_ops_t po = NULL;
        dnnl_alg_kind_t alg = d->post == DN_RELU      ? dnnl_eltwise_relu
                              : d->post == DN_SIGMOID ? dnnl_eltwise_logistic
                                                      : dnnl_eltwise_tanh;
        if (dnnl_post_ops_create(&po) != dnnl_success ||
            dnnl_post_ops_append_eltwise(po, 1.f, alg, d->post_alpha, 0.f) ||
            dnnl_primitive_attr_set_post_ops(attr, po)) {
            dnnl_post_ops_destroy(po);
            dnnl_primitive_attr_destroy(attr);
            return fail(c, "cannot fuse the activation", dnnl_out_of_memory);
        }
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s;
    if (deconv) {
        dnnl_deconvolution_desc_t cd;
        s = dnnl_dilated_deconvolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_deconvolution_direct, &src_any, &w_any, has_bias ? &b_md : NULL,
            &dst_any, strides, dil, pl, pr);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &cd, attr, m->eng, NULL);
    } else {
        dnnl_convolution_desc_t cd;
        s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                       &src_any, &w_any, has_bias ? &b_md : NULL, &dst_any,
                                                       strides, dil, pl, pr);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &cd, attr, m->eng, NULL);
    }
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return fail(c, "no oneDNN convolution for these attributes", s);
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int tmp = -1, rc = -1;
    dnnl_memory_t wmem = constant_as(c, d->in[1], wr, wd, wtag, w_md);
    dnnl_memory_t bmem = has_bias ? constant(c, d->in[2], 1, &cout, &b_md) : NULL;
    dnnl_memory_t xmem = wmem && (bmem || !has_bias) ? as_layout(c, d->in[0], src_md, &tmp) : NULL;
    if (xmem && !produce(c, d->out, dst_md, -1)) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, xmem}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DST, y->mem}, {DNNL_ARG_BIAS, bmem}};
        rc = add_step(c, pd, args, has_bias ? 4 : 3, 0);
    }
    slot_put(m, tmp);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Per-channel float32 [C] memory of constant k (which must hold C values). */
static dnnl_memory_t channel_const(plan_ctx *c, int k, int64_t ch) {
    if (c->m->v[k].count != ch) {
        dn_err(c->err, c->errlen, "%s: node '%s': a per-channel constant of %lld values for %lld channels",
               c->m->path, c->node->name, (long long)c->m->v[k].count, (long long)ch);
        return NULL;
    }
    dnnl_memory_desc_t md;
    md_init(&md, 1, &ch, dnnl_f32, dnnl_a);
    return constant(c, k, 1, &ch, &md);
}

static int plan_norm(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x = &m->v[d->in[0]], *y = &m->v[d->out];
    const int64_t ch = x->dims[1];
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof y->dims);
    const int bn = d->op == DN_BNORM;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (bn ? dnnl_use_global_stats : 0u);
    dnnl_batch_normalization_desc_t bd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s =
        dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &x->md, d->eps, flags);
    if (s != dnnl_success) return fail(c, "no oneDNN normalisation for this tensor", s);
    /* the folded activation as a post-op where oneDNN's normalisation takes one, else a
     * step of its own after it (in place) */
    int tail = d->post >= 0;
    if (tail) {
        dnnl_primitive_attr_t attr = new_attr();
        dnnl_post_ops_t po = NULL;
        if (attr && dnnl_post_ops_create(&po) == dnnl_success &&
            dnnl_post_ops_append_eltwise(po, 1.f, eltwise_alg(d->post), d->post_alpha, 0.f) == dnnl_success &&
            dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &bd, attr, m->eng, NULL) == dnnl_success)
            tail = 0;
        if (po) dnnl_post_ops_destroy(po);
        if (attr) dnnl_primitive_attr_destroy(attr);
    }
    if (!pd && pd_create(c, &pd, &bd, NULL, "no oneDNN normalisation for this tensor")) return -1;
    int rc = -1;
    dnnl_memory_t sc = channel_const(c, d->in[1], ch), sh = sc ? channel_const(c, d->in[2], ch) : NULL;
    dnnl_memory_t mean = NULL, var = NULL;
    if (sh && bn) {
        mean = channel_const(c, d->in[3], ch);
        var = mean ? channel_const(c, d->in[4], ch) : NULL;
    } else if (sh) {
        /* instance statistics, computed per window: held beside the weights */
        const dnnl_memory_desc_t *mmd =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_MEAN);
        size_t b = mmd ? dnnl_memory_desc_get_size(mmd) : 0;
        if (b) {
            void *b1 = dn_alloc(b);
            if (b1 && keep_buf(m, b1)) {
                free(b1);
                b1 = NULL;
            }
            void *b2 = b1 ? dn_alloc(b) : NULL;
            if (b2 && keep_buf(m, b2)) {
                free(b2);
                b2 = NULL;
            }
            if (b2) {
                m->stat_bytes += 2 * b;
                mean = new_mem(m, mmd, -1, b1);
                var = mean ? new_mem(m, mmd, -1, b2) : NULL;
            }
            if (!mean || !var) fail(c, "out of memory for the statistics", dnnl_out_of_memory);
        } else {
            mean = var = sc; /* not asked for: placeholders, never passed */
        }
    }
    if (mean && var && !produce(c, d->out, &x->md, d->in[0])) {
        dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, x->mem}, {DNNL_ARG_DST, y->mem}, {DNNL_ARG_SCALE, sc},
                                   {DNNL_ARG_SHIFT, sh},   {DNNL_ARG_MEAN, mean},  {DNNL_ARG_VARIANCE, var}};
        int nargs = bn || mean != sc ? 6 : 4;
        rc = add_step(c, pd, args, nargs, 0);
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc == 0 && tail) {
        dnnl_eltwise_desc_t ed;
        pd = NULL;
        if ((s = dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, eltwise_alg(d->post), &y->md,
                                                d->post_alpha, 0.f)) != dnnl_success)
            return fail(c, "no oneDNN eltwise for this tensor", s);
        if (pd_create(c, &pd, &ed, NULL, "no oneDNN eltwise for this tensor")) return -1;
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, y->mem}, {DNNL_ARG_DST, y->mem}};
        rc = add_step(c, pd, args, 2, 0);
        dnnl_primitive_desc_destroy(pd);
    }
    return rc;
}

static int plan_eltwise(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x = &m->v[d->in[0]], *y = &m->v[d->out];
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof y->dims);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s;
    int tmp = -1, rc = -1;
    if (d->op == DN_PRELU) {
        int64_t sd[DN_MAX_RANK];
        if (broadcast_dims(&m->v[d->in[1]], x->rank, x->dims, sd)) {
            dn_err(c->err, c->errlen, "%s: node '%s': the slope does not broadcast to the input", m->path,
                   d->name);
            return -1;
        }
        dnnl_memory_desc_t wmd;
        /* the slopes in the layout the primitive prefers (a plain one runs the slow
         * reference kernel on blocked data) */
        md_init(&wmd, x->rank, sd, c->act, dnnl_format_tag_any);
        dnnl_prelu_desc_t pdsc;
        s = dnnl_prelu_forward_desc_init(&pdsc, dnnl_forward_inference, &x->md, &wmd);
        if (s != dnnl_success) return fail(c, "no oneDNN PReLU for this tensor", s);
        if (pd_create(c, &pd, &pdsc, NULL, "no oneDNN PReLU for this tensor")) return -1;
        dnnl_memory_t w =
            constant(c, d->in[1], x->rank, sd, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
        if (w && !produce(c, d->out, &x->md, d->in[0])) {
            dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, x->mem}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y->mem}};
            rc = add_step(c, pd, args, 3, 0);
        }
    } else if (d->op == DN_SOFTMAX) {
        int axis = d->axis < 0 ? d->axis + x->rank : d->axis;
        if (axis < 0 || axis >= x->rank || (m->opset < 13 && axis != x->rank - 1)) {
            dn_err(c->err, c->errlen,
                   "%s: node '%s': Softmax axis %d of a rank-%d tensor is not supported "
                   "(before opset 13 only the last axis)",
                   m->path, d->name, d->axis, x->rank);
            return -1;
        }
        dnnl_softmax_desc_t sd;
        s = dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &x->md, axis);
        if (s != dnnl_success) return fail(c, "no oneDNN softmax for this tensor", s);
        if (pd_create(c, &pd, &sd, NULL, "no oneDNN softmax for this tensor")) return -1;
        if (!produce(c, d->out, &x->md, -1)) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, x->mem}, {DNNL_ARG_DST, y->mem}};
            rc = add_step(c, pd, args, 2, 0);
        }
    } else {
        dnnl_alg_kind_t alg = d->op == DN_RELU      ? dnnl_eltwise_relu
                              : d->op == DN_SIGMOID ? dnnl_eltwise_logistic
                                                    : dnnl_eltwise_tanh;
        dnnl_eltwise_desc_t ed;
        s = dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, &x->md, d->alpha, 0.f);
        if (s != dnnl_success) return fail(c, "no oneDNN eltwise for this tensor", s);
        if (pd_create(c, &pd, &ed, NULL, "no oneDNN eltwise for this tensor")) return -1;
        if (!produce(c, d->out, &x->md, d->in[0])) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, x->mem}, {DNNL_ARG_DST, y->mem}};
            rc = add_step(c, pd, args, 2, 0);
        }
    }
    slot_put(m, tmp);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int plan_binary(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    int a = d->in[0], b = d->in[1];
    if (m->v[a].producer == -2) {
        int t = a; /* Add and Mul commute: the computed operand first */
        a = b;
        b = t;
    }
    dn_value *x = &m->v[a], *z = &m->v[b], *y = &m->v[d->out];
    if (x->producer == -2) {
        dn_err(c->err, c->errlen, "%s: node '%s': both operands are constants (fold them first)", m->path,
               d->name);
        return -1;
    }
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof y->dims);
    int tmp = -1, rc = -1;
    dnnl_memory_t zmem;
    dnnl_memory_desc_t zmd;
    if (z->producer == -2) {
        int64_t bd[DN_MAX_RANK];
        if (!z->data) {
            dn_err(c->err, c->errlen, "%s: node '%s': the constant operand is not float32", m->path, d->name);
            return -1;
        }
        if (broadcast_dims(z, x->rank, x->dims, bd)) {
            dn_err(c->err, c->errlen, "%s: node '%s': the constant operand does not broadcast to the other",
                   m->path, d->name);
            return -1;
        }
        md_init(&zmd, x->rank, bd, c->act, plain_tag(x->rank));
        zmem = constant(c, b, x->rank, bd, &zmd);
    } else {
        if (z->rank != x->rank || memcmp(z->dims, x->dims, sizeof x->dims) != 0) {
            dn_err(c->err, c->errlen,
                   "%s: node '%s': operands of different shapes (the oneDNN backend "
                   "broadcasts constants only)",
                   m->path, d->name);
            return -1;
        }
        zmd = x->md;
        zmem = as_layout(c, b, &zmd, &tmp);
    }
    if (!zmem) return -1;
    dnnl_binary_desc_t bdsc;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_binary_desc_init(&bdsc, d->op == DN_ADD ? dnnl_binary_add : dnnl_binary_mul,
                                            &x->md, &zmd, &x->md);
    if (s != dnnl_success) {
        slot_put(m, tmp);
        return fail(c, "no oneDNN binary for these tensors", s);
    }
    if (pd_create(c, &pd, &bdsc, NULL, "no oneDNN binary for these tensors")) {
        slot_put(m, tmp);
        return -1;
    }
    if (!produce(c, d->out, &x->md, a)) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC_0, x->mem}, {DNNL_ARG_SRC_1, zmem}, {DNNL_ARG_DST, y->mem}};
        rc = add_step(c, pd, args, 3, 0);
    }
    slot_put(m, tmp);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int plan_concat(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x0 = &m->v[d->in[0]], *y = &m->v[d->out];
    int axis = d->axis < 0 ? d->axis + x0->rank : d->axis;
    if (axis < 0 || axis >= x0->rank) {
        dn_err(c->err, c->errlen, "%s: node '%s': axis %d of a rank-%d tensor", m->path, d->name, d->axis,
               x0->rank);
        return -1;
    }
    y->rank = x0->rank;
    memcpy(y->dims, x0->dims, sizeof y->dims);
    y->dims[axis] = 0;
    dnnl_memory_desc_t mds[DN_MAX_IN];
    for (int i = 0; i < d->nin; i++) {
        dn_value *x = &m->v[d->in[i]];
        for (int a = 0; a < x0->rank; a++)
            if (x->rank != x0->rank || (a != axis && x->dims[a] != x0->dims[a])) {
                dn_err(c->err, c->errlen, "%s: node '%s': inputs of different shapes", m->path, d->name);
                return -1;
            }
        y->dims[axis] += x->dims[axis];
        if (dims_ok(c, y)) return -1;
        mds[i] = x->md;
        if (mds[i].data_type != c->act)
            return fail(c, "Concat of the graph input in bf16", dnnl_unimplemented);
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = new_attr();
    dnnl_status_t s = dnnl_concat_primitive_desc_create(&pd, NULL, d->nin, axis, mds, attr, m->eng);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return fail(c, "no oneDNN concat for these tensors", s);
    int rc = -1;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!produce(c, d->out, dst_md, -1)) {
        dnnl_exec_arg_t args[DN_MAX_IN + 1];
        for (int i = 0; i < d->nin; i++)
            args[i] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + i, m->v[d->in[i]].mem};
        args[d->nin] = (dnnl_exec_arg_t){DNNL_ARG_DST, y->mem};
        rc = add_step(c, pd, args, d->nin + 1, 0);
    }
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The step of a primitive with one source (d's first input, in the layout `want`) and one
 * destination (d's output, in the layout pd chose): pd is destroyed. 0, or -1. */
static int src_dst_step(plan_ctx *c, const dn_node *d, dnnl_primitive_desc_t pd,
                        const dnnl_memory_desc_t *want) {
    swi_dnnl_model *m = c->m;
    int tmp = -1, rc = -1;
    dnnl_memory_t xm = as_layout(c, d->in[0], want, &tmp);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (xm && !produce(c, d->out, dst_md, -1)) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, m->v[d->out].mem}};
        rc = add_step(c, pd, args, 2, 0);
    }
    slot_put(m, tmp);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int plan_pool(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x = &m->v[d->in[0]], *y = &m->v[d->out];
    if (x->rank != d->nk + 2) {
        dn_err(c->err, c->errlen, "%s: node '%s': %d-D pooling on a rank-%d tensor", m->path, d->name, d->nk,
               x->rank);
        return -1;
    }
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof y->dims);
    dnnl_dims_t strides, kernel, dil, pl, pr;
    for (int a = 0; a < d->nk; a++) {
        int64_t ext = (d->kernel[a] - 1) * d->dil[a] + 1;
        if (x->dims[2 + a] + d->pad_l[a] + d->pad_r[a] < ext) return too_small(c);
        y->dims[2 + a] = (x->dims[2 + a] + d->pad_l[a] + d->pad_r[a] - ext) / d->strides[a] + 1;
        strides[a] = d->strides[a];
        kernel[a] = d->kernel[a];
        dil[a] = d->dil[a] - 1;
        pl[a] = d->pad_l[a];
        pr[a] = d->pad_r[a];
    }
    if (dims_ok(c, y)) return -1;
    dnnl_memory_desc_t dst_any, want = x->md;
    want.data_type = c->act;
    md_init(&dst_any, y->rank, y->dims, c->act, dnnl_format_tag_any);
    dnnl_alg_kind_t alg = d->op == DN_MAXPOOL ? dnnl_pooling_max
                          : d->count_pad      ? dnnl_pooling_avg_include_padding
                                              : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t pdsc;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &want, &dst_any,
                                                        strides, kernel, dil, pl, pr);
    if (s != dnnl_success) return fail(c, "no oneDNN pooling for these attributes", s);
    if (pd_create(c, &pd, &pdsc, NULL, "no oneDNN pooling for these attributes")) return -1;
    return src_dst_step(c, d, pd, &want);
}

static int plan_resize(plan_ctx *c, const dn_node *d) {
    swi_dnnl_model *m = c->m;
    dn_value *x = &m->v[d->in[0]], *y = &m->v[d->out];
    if ((d->nscale && d->nscale != x->rank) || (d->nsize && d->nsize != x->rank)) {
        dn_err(c->err, c->errlen, "%s: node '%s': %d scales or sizes for a rank-%d tensor", m->path, d->name,
               d->nscale ? d->nscale : d->nsize, x->rank);
        return -1;
    }
    y->rank = x->rank;
    for (int a = 0; a < x->rank; a++) {
        if (d->nsize) {
            y->dims[a] = d->size[a];
        } else {
            double o = (double)x->dims[a] * (double)d->scale[a];
            if (!(o >= 1 && o <= (double)((int64_t)1 << 24)) || fabs(o - floor(o + 0.5)) > 1e-4) {
                dn_err(c->err, c->errlen,
                       "%s: node '%s': scale %g of size %lld is not a whole output size (the "
                       "oneDNN backend needs one)",
                       m->path, d->name, (double)d->scale[a], (long long)x->dims[a]);
                return -1;
            }
            y->dims[a] = (int64_t)floor(o + 0.5);
        }
        int bad = y->dims[a] < 1 || (a < 2 && y->dims[a] != x->dims[a]) ||
                  (!d->linear && a >= 2 && (y->dims[a] < x->dims[a] || y->dims[a] % x->dims[a]));
        if (bad) {
            dn_err(c->err, c->errlen,
                   "%s: node '%s': resizing %lld to %lld along axis %d is not supported by the "
                   "oneDNN backend (batch and channels kept; nearest: whole up-scaling only)",
                   m->path, d->name, (long long)x->dims[a], (long long)y->dims[a], a);
            return -1;
        }
    }
    if (dims_ok(c, y)) return -1;
    dnnl_memory_desc_t dst_any, want = x->md;
    want.data_type = c->act;
    md_init(&dst_any, y->rank, y->dims, c->act, dnnl_format_tag_any);
    dnnl_resampling_desc_t rd;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_resampling_forward_desc_init(
        &rd, dnnl_forward_inference, d->linear ? dnnl_resampling_linear : dnnl_resampling_nearest, NULL,
        &want, &dst_any);
    if (s != dnnl_success) return fail(c, "no oneDNN resampling for these sizes", s);
    if (pd_create(c, &pd, &rd, NULL, "no oneDNN resampling for these sizes")) return -1;
    return src_dst_step(c, d, pd, &want);
}

/* ------------------------------------------------------------------------- */
/* plan, run                                                                  */
/* ------------------------------------------------------------------------- */

void dn_plan_free(swi_dnnl_model *m) {
    for (int i = 0; i < m->nsteps; i++) dnnl_primitive_destroy(m->steps[i].prim);
    for (int i = 0; i < m->nmems; i++) dnnl_memory_destroy(m->mems[i]);
    for (int i = 0; i < m->nbufs; i++) free(m->bufs[i]);
    for (int i = 0; i < m->nslots; i++) free(m->slot_ptr[i]);
    free(m->steps);
    free(m->mems);
    free(m->mem_slot);
    free(m->bufs);
    free(m->slot_bytes);
    free(m->slot_ptr);
    free(m->slot_free);
    free(m->scratch);
    m->steps = NULL;
    m->mems = NULL;
    m->mem_slot = NULL;
    m->bufs = NULL;
    m->slot_bytes = NULL;
    m->slot_ptr = NULL;
    m->slot_free = NULL;
    m->scratch = NULL;
    m->nsteps = m->capsteps = m->nmems = m->capmems = m->nbufs = m->capbufs = m->nslots = m->capslots = 0;
    m->scratch_bytes = m->weight_bytes = m->stat_bytes = m->act_bytes = 0;
    m->scratch_mem = m->in_mem = m->out_mem = NULL;
    m->reorders = 0;
    m->flops = 0;
    m->planned = 0;
    for (int i = 0; i < m->nv; i++) {
        m->v[i].mem = NULL;
        m->v[i].slot = -1;
    }
}

/* Allocate the activation slots and the scratchpad and bind them. */
static int bind_buffers(plan_ctx *c) {
    swi_dnnl_model *m = c->m;
    size_t total = m->model_bytes + m->weight_bytes + m->scratch_bytes + m->stat_bytes;
    for (int s = 0; s < m->nslots; s++) total += m->slot_bytes[s];
    if (m->opt.max_bytes && total > m->opt.max_bytes) {
        dn_err(c->err, c->errlen,
               "%s: the plan for this window needs %zu MiB (weights, scratch, activations); "
               "the limit is %zu MiB",
               m->path, total >> 20, m->opt.max_bytes >> 20);
        return -2;
    }
    for (int s = 0; s < m->nslots; s++) {
        m->slot_ptr[s] = dn_alloc(m->slot_bytes[s]);
        if (!m->slot_ptr[s]) return fail(c, "out of memory for the activations", dnnl_out_of_memory);
        m->act_bytes += m->slot_bytes[s];
    }
    for (int i = 0; i < m->nmems; i++)
        if (m->mem_slot[i] >= 0 &&
            dnnl_memory_set_data_handle(m->mems[i], m->slot_ptr[m->mem_slot[i]]) != dnnl_success)
            return fail(c, "cannot bind a buffer", dnnl_runtime_error);
    if (m->scratch_bytes) {
        m->scratch = dn_alloc(m->scratch_bytes);
        if (!m->scratch) return fail(c, "out of memory for the scratchpad", dnnl_out_of_memory);
        int64_t n = (int64_t)m->scratch_bytes;
        dnnl_memory_desc_t md;
        md_init(&md, 1, &n, dnnl_u8, dnnl_a);
        m->scratch_mem = new_mem(m, &md, -1, m->scratch);
        if (!m->scratch_mem) return fail(c, "cannot create a memory", dnnl_out_of_memory);
        for (int i = 0; i < m->nsteps; i++)
            for (int k = 0; k < m->steps[i].nargs; k++)
                if (m->steps[i].args[k].arg == DNNL_ARG_SCRATCHPAD)
                    m->steps[i].args[k].memory = m->scratch_mem;
    }
    return 0;
}

static void set_threads(const swi_dnnl_model *m) {
    /* OpenMP: the calling thread's next parallel regions (oneDNN's) use this many */
#ifdef _OPENMP
    omp_set_num_threads(m->opt.threads > 0 ? m->opt.threads : 1);
#else
    (void)m; /* built without OpenMP (the fuzz target): oneDNN's own default */
#endif
}

swi_status swi_dnnl_prepare(swi_dnnl_model *m, int output, int64_t channels, int dims, const int64_t *roi,
                            swi_head_spec *head, char *err, size_t errlen) {
    if (!m || !roi || !head || dims < 1 || dims > 3 || channels < 1 || channels > 65536) {
        dn_err(err, errlen, "swi_dnnl_prepare: bad arguments");
        return SWI_ERR_INVALID_ARG;
    }
    if (output < 0 || output >= m->nout) {
        dn_err(err, errlen, "%s: output %d: the model has %d output%s", m->path, output, m->nout,
               m->nout == 1 ? "" : "s");
        return SWI_ERR_INVALID_ARG;
    }
    if (m->in_rank && m->in_rank != dims + 2) {
        dn_err(err, errlen, "%s: the model input has rank %d; windows of %d dims need rank %d", m->path,
               m->in_rank, dims, dims + 2);
        return SWI_ERR_SHAPE;
    }
    if (m->in_channels > 0 && m->in_channels != channels) {
        dn_err(err, errlen, "%s: the model expects %lld input channels, not %lld", m->path,
               (long long)m->in_channels, (long long)channels);
        return SWI_ERR_SHAPE;
    }
    int64_t elems = channels;
    for (int a = 0; a < dims; a++) {
        if (roi[a] < 1 || roi[a] > 65536 || elems > ((int64_t)1 << 40) / roi[a]) {
            dn_err(err, errlen, "%s: window size out of range", m->path);
            return SWI_ERR_INVALID_ARG;
        }
        elems *= roi[a];
    }
    dn_plan_free(m);
    set_threads(m);
    plan_ctx c = {m->opt.threads, m,    err,
                  errlen,         NULL, m->opt.precision == SWI_DNNL_BF16 ? dnnl_bf16 : dnnl_f32};
    for (int i = 0; i < m->nv; i++) m->v[i].uses = 0;
    for (int i = 0; i < m->nn; i++)
        if (!m->nd[i].fused)
            for (int k = 0; k < m->nd[i].nin; k++)
                if (m->nd[i].in[k] >= 0) m->v[m->nd[i].in[k]].uses++;
    const int out_v = m->outputs[output];
    m->v[out_v].uses += DN_LIVE;
    /* the input: the caller's windows, bound per window */
    dn_value *x = &m->v[m->input];
    x->rank = dims + 2;
    x->dims[0] = 1;
    x->dims[1] = channels;
    for (int a = 0; a < dims; a++) x->dims[2 + a] = roi[a];
    md_init(&x->md, x->rank, x->dims, dnnl_f32, plain_tag(x->rank));
    m->in_mem = x->mem = new_mem(m, &x->md, -1, NULL);
    if (!m->in_mem) {
        fail(&c, "cannot create a memory", dnnl_out_of_memory);
        goto bad;
    }
    for (int i = 0; i < m->nn; i++) {
        const dn_node *d = &m->nd[i];
        if (d->fused) continue;
        c.node = d;
        for (int k = 0; k < d->nin; k++) {
            int vi = d->in[k];
            /* constants are read by the ops that take them (weights); others need a tensor */
            if (vi >= 0 && m->v[vi].producer != -2 && !m->v[vi].mem) {
                dn_err(err, errlen, "%s: node '%s' reads '%s', which is not computed", m->path, d->name,
                       m->v[vi].name);
                goto bad;
            }
        }
        if (m->v[d->in[0]].producer == -2 && d->op != DN_ADD && d->op != DN_MUL) {
            dn_err(err, errlen, "%s: node '%s': its data input is a constant (fold it first)", m->path,
                   d->name);
            goto bad;
        }
        /* the work of the layer, for its threads: elements read, or a convolution's
         * multiply-adds / 32 (estimated from its input: exact for stride 1) */
        double work = 0;
        for (int k = 0; k < d->nin; k++) {
            const dn_value *v = d->in[k] >= 0 ? &m->v[d->in[k]] : NULL;
            if (!v || v->producer == -2) continue;
            double e = 1;
            for (int a = 0; a < v->rank; a++) e *= (double)v->dims[a];
            if ((d->op == DN_CONV || d->op == DN_DECONV) && k == 0) {
                e = e / (double)v->dims[1] * (double)m->v[d->in[1]].count / 32;
                for (int a = 0; d->op == DN_CONV && a < d->nk; a++) e /= (double)d->strides[a];
            }
            work += e;
        }
        threads_for(&c, work);
        int rc;
        switch (d->op) {
        case DN_CONV:
        case DN_DECONV: rc = plan_conv(&c, d); break;
        case DN_INORM:
        case DN_BNORM: rc = plan_norm(&c, d); break;
        case DN_ADD:
        case DN_MUL: rc = plan_binary(&c, d); break;
        case DN_CONCAT: rc = plan_concat(&c, d); break;
        case DN_MAXPOOL:
        case DN_AVGPOOL: rc = plan_pool(&c, d); break;
        case DN_RESIZE: rc = plan_resize(&c, d); break;
        default: rc = plan_eltwise(&c, d); break;
        }
        if (rc) goto bad;
        for (int k = 0; k < d->nin; k++)
            if (d->in[k] >= 0) release(m, d->in[k]);
        if (m->v[d->out].uses == 0 && m->v[d->out].slot >= 0) {
            /* read by nobody (another output of the graph): its buffer is free again */
            slot_put(m, m->v[d->out].slot);
            m->v[d->out].slot = -1;
        }
    }
    c.node = NULL;
    dn_value *y = &m->v[out_v];
    if (!y->mem || y->rank != dims + 2) {
        dn_err(err, errlen, "%s: the output is not computed from the input, or has rank %d (expected %d)",
               m->path, y->rank, dims + 2);
        goto bad;
    }
    dnnl_memory_desc_t omd;
    md_init(&omd, y->rank, y->dims, dnnl_f32, plain_tag(y->rank));
    m->out_mem = new_mem(m, &omd, -1, NULL);
    if (!m->out_mem) {
        fail(&c, "cannot create a memory", dnnl_out_of_memory);
        goto bad;
    }
    {
        threads_for(&c, (double)dnnl_memory_desc_get_size(&omd) / 4);
        dnnl_primitive_desc_t pd = NULL;
        dnnl_primitive_attr_t attr = new_attr();
        dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, &y->md, m->eng, &omd, m->eng, attr);
        dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success) {
            fail(&c, "no reorder for the output", s);
            goto bad;
        }
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, y->mem}, {DNNL_ARG_TO, m->out_mem}};
        int rc = add_step(&c, pd, args, 2, !dnnl_memory_desc_equal(&y->md, &omd));
        dnnl_primitive_desc_destroy(pd);
        if (rc) goto bad;
    }
    int br = bind_buffers(&c);
    if (br == -2) {
        dn_plan_free(m);
        return SWI_ERR_BUDGET;
    }
    if (br) goto bad;
    m->out_index = output;
    m->dims = dims;
    m->channels = channels;
    m->classes = y->dims[1];
    m->in_window = elems;
    m->out_window = y->dims[1];
    for (int a = 0; a < 3; a++) {
        m->roi[a] = a < dims ? roi[a] : 0;
        m->ospatial[a] = a < dims ? y->dims[2 + a] : 0;
        if (a < dims) m->out_window *= y->dims[2 + a];
    }
    memset(head, 0, sizeof *head);
    head->channels = m->classes;
    for (int a = 0; a < dims; a++) head->spatial[a] = m->ospatial[a];
    m->planned = 1;
    return SWI_OK;
bad:
    dn_plan_free(m);
    return SWI_ERR_INVALID_ARG;
}

swi_status swi_dnnl_run(swi_dnnl_model *m, const float *in, int64_t n, float *out, char *err, size_t errlen) {
    if (!m || !m->planned || !in || !out || n < 0) {
        dn_err(err, errlen, "swi_dnnl_run: %s",
               m && !m->planned ? "the model is not prepared" : "bad arguments");
        return SWI_ERR_INVALID_ARG;
    }
    set_threads(m);
    for (int64_t i = 0; i < n; i++) {
        dnnl_status_t s = dnnl_memory_set_data_handle(m->in_mem, (void *)(in + i * m->in_window));
        if (s == dnnl_success) s = dnnl_memory_set_data_handle(m->out_mem, out + i * m->out_window);
        int threads = 0;
        for (int k = 0; k < m->nsteps && s == dnnl_success; k++) {
#ifdef _OPENMP
            if (m->steps[k].threads != threads) omp_set_num_threads(threads = m->steps[k].threads);
#endif
            s = dnnl_primitive_execute(m->steps[k].prim, m->stream, m->steps[k].nargs, m->steps[k].args);
        }
        (void)threads;
        if (s == dnnl_success) s = dnnl_stream_wait(m->stream);
        if (s != dnnl_success) {
            dn_err(err, errlen, "%s: the network failed (oneDNN: %s)", m->path, dnnl_status2str(s));
            return SWI_ERR_PREDICTOR;
        }
    }
    return SWI_OK;
}

static int dnnl_predict(void *user, swi_batch *b) {
    swi_dnnl_model *m = user;
    char err[512];
    const int n = swi_batch_count(b);
    if (!m->planned || swi_batch_dims(b) != m->dims || swi_batch_channels(b) != m->channels ||
        memcmp(swi_batch_roi(b), m->roi, (size_t)m->dims * sizeof(int64_t)) != 0) {
        swi_batch_set_error(b, "the oneDNN model was prepared for another window");
        return 1;
    }
    float *out = swi_batch_output(b, 0, m->classes, m->ospatial);
    if (!out) return 1;
    if (swi_dnnl_run(m, swi_batch_input(b), n, out, err, sizeof err) != SWI_OK) {
        swi_batch_set_error(b, err);
        return 1;
    }
    const int64_t total = (int64_t)n * m->out_window;
    for (int64_t i = 0; i < total; i++)
        if (isnan(out[i])) {
            snprintf(err, sizeof err, "%s: the network output is NaN; its labels would be meaningless",
                     m->path);
            swi_batch_set_error(b, err);
            return 1;
        }
    return 0;
}

swi_predictor swi_dnnl_predictor(swi_dnnl_model *m) {
    swi_predictor p = {dnnl_predict, m};
    return p;
}

void swi_dnnl_memory(const swi_dnnl_model *m, size_t *weights, size_t *scratch, size_t *activations) {
    if (weights) *weights = m ? m->model_bytes + m->weight_bytes : 0;
    if (scratch) *scratch = m ? m->scratch_bytes + m->stat_bytes : 0;
    if (activations) *activations = m ? m->act_bytes : 0;
}

double swi_dnnl_flops(const swi_dnnl_model *m) { return m && m->planned ? m->flops : 0; }

void swi_dnnl_plan_counts(const swi_dnnl_model *m, int *primitives, int *reorders) {
    if (primitives) *primitives = m ? m->nsteps : 0;
    if (reorders) *reorders = m ? m->reorders : 0;
}

/* ------------------------------------------------------------------------- */
/* open, close                                                                */
/* ------------------------------------------------------------------------- */

void swi_dnnl_options_init(swi_dnnl_options *o) {
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->precision = SWI_DNNL_FP32;
}

const char *swi_dnnl_version(void) {
    static char buf[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
    return buf;
}

const char *swi_dnnl_threading(void) {
    const dnnl_version_t *v = dnnl_version();
    return v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
           : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
           : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                : "other";
}

int swi_dnnl_bf16_supported(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

swi_status swi_dnnl_open(const char *path, const swi_dnnl_options *opt, swi_dnnl_model **out, char *err,
                         size_t errlen) {
    if (!path || !out) {
        dn_err(err, errlen, "swi_dnnl_open: path or out is NULL");
        return SWI_ERR_INVALID_ARG;
    }
    *out = NULL;
    swi_dnnl_options o;
    swi_dnnl_options_init(&o);
    if (opt) o = *opt;
    if (o.threads < 1 || o.threads > SWI_MAX_THREADS ||
        (o.precision != SWI_DNNL_FP32 && o.precision != SWI_DNNL_BF16)) {
        dn_err(err, errlen, "swi_dnnl_open: threads must be 1..%d and precision fp32 or bf16",
               SWI_MAX_THREADS);
        return SWI_ERR_INVALID_ARG;
    }
    if (o.precision == SWI_DNNL_BF16 && !swi_dnnl_bf16_supported()) {
        dn_err(err, errlen,
               "bf16 precision needs a CPU with avx512_bf16 or AMX; this one has neither (use fp32)");
        return SWI_ERR_INVALID_ARG;
    }
    swi_dnnl_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        dn_err(err, errlen, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    m->opt = o;
    swi_status st = dn_read_graph(m, path, err, errlen);
    if (st == SWI_OK && dnnl_engine_create(&m->eng, dnnl_cpu, 0) != dnnl_success) {
        dn_err(err, errlen, "%s: oneDNN has no CPU engine", path);
        st = SWI_ERR_INVALID_ARG;
    }
    if (st == SWI_OK && dnnl_stream_create(&m->stream, m->eng, dnnl_stream_default_flags) != dnnl_success) {
        dn_err(err, errlen, "%s: cannot create a oneDNN stream", path);
        st = SWI_ERR_NOMEM;
    }
    if (st != SWI_OK) {
        swi_dnnl_close(m);
        return st;
    }
    *out = m;
    return SWI_OK;
}

void swi_dnnl_close(swi_dnnl_model *m) {
    if (!m) return;
    dn_plan_free(m);
    if (m->stream) dnnl_stream_destroy(m->stream);
    if (m->eng) dnnl_engine_destroy(m->eng);
    for (int i = 0; i < m->nv; i++) {
        free(m->v[i].name);
        free(m->v[i].data);
        free(m->v[i].idata);
    }
    for (int i = 0; i < m->nn; i++) free(m->nd[i].name);
    free(m->v);
    free(m->nd);
    free(m->outputs);
    free(m->path);
    free(m);
}
