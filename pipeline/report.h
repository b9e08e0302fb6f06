/*
 * report.h -- `swi segment --report`: the run's review page (report/swi_report.h), with the
 * run's summary (model, card, options, windows, time, memory, version).
 */
#ifndef SWI_CLI_REPORT_H
#define SWI_CLI_REPORT_H

#include "segment.h"

/* Whether swi was built with the report library. */
int seg_report_built(void);

/* 0 when pages can be written; else 1 with err saying why (not built, NiiVue missing). */
int seg_report_check(const char *who_path, char *err);

/* The page of a finished run to fd (closed in every case): labels on the input's grid
 * (s->vols[0]), the image s->input when held (first channel), `title` its heading. */
int seg_report_write(const pl_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err);

/* name + suffix as a relative URL (percent-encoded: a case may be named "a b#1"). */
void seg_report_href(const char *name, const char *suffix, char *buf, size_t n);

/* What folder mode's index shows of a finished case. */
typedef struct seg_case_summary {
    double *ml; /* classes 1..n_ml, malloc'd */
    int n_ml;
    unsigned char *png; /* a thumbnail, malloc'd, or NULL */
    size_t png_size;
} seg_case_summary;

/* The volumes of a finished case's labels (on s->vols[0]'s grid) and its thumbnail (the PNG
 * preview of s->input, when held, and the labels). Returns 0, or 1 with err. */
int seg_case_summarize(const seg_state *s, const pl_result *r, seg_case_summary *out, char *err);
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
 * through a temporary file. Class names from the card (else "class N"). */
int seg_report_index(const pl_opts *o, const char *input_dir, const char *path, const seg_index_row *rows,
                     int n_rows, int n_classes, char *err);

#endif
