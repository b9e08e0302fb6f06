/*
 * export_internal.h -- what the parts of `swi export` share (private to export/).
 *
 * One export is one export_job: the options (export_args.c), what the network is
 * (export_inspect.c), the window layout libswi gives for it (export_layout.c) and the
 * graph built from them (export_graph.c, export_windows.c, export_ops.c). Everything but
 * the libswi context lives in the job's arena; an arena allocation failure longjmps to
 * job->oom.
 */
#ifndef SWI_EXPORT_INTERNAL_H
#define SWI_EXPORT_INTERNAL_H

#include <setjmp.h>
#include <stdint.h>

#include "onnx_io.h"
#include "swi.h"
#include "window_opts.h"

#define EXPORT_MAXD SWI_MAX_DIMS

/* ---- the options (export_args.c) ---------------------------------------------------- */
typedef struct export_options {
    const char *prog; /* name in messages: "swi export" or "swi-export" */
    const char *model, *output, *head;
    int n_size; /* values given; 0 with --dynamic */
    int64_t size[EXPORT_MAXD];
    int dynamic;
    /* --roi, --overlap, --mode, --sigma-scale, --padding-mode, --cval as swi segment reads
     * them (common/window_opts.h): swi_params_init's defaults until given; n_roi, n_overlap,
     * n_sigma count the values given (one is every dim's; matched to the network's dims
     * by export_plan_layout); cval is a double, not swi_params' float: a float64 network
     * pads with the value as given */
    cli_window window;
    int argmax, force, quiet, per_image, unroll;
    const char *card; /* --card FILE: a model card to embed (metadata swi.card) */
    char *card_text;  /* its text, in the job's arena */
} export_options;

/* ---- what the network is (export_inspect.c) ------------------------------------------- */
typedef struct export_network {
    Onnx__ModelProto *model;
    int dims;                        /* spatial dims (input rank - 2) */
    int64_t in_dim[EXPORT_MAXD + 2]; /* -1: not fixed */
    const char *in_param[EXPORT_MAXD + 2];
    int64_t out_dim[EXPORT_MAXD + 2];
    int in_type, out_type; /* ONNX element types */
    const char *in_name, *out_name;
    int out_index;
    int opset;     /* of the default domain */
    int per_image; /* batch fixed at 1 (or --per-image): one image per call */
} export_network;

/* ---- the window layout (export_layout.c) ---------------------------------------------- */
typedef struct export_layout {
    int d;
    int64_t roi[EXPORT_MAXD];
    double overlap[EXPORT_MAXD], sigma[EXPORT_MAXD];
    int64_t step[EXPORT_MAXD]; /* --dynamic: the window step the graph uses */
    float *weights;            /* [*roi], swi_weights */
    int64_t roi_vox;
    /* --size only: */
    int64_t size[EXPORT_MAXD], padded[EXPORT_MAXD], before[EXPORT_MAXD], after[EXPORT_MAXD];
    int any_pad;
    int64_t *pad_map[EXPORT_MAXD]; /* swi_pad_map, where a Gather pads that axis; else NULL */
    int64_t n_win[EXPORT_MAXD], windows;
    int64_t *starts[EXPORT_MAXD]; /* swi_window_starts */
} export_layout;

/* ---- one run of the command ------------------------------------------------------------- */
typedef struct export_job {
    arena A;
    jmp_buf oom;
    int counter;  /* unique generated names, shared by every graph builder */
    swi_ctx *swi; /* for the library's layout functions and their messages */
    export_options opt;
    export_network net;
    export_layout layout;
    char err[2048];
    int status; /* exit status for err: 1 failure, 2 usage */
} export_job;

/** Record a failure (exit status `status`, message printf-style); returns -1. */
int export_fail(export_job *job, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Parse argv into job->opt. 0: go on; 1: --help was printed; -1: error in job->err. */
int export_parse_args(export_job *job, int argc, char **argv);
extern const char *const export_pad_names[4]; /* by swi_pad */
const char *export_mode_name(swi_blend mode);

/** Check job->net.model and fill job->net. 0 or -1 (job->err). */
int export_inspect_network(export_job *job);
/** Prefix every name of g and its subgraphs with p. */
void export_prefix_names(arena *A, Onnx__GraphProto *g, const char *p);

/** Fill job->layout from the options and the network through libswi. 0 or -1 (job->err). */
int export_plan_layout(export_job *job);
/** Voxels of one volume of --size. */
int64_t export_volume_voxels(const export_layout *L);
/** --size: the count map over the cropped volume [*size], as swi_run blends it. */
float *export_count_map(export_job *job);

/** The whole pipeline as a model (from job->opt, net, layout). */
Onnx__ModelProto *export_build_model(export_job *job);

/* ---- small graph helpers (export_ops.c) ------------------------------------------------- */
const char *const_i64(gbuild *g, int n, const int64_t *v); /* int64 [n] */
const char *const_i64_1(gbuild *g, int64_t a);             /* int64 [1] */
const char *const_i64_scalar(gbuild *g, int64_t a);        /* int64 [] */
const char *const_i64_zeros(gbuild *g, int n);             /* int64 [n] of 0, n <= 8 */
const char *const_scalar_of_type(gbuild *g, int elem_type, double v);
const char *op_cast(gbuild *g, const char *v, int to, const char *out);
const char *op_min_i64(gbuild *g, const char *a, const char *b);
const char *op_scalar(gbuild *g, const char *vec1); /* [1] -> [] */
const char *op_concat0(gbuild *g, int n, const char *const *in);
const char *op_filled(gbuild *g, const char *shape, int elem_type, double v);

/* ---- the window loops (export_windows.c) ------------------------------------------------ */
/* What the window loops read: built once in the main graph, shared by every loop body. */
typedef struct window_loops {
    export_job *job;
    const export_layout *L;
    gbuild *main; /* constants and shared values live there */
    int d, dynamic, count, gaussian, out_type;
    int64_t classes;
    const char *src;   /* the (padded) images the windows are sliced from */
    const char *batch; /* [1]: batch of the accumulators */
    const char *c_roi, *c_axes_sp, *c_weights, *c_true, *zero1;
    const char *trip[EXPORT_MAXD];                  /* scalar trip count of each axis' loop */
    const char *Pk[EXPORT_MAXD], *Pmr[EXPORT_MAXD]; /* [1]: P_k and P_k - r_k */
    const char *starts_k[EXPORT_MAXD];              /* --size: window starts along axis k [n_k] */
    const char *s1[EXPORT_MAXD];                    /* [1]: the current window's start along axis k */
    Onnx__GraphProto *net;                          /* the network, its names already prefixed */
    const char *net_in, *net_out;
} window_loops;

/** Nested Loops accumulating every window of wl->src (or, count = 1, the weights). */
const char *windows_nested(window_loops *wl, gbuild *g);
/** An outer Loop over the N images, each through the nested loops with batch 1. */
const char *windows_per_image(window_loops *wl, const char *images, const char *n_images);
/** No Loop: all windows through the network at once, folded by unrolled Pad/Add. */
const char *windows_unrolled(window_loops *wl, const char *n_images);

#endif
