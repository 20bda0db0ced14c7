#include "json_string.h"

#include <string.h>

/* 0: copy as is; 'u': \u00XX; otherwise the letter after the backslash. Covers 0..127. */
static const char escape_kind[128] = {
    'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'b', 't', 'n', 'u', 'f', 'r', 'u', 'u',
    'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u', 'u',
    0, 0, '"', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '\\', 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'u',
};

static const char hex_digits[] = "0123456789abcdef";

static inline void put_u_escape(bw_buf *out, uint32_t unit) {
    char *p = bw_buf_tail(out);
    p[0] = '\\';
    p[1] = 'u';
    p[2] = hex_digits[(unit >> 12) & 0xf];
    p[3] = hex_digits[(unit >> 8) & 0xf];
    p[4] = hex_digits[(unit >> 4) & 0xf];
    p[5] = hex_digits[unit & 0xf];
    out->len += 6;
}

/* Escapes one code point known to need it (ensure_ascii mode). */
static inline void put_escaped(bw_buf *out, uint32_t c) {
    if (c < 128) {
        char kind = escape_kind[c];
        if (kind != 'u') {
            bw_buf_putc(out, '\\');
            bw_buf_putc(out, kind);
            return;
        }
        put_u_escape(out, c);
    } else if (c < 0x10000) {
        put_u_escape(out, c);
    } else {
        c -= 0x10000;
        put_u_escape(out, 0xd800 | (c >> 10));
        put_u_escape(out, 0xdc00 | (c & 0x3ff));
    }
}

/* ---- clean runs of 1-byte text ----
   A clean byte is copied as is: printable ASCII but '"' and '\\' (ensure_ascii), or also DEL
   and every byte from 0x80 (UTF-8 text, ensure_ascii=False). Most text is one clean run, so
   these test and copy whole blocks, and the byte loop only runs where an escape is. */

static inline int byte_is_clean(uint8_t c, int ensure_ascii) {
    if (c >= 0x7f)
        return !ensure_ascii;
    return escape_kind[c] == 0;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
/* Whether some byte of x is below n (n <= 128): exact as a yes/no, not per byte. */
#define HAS_BYTE_BELOW(x, n) (((x) - ONES * (n)) & ~(x) & HIGHS)
#define HAS_ZERO_BYTE(x) HAS_BYTE_BELOW(x, 1)

/* Inlined into the writers: most strings (keys) are a few bytes, where a call would cost as
   much as the copy. */
static inline size_t copy_clean_portable(const uint8_t *s, size_t n, char *dst, int ensure_ascii) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t dirty = HAS_BYTE_BELOW(x, 0x20) | HAS_ZERO_BYTE(x ^ (ONES * '"')) |
                         HAS_ZERO_BYTE(x ^ (ONES * '\\'));
        if (ensure_ascii)
            dirty |= (x & HIGHS) | HAS_ZERO_BYTE(x ^ (ONES * 0x7f));
        if (dirty)
            break;
        memcpy(dst + i, &x, 8);
    }
    while (i < n && byte_is_clean(s[i], ensure_ascii)) {
        dst[i] = (char)s[i];
        i++;
    }
    return i;
}

size_t bw_json_copy_clean_portable(const uint8_t *s, size_t n, char *dst, int ensure_ascii) {
    return copy_clean_portable(s, n, dst, ensure_ascii);
}

#ifdef __SSE2__
#include <emmintrin.h>

/* SSE2 is part of x86-64, so this is the path there. */
static inline size_t copy_clean_sse2(const uint8_t *s, size_t n, char *dst, int ensure_ascii) {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    const __m128i last_control = _mm_set1_epi8(0x1f), del = _mm_set1_epi8(0x7f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        /* unsigned v <= 0x1f: min(v, 0x1f) == v */
        __m128i dirty = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                  _mm_cmpeq_epi8(v, backslash)));
        if (ensure_ascii) /* unsigned v >= 0x7f: max(v, 0x7f) == v */
            dirty = _mm_or_si128(dirty, _mm_cmpeq_epi8(_mm_max_epu8(v, del), v));
        unsigned mask = (unsigned)_mm_movemask_epi8(dirty);
        if (mask != 0) {
            size_t run = (size_t)__builtin_ctz(mask);
            memcpy(dst + i, s + i, run);
            return i + run;
        }
        _mm_storeu_si128((__m128i *)(void *)(dst + i), v);
    }
    return i + copy_clean_portable(s + i, n - i, dst + i, ensure_ascii);
}
#define copy_clean copy_clean_sse2
#else
#define copy_clean copy_clean_portable
#endif

size_t bw_json_copy_clean(const uint8_t *s, size_t n, char *dst, int ensure_ascii) {
    return copy_clean(s, n, dst, ensure_ascii);
}

/* ---- the writers ---- */

