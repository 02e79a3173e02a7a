/* tools._native: the hot loops of glob and search_files, without the GIL.
 *
 * Python keeps every decision of policy (which directories are walked, which
 * names are asked of the host hook, the bounds); this module only does the
 * per-entry and per-file work that Python cannot do fast:
 *
 *   listdir(fd)            classify one directory's entries by d_type
 *   mtimes(fd, names)      fstatat without following links, for newest-first order
 *   read_files(groups, …)  open, check and read many files on a few threads
 *   scan(paths, chunks, …) find matching lines and build the result's hit dicts
 *
 * Every open is relative to a descriptor the caller pinned, one name at a time
 * (names come from readdir, so never contain '/'), with O_NOFOLLOW | O_NONBLOCK,
 * and anything that is not a regular file is refused after fstat: the same rules
 * as the Python path in tools/search.py, which stays as the fallback and as the
 * reference the tests compare this module against.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif
#define READ_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
#define MAX_THREADS 4
#define MIN_PARALLEL_JOBS 8
#define BINARY_PROBE 8192

/* ---- small byte helpers (memrchr is not portable) ---- */

static const char *find_byte_back(const char *lo, const char *hi, char c) {
    while (hi > lo) {
        if (*--hi == c)
            return hi;
    }
    return NULL;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bytes a step; the byte counters are folded before they can wrap. */
static Py_ssize_t count_newlines(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0, i = 0;
    const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (n - i >= 16) {
        __m128i acc = zero;
        Py_ssize_t steps = (n - i) / 16;
        if (steps > 255)
            steps = 255;
        for (Py_ssize_t j = 0; j < steps; j++, i += 16)
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), nl));
        __m128i sums = _mm_sad_epu8(acc, zero);
        count += _mm_extract_epi16(sums, 0) + _mm_extract_epi16(sums, 4);
    }
    for (; i < n; i++)
        count += p[i] == '\n';
    return count;
}
#else
static Py_ssize_t count_newlines(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += p[i] == '\n';
    return count;
}
#endif

/* A literal to find: memchr for its rarest byte (by how common bytes are in source
 * text), then compare the whole. memchr is vectorized; memmem on short needles is
 * several times slower on text where the literal is rare. */
typedef struct {
    const char *text;
    Py_ssize_t len, rare; /* index of the byte memchr looks for */
} Needle;

static int byte_rank(unsigned char c) {
    static const char common[] = " e_tanoisrlcdhupmfgybw.,()=\n\tvkxqjz:;'\"-/0123456789";
    const char *at = c ? strchr(common, c) : NULL;
    if (at != NULL)
        return 100 - (int)(at - common);
    if (c >= 'A' && c <= 'Z')
        return 40;
    return 0;
}

static Needle needle_of(const char *text, Py_ssize_t len) {
    Needle n = {text, len, 0};
    for (Py_ssize_t i = 1; i < len; i++) {
        if (byte_rank((unsigned char)text[i]) < byte_rank((unsigned char)text[n.rare]))
            n.rare = i;
    }
    return n;
}

/* Offset of the first occurrence at or after ``pos``, or -1. */
static Py_ssize_t needle_find(const Needle *n, const char *buf, Py_ssize_t size, Py_ssize_t pos) {
    if (n->len == 0)
        return pos <= size ? pos : -1;
    const char key = n->text[n->rare];
    Py_ssize_t at = pos + n->rare; /* where the rare byte sits for a match at pos */
    while (at + (n->len - n->rare) <= size) {
        const char *hit = memchr(buf + at, key, (size_t)(size - at - (n->len - n->rare) + 1));
        if (hit == NULL)
            return -1;
        Py_ssize_t start = hit - buf - n->rare;
        if (memcmp(buf + start, n->text, (size_t)n->len) == 0)
            return start;
        at = hit - buf + 1;
    }
    return -1;
}

