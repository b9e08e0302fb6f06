/*
 * fuzz_dnnl_model.c -- the oneDNN backend's model reader and planner (backends/dnnl:
 * dnnl_graph.c, dnnl_plan.c, over onnx/onnx_io.c) on hostile ONNX files.
 *
 * Each input is a model file. The window comes from the input's length (so mutating the
 * bytes never disturbs it): 1..3 channels (or the model's own), a cube of 3..10 voxels.
 * swi_dnnl_open must accept or refuse with a message (SWI_ERR_IO, SWI_ERR_INVALID_ARG,
 * SWI_ERR_NOMEM); a model it accepts must plan or be refused the same way (SWI_ERR_SHAPE,
 * SWI_ERR_BUDGET for a plan past 64 MiB), and a plan must run one window of zeros and
 * report its memory -- never crash, leak or run away.
 */
#include "swi_dnnl.h"

#include "fuzz_common.h"

#include <string.h>

#define CHECK(cond, ...) FUZZ_CHECK("fuzz_dnnl_model", cond, __VA_ARGS__)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 18)) return 0;
    char model[600];
    fuzz_write_file("net.onnx", data, size, model, sizeof model);
    swi_dnnl_options opt;
    swi_dnnl_options_init(&opt);
    opt.max_bytes = (size_t)64 << 20;
    swi_dnnl_model *m = NULL;
    char err[512] = "";
    swi_status st = swi_dnnl_open(model, &opt, &m, err, sizeof err);
    CHECK(st == SWI_OK || st == SWI_ERR_IO || st == SWI_ERR_INVALID_ARG || st == SWI_ERR_NOMEM,
          "open: status %d", (int)st);
    CHECK(st == SWI_OK || (err[0] && !m), "open: refused without a message or with a model");
    if (st != SWI_OK) return 0;
    const int64_t r = 3 + (int64_t)(size % 8), roi[3] = {r, r + 1, r};
    swi_head_spec head;
    for (int64_t ch = 1; ch <= 3; ch++) {
        err[0] = 0;
        st = swi_dnnl_prepare(m, 0, ch, 3, roi, &head, err, sizeof err);
        CHECK(st == SWI_OK || st == SWI_ERR_SHAPE || st == SWI_ERR_INVALID_ARG || st == SWI_ERR_BUDGET ||
                  st == SWI_ERR_NOMEM,
              "prepare: status %d", (int)st);
        CHECK(st == SWI_OK || err[0], "prepare: refused without a message");
        if (st != SWI_OK) continue;
        size_t w, s, a;
        swi_dnnl_memory(m, &w, &s, &a);
        CHECK(w + s + a <= opt.max_bytes, "plan past the limit: %zu", w + s + a);
        int64_t ovox = head.channels * head.spatial[0] * head.spatial[1] * head.spatial[2];
        CHECK(head.channels >= 1 && ovox >= 1, "empty output");
        float *in = calloc((size_t)(ch * roi[0] * roi[1] * roi[2]), sizeof *in);
        float *out = malloc((size_t)ovox * sizeof *out);
        if (in && out) {
            st = swi_dnnl_run(m, in, 1, out, err, sizeof err);
            CHECK(st == SWI_OK, "run: %s", err);
        }
        free(in);
        free(out);
        break;
    }
    swi_dnnl_close(m);
    return 0;
}
