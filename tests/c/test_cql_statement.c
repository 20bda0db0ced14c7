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

/* ---- every row judged in one pass: a fixture of four columns whose row i is of kind
   kinds[idx[i]] and holds values made from idx[i] (a row encoded alone, from a fixture of
   that row only, is the same bytes). k int (the partition key), s ascii, t timestamp in
   seconds, v vector<float, 2> as an Arrow list. */
enum { GOOD, NULL_KEY, NOT_ASCII, OUT_OF_RANGE, SHORT_VECTOR, NULL_IN_VECTOR, N_KINDS };
#define MAX_FIX 64

typedef struct {
    int32_t k[MAX_FIX];
    uint8_t k_valid[MAX_FIX / 8];
    int32_t s_offsets[MAX_FIX + 1];
    char s_data[MAX_FIX * 2];
    int64_t t[MAX_FIX];
    int32_t v_offsets[MAX_FIX + 1];
    float v[MAX_FIX * 2];
    uint8_t v_valid[MAX_FIX * 2 / 8];
    const void *kb[2], *sb[3], *tb[2], *vb[2], *vcb[2];
    struct ArrowArray ka, sa, ta, va, vc;
    struct ArrowArray *v_children[1];
    struct ArrowSchema v_child_schema, v_schema;
    struct ArrowSchema *v_schema_children[1];
    bw_cql_column cols[4];
} fixture;

static void release_schema(struct ArrowSchema *s) { s->release = NULL; }

static void fill_floats(const void *ctx, const bw_arrow_vectors *v, int64_t first, char *dst) {
    (void)v;
    memcpy(dst, (const float *)ctx + first, 8); /* the bytes, whatever their order */
}

