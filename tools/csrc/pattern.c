/* Regex: a pattern compiled by the system's RE2 (regex.cc), for matching in the
 * reader threads. Regex(source: bytes, literal: bool); ValueError if RE2 refuses
 * it (the caller then keeps to google-re2 from Python). */
#include "common.h"

typedef struct {
    PyObject_HEAD
    void *handle;
} Regex;

static PyObject *regex_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    const char *source;
    Py_ssize_t len;
    int literal;
    char error[256] = "";
    if (!PyArg_ParseTuple(args, "y#p", &source, &len, &literal))
        return NULL;
    void *handle;
    Py_BEGIN_ALLOW_THREADS
    handle = bastion_regex_compile(source, (size_t)len, literal, error, sizeof error);
    Py_END_ALLOW_THREADS
    if (handle == NULL) {
        PyErr_Format(PyExc_ValueError, "RE2 refused the pattern: %s", error);
        return NULL;
    }
    Regex *self = (Regex *)type->tp_alloc(type, 0);
    if (self == NULL) {
        bastion_regex_free(handle);
        return NULL;
    }
    self->handle = handle;
    return (PyObject *)self;
}

static void regex_dealloc(Regex *self) {
    if (self->handle != NULL)
        bastion_regex_free(self->handle);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

const void *regex_handle(PyObject *obj) {
    if (obj == Py_None)
        return NULL;
    if (!PyObject_TypeCheck(obj, &RegexType)) {
        PyErr_SetString(PyExc_TypeError, "regex must be a tools._native.Regex or None");
        return (const void *)-1;
    }
    return ((Regex *)obj)->handle;
}

PyTypeObject RegexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tools._native.Regex",
    .tp_basicsize = sizeof(Regex),
    .tp_dealloc = (destructor)regex_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pattern compiled by RE2 for matching without the GIL.",
    .tp_new = regex_new,
};
