/*
 * job.c -- swi_pipeline.h: a spec settled into the job's options (the card, then the
 * defaults), and the calls that open, plan and run it over the steps of segment*.c.
 */
#include "swi_pipeline.h"

#include "alloc.h"
#include "budget.h"
#include "card.h"
#include "job.h"
#include "nnunet_job.h"
#include "preprocess.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct swi_job {
    pl_opts o;
    swi_job_hooks hooks;
    seg_card card;
    seg_state *s;
    swi_params p; /* as seg_setup settled them */
    swi_tensor in;
    swi_output outs[3]; /* labels, scores, the statistics' labels */
    int n_outs;
    int set_up; /* seg_setup done */
    int ran;
    nn_job *nn; /* an nnU-Net model directory: its own steps (nnunet_job.h) */
};

static swi_status finish(swi_status st, const char *msg, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}

/* Three values all set (>= 0, or > 0 with positive) or all unset (< 0, or 0): 1 set, 0
 * unset, -1 a mix. */
static int all_or_none(const double v[3], int positive) {
    int n = 0;
    for (int a = 0; a < 3; a++) n += positive ? v[a] > 0 : v[a] >= 0;
    return n == 3 ? 1 : n == 0 ? 0 : -1;
}

/* The spec as options, before the card: 0, or -1 with a usage error in err. */
/* The fields that name what a job reads and writes, and its part: what pl_store_check reads
 * (swi_job_check_names settles only these). */
void pl_opts_names(const swi_job_spec *sp, pl_opts *o) {
    o->n_inputs = 0;
    for (int c = 0; c < sp->n_inputs && c < SWI_JOB_MAX_INPUTS; c++) o->inputs[o->n_inputs++] = sp->inputs[c];
    o->output = sp->output;
    o->scores = sp->scores;
    pl_target_of(o->output, &o->t_output);
    pl_target_of(o->scores, &o->t_scores);
    o->preview = sp->preview;
    o->report = sp->report;
    o->statistics = sp->statistics;
    o->masks = sp->masks;
    memcpy(o->chunks, sp->chunks, sizeof o->chunks);
    o->chunks_given = sp->chunks[0] != 0 || sp->chunks[1] != 0 || sp->chunks[2] != 0;
    o->keep_statistics = sp->keep_statistics;
    o->zscore = sp->zscore;
    o->shard_init = sp->shard_init;
    o->shard_given = sp->shard_parts > 0 || sp->shard_init;
    o->shard_part = sp->shard_part;
    o->shard_parts = sp->shard_parts;
    o->shard_collective = sp->shard_collective;
    o->shard_grid_given = sp->shard_grid[0] > 0;
    memcpy(o->shard_grid, sp->shard_grid, sizeof o->shard_grid);
}

