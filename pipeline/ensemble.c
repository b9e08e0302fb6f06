/* ensemble.c -- see ensemble.h: the models' predictors averaged by swi_predictor_mean
 * (the first model's outputs written in place, the others' added in order, the sum
 * divided by n: the order the ensemble always summed in). */
#include "ensemble.h"

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
    if (n < 1 || n > SEG_ENSEMBLE_MAX) return -1;
    for (int m = 0; m < n; m++) e->members[m] = swi_ort_predictor(models[m]);
    char err[256];
    return swi_predictor_mean(e->members, n, head->channels, 3, head->spatial, sw_batch, &e->mean, err,
                              sizeof err) == SWI_OK
               ? 0
               : -1;
}

swi_predictor seg_ensemble_predictor(seg_ensemble *e) { return e->mean; }

void seg_ensemble_free(seg_ensemble *e) { swi_predictor_mean_free(&e->mean); }
