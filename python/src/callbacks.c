/* callbacks.c -- the engine's callbacks into Python: predictor, input reader, progress,
 * regions. Each takes the GIL for as long as it touches Python; the first exception is kept
 * in the run_state for swipy_run to re-raise. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <string.h>

#include "swipy.h"

/* Keep the pending exception as the run's failure (the first one wins). */
static void stash_exception(run_state *rs) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "swi callback failed without an exception");
    if (rs->exc_type) {
        PyErr_Clear();
        return;
    }
    PyErr_Fetch(&rs->exc_type, &rs->exc_value, &rs->exc_tb);
}

/* A predictor output the engine reads in place (swi_batch_set_output) until it gives it
 * back, which may happen on the run's thread without the GIL. */
typedef struct adopted {
    Py_buffer view;
} adopted;

static void release_adopted(void *user, const float *data) {
    (void)data;
    adopted *a = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyBuffer_Release(&a->view);
    PyGILState_Release(gil);
    PyMem_RawFree(a);
}

/* Hand obj to the engine without a copy when it is a C-contiguous float32 buffer of n
 * bytes. Returns 1 when handed over, 0 when not applicable, -1 on an error. */
static int adopt_head(swi_batch *b, int h, int64_t ch, const int64_t *sp, PyObject *obj, size_t n,
                      const float **data) {
    if (!PyObject_CheckBuffer(obj)) return 0;
    adopted *a = PyMem_RawMalloc(sizeof *a);
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear(); /* not a contiguous buffer: the copy path handles it */
        PyMem_RawFree(a);
        return 0;
    }
    const char *f = a->view.format ? a->view.format : "B";
    int is_f32 = a->view.itemsize == 4 && (!strcmp(f, "f") || !strcmp(f, "<f") || !strcmp(f, "=f"));
    if (!is_f32 || a->view.len != (Py_ssize_t)n) {
        PyBuffer_Release(&a->view);
        PyMem_RawFree(a);
        return 0;
    }
    *data = (const float *)a->view.buf; /* valid until the engine gives it back: after this call */
    if (swi_batch_set_output(b, h, ch, sp, (const float *)a->view.buf, release_adopted, a) != 0) {
        PyBuffer_Release(&a->view);
        PyMem_RawFree(a);
        PyErr_Format(PyExc_ValueError, "output %d of the predictor does not match the shape the run expects",
                     h);
        return -1;
    }
    return 1;
}

/* A job's predictor (rs->refuse_nan) may not return NaN: the labels of such scores look
 * fine and are not. The command refuses a network's NaN so (backends/ort/predictor.c);
 * the engine API (swi.sliding_window_inference) passes them on as MONAI does. -1 with
 * ValueError naming the window. */
static int refuse_nan(const run_state *rs, swi_batch *b, int h, const float *x, size_t per, int count) {
    if (!rs->refuse_nan) return 0;
    for (int w = 0; w < count; w++)
        for (size_t i = 0; i < per; i++)
            if (x[(size_t)w * per + i] != x[(size_t)w * per + i]) {
                const int64_t *st = swi_batch_start(b, w);
                PyErr_Format(PyExc_ValueError,
                             "the predictor returned NaN for the window at (%lld, %lld, %lld)%s; its labels "
                             "would be meaningless",
                             (long long)st[0], (long long)(rs->dims > 1 ? st[1] : 0),
                             (long long)(rs->dims > 2 ? st[2] : 0), h ? " (a second output)" : "");
                return -1;
            }
    return 0;
}

/* Hand one head's result to the engine: in place when it is float32 and contiguous,
 * else through copy_into, which writes it into the engine's buffer. */
