/* Reader: a group of files opened, checked and read on a few threads in the
 * background, while the caller goes on walking and scanning the previous group.
 *
 *   budget = Budget(file_room, byte_room)      # one per search, shared by its Readers
 *   r = Reader(groups, literal, regex, budget, lines, trusted, long_line)
 *   r.wait()   -> (searched, files, bytes, unreadable, binary, over_budget, stopped)
 *   r.kept()   -> [(group, name)] of the files kept (text, holding the literal)
 *   r.scan(prefixes, find, confirm, anchor, limit) -> (hits, matched, long_lines, out)
 *   r.chunks() -> [bytes] of the kept files (for the Python scan, with context;
 *                 a Reader that found the lines keeps only those: it refuses)
 *
 * ``groups`` is [(dir_fd, [names])]: the caller keeps those descriptors open
 * until wait() has returned. The threads never touch a Python object: names are
 * encoded up front and file contents live in the Reader's own buffers: each
 * file is read into its thread's scratch buffer, and only what the scan needs of
 * a kept file is copied out (its matching lines, when the threads found and
 * proved them; else the whole file), so most bytes read land in memory that
 * is already mapped and warm, as ripgrep reads into one buffer.
 *
 * The budget is applied between the two phases in walk order, as
 * tools.limits.Budget.take_file does: the file limit stops the walk, the content
 * limit skips a file that does not fit and goes on. Several Readers of one search
 * may run at once; each takes its turn at the shared Budget in the order the
 * Readers were made, so the result is the one a single reader would give. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
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
/* What is read of a file past the size fstat gave, at most: the same bound as
 * GROWTH_READ in tools/search.py. */
#define GROWTH_READ (1 << 20)

enum { J_OPEN, J_UNREADABLE, J_SPECIAL, J_SKIPPED, J_UNREACHED, J_BINARY, J_NO_LITERAL, J_KEPT };

typedef struct {
    int dir_fd, fd, state;
    Py_ssize_t group; /* which of the caller's groups the name came from */
    Py_ssize_t size;         /* st_size at open */
    char *data;     /* what the scan needs of a kept file (malloc'd): ``got`` bytes */
    Py_ssize_t got; /* bytes read, then the size of ``data`` */
    Lines lines;    /* candidate lines, when asked for */
} Job;

typedef struct {
    PyObject_HEAD
    Job *jobs;
    Py_ssize_t n;
    Groups groups;             /* the names, in job order */
    PyObject *literal, *regex; /* the pattern */
    LineSpec spec;
    int lines_found; /* the threads find (and with a native regex, check) the lines */
    PyObject *budget;         /* the search's Budget */
    long long turn;           /* when this Reader may take from it */
    long long files, bytes;   /* what this Reader took */
    long over_budget;
    int stopped;
    int phase;
    Py_ssize_t next;
    pthread_mutex_t lock;
    Background driver;
} Reader;

/* Scratch buffers are kept for the next Reader's threads: a search reads group
 * after group, and a fresh buffer would be faulted in page by page each time
 * (45k page faults on the bench tree's 250 MB, a third of the search's system
 * time). One slot for each thread that may be reading at once (two Readers under
 * way, each with up to MAX_THREADS); a thread takes the largest kept, and it
 * grows (realloc moves a mapped buffer's pages rather than faulting them in
 * again) to the largest file it reads. They are kept only while a search runs:
 * when the last Budget (one per search, outliving its Readers) goes, so do
 * they, and a long-running TUI holds none between searches. */
#define ARENA_SLOTS (2 * MAX_THREADS)
#define ARENA_KEEP_MAX ((size_t)64 << 20)
static struct {
    char *ptr;
    size_t cap;
} arenas[ARENA_SLOTS];
static pthread_mutex_t arenas_lock = PTHREAD_MUTEX_INITIALIZER;

static char *arena_take(size_t need, size_t *cap) {
    char *found = NULL;
    size_t found_cap = 0;
    int slot = -1;
    pthread_mutex_lock(&arenas_lock);
    for (int i = 0; i < ARENA_SLOTS; i++) {
        if (arenas[i].ptr != NULL && arenas[i].cap > found_cap) {
            found_cap = arenas[i].cap;
            slot = i;
        }
    }
    if (slot >= 0) {
        found = arenas[slot].ptr;
        arenas[slot].ptr = NULL;
    }
    pthread_mutex_unlock(&arenas_lock);
    if (found != NULL && found_cap >= need) {
        *cap = found_cap;
        return found;
    }
    size_t want = need < 65536 ? 65536 : need + need / 4;
    char *grown = realloc(found, want); /* a fresh one when nothing was kept */
    if (grown == NULL) {
        free(found);
        return NULL;
    }
    *cap = want;
    return grown;
}

