/* swipy.h -- what the files of the extension module swi._swi share (see _swimodule.c). */
#ifndef SWIPY_H
#define SWIPY_H

#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

#define NDIM_MAX SWI_MAX_DIMS
#define MAX_OUTPUTS 64 /* 8 heads x every reduction, with room */

/* ------------------------------------------------------------ _swimodule.c */

extern PyObject *swipy_budget_error; /* swi.BudgetError, a MemoryError */

/* Raise the Python exception for st with msg (NULL or empty: a generic one); returns NULL. */
PyObject *swipy_raise_status(swi_status st, const char *msg);

/* ------------------------------------------------------------ args.c */

/* Everything both run() and plan() take. Buffers are held until swipy_config_release. */
typedef struct {
    swi_params p;
    swi_tensor in;
    Py_buffer in_view;
    Py_buffer wmap_view;
    int have_in, have_wmap;
    swi_output outs[MAX_OUTPUTS];
    PyObject *out_fns[MAX_OUTPUTS]; /* borrowed: on_region callables or NULL */
    int n_outs;
} config;

/* n integers (floats) of sequence o into out; -1 with an exception naming `what`. */
int swipy_int64_seq(PyObject *o, int n, int64_t *out, const char *what);
int swipy_double_seq(PyObject *o, int n, double *out, const char *what);
/* a tuple of n ints; NULL with an exception */
PyObject *swipy_int64_tuple(const int64_t *v, int n);

int swipy_parse_config(config *c, PyObject *input, PyObject *roi, PyObject *overlap, int mode,
                       PyObject *sigma, PyObject *wmap, int padding_mode, double cval, int sw_batch_size,
                       int threads, PyObject *order, int pipeline, unsigned long long max_memory,
                       PyObject *heads, PyObject *outputs);
void swipy_config_release(config *c);
int swipy_parse_part(swi_params *p, PyObject *part);

/* ------------------------------------------------------------ callbacks.c */

typedef struct run_state run_state;

typedef struct {
    run_state *rs;
    PyObject *fn;
    int index;
} region_user;

/* What the callbacks of one run share (user of every one of them). */
struct run_state {
    PyObject *predictor;
    PyObject *copy_into;
    PyObject *progress;
    int n_heads;
    int dims;
    /* first exception raised in any callback; touched only with the GIL held */
    PyObject *exc_type, *exc_value, *exc_tb;
    region_user regions[MAX_OUTPUTS];
    PyObject *reader; /* reader(image, lo, hi) -> float32 [channels, *(hi - lo)], or NULL */
    int pass_shape;   /* the predictor also gets the batch's shape (count, channels, *roi) */
    int refuse_nan;   /* a job's predictor: NaN outputs fail the run (callbacks.c) */
    int64_t channels;
    swi_reader in_reader;
};

int swipy_predict_cb(void *user, swi_batch *b);
int swipy_reader_cb(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst,
                    char *message, size_t message_size);
int swipy_progress_cb(void *user, int64_t done_w, int64_t total);
int swipy_region_cb(void *user, const swi_region *reg);

/* ------------------------------------------------------------ result.c */

extern PyTypeObject swipy_result_type;
/* frees the swi_ctx of a capsule named "swi_ctx" */
void swipy_ctx_capsule_free(PyObject *cap);
/* output i of a finished run as a Result (None where it was delivered region by region) */
PyObject *swipy_result_for(PyObject *owner, swi_ctx *ctx, const config *c, int i);
/* a C-order buffer of ndim dims (format 'f', 'B' or 'H') that owner keeps alive */
PyObject *swipy_result_wrap(PyObject *owner, void *ptr, char fmt, Py_ssize_t itemsize, int ndim,
                            const int64_t *shape);

/* ------------------------------------------------------------ engine.c, report.c, pipeline.c */

/* the fields of an engine plan (everything but output_size) into dict d; -1 with an exception */
int swipy_plan_fields(PyObject *d, const swi_plan *pl, int n_heads);
PyObject *swipy_run(PyObject *self, PyObject *args, PyObject *kw);
PyObject *swipy_plan(PyObject *self, PyObject *args, PyObject *kw);
PyObject *swipy_window_starts(PyObject *self, PyObject *args);
PyObject *swipy_weights(PyObject *self, PyObject *args);
#ifdef SWI_HAVE_REPORT
PyObject *swipy_report(PyObject *self, PyObject *args);
#endif
#ifdef SWI_HAVE_PIPELINE
PyObject *swipy_segment(PyObject *self, PyObject *args, PyObject *kw);
PyObject *swipy_plan_job(PyObject *self, PyObject *args, PyObject *kw);
PyObject *swipy_read_frames(PyObject *self, PyObject *args);
/* outputs.c: the pipeline's output rules for the package's own writers */
PyObject *swipy_outputs_apart(PyObject *self, PyObject *args);
PyObject *swipy_label_color(PyObject *self, PyObject *args);
PyObject *swipy_store_check_output(PyObject *self, PyObject *args);
PyObject *swipy_output_begin(PyObject *self, PyObject *args);
PyObject *swipy_output_commit(PyObject *self, PyObject *cap);
PyObject *swipy_output_abort(PyObject *self, PyObject *cap);
#endif

#endif