static int fill_head(run_state *rs, swi_batch *b, int h, PyObject *item, int count) {
    long long ch;
    PyObject *sp_obj, *obj;
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "LOO", &ch, &sp_obj, &obj)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "internal: predictor wrapper returned a bad item");
        return -1;
    }
    int64_t sp[NDIM_MAX];
    if (swipy_int64_seq(sp_obj, rs->dims, sp, "head spatial size") < 0) return -1;
    {
        size_t bytes = (size_t)count * (size_t)ch * sizeof(float);
        for (int k = 0; k < rs->dims; k++) bytes *= (size_t)sp[k];
        const float *data = NULL;
        int a = adopt_head(b, h, (int64_t)ch, sp, obj, bytes, &data);
        if (a > 0) return refuse_nan(rs, b, h, data, bytes / sizeof(float) / (size_t)count, count);
        if (a < 0) return -1;
    }
    float *dst = swi_batch_output(b, h, (int64_t)ch, sp);
    if (!dst) {
        /* the wrapper has checked the shape against the first call already */
        PyErr_Format(PyExc_ValueError,
                     "output %d of the predictor ([%d, %lld, ...]) does not match the shape the run expects, "
                     "or its buffer could not be allocated",
                     h, count, ch);
        return -1;
    }
    size_t n = (size_t)count * (size_t)ch * sizeof(float);
    for (int k = 0; k < rs->dims; k++) n *= (size_t)sp[k];
    if (n > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "predictor output too large");
        return -1;
    }
    PyObject *mv = PyMemoryView_FromMemory((char *)dst, (Py_ssize_t)n, PyBUF_WRITE);
    if (!mv) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(rs->copy_into, mv, obj, NULL);
    /* the buffer is the engine's: no Python object may keep a view of it. The call's
     * exception (if any) is set aside meanwhile: no API call with one pending. */
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyObject *rel = PyObject_CallMethod(mv, "release", NULL);
    Py_DECREF(mv);
    if (et) {
        Py_XDECREF(rel);
        PyErr_Clear();
        PyErr_Restore(et, ev, etb);
        Py_XDECREF(r);
        return -1;
    }
    Py_XDECREF(r);
    if (!rel) return -1;
    Py_DECREF(rel);
    if (!r) return -1;
    return refuse_nan(rs, b, h, dst, n / sizeof(float) / (size_t)count, count);
}