static void arena_give(char *ptr, size_t cap) {
    if (ptr == NULL)
        return;
    pthread_mutex_lock(&arenas_lock);
    for (int i = 0; i < ARENA_SLOTS && ptr != NULL && cap <= ARENA_KEEP_MAX; i++) {
        if (arenas[i].ptr == NULL || arenas[i].cap < cap) {
            char *old = arenas[i].ptr;
            size_t old_cap = arenas[i].cap;
            arenas[i].ptr = ptr;
            arenas[i].cap = cap;
            ptr = old; /* the smaller one goes on to the next slot, or is freed */
            cap = old_cap;
        }
    }
    pthread_mutex_unlock(&arenas_lock);
    free(ptr);
}

static long live_budgets; /* changed with the GIL held */

static void arenas_drop(void) {
    pthread_mutex_lock(&arenas_lock);
    for (int i = 0; i < ARENA_SLOTS; i++) {
        free(arenas[i].ptr);
        arenas[i].ptr = NULL;
        arenas[i].cap = 0;
    }
    pthread_mutex_unlock(&arenas_lock);
}

#ifdef BASTION_FAULTS
PyObject *native_cached_arenas(PyObject *self, PyObject *unused) {
    long n = 0;
    pthread_mutex_lock(&arenas_lock);
    for (int i = 0; i < ARENA_SLOTS; i++)
        n += arenas[i].ptr != NULL;
    pthread_mutex_unlock(&arenas_lock);
    return PyLong_FromLong(n);
}
#endif

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
        job->state = J_UNREADABLE;
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO, device or socket swapped in: refused */
        job->state = J_SPECIAL;
        close(fd);
        return;
    }
    job->fd = fd;
    job->size = (Py_ssize_t)st.st_size;
    job->state = J_OPEN;
}

static ssize_t read_retrying(int fd, char *buf, size_t want) {
    ssize_t r;
    do {
        r = read(fd, buf, want);
    } while (r < 0 && errno == EINTR);
    return r;
}

/* A thread's buffer for the file it reads. */
typedef struct {
    char *buf;
    size_t cap;
} Scratch;

/* Room for ``need`` bytes; 0, or -1 when it cannot grow. */
static int scratch_fit(Scratch *s, size_t need) {
    if (s->cap >= need)
        return 0;
    size_t cap = s->cap ? s->cap : 65536;
    while (cap < need)
        cap *= 2;
    char *grown = realloc(s->buf, cap);
    if (grown == NULL)
        return -1;
    s->buf = grown;
    s->cap = cap;
    return 0;
}

/* Read the whole file into the scratch buffer: its first BINARY_PROBE bytes
 * first, where a NUL makes it binary and the rest is never read (1, as ripgrep
 * stops at it); then up to size + 1 bytes, so one read that returns less than
 * asked is the whole file (a short read of a regular file is its end, as the
 * Python path also takes it); a file that grew meanwhile is read on to its end,
 * at most GROWTH_READ bytes further. 0 when read, 1 for binary, or -1 on an error. */
static int read_job(Job *job, Scratch *s) {
    size_t whole = (size_t)job->size + 1, limit = whole + GROWTH_READ;
    size_t want = whole < BINARY_PROBE ? whole : BINARY_PROBE;
    if (scratch_fit(s, want) != 0)
        return -1;
    ssize_t got = read_retrying(job->fd, s->buf, want);
    if (got < 0)
        return -1;
    job->got = got;
    if (memchr(s->buf, 0, (size_t)got) != NULL)
        return 1;
    size_t cap = whole;
    for (;;) {
        if ((size_t)got < want)
            return 0; /* a short read is the end */
        if ((size_t)job->got >= limit)
            return 0; /* still growing: search what was there (a read must end) */
        if ((size_t)job->got == cap) /* grew: read on */
            cap = cap * 2 < limit ? cap * 2 : limit;
        if (scratch_fit(s, cap) != 0)
            return -1;
        want = cap - (size_t)job->got;
        got = read_retrying(job->fd, s->buf + job->got, want);
        if (got < 0)
            return -1;
        job->got += got;
    }
}

