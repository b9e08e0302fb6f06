/*
 * report_index.h -- folder mode's pages (report.c): whether pages can be written, a case's
 * summary for the index, the index itself (not installed; the command's folder mode).
 */
#ifndef SWI_PIPELINE_REPORT_INDEX_H
#define SWI_PIPELINE_REPORT_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Whether swi was built with the report library. */
int seg_report_built(void);

/* 0 when pages can be written; else 1 with err saying why (not built, NiiVue missing). */
int seg_report_check(const char *who_path, char *err);

/* name + suffix as a relative URL (percent-encoded: a case may be named "a b#1"). */
void seg_report_href(const char *name, const char *suffix, char *buf, size_t n);

/* What folder mode's index shows of a finished case. */
typedef struct seg_case_summary {
    double *ml; /* classes 1..n_ml, malloc'd */
    int n_ml;
    unsigned char *png; /* a thumbnail, malloc'd, or NULL */
    size_t png_size;
} seg_case_summary;

/* The volumes of a finished case's labels (size voxels, label_bytes each, on the grid of
 * `affine`) and its thumbnail (the PNG preview of image, when not NULL, and the labels).
 * Returns 0, or 1 with err. */
int seg_case_summarize(const double affine[4][4], const float *image, const void *labels, int label_bytes,
                       const int64_t size[3], int64_t classes, seg_case_summary *out, char *err);
void seg_case_summary_free(seg_case_summary *c);

/* One row of the index. */
typedef struct seg_index_row {
    const char *name, *href; /* href: the case's page, relative to the index, or NULL */
    const char *status;      /* "ok", "failed", "skipped (output exists)" */
    int failed;
    const char *error;
    double seconds;
    const seg_case_summary *sum; /* or NULL */
} seg_index_row;

/* The index page of folder mode at `path` (replaced: it is made from the cases each run),
 * through a temporary file, for the cases of input_dir. Class l's name is names[l] (the
 * card's, n_names of them), else "class l". */
int seg_report_index(const char *const *names, int n_names, const char *input_dir, const char *path,
                     const seg_index_row *rows, int n_rows, int n_classes, char *err);

#endif
