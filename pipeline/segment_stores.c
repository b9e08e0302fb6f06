/*
 * segment_stores.c -- `swi segment` on chunked stores: inputs read window by window
 * (preprocessed box by box), labels and scores written chunk by chunk by the engine's
 * region callbacks, and --shard.
 */
#include "segment.h"

#include "card.h"
#include "preprocess.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pl_store_outputs(const pl_opts *o) {
    return PL_TARGET_STORE(&o->t_output) || PL_TARGET_STORE(&o->t_scores);
}

int pl_store_check(const pl_opts *o, char *err) {
    const pl_target *targets[2] = {&o->t_output, &o->t_scores};
    const char *flags[2] = {"--output", "--scores"};
    for (int i = 0; i < 2; i++)
        if (PL_TARGET_UNKNOWN(targets[i])) {
            cli_err(err,
                    "%s '%s': the name must end in .nii, .nii.gz, .nrrd or .mha, or name a "
                    "store (x.zarr, x.ome.zarr, x.h5:/path)",
                    flags[i], targets[i]->name);
            return 2;
        }
    const char *msg = NULL;
    int in_stores = 0;
    for (int c = 0; c < o->n_inputs; c++) in_stores += cli_is_store(o->inputs[c]);
    int out_store = pl_store_outputs(o);
    if (in_stores && in_stores != o->n_inputs)
        msg = "--input: give every channel as a store or every channel as NIfTI, not a mix";
    else if (in_stores && o->zscore)
        msg = "--zscore needs the whole volume's statistics; with a store input use --clip/--scale";
    else if (out_store && (PL_TARGET_FILE(&o->t_output) || PL_TARGET_FILE(&o->t_scores)))
        msg = "--output and --scores: write both to stores or both to NIfTI";
    else if (out_store && o->preview)
        msg = "--preview needs the whole label map: not with store outputs";
    else if (out_store && o->masks)
        msg = "--masks needs the whole label map: not with store outputs";
    else if (out_store && o->report)
        msg = "--report needs the whole label map: not with store outputs";
    else if (o->shard_given && !out_store)
        msg = "--shard writes parts of shared stores: give --output x.zarr";
    else if (o->shard_given && o->statistics)
        msg = "--statistics covers the whole volume: not with --shard (a part sees its box only)";
    else if (o->chunks_given && !out_store)
        msg = "--chunks sets the chunks of store outputs: give --output x.zarr (or x.ome.zarr, x.h5:/path)";
    else if (o->chunks_given && (o->chunks[0] < 1 || o->chunks[1] < 1 || o->chunks[2] < 1))
        msg = "--chunks: give three chunk sizes, each 1 or more";
    char gm[SWI_ERRLEN];
    /* the parts of a collective job are its processes (MPI ranks): say so */
    if (!msg && o->shard_given && !o->shard_init && o->shard_grid_given &&
        cli_shard_grid_check(o->shard_grid, o->shard_parts, o->shard_collective, gm))
        msg = gm;
    if (!msg) return 0;
    cli_err(err, "%s", msg);
    return 2;
}

swi_status swi_job_check_names(const swi_job_spec *sp, char *err, size_t errlen) {
    char msg[SWI_ERRLEN] = "swi_job_check_names: spec is required";
    pl_opts *o = sp ? calloc(1, sizeof *o) : NULL;
    if (sp && !o) snprintf(msg, sizeof msg, "out of memory");
    if (!o) {
        if (err && errlen) snprintf(err, errlen, "%s", msg);
        return sp ? SWI_ERR_NOMEM : SWI_ERR_INVALID_ARG;
    }
    pl_opts_names(sp, o);
    swi_status st = pl_store_check(o, msg) ? SWI_ERR_INVALID_ARG : SWI_OK;
    free(o);
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}

#include <math.h>

/* Each box as the NIfTI path treats the whole volume: NaN/Inf read as 0 (or refused with
 * --nonfinite fail), then --clip and --scale. */
static int preprocess_box(void *user, float *x, int64_t n, char *msg, size_t msg_size) {
    const pl_opts *o = user;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            if (o->nonfinite_fail) {
                snprintf(msg, msg_size, "%s: NaN or Inf voxels (--nonfinite fail)", o->inputs[0]);
                return 1;
            }
            x[i] = 0.0f;
        }
    seg_preprocess(o, x, n);
    return 0;
}

static void store_warning(void *state, const char *line) { seg_message(state, "%s", line); }

