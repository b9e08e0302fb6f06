/*
 * case_file.h -- reading one golden case (tests/data/golden/README.md): case.txt and the
 * raw float32 tensors beside it.
 */
#ifndef SWI_GOLDEN_CASE_FILE_H
#define SWI_GOLDEN_CASE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

typedef enum golden_predictor_kind {
    GOLDEN_AFFINE = 0,
    GOLDEN_BOX,
    GOLDEN_COORD,
    GOLDEN_DOWN2,
    GOLDEN_PAIR
} golden_predictor_kind;

/* A parsed case.txt. Per-dim arrays hold `dims` entries. */
typedef struct golden_case {
    int dims;
    int64_t batch;
    int64_t in_channels;
    int64_t image_size[SWI_MAX_DIMS];
    int64_t roi[SWI_MAX_DIMS]; /* as written: <= 0 means the whole dim */
    int sw_batch_size;
    double overlap[SWI_MAX_DIMS];
    swi_blend mode;
    swi_grid grid;                  /* `grid monai|nnunet`, default monai */
    double tile_step[SWI_MAX_DIMS]; /* `tile_step`, grid nnunet only: swi_params.tile_step; 0 when absent */
    double sigma_scale[SWI_MAX_DIMS];
    swi_pad padding;
    float cval;
    golden_predictor_kind predictor;
    int64_t out_channels;
    int n_heads; /* from the predictor; `outputs` must agree */
    int64_t head_channels[SWI_MAX_HEADS];
    /* Expected full shape of each head's result [batch, channels, *out]: from
     * outputK_shape when given, else computed by the README's rules. */
    int64_t shape[SWI_MAX_HEADS][2 + SWI_MAX_DIMS];
} golden_case;

/* Parse `path` (a case.txt). Returns 0, or -1 with a reason in why. Unknown keys are
 * ignored; sw_batch_size, overlap, tile_step, mode, sigma_scale, padding_mode, cval, outputs and
 * outputK_shape fall back to MONAI's defaults / the README's rules when absent. */
int golden_case_parse(const char *path, golden_case *gc, char *why, size_t why_len);

/* Effective window of dim k (roi <= 0 -> the whole image). */
int64_t golden_case_window(const golden_case *gc, int k);

/* Element count of a shape, or -1 on overflow / non-positive entries. */
int64_t golden_count(const int64_t *shape, int n);

/* Read exactly `count` little-endian float32 values from `path` into a new buffer
 * (*out, to free). The file must be exactly count * 4 bytes. 0, or -1 with why. */
int golden_load_f32(const char *path, int64_t count, float **out, char *why, size_t why_len);

#endif