/* Whether the scan will need nothing of the file but its lines: each one found
 * is proved (by the literal or the native regex) or over the long-line bound. */
static int lines_suffice(const Lines *lines) {
    if (lines->failed)
        return 0;
    for (Py_ssize_t i = 0; i < lines->n; i++) {
        if (lines->items[i].number >= 0 && !lines->items[i].proven)
            return 0;
    }
    return 1;
}

/* Copy out of ``text`` what the scan needs of a kept file; 0, or -1 (no memory). */
static int keep_job(Reader *r, Job *job, const char *text) {
    if (r->lines_found) {
        find_lines(&r->spec, text, job->got, &job->lines);
        if (lines_suffice(&job->lines)) {
            Py_ssize_t total = 0;
            for (Py_ssize_t i = 0; i < job->lines.n; i++) {
                Line *line = &job->lines.items[i];
                if (line->number >= 0)
                    total += line->end - line->start;
            }
            job->data = malloc(total ? (size_t)total : 1);
            if (job->data == NULL)
                return -1;
            Py_ssize_t at = 0;
            for (Py_ssize_t i = 0; i < job->lines.n; i++) {
                Line *line = &job->lines.items[i];
                Py_ssize_t len = line->number >= 0 ? line->end - line->start : 0;
                memcpy(job->data + at, text + line->start, (size_t)len);
                line->start = at;
                line->end = at += len;
            }
            job->got = total;
            return 0;
        }
    }
    job->data = malloc(job->got ? (size_t)job->got : 1);
    if (job->data == NULL)
        return -1;
    memcpy(job->data, text, (size_t)job->got);
    return 0;
}

static void check_job(Reader *r, Job *job, Scratch *s) {
    int read = read_job(job, s);
    close(job->fd);
    job->fd = -1;
    if (read < 0)
        job->state = J_UNREADABLE;
    else if (read == 1)
        job->state = J_BINARY;
    else if (r->spec.has_literal && needle_find(&r->spec.literal, s->buf, job->got, 0) < 0)
        job->state = J_NO_LITERAL;
    else
        job->state = keep_job(r, job, s->buf) == 0 ? J_KEPT : J_UNREADABLE;
}

static void *work_loop(void *arg) {
    Reader *r = arg;
    Scratch scratch = {NULL, 0};
    if (r->phase == 1)
        scratch.buf = arena_take(0, &scratch.cap);
    for (;;) {
        pthread_mutex_lock(&r->lock);
        Py_ssize_t i = r->next++;
        pthread_mutex_unlock(&r->lock);
        if (i >= r->n)
            break;
        Job *job = &r->jobs[i];
        if (r->phase == 0)
            open_job(job, r->groups.names.names[i]);
        else if (job->state == J_OPEN)
            check_job(r, job, &scratch);
    }
    arena_give(scratch.buf, scratch.cap);
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

/* One phase over every job on up to MAX_THREADS threads (this one included). */
static void run_phase(Reader *r, int phase) {
    pthread_t threads[MAX_THREADS];
    int started = 0, wanted = thread_count(r->n);
    r->phase = phase;
    r->next = 0;
    for (int t = 1; t < wanted; t++) {
        if (pthread_create(&threads[started], NULL, work_loop, r) == 0)
            started++;
    }
    work_loop(r);
    for (int t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
}

typedef struct {
    PyObject_HEAD
    pthread_mutex_t lock;
    pthread_cond_t turned;
    long long file_room, byte_room, files, bytes;
    long long turn, issued; /* the Reader now taking its turn; turns handed out */
    int stopped;
} Budget;

static void take_turn(Budget *b, Reader *r) {
    for (Py_ssize_t i = 0; i < r->n; i++) {
        Job *job = &r->jobs[i];
        if (job->state != J_OPEN)
            continue;
        if (!b->stopped && b->files >= b->file_room)
            b->stopped = 1;
        if (b->stopped) {
            job->state = J_UNREACHED;
        } else if (b->bytes + job->size > b->byte_room) {
            job->state = J_SKIPPED;
            r->over_budget++;
        } else {
            b->files++;
            b->bytes += job->size;
            r->files++;
            r->bytes += job->size;
            continue;
        }
        close(job->fd);
        job->fd = -1;
    }
    r->stopped = b->stopped;
}

static void apply_budget(Reader *r) {
    Budget *b = (Budget *)r->budget;
    pthread_mutex_lock(&b->lock);
    while (b->turn != r->turn)
        pthread_cond_wait(&b->turned, &b->lock);
    take_turn(b, r);
    b->turn++;
    pthread_cond_broadcast(&b->turned);
    pthread_mutex_unlock(&b->lock);
}

static PyObject *budget_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    long long file_room, byte_room;
    if (!PyArg_ParseTuple(args, "LL", &file_room, &byte_room))
        return NULL;
    Budget *b = (Budget *)type->tp_alloc(type, 0);
    if (b == NULL)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->turned, NULL);
    b->file_room = file_room;
    b->byte_room = byte_room;
    live_budgets++;
    return (PyObject *)b;
}

