/*
 * swi.h -- libswi, sliding-window inference for dense-prediction networks.
 *
 * This header is the whole public interface and its manual.
 *
 * A network sees a fixed window (the ROI); a volume is larger. libswi tiles the
 * volume with overlapping windows, hands them to your predictor in batches,
 * blends the overlapping predictions with a weight map and delivers the
 * stitched result -- with exactly the semantics of MONAI 1.4's
 * sliding_window_inference (written out step by step in docs/semantics.md), but
 * streamed: every
 * region is reduced (argmax, max, confidence, entropy, your own function) as
 * soon as the last window covering it has landed, so partial sums exist only
 * for the open frontier, never for the whole volume.
 *
 * The common call:
 *
 *     // example:begin
 *     swi_params p;
 *     swi_params_init(&p, 3);                 // 3 spatial dims, MONAI defaults
 *     p.roi[0] = p.roi[1] = p.roi[2] = 96;
 *     p.mode = SWI_BLEND_GAUSSIAN;
 *     swi_ctx *ctx = swi_create();
 *     swi_tensor in = { .data = volume, .batch = 1, .channels = 1, .dims = 3, .size = { D, H, W } };
 *     swi_output out = { .head = 0, .reduce = SWI_REDUCE_ARGMAX,
 *                        .dst = labels, .dst_bytes = D * H * W };
 *     swi_predictor net = { my_predict, my_state };
 *     if (swi_run(ctx, &p, &in, &net, &out, 1) != SWI_OK)
 *         fprintf(stderr, "%s\n", swi_last_error(ctx));
 *     swi_free(ctx);
 *     // example:end
 *
 * Conventions
 *  - Tensors are float32, C order (last index fastest): inputs
 *    [batch, channels, *spatial], predictor outputs [n, channels, *spatial].
 *  - Every function that can fail returns an swi_status and, when given a context,
 *    leaves there a message naming the offending parameter (swi_last_error). The
 *    pure layout functions take the context as an optional first argument (NULL:
 *    status only). The library never prints, never exits and never aborts.
 *  - Distinct contexts may be used on distinct threads at the same time; one
 *    context is not to be used by two threads at once.
 *  - Sizes are int64_t (element counts) or size_t (bytes) and every product is
 *    overflow-checked (SWI_ERR_OVERFLOW).
 *  - NaN and Inf are data, not errors: input values reach the predictor as given
 *    (padding uses cval), predictor outputs are blended as the reference blends them (a
 *    NaN output makes its voxel's blended score NaN), ARGMAX ranks NaN above every number
 *    (the first NaN wins) and MAX / SOFTMAX are NaN there. The library never replaces or
 *    judges values; check inputs first where that matters.
 *  - Stability: the API (names, meanings, source compatibility) is stable within
 *    a minor version; the ABI is not promised before 1.0: the caller-allocated
 *    structs (swi_params, swi_output, swi_plan, ...) may grow between minor
 *    versions, so a program is rebuilt against the header of the library it runs
 *    with (the shared library's soname carries the major version). Always fill
 *    structs through their *_init function (or zero them) before setting fields:
 *    every zero field means "default".
 *    Changes: 0.2 made the part a box (swi_params.part_lo/part_hi became per-dim
 *    arrays, cutting any dims instead of rows of the first), a source-incompatible change.
 *
 * Limits (each checked, failing with a message that names it):
 *    SWI_MAX_DIMS spatial dims, SWI_MAX_HEADS predictor heads, SWI_MAX_OUTPUTS
 *    outputs per run, SWI_MAX_THREADS workers, SWI_MAX_AXIS voxels along any axis
 *    (image or window), argmax labels over at most 65536 channels (uint16); every
 *    byte size must fit in size_t and every element count in int64_t.
 */
#ifndef SWI_H
#define SWI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SWI_VERSION_MAJOR 0
#define SWI_VERSION_MINOR 2
#define SWI_VERSION_PATCH 0
#define SWI_VERSION_STRING "0.2.0"

/** Largest number of spatial dims (1 to 4 are supported). */
#define SWI_MAX_DIMS 4
/** Largest number of predictor heads (outputs of one network call). */
#define SWI_MAX_HEADS 8
/** Largest number of swi_output entries in one run. */
#define SWI_MAX_OUTPUTS 1024
/** Largest number of worker threads (swi_params.threads). */
#define SWI_MAX_THREADS 1024
/** Largest size of one axis, image or window, in voxels (2^31). */
#define SWI_MAX_AXIS ((int64_t)1 << 31)

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */
/* ------------------------------------------------------------------------- */