static int fd_arg(PyObject *obj, int *out) {
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

/* ---- listdir ---- */

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

/* Kind of one entry: 'f' regular file, 'd' directory, 'l' symlink, 'o' other. */
static char entry_kind(int dfd, const struct dirent *entry) {
#ifdef DT_UNKNOWN
    switch (entry->d_type) {
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
#endif
    struct stat st;
    if (fstatat(dfd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 'o';
    if (S_ISREG(st.st_mode))
        return 'f';
    if (S_ISDIR(st.st_mode))
        return 'd';
    return S_ISLNK(st.st_mode) ? 'l' : 'o';
}

/* Read a directory's names into ``names``; 0, or an errno value. */
static int read_names(int fd, Names *names, long *total) {
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
        if (names_add(names, entry_kind(dfd, entry), n) != 0) {
            err = ENOMEM;
            break;
        }
    }
    rewinddir(dir); /* leave the shared offset where os.scandir would */
    closedir(dir);
    return err;
}

static PyObject *native_listdir(PyObject *self, PyObject *arg) {
    int fd, err;
    long total = 0;
    Names names = {NULL, 0, 0};
    if (fd_arg(arg, &fd) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    err = read_names(fd, &names, &total);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        free(names.data);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *files = PyList_New(0), *dirs = PyList_New(0);
    long symlinks = 0;
    for (size_t at = 0; files && dirs && at < names.len;) {
        char kind = names.data[at];
        const char *name = names.data + at + 1;
        at += strlen(name) + 2;
        if (kind == 'l')
            symlinks++;
        if (kind != 'f' && kind != 'd')
            continue;
        PyObject *text = PyUnicode_DecodeFSDefault(name);
        if (text == NULL || PyList_Append(kind == 'f' ? files : dirs, text) != 0) {
            Py_XDECREF(text);
            Py_CLEAR(files);
            break;
        }
        Py_DECREF(text);
    }
    free(names.data);
    if (files == NULL || dirs == NULL) {
        Py_XDECREF(files);
        Py_XDECREF(dirs);
        return NULL;
    }
    return Py_BuildValue("(NNll)", files, dirs, symlinks, total);
}

/* ---- names as C strings (held by bytes objects) ---- */

typedef struct {
    PyObject **owners; /* encoded bytes, one per name */
    const char **names;
    Py_ssize_t n;
} CNames;

static void cnames_free(CNames *c) {
    for (Py_ssize_t i = 0; i < c->n; i++)
        Py_XDECREF(c->owners[i]);
    PyMem_Free(c->owners);
    PyMem_Free(c->names);
}

static int cnames_add(CNames *c, Py_ssize_t cap, PyObject *name) {
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

static int cnames_alloc(CNames *c, Py_ssize_t cap) {
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

/* ---- mtimes ---- */

static PyObject *native_mtimes(PyObject *self, PyObject *args) {
    PyObject *fd_obj, *list;
    int fd;
    if (!PyArg_ParseTuple(args, "OO!", &fd_obj, &PyList_Type, &list) || fd_arg(fd_obj, &fd) != 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    CNames c;
    if (cnames_alloc(&c, n) != 0)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (cnames_add(&c, n, PyList_GET_ITEM(list, i)) != 0) {
            cnames_free(&c);
            return NULL;
        }
    }
    long long *times = PyMem_Calloc(n ? n : 1, sizeof(long long));
    char *ok = PyMem_Calloc(n ? n : 1, 1);
    if (times == NULL || ok == NULL) {
        PyMem_Free(times);
        PyMem_Free(ok);
        cnames_free(&c);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        struct stat st;
        if (fstatat(fd, c.names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
#ifdef __APPLE__
            times[i] = (long long)st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
            times[i] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
            ok[i] = 1;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *item = ok[i] ? PyLong_FromLongLong(times[i]) : Py_NewRef(Py_None);
        if (item == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, item);
    }
    PyMem_Free(times);
    PyMem_Free(ok);
    cnames_free(&c);
    return out;
}

/* ---- read_files ---- */

enum { J_OPEN, J_UNREADABLE, J_SPECIAL, J_SKIPPED, J_UNREACHED, J_BINARY, J_NO_LITERAL, J_KEPT };

typedef struct {
    int dir_fd;
    int fd;
    int state;
    Py_ssize_t group, index; /* where the name sits in the caller's groups */
    Py_ssize_t size;         /* st_size at open */
    PyObject *buffer;        /* bytes of size + 1, filled without the GIL */
    Py_ssize_t got;
    char *extra; /* what a file that grew while read had past size + 1 */
    Py_ssize_t extra_len;
} Job;

typedef struct {
    Job *jobs;
    const char **names;
    Py_ssize_t n;
    Needle literal;
    int has_literal;
    int phase; /* 0: open + fstat, 1: read + check */
    Py_ssize_t next;
    pthread_mutex_t lock;
} Work;

static Py_ssize_t take_index(Work *w) {
    pthread_mutex_lock(&w->lock);
    Py_ssize_t i = w->next++;
    pthread_mutex_unlock(&w->lock);
    return i;
}

static void open_job(Job *job, const char *name) {
    int fd;
    do {
        fd = openat(job->dir_fd, name, READ_FLAGS);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        job->state = J_UNREADABLE;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        job->state = J_UNREADABLE;
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        job->state = J_SPECIAL;
        return;
    }
    job->fd = fd;
    job->size = (Py_ssize_t)st.st_size;
    job->state = J_OPEN;
}

/* Read until EOF: the bytes object holds size + 1; a file that grew spills the
 * rest into ``extra``. Returns 0, or -1 on a read error. */
static int read_job(Job *job) {
    char *buf = PyBytes_AS_STRING(job->buffer);
    Py_ssize_t cap = job->size + 1;
    while (job->got < cap) {
        ssize_t r = read(job->fd, buf + job->got, (size_t)(cap - job->got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        job->got += r;
    }
    size_t extra_cap = 0;
    for (;;) {
        if ((size_t)job->extra_len == extra_cap) {
            extra_cap = extra_cap ? extra_cap * 2 : 65536;
            char *grown = realloc(job->extra, extra_cap);
            if (grown == NULL)
                return -1;
            job->extra = grown;
        }
        ssize_t r = read(job->fd, job->extra + job->extra_len, extra_cap - (size_t)job->extra_len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        job->extra_len += r;
    }
}

static int holds(const Job *job, const Needle *needle) {
    const char *buf = PyBytes_AS_STRING(job->buffer);
    if (needle_find(needle, buf, job->got, 0) >= 0)
        return 1;
    if (job->extra_len == 0)
        return 0;
    /* The rare file that grew while read: search across the seam too. */
    Py_ssize_t len = needle->len, keep = job->got < len ? job->got : len - 1;
    Py_ssize_t joined = keep + job->extra_len;
    char *tmp = malloc(joined ? (size_t)joined : 1);
    if (tmp == NULL)
        return 1; /* keep it: the scan decides */
    memcpy(tmp, buf + job->got - keep, (size_t)keep);
    memcpy(tmp + keep, job->extra, (size_t)job->extra_len);
    int found = needle_find(needle, tmp, joined, 0) >= 0;
    free(tmp);
    return found;
}

static void check_job(Work *w, Job *job) {
    if (read_job(job) != 0) {
        job->state = J_UNREADABLE;
        return;
    }
    const char *buf = PyBytes_AS_STRING(job->buffer);
    Py_ssize_t probe = job->got < BINARY_PROBE ? job->got : BINARY_PROBE;
    if (memchr(buf, 0, (size_t)probe) != NULL) {
        job->state = J_BINARY;
        return;
    }
    if (w->has_literal && !holds(job, &w->literal)) {
        job->state = J_NO_LITERAL;
        return;
    }
    job->state = J_KEPT;
}

static void *work_loop(void *arg) {
    Work *w = arg;
    for (Py_ssize_t i; (i = take_index(w)) < w->n;) {
        Job *job = &w->jobs[i];
        if (w->phase == 0) {
            open_job(job, w->names[i]);
        } else if (job->buffer != NULL) {
            check_job(w, job);
            close(job->fd);
            job->fd = -1;
        }
    }
    return NULL;
}

static int thread_count(Py_ssize_t jobs) {
    static long cpus = 0;
    if (cpus == 0) {
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus < 1)
            cpus = 1;
    }
    if (jobs < MIN_PARALLEL_JOBS)
        return 1;
    return cpus < MAX_THREADS ? (int)cpus : MAX_THREADS;
}

/* Run one phase over every job on up to MAX_THREADS threads (this one included). */
static void run_phase(Work *w, int phase) {
    pthread_t threads[MAX_THREADS];
    int started = 0, wanted = thread_count(w->n);
    w->phase = phase;
    w->next = 0;
    for (int t = 1; t < wanted; t++) {
        if (pthread_create(&threads[started], NULL, work_loop, w) == 0)
            started++;
    }
    work_loop(w);
    for (int t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
}

typedef struct {
    long long file_room, byte_room;
    long long files, bytes;
    long over_budget;
    int stopped;
} Budget;

/* In walk order, as tools.limits.Budget.take_file: the file limit stops the walk,
 * the content limit skips a file that does not fit and goes on. */
static void apply_budget(Work *w, Budget *b) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        Job *job = &w->jobs[i];
        if (job->state != J_OPEN)
            continue;
        if (!b->stopped && b->files >= b->file_room)
            b->stopped = 1;
        if (b->stopped) {
            job->state = J_UNREACHED;
        } else if (b->bytes + job->size > b->byte_room) {
            job->state = J_SKIPPED;
            b->over_budget++;
        } else {
            b->files++;
            b->bytes += job->size;
            continue;
        }
        close(job->fd);
        job->fd = -1;
    }
}

static int allocate_buffers(Work *w) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        Job *job = &w->jobs[i];
        if (job->state != J_OPEN)
            continue;
        job->buffer = PyBytes_FromStringAndSize(NULL, job->size + 1);
        if (job->buffer == NULL)
            return -1;
    }
    return 0;
}

/* The file's bytes as one bytes object (the buffer itself when it did not grow). */
static PyObject *job_bytes(Job *job) {
    PyObject *data = job->buffer;
    job->buffer = NULL;
    if (job->extra_len == 0) {
        if (_PyBytes_Resize(&data, job->got) != 0)
            return NULL;
        return data;
    }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, job->got + job->extra_len);
    if (joined != NULL) {
        memcpy(PyBytes_AS_STRING(joined), PyBytes_AS_STRING(data), (size_t)job->got);
        memcpy(PyBytes_AS_STRING(joined) + job->got, job->extra, (size_t)job->extra_len);
    }
    Py_DECREF(data);
    return joined;
}

static int collect_jobs(PyObject *groups, Work *w, CNames *c) {
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
    w->jobs = PyMem_Calloc(total ? total : 1, sizeof(Job));
    if (w->jobs == NULL || cnames_alloc(c, total) != 0) {
        PyMem_Free(w->jobs);
        w->jobs = NULL;
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *item = PyList_GET_ITEM(groups, g);
        PyObject *names = PyTuple_GET_ITEM(item, 1);
        int dir_fd;
        if (fd_arg(PyTuple_GET_ITEM(item, 0), &dir_fd) != 0)
            return -1;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(names); k++) {
            Job *job = &w->jobs[c->n];
            job->dir_fd = dir_fd;
            job->fd = -1;
            job->group = g;
            job->index = k;
            if (cnames_add(c, total, PyList_GET_ITEM(names, k)) != 0)
                return -1;
        }
    }
    w->names = c->names;
    w->n = c->n;
    return 0;
}

static void release_jobs(Work *w) {
    for (Py_ssize_t i = 0; w->jobs && i < w->n; i++) {
        Job *job = &w->jobs[i];
        if (job->fd >= 0)
            close(job->fd);
        Py_XDECREF(job->buffer);
        free(job->extra);
    }
    PyMem_Free(w->jobs);
}

/* The kept files as [(group, name, data)], then the tallies. */
static PyObject *kept_result(Work *w, PyObject *groups, const Budget *b) {
    long unreadable = 0, binary = 0, searched = 0;
    int unreached = 0;
    PyObject *kept = PyList_New(0);
    for (Py_ssize_t i = 0; kept && i < w->n; i++) {
        Job *job = &w->jobs[i];
        unreadable += job->state == J_UNREADABLE;
        binary += job->state == J_BINARY;
        searched += job->state == J_BINARY || job->state == J_NO_LITERAL || job->state == J_KEPT;
        unreached |= job->state == J_UNREACHED;
        if (job->state != J_KEPT)
            continue;
        PyObject *names = PyTuple_GET_ITEM(PyList_GET_ITEM(groups, job->group), 1);
        PyObject *data = job_bytes(job);
        PyObject *row = data ? Py_BuildValue("(nON)", job->group, PyList_GET_ITEM(names, job->index), data) : NULL;
        if (row == NULL || PyList_Append(kept, row) != 0) {
            Py_XDECREF(row);
            Py_CLEAR(kept);
            break;
        }
        Py_DECREF(row);
    }
    if (kept == NULL)
        return NULL;
    return Py_BuildValue("(NlLLllli)", kept, searched, b->files, b->bytes, unreadable, binary,
                         b->over_budget, b->stopped || unreached);
}

/* read_files(groups, literal, file_room, byte_room) -> (kept, searched, files, bytes,
 *   unreadable, binary, over_budget, stopped): kept is [(group, name, data)] for the
 *   files that hold the literal (all read text files without one), searched the files
 *   read whole, files and bytes what the budget took, over_budget how many files the
 *   content limit skipped, stopped whether the file limit was reached. */
static PyObject *native_read_files(PyObject *self, PyObject *args) {
    PyObject *groups, *literal;
    Budget b = {0};
    if (!PyArg_ParseTuple(args, "O!OLL", &PyList_Type, &groups, &literal, &b.file_room, &b.byte_room))
        return NULL;
    Work w;
    memset(&w, 0, sizeof w);
    if (literal != Py_None) {
        if (!PyBytes_Check(literal)) {
            PyErr_SetString(PyExc_TypeError, "literal must be bytes or None");
            return NULL;
        }
        w.literal = needle_of(PyBytes_AS_STRING(literal), PyBytes_GET_SIZE(literal));
        w.has_literal = 1;
    }
    CNames c = {NULL, NULL, 0};
    PyObject *result = NULL;
    pthread_mutex_init(&w.lock, NULL);
    if (collect_jobs(groups, &w, &c) == 0) {
        Py_BEGIN_ALLOW_THREADS
        run_phase(&w, 0);
        apply_budget(&w, &b);
        Py_END_ALLOW_THREADS
        if (allocate_buffers(&w) == 0) {
            Py_BEGIN_ALLOW_THREADS
            run_phase(&w, 1);
            Py_END_ALLOW_THREADS
            result = kept_result(&w, groups, &b);
        }
    }
    release_jobs(&w);
    if (c.owners != NULL)
        cnames_free(&c);
    pthread_mutex_destroy(&w.lock);
    return result;
}

/* ---- scan ---- */

typedef struct {
    PyObject *find, *confirm, *anchor;
    Needle literal;
    int has_literal, trusted;
    Py_ssize_t long_line;
    PyObject *k_path, *k_line, *k_text;
} Scanner;

typedef struct {
    PyObject *hits;
    long matched_files, long_lines;
    Py_ssize_t out, limit;
} Found;

/* A line that holds the literal: its span, its number, and whether the literal's
 * occurrence alone proves the match (no regex check needed). */
typedef struct {
    Py_ssize_t start, end, number;
    int proven;
} Line;

typedef struct {
    Line *items; /* a line over the long-line bound has number -1 */
    Py_ssize_t n, cap;
    int failed;
} Lines;

static void lines_add(Lines *lines, Line line) {
    if (lines->n == lines->cap) {
        Py_ssize_t cap = lines->cap ? lines->cap * 2 : 16;
        Line *grown = realloc(lines->items, (size_t)cap * sizeof(Line));
        if (grown == NULL) {
            lines->failed = 1;
            return;
        }
        lines->items = grown;
        lines->cap = cap;
    }
    lines->items[lines->n++] = line;
}

/* Every line of one file holding the literal, in order; needs no GIL. */
static void literal_lines(const Scanner *s, const char *buf, Py_ssize_t size, Lines *out) {
    Py_ssize_t pos = 0, counted = 0, number = 1;
    while (!out->failed) {
        Py_ssize_t first = needle_find(&s->literal, buf, size, pos);
        if (first < 0)
            return;
        const char *nl = find_byte_back(buf, buf + first, '\n');
        Py_ssize_t start = nl ? nl - buf + 1 : 0;
        const char *eol = memchr(buf + first, '\n', (size_t)(size - first));
        Py_ssize_t end = eol ? eol - buf : size;
        if (end - start > s->long_line) {
            Line skip = {start, end, -1, 0}; /* counted in order, as the limit allows */
            lines_add(out, skip);
        } else {
            number += count_newlines(buf + counted, start - counted);
            counted = start;
            Line line = {start, end, number, s->trusted && first + s->literal.len <= end};
            lines_add(out, line);
        }
        pos = end + 1;
        if (pos > size)
            return;
    }
}

/* RE2's Match(anchor, data, pos, end)[0] as (first, last); -1 on error. */
static int call_match(PyObject *fn, PyObject *anchor, PyObject *data, Py_ssize_t pos,
                      Py_ssize_t end, Py_ssize_t *first, Py_ssize_t *last) {
    PyObject *p = PyLong_FromSsize_t(pos), *e = PyLong_FromSsize_t(end);
    PyObject *res = NULL;
    if (p != NULL && e != NULL) {
        PyObject *argv[4] = {anchor, data, p, e};
        res = PyObject_Vectorcall(fn, argv, 4, NULL);
    }
    Py_XDECREF(p);
    Py_XDECREF(e);
    if (res == NULL)
        return -1;
    int rc = -1;
    if (PyList_Check(res) && PyList_GET_SIZE(res) > 0) {
        PyObject *span = PyList_GET_ITEM(res, 0);
        if (PyTuple_Check(span) && PyTuple_GET_SIZE(span) == 2) {
            *first = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
            *last = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
            rc = PyErr_Occurred() ? -1 : 0;
        }
    }
    if (rc != 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "Match returned an unexpected value");
    Py_DECREF(res);
    return rc;
}

/* Append one hit dict; 0, or -1 on error. */
static int add_hit(Scanner *s, Found *f, PyObject *path, Py_ssize_t number, const char *start,
                   Py_ssize_t len) {
    while (len > 0 && start[len - 1] == '\r')
        len--;
    PyObject *text = PyUnicode_DecodeUTF8(start, len, "replace");
    PyObject *line = PyLong_FromSsize_t(number);
    PyObject *hit = (text && line) ? PyDict_New() : NULL;
    if (hit && (PyDict_SetItem(hit, s->k_path, path) || PyDict_SetItem(hit, s->k_line, line) ||
                PyDict_SetItem(hit, s->k_text, text)))
        Py_CLEAR(hit);
    int rc = hit ? PyList_Append(f->hits, hit) : -1;
    if (rc == 0)
        f->out += PyUnicode_GET_LENGTH(path) + 12 + PyUnicode_GET_LENGTH(text);
    Py_XDECREF(text);
    Py_XDECREF(line);
    Py_XDECREF(hit);
    return rc;
}

/* The lines found by the literal that match, checked with RE2 unless proven. */
static int confirm_lines(Scanner *s, PyObject *path, PyObject *data, const Lines *lines, Found *f) {
    const char *buf = PyBytes_AS_STRING(data);
    int fresh = 1;
    for (Py_ssize_t i = 0; i < lines->n && PyList_GET_SIZE(f->hits) < f->limit; i++) {
        const Line *line = &lines->items[i];
        if (line->number < 0) {
            f->long_lines++;
            continue;
        }
        int ok = line->proven;
        if (!ok && s->confirm != Py_None) {
            Py_ssize_t a, b;
            if (call_match(s->confirm, s->anchor, data, line->start, line->end, &a, &b) != 0)
                return -1;
            ok = a >= 0;
        }
        if (!ok)
            continue;
        f->matched_files += fresh;
        fresh = 0;
        if (add_hit(s, f, path, line->number, buf + line->start, line->end - line->start) != 0)
            return -1;
    }
    return 0;
}

/* Without a literal: RE2 finds each match (scanning without the GIL), in order. */
static int regex_lines(Scanner *s, PyObject *path, PyObject *data, Found *f) {
    const char *buf = PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data), pos = 0, counted = 0, number = 1;
    int fresh = 1;
    while (PyList_GET_SIZE(f->hits) < f->limit) {
        Py_ssize_t first, last;
        if (call_match(s->find, s->anchor, data, pos, size, &first, &last) != 0)
            return -1;
        if (first < 0 || (first == size && (size == 0 || buf[size - 1] == '\n')))
            return 0; /* past the final newline there is no line */
        const char *nl = find_byte_back(buf, buf + first, '\n');
        Py_ssize_t start = nl ? nl - buf + 1 : 0;
        const char *eol = memchr(buf + first, '\n', (size_t)(size - first));
        Py_ssize_t end = eol ? eol - buf : size;
        if (end - start > s->long_line) {
            f->long_lines++;
        } else {
            int ok = last <= end;
            if (!ok && s->confirm != Py_None) {
                Py_ssize_t a, b;
                if (call_match(s->confirm, s->anchor, data, start, end, &a, &b) != 0)
                    return -1;
                ok = a >= 0;
            }
            if (ok) {
                number += count_newlines(buf + counted, start - counted);
                counted = start;
                f->matched_files += fresh;
                fresh = 0;
                if (add_hit(s, f, path, number, buf + start, end - start) != 0)
                    return -1;
            }
        }
        pos = end + 1;
        if (pos > size)
            return 0;
    }
    return 0;
}

/* With a literal: every file's candidate lines first, without the GIL, then the
 * regex checks and the hit objects. */
static int scan_literal(Scanner *s, PyObject *paths, PyObject *chunks, Found *f) {
    Py_ssize_t n = PyList_GET_SIZE(chunks);
    Lines *all = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Lines));
    const char **bufs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(char *));
    Py_ssize_t *sizes = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_ssize_t));
    int rc = (all && bufs && sizes) ? 0 : -1;
    if (rc != 0)
        PyErr_NoMemory();
    for (Py_ssize_t k = 0; rc == 0 && k < n; k++) {
        bufs[k] = PyBytes_AS_STRING(PyList_GET_ITEM(chunks, k));
        sizes[k] = PyBytes_GET_SIZE(PyList_GET_ITEM(chunks, k));
    }
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < n; k++)
            literal_lines(s, bufs[k], sizes[k], &all[k]);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t k = 0; rc == 0 && k < n && PyList_GET_SIZE(f->hits) < f->limit; k++) {
        if (all[k].failed) {
            PyErr_NoMemory();
            rc = -1;
            break;
        }
        rc = confirm_lines(s, PyList_GET_ITEM(paths, k), PyList_GET_ITEM(chunks, k), &all[k], f);
    }
    for (Py_ssize_t k = 0; all && k < n; k++)
        free(all[k].items);
    PyMem_Free(all);
    PyMem_Free(bufs);
    PyMem_Free(sizes);
    return rc;
}

