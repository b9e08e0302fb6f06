/*
 * swi_pipeline.h -- a whole segmentation job on real scans: the library behind
 * `swi segment` and `swi plan`, for any program.
 *
 * A job reads its inputs (NIfTI, NRRD, MetaImage, a DICOM series folder, Zarr, OME-Zarr or
 * HDF5 stores; one channel per input, every frame of a 4-D file a channel), preprocesses
 * them (clip, scale, z-score), brings them to the model's axis codes and voxel spacing and
 * streams every result back to the input's grid, runs one or more ONNX models through
 * swi_ort or the caller's predictors (several are an ensemble: the mean of their outputs is
 * blended), optionally with
 * test-time mirroring, over the whole output or one part (a box) of it, and writes the
 * outputs (labels, scores, a PNG preview, an HTML review page; files or stores), all
 * under one memory budget. A model's card (m.json beside m.onnx, or
 * its metadata_props "swi.card") fills what the spec leaves unset.
 *
 * Outputs appear only when complete: each is written to a temporary beside its final
 * path and all are committed together; an existing output is refused without `force`, and
 * an output that is, holds or lies inside an input (a model, the card, an ensemble member)
 * under any name is refused always. On any failure nothing is left behind.
 *
 *     // example:begin
 *     swi_job_spec spec;
 *     swi_job_spec_init(&spec);
 *     spec.models[spec.n_models++] = "unet.onnx";
 *     spec.inputs[spec.n_inputs++] = "ct.nii.gz";
 *     spec.output = "seg.nii.gz";
 *     spec.orientation = "RAS";
 *     spec.spacing[0] = spec.spacing[1] = spec.spacing[2] = 1.5;
 *     char err[SWI_JOB_ERRLEN];
 *     swi_job *job = NULL;
 *     if (swi_job_open(&spec, NULL, &job, err, sizeof err) != SWI_OK ||
 *         swi_job_run(job, NULL, err, sizeof err) != SWI_OK)
 *         fprintf(stderr, "%s\n", err);
 *     swi_job_free(job);
 *
 *     // every scan of a folder, the model loaded once: scans/CASE.nii.gz -> labels/CASE.nii.gz
 *     spec.n_inputs = 0;
 *     spec.output = NULL;
 *     swi_folder_spec fs;
 *     swi_folder_spec_init(&fs);
 *     fs.job = &spec;
 *     fs.input_dir = "scans";
 *     fs.output_dir = "labels";
 *     swi_folder *folder = NULL;
 *     swi_folder_result res;
 *     if (swi_folder_open(&fs, NULL, &folder, err, sizeof err) != SWI_OK ||
 *         swi_folder_run(folder, &res, err, sizeof err) != SWI_OK)
 *         fprintf(stderr, "%s\n", err);
 *     else
 *         printf("%d done, %d failed, %d skipped\n", res.done, res.failed, res.skipped);
 *     swi_folder_free(folder);
 *     // example:end
 *
 * Link with pkg-config's swi-pipeline (or CMake's swi::pipeline). Every function returns
 * SWI_OK or a status of swi.h with one line in err (no trailing newline) naming the file,
 * the option or the model; SWI_ERR_INVALID_ARG is a usage error (a bad spec), the others
 * are failures of the run. Nothing here prints unless hooks->message is NULL (then warnings
 * go to stderr) and nothing here exits or installs signal handlers.
 */
#ifndef SWI_PIPELINE_H
#define SWI_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"
#include "swi_io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SWI_JOB_MAX_INPUTS 16
#define SWI_JOB_MAX_MODELS 16
#define SWI_JOB_ERRLEN 768 /**< enough for every message */

/** What a job does. Fill it after swi_job_spec_init; every name is borrowed (it must live
 *  until swi_job_free). A field left at its initial "unset" value takes the model card's
 *  value, else the engine's default (swi_params_init). Messages name the command line's
 *  flags (--roi, --head, ...): each is the field of that name. */
