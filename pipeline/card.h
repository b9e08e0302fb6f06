/*
 * card.h -- a model card: what a run of a model needs to be right, kept with the model.
 *
 * Found as m.json beside m.onnx, else as the value of the key "swi.card" in the ONNX
 * model's metadata_props (swi export --card embeds it there). A JSON object; every key is
 * optional, an unknown key or a value of the wrong type is an error naming the file and
 * the key:
 *
 *   {
 *     "roi": [96, 96, 96],            window (or one number)
 *     "overlap": 0.5,                 fraction in [0, 1) (or three)
 *     "blending": "gaussian",         constant | gaussian
 *     "sigma_scale": 0.125,           gaussian sigma / roi (or three)
 *     "padding": "constant",          constant | reflect | replicate | circular
 *     "cval": 0,                      constant padding value
 *     "orientation": "RAS",           the model's axis codes
 *     "spacing": [1.5, 1.5, 1.5],     the model's voxel size, mm (or one number)
 *     "preprocessing": { "clip": [-175, 250], "scale": [-175, 250, 0, 1], "zscore": false },
 *     "channels": ["CT"],             input channel names: as many as the model's inputs
 *     "classes": ["background", "liver"],   class names: as many as the model's outputs
 *     "members": ["fold1.onnx"]       the ensemble's other models, relative to the card
 *   }
 *
 * Command-line flags override the card, key by key; any of --clip, --scale, --zscore
 * replaces the card's whole preprocessing.
 */
#ifndef SWI_CLI_CARD_H
#define SWI_CLI_CARD_H

#include "swi.h"

#include <stdint.h>

#include <stdio.h>

#define CARD_MAX_NAMES 1024
#ifndef SEG_MAX_MODELS
#define SEG_MAX_MODELS 16
#endif

struct pl_opts;

typedef struct seg_card {
    char source[4200]; /* the card's file, or "MODEL (metadata_props swi.card)" */
    int in_file;       /* source is a file of its own (an input the outputs must spare) */
    char *json;        /* the card's text */
    int has_roi, has_overlap, has_blending, has_sigma, has_padding, has_cval;
    int has_orientation, has_spacing, has_clip, has_scale, has_zscore;
    int64_t roi[3];
    double overlap[3], sigma_scale[3], spacing[3], clip[2], scale[4];
    swi_blend blending;
    swi_pad padding;
    double cval;
    char orientation[4];
    int zscore;
    int n_channels, n_classes, n_members;
    char *channels[CARD_MAX_NAMES];
    char *classes[CARD_MAX_NAMES];
    char *members[SEG_MAX_MODELS]; /* resolved against the card's directory */
} seg_card;

/* The model-file rule: every file read by name from a model directory or a card (a card's
 * JSON, nnunet.json, the folds it names) goes through here. It is opened without blocking
 * and refused unless a regular file ("X: is a FIFO (named pipe), not a regular file (WHAT)");
 * with max > 0 it is read whole, refused when over max bytes, into a malloc'd text (a NUL
 * after its *len bytes; len may be NULL); with max 0 only checked (returns path). NULL
 * with one line naming the file in err. */
char *pl_model_file(const char *path, size_t max, const char *what, size_t *len, char *err);

/* Cards are small: the most a card's JSON may hold (1 MiB), in a file or a model's
 * metadata_props. Real ones hold a few KB. */
#define CARD_MAX_BYTES ((size_t)1 << 20)

/* 1 when JSON text nests deeper than SWI_IO_JSON_MAX_DEPTH, with err naming `source`:
 * checked before any card is parsed. */
int pl_json_too_deep(const char *text, size_t len, const char *source, char *err);

/* Whether swi was built with a JSON library (cards need one). */
int card_available(void);

/* The card of model `model`, if it has one: returns 0 with *found = 0 (no card), 0 with the
 * card parsed and checked into c, or 1 with err naming the file and the key. */
int card_load(const char *model, seg_card *c, int *found, char *err);

/* Parse and check the JSON text of a card (`source` names it in messages). */
int card_parse(const char *text, const char *source, const char *dir, seg_card *c, char *err);

/* The card in file `path` (a .json of its own, read as card_load reads one): 0, or 1 with
 * err naming the file and the key. */
int card_load_file(const char *path, seg_card *c, char *err);

/* Fill the options o does not set from the card (flags win). Returns 0, or 2 (usage). */
int card_apply(const seg_card *c, struct pl_opts *o, char *err);

/* Print the card, one field a line. */
void card_print(const seg_card *c, FILE *f);

/* Write the class names as an ITK-SNAP label description (itksnap = 1) or a 3D Slicer
 * color table (itksnap = 0) to fd (closed in every case). Returns 0, or 1 with err. */
int card_write_labels(const seg_card *c, int fd, int itksnap, const char *name, char *err);

/* Is path a side file swi wrote (a regular file, not a link, that begins as card_write_labels
 * begins)? A rerun replaces such a file with its output's commit, force or not: it belonged
 * to an earlier output of the same name, another format's perhaps. 1 or 0. */
int card_side_is_own(const char *path);

void card_free(seg_card *c);

#endif
