/*
 * segment.c -- a job's run, from checked options to committed files.
 *
 * Every input header and the model are validated before any voxel is read (bad input
 * fails within seconds, segment_setup.c), the engine plans (a budget that cannot be met
 * fails before the network runs), the temporary outputs are created (an unwritable
 * directory fails early), the channels are read and preprocessed, the engine runs with
 * the ONNX Runtime predictor, streaming the blended scores into an argmax label map (and
 * the full scores only when --scores asks), then everything is written and committed
 * together.
 */
#include "segment.h"

#include "alloc.h"
#include "card.h"
#include "preprocess.h"
#include "report.h"
#include "samefile.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int seg_side_names(const pl_target *t, char *itk, char *ctbl, size_t n) {
    const char *output = t->name;
    size_t len = strlen(output), cut = pl_target_suffix_len(t);
    const int stem = (int)(len - cut);
    if (len >= n || (size_t)snprintf(itk, n, "%.*s.label.txt", stem, output) >= n ||
        (size_t)snprintf(ctbl, n, "%.*s.ctbl", stem, output) >= n) {
        itk[0] = ctbl[0] = '\0';
        return -1;
    }
    return 0;
}

/* A failed step: cancelled if that is why, else the error. */
static int step_failed(seg_state *s, const char *err) {
    if (seg_cancelled(s)) return seg_fail_status(s, SWI_ERR_CANCELLED, "cancelled; no output written");
    return seg_fail(s, err);
}

static int cancelled(seg_state *s) {
    return seg_fail_status(s, SWI_ERR_CANCELLED, "cancelled; no output written");
}

static int same_grid(const pl_opts *o, seg_state *s, const int64_t osz[3], const int64_t size[3]) {
    if (osz[0] == size[0] && osz[1] == size[1] && osz[2] == size[2]) return 0;
    char err[SWI_ERRLEN];
    cli_err(err,
            "%s: the model's output grid %lldx%lldx%lld differs from the volume's "
            "%lldx%lldx%lld (a zoomed output); swi segment writes labels on the input grid",
            PL_MODEL_NAME(o), (long long)osz[0], (long long)osz[1], (long long)osz[2], (long long)size[0],
            (long long)size[1], (long long)size[2]);
    return seg_fail_status(s, SWI_ERR_SHAPE, err);
}

/* NaN/Inf voxels of one input (read as 0): a warning, or with nonfinite_fail the error.
 * Returns 1 when the run must stop. */
static int nonfinite_report(const pl_opts *o, seg_state *s, const char *path, int64_t bad, int64_t voxels) {
    char err[SWI_ERRLEN];
    double pct = 100.0 * (double)bad / (double)voxels;
    if (o->nonfinite_fail) {
        cli_err(err,
                "%s: %lld of %lld voxels are NaN or infinite (%.3g%%); refused "
                "(--nonfinite fail)",
                path, (long long)bad, (long long)voxels, pct);
        return seg_fail(s, err);
    }
    cli_err(err,
            "warning: %s: %lld of %lld voxels are NaN or infinite (%.3g%%); read as 0 "
            "(--nonfinite fail refuses such inputs)",
            path, (long long)bad, (long long)voxels, pct);
    seg_message(s, "%s", err);
    return 0;
}

int seg_read_inputs(const pl_opts *o, seg_state *s, const swi_tensor *in) {
    char err[SWI_ERRLEN];
    const int64_t *isz = s->vols[0].size; /* the input's grid (in->size is the model's) */
    const int64_t N = isz[0] * isz[1] * isz[2];
    s->input = cli_malloc((size_t)(N * in->channels) * sizeof(float));
    if (!s->input) {
        char b[32];
        cli_err(err, "%s: out of memory reading the volume (%s)", o->inputs[0],
                cli_bytes((size_t)(N * in->channels) * sizeof(float), b));
        return seg_fail_status(s, SWI_ERR_NOMEM, err);
    }
    const swi_io_cancel cancel = {seg_cancelled_cb, s};
    float *dst = s->input;
    for (int c = 0; c < o->n_inputs; c++) {
        /* every frame of a 4-D file is a channel, each preprocessed on its own */
        int64_t bad = 0, frames = s->vols[c].frames > 1 ? s->vols[c].frames : 1;
        if (swi_volume_read_frames(&s->vols[c], dst, &cancel, &bad, err, SWI_ERRLEN))
            return step_failed(s, err);
        if (seg_cancelled(s)) return cancelled(s);
        if (bad && nonfinite_report(o, s, o->inputs[c], bad, N * frames)) return 1;
        if (c == 0 && (o->report || PL_WANT_STATS(o)) && (o->clip_given || o->scale_given || o->zscore)) {
            /* the page shows the scan in its own units (CT windows in HU) and the statistics
             * report the intensities as read, not as the network saw them: one copy for both */
            free(s->raw);
            s->raw = cli_malloc((size_t)N * sizeof(float));
            if (!s->raw) {
                char b[32];
                cli_err(err, "%s: out of memory keeping the image as read (%s)", o->inputs[0],
                        cli_bytes((size_t)N * sizeof(float), b));
                return seg_fail_status(s, SWI_ERR_NOMEM, err);
            }
            memcpy(s->raw, dst, (size_t)N * sizeof(float));
        }
        for (int64_t f = 0; f < frames; f++, dst += N) seg_preprocess(o, dst, N);
    }
    return 0;
}