static int spec_opts(const swi_job_spec *sp, pl_opts *o, char *err) {
    memset(o, 0, sizeof *o);
    if (sp->n_inputs < 1 || sp->n_inputs > SWI_JOB_MAX_INPUTS) {
        cli_err(err, "--input is required (1 to %d inputs)", SWI_JOB_MAX_INPUTS);
        return -1;
    }
    if (sp->n_predictors < 0 || sp->n_predictors > SWI_JOB_MAX_MODELS ||
        (sp->n_predictors && !sp->predictors)) {
        cli_err(err, "predictors: 1 to %d of them (got %d%s)", SWI_JOB_MAX_MODELS, sp->n_predictors,
                sp->n_predictors && !sp->predictors ? ", predictors NULL" : "");
        return -1;
    }
    if (sp->n_predictors) {
        if (sp->n_models > 1) {
            cli_err(err, "with predictors, models names at most one ONNX model (for its card), not %d",
                    sp->n_models);
            return -1;
        }
        if (sp->classes < 1) {
            cli_err(err, "classes is required with predictors: the channels they give (got %lld)",
                    (long long)sp->classes);
            return -1;
        }
        for (int i = 0; i < sp->n_predictors; i++)
            if (!sp->predictors[i].predict) {
                cli_err(err, "predictors[%d] has no predict function", i);
                return -1;
            }
        if (sp->head != 0) {
            cli_err(err, "--head %d selects an ONNX model's output; the caller's predictors fill head 0",
                    sp->head);
            return -1;
        }
    } else if (sp->n_models < 1 || sp->n_models > SWI_JOB_MAX_MODELS) {
        cli_err(err, "--model is required (1 to %d models)", SWI_JOB_MAX_MODELS);
        return -1;
    } else if (sp->classes != 0) {
        cli_err(err, "classes goes with predictors; an ONNX model says its own");
        return -1;
    }
    for (int c = 0; c < sp->n_inputs; c++)
        if (!sp->inputs[c] || !*sp->inputs[c]) {
            cli_err(err, "--input %d: no name", c);
            return -1;
        }
    for (int m = 0; m < sp->n_models; m++)
        if (!sp->models[m] || !*sp->models[m]) {
            cli_err(err, "--model %d: no name", m);
            return -1;
        }
    pl_opts_names(sp, o);
    memcpy(o->models, sp->models, sizeof o->models);
    o->n_models = sp->n_models;
    o->model = sp->n_models ? sp->models[0] : NULL;
    o->preds = sp->n_predictors ? sp->predictors : NULL;
    o->n_preds = sp->n_predictors;
    o->classes = sp->n_predictors ? sp->classes : 0;
    o->report_title = sp->report_title;
    for (int a = 0; a < 3; a++) {
        if (sp->roi[a] < -1) {
            cli_err(err, "--roi must be positive, or -1 for the whole axis (got %lld)",
                    (long long)sp->roi[a]);
            return -1;
        }
        o->roi[a] = sp->roi[a] > 0 ? sp->roi[a] : 0; /* 0 with roi_given: the whole axis */
        o->roi_given |= sp->roi[a] != 0;
        o->overlap[a] = 0.25;
        o->sigma_scale[a] = 0.125;
    }
    int k = all_or_none(sp->overlap, 0);
    if (k < 0) {
        cli_err(err, "--overlap: set all three axes or none");
        return -1;
    }
    if (k) {
        for (int a = 0; a < 3; a++)
            if (!(sp->overlap[a] < 1)) {
                cli_err(err, "--overlap must be in [0, 1) (got %g)", sp->overlap[a]);
                return -1;
            }
        memcpy(o->overlap, sp->overlap, sizeof o->overlap);
        o->given |= SEG_GIVEN_OVERLAP;
    }
    k = all_or_none(sp->sigma_scale, 0);
    if (k < 0) {
        cli_err(err, "--sigma-scale: set all three axes or none");
        return -1;
    }
    if (k) {
        memcpy(o->sigma_scale, sp->sigma_scale, sizeof o->sigma_scale);
        o->given |= SEG_GIVEN_SIGMA;
    }
    o->mode = SWI_BLEND_CONSTANT;
    if (sp->mode >= 0) {
        if (sp->mode != SWI_BLEND_CONSTANT && sp->mode != SWI_BLEND_GAUSSIAN) {
            cli_err(err, "--mode: %d is not a swi_blend", sp->mode);
            return -1;
        }
        o->mode = (swi_blend)sp->mode;
        o->given |= SEG_GIVEN_MODE;
    }
    o->padding = SWI_PAD_CONSTANT;
    if (sp->padding >= 0) {
        if (sp->padding > SWI_PAD_CIRCULAR) {
            cli_err(err, "--padding: %d is not a swi_pad", sp->padding);
            return -1;
        }
        o->padding = (swi_pad)sp->padding;
        o->given |= SEG_GIVEN_PADDING;
    }
    if (!isnan(sp->cval)) {
        o->cval = (float)sp->cval;
        o->given |= SEG_GIVEN_CVAL;
    }
    if (sp->sw_batch < 0) {
        cli_err(err, "--sw-batch must be positive (got %d)", sp->sw_batch);
        return -1;
    }
    o->sw_batch = sp->sw_batch ? sp->sw_batch : 1;
    o->threads = sp->threads;
    o->max_memory = sp->max_memory;
    o->softmax = sp->softmax;
    o->keep_scores = sp->keep_scores;
    o->tta = sp->tta;
    o->force = sp->force;
    o->cuda = sp->cuda;
    o->quiet = sp->quiet;
    o->head = sp->head;
    o->nonfinite_fail = sp->nonfinite_fail;
    o->clip_given = sp->clip_given;
    memcpy(o->clip, sp->clip, sizeof o->clip);
    o->scale_given = sp->scale_given;
    memcpy(o->scale, sp->scale, sizeof o->scale);
    o->orientation = sp->orientation;
    k = all_or_none(sp->spacing, 1);
    if (k < 0) {
        cli_err(err, "--spacing: give all three axes (> 0) or none");
        return -1;
    }
    o->spacing_given = k;
    if (k) memcpy(o->spacing, sp->spacing, sizeof o->spacing);
    o->no_card = sp->no_card;
    if (sp->shard_parts > 0 && (sp->shard_part < 0 || sp->shard_part >= sp->shard_parts)) {
        cli_err(err, "--shard %d/%d: the part must be in [0, %d)", sp->shard_part, sp->shard_parts,
                sp->shard_parts);
        return -1;
    }
    o->no_reuse = sp->no_reuse;
    o->reuse_cache = sp->reuse_cache;
    o->no_rewrite = sp->no_rewrite;
    o->backend = sp->backend;
    o->precision = sp->precision;
    if (seg_dnnl_check_opts(o, err)) return -1;
    if (o->softmax && !o->scores && !o->keep_scores) {
        cli_err(err, "--softmax applies to --scores; give --scores FILE too");
        return -1;
    }
    if (o->head < 0) {
        cli_err(err, "--head must be 0 or more (got %d)", o->head);
        return -1;
    }
    if (pl_region_opts(sp, o, err)) return -1;
    if (PL_REGION(o) && (PL_TARGET_STORE(&o->t_output) || PL_TARGET_STORE(&o->t_scores))) {
        cli_err(err, "--region writes volume files; store outputs take no region (their parts: --shard)");
        return -1;
    }
    return 0;
}

