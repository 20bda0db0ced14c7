/* cql_values.c: CQL type text, the schema check's words and refusals, and Arrow values as
   [bytes] (integers widened, nulls, strings with offsets, ascii refused past 0x7f, a
   timestamp in seconds out of range, a vector through the fill hook). The same functions
   are checked against the driver's serializers in tests/test_cql_values.py.
   sources: cql_values.c cql_wire.c out_buffer.c arrow_c.c */
#include "check.h"

#include <stdint.h>
#include <string.h>

#include "cql_values.h"
#include "cql_wire.h"

static void release_array(struct ArrowArray *a) { a->release = NULL; }

static struct ArrowArray array_of(int64_t length, int64_t null_count, const void **buffers,
                                  int64_t n_buffers) {
    struct ArrowArray a;
    memset(&a, 0, sizeof a);
    a.length = length;
    a.null_count = null_count;
    a.n_buffers = n_buffers;
    a.buffers = buffers;
    a.release = release_array;
    return a;
}

static bw_cql_type parse(const char *text) {
    bw_cql_type t;
    char err[200];
    CHECK_EQ(bw_cql_type_parse(text, strlen(text), &t, err, sizeof err), 0);
    return t;
}

TEST(type_text_round_trips) {
    char out[64];
    bw_cql_type t = parse(" Vector< float , 12 >");
    CHECK_EQ(t.id, BW_CQL_T_VECTOR);
    CHECK_EQ(t.element, BW_CQL_T_FLOAT);
    CHECK_EQ(t.dimension, 12);
    bw_cql_type_text(&t, out, sizeof out);
    CHECK_BYTES(out, strlen(out), "vector<float, 12>");
    t = parse("varchar");
    bw_cql_type_text(&t, out, sizeof out);
    CHECK_BYTES(out, strlen(out), "text");
    char err[200];
    CHECK_EQ(bw_cql_type_parse("vector<float, 0>", 16, &t, err, sizeof err), -1);
    CHECK(strstr(err, "unsupported CQL type 'vector<float, 0>'") != NULL);
    CHECK_EQ(bw_cql_type_parse("map<int, int>", 13, &t, err, sizeof err), -1);
}

TEST(schema_check_names_types_in_words) {
    bw_cql_column col;
    char err[300];
    bw_cql_type t = parse("int");
    CHECK_EQ(bw_cql_column_plan("n", "l", NULL, &t, &col, err, sizeof err), -1);
    CHECK(strstr(err, "column 'n': Arrow int64 cannot be bound to CQL int") == err);
    CHECK_EQ(bw_cql_column_plan("n", "s", NULL, &t, &col, err, sizeof err), 0);
    CHECK_EQ(col.src_width, 2);
    CHECK_EQ(col.wire_width, 4);
    t = parse("timestamp");
    CHECK_EQ(bw_cql_column_plan("t", "tsu:UTC", NULL, &t, &col, err, sizeof err), -1);
    CHECK(strstr(err, "Arrow timestamp[us, tz=UTC] cannot be bound to CQL timestamp") != NULL);
    t = parse("vector<float, 3>");
    CHECK_EQ(bw_cql_column_plan("e", "+w:4", "f", &t, &col, err, sizeof err), -1);
    CHECK(strstr(err, "fixed_size_list<float32, 4>") != NULL);
    CHECK_EQ(bw_cql_column_plan("e", "+w:3", "g", &t, &col, err, sizeof err), -1);
    CHECK_EQ(bw_cql_column_plan("e", "+l", "f", &t, &col, err, sizeof err), 0);
}