static void budget_dealloc(Budget *b) {
    if (--live_budgets == 0)
        arenas_drop();
    pthread_cond_destroy(&b->turned);
    pthread_mutex_destroy(&b->lock);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

PyTypeObject BudgetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tools._native.Budget",
    .tp_basicsize = sizeof(Budget),
    .tp_dealloc = (destructor)budget_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A search's file and content rooms, taken by its Readers in turn.",
    .tp_new = budget_new,
};

static void *drive(void *arg) {
    Reader *r = arg;
    run_phase(r, 0);
    apply_budget(r);
    run_phase(r, 1);
    return NULL;
}

static int collect_jobs(Reader *r, PyObject *groups) {
    if (groups_collect(groups, &r->groups) != 0)
        return -1;
    r->jobs = PyMem_Calloc(r->groups.n ? (size_t)r->groups.n : 1, sizeof(Job));
    if (r->jobs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < r->groups.n; i++) {
        r->jobs[i].dir_fd = r->groups.dir_fds[i];
        r->jobs[i].fd = -1;
        r->jobs[i].group = r->groups.group_of[i];
    }
    r->n = r->groups.n;
    return 0;
}

static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *groups, *literal, *regex, *budget;
    int want_lines, trusted;
    Py_ssize_t long_line;
    if (!PyArg_ParseTuple(args, "O!OOO!ppn", &PyList_Type, &groups, &literal, &regex, &BudgetType,
                          &budget, &want_lines, &trusted, &long_line))
        return NULL;
    if (literal != Py_None && (!PyBytes_Check(literal) || PyBytes_GET_SIZE(literal) == 0)) {
        PyErr_SetString(PyExc_TypeError, "literal must be non-empty bytes or None");
        return NULL;
    }
    Reader *r = (Reader *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->literal = Py_NewRef(literal);
    r->regex = Py_NewRef(regex);
    r->budget = Py_NewRef(budget);
    /* Py_True stands for the find function scan() is given later. */
    if (parse_spec(literal, Py_True, regex, trusted, long_line, &r->spec) != 0 ||
        collect_jobs(r, groups) != 0) {
        Py_DECREF(r);
        return NULL;
    }
    r->lines_found = want_lines && spec_finds_lines(&r->spec);
    r->turn = ((Budget *)budget)->issued++; /* with the GIL: in the order Readers are made */
    background_start(&r->driver, drive, r);
    return (PyObject *)r;
}

static void reader_join(Reader *r) { background_join(&r->driver); }

static void reader_dealloc(Reader *r) {
    reader_join(r);
    for (Py_ssize_t i = 0; r->jobs && i < r->n; i++) {
        if (r->jobs[i].fd >= 0)
            close(r->jobs[i].fd);
        free(r->jobs[i].data);
        free(r->jobs[i].lines.items);
    }
    PyMem_Free(r->jobs);
    groups_free(&r->groups);
    Py_XDECREF(r->literal);
    Py_XDECREF(r->regex);
    Py_XDECREF(r->budget);
    pthread_mutex_destroy(&r->lock);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *reader_wait(Reader *r, PyObject *unused) {
    reader_join(r);
    long searched = 0, unreadable = 0, binary = 0;
    int unreached = 0;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        int state = r->jobs[i].state;
        unreadable += state == J_UNREADABLE;
        binary += state == J_BINARY;
        unreached |= state == J_UNREACHED;
        searched += state == J_BINARY || state == J_NO_LITERAL || state == J_KEPT;
    }
    return Py_BuildValue("(lLLllli)", searched, r->files, r->bytes, unreadable, binary,
                         r->over_budget, r->stopped || unreached);
}