static int parse_scan_args(PyObject *args, Scanner *s, Found *f, PyObject **paths,
                           PyObject **chunks) {
    PyObject *literal;
    if (!PyArg_ParseTuple(args, "O!O!OOOOpnn", &PyList_Type, paths, &PyList_Type, chunks, &literal,
                          &s->find, &s->confirm, &s->anchor, &s->trusted, &f->limit, &s->long_line))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(*chunks);
    if (PyList_GET_SIZE(*paths) != n) {
        PyErr_SetString(PyExc_ValueError, "paths and chunks differ in length");
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!PyBytes_Check(PyList_GET_ITEM(*chunks, k)) ||
            !PyUnicode_Check(PyList_GET_ITEM(*paths, k))) {
            PyErr_SetString(PyExc_TypeError, "paths are str and chunks bytes");
            return -1;
        }
    }
    if (literal != Py_None) {
        if (!PyBytes_Check(literal) || PyBytes_GET_SIZE(literal) == 0) {
            PyErr_SetString(PyExc_TypeError, "literal must be non-empty bytes or None");
            return -1;
        }
        s->literal = needle_of(PyBytes_AS_STRING(literal), PyBytes_GET_SIZE(literal));
        s->has_literal = 1;
    } else if (s->find == Py_None) {
        PyErr_SetString(PyExc_TypeError, "scan needs a literal or a find function");
        return -1;
    }
    return 0;
}

