/* The reference for JSON string escaping, written from json.dumps's rules: shared by the
   unit test and the fuzz target. */
#ifndef BW_JSON_REFERENCE_H
#define BW_JSON_REFERENCE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* json.dumps(s) for a string of code points (ensure_ascii=True) or, with ascii_only == 0,
   json.dumps(s, ensure_ascii=False) of its UTF-8 bytes (bytes >= 0x80 pass through). */
static inline size_t reference_escape(const uint32_t *s, size_t n, int ascii_only, char *out) {
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;
    out[len++] = '"';
    for (size_t i = 0; i < n; i++) {
        uint32_t c = s[i];
        const char *named = NULL;
        switch (c) {
        case '"': named = "\\\""; break;
        case '\\': named = "\\\\"; break;
        case '\b': named = "\\b"; break;
        case '\f': named = "\\f"; break;
        case '\n': named = "\\n"; break;
        case '\r': named = "\\r"; break;
        case '\t': named = "\\t"; break;
        default: break;
        }
        if (named != NULL) {
            memcpy(out + len, named, 2);
            len += 2;
            continue;
        }
        int escape = c < 0x20 || (ascii_only && c >= 0x7f);
        if (!escape) {
            out[len++] = (char)c;
            continue;
        }
        uint32_t units[2] = {c, 0};
        int count = 1;
        if (c >= 0x10000) {
            units[0] = 0xd800 | ((c - 0x10000) >> 10);
            units[1] = 0xdc00 | ((c - 0x10000) & 0x3ff);
            count = 2;
        }
        for (int u = 0; u < count; u++) {
            out[len++] = '\\';
            out[len++] = 'u';
            for (int shift = 12; shift >= 0; shift -= 4)
                out[len++] = hex[(units[u] >> shift) & 0xf];
        }
    }
    out[len++] = '"';
    return len;
}

#endif
