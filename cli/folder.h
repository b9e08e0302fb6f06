/*
 * folder.h -- what the files of folder mode share (folder.c the run, folder_cases.c the
 * cases and the summary, folder_child.c the reader thread and its child process).
 */
#ifndef SWI_CLI_FOLDER_H
#define SWI_CLI_FOLDER_H

#include "cli.h"

#include "report_index.h"
#include "swi_pipeline.h"
#include "util.h"

#include <limits.h>
#include <pthread.h>

#define WHO "swi segment"

typedef enum case_state { CASE_TODO, CASE_SKIPPED, CASE_READY, CASE_BAD, CASE_DONE, CASE_FAILED } case_state;

typedef struct fcase {
    char name[256];
    char *files[SEG_MAX_INPUTS]; /* channels, in order */
    int n_files;
    char problem[SWI_ERRLEN]; /* a naming problem found while listing, or "" */
    char out[PATH_MAX];
    case_state state;
    /* filled by the reader */
    swi_volume *vols; /* n_files, malloc'd */
    float *input;
    char err[SWI_ERRLEN];
    int64_t size[3];
    double seconds;
    char page[PATH_MAX];  /* --report-dir: its page */
    seg_case_summary sum; /* --report-dir: for the index */
} fcase;

typedef struct folder {
    const seg_opts *o;
    swi_job *opts_job; /* the options as every case runs them (the model's card read) */
    fcase *cases;
    int n_cases;
    int *todo; /* indices of the cases to read, in order */
    int n_todo;
    /* reader thread state */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int taken; /* cases of todo the main thread has started */
    int stop;
} folder;

/* The case's data the reader filled, freed. */
void free_case_data(fcase *c);
/* Every case and the folder's own. */
void free_folder(folder *f);
/* The cases of the input folder `in`, sorted by name, leaving out the output and report
 * folders (their real paths). 0, or 1 with err. */
int list_cases(folder *f, const char *in, const char *out_real, const char *rep_real, char *err);
/* The reader thread: reads each case of f->todo one ahead of the one running. */
void *folder_reader(void *arg);
/* The summary table on stderr. */
void print_table(const folder *f, double seconds);
/* With an nnU-Net model (folder_nnunet.c): every case must be CASE_0000<ending>, ... with the
 * model's channels (a problem of the case otherwise, naming the file or channel). 0. */
int folder_nnunet_cases(folder *f, int channels, const char *ending, char *err);
/* Its output OUT/CASE<ending>: 0, or 1 when too long. */
int folder_nnunet_output(const folder *f, const fcase *c, const char *ending, char *out, size_t n);
/* --report-dir's index of every case. 0, or 1 with err. */
int write_index(const folder *f, char *err);

#endif
