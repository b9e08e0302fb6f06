/*
 * folder.c -- segment_folder(): swi_pipeline.h's folder mode (every case of a folder, the
 * model loaded once) driven from Python, its calls made as pipeline.c makes a job's: on a
 * thread of their own, Ctrl-C cancelling the folder. serve_reader(): the reader program's side
 * (swi_folder_serve_reader), for a Python process started as a folder's reader.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(SWI_HAVE_PIPELINE) && defined(SWI_PY_JOB_FOLDER)
#include <string.h>

#include "job.h"

/* A folder's state: the job's first, as the job hooks' user is the job_state. */
typedef struct {
    job_state js;
    PyObject *on_case; /* on_case(event, case dict) */
} folder_state;

static const char *status_name(swi_case_status s) {
    return s == SWI_CASE_DONE      ? "done"
           : s == SWI_CASE_FAILED  ? "failed"
           : s == SWI_CASE_SKIPPED ? "skipped"
                                   : "not run";
}

/* A case as a dict; NULL with an exception. */
static PyObject *case_dict(const swi_folder_case *c) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (swipy_dict_set(d, "name", PyUnicode_DecodeFSDefault(c->name)) < 0 ||
        swipy_dict_set(d, "output", PyUnicode_DecodeFSDefault(c->output)) < 0 ||
        swipy_dict_set(d, "index", PyLong_FromLong(c->index)) < 0 ||
        swipy_dict_set(d, "count", PyLong_FromLong(c->count)) < 0 ||
        swipy_dict_set(d, "status", PyUnicode_FromString(status_name(c->status))) < 0 ||
        swipy_dict_set(d, "error",
                       c->status == SWI_CASE_FAILED
                           ? PyUnicode_DecodeUTF8(c->error, (Py_ssize_t)strlen(c->error), "replace")
                           : Py_NewRef(Py_None)) < 0 ||
        swipy_dict_set(d, "cancelled", PyBool_FromLong(c->error_status == SWI_ERR_CANCELLED)) < 0 ||
        swipy_dict_set(d, "size", swipy_int64_tuple(c->size, 3)) < 0 ||
        swipy_dict_set(d, "seconds", PyFloat_FromDouble(c->seconds)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* on_case("start" | "end", case); an exception is kept (the first one) and cancels the folder. */
static void case_event(void *user, const char *event, const swi_folder_case *c) {
    folder_state *fs = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *d = case_dict(c);
    PyObject *r = d ? PyObject_CallFunction(fs->on_case, "sO", event, d) : NULL;
    Py_XDECREF(d);
    if (r) {
        Py_DECREF(r);
    } else {
        run_state *rs = &fs->js.hook_rs;
        if (!rs->exc_type)
            PyErr_Fetch(&rs->exc_type, &rs->exc_value, &rs->exc_tb);
        else
            PyErr_Clear();
        atomic_store(&fs->js.cancel, 1);
    }
    PyGILState_Release(gil);
}

static void case_start(void *user, const swi_folder_case *c) { case_event(user, "start", c); }
static void case_end(void *user, const swi_folder_case *c) { case_event(user, "end", c); }

/* The folder dict's fields into sp (names borrowed from the dict); -1 with an exception. */
static int folder_spec(PyObject *d, swi_folder_spec *sp, const char **reader_argv, int max_argv) {
    if (!PyDict_Check(d)) return swipy_bad_field("folder", "a dict");
    swipy_fields f = {d, 0};
    if (swipy_get_str(&f, "input_dir", &sp->input_dir) < 0 ||
        swipy_get_str(&f, "output_dir", &sp->output_dir) < 0 ||
        swipy_get_str(&f, "output_format", &sp->output_format) < 0 ||
        swipy_get_str(&f, "report_dir", &sp->report_dir) < 0 ||
        swipy_get_int(&f, "part_index", &sp->part_index) < 0 ||
        swipy_get_int(&f, "part_count", &sp->part_count) < 0)
        return -1;
    PyObject *argv = PyDict_GetItemString(d, "reader_argv"); /* borrowed */
    if (argv && argv != Py_None) {
        f.used++;
        if (!PyList_Check(argv) || PyList_GET_SIZE(argv) < 1 || PyList_GET_SIZE(argv) >= max_argv)
            return swipy_bad_field("reader_argv", "a list of 1 to 15 str");
        Py_ssize_t n = PyList_GET_SIZE(argv);
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *u =
                PyUnicode_Check(PyList_GET_ITEM(argv, i)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(argv, i)) : NULL;
            if (!u) return swipy_bad_field("reader_argv", "a list of str");
            reader_argv[i] = u;
        }
        reader_argv[n] = NULL;
        sp->reader = reader_argv[0];
        sp->reader_argv = reader_argv;
    } else if (argv) {
        f.used++;
    }
    if (f.used != PyDict_Size(d)) {
        PyErr_SetString(PyExc_TypeError, "internal: the folder spec has a field swi_folder_spec lacks");
        return -1;
    }
    return 0;
}

/* The result as a dict: cases (a list of case dicts), done, failed, skipped. */
static PyObject *result_dict(const swi_folder_result *r) {
    PyObject *d = PyDict_New(), *cases = PyList_New(r->n_cases);
    for (int i = 0; d && cases && i < r->n_cases; i++) {
        PyObject *c = case_dict(&r->cases[i]);
        if (!c) {
            Py_CLEAR(cases);
            break;
        }
        PyList_SET_ITEM(cases, i, c);
    }
    if (!d || !cases || swipy_dict_set(d, "cases", Py_NewRef(cases)) < 0 ||
        swipy_dict_set(d, "done", PyLong_FromLong(r->done)) < 0 ||
        swipy_dict_set(d, "failed", PyLong_FromLong(r->failed)) < 0 ||
        swipy_dict_set(d, "skipped", PyLong_FromLong(r->skipped)) < 0)
        Py_CLEAR(d);
    Py_XDECREF(cases);
    return d;
}

/* segment_folder(spec, folder, predictors, copy_into, progress, message, on_case) -> dict: every
 * case of folder["input_dir"] as a job of spec (its inputs and outputs left out). */
PyObject *swipy_segment_folder(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"spec",     "folder",  "predictors", "copy_into",
                             "progress", "message", "on_case",    NULL};
    PyObject *spec, *folder, *predictors, *copy_into, *progress, *message, *on_case;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOO:segment_folder", kwlist, &spec, &folder, &predictors,
                                     &copy_into, &progress, &message, &on_case))
        return NULL;
    if (!PyCallable_Check(on_case)) {
        PyErr_SetString(PyExc_TypeError, "internal: on_case must be callable");
        return NULL;
    }
    folder_state fs;
    PyObject *ret = NULL;
    swi_folder_spec sp;
    swi_folder_spec_init(&sp);
    const char *reader_argv[16];
    job_call c;
    memset(&c, 0, sizeof c);
    if (swipy_job_state_init(&fs.js, spec, predictors, copy_into, progress, message) < 0) goto out;
    fs.on_case = on_case;
    if (folder_spec(folder, &sp, reader_argv, 16) < 0) goto out;
    sp.job = &fs.js.spec;
    swi_folder_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.job = fs.js.hooks; /* its user: fs.js, the start of fs */
    hooks.case_start = case_start;
    hooks.case_end = case_end;
    c.op = OP_FOLDER_OPEN;
    c.js = &fs.js;
    c.fspec = &sp;
    c.fhooks = &hooks;
    swipy_call_job(&c);
    if (swipy_raise_job(&fs.js, &c) < 0) goto out;
    swi_folder_result res;
    memset(&res, 0, sizeof res);
    c.op = OP_FOLDER_RUN;
    c.fres = &res;
    swipy_call_job(&c);
    if (swipy_raise_job(&fs.js, &c) < 0) goto out;
    ret = result_dict(&res);
