/* Arrow rows -> bulk insert commands, on plans built by hand as the binding builds them:
   every column kind at its extremes, nulls under a bitmap with an offset, the id rules
   (empty, '|' at the end, only whitespace as str.isspace() sees it for every code point,
   invalid UTF-8) and every other validation failure with its row, column and message, the
   order in which failures are found, timestamps at the ends of years 1..9999 in every unit
   and time zone offset (and int64's own ends, read without overflow), vectors with their
   float32 texts, and an allocation failure at every point of a row.
   sources: encode_batch.c document_id.c arrow_c.c datetime_text.c float_text.c int_text.c json_array.c json_string.c out_buffer.c
   libs: -lm */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "encode_batch.h"

#define METADATA "{\"@collection\": \"Things\"}"

/* A plan of `length` rows with an int64 id column (values ids) and the given fields. */
static bw_batch_plan plan_of(int64_t length, const int64_t *ids, bw_col *fields, size_t n_fields) {
    bw_batch_plan p;
    memset(&p, 0, sizeof p);
    p.length = length;
    p.id.kind = BW_COL_INT;
    p.id.name = "id";
    p.id.width = 8;
    p.id.values = ids;
    p.fields = fields;
    p.n_fields = n_fields;
    p.prefix = p.prefix_raw = "things/";
    p.prefix_len = p.prefix_raw_len = strlen(p.prefix);
    p.metadata = METADATA;
    p.metadata_len = strlen(METADATA);
    return p;
}

static bw_col column(bw_col_kind kind, const char *name, const char *key, int width,
                     const void *values) {
    bw_col c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.name = name;
    c.key = (char *)key;
    c.key_len = strlen(key);
    c.width = width;
    c.values = values;
    return c;
}

static bw_col strings(const char *name, const char *key, const int32_t *offsets, const char *data) {
    bw_col c = column(BW_COL_UTF8, name, key, 0, offsets);
    c.data = data;
    return c;
}

static bw_col timestamps(const char *name, const int64_t *values, int64_t per_second,
                         int64_t tz_offset, int has_tz) {
    bw_col c = column(BW_COL_TIMESTAMP, name, "\"at\": ", 8, values);
    c.per_second = per_second;
    c.tz_offset = tz_offset;
    c.has_tz = has_tz;
    return c;
}

/* Row `row` written to a fresh buffer: 0 and the text in out (NUL-ended), or -1. */
static int write_row(const bw_batch_plan *p, int64_t row, char *out, size_t cap) {
    bw_buf buf;
    if (bw_buf_init(&buf, 16) < 0)
        return -1;
    int rc = bw_batch_write_row(p, row, &buf);
    if (rc == 0 && buf.len < cap) {
        memcpy(out, buf.data, buf.len);
        out[buf.len] = '\0';
    } else if (rc == 0) {
        rc = -1;
    }
    bw_buf_free(&buf);
    return rc;
}

/* The PUT command of document `id` whose members (each followed by ", ") come before its
   metadata. */
#define PUT_OF(id, members)                                                            \
    "{\"Id\":\"" id "\",\"Type\":\"PUT\",\"Document\":{" members "\"@metadata\": " METADATA "}}"

#define CHECK_ROW(plan, row, want)                                                     \
    do {                                                                               \
        char got_[2048];                                                               \
        CHECK_EQ(write_row((plan), (row), got_, sizeof got_), 0);                      \
        CHECK_BYTES(got_, strlen(got_), want);                                         \
    } while (0)

/* The plan's validation: -1 expected, with the error's row, column, kind and message. */
#define CHECK_REFUSED(plan, want_row, want_column, want_message)                       \
    do {                                                                               \
        bw_batch_error err_;                                                           \
        memset(&err_, 0, sizeof err_);                                                 \
        CHECK_EQ(bw_batch_validate((plan), &err_), -1);                                \
        CHECK_EQ(err_.row, (want_row));                                                \
        CHECK(err_.column != NULL && strcmp(err_.column, (want_column)) == 0);         \
        CHECK_EQ(err_.is_type_error, 0);                                               \
        CHECK_BYTES(err_.message, strlen(err_.message), want_message);                 \
    } while (0)

