/* Matching lines: candidates found by the literal (without the GIL), checked with
 * RE2 where the literal alone does not prove the match, and built into the
 * result's own hit dicts; without a literal, RE2 finds each match. The rules are
 * those of ContentMatcher.search_python in tools/scan.py. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

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

/* Whether the native regex matches inside [start, end) of buf. */
static int native_holds(const LineSpec *spec, const char *buf, Py_ssize_t size, Py_ssize_t start,
                        Py_ssize_t end) {
    size_t a, b;
    return bastion_regex_find(spec->re, buf, (size_t)size, (size_t)start, (size_t)end, &a, &b);
}

/* Every line of one file holding the literal, in order; needs no GIL. With a
 * native regex the lines are checked here too, so only matching lines remain. */
static void literal_lines(const LineSpec *spec, const char *buf, Py_ssize_t size, Lines *out) {
    Py_ssize_t pos = 0, counted = 0, number = 1;
    while (!out->failed) {
        Py_ssize_t first = needle_find(&spec->literal, buf, size, pos);
        if (first < 0)
            return;
        const char *nl = find_byte_back(buf, buf + first, '\n');
        Py_ssize_t start = nl ? nl - buf + 1 : 0;
        const char *eol = memchr(buf + first, '\n', (size_t)(size - first));
        Py_ssize_t end = eol ? eol - buf : size;
        if (end - start > spec->long_line) {
            Line skip = {start, end, -1, 0}; /* counted in order, as the limit allows */
            lines_add(out, skip);
        } else {
            int proven = spec->trusted && first + spec->literal.len <= end;
            if (!proven && spec->re != NULL)
                proven = native_holds(spec, buf, size, start, end) ? 1 : -1;
            if (proven >= 0) {
                number += count_newlines(buf + counted, start - counted);
                counted = start;
                Line line = {start, end, number, proven};
                lines_add(out, line);
            }
        }
        pos = end + 1;
        if (pos > size)
            return;
    }
}

/* Without a literal, with a native regex: every matching line, as regex_lines
 * below finds them through Python; needs no GIL. */
static void regex_all_lines(const LineSpec *spec, const char *buf, Py_ssize_t size, Lines *out) {
    Py_ssize_t pos = 0, counted = 0, number = 1;
    while (!out->failed) {
        size_t first, last;
        if (!bastion_regex_find(spec->re, buf, (size_t)size, (size_t)pos, (size_t)size, &first,
                                &last))
            return;
        if ((Py_ssize_t)first == size && (size == 0 || buf[size - 1] == '\n'))
            return; /* past the final newline there is no line */
        const char *nl = find_byte_back(buf, buf + first, '\n');
        Py_ssize_t start = nl ? nl - buf + 1 : 0;
        const char *eol = memchr(buf + first, '\n', (size_t)(size - (Py_ssize_t)first));
        Py_ssize_t end = eol ? eol - buf : size;
        if (end - start > spec->long_line) {
            Line skip = {start, end, -1, 0};
            lines_add(out, skip);
        } else if ((Py_ssize_t)last <= end || native_holds(spec, buf, size, start, end)) {
            number += count_newlines(buf + counted, start - counted);
            counted = start;
            Line line = {start, end, number, 1};
            lines_add(out, line);
        }
        pos = end + 1;
        if (pos > size)
            return;
    }
}

/* Whether find_lines can do this spec's work (else scan_view asks RE2 through Python). */
int spec_finds_lines(const LineSpec *spec) { return spec->has_literal || spec->re != NULL; }

/* The candidate lines of one file (all checked, with a native regex); no GIL. */
void find_lines(const LineSpec *spec, const char *buf, Py_ssize_t size, Lines *out) {
    if (spec->has_literal)
        literal_lines(spec, buf, size, out);
    else if (spec->re != NULL)
        regex_all_lines(spec, buf, size, out);
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

/* What RE2 reads for this file: its bytes, or a read-only view of our buffer. */
static PyObject *view_object(FileView *view) {
    if (view->obj == NULL)
        view->obj = PyMemoryView_FromMemory((char *)view->buf, view->size, PyBUF_READ);
    return view->obj;
}

/* Whether RE2 ``fn`` matches inside [start, end): 1, 0, or -1 on error. */
static int regex_holds(Found *f, FileView *view, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t a, b;
    PyObject *obj = view_object(view);
    if (obj == NULL || call_match(f->confirm, f->anchor, obj, start, end, &a, &b) != 0)
        return -1;
    return a >= 0;
}

static PyObject *hit_keys[3]; /* "path", "line", "text", interned once */

/* Append one hit dict; 0, or -1 on error. */
static int add_hit(Found *f, PyObject *path, Py_ssize_t number, const char *start, Py_ssize_t len) {
    while (len > 0 && start[len - 1] == '\r')
        len--;
    PyObject *text = PyUnicode_DecodeUTF8(start, len, "replace");
    PyObject *line = PyLong_FromSsize_t(number);
    PyObject *hit = (text && line) ? PyDict_New() : NULL;
    if (hit && (PyDict_SetItem(hit, hit_keys[0], path) || PyDict_SetItem(hit, hit_keys[1], line) ||
                PyDict_SetItem(hit, hit_keys[2], text)))
        Py_CLEAR(hit);
    int rc = hit ? PyList_Append(f->hits, hit) : -1;
    if (rc == 0)
        f->out += PyUnicode_GET_LENGTH(path) + 12 + PyUnicode_GET_LENGTH(text);
    Py_XDECREF(text);
    Py_XDECREF(line);
    Py_XDECREF(hit);
    return rc;
}

/* The candidate lines that match, checked with RE2 unless proven. */
static int confirm_lines(Found *f, PyObject *path, FileView *view) {
    const Lines *lines = view->lines;
    int fresh = 1;
    if (lines->failed) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < lines->n && PyList_GET_SIZE(f->hits) < f->limit; i++) {
        const Line *line = &lines->items[i];
        if (line->number < 0) {
            f->long_lines++;
            continue;
        }
        int ok = line->proven;
        if (!ok && f->confirm != Py_None && (ok = regex_holds(f, view, line->start, line->end)) < 0)
            return -1;
        if (!ok)
            continue;
        f->matched_files += fresh;
        fresh = 0;
        if (add_hit(f, path, line->number, view->buf + line->start, line->end - line->start) != 0)
            return -1;
    }
    return 0;
}

