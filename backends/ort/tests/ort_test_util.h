/*
 * ort_test_util.h -- how the swi_ort tests open a model: options, window and prepare in
 * one call, with the few fields the tests vary. Header only, so the tests link nothing
 * more.
 */
#ifndef SWI_ORT_TEST_UTIL_H
#define SWI_ORT_TEST_UTIL_H

#include "swi_ort.h"

#include <string.h>

/* The swi_ort_options and swi_ort_window fields a test sets; zero keeps the defaults. */
typedef struct ort_test_spec {
    int threads;        /* swi_ort_options.threads (0: the online CPUs) */
    int tta;            /* swi_ort_options.tta */
    int no_rewrite;     /* 1: swi_ort_options.rewrite = 0, the model as it is */
    int output;         /* swi_ort_window.output */
    int64_t channels;   /* swi_ort_window.channels; 0: as many as the model's input has */
    int64_t roi[3];     /* swi_ort_window.roi; 0 along an axis: the model's static size */
    int64_t dyn_roi[3]; /* where roi is 0 and the model's input is dynamic: the window */
} ort_test_spec;

/* Open `path` as `s` says and prepare it; *w receives the settled window, *head the head.
 * On failure *m is NULL (the model closed) and err says why. */
static inline swi_status ort_test_open(const char *path, const ort_test_spec *s, swi_ort_model **m,
                                       swi_ort_window *w, swi_head_spec *head, char *err, size_t errlen) {
    swi_ort_options opt;
    swi_ort_options_init(&opt);
    opt.threads = s->threads;
    opt.tta = s->tta;
    if (s->no_rewrite) opt.rewrite = 0;
    *m = NULL;
    swi_status st = swi_ort_open(path, &opt, m, err, errlen);
    swi_ort_tensor_info in;
    if (st == SWI_OK) st = swi_ort_input_info(*m, &in, err, errlen);
    if (st == SWI_OK) {
        swi_ort_window_init(w, s->channels > 0 ? s->channels : in.shape[1]);
        w->output = s->output;
        memcpy(w->roi, s->roi, sizeof w->roi);
        for (int a = 0; a < 3; a++)
            if (w->roi[a] == 0 && in.shape[2 + a] <= 0) w->roi[a] = s->dyn_roi[a];
        st = swi_ort_prepare(*m, w, head, err, errlen);
    }
    if (st != SWI_OK) {
        swi_ort_close(*m);
        *m = NULL;
    }
    return st;
}

#endif
