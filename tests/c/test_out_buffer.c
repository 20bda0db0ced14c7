/* The growable output buffer: growth keeps the bytes, impossible sizes fail and leave the
   buffer as it was, detach hands the memory over.
   sources: out_buffer.c */
#include <stdint.h>
#include <stdlib.h>

#include "buffer_check.h"
#include "check.h"
#include "out_buffer.h"

TEST(appends_grow_and_keep_the_bytes) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 1), 0);
    CHECK_EQ(b.cap, 1);
    for (int i = 0; i < 10000; i++) {
        char c = (char)('a' + i % 26);
        CHECK_EQ(bw_buf_append(&b, &c, 1), 0);
    }
    CHECK_EQ(b.len, 10000);
    CHECK(b.cap >= b.len);
    int bad = 0;
    for (int i = 0; i < 10000; i++)
        bad += b.data[i] != (char)('a' + i % 26);
    CHECK_EQ(bad, 0);
    bw_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    /* freed is empty and reusable */
    CHECK_EQ(BW_BUF_APPEND_LITERAL(&b, "again"), 0);
    CHECK_BYTES(b.data, b.len, "again");
    bw_buf_free(&b);
}

TEST(zero_capacity_gets_a_default) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 0), 0);
    CHECK(b.cap > 0 && b.data != NULL && b.len == 0);
    bw_buf_free(&b);
}

TEST(reserve_then_unchecked_writes) {
    bw_buf b;
    CHECK_EQ(bw_buf_init(&b, 4), 0);
    CHECK_EQ(bw_buf_reserve(&b, 100), 0);
    CHECK(b.cap - b.len >= 100);
    size_t cap = b.cap;
    bw_buf_put(&b, "hello", 5);
    bw_buf_putc(&b, ' ');
    memcpy(bw_buf_tail(&b), "world", 5);
    b.len += 5;
    CHECK_BYTES(b.data, b.len, "hello world");
    CHECK_EQ(bw_buf_reserve(&b, 10), 0);
    CHECK_EQ(b.cap, cap); /* room was there: no reallocation */
    bw_buf_free(&b);
}

TEST(impossible_growth_fails_and_keeps_the_buffer) {
    bw_buf b;
    buffer_holding(&b, 8, "keep");
    char *data = b.data;
    size_t cap = b.cap;
    CHECK_EQ(bw_buf_grow(&b, SIZE_MAX), -1);
    CHECK_EQ(bw_buf_grow(&b, SIZE_MAX / 2), -1);
    CHECK_EQ(bw_buf_reserve(&b, SIZE_MAX - 2), -1);
    CHECK(b.data == data && b.cap == cap);
    CHECK_BYTES(b.data, b.len, "keep");
    bw_buf_free(&b);
}

TEST(detach_hands_the_memory_over) {
    bw_buf b;
    buffer_holding(&b, 2, "{\"a\":1}");
    size_t len = 0;
    char *data = bw_buf_detach(&b, &len);
    CHECK_BYTES(data, len, "{\"a\":1}");
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    free(data);
    CHECK(bw_buf_detach(&b, NULL) == NULL);
}

RUN_TESTS(appends_grow_and_keep_the_bytes, zero_capacity_gets_a_default,
          reserve_then_unchecked_writes, impossible_growth_fails_and_keeps_the_buffer,
          detach_hands_the_memory_over)