/* The results as the engine left them. */
typedef struct seg_results {
    int64_t classes;
    const void *labels;
    size_t label_size;   /* bytes */
    int label_bytes;     /* per voxel */
    const float *scores; /* or NULL */
} seg_results;

static int take_results(const pl_opts *o, seg_state *s, int64_t N, seg_results *r) {
    memset(r, 0, sizeof *r);
    if (s->grid.active) {
        /* brought back to the input grid by the grid's callbacks (realscan.c) */
        r->classes = s->grid.classes;
        r->labels = s->grid.labels;
        r->label_bytes = s->grid.label_bytes;
        r->label_size = (size_t)N * (size_t)r->label_bytes;
        r->scores = s->grid.scores;
        return 0;
    }
    r->classes = swi_result_channels(s->ctx, 0);
    r->labels = swi_result(s->ctx, 0, &r->label_size);
    r->label_bytes = N > 0 ? (int)(r->label_size / (size_t)N) : 0;
    if (!r->labels || (r->label_bytes != 1 && r->label_bytes != 2) ||
        r->label_size != (size_t)N * r->label_bytes)
        return seg_fail(s, "internal error: unexpected label map from the engine");
    if (PL_WANT_SCORES(o)) {
        /* library-owned, ours to read until swi_free */
        size_t sbytes = 0;
        r->scores = swi_result(s->ctx, 1, &sbytes);
        if (!r->scores || sbytes != (size_t)(r->classes * N) * sizeof(float))
            return seg_fail(s, "internal error: unexpected scores from the engine");
    }
    return 0;
}

/* The statistics' JSON into their temporary file. 0, or 1 with err. */
static int write_statistics(const pl_opts *o, seg_state *s, char *err) {
    char *json = pl_stats_json(s->class_stats, o->inputs[0], o->output);
    int fd = cli_out_take_fd(&s->out_stats);
    if (!json) {
        if (fd >= 0) close(fd);
        cli_err(err, "%s: out of memory for the statistics", o->statistics);
        return 1;
    }
    int rc = pl_write_text(fd, o->statistics, json, err);
    free(json);
    return rc;
}

