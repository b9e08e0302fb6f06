/*
 * report.h -- `swi segment --report`: the run's review page (report/swi_report.h), with the
 * run's summary (model, card, options, windows, time, memory, version).
 */
#ifndef SWI_CLI_REPORT_H
#define SWI_CLI_REPORT_H

#include "report_index.h"
#include "segment.h"

/* The page of a finished run to fd (closed in every case): labels on the input's grid
 * (s->vols[0]), the image s->input when held (first channel), `title` its heading. */
int seg_report_write(const pl_opts *o, const seg_state *s, int fd, const char *path, const char *title,
                     const void *labels, int label_bytes, int64_t classes, double seconds, char *err);

#endif
