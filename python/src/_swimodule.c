/*
 * _swimodule.c -- the CPython binding of libswi (package swi, module swi._swi).
 *
 * Only the public API of include/swi.h is used. swi_run runs with the GIL released;
 * every callback (predictor, progress, region) takes the GIL back for as long as it
 * touches Python. The first Python exception raised in a callback is kept and
 * re-raised unchanged once swi_run has returned (every engine buffer freed by then).
 *
 * The Python layer (swi/_core.py and _predictor.py) does the numpy/torch conversions; this module sees
 * only buffers (float32 C order in, engine-owned results out) and plain callables:
 *   predictor(windows: bytearray, images: tuple, starts: tuple) -> [(channels, spatial, obj)]
 *   copy_into(dst: memoryview, obj) -> None       writes one head into the engine's buffer
 *   progress(done, total) -> None
 *   on_region(data: bytearray, image, head, channels, lo, hi) -> None
 *
 * This file is the module itself (its functions, swi.BudgetError); args.c turns Python
 * arguments into swi_params and outputs, callbacks.c holds the engine's callbacks into
 * Python, engine.c run() and plan(), result.c the results' buffers, report.c swi.report,
 * pipeline.c segment() and plan_job() (whole jobs on scans, when built with the pipeline library;
 * job_spec.c their spec, job.h what they share), folder.c segment_folder() (folder mode).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "swipy.h"

PyObject *swipy_budget_error; /* swi.BudgetError, a MemoryError */

/* What the pipeline library of this build offers (pipeline.c) */
#ifdef SWI_HAVE_PIPELINE
#define HAVE_PIPELINE 1
#else
#define HAVE_PIPELINE 0
#endif
#ifdef SWI_PY_JOB_PREDICTORS
#define PIPELINE_PREDICTORS 1
#else
#define PIPELINE_PREDICTORS 0
#endif
#ifdef SWI_PY_JOB_KEEP_SCORES
#define PIPELINE_KEEP_SCORES 1
#else
#define PIPELINE_KEEP_SCORES 0
#endif
#ifdef SWI_PY_JOB_MASKS
#define PIPELINE_MASKS 1
#else
#define PIPELINE_MASKS 0
#endif
#ifdef SWI_PY_JOB_CHUNKS
#define PIPELINE_CHUNKS 1
#else
#define PIPELINE_CHUNKS 0
#endif
#ifdef SWI_PY_JOB_STATISTICS
#define PIPELINE_STATISTICS 1
#else
#define PIPELINE_STATISTICS 0
#endif
#ifdef SWI_PY_JOB_NNUNET
#define PIPELINE_NNUNET 1
#else
#define PIPELINE_NNUNET 0
#endif
#if defined(SWI_HAVE_PIPELINE) && defined(SWI_PY_JOB_FOLDER)
#define PIPELINE_FOLDER 1
#include "job.h"
#else
#define PIPELINE_FOLDER 0
#endif

PyObject *swipy_raise_status(swi_status st, const char *msg) {
    PyObject *type;
    switch (st) {
    case SWI_ERR_INVALID_ARG:
    case SWI_ERR_SHAPE: type = PyExc_ValueError; break;
    case SWI_ERR_NOMEM: type = PyExc_MemoryError; break;
    case SWI_ERR_OVERFLOW: type = PyExc_OverflowError; break;
    case SWI_ERR_BUDGET: type = swipy_budget_error; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_Format(type, "%s (%s)", msg && msg[0] ? msg : "libswi failed", swi_status_name(st));
    return NULL;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))swipy_run, METH_VARARGS | METH_KEYWORDS, "Run swi_run (internal)."},
    {"plan", (PyCFunction)(void (*)(void))swipy_plan, METH_VARARGS | METH_KEYWORDS,
     "Run swi_plan_run (internal)."},
    {"window_starts", swipy_window_starts, METH_VARARGS, "window_starts(size, roi, overlap) -> tuple"},
    {"weights", swipy_weights, METH_VARARGS, "weights(mode, roi, sigma_scale) -> float32 bytes"},
#ifdef SWI_HAVE_REPORT
    {"report", swipy_report, METH_VARARGS, "Write a review page (internal; swi.report)."},
#endif
#ifdef SWI_HAVE_PIPELINE
    {"segment", (PyCFunction)(void (*)(void))swipy_segment, METH_VARARGS | METH_KEYWORDS,
     "Run a job of swi_pipeline.h (internal; swi.segment)."},
    {"plan_job", (PyCFunction)(void (*)(void))swipy_plan_job, METH_VARARGS | METH_KEYWORDS,
     "Plan a job of swi_pipeline.h (internal; swi.plan_job)."},
    {"read_frames", swipy_read_frames, METH_VARARGS, "Read a volume file's frames as float32 (internal)."},
    {"outputs_apart", swipy_outputs_apart, METH_VARARGS, "swi_job_outputs_apart (internal; swi._outputs)."},
    {"label_color", swipy_label_color, METH_VARARGS,
     "swi_io_label_color (internal; swi.dask's class table)."},
    {"store_check_output", swipy_store_check_output, METH_VARARGS,
     "swi_store_check_output (internal; swi._outputs)."},
    {"output_begin", swipy_output_begin, METH_VARARGS, "swi_job_output_begin (internal; swi._outputs)."},
    {"output_commit", swipy_output_commit, METH_O, "swi_job_output_commit (internal; swi._outputs)."},
    {"output_abort", swipy_output_abort, METH_O, "swi_job_output_abort (internal; swi._outputs)."},
#endif
#if PIPELINE_FOLDER
    {"segment_folder", (PyCFunction)(void (*)(void))swipy_segment_folder, METH_VARARGS | METH_KEYWORDS,
     "Run every case of a folder (internal; swi.segment_folder)."},
    {"serve_reader", swipy_serve_reader, METH_VARARGS, "Answer as a folder's reader program (internal)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "swi._swi", "libswi binding (internal)", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__swi(void) {
    if (PyType_Ready(&swipy_result_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    swipy_budget_error = PyErr_NewExceptionWithDoc(
        "swi.BudgetError", "max_memory is below the smallest plan; the message names the minimum.",
        PyExc_MemoryError, NULL);
    if (!swipy_budget_error || PyModule_AddObjectRef(m, "BudgetError", swipy_budget_error) < 0 ||
        PyModule_AddStringConstant(m, "libswi_version", swi_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", SWI_MAX_DIMS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_HEADS", SWI_MAX_HEADS) < 0 ||
        PyModule_AddIntConstant(m, "HAVE_PIPELINE", HAVE_PIPELINE) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_PREDICTORS", PIPELINE_PREDICTORS) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_KEEP_SCORES", PIPELINE_KEEP_SCORES) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_STATISTICS", PIPELINE_STATISTICS) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_CHUNKS", PIPELINE_CHUNKS) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_MASKS", PIPELINE_MASKS) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_NNUNET", PIPELINE_NNUNET) < 0 ||
        PyModule_AddIntConstant(m, "PIPELINE_FOLDER", PIPELINE_FOLDER) < 0) {
        Py_XDECREF(swipy_budget_error);
        swipy_budget_error = NULL;
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