typedef struct swi_job_spec {
    /* ---- inputs ---- */
    const char *inputs[SWI_JOB_MAX_INPUTS]; /**< volumes, DICOM series folders or stores */
    int n_inputs;

    /* ---- predictors ---- */
    const char *models[SWI_JOB_MAX_MODELS]; /**< ONNX models; models[0] carries the card */
    int n_models;
    int no_card;    /**< ignore the model's card */
    int tta;        /**< test-time mirroring: the mean over the 8 flips of the window */
    int head;       /**< which output of a multi-output model (0) */
    int cuda;       /**< non-zero: ONNX Runtime's CUDA provider (0: the CPU) */
    int no_rewrite; /**< load the ONNX model as it is (no ConvTranspose rewrite) */

    /* who runs the ONNX model (pipeline/dnnl_choice.c) */
    const char *backend;   /**< "auto" (NULL: the default), "ort" or "dnnl" */
    const char *precision; /**< "fp32" (NULL: the default) or "bf16" (the dnnl backend only) */

    /** Instead of ONNX models, the caller's predictors (borrowed: they must outlive the job),
     *  1..SWI_JOB_MAX_MODELS; models then names at most one model, for its card only. Each
     *  fills head 0 with `classes` channels of the window ([n, classes, *roi]); several are an
     *  ensemble (swi_predictor_mean), tta mirrors each (swi_predictor_mirror) before the mean,
     *  as the ONNX path orders it. roi is required (or the card's); every window reaches them
     *  (no reuse: they are not known to be deterministic); cuda, no_rewrite do not apply. */
    const swi_predictor *predictors;
    int n_predictors;
    int64_t classes; /**< with predictors: the channels they give (>= 1); else 0 */

    /* ---- preprocessing (per channel, in this order) ---- */
    int clip_given;
    double clip[2]; /**< clamp to [lo, hi] */
    int scale_given;
    double scale[4];    /**< (a_min, a_max, b_min, b_max): MONAI's ScaleIntensityRange */
    int zscore;         /**< (x - mean) / std over the channel */
    int nonfinite_fail; /**< refuse inputs with NaN/Inf voxels (else they read as 0 and warn) */

    /* ---- the model's grid ---- */
    const char *orientation; /**< the model's axis codes ("RAS"), or NULL: the input's */
    double spacing[3];       /**< the model's voxel size in mm; 0: the input's */

    /* ---- the window (0 / negative / -1: unset) ---- */
    int64_t roi[3];        /**< 0,0,0: the card's, else the model's fixed window; else the
                                 window, 0 or -1 on an axis: the whole axis */
    double overlap[3];     /**< < 0: unset (default 0.25) */
    int mode;              /**< swi_blend, or -1: unset (constant) */
    double sigma_scale[3]; /**< < 0: unset (0.125) */
    int padding;           /**< swi_pad, or -1: unset (constant) */
    double cval;           /**< NaN: unset (0) */
    int sw_batch;          /**< windows per network call (1) */
    int no_reuse;          /**< every window reaches the network */
    int reuse_cache;       /**< window outputs kept for reuse (0: the engine's default) */

    /* ---- the part ---- */
    int shard_part, shard_parts; /**< part I of N (shard_parts 0: the whole job); stores only */
    int shard_grid[3];           /**< the parts as a grid A x B x C (0: slabs along the outer axis) */
    int shard_init;              /**< only create the shared output stores */
    /** The parts run at once as processes of one job (MPI ranks: shard_part is the rank):
     *  part 0 creates the stores, the others join them after hooks->all_ok. */
    int shard_collective;
    /** The store outputs' spatial chunk (--chunks A,B,C; each clipped to the size); 0,0,0:
     *  the first input's chunk when it is a store, else the default (64 each, see
     *  swi_store_default_chunk). Labels and scores take the same chunk. */
    int64_t chunks[3];

    /* ---- the region of interest (docs/regions.md): exactly the windows of the whole run
     * that touch it run, in the whole run's grid and order, so its voxels get the whole
     * run's values bitwise; the voxels outside it are background (0) or keep_outside's.
     * At most one of region, region_mm and region_mask. ---- */
    int region_given;                   /**< region_lo/region_hi: a box of input voxels */
    int64_t region_lo[3], region_hi[3]; /**< in the input's array order, hi exclusive */
    int region_mm_given;                /**< region_mm_lo/region_mm_hi: a box in the input's
                                             scanner millimetres (RAS+, its affine's space),
                                             taken as the voxel box covering it */
    double region_mm_lo[3], region_mm_hi[3];
    const char *region_mask;  /**< a volume on the input's grid: the bounding box of its
                                  nonzero voxels is the region */
    double margin_mm;         /**< the region grown by this many mm on every side (0) */
    const char *keep_outside; /**< a label map on the input's grid whose values the voxels
                                   outside the region keep (NULL: 0) */

    /* ---- outputs (NULL: not written) ---- */
    const char *output;       /**< labels: a volume file, or a store (x.zarr, x.ome.zarr, x.h5:/ds) */
    const char *scores;       /**< blended scores (softmax with `softmax`), float32, classes last */
    const char *preview;      /**< PNG of the middle slices */
    const char *report;       /**< HTML review page (report/swi_report.h) */
    const char *report_title; /**< its heading; NULL: the input's name */
    /** per-class statistics as JSON (voxels, volume, bounding box in mm, the first input's
     *  intensity at the class's voxels: docs/cli.md --statistics), gathered as the labels are
     *  made (an nnU-Net job's too: tile by tile as its labels come back); not with
     *  --input-dir (folders) or --shard */
    const char *statistics;
    /** a folder of one binary mask a class (DIR/NAME.nii.gz, uint8, the background left
     *  out, NAME the card's class name), written whole or not at all; file outputs only */
    const char *masks;
    int keep_statistics; /**< swi_job_run's keep also receives them (no file needed) */
    int softmax;         /**< the scores (file or kept) as softmax probabilities */
    int keep_scores;     /**< swi_job_run's keep also receives the scores (no file needed) */
    int force;           /**< replace existing outputs (never an input) */
    int quiet;           /**< no notes through hooks->message (the summary line); warnings still come */

    /* ---- an nnU-Net model directory as models[0] (swi convert nnunet's: fold_N.onnx and
     * nnunet.json; docs/semantics-nnunet.md): the job runs nnU-Net v2's whole inference with
     * the card's settings. Options that contradict it (orientation, spacing, clip, scale,
     * zscore, roi, overlap, mode, sigma_scale, padding, cval, tta, head, shards, scores,
     * preview, report, stores) are refused naming the flag. ---- */
    const char *folds;      /**< "0,1": those of the card's folds (nnUNetv2_predict -f); NULL: all */
    int no_mirroring;       /**< --disable-tta: no mirroring over the card's mirroring_axes */
    double tile_step;       /**< --tile-step-size in (0, 1]; 0: the card's (0.5) */
    int accumulate_float16; /**< --accumulate float16: the blend's partial sums in binary16, as
                                 nnU-Net accumulates (SWI_ACCUMULATE_FLOAT16: half their bytes;
                                 probabilities within about 1e-3 of float32's) */
    int save_probabilities; /**< also OUT.npz (`probabilities` float32 [K, reader axes]) and
                                 OUT.json (nnU-Net's properties) beside output (needs libzip) */

    /* ---- resources ---- */
    int threads;       /**< 0: every core */
    size_t max_memory; /**< bytes for everything the job holds; 0: what is available */
} swi_job_spec;

