/* The tests' setup of a growable buffer (out_buffer.h) that already holds some text: made
   with a given capacity, so that the growth the test then asks for is known. */
#ifndef BW_BUFFER_HOLDING_H
#define BW_BUFFER_HOLDING_H
#include <string.h>

#include "check.h"
#include "out_buffer.h"

/* Makes b with `capacity` bytes and appends `text` to it (failed CHECKs if either fails). */
static void buffer_holding(bw_buf *b, size_t capacity, const char *text) {
    CHECK_EQ(bw_buf_init(b, capacity), 0);
    CHECK_EQ(bw_buf_append(b, text, strlen(text)), 0);
}
#endif
