/* libFuzzer target: CQL RESULT bodies. Whatever the input, bw_cql_result_parse never reads
   past the body (the input is a heap block of exactly its size) and allocates at most in
   proportion to it (the runner's malloc limit); on success every string, byte run and the
   rows' cursor lie inside the body, each of the rows_count * columns_count cells reads back
   through the cursor, ending exactly at its end, and the function arguments of a
   Schema_change read back as strings.
   sources: cql_result.c cql_values.c cql_wire.c out_buffer.c arrow_c.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cql_result.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

static const uint8_t *lo, *hi;

static void inside(const void *p, size_t n) {
    if (p == NULL) {
        REQUIRE(n == 0);
        return;
    }
    const uint8_t *q = p;
    REQUIRE(q >= lo && q <= hi && n <= (size_t)(hi - q));
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++)
        sink ^= q[i]; /* touched: ASan sees any byte out of the block */
    (void)sink;
}

static void check_metadata(const bw_cql_metadata *m) {
    REQUIRE(m->columns_count >= 0);
    inside(m->paging_state, m->paging_state_len > 0 ? (size_t)m->paging_state_len : 0);
    for (int32_t i = 0; m->columns != NULL && i < m->columns_count; i++) {
        const bw_cql_colspec *c = &m->columns[i];
        inside(c->keyspace, c->keyspace_len);
        inside(c->table, c->table_len);
        inside(c->name, c->name_len);
        inside(c->custom, c->custom_len);
        char text[64];
        bw_cql_type_text(&c->type, text, sizeof text);
        REQUIRE(memchr(text, 0, sizeof text) != NULL);
    }
    for (int32_t i = 0; i < m->pk_count; i++)
        REQUIRE(m->pk_indexes[i] < (uint32_t)m->columns_count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lo = data;
    hi = data + size;
    bw_cql_result r;
    char err[200];
    if (bw_cql_result_parse(data, size, &r, err, sizeof err) < 0) {
        REQUIRE(memchr(err, 0, sizeof err) != NULL && strncmp(err, "malformed RESULT", 16) == 0);
        return 0;
    }
    check_metadata(&r.metadata);
    check_metadata(&r.bind);
    inside(r.keyspace, r.keyspace_len);
    inside(r.id, r.id_len);
    inside(r.change, r.change_len);
    inside(r.target, r.target_len);
    inside(r.name, r.name_len);
    if (r.kind == BW_CQL_RESULT_ROWS) {
        bw_cql_cursor c = r.rows;
        inside(c.p, c.left);
        int64_t cells = (int64_t)r.rows_count * r.metadata.columns_count;
        for (int64_t i = 0; i < cells; i++) {
            const uint8_t *p;
            int32_t n;
            REQUIRE(bw_cql_get_bytes(&c, &p, &n) == 0);
            inside(p, n > 0 ? (size_t)n : 0);
        }
        REQUIRE(c.left == 0);
    }
    bw_cql_cursor a = r.args;
    for (uint16_t i = 0; i < r.arg_count; i++) {
        const char *s;
        size_t n;
        REQUIRE(bw_cql_get_string(&a, &s, &n) == 0);
        inside(s, n);
    }
    bw_cql_result_free(&r);
    return 0;
}
