#include "cql_wire.h"

#include <limits.h>

static void store16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void store32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint16_t load16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static uint32_t load32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* ---- writers ---- */

int bw_cql_put_byte(bw_buf *buf, uint8_t v) { return bw_buf_append(buf, &v, 1); }

int bw_cql_put_short(bw_buf *buf, uint16_t v) {
    uint8_t b[2];
    store16(b, v);
    return bw_buf_append(buf, b, 2);
}

int bw_cql_put_int(bw_buf *buf, int32_t v) {
    uint8_t b[4];
    store32(b, (uint32_t)v);
    return bw_buf_append(buf, b, 4);
}

int bw_cql_put_long(bw_buf *buf, int64_t v) {
    uint8_t b[8];
    store32(b, (uint32_t)((uint64_t)v >> 32));
    store32(b + 4, (uint32_t)(uint64_t)v);
    return bw_buf_append(buf, b, 8);
}

/* A 2-byte length and n bytes, in one reservation (the buffer is unchanged on failure). */
static int put_short_prefixed(bw_buf *buf, const void *p, size_t n) {
    if (n > UINT16_MAX || bw_buf_reserve(buf, 2 + n) < 0)
        return -1;
    uint8_t b[2];
    store16(b, (uint16_t)n);
    bw_buf_put(buf, b, 2);
    if (n)
        bw_buf_put(buf, p, n);
    return 0;
}

static int put_int_prefixed(bw_buf *buf, const void *p, size_t n) {
    if (n > INT32_MAX || bw_buf_reserve(buf, 4 + n) < 0)
        return -1;
    uint8_t b[4];
    store32(b, (uint32_t)n);
    bw_buf_put(buf, b, 4);
    if (n)
        bw_buf_put(buf, p, n);
    return 0;
}

int bw_cql_put_string(bw_buf *buf, const char *s, size_t n) {
    return put_short_prefixed(buf, s, n);
}

int bw_cql_put_long_string(bw_buf *buf, const char *s, size_t n) {
    return put_int_prefixed(buf, s, n);
}

int bw_cql_put_bytes(bw_buf *buf, const void *p, size_t n) {
    if (p == NULL)
        return bw_cql_put_int(buf, -1);
    return put_int_prefixed(buf, p, n);
}

int bw_cql_put_short_bytes(bw_buf *buf, const void *p, size_t n) {
    return put_short_prefixed(buf, p, n);
}

/* n strings (pairs when `values` is given) after a [short] count; on failure the buffer is
   cut back to where it was. */
