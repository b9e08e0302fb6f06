/*
 * swi_ort.h -- an ONNX Runtime network as a libswi predictor.
 *
 * Link swi_ort (CMake: swi::ort; pkg-config: swi-ort). It needs libswi and ONNX Runtime's
 * shared library (libonnxruntime.so.1), nothing else; this header includes only swi.h.
 *
 *     // example:begin
 *     swi_ort_options opt;
 *     swi_ort_options_init(&opt);                  // all cores, CPU, full optimisation
 *     swi_ort_model *m = NULL;
 *     char err[512];
 *     if (swi_ort_open("unet.onnx", &opt, &m, err, sizeof err) != SWI_OK) goto fail;
 *     swi_ort_window w;
 *     swi_ort_window_init(&w, 1);                  // 1 input channel, the model's window
 *     swi_head_spec head;
 *     if (swi_ort_prepare(m, &w, &head, err, sizeof err) != SWI_OK) goto fail;
 *     for (int d = 0; d < 3; d++) params.roi[d] = w.roi[d]; // params.dims == 3
 *     params.n_heads = 1;
 *     params.heads[0] = head;
 *     swi_predictor net = swi_ort_predictor(m);
 *     if (swi_run(ctx, &params, &input, &net, outputs, n_outputs) != SWI_OK) {
 *         snprintf(err, sizeof err, "%s", swi_last_error(ctx));
 *         goto fail;
 *     }
 *     swi_ort_close(m);
 *     return 0;
 * fail:
 *     fprintf(stderr, "%s\n", err);
 *     swi_ort_close(m);
 *     return 1;
 *     // example:end
 *
 * The model. Exactly one input, float32 of rank 5 [batch, channels, i, j, k]; the output
 * used (swi_ort_window.output, default the first) float32 of rank 5
 * [batch, classes, *spatial]. A dynamic batch gets one network call per engine batch; a
 * fixed batch B cuts it into calls of B windows, the last one zero-padded. Static spatial
 * sizes give the default window; dynamic ones need swi_ort_window.roi. Output sizes the
 * model leaves open are learned by swi_ort_prepare with one probe run on a window of
 * zeros, so the engine can plan its memory exactly. Outputs are written straight into
 * the engine's buffer (no copy). A NaN in an output stops the run: its labels would be
 * meaningless.
 *
 * Test-time augmentation (swi_ort_options.tta): every window is also run mirrored along
 * each non-empty subset of the three axes; the predictions are mirrored back and the 8
 * averaged before the engine blends them (per-window mirroring, as nnU-Net does it). It
 * lives here, not as a wrapper of any swi_predictor, because only the engine can make an
 * swi_batch: mirroring needs the backend's own "run n windows" step.
 *
 * Errors follow swi.h: every function that can fail returns an swi_status and, when err
 * is not NULL, writes one line into err (errlen bytes, always terminated) naming the file
 * and the field at fault. Nothing is printed; ONNX Runtime's own logging is silenced.
 * A model file that is missing, not a regular file or unreadable is SWI_ERR_IO (swi_ort_open);
 * one that reads but is no model swi can run SWI_ERR_INVALID_ARG. A model is used by one thread at a time, except swi_ort_cancel, which any thread may
 * call while a run is in progress.
 */
#ifndef SWI_ORT_H
#define SWI_ORT_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum swi_ort_device {
    SWI_ORT_CPU = 0, /**< the CPU execution provider */
    SWI_ORT_CUDA = 1 /**< the CUDA execution provider; an error if this ONNX Runtime lacks it */
} swi_ort_device;

typedef enum swi_ort_graph_opt {
    SWI_ORT_OPT_NONE = 0,     /**< ORT_DISABLE_ALL */
    SWI_ORT_OPT_BASIC = 1,    /**< ORT_ENABLE_BASIC */
    SWI_ORT_OPT_EXTENDED = 2, /**< ORT_ENABLE_EXTENDED */
    SWI_ORT_OPT_ALL = 3       /**< ORT_ENABLE_ALL (the default) */
} swi_ort_graph_opt;

/** How the session is made. Fill with swi_ort_options_init, then set fields. */
typedef struct swi_ort_options {
    int threads;                 /**< intra-op threads; 0 = the online CPUs (default) */
    swi_ort_device device;       /**< default SWI_ORT_CPU */
    swi_ort_graph_opt graph_opt; /**< default SWI_ORT_OPT_ALL */
    int memory_arena;            /**< 1 (default): CPU arena and memory patterns; 0: neither
                                      (lower peak memory, more allocation work) */
    int spin;                    /**< 0 (default): intra-op threads sleep when idle, leaving the
                                      cores to the engine's blending workers; 1: they spin */
    const char *config;          /**< extra session config entries "key=value;key=value" (see
                                      onnxruntime_session_options_config_keys.h), or NULL;
                                      at most 1023 characters */
    int tta;                     /**< 1: mirror test-time augmentation (8 runs per window) */
    int rewrite;                 /**< 1 (default): before loading, rewrite the layers ONNX
                                      Runtime runs slowly into equivalent faster ones (the
                                      same function up to float rounding; swi_ort_optimize);
                                      0: the model as it is */
} swi_ort_options;

/** Defaults: all cores, CPU, full graph optimisation, arena on, no spinning, no tta,
 *  rewrites on. */
