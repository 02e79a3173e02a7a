/* tools._native: the hot loops of glob and search_files, without the GIL.
 *
 * Python keeps every decision of policy (which directories are walked, which
 * names are asked of the host hook, the bounds); this module only does the
 * per-entry and per-file work that Python cannot do fast:
 *
 *   listdir(fd)              classify one directory's entries by d_type   (dirs.c)
 *   open_listdir(fd, name)   open a subdirectory as the walk does, and list it (dirs.c)
 *   Stats(groups)            mtimes (fstatat, never following links), in the background (dirs.c)
 *   newest_first(m, paths)   glob's order: newest first, ties by path      (dirs.c)
 *   Reader(groups, ...)      open, check and read files on a few threads,
 *                            in the background, then scan them             (reader.c)
 *
 * Every open is relative to a descriptor the caller pinned, one name at a time
 * (a name with '/' or NUL is refused), with O_NOFOLLOW | O_NONBLOCK, and anything
 * that is not a regular file is refused after fstat: the rules of the Python
 * path in tools/search.py, which stays as the fallback and as the reference the
 * tests compare this module against.
 */
#ifndef BASTION_NATIVE_COMMON_H
#define BASTION_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#define LONG_LINE_NONE (-1)
#define BINARY_PROBE 8192

/* bytes.c: byte search helpers */
typedef struct {
    const char *text;
    Py_ssize_t len, rare; /* index of the rarest byte (memchr looks for it) */
    Py_ssize_t other;     /* index of the next rarest byte, at another offset (len > 1) */
} Needle;

const char *find_byte_back(const char *lo, const char *hi, char c);
Py_ssize_t count_newlines(const char *p, Py_ssize_t n);
Needle needle_of(const char *text, Py_ssize_t len);
Py_ssize_t needle_find(const Needle *n, const char *buf, Py_ssize_t size, Py_ssize_t pos);

/* threads.c: the background thread of a Reader or a Stats */
typedef struct {
    pthread_t thread;
    int started, finished;
} Background;

void background_start(Background *bg, void *(*work)(void *), void *arg);
void background_join(Background *bg); /* idempotent */

/* names.c: arguments */
typedef struct {
    PyObject **owners; /* encoded bytes, one per name */
    const char **names;
    Py_ssize_t n;
} CNames;

int fd_arg(PyObject *obj, int *out);
int cnames_alloc(CNames *c, Py_ssize_t cap);
int cnames_add(CNames *c, Py_ssize_t cap, PyObject *name);
void cnames_free(CNames *c);

/* Groups: [(dir_fd, [names])] flattened: each name's C string, its directory fd,
 * its group's index and its str (in a list of our own: the caller's may change). */
typedef struct {
    CNames names;
    int *dir_fds;
    Py_ssize_t *group_of;
    PyObject *strs;
    Py_ssize_t n;
} Groups;

int groups_collect(PyObject *groups, Groups *out);
void groups_free(Groups *g);

/* scan.c: candidate lines and hits */
typedef struct {
    Py_ssize_t start, end, number; /* number -1: a line over the long-line bound */
    int proven;                    /* the literal alone proves the match */
} Line;

typedef struct {
    Line *items;
    Py_ssize_t n, cap;
    int failed;
} Lines;

typedef struct {
    Needle literal;
    int has_literal, trusted;
    Py_ssize_t long_line;
    const void *re; /* the pattern in the system's RE2 (regex.cc), or NULL */
} LineSpec;

typedef struct {
    const char *buf;
    Py_ssize_t size;
    PyObject *obj;      /* what RE2 reads: the bytes, or NULL (a memoryview is made) */
    const Lines *lines; /* candidate lines found beforehand (literal searches) */
} FileView;

typedef struct {
    PyObject *find, *confirm, *anchor; /* RE2 Match functions, or None */
    PyObject *hits;
    long matched_files, long_lines;
    Py_ssize_t out, limit;
} Found;

void find_lines(const LineSpec *spec, const char *buf, Py_ssize_t size, Lines *out);
int spec_finds_lines(const LineSpec *spec);
int scan_view(const LineSpec *spec, Found *f, PyObject *path, FileView *view);
int found_init(Found *f, PyObject *find, PyObject *confirm, PyObject *anchor, Py_ssize_t limit);
PyObject *found_result(Found *f);
void found_clear(Found *f);
int parse_spec(PyObject *literal, PyObject *find, PyObject *regex, int trusted,
               Py_ssize_t long_line, LineSpec *spec);

/* regex.cc: RE2 without the GIL; pattern.c: the Regex type holding one */
void *bastion_regex_compile(const char *pattern, size_t len, int literal, char *error,
                            size_t error_len);
int bastion_regex_find(const void *handle, const char *buf, size_t size, size_t pos, size_t end,
                       size_t *first, size_t *last);
void bastion_regex_free(void *handle);
const void *regex_handle(PyObject *obj); /* NULL for None; -1 cast on a wrong type */
extern PyTypeObject RegexType;

/* Allocation-failure injection, compiled only with -DBASTION_FAULTS (nox -s
 * sanitize): _fail_alloc(n) makes the n-th allocation from now fail, once. */
#if defined(BASTION_FAULTS) && !defined(BASTION_FAULTS_IMPL)
#include <stdlib.h>
void *fault_malloc(size_t size);
void *fault_realloc(void *ptr, size_t size);
void *fault_calloc(size_t n, size_t size);
#define malloc fault_malloc
#define realloc fault_realloc
#define PyMem_Calloc fault_calloc
#endif
#ifdef BASTION_FAULTS
PyObject *native_cached_arenas(PyObject *self, PyObject *unused);
#endif

/* module functions */
PyObject *native_listdir(PyObject *self, PyObject *arg);
PyObject *native_open_listdir(PyObject *self, PyObject *args);
PyObject *native_newest_first(PyObject *self, PyObject *args);
extern PyTypeObject ReaderType;
extern PyTypeObject BudgetType;
extern PyTypeObject StatsType;

#endif