swi_status swi_job_open(const swi_job_spec *spec, const swi_job_hooks *hooks, swi_job **out, char *err,
                        size_t errlen) {
    char msg[SWI_ERRLEN];
    if (out) *out = NULL;
    if (!spec || !out)
        return finish(SWI_ERR_INVALID_ARG, "swi_job_open: spec and job are required", err, errlen);
    swi_job *job = cli_calloc(1, sizeof *job);
    if (!job) return finish(SWI_ERR_NOMEM, "out of memory", err, errlen);
    if (spec_opts(spec, &job->o, msg)) {
        free(job);
        return finish(SWI_ERR_INVALID_ARG, msg, err, errlen);
    }
    if (hooks) job->hooks = *hooks;
    char nn_path[4200];
    if (nn_spec_is_nnunet(spec, nn_path, sizeof nn_path)) {
        job->nn = cli_calloc(1, sizeof *job->nn);
        swi_status st = job->nn ? nn_job_open(spec, nn_path, job->nn, msg) : SWI_ERR_NOMEM;
        if (st != SWI_OK) {
            if (!job->nn) snprintf(msg, sizeof msg, "out of memory");
            swi_job_free(job);
            return finish(st, msg, err, errlen);
        }
        *out = job;
        return finish(SWI_OK, "", err, errlen);
    }
    if (spec->folds || spec->no_mirroring || spec->tile_step != 0 || spec->save_probabilities ||
        spec->accumulate_float16) {
        swi_job_free(job);
        return finish(SWI_ERR_INVALID_ARG,
                      spec->folds ? "--folds applies to an nnU-Net model directory (swi convert nnunet)"
                      : spec->accumulate_float16
                          ? "--accumulate float16 applies to an nnU-Net model directory (swi convert nnunet)"
                      : spec->no_mirroring
                          ? "--disable-tta applies to an nnU-Net model directory (swi convert nnunet)"
                      : spec->tile_step != 0
                          ? "--tile-step-size applies to an nnU-Net model directory (swi convert nnunet)"
                          : "--save-probabilities applies to an nnU-Net model directory (swi convert nnunet)",
                      err, errlen);
    }
    /* the model's card fills what the spec leaves unset */
    int found = 0;
    if (job->o.model && !job->o.no_card &&
        (card_load(job->o.model, &job->card, &found, msg) ||
         (found && card_apply(&job->card, &job->o, msg)))) {
        swi_job_free(job);
        return finish(SWI_ERR_IO, msg, err, errlen);
    }
    if (job->o.n_preds && !job->o.roi_given) {
        swi_job_free(job);
        return finish(SWI_ERR_INVALID_ARG,
                      "--roi is required with predictors (no model to take the window from, nor a card)", err,
                      errlen);
    }
    if (pl_store_check(&job->o, msg)) {
        swi_job_free(job);
        return finish(SWI_ERR_INVALID_ARG, msg, err, errlen);
    }
    job->s = seg_state_new();
    if (!job->s) {
        swi_job_free(job);
        return finish(SWI_ERR_NOMEM, "out of memory", err, errlen);
    }
    job->s->hooks = &job->hooks;
    *out = job;
    return finish(SWI_OK, "", err, errlen);
}