void swi_ort_options_init(swi_ort_options *o);

/** ONNX Runtime's version string ("1.20.1"). */
const char *swi_ort_version(void);

/** The execution providers this ONNX Runtime offers, comma-separated into buf
 *  ("CPUExecutionProvider"); *has_cuda (if not NULL) is set to whether CUDA is among them. */
swi_status swi_ort_providers(char *buf, size_t n, int *has_cuda, char *err, size_t errlen);

typedef struct swi_ort_model swi_ort_model;

/** Load a model and read its signature (it must have exactly one input). */
swi_status swi_ort_open(const char *path, const swi_ort_options *opt, swi_ort_model **out, char *err,
                        size_t errlen);

/** Layers the load rewrote (swi_ort_options.rewrite): each ConvTranspose whose strides
 *  tile its output (kernel - pads + output_padding == stride per axis, e.g. kernel 2
 *  stride 2, or kernel 3 stride 2 pads 1 output_padding 1), group 1, weights in the model,
 *  becomes the sub-pixel form: a Conv giving prod(stride) x C_out channels followed by a
 *  depth-to-space (Reshape, Transpose, Reshape). */
int swi_ort_rewrites(const swi_ort_model *m);

/** Apply the load-time rewrites to the model at `path` and save the result to `out`
 *  (written to a temporary file, then renamed; an existing `out` is replaced). *rewritten
 *  (if not NULL) receives the layers rewritten; with none, `out` is a re-encoded copy.
 *  Needs swi_ort built with protobuf-c (else SWI_ERR_INVALID_ARG saying so). */
swi_status swi_ort_optimize(const char *path, const char *out, int *rewritten, char *err, size_t errlen);

/** Free a model; NULL is fine. */
void swi_ort_close(swi_ort_model *m);

/** One input or output of the model as the model declares it. */
typedef struct swi_ort_tensor_info {
    const char *name;      /**< owned by the model */
    int is_tensor;         /**< 0 for sequences, maps, ... (then the rest is empty) */
    int elem_type;         /**< ONNX TensorProto element type code (1 = float32) */
    const char *type_name; /**< "float32", "int64", ... */
    int rank;
    int64_t shape[8]; /**< the first min(rank, 8) sizes; -1 where dynamic */
} swi_ort_tensor_info;

/** Number of model outputs (heads the predictor can use). */
int swi_ort_output_count(const swi_ort_model *m);

/** The model's input (index 0, the only one). */
swi_status swi_ort_input_info(const swi_ort_model *m, swi_ort_tensor_info *info, char *err, size_t errlen);

/** Output `index` (0-based). For a usable head, shape[1] is its classes (-1: learned by
 *  swi_ort_prepare). */
swi_status swi_ort_output_info(const swi_ort_model *m, int index, swi_ort_tensor_info *info, char *err,
                               size_t errlen);

/** The input checks of swi_ort_prepare that need nothing but the model: input rank 5 and
 *  float32, output `output` rank 5 and float32 [batch, classes, *spatial]. */
swi_status swi_ort_check(const swi_ort_model *m, int output, char *err, size_t errlen);

/** What the engine will feed the model. */
typedef struct swi_ort_window {
    int output;       /**< the model output used as head 0 (default 0) */
    int64_t channels; /**< input channels of the volume (> 0) */
    int64_t roi[3];   /**< window size; 0 along an axis = the model's static size there.
                           Set to the window used by swi_ort_prepare. */
} swi_ort_window;

/** output 0, `channels` channels, the model's own window. */
void swi_ort_window_init(swi_ort_window *w, int64_t channels);

/** Check the model against the window (swi_ort_check, channels, static sizes), settle w->roi
 *  and fill `head` with the output's classes and spatial size, probing once when the model
 *  does not declare them. Must precede swi_ort_run and the predictor. May be called again
 *  to change the window. */
swi_status swi_ort_prepare(swi_ort_model *m, swi_ort_window *w, swi_head_spec *head, char *err,
                           size_t errlen);

/** One line, e.g. "input 'image' [?,1,32,32,32] float32 -> output 'logits' [?,4,32,32,32]
 *  float32 (1 output, using #0)". */
void swi_ort_describe(const swi_ort_model *m, char *buf, size_t n);

/** Network calls per engine batch of n windows (chunks of a fixed batch, x8 with tta). */
int64_t swi_ort_calls_per_batch(const swi_ort_model *m, int64_t n);

/** Run n windows [n, channels, *roi] into out [n, classes, *spatial] (shapes as settled by
 *  swi_ort_prepare), with tta when enabled. For tools and tests; swi_run uses the
 *  predictor. */
swi_status swi_ort_run(swi_ort_model *m, const float *in, int64_t n, float *out, char *err, size_t errlen);

/** The predictor for swi_run: head 0 is the prepared output. It reports failures through
 *  swi_batch_set_error. The model must outlive the run. */
swi_predictor swi_ort_predictor(swi_ort_model *m);

/** Stop a network call in progress (from any thread, e.g. a signal-handling thread);
 *  the run then fails. Later runs are refused until the model is reopened. */
void swi_ort_cancel(swi_ort_model *m);

#ifdef __cplusplus
}
#endif
#endif /* SWI_ORT_H */
