/* The tests' helpers for a growable buffer (out_buffer.h): one made already holding some
   text (with a given capacity, so that the growth the test then asks for is known), and the
   comparison of what one holds with the bytes expected. */
#ifndef BW_BUFFER_CHECK_H
#define BW_BUFFER_CHECK_H
#include <string.h>

#include "check.h"
#include "out_buffer.h"

/* Makes b with `capacity` bytes and appends `text` to it (failed CHECKs if either fails). */
static inline void buffer_holding(bw_buf *b, size_t capacity, const char *text) {
    CHECK_EQ(bw_buf_init(b, capacity), 0);
    CHECK_EQ(bw_buf_append(b, text, strlen(text)), 0);
}

/* 1 when b holds exactly the n bytes at want. */
static inline int buffer_is(const bw_buf *b, const void *want, size_t n) {
    return b->len == n && memcmp(b->data, want, n) == 0;
}
#endif