typedef enum swi_status {
    SWI_OK = 0,
    SWI_ERR_INVALID_ARG = 1, /**< a parameter is out of range; the message names it */
    SWI_ERR_NOMEM = 2,       /**< an allocation failed */
    SWI_ERR_OVERFLOW = 3,    /**< a size does not fit in int64_t / size_t */
    SWI_ERR_PREDICTOR = 4,   /**< the predictor callback reported failure */
    SWI_ERR_SHAPE = 5,       /**< a predictor output disagrees with the declared or first shape,
                                  or cannot be placed (non-integral zoom) */
    SWI_ERR_BUDGET = 6,      /**< max_memory is below the smallest plan; the message says the minimum */
    SWI_ERR_CALLBACK = 7,    /**< a region callback returned non-zero */
    SWI_ERR_CANCELLED = 8,   /**< the progress callback asked to stop */
    SWI_ERR_THREAD = 9,      /**< a worker thread could not be started */
    SWI_ERR_READ = 10,       /**< the input's reader reported failure */
    SWI_ERR_IO = 11          /**< a file could not be read or written (the I/O and backend libraries) */
} swi_status;

/** Short constant name of a status ("SWI_ERR_NOMEM"); never NULL. */
const char *swi_status_name(swi_status s);

/** Library version as "MAJOR.MINOR.PATCH". */
const char *swi_version(void);

/** A byte count for people, in binary units to three significant digits ("512 B",
 *  "1.50 KiB", "45.8 MiB", "128 GiB"): the one formatter every libswi message uses. Writes
 *  at most len bytes (32 is always enough) and returns buf. */
const char *swi_format_bytes(size_t bytes, char *buf, size_t len);

/** Make a message one line, in place: every control byte (newlines and tabs from a
 *  dependency's message, bytes of a file name) becomes a space and trailing spaces go.
 *  Every libswi error message passes through it. Returns msg; NULL is fine. */
char *swi_message_one_line(char *msg);

/* ------------------------------------------------------------------------- */
/* Parameters                                                                */
/* ------------------------------------------------------------------------- */

typedef enum swi_blend {
    SWI_BLEND_CONSTANT = 0,       /**< every window voxel weighs 1 */
    SWI_BLEND_GAUSSIAN = 1,       /**< separable gaussian, sigma = sigma_scale * roi, floored at
                                 max(min weight, 1e-3) -- MONAI's importance map */
    SWI_BLEND_CUSTOM = 2,         /**< the caller's weight_map [*roi], all values finite and > 0 */
    SWI_BLEND_GAUSSIAN_NNUNET = 3 /**< nnU-Net v2's importance map (compute_gaussian): the
                                 separable gaussian centred on voxel roi/2 (rounded down),
                                 sigma = sigma_scale * roi, zero farther than
                                 int(4 sigma + 0.5) voxels from the centre along an axis
                                 (scipy's gaussian_filter radius), those zeros raised to the
                                 smallest nonzero weight; 1 at the centre */
} swi_blend;

/** How the window starts along an axis are laid out (docs/semantics.md, step 3-4). */
typedef enum swi_grid {
    SWI_GRID_MONAI = 0, /**< MONAI's: step floor(roi * (1 - overlap)) (at least 1), the last start
                             moved back to padded - roi (the default) */
    SWI_GRID_NNUNET = 1 /**< nnU-Net v2's compute_steps_for_sliding_window for its tile_step_size t
                             (swi_params.tile_step; where that is 0, t = 1 - overlap, which in double
                             is not always the step meant: 1 - (1 - 0.2) != 0.2): n =
                             ceil((padded - roi) / (roi * t)) + 1 starts spread evenly, start i =
                             round(i * (padded - roi) / (n - 1)) (half to even, as numpy), all in
                             double as Python computes them; repeated starts, possible only for
                             roi * t < 1, are kept once (a repeated window adds the same weighted
                             prediction to the sum and its weight to the count, so the blend is
                             unchanged) */
} swi_grid;

typedef enum swi_pad {
    SWI_PAD_CONSTANT = 0,  /**< fill with cval */
    SWI_PAD_REFLECT = 1,   /**< mirror without repeating the edge (pad must be < size) */
    SWI_PAD_REPLICATE = 2, /**< repeat the edge voxel */
    SWI_PAD_CIRCULAR = 3   /**< wrap around */
} swi_pad;

/** Whether the predictor call for batch k+1 overlaps the blending of batch k. */
typedef enum swi_pipeline {
    SWI_PIPELINE_AUTO = 0, /**< on when it fits max_memory and the second window buffer adds at
                                most 1/8 to the planned peak (the default) */
    SWI_PIPELINE_OFF = 1,  /**< never: one window buffer */
    SWI_PIPELINE_ON = 2    /**< always: twice the window buffers */
} swi_pipeline;

