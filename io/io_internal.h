/*
 * io_internal.h -- what the format modules of swi_io share (not installed).
 */
#ifndef SWI_IO_INTERNAL_H
#define SWI_IO_INTERNAL_H

#include <errno.h>

#include "swi_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest voxel count accepted: keeps every byte count (x 16 bytes per voxel, x channels)
 * far from overflowing int64_t/size_t. 2^40 voxels is 4 TB of float32. */
#define IO_MAX_VOXELS ((int64_t)1 << 40)

/* Deflate (zlib, gzip) inflates one byte to at most 1032 (a 258-byte match in under two
 * bits): a header claiming more voxels than its compressed bytes x this is refused before
 * anything is allocated for them. */
#define IO_DEFLATE_MAX_RATIO 1032

/* printf into err (n bytes, NULL = discard), folded onto one line. */
void io__err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whole files (files.c). dir/leaf into out (n bytes): 0, or -1 when it does not fit. */
int io__join(char *out, size_t n, const char *dir, const char *leaf);
/* Every byte of data written to fd (EINTR retried): 0, or -1 with errno. */
int io__write_all(int fd, const void *data, size_t len);
/* The whole regular file path, at most max bytes, into a malloc'd buffer. A FIFO, device
 * or directory is refused without blocking (swi_io_open_regular), a file larger than max
 * by its size, unread. NULL with errno (ENOENT: absent) and the reason, naming the file as
 * `what`, in err. */
unsigned char *io__read_file(const char *path, size_t max, size_t *len, char *err, size_t n,
                             const char *what);
/* Write data to a temporary file beside path, then rename it (replace) or link it
 * (exclusive: EEXIST when path exists). 0 or -1 with errno. */
int io__put_file(const char *path, const void *data, size_t len, int exclusive);
/* The file at tmp copied into fd (which stays open), every write checked; name in messages. */
swi_status io__copy_into(const char *tmp, int fd, const char *name, char *err, size_t n);

/* The status of a failure that left errno e: memory; a file the system could not open,
 * examine, read or write (SWI_ERR_IO); one refused for what it holds, EFBIG (larger than it
 * may be) or EBADMSG (not what it should be), SWI_ERR_INVALID_ARG. */
static inline swi_status io__errno_status(int e) {
    if (e == ENOMEM) return SWI_ERR_NOMEM;
    if (e == EFBIG || e == EBADMSG) return SWI_ERR_INVALID_ARG;
    return SWI_ERR_IO;
}

/* Has the caller asked to stop? */
static inline int io__cancelled(const swi_io_cancel *c) { return c && c->cancelled && c->cancelled(c->user); }

/* The module's own allocations: malloc/calloc, in a SWI_FAULT_INJECTION build drawing on
 * the library's counter (SWI_FAULT_ALLOC=N fails the N-th allocation of the process). */
#ifdef SWI_FAULT_INJECTION
#include <stdbool.h>
bool swi__fault_point(void); /* src/alloc.c */
#define IO__INJECTED() swi__fault_point()
#else
#define IO__INJECTED() 0
#endif
#include <stdlib.h>
static inline void *io__malloc(size_t bytes) { return IO__INJECTED() ? NULL : malloc(bytes ? bytes : 1); }
static inline void *io__calloc(size_t n, size_t size) {
    return IO__INJECTED() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

/* The NIfTI module (nifti_read.c, nifti_write.c). */
int io__nifti_available(void);
swi_status io__nifti_open(const char *path, swi_volume *v, char *err, size_t n);
/* frames: how many of the 4th axis to read (1, or v->frames), one after the other in dst;
 * non-finite voxels are stored as 0 and counted in *nonfinite (NULL: not wanted). */
swi_status io__nifti_read(const swi_volume *v, float *dst, int64_t frames, const swi_io_cancel *cancel,
                          int64_t *nonfinite, char *err, size_t n);
swi_status io__nifti_make(swi_volume *v, const int64_t size[3], const double spacing[3], char *err, size_t n);
swi_status io__nifti_write_fd(int fd, int gz, const char *name, const swi_volume *like, const void *data,
                              swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                              const swi_io_cancel *cancel, char *err, size_t n);

/* NIfTI header for an output whose input came from another format: sform and qform
 * (code 1) from src's affine (nifti_like.c). */
swi_status io__nifti_like(const swi_volume *src, swi_volume *dst, char *err, size_t n);

/* The ITK module (itk_io.cxx): NRRD and MetaImage files, single DICOM slices. */
int io__itk_available(void);
swi_status io__itk_open(const char *path, swi_io_format f, swi_volume *v, char *err, size_t n);
swi_status io__itk_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err, size_t n);
/* f: SWI_VOLUME_NRRD or SWI_VOLUME_MHA (ITK picks the layout by the suffix of the file it
 * writes: a private one named with f's suffix). */