/* The status of a step that returned rc (0, 1 with s->err and s->status, 2 usage). */
static swi_status step_status(swi_job *job, int rc, char *err, size_t errlen) {
    seg_state *s = job->s;
    if (rc == 0) return finish(SWI_OK, "", err, errlen);
    swi_status st = rc == 2 ? SWI_ERR_INVALID_ARG : s->status != SWI_OK ? s->status : SWI_ERR_IO;
    if (seg_cancelled(s)) {
        st = SWI_ERR_CANCELLED;
        snprintf(s->err, sizeof s->err, "cancelled; no output written");
    }
    return finish(st, s->err, err, errlen);
}

/* The inputs' headers and the models opened, the window settled (once). */
static int set_up(swi_job *job) {
    if (job->set_up) return 0;
    seg_state *s = job->s;
    int rc = seg_setup(&job->o, s, &job->p, &job->in, job->outs, &job->n_outs, s->err);
    if (rc == 1) s->status = SWI_ERR_IO;
    if (rc) return rc;
    job->set_up = 1;
    return 0;
}

swi_status swi_job_plan_run(swi_job *job, int count_reuse, swi_job_plan *plan, char *err, size_t errlen) {
    if (!job || !plan)
        return finish(SWI_ERR_INVALID_ARG, "swi_job_plan_run: job and plan are required", err, errlen);
    memset(plan, 0, sizeof *plan);
    if (job->nn) {
        char msg[SWI_JOB_ERRLEN];
        swi_status st = nn_job_plan(job->nn, &job->hooks, plan, msg);
        return finish(st, msg, err, errlen);
    }
    seg_state *s = job->s;
    const pl_opts *o = &job->o;
    s->status = SWI_OK;
    int rc = set_up(job);
    if (rc) return step_status(job, rc, err, errlen);
    swi_free(s->ctx);
    s->ctx = swi_create();
    if (!s->ctx) return finish(SWI_ERR_NOMEM, "out of memory", err, errlen);
    swi_params p = job->p;
    swi_tensor in = job->in;
    /* Which windows reuse an earlier one's output depends on the voxels: read them (volume
     * inputs on their own grid only: the model grid of orientation/spacing is made by the
     * run, and stores are read window by window). */
    s->count_reuse = count_reuse && p.reuse == SWI_REUSE_ON && !s->grid.active && !s->reader;
    if (s->count_reuse && !s->input) {
        /* not when reading them would not fit the budget (the plan then says so): a header
         * may claim more voxels than memory holds */
        char from[64];
        const size_t budget = o->max_memory ? o->max_memory : cli_available_memory(from, sizeof from);
        if (seg_reading_bytes(o, s) > budget) s->count_reuse = 0;
    }
    if (s->count_reuse) {
        if (!s->input && (rc = seg_read_inputs(o, s, &in))) return step_status(job, rc, err, errlen);
        in.data = s->input;
    }
    /* shapes only otherwise: a store's reader would be read whole, window by window, to
     * count the windows reused (O(windows) for a header claiming 2048^3) */
    swi_reader no_read;
    if (!s->count_reuse) in = pl_shape_only(&in, &no_read);
    if (seg_plan(o, s, &p, &in, job->outs, job->n_outs, &plan->engine, &plan->beside_bytes, plan->unfit,
                 sizeof plan->unfit))
        return step_status(job, 1, err, errlen);
    plan->windows_whole = cli_whole_windows(&p, &in, job->outs, job->n_outs);
    if (s->region) {
        plan->region = 1;
        memcpy(plan->region_lo, s->region_lo, sizeof plan->region_lo);
        memcpy(plan->region_hi, s->region_hi, sizeof plan->region_hi);
        memcpy(plan->model_lo, s->model_lo, sizeof plan->model_lo);
        memcpy(plan->model_hi, s->model_hi, sizeof plan->model_hi);
        /* the whole run's engine, for comparison (on its own context: s->ctx keeps the plan) */
        swi_params q = p;
        memset(q.part_lo, 0, sizeof q.part_lo);
        memset(q.part_hi, 0, sizeof q.part_hi);
        swi_ctx *c = swi_create();
        swi_plan whole;
        if (c && swi_plan_run(c, &q, &in, job->outs, job->n_outs, &whole) == SWI_OK)
            plan->whole_engine_bytes = whole.bytes_peak;
        swi_free(c);
    }
    plan->reading_bytes = seg_reading_bytes(o, s);
    plan->peak_bytes = plan->engine.bytes_peak + plan->beside_bytes;
    if (plan->reading_bytes > plan->peak_bytes) plan->peak_bytes = plan->reading_bytes;
    memcpy(plan->size, in.size, sizeof plan->size);
    memcpy(plan->input_size, s->reader ? s->store_in.size : s->vols[0].size, sizeof plan->input_size);
    plan->channels = in.channels;
    plan->classes = plan->engine.head_channels[0];
    plan->members = s->n_members;
    plan->fits = plan->unfit[0] == '\0';
    return finish(SWI_OK, "", err, errlen);
}