/** How the window loop order is chosen. */
typedef enum swi_order_mode {
    SWI_ORDER_AUTO = 0, /**< the order with the smallest planned frontier (the default) */
    SWI_ORDER_FIXED = 1 /**< swi_params.order, outermost axis first; {0, 1, ..., dims-1} is
                             the reference's enumeration (last dim fastest) */
} swi_order_mode;

/** Whether windows with bitwise-identical inputs may share one predictor output. */
typedef enum swi_reuse {
    SWI_REUSE_OFF = 0, /**< every window reaches the predictor (the default) */
    SWI_REUSE_ON = 1   /**< the caller declares the predictor deterministic: the same window input
                            gives bitwise the same output, whatever else is in its batch. A window
                            equal (byte for byte) to an earlier one of its batch, or to one kept in
                            the reuse cache, then gets that output without a predictor call, so
                            batches reaching the predictor may hold fewer windows (a batch whose
                            windows are all reused is not sent at all). Results are bitwise those
                            of a run without reuse. */
} swi_reuse;

/** What the partial sums (each open voxel's weighted scores and weight sum) are held in. */
typedef enum swi_accumulate {
    SWI_ACCUMULATE_FLOAT32 = 0, /**< float32 (the default): MONAI's precision */
    SWI_ACCUMULATE_FLOAT16 = 1  /**< IEEE binary16, as nnU-Net v2 accumulates (its predicted_logits
                                     and n_predictions): half the partial sums' bytes. Every add
                                     rounds to 11 significant bits (to nearest, ties to even), a sum
                                     beyond +-65504 becomes +-Inf and one below 6.1e-5 loses
                                     precision; the division and the outputs stay float32. Cells
                                     one window covers alone never enter the sums, so they are as
                                     in float32. Results differ from float32 in about the 4th
                                     significant digit, never in the grid, order or shapes. */
} swi_accumulate;

/** Declared shape of one predictor head. channels == 0 means "learn the whole shape from
 *  the first predictor call" (then checks that need it happen after that call). */
typedef struct swi_head_spec {
    int64_t channels;              /**< output channels (classes); 0 = learn */
    int64_t spatial[SWI_MAX_DIMS]; /**< output window size per dim; > 0 is enforced. A 0 means
                                        the roi size when channels are declared, else "learn".
                                        A size other than roi[k] is a zoomed head (z = spatial/roi). */
} swi_head_spec;