TEST(integers_widen_and_nulls_are_minus_one) {
    int16_t values[] = {-2, 0x1234, 7};
    uint8_t validity[] = {0x5}; /* rows 0 and 2 */
    const void *buffers[] = {validity, values};
    struct ArrowArray a = array_of(2, 1, buffers, 2);
    a.offset = 1; /* rows 1 and 2 of the buffers */
    bw_cql_type t = parse("bigint");
    bw_cql_column col;
    char err[200];
    CHECK_EQ(bw_cql_column_plan("x", "s", NULL, &t, &col, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_bind(&col, NULL, &a, 0, err, sizeof err), 0);
    bw_buf out = {0};
    size_t at;
    int32_t len;
    CHECK_EQ(bw_cql_column_write(&col, 0, &out, &at, &len, err, sizeof err), 0);
    CHECK_EQ(len, -1);
    CHECK_EQ(out.len, 4);
    CHECK(memcmp(out.data, "\xff\xff\xff\xff", 4) == 0);
    CHECK_EQ(bw_cql_column_write(&col, 1, &out, &at, &len, err, sizeof err), 0);
    CHECK_EQ(len, 8);
    CHECK_EQ(at, 8);
    CHECK(memcmp(out.data + 4, "\0\0\0\x08\0\0\0\0\0\0\0\x07", 12) == 0);
    bw_buf_free(&out);
}

TEST(strings_and_ascii) {
    int32_t offsets[] = {0, 2, 5};
    const char data[] = "ab\x63\xc3\xa9";
    const void *buffers[] = {NULL, offsets, data};
    struct ArrowArray a = array_of(2, 0, buffers, 3);
    bw_cql_type t = parse("ascii");
    bw_cql_column col;
    char err[200];
    CHECK_EQ(bw_cql_column_plan("s", "u", NULL, &t, &col, err, sizeof err), 0);
    bw_cql_column_bind(&col, NULL, &a, 0, err, sizeof err);
    bw_buf out = {0};
    size_t at;
    int32_t len;
    CHECK_EQ(bw_cql_column_write(&col, 0, &out, &at, &len, err, sizeof err), 0);
    CHECK_EQ(len, 2);
    CHECK(memcmp(out.data + at, "ab", 2) == 0);
    CHECK_EQ(bw_cql_column_write(&col, 1, &out, &at, &len, err, sizeof err), -2);
    CHECK(strstr(err, "not ASCII") != NULL);
    t = parse("text");
    CHECK_EQ(bw_cql_column_plan("s", "u", NULL, &t, &col, err, sizeof err), 0);
    bw_cql_column_bind(&col, NULL, &a, 0, err, sizeof err);
    CHECK_EQ(bw_cql_column_write(&col, 1, &out, &at, &len, err, sizeof err), 0);
    CHECK_EQ(len, 3);
    bw_buf_free(&out);
}

TEST(timestamp_seconds_out_of_range) {
    int64_t values[] = {INT64_MAX / 100, 2};
    const void *buffers[] = {NULL, values};
    struct ArrowArray a = array_of(2, 0, buffers, 2);
    bw_cql_type t = parse("timestamp");
    bw_cql_column col;
    char err[200];
    CHECK_EQ(bw_cql_column_plan("t", "tss:", NULL, &t, &col, err, sizeof err), 0);
    bw_cql_column_bind(&col, NULL, &a, 0, err, sizeof err);
    bw_buf out = {0};
    size_t at;
    int32_t len;
    CHECK_EQ(bw_cql_column_write(&col, 0, &out, &at, &len, err, sizeof err), -2);
    CHECK(strstr(err, "out of the range") != NULL);
    CHECK_EQ(bw_cql_column_write(&col, 1, &out, &at, &len, err, sizeof err), 0);
    CHECK(memcmp(out.data + at, "\0\0\0\0\0\0\x07\xd0", 8) == 0); /* 2000 ms */
    bw_buf_free(&out);
}

static void fill_marker(const void *ctx, const bw_arrow_vectors *v, int64_t first, char *dst) {
    (void)ctx;
    (void)v;
    memset(dst, (int)('A' + first), 8);
}

static void release_schema(struct ArrowSchema *s) { s->release = NULL; }

TEST(vectors_go_through_the_fill_hook) {
    float values[] = {1, 2, 3, 4, 5, 6};
    int32_t offsets[] = {0, 2, 3, 5};
    const void *child_buffers[] = {NULL, values};
    struct ArrowArray child = array_of(6, 0, child_buffers, 2);
    struct ArrowArray *children[] = {&child};
    const void *buffers[] = {NULL, offsets};
    struct ArrowArray a = array_of(3, 0, buffers, 2);
    a.n_children = 1;
    a.children = children;
    struct ArrowSchema child_schema = {.format = "f", .release = release_schema};
    struct ArrowSchema *schema_children[] = {&child_schema};
    struct ArrowSchema schema = {.format = "+l", .n_children = 1, .children = schema_children,
                                 .release = release_schema};
    bw_cql_type t = parse("vector<float, 2>");
    bw_cql_column col;
    char err[200];
    CHECK_EQ(bw_cql_column_plan("v", "+l", "f", &t, &col, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_bind(&col, &schema, &a, 0, err, sizeof err), -1); /* no hook */
    col.fill = fill_marker;
    CHECK_EQ(bw_cql_column_bind(&col, &schema, &a, 0, err, sizeof err), 0);
    bw_buf out = {0};
    size_t at;
    int32_t len;
    CHECK_EQ(bw_cql_column_write(&col, 0, &out, &at, &len, err, sizeof err), 0);
    CHECK_EQ(len, 8);
    CHECK(memcmp(out.data, "\0\0\0\x08" "AAAAAAAA", 12) == 0);
    CHECK_EQ(bw_cql_column_write(&col, 1, &out, &at, &len, err, sizeof err), -2);
    CHECK(strstr(err, "has 1 values") != NULL);
    CHECK_EQ(bw_cql_column_write(&col, 2, &out, &at, &len, err, sizeof err), 0);
    CHECK(memcmp(out.data + at, "DDDDDDDD", 8) == 0);
    bw_buf_free(&out);
}

RUN_TESTS(type_text_round_trips, schema_check_names_types_in_words,
          integers_widen_and_nulls_are_minus_one, strings_and_ascii,
          timestamp_seconds_out_of_range, vectors_go_through_the_fill_hook)
