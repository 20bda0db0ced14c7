/* JSON string writers with json.dumps's escaping. No Python: they take the code units of
   a string (1, 2 or 4 bytes each, as CPython stores them) and append the quoted text. */
#ifndef BW_JSON_STRING_H
#define BW_JSON_STRING_H
#include <stddef.h>
#include <stdint.h>

#include "out_buffer.h"

/* ensure_ascii=True: everything outside printable ASCII becomes \uXXXX (lowercase hex),
   astral code points a surrogate pair, lone surrogates themselves. 0, or -1 out of memory. */
int bw_json_string_ucs1(bw_buf *out, const uint8_t *s, size_t n);
int bw_json_string_ucs2(bw_buf *out, const uint16_t *s, size_t n);
int bw_json_string_ucs4(bw_buf *out, const uint32_t *s, size_t n);
/* Texts shorter than this are copied a byte at a time by bw_json_short_clean. */
#define BW_JSON_SHORT 16
/* Copies the bytes of s (n < BW_JSON_SHORT) to dst up to the first that needs an escape in
   either mode (a control, '"', '\\', DEL and above); returns how many it copied (n when the
   text is clean). */
static inline size_t bw_json_short_clean(const uint8_t *s, size_t n, char *dst) {
    size_t i = 0;
    for (; i < n; i++) {
        uint8_t c = s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            break;
        dst[i] = (char)c;
    }
    return i;
}
/* bw_json_string_ucs1, with short clean text (most keys) written inline by the caller: a
   call's fixed cost is most of the work for a text of a few bytes. */
static inline int bw_json_string_ucs1_inline(bw_buf *out, const uint8_t *s, size_t n) {
    if (n < BW_JSON_SHORT) {
        if (bw_buf_reserve(out, BW_JSON_SHORT + 2) < 0)
            return -1;
        char *p = bw_buf_tail(out);
        p[0] = '"';
        if (bw_json_short_clean(s, n, p + 1) == n) {
            p[n + 1] = '"';
            out->len += n + 2;
            return 0;
        }
    }
    return bw_json_string_ucs1(out, s, n);
}
/* ensure_ascii=False: UTF-8 in, only '"', '\\' and controls below 0x20 escaped. */
int bw_json_string_utf8(bw_buf *out, const char *s, size_t n);

/* ensure_ascii=True over UTF-8 text (Arrow strings): the same text as the writers above give
   for the decoded string. 0, -1 out of memory, -2 invalid UTF-8 (out then unchanged). */
int bw_json_string_utf8_ascii(bw_buf *out, const char *s, size_t n);
/* Copies the clean prefix of s (the bytes a writer above copies unescaped: with ensure_ascii
   printable ASCII but '"' and '\\', without it also DEL and bytes from 0x80) to dst, which
   has room for n bytes, and returns its length. bw_json_copy_clean takes 16 bytes a step
   (SSE2) where the compiler targets it; the portable one 8, with plain integer arithmetic. */
size_t bw_json_copy_clean(const uint8_t *s, size_t n, char *dst, int ensure_ascii);
size_t bw_json_copy_clean_portable(const uint8_t *s, size_t n, char *dst, int ensure_ascii);
/* Whether the text is well-formed UTF-8, as Python's strict decoder judges it (1 or 0). */
int bw_utf8_valid(const char *s, size_t n);
#endif
