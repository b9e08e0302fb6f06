/* swi_dnnl.h's example assumes a context, parameters (dims 3, the rest set), an input and
 * the outputs. */
#include <stdio.h>

#include "swi_dnnl.h"

int header_example(swi_ctx *ctx, swi_params params, swi_tensor input, const swi_output *outputs,
                   int n_outputs);

int header_example(swi_ctx *ctx, swi_params params, swi_tensor input, const swi_output *outputs,
                   int n_outputs) {
#include SWI_HEADER_EXAMPLE
}
