/*
 * swi_report.h -- a self-contained HTML review page of a segmentation.
 *
 * Link swi_report (CMake: swi_report_static). A client of swi.h and swi_io.h. The page
 * shows the image with the label overlay in three linked planes and a 3-D rendering
 * (NiiVue, https://github.com/niivue/niivue, inlined into the page), a legend of the
 * classes (toggle one, change the overlay's opacity), window/level presets (CT soft
 * tissue, lung, bone; auto from the image's percentiles), a readout of the point under the
 * cursor (mm, voxel, intensity, class), a table of the classes (voxels, millilitres from
 * the affine, bounding box in voxels and in mm), the input's identifiers and the run's
 * summary. The image keeps its intensities (16 bits over its range); the overlay is drawn
 * through a colour table of the classes present, whatever their label values. It opens from the file
 * system with no network: the viewer and both volumes (gzip-compressed NIfTI, base64) are
 * in the page.
 *
 *     // example:begin
 *     swi_report_page p = {0};
 *     p.title = "case-001";
 *     memcpy(p.size, v.size, sizeof p.size); // v: the swi_volume the labels were made for
 *     memcpy(p.affine, v.affine, sizeof p.affine);
 *     p.labels = labels;  p.label_bytes = 1;  p.image = image;
 *     char err[512];
 *     int fd = open("seg.html", O_WRONLY | O_CREAT | O_TRUNC, 0666);
 *     if (swi_report_write_fd(fd, "seg.html", &p, err, sizeof err) != SWI_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     return 0;
 *     // example:end
 *
 * Volumes larger than SWI_REPORT_PREVIEW_MAX voxels along an axis are shown at a reduced
 * resolution (labels sampled at each block's centre, the image averaged over the block);
 * the table always counts the full-resolution labels.
 *
 * NiiVue's browser build (niivue.umd.js of the npm package @niivue/niivue) is read when a
 * page is written, from the first of: $SWI_NIIVUE_JS; the path given to
 * swi_report_set_niivue_path; an installed tree's copy (share/swi/niivue.umd.js under the
 * prefix, found from the running program's or this library's own place); the path
 * configured at build time (scripts/install-deps.sh installs it there). Without it pages
 * are refused with a message saying how to install it.
 *
 * Errors follow swi.h: an swi_status and one line in err naming the file. Writers take an
 * open descriptor and close it in every case (the caller commits the file).
 */
#ifndef SWI_REPORT_H
#define SWI_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest preview size along an axis. */
#define SWI_REPORT_PREVIEW_MAX 256

/** One line of a page's summary: "model" = "liver.onnx". */
typedef struct swi_report_item {
    const char *key;
    const char *value;
} swi_report_item;

/** What a page shows. Buffers are [size[0]][size[1]][size[2]], last index fastest. */
typedef struct swi_report_page {
    const char *title;   /**< the page's heading (a case name); NULL: "segmentation" */
    int64_t size[3];     /**< voxels along i, j, k */
    double affine[4][4]; /**< voxel (i, j, k, 1) -> scanner mm (RAS+, as swi_volume) */
    const void *labels;  /**< label map, label_bytes (1 or 2) per voxel */
    int label_bytes;
    const float *image;             /**< the image under the labels, or NULL */
    int64_t classes;                /**< classes including background (0: the labels' maximum + 1) */
    const char *const *names;       /**< `classes` names (a NULL entry: "class N"), or NULL */
    const swi_report_item *summary; /**< shown in order; may be NULL */
    int n_summary;
    /** Identifiers shown in the page's header, in order (a DICOM input's patient, study,
     *  series and date: "patient" = "12345"); may be NULL. */
    const swi_report_item *ids;
    int n_ids;
} swi_report_page;

/** A class's statistics over the full-resolution labels. */
typedef struct swi_report_class_stats {
    int64_t voxels;
    double ml;                 /**< voxels x voxel volume (|det| of the affine's 3x3) / 1000 */
    int64_t lo[3], hi[3];      /**< bounding box, inclusive voxel indexes (-1 when absent) */
    int64_t at[3];             /**< the class's voxel nearest its centroid (-1 when absent) */
    double mm_lo[3], mm_hi[3]; /**< bounding box of the voxel centres in scanner mm (x, y, z
                                    through the affine; 0 when absent) */
} swi_report_class_stats;

/** Statistics of labels 0 .. classes - 1 into stats[classes] (labels >= classes are not
 *  counted). */
swi_status swi_report_stats(const swi_report_page *p, int64_t classes, swi_report_class_stats *stats,
                            char *err, size_t errlen);

/** The NiiVue bundle's path, looked up in the order above (the last when none exists). */
const char *swi_report_niivue_path(void);

/** Use path for the NiiVue bundle (a program or package that ships its own copy); NULL or
 *  "" to look it up again. Call before writing pages. 0, or -1 when path is too long. */
int swi_report_set_niivue_path(const char *path);

/** SWI_OK when the NiiVue bundle can be read; else a message saying how to install it. */
swi_status swi_report_check(char *err, size_t errlen);

/** Write the page to fd (closed in every case); `name` names it in messages. */
swi_status swi_report_write_fd(int fd, const char *name, const swi_report_page *p, char *err, size_t errlen);

/** One case of a folder's index page. */
typedef struct swi_report_case {
    const char *name;   /**< the case */
    const char *href;   /**< its page, relative to the index (NULL: no link) */
    int failed;         /**< 1: the case failed with `error` */
    const char *status; /**< the status shown (NULL: "ok" or "failed") */
    const char *error;
    double seconds;           /**< the case's run time */
    const double *ml;         /**< n_classes volumes (mL) of classes 1..n_classes, or NULL */
    const unsigned char *png; /**< a thumbnail (PNG bytes) or NULL */
    size_t png_size;
} swi_report_case;

/** Write a folder's index page to fd (closed in every case): a sortable table of the cases,
 *  with one volume column per name in class_names (classes 1..n_classes). */
swi_status swi_report_index_write_fd(int fd, const char *name, const char *title,
                                     const swi_report_case *cases, int n_cases,
                                     const char *const *class_names, int n_classes, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SWI_REPORT_H */
