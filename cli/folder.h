/*
 * folder.h -- what the files of folder mode share (folder.c the run and the summary,
 * folder_child.c the reader thread and its child process; the cases are the pipeline's,
 * folder_cases.h).
 */
#ifndef SWI_CLI_FOLDER_H
#define SWI_CLI_FOLDER_H

#include "cli.h"

#include "folder_cases.h"
#include "swi_pipeline.h"
#include "util.h"

#include <limits.h>
#include <pthread.h>

#define WHO "swi segment"

typedef struct folder {
    const seg_cmd *o;
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

/* Every case and the folder's own. */
void free_folder(folder *f);
/* The reader thread: reads each case of f->todo one ahead of the one running. */
void *folder_reader(void *arg);
/* With an nnU-Net model (folder_nnunet.c): every case must be CASE_0000<ending>, ... with the
 * model's channels (a problem of the case otherwise, naming the file or channel). 0. */
int folder_nnunet_cases(folder *f, int channels, const char *ending, char *err);
/* Its output OUT/CASE<ending>: 0, or 1 when too long. */
int folder_nnunet_output(const folder *f, const fcase *c, const char *ending, char *out, size_t n);

#endif