swi_status io__itk_write_fd(int fd, const char *name, swi_volume_format f, const swi_volume *like,
                            const void *data, swi_dtype dtype, int64_t planes, const swi_io_cancel *cancel,
                            char *err, size_t n);

/* One DICOM file's header, as the series assembly needs it. */
typedef struct io_slice {
    char *file; /* path (owned by the series) */
    char series_uid[72];
    char study_uid[72], patient_id[72], study_date[12]; /* shown to a reader (review pages) */
    int64_t cols, rows, frames, components;
    double origin[3];              /* ImagePositionPatient (LPS mm) */
    double row_dir[3], col_dir[3]; /* ImageOrientationPatient: along i, along j */
    double spacing[2];             /* along i, along j (PixelSpacing reversed) */
    double pos;                    /* along the normal (set by the assembly) */
} io_slice;

/* One DICOM file's header read by DCMTK and checked before GDCM reads the file: GDCM
 * aborts on some headers and reads short pixel data as whole. With s, its size, series
 * and geometry (as the standard defines them) into s (dicom_screen.cxx; without DCMTK,
 * dicom_screen_stub.c refuses every file). */
int io__dicom_screen_available(void);
/* DCMTK's one-time set-up (its dictionary, from a file of its own), done before a fork so
 * that each child does not repeat it. */
void io__dicom_screen_warm(void);
swi_status io__dicom_screen(const char *file, io_slice *s, char *err, size_t n);

/* The header of one DICOM file through ITK's GDCMImageIO (itk_io.cxx). */
swi_status io__itk_dicom_slice(const char *file, io_slice *s, char *err, size_t n);
/* Take (hold 1) or release (hold 0) the lock every ITK call runs under: held across a
 * fork, so the child finds it free (no other thread is then inside ITK). */
void io__itk_hold(int hold);
/* Its voxels, rescaled, cols x rows floats with i (the column index) fastest. */
swi_status io__itk_dicom_pixels(const io_slice *s, float *dst, char *err, size_t n);

/* Sort slices by position along the normal and check they make one volume: one series
 * UID, one size, orientation and pixel spacing, even steps (a gap is named as missing
 * slices), positions along the normal (else a tilted gantry). Fills v's size, spacing and
 * affine. dir names the series in messages. Pure: no I/O (dicom_assemble.c). */
swi_status io__dicom_assemble(io_slice *s, int64_t count, const char *dir, swi_volume *v, char *err,
                              size_t n);

/* One file read as a slice is (the header screened, GDCM's header and, for one frame of at
 * most max_pixels and dst != NULL, its pixels into dst, in a child): the fuzzers' entry.
 * s->file is NULL on return. */
swi_status io__dicom_probe(const char *file, io_slice *s, float *dst, int64_t max_pixels, char *err,
                           size_t n);

/* The slices of an opened DICOM volume in their sorted order, assembled again (and
 * checked unchanged); free with io__dicom_slices_free. */
swi_status io__dicom_slices(const swi_volume *v, io_slice **out, int64_t *count, const swi_io_cancel *cancel,
                            char *err, size_t n);
void io__dicom_slices_free(io_slice *s, int64_t count);

/* DICOM SEG out (dicom_seg.cxx through DCMTK's dcmseg; dicom_seg_stub.c without it). */
int io__dcmseg_available(void);
/* names[l] labels segment l (NULL, or an entry NULL or "": "label l"). */
swi_status io__dcmseg_write_fd(int fd, const char *name, const swi_volume *like, const void *labels,
                               swi_dtype dtype, int64_t classes, const char *const *names,
                               const swi_io_cancel *cancel, char *err, size_t n);

/* Whether path is a regular file with the DICOM preamble (dicom_series.c). */
int io__is_dicom_file(const char *path);

/* The DICOM module (dicom_series.c): a directory in; cancel (may be NULL) stops the header
 * reading. */
swi_status io__dicom_open(const char *dir, swi_volume *v, const swi_io_cancel *cancel, char *err, size_t n);
swi_status io__dicom_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err, size_t n);

/* The PNG module (preview.c). */
int io__png_available(void);

#ifdef __cplusplus
}
#endif

#endif
