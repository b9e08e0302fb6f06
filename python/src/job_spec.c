/*
 * job_spec.c -- a swi_job_spec from the dict swi/_pipeline.py hands over: swi_job_spec's
 * fields by their C names (str, int, float, lists of them), each taken at most once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef SWI_HAVE_PIPELINE
#include <limits.h>

#include "job.h"

static PyObject *field(swipy_fields *f, const char *k) {
    PyObject *v = PyDict_GetItemString(f->d, k); /* borrowed */
    if (!v) return NULL;
    f->used++;
    return v == Py_None ? NULL : v;
}

int swipy_bad_field(const char *k, const char *what) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "internal: job field %s must be %s", k, what);
    return -1;
}

/* The string stays valid while the dict holds it: for the whole call. */
int swipy_get_str(swipy_fields *f, const char *k, const char **dst) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    const char *u = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    if (!u) return swipy_bad_field(k, "a str");
    *dst = u;
    return 0;
}

static int get_strs(swipy_fields *f, const char *k, const char **dst, int max, int *n) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    if (!PyList_Check(v)) return swipy_bad_field(k, "a list of str");
    Py_ssize_t len = PyList_GET_SIZE(v);
    if (len > max) {
        PyErr_Format(PyExc_ValueError, "at most %d %s, got %zd", max, k, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *s = PyList_GET_ITEM(v, i);
        const char *u = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (!u) return swipy_bad_field(k, "a list of str");
        dst[i] = u;
    }
    *n = (int)len;
    return 0;
}

static int get_i64(swipy_fields *f, const char *k, int64_t *dst) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return swipy_bad_field(k, "an int");
    *dst = (int64_t)x;
    return 0;
}

int swipy_get_int(swipy_fields *f, const char *k, int *dst) {
    int64_t x = *dst;
    if (get_i64(f, k, &x) < 0) return -1;
    if (x < INT_MIN || x > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s is out of range", k);
        return -1;
    }
    *dst = (int)x;
    return 0;
}

static int get_size(swipy_fields *f, const char *k, size_t *dst) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    size_t x = PyLong_AsSize_t(v);
    if (x == (size_t)-1 && PyErr_Occurred()) return swipy_bad_field(k, "an int >= 0");
    *dst = x;
    return 0;
}

static int get_double(swipy_fields *f, const char *k, double *dst) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return swipy_bad_field(k, "a float");
    *dst = x;
    return 0;
}

static int get_doubles(swipy_fields *f, const char *k, int n, double *dst, int *given) {
    PyObject *v = field(f, k);
    if (!v) return 0;
    if (swipy_double_seq(v, n, dst, k) < 0) return -1;
    if (given) *given = 1;
    return 0;
}

static int get_i64s(swipy_fields *f, const char *k, int n, int64_t *dst) {
    PyObject *v = field(f, k);
    return v ? swipy_int64_seq(v, n, dst, k) : 0;
}

static int get_ints(swipy_fields *f, const char *k, int n, int *dst) {
    int64_t t[3];
    PyObject *v = field(f, k);
    if (!v) return 0;
    if (n > 3 || swipy_int64_seq(v, n, t, k) < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (t[i] < 0 || t[i] > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "%s must be ints >= 0", k);
            return -1;
        }
        dst[i] = (int)t[i];
    }
    return 0;
}