typedef struct swi_params {
    int dims;                           /**< spatial dims: 1 to SWI_MAX_DIMS */
    int64_t roi[SWI_MAX_DIMS];          /**< window size; <= 0 means the whole image along that dim */
    double overlap[SWI_MAX_DIMS];       /**< fraction of overlap in [0, 1); default 0.25 */
    swi_grid grid;                      /**< how starts follow from overlap; default SWI_GRID_MONAI */
    double tile_step[SWI_MAX_DIMS];     /**< SWI_GRID_NNUNET only: nnU-Net's tile_step_size in (0, 1],
                                            used as given (overlap is then ignored); 0 = 1 - overlap
                                            (the default). Give it rather than an overlap: the
                                            overlap 1 - t does not always give t back in double,
                                            and nnU-Net's start count can then differ by one.
                                            Nonzero with SWI_GRID_MONAI is SWI_ERR_INVALID_ARG. */
    swi_blend mode;                     /**< default SWI_BLEND_CONSTANT */
    double sigma_scale[SWI_MAX_DIMS];   /**< gaussian sigma / roi; default 0.125; must be > 0 */
    const float *weight_map;            /**< SWI_BLEND_CUSTOM only: [*roi], caller-owned */
    swi_pad padding_mode;               /**< used where roi > image; default SWI_PAD_CONSTANT */
    float cval;                         /**< fill value of SWI_PAD_CONSTANT; default 0 */
    int sw_batch_size;                  /**< windows per predictor call (>= 1); default 1 */
    int threads;                        /**< blending/reduction workers, 0..SWI_MAX_THREADS;
                                            0 = number of cores */
    swi_order_mode order_mode;          /**< default SWI_ORDER_AUTO */
    int order[SWI_MAX_DIMS];            /**< SWI_ORDER_FIXED: window loop order, outermost axis
                                            first, a permutation of 0..dims-1 */
    swi_pipeline pipeline;              /**< default SWI_PIPELINE_AUTO */
    swi_reuse reuse;                    /**< default SWI_REUSE_OFF */
    int reuse_cache;                    /**< SWI_REUSE_ON: window outputs kept for reuse across
                                            batches, 0..64; 0 = 1. A window is kept while a slot
                                            is free, then (replacing the least used) the second
                                            time its input is seen; each kept window costs
                                            its input and all its head outputs (counted by the
                                            planner; dropped to none to fit max_memory). */
    size_t max_memory;                  /**< peak-bytes budget for swi_run (input, window buffers,
                                            partial sums, outputs); 0 = unlimited. sw_batch_size and
                                            pipeline are lowered to fit, else SWI_ERR_BUDGET. */
    int64_t part_lo[SWI_MAX_DIMS];      /**< the part: a box of the output, see part_hi */
    int64_t part_hi[SWI_MAX_DIMS];      /**< compute only the box [part_lo[d], part_hi[d]) of the
                                            output (input voxels, d < dims), so that separate runs
                                            (processes, machines) each computing one box of a grid
                                            together give bitwise the whole run's result. Per dim:
                                            part_lo[d] == part_hi[d] == 0 is the whole of dim d
                                            (the default, all zeros: the whole output); otherwise
                                            0 <= part_lo[d] < part_hi[d] <= size[d], else
                                            SWI_ERR_INVALID_ARG naming the dim. Exactly the windows
                                            touching the box run (along each cut dim those meeting
                                            it: windows_total is the product of the per-dim
                                            counts), in the order the planner picks for the whole
                                            run at sw_batch_size, so every voxel sums its windows
                                            in the whole run's order. Outputs keep the whole grid;
                                            only the box's voxels are written (dst elsewhere is
                                            untouched), and regions lie inside the box. Partial
                                            sums are held for the box's own frontier (planned in
                                            bytes_partial): a box across the cross-section of the
                                            outermost loop axis needs less than the whole run.
                                            Heads must not be zoomed along a cut dim (one whose
                                            box is not the whole dim). */
    unsigned mirror_axes;               /**< test-time mirroring in the engine: bit k set mirrors
                                            spatial axis k (outermost first), below 1 << dims; 0
                                            (the default) is none. Every window then reaches the
                                            predictor 2^m times for m axes: as it is, then flipped
                                            along each non-empty subset of them in increasing mask
                                            order, each output flipped back in place and blended
                                            straight into the partial sums with weight w / 2^m
                                            (the weight sum gets w once), so no second output
                                            buffer is held -- the mean of the mirrorings, as
                                            swi_predictor_mirror computes it up to float
                                            rounding (the sums add w*x/2^m per run where the
                                            combinator sums x first). Heads are flipped along the
                                            same axes. With it every covered cell keeps partial
                                            sums (none is finished from one prediction), the
                                            predictor's calls and windows count each run, and
                                            reuse (SWI_REUSE_ON) is SWI_ERR_INVALID_ARG. A voxel
                                            adds the runs batch by batch, all windows' first
                                            runs first, so the last bits depend on
                                            sw_batch_size, and a part (part_lo/part_hi) needs
                                            sw_batch_size 1 to be bitwise the whole run's
                                            (SWI_ERR_INVALID_ARG otherwise). */
    swi_accumulate accumulate;          /**< the partial sums' type; default SWI_ACCUMULATE_FLOAT32 */
    int n_heads;                        /**< predictor heads, 1..SWI_MAX_HEADS; default 1 */
    swi_head_spec heads[SWI_MAX_HEADS]; /**< per-head declared shapes (zeros = learn) */
    /** Optional progress callback, called from the calling thread after each batch with the
     *  windows done and the total. Return non-zero to cancel (SWI_ERR_CANCELLED). */
    int (*progress)(void *user, int64_t windows_done, int64_t windows_total);
    void *progress_user;
} swi_params;

/** Fill p with MONAI's defaults for `dims` spatial dims (roi left at 0 = whole image). */
void swi_params_init(swi_params *p, int dims);

/* ------------------------------------------------------------------------- */
/* Tensors, predictor                                                         */
/* ------------------------------------------------------------------------- */

/** A source of input regions, for an input that is not held whole in memory (a chunked
 *  store, a file read on demand). `read` fills dst [channels, *(hi - lo)] (float32, C order)
 *  with the box [lo, hi) of image `image` (dims values each, in image coordinates, always
 *  inside the image) and returns 0; or returns non-zero, optionally with a message in
 *  `message` (message_size bytes), and the run stops with SWI_ERR_READ. It is called from
 *  the thread that called swi_run (or swi_plan_run, counting reuse), one call at a time,
 *  once per window: the box a window needs, clipped to the image, so at most one window of
 *  input is held at a time. */
typedef struct swi_reader {
    int (*read)(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst, char *message,
                size_t message_size);
    void *user;
} swi_reader;

/** A float32 input [batch, channels, *size]: either data, in C order and caller-owned, or
 *  (data NULL) a reader that supplies the regions the run needs. */