static int accepted(const bw_batch_plan *p) {
    bw_batch_error err;
    return bw_batch_validate(p, &err) == 0;
}

TEST(integers_at_their_extremes) {
    static const int8_t i8[] = {INT8_MIN, INT8_MAX};
    static const int16_t i16[] = {INT16_MIN, INT16_MAX};
    static const int32_t i32[] = {INT32_MIN, INT32_MAX};
    static const int64_t i64[] = {INT64_MIN, INT64_MAX};
    static const uint8_t u8[] = {0, UINT8_MAX};
    static const uint16_t u16[] = {0, UINT16_MAX};
    static const uint32_t u32[] = {0, UINT32_MAX};
    static const uint64_t u64[] = {0, UINT64_MAX};
    static const int64_t ids[] = {-1, INT64_MAX};
    bw_col f[] = {
        column(BW_COL_INT, "a", "\"a\": ", 1, i8), column(BW_COL_INT, "b", "\"b\": ", 2, i16),
        column(BW_COL_INT, "c", "\"c\": ", 4, i32), column(BW_COL_INT, "d", "\"d\": ", 8, i64),
        column(BW_COL_UINT, "e", "\"e\": ", 1, u8), column(BW_COL_UINT, "f", "\"f\": ", 2, u16),
        column(BW_COL_UINT, "g", "\"g\": ", 4, u32), column(BW_COL_UINT, "h", "\"h\": ", 8, u64),
    };
    bw_batch_plan p = plan_of(2, ids, f, 8);
    CHECK(accepted(&p));
    CHECK_ROW(&p, 0, PUT_OF("things/-1", "\"a\": -128, \"b\": -32768, \"c\": -2147483648, "
                                         "\"d\": -9223372036854775808, \"e\": 0, \"f\": 0, "
                                         "\"g\": 0, \"h\": 0, "));
    CHECK_ROW(&p, 1, PUT_OF("things/9223372036854775807",
                            "\"a\": 127, \"b\": 32767, \"c\": 2147483647, "
                            "\"d\": 9223372036854775807, \"e\": 255, \"f\": 65535, "
                            "\"g\": 4294967295, \"h\": 18446744073709551615, "));
    /* an unsigned id, at its top */
    static const uint64_t uids[] = {UINT64_MAX};
    p = plan_of(1, NULL, NULL, 0);
    p.id.kind = BW_COL_UINT;
    p.id.values = uids;
    CHECK_ROW(&p, 0, PUT_OF("things/18446744073709551615", ""));
}

TEST(floats_booleans_strings_and_the_null_column) {
    static const float f32[] = {0.1f, -0.0f};
    static const double f64[] = {1e16, 0.5};
    static const uint8_t bools[] = {0x02}; /* row 0 false, row 1 true */
    static const int32_t offsets[] = {0, 5, 11};
    static const char text[] = "a\"\\\n\x01" "\xc3\xa9\xf0\x9f\x98\x80";
    static const int64_t ids[] = {1, 2};
    bw_col f[] = {
        column(BW_COL_FLOAT32, "f", "\"f\": ", 4, f32), column(BW_COL_FLOAT64, "g", "\"g\": ", 8, f64),
        column(BW_COL_BOOL, "b", "\"b\": ", 0, bools), strings("s", "\"s\": ", offsets, text),
        column(BW_COL_NULL, "n", "\"n\": ", 0, NULL),
    };
    bw_batch_plan p = plan_of(2, ids, f, 5);
    CHECK(accepted(&p));
    /* float32 as float32.item() widens it; strings as json.dumps with ensure_ascii */
    CHECK_ROW(&p, 0, PUT_OF("things/1", "\"f\": 0.10000000149011612, \"g\": 1e+16, \"b\": false, "
                                        "\"s\": \"a\\\"\\\\\\n\\u0001\", \"n\": null, "));
    CHECK_ROW(&p, 1, PUT_OF("things/2", "\"f\": -0.0, \"g\": 0.5, \"b\": true, "
                                        "\"s\": \"\\u00e9\\ud83d\\ude00\", \"n\": null, "));
    /* no fields: the metadata straight after the document's '{' */
    p = plan_of(2, ids, NULL, 0);
    CHECK_ROW(&p, 1, PUT_OF("things/2", ""));
}

