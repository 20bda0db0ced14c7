/* libFuzzer target: JSON string escaping. The input picks a writer (ucs1, ucs2, ucs4 or
   UTF-8) and gives its code units; the output must equal the reference escaper's, be ASCII
   where ensure_ascii says so, hold no raw control character, and decode back (with the tiny
   decoder below) to the code units it was written from.
   sources: json_string.c out_buffer.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_reference.h"
#include "json_string.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

/* Decodes a quoted JSON string into UTF-16 code units (\uXXXX as written, other bytes as
   themselves): -1 when the text is not one well-formed JSON string. */
static long decode_json_string(const char *s, size_t n, uint32_t *units) {
    if (n < 2 || s[0] != '"' || s[n - 1] != '"')
        return -1;
    long count = 0;
    for (size_t i = 1; i < n - 1; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c < 0x20)
            return -1;
        if (c != '\\') {
            units[count++] = c;
            continue;
        }
        if (++i >= n - 1)
            return -1;
        switch (s[i]) {
        case '"': units[count++] = '"'; break;
        case '\\': units[count++] = '\\'; break;
        case '/': units[count++] = '/'; break;
        case 'b': units[count++] = '\b'; break;
        case 'f': units[count++] = '\f'; break;
        case 'n': units[count++] = '\n'; break;
        case 'r': units[count++] = '\r'; break;
        case 't': units[count++] = '\t'; break;
        case 'u': {
            if (i + 4 >= n - 1)
                return -1;
            uint32_t v = 0;
            for (int k = 1; k <= 4; k++) {
                char h = s[i + k];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
                if (d < 0)
                    return -1;
                v = v * 16 + (uint32_t)d;
            }
            units[count++] = v;
            i += 4;
            break;
        }
        default:
            return -1;
        }
    }
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    int writer = data[0] % 4; /* 0 ucs1, 1 ucs2, 2 ucs4, 3 UTF-8 bytes */
    data++;
    size--;
    size_t width = writer == 1 ? 2 : writer == 2 ? 4 : 1;
    size_t n = size / width;
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    /* the writer reads exactly the n units it is given: a heap block of that size */
    void *units = malloc(n ? n * width : 1);
    uint32_t *expected_units = malloc((2 * n + 1) * sizeof *expected_units);
    uint32_t *decoded = malloc((12 * n + 1) * sizeof *decoded);
    char *want = malloc(12 * n + 2);
    REQUIRE(cps && units && expected_units && decoded && want);
    size_t n_expected = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = 0;
        memcpy(&v, data + i * width, width);
        if (writer == 2)
            v %= 0x110000;
        cps[i] = v;
        if (writer == 1)
            ((uint16_t *)units)[i] = (uint16_t)v;
        else if (writer == 2)
            ((uint32_t *)units)[i] = v;
        else
            ((uint8_t *)units)[i] = (uint8_t)v;
        if (v >= 0x10000) {
            expected_units[n_expected++] = 0xd800 | ((v - 0x10000) >> 10);
            expected_units[n_expected++] = 0xdc00 | ((v - 0x10000) & 0x3ff);
        } else {
            expected_units[n_expected++] = v;
        }
    }
    bw_buf out;
    REQUIRE(bw_buf_init(&out, n % 8) == 0); /* small: the writers must grow it */
    int rc = writer == 0 ? bw_json_string_ucs1(&out, units, n)
             : writer == 1 ? bw_json_string_ucs2(&out, units, n)
             : writer == 2 ? bw_json_string_ucs4(&out, units, n)
                           : bw_json_string_utf8(&out, units, n);
    REQUIRE(rc == 0);
    size_t want_len = reference_escape(cps, n, writer != 3, want);
    REQUIRE(out.len == want_len && memcmp(out.data, want, want_len) == 0);
    for (size_t i = 0; i < out.len; i++) {
        unsigned char c = (unsigned char)out.data[i];
        REQUIRE(c >= 0x20);
        REQUIRE(writer == 3 || c < 0x7f);
    }
    long n_decoded = decode_json_string(out.data, out.len, decoded);
    REQUIRE(n_decoded == (long)n_expected);
    REQUIRE(memcmp(decoded, expected_units, n_expected * sizeof *decoded) == 0);
    bw_buf_free(&out);
    free(cps);
    free(units);
    free(expected_units);
    free(decoded);
    free(want);
    return 0;
}
