/* The Parquet page reader's bytes: the file's, read through its descriptor or found in memory,
   the memory pages are read into, a page's header and body read from the file, and a data
   page's parts decompressed. See parquet_internal.h. */
#include <stdlib.h>
#include <string.h>

#include "buffer_pool.h"
#include "file_read.h"
#include "parquet_internal.h"

/* ---- the file's bytes ------------------------------------------------------------------ */

int bw_pq_page_memory_reserve(void **data, size_t *capacity, size_t need) {
    if (need <= *capacity)
        return BW_PAGES_OK;
    if (*data != NULL && *capacity >= BW_PAGE_POOL_SMALLEST) {
        void *grown = realloc(*data, need); /* a pooled block: mremap keeps its pages */
        if (grown == NULL)
            return BW_PAGES_NO_MEMORY;
        *data = grown;
        *capacity = need;
        return BW_PAGES_OK;
    }
    size_t got;
    void *fresh = bw_page_buffer_acquire(need, &got);
    if (fresh == NULL)
        return BW_PAGES_NO_MEMORY;
    if (*data != NULL) {
        memcpy(fresh, *data, *capacity);
        free(*data);
    }
    *data = fresh;
    *capacity = got;
    return BW_PAGES_OK;
}

void bw_pq_page_memory_free(void *data, size_t capacity) {
    bw_page_buffer_release(data, capacity);
}

/* Room for `length` bytes (and one more) in the buffer, what it holds kept. */
static int buffer_reserve(bw_pq_buffer *buffer, size_t length) {
    return bw_pq_page_memory_reserve((void **)&buffer->data, &buffer->capacity, length + 1);
}

void bw_pq_buffer_free(bw_pq_buffer *buffer) {
    bw_pq_page_memory_free(buffer->data, buffer->capacity);
}

/* Reads bytes [offset, offset + length) of the file `fd` into out (see bw_pq_file_bytes). */
static int read_into(int fd, uint8_t *out, size_t length, uint64_t offset, size_t file_size,
                     char *error) {
    int rc = bw_read_exact(fd, out, length, offset, file_size, error, BW_PAGES_ERROR_SIZE);
    if (rc != BW_READ_OK)
        return rc == BW_READ_SHORT ? BW_PAGES_MALFORMED : BW_PAGES_READ_FAILED;
    return BW_PAGES_OK;
}

int bw_pq_file_bytes(const uint8_t *file, int fd, size_t file_size, uint64_t offset,
                     size_t length, bw_pq_buffer *buffer, const uint8_t **bytes, char *error) {
    if (file != NULL) {
        *bytes = file + offset;
        return BW_PAGES_OK;
    }
    int rc = buffer_reserve(buffer, length);
    if (rc == BW_PAGES_OK)
        rc = read_into(fd, buffer->data, length, offset, file_size, error);
    if (rc == BW_PAGES_OK)
        *bytes = buffer->data;
    return rc;
}

/* ---- a page read from the file --------------------------------------------------------- */

int bw_pq_page_too_large(uint64_t bytes, char *error) {
    return bw_pq_malformed(error, "page of %llu bytes with its header, more than the %lld a "
                           "page may hold", (unsigned long long)bytes,
                           (long long)BW_PQ_MAX_PAGE_BYTES);
}

/* Bytes a page header is first looked for in, when the file is read through its descriptor:
   more are read only while the header does not parse in what was read because they end
   inside it. */
#define HEADER_WINDOW 4096

int bw_pq_read_header_at(const uint8_t *file, int fd, size_t file_size, int64_t at,
                         size_t room, bw_pq_buffer *buffer, bw_page_header *h, bw_pq_page *p,
                         char *error) {
    const size_t most = room < BW_PQ_MAX_PAGE_HEADER_BYTES ? room : BW_PQ_MAX_PAGE_HEADER_BYTES;
    size_t window = file != NULL || most < HEADER_WINDOW ? most : HEADER_WINDOW;
    for (;;) {
        int rc = bw_pq_file_bytes(file, fd, file_size, (uint64_t)at, window, buffer, &p->bytes,
                                  error);
        if (rc != BW_PAGES_OK)
            return rc;
        int ran_out;
        rc = bw_pq_parse_page_header(p->bytes, window, h, &p->header_size, &ran_out, error);
        p->at = at;
        p->available = window;
        if (rc == BW_PAGES_MALFORMED && ran_out && window == most && most < room)
            return bw_pq_malformed(error, "page header longer than the %zu bytes a header may "
                                   "take", BW_PQ_MAX_PAGE_HEADER_BYTES);
        if (rc != BW_PAGES_MALFORMED || !ran_out || window == most)
            return rc;
        window = most / 8 < window ? most : window * 8;
    }
}

