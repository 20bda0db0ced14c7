/* A writer of the Thrift compact protocol and of the Parquet metadata and pages built with it,
   for the unit tests of the Parquet page reader: structs with their field ids (the short delta
   form where it fits), integers, bools, lists, binaries, and a page header of each kind.
   Written from the protocol's and the format's descriptions, not from the reader. */
#ifndef BW_PARQUET_WRITER_H
#define BW_PARQUET_WRITER_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "thrift_compact.h"

typedef struct {
    uint8_t data[1 << 16];
    size_t len;
    int16_t last[16]; /* the last field id of each struct open */
    int depth;
} pw_writer;

/* Empties the writer for a new top struct. */
static inline void pw_reset(pw_writer *w) {
    w->len = 0;
    w->last[0] = 0;
    w->depth = 0;
}

static inline void pw_byte(pw_writer *w, uint8_t b) {
    if (w->len == sizeof w->data)
        abort();
    w->data[w->len++] = b;
}

static inline void pw_bytes(pw_writer *w, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        pw_byte(w, ((const uint8_t *)p)[i]);
}

static inline void pw_varint(pw_writer *w, uint64_t v) {
    while (v >= 0x80) {
        pw_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pw_byte(w, (uint8_t)v);
}

static inline uint64_t pw_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline void pw_le32(pw_writer *w, uint32_t v) {
    for (int i = 0; i < 4; i++)
        pw_byte(w, (uint8_t)(v >> (8 * i)));
}

/* A field header of the struct open: the delta form for 1..15, else the long form. */
static inline void pw_field(pw_writer *w, int16_t id, int type) {
    int16_t *last = &w->last[w->depth];
    int delta = id - *last;
    if (delta > 0 && delta <= 15) {
        pw_byte(w, (uint8_t)(delta << 4 | type));
    } else {
        pw_byte(w, (uint8_t)type);
        pw_varint(w, pw_zigzag(id));
    }
    *last = id;
}

/* A struct: the top one (w->depth 0) needs no begin; a nested one is a field, or a list
   element (id 0: no field header). */
static inline void pw_begin(pw_writer *w, int16_t id) {
    if (id)
        pw_field(w, id, BW_THRIFT_STRUCT);
    w->last[++w->depth] = 0;
}

/* Ends the struct open (the top one too). */
static inline void pw_end(pw_writer *w) {
    pw_byte(w, BW_THRIFT_STOP);
    if (w->depth > 0)
        w->depth--;
}

static inline void pw_i32(pw_writer *w, int16_t id, int64_t v) {
    pw_field(w, id, BW_THRIFT_I32);
    pw_varint(w, pw_zigzag(v));
}

static inline void pw_i64(pw_writer *w, int16_t id, int64_t v) {
    pw_field(w, id, BW_THRIFT_I64);
    pw_varint(w, pw_zigzag(v));
}

static inline void pw_bool(pw_writer *w, int16_t id, int v) {
    pw_field(w, id, v ? BW_THRIFT_TRUE : BW_THRIFT_FALSE);
}

static inline void pw_binary(pw_writer *w, int16_t id, const void *p, size_t n) {
    pw_field(w, id, BW_THRIFT_BINARY);
    pw_varint(w, n);
    pw_bytes(w, p, n);
}

/* A list field's header; its n elements follow (structs: pw_begin(w, 0) ... pw_end). */
static inline void pw_list(pw_writer *w, int16_t id, int elem, uint32_t n) {
    pw_field(w, id, BW_THRIFT_LIST);
    if (n < 15) {
        pw_byte(w, (uint8_t)(n << 4 | (uint32_t)elem));
    } else {
        pw_byte(w, (uint8_t)(0xf0 | elem));
        pw_varint(w, n);
    }
}

/* Fields no reader of bulkwire asks for: a binary, a list of i32, a nested struct holding a
   map and a double, ids from `id` on. */
static inline void pw_unknown_fields(pw_writer *w, int16_t id) {
    pw_binary(w, id, "unknown", 7);
    pw_list(w, (int16_t)(id + 1), BW_THRIFT_I32, 2);
    pw_varint(w, 2);
    pw_varint(w, 4);
    pw_begin(w, (int16_t)(id + 40)); /* the long form */
    pw_field(w, 1, BW_THRIFT_MAP);
    pw_varint(w, 1);
    pw_byte(w, BW_THRIFT_I32 << 4 | BW_THRIFT_BINARY);
    pw_varint(w, 6);
    pw_varint(w, 1);
    pw_byte(w, 'x');
    pw_field(w, 2, BW_THRIFT_DOUBLE);
    pw_bytes(w, "\0\0\0\0\0\0\xf0\x3f", 8);
    pw_end(w);
}

/* Page types and encodings, as the format numbers them. */
enum { PW_DATA_PAGE = 0, PW_DICTIONARY_PAGE = 2, PW_DATA_PAGE_V2 = 3 };
enum { PW_PLAIN = 0, PW_RLE = 3 };

/* The start of a PageHeader: its page type and sizes, then the page type's own header
   (field `header_field`) opened with num_values and PLAIN values; the caller ends both. */
static inline void pw_page_header_begin(pw_writer *w, int32_t type, int32_t uncompressed,
                                        int32_t compressed, int16_t header_field,
                                        int32_t num_values) {
    pw_i32(w, 1, type);
    pw_i32(w, 2, uncompressed);
    pw_i32(w, 3, compressed);
    pw_begin(w, header_field);
    pw_i32(w, 1, num_values);
    pw_i32(w, 2, PW_PLAIN);
}

/* A PageHeader of a v1 data page (PLAIN values, RLE levels). */
static inline void pw_data_page_header(pw_writer *w, int32_t uncompressed, int32_t compressed,
                                       int32_t num_values) {
    pw_page_header_begin(w, PW_DATA_PAGE, uncompressed, compressed, 5, num_values);
    pw_i32(w, 3, PW_RLE);
    pw_i32(w, 4, PW_RLE);
    pw_end(w);
    pw_end(w);
}

/* A PageHeader of a dictionary page of PLAIN values. */
static inline void pw_dictionary_page_header(pw_writer *w, int32_t uncompressed,
                                             int32_t compressed, int32_t num_values) {
    pw_page_header_begin(w, PW_DICTIONARY_PAGE, uncompressed, compressed, 7, num_values);
    pw_end(w);
    pw_end(w);
}

/* A copy of n bytes in a block of exactly n bytes, so the sanitizers see any read past them. */
static inline uint8_t *pw_exact(const uint8_t *p, size_t n) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    return copy;
}

#endif
