/* cql_statement.c: the query parameters' flags and optional fields, QUERY and PREPARE
   bodies, rows as EXECUTE bodies with tokens (one and two partition key columns), and the
   row errors (a null key, a bad value) naming the row and column. Compared with the
   driver's ExecuteMessage/QueryMessage in tests/test_cql_values.py and test_cql_result.py.
   sources: cql_statement.c cql_values.c cql_wire.c murmur3.c out_buffer.c arrow_c.c */
#include "check.h"

#include <stdint.h>
#include <string.h>

#include "cql_statement.h"
#include "murmur3.h"

TEST(params_flags_and_fields) {
    bw_buf out = {0};
    bw_cql_params p = {.consistency = 4, .page_size = 100, .serial_consistency = 8,
                       .has_timestamp = 1, .timestamp = 1};
    CHECK_EQ(bw_cql_put_params_head(&out, &p, 2), 0);
    CHECK(memcmp(out.data, "\x00\x04\x35\x00\x02", 5) == 0); /* values|page|serial|ts */
    out.len = 0;
    CHECK_EQ(bw_cql_put_params_tail(&out, &p), 0);
    CHECK(memcmp(out.data, "\0\0\0\x64\0\x08\0\0\0\0\0\0\0\x01", 14) == 0);
    out.len = 0;
    CHECK_EQ(bw_cql_put_params_head(&out, &p, 70000), -1);
    CHECK_EQ(out.len, 0);
    bw_cql_params plain = {.consistency = 1};
    CHECK_EQ(bw_cql_put_query(&out, "Q", 1, &plain), 0);
    CHECK(memcmp(out.data, "\0\0\0\x01Q\0\x01\0", 8) == 0);
    CHECK_EQ(out.len, 8);
    out.len = 0;
    CHECK_EQ(bw_cql_put_prepare(&out, "Q", 1), 0);
    CHECK_EQ(out.len, 5);
    bw_buf_free(&out);
}

static void release_array(struct ArrowArray *a) { a->release = NULL; }

TEST(rows_with_tokens_and_errors) {
    int32_t k[] = {1, 2, 3};
    uint8_t k_valid[] = {0x3}; /* row 2's key is null */
    int32_t offsets[] = {0, 1, 3, 3};
    const char data[] = "abc";
    const void *kb[] = {k_valid, k}, *sb[] = {NULL, offsets, data};
    struct ArrowArray ka = {.length = 3, .null_count = 1, .n_buffers = 2, .buffers = kb,
                            .release = release_array};
    struct ArrowArray sa = {.length = 3, .n_buffers = 3, .buffers = sb, .release = release_array};
    bw_cql_column cols[2];
    char err[200];
    bw_cql_type ti = {.id = BW_CQL_T_INT}, tt = {.id = BW_CQL_T_VARCHAR};
    CHECK_EQ(bw_cql_column_plan("k", "i", NULL, &ti, &cols[0], err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_plan("s", "u", NULL, &tt, &cols[1], err, sizeof err), 0);
    bw_cql_column_bind(&cols[0], NULL, &ka, 0, err, sizeof err);
    bw_cql_column_bind(&cols[1], NULL, &sa, 0, err, sizeof err);
    const char *names[] = {"k", "s"};
    int pk[] = {1, 0};
    bw_cql_bound st = {.id = (const uint8_t *)"ID", .id_len = 2, .params = {.consistency = 1},
                       .columns = cols, .names = names, .n_columns = 2, .pk = pk, .n_pk = 1};
    bw_buf out = {0};
    int64_t ends[3], tokens[3];
    bw_cql_row_error e;
    CHECK_EQ(bw_cql_encode_rows(&st, 2, 0, &out, ends, tokens, &e), 0);
    CHECK_EQ(ends[0], 2 + 2 + 2 + 1 + 2 + 8 + 5);
    CHECK(memcmp(out.data, "\0\x02ID\0\x01\x01\0\x02\0\0\0\x04\0\0\0\x01\0\0\0\x01" "a", 22) == 0);
    CHECK(tokens[0] == bw_murmur3_token((const uint8_t *)"a", 1));
    /* two key columns: the composite routing key (s, k) */
    st.n_pk = 2;
    out.len = 0;
    CHECK_EQ(bw_cql_encode_rows(&st, 1, 0, &out, ends, tokens, &e), 0);
    const uint8_t key[] = {0, 1, 'a', 0, 0, 4, 0, 0, 0, 1, 0};
    CHECK(tokens[0] == bw_murmur3_token(key, sizeof key));
    /* row 2's key is null: named, counted from first_row */
    out.len = 0;
    CHECK_EQ(bw_cql_encode_rows(&st, 3, 100, &out, ends, tokens, &e), -2);
    CHECK_EQ(e.row, 102);
    CHECK_EQ(e.column, 0);
    CHECK(strstr(e.reason, "cannot be null") != NULL);
    bw_buf_free(&out);
}

TEST(partition_token_components) {
    const uint8_t *parts[] = {(const uint8_t *)"ab", (const uint8_t *)"c"};
    int32_t lens[] = {2, 1};
    bw_buf scratch = {0};
    int64_t token;
    CHECK_EQ(bw_cql_partition_token(parts, lens, 1, &scratch, &token), 0);
    CHECK(token == bw_murmur3_token((const uint8_t *)"ab", 2));
    lens[1] = -1;
    CHECK_EQ(bw_cql_partition_token(parts, lens, 2, &scratch, &token), -2);
    lens[1] = 70000;
    CHECK_EQ(bw_cql_partition_token(parts, lens, 2, &scratch, &token), -2);
    bw_buf_free(&scratch);
}

RUN_TESTS(params_flags_and_fields, rows_with_tokens_and_errors, partition_token_components)