/* Calls fn(r, job, context) for each kept job in order; builds a list of results. */
static PyObject *each_kept(Reader *r, PyObject *(*fn)(Reader *, Job *)) {
    reader_join(r);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < r->n; i++) {
        if (r->jobs[i].state != J_KEPT)
            continue;
        PyObject *item = fn(r, &r->jobs[i]);
        if (item == NULL || PyList_Append(out, item) != 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

static PyObject *kept_name(Reader *r, Job *job) {
    return Py_BuildValue("(nO)", job->group, PyList_GET_ITEM(r->groups.strs, job - r->jobs));
}

static PyObject *kept_bytes(Reader *r, Job *job) {
    return PyBytes_FromStringAndSize(job->data, job->got);
}

static PyObject *reader_kept(Reader *r, PyObject *unused) { return each_kept(r, kept_name); }

static PyObject *reader_chunks(Reader *r, PyObject *unused) {
    if (r->lines_found) {
        PyErr_SetString(PyExc_ValueError, "this Reader kept only the matching lines (no chunks)");
        return NULL;
    }
    return each_kept(r, kept_bytes);
}

/* A view RE2 was given must not outlive the buffer: release it after each file.
 * ``rc`` is the scan's: an exception it left pending is set aside for the call
 * (nothing may be called with one pending) and stays the one raised; a failed
 * release (a buffer still exported) is an error of its own. */
static int drop_view(FileView *view, int rc) {
    if (view->obj == NULL)
        return rc;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *done = PyObject_CallMethod(view->obj, "release", NULL);
    Py_CLEAR(view->obj);
    if (done == NULL && type != NULL)
        PyErr_WriteUnraisable(NULL); /* reported; the scan's own error goes on */
    Py_XDECREF(done);
    if (type != NULL)
        PyErr_Restore(type, value, tb);
    return done == NULL ? -1 : rc;
}

/* Whether a file's scan can add nothing: its candidate lines are known, and none. */
static int nothing_to_scan(const Reader *r, const Job *job) {
    return r->lines_found && job->lines.n == 0 && !job->lines.failed;
}

/* scan(prefixes, find, confirm, anchor, limit): the kept files' matching lines; a
 * file's path is its group's prefix + its name, built only for files with lines. */
static PyObject *reader_scan(Reader *r, PyObject *args) {
    PyObject *prefixes, *find, *confirm, *anchor;
    Py_ssize_t limit;
    Found f;
    if (!PyArg_ParseTuple(args, "O!OOOn", &PyList_Type, &prefixes, &find, &confirm, &anchor,
                          &limit))
        return NULL;
    reader_join(r);
    if (!r->lines_found && find == Py_None) {
        PyErr_SetString(PyExc_ValueError, "this Reader cannot scan: no lines, no find function");
        return NULL;
    }
    if (found_init(&f, find, confirm, anchor, limit) != 0)
        return NULL;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        Job *job = &r->jobs[i];
        if (job->state != J_KEPT || nothing_to_scan(r, job))
            continue;
        PyObject *prefix = job->group < PyList_GET_SIZE(prefixes)
                               ? PyList_GET_ITEM(prefixes, job->group)
                               : NULL;
        PyObject *path = prefix && PyUnicode_Check(prefix)
                             ? PyUnicode_Concat(prefix, PyList_GET_ITEM(r->groups.strs, i))
                             : NULL;
        if (path == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "one str prefix per group");
            found_clear(&f);
            return NULL;
        }
        FileView view = {job->data, job->got, NULL, r->lines_found ? &job->lines : NULL};
        int rc = drop_view(&view, scan_view(&r->spec, &f, path, &view));
        Py_DECREF(path);
        if (rc != 0) {
            found_clear(&f);
            return NULL;
        }
    }
    return found_result(&f);
}

static PyMethodDef reader_methods[] = {
    {"wait", (PyCFunction)reader_wait, METH_NOARGS, "Wait for the reads; their tallies."},
    {"kept", (PyCFunction)reader_kept, METH_NOARGS, "[(group, name)] of the kept files."},
    {"chunks", (PyCFunction)reader_chunks, METH_NOARGS, "The kept files' bytes."},
    {"scan", (PyCFunction)reader_scan, METH_VARARGS, "The kept files' matching lines."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tools._native.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Files of a few directories read on threads in the background.",
    .tp_methods = reader_methods,
    .tp_new = reader_new,
};
