/* The Thrift compact protocol reader on its own: every read at its limits (varints of 10
   and 11 bytes, field ids and deltas at the int16 range, i32 and i64 extremes through
   zigzag, list and map counts against what is left, the nesting depth at exactly
   BW_THRIFT_MAX_DEPTH), every failure message, the first error kept and every read after it
   refused, and random nested values written by a compact writer here (from the protocol's
   description) skipped to their exact end, every truncation of them refused. Buffers are
   heap blocks of exactly their size, so the sanitizers see any read past them. A failure says
   whether the bytes ran out (more of them might read) or what they hold is refused. And the
   struct reader driven by a table of fields: known fields read where the table says, unknown
   ones skipped, an integer of another wire type refused, a struct, list or bool of another
   wire type skipped, nested tables and handlers, a handler's own refusal handed back, the
   nesting depth bounded, and every truncation refused.
   sources: thrift_compact.c */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "thrift_compact.h"

/* A copy of n bytes in a block of exactly n bytes. */
static uint8_t *exact(const uint8_t *p, size_t n) {
    uint8_t *copy = calloc(1, n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    return copy;
}

/* ---- a compact protocol writer ---- */

typedef struct {
    uint8_t data[1 << 16];
    size_t len;
} writer;

static void put_byte(writer *w, uint8_t b) {
    if (w->len == sizeof w->data)
        abort(); /* the values below are bounded well under this */
    w->data[w->len++] = b;
}

static void put_varint(writer *w, uint64_t v) {
    while (v >= 0x80) {
        put_byte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(w, (uint8_t)v);
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* A field header: the short form when the delta from last is 1..15, else the long form. */
static void put_field(writer *w, int16_t *last, int16_t id, int type) {
    int delta = id - *last;
    if (delta > 0 && delta <= 15) {
        put_byte(w, (uint8_t)(delta << 4 | type));
    } else {
        put_byte(w, (uint8_t)type);
        put_varint(w, zigzag(id));
    }
    *last = id;
}

static void put_list_header(writer *w, int elem, uint32_t n) {
    if (n < 15) {
        put_byte(w, (uint8_t)(n << 4 | (uint32_t)elem));
    } else {
        put_byte(w, (uint8_t)(0xf0 | elem));
        put_varint(w, n);
    }
}

/* ---- reading one thing from bytes ---- */

typedef struct {
    uint8_t *buf;
    bw_thrift t;
} reading;

static void start(reading *r, const uint8_t *p, size_t n) {
    r->buf = exact(p, n);
    bw_thrift_init(&r->t, r->buf, n);
}

static void done(reading *r) { free(r->buf); }

/* The field header in p, read at the start of a struct (last id 0). */
static int read_field(const uint8_t *p, size_t n, int16_t last, int *type, int16_t *id,
                      const char **error) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_field(&r.t, &last, type, id);
    *error = r.t.error;
    CHECK(r.t.pos <= r.t.end);
    done(&r);
    return rc;
}

TEST(field_ids_by_delta_and_long_form) {
    int type;
    int16_t id;
    const char *error;
    /* delta 1..15 from the previous id */
    for (int delta = 1; delta <= 15; delta++) {
        uint8_t h = (uint8_t)(delta << 4 | BW_THRIFT_I32);
        CHECK_EQ(read_field(&h, 1, 100, &type, &id, &error), 0);
        CHECK_EQ(id, 100 + delta);
        CHECK_EQ(type, BW_THRIFT_I32);
    }
    /* a delta past INT16_MAX is refused */
    uint8_t h = 0x1c;
    CHECK_EQ(read_field(&h, 1, INT16_MAX - 1, &type, &id, &error), 0);
    CHECK_EQ(id, INT16_MAX);
    CHECK_EQ(read_field(&h, 1, INT16_MAX, &type, &id, &error), -1);
    CHECK_BYTES(error, strlen(error), "field id out of range in metadata");
    /* the long form: a zigzag varint, both ends of int16 and one past each */
    const int64_t ids[] = {INT16_MIN, -1, 0, 1, INT16_MAX, INT16_MIN - 1, INT16_MAX + 1,
                           INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        writer w = {.len = 0};
        put_byte(&w, BW_THRIFT_BINARY);
        put_varint(&w, zigzag(ids[i]));
        int fits = ids[i] >= INT16_MIN && ids[i] <= INT16_MAX;
        CHECK_EQ(read_field(w.data, w.len, 7, &type, &id, &error), fits ? 0 : -1);
        if (fits)
            CHECK_EQ(id, ids[i]);
        else
            CHECK_BYTES(error, strlen(error), "field id out of range in metadata");
    }
    /* the stop field: id 0 whatever its high bits */
    h = 0x00;
    CHECK_EQ(read_field(&h, 1, 5, &type, &id, &error), 0);
    CHECK(type == BW_THRIFT_STOP && id == 0);
}

TEST(field_types_past_struct_are_refused) {
    int type;
    int16_t id;
    const char *error;
    for (int t = BW_THRIFT_TRUE; t <= 15; t++) {
        uint8_t h = (uint8_t)(0x10 | t);
        CHECK_EQ(read_field(&h, 1, 0, &type, &id, &error), t <= BW_THRIFT_STRUCT ? 0 : -1);
        if (t > BW_THRIFT_STRUCT)
            CHECK_BYTES(error, strlen(error), "unknown field type in metadata");
    }
}

TEST(a_struct_or_field_that_ends_early) {
    int type;
    int16_t id;
    const char *error;
    CHECK_EQ(read_field(NULL, 0, 0, &type, &id, &error), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a struct");
    uint8_t long_form[] = {BW_THRIFT_I32, 0x80}; /* the id's varint goes on past the end */
    for (size_t n = 1; n <= sizeof long_form; n++) {
        CHECK_EQ(read_field(long_form, n, 0, &type, &id, &error), -1);
        CHECK_BYTES(error, strlen(error), "metadata ends inside a varint");
    }
}

/* Reads an i64 field's value from p (its varint). */
static int read_i64(const uint8_t *p, size_t n, int type, int64_t *v, const char **error) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_i64(&r.t, type, v);
    *error = r.t.error;
    CHECK(r.t.pos <= r.t.end);
    done(&r);
    return rc;
}

static int read_i32(const uint8_t *p, size_t n, int type, int32_t *v, const char **error) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_i32(&r.t, type, v);
    *error = r.t.error;
    done(&r);
    return rc;
}

TEST(integers_at_their_extremes) {
    const int64_t values[] = {0, -1, 1, INT32_MIN, INT32_MAX, (int64_t)INT32_MIN - 1,
                              (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX, INT64_MIN + 1};
    const char *error;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        writer w = {.len = 0};
        put_varint(&w, zigzag(values[i]));
        int64_t v64 = 0;
        CHECK_EQ(read_i64(w.data, w.len, BW_THRIFT_I64, &v64, &error), 0);
        CHECK(v64 == values[i]);
        int32_t v32 = 0;
        int fits = values[i] >= INT32_MIN && values[i] <= INT32_MAX;
        CHECK_EQ(read_i32(w.data, w.len, BW_THRIFT_I32, &v32, &error), fits ? 0 : -1);
        if (fits)
            CHECK_EQ(v32, values[i]);
        else
            CHECK_BYTES(error, strlen(error), "i32 field out of range in metadata");
    }
}

TEST(an_integer_of_another_type_is_refused) {
    const uint8_t one = 0x02;
    const char *error;
    int64_t v64;
    int32_t v32;
    const int others[] = {BW_THRIFT_BYTE, BW_THRIFT_I16, BW_THRIFT_I32, BW_THRIFT_BINARY};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CHECK_EQ(read_i64(&one, 1, others[i], &v64, &error), -1);
        CHECK_BYTES(error, strlen(error), "integer field of another type in metadata");
    }
    CHECK_EQ(read_i32(&one, 1, BW_THRIFT_I64, &v32, &error), -1);
    CHECK_BYTES(error, strlen(error), "integer field of another type in metadata");
    CHECK_EQ(read_i32(&one, 1, BW_THRIFT_I16, &v32, &error), -1);
}

