/* swi_store.h's example assumes a context, parameters, a predictor and the outputs. */
#include <stdio.h>

#include "swi_store.h"

int header_example(swi_ctx *ctx, swi_params params, swi_predictor net, const swi_output *outputs,
                   int n_outputs);

int header_example(swi_ctx *ctx, swi_params params, swi_predictor net, const swi_output *outputs,
                   int n_outputs) {
#include SWI_HEADER_EXAMPLE
}
