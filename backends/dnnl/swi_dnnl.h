/*
 * swi_dnnl.h -- an ONNX network run with oneDNN primitives, as a libswi predictor.
 *
 * Link swi_dnnl (CMake: swi::dnnl_static). It needs libswi, oneDNN (libdnnl, 2.x, C API) and
 * protobuf-c (the model is read with onnx/onnx_io.h); this header includes only swi.h.
 *
 *     // example:begin
 *     swi_dnnl_options opt;
 *     swi_dnnl_options_init(&opt);                 // fp32, 1 thread
 *     opt.threads = 2;
 *     swi_dnnl_model *m = NULL;
 *     char err[512];
 *     const int64_t roi[3] = {96, 96, 96};
 *     swi_head_spec head;
 *     if (swi_dnnl_open("unet.onnx", &opt, &m, err, sizeof err) != SWI_OK ||
 *         swi_dnnl_prepare(m, 0, 1, 3, roi, &head, err, sizeof err) != SWI_OK) // output 0, 1 channel
 *         goto fail;
 *     for (int d = 0; d < 3; d++) params.roi[d] = roi[d]; // params.dims == 3
 *     params.n_heads = 1;
 *     params.heads[0] = head;
 *     swi_predictor net = swi_dnnl_predictor(m);
 *     if (swi_run(ctx, &params, &input, &net, outputs, n_outputs) != SWI_OK) {
 *         snprintf(err, sizeof err, "%s", swi_last_error(ctx));
 *         goto fail;
 *     }
 *     swi_dnnl_close(m);
 *     return 0;
 * fail:
 *     fprintf(stderr, "%s\n", err);
 *     swi_dnnl_close(m);
 *     return 1;
 *     // example:end
 *
 * The model. One float32 input [batch, channels, *spatial] (rank 4 or 5), the output used
 * float32 [batch, classes, *spatial]. Operators: Conv (1-D to 3-D kernels on 2-D/3-D data;
 * groups, dilations, strides, explicit pads or auto_pad VALID), ConvTranspose (the same,
 * output_padding; no output_shape), InstanceNormalization, BatchNormalization (inference),
 * Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Add, Mul (the second operand the same shape or
 * broadcast from a constant), Concat, Softmax (opset >= 13, or the last axis), MaxPool and
 * AveragePool (ceil_mode 0), Resize and Upsample (constant scales or sizes; nearest with
 * whole up-scaling and floor / half-pixel rounding, or linear with half-pixel centres),
 * Identity, Dropout, Constant, Pad with all-zero pads. Any other operator or attribute is
 * refused by swi_dnnl_open with a message naming it (SWI_ERR_INVALID_ARG), and the caller
 * can run the model with ONNX Runtime instead (swi segment --backend auto does).
 *
 * How it runs. swi_dnnl_open reads the graph and its weights. swi_dnnl_prepare plans one
 * window shape: every primitive is created with the layouts oneDNN prefers (format_tag
 * any), activations stay in those layouts from layer to layer (a reorder only where two
 * consecutive primitives disagree), Conv/ConvTranspose get bias and a following
 * elementwise activation fused as post-ops (InstanceNorm/BatchNorm the activation; a
 * PRelu with one slope counts as LeakyRelu), weights are reordered once into the layouts
 * the convolutions chose, and the activation buffers are planned once (a buffer is reused
 * as soon as its last reader has run; elementwise layers run in place). Each window of a
 * batch then runs through the plan (batch 1 per network pass: no per-batch replanning).
 * prepare again with another window replans.
 *
 * Precision. SWI_DNNL_FP32 (the default) matches ONNX Runtime to float rounding.
 * SWI_DNNL_BF16 keeps activations and weights in bfloat16 (accumulation in fp32, input and
 * output fp32): about 3 significant digits, faster on CPUs with avx512_bf16 or AMX;
 * swi_dnnl_open refuses it elsewhere (swi_dnnl_bf16_supported).
 *
 * Threads. oneDNN (Debian's libdnnl2) threads with OpenMP; each run sets the OpenMP
 * thread count of the calling thread to swi_dnnl_options.threads, so the network uses
 * exactly the run's thread budget.
 *
 * Errors follow swi.h: functions return an swi_status and write one line into err
 * (errlen bytes, always terminated; err may be NULL). Nothing is printed. A model is used
 * by one thread at a time.
 */
#ifndef SWI_DNNL_H
#define SWI_DNNL_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum swi_dnnl_precision {
    SWI_DNNL_FP32 = 0, /**< float32 everywhere (the default) */
    SWI_DNNL_BF16 = 1  /**< bfloat16 weights and activations, fp32 accumulation */
} swi_dnnl_precision;

typedef struct swi_dnnl_options {
    int threads;                  /**< OpenMP threads for the network, >= 1 (default 1) */
    swi_dnnl_precision precision; /**< default SWI_DNNL_FP32 */
    size_t max_bytes;             /**< swi_dnnl_prepare refuses a plan holding more (weights,
                                       scratch and activations, swi_dnnl_memory) with
                                       SWI_ERR_BUDGET; 0 (default): no limit */
} swi_dnnl_options;

void swi_dnnl_options_init(swi_dnnl_options *o);

/** oneDNN's version, "2.6.3", and its CPU threading ("OpenMP", "TBB", "sequential"). */
const char *swi_dnnl_version(void);
const char *swi_dnnl_threading(void);

/** 1 when this CPU runs bfloat16 natively (avx512_bf16 or AMX), else 0. */
int swi_dnnl_bf16_supported(void);

typedef struct swi_dnnl_model swi_dnnl_model;

/** Read the model at path and check that every operator is supported (the message of a
 *  refusal names the first node that is not). SWI_ERR_IO: the file cannot be read;
 *  SWI_ERR_INVALID_ARG: not a model this backend runs (or bf16 on a CPU without it). */
swi_status swi_dnnl_open(const char *path, const swi_dnnl_options *opt, swi_dnnl_model **out, char *err,
                         size_t errlen);

/** Free a model; NULL is fine. */
void swi_dnnl_close(swi_dnnl_model *m);

/** Plan the network for windows of `channels` x roi (dims values: the model input's rank
 *  - 2) and fill head (channels and spatial of output `output`, 0 = the first). */
swi_status swi_dnnl_prepare(swi_dnnl_model *m, int output, int64_t channels, int dims, const int64_t *roi,
                            swi_head_spec *head, char *err, size_t errlen);

/** Run n windows [n, channels, *roi] into out [n, classes, *spatial] (the prepared shapes). */
swi_status swi_dnnl_run(swi_dnnl_model *m, const float *in, int64_t n, float *out, char *err, size_t errlen);

/** The predictor for swi_run: head 0 is the prepared output. The model must outlive the run. */
swi_predictor swi_dnnl_predictor(swi_dnnl_model *m);

/** Bytes the prepared plan holds: weights (reordered copies and the model's), scratch
 *  (oneDNN's scratchpads and normalisation statistics) and activations (the planned
 *  buffers). Any pointer may be NULL. */
void swi_dnnl_memory(const swi_dnnl_model *m, size_t *weights, size_t *scratch, size_t *activations);

/** Primitives in the prepared plan, and how many of them are reorders (layout changes). */
void swi_dnnl_plan_counts(const swi_dnnl_model *m, int *primitives, int *reorders);

/** Floating-point operations of one window through the prepared plan: 2 x the
 *  multiply-adds of its convolutions (the other layers are not counted). */
double swi_dnnl_flops(const swi_dnnl_model *m);

#ifdef __cplusplus
}
#endif
#endif /* SWI_DNNL_H */
