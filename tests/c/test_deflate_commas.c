/* Comma-matching deflate blocks: zlib's inflate, as the reference, gives back exactly the
   input for bodies of one byte value, of every value, of float text, of lengths 0 to a few
   MiB, of counts skewed enough that an unlimited Huffman code would need more than 15 bits,
   and of commas whose repeats overlap, run to the block's end or lie at the window's edge;
   each block is exactly the size announced before writing; blocks follow one another and any
   other deflate block; the coded size is within a few percent of the bytes' entropy without
   commas, and no larger than zlib's fastest level on JSON float arrays.
   sources: deflate_commas.c out_buffer.c
   libs: -lz -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "deflate_commas.h"

/* Appends one block coding body[0..n) to out, checks the announced size, and returns it. */
static size_t put_block(bw_buf *out, const unsigned char *body, size_t n) {
    bw_comma_code code = {0};
    CHECK_EQ(bw_comma_code_make(body, n, &code), 0);
    size_t before = out->len;
    CHECK_EQ(bw_comma_block_write(&code, body, n, out), 0);
    CHECK_EQ(out->len - before, bw_comma_block_size(&code));
    bw_comma_code_free(&code);
    return out->len - before;
}

/* Ends a run of sync-flushed blocks: a final empty fixed-Huffman block. */
static void put_final(bw_buf *out) {
    static const unsigned char final_block[2] = {0x03, 0x00};
    CHECK_EQ(bw_buf_append(out, final_block, sizeof final_block), 0);
}

/* Raw-inflates deflate[0..n) and checks it gives exactly want[0..want_len) and ends. */
static void check_inflates_to(const unsigned char *deflate, size_t n, const unsigned char *want,
                              size_t want_len) {
    unsigned char *plain = malloc(want_len + 16);
    CHECK(plain != NULL);
    if (plain == NULL)
        return;
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(inflateInit2(&z, -15), Z_OK);
    z.next_in = (Bytef *)deflate;
    z.avail_in = (uInt)n;
    z.next_out = plain;
    z.avail_out = (uInt)(want_len + 16);
    CHECK_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    CHECK_EQ(z.total_out, want_len);
    CHECK_EQ(z.avail_in, 0);
    CHECK(z.total_out != want_len || memcmp(plain, want, want_len) == 0);
    inflateEnd(&z);
    free(plain);
}

static void round_trip(const unsigned char *body, size_t n) {
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    put_block(&out, body, n);
    put_final(&out);
    check_inflates_to((const unsigned char *)out.data, out.len, body, n);
    bw_buf_free(&out);
}

/* JSON-like float text, as an embedding body is. */
static void fill_float_text(unsigned char *body, size_t n, unsigned long long seed) {
    for (size_t i = 0; i < n; i++) {
        unsigned r = (unsigned)(check_rand(&seed) % 16);
        body[i] = r < 10 ? (unsigned char)('0' + r) : r < 12 ? ',' : r < 14 ? '.' : r < 15 ? '-' : 'e';
    }
}

TEST(empty_and_one_value) {
    round_trip((const unsigned char *)"", 0);
    round_trip((const unsigned char *)"x", 1);
    unsigned char same[5000];
    memset(same, 'a', sizeof same);
    round_trip(same, sizeof same);
    memset(same, 0, sizeof same);
    round_trip(same, sizeof same);
    memset(same, 0xff, sizeof same);
    round_trip(same, sizeof same);
}

TEST(every_byte_value) {
    unsigned char body[256 * 7 + 3];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (unsigned char)(i * 7 + i / 256);
    round_trip(body, sizeof body);
    unsigned long long seed = 11;
    unsigned char noise[100000];
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (unsigned char)check_rand(&seed);
    round_trip(noise, sizeof noise);
}

TEST(lengths_around_the_writer_steps) {
    unsigned char body[300];
    fill_float_text(body, sizeof body, 5);
    for (size_t n = 0; n <= 64; n++)
        round_trip(body, n);
    round_trip(body, sizeof body);
}

TEST(float_text_megabytes) {
    size_t n = ((size_t)3 << 20) + 17;
    unsigned char *body = malloc(n);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    fill_float_text(body, n, 99);
    round_trip(body, n);
    free(body);
}