TEST(varints_of_ten_bytes_and_longer) {
    const char *error;
    int64_t v;
    /* ten bytes: the longest a 64-bit value needs, read */
    uint8_t ten[10];
    memset(ten, 0xff, 9);
    ten[9] = 0x01;
    CHECK_EQ(read_i64(ten, sizeof ten, BW_THRIFT_I64, &v, &error), 0);
    CHECK(v == INT64_MIN); /* zigzag of all ones */
    /* an eleventh byte is refused, as soon as the tenth says more follows */
    uint8_t eleven[11];
    memset(eleven, 0x80, 10);
    eleven[10] = 0x00;
    CHECK_EQ(read_i64(eleven, sizeof eleven, BW_THRIFT_I64, &v, &error), -1);
    CHECK_BYTES(error, strlen(error), "varint longer than 10 bytes");
    CHECK_EQ(read_i64(eleven, 10, BW_THRIFT_I64, &v, &error), -1);
    CHECK_BYTES(error, strlen(error), "varint longer than 10 bytes");
    /* every shorter cut of a long varint ends inside it */
    for (size_t n = 0; n < 10; n++) {
        CHECK_EQ(read_i64(ten, n, BW_THRIFT_I64, &v, &error), -1);
        CHECK_BYTES(error, strlen(error), "metadata ends inside a varint");
    }
}

static int read_list(const uint8_t *p, size_t n, int *elem, uint32_t *count, const char **error) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_list(&r.t, elem, count);
    *error = r.t.error;
    CHECK(r.t.pos <= r.t.end);
    done(&r);
    return rc;
}

