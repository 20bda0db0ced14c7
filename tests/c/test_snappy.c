/* Snappy decompression: every element kind from hand-built streams, overlapping copies, and
   hostile streams (a lying length prefix, cut-short elements, a copy reaching before the
   start or past the end), which fail with a reason and never touch bytes outside the
   buffers (the sanitizer run checks that; outputs here are heap blocks of exactly their
   size).
   sources: snappy.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "snappy.h"

/* Decompresses n bytes into a heap block of exactly `size`; the result code, the output
   copied to `got` (when it fits) and the reason. */
static int run(const uint8_t *in, size_t n, size_t size, uint8_t *got, const char **why) {
    uint8_t *copy = malloc(n ? n : 1), *out = malloc(size ? size : 1);
    memcpy(copy, in, n);
    *why = NULL;
    int rc = bw_snappy_decompress(copy, n, out, size, why);
    if (rc == 0 && got != NULL)
        memcpy(got, out, size);
    free(copy);
    free(out);
    return rc;
}

TEST(literal_and_every_copy_kind) {
    /* "abcd" literal, copy1 (length 4, offset 4), copy2 (length 3, offset 2),
       copy4 (length 2, offset 11) */
    const uint8_t s[] = {13, 3 << 2, 'a', 'b', 'c', 'd', 0x01, 4, (2 << 2) | 2, 2, 0,
                         (1 << 2) | 3, 11, 0, 0, 0};
    uint8_t got[13];
    const char *why;
    CHECK_EQ(run(s, sizeof s, 13, got, &why), 0);
    CHECK_BYTES(got, 13, "abcdabcdcdcab");
}

TEST(overlapping_copy_repeats_the_pattern) {
    /* "ab" then copy2 of length 64 at offset 2, then copy1 of length 11 at offset 1 */
    const uint8_t s[] = {77, 1 << 2, 'a', 'b', (63 << 2) | 2, 2, 0, (7 << 2) | 1, 1};
    uint8_t got[77];
    const char *why;
    CHECK_EQ(run(s, sizeof s, 77, got, &why), 0);
    for (int i = 0; i < 66; i++)
        CHECK_EQ(got[i], "ab"[i % 2]);
    for (int i = 66; i < 77; i++)
        CHECK_EQ(got[i], 'b');
}