typedef struct swi_tensor {
    const float *data;
    int64_t batch;
    int64_t channels;
    int dims; /**< must equal swi_params.dims */
    int64_t size[SWI_MAX_DIMS];
    const swi_reader *reader; /**< used when data is NULL */
} swi_tensor;

/** One predictor call's windows; valid only during that call. */
typedef struct swi_batch swi_batch;

/** Windows in this call (1..sw_batch_size). */
int swi_batch_count(const swi_batch *b);
/** Spatial dims. */
int swi_batch_dims(const swi_batch *b);
/** Input channels. */
int64_t swi_batch_channels(const swi_batch *b);
/** Window size per dim (the effective roi, after "<= 0 means whole image"). */
const int64_t *swi_batch_roi(const swi_batch *b);
/** The windows, [count, channels, *roi] float32, padding already applied. */
const float *swi_batch_input(const swi_batch *b);
/** Image (batch index of the input tensor) that window i belongs to. */
int64_t swi_batch_image(const swi_batch *b, int i);
/** Start of window i per dim in the input image's coordinates (negative where the window
 *  begins in the padding). */
const int64_t *swi_batch_start(const swi_batch *b, int i);
/** Buffer for head `head`'s output, [count, channels, *spatial] float32, to be filled by the
 *  predictor. The shape must equal the declared one (or the first call's, when learned);
 *  on a mismatch or allocation failure it returns NULL and the predictor must return
 *  non-zero. Each head must be requested once per call. */
float *swi_batch_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial);
/** Instead of filling swi_batch_output's buffer, hand the engine head `head`'s finished
 *  output: data [count, channels, *spatial] float32, the same shape rules as
 *  swi_batch_output. The engine reads it in place (no copy, no second buffer) and calls
 *  release(user, data) once it no longer needs it: after the batch is blended, before the
 *  next predictor call, or when the run stops -- from the thread that called swi_run.
 *  Until then data must stay valid and unchanged. When the run pipelines (the next call
 *  overlaps this batch's blending) or some windows of the batch reuse outputs, the values
 *  are copied instead and release is called at once. Returns 0; or non-zero on a shape
 *  mismatch or a NULL data, and then release is not called and the predictor must return
 *  non-zero. Each head is given once per call, by this or by swi_batch_output. */
int swi_batch_set_output(swi_batch *b, int head, int64_t channels, const int64_t *spatial, const float *data,
                         void (*release)(void *user, const float *data), void *user);
/** Record why the predictor fails (copied; shown by swi_last_error). */
void swi_batch_set_error(swi_batch *b, const char *message);

/** The network. `predict` fills every head through swi_batch_output and returns 0, or
 *  returns non-zero on failure (the run stops with SWI_ERR_PREDICTOR and frees everything).
 *  It is called from the thread that called swi_run, one call at a time. */
typedef struct swi_predictor {
    int (*predict)(void *user, swi_batch *batch);
    void *user;
} swi_predictor;

/** Run another predictor on this call's windows (what combinators are made of): `inner` is
 *  called with a batch of the same count, dims, channels, roi, images and starts as b, whose
 *  input is `input` ([count, channels, *roi] float32, the caller's, read during the call;
 *  NULL: b's own) and whose head `head` goes to `output` ([count, channels, *spatial]
 *  float32, the caller's; `spatial` holds dims values). `channels` and `spatial` are the
 *  shape inner must give (inner learns nothing: it is the declared shape of its batch).
 *  inner fills it as usual: swi_batch_output returns `output` itself; swi_batch_set_output
 *  copies the data there and releases it at once. Other heads inner fills are accepted (any
 *  shape) and discarded. Nothing of b or its run changes -- b's heads, the learned shapes,
 *  the error message, the counts -- so the calling predictor still fills b's heads itself.
 *  Call it only during b's predictor call, on its thread; inner may call it in turn
 *  (combinators nest). It allocates nothing unless inner asks swi_batch_output for a head
 *  other than `head`. Returns SWI_OK, or SWI_ERR_INVALID_ARG (a NULL or out-of-range
 *  argument), SWI_ERR_OVERFLOW, SWI_ERR_SHAPE (inner gave another shape, asked for a head
 *  twice or returned 0 without filling `head`), SWI_ERR_NOMEM, SWI_ERR_PREDICTOR (inner
 *  returned non-zero), with one line in err (errlen bytes, always terminated; err may be
 *  NULL): inner's own message (swi_batch_set_error) when it failed and gave one, else one
 *  naming the fault. After a failure output may hold partial values. */
swi_status swi_batch_predict(swi_batch *b, const swi_predictor *inner, const float *input, int head,
                             int64_t channels, const int64_t *spatial, float *output, char *err,
                             size_t errlen);

/* ------------------------------------------------------------------------- */
/* Predictor combinators                                                     */
/* ------------------------------------------------------------------------- */