int swipy_job_spec(PyObject *d, swi_job_spec *s) {
    if (!PyDict_Check(d)) return swipy_bad_field("spec", "a dict");
    swipy_fields f = {d, 0};
    if (get_strs(&f, "inputs", s->inputs, SWI_JOB_MAX_INPUTS, &s->n_inputs) < 0 ||
        get_strs(&f, "models", s->models, SWI_JOB_MAX_MODELS, &s->n_models) < 0 ||
#ifdef SWI_PY_JOB_PREDICTORS
        get_i64(&f, "classes", &s->classes) < 0 ||
#endif
        swipy_get_int(&f, "no_card", &s->no_card) < 0 || swipy_get_int(&f, "tta", &s->tta) < 0 ||
        swipy_get_int(&f, "head", &s->head) < 0 || swipy_get_int(&f, "cuda", &s->cuda) < 0 ||
        swipy_get_int(&f, "no_rewrite", &s->no_rewrite) < 0 ||
        get_doubles(&f, "clip", 2, s->clip, &s->clip_given) < 0 ||
        get_doubles(&f, "scale", 4, s->scale, &s->scale_given) < 0 ||
        swipy_get_int(&f, "zscore", &s->zscore) < 0 ||
        swipy_get_int(&f, "nonfinite_fail", &s->nonfinite_fail) < 0 ||
        swipy_get_str(&f, "orientation", &s->orientation) < 0 ||
        get_doubles(&f, "spacing", 3, s->spacing, NULL) < 0 || get_i64s(&f, "roi", 3, s->roi) < 0 ||
        get_doubles(&f, "overlap", 3, s->overlap, NULL) < 0 || swipy_get_int(&f, "mode", &s->mode) < 0 ||
        get_doubles(&f, "sigma_scale", 3, s->sigma_scale, NULL) < 0 ||
        swipy_get_int(&f, "padding", &s->padding) < 0 || get_double(&f, "cval", &s->cval) < 0 ||
        swipy_get_int(&f, "sw_batch", &s->sw_batch) < 0 || swipy_get_int(&f, "no_reuse", &s->no_reuse) < 0 ||
        swipy_get_int(&f, "reuse_cache", &s->reuse_cache) < 0 ||
        swipy_get_int(&f, "shard_part", &s->shard_part) < 0 ||
        swipy_get_int(&f, "shard_parts", &s->shard_parts) < 0 ||
        get_ints(&f, "shard_grid", 3, s->shard_grid) < 0 ||
        swipy_get_int(&f, "shard_init", &s->shard_init) < 0 ||
        swipy_get_int(&f, "region_given", &s->region_given) < 0 ||
        get_i64s(&f, "region_lo", 3, s->region_lo) < 0 || get_i64s(&f, "region_hi", 3, s->region_hi) < 0 ||
        get_doubles(&f, "region_mm_lo", 3, s->region_mm_lo, &s->region_mm_given) < 0 ||
        get_doubles(&f, "region_mm_hi", 3, s->region_mm_hi, NULL) < 0 ||
        swipy_get_str(&f, "region_mask", &s->region_mask) < 0 ||
        get_double(&f, "margin_mm", &s->margin_mm) < 0 ||
        swipy_get_str(&f, "keep_outside", &s->keep_outside) < 0 ||
        swipy_get_str(&f, "output", &s->output) < 0 || swipy_get_str(&f, "scores", &s->scores) < 0 ||
        swipy_get_str(&f, "preview", &s->preview) < 0 || swipy_get_str(&f, "report", &s->report) < 0 ||
        swipy_get_str(&f, "report_title", &s->report_title) < 0 ||
        swipy_get_int(&f, "softmax", &s->softmax) < 0 ||
#ifdef SWI_PY_JOB_NNUNET
        swipy_get_str(&f, "folds", &s->folds) < 0 ||
        swipy_get_int(&f, "no_mirroring", &s->no_mirroring) < 0 ||
        get_double(&f, "tile_step", &s->tile_step) < 0 ||
        swipy_get_int(&f, "save_probabilities", &s->save_probabilities) < 0 ||
        swipy_get_int(&f, "accumulate_float16", &s->accumulate_float16) < 0 ||
#endif
#ifdef SWI_PY_JOB_KEEP_SCORES
        swipy_get_int(&f, "keep_scores", &s->keep_scores) < 0 ||
#endif
#ifdef SWI_PY_JOB_MASKS
        swipy_get_str(&f, "masks", &s->masks) < 0 ||
#endif
#ifdef SWI_PY_JOB_CHUNKS
        get_i64s(&f, "chunks", 3, s->chunks) < 0 ||
#endif
#ifdef SWI_PY_JOB_STATISTICS
        swipy_get_str(&f, "statistics", &s->statistics) < 0 ||
        swipy_get_int(&f, "keep_statistics", &s->keep_statistics) < 0 ||
#endif
        swipy_get_int(&f, "force", &s->force) < 0 || swipy_get_int(&f, "quiet", &s->quiet) < 0 ||
        swipy_get_int(&f, "threads", &s->threads) < 0 || get_size(&f, "max_memory", &s->max_memory) < 0)
        return -1;
    if (f.used != PyDict_Size(d)) {
        PyErr_SetString(PyExc_TypeError, "internal: the job spec has a field swi_job_spec lacks");
        return -1;
    }
    return 0;
}

#endif
