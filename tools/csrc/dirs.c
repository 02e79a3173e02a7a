/* Directory entries by d_type, and modification times, for the walk and glob. */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *data;
    size_t len, cap;
} Names;

static int names_add(Names *names, char kind, const char *name) {
    size_t need = strlen(name) + 2;
    if (names->len + need > names->cap) {
        size_t cap = names->cap ? names->cap * 2 : 4096;
        while (cap < names->len + need)
            cap *= 2;
        char *grown = realloc(names->data, cap);
        if (grown == NULL)
            return -1;
        names->data = grown;
        names->cap = cap;
    }
    names->data[names->len] = kind;
    memcpy(names->data + names->len + 1, name, need - 1);
    names->len += need;
    return 0;
}

/* Kind of one entry: 'f' regular file, 'd' directory, 'l' symlink, 'o' other;
 * d_type when the filesystem gives it, else fstatat (never following links). */
static char entry_kind(int dfd, const char *name, unsigned char d_type) {
    switch (d_type) {
    case DT_REG:
        return 'f';
    case DT_DIR:
        return 'd';
    case DT_LNK:
        return 'l';
    case DT_UNKNOWN:
        break;
    default:
        return 'o';
    }
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 'o';
    if (S_ISREG(st.st_mode))
        return 'f';
    if (S_ISDIR(st.st_mode))
        return 'd';
    return S_ISLNK(st.st_mode) ? 'l' : 'o';
}

#ifdef __linux__
#include <sys/syscall.h>

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Read a directory's names into ``names`` with getdents64 on the descriptor itself
 * (no duplicate, no DIR stream: two system calls fewer a directory). The offset,
 * which duplicates of the descriptor share, is rewound before (unless the fd is
 * ``fresh``ly opened) and after, as os.scandir and os.listdir leave it. 0, or an
 * errno value. */
static int read_names(int fd, Names *names, long *total, int fresh) {
    char buf[32768];
    if (!fresh && lseek(fd, 0, SEEK_SET) < 0)
        return errno;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno;
        if (got == 0)
            return lseek(fd, 0, SEEK_SET) < 0 ? errno : 0;
        for (long at = 0; at < got;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + at);
            at += d->d_reclen;
            const char *n = d->d_name;
            if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)))
                continue;
            (*total)++;
            if (names_add(names, entry_kind(fd, n, d->d_type), n) != 0)
                return ENOMEM;
        }
    }
}
#else
/* Read a directory's names into ``names``; 0, or an errno value. */
static int read_names(int fd, Names *names, long *total, int fresh) {
    int dfd = dup(fd);
    if (dfd < 0)
        return errno;
    DIR *dir = fdopendir(dfd);
    if (dir == NULL) {
        int err = errno;
        close(dfd);
        return err;
    }
    rewinddir(dir); /* the duplicate shares the caller's offset */
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *entry = readdir(dir);
        if (entry == NULL) {
            err = errno;
            break;
        }
        const char *n = entry->d_name;
        if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)))
            continue;
        (*total)++;
        if (names_add(names, entry_kind(dfd, n, entry->d_type), n) != 0) {
            err = ENOMEM;
            break;
        }
    }
    closedir(dir);
    return err;
}
#endif

/* (files, dirs, symlinks, entries) from what read_names gathered; frees it. */
static PyObject *listing_tuple(Names *names, long total) {
    PyObject *files = PyList_New(0), *dirs = PyList_New(0);
    long symlinks = 0;
    for (size_t at = 0; files && dirs && at < names->len;) {
        char kind = names->data[at];
        const char *name = names->data + at + 1;
        at += strlen(name) + 2;
        symlinks += kind == 'l';
        if (kind != 'f' && kind != 'd')
            continue;
        PyObject *text = PyUnicode_DecodeFSDefault(name);
        if (text == NULL || PyList_Append(kind == 'f' ? files : dirs, text) != 0)
            Py_CLEAR(files);
        Py_XDECREF(text);
    }
    free(names->data);
    names->data = NULL;
    if (files == NULL || dirs == NULL) {
        Py_XDECREF(files);
        Py_XDECREF(dirs);
        return NULL;
    }
    return Py_BuildValue("(NNll)", files, dirs, symlinks, total);
}

PyObject *native_listdir(PyObject *self, PyObject *arg) {
    int fd, err;
    long total = 0;
    Names names = {NULL, 0, 0};
    if (fd_arg(arg, &fd) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    err = read_names(fd, &names, &total, 0);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        free(names.data);
        errno = err;
        return err == ENOMEM ? PyErr_NoMemory() : PyErr_SetFromErrno(PyExc_OSError);
    }
    return listing_tuple(&names, total);
}

/* open_listdir(parent_fd, name) -> (fd, listing or None): the walk's open of a
 * subdirectory (O_NOFOLLOW | O_DIRECTORY, relative to its parent) and its
 * listing in one call. OSError if the open fails; None for the listing if only
 * reading it failed (the walk then reports it unreadable, as with listdir). */