/* Predictors made of other predictors through swi_batch_predict: each fills head 0 with
 * `classes` channels of `spatial` (dims values: the output window, roi or zoomed) from
 * head 0 of the predictors it holds, whatever those are (a C callback, a Python module, an
 * ONNX model), and takes batches of at most max_batch windows (a larger batch fails the
 * run with a message; swi_plan_run's sw_batch_size says what a run uses). Each holds
 * scratch: made by its function (err receives one line on failure, errlen bytes; *out is
 * zeroed then), freed by its _free. The predictors held must outlive it; their arrays
 * are copied. A combinator is used by one run at a time. */

/** The mean of n >= 1 members (an ensemble): every window goes through each member in
 *  turn, the first writing straight into the output, the others into one batch of scratch
 *  (max_batch windows of the output) added to it in member order, then the sum divided by
 *  n -- the order a test comparing with a hand-made mean can follow bitwise. A NaN in the
 *  mean fails the run ("the ensemble's mean output is NaN; its labels would be
 *  meaningless"); a member's message, when one fails, is the run's. */
swi_status swi_predictor_mean(const swi_predictor *members, int n, int64_t classes, int dims,
                              const int64_t *spatial, int max_batch, swi_predictor *out, char *err,
                              size_t errlen);
/** Free what swi_predictor_mean made and zero *mean; anything else (NULL, a zeroed or
 *  another predictor) is left alone. */
void swi_predictor_mean_free(swi_predictor *mean);

/** Test-time mirroring: the mean of `inner` over the mirrorings of each window along every
 *  subset of `axes` (bit a: spatial axis a, outermost first; at least one, below 1 << dims),
 *  each prediction mirrored back: 2^k runs for k axes. Order: the plain run writes the
 *  output, then the mirrored runs in increasing subset mask (bit a for axis a) are added,
 *  then the sum is multiplied by 1 / 2^k -- libswi_ort's tta order, so with axes 7 on a
 *  3-D window the mirror of an ONNX model equals that model run with tta, bitwise. Scratch:
 *  one batch of the output at creation, one batch of mirrored input at the first call
 *  (grown if a later run has larger windows). Values are not judged (a NaN stays). */
swi_status swi_predictor_mirror(const swi_predictor *inner, unsigned axes, int64_t classes, int dims,
                                const int64_t *spatial, int max_batch, swi_predictor *out, char *err,
                                size_t errlen);
/** Let mirrors[1..n) use the scratch of mirrors[0], their own freed: mirrors made by
 *  swi_predictor_mirror for the same classes, dims, spatial and max_batch that never run at
 *  once -- the members of one swi_predictor_mean, which runs them one after another (an
 *  ensemble of n mirrored models then holds one mirror's scratch, not n). Results are
 *  unchanged. The scratch lives until the last of them is freed. SWI_ERR_INVALID_ARG (err
 *  says why) when one is not such a mirror; nothing is shared then. */
swi_status swi_predictor_mirror_share(swi_predictor *mirrors, int n, char *err, size_t errlen);

/** Free what swi_predictor_mirror made and zero *mirror; anything else is left alone. */
void swi_predictor_mirror_free(swi_predictor *mirror);

/* ------------------------------------------------------------------------- */
/* Outputs and reductions                                                    */
/* ------------------------------------------------------------------------- */

typedef enum swi_reduce {
    SWI_REDUCE_NONE = 0,       /**< the blended scores [batch, channels, *out] (MONAI's result) */
    SWI_REDUCE_ARGMAX = 1,     /**< label of the largest score [batch, *out]; lowest index wins
                                    ties; NaN ranks above every number (first NaN wins) */
    SWI_REDUCE_MAX = 2,        /**< the largest blended score (float32; NaN if any is NaN) */
    SWI_REDUCE_CONFIDENCE = 3, /**< softmax probability of the winner, 1/sum exp(x - max) */
    SWI_REDUCE_ENTROPY = 4,    /**< softmax entropy -sum p ln p, in nats */
    SWI_REDUCE_CUSTOM = 5,     /**< nothing stored: on_region receives the blended scores */
    SWI_REDUCE_SOFTMAX = 6     /**< softmax over channels of the blended scores [batch, channels,
                                    *out], float32, exp(x - max) / sum exp(x - max), computed per
                                    region as it completes; all NaN where any score is NaN */
} swi_reduce;

typedef enum swi_dtype {
    SWI_DTYPE_AUTO = 0, /**< float32, or for argmax uint8 up to 256 channels else uint16 */
    SWI_DTYPE_FLOAT32 = 1,
    SWI_DTYPE_UINT8 = 2,
    SWI_DTYPE_UINT16 = 3
} swi_dtype;

