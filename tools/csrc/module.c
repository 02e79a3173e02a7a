/* The tools._native module: see common.h for what each part does. */
#include "common.h"

static PyMethodDef methods[] = {
    {"listdir", native_listdir, METH_O, "(files, dirs, symlinks, entries) of a directory fd."},
    {"open_listdir", native_open_listdir, METH_VARARGS, "(fd, listing) of a subdirectory."},
    {"newest_first", native_newest_first, METH_VARARGS, "Paths by mtime, newest first."},
    {"scan", native_scan, METH_VARARGS, "Matching lines of files in memory, as hit dicts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tools._native", "GIL-free hot loops of glob and search_files.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&RegexType) < 0 ||
        PyType_Ready(&StatsType) < 0 || PyType_Ready(&BudgetType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0 ||
                      PyModule_AddObjectRef(m, "Regex", (PyObject *)&RegexType) < 0 ||
                      PyModule_AddObjectRef(m, "Stats", (PyObject *)&StatsType) < 0 ||
                      PyModule_AddObjectRef(m, "Budget", (PyObject *)&BudgetType) < 0))
        Py_CLEAR(m);
    return m;
}