out:
    swi_folder_free(c.folder);
    swipy_job_state_free(&fs.js);
    return ret;
}

/* serve_reader(files) -> int: a case's volumes answered on stdout (swi_folder_serve_reader), as
 * a folder's reader program does; the exit status. */
PyObject *swipy_serve_reader(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *files;
    if (!PyArg_ParseTuple(args, "O!:serve_reader", &PyList_Type, &files)) return NULL;
    const Py_ssize_t n = PyList_GET_SIZE(files);
    if (n < 1 || n > SWI_JOB_MAX_INPUTS) {
        PyErr_Format(PyExc_ValueError, "1 to %d files, got %zd", SWI_JOB_MAX_INPUTS, n);
        return NULL;
    }
    const char *names[SWI_JOB_MAX_INPUTS];
    for (Py_ssize_t i = 0; i < n; i++) {
        names[i] =
            PyUnicode_Check(PyList_GET_ITEM(files, i)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(files, i)) : NULL;
        if (!names[i])
            return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_TypeError, "files must be str"), NULL);
    }
    swi_status st;
    Py_BEGIN_ALLOW_THREADS st = swi_folder_serve_reader(1, (int)n, names);
    Py_END_ALLOW_THREADS return PyLong_FromLong(st == SWI_OK ? 0 : 1);
}
#endif
