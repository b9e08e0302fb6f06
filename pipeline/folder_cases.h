/*
 * folder_cases.h -- folder mode (swi_folder_*, not installed): a folder's cases (folder_cases.c:
 * the input folder listed, nnU-Net's channel naming, a case's channels read into one buffer,
 * report_dir's index), the run (folder.c) and the reading thread with its child processes
 * (folder_reader.c).
 */
#ifndef SWI_PIPELINE_FOLDER_CASES_H
#define SWI_PIPELINE_FOLDER_CASES_H

#include "report_index.h"
#include "swi_io.h"
#include "swi_pipeline.h"
#include "util.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef enum case_state { CASE_TODO, CASE_SKIPPED, CASE_READY, CASE_BAD, CASE_DONE, CASE_FAILED } case_state;

typedef struct fcase {
    char name[256];
    char *files[SWI_JOB_MAX_INPUTS]; /* channels, in order */
    int n_files;
    char problem[SWI_ERRLEN]; /* a naming problem found while listing, or "" */
    char out[PATH_MAX];
    case_state state;
    int mine;  /* of this part */
    int index; /* its place among the cases to run, or -1 */
    /* filled by the reader */
    swi_volume *vols; /* n_files, malloc'd */
    float *input;
    char err[SWI_ERRLEN];
    swi_status err_status; /* with CASE_FAILED */
    int64_t size[3];
    double seconds;
    char page[PATH_MAX];  /* report_dir: its page */
    seg_case_summary sum; /* report_dir: for the index */
} fcase;

struct swi_folder {
    swi_folder_spec spec;
    swi_job_spec job; /* spec.job's copy */
    swi_folder_hooks hooks;
    swi_job *opts_job; /* the spec as every case runs it (the model's card read) */
    fcase *cases;
    int n_cases;
    int *todo; /* indices of the cases to read, in order */
    int n_todo;
    int nnunet; /* an nnU-Net model directory: its naming of channels and outputs */
    const char *nn_ending;
    swi_folder_case *view; /* this part's cases as the result shows them */
    int ran;
    /* the reading thread and cancellation */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int taken; /* cases of todo the running side has started */
    int stop;
    int cancel;
    swi_job *current; /* the job running, for swi_folder_cancel */
};

/* Whether the run is cancelled: swi_folder_cancel, or the hooks' cancelled. */
int folder_cancelled(swi_folder *f);
/* As a swi_io_cancel's test. */
int folder_cancelled_cb(void *folder);

/* The reading thread (folder_reader.c): reads each case of f->todo one ahead of the one
 * running, in the reader program when the spec names one. */
void *folder_reader(void *folder);

/* The cases of the input folder `in` appended to *cases (n_cases of them, realloc'd), sorted
 * by name, leaving out the output and report folders (their real paths; rep_real "" for
 * none). A case whose files do not make channels 0..C-1 gets its problem set. 0, or 1 with
 * err (out of memory, the folder unreadable); the cases stay the caller's to free. */
int seg_list_cases(fcase **cases, int *n_cases, const char *in, const char *out_real, const char *rep_real,
                   char *err);

/* With an nnU-Net model: every case must be CASE_0000<ending>, ... with the model's channels
 * (a problem of the case otherwise, naming the file or channel). */
void seg_cases_nnunet(fcase *cases, int n_cases, int channels, const char *ending);

/* The case's data the reader filled, freed. */
void seg_case_free_data(fcase *c);
/* n cases and the array. */
void seg_cases_free(fcase *cases, int n);

/* Where a case's channels come from: each opened (open), then each read (read) once all
 * are open. Both return 0, 1 for the volume's own failure (err, SWI_ERRLEN bytes, says
 * it) or 2 when the source stopped (it knows why). */
typedef struct seg_case_source {
    int (*open)(void *user, int k, const char *file, swi_volume *v, char *err);
    int (*read)(void *user, int k, const char *file, swi_volume *v, float *x, int64_t n, char *err);
    void *user;
} seg_case_source;

/* Open c's channels through src (NULL: in this process, reads polling cancel), check that
 * they share one grid, read them into c->input (channel-major, c->size) and preprocess
 * them as job does. Returns 0 with c ready, 1 with c->err, or 2 when src stopped; c's data
 * stays the caller's to free either way. */
int seg_case_read(const swi_job *job, fcase *c, const seg_case_source *src, const swi_io_cancel *cancel);

/* Where the index goes and what it covers. */
typedef struct seg_cases_where {
    const char *report_dir;     /* the pages, and the index written here */
    const char *input_dir;      /* named on the index */
    int part_index, part_count; /* index-part-I-of-N.html when part_count > 1 */
} seg_cases_where;

/* report_dir's index of the cases this run saw (CASE_TODO ones, another part's, left out),
 * their classes named by opts_job's card. 0, or 1 with err. */
int seg_cases_index(const fcase *cases, int n_cases, const swi_job *opts_job, const seg_cases_where *o,
                    char *err);

/* "/" between a folder and a name, or "" when the folder already ends in one ("OUT/" as
 * typed gives OUT/case, not OUT//case). */
static inline const char *dir_sep(const char *dir) {
    const size_t n = strlen(dir);
    return n && dir[n - 1] == '/' ? "" : "/";
}

#endif
