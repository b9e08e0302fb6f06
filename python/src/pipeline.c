/*
 * pipeline.c -- segment() and plan_job(): a whole job of swi_pipeline.h (the inputs read,
 * preprocessed, brought to the model's grid, predicted, written) driven from Python.
 *
 * swi/_pipeline.py checks the arguments and hands over a dict of swi_job_spec's fields by
 * their C names (str, int, float, lists of them) and, for the caller's predictors, one
 * callable each, called through callbacks.c's bridge with the batch's shape.
 *
 * Each library call runs on a thread of its own with the GIL released while the calling
 * thread waits for it and looks for signals between short waits: Ctrl-C cancels the job
 * (swi_job_cancel, and the hooks' cancelled poll) and its KeyboardInterrupt is raised once
 * the job has stopped and freed what it held. The callbacks take the GIL on that thread.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef SWI_HAVE_PIPELINE
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job.h"
#include "swi_io.h"

/* ------------------------------------------------------------ one job's state */

static void message_cb(void *user, const char *line) {
    job_state *js = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *text = PyUnicode_DecodeUTF8(line, (Py_ssize_t)strlen(line), "replace"); /* paths: any bytes */
    PyObject *r = text ? PyObject_CallOneArg(js->message, text) : NULL;
    Py_XDECREF(text);
    if (r)
        Py_DECREF(r);
    else
        PyErr_WriteUnraisable(js->message); /* a warning is not worth failing the job */
    PyGILState_Release(gil);
}

static int cancelled_cb(void *user) {
    job_state *js = user;
    return atomic_load(&js->cancel);
}

/* hooks.progress takes the job_state; swipy_progress_cb wants a run_state */
static int progress_cb(void *user, int64_t done, int64_t total) {
    job_state *js = user;
    return swipy_progress_cb(&js->hook_rs, done, total);
}

static void drop_stashed(run_state *rs) {
    Py_CLEAR(rs->exc_type);
    Py_CLEAR(rs->exc_value);
    Py_CLEAR(rs->exc_tb);
}

void swipy_job_state_free(job_state *js) {
    if (js->job) swi_job_free(js->job);
    js->job = NULL;
    for (int i = 0; i < js->n_members; i++) drop_stashed(&js->members[i]);
    drop_stashed(&js->hook_rs);
    PyMem_Free(js->members);
    PyMem_Free(js->preds);
    Py_XDECREF(js->intr_type);
    Py_XDECREF(js->intr_value);
    Py_XDECREF(js->intr_tb);
    memset(js, 0, sizeof *js);
}

int swipy_job_state_init(job_state *js, PyObject *spec, PyObject *predictors, PyObject *copy_into,
                         PyObject *progress, PyObject *message) {
    memset(js, 0, sizeof *js);
    atomic_init(&js->cancel, 0);
    swi_job_spec_init(&js->spec);
    if (swipy_job_spec(spec, &js->spec) < 0) return -1;
    if ((progress != Py_None && !PyCallable_Check(progress)) || !PyCallable_Check(message) ||
        !PyCallable_Check(copy_into)) {
        PyErr_SetString(PyExc_TypeError, "internal: progress, message and copy_into must be callable");
        return -1;
    }
    js->message = message;
    js->hook_rs.progress = progress == Py_None ? NULL : progress;
    js->hooks.message = message_cb;
    js->hooks.progress = progress_cb;
    js->hooks.cancelled = cancelled_cb;
    js->hooks.user = js;
    if (predictors != Py_None) {
        if (!PyList_Check(predictors)) return swipy_bad_field("predictors", "a list");
        Py_ssize_t n = PyList_GET_SIZE(predictors);
        if (n < 1 || n > SWI_JOB_MAX_MODELS) {
            PyErr_Format(PyExc_ValueError, "1..%d predictors, got %zd", SWI_JOB_MAX_MODELS, n);
            return -1;
        }
        js->members = PyMem_Calloc((size_t)n, sizeof *js->members);
        js->preds = PyMem_Calloc((size_t)n, sizeof *js->preds);
        if (!js->members || !js->preds) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            run_state *rs = &js->members[i];
            rs->predictor = PyList_GET_ITEM(predictors, i); /* borrowed: the list lives for the call */
            if (!PyCallable_Check(rs->predictor)) return swipy_bad_field("predictors", "a list of callables");
            rs->copy_into = copy_into;
            rs->n_heads = 1;
            rs->dims = 3;
            rs->pass_shape = 1;
            rs->refuse_nan = 1; /* as the command refuses a network's NaN */
            js->preds[i].predict = swipy_predict_cb;
            js->preds[i].user = rs;
        }
        js->n_members = (int)n;
#ifdef SWI_PY_JOB_PREDICTORS
        js->spec.predictors = js->preds;
        js->spec.n_predictors = (int)n;
#else
        PyErr_SetString(PyExc_RuntimeError, "this pipeline library runs ONNX models only (its swi_job_spec "
                                            "takes no predictors)");
        return -1;
#endif
    }
    return 0;
}

