/*
 * realscan.h -- the model's grid in `swi segment` and `swi plan`: the input brought to
 * the model's axis codes (--orientation) and voxel spacing (--spacing) with resample/, and
 * every result brought back to the input's grid.
 *
 * Orientation alone is streamed both ways: the engine reads its windows through the
 * orientation (an swi_reader over the input) and its label and score regions are written
 * straight to their place on the input grid. With --spacing the input (its channels, not
 * the scores) is resampled whole onto the model grid; the blended scores of the model grid
 * stream into an swi_resample_sink, which emits input-grid tiles as soon as the scores
 * they read are complete, reduced (argmax, softmax) at once: the scores are never held
 * whole on either grid (unless --scores asks for them on the input grid).
 */
#ifndef SWI_CLI_REALSCAN_H
#define SWI_CLI_REALSCAN_H

#include "internal.h"
#include "statistics.h"
#include "swi_io.h"
#include "swi_resample.h"

typedef struct seg_grid {
    int active; /* orientation or spacing in use */
    int oriented, resampled;
    swi_resample_orientation orient;
    swi_resample_spacing_grid spacing;
    double to_model[3][4]; /* input index -> model index (resampled) */
    double to_input[3][4]; /* model index -> input index (resampled) */
    int64_t in_size[3];    /* the input grid */
    int64_t size[3];       /* the model grid: where the windows run */
    int64_t channels;
    const float *input; /* [channels, *in_size], preprocessed (caller's) */
    float *model_input; /* resampled: [channels, *size] */
    swi_reader reader;
    int64_t classes;
    int label_bytes; /* 1 or 2 */
    void *labels;    /* on the input grid */
    float *scores;   /* on the input grid, when asked */
    int softmax;
    swi_resample_sink *sink; /* resampled: model-grid scores -> input-grid tiles */
    int region;              /* only region_lo..region_hi of the input grid is wanted */
    int64_t region_lo[3], region_hi[3];
    pl_stats *stats; /* borrowed: told every input-grid box of labels made, or NULL */
} seg_grid;

/* Settle the model grid of volume v (whose file is `path`) for o's --orientation and
 * --spacing. g->active stays 0 when neither is asked. Returns 0, or 1 with err set. */
int seg_grid_setup(const pl_opts *o, const swi_volume *v, seg_grid *g, char *err);

/* The engine's outputs with a grid: written through the grid's callbacks. Sets *n_outs. */
void seg_grid_outputs(seg_grid *g, int want_scores, int softmax, swi_output *outs, int *n_outs);

/* Bytes the grid holds beside the engine: the input's copy on the model grid, the results
 * on the input grid and the resampling sink's band, for an engine whose outermost window
 * loop runs along model axis `outer` (swi_plan.order[0]). */
size_t seg_grid_bytes(const seg_grid *g, int64_t classes, int want_scores, int outer);

/* The sink's band: the part of seg_grid_bytes the resampling back keeps (0 if none). */
size_t seg_grid_band_bytes(const seg_grid *g, int64_t classes, int outer);

/* Allocate the results and bind the input (read, preprocessed). Returns 0 or 1 (err). */
int seg_grid_begin(seg_grid *g, const float *input, int64_t channels, int64_t classes, int want_scores,
                   char *err);

/* After a successful run: check that every input voxel came back (resampled runs). */
int seg_grid_finish(seg_grid *g, char *err);

/* Describe the grid in one line for swi plan. */
void seg_grid_describe(const seg_grid *g, char *buf, size_t n);

void seg_grid_free(seg_grid *g);

#endif
