/*
 * swi_io.h -- volumes in and out of libswi with their geometry, and previews.
 *
 * Link swi_io (CMake: swi::io; pkg-config: swi-io). This header includes only swi.h; the
 * format libraries (niftilib + zlib for NIfTI, libpng for previews) are optional at build
 * time: swi_io_available() says which are in.
 *
 *     // example:begin
 *     swi_volume v;
 *     char err[512];
 *     float *x = NULL;
 *     if (swi_volume_open("ct.nii.gz", &v, err, sizeof err) != SWI_OK) goto fail;
 *     x = malloc((size_t)swi_volume_voxels(&v) * sizeof *x);
 *     if (!x) { snprintf(err, sizeof err, "out of memory"); goto fail; }
 *     if (swi_volume_read(&v, x, NULL, err, sizeof err) != SWI_OK) goto fail;
 *     // x is [size[0]][size[1]][size[2]], last index fastest: an swi_tensor as is;
 *     // the network's labels (uint8, `classes` of them) are written with v's geometry
 *     // the name's suffix says the format, read once; the writer is handed the format
 *     const char *out = "labels.nii.gz";
 *     swi_volume_format f = swi_volume_format_of(out); // SWI_VOLUME_NIFTI_GZ
 *     if (!swi_volume_format_writable(f)) {
 *         snprintf(err, sizeof err, "%s: name a .nii, .nii.gz, .nrrd or .mha file", out);
 *         goto fail;
 *     }
 *     int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
 *     if (swi_volume_write_as_fd(fd, f, out, &v, labels, SWI_DTYPE_UINT8, SWI_IO_LABELS, 1, classes, NULL,
 *                                err, sizeof err) != SWI_OK)
 *         goto fail;
 *     free(x);
 *     return 0;
 * fail:
 *     fprintf(stderr, "%s\n", err);
 *     free(x);
 *     return 1;
 *     // example:end
 *
 * Formats. A name's suffix says its format, read in one place (swi_volume_format_of, a
 * swi_volume_format); readers also look at what a file holds, writers are handed the format
 * (swi_volume_write_as_fd). ".nii" and ".nii.gz" are NIfTI-1/-2
 * (read: any scalar type, either byte order, gzip whatever the name says; 3-D, or 4-D
 * whose 4th axis holds channels: swi_volume.frames), ".png" is a preview. Through ITK's
 * image I/O, when built with it: ".nrrd" and ".nhdr" (detached data) are NRRD, ".mha" and
 * ".mhd" (detached raw or compressed data) MetaImage; a directory is a DICOM series (one
 * CT or MR series: slices sorted by their position along the slice normal, rescale
 * slope/intercept applied; more than one series UID, a missing slice, uneven spacing, a
 * tilted gantry, differing slice sizes or orientations are refused with a message naming
 * the directory and the fault). A format fills the common fields and keeps its own in its
 * member of the `fmt` union.
 *
 * Axes. Voxel (i, j, k) is element (i * size[1] + j) * size[2] + k of every buffer here:
 * the layout nibabel hands to MONAI/PyTorch. (A NIfTI file stores i fastest; reading and
 * writing transpose.) Every format gives i, j, k as ITK indexes it -- i fastest in the
 * file; for DICOM i along a row (column index), j down the columns (row index), k the
 * slices in ascending position along the normal -- so one scan stored in any of these
 * formats reaches the network as the same array. Intensities are float32 with the file's
 * scaling (scl_slope, scl_inter; rescale slope/intercept) applied; voxels that are not
 * finite numbers (NaN or +-Inf in a float file, or made so by the scaling or by the
 * conversion to float32) read as 0, and swi_volume_read_counted says how many there were.
 *
 * Geometry. `affine` maps (i, j, k, 1) to scanner millimetres (RAS+, NIfTI's convention):
 * the sform when its code is set, else the qform, else pixdim with i mirrored about the
 * volume's centre -- nibabel's img.affine in every case.
 * NRRD, MetaImage and DICOM describe LPS+ millimetres (origin, spacing, direction
 * cosines): affine = diag(-1, -1, 1, 1) * [direction * diag(spacing) | origin], and the
 * reverse on writing. Writing NIfTI from a NIfTI input copies the input's header and
 * changes only what describes the data (sizes, type, scaling, intent), so qform, sform,
 * pixdim, units and orientation are kept exactly; from another format it writes sform and
 * qform (code 1, scanner) from the affine. NRRD (.nrrd, gzip) and MetaImage (.mha, zlib)
 * outputs carry the affine as origin, spacing and direction. A ".dcm" output is a binary
 * DICOM Segmentation object (DCMTK's dcmseg) of a label map whose `like` is a DICOM series:
 * patient, study and frame of reference from the series, one segment per label present,
 * one frame per segment and slice holding it, each referencing its source slice.
 *
 * Errors follow swi.h: functions return an swi_status and write one line naming the file
 * into err (errlen bytes; NULL to discard). Nothing is printed. A file or directory the
 * system or a file library cannot open, examine, read or write (missing, unreadable, not a
 * regular file, a disk full, a read that ends before the file's own size) is SWI_ERR_IO; a
 * readable one that is corrupt, truncated (its header promises more than it holds), hostile
 * or unsupported SWI_ERR_INVALID_ARG with the field at fault; a stop asked by `cancel`
 * SWI_ERR_CANCELLED, memory that runs out SWI_ERR_NOMEM. Headers are validated before niftilib sees them (it trusts the sizes it
 * reads): a hostile header is refused with a message, never read past.
 *
 * Writers take an open descriptor and close it in every case, so the caller picks the
 * commit policy (the swi command writes to a temporary file and renames it). A writer
 * ending in _as_fd takes the format to write and writes it whatever the name's suffix (the
 * name only names the file in messages); swi_volume_write_fd and swi_volume_write_labels_fd
 * classify the name (swi_volume_format_of) and call them.
 */
