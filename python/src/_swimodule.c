/*
 * _swimodule.c -- the CPython binding of libswi (package swi, module swi._swi).
 *
 * Only the public API of include/swi.h is used. swi_run runs with the GIL released;
 * every callback (predictor, progress, region) takes the GIL back for as long as it
 * touches Python. The first Python exception raised in a callback is kept and
 * re-raised unchanged once swi_run has returned (every engine buffer freed by then).
 *
 * The Python layer (swi/_core.py) does the numpy/torch conversions; this module sees
 * only buffers (float32 C order in, engine-owned results out) and plain callables:
 *   predictor(windows: bytearray, images: tuple, starts: tuple) -> [(channels, spatial, obj)]
 *   copy_into(dst: memoryview, obj) -> None       writes one head into the engine's buffer
 *   progress(done, total) -> None
 *   on_region(data: bytearray, image, head, channels, lo, hi) -> None
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "swi.h"

#define NDIM_MAX SWI_MAX_DIMS
#define MAX_OUTPUTS 64 /* 8 heads x every reduction, with room */

static PyObject *BudgetError; /* swi.BudgetError, a MemoryError */

/* ------------------------------------------------------------------ Result */

/* A buffer over a result the context owns. The capsule holds the context, so the memory
 * lives as long as any array made from it. It is exported writable (MONAI's results are):
 * the context runs nothing more, so nothing else reads or writes that memory. */
typedef struct {
    PyObject_HEAD PyObject *owner; /* capsule of the swi_ctx */
    void *ptr;
    Py_ssize_t itemsize;
    int ndim;
    char format[2];
    Py_ssize_t shape[NDIM_MAX + 2];
    Py_ssize_t strides[NDIM_MAX + 2];
    Py_ssize_t len;
} ResultObject;

static int result_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    ResultObject *r = (ResultObject *)self;
    /* C-contiguous, so every request level can be served; give only what was asked */
    view->buf = r->ptr;
    view->obj = Py_NewRef(self);
    view->len = r->len;
    view->readonly = 0;
    view->itemsize = r->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? r->format : NULL;
    view->ndim = (flags & PyBUF_ND) ? r->ndim : 1;
    view->shape = (flags & PyBUF_ND) ? r->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? r->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static void result_dealloc(PyObject *self) {
    ResultObject *r = (ResultObject *)self;
    Py_XDECREF(r->owner);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs result_as_buffer = {result_getbuffer, NULL};

static PyTypeObject ResultType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "swi._swi.Result",
    .tp_basicsize = sizeof(ResultObject),
    .tp_dealloc = result_dealloc,
    .tp_as_buffer = &result_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An engine-owned result, exported through the buffer protocol (np.asarray).",
};

static void ctx_capsule_free(PyObject *cap) { swi_free(PyCapsule_GetPointer(cap, "swi_ctx")); }

static PyObject *make_result(PyObject *owner, void *ptr, char fmt, Py_ssize_t itemsize, int ndim,
                             const int64_t *shape) {
    ResultObject *r = PyObject_New(ResultObject, &ResultType);
    if (!r) return NULL;
    r->owner = Py_NewRef(owner);
    r->ptr = ptr;
    r->itemsize = itemsize;
    r->format[0] = fmt;
    r->format[1] = '\0';
    r->ndim = ndim;
    Py_ssize_t stride = itemsize;
    for (int k = ndim - 1; k >= 0; k--) {
        r->shape[k] = (Py_ssize_t)shape[k];
        r->strides[k] = stride;
        stride *= (Py_ssize_t)shape[k];
    }
    r->len = stride;
    return (PyObject *)r;
}

/* ------------------------------------------------------------ argument parsing */