int seg_store_open_inputs(const pl_opts *o, seg_state *s, char *err) {
    s->reader = 1;
    s->store_in.channels = o->n_inputs;
    for (int c = 0; c < o->n_inputs; c++)
        if (cli_input_open_store(&s->store_in, c, o->inputs[c], store_warning, s, err)) return 1;
    s->store_in.transform = preprocess_box;
    s->store_in.transform_user = (void *)o;
    cli_input_reader(&s->store_in);
    /* NIfTI/NRRD outputs of a store input: its OME-Zarr scale and translation as the
     * affine (axis-aligned, store axis 0 = i), else 1 mm voxels at the origin */
    char msg[SWI_ERRLEN];
    if (!pl_store_outputs(o) && swi_store_volume(s->store_in.stores[0], &s->vols[0], msg, sizeof msg)) {
        cli_err(err, "%s", msg);
        return 1;
    }
    return 0;
}

static void spec_of(const swi_tensor *in, int64_t planes, swi_dtype dtype, int labels, int64_t classes,
                    swi_store_spec *spec) {
    swi_store_spec_init(spec);
    memcpy(spec->size, in->size, sizeof spec->size);
    spec->planes = planes;
    spec->dtype = dtype;
    spec->labels = labels;
    spec->classes = classes;
}

