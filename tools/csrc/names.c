/* Arguments: descriptors, and names as C strings held by their encoded bytes. */
#include "common.h"

#include <stdint.h>
#include <string.h>

int fd_arg(PyObject *obj, int *out) {
    long value = PyLong_AsLong(obj);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < 0 || value > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "not a file descriptor");
        return -1;
    }
    *out = (int)value;
    return 0;
}


void cnames_free(CNames *c) {
    for (Py_ssize_t i = 0; i < c->n; i++)
        Py_XDECREF(c->owners[i]);
    PyMem_Free(c->owners);
    PyMem_Free(c->names);
}

int cnames_add(CNames *c, Py_ssize_t cap, PyObject *name) {
    PyObject *encoded = PyUnicode_EncodeFSDefault(name);
    if (encoded == NULL)
        return -1;
    if (c->n >= cap) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_RuntimeError, "name list changed size");
        return -1;
    }
    c->owners[c->n] = encoded;
    c->names[c->n] = PyBytes_AS_STRING(encoded);
    if (strlen(c->names[c->n]) != (size_t)PyBytes_GET_SIZE(encoded) ||
        strchr(c->names[c->n], '/') != NULL) {
        c->n++;
        PyErr_SetString(PyExc_ValueError, "a name must be one path segment");
        return -1;
    }
    c->n++;
    return 0;
}

int cnames_alloc(CNames *c, Py_ssize_t cap) {
    c->n = 0;
    c->owners = PyMem_Calloc(cap ? cap : 1, sizeof(PyObject *));
    c->names = PyMem_Calloc(cap ? cap : 1, sizeof(char *));
    if (c->owners == NULL || c->names == NULL) {
        PyMem_Free(c->owners);
        PyMem_Free(c->names);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

