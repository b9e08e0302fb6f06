/*
 * stores.c -- chunked-store inputs, shards and the launcher check for the swi command.
 */
#include "stores.h"

#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cli_input_open_store(cli_input *in, int c, const char *name, void (*warn)(void *user, const char *line),
                         void *warn_user, char *err) {
    char msg[SWI_ERRLEN];
    if (swi_store_open(name, &in->stores[c], msg, sizeof msg) != SWI_OK) {
        cli_err(err, "%s", msg);
        return -1;
    }
    double fill = swi_store_fill_value(in->stores[c]);
    if (!isfinite(fill)) {
        char line[SWI_ERRLEN];
        snprintf(line, sizeof line,
                 "warning: %s: fill_value %s: chunks that are absent hold it, and are read as 0 (--nonfinite "
                 "fail refuses them)",
                 name,
                 isnan(fill) ? "NaN"
                 : fill > 0  ? "Infinity"
                             : "-Infinity");
        if (warn)
            warn(warn_user, line);
        else
            fprintf(stderr, "swi: %s\n", line);
    }
    int64_t sz[3];
    swi_store_size(in->stores[c], sz);
    if (c == 0) {
        memcpy(in->size, sz, sizeof sz);
        in->first = name;
        return 0;
    }
    const char *first = in->first ? in->first : "the first input";
    if (memcmp(sz, in->size, sizeof sz) != 0) {
        cli_err(err, "%s: size %lldx%lldx%lld differs from %s's %lldx%lldx%lld; channels must share one grid",
                name, (long long)sz[0], (long long)sz[1], (long long)sz[2], first, (long long)in->size[0],
                (long long)in->size[1], (long long)in->size[2]);
        return -1;
    }
    /* the same size on another grid (OME-Zarr's scale and translation) is another place */
    double s0[3], t0[3], s1[3], t1[3];
    swi_store_geometry(in->stores[0], s0, t0);
    swi_store_geometry(in->stores[c], s1, t1);
    for (int a = 0; a < 3; a++)
        if (fabs(s1[a] - s0[a]) > 1e-4 * fmax(fabs(s0[a]), fabs(s1[a])) || fabs(t1[a] - t0[a]) > 1e-3) {
            cli_err(err,
                    "%s: its grid (scale %g,%g,%g, translation %g,%g,%g) differs from %s's (scale %g,%g,%g, "
                    "translation %g,%g,%g); channels must share one grid",
                    name, s1[0], s1[1], s1[2], t1[0], t1[1], t1[2], first, s0[0], s0[1], s0[2], t0[0], t0[1],
                    t0[2]);
            return -1;
        }
    return 0;
}

/* The swi_reader: each channel's box, from its store or copied from memory, transformed. */
static int input_read(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *msg,
                      size_t msg_size) {
    cli_input *in = user;
    if (image != 0) {
        snprintf(msg, msg_size, "one image only");
        return 1;
    }
    const int64_t bd = hi[0] - lo[0], bh = hi[1] - lo[1], bw = hi[2] - lo[2], box = bd * bh * bw;
    for (int c = 0; c < in->channels; c++) {
        float *out = dst + (size_t)c * (size_t)box;
        if (in->stores[c]) {
            if (swi_store_read_box(in->stores[c], lo, hi, out, msg, msg_size) != SWI_OK) return 1;
        } else {
            const float *v = in->mem[c];
            for (int64_t i = 0; i < bd; i++)
                for (int64_t j = 0; j < bh; j++)
                    memcpy(out + (i * bh + j) * bw,
                           v + ((lo[0] + i) * in->size[1] + lo[1] + j) * in->size[2] + lo[2],
                           (size_t)bw * sizeof *out);
        }
        if (in->transform && in->transform(in->transform_user, out, box, msg, msg_size)) return 1;
    }
    return 0;
}

void cli_input_reader(cli_input *in) {
    in->reader.read = input_read;
    in->reader.user = in;
}

void cli_input_close(cli_input *in) {
    for (int c = 0; c < CLI_MAX_CHANNELS; c++) {
        swi_store_close(in->stores[c]);
        in->stores[c] = NULL;
    }
}