static int parse_int64_seq(PyObject *o, int n, int64_t *out, const char *what) {
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

static int parse_double_seq(PyObject *o, int n, double *out, const char *what) {
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

/* Everything both run() and plan() take. Buffers are held until config_release. */
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

static void config_release(config *c) {
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
        if (parse_int64_seq(order, p->dims, o, "order") < 0) return -1;
        p->order_mode = SWI_ORDER_FIXED;
        for (int k = 0; k < p->dims; k++) p->order[k] = (int)o[k];
    }
    p->pipeline = pipeline < 0 ? SWI_PIPELINE_AUTO : pipeline ? SWI_PIPELINE_ON : SWI_PIPELINE_OFF;
    return 0;
}

/* input: a float32 C-contiguous buffer [batch, channels, *spatial]; shape-only plans
 * pass a tuple instead. */
static int parse_config(config *c, PyObject *input, PyObject *roi, PyObject *overlap, int mode,
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
        if (parse_int64_seq(input, ndim, shape, "input shape") < 0) return -1;
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
    if (parse_int64_seq(roi, dims, p->roi, "roi_size") < 0) goto fail;
    if (parse_double_seq(overlap, dims, p->overlap, "overlap") < 0) goto fail;
    if (parse_double_seq(sigma, dims, p->sigma_scale, "sigma_scale") < 0) goto fail;
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
                parse_int64_seq(sp, dims, p->heads[h].spatial, "head spatial size") < 0) {
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
    config_release(c);
    return -1;
}

static PyObject *raise_status(swi_status st, const char *msg) {
    PyObject *type;
    switch (st) {
    case SWI_ERR_INVALID_ARG:
    case SWI_ERR_SHAPE: type = PyExc_ValueError; break;
    case SWI_ERR_NOMEM: type = PyExc_MemoryError; break;
    case SWI_ERR_OVERFLOW: type = PyExc_OverflowError; break;
    case SWI_ERR_BUDGET: type = BudgetError; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_Format(type, "%s (%s)", msg && msg[0] ? msg : "libswi failed", swi_status_name(st));
    return NULL;
}

/* ------------------------------------------------------------------ run */

typedef struct run_state run_state;

typedef struct {
    run_state *rs;
    PyObject *fn;
    int index;
} region_user;

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
    int64_t channels;
    swi_reader in_reader;
};

/* Keep the pending exception as the run's failure (the first one wins). */
static void stash_exception(run_state *rs) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "swi callback failed without an exception");
    if (rs->exc_type) {
        PyErr_Clear();
        return;
    }
    PyErr_Fetch(&rs->exc_type, &rs->exc_value, &rs->exc_tb);
}

