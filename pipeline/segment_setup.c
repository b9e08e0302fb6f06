/*
 * segment_setup.c -- the checks a job makes before any voxel is read: every input header,
 * the model (with the messages worded for the command line: --head, --input, --roi,
 * --device), the window; then the engine's parameters and the plan.
 */
#include "segment.h"

#include "budget.h"

#include "alloc.h"
#include "card.h"
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int seg_fail_status(seg_state *s, swi_status st, const char *msg) {
    if (msg != s->err) snprintf(s->err, sizeof s->err, "%s", msg);
    s->status = st;
    return 1;
}

int seg_fail(seg_state *s, const char *msg) { return seg_fail_status(s, SWI_ERR_IO, msg); }

void seg_message(const seg_state *s, const char *fmt, ...) {
    char line[SWI_JOB_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pl_hook_message(s->hooks, line);
}

void pl_hook_message(const swi_job_hooks *h, const char *line) {
    if (h && h->message)
        h->message(h->user, line);
    else
        fprintf(stderr, "swi: %s\n", line);
}

int seg_cancelled(const seg_state *s) {
    return s->cancel || (s->hooks && s->hooks->cancelled && s->hooks->cancelled(s->hooks->user));
}

int seg_cancelled_cb(void *state) { return seg_cancelled(state); }

seg_state *seg_state_new(void) {
    seg_state *s = cli_calloc(1, sizeof *s);
    if (s)
        s->out_labels.fd = s->out_scores.fd = s->out_preview.fd = s->out_report.fd = s->out_itk.fd =
            s->out_ctbl.fd = s->out_stats.fd = -1;
    return s;
}

void seg_abort_outputs(seg_state *s) {
    cli_out_abort(&s->out_labels);
    cli_out_abort(&s->out_scores);
    cli_out_abort(&s->out_preview);
    cli_out_abort(&s->out_report);
    cli_out_abort(&s->out_itk);
    cli_out_abort(&s->out_ctbl);
    cli_out_abort(&s->out_stats);
    pl_masks_abort(&s->masks);
    swi_store_abort(s->w_labels);
    swi_store_abort(s->w_scores);
    s->w_labels = s->w_scores = NULL;
    cli_tmp_dirs_clear();
}

void seg_state_free(seg_state *s) {
    if (!s) return;
    seg_abort_outputs(s);
    cli_input_close(&s->store_in);
    swi_free(s->ctx);
    seg_dnnl_close(s);
    for (int m = 1; m < s->n_members; m++) swi_ort_close(s->members[m]);
    seg_ensemble_free(&s->ensemble);
    swi_predictor_mean_free(&s->mean);
    for (int m = 0; m < s->n_mirrors; m++) swi_predictor_mirror_free(&s->mirrors[m]);
    seg_grid_free(&s->grid);
    if (!s->model_borrowed) swi_ort_close(s->model);
    free(s->input);
    free(s->region_labels);
    free(s->raw);
    pl_stats_free(s->class_stats);
    swi_store_close(s->stats_store);
    free(s);
}

/* The session settings: the options, and the advanced ones from the environment. */
static void session_options(const pl_opts *o, swi_ort_options *oo) {
    swi_ort_options_init(oo);
    oo->threads = o->threads;
    oo->device = o->cuda ? SWI_ORT_CUDA : SWI_ORT_CPU;
    oo->tta = o->tta;
    oo->rewrite = !o->no_rewrite;
    pl_ort_environment(oo);
}

void pl_ort_environment(swi_ort_options *oo) {
    const char *spin = getenv("SWI_ORT_SPIN");
    oo->spin = spin && *spin == '1';
    const char *no_arena = getenv("SWI_ORT_NO_ARENA");
    oo->memory_arena = !(no_arena && *no_arena == '1');
    /* A config too long to be meant is ignored, as it always was. */
    const char *extra = getenv("SWI_ORT_CONFIG");
    oo->config = extra && strlen(extra) < 1024 ? extra : NULL;
}

static int same_shape(const swi_ort_tensor_info *a, const swi_ort_tensor_info *b) {
    if (a->rank != b->rank || a->elem_type != b->elem_type) return 0;
    for (int d = 1; d < a->rank && d < 8; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* The other models of an ensemble: each must take the input and give the output the first
 * one does (the batch size may differ), prepared on the same window. */
static int open_members(const pl_opts *o, seg_state *s, const swi_ort_options *oo,
                        const swi_ort_tensor_info *in0, const swi_ort_window *w0, const swi_head_spec *head0,
                        char *err) {
    for (int m = 1; m < o->n_models; m++) {
        const char *path = o->models[m];
        if (swi_ort_open(path, oo, &s->members[m], err, SWI_ERRLEN)) return 1;
        s->n_members = m + 1;
        swi_ort_tensor_info in;
        char a[160], b[160];
        if (swi_ort_input_info(s->members[m], &in, err, SWI_ERRLEN)) return 1;
        if (!same_shape(&in, in0)) {
            cli_shape_str(in0->shape, in0->rank, a, sizeof a);
            cli_shape_str(in.shape, in.rank, b, sizeof b);
            cli_err(err,
                    "%s and %s disagree: input %s %s vs %s %s; an ensemble's models take "
                    "one input shape",
                    o->models[0], path, a, in0->type_name, b, in.type_name);
            return 1;
        }
        if (o->head >= swi_ort_output_count(s->members[m])) {
            cli_err(err, "%s: --head %d: the model has %d output%s", path, o->head,
                    swi_ort_output_count(s->members[m]), swi_ort_output_count(s->members[m]) == 1 ? "" : "s");
            return 1;
        }
        swi_ort_window w = *w0;
        swi_head_spec head;
        if (swi_ort_prepare(s->members[m], &w, &head, err, SWI_ERRLEN)) return 1;
        if (head.channels != head0->channels ||
            memcmp(head.spatial, head0->spatial, sizeof head.spatial) != 0) {
            cli_err(err,
                    "%s and %s disagree: output [%lld, %lld x %lld x %lld] vs [%lld, %lld x "
                    "%lld x %lld] (classes, window); an ensemble's models give one output shape",
                    o->models[0], path, (long long)head0->channels, (long long)head0->spatial[0],
                    (long long)head0->spatial[1], (long long)head0->spatial[2], (long long)head.channels,
                    (long long)head.spatial[0], (long long)head.spatial[1], (long long)head.spatial[2]);
            return 1;
        }
    }
    return 0;
}

/* Open the model and settle the window: roi[] in, the window used out (roi_given as
 * parsed). Returns 0, 1 or 2 like seg_setup. */
static int open_model(const pl_opts *o, seg_state *s, int64_t roi[3], swi_head_spec *head, char *err) {
    if (o->cuda) {
        char list[256];
        int has = 0;
        if (swi_ort_providers(list, sizeof list, &has, err, SWI_ERRLEN)) return 1;
        if (!has) {
            cli_err(err,
                    "--device cuda: this ONNX Runtime (%s) has no CUDA execution provider "
                    "(it has: %s); use --device cpu",
                    swi_ort_version(), list);
            return 1;
        }
    }
    swi_ort_options oo;
    session_options(o, &oo);
    if (!s->model && swi_ort_open(o->model, &oo, &s->model, err, SWI_ERRLEN)) return 1;
    int n_out = swi_ort_output_count(s->model);
    if (o->head >= n_out) {
        cli_err(err, "%s: --head %d: the model has %d output%s", o->model, o->head, n_out,
                n_out == 1 ? "" : "s");
        return 1;
    }
    swi_ort_tensor_info in;
    if (swi_ort_input_info(s->model, &in, err, SWI_ERRLEN)) return 1;
    char shp[160];
    cli_shape_str(in.shape, in.rank, shp, sizeof shp);
    const int64_t channels = s->channels;
    const swi_volume *v0 = &s->vols[0];
    if (in.rank == 5 && in.elem_type == 1 && in.shape[1] > 0 && in.shape[1] != channels && o->n_inputs == 1 &&
        v0->frames > 1) {
        cli_err(err,
                "%s: a 4-D image (%lldx%lldx%lldx%lld) holds %lld channels along its 4th "
                "axis, but %s expects %lld input channel%s %s",
                o->inputs[0], (long long)v0->size[0], (long long)v0->size[1], (long long)v0->size[2],
                (long long)v0->frames, (long long)v0->frames, o->model, (long long)in.shape[1],
                in.shape[1] == 1 ? "" : "s", shp);
        return 1;
    }
    if (in.rank == 5 && in.elem_type == 1 && in.shape[1] > 0 && in.shape[1] != channels) {
        cli_err(err,
                "%s: the model expects %lld input channel%s %s, but %lld --input file%s "
                "given",
                o->model, (long long)in.shape[1], in.shape[1] == 1 ? "" : "s", shp, (long long)channels,
                channels == 1 ? " was" : "s were");
        return 1;
    }
    if (swi_ort_check(s->model, o->head, err, SWI_ERRLEN)) return 1;
    for (int a = 0; a < 3; a++) {
        int64_t fixed = in.shape[2 + a];
        if (o->roi_given) {
            if (fixed > 0 && roi[a] != fixed && o->roi_from_card) {
                cli_err(err,
                        "%s: \"roi\": %lld,%lld,%lld does not fit %s, whose window is "
                        "fixed at %s",
                        o->card->source, (long long)roi[0], (long long)roi[1], (long long)roi[2], o->model,
                        shp);
                return 1;
            }
            if (fixed > 0 && roi[a] != fixed) {
                cli_err(err,
                        "%s: the model's window is fixed at %s; --roi %lld,%lld,%lld does "
                        "not fit (leave --roi out to use the model's)",
                        o->model, shp, (long long)roi[0], (long long)roi[1], (long long)roi[2]);
                return 1;
            }
            if (roi[a] <= 0) {
                cli_err(err, "--roi must be positive for an ONNX model (got %lld)", (long long)roi[a]);
                return 2;
            }
        } else if (fixed <= 0) {
            cli_err(err, "%s: the model's window size is dynamic %s; give one with --roi", o->model, shp);
            return 2;
        }
    }
    swi_ort_window w;
    swi_ort_window_init(&w, channels);
    w.output = o->head;
    if (o->roi_given) memcpy(w.roi, roi, sizeof w.roi);
    if (swi_ort_prepare(s->model, &w, head, err, SWI_ERRLEN)) return 1;
    if (o->card && o->card->n_classes > 0 && o->card->n_classes != head->channels) {
        cli_err(err, "%s: \"classes\": names %d classes, but %s gives %lld", o->card->source,
                o->card->n_classes, o->model, (long long)head->channels);
        return 1;
    }
    memcpy(roi, w.roi, sizeof w.roi);
    s->members[0] = s->model;
    s->n_members = 1;
    if (open_members(o, s, &oo, &in, &w, head, err)) return 1;
    return seg_dnnl_choose(o, s, roi, head, err);
}

/* The caller's predictors as the network: every window of roi gives classes channels;
 * with tta each is mirrored along the three axes, several are averaged (the ONNX path's
 * order: each member's mirrors, then the mean). Returns 0, or 1 with err. */
static int use_predictors(const pl_opts *o, seg_state *s, const int64_t roi[3], swi_head_spec *head,
                          char *err) {
    if (o->card && o->card->n_classes > 0 && o->card->n_classes != o->classes) {
        cli_err(err, "%s: \"classes\": names %d classes, but classes = %lld", o->card->source,
                o->card->n_classes, (long long)o->classes);
        return 1;
    }
    memset(head, 0, sizeof *head);
    head->channels = o->classes;
    for (int a = 0; a < 3; a++) head->spatial[a] = roi[a];
    const swi_predictor *members = o->preds;
    char msg[SWI_ERRLEN];
    if (o->tta) {
        for (int m = 0; m < o->n_preds; m++) {
            if (swi_predictor_mirror(&o->preds[m], 7, o->classes, 3, roi, o->sw_batch, &s->mirrors[m], msg,
                                     sizeof msg) != SWI_OK) {
                cli_err(err, "%s", msg);
                return 1;
            }
            s->n_mirrors = m + 1;
        }
        /* the mean runs them one after another: one scratch for all */
        if (swi_predictor_mirror_share(s->mirrors, s->n_mirrors, msg, sizeof msg) != SWI_OK) {
            cli_err(err, "%s", msg);
            return 1;
        }
        members = s->mirrors;
    }
    if (o->n_preds > 1) {
        if (swi_predictor_mean(members, o->n_preds, o->classes, 3, roi, o->sw_batch, &s->mean, msg,
                               sizeof msg) != SWI_OK) {
            cli_err(err, "%s", msg);
            return 1;
        }
        s->net = s->mean;
    } else {
        s->net = members[0];
    }
    s->n_members = o->n_preds;
    return 0;
}

int pl_same_grid(const swi_volume *a, const char *a_name, const swi_volume *b, const char *b_name,
                 char *err) {
    const int64_t *x = a->size, *y = b->size;
    if (x[0] != y[0] || x[1] != y[1] || x[2] != y[2]) {
        cli_err(err, "%s: size %lldx%lldx%lld differs from %s's %lldx%lldx%lld; channels must share one grid",
                b_name, (long long)y[0], (long long)y[1], (long long)y[2], a_name, (long long)x[0],
                (long long)x[1], (long long)x[2]);
        return 1;
    }
    for (int c = 0; c < 4; c++) {
        double len = 0, d = 0;
        for (int r = 0; r < 3; r++) {
            len += a->affine[r][c] * a->affine[r][c];
            d = fmax(d, fabs(a->affine[r][c] - b->affine[r][c]));
        }
        const double tol = c == 3 ? PL_GRID_MM : PL_GRID_REL * sqrt(len);
        if (d <= tol) continue; /* NaN differences fall through: refused */
        const double *p = (const double[3]){b->affine[0][c], b->affine[1][c], b->affine[2][c]},
                     *q = (const double[3]){a->affine[0][c], a->affine[1][c], a->affine[2][c]};
        if (c == 3)
            cli_err(
                err,
                "%s: origin (%.6g, %.6g, %.6g) mm lies %.4g mm from %s's (%.6g, %.6g, %.6g); channels must "
                "share one grid",
                b_name, p[0], p[1], p[2], d, a_name, q[0], q[1], q[2]);
        else
            cli_err(err,
                    "%s: voxel axis %c is (%.6g, %.6g, %.6g) mm, %s's is (%.6g, %.6g, %.6g) (axes swapped, "
                    "flipped or of another spacing); channels must share one grid",
                    b_name, "ijk"[c], p[0], p[1], p[2], a_name, q[0], q[1], q[2]);
        return 1;
    }
    return 0;
}

int seg_setup(const pl_opts *o, seg_state *s, swi_params *p, swi_tensor *in, swi_output *outs, int *n_outs,
              char *err) {
    if (cli_is_store(o->inputs[0])) {
        if (seg_store_open_inputs(o, s, err)) return 1;
    } else if (!swi_io_available(SWI_IO_NIFTI)) {
        cli_err(err, "swi was built without NIfTI support (install libnifti2-dev and rebuild)");
        return 1;
    }
    if (!CLI_HAVE_ORT && !o->n_preds) {
        cli_err(err, "swi was built without ONNX Runtime (run scripts/install-deps.sh and "
                     "rebuild)");
        return 1;
    }
    if (s->reader) s->channels = o->n_inputs;           /* a store is one channel */
    const swi_io_cancel cancel = {seg_cancelled_cb, s}; /* a DICOM series' headers take a while */
    for (int c = 0; !s->reader && c < o->n_inputs; c++) {
        if (!s->vols_ready &&
            swi_volume_open_cancellable(o->inputs[c], &s->vols[c], &cancel, err, SWI_ERRLEN))
            return 1;
        s->channels += s->vols[c].frames > 1 ? s->vols[c].frames : 1;
        if (c > 0 && pl_same_grid(&s->vols[0], o->inputs[0], &s->vols[c], o->inputs[c], err)) return 1;
    }
    if (o->card && o->card->n_channels > 0 && o->card->n_channels != s->channels) {
        cli_err(err, "%s: \"channels\": names %d channel%s, but the input has %lld", o->card->source,
                o->card->n_channels, o->card->n_channels == 1 ? "" : "s", (long long)s->channels);
        return 1;
    }
    if (s->reader) {
        if (o->orientation || o->spacing_given) {
            cli_err(err,
                    "%s: --orientation and --spacing take a volume file or DICOM series, not a "
                    "store",
                    o->inputs[0]);
            return 1;
        }
    } else if (seg_grid_setup(o, &s->vols[0], &s->grid, err)) {
        return 1;
    }
    /* the model's grid: the windows run there */
    const int64_t *size = s->reader ? s->store_in.size : s->grid.size;
    int64_t roi[3];
    for (int a = 0; a < 3; a++) roi[a] = o->roi_given && o->roi[a] == 0 ? size[a] : o->roi[a];
    swi_head_spec head;
    memset(&head, 0, sizeof head);
    int rc = o->n_preds ? use_predictors(o, s, roi, &head, err) : open_model(o, s, roi, &head, err);
    if (rc) return rc;

    swi_params_init(p, 3);
    for (int a = 0; a < 3; a++) {
        p->roi[a] = roi[a];
        p->overlap[a] = o->overlap[a];
        p->sigma_scale[a] = o->sigma_scale[a];
    }
    p->mode = o->mode;
    p->padding_mode = o->padding;
    p->cval = o->cval;
    p->sw_batch_size = o->sw_batch;
    p->threads = o->threads;
    p->max_memory = o->max_memory;
    /* The ONNX Runtime predictor is deterministic per window whatever shares its call
     * (test ort_deterministic), tta included: reuse keeps the results bitwise. */
    p->reuse = o->no_reuse || o->n_preds ? SWI_REUSE_OFF : SWI_REUSE_ON;
    p->reuse_cache = o->reuse_cache;
    p->n_heads = 1;
    p->heads[0] = head;

    memset(in, 0, sizeof *in);
    in->data = NULL;
    in->batch = 1;
    in->channels = s->channels;
    in->dims = 3;
    memcpy(in->size, size, sizeof in->size);
    if (s->reader) in->reader = &s->store_in.reader;

    if ((rc = seg_region_setup(o, s, p, err))) return rc;
    if (!o->n_preds && s->n_members > 1 &&
        seg_ensemble_init(&s->ensemble, s->members, s->n_members, &head, o->sw_batch)) {
        cli_err(err, "out of memory for the ensemble's window buffer");
        return 1;
    }
    if (s->grid.active) {
        seg_grid_outputs(&s->grid, PL_WANT_SCORES(o), o->softmax, outs, n_outs);
        return 0;
    }
    swi_output_init(&outs[0], 0, SWI_REDUCE_ARGMAX);
    *n_outs = 1;
    if (PL_WANT_SCORES(o)) {
        /* softmax is streamed by the engine region by region, like the labels */
        swi_output_init(&outs[1], 0, o->softmax ? SWI_REDUCE_SOFTMAX : SWI_REDUCE_NONE);
        *n_outs = 2;
    }
    return 0;
}

typedef struct beside_of {
    const seg_state *s;
    const pl_opts *o;
    const swi_head_spec *head;
} beside_of;

/* The scratch of the caller's predictors' mirrors (a batch of outputs and one of mirrored
 * windows, shared by the mirrors: the mean runs them one after another), for batches of sw
 * windows. */
static size_t mirror_bytes(const seg_state *s, const swi_head_spec *head, int sw) {
    size_t in = (size_t)s->channels;
    for (int a = 0; a < 3; a++) in *= (size_t)head->spatial[a];
    return s->n_mirrors ? seg_ensemble_bytes(2, head, sw) + in * (size_t)sw * sizeof(float) : 0;
}

/* --statistics or --report with preprocessing keeps a volume file's first channel as read. */
static size_t raw_bytes(const pl_opts *o, const seg_state *s) {
    if ((!PL_WANT_STATS(o) && !o->report) || s->reader || !(o->clip_given || o->scale_given || o->zscore))
        return 0;
    const int64_t *isz = s->vols[0].size;
    return (size_t)(isz[0] * isz[1] * isz[2]) * sizeof(float);
}

static size_t beside_bytes(void *user, const swi_plan *plan) {
    const beside_of *b = user;
    return raw_bytes(b->o, b->s) +
           seg_grid_bytes(&b->s->grid, plan->head_channels[0], PL_WANT_SCORES(b->o), plan->order[0]) +
           seg_ensemble_bytes(b->s->n_members, b->head, plan->sw_batch_size) +
           mirror_bytes(b->s, b->head, plan->sw_batch_size) + seg_dnnl_bytes(b->s);
}

/* Bytes held while the inputs are read (seg_read_inputs): the float volume of every
 * channel and one file's own voxels at a time. */
size_t seg_reading_bytes(const pl_opts *o, const seg_state *s) {
    if (s->reader) return 0;
    const int64_t *isz = s->vols[0].size;
    const size_t n = (size_t)(isz[0] * isz[1] * isz[2]);
    size_t most = 0;
    for (int c = 0; c < o->n_inputs; c++) {
        size_t f = (size_t)(s->vols[c].frames > 1 ? s->vols[c].frames : 1),
               b = n * f * (size_t)s->vols[c].bytes_per_voxel;
        if (b > most) most = b;
    }
    return n * (size_t)s->channels * sizeof(float) + most;
}

swi_tensor pl_shape_only(const swi_tensor *in, swi_reader *no_read) {
    swi_tensor t = *in;
    t.data = NULL;
    if (in->data || !in->reader) {
        t.reader = NULL; /* a volume in memory: counted as such */
    } else {
        *no_read = *in->reader;
        no_read->read = NULL;
        t.reader = no_read;
    }
    return t;
}

/* The input a budget's refusal is about (the first; the others share its grid). */
static const char *budget_input(const pl_opts *o) { return o->inputs[0] ? o->inputs[0] : "the input"; }

int seg_fits_available(const pl_opts *o, const seg_state *s, const swi_params *p, const swi_tensor *in,
                       const swi_output *outs, int n_outs, char *err) {
    if (o->max_memory) return 0;
    swi_ctx *ctx = swi_create();
    if (!ctx) return 0; /* the plan that follows says it */
    swi_params q = *p;
    swi_reader no_read;
    swi_tensor shape_only = pl_shape_only(in, &no_read); /* planned on shapes, as segment plans */
    beside_of b = {s, o, &q.heads[0]};
    swi_plan plan;
    size_t beside = 0;
    char msg[SWI_ERRLEN];
    const int any = s->grid.active || s->n_members > 1 || s->n_mirrors > 0 || s->dnnl;
    swi_status st = cli_plan_available(ctx, &q, &shape_only, outs, n_outs, &plan, any ? beside_bytes : NULL,
                                       &b, &beside, seg_reading_bytes(o, s), msg, sizeof msg);
    swi_free(ctx);
    if (st != SWI_ERR_BUDGET) return 0; /* other failures: the plan that follows reports them */
    cli_err(err, "%.200s: %.500s", budget_input(o), msg);
    return 1;
}

int seg_plan(const pl_opts *o, seg_state *s, swi_params *p, const swi_tensor *in, const swi_output *outs,
             int n_outs, swi_plan *plan, size_t *beside, char *unfit, size_t unfit_len) {
    beside_of b = {s, o, &p->heads[0]};
    char err[SWI_ERRLEN];
    const int any = s->grid.active || s->n_members > 1 || s->n_mirrors > 0 || s->dnnl;
    if (unfit_len) unfit[0] = '\0';
    const size_t reading = seg_reading_bytes(o, s);
    swi_status st = cli_plan_available(s->ctx, p, in, outs, n_outs, plan, any ? beside_bytes : NULL, &b,
                                       beside, reading, err, sizeof err);
    if (st == SWI_OK && o->max_memory && reading > o->max_memory) {
        char a[32], c[32];
        snprintf(s->err, sizeof s->err,
                 "--max-memory is too small: reading %s holds %s (its voxels as floats and one file's "
                 "own) before the engine runs, more than %s",
                 o->inputs[0], cli_bytes(reading, a), cli_bytes(o->max_memory, c));
        return seg_fail_status(s, SWI_ERR_BUDGET, s->err);
    }
    if (st == SWI_OK) return 0;
    if (st == SWI_ERR_BUDGET && !o->max_memory) { /* more than the machine has: no budget was given */
        if (unfit) {
            snprintf(unfit, unfit_len, "%.200s: %.500s", budget_input(o), err);
            return 0;
        }
        snprintf(s->err, sizeof s->err, "%.200s: %.500s", budget_input(o), err);
        return seg_fail_status(s, SWI_ERR_BUDGET, s->err);
    }
    if (st == SWI_ERR_BUDGET && err[0]) {
        snprintf(s->err, sizeof s->err, "%.200s: --max-memory is too small: %.500s", budget_input(o), err);
        return seg_fail_status(s, SWI_ERR_BUDGET, s->err);
    }
    return seg_engine_error(o, s, st, s->ctx);
}

int seg_engine_error(const pl_opts *o, seg_state *s, swi_status st, const swi_ctx *ctx) {
    const char *msg = swi_last_error(ctx);
    char *e = s->err;
    const size_t n = sizeof s->err;
    switch (st) {
    case SWI_ERR_BUDGET:
        snprintf(e, n, "%.200s: --max-memory is too small: %.500s", budget_input(o), msg);
        break;
    case SWI_ERR_SHAPE:
        snprintf(e, n, "%s: the model's output cannot be placed: %s", PL_MODEL_NAME(o), msg);
        break;
    case SWI_ERR_NOMEM: snprintf(e, n, "out of memory: %s", msg); break;
    case SWI_ERR_PREDICTOR: snprintf(e, n, "%s", msg); break;
    default: snprintf(e, n, "%s (%s)", msg, swi_status_name(st)); break;
    }
    s->status = st;
    return 1;
}