#ifndef SWI_IO_H
#define SWI_IO_H

#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "swi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum swi_io_format {
    SWI_IO_UNKNOWN = 0,
    SWI_IO_NIFTI = 1,     /**< .nii, .nii.gz (niftilib) */
    SWI_IO_PNG = 2,       /**< .png previews (libpng; write only) */
    SWI_IO_NRRD = 3,      /**< .nrrd, .nhdr (ITK; write: .nrrd) */
    SWI_IO_METAIMAGE = 4, /**< .mha, .mhd (ITK; write: .mha) */
    SWI_IO_DICOM = 5,     /**< a directory holding one DICOM series (ITK's GDCM; read only) */
    SWI_IO_DICOM_SEG = 6  /**< .dcm: a DICOM Segmentation of a DICOM input (DCMTK; write only) */
} swi_io_format;

/** Is support for `format` compiled in? */
int swi_io_available(swi_io_format format);

/** The library format a file name asks for: swi_volume_format_family(swi_volume_format_of(path)),
 *  SWI_IO_UNKNOWN if none (a directory, which swi_volume_open reads as DICOM, has no suffix
 *  to ask). */
swi_io_format swi_io_format_of(const char *path);

/** A file's format as its name's suffix says it: what a writer is handed. Each value is one
 *  suffix, so the suffix, and whether the volume writers write it, follow from the value. */
typedef enum swi_volume_format {
    SWI_VOLUME_UNKNOWN = 0,   /**< no suffix below */
    SWI_VOLUME_NIFTI = 1,     /**< .nii: NIfTI-1/-2, uncompressed */
    SWI_VOLUME_NIFTI_GZ = 2,  /**< .nii.gz: NIfTI-1/-2, gzip (".gz" alone is no format) */
    SWI_VOLUME_NRRD = 3,      /**< .nrrd: NRRD with its data attached (written gzip-encoded) */
    SWI_VOLUME_NHDR = 4,      /**< .nhdr: a NRRD header with detached data (read only) */
    SWI_VOLUME_MHA = 5,       /**< .mha: MetaImage with its data attached (written zlib) */
    SWI_VOLUME_MHD = 6,       /**< .mhd: a MetaImage header with detached data (read only) */
    SWI_VOLUME_DICOM_SEG = 7, /**< .dcm: a DICOM SEG of a label map (write only) */
    SWI_VOLUME_PNG = 8        /**< .png: a preview (swi_io_preview_write_fd; write only) */
} swi_volume_format;

/** The format `name` asks for by its suffix, compared case-insensitively ("SEG.NII.GZ" is
 *  SWI_VOLUME_NIFTI_GZ); only the end of the name counts, so dots in directories do not.
 *  SWI_VOLUME_UNKNOWN for NULL, a name with none of the suffixes, or a store's name that does
 *  not end in one (a caller taking stores too asks swi_store_kind_of first: a store is a
 *  store even when its name ends like a file, "x.h5:/seg.nii"). The one function in swi_io
 *  that reads a file's format from its name (a store's kind: swi_store_kind_of). A caller
 *  turns SWI_VOLUME_UNKNOWN into its own message listing the suffixes it accepts. */
swi_volume_format swi_volume_format_of(const char *name);