/* ------------------------------------------------------------ a call on a thread of its own */

static void do_op(job_call *c) {
    job_state *js = c->js;
    switch (c->op) {
    case OP_OPEN: c->st = swi_job_open(&js->spec, &js->hooks, &js->job, c->err, sizeof c->err); break;
    case OP_PLAN: c->st = swi_job_plan_run(js->job, c->count_reuse, c->plan, c->err, sizeof c->err); break;
    case OP_RUN: c->st = swi_job_run(js->job, c->keep, c->err, sizeof c->err); break;
#ifdef SWI_PY_JOB_FOLDER
    case OP_FOLDER_OPEN:
        c->st = swi_folder_open(c->fspec, c->fhooks, &c->folder, c->err, sizeof c->err);
        break;
    case OP_FOLDER_RUN: c->st = swi_folder_run(c->folder, c->fres, c->err, sizeof c->err); break;
#else
    default: c->st = SWI_ERR_INVALID_ARG; break;
#endif
    }
}

static void *job_thread(void *arg) {
    job_call *c = arg;
    do_op(c);
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Wait up to 50 ms (how soon Ctrl-C is seen) for the call to finish; 1 when it has. */
static int wait_done(job_call *c) {
    pthread_mutex_lock(&c->mu);
    if (!c->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000 * 1000 * 1000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000 * 1000 * 1000;
        }
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    int done = c->done;
    pthread_mutex_unlock(&c->mu);
    return done;
}

void swipy_call_job(job_call *c) {
    job_state *js = c->js;
    c->err[0] = '\0';
    c->done = 0;
    pthread_t th;
    int started = pthread_mutex_init(&c->mu, NULL) == 0;
    if (started && pthread_cond_init(&c->cv, NULL) != 0) {
        pthread_mutex_destroy(&c->mu);
        started = 0;
    }
    if (started && pthread_create(&th, NULL, job_thread, c) != 0) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        started = 0;
    }
    PyThreadState *ts;
    if (!started) { /* no thread: run here; Ctrl-C is then seen at the predictor's next call */
        ts = PyEval_SaveThread();
        do_op(c);
        PyEval_RestoreThread(ts);
        return;
    }
    for (;;) {
        ts = PyEval_SaveThread();
        int finished = wait_done(c);
        PyEval_RestoreThread(ts);
        if (finished) break;
        if (!js->intr_type && PyErr_CheckSignals() < 0) {
            PyErr_Fetch(&js->intr_type, &js->intr_value, &js->intr_tb);
            atomic_store(&js->cancel, 1);
            /* swi_job_open is still writing js->job, and swi_folder_open c->folder: the
             * cancelled hook stops them */
#ifdef SWI_PY_JOB_FOLDER
            if (c->op == OP_FOLDER_RUN) swi_folder_cancel(c->folder);
#endif
            if (c->op == OP_PLAN || c->op == OP_RUN) swi_job_cancel(js->job);
        }
    }
    pthread_join(th, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

static int restore_stashed(run_state *rs) {
    if (!rs->exc_type) return 0;
    PyErr_Restore(rs->exc_type, rs->exc_value, rs->exc_tb);
    rs->exc_type = rs->exc_value = rs->exc_tb = NULL;
    return 1;
}

int swipy_raise_job(job_state *js, const job_call *c) {
    int raised = 0;
    if (js->intr_type) {
        PyErr_Restore(js->intr_type, js->intr_value, js->intr_tb);
        js->intr_type = js->intr_value = js->intr_tb = NULL;
        raised = 1;
    }
    for (int i = 0; i < js->n_members; i++) {
        if (!raised)
            raised = restore_stashed(&js->members[i]);
        else
            drop_stashed(&js->members[i]);
    }
    if (!raised)
        raised = restore_stashed(&js->hook_rs);
    else
        drop_stashed(&js->hook_rs);
    if (raised) return -1;
    if (c->st == SWI_OK) return 0;
    const char *msg = c->err[0] ? c->err : "the job failed";
    switch (c->st) {
    case SWI_ERR_INVALID_ARG: PyErr_SetString(PyExc_ValueError, msg); break;
    case SWI_ERR_IO: PyErr_SetString(PyExc_OSError, msg); break;
    default: swipy_raise_status(c->st, msg); break;
    }
    return -1;
}

static int open_job(job_state *js) {
    job_call c;
    memset(&c, 0, sizeof c);
    c.op = OP_OPEN;
    c.js = js;
    swipy_call_job(&c);
    if (swipy_raise_job(js, &c) < 0) return -1;
    if (!js->job) {
        PyErr_SetString(PyExc_RuntimeError, "internal: swi_job_open gave no job");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ results */

int swipy_dict_set(PyObject *d, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return r;
}

static void free_capsule(PyObject *cap) { free(PyCapsule_GetPointer(cap, "swi_job_buffer")); }

/* A malloc'd buffer as a Result that frees it with its last array; *ptr is taken over
 * (NULL afterwards) whether or not this succeeds. */
static PyObject *adopt_buffer(void **ptr, char fmt, Py_ssize_t itemsize, int ndim, const int64_t *shape) {
    void *p = *ptr;
    *ptr = NULL;
    if (!p) Py_RETURN_NONE;
    PyObject *cap = PyCapsule_New(p, "swi_job_buffer", free_capsule);
    if (!cap) {
        free(p);
        return NULL;
    }
    PyObject *r = swipy_result_wrap(cap, p, fmt, itemsize, ndim, shape);
    Py_DECREF(cap);
    return r;
}

static PyObject *double_tuple(const double *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *x = PyFloat_FromDouble(v[k]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *result_dict(swi_job_result *r) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    char lfmt = r->label_bytes == 2 ? 'H' : 'B';
    PyObject *lab = adopt_buffer(&r->labels, lfmt, r->label_bytes == 2 ? 2 : 1, 3, r->size);
#ifdef SWI_PY_JOB_KEEP_SCORES
    int64_t shape[4] = {r->classes, r->size[0], r->size[1], r->size[2]};
    void *sp = r->scores;
    r->scores = NULL;
    PyObject *sc = adopt_buffer(&sp, 'f', 4, 4, shape);
#else
    PyObject *sc = Py_NewRef(Py_None);
#endif
    double aff[16];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) aff[4 * i + j] = r->affine[i][j];
#ifdef SWI_PY_JOB_STATISTICS
    /* the JSON text of --statistics, parsed by swi/_pipeline.py */
    PyObject *js = r->statistics ? PyUnicode_FromString(r->statistics) : Py_NewRef(Py_None);
#else
    PyObject *js = Py_NewRef(Py_None);
#endif
    if (swipy_dict_set(d, "statistics", js) < 0) {
        Py_XDECREF(lab);
        Py_XDECREF(sc);
        Py_DECREF(d);
        return NULL;
    }
    PyObject *stats = PyDict_New();
    if (swipy_dict_set(d, "labels", lab) < 0 || swipy_dict_set(d, "scores", sc) < 0 ||
        swipy_dict_set(d, "size", swipy_int64_tuple(r->size, 3)) < 0 ||
        swipy_dict_set(d, "classes", PyLong_FromLongLong(r->classes)) < 0 ||
        swipy_dict_set(d, "affine", double_tuple(aff, 16)) < 0 ||
        swipy_dict_set(d, "seconds", PyFloat_FromDouble(r->seconds)) < 0 || !stats ||
        swipy_dict_set(stats, "windows_total", PyLong_FromLongLong(r->stats.windows_total)) < 0 ||
        swipy_dict_set(stats, "windows_predicted", PyLong_FromLongLong(r->stats.windows_predicted)) < 0 ||
        swipy_dict_set(stats, "windows_reused", PyLong_FromLongLong(r->stats.windows_reused)) < 0 ||
        swipy_dict_set(stats, "predictor_calls", PyLong_FromLongLong(r->stats.predictor_calls)) < 0 ||
        swipy_dict_set(stats, "bytes_partial_peak", PyLong_FromSize_t(r->stats.bytes_partial_peak)) < 0 ||
        swipy_dict_set(d, "stats", Py_NewRef(stats)) < 0) {
        Py_XDECREF(stats);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(stats);
    return d;
}

/* segment(spec, predictors, copy_into, progress, message, keep) -> dict: run the job; with keep
 * the labels (and with spec keep_scores the scores) come back on the input grid. */
PyObject *swipy_segment(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"spec", "predictors", "copy_into", "progress", "message", "keep", NULL};
    PyObject *spec, *predictors, *copy_into, *progress, *message;
    int keep = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOp:segment", kwlist, &spec, &predictors, &copy_into,
                                     &progress, &message, &keep))
        return NULL;
    job_state js;
    PyObject *ret = NULL;
    swi_job_result res;
    memset(&res, 0, sizeof res);
    if (swipy_job_state_init(&js, spec, predictors, copy_into, progress, message) < 0) goto out;
    if (open_job(&js) < 0) goto out;
    job_call c;
    memset(&c, 0, sizeof c);
    c.op = OP_RUN;
    c.js = &js;
    c.keep = keep ? &res : NULL;
    swipy_call_job(&c);
    if (swipy_raise_job(&js, &c) < 0) goto out;
    ret = result_dict(&res);
out:
    swi_job_result_free(&res);
    swipy_job_state_free(&js);
    return ret;
}

/* read_frames(path) -> Result float32 [frames, *size]: a volume file as the job wrote it
 * (the scores of a library whose results carry no scores). */
PyObject *swipy_read_frames(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s:read_frames", &path)) return NULL;
    swi_volume *v = PyMem_Calloc(1, sizeof *v);
    if (!v) return PyErr_NoMemory();
    char err[SWI_JOB_ERRLEN];
    PyObject *ret = NULL;
    float *data = NULL;
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_volume_open(path, v, err, sizeof err);
    Py_END_ALLOW_THREADS if (st != SWI_OK) goto fail;
    const int64_t n = swi_volume_voxels(v), frames = v->frames;
    if (n <= 0 || frames <= 0 || (uint64_t)n > SIZE_MAX / sizeof(float) / (uint64_t)frames) {
        st = SWI_ERR_OVERFLOW;
        snprintf(err, sizeof err, "%s: too large to read", path);
        goto fail;
    }
    data = malloc((size_t)n * (size_t)frames * sizeof(float));
    if (!data) {
        PyMem_Free(v);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS st = swi_volume_read_frames(v, data, NULL, NULL, err, sizeof err);
    Py_END_ALLOW_THREADS if (st != SWI_OK) goto fail;
    int64_t shape[4] = {frames, v->size[0], v->size[1], v->size[2]};
    void *p = data;
    data = NULL;
    ret = adopt_buffer(&p, 'f', 4, 4, shape);
    PyMem_Free(v);
    return ret;
fail:
    free(data);
    PyMem_Free(v);
    if (st == SWI_ERR_IO)
        PyErr_SetString(PyExc_OSError, err);
    else
        swipy_raise_status(st, err);
    return NULL;
}

/* ------------------------------------------------------------ plan_job */

PyObject *swipy_plan_job(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"spec", "predictors", "copy_into", "message", "count_reuse", NULL};
    PyObject *spec, *predictors, *copy_into, *message;
    int count_reuse = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOp:plan_job", kwlist, &spec, &predictors, &copy_into,
                                     &message, &count_reuse))
        return NULL;
    job_state js;
    PyObject *d = NULL, *eng = NULL;
    char *text = NULL;
    if (swipy_job_state_init(&js, spec, predictors, copy_into, Py_None, message) < 0) goto out;
    if (open_job(&js) < 0) goto out;
    swi_job_plan pl;
    memset(&pl, 0, sizeof pl);
    job_call c;
    memset(&c, 0, sizeof c);
    c.op = OP_PLAN;
    c.js = &js;
    c.count_reuse = count_reuse;
    c.plan = &pl;
    swipy_call_job(&c);
    if (swipy_raise_job(&js, &c) < 0) goto out;
    /* the text, in a buffer grown until it holds all of it */
    size_t cap = 16384, len = 0;
    for (;;) {
        char *t = realloc(text, cap);
        if (!t) {
            PyErr_NoMemory();
            goto out;
        }
        text = t;
        len = swi_job_describe(js.job, &pl, text, cap);
        if (len + 1 < cap || cap >= ((size_t)1 << 24)) break;
        cap *= 4;
    }
    if (len >= cap) len = cap - 1;
    d = PyDict_New();
    eng = PyDict_New();
    if (!d || !eng || swipy_plan_fields(eng, &pl.engine, 1) < 0 ||
        swipy_dict_set(d, "engine", Py_NewRef(eng)) < 0 ||
        swipy_dict_set(d, "beside_bytes", PyLong_FromSize_t(pl.beside_bytes)) < 0 ||
        swipy_dict_set(d, "reading_bytes", PyLong_FromSize_t(pl.reading_bytes)) < 0 ||
        swipy_dict_set(d, "peak_bytes", PyLong_FromSize_t(pl.peak_bytes)) < 0 ||
        swipy_dict_set(d, "size", swipy_int64_tuple(pl.size, 3)) < 0 ||
        swipy_dict_set(d, "input_size", swipy_int64_tuple(pl.input_size, 3)) < 0 ||
        swipy_dict_set(d, "channels", PyLong_FromLongLong(pl.channels)) < 0 ||
        swipy_dict_set(d, "classes", PyLong_FromLongLong(pl.classes)) < 0 ||
        swipy_dict_set(d, "members", PyLong_FromLong(pl.members)) < 0 ||
        swipy_dict_set(d, "windows_whole", PyLong_FromLongLong(pl.windows_whole)) < 0 ||
        swipy_dict_set(d, "region",
                       pl.region
                           ? Py_BuildValue("{s:N,s:N,s:N,s:N,s:n}", "lo", swipy_int64_tuple(pl.region_lo, 3),
                                           "hi", swipy_int64_tuple(pl.region_hi, 3), "model_lo",
                                           swipy_int64_tuple(pl.model_lo, 3), "model_hi",
                                           swipy_int64_tuple(pl.model_hi, 3), "whole_engine_bytes",
                                           (Py_ssize_t)pl.whole_engine_bytes)
                           : Py_NewRef(Py_None)) < 0 ||
        swipy_dict_set(d, "fits", PyBool_FromLong(pl.fits)) < 0 ||
        swipy_dict_set(d, "unfit", pl.fits ? Py_NewRef(Py_None) : PyUnicode_FromString(pl.unfit)) < 0 ||
        swipy_dict_set(d, "describe", PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace")) < 0)
        Py_CLEAR(d);
out:
    Py_XDECREF(eng);
    free(text);
    swipy_job_state_free(&js);
    return d;
}
#endif
