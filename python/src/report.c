/* report.c -- report(): the review page of swi_report.h, written from Python's buffers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "swipy.h"

#ifdef SWI_HAVE_REPORT
#include <unistd.h>

#include "swi_report.h"

/* (str, str) pairs of seq as items (the strings live in seq): 0, or -1 with an exception. */
static int items_of(PyObject *seq, swi_report_item **out, int *n, const char *what) {
    *out = NULL;
    *n = 0;
    Py_ssize_t ns = PySequence_Size(seq);
    if (ns < 0) return -1;
    if (ns > 4096) {
        PyErr_Format(PyExc_ValueError, "at most 4096 %s items", what);
        return -1;
    }
    swi_report_item *items = PyMem_Calloc((size_t)ns + 1, sizeof *items);
    if (!items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *kv = PySequence_GetItem(seq, i);
        if (!kv) {
            PyMem_Free(items);
            return -1;
        }
        PyObject *k = PyTuple_Check(kv) && PyTuple_GET_SIZE(kv) == 2 ? PyTuple_GET_ITEM(kv, 0) : NULL;
        PyObject *v = k ? PyTuple_GET_ITEM(kv, 1) : NULL;
        items[i].key = k && PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        items[i].value = v && PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        Py_DECREF(kv); /* the strings live in seq */
        if (!items[i].key || !items[i].value) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s items must be (str, str)", what);
            PyMem_Free(items);
            return -1;
        }
    }
    *out = items;
    *n = (int)ns;
    return 0;
}

/* report(fd, name, labels, label_bytes, shape, image|None, affine16, names|None, summary, title
 * [, ids]): the review page of report/swi_report.h to fd (closed in every case). swi/_report.py
 * hands over C-order buffers: labels uint8/uint16, image float32; summary and ids as (str, str)
 * pairs. */
PyObject *swipy_report(PyObject *self, PyObject *args) {
    (void)self;
    int fd = -1, label_bytes = 0;
    const char *name, *title;
    Py_buffer lab = {0}, img = {0};
    PyObject *shape_o, *img_o, *affine_o, *names_o, *summary_o, *ids_o = NULL;
    if (!PyArg_ParseTuple(args, "isy*iOOOOOs|O:report", &fd, &name, &lab, &label_bytes, &shape_o, &img_o,
                          &affine_o, &names_o, &summary_o, &title, &ids_o)) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    PyObject *result = NULL;
    const char **names = NULL;
    swi_report_item *items = NULL, *ids = NULL;
    swi_report_page p;
    memset(&p, 0, sizeof p);
    double aff[16];
    if (swipy_int64_seq(shape_o, 3, p.size, "shape") < 0 || swipy_double_seq(affine_o, 16, aff, "affine") < 0)
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
    if (items_of(summary_o, &items, &p.n_summary, "summary") < 0) goto done;
    p.summary = items;
    if (ids_o && ids_o != Py_None) {
        if (items_of(ids_o, &ids, &p.n_ids, "identifier") < 0) goto done;
        p.ids = ids;
    }
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
    PyMem_Free(ids);
    PyBuffer_Release(&lab);
    if (img.obj) PyBuffer_Release(&img);
    return result;
}
#endif