TEST(nulls_under_a_bitmap_with_an_offset) {
    /* 8 rows read from element 3 on: validity bits 3..10 */
    static const uint8_t validity[] = {0xff & ~(1 << 4), 0xff & ~(1 << 1)}; /* rows 1 and 6 null */
    static const int64_t values[12] = {0, 0, 0, 10, 11, 12, 13, 14, 15, 16, 17, 0};
    static const uint8_t bools[2] = {0xff, 0xff};
    static const int32_t offsets[12] = {0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    static const int64_t ids[12] = {0, 1, 2, 3, 4, 5, 6, 7};
    bw_col f[] = {column(BW_COL_INT, "i", "\"i\": ", 8, values),
                  column(BW_COL_BOOL, "b", "\"b\": ", 0, bools),
                  strings("s", "\"s\": ", offsets, "abcdefgh"),
                  timestamps("t", values, 1, 0, 0)};
    for (size_t i = 0; i < 4; i++) {
        f[i].offset = 3;
        f[i].validity = validity;
    }
    bw_batch_plan p = plan_of(8, ids, f, 4);
    CHECK(accepted(&p));
    CHECK_ROW(&p, 0, "{\"Id\":\"things/0\",\"Type\":\"PUT\",\"Document\":{\"i\": 10, \"b\": true, "
                     "\"s\": \"a\", \"at\": \"1970-01-01T00:00:10.0000000\", \"@metadata\": " METADATA "}}");
    CHECK_ROW(&p, 1, "{\"Id\":\"things/1\",\"Type\":\"PUT\",\"Document\":{\"i\": null, \"b\": null, "
                     "\"s\": null, \"at\": null, \"@metadata\": " METADATA "}}");
    CHECK_ROW(&p, 6, "{\"Id\":\"things/6\",\"Type\":\"PUT\",\"Document\":{\"i\": null, \"b\": null, "
                     "\"s\": null, \"at\": null, \"@metadata\": " METADATA "}}");
    CHECK_ROW(&p, 7, "{\"Id\":\"things/7\",\"Type\":\"PUT\",\"Document\":{\"i\": 17, \"b\": true, "
                     "\"s\": \"h\", \"at\": \"1970-01-01T00:00:17.0000000\", \"@metadata\": " METADATA "}}");
    /* a null id, under the same bitmap */
    p.id.validity = validity;
    p.id.offset = 3;
    CHECK_REFUSED(&p, 1, "id", "null id");
}

/* A plan whose id column holds the one string id (its UTF-8 bytes) under prefix. */
static bw_batch_plan string_id_plan(const char *id, size_t id_len, const char *prefix,
                                    int32_t offsets[2]) {
    bw_batch_plan p = plan_of(1, NULL, NULL, 0);
    offsets[0] = 0;
    offsets[1] = (int32_t)id_len;
    p.id = strings("id", "", offsets, id);
    p.prefix = p.prefix_raw = prefix;
    p.prefix_len = p.prefix_raw_len = strlen(prefix);
    return p;
}

TEST(the_id_rules) {
    int32_t offsets[2];
    bw_batch_plan p = string_id_plan("", 0, "", offsets);
    CHECK_REFUSED(&p, 0, "id", "id is empty");
    p = string_id_plan("", 0, "users/", offsets); /* the prefix alone is an id */
    CHECK(accepted(&p));
    CHECK_ROW(&p, 0, "{\"Id\":\"users/\",\"Type\":\"PUT\",\"Document\":{\"@metadata\": " METADATA "}}");
    p = string_id_plan("a|", 2, "users/", offsets);
    CHECK_REFUSED(&p, 0, "id", "id ends with '|' (the server would generate the id)");
    p = string_id_plan("", 0, "users|", offsets);
    CHECK_REFUSED(&p, 0, "id", "id ends with '|' (the server would generate the id)");
    p = string_id_plan("|a", 2, "", offsets);
    CHECK(accepted(&p));
    p = string_id_plan("a\xff", 2, "", offsets);
    CHECK_REFUSED(&p, 0, "id", "id is not valid UTF-8");
    p = string_id_plan("\xed\xa0\x80", 3, "", offsets); /* a surrogate */
    CHECK_REFUSED(&p, 0, "id", "id is not valid UTF-8");
    p = string_id_plan(" \t\xe3\x80\x80", 5, "", offsets);
    CHECK_REFUSED(&p, 0, "id", "id is only whitespace");
    p = string_id_plan("", 0, " ", offsets); /* a blank prefix and an empty id */
    CHECK_REFUSED(&p, 0, "id", "id is only whitespace");
    p = string_id_plan(" ", 1, "users/", offsets); /* the prefix is not blank */
    CHECK(accepted(&p));
    p = string_id_plan(" a ", 3, "", offsets);
    CHECK(accepted(&p));
    /* a string id is written as raw UTF-8, escaped but not quoted twice */
    p = string_id_plan("\xc3\xa9\"\\", 4, "u/", offsets);
    CHECK_ROW(&p, 0, "{\"Id\":\"u/\xc3\xa9\\\"\\\\\",\"Type\":\"PUT\",\"Document\":{\"@metadata\": "
                     METADATA "}}");
}

/* Code points for which str.isspace() is true (Python 3.11's Unicode database). */
static const uint32_t python_whitespace[] = {
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000,
    0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028,
    0x2029, 0x202f, 0x205f, 0x3000};

static size_t utf8(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

TEST(only_whitespace_is_what_str_isspace_says_for_every_code_point) {
    size_t next = 0, wrong = 0;
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp == '|') /* '|' at the end has its own rule */
            continue;
        int space = next < sizeof python_whitespace / sizeof python_whitespace[0] &&
                    python_whitespace[next] == cp;
        if (space)
            next++;
        /* the code point alone, and after a space: both whitespace only when it is */
        char id[8] = " ";
        size_t n = utf8(cp, id + 1);
        int32_t offsets[2];
        for (int with_space = 0; with_space <= 1; with_space++) {
            bw_batch_plan p = string_id_plan(id + 1 - with_space, n + (size_t)with_space, "", offsets);
            bw_batch_error err;
            int refused = bw_batch_validate(&p, &err) != 0;
            if (refused != space || (refused && strcmp(err.message, "id is only whitespace") != 0)) {
                if (wrong++ < 5)
                    fprintf(stderr, "U+%04X%s: refused %d, whitespace %d\n", cp,
                            with_space ? " after a space" : "", refused, space);
            }
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(next, sizeof python_whitespace / sizeof python_whitespace[0]);
}

TEST(invalid_utf8_in_a_string_field_unless_the_row_is_null) {
    static const int32_t offsets[] = {0, 1, 3, 4};
    static const char data[] = "a\xc3(b";
    static const uint8_t validity[] = {0x05}; /* row 1 null */
    static const int64_t ids[] = {1, 2, 3};
    bw_col f[] = {strings("name", "\"name\": ", offsets, data)};
    f[0].validity = validity;
    bw_batch_plan p = plan_of(3, ids, f, 1);
    CHECK(accepted(&p)); /* the bad bytes are under a null */
    f[0].validity = NULL;
    CHECK_REFUSED(&p, 1, "name", "string is not valid UTF-8");
    f[0].kind = BW_COL_LARGE_UTF8;
    static const int64_t large[] = {0, 1, 3, 4};
    f[0].values = large;
    CHECK_REFUSED(&p, 1, "name", "string is not valid UTF-8");
}

TEST(the_first_failure_is_of_the_id_then_of_each_field_in_order) {
    static const int32_t offsets[] = {0, 1, 2, 3, 4};
    static const int64_t ids[] = {1, 2, 3, 4};
    static const uint8_t id_validity[] = {0x07};   /* id of row 3 null */
    static const int64_t stamps[] = {0, 0, INT64_MAX, 0};
    bw_col f[] = {strings("a", "\"a\": ", offsets, "ab\xff" "d"), /* row 2 bad */
                  timestamps("t", stamps, 1, 0, 0)};               /* row 2 out of range */
    bw_batch_plan p = plan_of(4, ids, f, 2);
    p.id.validity = id_validity;
    CHECK_REFUSED(&p, 3, "id", "null id");
    p.id.validity = NULL;
    CHECK_REFUSED(&p, 2, "a", "string is not valid UTF-8");
    f[0].data = "abcd";
    CHECK_REFUSED(&p, 2, "t", "timestamp 9223372036854775807 is outside datetime's years 1..9999");
}

/* The text of one timestamp value, or the validation's refusal (returns -1). */
static int timestamp_text(int64_t v, int64_t per_second, int64_t tz_offset, int has_tz, char *out) {
    static const int64_t ids[] = {1};
    char unused[64];
    if (out == NULL)
        out = unused;
    int64_t values[1] = {v};
    bw_col f[] = {timestamps("t", values, per_second, tz_offset, has_tz)};
    bw_batch_plan p = plan_of(1, ids, f, 1);
    bw_batch_error err;
    if (bw_batch_validate(&p, &err) != 0)
        return -1;
    char row[512];
    if (write_row(&p, 0, row, sizeof row) != 0)
        return -2;
    char *start = strstr(row, "\"at\": \"") + 7;
    size_t n = (size_t)(strchr(start, '"') - start);
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}

#define CHECK_TIMESTAMP(v, unit, tz, has_tz, want)                                     \
    do {                                                                               \
        char text_[64] = "";                                                           \
        CHECK_EQ(timestamp_text((v), (unit), (tz), (has_tz), text_), 0);               \
        CHECK_BYTES(text_, strlen(text_), want);                                       \
    } while (0)

TEST(timestamps_at_the_ends_of_the_years_in_every_unit) {
    const int64_t first = -62135596800LL, last = 253402300799LL; /* 0001-01-01, 9999-12-31T23:59:59 */
    const int64_t units[] = {1, 1000, 1000000, 1000000000};
    for (int u = 0; u < 4; u++) {
        int64_t ps = units[u];
        if (last > INT64_MAX / ps) /* nanoseconds reach only 1677..2262 */
            continue;
        CHECK_TIMESTAMP(first * ps, ps, 0, 0, "1-01-01T00:00:00.0000000");
        CHECK_EQ(timestamp_text(first * ps - 1, ps, 0, 0, NULL), -1);
        /* the last instant: datetime.max's text ends in 9 when naive */
        CHECK_TIMESTAMP((last + 1) * ps - 1, ps, 0, 0,
                        ps == 1 ? "9999-12-31T23:59:59.0000000"
                                : ps == 1000 ? "9999-12-31T23:59:59.9990000"
                                             : "9999-12-31T23:59:59.9999999");
        CHECK_EQ(timestamp_text((last + 1) * ps, ps, 0, 0, NULL), -1);
        /* with a time zone, the last instant is not datetime.max: its text ends in 0 */
        if (ps == 1000000)
            CHECK_TIMESTAMP((last + 1) * ps - 1, ps, 0, 1, "9999-12-31T23:59:59.9999990");
        /* a time zone moves the wall clock across the ends */
        CHECK_EQ(timestamp_text(first * ps, ps, -60, 1, NULL), -1);
        CHECK_TIMESTAMP(first * ps, ps, 60, 1, "1-01-01T00:01:00.0000000");
        CHECK_EQ(timestamp_text(last * ps, ps, 1, 1, NULL), -1);
    }
    /* before the epoch: the second is floored, the fraction counts up from it */
    CHECK_TIMESTAMP(-999999, 1000000, 0, 0, "1969-12-31T23:59:59.0000010");
    CHECK_TIMESTAMP(-1, 1000000000, 0, 0, "1969-12-31T23:59:59.9999990");
    CHECK_TIMESTAMP(-1, 1000, 0, 0, "1969-12-31T23:59:59.9990000");
    CHECK_TIMESTAMP(1500, 1000, -5400, 1, "1969-12-31T22:30:01.5000000");
}

TEST(int64s_own_ends_in_every_unit_and_offset) {
    /* nanoseconds cover 1677-09-21 .. 2262-04-11; the other units put int64's ends far
       outside years 1..9999. Read with the sanitizers on: no overflow on the way */
    CHECK_TIMESTAMP(INT64_MIN, 1000000000, 0, 0, "1677-09-21T00:12:43.1452240");
    CHECK_TIMESTAMP(INT64_MAX, 1000000000, 0, 0, "2262-04-11T23:47:16.8547750");
    CHECK_TIMESTAMP(INT64_MIN, 1000000000, -3600, 1, "1677-09-20T23:12:43.1452240");
    const int64_t units[] = {1, 1000, 1000000};
    const int64_t offsets[] = {0, -359940, 359940}; /* +-99:99, the widest the binding takes */
    for (int u = 0; u < 3; u++) {
        for (int o = 0; o < 3; o++) {
            CHECK_EQ(timestamp_text(INT64_MIN, units[u], offsets[o], o != 0, NULL), -1);
            CHECK_EQ(timestamp_text(INT64_MIN + 1, units[u], offsets[o], o != 0, NULL), -1);
            CHECK_EQ(timestamp_text(INT64_MAX, units[u], offsets[o], o != 0, NULL), -1);
        }
    }
}

/* A list<float> vector column over `rows` rows of the given offsets, values and bitmaps. */
static bw_col vectors(const int32_t *offsets, int64_t rows, const float *values, int64_t n_values,
                      const uint8_t *validity, const uint8_t *value_validity, int64_t dim) {
    bw_col c = column(BW_COL_VECTOR, "emb", "\"emb\": ", 0, NULL);
    c.vec.kind = BW_ARROW_LIST;
    c.vec.value_format = 'f';
    c.vec.value_width = 4;
    c.vec.length = rows;
    c.vec.list_size = -1;
    c.vec.validity = validity;
    c.vec.offsets32 = offsets;
    c.vec.values = (const char *)values;
    c.vec.values_length = n_values;
    c.vec.value_validity = value_validity;
    c.vec.value_null_count = value_validity != NULL ? -1 : 0;
    c.dim = dim;
    return c;
}

TEST(vectors_and_their_failures) {
    static const float values[] = {0.1f, 1.0f / 3, 3e38f, 0.5f, 1e-8f, 2.0f};
    static const int32_t offsets[] = {0, 3, 6};
    static const int64_t ids[] = {1, 2};
    bw_col f[] = {vectors(offsets, 2, values, 6, NULL, NULL, 3)};
    bw_batch_plan p = plan_of(2, ids, f, 1);
    CHECK(accepted(&p));
    CHECK_ROW(&p, 0, "{\"Id\":\"things/1\",\"Type\":\"PUT\",\"Document\":{\"emb\": [0.10000000149011612, "
                     "0.3333333432674408, 3.0000000054977558e+38], \"@metadata\": " METADATA "}}");
    p.float32_shortest = 1;
    CHECK_ROW(&p, 0, "{\"Id\":\"things/1\",\"Type\":\"PUT\",\"Document\":{\"emb\": [0.1, 0.33333334, "
                     "3e+38], \"@metadata\": " METADATA "}}");
    CHECK_ROW(&p, 1, "{\"Id\":\"things/2\",\"Type\":\"PUT\",\"Document\":{\"emb\": [0.5, 1e-08, 2.0], "
                     "\"@metadata\": " METADATA "}}");
    static const uint8_t second_null[] = {0x01};
    f[0] = vectors(offsets, 2, values, 6, second_null, NULL, 3);
    CHECK_REFUSED(&p, 1, "emb", "null vector");
    static const int32_t short_second[] = {0, 3, 5};
    f[0] = vectors(short_second, 2, values, 6, NULL, NULL, 3);
    CHECK_REFUSED(&p, 1, "emb", "vector has 2 values, expected 3 (as in the first row)");
    static const uint8_t fifth_value_null[] = {0x2f};
    f[0] = vectors(offsets, 2, values, 6, NULL, fifth_value_null, 3);
    CHECK_REFUSED(&p, 1, "emb", "null value at position 1 of the vector");
    static const int32_t past_the_values[] = {0, 3, 7};
    f[0] = vectors(past_the_values, 2, values, 6, NULL, NULL, 4);
    f[0].dim = -1;
    CHECK_REFUSED(&p, 1, "emb", "malformed Arrow array: list offsets out of range");
}

/* ---- allocation failures ---- */

static size_t room_limit; /* the most a buffer may grow to */

static int limited_regrow(bw_buf *buf, size_t cap) {
    (void)buf;
    return cap > room_limit ? -1 : 1; /* 1: realloc does it */
}

TEST(an_allocation_failure_at_every_point_of_a_row_is_reported) {
    static const float values[] = {0.25f, 0.5f};
    static const int32_t offsets[] = {0, 2};
    static const int32_t name_offsets[] = {0, 4};
    static const int32_t id_offsets[] = {0, 3};
    static const int64_t stamps[] = {86400};
    static const double doubles[] = {1.5};
    bw_col f[] = {strings("s", "\"s\": ", name_offsets, "\xc3\xa9x\""),
                  column(BW_COL_FLOAT64, "d", "\"d\": ", 8, doubles),
                  timestamps("t", stamps, 1, 0, 0), vectors(offsets, 1, values, 2, NULL, NULL, 2)};
    bw_batch_plan p = plan_of(1, NULL, f, 4);
    p.id = strings("id", "", id_offsets, "a\"b");
    char want[512];
    CHECK_EQ(write_row(&p, 0, want, sizeof want), 0);
    size_t full = strlen(want);
    /* every limit from a single byte up: -1 until the row fits, then exactly the row */
    for (room_limit = 1; room_limit <= 2 * full; room_limit++) {
        bw_buf buf;
        CHECK_EQ(bw_buf_init(&buf, 1), 0);
        buf.regrow = limited_regrow;
        int rc = bw_batch_write_row(&p, 0, &buf);
        CHECK(buf.len <= buf.cap && buf.cap <= (room_limit > 1 ? room_limit : 1));
        if (rc == 0)
            CHECK_BYTES(buf.data, buf.len, want);
        else
            CHECK_EQ(rc, -1);
        if (room_limit >= 2 * full) /* enough room: written */
            CHECK_EQ(rc, 0);
        buf.regrow = NULL;
        bw_buf_free(&buf);
    }
}

RUN_TESTS(integers_at_their_extremes, floats_booleans_strings_and_the_null_column,
          nulls_under_a_bitmap_with_an_offset, the_id_rules,
          only_whitespace_is_what_str_isspace_says_for_every_code_point,
          invalid_utf8_in_a_string_field_unless_the_row_is_null,
          the_first_failure_is_of_the_id_then_of_each_field_in_order,
          timestamps_at_the_ends_of_the_years_in_every_unit,
          int64s_own_ends_in_every_unit_and_offset, vectors_and_their_failures,
          an_allocation_failure_at_every_point_of_a_row_is_reported)