/** Fill the defaults: nothing set, every window field unset. */
void swi_job_spec_init(swi_job_spec *spec);

/** How a job talks back. Every member may be NULL. */
typedef struct swi_job_hooks {
    /** Warnings and notes, one line each (no newline). NULL: "swi: LINE" on stderr. */
    void (*message)(void *user, const char *line);
    /** swi_params.progress: windows done of the total; non-zero cancels the job. */
    int (*progress)(void *user, int64_t done, int64_t total);
    /** Polled between steps and inside reads: non-zero cancels (SWI_ERR_CANCELLED). */
    int (*cancelled)(void *user);
    /** With spec.shard_collective: every process's ok combined (non-zero only when all are
     *  ok), before the shared stores are written (MPI_Allreduce). NULL: ok as given. */
    int (*all_ok)(void *user, int ok);
    void *user;
} swi_job_hooks;

typedef struct swi_job swi_job;

/** Validate the spec and read the model's card; nothing else is opened and no output is
 *  created (the inputs' headers and the models are opened by the first swi_job_plan_run
 *  or swi_job_run, after swi_job_run has checked the outputs). *job is NULL on failure. */
swi_status swi_job_open(const swi_job_spec *spec, const swi_job_hooks *hooks, swi_job **job, char *err,
                        size_t errlen);

