/*
 * nnunet_job.h -- a job whose model is an nnU-Net model directory (nnunet_card.h): nnU-Net
 * v2's whole inference (docs/semantics-nnunet.md) as the job's steps.
 *
 * The inputs (the channels, one grid) are read whole, brought to nnU-Net's reader order
 * (reoriented to RAS first for NibabelIOWithReorient) and transpose_forward, cropped to
 * the nonzero box, normalised per channel and resampled to the configuration's spacing:
 * the model grid, nnU-Net's own array. The engine runs nnU-Net's window grid and Gaussian
 * over it with the folds' mean of mirrored predictions; the blended logits stream through
 * a resampling sink straight to the crop box of the input grid (one affine map holds the
 * transposes, the crop and nnU-Net's resize coordinates), reduced there at once (argmax,
 * or the regions' sigmoids), and with --save-probabilities turned into softmax/sigmoid
 * probabilities in nnU-Net's reader order.
 */
#ifndef SWI_PL_NNUNET_JOB_H
#define SWI_PL_NNUNET_JOB_H

#include "masks.h"
#include "nnunet_card.h"
#include "safety.h"
#include "statistics.h"
#include "swi_io.h"
#include "swi_ort.h"
#include "swi_pipeline.h"
#include "swi_resample.h"
#include "target.h"

#include <stddef.h>
#include <stdint.h>

/* What the job settles before it runs (geometry from the headers, the box from the voxels). */
typedef struct nn_job {
    nn_card card;
    /* the spec's */
    const char *inputs[SWI_JOB_MAX_INPUTS];
    int n_inputs;
    const char *output;
    pl_target t_output; /* output classified (pl_target_of), once */
    int save_probabilities, no_mirroring, force, quiet, threads, cuda, sw_batch;
    double tile_step;
    size_t max_memory;
    char probs_path[4200], props_path[4200];
    const char *statistics; /* --statistics, or NULL */
    const char *masks;      /* --masks, or NULL */
    pl_masks mask_dir;      /* its private folder while written */
    int keep_statistics;
    pl_stats *class_stats; /* gathered as the labels' tiles are made */
    float *raw0;           /* the first channel as read, kept for the statistics */
    /* the inputs */
    swi_volume vols[SWI_JOB_MAX_INPUTS];
    int opened, read;
    float *input; /* [C][in_size] as read */
    int64_t in_size[3];
    swi_resample_orientation orient; /* to RAS (reorient), else the identity */
    int src[3], flip[3];             /* transposed axis d: input axis src[d], backwards where flip[d] */
    int64_t full[3];                 /* the transposed shape before cropping */
    double sp_orig[3], sp_model[3];  /* transposed order; sp_model has axis 0's own for 2-D */
    int64_t box_lo[3], box_hi[3];    /* the crop box on the input grid (swi axes) */
    int64_t clo[3], cs[3];           /* the crop in transposed axes: offset, shape */
    int64_t rs[3];                   /* the model grid (resampled crop) */
    int sep_fwd, axis_fwd, sep_back, axis_back; /* separate z (axis in transposed order) */
    float *crop;                                /* [C][cs] normalised */
    float *model;                               /* [C][rs] */
    /* the network */
    swi_ort_model *folds[NN_MAX_FOLDS];
    swi_predictor fold_pred[NN_MAX_FOLDS], mean, net;
    int has_mean;
    unsigned mirror_mask;      /* swi_params.mirror_axes: the engine mirrors */
    swi_accumulate accumulate; /* the partial sums' type (--accumulate) */
    swi_head_spec head;
    swi_params planned; /* the engine's parameters as the plan settled them (budget, batch) */
    /* the results */
    swi_resample_sink *sink;
    void *labels; /* on the input grid */
    int label_bytes;
    float *probs; /* [K][reader axes], with save_probabilities */
    int64_t reader_size[3];
    cli_out out_labels, out_probs, out_props, out_stats;
    swi_ctx *ctx;
    swi_stats stats;
    volatile int cancel;
} nn_job;

/* Whether the spec's model is an nnU-Net model directory: 1 (card_path filled), else 0. */
int nn_spec_is_nnunet(const swi_job_spec *sp, char *card_path, size_t n);

/* The spec checked (options contradicting nnU-Net's inference refused, naming the flag)
 * and the card read: 0, or SWI_ERR_INVALID_ARG / SWI_ERR_IO with err. */
swi_status nn_job_open(const swi_job_spec *sp, const char *card_path, nn_job *j, char *err);

/* Plan (headers and voxels read, the geometry settled, the folds opened). */
swi_status nn_job_plan(nn_job *j, const swi_job_hooks *hooks, swi_job_plan *plan, char *err);

/* The whole run; keep as swi_job_run's. */
swi_status nn_job_run(nn_job *j, const swi_job_hooks *hooks, swi_job_result *keep, char *err);

/* swi_plan's text of the nnU-Net steps. */
size_t nn_job_describe(const nn_job *j, const swi_job_plan *plan, char *buf, size_t n);

/* Inputs read ahead, as swi_job_give_inputs (raw voxels [C][size]; the job takes them). */
int nn_job_give_inputs(nn_job *j, const swi_volume *vols, float *voxels);

/* The model's channels and file ending (nnU-Net's naming: CASE_0000<ending>, ...). */
int nn_job_channels(const nn_job *j, const char **file_ending);

void nn_job_free(nn_job *j);

/* The steps shared by nnunet_job.c and nnunet_run.c. */
int nn_prepare(nn_job *j, const swi_job_hooks *hooks, char *err);
int nn_engine_setup(nn_job *j, swi_params *p, swi_tensor *in, swi_output *out, char *err);
void nn_back_map(const nn_job *j, double map[3][4]);
/* The engine's region callback: the blended logits into the sink. */
int nn_model_region(void *user, const swi_region *r);

/* One voxel's label from its K resampled logits x[r * stride], as nnU-Net's export
 * (convert_predicted_logits_to_segmentation_with_correct_shape) forms it: for regions, the
 * last region in regions_class_order whose float32 sigmoid exceeds the threshold; else the
 * argmax of the float32 softmax when the probabilities are saved (probs not NULL: nnU-Net
 * takes it of the probabilities then), of the logits otherwise; the first class wins a tie.
 * The probabilities (sigmoids or softmax, the values the label came from) go to
 * probs[r * pstride]. */
int64_t nn_voxel_label(const nn_card *c, const float *x, int64_t stride, float *probs, int64_t pstride);

#endif