/** The suffix of format f's files, lower case (".nii.gz"); "" for SWI_VOLUME_UNKNOWN or a
 *  value outside the enum. Static storage: not to be freed. Its length is that of the suffix
 *  swi_volume_format_of matched, so the stem of a name is what lies before it. */
const char *swi_volume_format_suffix(swi_volume_format f);

/** The library format f belongs to (SWI_VOLUME_NIFTI_GZ: SWI_IO_NIFTI; .nhdr: SWI_IO_NRRD;
 *  .dcm: SWI_IO_DICOM_SEG; ...), for swi_io_available; SWI_IO_UNKNOWN for SWI_VOLUME_UNKNOWN. */
swi_io_format swi_volume_format_family(swi_volume_format f);

/** 1 if swi_volume_write_as_fd writes format f (.nii, .nii.gz, .nrrd, .mha, and .dcm for a
 *  label map), else 0. Whether this build has the library for it: swi_io_available. */
int swi_volume_format_writable(swi_volume_format f);

/** Element types of stored voxels. */
typedef enum swi_io_type {
    SWI_IO_TYPE_UINT8 = 0,
    SWI_IO_TYPE_INT8,
    SWI_IO_TYPE_UINT16,
    SWI_IO_TYPE_INT16,
    SWI_IO_TYPE_UINT32,
    SWI_IO_TYPE_INT32,
    SWI_IO_TYPE_UINT64,
    SWI_IO_TYPE_INT64,
    SWI_IO_TYPE_FLOAT32,
    SWI_IO_TYPE_FLOAT64,
    SWI_IO_TYPE_FLOAT128
} swi_io_type;

/** NIfTI's own fields: the header as validated (native byte order) and as stored. */
typedef struct swi_io_nifti {
    int64_t offset;         /**< byte offset of the voxel data (first: hdr is 8-aligned) */
    unsigned char hdr[544]; /**< nifti_1_header (348 B) or nifti_2_header (540 B) */
    unsigned char raw[544]; /**< the same bytes in the file's byte order */
    int version;            /**< 1 or 2 */
    int datatype;           /**< NIfTI DT_* code */
} swi_io_nifti;

/** The fields of a volume read through ITK (NRRD, MetaImage, DICOM). */
typedef struct swi_io_itk {
    int component;       /**< ITK's IOComponentEnum of the stored voxels */
    int64_t slices;      /**< DICOM: files in the series (= size[2]) */
    char series_uid[72]; /**< DICOM: SeriesInstanceUID */
    char study_uid[72];  /**< DICOM: StudyInstanceUID (of the first slice; "" when absent) */
    char patient_id[72]; /**< DICOM: PatientID (0010,0020) */
    char study_date[12]; /**< DICOM: StudyDate, YYYYMMDD as stored */
} swi_io_itk;

/** A volume's description: opened from a file, or made for generated data. */
typedef struct swi_volume {
    char path[4096]; /**< the file opened ("" for a made volume) */
    swi_io_format format;
    int64_t size[3];     /**< voxels along i, j, k */
    swi_io_type type;    /**< stored element type */
    int bytes_per_voxel; /**< stored bytes per voxel */
    double slope, inter; /**< scaling applied on read (1 and 0 when none) */
    double spacing[3];   /**< voxel size along i, j, k (millimetres; pixdim) */
    double affine[4][4]; /**< voxel (i, j, k, 1) -> scanner mm (see above) */
    union {
        swi_io_nifti nifti;
        swi_io_itk itk;
    } fmt;          /**< the format's own fields, by `format` */
    int64_t frames; /**< size of a 4th axis (channels of a 4-D file), else 1 */
} swi_volume;

/** Voxels of a volume (size[0] * size[1] * size[2]; below 2^40 for any opened volume). */
int64_t swi_volume_voxels(const swi_volume *v);

/** Open `path` and validate its header (existence, format, version, dims, sizes that
 *  overflow, datatype, data offset, and for uncompressed files that the file holds all the
 *  voxels). Reads no voxel data. A directory is opened as a DICOM series: every file's
 *  header is read and the series assembled (the read reads them again). */
swi_status swi_volume_open(const char *path, swi_volume *v, char *err, size_t errlen);

/** Open `path` for reading without blocking on a FIFO or device, and refuse anything
 *  that is not a regular file ("X: is a FIFO (named pipe), not a regular file"). Returns
 *  a blocking descriptor (O_CLOEXEC) and the file's size in *size (NULL: not wanted), or
 *  -1 with a message in err naming the path. */
int swi_io_open_regular(const char *path, int64_t *size, char *err, size_t errlen);

/** The same check by name, for code that hands the path to a library opening it itself:
 *  SWI_ERR_IO unless `path` (links followed) is a regular file. Never blocks. */