/** The checks swi_job_open makes of the spec's names, alone: every output a volume file
 *  (.nii, .nii.gz, .nrrd, .mha) or a store (x.zarr, x.ome.zarr, x.h5:/path); inputs all
 *  stores or all files; both outputs of one kind; no --zscore, preview or report with stores;
 *  --shard only with store outputs, its grid matching its parts. Nothing is opened. A front
 *  door calls it to report these as usage errors before it starts anything (processes,
 *  threads); SWI_ERR_INVALID_ARG with the message, else SWI_OK (other faults of the spec are
 *  swi_job_open's to report). */
swi_status swi_job_check_names(const swi_job_spec *spec, char *err, size_t errlen);

/** What the job will do, planned exactly as swi_job_run plans it. */
typedef struct swi_job_plan {
    swi_plan engine;       /**< the engine's plan (windows, batch, order, peak bytes) */
    size_t beside_bytes;   /**< held beside the engine: results on the input grid, the
                                 resampling band, the ensemble's buffer */
    size_t reading_bytes;  /**< held while the inputs are read */
    size_t peak_bytes;     /**< the job's predicted peak */
    int64_t size[3];       /**< the model grid (where the windows run) */
    int64_t input_size[3]; /**< the input grid (where the outputs are) */
    int64_t windows_whole; /**< the whole run's windows (engine.windows_total of a run
                                 without region or part) */
    int region;            /**< a region is given: region_lo/region_hi on the input grid,
                                model_lo/model_hi the model-grid box its windows touch */
    int64_t region_lo[3], region_hi[3], model_lo[3], model_hi[3];
    size_t whole_engine_bytes; /**< with a region: the engine's planned peak for the whole run */
    int64_t channels, classes;
    int members;                /**< predictors averaged */
    int fits;                   /**< 0: it does not fit max_memory or the memory available */
    char unfit[SWI_JOB_ERRLEN]; /**< why not, with the smallest budget that works */
} swi_job_plan;

/** Plan the job. With `count_reuse` the voxels are read (window reuse depends on them).
 *  A job that does not fit is SWI_OK with plan->fits 0. */
swi_status swi_job_plan_run(swi_job *job, int count_reuse, swi_job_plan *plan, char *err, size_t errlen);

/** The plan as text, one fact a line ("model ...", "input ...", "window ...", "memory ..."),
 *  as `swi plan` prints it. Returns the length of the whole text (written truncated to
 *  n - 1 bytes, as snprintf). */
size_t swi_job_describe(const swi_job *job, const swi_job_plan *plan, char *buf, size_t n);

/** The card of `model` (m.json beside m.onnx, or its metadata_props "swi.card") as `swi info`
 *  prints it, one field a line from "card     SOURCE": *text malloc'd (the caller frees it),
 *  or NULL when the model has no card. A card that cannot be read, parsed or checked is
 *  SWI_ERR_IO with err naming the file and the key, as swi_job_open reports it. */
swi_status swi_job_card_text(const char *model, char **text, char *err, size_t errlen);

/** Check a card as swi segment reads it (`swi card --check`): a model card file (m.json),
 *  a model (m.onnx: its card beside it or in its metadata_props; a model without one is
 *  refused), or an nnU-Net model directory or its nnunet.json (docs/card.md). SWI_OK with
 *  *text (malloc'd, the caller frees it; text may be NULL) the card as `swi info` prints it;
 *  else SWI_ERR_INVALID_ARG (or SWI_ERR_NOMEM) with err naming the file and the key. */