PyObject *native_open_listdir(PyObject *self, PyObject *args) {
    PyObject *parent_obj, *name_obj, *encoded = NULL;
    int parent, fd = -1, err = 0;
    long total = 0;
    Names names = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "OU", &parent_obj, &name_obj) || fd_arg(parent_obj, &parent) != 0 ||
        (encoded = PyUnicode_EncodeFSDefault(name_obj)) == NULL)
        return NULL;
    const char *name = PyBytes_AS_STRING(encoded);
    if (strlen(name) != (size_t)PyBytes_GET_SIZE(encoded) || strchr(name, '/') != NULL) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_ValueError, "a name must be one path segment");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        err = errno;
    else
        err = read_names(fd, &names, &total, 1);
    Py_END_ALLOW_THREADS
    Py_DECREF(encoded);
    if (fd < 0) {
        errno = err;
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name_obj);
    }
    /* Out of memory is an error; any other failure to read is the walk's to report. */
    PyObject *listing = err == ENOMEM ? PyErr_NoMemory()
                        : err         ? Py_NewRef(Py_None)
                                      : listing_tuple(&names, total);
    free(names.data);
    PyObject *out = listing ? Py_BuildValue("(iN)", fd, listing) : NULL;
    if (out == NULL)
        close(fd);
    return out;
}

/* ---- Stats: mtimes of many names in the background ---- */

/* Stats(groups) starts one thread that stats [(dir_fd, [names])] (never following
 * links); wait() -> [st_mtime_ns or None] in order. The caller keeps the fds open
 * until wait() has returned; glob walks on meanwhile. */
typedef struct {
    PyObject_HEAD
    Groups groups;
    long long *times;
    char *ok;
    Background thread;
} Stats;

static void stat_all(Stats *s) {
    for (Py_ssize_t i = 0; i < s->groups.n; i++) {
        struct stat st;
        if (fstatat(s->groups.dir_fds[i], s->groups.names.names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
#ifdef __APPLE__
            s->times[i] = (long long)st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
            s->times[i] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
            s->ok[i] = 1;
        }
    }
}

static void *stats_thread(void *arg) {
    stat_all(arg);
    return NULL;
}

static int stats_collect(Stats *s, PyObject *groups) {
    if (groups_collect(groups, &s->groups) != 0)
        return -1;
    s->times = PyMem_Calloc(s->groups.n ? (size_t)s->groups.n : 1, sizeof(long long));
    s->ok = PyMem_Calloc(s->groups.n ? (size_t)s->groups.n : 1, 1);
    if (s->times == NULL || s->ok == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *stats_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *groups;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &groups))
        return NULL;
    Stats *s = (Stats *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    if (stats_collect(s, groups) != 0) {
        Py_DECREF(s);
        return NULL;
    }
    background_start(&s->thread, stats_thread, s);
    return (PyObject *)s;
}

static void stats_join(Stats *s) { background_join(&s->thread); }

static void stats_dealloc(Stats *s) {
    stats_join(s);
    groups_free(&s->groups);
    PyMem_Free(s->times);
    PyMem_Free(s->ok);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *stats_wait(Stats *s, PyObject *unused) {
    stats_join(s);
    PyObject *out = PyList_New(s->groups.n);
    for (Py_ssize_t i = 0; out && i < s->groups.n; i++) {
        PyObject *item = s->ok[i] ? PyLong_FromLongLong(s->times[i]) : Py_NewRef(Py_None);
        if (item == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyMethodDef stats_methods[] = {
    {"wait", (PyCFunction)stats_wait, METH_NOARGS, "[st_mtime_ns or None] of each name."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject StatsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tools._native.Stats",
    .tp_basicsize = sizeof(Stats),
    .tp_dealloc = (destructor)stats_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Modification times of many names, taken on a background thread.",
    .tp_methods = stats_methods,
    .tp_new = stats_new,
};

/* ---- newest_first: glob's order ---- */

typedef struct {
    long long mtime;
    PyObject *path;
} Keyed;

static int newer_first(const void *a, const void *b) {
    const Keyed *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime > y->mtime ? -1 : 1;
    return PyUnicode_Compare(x->path, y->path); /* ties by path, as Python orders str */
}

/* newest_first(mtimes, paths) -> paths by mtime, newest first, ties by path: what
 * sorted(zip(negated mtimes, paths)) gives, without 10k tuples to build and compare. */
PyObject *native_newest_first(PyObject *self, PyObject *args) {
    PyObject *mtimes, *paths;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &mtimes, &PyList_Type, &paths))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(paths);
    if (PyList_GET_SIZE(mtimes) != n) {
        PyErr_SetString(PyExc_ValueError, "mtimes and paths differ in length");
        return NULL;
    }
    Keyed *keyed = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Keyed));
    if (keyed == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        keyed[i].path = PyList_GET_ITEM(paths, i);
        keyed[i].mtime = PyLong_AsLongLong(PyList_GET_ITEM(mtimes, i));
        if (!PyUnicode_Check(keyed[i].path) || (keyed[i].mtime == -1 && PyErr_Occurred())) {
            PyMem_Free(keyed);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "paths are str and mtimes int");
            return NULL;
        }
    }
    qsort(keyed, (size_t)n, sizeof(Keyed), newer_first);
    PyObject *out = PyErr_Occurred() ? NULL : PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++)
        PyList_SET_ITEM(out, i, Py_NewRef(keyed[i].path));
    PyMem_Free(keyed);
    return out;
}