static PyObject *int64_tuple(const int64_t *v, int n) {
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
static int adopt_head(swi_batch *b, int h, int64_t ch, const int64_t *sp, PyObject *obj, size_t n) {
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
    if (swi_batch_set_output(b, h, ch, sp, (const float *)a->view.buf, release_adopted, a) != 0) {
        PyBuffer_Release(&a->view);
        PyMem_RawFree(a);
        PyErr_Format(PyExc_ValueError, "output %d of the predictor does not match the shape the run expects",
                     h);
        return -1;
    }
    return 1;
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
    if (parse_int64_seq(sp_obj, rs->dims, sp, "head spatial size") < 0) return -1;
    {
        size_t bytes = (size_t)count * (size_t)ch * sizeof(float);
        for (int k = 0; k < rs->dims; k++) bytes *= (size_t)sp[k];
        int a = adopt_head(b, h, (int64_t)ch, sp, obj, bytes);
        if (a != 0) return a < 0 ? -1 : 0;
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
    return r ? 0 : -1;
}

/* An input read box by box through a Python callable (a store, a dask array, a memmap). */
static int reader_cb(void *user, int64_t image, const int64_t *lo, const int64_t *hi, float *dst,
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
    tlo = int64_tuple(lo, rs->dims);
    thi = int64_tuple(hi, rs->dims);
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

/* part: None, or (lo, hi) of the output box to compute (swi_params.part_lo/part_hi). */
static int parse_part(swi_params *p, PyObject *part) {
    if (part == Py_None) return 0;
    PyObject *lo, *hi;
    if (!PyArg_ParseTuple(part, "OO:part", &lo, &hi)) return -1;
    if (parse_int64_seq(lo, p->dims, p->part_lo, "part lo") < 0) return -1;
    return parse_int64_seq(hi, p->dims, p->part_hi, "part hi");
}

static int predict_cb(void *user, swi_batch *b) {
    run_state *rs = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 1;
    PyObject *win = NULL, *images = NULL, *starts = NULL, *res = NULL, *seq = NULL;
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
        PyObject *st = int64_tuple(swi_batch_start(b, i), dims);
        if (!st) goto done;
        PyTuple_SET_ITEM(starts, i, st);
    }
    res = PyObject_CallFunctionObjArgs(rs->predictor, win, images, starts, NULL);
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
    Py_XDECREF(res);
    Py_XDECREF(seq);
    PyGILState_Release(gil);
    return rc;
}

static int progress_cb(void *user, int64_t done_w, int64_t total) {
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
static int region_cb(void *user, const swi_region *reg) {
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
    lo = int64_tuple(reg->lo, reg->dims);
    hi = int64_tuple(reg->hi, reg->dims);
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

static PyObject *result_for(PyObject *owner, swi_ctx *ctx, const config *c, int i) {
    const swi_output *o = &c->outs[i];
    if (o->reduce == SWI_REDUCE_CUSTOM || c->out_fns[i]) Py_RETURN_NONE; /* delivered region by region */
    size_t bytes = 0;
    void *ptr = (void *)swi_result(ctx, i, &bytes);
    int64_t size[NDIM_MAX];
    int dims = swi_result_size(ctx, o->head, size);
    int64_t ch = swi_result_channels(ctx, o->head);
    if (!ptr || dims != c->p.dims || ch <= 0) {
        PyErr_Format(PyExc_RuntimeError, "internal: result %d is missing", i);
        return NULL;
    }
    int64_t shape[NDIM_MAX + 2];
    int nd = 0;
    shape[nd++] = c->in.batch;
    shape[nd++] = (o->reduce == SWI_REDUCE_NONE || o->reduce == SWI_REDUCE_SOFTMAX) ? ch : 1;
    for (int k = 0; k < dims; k++) shape[nd++] = size[k];
    char fmt = 'f';
    Py_ssize_t itemsize = 4;
    if (o->reduce == SWI_REDUCE_ARGMAX) {
        int wide = o->dtype == SWI_DTYPE_UINT16 || (o->dtype == SWI_DTYPE_AUTO && ch > 256);
        fmt = wide ? 'H' : 'B';
        itemsize = wide ? 2 : 1;
    }
    size_t expect = (size_t)itemsize;
    for (int k = 0; k < nd; k++) expect *= (size_t)shape[k];
    if (expect != bytes) {
        PyErr_Format(PyExc_RuntimeError, "internal: result %d has %zu bytes, expected %zu", i, bytes, expect);
        return NULL;
    }
    return make_result(owner, ptr, fmt, itemsize, nd, shape);
}

static PyObject *swi_py_run(PyObject *self, PyObject *args, PyObject *kw) {
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
    if (parse_config(&c, input, roi, overlap, mode, sigma, wmap, padding_mode, cval, sw_batch_size, threads,
                     order, pipeline, max_memory, heads, outputs) < 0)
        return NULL;
    if (parse_part(&c.p, part) < 0) {
        config_release(&c);
        return NULL;
    }
    if (!c.have_in && reader == Py_None) {
        config_release(&c);
        PyErr_SetString(PyExc_TypeError, "input must be a float32 buffer, or a shape with a reader");
        return NULL;
    }
    run_state rs;
    memset(&rs, 0, sizeof rs);
    if (!c.have_in) {
        rs.reader = reader;
        rs.channels = c.in.channels;
        rs.in_reader.read = reader_cb;
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
        c.outs[i].on_region = region_cb;
        c.outs[i].user = &rs.regions[i];
    }
    c.p.progress = progress_cb;
    c.p.progress_user = &rs;

    swi_ctx *ctx = swi_create();
    if (!ctx) {
        config_release(&c);
        return PyErr_NoMemory();
    }
    /* the capsule frees the context once the last result referring to it is gone */
    PyObject *owner = PyCapsule_New(ctx, "swi_ctx", ctx_capsule_free);
    if (!owner) {
        swi_free(ctx);
        config_release(&c);
        return NULL;
    }
    swi_predictor net = {predict_cb, &rs};
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_run(ctx, &c.p, &c.in, &net, c.outs, c.n_outs);
    Py_END_ALLOW_THREADS

        PyObject *ret = NULL;
    if (rs.exc_type) {
        PyErr_Restore(rs.exc_type, rs.exc_value, rs.exc_tb);
        goto out;
    }
    if (st != SWI_OK) {
        raise_status(st, swi_last_error(ctx));
        goto out;
    }
    ret = PyList_New(c.n_outs);
    if (!ret) goto out;
    for (int i = 0; i < c.n_outs; i++) {
        PyObject *r = result_for(owner, ctx, &c, i);
        if (!r) {
            Py_CLEAR(ret);
            goto out;
        }
        PyList_SET_ITEM(ret, i, r);
    }
out:
    config_release(&c);
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

static PyObject *swi_py_plan(PyObject *self, PyObject *args, PyObject *kw) {
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
    if (parse_config(&c, input, roi, overlap, mode, sigma, wmap, padding_mode, cval, sw_batch_size, threads,
                     order, pipeline, max_memory, heads, outputs) < 0)
        return NULL;
    if (parse_part(&c.p, part) < 0) {
        config_release(&c);
        return NULL;
    }
    swi_ctx *ctx = swi_create();
    if (!ctx) {
        config_release(&c);
        return PyErr_NoMemory();
    }
    swi_plan pl;
    memset(&pl, 0, sizeof pl);
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_plan_run(ctx, &c.p, &c.in, c.outs, c.n_outs, &pl);
    Py_END_ALLOW_THREADS PyObject *d = NULL;
    if (st != SWI_OK) {
        raise_status(st, swi_last_error(ctx));
        goto out;
    }
    d = PyDict_New();
    if (!d) goto out;
    int n = pl.dims;
    int orders[NDIM_MAX];
    int64_t order64[NDIM_MAX];
    for (int k = 0; k < n; k++) orders[k] = pl.order[k], order64[k] = orders[k];
    int64_t size[NDIM_MAX];
    int nh = c.p.n_heads;
    PyObject *hs = PyList_New(nh);
    if (!hs) goto fail;
    for (int h = 0; h < nh; h++) {
        int dims = swi_result_size(ctx, h, size);
        PyObject *t = dims == n ? int64_tuple(size, n) : Py_NewRef(Py_None);
        if (!t) {
            Py_DECREF(hs);
            goto fail;
        }
        PyList_SET_ITEM(hs, h, t);
    }
    if (dict_set(d, "output_size", hs) < 0 || dict_set(d, "roi", int64_tuple(pl.roi, n)) < 0 ||
        dict_set(d, "padded", int64_tuple(pl.padded, n)) < 0 ||
        dict_set(d, "pad_before", int64_tuple(pl.pad_before, n)) < 0 ||
        dict_set(d, "windows_per_axis", int64_tuple(pl.windows_per_axis, n)) < 0 ||
        dict_set(d, "windows_per_image", PyLong_FromLongLong(pl.windows_per_image)) < 0 ||
        dict_set(d, "windows_total", PyLong_FromLongLong(pl.windows_total)) < 0 ||
        dict_set(d, "predictor_calls", PyLong_FromLongLong(pl.predictor_calls)) < 0 ||
        dict_set(d, "sw_batch_size", PyLong_FromLong(pl.sw_batch_size)) < 0 ||
        dict_set(d, "pipeline", PyBool_FromLong(pl.pipeline)) < 0 ||
        dict_set(d, "threads", PyLong_FromLong(pl.threads)) < 0 ||
        dict_set(d, "order", int64_tuple(order64, n)) < 0 ||
        dict_set(d, "head_channels", int64_tuple(pl.head_channels, nh)) < 0 ||
        dict_set(d, "bytes_input", PyLong_FromSize_t(pl.bytes_input)) < 0 ||
        dict_set(d, "bytes_windows", PyLong_FromSize_t(pl.bytes_windows)) < 0 ||
        dict_set(d, "bytes_partial", PyLong_FromSize_t(pl.bytes_partial)) < 0 ||
        dict_set(d, "bytes_outputs", PyLong_FromSize_t(pl.bytes_outputs)) < 0 ||
        dict_set(d, "bytes_scratch", PyLong_FromSize_t(pl.bytes_scratch)) < 0 ||
        dict_set(d, "bytes_peak", PyLong_FromSize_t(pl.bytes_peak)) < 0 ||
        dict_set(d, "bytes_min", PyLong_FromSize_t(pl.bytes_min)) < 0)
        goto fail;
    goto out;
fail:
    Py_CLEAR(d);
out:
    swi_free(ctx);
    config_release(&c);
    return d;
}

/* ------------------------------------------------------------------ layout */

static PyObject *swi_py_window_starts(PyObject *self, PyObject *args) {
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
        return raise_status(st, "swi_window_starts failed");
    }
    PyObject *t = n <= INT_MAX ? int64_tuple(v, (int)n) : PyErr_NoMemory();
    PyMem_Free(v);
    return t;
}

/* The engine's importance map, as float32 bytes. */
static PyObject *swi_py_weights(PyObject *self, PyObject *args) {
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
    if (parse_int64_seq(roi_o, (int)dims, roi, "roi") < 0 ||
        parse_double_seq(sigma_o, (int)dims, sigma, "sigma_scale") < 0)
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
        return raise_status(st, "swi_weights failed");
    }
    return b;
}

/* ------------------------------------------------------------------ report */

#ifdef SWI_HAVE_REPORT
#include <unistd.h>

#include "swi_report.h"

/* report(fd, name, labels, label_bytes, shape, image|None, affine16, names|None, summary, title):
 * the review page of report/swi_report.h to fd (closed in every case). swi/_report.py
 * hands over C-order buffers: labels uint8/uint16, image float32. */
static PyObject *swi_py_report(PyObject *self, PyObject *args) {
    (void)self;
    int fd = -1, label_bytes = 0;
    const char *name, *title;
    Py_buffer lab = {0}, img = {0};
    PyObject *shape_o, *img_o, *affine_o, *names_o, *summary_o;
    if (!PyArg_ParseTuple(args, "isy*iOOOOOs:report", &fd, &name, &lab, &label_bytes, &shape_o, &img_o,
                          &affine_o, &names_o, &summary_o, &title)) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    PyObject *result = NULL;
    const char **names = NULL;
    swi_report_item *items = NULL;
    swi_report_page p;
    memset(&p, 0, sizeof p);
    double aff[16];
    if (parse_int64_seq(shape_o, 3, p.size, "shape") < 0 || parse_double_seq(affine_o, 16, aff, "affine") < 0)
        goto done;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) p.affine[r][c] = aff[4 * r + c];
    for (int a = 0; a < 3; a++)
        if (p.size[a] < 1 || p.size[a] > ((int64_t)1 << 20)) {
            PyErr_SetString(PyExc_ValueError, "shape must be 3 sizes of 1..2^20");
            goto done;
        }
    const int64_t voxels = p.size[0] * p.size[1] * p.size[2];
    if ((label_bytes != 1 && label_bytes != 2) || voxels > ((int64_t)1 << 40) ||
        lab.len != (Py_ssize_t)(voxels * label_bytes)) {
        PyErr_SetString(PyExc_ValueError, "labels do not match the shape");
        goto done;
    }
    if (img_o != Py_None) {
        if (PyObject_GetBuffer(img_o, &img, PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (img.len != (Py_ssize_t)sizeof(float) * voxels) {
            PyErr_SetString(PyExc_ValueError, "image does not match the labels' shape");
            goto done;
        }
        p.image = img.buf;
    }
    p.labels = lab.buf;
    p.label_bytes = label_bytes;
    p.title = title;
    if (names_o != Py_None) {
        Py_ssize_t n = PySequence_Size(names_o);
        if (n < 0) goto done;
        if (n > 65536) {
            PyErr_SetString(PyExc_ValueError, "at most 65536 classes");
            goto done;
        }
        names = PyMem_Calloc((size_t)n + 1, sizeof *names);
        if (!names) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *s = PySequence_GetItem(names_o, i);
            if (!s) goto done;
            names[i] = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL; /* kept alive by names_o */
            Py_DECREF(s);
            if (!names[i]) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "class names must be str");
                goto done;
            }
        }
        p.names = names;
        p.classes = n;
    }
    Py_ssize_t ns = PySequence_Size(summary_o);
    if (ns < 0) goto done;
    items = PyMem_Calloc((size_t)ns + 1, sizeof *items);
    if (!items) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *kv = PySequence_GetItem(summary_o, i);
        if (!kv) goto done;
        PyObject *k = PyTuple_Check(kv) && PyTuple_GET_SIZE(kv) == 2 ? PyTuple_GET_ITEM(kv, 0) : NULL;
        PyObject *v = k ? PyTuple_GET_ITEM(kv, 1) : NULL;
        items[i].key = k && PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        items[i].value = v && PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        Py_DECREF(kv); /* the strings live in summary_o */
        if (!items[i].key || !items[i].value) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "summary items must be (str, str)");
            goto done;
        }
    }
    p.summary = items;
    p.n_summary = (int)ns;
    char err[1024];
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_report_write_fd(fd, name, &p, err, sizeof err);
    Py_END_ALLOW_THREADS fd = -1; /* closed by the writer */
    if (st != SWI_OK) {
        PyErr_SetString(st == SWI_ERR_NOMEM ? PyExc_MemoryError : PyExc_OSError, err);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    if (fd >= 0) close(fd);
    PyMem_Free(names);
    PyMem_Free(items);
    PyBuffer_Release(&lab);
    if (img.obj) PyBuffer_Release(&img);
    return result;
}
#endif

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))swi_py_run, METH_VARARGS | METH_KEYWORDS, "Run swi_run (internal)."},
    {"plan", (PyCFunction)(void (*)(void))swi_py_plan, METH_VARARGS | METH_KEYWORDS,
     "Run swi_plan_run (internal)."},
    {"window_starts", swi_py_window_starts, METH_VARARGS, "window_starts(size, roi, overlap) -> tuple"},
    {"weights", swi_py_weights, METH_VARARGS, "weights(mode, roi, sigma_scale) -> float32 bytes"},
#ifdef SWI_HAVE_REPORT
    {"report", swi_py_report, METH_VARARGS, "Write a review page (internal; swi.report)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "swi._swi", "libswi binding (internal)", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__swi(void) {
    if (PyType_Ready(&ResultType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    BudgetError = PyErr_NewExceptionWithDoc(
        "swi.BudgetError", "max_memory is below the smallest plan; the message names the minimum.",
        PyExc_MemoryError, NULL);
    if (!BudgetError || PyModule_AddObjectRef(m, "BudgetError", BudgetError) < 0 ||
        PyModule_AddStringConstant(m, "libswi_version", swi_version()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", SWI_MAX_DIMS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_HEADS", SWI_MAX_HEADS) < 0) {
        Py_XDECREF(BudgetError);
        BudgetError = NULL;
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