swi_status swi_job_run(swi_job *job, swi_job_result *keep, char *err, size_t errlen) {
    if (!job) return finish(SWI_ERR_INVALID_ARG, "swi_job_run: no job", err, errlen);
    if (keep) memset(keep, 0, sizeof *keep);
    if (job->ran) return finish(SWI_ERR_INVALID_ARG, "swi_job_run: the job has run already", err, errlen);
    job->ran = 1;
    if (job->nn) {
        char msg[SWI_JOB_ERRLEN];
        swi_status st = nn_job_run(job->nn, &job->hooks, keep, msg);
        return finish(st, msg, err, errlen);
    }
    seg_state *s = job->s;
    s->status = SWI_OK;
    s->t0 = cli_now();
    int rc = seg_check_outputs(&job->o, s);
    if (!rc) rc = set_up(job);
    pl_result r;
    memset(&r, 0, sizeof r);
    if (!rc) rc = seg_run_state(&job->o, s, &job->p, &job->in, job->outs, job->n_outs, keep ? &r : NULL);
    swi_status st = step_status(job, rc, err, errlen);
    if (st != SWI_OK) {
        free(r.labels);
        free(r.scores);
        free(r.statistics);
        seg_abort_outputs(s); /* nothing is left behind: now, not at swi_job_free */
        return st;
    }
    if (keep) {
        keep->labels = r.labels;
        keep->label_bytes = r.label_bytes;
        memcpy(keep->size, r.size, sizeof keep->size);
        keep->classes = r.classes;
        keep->scores = r.scores;
        keep->statistics = r.statistics;
        memcpy(keep->affine, s->vols[0].affine, sizeof keep->affine);
        keep->stats = s->stats;
        keep->seconds = cli_now() - s->t0;
    }
    return st;
}

