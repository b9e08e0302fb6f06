/* status.c -- status names, the context's error message, versions. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const char *swi_status_name(swi_status s) {
    switch (s) {
    case SWI_OK: return "SWI_OK";
    case SWI_ERR_INVALID_ARG: return "SWI_ERR_INVALID_ARG";
    case SWI_ERR_NOMEM: return "SWI_ERR_NOMEM";
    case SWI_ERR_OVERFLOW: return "SWI_ERR_OVERFLOW";
    case SWI_ERR_PREDICTOR: return "SWI_ERR_PREDICTOR";
    case SWI_ERR_SHAPE: return "SWI_ERR_SHAPE";
    case SWI_ERR_BUDGET: return "SWI_ERR_BUDGET";
    case SWI_ERR_CALLBACK: return "SWI_ERR_CALLBACK";
    case SWI_ERR_CANCELLED: return "SWI_ERR_CANCELLED";
    case SWI_ERR_THREAD: return "SWI_ERR_THREAD";
    case SWI_ERR_READ: return "SWI_ERR_READ";
    case SWI_ERR_IO: return "SWI_ERR_IO";
    }
    return "SWI_ERR_UNKNOWN";
}

const char *swi_version(void) { return SWI_VERSION_STRING; }

swi_status swi__fail(swi_ctx *ctx, swi_status st, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return st;
}

void swi__clear_error(swi_ctx *ctx) {
    if (ctx) ctx->err[0] = '\0';
}

const char *swi_last_error(const swi_ctx *ctx) {
    if (!ctx) return "no context (swi_create returned NULL: out of memory)";
    return ctx->err;
}

const char *swi_format_bytes(size_t bytes, char *buf, size_t len) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || len == 0) return buf;
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else if (v < 10)
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    else if (v < 100)
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    else
        snprintf(buf, len, "%.0f %s", v, unit[u]);
    return buf;
}

char *swi_message_one_line(char *msg) {
    if (!msg) return msg;
    size_t len = strlen(msg);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) msg[i] = ' ';
    while (len > 0 && msg[len - 1] == ' ') msg[--len] = '\0';
    return msg;
}

swi_ctx *swi_create(void) {
    swi_ctx *ctx = swi__calloc(1, sizeof *ctx);
    return ctx;
}

void swi__drop_results(swi_ctx *ctx) {
    if (!ctx) return;
    for (int i = 0; i < ctx->n_results; i++) swi__free(ctx->results[i].data);
    swi__free(ctx->results);
    ctx->results = NULL;
    ctx->n_results = 0;
}

void swi_free(swi_ctx *ctx) {
    if (!ctx) return;
    swi__drop_results(ctx);
    swi__free(ctx);
}

swi_status swi_run_stats(const swi_ctx *ctx, swi_stats *stats) {
    if (!ctx || !stats) return SWI_ERR_INVALID_ARG;
    *stats = ctx->stats;
    return SWI_OK;
}

int swi__frontier_stats(const swi_ctx *ctx, size_t *planned, size_t *measured) {
    *planned = ctx->frontier_planned;
    *measured = ctx->frontier_peak;
    return ctx->frontier_comparable;
}

const void *swi_result(const swi_ctx *ctx, int index, size_t *bytes) {
    if (bytes) *bytes = 0;
    if (!ctx || index < 0 || index >= ctx->n_results || !ctx->results[index].data) return NULL;
    if (bytes) *bytes = ctx->results[index].bytes;
    return ctx->results[index].data;
}

int swi_result_size(const swi_ctx *ctx, int head, int64_t size[SWI_MAX_DIMS]) {
    if (!ctx || head < 0 || head >= SWI_MAX_HEADS || ctx->dims == 0) return 0;
    if (ctx->out_size[head][0] == 0) return 0;
    for (int k = 0; k < SWI_MAX_DIMS; k++) size[k] = k < ctx->dims ? ctx->out_size[head][k] : 0;
    return ctx->dims;
}

int64_t swi_result_channels(const swi_ctx *ctx, int head) {
    if (!ctx || head < 0 || head >= SWI_MAX_HEADS) return 0;
    return ctx->out_channels[head];
}

void swi_output_init(swi_output *o, int head, swi_reduce reduce) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->head = head;
    o->reduce = reduce;
}