/** A completed region handed to a callback. Bounds are in the output grid of its head
 *  (cropped: the same grid as the stored result), hi exclusive. */
typedef struct swi_region {
    int output; /**< index into the swi_output array */
    int head;
    int64_t image; /**< batch index */
    int dims;
    int64_t lo[SWI_MAX_DIMS];
    int64_t hi[SWI_MAX_DIMS];
    int64_t channels; /**< planes in data: head channels (NONE, SOFTMAX, CUSTOM) or 1 */
    swi_dtype dtype;  /**< of data */
    const void *data; /**< [channels, *(hi - lo)] C order; valid during the call */
} swi_region;

/** Region callback: return 0 to go on, non-zero to stop the run (SWI_ERR_CALLBACK). It may
 *  be called from worker threads, concurrently for different regions. */
typedef int (*swi_region_fn)(void *user, const swi_region *region);

/** One result of a run. Several outputs may name the same head (several reductions in one
 *  pass). Where the values go:
 *   - dst != NULL: the whole result is written there (dst_bytes must be large enough);
 *   - else on_region != NULL: regions are handed to the callback and nothing is kept;
 *   - else the library allocates it; read it with swi_result() until the next run/free.
 *  on_region, if set, is also called when dst is set (after the region is stored). */
typedef struct swi_output {
    int head;
    swi_reduce reduce;
    swi_dtype dtype; /**< AUTO, or UINT8/UINT16 for ARGMAX, FLOAT32 otherwise */
    void *dst;
    size_t dst_bytes;
    swi_region_fn on_region;
    void *user;
} swi_output;

/** Zero an output and set its head and reduction. */
void swi_output_init(swi_output *o, int head, swi_reduce reduce);

/* ------------------------------------------------------------------------- */
/* Context, planning, running                                                */
/* ------------------------------------------------------------------------- */

typedef struct swi_ctx swi_ctx;

/** New context, or NULL when out of memory. */
swi_ctx *swi_create(void);
/** Free a context and everything it allocated (library-owned results too). NULL is fine. */
void swi_free(swi_ctx *ctx);
/** Message of the last failure on this context ("" after success); owned by ctx. */
const char *swi_last_error(const swi_ctx *ctx);

/** What a run will do and need, computed without running or allocating big buffers. */
typedef struct swi_plan {
    int dims;
    int64_t roi[SWI_MAX_DIMS];    /**< effective window */
    int64_t padded[SWI_MAX_DIMS]; /**< padded image size P_k */
    int64_t pad_before[SWI_MAX_DIMS];
    int64_t windows_per_axis[SWI_MAX_DIMS];
    int64_t windows_per_image;
    int64_t windows_total; /**< windows that run: windows_per_image * batch, or with
                                              a part those touching its box */
    int64_t predictor_calls;
    int sw_batch_size; /**< after fitting the budget */
    int pipeline;      /**< 0 or 1: pipelining chosen, after fitting the budget */
    int threads;
    int order[SWI_MAX_DIMS];              /**< window loop order chosen, outermost first */
    int64_t head_channels[SWI_MAX_HEADS]; /**< 0 where still unknown */
    swi_dtype label_dtype[SWI_MAX_HEADS]; /**< what an SWI_DTYPE_AUTO argmax of each head stores:
                                              UINT8 up to 256 channels, else UINT16; AUTO while
                                              the head's channels are unknown */
    size_t bytes_input;                   /**< the caller's input tensor (0 for a reader: its window box
                                              is counted in bytes_scratch) */
    size_t bytes_windows;                 /**< window input + predictor output buffers */
    size_t
        bytes_partial; /**< partial sums of the open frontier at their peak, with the allocator's fragmentation allowance */
    size_t bytes_outputs;   /**< stored results (caller's or library's) */
    size_t bytes_scratch;   /**< per-thread scratch and bookkeeping */
    size_t bytes_reuse;     /**< the reuse cache (SWI_REUSE_ON) */
    size_t bytes_peak;      /**< sum of the above: the predicted peak */
    size_t bytes_min;       /**< smallest peak any batch/pipeline choice gives */
    int reuse_cache;        /**< window outputs the reuse cache keeps, after fitting */
    int64_t windows_reused; /**< SWI_REUSE_ON with input->data given: windows that will
                                              not reach the predictor (found by reading every
                                              window once, as the run will); else 0 */
} swi_plan;

/** What the last swi_run did (also a failed or cancelled one: its counts so far). */
typedef struct swi_stats {
    int64_t windows_total;     /**< windows of the run */
    int64_t windows_predicted; /**< windows that reached the predictor */
    int64_t windows_reused;    /**< windows that took a reused output (SWI_REUSE_ON) */
    int64_t predictor_calls;   /**< calls made */
    size_t bytes_partial_peak; /**< largest bytes of partial sums held at once (the plan's
                                    bytes_partial less the allocator's allowance) */
} swi_stats;