TEST(list_headers_and_their_counts) {
    const char *error;
    int elem;
    uint32_t count;
    /* short form: up to 14 elements, each at least one byte, so the count must fit */
    uint8_t buf[64] = {0};
    for (uint32_t n = 0; n < 15; n++) {
        buf[0] = (uint8_t)(n << 4 | BW_THRIFT_I32);
        CHECK_EQ(read_list(buf, 1 + n, &elem, &count, &error), 0);
        CHECK(elem == BW_THRIFT_I32 && count == n);
        if (n > 0) {
            CHECK_EQ(read_list(buf, n, &elem, &count, &error), -1);
            CHECK_BYTES(error, strlen(error), "list longer than the metadata holding it");
        }
    }
    /* long form: a varint count, 15 and up */
    writer w = {.len = 0};
    put_list_header(&w, BW_THRIFT_BYTE, 40);
    size_t head = w.len;
    CHECK_EQ(read_list(w.data, head + 40, &elem, &count, &error), 0);
    CHECK(elem == BW_THRIFT_BYTE && count == 40);
    CHECK_EQ(read_list(w.data, head + 39, &elem, &count, &error), -1);
    /* a count far past what any buffer holds */
    static const uint8_t huge[] = {0xf5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK_EQ(read_list(huge, sizeof huge, &elem, &count, &error), -1);
    CHECK_BYTES(error, strlen(error), "list longer than the metadata holding it");
    /* unknown element types: 0 and 13..15 */
    const int bad[] = {0, 13, 14, 15};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        buf[0] = (uint8_t)(0x10 | bad[i]);
        CHECK_EQ(read_list(buf, 2, &elem, &count, &error), -1);
        CHECK_BYTES(error, strlen(error), "unknown list element type in metadata");
    }
    /* a header that is not there, or whose count is cut */
    CHECK_EQ(read_list(NULL, 0, &elem, &count, &error), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a list header");
    static const uint8_t cut[] = {0xf5, 0x80};
    CHECK_EQ(read_list(cut, sizeof cut, &elem, &count, &error), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a varint");
}

TEST(the_depth_limit_is_exact) {
    reading r;
    start(&r, NULL, 0);
    for (int i = 0; i < BW_THRIFT_MAX_DEPTH; i++)
        CHECK_EQ(bw_thrift_struct_begin(&r.t), 0);
    CHECK_EQ(r.t.depth, BW_THRIFT_MAX_DEPTH);
    CHECK_EQ(bw_thrift_struct_begin(&r.t), -1);
    CHECK_BYTES(r.t.error, strlen(r.t.error), "metadata nested too deeply");
    done(&r);
    /* a struct nested MAX_DEPTH deep is skipped (the skip itself is the first level); one
       level more is refused */
    for (int levels = BW_THRIFT_MAX_DEPTH; levels <= BW_THRIFT_MAX_DEPTH + 1; levels++) {
        writer w = {.len = 0};
        for (int i = 1; i < levels; i++)
            put_byte(&w, 0x10 | BW_THRIFT_STRUCT); /* field 1: a struct */
        for (int i = 0; i < levels; i++)
            put_byte(&w, BW_THRIFT_STOP);
        start(&r, w.data, w.len);
        int rc = bw_thrift_skip(&r.t, BW_THRIFT_STRUCT);
        CHECK_EQ(rc, levels <= BW_THRIFT_MAX_DEPTH ? 0 : -1);
        CHECK(rc < 0 || (r.t.pos == r.t.end && r.t.depth == 0));
        CHECK(rc == 0 || strcmp(r.t.error, "metadata nested too deeply") == 0);
        done(&r);
    }
    /* lists count as levels too */
    writer w = {.len = 0};
    for (int i = 0; i < BW_THRIFT_MAX_DEPTH + 1; i++)
        put_list_header(&w, BW_THRIFT_LIST, 1);
    put_list_header(&w, BW_THRIFT_BYTE, 0);
    start(&r, w.data, w.len);
    CHECK_EQ(bw_thrift_skip(&r.t, BW_THRIFT_LIST), -1);
    CHECK_BYTES(r.t.error, strlen(r.t.error), "metadata nested too deeply");
    done(&r);
}

TEST(the_first_error_stays_and_every_read_after_it_fails) {
    static const uint8_t data[] = {0x15, 0x02, 0x00, 0x19, 0x00};
    reading r;
    start(&r, data, sizeof data);
    int16_t last = 0, id;
    int type, elem;
    int32_t v32;
    int64_t v64;
    uint32_t count;
    CHECK_EQ(bw_thrift_field(&r.t, &last, &type, &id), 0);
    CHECK_EQ(bw_thrift_i64(&r.t, type, &v64), -1); /* an i32 read as i64 */
    const char *first = r.t.error;
    const uint8_t *pos = r.t.pos;
    CHECK(first != NULL);
    CHECK_EQ(bw_thrift_field(&r.t, &last, &type, &id), -1);
    CHECK_EQ(bw_thrift_i32(&r.t, BW_THRIFT_I32, &v32), -1);
    CHECK_EQ(bw_thrift_i64(&r.t, BW_THRIFT_I64, &v64), -1);
    CHECK_EQ(bw_thrift_list(&r.t, &elem, &count), -1);
    CHECK_EQ(bw_thrift_skip(&r.t, BW_THRIFT_BYTE), -1);
    CHECK_EQ(bw_thrift_struct_begin(&r.t), -1);
    CHECK_EQ(bw_thrift_struct_end(&r.t), -1);
    CHECK(r.t.error == first);
    CHECK(r.t.pos == pos); /* nothing more was read */
    done(&r);
}

static int skip_all(const uint8_t *p, size_t n, int type, const char **error, size_t *used) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_skip(&r.t, type);
    *error = r.t.error;
    *used = (size_t)(r.t.pos - r.buf);
    CHECK(r.t.pos <= r.t.end);
    CHECK(rc < 0 || r.t.depth == 0);
    done(&r);
    return rc;
}

TEST(skipping_each_type) {
    const char *error;
    size_t used;
    /* booleans of a field live in its header: nothing to skip */
    CHECK_EQ(skip_all(NULL, 0, BW_THRIFT_TRUE, &error, &used), 0);
    CHECK_EQ(skip_all(NULL, 0, BW_THRIFT_FALSE, &error, &used), 0);
    static const uint8_t byte[] = {0x7f};
    CHECK_EQ(skip_all(byte, 1, BW_THRIFT_BYTE, &error, &used), 0);
    CHECK_EQ(used, 1);
    CHECK_EQ(skip_all(byte, 0, BW_THRIFT_BYTE, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a value");
    static const uint8_t dbl[8] = {0};
    CHECK_EQ(skip_all(dbl, 8, BW_THRIFT_DOUBLE, &error, &used), 0);
    CHECK_EQ(used, 8);
    CHECK_EQ(skip_all(dbl, 7, BW_THRIFT_DOUBLE, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a value");
    static const uint8_t binary[] = {0x03, 'a', 'b', 'c'};
    CHECK_EQ(skip_all(binary, 4, BW_THRIFT_BINARY, &error, &used), 0);
    CHECK_EQ(used, 4);
    CHECK_EQ(skip_all(binary, 3, BW_THRIFT_BINARY, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a value");
    static const uint8_t huge_binary[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK_EQ(skip_all(huge_binary, sizeof huge_binary, BW_THRIFT_BINARY, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "metadata ends inside a value");
    /* a list of booleans: one byte each, unlike a field's */
    static const uint8_t bools[] = {0x31, 0x01, 0x02, 0x01};
    CHECK_EQ(skip_all(bools, 4, BW_THRIFT_LIST, &error, &used), 0);
    CHECK_EQ(used, 4);
    CHECK_EQ(skip_all(bools, 4, BW_THRIFT_SET, &error, &used), 0);
    CHECK_EQ(skip_all(bools, 3, BW_THRIFT_LIST, &error, &used), -1);
    /* unknown value types */
    const int bad[] = {BW_THRIFT_STOP, 13, 14, 15, -1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(skip_all(byte, 1, bad[i], &error, &used), -1);
        CHECK_BYTES(error, strlen(error), "unknown value type in metadata");
    }
}

TEST(skipping_maps) {
    const char *error;
    size_t used;
    static const uint8_t empty[] = {0x00}; /* no kinds byte follows an empty map */
    CHECK_EQ(skip_all(empty, 1, BW_THRIFT_MAP, &error, &used), 0);
    CHECK_EQ(used, 1);
    /* 2 entries i32 -> binary */
    static const uint8_t map[] = {0x02, 0x58, 0x02, 0x01, 'x', 0x04, 0x00};
    CHECK_EQ(skip_all(map, sizeof map, BW_THRIFT_MAP, &error, &used), 0);
    CHECK_EQ(used, sizeof map);
    for (size_t n = 0; n < sizeof map; n++)
        CHECK_EQ(skip_all(map, n, BW_THRIFT_MAP, &error, &used), -1);
    /* bool keys and values take one byte each */
    static const uint8_t bools[] = {0x02, 0x12, 0x01, 0x02, 0x02, 0x01};
    CHECK_EQ(skip_all(bools, sizeof bools, BW_THRIFT_MAP, &error, &used), 0);
    CHECK_EQ(used, sizeof bools);
    /* a count past what is left */
    static const uint8_t lying[] = {0x05, 0x33, 0x00, 0x00};
    CHECK_EQ(skip_all(lying, sizeof lying, BW_THRIFT_MAP, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "map longer than the metadata holding it");
    /* the count is there, the kinds byte is not: the count says there is more */
    static const uint8_t no_kinds[] = {0x01};
    CHECK_EQ(skip_all(no_kinds, 1, BW_THRIFT_MAP, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "map longer than the metadata holding it");
    /* unknown key or value kinds */
    const uint8_t kinds[] = {0x05, 0x50, 0xd5, 0x5d, 0xff};
    for (size_t i = 0; i < sizeof kinds; i++) {
        uint8_t bad[] = {0x01, kinds[i], 0x00, 0x00};
        CHECK_EQ(skip_all(bad, sizeof bad, BW_THRIFT_MAP, &error, &used), -1);
        CHECK_BYTES(error, strlen(error), "unknown map types in metadata");
    }
}

/* ---- random values: written here, skipped there ---- */

/* Writes a random value of `type`, nested at most `depth` more levels. */
static void put_random(writer *w, int type, int depth, unsigned long long *rng) {
    switch (type) {
    case BW_THRIFT_TRUE:
    case BW_THRIFT_FALSE:
        return;
    case BW_THRIFT_BYTE:
        put_byte(w, (uint8_t)check_rand(rng));
        return;
    case BW_THRIFT_I16:
    case BW_THRIFT_I32:
    case BW_THRIFT_I64:
        put_varint(w, zigzag((int64_t)check_rand(rng) >> (check_rand(rng) % 64)));
        return;
    case BW_THRIFT_DOUBLE:
        for (int i = 0; i < 8; i++)
            put_byte(w, (uint8_t)check_rand(rng));
        return;
    case BW_THRIFT_BINARY: {
        uint32_t n = (uint32_t)(check_rand(rng) % 20);
        put_varint(w, n);
        for (uint32_t i = 0; i < n; i++)
            put_byte(w, (uint8_t)check_rand(rng));
        return;
    }
    default:
        break;
    }
    int leaf = depth <= 0;
    /* containers hold leaves only at the last level */
    int pick_max = leaf ? BW_THRIFT_BINARY : BW_THRIFT_STRUCT;
    if (type == BW_THRIFT_LIST || type == BW_THRIFT_SET) {
        int elem = 1 + (int)(check_rand(rng) % (uint64_t)pick_max);
        uint32_t n = (uint32_t)(check_rand(rng) % 7);
        put_list_header(w, elem, n);
        for (uint32_t i = 0; i < n; i++) {
            if (elem == BW_THRIFT_TRUE || elem == BW_THRIFT_FALSE)
                put_byte(w, (uint8_t)(1 + check_rand(rng) % 2));
            else
                put_random(w, elem, depth - 1, rng);
        }
    } else if (type == BW_THRIFT_MAP) {
        uint32_t n = (uint32_t)(check_rand(rng) % 6);
        put_varint(w, n);
        if (n == 0)
            return;
        int key = 1 + (int)(check_rand(rng) % (uint64_t)pick_max);
        int value = 1 + (int)(check_rand(rng) % (uint64_t)pick_max);
        put_byte(w, (uint8_t)(key << 4 | value));
        for (uint32_t i = 0; i < n; i++) {
            int kinds[2] = {key, value};
            for (int k = 0; k < 2; k++) {
                if (kinds[k] == BW_THRIFT_TRUE || kinds[k] == BW_THRIFT_FALSE)
                    put_byte(w, (uint8_t)(1 + check_rand(rng) % 2));
                else
                    put_random(w, kinds[k], depth - 1, rng);
            }
        }
    } else { /* struct: fields with increasing and jumping ids */
        int16_t last = 0;
        int fields = (int)(check_rand(rng) % 7);
        for (int i = 0; i < fields; i++) {
            int16_t id = (int16_t)(last + 1 + (int16_t)(check_rand(rng) % 40));
            int ftype = 1 + (int)(check_rand(rng) % (uint64_t)pick_max);
            put_field(w, &last, id, ftype);
            put_random(w, ftype, depth - 1, rng);
        }
        put_byte(w, BW_THRIFT_STOP);
    }
}

/* Whether skipping a value of `type` in p (n bytes) failed because the bytes ended. */
static int ran_out_skipping(const uint8_t *p, size_t n, int type) {
    reading r;
    start(&r, p, n);
    int rc = bw_thrift_skip(&r.t, type);
    int ran_out = r.t.ran_out;
    CHECK(rc < 0 || !ran_out);
    done(&r);
    return ran_out;
}

TEST(random_values_are_skipped_to_their_end_and_every_cut_is_refused) {
    unsigned long long rng = 0xdecafbadULL;
    static const int containers[] = {BW_THRIFT_STRUCT, BW_THRIFT_LIST, BW_THRIFT_SET, BW_THRIFT_MAP};
    for (int round = 0; round < 400; round++) {
        static writer w;
        w.len = 0;
        int type = containers[round % 4];
        put_random(&w, type, 1 + round % 3, &rng);
        const char *error;
        size_t used;
        CHECK_EQ(skip_all(w.data, w.len, type, &error, &used), 0);
        CHECK_EQ(used, w.len);
        /* trailing bytes are not the value's: it stops at its end */
        w.data[w.len] = 0xee;
        CHECK_EQ(skip_all(w.data, w.len + 1, type, &error, &used), 0);
        CHECK_EQ(used, w.len);
        /* every cut is refused, as having run out of bytes (more of them would read it) */
        CHECK(!ran_out_skipping(w.data, w.len, type));
        for (size_t n = 0; n < w.len; n++) {
            if (skip_all(w.data, n, type, &error, &used) != -1 || error == NULL ||
                !ran_out_skipping(w.data, n, type)) {
                CHECK(0);
                break;
            }
        }
    }
}

TEST(running_out_of_bytes_is_told_apart_from_what_the_bytes_say) {
    /* (every cut of a random value runs out: see the test above) a list or map counting
       more elements than the bytes left, a binary longer than them */
    static const uint8_t long_list[] = {0xf5, 0x10, 0x00};
    CHECK(ran_out_skipping(long_list, sizeof long_list, BW_THRIFT_LIST));
    static const uint8_t long_map[] = {0x10, 0x55, 0x00};
    CHECK(ran_out_skipping(long_map, sizeof long_map, BW_THRIFT_MAP));
    static const uint8_t long_binary[] = {0x80, 0x80, 0x04, 'a'};
    CHECK(ran_out_skipping(long_binary, sizeof long_binary, BW_THRIFT_BINARY));
    /* what no more bytes would change: an unknown type, an 11-byte varint, the depth limit,
       an element type past struct, an i32 field holding an i64 */
    static const uint8_t unknown[] = {0x1d, 0x00};
    CHECK(!ran_out_skipping(unknown, sizeof unknown, BW_THRIFT_STRUCT));
    static const uint8_t varint[] = {0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0x01, 0x00};
    CHECK(!ran_out_skipping(varint, sizeof varint, BW_THRIFT_STRUCT));
    uint8_t deep[64];
    memset(deep, 0x1c, sizeof deep);
    CHECK(!ran_out_skipping(deep, sizeof deep, BW_THRIFT_STRUCT));
    static const uint8_t bad_element[] = {0x1d, 0x00};
    CHECK(!ran_out_skipping(bad_element, sizeof bad_element, BW_THRIFT_LIST));
    reading r;
    static const uint8_t i64_value[] = {0x02};
    start(&r, i64_value, sizeof i64_value);
    int32_t v;
    CHECK_EQ(bw_thrift_i32(&r.t, BW_THRIFT_I64, &v), -1);
    CHECK(!r.t.ran_out);
    done(&r);
}

/* ---- structs read by their tables ---- */

typedef struct {
    int32_t small;
    int64_t big;
    int32_t flag;
    struct {
        int64_t inner;
    } nested;
    int32_t list_sum;
    int lists, handler_structs;
} record;

static const bw_thrift_field_spec inner_fields[] = {
    {1, BW_THRIFT_I64, offsetof(record, nested.inner) - offsetof(record, nested), NULL, NULL},
};
static const bw_thrift_struct inner_struct = BW_THRIFT_STRUCT_OF(inner_fields);

/* field 6: a list of i32, summed; a refusal of its own (7) past a sum of 1000 */
static int sum_list(bw_thrift *t, void *target, void *context) {
    (void)context;
    record *r = target;
    int elem;
    uint32_t n;
    if (bw_thrift_list(t, &elem, &n) < 0)
        return -1;
    r->lists++;
    for (uint32_t i = 0; i < n; i++) {
        int32_t v;
        if (bw_thrift_i32(t, elem, &v) < 0)
            return -1;
        r->list_sum += v;
        if (r->list_sum > 1000)
            return 7;
    }
    return 0;
}

/* field 8: a struct read by a handler, through the inner table; counted in the context */
static int count_struct(bw_thrift *t, void *target, void *context) {
    record *r = target;
    ++*(int *)context;
    r->handler_structs++;
    return bw_thrift_read_struct(t, &inner_struct, &r->nested, context);
}

static const bw_thrift_field_spec record_fields[] = {
    {1, BW_THRIFT_I32, offsetof(record, small), NULL, NULL},
    {2, BW_THRIFT_I64, offsetof(record, big), NULL, NULL},
    {4, BW_THRIFT_TRUE, offsetof(record, flag), NULL, NULL},
    {5, BW_THRIFT_STRUCT, offsetof(record, nested), &inner_struct, NULL},
    {6, BW_THRIFT_LIST, 0, NULL, sum_list},
    {8, BW_THRIFT_STRUCT, 0, NULL, count_struct},
};
static const bw_thrift_struct record_struct = BW_THRIFT_STRUCT_OF(record_fields);

/* Reads a record from p (n bytes, copied to a block of exactly n): the reader's result;
   *error its message, *used the bytes read. */
static int read_record(const uint8_t *p, size_t n, record *r, const char **error,
                       size_t *used) {
    reading rd;
    start(&rd, p, n);
    memset(r, 0, sizeof *r);
    r->small = r->flag = -1;
    r->big = r->nested.inner = -1;
    int handled = 0;
    int rc = bw_thrift_read_struct(&rd.t, &record_struct, r, &handled);
    *error = rd.t.error;
    *used = (size_t)(rd.t.pos - rd.buf);
    CHECK(rd.t.pos <= rd.t.end);
    CHECK(rc != 0 || rd.t.depth == 0);
    CHECK_EQ(handled, r->handler_structs);
    done(&rd);
    return rc;
}

/* A record with every known field, unknown ones between them. */
static void put_record(writer *w) {
    int16_t last = 0;
    put_field(w, &last, 1, BW_THRIFT_I32);
    put_varint(w, zigzag(-7));
    put_field(w, &last, 3, BW_THRIFT_BINARY); /* unknown */
    put_varint(w, 2);
    put_byte(w, 'h');
    put_byte(w, 'i');
    put_field(w, &last, 2, BW_THRIFT_I64); /* ids out of order, by the long form */
    put_varint(w, zigzag(INT64_MAX));
    put_field(w, &last, 4, BW_THRIFT_TRUE);
    put_field(w, &last, 5, BW_THRIFT_STRUCT);
    int16_t inner = 0;
    put_field(w, &inner, 9, BW_THRIFT_DOUBLE); /* unknown in the nested struct */
    for (int i = 0; i < 8; i++)
        put_byte(w, 0);
    put_field(w, &inner, 1, BW_THRIFT_I64);
    put_varint(w, zigzag(-40));
    put_byte(w, BW_THRIFT_STOP);
    put_field(w, &last, 6, BW_THRIFT_LIST);
    put_list_header(w, BW_THRIFT_I32, 3);
    put_varint(w, zigzag(1));
    put_varint(w, zigzag(2));
    put_varint(w, zigzag(3));
    put_field(w, &last, 300, BW_THRIFT_MAP); /* unknown */
    put_varint(w, 1);
    put_byte(w, BW_THRIFT_I32 << 4 | BW_THRIFT_STRUCT);
    put_varint(w, zigzag(5));
    put_byte(w, BW_THRIFT_STOP);
    put_byte(w, BW_THRIFT_STOP);
}

TEST(a_table_reads_its_fields_and_skips_the_others) {
    writer w = {.len = 0};
    put_record(&w);
    w.data[w.len] = 0xee; /* a byte after the struct is not read */
    record r;
    const char *error;
    size_t used;
    CHECK_EQ(read_record(w.data, w.len + 1, &r, &error, &used), 0);
    CHECK_EQ(used, w.len);
    CHECK_EQ(r.small, -7);
    CHECK(r.big == INT64_MAX);
    CHECK_EQ(r.flag, 1);
    CHECK_EQ(r.nested.inner, -40);
    CHECK_EQ(r.lists, 1);
    CHECK_EQ(r.list_sum, 6);
    /* an empty struct leaves every field as it was */
    static const uint8_t empty[] = {BW_THRIFT_STOP};
    CHECK_EQ(read_record(empty, 1, &r, &error, &used), 0);
    CHECK(r.small == -1 && r.big == -1 && r.flag == -1 && r.nested.inner == -1 && r.lists == 0);
    /* a field that comes again: the last one counts; a false bool is 0 (i32 1 = 1; bool 4
       false, by delta 3; the long form of i32 1 = 2) */
    static const uint8_t again[] = {0x15, 0x02, 0x32, 0x05, 0x02, 0x04, 0x00};
    CHECK_EQ(read_record(again, sizeof again, &r, &error, &used), 0);
    CHECK_EQ(r.small, 2);
    CHECK_EQ(r.flag, 0);
}

TEST(a_table_refuses_an_integer_of_another_wire_type) {
    const char *error;
    size_t used;
    record r;
    /* field 1 (i32) as an i64, a byte, an i16, a binary; field 2 (i64) as an i32 */
    const uint8_t heads[] = {0x16, 0x13, 0x14, 0x18, 0x25};
    for (size_t i = 0; i < sizeof heads; i++) {
        uint8_t data[] = {heads[i], 0x02, 0x00};
        CHECK_EQ(read_record(data, sizeof data, &r, &error, &used), -1);
        CHECK_BYTES(error, strlen(error), "integer field of another type in metadata");
    }
    /* an i32 field holding an i64's value */
    static const uint8_t wide[] = {0x15, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00};
    CHECK_EQ(read_record(wide, sizeof wide, &r, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "i32 field out of range in metadata");
}

TEST(a_table_skips_a_struct_list_or_bool_of_another_wire_type) {
    const char *error;
    size_t used;
    record r;
    /* field 4 (bool) as an i32, 5 (struct) as a binary, 6 (list) as a struct, 8 (struct) as
       a list: each skipped whole, nothing written, no handler called */
    static const uint8_t data[] = {0x45, 0x02,                 /* 4: i32 1 */
                                   0x18, 0x01, 'x',            /* 5: binary "x" */
                                   0x1c, 0x15, 0x02, 0x00,     /* 6: struct {1: i32 1} */
                                   0x29, 0x25, 0x02, 0x04,     /* 8: list of 2 i32 */
                                   0x00};
    CHECK_EQ(read_record(data, sizeof data, &r, &error, &used), 0);
    CHECK_EQ(used, sizeof data);
    CHECK(r.flag == -1 && r.nested.inner == -1 && r.lists == 0 && r.handler_structs == 0);
    /* a field id past any the table names, and below: skipped */
    static const uint8_t far[] = {0x06, 0xfe, 0xff, 0x03, 0x02, 0x06, 0x01, 0x02, 0x00};
    CHECK_EQ(read_record(far, sizeof far, &r, &error, &used), 0);
    CHECK_EQ(used, sizeof far);
    CHECK_EQ(r.big, -1);
}

TEST(a_handler_reads_its_value_and_its_own_refusal_comes_back) {
    const char *error;
    size_t used;
    record r;
    /* field 8 by its handler, twice: both counted, the second's value kept */
    static const uint8_t twice[] = {0x8c, 0x16, 0x04, 0x00, 0x0c, 0x10, 0x16, 0x06, 0x00, 0x00};
    CHECK_EQ(read_record(twice, sizeof twice, &r, &error, &used), 0);
    CHECK_EQ(r.handler_structs, 2);
    CHECK_EQ(r.nested.inner, 3);
    /* the list handler's refusal (a sum past 1000) ends the read there, returned as it is,
       the reader's error left unset */
    writer w = {.len = 0};
    int16_t last = 0;
    put_field(&w, &last, 6, BW_THRIFT_LIST);
    put_list_header(&w, BW_THRIFT_I32, 2);
    put_varint(&w, zigzag(900));
    put_varint(&w, zigzag(200));
    put_field(&w, &last, 1, BW_THRIFT_I32); /* after it: never read */
    put_varint(&w, zigzag(5));
    put_byte(&w, BW_THRIFT_STOP);
    CHECK_EQ(read_record(w.data, w.len, &r, &error, &used), 7);
    CHECK(error == NULL);
    CHECK_EQ(r.small, -1);
    CHECK(used < w.len);
    /* a handler whose own read fails: -1 and the reader's message */
    static const uint8_t bad_list[] = {0x19, 0x26, 0x02, 0x02, 0x00};
    CHECK_EQ(read_record(bad_list, sizeof bad_list, &r, &error, &used), -1);
    CHECK_BYTES(error, strlen(error), "integer field of another type in metadata");
}

TEST(a_table_read_counts_its_nesting) {
    /* a struct nested in field 5 whose own unknown field nests structs: refused once the
       depth passes BW_THRIFT_MAX_DEPTH (the record and field 5 are two levels) */
    for (int extra = BW_THRIFT_MAX_DEPTH - 3; extra <= BW_THRIFT_MAX_DEPTH - 1; extra++) {
        writer w = {.len = 0};
        put_byte(&w, 0x5c); /* field 5: a struct */
        for (int i = 0; i < extra; i++)
            put_byte(&w, 0x1c); /* field 1 ... : a struct, unknown to the inner table at 2+ */
        for (int i = 0; i < extra + 2; i++)
            put_byte(&w, BW_THRIFT_STOP);
        /* the inner table reads field 1 as an i64: make the first nested field id 2 */
        w.data[1] = 0x2c;
        record r;
        const char *error;
        size_t used;
        int rc = read_record(w.data, w.len, &r, &error, &used);
        int fits = 2 + extra <= BW_THRIFT_MAX_DEPTH;
        CHECK_EQ(rc, fits ? 0 : -1);
        if (!fits)
            CHECK_BYTES(error, strlen(error), "metadata nested too deeply");
        else
            CHECK_EQ(used, w.len);
    }
}

TEST(every_cut_of_a_table_read_struct_is_refused_as_running_out) {
    writer w = {.len = 0};
    put_record(&w);
    for (size_t n = 0; n < w.len; n++) {
        reading rd;
        start(&rd, w.data, n);
        record r;
        memset(&r, 0, sizeof r);
        int handled = 0;
        int rc = bw_thrift_read_struct(&rd.t, &record_struct, &r, &handled);
        if (rc != -1 || rd.t.error == NULL || !rd.t.ran_out || rd.t.pos > rd.t.end) {
            CHECK(0);
            done(&rd);
            break;
        }
        done(&rd);
    }
}

RUN_TESTS(field_ids_by_delta_and_long_form, field_types_past_struct_are_refused,
          a_struct_or_field_that_ends_early, integers_at_their_extremes,
          an_integer_of_another_type_is_refused, varints_of_ten_bytes_and_longer,
          list_headers_and_their_counts, the_depth_limit_is_exact,
          the_first_error_stays_and_every_read_after_it_fails, skipping_each_type,
          skipping_maps, random_values_are_skipped_to_their_end_and_every_cut_is_refused,
          running_out_of_bytes_is_told_apart_from_what_the_bytes_say,
          a_table_reads_its_fields_and_skips_the_others,
          a_table_refuses_an_integer_of_another_wire_type,
          a_table_skips_a_struct_list_or_bool_of_another_wire_type,
          a_handler_reads_its_value_and_its_own_refusal_comes_back,
          a_table_read_counts_its_nesting,
          every_cut_of_a_table_read_struct_is_refused_as_running_out)