swi_status swi_io_check_regular(const char *path, int64_t *size, char *err, size_t errlen);

/** Bounds on JSON read by swi (model cards, Zarr metadata): nesting at most this deep.
 *  Real cards and metadata nest under 10 levels; jansson's own limit (2048) lets a few KB
 *  of brackets make deep recursion and a slow parse. */
#define SWI_IO_JSON_MAX_DEPTH 64

/** The deepest nesting of arrays and objects in JSON text (brackets inside strings do
 *  not count), found by one pass without parsing: compare with SWI_IO_JSON_MAX_DEPTH
 *  before handing the text to a parser. */
int swi_io_json_depth(const char *text, size_t len);

/** What a stat mode is, for messages: "a regular file", "a FIFO (named pipe)", ... */
const char *swi_io_file_kind(unsigned mode);

/** Stop test for long reads and writes: return non-zero to stop (SWI_ERR_CANCELLED). */
typedef struct swi_io_cancel {
    int (*cancelled)(void *user);
    void *user;
} swi_io_cancel;

/** swi_volume_open with a stop test (may be NULL): reading a DICOM series' headers stops
 *  with SWI_ERR_CANCELLED when it says so. A DICOM reader that finishes no file for
 *  SWI_DICOM_STALL_SECONDS (environment; 60 s unless set) is ended and the series refused
 *  ("FILE: the DICOM reader made no progress for 60 s; refused"), in either call and in the
 *  reads. */
swi_status swi_volume_open_cancellable(const char *path, swi_volume *v, const swi_io_cancel *cancel,
                                       char *err, size_t errlen);

/** Read the voxels of an opened volume as float32 into dst (swi_volume_voxels(v) floats),
 *  scaling applied; of a 4-D file, the first frame. Fails cleanly on truncated or corrupt
 *  data. cancel may be NULL. */
swi_status swi_volume_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err,
                           size_t errlen);

/** swi_volume_read that also counts the voxels it stored as 0 because they were not finite
 *  numbers (see "Intensities" above): *nonfinite (may be NULL) receives the count, 0 when
 *  the read fails. A caller can warn about them or refuse the volume. */
swi_status swi_volume_read_counted(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                   int64_t *nonfinite, char *err, size_t errlen);
/** Read every frame of the 4th axis (v->frames of them, 1 for a 3-D file), one volume after
 *  the other: dst holds v->frames * swi_volume_voxels(v) floats. Non-finite voxels are read
 *  as 0 and counted in *nonfinite (may be NULL), as swi_volume_read_counted does. */
swi_status swi_volume_read_frames(const swi_volume *v, float *dst, const swi_io_cancel *cancel,
                                  int64_t *nonfinite, char *err, size_t errlen);

/** Describe a generated volume of `size` voxels (1..32767 each), `spacing` mm,
 *  axis-aligned (qform and sform = diag(spacing), scanner coordinates), to write as
 *  NIfTI-1 with swi_volume_write_fd. It has no file (path ""), so nothing to read. */
swi_status swi_volume_make(swi_volume *v, const int64_t size[3], const double spacing[3], char *err,
                           size_t errlen);

/** What a written volume holds (sets the intent and display range). */
typedef enum swi_io_kind {
    SWI_IO_IMAGE = 0,  /**< plain image */
    SWI_IO_LABELS = 1, /**< a label map: intent LABEL, display range [0, classes - 1] */
    SWI_IO_SCORES = 2  /**< per-class scores, classes along the 4th dimension */
} swi_io_kind;

/** Write data ([planes][size[0]][size[1]][size[2]] of `dtype`: SWI_DTYPE_UINT8, _UINT16 or
 *  _FLOAT32) to the open descriptor fd in `format` (SWI_VOLUME_NIFTI, _NIFTI_GZ
 *  gzip-compressed, _NRRD, _MHA; _DICOM_SEG: a label map, one plane, of a DICOM series),
 *  whatever `name`'s suffix, with like's geometry (like opened from any format) and size
 *  like->size x planes (planes along the 4th dimension when > 1). `name` names the file in
 *  messages only. A format it does not write (swi_volume_format_writable) is refused as
 *  "NAME: no volume format for this name (.nii, .nii.gz, .nrrd, .mha)", SWI_ERR_INVALID_ARG.
 *  Closes fd in every case; data and like stay the caller's. cancel may be NULL. */
swi_status swi_volume_write_as_fd(int fd, swi_volume_format format, const char *name, const swi_volume *like,
                                  const void *data, swi_dtype dtype, swi_io_kind kind, int64_t planes,
                                  int64_t classes, const swi_io_cancel *cancel, char *err, size_t errlen);