/* Without a literal: RE2 finds each match (scanning without the GIL), in order. */
static int regex_lines(const LineSpec *spec, Found *f, PyObject *path, FileView *view) {
    const char *buf = view->buf;
    Py_ssize_t size = view->size, pos = 0, counted = 0, number = 1;
    int fresh = 1;
    PyObject *obj = view_object(view);
    if (obj == NULL)
        return -1;
    while (PyList_GET_SIZE(f->hits) < f->limit) {
        Py_ssize_t first, last;
        if (call_match(f->find, f->anchor, obj, pos, size, &first, &last) != 0)
            return -1;
        if (first < 0 || (first == size && (size == 0 || buf[size - 1] == '\n')))
            return 0; /* past the final newline there is no line */
        const char *nl = find_byte_back(buf, buf + first, '\n');
        Py_ssize_t start = nl ? nl - buf + 1 : 0;
        const char *eol = memchr(buf + first, '\n', (size_t)(size - first));
        Py_ssize_t end = eol ? eol - buf : size;
        if (end - start > spec->long_line) {
            f->long_lines++;
        } else {
            int ok = last <= end;
            if (!ok && f->confirm != Py_None && (ok = regex_holds(f, view, start, end)) < 0)
                return -1;
            if (ok) {
                number += count_newlines(buf + counted, start - counted);
                counted = start;
                f->matched_files += fresh;
                fresh = 0;
                if (add_hit(f, path, number, buf + start, end - start) != 0)
                    return -1;
            }
        }
        pos = end + 1;
        if (pos > size)
            return 0;
    }
    return 0;
}

/* One file's hits, appended to ``f``; 0, or -1 with an exception set. */
int scan_view(const LineSpec *spec, Found *f, PyObject *path, FileView *view) {
    if (PyList_GET_SIZE(f->hits) >= f->limit)
        return 0;
    if (view->lines != NULL)
        return confirm_lines(f, path, view);
    return regex_lines(spec, f, path, view);
}

int found_init(Found *f, PyObject *find, PyObject *confirm, PyObject *anchor, Py_ssize_t limit) {
    static const char *names[3] = {"path", "line", "text"};
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 3; i++) {
        if (hit_keys[i] == NULL && (hit_keys[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    }
    f->find = find;
    f->confirm = confirm;
    f->anchor = anchor;
    f->limit = limit;
    f->hits = PyList_New(0);
    return f->hits ? 0 : -1;
}

/* (hits, matched_files, long_lines, output_size); steals the hit list. */
PyObject *found_result(Found *f) {
    PyObject *hits = f->hits;
    f->hits = NULL;
    return Py_BuildValue("(Nlln)", hits, f->matched_files, f->long_lines, f->out);
}

void found_clear(Found *f) { Py_CLEAR(f->hits); }

int parse_spec(PyObject *literal, PyObject *find, PyObject *regex, int trusted,
               Py_ssize_t long_line, LineSpec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->trusted = trusted;
    spec->long_line = long_line;
    spec->re = regex_handle(regex);
    if (spec->re == (const void *)-1)
        return -1;
    if (literal == Py_None) {
        if (find == Py_None && spec->re == NULL) {
            PyErr_SetString(PyExc_TypeError, "scan needs a literal or a find function");
            return -1;
        }
        return 0;
    }
    if (!PyBytes_Check(literal) || PyBytes_GET_SIZE(literal) == 0) {
        PyErr_SetString(PyExc_TypeError, "literal must be non-empty bytes or None");
        return -1;
    }
    spec->literal = needle_of(PyBytes_AS_STRING(literal), PyBytes_GET_SIZE(literal));
    spec->has_literal = 1;
    return 0;
}
