/*
 * ort_predictor.h -- an ONNX Runtime network as an swi_predictor.
 *
 * The model must have exactly one input, float32 of rank 5 [batch, channels, i, j, k],
 * and its chosen output (--head, default the first) must be float32 of rank 5
 * [batch, classes, *spatial]. The batch dimension may be dynamic (one network call per
 * swi batch) or fixed (the batch is cut into calls of that size, the last one
 * zero-padded). Spatial sizes may be static (they give the default window) or dynamic
 * (--roi required). Output shapes not fixed by the model are learned once with a probe
 * run on one window of zeros, so the engine can plan its memory exactly.
 *
 * Outputs are written straight into the buffer swi_batch_output() hands out: every call
 * pre-binds it with CreateTensorWithDataAsOrtValue, so no copy is made.
 *
 * Test-time augmentation (tta): each window is also predicted mirrored along every
 * non-empty subset of the three axes; the predictions are mirrored back and the 8 are
 * averaged before blending. This is per-window mirroring, as nnU-Net does it; it does not
 * depend on the window grid or the blending being symmetric.
 */
#ifndef SWI_CLI_ORT_PREDICTOR_H
#define SWI_CLI_ORT_PREDICTOR_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

typedef struct ort_opts {
    int threads;  /**< intra-op threads; 0 = number of cores */
    int cuda;     /**< 1: run on the CUDA execution provider (error if unavailable) */
    int tta;      /**< 1: mirror test-time augmentation (8 runs per window) */
    int head;     /**< which model output to use (0-based) */
} ort_opts;

typedef struct ort_model ort_model;

/** Was swi built with ONNX Runtime? */
int ort_available(void);

/** ONNX Runtime's version string, or "none". */
const char *ort_version(void);

/** Load a model and read its input/output signature. */
int ort_model_open(const char *path, const ort_opts *opts, ort_model **out, char *err);

void ort_model_free(ort_model *m);

/** One line: "input 'image' [n,1,32,32,32] -> output 'logits' [n,4,32,32,32]". */
void ort_model_describe(const ort_model *m, char *buf, size_t n);

/** Check the model against `channels` input channels and settle the window: when
 *  roi_given, roi[] must fit the model's static sizes; otherwise roi[] is taken from them.
 *  Fills `head` with the output's channels and spatial size (probing once if needed).
 *  Returns 0; -1 on a runtime error; -2 on a usage error (e.g. --roi needed). */
int ort_model_prepare(ort_model *m, int64_t channels, int64_t roi[3], int roi_given,
                      swi_head_spec *head, char *err);

/** Predictor calls per swi batch of n windows (chunks for a fixed batch, x8 with tta). */
int64_t ort_model_calls_per_batch(const ort_model *m, int64_t n);

/** The swi_predictor callback; user is the ort_model. */
int ort_predict(void *user, swi_batch *batch);

/** Stop a running network call (thread-safe; for the signal thread). */
void ort_model_cancel(void *user);

/** Run n prepared windows [n, channels, *roi] into out [n, classes, *spatial] (shapes as
 *  settled by ort_model_prepare), with tta if enabled. For tests and tools. */
int ort_model_run(ort_model *m, const float *in, int64_t n, float *out, char *err);

#endif