int bw_pq_page_body(const uint8_t *file, int fd, size_t file_size, bw_pq_page *p,
                    size_t body_size, bw_pq_buffer *buffer, const uint8_t **body, char *error) {
    uint64_t need = (uint64_t)p->header_size + body_size;
    if (need > (uint64_t)BW_PQ_MAX_PAGE_BYTES)
        return bw_pq_page_too_large(need, error);
    if (need > p->available) {
        if (file != NULL) {
            p->bytes = file + p->at;
        } else {
            /* p->bytes is buffer->data: the bytes read with the header are kept */
            int rc = buffer_reserve(buffer, (size_t)need);
            if (rc == BW_PAGES_OK)
                rc = read_into(fd, buffer->data + p->available, (size_t)need - p->available,
                               (uint64_t)p->at + p->available, file_size, error);
            if (rc != BW_PAGES_OK)
                return rc;
            p->bytes = buffer->data;
        }
        p->available = (size_t)need;
    }
    *body = p->bytes + p->header_size;
    return BW_PAGES_OK;
}

/* ---- a data page's parts --------------------------------------------------------------- */

int bw_pq_grow_spans(bw_pq_scratch *s, size_t need) {
    if (need <= s->spans_capacity)
        return BW_PAGES_OK;
    int64_t *grown = realloc(s->spans, need);
    if (grown == NULL)
        return BW_PAGES_NO_MEMORY;
    s->spans = grown;
    s->spans_capacity = need;
    return BW_PAGES_OK;
}

void bw_pq_scratch_free(bw_pq_scratch *s) {
    bw_pq_page_memory_free(s->plain, s->plain_capacity);
    free(s->spans);
    bw_pq_buffer_free(&s->page);
}

/* Where a v1 page's levels are: a 4-byte length, then that many bytes of the hybrid. */
static int v1_level_bytes(const uint8_t **p, size_t *left, const uint8_t **levels,
                          size_t *size, const char *what, char *error) {
    if (*left < 4)
        return bw_pq_malformed(error, "page ends before its %s levels", what);
    uint32_t n = bw_pq_le32(*p);
    if (n > *left - 4)
        return bw_pq_malformed(error, "%s levels of %u bytes overrun the page", what,
                               (unsigned)n);
    *levels = *p + 4;
    *size = n;
    *p += 4 + (size_t)n;
    *left -= 4 + (size_t)n;
    return BW_PAGES_OK;
}

int bw_pq_read_page_parts(int codec, const bw_page_header *h, const uint8_t *body,
                          int max_rep, int max_def, bw_pq_scratch *s, bw_pq_parts *d,
                          char *error) {
    size_t body_size = (size_t)h->compressed_size, plain_size = (size_t)h->uncompressed_size;
    memset(d, 0, sizeof *d);
    int rc;
    if (h->type == BW_PQ_DATA_PAGE_V2) { /* levels first, never compressed */
        if (h->rep_bytes < 0 || h->def_bytes < 0 ||
            (uint64_t)h->rep_bytes + (uint64_t)h->def_bytes > body_size ||
            (uint64_t)h->rep_bytes + (uint64_t)h->def_bytes > plain_size)
            return bw_pq_malformed(error, "v2 page levels overrun the page");
        size_t levels = (size_t)h->rep_bytes + (size_t)h->def_bytes;
        d->rep = body;
        d->rep_size = (size_t)h->rep_bytes;
        d->def = body + h->rep_bytes;
        d->def_size = (size_t)h->def_bytes;
        int compressed = h->is_compressed && codec != BW_PQ_UNCOMPRESSED;
        rc = bw_pq_check_plain_size(compressed ? codec : BW_PQ_UNCOMPRESSED, body + levels,
                                    body_size - levels, plain_size - levels, error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (!compressed) {
            d->values = body + levels;
        } else {
            if (bw_pq_page_memory_reserve((void **)&s->plain, &s->plain_capacity,
                                          plain_size - levels + 1) != BW_PAGES_OK)
                return BW_PAGES_NO_MEMORY;
            rc = bw_pq_decompress(codec, body + levels, body_size - levels, s->plain,
                                  plain_size - levels, error);
            if (rc != BW_PAGES_OK)
                return rc;
            d->values = s->plain;
        }
        d->values_size = plain_size - levels;
        return BW_PAGES_OK;
    }
    const uint8_t *p = body;
    rc = bw_pq_check_plain_size(codec, body, body_size, plain_size, error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (codec != BW_PQ_UNCOMPRESSED) {
        if (bw_pq_page_memory_reserve((void **)&s->plain, &s->plain_capacity, plain_size + 1) !=
            BW_PAGES_OK)
            return BW_PAGES_NO_MEMORY;
        rc = bw_pq_decompress(codec, body, body_size, s->plain, plain_size, error);
        if (rc != BW_PAGES_OK)
            return rc;
        p = s->plain;
    }
    size_t left = plain_size;
    if (max_rep > 0 &&
        (rc = v1_level_bytes(&p, &left, &d->rep, &d->rep_size, "repetition", error)) != 0)
        return rc;
    if (max_def > 0 &&
        (rc = v1_level_bytes(&p, &left, &d->def, &d->def_size, "definition", error)) != 0)
        return rc;
    d->values = p;
    d->values_size = left;
    return BW_PAGES_OK;
}
