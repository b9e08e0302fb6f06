/* docs-test prelude: a fragment of the pages about running an exported model with ONNX
 * Runtime's C API, compiled as the body of a function given the volume and its size. */
#include <onnxruntime_c_api.h>
#include <stdint.h>
#include <stdio.h>

int docs_fragment(float *volume, int64_t D, int64_t H, int64_t W);
int docs_fragment(float *volume, int64_t D, int64_t H, int64_t W) {
    /* BODY */
    return 0;
}
