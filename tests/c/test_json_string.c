/* JSON string escaping against a reference escaper written here from json.dumps's rules.
   sources: json_string.c out_buffer.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_check.h"
#include "check.h"
#include "json_reference.h"
#include "json_string.h"

TEST(known_escapes) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    const uint8_t s1[] = "a\"b\\c\b\f\n\r\t\x01\x1f\x7f\xe9 ";
    CHECK_EQ(bw_json_string_ucs1(&b, s1, sizeof s1 - 1), 0);
    CHECK_BYTES(b.data, b.len, "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\\u00e9 \"");
    b.len = 0;
    const uint16_t s2[] = {0x20ac, 'x', 0xd800, 0xffff};
    CHECK_EQ(bw_json_string_ucs2(&b, s2, 4), 0);
    CHECK_BYTES(b.data, b.len, "\"\\u20acx\\ud800\\uffff\"");
    b.len = 0;
    const uint32_t s4[] = {0x1f600, 0x10ffff, 0xdc00, 0};
    CHECK_EQ(bw_json_string_ucs4(&b, s4, 4), 0);
    CHECK_BYTES(b.data, b.len, "\"\\ud83d\\ude00\\udbff\\udfff\\udc00\\u0000\"");
    b.len = 0;
    CHECK_EQ(bw_json_string_ucs1(&b, (const uint8_t *)"", 0), 0);
    CHECK_BYTES(b.data, b.len, "\"\"");
    bw_buf_free(&b);
}

TEST(utf8_passes_non_ascii_and_del) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 1), 0);
    const char s[] = "caf\xc3\xa9\x7f\x01\"\\\n\xf0\x9f\x98\x80";
    CHECK_EQ(bw_json_string_utf8(&b, s, sizeof s - 1), 0);
    CHECK_BYTES(b.data, b.len, "\"caf\xc3\xa9\x7f\\u0001\\\"\\\\\\n\xf0\x9f\x98\x80\"");
    bw_buf_free(&b);
}

TEST(appends_after_existing_content) {
    bw_buf b;
    buffer_holding(&b, 2, "[1,");
    const uint8_t s[] = "\n";
    CHECK_EQ(bw_json_string_ucs1(&b, s, 1), 0);
    CHECK_BYTES(b.data, b.len, "[1,\"\\n\"");
    bw_buf_free(&b);
}

TEST(impossible_lengths_fail_without_writing) {
    bw_buf b;
    buffer_holding(&b, 16, "x");
    /* the lengths alone overflow: no character may be read */
    CHECK_EQ(bw_json_string_ucs4(&b, NULL, SIZE_MAX / 4), -1);
    CHECK_EQ(bw_json_string_ucs2(&b, NULL, SIZE_MAX / 2), -1);
    CHECK_EQ(bw_json_string_ucs1(&b, NULL, SIZE_MAX - 1), -1);
    CHECK_EQ(bw_json_string_utf8(&b, NULL, SIZE_MAX / 3), -1);
    CHECK_BYTES(b.data, b.len, "x");
    bw_buf_free(&b);
}

/* Random strings of each width, weighted towards the characters that need escaping. */
static uint32_t random_code_point(unsigned long long *state, uint32_t max) {
    unsigned long long r = check_rand(state);
    switch (r % 4) {
    case 0: return (uint32_t)((r >> 8) % 0x20);           /* controls */
    case 1: return "\"\\/ a\x7f"[(r >> 8) % 7];            /* quote, backslash, DEL, plain */
    case 2: return (uint32_t)((r >> 8) % 0x80);
    default: return (uint32_t)((r >> 8) % ((unsigned long long)max + 1));
    }
}

