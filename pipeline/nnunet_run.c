/*
 * nnunet_run.c -- an nnU-Net job's run (nnunet_job.h): the engine over the model grid, the
 * logits streamed back to the crop box of the input grid and reduced there (step 9 of
 * docs/semantics-nnunet.md), the outputs written and committed together.
 */
#include "nnunet_job.h"

#include "budget.h"
#include "nnunet_npz.h"
#include "samefile.h"
#include "segment.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nn_model_region(void *user, const swi_region *r) {
    nn_job *j = user;
    if (j->cancel) return 1;
    return swi_resample_sink_feed(j->sink, r->lo, r->hi, r->data);
}

/* The reader-order index (nnU-Net's probabilities array) of input voxel p. */
static int64_t reader_index(const nn_job *j, const int64_t p[3]) {
    int64_t y[3];
    swi_resample_orient_point(&j->orient, p, y);
    return (y[2] * j->reader_size[1] + y[1]) * j->reader_size[2] + y[0];
}

/* torch.sigmoid in float32 on the CPU: 1 / (1 + exp(-x)), every step rounded to float. At
 * 0 < x < about 9e-8 it is exactly 0.5, which the threshold 0.5 does not exceed. torch's
 * vectorised loop takes exp from Sleef (within one ulp), its scalar tail from the C library as
 * here, so a value within an ulp of the threshold may fall either way in nnU-Net itself. */
static float sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }

int64_t nn_voxel_label(const nn_card *c, const float *x, int64_t stride, float *probs, int64_t pstride) {
    const int64_t K = c->heads;
    int64_t label = 0;
    if (c->has_regions) {
        for (int64_t r = 0; r < K; r++) {
            const float s = sigmoid_f32(x[r * stride]);
            if (s > c->threshold) label = c->regions_class_order[r];
            if (probs) probs[r * pstride] = s;
        }
        return label;
    }
    if (!probs) { /* nnU-Net skips the softmax then: the argmax of the logits */
        float best = x[0];
        for (int64_t r = 1; r < K; r++)
            if (x[r * stride] > best) {
                best = x[r * stride];
                label = r;
            }
        return label;
    }
    /* torch.softmax over the channels in float32 (SoftMaxKernel's _vec_softmax): the max,
     * exp(x - max) summed in channel order, each divided by the sum. Classes whose logits
     * differ by less than an ulp of exp tie here, and numpy's argmax takes the first. */
    float mx = x[0];
    for (int64_t r = 1; r < K; r++) mx = mx < x[r * stride] ? x[r * stride] : mx;
    float sum = 0.0f;
    for (int64_t r = 0; r < K; r++) sum += probs[r * pstride] = expf(x[r * stride] - mx);
    float best = 0.0f;
    for (int64_t r = 0; r < K; r++) {
        const float p = probs[r * pstride] /= sum;
        if (r == 0 || p > best) {
            best = p;
            label = r;
        }
    }
    return label;
}

/* One tile of logits [K, box] on the input grid: the labels, and the probabilities. */
static int emit_tile(void *user, const int64_t lo[3], const int64_t hi[3], int64_t K, const float *x) {
    nn_job *j = user;
    const int64_t *n = j->in_size, *b = j->box_lo;
    const int64_t nv = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    const int64_t NR = j->reader_size[0] * j->reader_size[1] * j->reader_size[2];
    (void)K; /* the sink's K is the card's heads, which nn_voxel_label reads */
    int64_t v = 0;
    for (int64_t i = lo[0]; i < hi[0]; i++)
        for (int64_t jj = lo[1]; jj < hi[1]; jj++)
            for (int64_t k = lo[2]; k < hi[2]; k++, v++) {
                const int64_t p[3] = {i + b[0], jj + b[1], k + b[2]};
                const int64_t at = (p[0] * n[1] + p[1]) * n[2] + p[2];
                float *probs = j->probs ? j->probs + reader_index(j, p) : NULL;
                const int64_t label = nn_voxel_label(&j->card, x + v, nv, probs, NR);
                if (j->label_bytes == 1)
                    ((uint8_t *)j->labels)[at] = (uint8_t)label;
                else
                    ((uint16_t *)j->labels)[at] = (uint16_t)label;
            }
    if (j->class_stats) {
        static const int64_t origin[3] = {0, 0, 0};
        const int64_t tlo[3] = {lo[0] + b[0], lo[1] + b[1], lo[2] + b[2]};
        const int64_t thi[3] = {hi[0] + b[0], hi[1] + b[1], hi[2] + b[2]};
        char msg[256];
        if (pl_stats_add(j->class_stats, tlo, thi, j->labels, j->label_bytes, origin, n, msg, sizeof msg))
            return 1;
    }
    return 0;
}