TEST(long_literals_use_their_length_bytes) {
    for (size_t extra = 1; extra <= 4; extra++) {
        /* 1-3 bytes: lengths that need them; 4 bytes: a small value, written long */
        size_t length = extra == 1 ? 200 : extra == 2 ? 60000 : extra == 3 ? 70000 : 100;
        uint8_t *s = malloc(length + 10);
        size_t n = 0, v = length;
        while (v >= 0x80) {
            s[n++] = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        s[n++] = (uint8_t)v;
        s[n++] = (uint8_t)((59 + extra) << 2);
        for (size_t i = 0; i < extra; i++)
            s[n++] = (uint8_t)((length - 1) >> (8 * i));
        for (size_t i = 0; i < length; i++)
            s[n++] = (uint8_t)(i * 7);
        uint8_t *got = calloc(length, 1);
        const char *why;
        CHECK_EQ(run(s, n, length, got, &why), 0);
        size_t wrong = 0;
        for (size_t i = 0; i < length; i++)
            wrong += got[i] != (uint8_t)(i * 7);
        CHECK_EQ(wrong, 0);
        free(got);
        free(s);
    }
}

TEST(empty_stream) {
    const uint8_t s[] = {0};
    const char *why;
    CHECK_EQ(run(s, 1, 0, NULL, &why), 0);
    CHECK(run(s, 0, 0, NULL, &why) == -1 && why != NULL);
}

TEST(a_length_prefix_that_lies) {
    const uint8_t more[] = {5, 3 << 2, 'a', 'b', 'c', 'd'};  /* says 5, holds 4 */
    const uint8_t less[] = {3, 3 << 2, 'a', 'b', 'c', 'd'};  /* says 3, holds 4 */
    const char *why;
    CHECK_EQ(run(more, sizeof more, 5, NULL, &why), -1);
    CHECK(why && strstr(why, "ends before"));
    CHECK_EQ(run(less, sizeof less, 3, NULL, &why), -1);
    CHECK(why && strstr(why, "past the length"));
    CHECK_EQ(run(more, sizeof more, 4, NULL, &why), -1);  /* not the page's size */
    CHECK(why && strstr(why, "not the page's"));
    const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0x1f};  /* 2^35 - 1 */
    size_t length;
    CHECK_EQ(bw_snappy_length(huge, sizeof huge, &length), -1);
    const uint8_t endless[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    CHECK_EQ(bw_snappy_length(endless, sizeof endless, &length), -1);
    CHECK_EQ(bw_snappy_length(endless, 3, &length), -1);
    const uint8_t max[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    CHECK_EQ(bw_snappy_length(max, sizeof max, &length), 0);
    CHECK_EQ(length, UINT32_MAX);
}

TEST(copies_reaching_before_the_start) {
    const uint8_t zero[] = {8, 3 << 2, 'a', 'b', 'c', 'd', 0x01, 0};   /* offset 0 */
    const uint8_t before[] = {8, 3 << 2, 'a', 'b', 'c', 'd', 0x01, 5}; /* offset 5 > 4 */
    const uint8_t first[] = {4, (3 << 2) | 2, 1, 0};                    /* nothing written yet */
    const uint8_t far[] = {5, 0, 'a', (3 << 2) | 3, 0xff, 0xff, 0xff, 0xff};
    const char *why;
    CHECK_EQ(run(zero, sizeof zero, 8, NULL, &why), -1);
    CHECK(why && strstr(why, "before the start"));
    CHECK_EQ(run(before, sizeof before, 8, NULL, &why), -1);
    CHECK(why && strstr(why, "before the start"));
    CHECK_EQ(run(first, sizeof first, 4, NULL, &why), -1);
    CHECK_EQ(run(far, sizeof far, 5, NULL, &why), -1);
}

TEST(copies_and_literals_past_the_end) {
    const uint8_t copy[] = {6, 3 << 2, 'a', 'b', 'c', 'd', 0x01, 4};  /* 4 + 4 > 6 */
    const uint8_t literal[] = {2, 3 << 2, 'a', 'b', 'c', 'd'};
    const char *why;
    CHECK_EQ(run(copy, sizeof copy, 6, NULL, &why), -1);
    CHECK(why && strstr(why, "copy runs past"));
    CHECK_EQ(run(literal, sizeof literal, 2, NULL, &why), -1);
    CHECK(why && strstr(why, "literal runs past the length"));
}

TEST(every_truncation_fails) {
    const uint8_t s[] = {13, 3 << 2, 'a', 'b', 'c', 'd', 0x01, 4, (2 << 2) | 2, 2, 0,
                         (1 << 2) | 3, 11, 0, 0, 0};
    for (size_t n = 0; n < sizeof s; n++) {
        const char *why = NULL;
        CHECK_EQ(run(s, n, 13, NULL, &why), -1);
        CHECK(why != NULL);
    }
    const uint8_t literal[] = {20, 19 << 2, 'a'};  /* a 20-byte literal with 1 byte */
    const uint8_t length_cut[] = {200, 1, 61 << 2, 199};  /* a 2-byte length with 1 */
    const char *why;
    CHECK_EQ(run(literal, sizeof literal, 20, NULL, &why), -1);
    CHECK(why && strstr(why, "past the end of the input"));
    CHECK_EQ(run(length_cut, sizeof length_cut, 200, NULL, &why), -1);
    CHECK(why && strstr(why, "cut short"));
}

RUN_TESTS(literal_and_every_copy_kind, overlapping_copy_repeats_the_pattern,
          long_literals_use_their_length_bytes, empty_stream, a_length_prefix_that_lies,
          copies_reaching_before_the_start, copies_and_literals_past_the_end,
          every_truncation_fails)