int bw_json_string_ucs1(bw_buf *out, const uint8_t *s, size_t n) {
    if (n > (SIZE_MAX - 2) / 6 || bw_buf_reserve(out, n * 6 + 2) < 0)
        return -1;
    bw_buf_putc(out, '"');
    if (n < 16) { /* keys and short values: no whole block, and a plain loop costs least */
        char *dst = bw_buf_tail(out);
        for (size_t i = 0; i < n; i++) {
            if (s[i] < 0x7f && escape_kind[s[i]] == 0) {
                *dst++ = (char)s[i];
                continue;
            }
            out->len = (size_t)(dst - out->data);
            put_escaped(out, s[i]);
            dst = bw_buf_tail(out);
        }
        out->len = (size_t)(dst - out->data);
        bw_buf_putc(out, '"');
        return 0;
    }
    size_t i = copy_clean(s, n, bw_buf_tail(out), 1);
    out->len += i;
    while (i < n) { /* most text has nothing to escape and never gets here */
        put_escaped(out, s[i++]);
        size_t run = copy_clean(s + i, n - i, bw_buf_tail(out), 1);
        out->len += run;
        i += run;
    }
    bw_buf_putc(out, '"');
    return 0;
}

/* Wider text is rarer (it has a code point above U+00FF): one loop serves both widths. */
#define DEFINE_ASCII_WRITER(name, unit_t, max_escape)                                  \
    int name(bw_buf *out, const unit_t *s, size_t n) {                                 \
        if (n > (SIZE_MAX - 2) / (max_escape) || bw_buf_reserve(out, n * (max_escape) + 2) < 0) \
            return -1;                                                                 \
        bw_buf_putc(out, '"');                                                         \
        size_t i = 0;                                                                  \
        while (i < n) {                                                                \
            size_t run = i;                                                            \
            char *dst = bw_buf_tail(out);                                              \
            while (run < n && s[run] < 128 && escape_kind[s[run]] == 0) {              \
                dst[run - i] = (char)s[run];                                           \
                run++;                                                                 \
            }                                                                          \
            out->len += run - i;                                                       \
            i = run;                                                                   \
            if (i < n)                                                                 \
                put_escaped(out, (uint32_t)s[i++]);                                    \
        }                                                                              \
        bw_buf_putc(out, '"');                                                         \
        return 0;                                                                      \
    }

DEFINE_ASCII_WRITER(bw_json_string_ucs2, uint16_t, 6)
DEFINE_ASCII_WRITER(bw_json_string_ucs4, uint32_t, 12)

int bw_json_string_utf8(bw_buf *out, const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    if (n > (SIZE_MAX - 2) / 6 || bw_buf_reserve(out, n * 6 + 2) < 0)
        return -1;
    bw_buf_putc(out, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = copy_clean(s + i, n - i, bw_buf_tail(out), 0);
        out->len += run;
        i += run;
        if (i >= n)
            break;
        /* DEL and non-ASCII bytes are clean here: json escapes them only with ensure_ascii */
        uint8_t c = s[i++];
        char kind = escape_kind[c];
        if (kind == 'u') {
            put_u_escape(out, c);
        } else {
            bw_buf_putc(out, '\\');
            bw_buf_putc(out, kind);
        }
    }
    bw_buf_putc(out, '"');
    return 0;
}

/* One code point of the UTF-8 text at s[*i], *i moved past it. -1 when the bytes there are
   not well-formed UTF-8: a stray or missing continuation byte, a truncated sequence, an
   overlong form, a surrogate, or a value past U+10FFFF (Python's decoder refuses each). */
static inline int utf8_next(const uint8_t *s, size_t n, size_t *i, uint32_t *code_point) {
    uint32_t c = s[*i];
    if (c < 0x80) {
        *code_point = c;
        *i += 1;
        return 0;
    }
    int extra;
    uint32_t min;
    if ((c & 0xe0) == 0xc0) { extra = 1; c &= 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { extra = 2; c &= 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { extra = 3; c &= 0x07; min = 0x10000; }
    else return -1;
    if ((size_t)extra >= n - *i)
        return -1;
    for (int j = 1; j <= extra; j++) {
        uint8_t cc = s[*i + (size_t)j];
        if ((cc & 0xc0) != 0x80)
            return -1;
        c = (c << 6) | (cc & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return -1;
    *code_point = c;
    *i += (size_t)extra + 1;
    return 0;
}

int bw_utf8_valid(const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    uint32_t c;
    while (i < n) {
        if (s[i] < 0x80)
            i++;
        else if (utf8_next(s, n, &i, &c) < 0)
            return 0;
    }
    return 1;
}

int bw_json_string_utf8_ascii(bw_buf *out, const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < n && s[i] < 0x80)
        i++;
    if (i == n) /* ASCII: the Latin-1 writer's runs are faster */
        return bw_json_string_ucs1(out, s, n);
    /* No input byte yields more than 6 output bytes: an ASCII byte at most \u00XX, a 2- or
       3-byte sequence one \uXXXX, a 4-byte sequence a surrogate pair. */
    if (n > (SIZE_MAX - 2) / 6 || bw_buf_reserve(out, n * 6 + 2) < 0)
        return -1;
    size_t start = out->len;
    bw_buf_putc(out, '"');
    for (i = 0; i < n;) {
        uint32_t c;
        if (utf8_next(s, n, &i, &c) < 0) {
            out->len = start;
            return -2;
        }
        if (c < 128 && escape_kind[c] == 0)
            bw_buf_putc(out, (char)c);
        else
            put_escaped(out, c);
    }
    bw_buf_putc(out, '"');
    return 0;
}
