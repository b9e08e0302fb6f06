/* engine.c -- run() and plan(): swi_run and swi_plan_run with the GIL released; the window
 * layout and the importance map. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <string.h>

#include "swipy.h"

PyObject *swipy_run(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {
        "input",   "roi",           "overlap",   "mode",     "sigma_scale", "weight_map", "padding_mode",
        "cval",    "sw_batch_size", "threads",   "order",    "pipeline",    "max_memory", "heads",
        "outputs", "predictor",     "copy_into", "progress", "reader",      "part",       NULL};
    PyObject *input, *roi, *overlap, *sigma, *wmap, *order, *heads, *outputs, *predictor, *copy_into,
        *progress, *reader = Py_None, *part = Py_None;
    int mode, padding_mode, sw_batch_size, threads, pipeline;
    double cval;
    unsigned long long max_memory;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOiOOidiiOiKOOOOO|OO:run", kwlist, &input, &roi, &overlap,
                                     &mode, &sigma, &wmap, &padding_mode, &cval, &sw_batch_size, &threads,
                                     &order, &pipeline, &max_memory, &heads, &outputs, &predictor, &copy_into,
                                     &progress, &reader, &part))
        return NULL;
    if (!PyCallable_Check(predictor) || !PyCallable_Check(copy_into) ||
        (progress != Py_None && !PyCallable_Check(progress)) ||
        (reader != Py_None && !PyCallable_Check(reader))) {
        PyErr_SetString(PyExc_TypeError, "predictor, copy_into, progress and reader must be callable");
        return NULL;
    }
    config c;
    if (swipy_parse_config(&c, input, roi, overlap, mode, sigma, wmap, padding_mode, cval, sw_batch_size,
                           threads, order, pipeline, max_memory, heads, outputs) < 0)
        return NULL;
    if (swipy_parse_part(&c.p, part) < 0) {
        swipy_config_release(&c);
        return NULL;
    }
    if (!c.have_in && reader == Py_None) {
        swipy_config_release(&c);
        PyErr_SetString(PyExc_TypeError, "input must be a float32 buffer, or a shape with a reader");
        return NULL;
    }
    run_state rs;
    memset(&rs, 0, sizeof rs);
    if (!c.have_in) {
        rs.reader = reader;
        rs.channels = c.in.channels;
        rs.in_reader.read = swipy_reader_cb;
        rs.in_reader.user = &rs;
        c.in.reader = &rs.in_reader;
    }
    rs.predictor = predictor;
    rs.copy_into = copy_into;
    rs.progress = progress == Py_None ? NULL : progress;
    rs.n_heads = c.p.n_heads;
    rs.dims = c.p.dims;
    for (int i = 0; i < c.n_outs; i++) {
        if (!c.out_fns[i]) continue;
        rs.regions[i].rs = &rs;
        rs.regions[i].fn = c.out_fns[i];
        rs.regions[i].index = i;
        c.outs[i].on_region = swipy_region_cb;
        c.outs[i].user = &rs.regions[i];
    }
    c.p.progress = swipy_progress_cb;
    c.p.progress_user = &rs;

    swi_ctx *ctx = swi_create();
    if (!ctx) {
        swipy_config_release(&c);
        return PyErr_NoMemory();
    }
    /* the capsule frees the context once the last result referring to it is gone */
    PyObject *owner = PyCapsule_New(ctx, "swi_ctx", swipy_ctx_capsule_free);
    if (!owner) {
        swi_free(ctx);
        swipy_config_release(&c);
        return NULL;
    }
    swi_predictor net = {swipy_predict_cb, &rs};
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_run(ctx, &c.p, &c.in, &net, c.outs, c.n_outs);
    Py_END_ALLOW_THREADS

        PyObject *ret = NULL;
    if (rs.exc_type) {
        PyErr_Restore(rs.exc_type, rs.exc_value, rs.exc_tb);
        goto out;
    }
    if (st != SWI_OK) {
        swipy_raise_status(st, swi_last_error(ctx));
        goto out;
    }
    ret = PyList_New(c.n_outs);
    if (!ret) goto out;
    for (int i = 0; i < c.n_outs; i++) {
        PyObject *r = swipy_result_for(owner, ctx, &c, i);
        if (!r) {
            Py_CLEAR(ret);
            goto out;
        }
        PyList_SET_ITEM(ret, i, r);
    }
