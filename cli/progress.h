/*
 * progress.h -- the progress of a run on stderr: a bar redrawn in place when stderr is a
 * terminal, else (a log: SLURM, nohup, CI) a line at most once a period (10 s,
 * SWI_PROGRESS_PERIOD seconds when set) and at each 10 % step, the first once the run has
 * run one period (a shorter run prints its summary only). And the one-line summary.
 */
#ifndef SWI_CLI_PROGRESS_H
#define SWI_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct progress {
    int enabled;   /**< draw the bar (stderr is a terminal and not --quiet) */
    int log;       /**< write lines (stderr is not a terminal and not --quiet) */
    double period; /**< seconds between lines */
    double t0;     /**< start of the run */
    double last_draw;
    int step; /**< the last 10 % step a line told */
    int64_t done, total;
    int drawn;         /**< something is on the line */
    int width;         /**< terminal columns */
    const char *label; /**< drawn first (folder mode: "[3/20] case_007"), or NULL */
    const char *who;   /**< a line's prefix ("swi segment: case_007"), or NULL for "swi" */
    /** Folder mode: the whole folder's part of a bar or line, given the case's fraction done
     *  ("3/20 cases done, folder ETA 4:10"), or NULL. */
    void (*outer)(void *user, double fraction, char *buf, size_t n);
    void *outer_user;
} progress;

/** Start timing; when `want`, a bar if stderr is a terminal, else lines. */
void progress_init(progress *p, int want);

/** The period between lines: SWI_PROGRESS_PERIOD (seconds, > 0) or 10. */
double progress_period(void);

/** "1:05", "2:03:04", or "--:--" for an unknown (negative) time. */
void progress_time(double seconds, char *buf, size_t n);

/** The resident memory now (/proc/self/statm; the peak where that is unreadable). */
size_t progress_rss(void);

/** swi_params.progress callback: draws at most 10 times a second (a line at most once a
 *  period and at each 10 % step) and returns non-zero (cancel) once a signal has arrived. */
int progress_update(void *user, int64_t done, int64_t total);

/** Erase the bar, if drawn. */
void progress_clear(progress *p);

/** Seconds since progress_init. */
double progress_elapsed(const progress *p);

#endif
