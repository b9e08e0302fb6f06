/*
 * nnunet_job.c -- see nnunet_job.h: the spec checked, the inputs brought to nnU-Net's
 * model grid (steps 0-4 of docs/semantics-nnunet.md), the engine and its predictors set
 * up, the plan and its text.
 */
#include "nnunet_job.h"

#include "budget.h"
#include "card.h"
#include "internal.h"
#include "nnunet_prep.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int nn_spec_is_nnunet(const swi_job_spec *sp, char *card_path, size_t n) {
    return sp->n_models >= 1 && !sp->n_predictors && sp->models[0] &&
           nn_card_is_model(sp->models[0], card_path, n);
}

/* A flag that nnU-Net's inference settles itself: refused by name. */
static int refuse(char *err, const char *flag, const char *why) {
    cli_err(err, "%s does not apply to an nnU-Net model (%s)", flag, why);
    return 1;
}

static int check_spec(const swi_job_spec *sp, char *err) {
    const char *pre = "its card's normalisation applies";
    if (sp->n_models > 1) return refuse(err, "a second --model", "its folds are the ensemble; use --folds");
    if (sp->orientation) return refuse(err, "--orientation", "the model's reader order applies");
    if (sp->spacing[0] > 0 || sp->spacing[1] > 0 || sp->spacing[2] > 0)
        return refuse(err, "--spacing", "the configuration's spacing applies");
    if (sp->clip_given) return refuse(err, "--clip", pre);
    if (sp->scale_given) return refuse(err, "--scale", pre);
    if (sp->zscore) return refuse(err, "--zscore", pre);
    if (sp->roi[0] || sp->roi[1] || sp->roi[2]) return refuse(err, "--roi", "the patch size is the window");
    if (sp->overlap[0] >= 0) return refuse(err, "--overlap", "use --tile-step-size");
    if (sp->mode >= 0) return refuse(err, "--mode", "nnU-Net's Gaussian applies");
    if (sp->sigma_scale[0] >= 0) return refuse(err, "--sigma-scale", "nnU-Net's Gaussian applies");
    if (sp->padding >= 0) return refuse(err, "--padding", "nnU-Net pads with zeros");
    if (!isnan(sp->cval)) return refuse(err, "--cval", "nnU-Net pads with zeros");
    if (sp->tta) return refuse(err, "--tta", "it mirrors over its mirroring_axes unless --disable-tta");
    if (sp->head) return refuse(err, "--head", "its folds have one output");
    if (sp->no_card) return refuse(err, "--no-card", "its card is its settings");
    if (sp->shard_parts || sp->shard_init) return refuse(err, "--shard", "not supported for nnU-Net jobs");
    if (sp->region_given || sp->region_mm_given || sp->region_mask)
        return refuse(err, "--region", "not supported for nnU-Net jobs (its crop moves the window grid)");
    if (sp->scores) return refuse(err, "--scores", "use --save-probabilities");
    if (sp->softmax) return refuse(err, "--softmax", "use --save-probabilities");
    if (sp->preview) return refuse(err, "--preview", "not supported for nnU-Net jobs");
    if (sp->report) return refuse(err, "--report", "not supported for nnU-Net jobs");
    if (sp->keep_scores) return refuse(err, "keep_scores", "not supported for nnU-Net jobs");
    if (sp->output && cli_is_store(sp->output))
        return refuse(err, "a store --output", "nnU-Net jobs write a volume file");
    for (int c = 0; c < sp->n_inputs; c++)
        if (cli_is_store(sp->inputs[c]))
            return refuse(err, "a store --input", "nnU-Net jobs read volume files");
    if (sp->tile_step != 0 && !(sp->tile_step > 0 && sp->tile_step <= 1)) {
        cli_err(err, "--tile-step-size must be in (0, 1] (got %g)", sp->tile_step);
        return 1;
    }
    return 0;
}

/* OUT.nii.gz -> OUT + suffix (the file ending cut, as nnU-Net names CASE.npz, CASE.pkl):
 * the dataset's file ending, else a volume file's suffix; a DICOM SEG's name is kept whole. */