void swi_job_cancel(swi_job *job) {
    if (job && job->nn) {
        job->nn->cancel = 1;
        for (int f = 0; f < NN_MAX_FOLDS; f++)
            if (job->nn->folds[f]) swi_ort_cancel(job->nn->folds[f]);
        return;
    }
    if (!job || !job->s) return;
    job->s->cancel = 1;
    for (int m = 0; m < job->s->n_members; m++) swi_ort_cancel(job->s->members[m]);
}

void swi_job_free(swi_job *job) {
    if (!job) return;
    if (job->nn) nn_job_free(job->nn);
    free(job->nn);
    seg_state_free(job->s);
    card_free(&job->card);
    free(job);
}

void swi_job_result_free(swi_job_result *r) {
    if (!r) return;
    free(r->labels);
    free(r->scores);
    free(r->statistics);
    memset(r, 0, sizeof *r);
}

void swi_job_use_model(swi_job *job, swi_ort_model *model) {
    if (!job || !model || job->set_up || job->nn) return;
    job->s->model = model;
    job->s->model_borrowed = 1;
}

swi_ort_model *swi_job_take_model(swi_job *job) {
    if (!job || job->nn || !job->s->model) return NULL;
    job->s->model_borrowed = 1;
    return job->s->model;
}

swi_status swi_job_give_inputs(swi_job *job, const swi_volume *vols, float *voxels, char *err,
                               size_t errlen) {
    if (job && job->nn && vols && voxels) {
        if (nn_job_give_inputs(job->nn, vols, voxels))
            return finish(SWI_ERR_INVALID_ARG, "swi_job_give_inputs: the job has its inputs already", err,
                          errlen);
        return finish(SWI_OK, "", err, errlen);
    }
    if (!job || !vols || !voxels || job->set_up || job->nn) {
        free(voxels);
        return finish(SWI_ERR_INVALID_ARG,
                      "swi_job_give_inputs: a job not yet planned or run, volumes and voxels", err, errlen);
    }
    seg_state *s = job->s;
    memcpy(s->vols, vols, (size_t)job->o.n_inputs * sizeof *vols);
    s->vols_ready = 1;
    free(s->input);
    s->input = voxels;
    return finish(SWI_OK, "", err, errlen);
}

void swi_job_preprocess(const swi_job *job, float *x, int64_t n) {
    if (job && !job->nn) seg_preprocess(&job->o, x, n);
}

int swi_job_classes(const swi_job *job, const char *const **names) {
    const seg_card *c = job ? job->o.card : NULL;
    *names = c && c->n_classes > 0 ? (const char *const *)c->classes : NULL;
    return *names ? c->n_classes : 0;
}

int swi_job_nnunet(const swi_job *job, int *channels, const char **file_ending) {
    if (!job || !job->nn) return 0;
    int c = nn_job_channels(job->nn, file_ending);
    if (channels) *channels = c;
    return 1;
}

const pl_opts *job_opts(const swi_job *job) { return &job->o; }
const nn_job *job_nnunet(const swi_job *job) { return job->nn; }
const seg_state *job_state(const swi_job *job) { return job->s; }
const swi_params *job_params(const swi_job *job) { return &job->p; }
seg_state *job_state_mut(swi_job *job) { return job->s; }
