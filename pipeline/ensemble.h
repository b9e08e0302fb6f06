/*
 * ensemble.h -- several ONNX models as one predictor (`swi segment --model A --model B`):
 * every window goes through each model and the mean of their outputs is what the engine
 * blends, so an ensemble costs one more window buffer, not one frontier per model.
 */
#ifndef SWI_CLI_ENSEMBLE_H
#define SWI_CLI_ENSEMBLE_H

#include "swi_ort.h"

#define SEG_ENSEMBLE_MAX 16

typedef struct seg_ensemble {
    swi_predictor members[SEG_ENSEMBLE_MAX]; /* each prepared model's predictor */
    swi_predictor mean;                      /* swi_predictor_mean over them */
} seg_ensemble;

/* n prepared models of the same window and head shape: allocate the scratch for batches
 * of up to sw_batch windows. Returns 0, or -1 (memory). */
int seg_ensemble_init(seg_ensemble *e, swi_ort_model *const *models, int n, const swi_head_spec *head,
                      int sw_batch);

/* Bytes of the scratch for batches of sw_batch windows (what the plan adds). */
size_t seg_ensemble_bytes(int n, const swi_head_spec *head, int sw_batch);

swi_predictor seg_ensemble_predictor(seg_ensemble *e);

void seg_ensemble_free(seg_ensemble *e);

#endif
