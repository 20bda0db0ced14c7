/* cql_result.c: RESULT bodies of each kind, every cut-short body refused, counts past the
   body refused before any allocation. Fuzzed by tests/c/fuzz/fuzz_cql_result.c.
   sources: cql_result.c cql_values.c cql_wire.c out_buffer.c arrow_c.c */
#include "check.h"

#include <stdint.h>
#include <string.h>

#include "cql_result.h"

/* Rows, global spec ks.t, columns a text and v vector<float, 2>, one row ("x", null). */
static const uint8_t rows_body[] = {
    0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 2, 'k', 's', 0, 1, 't',
    0, 1, 'a', 0, 0x0d,
    0, 1, 'v', 0, 0, 0, 88,
    'o', 'r', 'g', '.', 'a', 'p', 'a', 'c', 'h', 'e', '.', 'c', 'a', 's', 's', 'a', 'n', 'd',
    'r', 'a', '.', 'd', 'b', '.', 'm', 'a', 'r', 's', 'h', 'a', 'l', '.', 'V', 'e', 'c', 't',
    'o', 'r', 'T', 'y', 'p', 'e', '(', 'o', 'r', 'g', '.', 'a', 'p', 'a', 'c', 'h', 'e', '.',
    'c', 'a', 's', 's', 'a', 'n', 'd', 'r', 'a', '.', 'd', 'b', '.', 'm', 'a', 'r', 's', 'h',
    'a', 'l', '.', 'F', 'l', 'o', 'a', 't', 'T', 'y', 'p', 'e', ',', ' ', '2', ')',
    0, 0, 0, 1, 0, 0, 0, 1, 'x', 0xff, 0xff, 0xff, 0xff,
};

TEST(rows_metadata_and_cells) {
    bw_cql_result r;
    char err[200];
    CHECK_EQ(bw_cql_result_parse(rows_body, sizeof rows_body, &r, err, sizeof err), 0);
    CHECK_EQ(r.kind, BW_CQL_RESULT_ROWS);
    CHECK_EQ(r.metadata.columns_count, 2);
    CHECK_EQ(r.metadata.columns[1].type.id, BW_CQL_T_VECTOR);
    CHECK_EQ(r.metadata.columns[1].type.dimension, 2);
    CHECK_BYTES(r.metadata.columns[0].table, r.metadata.columns[0].table_len, "t");
    CHECK_EQ(r.rows_count, 1);
    const uint8_t *p;
    int32_t n;
    CHECK_EQ(bw_cql_get_bytes(&r.rows, &p, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(bw_cql_get_bytes(&r.rows, &p, &n), 0);
    CHECK_EQ(n, -1);
    CHECK_EQ(r.rows.left, 0);
    bw_cql_result_free(&r);
}

TEST(every_cut_is_refused) {
    bw_cql_result r;
    char err[200];
    for (size_t cut = 0; cut < sizeof rows_body; cut++) {
        CHECK_EQ(bw_cql_result_parse(rows_body, cut, &r, err, sizeof err), -1);
        CHECK(strncmp(err, "malformed RESULT", 16) == 0);
    }
}

TEST(counts_past_the_body) {
    const uint8_t many_columns[] = {0, 0, 0, 2, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    const uint8_t many_rows[] = {0, 0, 0, 2, 0, 0, 0, 4, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    const uint8_t many_keys[] = {0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    bw_cql_result r;
    char err[200];
    CHECK_EQ(bw_cql_result_parse(many_columns, sizeof many_columns, &r, err, sizeof err), -1);
    CHECK(strstr(err, "more columns") != NULL);
    CHECK_EQ(bw_cql_result_parse(many_rows, sizeof many_rows, &r, err, sizeof err), -1);
    CHECK(strstr(err, "more cells") != NULL);
    CHECK_EQ(bw_cql_result_parse(many_keys, sizeof many_keys, &r, err, sizeof err), -1);
    CHECK(strstr(err, "partition key") != NULL);
}

TEST(prepared_and_schema_change) {
    const uint8_t prepared[] = {0, 0, 0, 4, 0, 1, 0x42,
                                0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0,
                                0, 2, 'k', 's', 0, 1, 't', 0, 1, 'k', 0, 9,
                                0, 0, 0, 4, 0, 0, 0, 0};
    bw_cql_result r;
    char err[200];
    CHECK_EQ(bw_cql_result_parse(prepared, sizeof prepared, &r, err, sizeof err), 0);
    CHECK_EQ(r.kind, BW_CQL_RESULT_PREPARED);
    CHECK_EQ(r.id_len, 1);
    CHECK_EQ(r.bind.pk_count, 1);
    CHECK_EQ(r.bind.pk_indexes[0], 0);
    CHECK_EQ(r.bind.columns[0].type.id, BW_CQL_T_INT);
    CHECK_EQ(r.metadata.flags, BW_CQL_META_NO_METADATA);
    bw_cql_result_free(&r);
    const uint8_t change[] = {0, 0, 0, 5, 0, 7, 'C', 'R', 'E', 'A', 'T', 'E', 'D',
                              0, 5, 'T', 'A', 'B', 'L', 'E', 0, 2, 'k', 's', 0, 1, 't'};
    CHECK_EQ(bw_cql_result_parse(change, sizeof change, &r, err, sizeof err), 0);
    CHECK_BYTES(r.name, r.name_len, "t");
    CHECK_EQ(bw_cql_result_parse(change, sizeof change - 1, &r, err, sizeof err), -1);
}

RUN_TESTS(rows_metadata_and_cells, every_cut_is_refused, counts_past_the_body,
          prepared_and_schema_change)