static void build(fixture *f, const int *kinds, const int *idx, int n) {
    memset(f, 0, sizeof *f);
    int32_t nv = 0;
    int k_nulls = 0, v_nulls = 0;
    for (int i = 0; i < n; i++) {
        int kind = kinds[idx[i]], at = idx[i];
        f->k[i] = at;
        if (kind == NULL_KEY)
            k_nulls++;
        else
            f->k_valid[i / 8] |= (uint8_t)(1u << (i % 8));
        f->s_data[2 * i] = 'a' + (char)(at % 26);
        f->s_data[2 * i + 1] = kind == NOT_ASCII ? (char)0xe9 : 'b';
        f->s_offsets[i + 1] = 2 * (i + 1);
        f->t[i] = kind == OUT_OF_RANGE ? INT64_MAX / 100 : at;
        int len = kind == SHORT_VECTOR ? 1 : 2;
        for (int j = 0; j < len; j++) {
            f->v[nv] = (float)(at * 10 + j);
            if (!(kind == NULL_IN_VECTOR && j == 1))
                f->v_valid[nv / 8] |= (uint8_t)(1u << (nv % 8));
            else
                v_nulls++;
            nv++;
        }
        f->v_offsets[i + 1] = nv;
    }
    f->kb[0] = f->k_valid, f->kb[1] = f->k;
    f->sb[0] = NULL, f->sb[1] = f->s_offsets, f->sb[2] = f->s_data;
    f->tb[0] = NULL, f->tb[1] = f->t;
    f->vcb[0] = f->v_valid, f->vcb[1] = f->v;
    f->vb[0] = NULL, f->vb[1] = f->v_offsets;
    f->ka = (struct ArrowArray){.length = n, .null_count = k_nulls, .n_buffers = 2,
                                .buffers = f->kb, .release = release_array};
    f->sa = (struct ArrowArray){.length = n, .n_buffers = 3, .buffers = f->sb,
                                .release = release_array};
    f->ta = (struct ArrowArray){.length = n, .n_buffers = 2, .buffers = f->tb,
                                .release = release_array};
    f->vc = (struct ArrowArray){.length = nv, .null_count = v_nulls, .n_buffers = 2,
                                .buffers = f->vcb, .release = release_array};
    f->v_children[0] = &f->vc;
    f->va = (struct ArrowArray){.length = n, .n_buffers = 2, .buffers = f->vb,
                                .n_children = 1, .children = f->v_children,
                                .release = release_array};
    f->v_child_schema = (struct ArrowSchema){.format = "f", .release = release_schema};
    f->v_schema_children[0] = &f->v_child_schema;
    f->v_schema = (struct ArrowSchema){.format = "+l", .n_children = 1,
                                       .children = f->v_schema_children,
                                       .release = release_schema};
    char err[200];
    bw_cql_type ti = {.id = BW_CQL_T_INT}, ta = {.id = BW_CQL_T_ASCII},
                ts = {.id = BW_CQL_T_TIMESTAMP};
    bw_cql_type tv;
    CHECK_EQ(bw_cql_type_parse("vector<float, 2>", 16, &tv, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_plan("k", "i", NULL, &ti, &f->cols[0], err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_plan("s", "u", NULL, &ta, &f->cols[1], err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_plan("t", "tss:", NULL, &ts, &f->cols[2], err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_plan("v", "+l", "f", &tv, &f->cols[3], err, sizeof err), 0);
    f->cols[3].fill = fill_floats;
    f->cols[3].fill_ctx = f->v;
    CHECK_EQ(bw_cql_column_bind(&f->cols[0], NULL, &f->ka, 0, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_bind(&f->cols[1], NULL, &f->sa, 0, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_bind(&f->cols[2], NULL, &f->ta, 0, err, sizeof err), 0);
    CHECK_EQ(bw_cql_column_bind(&f->cols[3], &f->v_schema, &f->va, 0, err, sizeof err), 0);
}

static const char *const fix_names[] = {"k", "s", "t", "v"};
static const int fix_pk[] = {0};

static bw_cql_bound bound_to(fixture *f) {
    return (bw_cql_bound){.id = (const uint8_t *)"ID", .id_len = 2,
                          .params = {.consistency = 1}, .columns = f->cols,
                          .names = fix_names, .n_columns = 4, .pk = fix_pk, .n_pk = 1};
}

/* The rows of kinds[0..n) judged in one pass, against each row encoded alone by
   bw_cql_encode_rows: the same rows refused, in order, with the same column and reason;
   the rows kept written with the same bytes and tokens. */
static void check_one_pass(const int *kinds, int n, int64_t first_row) {
    static fixture all, one;
    int idx[MAX_FIX];
    for (int i = 0; i < n; i++)
        idx[i] = i;
    build(&all, kinds, idx, n);
    bw_cql_bound st = bound_to(&all);
    bw_buf out = {0}, refused = {0}, alone = {0};
    int64_t ends[MAX_FIX], tokens[MAX_FIX], kept = -1;
    bw_cql_row_error e;
    CHECK_EQ(bw_cql_encode_rows_refusing(&st, n, first_row, &out, ends, tokens, &refused,
                                         &kept, &e), 0);
    const bw_cql_row_error *r = (const bw_cql_row_error *)(const void *)refused.data;
    int64_t k = 0, j = 0;
    for (int i = 0; i < n; i++) {
        build(&one, kinds, &idx[i], 1);
        bw_cql_bound st1 = bound_to(&one);
        int64_t end1, token1;
        bw_cql_row_error e1;
        alone.len = 0;
        int w = bw_cql_encode_rows(&st1, 1, first_row + i, &alone, &end1, &token1, &e1);
        CHECK_EQ(w == 0, kinds[i] == GOOD);
        if (w == 0) {
            CHECK(k < kept);
            if (k >= kept)
                break;
            int64_t from = k ? ends[k - 1] : 0;
            CHECK_EQ(ends[k] - from, end1);
            CHECK(memcmp(out.data + from, alone.data, (size_t)end1) == 0);
            CHECK(tokens[k] == token1);
            k++;
        } else {
            CHECK_EQ(w, -2);
            CHECK((size_t)j < refused.len / sizeof *r);
            if ((size_t)j >= refused.len / sizeof *r)
                break;
            CHECK_EQ(r[j].row, e1.row);
            CHECK_EQ(r[j].column, e1.column);
            CHECK(strcmp(r[j].reason, e1.reason) == 0);
            j++;
        }
    }
    CHECK_EQ(k, kept);
    CHECK_EQ((size_t)j, refused.len / sizeof *r);
    CHECK_EQ(out.len, kept ? (size_t)ends[kept - 1] : 0);
    bw_buf_free(&out);
    bw_buf_free(&refused);
    bw_buf_free(&alone);
}

TEST(every_row_refused_is_listed_in_one_pass) {
    int kinds[MAX_FIX];
    /* none bad; each kind first, last, alone, and all bad */
    for (int i = 0; i < 9; i++)
        kinds[i] = GOOD;
    check_one_pass(kinds, 9, 0);
    for (int kind = NULL_KEY; kind < N_KINDS; kind++) {
        kinds[0] = kind;
        check_one_pass(kinds, 9, 100);
        kinds[0] = GOOD;
        kinds[8] = kind;
        check_one_pass(kinds, 9, 0);
        kinds[8] = GOOD;
        check_one_pass(&kind, 1, 7);
    }
    for (int i = 0; i < MAX_FIX; i++)
        kinds[i] = NULL_KEY + i % (N_KINDS - 1);
    check_one_pass(kinds, MAX_FIX, 0);
    /* every kind anywhere: a fixed pseudo-random walk */
    uint32_t x = 12345;
    for (int round = 0; round < 200; round++) {
        int n = 1 + (int)(x % MAX_FIX);
        for (int i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            kinds[i] = (x >> 16) % 3 ? GOOD : (int)((x >> 20) % N_KINDS);
        }
        check_one_pass(kinds, n, round);
    }
    /* the reasons in words: the rows counted from first_row */
    int mixed[] = {NULL_KEY, GOOD, SHORT_VECTOR, NULL_IN_VECTOR, OUT_OF_RANGE, NOT_ASCII};
    static fixture f;
    int idx[] = {0, 1, 2, 3, 4, 5};
    build(&f, mixed, idx, 6);
    bw_cql_bound st = bound_to(&f);
    bw_buf out = {0}, refused = {0};
    int64_t ends[6], tokens[6], kept;
    bw_cql_row_error e;
    CHECK_EQ(bw_cql_encode_rows_refusing(&st, 6, 1000, &out, ends, tokens, &refused, &kept, &e),
             0);
    CHECK_EQ(kept, 1);
    CHECK_EQ(refused.len, 5 * sizeof e);
    const bw_cql_row_error *r = (const bw_cql_row_error *)(const void *)refused.data;
    CHECK_EQ(r[0].row, 1000);
    CHECK_EQ(r[0].column, 0);
    CHECK(strstr(r[0].reason, "cannot be null") != NULL);
    CHECK_EQ(r[1].row, 1002);
    CHECK_EQ(r[1].column, 3);
    CHECK(strstr(r[1].reason, "has 1 values") != NULL);
    CHECK(strstr(r[2].reason, "holds a null") != NULL);
    CHECK_EQ(r[3].column, 2);
    CHECK(strstr(r[3].reason, "out of the range") != NULL);
    CHECK_EQ(r[4].column, 1);
    CHECK(strstr(r[4].reason, "not ASCII") != NULL);
    /* a key of too many columns is the statement's fault, not a row's */
    st.n_pk = BW_CQL_MAX_PK + 1;
    CHECK_EQ(bw_cql_encode_rows_refusing(&st, 6, 0, &out, ends, tokens, &refused, &kept, &e),
             -2);
    CHECK(strstr(e.reason, "more than 64") != NULL);
    bw_buf_free(&out);
    bw_buf_free(&refused);
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

RUN_TESTS(params_flags_and_fields, rows_with_tokens_and_errors, partition_token_components,
          every_row_refused_is_listed_in_one_pass)
