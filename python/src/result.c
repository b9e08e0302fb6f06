/* result.c -- results the context owns, exported to numpy through the buffer protocol. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "swipy.h"

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

PyTypeObject swipy_result_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "swi._swi.Result",
    .tp_basicsize = sizeof(ResultObject),
    .tp_dealloc = result_dealloc,
    .tp_as_buffer = &result_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An engine-owned result, exported through the buffer protocol (np.asarray).",
};

void swipy_ctx_capsule_free(PyObject *cap) { swi_free(PyCapsule_GetPointer(cap, "swi_ctx")); }

PyObject *swipy_result_wrap(PyObject *owner, void *ptr, char fmt, Py_ssize_t itemsize, int ndim,
                            const int64_t *shape) {
    ResultObject *r = PyObject_New(ResultObject, &swipy_result_type);
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

PyObject *swipy_result_for(PyObject *owner, swi_ctx *ctx, const config *c, int i) {
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
    return swipy_result_wrap(owner, ptr, fmt, itemsize, nd, shape);
}