out:
    swipy_config_release(&c);
    Py_DECREF(owner);
    return ret;
}

/* ------------------------------------------------------------------ plan */

static int dict_set(PyObject *d, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return r;
}

int swipy_plan_fields(PyObject *d, const swi_plan *pl, int n_heads) {
    const int n = pl->dims;
    int64_t order64[NDIM_MAX];
    for (int k = 0; k < n; k++) order64[k] = pl->order[k];
    if (dict_set(d, "roi", swipy_int64_tuple(pl->roi, n)) < 0 ||
        dict_set(d, "padded", swipy_int64_tuple(pl->padded, n)) < 0 ||
        dict_set(d, "pad_before", swipy_int64_tuple(pl->pad_before, n)) < 0 ||
        dict_set(d, "windows_per_axis", swipy_int64_tuple(pl->windows_per_axis, n)) < 0 ||
        dict_set(d, "windows_per_image", PyLong_FromLongLong(pl->windows_per_image)) < 0 ||
        dict_set(d, "windows_total", PyLong_FromLongLong(pl->windows_total)) < 0 ||
        dict_set(d, "predictor_calls", PyLong_FromLongLong(pl->predictor_calls)) < 0 ||
        dict_set(d, "sw_batch_size", PyLong_FromLong(pl->sw_batch_size)) < 0 ||
        dict_set(d, "pipeline", PyBool_FromLong(pl->pipeline)) < 0 ||
        dict_set(d, "threads", PyLong_FromLong(pl->threads)) < 0 ||
        dict_set(d, "order", swipy_int64_tuple(order64, n)) < 0 ||
        dict_set(d, "head_channels", swipy_int64_tuple(pl->head_channels, n_heads)) < 0 ||
        dict_set(d, "bytes_input", PyLong_FromSize_t(pl->bytes_input)) < 0 ||
        dict_set(d, "bytes_windows", PyLong_FromSize_t(pl->bytes_windows)) < 0 ||
        dict_set(d, "bytes_partial", PyLong_FromSize_t(pl->bytes_partial)) < 0 ||
        dict_set(d, "bytes_outputs", PyLong_FromSize_t(pl->bytes_outputs)) < 0 ||
        dict_set(d, "bytes_scratch", PyLong_FromSize_t(pl->bytes_scratch)) < 0 ||
        dict_set(d, "bytes_peak", PyLong_FromSize_t(pl->bytes_peak)) < 0 ||
        dict_set(d, "bytes_min", PyLong_FromSize_t(pl->bytes_min)) < 0)
        return -1;
    return 0;
}