/** Plan a run of `input` with `params` and `outputs` (shapes only are read; input->data may be
 *  NULL). Head channels not declared in params are taken as unknown: their partial sums and
 *  outputs are then counted as 0 bytes. Fails like swi_run would on bad parameters or a
 *  budget that cannot be met. */
swi_status swi_plan_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                        const swi_output *outputs, int n_outputs, swi_plan *plan);

/** Run sliding-window inference. Blocks until done. On failure nothing is reported as
 *  complete: library-owned results are dropped (caller-owned dst may hold partial data). */
swi_status swi_run(swi_ctx *ctx, const swi_params *params, const swi_tensor *input,
                   const swi_predictor *predictor, const swi_output *outputs, int n_outputs);

/** Counts of the last swi_run on ctx (zeros before any). */
swi_status swi_run_stats(const swi_ctx *ctx, swi_stats *stats);

/** Library-owned result of output `index` of the last successful run (its dst and
 *  on_region were NULL), or NULL. *bytes receives its size when bytes != NULL. Read-only:
 *  ask for SWI_REDUCE_SOFTMAX (or use on_region) rather than transforming it in place.
 *  Shape: [batch, channels, *out] for NONE and SOFTMAX, [batch, *out] otherwise;
 *  out = result_size. */
const void *swi_result(const swi_ctx *ctx, int index, size_t *bytes);
/** Output grid (cropped) of head `head` in the last plan or run; returns dims, 0 if unknown. */
int swi_result_size(const swi_ctx *ctx, int head, int64_t size[SWI_MAX_DIMS]);
/** Channels of head `head` in the last run (learned or declared), 0 if unknown. */
int64_t swi_result_channels(const swi_ctx *ctx, int head);

/* ------------------------------------------------------------------------- */
/* Layout arithmetic (pure functions, exposed for exporters and tests)        */
/* ------------------------------------------------------------------------- */

/** Window starts along one axis of `size` voxels for window `roi` (> 0) and `overlap` in
 *  [0, 1), in padded coordinates (padded size max(size, roi)): semantics steps 3-4. *count
 *  receives how many there are; at most `cap` are written to `starts` (cap 0 and starts
 *  NULL to ask for the count). ctx, if not NULL, receives the message of a failure. */
swi_status swi_window_starts(swi_ctx *ctx, int64_t size, int64_t roi, double overlap, int64_t *starts,
                             int64_t cap, int64_t *count);

/** The same for any grid: swi_window_starts is swi_grid_starts with SWI_GRID_MONAI. With
 *  SWI_GRID_NNUNET the tile step is 1 - overlap (see swi_nnunet_starts). */
swi_status swi_grid_starts(swi_ctx *ctx, swi_grid grid, int64_t size, int64_t roi, double overlap,
                           int64_t *starts, int64_t cap, int64_t *count);

/** SWI_GRID_NNUNET's starts for nnU-Net's tile_step_size `tile_step` in (0, 1] itself (what
 *  swi_params.tile_step gives swi_run): nnU-Net's compute_steps_for_sliding_window((padded,),
 *  (roi,), tile_step), each start once. Arguments and results as swi_window_starts. */
swi_status swi_nnunet_starts(swi_ctx *ctx, int64_t size, int64_t roi, double tile_step, int64_t *starts,
                             int64_t cap, int64_t *count);

/** Padding of one axis of `size` voxels for window `roi` (> 0), semantics step 2:
 *  *padded = max(size, roi), *before = floor((padded - size) / 2), and map[j] for
 *  j < min(cap, padded) = the input index that padded coordinate j reads under `mode`, or
 *  -1 where SWI_PAD_CONSTANT fills cval. map may be NULL with cap 0; padded and before may
 *  be NULL. Fails for reflect padding that is not smaller than the image, as swi_run does. */
swi_status swi_pad_map(swi_ctx *ctx, swi_pad mode, int64_t size, int64_t roi, int64_t *map, int64_t cap,
                       int64_t *padded, int64_t *before);

/** Importance map [*roi] for SWI_BLEND_CONSTANT or SWI_BLEND_GAUSSIAN, bit-exact with the
 *  blending weights swi_run uses (semantics step 5). roi values must be in 1..SWI_MAX_AXIS
 *  and sigma_scale (gaussian) finite and > 0, as swi_run checks them. */
swi_status swi_weights(swi_ctx *ctx, swi_blend mode, int dims, const int64_t *roi, const double *sigma_scale,
                       float *out);

#ifdef __cplusplus
}
#endif
#endif /* SWI_H */