/* An input read box by box through a Python callable (a store, a dask array, a memmap). */
int swipy_reader_cb(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst,
                    char *message, size_t message_size) {
    run_state *rs = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 1;
    PyObject *tlo = NULL, *thi = NULL, *res = NULL;
    Py_buffer view;
    int have_view = 0;
    if (rs->exc_type) goto done;
    size_t n = (size_t)rs->channels;
    for (int k = 0; k < rs->dims; k++) n *= (size_t)(hi[k] - lo[k]);
    tlo = swipy_int64_tuple(lo, rs->dims);
    thi = swipy_int64_tuple(hi, rs->dims);
    if (!tlo || !thi) goto done;
    res = PyObject_CallFunction(rs->reader, "LOO", (long long)image, tlo, thi);
    if (!res) goto done;
    if (PyObject_GetBuffer(res, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    have_view = 1;
    if (view.itemsize != 4 || !view.format || strcmp(view.format, "f") != 0 ||
        view.len != (Py_ssize_t)(n * sizeof(float))) {
        PyErr_Format(PyExc_ValueError,
                     "the input reader returned %zd bytes of format '%s' for a box of %zu float32 values "
                     "([channels, *(hi - lo)], C order)",
                     view.len, view.format ? view.format : "B", n);
        goto done;
    }
    memcpy(dst, view.buf, n * sizeof(float));
    rc = 0;
done:
    if (have_view) PyBuffer_Release(&view);
    if (rc) {
        stash_exception(rs);
        snprintf(message, message_size, "the input reader failed");
    }
    Py_XDECREF(res);
    Py_XDECREF(tlo);
    Py_XDECREF(thi);
    PyGILState_Release(gil);
    return rc;
}

int swipy_predict_cb(void *user, swi_batch *b) {
    run_state *rs = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 1;
    PyObject *win = NULL, *images = NULL, *starts = NULL, *shp = NULL, *res = NULL, *seq = NULL;
    if (PyErr_CheckSignals() < 0) goto done;
    const int count = swi_batch_count(b);
    const int dims = swi_batch_dims(b);
    const int64_t *roi = swi_batch_roi(b);
    size_t n = (size_t)count * (size_t)swi_batch_channels(b) * sizeof(float);
    for (int k = 0; k < dims; k++) n *= (size_t)roi[k];
    if (n > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "window batch too large");
        goto done;
    }
    /* a copy: the predictor may keep its input beyond this call */
    win = PyByteArray_FromStringAndSize((const char *)swi_batch_input(b), (Py_ssize_t)n);
    images = PyTuple_New(count);
    starts = PyTuple_New(count);
    if (!win || !images || !starts) goto done;
    for (int i = 0; i < count; i++) {
        PyObject *im = PyLong_FromLongLong((long long)swi_batch_image(b, i));
        if (!im) goto done;
        PyTuple_SET_ITEM(images, i, im);
        PyObject *st = swipy_int64_tuple(swi_batch_start(b, i), dims);
        if (!st) goto done;
        PyTuple_SET_ITEM(starts, i, st);
    }
    if (rs->pass_shape) {
        int64_t shape[NDIM_MAX + 2];
        shape[0] = count;
        shape[1] = swi_batch_channels(b);
        for (int k = 0; k < dims; k++) shape[k + 2] = roi[k];
        shp = swipy_int64_tuple(shape, dims + 2);
        if (!shp) goto done;
    }
    /* without pass_shape shp is NULL and ends the arguments there */
    res = PyObject_CallFunctionObjArgs(rs->predictor, win, images, starts, shp, NULL);
    if (!res) goto done;
    seq = PySequence_Fast(res, "the predictor wrapper must return a sequence");
    if (!seq) goto done;
    if (PySequence_Fast_GET_SIZE(seq) != rs->n_heads) {
        PyErr_Format(PyExc_ValueError, "the predictor returned %zd outputs, expected %d",
                     PySequence_Fast_GET_SIZE(seq), rs->n_heads);
        goto done;
    }
    for (int h = 0; h < rs->n_heads; h++)
        if (fill_head(rs, b, h, PySequence_Fast_GET_ITEM(seq, h), count) < 0) goto done;
    rc = 0;
done:
    if (rc) stash_exception(rs);
    Py_XDECREF(win);
    Py_XDECREF(images);
    Py_XDECREF(starts);
    Py_XDECREF(shp);
    Py_XDECREF(res);
    Py_XDECREF(seq);
    PyGILState_Release(gil);
    return rc;
}

int swipy_progress_cb(void *user, int64_t done_w, int64_t total) {
    run_state *rs = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 0;
    /* Ctrl-C lands here between predictor calls too */
    if (PyErr_CheckSignals() < 0) {
        rc = 1;
    } else if (rs->progress) {
        PyObject *r = PyObject_CallFunction(rs->progress, "LL", (long long)done_w, (long long)total);
        if (!r)
            rc = 1;
        else
            Py_DECREF(r);
    }
    if (rc) stash_exception(rs);
    PyGILState_Release(gil);
    return rc;
}

/* May run on worker threads, several at once: all Python work happens with the GIL. */
int swipy_region_cb(void *user, const swi_region *reg) {
    region_user *ru = user;
    run_state *rs = ru->rs;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 1;
    PyObject *data = NULL, *lo = NULL, *hi = NULL, *r = NULL;
    if (rs->exc_type) goto out; /* the run is failing already */
    size_t es = reg->dtype == SWI_DTYPE_UINT8 ? 1 : reg->dtype == SWI_DTYPE_UINT16 ? 2 : 4;
    size_t n = (size_t)reg->channels * es;
    for (int k = 0; k < reg->dims; k++) n *= (size_t)(reg->hi[k] - reg->lo[k]);
    if (n > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "region too large");
        goto fail;
    }
    /* a copy: the region's memory is valid only during this call */
    data = PyByteArray_FromStringAndSize((const char *)reg->data, (Py_ssize_t)n);
    lo = swipy_int64_tuple(reg->lo, reg->dims);
    hi = swipy_int64_tuple(reg->hi, reg->dims);
    if (!data || !lo || !hi) goto fail;
    r = PyObject_CallFunction(ru->fn, "OLiLOO", data, (long long)reg->image, reg->head,
                              (long long)reg->channels, lo, hi);
    if (!r) goto fail;
    rc = 0;
    goto out;
fail:
    stash_exception(rs);
out:
    Py_XDECREF(data);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return rc;
}
