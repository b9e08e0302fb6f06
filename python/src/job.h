/*
 * job.h -- what pipeline.c (segment, plan_job), folder.c (segment_folder) and job_spec.c share:
 * a job's spec from a dict, a job's state and the library calls made on a thread of their own
 * (built with the pipeline library only).
 */
#ifndef SWIPY_JOB_H
#define SWIPY_JOB_H

#include <pthread.h>
#include <stdatomic.h>

#include "swi_pipeline.h"
#include "swipy.h"

/* ------------------------------------------------------------ job_spec.c */

/* A dict's values, each taken at most once; `used` counts the keys read so a key the C side
 * does not know (a typo in _pipeline.py) is an error, not silently ignored. */
typedef struct {
    PyObject *d;
    Py_ssize_t used;
} swipy_fields;

/* d[k] into *dst when present and not None; -1 with an exception. */
int swipy_get_str(swipy_fields *f, const char *k, const char **dst);
int swipy_get_int(swipy_fields *f, const char *k, int *dst);
/* A TypeError naming the field; -1. */
int swipy_bad_field(const char *k, const char *what);
/* Every field of swi_job_spec but the predictors, by its C name; -1 with an exception. */
int swipy_job_spec(PyObject *d, swi_job_spec *s);

/* ------------------------------------------------------------ pipeline.c */

/* One job's (or folder's) state: the spec, the hooks into Python, the caller's predictors. */
typedef struct {
    swi_job_spec spec;
    swi_job_hooks hooks; /* user: this state */
    swi_job *job;
    run_state hook_rs; /* progress; messages' exceptions */
    PyObject *message;
    run_state *members; /* one per caller predictor */
    swi_predictor *preds;
    int n_members;
    atomic_int cancel;
    PyObject *intr_type, *intr_value, *intr_tb; /* the KeyboardInterrupt that cancelled it */
} job_state;

/* spec dict, predictors (a list of callables or None), copy_into, progress, message; -1 with an
 * exception (free the state either way). */
int swipy_job_state_init(job_state *js, PyObject *spec, PyObject *predictors, PyObject *copy_into,
                         PyObject *progress, PyObject *message);
void swipy_job_state_free(job_state *js);

typedef enum { OP_OPEN, OP_PLAN, OP_RUN, OP_FOLDER_OPEN, OP_FOLDER_RUN } job_op;

/* One library call and what it needs. */
typedef struct {
    job_op op;
    job_state *js;
    int count_reuse;
    swi_job_plan *plan;
    swi_job_result *keep;
#ifdef SWI_PY_JOB_FOLDER
    const swi_folder_spec *fspec;
    const swi_folder_hooks *fhooks;
    swi_folder *folder;
    swi_folder_result *fres;
#endif
    swi_status st;
    char err[SWI_JOB_ERRLEN];
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} job_call;

/* Make c's call with the GIL released; a signal's exception (Ctrl-C) cancels the job or the
 * folder and is kept in the job_state until the call has returned. */
void swipy_call_job(job_call *c);
/* After a call: the interrupt first, then a callback's exception unchanged, then the
 * library's status. Returns -1 with an exception set, 0 when the call succeeded. */
int swipy_raise_job(job_state *js, const job_call *c);
/* d[k] = v, v's reference taken (NULL v: -1); -1 with an exception. */
int swipy_dict_set(PyObject *d, const char *k, PyObject *v);

/* ------------------------------------------------------------ folder.c */

#ifdef SWI_PY_JOB_FOLDER
PyObject *swipy_segment_folder(PyObject *self, PyObject *args, PyObject *kw);
PyObject *swipy_serve_reader(PyObject *self, PyObject *args);
#endif

#endif
