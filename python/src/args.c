/* args.c -- the arguments run() and plan() share, from Python objects into swi_params,
 * the input tensor and the outputs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "swipy.h"

int swipy_int64_seq(PyObject *o, int n, int64_t *out, const char *what) {
    PyObject *seq = PySequence_Fast(o, what);
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s needs %d values, got %zd", what, n, PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, k));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[k] = (int64_t)v;
    }
    Py_DECREF(seq);
    return 0;
}

int swipy_double_seq(PyObject *o, int n, double *out, const char *what) {
    PyObject *seq = PySequence_Fast(o, what);
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s needs %d values, got %zd", what, n, PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, k));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[k] = v;
    }
    Py_DECREF(seq);
    return 0;
}

PyObject *swipy_int64_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *x = PyLong_FromLongLong((long long)v[k]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

void swipy_config_release(config *c) {
    if (c->have_in) PyBuffer_Release(&c->in_view);
    if (c->have_wmap) PyBuffer_Release(&c->wmap_view);
    c->have_in = c->have_wmap = 0;
}

/* The one place that maps the Python layer's scheduling options onto swi_params
 * (order: None = automatic, else a permutation; pipeline: -1 auto, 0 off, 1 on). */
static int set_schedule(swi_params *p, PyObject *order, int pipeline) {
    if (order == Py_None) {
        p->order_mode = SWI_ORDER_AUTO;
    } else {
        int64_t o[NDIM_MAX];
        if (swipy_int64_seq(order, p->dims, o, "order") < 0) return -1;
        p->order_mode = SWI_ORDER_FIXED;
        for (int k = 0; k < p->dims; k++) p->order[k] = (int)o[k];
    }
    p->pipeline = pipeline < 0 ? SWI_PIPELINE_AUTO : pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    return 0;
}

/* input: a float32 C-contiguous buffer [batch, channels, *spatial]; shape-only plans
 * pass a tuple instead. */
int swipy_parse_config(config *c, PyObject *input, PyObject *roi, PyObject *overlap, int mode,
                       PyObject *sigma, PyObject *wmap, int padding_mode, double cval, int sw_batch_size,
                       int threads, PyObject *order, int pipeline, unsigned long long max_memory,
                       PyObject *heads, PyObject *outputs) {
    memset(c, 0, sizeof *c);
    int64_t shape[NDIM_MAX + 2];
    int ndim;
    if (PyTuple_Check(input)) {
        ndim = (int)PyTuple_GET_SIZE(input);
        if (ndim < 3 || ndim > NDIM_MAX + 2) {
            PyErr_Format(PyExc_ValueError, "input shape must have 3..%d entries", NDIM_MAX + 2);
            return -1;
        }
        if (swipy_int64_seq(input, ndim, shape, "input shape") < 0) return -1;
        c->in.data = NULL;
    } else {
        if (PyObject_GetBuffer(input, &c->in_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
        c->have_in = 1;
        if (c->in_view.itemsize != 4 || !c->in_view.format || strcmp(c->in_view.format, "f") != 0) {
            PyErr_SetString(PyExc_TypeError, "input must be a float32 buffer");
            goto fail;
        }
        ndim = c->in_view.ndim;
        if (ndim < 3 || ndim > NDIM_MAX + 2) {
            PyErr_Format(PyExc_ValueError,
                         "input must be [batch, channels, *spatial] with 1..%d spatial dims", NDIM_MAX);
            goto fail;
        }
        for (int k = 0; k < ndim; k++) shape[k] = c->in_view.shape[k];
        c->in.data = c->in_view.buf;
    }
    const int dims = ndim - 2;
    swi_params_init(&c->p, dims);
    c->in.batch = shape[0];
    c->in.channels = shape[1];
    c->in.dims = dims;
    for (int k = 0; k < dims; k++) c->in.size[k] = shape[k + 2];

    swi_params *p = &c->p;
    if (swipy_int64_seq(roi, dims, p->roi, "roi_size") < 0) goto fail;
    if (swipy_double_seq(overlap, dims, p->overlap, "overlap") < 0) goto fail;
    if (swipy_double_seq(sigma, dims, p->sigma_scale, "sigma_scale") < 0) goto fail;
    p->mode = (swi_blend)mode;
    if (wmap != Py_None) {
        if (PyObject_GetBuffer(wmap, &c->wmap_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;
        c->have_wmap = 1;
        if (c->wmap_view.itemsize != 4 || !c->wmap_view.format || strcmp(c->wmap_view.format, "f") != 0) {
            PyErr_SetString(PyExc_TypeError, "weight_map must be a float32 buffer");
            goto fail;
        }
        p->weight_map = c->wmap_view.buf;
        p->mode = SWI_BLEND_CUSTOM;
    }
    p->padding_mode = (swi_pad)padding_mode;
    p->cval = (float)cval;
    p->sw_batch_size = sw_batch_size;
    p->threads = threads;
    p->max_memory = (size_t)max_memory;
    if (set_schedule(p, order, pipeline) < 0) goto fail;

    if (heads != Py_None) {
        PyObject *seq = PySequence_Fast(heads, "heads must be a sequence");
        if (!seq) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n < 1 || n > SWI_MAX_HEADS) {
            PyErr_Format(PyExc_ValueError, "the predictor must return 1..%d outputs, got %zd", SWI_MAX_HEADS,
                         n);
            Py_DECREF(seq);
            goto fail;
        }
        p->n_heads = (int)n;
        for (Py_ssize_t h = 0; h < n; h++) {
            long long ch;
            PyObject *sp;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, h), "LO", &ch, &sp) ||
                swipy_int64_seq(sp, dims, p->heads[h].spatial, "head spatial size") < 0) {
                Py_DECREF(seq);
                goto fail;
            }
            p->heads[h].channels = ch;
        }
        Py_DECREF(seq);
    }

    PyObject *oseq = PySequence_Fast(outputs, "outputs must be a sequence");
    if (!oseq) goto fail;
    Py_ssize_t n_out = PySequence_Fast_GET_SIZE(oseq);
    if (n_out < 1 || n_out > MAX_OUTPUTS) {
        PyErr_Format(PyExc_ValueError, "1..%d outputs are supported, got %zd", MAX_OUTPUTS, n_out);
        Py_DECREF(oseq);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        int head, reduce, dtype;
        PyObject *fn;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(oseq, i), "iiiO", &head, &reduce, &dtype, &fn)) {
            Py_DECREF(oseq);
            goto fail;
        }
        swi_output_init(&c->outs[i], head, (swi_reduce)reduce);
        c->outs[i].dtype = (swi_dtype)dtype;
        c->out_fns[i] = fn == Py_None ? NULL : fn;
    }
    c->n_outs = (int)n_out;
    Py_DECREF(oseq);
    return 0;
fail:
    swipy_config_release(c);
    return -1;
}

/* part: None, or (lo, hi) of the output box to compute (swi_params.part_lo/part_hi). */
int swipy_parse_part(swi_params *p, PyObject *part) {
    if (part == Py_None) return 0;
    PyObject *lo, *hi;
    if (!PyArg_ParseTuple(part, "OO:part", &lo, &hi)) return -1;
    if (swipy_int64_seq(lo, p->dims, p->part_lo, "part lo") < 0) return -1;
    return swipy_int64_seq(hi, p->dims, p->part_hi, "part hi");
}
