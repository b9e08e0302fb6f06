/* report_internal.h -- what the page and index writers share (not installed). */
#ifndef SWI_REPORT_INTERNAL_H
#define SWI_REPORT_INTERNAL_H

#include <stdio.h>

#include "swi_report.h"

/* the templates, embedded at build time (page.html, index.html) */
extern const char rep__page_html[];
extern const char rep__index_html[];

void rep__err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* base64, in lines of 76 characters when wrap */
void rep__base64(FILE *f, const unsigned char *b, size_t n, int wrap);
/* a JSON string that cannot end a <script> element */
void rep__json_str(FILE *f, const char *s);
/* text escaped for HTML (content and attribute values) */
void rep__html(FILE *f, const char *s);
/* a regular file whole (NUL-terminated), `what` naming it in messages */
int rep__read_file(const char *path, const char *what, char **out, size_t *len, char *err, size_t n);
/* fclose with the stream's first error: 0, or 1 with err */
int rep__finish(FILE *f, const char *name, char *err, size_t n);
/* one voxel's volume in millilitres */
double rep__voxel_ml(const double A[4][4]);

#endif