swi_status swi_card_check(const char *path, char **text, char *err, size_t errlen);

/** What a job hands back when asked (swi_job_run's keep). */
typedef struct swi_job_result {
    void *labels;    /**< malloc'd [size[0]][size[1]][size[2]], label_bytes each; free() it */
    int label_bytes; /**< 1 (uint8) or 2 (uint16) */
    float *scores;   /**< malloc'd [classes][size...] with spec.keep_scores, else NULL */
    int64_t size[3]; /**< the input grid */
    int64_t classes;
    double affine[4][4]; /**< voxel index -> RAS+ mm of the input */
    swi_stats stats;     /**< the engine's counters */
    double seconds;      /**< wall time of the run */
    char *statistics;    /**< malloc'd JSON text with spec.statistics or keep_statistics, else NULL */
} swi_job_result;

/** Run the job: plan, create the outputs' temporaries, read, run, write, commit. keep !=
 *  NULL receives the labels (and with spec.keep_scores the scores) on the input grid
 *  (whole jobs, not parts of stores; free with swi_job_result_free). A
 *  shard of a stores job writes its box only. Call at most once. */
swi_status swi_job_run(swi_job *job, swi_job_result *keep, char *err, size_t errlen);

/** Stop a running job from another thread (a signal handler's thread, a UI): the network
 *  call in flight is cancelled and swi_job_run returns SWI_ERR_CANCELLED. */
void swi_job_cancel(swi_job *job);

/** Remove the temporaries of every job of this process not yet committed (files and the
 *  stores' hidden folders), waiting for a commit in progress: for a forced stop (a
 *  signal-waiting thread that ends the process next); the jobs then fail. Not
 *  async-signal-safe. */
void swi_job_remove_temporaries(void);

void swi_job_free(swi_job *job);
void swi_job_result_free(swi_job_result *r);

/* ---- a program's own outputs, checked and written as a job's are -------------------- */

/** A path and the flag that named it, for messages ("--model", "--output"). */
typedef struct swi_job_path {
    const char *option;
    const char *path; /**< NULL entries are skipped */
} swi_job_path;

/** The refusal swi_job_run makes of its outputs, for any program's: an output that is an
 *  input under any name (a link, a hard link, another path), lies inside one (a folder, a
 *  store) or holds one, and outputs that are one file or lie one inside another. A name that
 *  does not exist yet is placed where it would be made; nothing is created. SWI_ERR_IO with
 *  one line naming both paths, else SWI_OK. */
swi_status swi_job_outputs_apart(const swi_job_path *inputs, int n_inputs, const swi_job_path *outputs,
                                 int n_outputs, char *err, size_t errlen);

/** An output file name as a job accepts one: SWI_ERR_IO when it exists and force is 0, or
 *  exists and is no regular file (a folder, a FIFO), else SWI_OK. Nothing is created. */
swi_status swi_job_check_output(const char *path, int force, char *err, size_t errlen);

/** A volume file written as a job writes its outputs (swi_volume_write_fd's arguments, the
 *  format by path's name): into a temporary beside path that is moved over it only when
 *  whole (an existing path is refused without force), removed on any failure and by
 *  swi_job_remove_temporaries. */
swi_status swi_job_write_volume(const char *path, int force, const swi_volume *like, const void *data,
                                swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                                const swi_io_cancel *cancel, char *err, size_t errlen);

/** Any other file a program writes as a job writes its outputs (a review page, a side
 *  file): swi_job_output_begin refuses an existing path without force (and any path that
 *  is no regular file) and opens a temporary beside it; the caller writes *fd and closes it;
 *  swi_job_output_commit moves the temporary over path only then (fsync, rename; without
 *  force never over a file that appeared meanwhile) and frees o; swi_job_output_abort
 *  removes it. Temporaries not yet committed also go with swi_job_remove_temporaries. */
