/* ensemble.c -- see ensemble.h. */
#include "ensemble.h"

#include <stdlib.h>
#include <string.h>

static size_t window_floats(const swi_head_spec *head) {
    return (size_t)head->channels * (size_t)head->spatial[0] * (size_t)head->spatial[1] *
           (size_t)head->spatial[2];
}

size_t seg_ensemble_bytes(int n, const swi_head_spec *head, int sw_batch) {
    return n > 1 ? window_floats(head) * (size_t)sw_batch * sizeof(float) : 0;
}

int seg_ensemble_init(seg_ensemble *e, swi_ort_model *const *models, int n, const swi_head_spec *head,
                      int sw_batch) {
    memset(e, 0, sizeof *e);
    e->models = models;
    e->n = n;
    e->classes = head->channels;
    memcpy(e->spatial, head->spatial, sizeof e->spatial);
    if (n > 1) {
        e->scratch_floats = window_floats(head) * (size_t)sw_batch;
        e->scratch = malloc(e->scratch_floats * sizeof(float));
        if (!e->scratch) return -1;
    }
    return 0;
}

static int predict(void *user, swi_batch *b) {
    seg_ensemble *e = user;
    const int n = swi_batch_count(b);
    float *out = swi_batch_output(b, 0, e->classes, e->spatial);
    if (!out) return 1;
    const size_t total = (size_t)n * (size_t)e->classes * (size_t)e->spatial[0] * (size_t)e->spatial[1] *
                         (size_t)e->spatial[2];
    if (total > e->scratch_floats && e->n > 1) {
        swi_batch_set_error(b, "ensemble: a batch larger than planned");
        return 1;
    }
    const float *in = swi_batch_input(b);
    char err[768];
    if (swi_ort_run(e->models[0], in, n, out, err, sizeof err) != SWI_OK) {
        swi_batch_set_error(b, err);
        return 1;
    }
    for (int m = 1; m < e->n; m++) {
        if (swi_ort_run(e->models[m], in, n, e->scratch, err, sizeof err) != SWI_OK) {
            swi_batch_set_error(b, err);
            return 1;
        }
        for (size_t i = 0; i < total; i++) out[i] += e->scratch[i];
    }
    const float k = (float)e->n;
    for (size_t i = 0; i < total; i++) {
        out[i] /= k;
        /* NaN scores would make a label map that looks fine and is not: stop instead. */
        if (out[i] != out[i]) {
            swi_batch_set_error(b, "the ensemble's mean output is NaN; its labels would be "
                                   "meaningless");
            return 1;
        }
    }
    return 0;
}

swi_predictor seg_ensemble_predictor(seg_ensemble *e) {
    swi_predictor p = {predict, e};
    return p;
}

void seg_ensemble_free(seg_ensemble *e) {
    free(e->scratch);
    e->scratch = NULL;
}
