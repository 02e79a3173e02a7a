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

/* A literal to find: memchr for its rarest byte (by how common bytes are in source
 * text), then compare the whole. memchr is vectorized; memmem on short needles is
 * several times slower on text where the literal is rare. */

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
    Needle n = {text, len, 0};
    for (Py_ssize_t i = 1; i < len; i++) {
        if (byte_rank((unsigned char)text[i]) < byte_rank((unsigned char)text[n.rare]))
            n.rare = i;
    }
    return n;
}

/* Offset of the first occurrence at or after ``pos``, or -1. */
Py_ssize_t needle_find(const Needle *n, const char *buf, Py_ssize_t size, Py_ssize_t pos) {
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

