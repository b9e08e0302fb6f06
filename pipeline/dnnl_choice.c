/* dnnl_choice.c -- which backend runs an ONNX model: ONNX Runtime, or oneDNN
 * (backends/dnnl) where --backend allows it and it covers the graph. The ONNX Runtime
 * model is opened and prepared either way (it settles the window and the output shape);
 * the oneDNN plan must agree with it. */
#include "internal.h"
#include "segment.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef SWI_HAVE_DNNL
#include "swi_dnnl.h"
#endif

static const char *backend_of(const pl_opts *o) { return o->backend ? o->backend : "auto"; }
static int want_bf16(const pl_opts *o) { return o->precision && strcmp(o->precision, "bf16") == 0; }

int seg_dnnl_check_opts(const pl_opts *o, char *err) {
    const char *b = backend_of(o);
    if (strcmp(b, "auto") != 0 && strcmp(b, "ort") != 0 && strcmp(b, "dnnl") != 0) {
        cli_err(err, "--backend must be auto, ort or dnnl (got '%s')", b);
        return -1;
    }
    if (o->precision && strcmp(o->precision, "fp32") != 0 && strcmp(o->precision, "bf16") != 0) {
        cli_err(err, "--precision must be fp32 or bf16 (got '%s')", o->precision);
        return -1;
    }
    if (want_bf16(o) && strcmp(b, "ort") == 0) {
        cli_err(err, "--precision bf16 runs on the dnnl backend; it does not apply to --backend ort");
        return -1;
    }
    return 0;
}

swi_predictor seg_model_predictor(seg_state *s) {
#ifdef SWI_HAVE_DNNL
    if (s->dnnl) return swi_dnnl_predictor(s->dnnl);
#endif
    return swi_ort_predictor(s->model);
}

size_t seg_dnnl_bytes(const seg_state *s) {
    size_t w = 0, sc = 0, a = 0;
#ifdef SWI_HAVE_DNNL
    swi_dnnl_memory(s->dnnl, &w, &sc, &a);
#else
    (void)s;
#endif
    return w + sc + a;
}

int swi_pipeline_dnnl_covers(const char *model, char *why, size_t n) {
#ifdef SWI_HAVE_DNNL
    swi_dnnl_model *m = NULL;
    swi_status st = swi_dnnl_open(model, NULL, &m, why, n);
    swi_dnnl_close(m);
    return st == SWI_OK;
#else
    (void)model;
    snprintf(why, n, "this swi was built without oneDNN (libdnnl-dev)");
    return -1;
#endif
}

void seg_dnnl_close(seg_state *s) {
#ifdef SWI_HAVE_DNNL
    swi_dnnl_close(s->dnnl);
#endif
    s->dnnl = NULL;
}

/* ONNX Runtime runs the model: fine for auto (the note says why), an error when the
 * options asked for oneDNN. */
static int use_ort(const pl_opts *o, seg_state *s, const char *why, char *err) {
    if (strcmp(backend_of(o), "dnnl") == 0 || want_bf16(o)) {
        cli_err(err, "%s %s: %s", strcmp(backend_of(o), "dnnl") == 0 ? "--backend dnnl" : "--precision bf16",
                o->model, why);
        return 1;
    }
    snprintf(s->backend_note, sizeof s->backend_note, "ONNX Runtime%s%s", *why ? " (oneDNN: " : "",
             *why ? why : "");
    if (*why) {
        size_t n = strlen(s->backend_note);
        if (n + 1 < sizeof s->backend_note) strcpy(s->backend_note + n, ")");
    }
    return 0;
}

int seg_dnnl_choose(const pl_opts *o, seg_state *s, const int64_t roi[3], const swi_head_spec *head,
                    char *err) {
    seg_dnnl_close(s);
    if (strcmp(backend_of(o), "ort") == 0) return use_ort(o, s, "", err);
    /* auto keeps ONNX Runtime until oneDNN is measured faster on the machines swi runs on
     * (bench/dnnl.sh); bf16 is oneDNN's only */
    if (strcmp(backend_of(o), "auto") == 0 && !want_bf16(o))
        return use_ort(o, s, "chosen only with --backend dnnl or --precision bf16", err);
    if (o->cuda) return use_ort(o, s, "not with --device cuda", err);
    if (o->tta) return use_ort(o, s, "not with --tta (yet)", err);
    if (s->n_members > 1) return use_ort(o, s, "not for an ensemble (yet)", err);
#ifndef SWI_HAVE_DNNL
    (void)roi;
    (void)head;
    return use_ort(o, s, "this swi was built without oneDNN (libdnnl-dev)", err);
#else
    swi_dnnl_options dopt;
    swi_dnnl_options_init(&dopt);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    dopt.threads = o->threads > 0 ? o->threads : cpus > 0 && cpus <= SWI_MAX_THREADS ? (int)cpus : 1;
    dopt.precision = want_bf16(o) ? SWI_DNNL_BF16 : SWI_DNNL_FP32;
    dopt.max_bytes = o->max_memory; /* the plan alone may not pass the whole budget */
    char why[SWI_ERRLEN];
    swi_dnnl_model *m = NULL;
    swi_head_spec dh;
    swi_status st = swi_dnnl_open(o->model, &dopt, &m, why, sizeof why);
    if (st == SWI_OK) st = swi_dnnl_prepare(m, o->head, s->channels, 3, roi, &dh, why, sizeof why);
    if (st == SWI_OK &&
        (dh.channels != head->channels || memcmp(dh.spatial, head->spatial, sizeof dh.spatial))) {
        snprintf(why, sizeof why, "its output shape differs from ONNX Runtime's");
        st = SWI_ERR_SHAPE;
    }
    if (st != SWI_OK) {
        swi_dnnl_close(m);
        /* the loader's message names the model; keep only what follows it */
        const char *w = why;
        size_t n = strlen(o->model);
        if (strncmp(w, o->model, n) == 0 && w[n] == ':') w += n + 2 <= strlen(w) ? n + 2 : n;
        return use_ort(o, s, w, err);
    }
    s->dnnl = m;
    int prims = 0, reorders = 0;
    swi_dnnl_plan_counts(m, &prims, &reorders);
    snprintf(s->backend_note, sizeof s->backend_note,
             "oneDNN %s (%s, %d thread%s, %s): %d primitives, %d of them layout reorders", swi_dnnl_version(),
             swi_dnnl_threading(), dopt.threads, dopt.threads == 1 ? "" : "s", want_bf16(o) ? "bf16" : "fp32",
             prims, reorders);
    return 0;
#endif
}
