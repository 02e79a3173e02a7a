/* Byte search helpers: a rare-byte literal finder and a newline counter. */
#include "common.h"

#include <string.h>

const char *find_byte_back(const char *lo, const char *hi, char c) {
    while (hi > lo) {
        if (*--hi == c)
            return hi;
    }
    return NULL;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bytes a step; the byte counters are folded before they can wrap. */
Py_ssize_t count_newlines(const char *p, Py_ssize_t n) {
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
Py_ssize_t count_newlines(const char *p, Py_ssize_t n) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += p[i] == '\n';
    return count;
}
#endif

/* A literal to find. Two of its rarest bytes (by how common bytes are in source
 * text), at their offsets in the literal, are compared 16 candidate positions a
 * step (SSE2); only a position where both sit is compared whole. A memchr for
 * one byte stops at every occurrence of it ('c' of "connection" every ~30 bytes
 * of source), and memmem on short needles is several times slower on text where
 * the literal is rare. Without SSE2, memchr for the rarest byte. */

static int byte_rank(unsigned char c) {
    static const char common[] = " e_tanoisrlcdhupmfgybw.,()=\n\tvkxqjz:;'\"-/0123456789";
    const char *at = c ? strchr(common, c) : NULL;
    if (at != NULL)
        return 100 - (int)(at - common);
    if (c >= 'A' && c <= 'Z')
        return 40;
    return 0;
}

Needle needle_of(const char *text, Py_ssize_t len) {
    Needle n = {text, len, 0, 0};
    for (Py_ssize_t i = 1; i < len; i++) {
        if (byte_rank((unsigned char)text[i]) < byte_rank((unsigned char)text[n.rare]))
            n.rare = i;
    }
    n.other = n.rare == 0 && len > 1 ? 1 : 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (i != n.rare && text[i] != text[n.rare] &&
            byte_rank((unsigned char)text[i]) < byte_rank((unsigned char)text[n.other]))
            n.other = i;
    }
    return n;
}

/* The first match at a start in [pos, last], by memchr for the rarest byte. */
static Py_ssize_t find_by_memchr(const Needle *n, const char *buf, Py_ssize_t pos,
                                 Py_ssize_t last) {
    const char key = n->text[n->rare];
    Py_ssize_t at = pos + n->rare; /* where the rare byte sits for a match at pos */
    while (at <= last + n->rare) {
        const char *hit = memchr(buf + at, key, (size_t)(last + n->rare - at + 1));
        if (hit == NULL)
            return -1;
        Py_ssize_t start = hit - buf - n->rare;
        if (memcmp(buf + start, n->text, (size_t)n->len) == 0)
            return start;
        at = hit - buf + 1;
    }
    return -1;
}

#if defined(__SSE2__)
/* The first match at a start in [pos, last]: 16 starts a step while every load
 * stays inside the buffer, the rest by memchr. */
static Py_ssize_t find_by_pair(const Needle *n, const char *buf, Py_ssize_t pos,
                               Py_ssize_t last) {
    const Py_ssize_t a = n->rare, b = n->other, reach = (a > b ? a : b) + 16;
    const __m128i va = _mm_set1_epi8(n->text[a]), vb = _mm_set1_epi8(n->text[b]);
    /* Loads read [start + a, start + a + 16) and the same from b: inside the
     * buffer while start + reach <= last + len. */
    while (pos + reach <= last + n->len) {
        __m128i ha = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + pos + a)), va);
        __m128i hb = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + pos + b)), vb);
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(ha, hb));
        while (mask != 0) {
            Py_ssize_t start = pos + __builtin_ctz(mask);
            if (start > last)
                return -1;
            if (memcmp(buf + start, n->text, (size_t)n->len) == 0)
                return start;
            mask &= mask - 1;
        }
        pos += 16;
    }
    return pos <= last ? find_by_memchr(n, buf, pos, last) : -1;
}
#endif

/* Offset of the first occurrence at or after ``pos``, or -1. */
Py_ssize_t needle_find(const Needle *n, const char *buf, Py_ssize_t size, Py_ssize_t pos) {
    if (n->len == 0)
        return pos <= size ? pos : -1;
    Py_ssize_t last = size - n->len; /* the last start a match can have */
    if (pos > last)
        return -1;
#if defined(__SSE2__)
    if (n->len > 1)
        return find_by_pair(n, buf, pos, last);
#endif
    return find_by_memchr(n, buf, pos, last);
}