/* Write every output into its temporary file, then commit them all or none. */
static int write_outputs(const pl_opts *o, seg_state *s, const seg_results *r, double t0) {
    char err[SWI_ERRLEN];
    const swi_io_cancel cancel = {seg_cancelled_cb, s};
    /* the card's class names, where it names every class (a DICOM SEG labels its segments) */
    const char *const *class_names =
        o->card && o->card->n_classes == r->classes ? (const char *const *)o->card->classes : NULL;
    if (o->output && swi_volume_write_labels_as_fd(cli_out_take_fd(&s->out_labels), o->t_output.format,
                                                   o->t_output.name, &s->vols[0], r->labels,
                                                   r->label_bytes == 1 ? SWI_DTYPE_UINT8 : SWI_DTYPE_UINT16,
                                                   r->classes, class_names, &cancel, err, SWI_ERRLEN))
        return step_failed(s, err);
    if (o->scores && swi_volume_write_as_fd(cli_out_take_fd(&s->out_scores), o->t_scores.format,
                                            o->t_scores.name, &s->vols[0], r->scores, SWI_DTYPE_FLOAT32,
                                            SWI_IO_SCORES, r->classes, r->classes, &cancel, err, SWI_ERRLEN))
        return step_failed(s, err);
    if (o->preview &&
        swi_io_preview_write_fd(cli_out_take_fd(&s->out_preview), o->preview,
                                s->reader ? s->store_in.size : s->vols[0].size, s->reader ? NULL : s->input,
                                r->labels, r->label_bytes, err, SWI_ERRLEN))
        return seg_fail(s, err);
    if (o->report && seg_report_write(o, s, cli_out_take_fd(&s->out_report), o->report,
                                      o->report_title ? o->report_title : o->inputs[0], r->labels,
                                      r->label_bytes, r->classes, cli_now() - t0, err))
        return step_failed(s, err);
    if (o->statistics && write_statistics(o, s, err)) return step_failed(s, err);
    if (o->masks && pl_masks_write(&s->masks, &s->vols[0], r->labels, r->label_bytes, r->classes, class_names,
                                   &cancel, err))
        return step_failed(s, err);
    const int names = s->itk_path[0] != '\0';
    if (names && (card_write_labels(o->card, cli_out_take_fd(&s->out_itk), 1, s->itk_path, err) ||
                  card_write_labels(o->card, cli_out_take_fd(&s->out_ctbl), 0, s->ctbl_path, err)))
        return step_failed(s, err);
    cli_out *all[7] = {o->output ? &s->out_labels : NULL,   o->scores ? &s->out_scores : NULL,
                       o->preview ? &s->out_preview : NULL, names ? &s->out_itk : NULL,
                       names ? &s->out_ctbl : NULL,         o->report ? &s->out_report : NULL,
                       o->statistics ? &s->out_stats : NULL};
    if (cli_out_commit_all_cancellable(all, 7, o->force, seg_cancelled_cb, s, err))
        return step_failed(s, err);
    /* the folder of masks right after the files, whole */
    if (o->masks && pl_masks_commit(&s->masks, o->force, err)) return seg_fail(s, err);
    return 0;
}

int seg_check_outputs(const pl_opts *o, seg_state *s) {
    char err[SWI_ERRLEN];
    if (o->preview && !swi_io_available(SWI_IO_PNG)) {
        cli_err(err, "%s: swi was built without PNG support (install libpng-dev and rebuild)", o->preview);
        return seg_fail(s, err);
    }
    /* A page that cannot be written (no NiiVue) is refused before anything runs. */
    if (o->report && seg_report_check(o->report, err)) return seg_fail(s, err);
    /* The card's class names go beside a label map file: OUT.label.txt and OUT.ctbl. */
    if (o->output && !PL_TARGET_STORE(&o->t_output) && o->card && o->card->n_classes > 0 &&
        seg_side_names(&o->t_output, s->itk_path, s->ctbl_path, sizeof s->itk_path))
        return seg_fail_status(s, SWI_ERR_INVALID_ARG, "output path too long");
    /* An output that is, holds or lies in an input under any name is refused first,
     * force or not: every model of the ensemble and the card are inputs too. */
    cli_named_path ins[SEG_MAX_MODELS + SEG_MAX_INPUTS + 1];
    int n_ins = 0;
    for (int m = 0; m < o->n_models; m++) {
        int from_card = 0;
        for (int k = 0; o->card && k < o->card->n_members; k++)
            from_card |= o->models[m] == o->card->members[k];
        ins[n_ins++] = (cli_named_path){from_card ? "the card's ensemble member" : "--model", o->models[m]};
    }
    if (o->n_models == 0 && o->model) ins[n_ins++] = (cli_named_path){"--model", o->model};
    if (o->card && o->card->in_file) ins[n_ins++] = (cli_named_path){"the model card", o->card->source};
    for (int c = 0; c < o->n_inputs; c++) ins[n_ins++] = (cli_named_path){"--input", o->inputs[c]};
    const cli_named_path outp[8] = {{"--output", o->output},
                                    {"--scores", o->scores},
                                    {"--preview", o->preview},
                                    {"--report", o->report},
                                    {"the label names", s->itk_path[0] ? s->itk_path : NULL},
                                    {"the color table", s->ctbl_path[0] ? s->ctbl_path : NULL},
                                    {"--statistics", o->statistics},
                                    {"--masks", o->masks}};
    if (cli_check_outputs_apart(ins, n_ins, outp, 8, err)) return seg_fail(s, err);
    if (o->masks && pl_masks_check(o->masks, o->force, err)) return seg_fail(s, err);
    /* Existing outputs are refused before anything else happens. */
    const char *finals[6] = {o->output,
                             o->scores,
                             o->preview,
                             s->itk_path[0] ? s->itk_path : NULL,
                             s->ctbl_path[0] ? s->ctbl_path : NULL,
                             o->report};
    const int store[6] = {PL_TARGET_STORE(&o->t_output), PL_TARGET_STORE(&o->t_scores),
                          cli_is_store(finals[2]),       cli_is_store(finals[3]),
                          cli_is_store(finals[4]),       cli_is_store(finals[5])};
    for (int i = 0; i < 6; i++) {
        /* the side files an earlier run wrote are replaced with the new output's */
        const int force = o->force || ((i == 3 || i == 4) && card_side_is_own(finals[i]));
        if (finals[i] && !store[i] && cli_out_check(finals[i], force, err)) return seg_fail(s, err);
    }
    if (o->statistics && cli_out_check(o->statistics, o->force, err)) return seg_fail(s, err);
    return 0;
}

