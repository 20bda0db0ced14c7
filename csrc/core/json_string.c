#include "json_string.h"

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

/* The three widths share one body; a macro keeps them from drifting apart. */
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

DEFINE_ASCII_WRITER(bw_json_string_ucs1, uint8_t, 6)
DEFINE_ASCII_WRITER(bw_json_string_ucs2, uint16_t, 6)
DEFINE_ASCII_WRITER(bw_json_string_ucs4, uint32_t, 12)

int bw_json_string_utf8(bw_buf *out, const char *s, size_t n) {
    if (n > (SIZE_MAX - 2) / 6 || bw_buf_reserve(out, n * 6 + 2) < 0)
        return -1;
    bw_buf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* DEL and non-ASCII bytes pass through: json escapes them only with ensure_ascii */
        if (c >= 128 || c == 127 || escape_kind[c] == 0) {
            bw_buf_putc(out, (char)c);
            continue;
        }
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
