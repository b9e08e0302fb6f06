/*
 * predictors.h -- the golden cases' synthetic networks (tests/data/golden/README.md,
 * "The predictors"), written against the swi_batch interface.
 */
#ifndef SWI_GOLDEN_PREDICTORS_H
#define SWI_GOLDEN_PREDICTORS_H

#include <stdint.h>

#include "case_file.h"
#include "swi.h"

typedef struct golden_predictor {
    golden_predictor_kind kind;
    int64_t out_channels; /* C of the case; pair's second head has C + 1 */
} golden_predictor;

/* Heads the predictor produces (2 for pair, else 1). */
int golden_predictor_heads(golden_predictor_kind kind);

/* Output window of head `head` for a window `roi` (dims entries): roi itself, or
 * floor(roi / 2) for down2. */
void golden_predictor_window(golden_predictor_kind kind, int head, int dims, const int64_t *roi,
                             int64_t *out);

/* swi_predictor.predict; user is a golden_predictor. */
int golden_predict(void *user, swi_batch *batch);

#endif
