/* The tools._native module: see common.h for what each part does. */
#define BASTION_FAULTS_IMPL
#include "common.h"

#ifdef BASTION_FAULTS
static long countdown; /* allocations to let pass before one fails; 0: none fails */

static int failing(void) {
    long left = __atomic_load_n(&countdown, __ATOMIC_SEQ_CST);
    while (left > 0 && !__atomic_compare_exchange_n(&countdown, &left, left - 1, 0,
                                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return left == 1;
}

void *fault_malloc(size_t size) { return failing() ? NULL : malloc(size); }
void *fault_realloc(void *ptr, size_t size) { return failing() ? NULL : realloc(ptr, size); }
void *fault_calloc(size_t n, size_t size) { return failing() ? NULL : PyMem_Calloc(n, size); }

static PyObject *native_fail_alloc(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long left = __atomic_exchange_n(&countdown, n < 0 ? 0 : n, __ATOMIC_SEQ_CST);
    return PyLong_FromLong(left);
}
#endif

static PyMethodDef methods[] = {
    {"listdir", native_listdir, METH_O, "(files, dirs, symlinks, entries) of a directory fd."},
    {"open_listdir", native_open_listdir, METH_VARARGS, "(fd, listing) of a subdirectory."},
    {"newest_first", native_newest_first, METH_VARARGS, "Paths by mtime, newest first."},
#ifdef BASTION_FAULTS
    {"_fail_alloc", native_fail_alloc, METH_O, "Fail the n-th allocation from now (tests)."},
    {"_cached_arenas", native_cached_arenas, METH_NOARGS, "Arenas kept for the next Reader."},
#endif
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
