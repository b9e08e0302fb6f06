/*
 * progress.h -- the progress bar (stderr, only when it is a terminal) and the
 * one-line summary.
 */
#ifndef SWI_CLI_PROGRESS_H
#define SWI_CLI_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    int enabled; /**< draw the bar (stderr is a terminal and not --quiet) */
    double t0;   /**< start of the run */
    double last_draw;
    int64_t done, total;
    int drawn;         /**< something is on the line */
    int width;         /**< terminal columns */
    const char *label; /**< drawn first (folder mode: "[3/20] case_007"), or NULL */
} progress;

/** Start timing; the bar is drawn when `want_bar` and stderr is a terminal. */
void progress_init(progress *p, int want_bar);

/** swi_params.progress callback: draws at most 10 times a second and returns non-zero
 *  (cancel) once a signal has arrived. */
int progress_update(void *user, int64_t done, int64_t total);

/** Erase the bar, if drawn. */
void progress_clear(progress *p);

/** Seconds since progress_init. */
double progress_elapsed(const progress *p);

#endif
