/* A growable byte buffer shared by every writer. It knows nothing of Python: allocation
   failure is reported as -1 and the binding layer turns it into MemoryError. */
#ifndef BW_OUT_BUFFER_H
#define BW_OUT_BUFFER_H
#include <stddef.h>
#include <string.h>

typedef struct bw_buf bw_buf;
struct bw_buf {
    char *data;
    size_t len;
    size_t cap;
    /* NULL: the memory is malloc'd and grows by realloc. Set by a binding layer that keeps
       the bytes in an object of its own (`owner`): called to grow to `cap` bytes, it returns
       0 (data and cap updated), -1 when out of memory, or 1 to have realloc do it. When it
       fails while `owner` is set, the content may be lost (the buffer is left empty). */
    int (*regrow)(bw_buf *buf, size_t cap);
    void *owner;
};

/* Starts an empty buffer with room for `capacity` bytes. 0, or -1 when out of memory. */
int bw_buf_init(bw_buf *buf, size_t capacity);
/* Frees the memory (unless an owner holds it: see regrow); the buffer is empty and reusable
   afterwards. */
void bw_buf_free(bw_buf *buf);
/* Grows so that at least `extra` more bytes fit. 0, or -1 when out of memory (buf unchanged). */
int bw_buf_grow(bw_buf *buf, size_t extra);
/* Gives the memory to the caller (who frees it with free()) and leaves buf empty. */
char *bw_buf_detach(bw_buf *buf, size_t *len);

/* Blocks from this size on get huge-page advice from bw_advise_huge_pages. */
#define BW_HUGE_PAGE_ADVICE_MIN ((size_t)4 << 20)
/* Asks the kernel to back the whole pages of a large block that is about to be written with
   transparent huge pages (Linux; elsewhere, and below BW_HUGE_PAGE_ADVICE_MIN, nothing). Only
   this block is affected, never the allocator's settings. */
void bw_advise_huge_pages(void *data, size_t len);

/* Makes room for `extra` bytes so that the unchecked writers below may follow. */
static inline int bw_buf_reserve(bw_buf *buf, size_t extra) {
    if (buf->cap - buf->len >= extra)
        return 0;
    return bw_buf_grow(buf, extra);
}

/* Writers that assume room was reserved. */
static inline void bw_buf_put(bw_buf *buf, const void *src, size_t n) {
    memcpy(buf->data + buf->len, src, n);
    buf->len += n;
}
static inline void bw_buf_putc(bw_buf *buf, char c) { buf->data[buf->len++] = c; }
static inline char *bw_buf_tail(bw_buf *buf) { return buf->data + buf->len; }

/* Checked append. 0, or -1 when out of memory. */
static inline int bw_buf_append(bw_buf *buf, const void *src, size_t n) {
    if (bw_buf_reserve(buf, n) < 0)
        return -1;
    bw_buf_put(buf, src, n);
    return 0;
}
#define BW_BUF_APPEND_LITERAL(buf, lit) bw_buf_append((buf), (lit), sizeof(lit) - 1)

#endif
