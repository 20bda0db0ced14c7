#include "out_buffer.h"

#include <stdint.h>
#include <stdlib.h>

int bw_buf_init(bw_buf *buf, size_t capacity) {
    buf->len = 0;
    buf->cap = 0;
    buf->data = NULL;
    if (capacity == 0)
        capacity = 64;
    buf->data = malloc(capacity);
    if (buf->data == NULL)
        return -1;
    buf->cap = capacity;
    return 0;
}

void bw_buf_free(bw_buf *buf) {
    free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

int bw_buf_grow(bw_buf *buf, size_t extra) {
    if (extra > SIZE_MAX / 2 - buf->len)
        return -1;
    size_t need = buf->len + extra;
    size_t cap = buf->cap ? buf->cap : 64;
    while (cap < need)
        cap *= 2; /* doubling keeps appends amortised O(1) */
    char *grown = realloc(buf->data, cap);
    if (grown == NULL)
        return -1;
    buf->data = grown;
    buf->cap = cap;
    return 0;
}

char *bw_buf_detach(bw_buf *buf, size_t *len) {
    char *data = buf->data;
    if (len != NULL)
        *len = buf->len;
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    return data;
}
