/*
 * cmd_plan.c -- `swi plan`: what `swi segment` would do with the same options (the window
 * grid, the network calls, the windows reused, the predicted memory), without running the
 * network. With reuse on it reads the voxels, as only they tell which windows repeat.
 */
#include "segment.h"

#include "util.h"

#include <stdio.h>

static const char *pad_name(swi_pad p) {
    static const char *n[] = {"constant", "reflect", "replicate", "circular"};
    return (unsigned)p < 4 ? n[p] : "?";
}

int swi_cmd_plan(int argc, char **argv) {
    const char *who = "swi plan";
    seg_opts o;
    int rc = seg_parse(argc, argv, &o, 1);
    if (rc) return rc < 0 ? 0 : rc;
    if (seg_store_check(&o, who)) return 2;
    char err[SWI_ERRLEN];
    seg_state *s = seg_state_new();
    if (!s) return seg_fail(who, "out of memory");
    swi_params p;
    swi_tensor in;
    swi_output outs[2];
    int n_outs = 0, status = 1;
    rc = seg_setup(&o, s, &p, &in, outs, &n_outs, err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", who, err);
        status = rc;
        goto done;
    }
    s->ctx = swi_create();
    if (!s->ctx) {
        status = seg_fail(who, "out of memory");
        goto done;
    }
    /* Which windows reuse an earlier one's output depends on the voxels: read them (NIfTI
     * inputs on their own grid only: the model grid of --orientation/--spacing is made by
     * the run, and stores are read window by window). */
    const int count_reuse = p.reuse == SWI_REUSE_ON && !s->grid.active && !s->reader;
    if (count_reuse) {
        if ((status = seg_read_inputs(&o, who, s, &in))) goto done;
        status = 1;
        in.data = s->input;
    }
    swi_plan plan;
    size_t beside = 0;
    char unfit[SWI_ERRLEN];
    if (seg_plan(who, &o, s, &p, &in, outs, n_outs, &plan, &beside, unfit, sizeof unfit)) goto done;
    char desc[1024], b[6][32];
    swi_ort_describe(s->model, desc, sizeof desc);
    const int64_t *isz = s->vols[0].size;
    size_t vol_native = (size_t)(isz[0] * isz[1] * isz[2]) * (size_t)s->vols[0].bytes_per_voxel;
    int64_t per_batch = swi_ort_calls_per_batch(s->model, plan.sw_batch_size);
    printf("model    %s\n", o.model);
    printf("         %s\n", desc);
    if (o.no_rewrite)
        printf("         loaded as it is (--no-rewrite)\n");
    else
        printf("         %d ConvTranspose layer%s run as Conv + depth-to-space (the same "
               "function, faster)\n",
               swi_ort_rewrites(s->model), swi_ort_rewrites(s->model) == 1 ? "" : "s");
    for (int c = 0; c < o.n_inputs; c++)
        printf("input    %s: %lld x %lld x %lld voxels%s, %s\n", o.inputs[c], (long long)s->vols[c].size[0],
               (long long)s->vols[c].size[1], (long long)s->vols[c].size[2],
               s->vols[c].frames > 1 ? " x channels" : "", c == 0 ? "channel 0" : "next channel");
    if (s->grid.active) {
        char g[256];
        seg_grid_describe(&s->grid, g, sizeof g);
        printf("model    grid %s\n", g);
    }
    if (s->n_members > 1) printf("ensemble %d models, their mean blended\n", s->n_members);
    printf("window   %lld x %lld x %lld, overlap %g,%g,%g, %s blending", (long long)plan.roi[0],
           (long long)plan.roi[1], (long long)plan.roi[2], o.overlap[0], o.overlap[1], o.overlap[2],
           o.mode == SWI_BLEND_GAUSSIAN ? "gaussian" : "constant");
    if (o.mode == SWI_BLEND_GAUSSIAN)
        printf(" (sigma %g,%g,%g x roi)", o.sigma_scale[0], o.sigma_scale[1], o.sigma_scale[2]);
    printf(", %s padding\n", pad_name(o.padding));
    printf("padded   %lld x %lld x %lld (before: %lld,%lld,%lld)\n", (long long)plan.padded[0],
           (long long)plan.padded[1], (long long)plan.padded[2], (long long)plan.pad_before[0],
           (long long)plan.pad_before[1], (long long)plan.pad_before[2]);
    printf("grid     %lld x %lld x %lld = %lld windows, order %c,%c,%c (outermost first)\n",
           (long long)plan.windows_per_axis[0], (long long)plan.windows_per_axis[1],
           (long long)plan.windows_per_axis[2], (long long)plan.windows_total, "ijk"[plan.order[0] % 3],
           "ijk"[plan.order[1] % 3], "ijk"[plan.order[2] % 3]);
    printf("calls    %lld engine batches of up to %d windows -> %lld network runs%s\n",
           (long long)plan.predictor_calls, plan.sw_batch_size, (long long)(plan.predictor_calls * per_batch),
           o.tta ? " (x8 for --tta)" : "");
    if (p.reuse == SWI_REUSE_ON && !count_reuse)
        printf("reuse    on; the windows reused are counted by swi segment (%s)\n",
               s->reader ? "a store input" : "the model grid");
    else if (p.reuse == SWI_REUSE_ON)
        printf("reuse    %lld of %lld windows take an earlier window's output (no network "
               "call); %lld run; cache %d window%s\n",
               (long long)plan.windows_reused, (long long)plan.windows_total,
               (long long)(plan.windows_total - plan.windows_reused), plan.reuse_cache,
               plan.reuse_cache == 1 ? "" : "s");
    else
        printf("reuse    off (--no-reuse): all %lld windows run\n", (long long)plan.windows_total);
    printf("threads  %d blending, %d network; pipeline %s\n", plan.threads,
           o.threads > 0 ? o.threads : cli_cpu_count(), plan.pipeline ? "on" : "off");
    printf("classes  %lld%s\n", (long long)plan.head_channels[0],
           plan.head_channels[0] > 256 ? " (uint16 labels)" : " (uint8 labels)");
    printf("memory   predicted peak %s (%zu bytes)\n", cli_bytes(plan.bytes_peak, b[0]), plan.bytes_peak);
    printf("  input         %12s\n", cli_bytes(plan.bytes_input, b[0]));
    printf("  windows       %12s   (window inputs and network outputs)\n",
           cli_bytes(plan.bytes_windows, b[1]));
    printf("  partial sums  %12s   (open frontier)\n", cli_bytes(plan.bytes_partial, b[2]));
    printf("  outputs       %12s   (labels%s)\n", cli_bytes(plan.bytes_outputs, b[3]),
           o.scores ? " + scores" : "");
    printf("  scratch       %12s\n", cli_bytes(plan.bytes_scratch, b[4]));
    printf("  reuse cache   %12s   (%d window input%s and output%s)\n", cli_bytes(plan.bytes_reuse, b[0]),
           plan.reuse_cache, plan.reuse_cache == 1 ? "" : "s", plan.reuse_cache == 1 ? "" : "s");
    printf("  smallest plan %12s   (any batch size / pipeline; %zu bytes)\n", cli_bytes(plan.bytes_min, b[5]),
           plan.bytes_min);
    if (s->grid.active || s->n_members > 1) {
        size_t band = seg_grid_band_bytes(&s->grid, plan.head_channels[0], plan.order[0]);
        printf("beside the engine: %s (%s)\n", cli_bytes(beside, b[0]),
               s->grid.active ? "results on the input grid, the input on the model grid"
                              : "the ensemble's window buffer");
        if (band)
            printf("  resampling band %10s   (model-grid scores kept until the input-grid "
                   "voxels that read them are done)\n",
                   cli_bytes(band, b[2]));
        printf("total    predicted peak %s%s\n", cli_bytes(plan.bytes_peak + beside, b[1]),
               o.max_memory ? " (within --max-memory: the engine was planned under what is left)" : "");
    }
    printf("reading  %s before the engine runs (the input as floats and the file's own voxels, %s), "
           "within the budget too\n",
           cli_bytes(seg_reading_bytes(&o, s), b[1]), cli_bytes(vol_native, b[0]));
    printf("not counted: ONNX Runtime's working memory\n");
    if (unfit[0]) printf("too big   swi segment would refuse this run: %s\n", unfit);
    status = 0;
done:
    seg_state_free(s);
    return status;
}