/* The statistics of the background outside the crop box (never tiled): the slabs around it. */
static int stats_outside(nn_job *j, char *err) {
    static const int64_t origin[3] = {0, 0, 0};
    const int64_t *n = j->in_size;
    int64_t lo[3] = {0, 0, 0}, hi[3] = {n[0], n[1], n[2]};
    for (int d = 0; d < 3; d++) {
        /* below and above the box along d, within the box along the axes before d */
        int64_t a[3], z[3];
        memcpy(a, lo, sizeof a);
        memcpy(z, hi, sizeof z);
        z[d] = j->box_lo[d];
        if (pl_stats_add(j->class_stats, a, z, j->labels, j->label_bytes, origin, n, err, SWI_ERRLEN))
            return 1;
        a[d] = j->box_hi[d];
        z[d] = n[d];
        if (pl_stats_add(j->class_stats, a, z, j->labels, j->label_bytes, origin, n, err, SWI_ERRLEN))
            return 1;
        lo[d] = j->box_lo[d];
        hi[d] = j->box_hi[d];
    }
    return 0;
}

static int progress(void *user, int64_t done, int64_t total) {
    const swi_job_hooks *h = user;
    return h && h->progress ? h->progress(h->user, done, total) : 0;
}

/* nnU-Net's properties (its CASE.pkl) as JSON: the geometry and the steps' bookkeeping. */
static int write_props(const nn_job *j, int fd, char *err) {
    FILE *f = fdopen(fd, "w");
    if (!f) {
        cli_err(err, "%s: cannot write: out of memory", j->props_path);
        return 1;
    }
    const nn_card *c = &j->card;
    /* nnU-Net's arrays are in reader order (k, j, i) of the (reoriented) grid */
    int64_t rbox_lo[3], rbox_hi[3];
    for (int d = 0; d < 3; d++) {
        /* transposed axis d is reader axis t_fwd[d] */
        rbox_lo[c->t_fwd[d]] = j->clo[d];
        rbox_hi[c->t_fwd[d]] = j->clo[d] + j->cs[d];
    }
    double rsp[3];
    for (int r = 0; r < 3; r++) rsp[r] = j->vols[0].spacing[j->orient.src_axis[2 - r]];
    fprintf(f, "{\n \"spacing\": [%.17g, %.17g, %.17g],\n", rsp[0], rsp[1], rsp[2]);
    fprintf(f, " \"shape_before_cropping\": [%lld, %lld, %lld],\n", (long long)j->reader_size[0],
            (long long)j->reader_size[1], (long long)j->reader_size[2]);
    fprintf(f, " \"bbox_used_for_cropping\": [[%lld, %lld], [%lld, %lld], [%lld, %lld]],\n",
            (long long)rbox_lo[0], (long long)rbox_hi[0], (long long)rbox_lo[1], (long long)rbox_hi[1],
            (long long)rbox_lo[2], (long long)rbox_hi[2]);
    int64_t cs_r[3];
    for (int d = 0; d < 3; d++) cs_r[c->t_fwd[d]] = j->cs[d];
    fprintf(f, " \"shape_after_cropping_and_before_resampling\": [%lld, %lld, %lld],\n", (long long)cs_r[0],
            (long long)cs_r[1], (long long)cs_r[2]);
    fprintf(f, " \"affine\": [");
    for (int r = 0; r < 4; r++)
        fprintf(f, "%s[%.17g, %.17g, %.17g, %.17g]", r ? ", " : "", j->vols[0].affine[r][0],
                j->vols[0].affine[r][1], j->vols[0].affine[r][2], j->vols[0].affine[r][3]);
    fprintf(f, "],\n \"reader\": \"%s\",\n \"probabilities\": \"[K, *shape_before_cropping] float32\"\n}\n",
            c->reorient ? "NibabelIOWithReorient" : "SimpleITKIO");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        cli_err(err, "%s: write failed", j->props_path);
        return 1;
    }
    return 0;
}