static int beside(const pl_target *output, const char *ending, const char *suffix, char *buf, size_t n) {
    size_t len = strlen(output->name), cut = 0;
    if (ending[0] && cli_ends_with(output->name, ending))
        cut = strlen(ending);
    else if (output->format != SWI_VOLUME_DICOM_SEG)
        cut = pl_target_suffix_len(output);
    return (size_t)snprintf(buf, n, "%.*s%s", (int)(len - cut), output->name, suffix) >= n;
}

swi_status nn_job_open(const swi_job_spec *sp, const char *card_path, nn_job *j, char *err) {
    memset(j, 0, sizeof *j);
    j->out_labels.fd = j->out_probs.fd = j->out_props.fd = j->out_stats.fd = -1;
    if (check_spec(sp, err)) return SWI_ERR_INVALID_ARG;
    if (nn_card_load(card_path, &j->card, err)) return SWI_ERR_IO;
    int rc = nn_card_select_folds(&j->card, sp->folds, err);
    if (rc) return SWI_ERR_INVALID_ARG;
    struct stat st;
    for (int f = 0; f < j->card.n_folds; f++) {
        if (stat(j->card.models[f], &st) != 0) {
            cli_err(err, "%s: fold %s's model %s is missing", j->card.source, j->card.folds[f],
                    j->card.models[f]);
            return SWI_ERR_IO;
        }
        char what[64];
        snprintf(what, sizeof what, "fold %s's model", j->card.folds[f]);
        if (!pl_model_file(j->card.models[f], 0, what, NULL, err)) return SWI_ERR_IO;
    }
    memcpy(j->inputs, sp->inputs, sizeof j->inputs);
    j->n_inputs = sp->n_inputs;
    j->output = sp->output;
    pl_target_of(j->output, &j->t_output);
    j->save_probabilities = sp->save_probabilities;
    j->no_mirroring = sp->no_mirroring;
    j->accumulate = sp->accumulate_float16 ? SWI_ACCUMULATE_FLOAT16 : SWI_ACCUMULATE_FLOAT32;
    j->force = sp->force;
    j->quiet = sp->quiet;
    j->statistics = sp->statistics;
    j->masks = sp->masks;
    j->keep_statistics = sp->keep_statistics;
    j->threads = sp->threads;
    j->cuda = sp->cuda;
    j->sw_batch = sp->sw_batch > 0 ? sp->sw_batch : 1;
    j->tile_step = sp->tile_step > 0 ? sp->tile_step : j->card.tile_step;
    j->max_memory = sp->max_memory;
    if (j->save_probabilities && j->output &&
        (beside(&j->t_output, j->card.file_ending, ".npz", j->probs_path, sizeof j->probs_path) ||
         beside(&j->t_output, j->card.file_ending, ".json", j->props_path, sizeof j->props_path))) {
        cli_err(err, "--output: path too long");
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

static int fail_mem(char *err, const char *what, size_t bytes) {
    char b[32];
    cli_err(err, "out of memory for %s (%s)", what, cli_bytes(bytes, b));
    return 1;
}

/* Bytes as a double: sizes a header or a spacing may claim overflow size_t products. */
static double dvox(const int64_t s[3]) { return (double)s[0] * (double)s[1] * (double)s[2]; }

static size_t dbytes(double b) { return b >= (double)SIZE_MAX ? SIZE_MAX : (size_t)b; }

/* Whether `need` bytes, held before the engine is planned, fit the budget: --max-memory, else
 * the memory available. 0, or 2 with err naming the input, what it is and what it needs
 * (the budget is checked before those bytes are allocated, so a tiny file whose header or
 * spacing implies gigabytes is refused at once). */
static int nn_fits(const nn_job *j, double need, const char *what, char *err) {
    char from[64], a[32], b[32];
    const size_t budget = j->max_memory ? j->max_memory : cli_available_memory(from, sizeof from);
    if (budget == SIZE_MAX || need <= (double)budget) return 0;
    if (j->max_memory)
        cli_err(err, "%s: %s, which holds %s before the engine runs: more than --max-memory %s", j->inputs[0],
                what, cli_bytes(dbytes(need), a), cli_bytes(budget, b));
    else
        cli_err(err,
                "%s: %s, which holds %s before the engine runs, and %s is available (%s); give "
                "--max-memory to run anyway",
                j->inputs[0], what, cli_bytes(dbytes(need), a), cli_bytes(budget, b), from);
    return 2;
}

/* Steps 0-4: the headers, the voxels, the reader order and transpose, the crop box, the
 * normalisation and the resampling to the model grid. Returns 0, 1 (err says why) or 2
 * (the budget: err names the input and what it would need). */
int nn_prepare(nn_job *j, const swi_job_hooks *hooks, char *err) {
    (void)hooks;
    if (j->model) return 0;
    const nn_card *c = &j->card;
    char msg[SWI_ERRLEN];
    if (j->n_inputs != j->card.n_channels) {
        cli_err(err, "%s: the model takes %d channel%s (%s%s%s), but %d --input %s given", j->card.source,
                j->card.n_channels, j->card.n_channels == 1 ? "" : "s", j->card.channels[0].name,
                j->card.n_channels > 1 ? ", " : "", j->card.n_channels > 1 ? j->card.channels[1].name : "",
                j->n_inputs, j->n_inputs == 1 ? "was" : "were");
        return 1;
    }
    for (int i = 0; !j->opened && i < j->n_inputs; i++) {
        if (swi_volume_open(j->inputs[i], &j->vols[i], msg, sizeof msg) != SWI_OK) {
            cli_err(err, "%s", msg);
            return 1;
        }
        if (j->vols[i].frames > 1) {
            cli_err(err, "%s: a 4-D image; an nnU-Net model takes one 3-D file per channel (CASE_0000, ...)",
                    j->inputs[i]);
            return 1;
        }
        if (i > 0 && pl_same_grid(&j->vols[0], j->inputs[0], &j->vols[i], j->inputs[i], err)) return 1;
    }
    j->opened = 1;
    const swi_volume *v = &j->vols[0];
    memcpy(j->in_size, v->size, sizeof j->in_size);
    if (c->reorient) {
        if (swi_resample_orientation_make(v->affine, v->size, "RAS", &j->orient, msg, sizeof msg) != SWI_OK) {
            cli_err(err, "%s: reorienting to RAS (NibabelIOWithReorient): %s", j->inputs[0], msg);
            return 1;
        }
    } else {
        memset(&j->orient, 0, sizeof j->orient);
        for (int a = 0; a < 3; a++) {
            j->orient.src_axis[a] = a;
            j->orient.in_size[a] = j->orient.size[a] = v->size[a];
        }
        memcpy(j->orient.affine, v->affine, sizeof j->orient.affine);
    }
    /* reader axis r is (oriented) swi axis 2 - r; transposed axis d is reader axis t_fwd[d] */
    for (int d = 0; d < 3; d++) {
        const int o = 2 - c->t_fwd[d];
        j->src[d] = j->orient.src_axis[o];
        j->flip[d] = j->orient.flip[o];
        j->full[d] = v->size[j->src[d]];
        j->sp_orig[d] = v->spacing[j->src[d]];
    }
    for (int r = 0; r < 3; r++) j->reader_size[r] = j->orient.size[2 - r];
    for (int d = 0; d < 3; d++) j->sp_model[d] = c->dims == 2 && d == 0 ? j->sp_orig[0] : c->spacing[d];

    /* the voxels */
    const int64_t N = v->size[0] * v->size[1] * v->size[2], C = j->n_inputs;
    if (!j->input) {
        /* the inputs as floats, the nonzero mask and its fill's scratch (9 bytes a row) */
        char what[160];
        snprintf(what, sizeof what,
                 "its %lld x %lld x %lld voxels (%lld channel%s) read for the nnU-Net model",
                 (long long)v->size[0], (long long)v->size[1], (long long)v->size[2], (long long)C,
                 C == 1 ? "" : "s");
        const double rows = (double)v->size[0] * (double)v->size[1];
        const int rc = nn_fits(j, (double)N * (double)C * 4 + (double)N + rows * 9, what, err);
        if (rc) return rc;
        j->input = malloc((size_t)(N * C) * sizeof(float));
        if (!j->input) return fail_mem(err, "the inputs", (size_t)(N * C) * sizeof(float));
        for (int i = 0; i < j->n_inputs; i++) {
            int64_t bad = 0;
            if (swi_volume_read_frames(&j->vols[i], j->input + (size_t)(i * N), NULL, &bad, msg,
                                       sizeof msg) != SWI_OK) {
                cli_err(err, "%s", msg);
                return 1;
            }
        }
    }
    /* step 2: the nonzero mask (holes filled) and its box, on the input grid (swi axes; the
     * mask and its box do not depend on the axis order); the box's image in transposed axes */
    uint8_t *full_mask = malloc((size_t)N);
    if (!full_mask) return fail_mem(err, "the nonzero mask", (size_t)N);
    if (nn_nonzero_box(j->input, C, v->size, full_mask, j->box_lo, j->box_hi, msg, sizeof msg)) {
        free(full_mask);
        cli_err(err, "%s: %s", j->inputs[0], msg);
        return 1;
    }
    for (int d = 0; d < 3; d++) {
        const int a = j->src[d];
        j->clo[d] = j->flip[d] ? v->size[a] - j->box_hi[a] : j->box_lo[a];
        j->cs[d] = j->box_hi[a] - j->box_lo[a];
    }
    /* step 4's shape (2-D: axis 0 keeps its spacing, so its size) and separate z both ways */
    if (swi_resample_nnunet_shape(j->sp_orig, j->sp_model, j->cs, j->rs) != SWI_OK) {
        free(full_mask);
        cli_err(err, "%s: no model grid for spacing %g x %g x %g", j->inputs[0], j->sp_orig[0], j->sp_orig[1],
                j->sp_orig[2]);
        return 1;
    }
    if (c->dims == 2) j->rs[0] = j->cs[0];
    j->sep_fwd =
        swi_resample_nnunet_separate_z(j->sp_orig, j->sp_model, c->data.force_separate_z, &j->axis_fwd);
    j->sep_back =
        swi_resample_nnunet_separate_z(j->sp_model, j->sp_orig, c->probs.force_separate_z, &j->axis_back);
    {
        /* the model grid, checked before it (or the crop) is allocated: what making it holds
         * (the inputs, the crop, the grid), or what it and the labels hold beside the engine */
        const double Cd = (double)C, grid = dvox(j->rs) * Cd * 4, crop = dvox(j->cs) * Cd * 4,
                     made = (double)N * Cd * 4 + crop + fmax(dvox(j->cs) + (double)N, grid),
                     kept = grid + dvox(j->in_size) * (c->max_label > 255 ? 2 : 1) +
                            (j->save_probabilities ? dvox(j->in_size) * (double)c->heads * 4 : 0);
        char what[256];
        snprintf(
            what, sizeof what,
            "its model grid is %lld x %lld x %lld voxels (%lld x %lld x %lld at %g x %g x %g mm resampled to "
            "%g x %g x %g mm)",
            (long long)j->rs[0], (long long)j->rs[1], (long long)j->rs[2], (long long)j->cs[0],
            (long long)j->cs[1], (long long)j->cs[2], j->sp_orig[0], j->sp_orig[1], j->sp_orig[2],
            j->sp_model[0], j->sp_model[1], j->sp_model[2]);
        const int rc = nn_fits(j, fmax(made, kept), what, err);
        if (rc) {
            free(full_mask);
            return rc;
        }
    }
    const int64_t Nc = j->cs[0] * j->cs[1] * j->cs[2], Nr = j->rs[0] * j->rs[1] * j->rs[2];
    /* steps 1-2: gather the box in transposed order */
    j->crop = malloc((size_t)(Nc * C) * sizeof(float));
    uint8_t *mask = malloc((size_t)Nc);
    if (!j->crop || !mask) {
        free(mask);
        free(full_mask);
        return fail_mem(err, "the cropped inputs", (size_t)(Nc * (C * 4 + 1)));
    }
    int64_t stride[3] = {v->size[1] * v->size[2], v->size[2], 1}, u = 0;
    for (int64_t u0 = 0; u0 < j->cs[0]; u0++)
        for (int64_t u1 = 0; u1 < j->cs[1]; u1++)
            for (int64_t u2 = 0; u2 < j->cs[2]; u2++, u++) {
                const int64_t q[3] = {u0 + j->clo[0], u1 + j->clo[1], u2 + j->clo[2]};
                int64_t at = 0;
                for (int d = 0; d < 3; d++) {
                    const int a = j->src[d];
                    at += (j->flip[d] ? v->size[a] - 1 - q[d] : q[d]) * stride[a];
                }
                for (int64_t ch = 0; ch < C; ch++) j->crop[ch * Nc + u] = j->input[ch * N + at];
                mask[u] = full_mask[at];
            }
    free(full_mask);
    /* step 3 */
    for (int64_t ch = 0; ch < C; ch++) {
        const nn_card_channel *cc = &c->channels[ch];
        static const int scheme[] = {[NNC_NORM_CT] = NN_NORM_CT,
                                     [NNC_NORM_ZSCORE] = NN_NORM_ZSCORE,
                                     [NNC_NORM_RESCALE] = NN_NORM_RESCALE01,
                                     [NNC_NORM_RGB] = NN_NORM_RGB01,
                                     [NNC_NORM_NONE] = NN_NORM_NONE};
        const nn_norm norm = {scheme[cc->scheme], cc->use_mask, cc->mean, cc->std, cc->lo, cc->hi};
        if (nn_normalize(j->crop + ch * Nc, Nc, mask, &norm, msg, sizeof msg)) {
            free(mask);
            cli_err(err, "%s: channel %lld (%s): %s", j->inputs[ch], (long long)ch, cc->name, msg);
            return 1;
        }
    }
    free(mask);
    /* step 4 */
    j->model = malloc((size_t)(Nr * C) * sizeof(float));
    if (!j->model) return fail_mem(err, "the input on the model grid", (size_t)(Nr * C) * sizeof(float));
    if (swi_resample_nnunet(j->crop, j->cs, j->model, j->rs, C, c->data.order, c->data.order_z,
                            j->sep_fwd ? j->axis_fwd : -1, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "%s: resampling to the model grid: %s", j->inputs[0], msg);
        return 1;
    }
    free(j->crop);
    j->crop = NULL;
    /* the input grid's voxels are not read again: the labels only need its geometry (and the
     * statistics the first channel as read) */
    if (j->statistics || j->keep_statistics) {
        const int64_t *n = j->in_size;
        float *first = realloc(j->input, (size_t)(n[0] * n[1] * n[2]) * sizeof(float));
        if (first) j->input = NULL;
        free(j->raw0);
        j->raw0 = first ? first : j->input;
        j->input = NULL;
        return 0;
    }
    free(j->input);
    j->input = NULL;
    return 0;
}

/* The sink's map: input-grid index x inside the crop box -> model-grid coordinate, nnU-Net's
 * (u + 0.5) * rs / cs - 0.5 of the cropped, transposed index u. */
void nn_back_map(const nn_job *j, double map[3][4]) {
    memset(map, 0, sizeof(double) * 12);
    for (int d = 0; d < 3; d++) {
        const int a = j->src[d];
        const double s = (double)j->rs[d] / (double)j->cs[d];
        if (!j->flip[d]) {
            map[d][a] = s;
            map[d][3] = s * 0.5 - 0.5;
        } else {
            map[d][a] = -s;
            map[d][3] = s * ((double)j->cs[d] - 0.5) - 0.5;
        }
    }
}

static void session_options(const nn_job *j, swi_ort_options *oo) {
    swi_ort_options_init(oo);
    oo->threads = j->threads;
    oo->device = j->cuda ? SWI_ORT_CUDA : SWI_ORT_CPU;
    pl_ort_environment(oo);
}

/* The folds opened and averaged; the engine's parameters (mirroring too) and the model grid. */
int nn_engine_setup(nn_job *j, swi_params *p, swi_tensor *in, swi_output *out, char *err) {
    const nn_card *c = &j->card;
    char msg[SWI_ERRLEN];
    if (!j->folds[0]) {
        swi_ort_options oo;
        session_options(j, &oo);
        for (int f = 0; f < c->n_folds; f++) {
            if (swi_ort_open(c->models[f], &oo, &j->folds[f], msg, sizeof msg) != SWI_OK) {
                cli_err(err, "%s", msg);
                return 1;
            }
            swi_ort_window w;
            swi_ort_window_init(&w, j->n_inputs);
            memcpy(w.roi, c->window, sizeof w.roi);
            swi_head_spec h;
            if (swi_ort_prepare(j->folds[f], &w, &h, msg, sizeof msg) != SWI_OK) {
                cli_err(err, "%s", msg);
                return 1;
            }
            if (h.channels != c->heads) {
                cli_err(err, "%s: gives %lld outputs, the card says %lld", c->models[f],
                        (long long)h.channels, (long long)c->heads);
                return 1;
            }
            if (f == 0) j->head = h;
            j->fold_pred[f] = swi_ort_predictor(j->folds[f]);
        }
        j->mirror_mask = 0;
        for (int i = 0; !j->no_mirroring && i < c->n_mirror; i++)
            j->mirror_mask |= 1u << (c->mirror[i] + (c->dims == 2 ? 1 : 0));
        /* the engine mirrors (swi_params.mirror_axes): each run is blended as it comes, so
         * no mirror holds a second window of outputs; the mean of the folds runs inside */
        const swi_predictor *members = j->fold_pred;
        if (c->n_folds > 1) {
            if (swi_predictor_mean(members, c->n_folds, c->heads, 3, c->window, j->sw_batch, &j->mean, msg,
                                   sizeof msg) != SWI_OK) {
                cli_err(err, "%s", msg);
                return 1;
            }
            j->has_mean = 1;
            j->net = j->mean;
        } else {
            j->net = members[0];
        }
    }
    swi_params_init(p, 3);
    for (int a = 0; a < 3; a++) {
        p->roi[a] = c->window[a];
        p->tile_step[a] = j->tile_step; /* nnU-Net's own number: 1 - (1 - t) is not always t */
        p->sigma_scale[a] = c->sigma;
    }
    p->grid = SWI_GRID_NNUNET;
    p->mode = SWI_BLEND_GAUSSIAN_NNUNET;
    p->padding_mode = SWI_PAD_CONSTANT;
    p->cval = 0;
    p->sw_batch_size = j->sw_batch;
    p->threads = j->threads;
    p->max_memory = j->max_memory;
    p->reuse = SWI_REUSE_OFF;
    p->mirror_axes = j->mirror_mask;
    p->accumulate = j->accumulate;
    p->n_heads = 1;
    p->heads[0] = j->head;
    memset(in, 0, sizeof *in);
    in->data = j->model;
    in->batch = 1;
    in->channels = j->n_inputs;
    in->dims = 3;
    memcpy(in->size, j->rs, sizeof in->size);
    swi_output_init(out, 0, SWI_REDUCE_CUSTOM);
    out->on_region = nn_model_region;
    out->user = j;
    return 0;
}

static size_t vox(const int64_t s[3]) { return (size_t)s[0] * (size_t)s[1] * (size_t)s[2]; }

/* Held beside the engine while it runs: the input on the model grid, the labels, the
 * probabilities, the statistics' intensities, the sink's band, the folds' mean's scratch (the
 * engine mirrors without any). */
static size_t beside_bytes(void *user, const swi_plan *plan) {
    const nn_job *j = user;
    const size_t K = (size_t)j->card.heads, C = (size_t)j->n_inputs, win = vox(j->card.window);
    size_t n = vox(j->rs) * C * 4 + vox(j->in_size) * (size_t)(j->card.max_label > 255 ? 2 : 1);
    if (j->save_probabilities) n += vox(j->in_size) * K * 4;
    if (j->statistics || j->keep_statistics) n += vox(j->in_size) * 4; /* the first channel as read */
    double map[3][4];
    nn_back_map(j, map);
    const int64_t box[3] = {j->box_hi[0] - j->box_lo[0], j->box_hi[1] - j->box_lo[1],
                            j->box_hi[2] - j->box_lo[2]};
    n += swi_resample_sink_plan_bytes(j->rs, box, map, (int64_t)K, 0, plan->order[0]);
    const size_t sw = (size_t)plan->sw_batch_size;
    n += j->has_mean ? sw * win * K * 4 : 0;
    return n;
}

/* Held while the model grid is made: the inputs as read, the crop, then its mask and the
 * fill's queue, or the copy on the model grid. */
static size_t reading_bytes(const nn_job *j) {
    const size_t C = (size_t)j->n_inputs;
    const size_t fill = vox(j->cs) * 9, model = vox(j->rs) * C * 4; /* the mask's fill, or the copy */
    return vox(j->in_size) * C * 4 + vox(j->cs) * C * 4 + (fill > model ? fill : model);
}

swi_status nn_job_plan(nn_job *j, const swi_job_hooks *hooks, swi_job_plan *plan, char *err) {
    memset(plan, 0, sizeof *plan);
    const int prc = nn_prepare(j, hooks, err);
    if (prc) return prc == 2 ? SWI_ERR_BUDGET : SWI_ERR_IO;
    swi_params p;
    swi_tensor in;
    swi_output out;
    if (nn_engine_setup(j, &p, &in, &out, err)) return SWI_ERR_IO;
    swi_free(j->ctx);
    j->ctx = swi_create();
    if (!j->ctx) {
        cli_err(err, "out of memory");
        return SWI_ERR_NOMEM;
    }
    char msg[SWI_ERRLEN];
    swi_tensor shape_only = in;
    shape_only.data = NULL;
    swi_status st = cli_plan_available(j->ctx, &p, &shape_only, &out, 1, &plan->engine, beside_bytes, j,
                                       &plan->beside_bytes, reading_bytes(j), msg, sizeof msg);
    j->planned = p;
    /* a budget's refusal names the input it is about */
    if (st == SWI_ERR_BUDGET && !j->max_memory) {
        snprintf(plan->unfit, sizeof plan->unfit, "%.200s: %.500s", j->inputs[0], msg);
    } else if (st == SWI_ERR_BUDGET) {
        cli_err(err, "%.200s: --max-memory is too small: %.500s", j->inputs[0], msg);
        return st;
    } else if (st != SWI_OK) {
        cli_err(err, "%s", swi_last_error(j->ctx));
        return st;
    }
    plan->reading_bytes = reading_bytes(j);
    plan->peak_bytes = plan->engine.bytes_peak + plan->beside_bytes;
    if (plan->reading_bytes > plan->peak_bytes) plan->peak_bytes = plan->reading_bytes;
    memcpy(plan->size, j->rs, sizeof plan->size);
    memcpy(plan->input_size, j->in_size, sizeof plan->input_size);
    plan->channels = j->n_inputs;
    plan->classes = j->card.heads;
    plan->members = j->card.n_folds;
    plan->fits = plan->unfit[0] == '\0';
    return SWI_OK;
}

size_t nn_job_describe(const nn_job *j, const swi_job_plan *plan, char *buf, size_t n) {
    const nn_card *c = &j->card;
    char b[4][32], folds[128] = "";
    size_t fl = 0;
    for (int f = 0; f < c->n_folds && fl < sizeof folds - 20; f++)
        fl += (size_t)snprintf(folds + fl, sizeof folds - fl, "%s%s", f ? "," : "", c->folds[f]);
    char mir[64] = "off";
    if (!j->no_mirroring && c->n_mirror > 0) {
        size_t ml = (size_t)snprintf(mir, sizeof mir, "axes");
        for (int i = 0; i < c->n_mirror; i++)
            ml += (size_t)snprintf(mir + ml, sizeof mir - ml, " %d", c->mirror[i]);
        snprintf(mir + ml, sizeof mir - ml, " (%d network calls a window)", 1 << c->n_mirror);
    } else if (!j->no_mirroring) {
        snprintf(mir, sizeof mir, "none (the model allows none)");
    }
    const swi_plan *e = &plan->engine;
    int len = snprintf(
        buf, n,
        "model    %s: nnU-Net %s %s, %d-D, %lld outputs (%s), folds %s\n"
        "input    %s: %lld x %lld x %lld voxels, %d channel%s, %g x %g x %g mm\n"
        "steps    reader order %s, transpose_forward %d,%d,%d -> %lld x %lld x %lld\n"
        "         crop to the nonzero box [%lld:%lld, %lld:%lld, %lld:%lld] (input axes) -> %lld x %lld x %lld\n"
        "         normalise per channel (%s%s), resample %g x %g x %g -> %g x %g x %g mm%s: model grid %lld x %lld x "
        "%lld\n"
        "         back: logits resampled to the box (order %d%s), %s\n"
        "window   %lld x %lld x %lld, nnU-Net's grid, tile step %g, Gaussian sigma %g: %lld windows, batch %d\n"
        "mirror   %s\n"
        "memory   engine %s + beside %s = peak %s%s%s\n",
        c->dir, c->dataset, c->configuration, c->dims, (long long)c->heads,
        c->has_regions ? "regions, sigmoid" : "labels, softmax", folds, j->inputs[0],
        (long long)j->in_size[0], (long long)j->in_size[1], (long long)j->in_size[2], j->n_inputs,
        j->n_inputs == 1 ? "" : "s", j->vols[0].spacing[0], j->vols[0].spacing[1], j->vols[0].spacing[2],
        c->reorient ? "RAS (reoriented)" : "(k, j, i)", c->t_fwd[0], c->t_fwd[1], c->t_fwd[2],
        (long long)j->full[0], (long long)j->full[1], (long long)j->full[2], (long long)j->box_lo[0],
        (long long)j->box_hi[0], (long long)j->box_lo[1], (long long)j->box_hi[1], (long long)j->box_lo[2],
        (long long)j->box_hi[2], (long long)j->cs[0], (long long)j->cs[1], (long long)j->cs[2],
        c->channels[0].scheme == NNC_NORM_CT ? "CTNormalization" : "nnU-Net's scheme",
        c->n_channels > 1 ? ", ..." : "", j->sp_orig[0], j->sp_orig[1], j->sp_orig[2], j->sp_model[0],
        j->sp_model[1], j->sp_model[2], j->sep_fwd ? ", separate z" : "", (long long)j->rs[0],
        (long long)j->rs[1], (long long)j->rs[2], c->probs.order, j->sep_back ? ", separate z" : "",
        c->has_regions ? "sigmoid > threshold in regions_class_order" : "argmax", (long long)c->window[0],
        (long long)c->window[1], (long long)c->window[2], j->tile_step, c->sigma, (long long)e->windows_total,
        e->sw_batch_size, mir, cli_bytes(e->bytes_peak, b[0]), cli_bytes(plan->beside_bytes, b[1]),
        cli_bytes(plan->peak_bytes, b[2]),
        plan->fits ? "" : "; does not fit: ", plan->fits ? "" : plan->unfit);
    return len < 0 ? 0 : (size_t)len;
}

int nn_job_give_inputs(nn_job *j, const swi_volume *vols, float *voxels) {
    if (j->opened || j->input) {
        free(voxels);
        return 1;
    }
    for (int i = 0; i < j->n_inputs; i++)
        if (vols[i].frames > 1) { /* the job refuses it by name when it opens the files itself */
            free(voxels);
            return 0;
        }
    memcpy(j->vols, vols, (size_t)j->n_inputs * sizeof *vols);
    j->opened = 1;
    j->input = voxels;
    return 0;
}

int nn_job_channels(const nn_job *j, const char **file_ending) {
    if (file_ending) *file_ending = j->card.file_ending;
    return j->card.n_channels;
}

void nn_job_free(nn_job *j) {
    if (!j) return;
    if (j->has_mean) swi_predictor_mean_free(&j->mean);
    for (int f = 0; f < NN_MAX_FOLDS; f++) swi_ort_close(j->folds[f]);
    swi_resample_sink_free(j->sink);
    cli_out_abort(&j->out_labels);
    cli_out_abort(&j->out_probs);
    cli_out_abort(&j->out_props);
    cli_out_abort(&j->out_stats);
    pl_masks_abort(&j->mask_dir);
    pl_stats_free(j->class_stats);
    free(j->raw0);
    swi_free(j->ctx);
    free(j->input);
    free(j->crop);
    free(j->model);
    free(j->labels);
    free(j->probs);
    nn_card_free(&j->card);
    memset(j, 0, sizeof *j);
}