PyObject *swipy_plan(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"input",        "roi",   "overlap",       "mode",    "sigma_scale", "weight_map",
                             "padding_mode", "cval",  "sw_batch_size", "threads", "order",       "pipeline",
                             "max_memory",   "heads", "outputs",       "part",    NULL};
    PyObject *input, *roi, *overlap, *sigma, *wmap, *order, *heads, *outputs, *part = Py_None;
    int mode, padding_mode, sw_batch_size, threads, pipeline;
    double cval;
    unsigned long long max_memory;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOiOOidiiOiKOO|O:plan", kwlist, &input, &roi, &overlap,
                                     &mode, &sigma, &wmap, &padding_mode, &cval, &sw_batch_size, &threads,
                                     &order, &pipeline, &max_memory, &heads, &outputs, &part))
        return NULL;
    config c;
    if (swipy_parse_config(&c, input, roi, overlap, mode, sigma, wmap, padding_mode, cval, sw_batch_size,
                           threads, order, pipeline, max_memory, heads, outputs) < 0)
        return NULL;
    if (swipy_parse_part(&c.p, part) < 0) {
        swipy_config_release(&c);
        return NULL;
    }
    swi_ctx *ctx = swi_create();
    if (!ctx) {
        swipy_config_release(&c);
        return PyErr_NoMemory();
    }
    swi_plan pl;
    memset(&pl, 0, sizeof pl);
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_plan_run(ctx, &c.p, &c.in, c.outs, c.n_outs, &pl);
    Py_END_ALLOW_THREADS PyObject *d = NULL;
    if (st != SWI_OK) {
        swipy_raise_status(st, swi_last_error(ctx));
        goto out;
    }
    d = PyDict_New();
    if (!d) goto out;
    int n = pl.dims;
    int64_t size[NDIM_MAX];
    int nh = c.p.n_heads;
    PyObject *hs = PyList_New(nh);
    if (!hs) goto fail;
    for (int h = 0; h < nh; h++) {
        int dims = swi_result_size(ctx, h, size);
        PyObject *t = dims == n ? swipy_int64_tuple(size, n) : Py_NewRef(Py_None);
        if (!t) {
            Py_DECREF(hs);
            goto fail;
        }
        PyList_SET_ITEM(hs, h, t);
    }
    if (dict_set(d, "output_size", hs) < 0 || swipy_plan_fields(d, &pl, nh) < 0) goto fail;
    goto out;
fail:
    Py_CLEAR(d);
out:
    swi_free(ctx);
    swipy_config_release(&c);
    return d;
}

/* ------------------------------------------------------------------ layout */

PyObject *swipy_window_starts(PyObject *self, PyObject *args) {
    (void)self;
    long long size, roi;
    double overlap;
    if (!PyArg_ParseTuple(args, "LLd:window_starts", &size, &roi, &overlap)) return NULL;
    int64_t n = 0;
    swi_status st = swi_window_starts(NULL, size, roi, overlap, NULL, 0, &n);
    if (st != SWI_OK) {
        PyErr_Format(PyExc_ValueError, "invalid window layout (size %lld, roi %lld, overlap %g)", size, roi,
                     overlap);
        return NULL;
    }
    int64_t *v = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!v) return PyErr_NoMemory();
    st = swi_window_starts(NULL, size, roi, overlap, v, n, &n);
    if (st != SWI_OK) {
        PyMem_Free(v);
        return swipy_raise_status(st, "swi_window_starts failed");
    }
    PyObject *t = n <= INT_MAX ? swipy_int64_tuple(v, (int)n) : PyErr_NoMemory();
    PyMem_Free(v);
    return t;
}

/* The engine's importance map, as float32 bytes. */
PyObject *swipy_weights(PyObject *self, PyObject *args) {
    (void)self;
    int mode;
    PyObject *roi_o, *sigma_o;
    if (!PyArg_ParseTuple(args, "iOO:weights", &mode, &roi_o, &sigma_o)) return NULL;
    Py_ssize_t dims = PySequence_Size(roi_o);
    if (dims < 0) return NULL;
    if (dims < 1 || dims > NDIM_MAX) {
        PyErr_Format(PyExc_ValueError, "roi must have 1..%d entries", NDIM_MAX);
        return NULL;
    }
    int64_t roi[NDIM_MAX];
    double sigma[NDIM_MAX];
    if (swipy_int64_seq(roi_o, (int)dims, roi, "roi") < 0 ||
        swipy_double_seq(sigma_o, (int)dims, sigma, "sigma_scale") < 0)
        return NULL;
    size_t n = sizeof(float);
    for (int k = 0; k < dims; k++) {
        if (roi[k] <= 0) {
            PyErr_SetString(PyExc_ValueError, "roi values must be > 0");
            return NULL;
        }
        if ((size_t)roi[k] > (size_t)PY_SSIZE_T_MAX / n) return PyErr_NoMemory();
        n *= (size_t)roi[k];
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!b) return NULL;
    swi_status st = swi_weights(NULL, (swi_blend)mode, (int)dims, roi, sigma, (float *)PyBytes_AS_STRING(b));
    if (st != SWI_OK) {
        Py_DECREF(b);
        return swipy_raise_status(st, "swi_weights failed");
    }
    return b;
}
