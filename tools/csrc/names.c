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
        c->owners = NULL; /* groups_free must not free them again */
        c->names = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}


/* Groups: [(dir_fd, [names])], checked and flattened. */
int groups_collect(PyObject *groups, Groups *out) {
    memset(out, 0, sizeof *out);
    Py_ssize_t total = 0, ngroups = PyList_GET_SIZE(groups);
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *item = PyList_GET_ITEM(groups, g);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyList_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "groups are (dir_fd, [names]) tuples");
            return -1;
        }
        total += PyList_GET_SIZE(PyTuple_GET_ITEM(item, 1));
    }
    out->dir_fds = PyMem_Calloc(total ? (size_t)total : 1, sizeof(int));
    out->group_of = PyMem_Calloc(total ? (size_t)total : 1, sizeof(Py_ssize_t));
    out->strs = PyList_New(0);
    if (out->dir_fds == NULL || out->group_of == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (out->strs == NULL || cnames_alloc(&out->names, total) != 0)
        return -1;
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *item = PyList_GET_ITEM(groups, g), *names = PyTuple_GET_ITEM(item, 1);
        int fd;
        if (fd_arg(PyTuple_GET_ITEM(item, 0), &fd) != 0)
            return -1;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(names) && out->names.n < total; k++) {
            Py_ssize_t i = out->names.n;
            out->dir_fds[i] = fd;
            out->group_of[i] = g;
            if (cnames_add(&out->names, total, PyList_GET_ITEM(names, k)) != 0 ||
                PyList_Append(out->strs, PyList_GET_ITEM(names, k)) != 0)
                return -1;
        }
    }
    out->n = out->names.n;
    return 0;
}

void groups_free(Groups *g) {
    if (g->names.owners != NULL)
        cnames_free(&g->names);
    PyMem_Free(g->dir_fds);
    PyMem_Free(g->group_of);
    Py_CLEAR(g->strs);
    memset(g, 0, sizeof *g);
}