static int put_strings(bw_buf *buf, const char *const *keys, const char *const *values,
                       size_t n) {
    size_t start = buf->len;
    if (n > UINT16_MAX || bw_cql_put_short(buf, (uint16_t)n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (bw_cql_put_string(buf, keys[i], strlen(keys[i])) < 0 ||
            (values != NULL && bw_cql_put_string(buf, values[i], strlen(values[i])) < 0)) {
            buf->len = start;
            return -1;
        }
    }
    return 0;
}

int bw_cql_put_string_list(bw_buf *buf, const char *const *items, size_t n) {
    return put_strings(buf, items, NULL, n);
}

int bw_cql_put_string_map(bw_buf *buf, const char *const *keys, const char *const *values,
                          size_t n) {
    return put_strings(buf, keys, values, n);
}

void bw_cql_patch_int(bw_buf *buf, size_t at, int32_t v) {
    store32((uint8_t *)buf->data + at, (uint32_t)v);
}

/* ---- the cursor ---- */

int bw_cql_get_raw(bw_cql_cursor *c, size_t n, const uint8_t **p) {
    if (c->left < n)
        return -1;
    *p = c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

int bw_cql_skip(bw_cql_cursor *c, size_t n) {
    const uint8_t *ignored;
    return bw_cql_get_raw(c, n, &ignored);
}

int bw_cql_get_byte(bw_cql_cursor *c, uint8_t *v) {
    const uint8_t *p;
    if (bw_cql_get_raw(c, 1, &p) < 0)
        return -1;
    *v = p[0];
    return 0;
}

int bw_cql_get_short(bw_cql_cursor *c, uint16_t *v) {
    const uint8_t *p;
    if (bw_cql_get_raw(c, 2, &p) < 0)
        return -1;
    *v = load16(p);
    return 0;
}

int bw_cql_get_int(bw_cql_cursor *c, int32_t *v) {
    const uint8_t *p;
    if (bw_cql_get_raw(c, 4, &p) < 0)
        return -1;
    *v = (int32_t)load32(p);
    return 0;
}

int bw_cql_get_long(bw_cql_cursor *c, int64_t *v) {
    const uint8_t *p;
    if (bw_cql_get_raw(c, 8, &p) < 0)
        return -1;
    *v = (int64_t)(((uint64_t)load32(p) << 32) | load32(p + 4));
    return 0;
}

/* A [short] length and that many bytes, consumed together or not at all. */
static int get_short_prefixed(bw_cql_cursor *c, const uint8_t **p, size_t *n) {
    bw_cql_cursor t = *c;
    uint16_t len;
    if (bw_cql_get_short(&t, &len) < 0 || bw_cql_get_raw(&t, len, p) < 0)
        return -1;
    *n = len;
    *c = t;
    return 0;
}

/* An [int] length (at least `lowest`: -1 for [bytes], -2 for [value], 0 otherwise) and,
   when it is not negative, that many bytes. */
static int get_int_prefixed(bw_cql_cursor *c, int32_t lowest, const uint8_t **p, int32_t *n) {
    bw_cql_cursor t = *c;
    int32_t len;
    const uint8_t *q = NULL;
    if (bw_cql_get_int(&t, &len) < 0 || len < lowest)
        return -1;
    if (len >= 0 && bw_cql_get_raw(&t, (size_t)len, &q) < 0)
        return -1;
    *p = q;
    *n = len;
    *c = t;
    return 0;
}

int bw_cql_get_string(bw_cql_cursor *c, const char **s, size_t *n) {
    const uint8_t *p;
    if (get_short_prefixed(c, &p, n) < 0)
        return -1;
    *s = (const char *)p;
    return 0;
}

int bw_cql_get_long_string(bw_cql_cursor *c, const char **s, size_t *n) {
    const uint8_t *p;
    int32_t len;
    if (get_int_prefixed(c, 0, &p, &len) < 0)
        return -1;
    *s = (const char *)p;
    *n = (size_t)len;
    return 0;
}

int bw_cql_get_bytes(bw_cql_cursor *c, const uint8_t **p, int32_t *n) {
    return get_int_prefixed(c, -1, p, n);
}

int bw_cql_get_value(bw_cql_cursor *c, const uint8_t **p, int32_t *n) {
    return get_int_prefixed(c, -2, p, n);
}

int bw_cql_get_short_bytes(bw_cql_cursor *c, const uint8_t **p, size_t *n) {
    return get_short_prefixed(c, p, n);
}

/* The entry kinds of the compound items. */
typedef enum { ENTRY_STRING, ENTRY_STRING_PAIR, ENTRY_STRING_LIST_PAIR, ENTRY_BYTES_PAIR } entry_kind;

static int skip_entry(bw_cql_cursor *t, entry_kind kind) {
    const char *s;
    size_t n;
    if (bw_cql_get_string(t, &s, &n) < 0)
        return -1;
    switch (kind) {
    case ENTRY_STRING:
        return 0;
    case ENTRY_STRING_PAIR:
        return bw_cql_get_string(t, &s, &n);
    case ENTRY_STRING_LIST_PAIR: {
        uint16_t count;
        bw_cql_cursor items;
        return bw_cql_get_string_list(t, &count, &items);
    }
    case ENTRY_BYTES_PAIR: {
        const uint8_t *p;
        int32_t len;
        return bw_cql_get_bytes(t, &p, &len);
    }
    }
    return -1;
}

static int get_compound(bw_cql_cursor *c, entry_kind kind, uint16_t *count,
                        bw_cql_cursor *items) {
    bw_cql_cursor t = *c;
    uint16_t n;
    if (bw_cql_get_short(&t, &n) < 0)
        return -1;
    const uint8_t *first = t.p;
    for (uint16_t i = 0; i < n; i++)
        if (skip_entry(&t, kind) < 0)
            return -1;
    *count = n;
    *items = bw_cql_cursor_make(first, (size_t)(t.p - first));
    *c = t;
    return 0;
}

int bw_cql_get_string_list(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items) {
    return get_compound(c, ENTRY_STRING, count, items);
}

int bw_cql_get_string_map(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items) {
    return get_compound(c, ENTRY_STRING_PAIR, count, items);
}

int bw_cql_get_string_multimap(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items) {
    return get_compound(c, ENTRY_STRING_LIST_PAIR, count, items);
}

int bw_cql_get_bytes_map(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items) {
    return get_compound(c, ENTRY_BYTES_PAIR, count, items);
}

/* ---- the frame header ---- */

void bw_cql_header_write(uint8_t out[BW_CQL_HEADER_SIZE], const bw_cql_header *h) {
    out[0] = h->version;
    out[1] = h->flags;
    store16(out + 2, (uint16_t)h->stream);
    out[4] = h->opcode;
    store32(out + 5, h->length);
}

int bw_cql_put_header(bw_buf *buf, const bw_cql_header *h) {
    uint8_t b[BW_CQL_HEADER_SIZE];
    bw_cql_header_write(b, h);
    return bw_buf_append(buf, b, sizeof b);
}

int bw_cql_header_read(const uint8_t in[BW_CQL_HEADER_SIZE], bw_cql_header *h) {
    uint32_t length = load32(in + 5);
    if (length > INT32_MAX)
        return -1;
    h->version = in[0];
    h->flags = in[1];
    h->stream = (int16_t)load16(in + 2);
    h->opcode = in[4];
    h->length = length;
    return 0;
}

int bw_cql_skip_response_extras(bw_cql_cursor *c, uint8_t flags) {
    bw_cql_cursor t = *c;
    uint16_t count;
    bw_cql_cursor items;
    if ((flags & BW_CQL_FLAG_TRACING) && bw_cql_skip(&t, 16) < 0)
        return -1;
    if ((flags & BW_CQL_FLAG_WARNING) && bw_cql_get_string_list(&t, &count, &items) < 0)
        return -1;
    if ((flags & BW_CQL_FLAG_CUSTOM_PAYLOAD) && bw_cql_get_bytes_map(&t, &count, &items) < 0)
        return -1;
    *c = t;
    return 0;
}