static swi_status run(nn_job *j, const swi_job_hooks *hooks, swi_job_result *keep, char *err);

swi_status nn_job_run(nn_job *j, const swi_job_hooks *hooks, swi_job_result *keep, char *err) {
    swi_status st = run(j, hooks, keep, err);
    if (st != SWI_OK && (j->cancel || (hooks && hooks->cancelled && hooks->cancelled(hooks->user)))) {
        st = SWI_ERR_CANCELLED;
        cli_err(err, "cancelled; no output written");
    }
    if (st != SWI_OK) { /* nothing is left behind: now, not when the job is freed */
        cli_out_abort(&j->out_labels);
        cli_out_abort(&j->out_probs);
        cli_out_abort(&j->out_props);
        cli_out_abort(&j->out_stats);
        pl_masks_abort(&j->mask_dir);
    }
    return st;
}

static swi_status run(nn_job *j, const swi_job_hooks *hooks, swi_job_result *keep, char *err) {
    const double t0 = cli_now();
    const nn_card *c = &j->card;
    if (j->save_probabilities && !j->output) {
        cli_err(err, "--save-probabilities needs --output: CASE.npz is written beside the labels");
        return SWI_ERR_INVALID_ARG;
    }
    if (j->save_probabilities && !nn_npz_available()) {
        cli_err(
            err,
            "--save-probabilities: swi was built without libzip (apt-get install libzip-dev and rebuild)");
        return SWI_ERR_INVALID_ARG;
    }
    if (j->output && !swi_io_available(SWI_IO_NIFTI)) {
        cli_err(err, "swi was built without NIfTI support (install libnifti2-dev and rebuild)");
        return SWI_ERR_IO;
    }
    const char *finals[3] = {j->output, j->save_probabilities ? j->probs_path : NULL,
                             j->save_probabilities ? j->props_path : NULL};
    /* an output that is, holds or lies in an input (the model directory's files included) */
    cli_named_path ins[SWI_JOB_MAX_INPUTS + NN_MAX_FOLDS + 1];
    int n_ins = 0;
    ins[n_ins++] = (cli_named_path){"the model card", c->source};
    for (int f = 0; f < c->n_folds; f++) ins[n_ins++] = (cli_named_path){"a fold's model", c->models[f]};
    for (int i = 0; i < j->n_inputs; i++) ins[n_ins++] = (cli_named_path){"--input", j->inputs[i]};
    const cli_named_path outp[5] = {{"--output", finals[0]},
                                    {"--save-probabilities' .npz", finals[1]},
                                    {"--save-probabilities' .json", finals[2]},
                                    {"--statistics", j->statistics},
                                    {"--masks", j->masks}};
    if (cli_check_outputs_apart(ins, n_ins, outp, 5, err)) return SWI_ERR_IO;
    if (j->masks && pl_masks_check(j->masks, j->force, err)) return SWI_ERR_IO;
    for (int i = 0; i < 3; i++)
        if (finals[i] && cli_out_check(finals[i], j->force, err)) return SWI_ERR_IO;
    if (j->statistics && cli_out_check(j->statistics, j->force, err)) return SWI_ERR_IO;
    swi_job_plan plan;
    swi_status st = nn_job_plan(j, hooks, &plan, err);
    if (st != SWI_OK) return st;
    if (!plan.fits) {
        cli_err(err, "%s", plan.unfit);
        return SWI_ERR_BUDGET;
    }
    swi_params p;
    swi_tensor in;
    swi_output out;
    if (nn_engine_setup(j, &p, &in, &out, err)) return SWI_ERR_IO;
    p = j->planned; /* the engine's share of the budget and the batch, as the plan settled them */
    cli_out *outs[3] = {&j->out_labels, &j->out_probs, &j->out_props};
    for (int i = 0; i < 3; i++)
        if (finals[i] && cli_out_begin(outs[i], finals[i], j->force, err)) return SWI_ERR_IO;
    if (j->statistics && cli_out_begin(&j->out_stats, j->statistics, j->force, err)) return SWI_ERR_IO;
    if (j->masks && pl_masks_begin(&j->mask_dir, j->masks, j->force, err)) return SWI_ERR_IO;
    const int64_t N = j->in_size[0] * j->in_size[1] * j->in_size[2], K = c->heads;
    j->label_bytes = c->max_label > 255 ? 2 : 1;
    j->labels = calloc((size_t)N, (size_t)j->label_bytes);
    if (!j->labels) {
        cli_err(err, "out of memory for the labels");
        return SWI_ERR_NOMEM;
    }
    if (j->statistics || j->keep_statistics) {
        j->class_stats = pl_stats_new(c->max_label + 1, c->has_regions ? NULL : (const char *const *)c->names,
                                      j->vols[0].affine, j->in_size);
        if (!j->class_stats) {
            cli_err(err, "out of memory for the statistics");
            return SWI_ERR_NOMEM;
        }
        pl_stats_intensity_array(j->class_stats, j->raw0);
    }
    if (j->save_probabilities) {
        j->probs = malloc((size_t)(N * K) * sizeof(float));
        if (!j->probs) {
            cli_err(err, "out of memory for the probabilities");
            return SWI_ERR_NOMEM;
        }
        /* outside the crop box: background 1 (label models), 0 (regions) */
        for (int64_t r = 0; r < K; r++)
            for (int64_t v = 0; v < N; v++) j->probs[r * N + v] = !c->has_regions && r == 0 ? 1.0f : 0.0f;
    }
    double map[3][4];
    nn_back_map(j, map);
    const int64_t box[3] = {j->box_hi[0] - j->box_lo[0], j->box_hi[1] - j->box_lo[1],
                            j->box_hi[2] - j->box_lo[2]};
    char msg[SWI_ERRLEN];
    if (j->sep_back && j->rs[j->axis_back] != j->cs[j->axis_back] && c->probs.order_z != 1 &&
        c->probs.order_z != 0) {
        cli_err(err,
                "%s: resampling the logits back with separate z (order_z %d) is not available in this build",
                c->source, c->probs.order_z);
        return SWI_ERR_INVALID_ARG;
    }
    if (c->probs.order != 1 && (j->rs[0] != j->cs[0] || j->rs[1] != j->cs[1] || j->rs[2] != j->cs[2])) {
        cli_err(err, "%s: resampling the logits back with order %d is not available (order 1 only)",
                c->source, c->probs.order);
        return SWI_ERR_INVALID_ARG;
    }
    if (swi_resample_sink_create(j->rs, box, map, K, 0, emit_tile, j, &j->sink, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "resampling back to the input grid: %s", msg);
        return SWI_ERR_NOMEM;
    }
    /* separate z with order_z 0: the nearest model slice along the low-resolution axis */
    if (j->sep_back && c->probs.order_z == 0 && j->rs[j->axis_back] != j->cs[j->axis_back] &&
        swi_resample_sink_nearest(j->sink, j->axis_back, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "internal error: %s", msg);
        return SWI_ERR_SHAPE;
    }
    p.progress = progress;
    p.progress_user = (void *)hooks;
    const double t1 = cli_now();
    st = swi_run(j->ctx, &p, &in, &j->net, &out, 1);
    const double t_run = cli_now() - t1;
    if (swi_run_stats(j->ctx, &j->stats) != SWI_OK) memset(&j->stats, 0, sizeof j->stats);
    if (st != SWI_OK) {
        cli_err(err, "%s (%s)", swi_last_error(j->ctx), swi_status_name(st));
        return st;
    }
    if (swi_resample_sink_finish(j->sink, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "internal error: %s", msg);
        return SWI_ERR_SHAPE;
    }
    if (j->class_stats && stats_outside(j, err)) return SWI_ERR_NOMEM;
    if (j->output && swi_volume_write_labels_as_fd(cli_out_take_fd(&j->out_labels), j->t_output.format,
                                                   j->output, &j->vols[0], j->labels,
                                                   j->label_bytes == 1 ? SWI_DTYPE_UINT8 : SWI_DTYPE_UINT16,
                                                   c->max_label + 1, NULL, NULL, msg, sizeof msg) != SWI_OK) {
        cli_err(err, "%s", msg);
        return SWI_ERR_IO;
    }
    if (j->save_probabilities) {
        const int64_t shape[4] = {K, j->reader_size[0], j->reader_size[1], j->reader_size[2]};
        if (nn_npz_write(cli_out_take_fd(&j->out_probs), j->probs_path, "probabilities", j->probs, shape, 4,
                         err) ||
            write_props(j, cli_out_take_fd(&j->out_props), err))
            return SWI_ERR_IO;
    }
    if (j->masks && pl_masks_write(&j->mask_dir, &j->vols[0], j->labels, j->label_bytes, c->max_label + 1,
                                   c->has_regions ? NULL : (const char *const *)c->names, NULL, err))
        return SWI_ERR_IO;
    char *stats_json = j->class_stats ? pl_stats_json(j->class_stats, j->inputs[0], j->output) : NULL;
    if (j->class_stats && !stats_json) {
        cli_err(err, "out of memory for the statistics");
        return SWI_ERR_NOMEM;
    }
    if (j->statistics && pl_write_text(cli_out_take_fd(&j->out_stats), j->statistics, stats_json, err)) {
        free(stats_json);
        return SWI_ERR_IO;
    }
    cli_out *all[4] = {j->output ? &j->out_labels : NULL, j->save_probabilities ? &j->out_probs : NULL,
                       j->save_probabilities ? &j->out_props : NULL, j->statistics ? &j->out_stats : NULL};
    if (cli_out_commit_all(all, 4, j->force, err) ||
        (j->masks && pl_masks_commit(&j->mask_dir, j->force, err))) {
        free(stats_json);
        return SWI_ERR_IO;
    }
    if (keep && j->keep_statistics) {
        keep->statistics = stats_json;
        stats_json = NULL;
    }
    free(stats_json);
    if (keep) {
        keep->labels = j->labels;
        j->labels = NULL;
        keep->label_bytes = j->label_bytes;
        memcpy(keep->size, j->in_size, sizeof keep->size);
        keep->classes = c->max_label + 1;
        memcpy(keep->affine, j->vols[0].affine, sizeof keep->affine);
        keep->stats = j->stats;
        keep->seconds = cli_now() - t0;
    }
    if (!j->quiet) {
        char line[SWI_ERRLEN], rss[32];
        snprintf(line, sizeof line,
                 "nnU-Net %s, %d fold%s: model grid %lldx%lldx%lld, %lld windows in %lld calls: %.2f s "
                 "(network+blending %.2f s), peak RSS %s -> %s",
                 c->configuration, c->n_folds, c->n_folds == 1 ? "" : "s", (long long)j->rs[0],
                 (long long)j->rs[1], (long long)j->rs[2], (long long)j->stats.windows_total,
                 (long long)j->stats.predictor_calls, cli_now() - t0, t_run, cli_bytes(cli_peak_rss(), rss),
                 j->output ? j->output : "-");
        pl_hook_message(hooks, line);
    }
    return SWI_OK;
}