/* scan(paths, chunks, literal, find, confirm, anchor, trusted, limit, long_line)
 *   -> (hits, matched_files, long_lines, output_size)
 * The literal's bytes must stay alive for the call: the caller's reference does. */
static PyObject *native_scan(PyObject *self, PyObject *args) {
    PyObject *paths, *chunks;
    Scanner s;
    memset(&s, 0, sizeof s);
    Found f = {NULL, 0, 0, 0, 0};
    if (parse_scan_args(args, &s, &f, &paths, &chunks) != 0)
        return NULL;
    s.k_path = PyUnicode_InternFromString("path");
    s.k_line = PyUnicode_InternFromString("line");
    s.k_text = PyUnicode_InternFromString("text");
    f.hits = PyList_New(0);
    int rc = (s.k_path && s.k_line && s.k_text && f.hits) ? 0 : -1;
    if (rc == 0 && s.has_literal) {
        rc = scan_literal(&s, paths, chunks, &f);
    } else {
        for (Py_ssize_t k = 0; rc == 0 && k < PyList_GET_SIZE(chunks); k++) {
            if (PyList_GET_SIZE(f.hits) >= f.limit)
                break;
            rc = regex_lines(&s, PyList_GET_ITEM(paths, k), PyList_GET_ITEM(chunks, k), &f);
        }
    }
    Py_XDECREF(s.k_path);
    Py_XDECREF(s.k_line);
    Py_XDECREF(s.k_text);
    if (rc != 0) {
        Py_XDECREF(f.hits);
        return NULL;
    }
    return Py_BuildValue("(Nlln)", f.hits, f.matched_files, f.long_lines, f.out);
}

static PyMethodDef methods[] = {
    {"listdir", native_listdir, METH_O, "(files, dirs, symlinks, entries) of a directory fd."},
    {"mtimes", native_mtimes, METH_VARARGS, "st_mtime_ns of each name (None if gone)."},
    {"read_files", native_read_files, METH_VARARGS, "Open, check and read files on threads."},
    {"scan", native_scan, METH_VARARGS, "Matching lines of files as hit dicts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tools._native",
                                    "GIL-free hot loops of glob and search_files.", -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
