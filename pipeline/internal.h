/*
 * internal.h -- what the pipeline's files share (not installed): a job's options as the
 * steps read them, filled from a swi_job_spec and the model's card (job.c).
 */
#ifndef SWI_PIPELINE_INTERNAL_H
#define SWI_PIPELINE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"
#include "swi_ort.h"
#include "target.h"

/* Whether the pipeline links the ONNX Runtime backend (else ort_stub.c stands in for it). */
#ifdef SWI_HAVE_ORT
#define CLI_HAVE_ORT 1
#else
#define CLI_HAVE_ORT 0
#endif

/** The advanced session settings every ONNX job takes from the environment (the command's
 *  --help): SWI_ORT_SPIN=1, SWI_ORT_NO_ARENA=1, SWI_ORT_CONFIG="key=value;...". */
void pl_ort_environment(swi_ort_options *oo);

#define SEG_MAX_INPUTS 16
#define SEG_MAX_MODELS 16

/** A job's options: the spec with its unset fields settled (the card, then the defaults). */
typedef struct pl_opts {
    const char *model; /**< models[0] */
    const char *inputs[SEG_MAX_INPUTS];
    int n_inputs;
    const char *output, *scores, *preview, *report, *report_title;
    const char *statistics; /**< per-class statistics as JSON (statistics.h), or NULL */
    const char *masks;      /**< a folder of one mask a class (masks.h), or NULL */
    int keep_statistics;
    pl_target t_output, t_scores; /**< output and scores classified (pl_target_of), once */
    int64_t roi[3];
    int roi_given;
    double overlap[3];
    swi_blend mode;
    double sigma_scale[3];
    swi_pad padding;
    float cval;
    int sw_batch;
    int threads;
    size_t max_memory;
    int softmax, tta, zscore, force, cuda, quiet, head;
    int keep_scores; /**< the run's keep also receives the scores (no file needed) */
    int nonfinite_fail;
    int clip_given;
    double clip[2];
    int scale_given;
    double scale[4];
    const char *models[SEG_MAX_MODELS]; /**< every model (models[0] == model): an ensemble */
    int n_models;
    const char *orientation;
    int spacing_given;
    double spacing[3];
    unsigned given;    /**< SEG_GIVEN_*: set by the spec (a card yields) */
    int roi_from_card; /**< the roi came from the model card */
    int no_card;
    const struct seg_card *card; /**< the model's card (card.h), or NULL */
    int shard_given, shard_part, shard_parts, shard_init;
    int shard_grid[3], shard_grid_given;
    int64_t chunks[3]; /**< the store outputs' chunk, or 0,0,0 */
    int chunks_given;
    int shard_collective; /**< the parts run together (MPI ranks): part 0 creates the stores */
    int no_reuse;
    int reuse_cache;
    int no_rewrite;

    const char *backend, *precision; /**< swi_job_spec's (dnnl_choice.c) */

    const swi_predictor *preds; /**< the caller's predictors instead of models, or NULL */
    int n_preds;
    int64_t classes; /**< what the caller's predictors give */
    /* the region of interest, as the spec gives it (region.c) */
    int region_given, region_mm_given;
    int64_t region_lo[3], region_hi[3];
    double region_mm_lo[3], region_mm_hi[3];
    const char *region_mask, *keep_outside;
    double margin_mm;
} pl_opts;

/* Whether a region of interest is asked for. */
#define PL_REGION(o) ((o)->region_given || (o)->region_mm_given || (o)->region_mask)

/* What messages call the network: models[0], or the caller's predictors. */
#define PL_MODEL_NAME(o) \
    ((o)->model ? (o)->model : (o)->n_preds > 1 ? "the caller's predictors" : "the caller's predictor")

#define SEG_GIVEN_OVERLAP 1u
#define SEG_GIVEN_SIGMA 2u
#define SEG_GIVEN_MODE 4u
#define SEG_GIVEN_PADDING 8u
#define SEG_GIVEN_CVAL 16u

/** The labels a run hands back (swi_job_result's first fields). */
typedef struct pl_result {
    void *labels; /**< malloc'd [ni][nj][nk], label_bytes per voxel */
    int label_bytes;
    int64_t size[3];
    int64_t classes;
    float *scores;    /**< malloc'd [classes][ni][nj][nk] with keep_scores, else NULL */
    char *statistics; /**< malloc'd JSON text with keep_statistics, else NULL */
} pl_result;

/** Channels given as several files share one grid: the same size, axis vectors (the
 *  affine's columns, spacing times direction) within PL_GRID_REL of their length and
 *  origins within PL_GRID_MM millimetres. Same size but axes swapped or an origin moved
 *  would pair voxels that are not the same place. 0, or 1 with err naming both files. */
#define PL_GRID_MM 1e-3
#define PL_GRID_REL 1e-4
int pl_same_grid(const swi_volume *a, const char *a_name, const swi_volume *b, const char *b_name, char *err);

/** The input as swi_plan_run should see it when nothing may be read: no data, and a
 *  reader (a store) kept as one without a read function (`no_read`, the caller's), so the
 *  plan still counts it as read box by box (no input in memory) but neither reads it nor
 *  counts the windows reused (which would read every window: O(windows) at setup). */
swi_tensor pl_shape_only(const swi_tensor *in, swi_reader *no_read);

/* Whether the run makes the scores: for a file, or kept. */
#define PL_WANT_SCORES(o) ((o)->scores != NULL || (o)->keep_scores)
/* Whether the run gathers statistics: for a file, or kept. */
#define PL_WANT_STATS(o) ((o)->statistics != NULL || (o)->keep_statistics)

#endif
