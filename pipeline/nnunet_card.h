/*
 * nnunet_card.h -- the card of an nnU-Net model directory (`swi convert nnunet`'s
 * nnunet.json beside fold_N.onnx; docs/semantics-nnunet.md, "The model directory"): what
 * an nnU-Net job needs of nnU-Net's inference settings. JSON through jansson (optional:
 * without it such a model is refused with a message).
 */
#ifndef SWI_PL_NNUNET_CARD_H
#define SWI_PL_NNUNET_CARD_H

#include <stddef.h>
#include <stdint.h>

#define NN_MAX_FOLDS 16
#define NN_MAX_CHANNELS 16
#define NN_MAX_HEADS 1024
#define NN_CARD_NAME "nnunet.json"

typedef enum nn_norm_scheme {
    NNC_NORM_CT,      /* CTNormalization */
    NNC_NORM_ZSCORE,  /* ZScoreNormalization */
    NNC_NORM_RESCALE, /* RescaleTo01Normalization */
    NNC_NORM_RGB,     /* RGBTo01Normalization */
    NNC_NORM_NONE     /* NoNormalization */
} nn_norm_scheme;

typedef struct nn_card_channel {
    char name[64];
    nn_norm_scheme scheme;
    int use_mask;
    double mean, std, lo, hi; /* CTNormalization: the fingerprint's mean, std, percentiles */
} nn_card_channel;

/* resample_data_or_seg_to_shape's arguments */
typedef struct nn_card_resampling {
    int order, order_z;
    int force_separate_z; /* -1: null (decided from the spacings), 0 or 1 */
} nn_card_resampling;

typedef struct nn_card {
    char dir[4096];    /* the model directory */
    char source[4200]; /* DIR/nnunet.json */
    char configuration[64], dataset[128];
    int dims;               /* 2 or 3 */
    int64_t window[3];      /* the network's window (2-D: 1, patch) */
    double spacing[3];      /* the target spacing, transposed order (2-D: [0] unused) */
    int reorient;           /* NibabelIOWithReorient: to RAS first */
    int t_fwd[3], t_bwd[3]; /* transpose_forward / backward */
    int n_folds;
    char folds[NN_MAX_FOLDS][16]; /* "0", "1", "all" */
    char *models[NN_MAX_FOLDS];   /* their ONNX files, resolved against dir */
    int n_channels;
    nn_card_channel channels[NN_MAX_CHANNELS];
    nn_card_resampling data, probs;
    int n_mirror;  /* -1: null (no mirroring) */
    int mirror[3]; /* nnU-Net's numbering (2-D: patch axes) */
    double tile_step, sigma;
    char file_ending[32];
    int has_regions;
    int64_t heads; /* num_segmentation_heads: K */
    int regions_class_order[NN_MAX_HEADS];
    int64_t max_label; /* the largest label written */
    /* the dataset's label names by value (its "labels"), NULL where it names none; label
     * models only (a region model's values are its regions' order) */
    char *names[NN_MAX_HEADS];
    double threshold;
} nn_card;

/* Whether `model` names an nnU-Net model directory (a folder holding nnunet.json, or that
 * file itself): 1 with card_path filled (n bytes), else 0. */
int nn_card_is_model(const char *model, char *card_path, size_t n);

/* Read and check the card (every key the job reads; a missing or mistyped one is an error
 * naming it). Returns 0, or 1 with err. */
int nn_card_load(const char *card_path, nn_card *c, char *err);

/* Keep the folds listed ("0,1", as nnUNetv2_predict -f; NULL: all of the card's). Returns
 * 0, or 2 with err (a fold the card does not have). */
int nn_card_select_folds(nn_card *c, const char *folds, char *err);

void nn_card_free(nn_card *c);

#endif