int cli_outer_axis(const swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs, int *axis,
                   char *err) {
    swi_ctx *ctx = swi_create();
    if (!ctx) {
        cli_err(err, "out of memory");
        return -1;
    }
    swi_params whole = *p;
    memset(whole.part_lo, 0, sizeof whole.part_lo);
    memset(whole.part_hi, 0, sizeof whole.part_hi);
    whole.reuse = SWI_REUSE_OFF; /* shapes only: counting reuse would read the whole input */
    swi_plan plan;
    int rc = 0;
    if (swi_plan_run(ctx, &whole, in, outs, n_outs, &plan) != SWI_OK) {
        cli_err(err, "%s", swi_last_error(ctx));
        rc = -1;
    } else {
        *axis = plan.order[0];
    }
    swi_free(ctx);
    return rc;
}

int64_t cli_whole_windows(const swi_params *p, const swi_tensor *in, const swi_output *outs, int n_outs) {
    swi_ctx *ctx = swi_create();
    if (!ctx) return -1;
    swi_params whole = *p;
    memset(whole.part_lo, 0, sizeof whole.part_lo);
    memset(whole.part_hi, 0, sizeof whole.part_hi);
    whole.reuse = SWI_REUSE_OFF; /* shapes only: counting reuse would read the whole input */
    swi_plan plan;
    int64_t n = swi_plan_run(ctx, &whole, in, outs, n_outs, &plan) == SWI_OK ? plan.windows_total : -1;
    swi_free(ctx);
    return n;
}

/* A name as every process of a job sees it: its real path where it resolves (an HDF5
 * dataset's file part, split as io splits it), else as given. */
static void real_name(const char *name, char *out, size_t n) {
    char file[4096], dset[4096], err[SWI_ERRLEN];
    char *r = NULL;
    if (swi_store_kind_of(name) == SWI_STORE_HDF5 &&
        swi_store_split_h5(name, file, sizeof file, dset, sizeof dset, err, sizeof err) == SWI_OK) {
        r = realpath(file, NULL);
        /* a name past n bytes is cut, the same for every process */
        if (r && snprintf(out, n, "%s:%s", r, dset) < 0) snprintf(out, n, "%s", name);
    } else {
        r = realpath(name, NULL);
        if (r) snprintf(out, n, "%s", r);
    }
    if (!r) snprintf(out, n, "%s", name);
    free(r);
}

void cli_job_fingerprint(const char *const *inputs, int n_inputs, const int64_t size[3],
                         const char *const *models, int n_models, const swi_params *p, const char *extra,
                         char *out, size_t n) {
    size_t k = 0;
#define ADD(...)                                                          \
    do {                                                                  \
        if (k < n) {                                                      \
            int w_ = snprintf(out + k, n - k, __VA_ARGS__);               \
            k = w_ < 0 ? n : k + (size_t)w_ < n ? k + (size_t)w_ : n - 1; \
        }                                                                 \
    } while (0)
    out[0] = '\0';
    char rn[4096];
    for (int i = 0; i < n_inputs; i++) {
        real_name(inputs[i], rn, sizeof rn);
        ADD("%sinput %s", i ? ", " : "", rn);
    }
    if (size) ADD(" %lldx%lldx%lld", (long long)size[0], (long long)size[1], (long long)size[2]);
    for (int i = 0; i < n_models; i++) {
        struct stat st;
        real_name(models[i], rn, sizeof rn);
        ADD("; model %s (%lld bytes)", rn, stat(models[i], &st) == 0 ? (long long)st.st_size : -1LL);
    }
    ADD("; roi %lld,%lld,%lld overlap %g,%g,%g mode %d sigma %g,%g,%g padding %d cval %g batch %d order %d:%d,%d,%d",
        (long long)p->roi[0], (long long)p->roi[1], (long long)p->roi[2], p->overlap[0], p->overlap[1],
        p->overlap[2], (int)p->mode, p->sigma_scale[0], p->sigma_scale[1], p->sigma_scale[2],
        (int)p->padding_mode, (double)p->cval, p->sw_batch_size, (int)p->order_mode, p->order[0], p->order[1],
        p->order[2]);
    for (int h = 0; h < p->n_heads; h++) ADD(" head%d %lld classes", h, (long long)p->heads[h].channels);
    if (extra && *extra) ADD("; %s", extra);
#undef ADD
}
