/* HTTP chunk framing: each head against snprintf's "%zx", every digit count from 1 to 16 at
   its boundaries, the longest head filling exactly BW_CHUNK_HEAD_MAX bytes (a heap block of
   that size, so the sanitizers see a byte more), both ends of the body, and whole bodies
   framed from pieces read back by a chunked-coding decoder written here from RFC 9112 7.1.
   sources: http_chunk.c */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "http_chunk.h"

/* The head snprintf writes for n: "[CRLF]<hex>CRLF". */
static size_t reference_head(size_t n, int after_chunk, char *out, size_t cap) {
    return (size_t)snprintf(out, cap, "%s%zx\r\n", after_chunk ? "\r\n" : "", n);
}

static int head_is_right(size_t n, int after_chunk) {
    char *dst = malloc(BW_CHUNK_HEAD_MAX); /* exactly the promised room */
    char want[64];
    size_t len = bw_chunk_head(dst, n, after_chunk);
    size_t want_len = reference_head(n, after_chunk, want, sizeof want);
    int ok = len == want_len && len <= BW_CHUNK_HEAD_MAX && memcmp(dst, want, len) == 0;
    if (!ok)
        fprintf(stderr, "head of %zu (after_chunk %d): got \"%.*s\", want \"%s\"\n", n,
                after_chunk, (int)len, dst, want);
    free(dst);
    return ok;
}

TEST(every_digit_count_at_its_boundaries) {
    for (int digits = 1; digits <= (int)(2 * sizeof(size_t)); digits++) {
        size_t low = digits == 1 ? 1 : (size_t)1 << (4 * (digits - 1)); /* 1, 0x10, 0x100 ... */
        size_t high = digits == (int)(2 * sizeof(size_t)) ? SIZE_MAX : ((size_t)1 << (4 * digits)) - 1;
        for (int after = 0; after <= 1; after++) {
            CHECK(head_is_right(low, after));
            CHECK(head_is_right(low + 1, after));
            CHECK(head_is_right(high - 1, after));
            CHECK(head_is_right(high, after));
        }
    }
}

TEST(the_longest_head_fills_the_room_exactly) {
    char *dst = malloc(BW_CHUNK_HEAD_MAX);
    CHECK_EQ(bw_chunk_head(dst, SIZE_MAX, 1), BW_CHUNK_HEAD_MAX);
    CHECK_BYTES(dst, BW_CHUNK_HEAD_MAX, "\r\nffffffffffffffff\r\n");
    CHECK_EQ(bw_chunk_head(dst, SIZE_MAX, 0), BW_CHUNK_HEAD_MAX - BW_CHUNK_DATA_END_LEN);
    free(dst);
}

TEST(hex_digits_are_lower_case_without_leading_zeros) {
    char dst[BW_CHUNK_HEAD_MAX];
    CHECK_BYTES(dst, bw_chunk_head(dst, 0xabcdef, 0), "abcdef\r\n");
    CHECK_BYTES(dst, bw_chunk_head(dst, 0x100, 0), "100\r\n");
    CHECK_BYTES(dst, bw_chunk_head(dst, 1, 1), "\r\n1\r\n");
}

TEST(random_sizes_match_snprintf) {
    unsigned long long state = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 100000; i++) {
        size_t n = (size_t)(check_rand(&state) >> (check_rand(&state) % 64));
        if (n == 0)
            n = 1;
        if (!head_is_right(n, i & 1)) {
            CHECK(0);
            break;
        }
    }
}

TEST(the_end_of_the_body) {
    size_t len = 0;
    const char *end = bw_chunk_end(0, &len);
    CHECK_BYTES(end, len, "0\r\n\r\n");
    end = bw_chunk_end(1, &len);
    CHECK_BYTES(end, len, "\r\n0\r\n\r\n");
}

/* Decodes a chunked body (no extensions, no trailers) into out. The decoded length, or -1
   when the framing is wrong or anything follows the last chunk. */
static long long dechunk(const char *body, size_t n, char *out) {
    size_t pos = 0, len = 0;
    for (;;) {
        size_t size = 0, digits = 0;
        while (pos < n && body[pos] != '\r') {
            char c = body[pos++];
            int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (v < 0 || digits++ == 16)
                return -1;
            size = size * 16 + (size_t)v;
        }
        if (digits == 0 || pos + 2 > n || body[pos + 1] != '\n')
            return -1;
        pos += 2;
        if (size == 0) /* the last chunk: an empty trailer section, then nothing */
            return pos + 2 == n && body[pos] == '\r' && body[pos + 1] == '\n' ? (long long)len : -1;
        if (size > n - pos || n - pos - size < 2 || body[pos + size] != '\r' ||
            body[pos + size + 1] != '\n')
            return -1;
        memcpy(out + len, body + pos, size);
        len += size;
        pos += size + 2;
    }
}

TEST(framed_pieces_decode_to_their_concatenation) {
    static char data[1 << 16], body[(1 << 16) + 4096], decoded[1 << 16];
    unsigned long long state = 42;
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)check_rand(&state);
    for (int round = 0; round < 200; round++) {
        /* the data cut into 0..40 non-empty pieces, each head written as the pump writes it:
           after the first chunk, in front of the next head */
        size_t used = 0, len = 0;
        int pieces = (int)(check_rand(&state) % 41);
        for (int p = 0; p < pieces && used < sizeof data; p++) {
            size_t size = 1 + (size_t)(check_rand(&state) % 1500);
            if (size > sizeof data - used)
                size = sizeof data - used;
            len += bw_chunk_head(body + len, size, p > 0);
            memcpy(body + len, data + used, size);
            len += size;
            used += size;
        }
        size_t end_len;
        const char *end = bw_chunk_end(used > 0, &end_len);
        memcpy(body + len, end, end_len);
        len += end_len;
        long long got = dechunk(body, len, decoded);
        CHECK_EQ(got, (long long)used);
        CHECK(got < 0 || memcmp(decoded, data, used) == 0);
    }
}

RUN_TESTS(every_digit_count_at_its_boundaries, the_longest_head_fills_the_room_exactly,
          hex_digits_are_lower_case_without_leading_zeros, random_sizes_match_snprintf,
          the_end_of_the_body, framed_pieces_decode_to_their_concatenation)