typedef struct swi_job_output swi_job_output;
swi_status swi_job_output_begin(const char *path, int force, swi_job_output **out, int *fd, char *err,
                                size_t errlen);
swi_status swi_job_output_commit(swi_job_output *o, char *err, size_t errlen);
void swi_job_output_abort(swi_job_output *o);

/* ---- many jobs, one model (`swi segment --input-dir`: one case a job) ---------------- */

typedef struct swi_ort_model swi_ort_model; /**< swi_ort.h */

/** Run the job on a model already open (swi_ort_open's, or one swi_job_take_model gave)
 *  instead of opening models[0]; the caller keeps it (the job neither closes it nor may
 *  outlive it). NULL: the job opens its own. Call before swi_job_plan_run / swi_job_run. */
void swi_job_use_model(swi_job *job, swi_ort_model *model);

/** The model the job runs on (models[0], once opened by swi_job_plan_run or swi_job_run),
 *  for the next jobs' swi_job_use_model: from now on the caller closes it (swi_ort_close),
 *  after the last job that uses it. NULL when none is open. */
swi_ort_model *swi_job_take_model(swi_job *job);

/** Inputs read ahead (in another thread or process): the spec's n_inputs volumes (their
 *  headers, copied) and their voxels, every channel (each frame of a 4-D file one) as
 *  float32 [channels][size], already preprocessed (swi_job_preprocess). The job takes
 *  voxels (it free()s it, also on failure); it stays readable until swi_job_free. Call
 *  before swi_job_plan_run / swi_job_run. */
swi_status swi_job_give_inputs(swi_job *job, const swi_volume *vols, float *voxels, char *err, size_t errlen);

/** The job's preprocessing (clip, scale, z-score: the spec's, else the card's) on one
 *  channel of n voxels, in place: what swi_job_give_inputs expects of its voxels. */
void swi_job_preprocess(const swi_job *job, float *x, int64_t n);

/** The class names of the model's card, index = label (NULL and 0 without a card, or when
 *  it names none); they live as long as the job. Returns how many. */
int swi_job_classes(const swi_job *job, const char *const **names);

/** Whether the job runs an nnU-Net model directory: 1 with the model's input channels and
 *  its file ending (".nii.gz": nnU-Net's naming of a case's channels CASE_0000.nii.gz, ...,
 *  living as long as the job), else 0. */
int swi_job_nnunet(const swi_job *job, int *channels, const char **file_ending);

/* ---- folder mode: every case of a folder, one model (`swi segment --input-dir`) ------- */

/** What a folder run does. Fill it after swi_folder_spec_init; every name is borrowed. */
typedef struct swi_folder_spec {
    /** Every case's job, with inputs, output, scores, preview and report unset: each case gets
     *  its channels, OUTPUT_DIR/CASE.FORMAT and (report_dir) its page; the job's force also
     *  replaces existing outputs, which are otherwise skipped. quiet is implied. */
    const swi_job_spec *job;
    /** The cases, by name: each volume file (nnU-Net's CASE_0000.nii.gz, CASE_0001.nii.gz, ...
     *  being the channels of CASE; with an nnU-Net model directory that naming is required)
     *  and each folder (a DICOM series). Folders holding output_dir or report_dir are left out. */
    const char *input_dir;
    const char *output_dir;     /**< made if missing; not input_dir itself */
    const char *output_format;  /**< "nii.gz" (NULL), "nii", "nrrd" or "mha"; an nnU-Net model
                                    directory writes its own file ending */
    const char *report_dir;     /**< a review page per case and index.html (made if missing), or NULL */
    int part_index, part_count; /**< cases I, I+N, I+2N, ... of the sorted list (0/0: all); the
                                     index is then index-part-I-of-N.html */
    /** Where each case's volumes are opened and read (one case ahead of the one running, in a
     *  thread): NULL, in this process; else the program `reader` started for each case as
     *  reader_argv[0], reader_argv[1], ..., FILE..., which answers on its standard output with
     *  swi_folder_serve_reader (the same build of this library), so that a file library that
     *  aborts or hangs on one file fails that case only. reader_argv NULL: {reader}. */
    const char *reader;
    const char *const *reader_argv; /**< NULL-terminated */
} swi_folder_spec;

