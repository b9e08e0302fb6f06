/*
 * describe.c -- swi_job_describe: a job's plan as `swi plan` prints it, one fact a line;
 * swi_job_card_text: a model's card as `swi info` prints it.
 */
#include "swi_pipeline.h"

#include "card.h"
#include "job.h"
#include "nnunet_card.h"
#include "nnunet_job.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *pad_name(swi_pad p) {
    static const char *n[] = {"constant", "reflect", "replicate", "circular"};
    return (unsigned)p < 4 ? n[p] : "?";
}

/* Text appended to a buffer as snprintf would write it, the whole length counted. */
typedef struct text {
    char *buf;
    size_t n, len;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->len < t->n ? t->buf + t->len : NULL, t->len < t->n ? t->n - t->len : 0, fmt, ap);
    va_end(ap);
    if (w > 0) t->len += (size_t)w;
}

size_t swi_job_describe(const swi_job *job, const swi_job_plan *plan, char *buf, size_t n) {
    text t = {buf, n, 0};
    if (n) buf[0] = '\0';
    if (!job || !plan) return 0;
    if (job_nnunet(job)) return nn_job_describe(job_nnunet(job), plan, buf, n);
    const pl_opts *o = job_opts(job);
    const seg_state *s = job_state(job);
    const swi_params *p = job_params(job);
    const swi_plan *eng = &plan->engine;
#define P(...) add(&t, __VA_ARGS__)
    char desc[1024], b[6][32];
    const int64_t *isz = s->vols[0].size;
    size_t vol_native = (size_t)(isz[0] * isz[1] * isz[2]) * (size_t)s->vols[0].bytes_per_voxel;
    int64_t per_batch = s->model ? swi_ort_calls_per_batch(s->model, eng->sw_batch_size) : o->tta ? 8 : 1;
    P("model    %s\n", PL_MODEL_NAME(o));
    if (!s->model) {
        P("         %lld classes per window of the roi%s\n", (long long)o->classes,
          o->model ? "; the model named only for its card" : "");
    } else {
        swi_ort_describe(s->model, desc, sizeof desc);
        P("         %s\n", desc);
    }
    if (s->model && o->no_rewrite)
        P("         loaded as it is (--no-rewrite)\n");
    else if (s->model)
        P("         %d ConvTranspose layer%s run as Conv + depth-to-space (the same "
          "function, faster)\n",
          swi_ort_rewrites(s->model), swi_ort_rewrites(s->model) == 1 ? "" : "s");
    if (s->model && s->backend_note[0]) P("backend  %s\n", s->backend_note);
    for (int c = 0; c < o->n_inputs; c++)
        P("input    %s: %lld x %lld x %lld voxels%s, %s\n", o->inputs[c], (long long)s->vols[c].size[0],
          (long long)s->vols[c].size[1], (long long)s->vols[c].size[2],
          s->vols[c].frames > 1 ? " x channels" : "", c == 0 ? "channel 0" : "next channel");
    if (s->grid.active) {
        char g[256];
        seg_grid_describe(&s->grid, g, sizeof g);
        P("model    grid %s\n", g);
    }
    if (s->n_members > 1)
        P("ensemble %d %s, their mean blended\n", s->n_members, o->n_preds ? "predictors" : "models");
    P("window   %lld x %lld x %lld, overlap %g,%g,%g, %s blending", (long long)eng->roi[0],
      (long long)eng->roi[1], (long long)eng->roi[2], o->overlap[0], o->overlap[1], o->overlap[2],
      o->mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    if (o->mode == SWI_BLEND_GAUSSIAN)
        P(" (sigma %g,%g,%g x roi)", o->sigma_scale[0], o->sigma_scale[1], o->sigma_scale[2]);
    P(", %s padding\n", pad_name(o->padding));
    P("padded   %lld x %lld x %lld (before: %lld,%lld,%lld)\n", (long long)eng->padded[0],
      (long long)eng->padded[1], (long long)eng->padded[2], (long long)eng->pad_before[0],
      (long long)eng->pad_before[1], (long long)eng->pad_before[2]);
    P("grid     %lld x %lld x %lld = %lld windows, order %c,%c,%c (outermost first)\n",
      (long long)eng->windows_per_axis[0], (long long)eng->windows_per_axis[1],
      (long long)eng->windows_per_axis[2], (long long)eng->windows_total, "ijk"[eng->order[0] % 3],
      "ijk"[eng->order[1] % 3], "ijk"[eng->order[2] % 3]);
    if (plan->region) {
        char box[2][128];
        P("region   %s of the input -> %s of the model grid: windows run %lld of %lld; engine peak %s "
          "of the whole run's %s\n",
          cli_shard_box_str(plan->region_lo, plan->region_hi, box[0], sizeof box[0]),
          cli_shard_box_str(plan->model_lo, plan->model_hi, box[1], sizeof box[1]),
          (long long)eng->windows_total, (long long)plan->windows_whole, cli_bytes(eng->bytes_peak, b[0]),
          cli_bytes(plan->whole_engine_bytes, b[1]));
    }
    P("calls    %lld engine batches of up to %d windows -> %lld network runs%s\n",
      (long long)eng->predictor_calls, eng->sw_batch_size, (long long)(eng->predictor_calls * per_batch),
      o->tta ? " (x8 for --tta)" : "");
    if (p->reuse == SWI_REUSE_ON && !s->count_reuse)
        P("reuse    on; the windows reused are counted by swi segment (%s)\n",
          s->reader        ? "a store input"
          : s->grid.active ? "the model grid"
                           : "reading the input would not fit");
    else if (p->reuse == SWI_REUSE_ON)
        P("reuse    %lld of %lld windows take an earlier window's output (no network "
          "call); %lld run; cache %d window%s\n",
          (long long)eng->windows_reused, (long long)eng->windows_total,
          (long long)(eng->windows_total - eng->windows_reused), eng->reuse_cache,
          eng->reuse_cache == 1 ? "" : "s");
    else
        P("reuse    off (%s): all %lld windows run\n", o->n_preds ? "the caller's predictors" : "--no-reuse",
          (long long)eng->windows_total);
    P("threads  %d blending, %d network; pipeline %s\n", eng->threads,
      o->threads > 0 ? o->threads : cli_cpu_count(), eng->pipeline ? "on" : "off");
    P("classes  %lld%s\n", (long long)eng->head_channels[0],
      eng->head_channels[0] > 256 ? " (uint16 labels)" : " (uint8 labels)");
    P("memory   predicted peak %s (%zu bytes)\n", cli_bytes(eng->bytes_peak, b[0]), eng->bytes_peak);
    P("  input         %12s\n", cli_bytes(eng->bytes_input, b[0]));
    P("  windows       %12s   (window inputs and network outputs)\n", cli_bytes(eng->bytes_windows, b[1]));
    P("  partial sums  %12s   (open frontier)\n", cli_bytes(eng->bytes_partial, b[2]));
    P("  outputs       %12s   (labels%s)\n", cli_bytes(eng->bytes_outputs, b[3]),
      PL_WANT_SCORES(o) ? " + scores" : "");
    P("  scratch       %12s\n", cli_bytes(eng->bytes_scratch, b[4]));
    P("  reuse cache   %12s   (%d window input%s and output%s)\n", cli_bytes(eng->bytes_reuse, b[0]),
      eng->reuse_cache, eng->reuse_cache == 1 ? "" : "s", eng->reuse_cache == 1 ? "" : "s");
    P("  smallest plan %12s   (any batch size / pipeline; %zu bytes)\n", cli_bytes(eng->bytes_min, b[5]),
      eng->bytes_min);
    if (s->grid.active || s->n_members > 1 || s->n_mirrors > 0 || s->dnnl) {
        size_t band = seg_grid_band_bytes(&s->grid, eng->head_channels[0], eng->order[0]);
        P("beside the engine: %s (%s)\n", cli_bytes(plan->beside_bytes, b[0]),
          s->grid.active ? "results on the input grid, the input on the model grid"
          : s->n_mirrors ? "the mirroring's and the ensemble's window buffers"
          : s->dnnl      ? "the oneDNN plan"
                         : "the ensemble's window buffer");
        if (band)
            P("  resampling band %10s   (model-grid scores kept until the input-grid "
              "voxels that read them are done)\n",
              cli_bytes(band, b[2]));
        P("total    predicted peak %s%s\n", cli_bytes(eng->bytes_peak + plan->beside_bytes, b[1]),
          o->max_memory ? " (within --max-memory: the engine was planned under what is left)" : "");
    }
    P("reading  %s before the engine runs (the input as floats and the file's own voxels, %s), "
      "within the budget too\n",
      cli_bytes(seg_reading_bytes(o, s), b[1]), cli_bytes(vol_native, b[0]));
    if (s->dnnl) /* beside the engine: in the total above */
        P("oneDNN   %s (weights, scratch, activations) counted beside the engine; not counted: the "
          "ONNX Runtime model opened to settle the window\n",
          cli_bytes(seg_dnnl_bytes(s), b[0]));
    else
        P("not counted: ONNX Runtime's working memory\n");
    if (plan->unfit[0]) P("too big   swi segment would refuse this run: %s\n", plan->unfit);
#undef P
    return t.len;
}

swi_status swi_job_card_text(const char *model, char **out, char *err, size_t errlen) {
    char msg[SWI_ERRLEN] = "swi_job_card_text: model and text are required";
    swi_status st = SWI_ERR_INVALID_ARG;
    if (out) *out = NULL;
    seg_card card;
    int found = 0;
    if (model && out) {
        st = card_load(model, &card, &found, msg) ? SWI_ERR_IO : SWI_OK;
        if (st == SWI_OK && found) {
            size_t len = 0;
            FILE *f = open_memstream(out, &len);
            if (f) card_print(&card, f);
            if (!f || fclose(f) != 0) {
                free(f ? *out : NULL);
                *out = NULL;
                snprintf(msg, sizeof msg, "out of memory");
                st = SWI_ERR_NOMEM;
            }
        }
        if (found && st != SWI_ERR_IO) card_free(&card); /* a failed card_load freed it */
    }
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}

swi_status swi_card_check(const char *path, char **out, char *err, size_t errlen) {
    char msg[SWI_ERRLEN] = "swi_card_check: a path is required";
    swi_status st = SWI_ERR_INVALID_ARG;
    if (out) *out = NULL;
    char nn_path[4200];
    size_t plen = path ? strlen(path) : 0;
    if (!path) {
        /* msg says so */
    } else if (nn_card_is_model(path, nn_path, sizeof nn_path)) {
        /* an nnU-Net model directory (or its nnunet.json): the card nnU-Net jobs read */
        nn_card c;
        if (nn_card_load(nn_path, &c, msg)) {
            st = SWI_ERR_INVALID_ARG;
        } else {
            st = SWI_OK;
            if (out && asprintf(out,
                                "nnU-Net card %s\n  configuration %s, dataset %s, %d-D, window "
                                "%lldx%lldx%lld, %d fold(s), %d channel(s), %lld output(s)\n",
                                c.source, c.configuration, c.dataset, c.dims, (long long)c.window[0],
                                (long long)c.window[1], (long long)c.window[2], c.n_folds, c.n_channels,
                                (long long)c.heads) < 0) {
                *out = NULL;
                snprintf(msg, sizeof msg, "out of memory");
                st = SWI_ERR_NOMEM;
            }
            nn_card_free(&c);
        }
    } else {
        /* a model (its card beside it or in its metadata_props), or a card file */
        seg_card card;
        int found = 1, is_model = plen > 5 && strcmp(path + plen - 5, ".onnx") == 0;
        int bad = is_model ? card_load(path, &card, &found, msg) : card_load_file(path, &card, msg);
        if (bad) {
            st = SWI_ERR_INVALID_ARG;
        } else if (!found) {
            cli_err(msg, "%s: the model has no card (no .json beside it, no swi.card in its metadata_props)",
                    path);
            st = SWI_ERR_INVALID_ARG;
        } else {
            st = SWI_OK;
            size_t len = 0;
            FILE *f = out ? open_memstream(out, &len) : NULL;
            if (f) card_print(&card, f);
            if (out && (!f || fclose(f) != 0)) {
                free(f ? *out : NULL);
                *out = NULL;
                snprintf(msg, sizeof msg, "out of memory");
                st = SWI_ERR_NOMEM;
            }
            card_free(&card);
        }
    }
    if (err && errlen) snprintf(err, errlen, "%s", st == SWI_OK ? "" : msg);
    return st;
}