TEST(random_strings_match_the_reference) {
    enum { MAXLEN = 40 };
    unsigned long long state = 0x9e3779b97f4a7c15ULL;
    uint32_t cps[MAXLEN];
    uint8_t s1[MAXLEN];
    uint16_t s2[MAXLEN];
    char want[MAXLEN * 12 + 2];
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    for (int round = 0; round < 20000; round++) {
        int width = round % 3;
        uint32_t max = width == 0 ? 0xff : width == 1 ? 0xffff : 0x10ffff;
        size_t n = (size_t)(check_rand(&state) % (MAXLEN + 1));
        for (size_t i = 0; i < n; i++) {
            cps[i] = random_code_point(&state, max);
            s1[i] = (uint8_t)cps[i];
            s2[i] = (uint16_t)cps[i];
        }
        b.len = 0;
        int rc = width == 0 ? bw_json_string_ucs1(&b, s1, n)
                 : width == 1 ? bw_json_string_ucs2(&b, s2, n)
                              : bw_json_string_ucs4(&b, cps, n);
        CHECK_EQ(rc, 0);
        size_t want_len = reference_escape(cps, n, 1, want);
        if (!buffer_is(&b, want, want_len)) {
            CHECK(!"escaped text differs from the reference");
            break;
        }
        /* the UTF-8 writer over ASCII input (non-ASCII bytes only pass through) */
        for (size_t i = 0; i < n; i++) {
            cps[i] &= 0x7f;
            s1[i] = (uint8_t)cps[i];
        }
        b.len = 0;
        CHECK_EQ(bw_json_string_utf8(&b, (const char *)s1, n), 0);
        want_len = reference_escape(cps, n, 0, want);
        if (!buffer_is(&b, want, want_len)) {
            CHECK(!"UTF-8 escaped text differs from the reference");
            break;
        }
    }
    bw_buf_free(&b);
}

/* ensure_ascii over UTF-8 text: the same escapes as over the code points; malformed UTF-8
   (as Python's strict decoder judges it) refused with nothing written. */
TEST(utf8_text_with_ensure_ascii) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    const char text[] = "a\"\x01\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x80\xa8";
    CHECK_EQ(bw_json_string_utf8_ascii(&b, text, sizeof text - 1), 0);
    CHECK_BYTES(b.data, b.len,
                "\"a\\\"\\u0001\\u007f\\u00e9\\u20ac\\ud83d\\ude00\\u2028\"");
    CHECK(bw_utf8_valid(text, sizeof text - 1));
    static const char *const malformed[] = {
        "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80", "\xff", "ok\xc3",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        size_t before = b.len;
        CHECK_EQ(bw_json_string_utf8_ascii(&b, malformed[i], strlen(malformed[i])), -2);
        CHECK_EQ(b.len, before);
        CHECK(!bw_utf8_valid(malformed[i], strlen(malformed[i])));
    }
    bw_buf_free(&b);
}

/* The clean-run copier, block by block (SSE2 where built for it) and its portable fallback,
   against the rule read one byte at a time: every byte value at every offset of every length
   up to three 16-byte blocks, over ASCII and over non-ASCII filler, in both modes. The input
   and output are exactly n bytes on the heap, so a read or write past them is an error under
   the sanitizers. */
static size_t clean_prefix_reference(const uint8_t *s, size_t n, int ensure_ascii) {
    size_t i = 0;
    while (i < n && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && !(ensure_ascii && s[i] >= 0x7f))
        i++;
    return i;
}

TEST(clean_runs_block_and_portable) {
    static const uint8_t fillers[] = {'a', 0xc3};
    for (int mode = 0; mode < 2; mode++) {
        for (size_t f = 0; f < sizeof fillers; f++) {
            for (size_t n = 0; n <= 48; n++) {
                uint8_t *s = malloc(n ? n : 1);
                char *block_out = malloc(n ? n : 1), *portable_out = malloc(n ? n : 1);
                CHECK(s && block_out && portable_out);
                for (size_t pos = 0; pos < (n ? n : 1); pos++) {
                    for (int c = 0; c < 256; c++) {
                        memset(s, fillers[f], n);
                        if (pos < n)
                            s[pos] = (uint8_t)c;
                        size_t want = clean_prefix_reference(s, n, mode);
                        size_t block = bw_json_copy_clean(s, n, block_out, mode);
                        size_t portable = bw_json_copy_clean_portable(s, n, portable_out, mode);
                        if (block != want || portable != want ||
                            memcmp(block_out, s, want) != 0 || memcmp(portable_out, s, want) != 0) {
                            CHECK_EQ(block, want);
                            CHECK_EQ(portable, want);
                            CHECK(memcmp(block_out, s, want) == 0);
                            CHECK(memcmp(portable_out, s, want) == 0);
                            goto done;
                        }
                    }
                }
            done:
                free(s);
                free(block_out);
                free(portable_out);
            }
        }
    }
}

RUN_TESTS(known_escapes, utf8_passes_non_ascii_and_del, appends_after_existing_content,
          impossible_lengths_fail_without_writing, random_strings_match_the_reference,
          utf8_text_with_ensure_ascii, clean_runs_block_and_portable)