/** swi_volume_write_as_fd in the format `name` asks for (swi_volume_format_of(name)). */
swi_status swi_volume_write_fd(int fd, const char *name, const swi_volume *like, const void *data,
                               swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                               const swi_io_cancel *cancel, char *err, size_t errlen);

/** As swi_volume_write_as_fd for a label map (SWI_IO_LABELS, one plane), with each class's
 *  name: names[l] for label l (names NULL, or an entry NULL or "": "label l"; the caller's),
 *  which a DICOM SEG (SWI_VOLUME_DICOM_SEG) records as its segments' labels; other formats
 *  write as swi_volume_write_as_fd. Closes fd in every case. */
swi_status swi_volume_write_labels_as_fd(int fd, swi_volume_format format, const char *name,
                                         const swi_volume *like, const void *labels, swi_dtype dtype,
                                         int64_t classes, const char *const *names,
                                         const swi_io_cancel *cancel, char *err, size_t errlen);

/** swi_volume_write_labels_as_fd in the format `name` asks for (swi_volume_format_of(name)). */
swi_status swi_volume_write_labels_fd(int fd, const char *name, const swi_volume *like, const void *labels,
                                      swi_dtype dtype, int64_t classes, const char *const *names,
                                      const swi_io_cancel *cancel, char *err, size_t errlen);

/** Write a PNG of three orthogonal mid-slices to the open descriptor fd (closed in every
 *  case), whatever name's suffix (name names the file in messages). Panels, left to right: the k = nk/2 slice (columns i, rows j), the j = nj/2 slice
 *  (columns i, rows k) and the i = ni/2 slice (columns j, rows k), rows bottom-up. image
 *  ([ni][nj][nk] float32, or NULL: labels only) is grey, windowed between its 0.5th and
 *  99.5th percentiles; each label > 0 of labels ([ni][nj][nk], label_bytes 1 or 2 per
 *  voxel, or NULL) is blended in its own colour. Small volumes are enlarged so the picture
 *  is ~256 pixels tall; large ones sampled down to at most 2048 high and ~8192 wide. */
swi_status swi_io_preview_write_fd(int fd, const char *name, const int64_t size[3], const float *image,
                                   const void *labels, int label_bytes, char *err, size_t errlen);

/** RGB colour of label l (l >= 1) in previews. */
void swi_io_label_color(int64_t l, unsigned char rgb[3]);

/* ---- child processes ------------------------------------------------------------
 * The processes this one starts that must not outlive it (the command's converter, the
 * folder mode's reader, the DICOM reader). A stop signal is passed on to them, and a forced
 * stop (the swi command's signal thread) waits for them to end before the process does,
 * killing those that do not end within a grace period. Whoever starts a child tracks it from
 * its start until it has seen it end, and reaps it with swi_child_reap (or untracks it before
 * its own waitpid): a tracked pid is never reaped, so it is never signalled after it could
 * have been reused. */

/** Track pid; group != 0: it leads its own process group (so a terminal's signals do not
 *  reach it), which swi_child_signal_all signals as a whole; such a child tracked after
 *  swi_child_signal_all gets that signal at once. 0, or -1 when full. */
int swi_child_track(pid_t pid, int group);

/** Stop tracking pid (before reaping it). */
void swi_child_untrack(pid_t pid);

/** Wait for pid to end (EINTR retried), untrack it, reap it: pid with *status, or -1. */
pid_t swi_child_reap(pid_t pid, int *status);

/** Pass sig on to every tracked child that leads its own group, now and when tracked
 *  later. (One in this process's group got a terminal's signal itself, and its owner ends
 *  it when it stops; swi_child_kill_all ends it when the owner does not in time.) */
void swi_child_signal_all(int sig);

/** How many tracked children that lead their own group (those swi_child_signal_all signals,
 *  given time to end by themselves) are still running. */
int swi_child_running(void);

/** Kill every tracked child (SIGKILL, its group too) and wait until each has ended (not
 *  reaping it: its owner may be waiting for it), at most `ms` milliseconds. */
void swi_child_kill_all(long ms);

/** Initialise `at` for such a child: no signal blocked, SIGINT, SIGTERM, SIGHUP and SIGPIPE at
 *  their default action, and with own_group in a process group of its own (track it with
 *  group != 0). 0, or an errno value (at is then not initialised). */
int swi_child_spawnattr_init(posix_spawnattr_t *at, int own_group);

#ifdef __cplusplus
}
#endif
#endif /* SWI_IO_H */