/* A side file's temporary: an existing one that swi wrote (for an earlier output of this
 * name, another format's perhaps) is replaced with the output, force or not. */
static int side_begin(const pl_opts *o, cli_out *out, const char *path, char *err) {
    if (cli_out_begin(out, path, o->force || card_side_is_own(path), err)) return 1;
    out->replaceable = card_side_is_own;
    return 0;
}

/* The statistics' collector for `classes` labels on the input grid, its intensities the first
 * channel as read: the copy made before preprocessing, the voxels read, or for a store input
 * the store opened again (the engine reads its own handle from another thread). 0, or 1. */
static int stats_begin(const pl_opts *o, seg_state *s, int64_t classes, char *err) {
    swi_volume v;
    const swi_volume *g = &s->vols[0];
    char msg[SWI_ERRLEN];
    if (s->reader) {
        if (swi_store_volume(s->store_in.stores[0], &v, msg, sizeof msg) ||
            swi_store_open(o->inputs[0], &s->stats_store, msg, sizeof msg)) {
            cli_err(err, "%s", msg);
            return 1;
        }
        g = &v;
    }
    const char *const *names =
        o->card && o->card->n_classes == classes ? (const char *const *)o->card->classes : NULL;
    pl_stats_free(s->class_stats);
    s->class_stats = pl_stats_new(classes, names, g->affine, g->size);
    if (!s->class_stats) {
        cli_err(err, "out of memory for the statistics of %lld classes", (long long)classes);
        return 1;
    }
    if (s->reader)
        pl_stats_intensity_store(s->class_stats, s->stats_store);
    else
        pl_stats_intensity_array(s->class_stats, s->raw ? s->raw : s->input);
    return 0;
}

/* The engine's progress: the caller's hook, and a stop once the job is cancelled. */
static int run_progress(void *user, int64_t done, int64_t total) {
    const seg_state *s = user;
    if (seg_cancelled(s)) return 1;
    return s->hooks && s->hooks->progress ? s->hooks->progress(s->hooks->user, done, total) : 0;
}

