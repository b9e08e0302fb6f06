/*
 * outputs.c -- the pipeline's output rules for the package's own writers (swi/_outputs.py:
 * swi.report, swi.dask, the nnU-Net converter), so that no door writes a file by rules of
 * its own:
 *   outputs_apart(inputs, outputs) -> None | str     swi_job_outputs_apart
 *   store_check_output(name, force) -> None | str    swi_store_check_output
 *   output_begin(path, force) -> (handle, fd)        swi_job_output_begin (OSError)
 *   output_commit(handle) / output_abort(handle)     swi_job_output_commit / _abort
 *   label_color(l) -> (r, g, b)                      swi_io_label_color (the stores' colours)
 * A refusal comes back as its message (None: accepted); the Python side picks the
 * exception. A handle never committed is aborted when it is collected.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "swipy.h"

#ifdef SWI_HAVE_PIPELINE
#include <errno.h>
#include <stdlib.h>

#include "swi_io.h"
#include "swi_pipeline.h"
#include "swi_store.h"

#define CAPSULE "swi._swi.output"
#define ERRLEN 1024

/* A list of (option, path) pairs as swi_job_path entries; the strings live as long as seq. */
static int paths_of(PyObject *seq, swi_job_path **out, int *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of (option, path) pairs");
    if (!fast) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    Py_DECREF(fast); /* seq keeps its items alive */
    if (len > 4096) {
        PyErr_SetString(PyExc_ValueError, "at most 4096 paths");
        return -1;
    }
    *n = (int)len;
    *out = PyMem_Calloc((size_t)len + 1, sizeof **out);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_GetItem(seq, i);
        if (!item) return -1;
        const char *opt = NULL, *path = NULL;
        int ok = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 &&
                 (opt = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0))) &&
                 (path = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 1)));
        Py_DECREF(item); /* the tuple is held by seq, its strings by the tuple */
        if (!ok) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "expected (option, path) pairs of str");
            return -1;
        }
        (*out)[i].option = opt;
        (*out)[i].path = path;
    }
    return 0;
}

PyObject *swipy_label_color(PyObject *self, PyObject *args) {
    (void)self;
    long long l;
    if (!PyArg_ParseTuple(args, "L", &l)) return NULL;
    unsigned char rgb[3] = {0, 0, 0};
    if (l > 0) swi_io_label_color((int64_t)l, rgb);
    return Py_BuildValue("(iii)", rgb[0], rgb[1], rgb[2]);
}

PyObject *swipy_outputs_apart(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ins, *outs;
    if (!PyArg_ParseTuple(args, "OO:outputs_apart", &ins, &outs)) return NULL;
    swi_job_path *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    PyObject *r = NULL;
    if (paths_of(ins, &a, &na) == 0 && paths_of(outs, &b, &nb) == 0) {
        char err[ERRLEN];
        swi_status st;
        PyThreadState *ts = PyEval_SaveThread();
        st = swi_job_outputs_apart(a, na, b, nb, err, sizeof err);
        PyEval_RestoreThread(ts);
        r = st == SWI_OK ? Py_NewRef(Py_None) : PyUnicode_DecodeFSDefault(err);
    }
    PyMem_Free(a);
    PyMem_Free(b);
    return r;
}

PyObject *swipy_store_check_output(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *name_o;
    int force = 0;
    if (!PyArg_ParseTuple(args, "O&p:store_check_output", PyUnicode_FSConverter, &name_o, &force))
        return NULL;
    char err[ERRLEN];
    swi_status st;
    PyThreadState *ts = PyEval_SaveThread();
    st = swi_store_check_output(PyBytes_AS_STRING(name_o), force, err, sizeof err);
    PyEval_RestoreThread(ts);
    Py_DECREF(name_o);
    return st == SWI_OK ? Py_NewRef(Py_None) : PyUnicode_DecodeFSDefault(err);
}

static void output_destroy(PyObject *cap) {
    swi_job_output *o = PyCapsule_GetPointer(cap, CAPSULE);
    if (o) swi_job_output_abort(o);
}

PyObject *swipy_output_begin(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_o;
    int force = 0;
    if (!PyArg_ParseTuple(args, "O&p:output_begin", PyUnicode_FSConverter, &path_o, &force)) return NULL;
    char err[ERRLEN];
    swi_job_output *o = NULL;
    int fd = -1;
    swi_status st = swi_job_output_begin(PyBytes_AS_STRING(path_o), force, &o, &fd, err, sizeof err);
    Py_DECREF(path_o);
    if (st != SWI_OK) {
        PyErr_SetString(PyExc_FileExistsError, err);
        return NULL;
    }
    PyObject *cap = PyCapsule_New(o, CAPSULE, output_destroy);
    if (!cap) {
        swi_job_output_abort(o);
        return NULL;
    }
    return Py_BuildValue("(Ni)", cap, fd);
}

/* The handle's output, taken out of its capsule (which then owns nothing). */
static swi_job_output *take(PyObject *cap) {
    swi_job_output *o = PyCapsule_GetPointer(cap, CAPSULE);
    if (!o) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "the output was committed or aborted");
        return NULL;
    }
    PyCapsule_SetDestructor(cap, NULL);
    PyCapsule_SetPointer(cap, (void *)&take); /* spent: any pointer but NULL, never freed */
    PyCapsule_SetName(cap, "swi._swi.output.spent");
    return o;
}

PyObject *swipy_output_commit(PyObject *self, PyObject *cap) {
    (void)self;
    swi_job_output *o = take(cap);
    if (!o) return NULL;
    char err[ERRLEN];
    swi_status st;
    PyThreadState *ts = PyEval_SaveThread();
    st = swi_job_output_commit(o, err, sizeof err);
    PyEval_RestoreThread(ts);
    if (st != SWI_OK) {
        PyErr_SetString(PyExc_OSError, err);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *swipy_output_abort(PyObject *self, PyObject *cap) {
    (void)self;
    if (PyCapsule_IsValid(cap, CAPSULE)) {
        swi_job_output *o = take(cap);
        if (!o) return NULL;
        swi_job_output_abort(o);
    }
    Py_RETURN_NONE;
}

#endif
