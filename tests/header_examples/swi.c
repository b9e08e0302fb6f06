/* swi.h's example assumes a predictor (my_predict, my_state), an input volume [D][H][W]
 * and a label buffer of D * H * W bytes. The predictor is linked, never run. */
#include <stdio.h>

#include "swi.h"

static int my_predict(void *user, swi_batch *batch) {
    (void)user;
    return swi_batch_output(batch, 0, 2, swi_batch_roi(batch)) ? 0 : 1;
}

int header_example(const float *volume, unsigned char *labels, int64_t D, int64_t H, int64_t W,
                   void *my_state);

int header_example(const float *volume, unsigned char *labels, int64_t D, int64_t H, int64_t W,
                   void *my_state) {
#include SWI_HEADER_EXAMPLE
    return 0;
}