/* Counts growing like Fibonacci numbers make an unlimited Huffman code as deep as there are
   symbols; the code must still fit in 15 bits and stay complete (inflate checks both). */
TEST(skewed_counts_need_the_length_limit) {
    size_t weights[40], n = 0;
    weights[0] = weights[1] = 1;
    for (int i = 2; i < 40; i++)
        weights[i] = weights[i - 1] + weights[i - 2];
    for (int i = 0; i < 31; i++)
        n += weights[i];
    unsigned char *body = malloc(n);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    size_t at = 0;
    for (int i = 0; i < 31; i++)
        for (size_t k = 0; k < weights[i]; k++)
            body[at++] = (unsigned char)(i * 8 + 1);
    round_trip(body, n);
    /* the same counts, interleaved */
    unsigned long long seed = 3;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(check_rand(&seed) % (i + 1));
        unsigned char t = body[i];
        body[i] = body[j];
        body[j] = t;
    }
    round_trip(body, n);
    free(body);
}

TEST(blocks_follow_each_other_and_other_blocks) {
    unsigned char text[40000];
    fill_float_text(text, sizeof text, 8);
    const char *words = "{\"name\":\"a\",\"tags\":[1,2,3]},{\"name\":\"b\",\"tags\":[1,2,3]}";
    size_t words_len = strlen(words);
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    put_block(&out, text, 10000);
    /* a zlib block in between (raw deflate, sync-flushed, no history of its own) */
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK_EQ(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    unsigned char zbuf[1024];
    z.next_in = (Bytef *)words;
    z.avail_in = (uInt)words_len;
    z.next_out = zbuf;
    z.avail_out = sizeof zbuf;
    CHECK_EQ(deflate(&z, Z_SYNC_FLUSH), Z_OK);
    CHECK_EQ(bw_buf_append(&out, zbuf, sizeof zbuf - z.avail_out), 0);
    deflateEnd(&z);
    put_block(&out, text + 10000, 30000);
    put_final(&out);
    unsigned char *want = malloc(sizeof text + words_len);
    CHECK(want != NULL);
    if (want != NULL) {
        memcpy(want, text, 10000);
        memcpy(want + 10000, words, words_len);
        memcpy(want + 10000 + words_len, text + 10000, 30000);
        check_inflates_to((const unsigned char *)out.data, out.len, want, sizeof text + words_len);
        free(want);
    }
    bw_buf_free(&out);
}

/* Without commas the block is all literals: its size is near what the byte counts allow, a
   whole number of bits per byte costing a few percent on counts this flat (3.875 bits for
   3.75), never more than 5%. */
TEST(size_near_the_entropy) {
    size_t n = (size_t)1 << 20;
    unsigned char *body = malloc(n);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    fill_float_text(body, n, 21);
    for (size_t i = 0; i < n; i++)
        body[i] = body[i] == ',' ? ';' : body[i];
    size_t counts[256] = {0};
    for (size_t i = 0; i < n; i++)
        counts[body[i]]++;
    double bits = 0;
    for (int b = 0; b < 256; b++)
        if (counts[b])
            bits -= (double)counts[b] * log2((double)counts[b] / (double)n);
    bw_comma_code code = {0};
    CHECK_EQ(bw_comma_code_make(body, n, &code), 0);
    CHECK_EQ(code.match_count, 0);
    bw_comma_code_free(&code);
    CHECK(code.header_bits < 8 * 200);
    CHECK((double)(code.block_bits - code.header_bits) <= bits * 1.05);
    CHECK((double)(code.block_bits - code.header_bits) >= bits);
    free(body);
}

/* A JSON array of floats as a JSON encoder writes one ("-0.0123456789, 0.5, ..."). */
static size_t fill_json_floats(char *text, size_t cap, unsigned long long seed) {
    size_t at = 0;
    text[at++] = '[';
    while (at + 40 < cap) {
        unsigned long long r = check_rand(&seed);
        at += (size_t)snprintf(text + at, cap - at, "%s%s0.%llu", at > 1 ? ", " : "",
                               (r & 1) ? "-" : "", (r >> 8) % 100000000000000000ULL);
    }
    text[at++] = ']';
    return at;
}

TEST(json_floats_no_larger_than_zlib_fastest) {
    size_t cap = (size_t)1 << 20;
    char *text = malloc(cap);
    unsigned char *zout = malloc(cap);
    CHECK(text != NULL && zout != NULL);
    if (text != NULL && zout != NULL) {
        size_t n = fill_json_floats(text, cap, 4);
        round_trip((const unsigned char *)text, n);
        bw_buf out;
        CHECK_EQ(bw_buf_init(&out, 0), 0);
        size_t ours = put_block(&out, (const unsigned char *)text, n);
        bw_buf_free(&out);
        z_stream z;
        memset(&z, 0, sizeof z);
        CHECK_EQ(deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_in = (Bytef *)text;
        z.avail_in = (uInt)n;
        z.next_out = zout;
        z.avail_out = (uInt)cap;
        CHECK_EQ(deflate(&z, Z_SYNC_FLUSH), Z_OK);
        size_t theirs = cap - z.avail_out;
        deflateEnd(&z);
        CHECK(ours <= theirs);
    }
    free(text);
    free(zout);
}

/* Repeats after commas that overlap their source ("1,1,1,..."), that run to the block's end,
   that reach the longest length, and commas just inside and just outside the window. */
TEST(matches_at_their_limits) {
    unsigned char ones[2001];
    for (size_t i = 0; i < sizeof ones; i++)
        ones[i] = (i & 1) ? ',' : '1';
    for (size_t n = 0; n <= 40; n++)
        round_trip(ones, n);
    round_trip(ones, sizeof ones);
    size_t n = 3 * 32768 + 100;
    unsigned char *far = malloc(n);
    CHECK(far != NULL);
    if (far == NULL)
        return;
    unsigned long long seed = 77;
    for (size_t edge = 32766; edge <= 32770; edge++) {
        for (size_t i = 0; i < n; i++)
            far[i] = (unsigned char)('a' + check_rand(&seed) % 20);
        memcpy(far + 10, ",same text", 10);
        memcpy(far + 10 + edge, ",same text", 10);
        memcpy(far + 10 + 2 * edge, ",same text", 10);
        round_trip(far, n);
        round_trip(far, 10 + 2 * edge + 5); /* the last repeat cut by the block's end */
    }
    free(far);
}

/* The bytes changed between making the code and writing the block (a buffer another thread
   writes while the GIL is released) may take longer codes than were counted: the block is
   written past its announced size but never past the output buffer (ASan checks), and where
   every new byte had a code, it still inflates to the bytes written. */
TEST(bytes_changed_after_counting_stay_in_bounds) {
    size_t n = 100000;
    unsigned char *counted = malloc(n), *written = malloc(n);
    CHECK(counted != NULL && written != NULL);
    if (counted != NULL && written != NULL) {
        memset(counted, 'a', n);
        for (int b = 0; b < 64; b++)
            counted[(size_t)b * 997] = (unsigned char)('A' + b % 26); /* rare bytes */
        counted[5] = 'Z';
        memset(written, 'Z', n); /* every byte now the rarest, longest code */
        bw_comma_code code = {0};
        CHECK_EQ(bw_comma_code_make(counted, n, &code), 0);
        bw_buf out;
        CHECK_EQ(bw_buf_init(&out, 0), 0);
        CHECK_EQ(bw_comma_block_write(&code, written, n, &out), 0);
        CHECK(out.len > bw_comma_block_size(&code));
        static const unsigned char final_block[2] = {0x03, 0x00};
        CHECK_EQ(bw_buf_append(&out, final_block, sizeof final_block), 0);
        check_inflates_to((const unsigned char *)out.data, out.len, written, n);
        bw_buf_free(&out);
        bw_comma_code_free(&code);
    }
    free(counted);
    free(written);
}

RUN_TESTS(empty_and_one_value, every_byte_value, lengths_around_the_writer_steps,
          float_text_megabytes, skewed_counts_need_the_length_limit,
          blocks_follow_each_other_and_other_blocks, size_near_the_entropy,
          json_floats_no_larger_than_zlib_fastest, matches_at_their_limits,
          bytes_changed_after_counting_stay_in_bounds)