/** Fill the defaults: nothing set. */
void swi_folder_spec_init(swi_folder_spec *spec);

typedef enum swi_case_status {
    SWI_CASE_DONE,    /**< segmented; its outputs written */
    SWI_CASE_FAILED,  /**< not segmented; error says why (nothing of it written) */
    SWI_CASE_SKIPPED, /**< its output exists (and the job has no force) */
    SWI_CASE_NOT_RUN  /**< not reached: the run was cancelled first */
} swi_case_status;

/** One case of a folder run (its strings live until swi_folder_free). */
typedef struct swi_folder_case {
    const char *name;        /**< the file's name without its ending, or the folder's */
    const char *output;      /**< its labels' path */
    int index, count;        /**< its place among the cases this run segments (from 0; -1 when
                                 skipped) and their number */
    swi_case_status status;  /**< in the hooks: SWI_CASE_NOT_RUN until it ends */
    swi_status error_status; /**< SWI_CASE_FAILED: how (SWI_ERR_CANCELLED when stopped) */
    const char *error;       /**< SWI_CASE_FAILED: why, one line; else "" */
    int64_t size[3];         /**< its input grid (0 until it is read) */
    double seconds;          /**< reading it and running its job */
} swi_folder_case;

/** How a folder run talks back. Every member may be NULL; `job.user` is every hook's user. */
typedef struct swi_folder_hooks {
    /** Each case's job hooks: its messages and windows, cancellation (also polled by the
     *  reading thread while a case is read: it must be thread-safe). all_ok is not used. */
    swi_job_hooks job;
    /** A case's job is about to start (its messages and progress follow). */
    void (*case_start)(void *user, const swi_folder_case *c);
    /** A case of this run has ended: done, or failed (also while reading it, without a
     *  case_start). Not called for skipped cases. */
    void (*case_end)(void *user, const swi_folder_case *c);
} swi_folder_hooks;

typedef struct swi_folder swi_folder;

/** Check the spec, make output_dir (and report_dir), read the model's card and list the
 *  cases; nothing is read or segmented. *folder is NULL on failure. */
swi_status swi_folder_open(const swi_folder_spec *spec, const swi_folder_hooks *hooks, swi_folder **folder,
                           char *err, size_t errlen);

/** What a run did: this part's cases by name (they live until swi_folder_free) and counts. */
typedef struct swi_folder_result {
    const swi_folder_case *cases;
    int n_cases;
    int done, failed, skipped;
} swi_folder_result;

/** Run every case of this part, the model loaded once: each case's job runs while the next
 *  case is read. A case that fails is reported (case_end) and the run goes on. Returns SWI_OK
 *  when it went through (result->failed says how many cases failed), SWI_ERR_CANCELLED when
 *  cancelled (the finished cases are kept), or the failure of the run itself (report_dir's
 *  index not written; the reading thread not started, then result is all zeros); result is
 *  filled either way. Call at most once. */
swi_status swi_folder_run(swi_folder *folder, swi_folder_result *result, char *err, size_t errlen);

/** Stop a running folder from another thread: the case's job is cancelled, and so is the
 *  reading of the next. */
void swi_folder_cancel(swi_folder *folder);

void swi_folder_free(swi_folder *folder);

/** The reader program's side of swi_folder_spec.reader: open every file (a case's channels),
 *  then read each, writing the answers and the voxels to fd (its standard output). Returns
 *  SWI_OK, or the first failure to write the answers or to start (a file's own failure is
 *  an answer). A program calls it from main and exits with its status. */
swi_status swi_folder_serve_reader(int fd, int n_files, const char *const *files);

/** Whether the oneDNN backend (`swi segment --backend dnnl`) reads every operator of the
 *  ONNX model at `model`: 1; 0 with the reason in why (one line, n bytes); -1 when swi was
 *  built without it (why says so). Window-dependent checks come when a run plans. */
int swi_pipeline_dnnl_covers(const char *model, char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
