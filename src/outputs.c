/* outputs.c -- what each swi_output asks for, checked before anything runs, and where
 * its values go: the caller's dst, library memory (swi_result) or only the region
 * callback. */
#include "engine.h"

swi_status swi__check_outputs(swi_ctx *ctx, const swi_params *p, const swi_output *outs, int n_outs) {
    if (n_outs < 0 || (n_outs > 0 && !outs))
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs is NULL or n_outputs = %d is negative", n_outs);
    if (n_outs > SWI_MAX_OUTPUTS)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "n_outputs = %d: at most %d", n_outs, SWI_MAX_OUTPUTS);
    for (int i = 0; i < n_outs; i++) {
        const swi_output *o = &outs[i];
        if (o->head < 0 || o->head >= p->n_heads)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].head = %d: params.n_heads is %d", i,
                             o->head, p->n_heads);
        if ((unsigned)o->reduce > SWI_REDUCE_SOFTMAX)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].reduce = %d: unknown reduction", i,
                             (int)o->reduce);
        if ((unsigned)o->dtype > SWI_DTYPE_UINT16)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dtype = %d: unknown dtype", i,
                             (int)o->dtype);
        if (o->reduce == SWI_REDUCE_CUSTOM && !o->on_region)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d]: SWI_REDUCE_CUSTOM needs on_region", i);
        int is_label = o->reduce == SWI_REDUCE_ARGMAX;
        if (o->dtype != SWI_DTYPE_AUTO && o->dtype != SWI_DTYPE_FLOAT32 && !is_label)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "outputs[%d].dtype: integer types are only for SWI_REDUCE_ARGMAX", i);
        if (is_label && o->dtype == SWI_DTYPE_FLOAT32)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dtype: argmax labels are uint8 or uint16",
                             i);
    }
    return SWI_OK;
}

swi_status swi__resolve_output(swi_ctx *ctx, const geom *g, const swi_output *o, int i, swi_dtype *dtype,
                               size_t *bytes_out) {
    const head_geom *hg = &g->heads[o->head];
    int64_t C = hg->channels;
    swi_dtype dt = o->dtype;
    if (o->reduce == SWI_REDUCE_ARGMAX) {
        if (dt == SWI_DTYPE_AUTO) dt = C > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8;
        int64_t lim = dt == SWI_DTYPE_UINT8 ? 256 : 65536;
        if (C > lim)
            return swi__fail(ctx, SWI_ERR_INVALID_ARG,
                             "outputs[%d]: head %d has %lld channels, too many classes for %s labels", i,
                             o->head, (long long)C, lim == 256 ? "uint8" : "uint16");
    } else {
        dt = SWI_DTYPE_FLOAT32;
    }
    *dtype = dt;
    *bytes_out = 0;
    if (o->reduce == SWI_REDUCE_CUSTOM) return SWI_OK;
    size_t bytes = (size_t)g->batch * swi__dtype_size(dt);
    for (int a = 0; a < NDIM; a++)
        if (!swi__mul_size(bytes, (size_t)hg->out[a], &bytes))
            return swi__fail(ctx, SWI_ERR_OVERFLOW, "outputs[%d]: result size overflows", i);
    if ((o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_SOFTMAX) &&
        !swi__mul_size(bytes, (size_t)C, &bytes))
        return swi__fail(ctx, SWI_ERR_OVERFLOW, "outputs[%d]: result size overflows", i);
    if (o->dst && o->dst_bytes < bytes)
        return swi__fail(ctx, SWI_ERR_INVALID_ARG, "outputs[%d].dst_bytes = %zu: the result needs %zu bytes",
                         i, o->dst_bytes, bytes);
    *bytes_out = bytes;
    return SWI_OK;
}

swi_status swi__setup_outputs(run *r, const swi_output *outs) {
    for (int i = 0; i < r->n_outs; i++) {
        out_spec *os = &r->outs[i];
        os->o = outs[i];
        size_t bytes;
        swi_status st = swi__resolve_output(r->ctx, &r->g, &os->o, i, &os->dtype, &bytes);
        if (st != SWI_OK) return st;
        if (os->o.reduce == SWI_REDUCE_CUSTOM) continue;
        if (os->o.dst) {
            os->data = os->o.dst;
        } else if (!os->o.on_region) {
            os->data = swi__calloc(1, bytes);
            if (!os->data)
                return swi__fail(r->ctx, SWI_ERR_NOMEM, "out of memory for outputs[%d] (%zu bytes)", i,
                                 bytes);
            os->owned = 1;
            r->ctx->results[i].data = os->data;
            r->ctx->results[i].bytes = bytes;
        }
    }
    return SWI_OK;
}