int seg_store_begin(const pl_opts *o, seg_state *s, swi_params *p, const swi_tensor *in, swi_output *outs,
                    int n_outs, int *nothing_to_do, char *err) {
    *nothing_to_do = 0;
    const int64_t classes = p->heads[0].channels;
    if (classes <= 0) {
        cli_err(err, "%s: the model's number of classes is dynamic; a store output needs it beforehand",
                PL_MODEL_NAME(o));
        return 1;
    }
    for (int i = 0; i < n_outs; i++) {
        outs[i].dtype = i == 0 ? (classes > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8) : SWI_DTYPE_FLOAT32;
        outs[i].on_region = swi_store_on_region;
    }
    swi_store_spec ls, ss;
    spec_of(in, 1, classes > 256 ? SWI_DTYPE_UINT16 : SWI_DTYPE_UINT8, 1, classes, &ls);
    spec_of(in, classes, SWI_DTYPE_FLOAT32, 0, classes, &ss);
    /* OME-Zarr labels of an image with time or channel axes keep them (of size 1) */
    if (o->output && s->reader && s->store_in.stores[0] && swi_store_kind_of(o->output) == SWI_STORE_OME)
        swi_store_lead_axes(s->store_in.stores[0], ls.lead_axes);
    /* the card's class names, where it names every class */
    if (o->card && o->card->n_classes == classes) {
        ls.class_names = (const char *const *)o->card->classes;
        ls.n_class_names = classes;
    }
    /* slabs along the engine's outermost axis complete one after another */
    if (cli_outer_axis(p, in, outs, n_outs, &ls.slab_axis, err)) return 1;
    ss.slab_axis = ls.slab_axis;
    /* the chunk asked, else the first store input's: the labels line up with the image */
    int64_t want[3] = {0, 0, 0};
    if (o->chunks_given)
        memcpy(want, o->chunks, sizeof want);
    else if (s->reader && s->store_in.stores[0])
        swi_store_chunk(s->store_in.stores[0], want);
    for (int d = 0; d < 3; d++) ls.chunk[d] = ss.chunk[d] = want[d] < in->size[d] ? want[d] : in->size[d];
    int64_t lc[3], sc[3];
    swi_store_default_chunk(&ls, lc);
    swi_store_default_chunk(&ss, sc);
    for (int d = 0; d < 3; d++)
        if (ls.chunk[d] > 0) lc[d] = sc[d] = ls.chunk[d];
    /* Shards are cut at the label chunks; the score chunks (halved to fit) divide them. */
    int64_t cut[3];
    for (int d = 0; d < 3; d++) {
        cut[d] = o->output ? (lc[d] > sc[d] ? lc[d] : sc[d]) : sc[d];
        if (o->output && o->scores && (cut[d] % lc[d] != 0 || cut[d] % sc[d] != 0)) {
            cli_err(err, "internal error: chunks %lld and %lld of axis %d do not nest", (long long)lc[d],
                    (long long)sc[d], d);
            return 1;
        }
    }
    /* parts of one store must come from one job: the same inputs, models and options */
    char job[3072], extra[512];
    snprintf(extra, sizeof extra,
             "clip %d %g,%g scale %d %g,%g,%g,%g zscore %d softmax %d tta %d head %d nonfinite %d%s",
             o->clip_given, o->clip[0], o->clip[1], o->scale_given, o->scale[0], o->scale[1], o->scale[2],
             o->scale[3], o->zscore, o->softmax, o->tta, o->head, o->nonfinite_fail,
             o->n_preds ? " caller's predictors" : "");
    cli_job_fingerprint(o->inputs, o->n_inputs, in->size, o->models, o->n_models, p, extra, job, sizeof job);
    ls.job = ss.job = job;
    /* labels and scores as two datasets of one HDF5 file share the writer's copy of it */
    int flags = (o->force ? SWI_STORE_FORCE : 0) | (o->shard_given ? SWI_STORE_SHARED : 0);
    char msg[SWI_ERRLEN];
    if (o->shard_init) {
        if ((o->output && swi_store_create_metadata(o->output, &ls, flags, msg, sizeof msg)) ||
            (o->scores && swi_store_create_metadata(o->scores, &ss, flags, msg, sizeof msg))) {
            cli_err(err, "%s", msg);
            return 1;
        }
        *nothing_to_do = 1;
        return 0;
    }
    if (o->shard_collective) {
        /* part 0 writes the metadata; the others join once it is there */
        int ok = 1;
        if (o->shard_part == 0)
            ok = !((o->output && swi_store_create_metadata(o->output, &ls, flags, msg, sizeof msg)) ||
                   (o->scores && swi_store_create_metadata(o->scores, &ss, flags, msg, sizeof msg)));
        if (s->hooks && s->hooks->all_ok) ok = s->hooks->all_ok(s->hooks->user, ok);
        if (!ok) {
            cli_err(err, "%s", ok ? "output stores not created: another rank failed first" : msg);
            return 1;
        }
    }
    int part = o->shard_given ? o->shard_part : 0, parts = o->shard_given ? o->shard_parts : 1;
    int grid[3] = {parts, 1, 1}, empty = 0;
    if (o->shard_grid_given) memcpy(grid, o->shard_grid, sizeof grid);
    for (int d = 0; d < 3; d++) {
        s->box_lo[d] = 0;
        s->box_hi[d] = in->size[d];
    }
    if (o->shard_given) cli_shard_box(in->size, cut, part, grid, s->box_lo, s->box_hi);
    for (int d = 0; d < 3; d++) empty |= s->box_lo[d] >= s->box_hi[d];
    if (!empty) { /* a run that cannot fit the memory available is refused before any store is made */
        swi_params q = *p;
        for (int d = 0; o->shard_given && d < 3; d++) {
            q.part_lo[d] = s->box_lo[d];
            q.part_hi[d] = s->box_hi[d];
        }
        if (seg_fits_available(o, s, &q, in, outs, n_outs, err)) return 1;
    }
    if ((o->output && swi_store_create(o->output, &ls, flags, part, parts, s->box_lo, s->box_hi, &s->w_labels,
                                       msg, sizeof msg)) ||
        (o->scores && swi_store_create(o->scores, &ss, flags, part, parts, s->box_lo, s->box_hi, &s->w_scores,
                                       msg, sizeof msg))) {
        if (o->shard_given && !o->shard_collective)
            cli_err(err, "--shard %d/%d: %s", part, parts, msg);
        else
            cli_err(err, "%s", msg);
        return 1;
    }
    /* their hidden replacements go with a forced stop too */
    cli_tmp_dir_add(swi_store_writer_temporary(s->w_labels));
    cli_tmp_dir_add(swi_store_writer_temporary(s->w_scores));
    if (empty) {
        *nothing_to_do = 1;
        return seg_store_commit(s, err);
    }
    if (o->shard_given)
        for (int d = 0; d < 3; d++) {
            p->part_lo[d] = s->box_lo[d];
            p->part_hi[d] = s->box_hi[d];
        }
    for (int i = 0; i < n_outs; i++) outs[i].user = i == 0 ? s->w_labels : s->w_scores;
    return 0;
}

int seg_store_commit(seg_state *s, char *err) {
    char msg[SWI_ERRLEN];
    swi_store_writer *l = s->w_labels, *sc = s->w_scores;
    s->w_labels = s->w_scores = NULL;
    int bad = 0;
    if (l && swi_store_commit(l, msg, sizeof msg)) {
        bad = 1;
        swi_store_abort(sc);
        sc = NULL;
    }
    if (!bad && sc && swi_store_commit(sc, msg, sizeof msg)) bad = 1;
    cli_tmp_dirs_clear();
    if (bad) cli_err(err, "%s", msg);
    return bad;
}

const char *seg_store_left(const seg_state *s) {
    const int l = !s->w_labels || swi_store_writer_replaces(s->w_labels);
    const int c = !s->w_scores || swi_store_writer_replaces(s->w_scores);
    return l && c ? "the outputs are left as they were before the run" : "the output stays marked incomplete";
}

const char *seg_store_error(const seg_state *s) {
    const char *a = s->w_labels ? swi_store_writer_error(s->w_labels) : "";
    const char *b = s->w_scores ? swi_store_writer_error(s->w_scores) : "";
    return *a ? a : *b ? b : NULL;
}