int seg_run_state(const pl_opts *o, seg_state *s, swi_params *pp, swi_tensor *inp, swi_output *outs,
                  int n_outs, pl_result *keep) {
    char err[SWI_ERRLEN];
    double t0 = s->t0 > 0 ? s->t0 : cli_now();
    swi_params p = *pp;
    swi_tensor in = *inp;
    int rc;
    const int stores_out = pl_store_outputs(o);
    if (stores_out) {
        int nothing = 0;
        rc = seg_store_begin(o, s, &p, &in, outs, n_outs, &nothing, err);
        if (rc) return rc == 2 ? (seg_fail_status(s, SWI_ERR_INVALID_ARG, err), 2) : seg_fail(s, err);
        if (nothing) {
            if (!o->quiet)
                seg_message(s, "%s",
                            o->shard_init ? "stores created for the shards" : "this shard has no voxels");
            return 0;
        }
    }
    /* Plan before anything big happens: a budget that cannot be met, or an output grid
     * other than the volume's, fails now rather than after the network ran. */
    swi_free(s->ctx);
    s->ctx = swi_create();
    if (!s->ctx) return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory");
    swi_plan plan;
    /* the statistics' own argmax of every region, on the input grid (a grid of its own
     * reports its input-grid labels instead: realscan.c) */
    const int stats_out = PL_WANT_STATS(o) && !s->grid.active;
    if (stats_out) {
        swi_output_init(&outs[n_outs], 0, SWI_REDUCE_ARGMAX);
        outs[n_outs].on_region = pl_stats_region;
        n_outs++;
    }
    /* Shapes only: with reuse on, a reader (a store input) would be read whole here just
     * to count the windows reused, which the run counts anyway. */
    swi_reader no_read;
    swi_tensor shape_only = pl_shape_only(&in, &no_read);
    size_t beside = 0;
    if (seg_plan(o, s, &p, &shape_only, outs, n_outs, &plan, &beside, NULL, 0)) return 1;
    int64_t osz[SWI_MAX_DIMS] = {0};
    if (swi_result_size(s->ctx, 0, osz) == 3 && same_grid(o, s, osz, in.size)) return 1;

    if (!stores_out && ((o->output && cli_out_begin(&s->out_labels, o->output, o->force, err)) ||
                        (o->scores && cli_out_begin(&s->out_scores, o->scores, o->force, err)) ||
                        (o->preview && cli_out_begin(&s->out_preview, o->preview, o->force, err)) ||
                        (o->report && cli_out_begin(&s->out_report, o->report, o->force, err)) ||
                        (s->itk_path[0] && side_begin(o, &s->out_itk, s->itk_path, err)) ||
                        (s->ctbl_path[0] && side_begin(o, &s->out_ctbl, s->ctbl_path, err))))
        return seg_fail(s, err);
    if (o->statistics && cli_out_begin(&s->out_stats, o->statistics, o->force, err)) return seg_fail(s, err);
    if (o->masks && !stores_out && pl_masks_begin(&s->masks, o->masks, o->force, err))
        return seg_fail(s, err);

    if (!s->reader) {
        if (!s->input && (rc = seg_read_inputs(o, s, &in))) return rc;
        in.data = s->input;
        if (s->grid.active) {
            if (seg_grid_begin(&s->grid, s->input, in.channels, plan.head_channels[0], PL_WANT_SCORES(o),
                               err))
                return seg_fail_status(s, SWI_ERR_NOMEM, err);
            /* the model grid: read through the orientation, or the resampled copy */
            in.data = s->grid.resampled ? s->grid.model_input : NULL;
            in.reader = s->grid.resampled ? NULL : &s->grid.reader;
        }
    }

    if (PL_WANT_STATS(o) && stats_begin(o, s, plan.head_channels[0], err)) return seg_fail(s, err);
    if (stats_out) outs[n_outs - 1].user = s->class_stats;
    s->grid.stats = s->class_stats;
    p.progress = run_progress;
    p.progress_user = s;
    swi_predictor net = o->n_preds         ? s->net
                        : s->n_members > 1 ? seg_ensemble_predictor(&s->ensemble)
                                           : seg_model_predictor(s);
    if (seg_cancelled(s)) return cancelled(s);
    double t1 = cli_now();
    swi_status st = swi_run(s->ctx, &p, &in, &net, outs, n_outs);
    s->t_run = cli_now() - t1;
    if (swi_run_stats(s->ctx, &s->stats) != SWI_OK) memset(&s->stats, 0, sizeof s->stats);
    if (seg_cancelled(s)) return cancelled(s);
    if (st != SWI_OK) {
        const char *why = seg_store_error(s);
        if (!why) why = pl_stats_error(s->class_stats);
        if (why) {
            snprintf(s->err, sizeof s->err, "%s; %s", why, seg_store_left(s));
            return seg_fail(s, s->err);
        }
        return seg_engine_error(o, s, st, s->ctx);
    }
    if (stores_out) {
        if (o->statistics && write_statistics(o, s, err)) return step_failed(s, err);
        if (seg_store_commit(s, err)) return seg_fail(s, err);
        if (o->statistics && cli_out_commit(&s->out_stats, o->force, err)) return seg_fail(s, err);
        if (keep && o->keep_statistics &&
            !(keep->statistics = pl_stats_json(s->class_stats, o->inputs[0], o->output)))
            return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory for the statistics");
        char box[128];
        if (!o->quiet)
            seg_message(s,
                        "%lldx%lldx%lld voxels, box %s: %lld windows of the whole run's %lld in "
                        "%.2f s, peak RSS %s -> %s",
                        (long long)in.size[0], (long long)in.size[1], (long long)in.size[2],
                        cli_shard_box_str(s->box_lo, s->box_hi, box, sizeof box),
                        (long long)plan.windows_total, (long long)cli_whole_windows(&p, &in, outs, n_outs),
                        cli_now() - t0, cli_bytes(cli_peak_rss(), err), o->output);
        return 0;
    }

    /* The label grid must be the input grid (zoomed heads are not written). */
    swi_result_size(s->ctx, 0, osz);
    if (same_grid(o, s, osz, in.size)) return 1;
    if (seg_grid_finish(&s->grid, err)) return seg_fail_status(s, SWI_ERR_SHAPE, err);
    seg_results r;
    const int64_t *isz = s->vols[0].size; /* outputs are on the input's own grid */
    const int64_t N = isz[0] * isz[1] * isz[2];
    if ((rc = take_results(o, s, N, &r))) return rc;
    if (s->region && (s->grid.active || o->keep_outside)) {
        /* the voxels outside the region: the engine's own results are zero there; a
         * resampled run's tiles straddling the region's edge wrote some */
        if (!s->grid.active) {
            s->region_labels = cli_malloc(r.label_size);
            if (!s->region_labels) return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory for the labels");
            memcpy(s->region_labels, r.labels, r.label_size);
            r.labels = s->region_labels;
        }
        if ((rc = seg_region_outside(o, s, (void *)r.labels, r.label_bytes,
                                     s->grid.active ? (float *)r.scores : NULL, r.classes)))
            return rc;
    }
    if ((rc = write_outputs(o, s, &r, t0))) return rc;
    if (keep) {
        keep->labels = cli_malloc(r.label_size);
        if (!keep->labels) return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory for the labels kept");
        memcpy(keep->labels, r.labels, r.label_size);
        keep->label_bytes = r.label_bytes;
        memcpy(keep->size, isz, sizeof keep->size);
        keep->classes = r.classes;
        if (o->keep_scores && r.scores) {
            const size_t bytes = (size_t)r.classes * (size_t)N * sizeof(float);
            keep->scores = cli_malloc(bytes);
            if (!keep->scores) {
                free(keep->labels);
                keep->labels = NULL;
                return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory for the scores kept");
            }
            memcpy(keep->scores, r.scores, bytes);
        }
        if (o->keep_statistics &&
            !(keep->statistics = pl_stats_json(s->class_stats, o->inputs[0], o->output))) {
            free(keep->labels);
            free(keep->scores);
            keep->labels = NULL;
            keep->scores = NULL;
            return seg_fail_status(s, SWI_ERR_NOMEM, "out of memory for the statistics kept");
        }
    }
    if (!o->quiet && s->region) {
        char box[128];
        seg_message(s, "region %s of the input, model grid box %s: windows run %lld of %lld",
                    cli_shard_box_str(s->region_lo, s->region_hi, box, sizeof box),
                    cli_shard_box_str(s->model_lo, s->model_hi, box + 64, 64),
                    (long long)s->stats.windows_total, (long long)cli_whole_windows(&p, &in, outs, n_outs));
    }
    if (!o->quiet) {
        int64_t windows = s->stats.windows_total, calls = s->stats.predictor_calls;
        char rss[32];
        seg_message(s,
                    "%lldx%lldx%lld voxels, %lld classes, %lld windows in %lld calls "
                    "(%lld run, %lld reused): %.2f s (network+blending %.2f s, %.1f windows/s), "
                    "peak RSS %s -> %s",
                    (long long)in.size[0], (long long)in.size[1], (long long)in.size[2], (long long)r.classes,
                    (long long)windows,
                    (long long)(s->model ? calls * swi_ort_calls_per_batch(s->model, plan.sw_batch_size)
                                         : calls * (o->tta ? 8 : 1)),
                    (long long)s->stats.windows_predicted, (long long)s->stats.windows_reused, cli_now() - t0,
                    s->t_run, s->t_run > 0 ? (double)windows / s->t_run : 0.0, cli_bytes(cli_peak_rss(), rss),
                    o->output ? o->output : "-");
    }
    return 0;
}
