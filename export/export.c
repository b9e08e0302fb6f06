/* export.c -- `swi export`: the command, step by step. The parts: export_args.c (options),
 * export_inspect.c (the network), export_layout.c (the window layout, from libswi),
 * export_graph.c and export_windows.c (the pipeline graph), onnx/onnx_io.c (protobuf-c). */
#include "swi_export.h"

#include "export_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int export_fail(export_job *job, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(job->err, sizeof job->err, fmt, ap);
    va_end(ap);
    job->status = status;
    return -1;
}

/* --output must not exist (without --force) and must not be --model. */
static int check_output_path(export_job *job) {
    const export_options *o = &job->opt;
    struct stat ob, mb;
    if (stat(o->output, &ob) != 0) return 0;
    if (!o->force) return export_fail(job, 1, "%s exists (use --force to overwrite)", o->output);
    if (stat(o->model, &mb) == 0 && mb.st_dev == ob.st_dev && mb.st_ino == ob.st_ino)
        return export_fail(job, 2, "--output is the same file as --model");
    return 0;
}

/* Pack and write the model; protobuf cannot hold a message of 2 GiB or more. */
static int save_model(export_job *job, const Onnx__ModelProto *m, size_t *bytes) {
    size_t packed = protobuf_c_message_get_packed_size(&m->base);
    if (packed > (size_t)INT32_MAX)
        return export_fail(
            job, 1,
            "the model would be %zu bytes, over protobuf's 2 GiB limit (the count map of --size is "
            "%lld bytes): use --dynamic, which computes it in the graph",
            packed, (long long)(4 * (int64_t)export_volume_voxels(&job->layout)));
    char err[1024];
    if (onnx_save(m, job->opt.output, err, sizeof err, bytes)) return export_fail(job, 1, "%s", err);
    return 0;
}

/* The one-line summary on stdout. */
static void print_summary(const export_job *job, size_t bytes) {
    const export_options *o = &job->opt;
    const export_layout *L = &job->layout;
    char grid[96] = "", roi[64] = "", windows[160];
    for (int k = 0; k < L->d; k++) {
        snprintf(roi + strlen(roi), sizeof roi - strlen(roi), "%s%lld", k ? "," : "", (long long)L->roi[k]);
        if (!o->dynamic)
            snprintf(grid + strlen(grid), sizeof grid - strlen(grid), "%s%lld", k ? "x" : "",
                     (long long)L->n_win[k]);
    }
    if (o->dynamic)
        snprintf(windows, sizeof windows, "window grid computed in the graph");
    else
        snprintf(windows, sizeof windows, "%lld windows (%s)", (long long)L->windows, grid);
    printf("%s: wrote %s (%zu bytes): %s%s, roi %s, %s blending, %s padding, %s -> %s%s\n", o->prog,
           o->output, bytes, windows,
           o->unroll            ? ", unrolled (one network call)"
           : job->net.per_image ? ", one image per network call"
                                : "",
           roi, export_mode_name(o->window.mode), export_pad_names[o->window.padding],
           ox_type_name(job->net.in_type), ox_type_name(job->net.out_type),
           o->argmax ? " + uint8 labels" : "");
}

/* Everything after the options: 0 or -1 (job->err). */
static int run_export(export_job *job) {
    if (check_output_path(job)) return -1;
    char err[1024];
    job->net.model = onnx_load(&job->A, job->opt.model, err, sizeof err);
    if (!job->net.model) return export_fail(job, 1, "%s", err);
    if (export_inspect_network(job) || export_plan_layout(job)) return -1;
    if (job->opt.argmax && job->net.out_dim[1] > 256)
        return export_fail(job, 2, "--argmax: the network has %lld classes; uint8 labels hold at most 256",
                           (long long)job->net.out_dim[1]);
    size_t bytes = 0;
    if (save_model(job, export_build_model(job), &bytes)) return -1;
    if (!job->opt.quiet) print_summary(job, bytes);
    return 0;
}

int swi_cmd_export(int argc, char **argv) {
    const char *prog = argc > 0 && argv[0] ? argv[0] : "swi export";
    export_job *job = calloc(1, sizeof *job);
    if (job) job->swi = swi_create();
    if (!job || !job->swi) {
        fprintf(stderr, "%s: out of memory\n", prog);
        free(job);
        return 1;
    }
    arena_init(&job->A, &job->oom);
    int rc = 0;
    if (setjmp(job->oom)) { /* any arena allocation failed */
        fprintf(stderr, "%s: out of memory\n", job->opt.prog ? job->opt.prog : prog);
        rc = 1;
    } else {
        int pr = export_parse_args(job, argc, argv);
        if (pr == 0) pr = run_export(job);
        if (pr < 0) {
            fprintf(stderr, "%s: %s\n", job->opt.prog, job->err);
            rc = job->status ? job->status : 1;
        }
    }
    arena_free(&job->A);
    swi_free(job->swi);
    free(job);
    return rc;
}
