/* QUERY, PREPARE and EXECUTE bodies; an Arrow batch's rows as EXECUTE bodies. */
#include "cql_statement.h"

#include <stdio.h>
#include <string.h>

#include "cql_wire.h"
#include "murmur3.h"

static uint8_t flags_of(const bw_cql_params *p, int n_values) {
    uint8_t f = 0;
    if (n_values >= 0)
        f |= BW_CQL_QF_VALUES;
    if (p->skip_metadata)
        f |= BW_CQL_QF_SKIP_METADATA;
    if (p->page_size > 0)
        f |= BW_CQL_QF_PAGE_SIZE;
    if (p->paging_state != NULL)
        f |= BW_CQL_QF_PAGING_STATE;
    if (p->serial_consistency != 0)
        f |= BW_CQL_QF_SERIAL_CONSISTENCY;
    if (p->has_timestamp)
        f |= BW_CQL_QF_TIMESTAMP;
    return f;
}

int bw_cql_put_params_head(bw_buf *out, const bw_cql_params *p, int n_values) {
    if (n_values > UINT16_MAX)
        return -1;
    size_t start = out->len;
    if (bw_cql_put_short(out, p->consistency) < 0 ||
        bw_cql_put_byte(out, flags_of(p, n_values)) < 0 ||
        (n_values >= 0 && bw_cql_put_short(out, (uint16_t)n_values) < 0)) {
        out->len = start;
        return -1;
    }
    return 0;
}

int bw_cql_put_params_tail(bw_buf *out, const bw_cql_params *p) {
    size_t start = out->len;
    if ((p->page_size > 0 && bw_cql_put_int(out, p->page_size) < 0) ||
        (p->paging_state != NULL &&
         bw_cql_put_bytes(out, p->paging_state, p->paging_state_len) < 0) ||
        (p->serial_consistency != 0 && bw_cql_put_short(out, p->serial_consistency) < 0) ||
        (p->has_timestamp && bw_cql_put_long(out, p->timestamp) < 0)) {
        out->len = start;
        return -1;
    }
    return 0;
}

int bw_cql_put_query(bw_buf *out, const char *query, size_t n, const bw_cql_params *p) {
    size_t start = out->len;
    if (bw_cql_put_long_string(out, query, n) < 0 || bw_cql_put_params_head(out, p, -1) < 0 ||
        bw_cql_put_params_tail(out, p) < 0) {
        out->len = start;
        return -1;
    }
    return 0;
}

int bw_cql_put_prepare(bw_buf *out, const char *query, size_t n) {
    return bw_cql_put_long_string(out, query, n);
}

int bw_cql_partition_token(const uint8_t *const *parts, const int32_t *lens, int n,
                           bw_buf *scratch, int64_t *token) {
    for (int k = 0; k < n; k++)
        if (lens[k] < 0 || (n > 1 && lens[k] > UINT16_MAX))
            return -2;
    if (n == 1) {
        *token = bw_murmur3_token(parts[0], (size_t)lens[0]);
        return 0;
    }
    scratch->len = 0;
    for (int k = 0; k < n; k++)
        if (bw_cql_put_short_bytes(scratch, parts[k], (size_t)lens[k]) < 0 ||
            bw_cql_put_byte(scratch, 0) < 0)
            return -1;
    *token = bw_murmur3_token((const uint8_t *)scratch->data, scratch->len);
    return 0;
}

static int row_error(bw_cql_row_error *e, int64_t row, int column, const char *fmt,
                     const char *detail) {
    e->row = row;
    e->column = column;
    snprintf(e->reason, sizeof e->reason, fmt, detail);
    return column < 0 ? -1 : -2;
}

/* Row r (first_row + r, for errors) as an EXECUTE body appended to out, its token in *token
   when st->n_pk > 0; key is the routing key's scratch. 0; -1 out of memory; -2 the row
   cannot be written (*e says why). On failure, out may hold part of the row. */
/* The row loop's body and the loop are inlined into their two callers: a call a row cost
   the plain encoder about a quarter more instructions in its own code. */
#define ALWAYS_INLINE __attribute__((always_inline)) inline

static ALWAYS_INLINE int encode_row(const bw_cql_bound *st, int64_t r, int64_t row,
                                    bw_buf *out, bw_buf *key, int64_t *token,
                                    bw_cql_row_error *e) {
    const uint8_t *parts[BW_CQL_MAX_PK];
    int32_t len[BW_CQL_MAX_PK];
    size_t at[BW_CQL_MAX_PK];
    size_t value_at;
    int32_t value_len;
    if (bw_cql_put_short_bytes(out, st->id, st->id_len) < 0 ||
        bw_cql_put_params_head(out, &st->params, st->n_columns) < 0)
        return row_error(e, row, -1, "out of memory%s", "");
    for (int c = 0; c < st->n_columns; c++) {
        int w = bw_cql_column_write(&st->columns[c], r, out, &value_at, &value_len,
                                    e->reason, sizeof e->reason);
        if (w < 0) {
            if (w == -1)
                return row_error(e, row, -1, "out of memory%s", "");
            e->row = row;
            e->column = c;
            return -2;
        }
        for (int k = 0; k < st->n_pk; k++)
            if (st->pk[k] == c) {
                at[k] = value_at;
                len[k] = value_len;
            }
    }
    if (bw_cql_put_params_tail(out, &st->params) < 0)
        return row_error(e, row, -1, "out of memory%s", "");
    if (st->n_pk == 0)
        return 0;
    /* the values' memory may have moved while the row grew: pointers taken now */
    for (int k = 0; k < st->n_pk; k++)
        parts[k] = (const uint8_t *)out->data + at[k];
    int t = bw_cql_partition_token(parts, len, st->n_pk, key, token);
    if (t == -1)
        return row_error(e, row, -1, "out of memory%s", "");
    if (t == -2) {
        int k = 0;
        while (k < st->n_pk - 1 && len[k] >= 0 && len[k] <= UINT16_MAX)
            k++;
        return row_error(e, row, st->pk[k], "%s",
                         len[k] < 0 ? "a partition key column cannot be null"
                                    : "a component of a composite partition key is "
                                      "longer than 65535 bytes");
    }
    return 0;
}

/* The rows' loop of bw_cql_encode_rows (refused == NULL: it stops at the first row refused)
   and of bw_cql_encode_rows_refusing (each row refused is taken back out of out, its error
   appended to refused, and the rows after it go on; *kept counts the rows written). */
static ALWAYS_INLINE int encode_rows(const bw_cql_bound *st, int64_t rows, int64_t first_row,
                                     bw_buf *out, int64_t *ends, int64_t *tokens,
                                     bw_cql_row_error *e, bw_buf *refused, int64_t *kept) {
    bw_buf key = {0};
    int rc = 0;
    int64_t n = 0; /* rows written: r, without refused */
    if (st->n_pk > BW_CQL_MAX_PK)
        return row_error(e, first_row, st->pk[0], "a partition key of more than 64 columns%s",
                         "");
    for (int64_t r = 0; r < rows; r++) {
        int64_t at = refused != NULL ? n : r;
        size_t start = out->len;
        int w = encode_row(st, r, first_row + r, out, &key, st->n_pk > 0 ? &tokens[at] : NULL,
                           e);
        if (w == -2 && refused != NULL) {
            out->len = start;
            if (bw_buf_append(refused, e, sizeof *e) < 0) {
                rc = row_error(e, first_row + r, -1, "out of memory%s", "");
                break;
            }
            continue;
        }
        if (w < 0) {
            rc = w;
            break;
        }
        ends[at] = (int64_t)out->len;
        n++;
    }
    bw_buf_free(&key);
    if (kept != NULL)
        *kept = n;
    return rc;
}

int bw_cql_encode_rows(const bw_cql_bound *st, int64_t rows, int64_t first_row, bw_buf *out,
                       int64_t *ends, int64_t *tokens, bw_cql_row_error *e) {
    return encode_rows(st, rows, first_row, out, ends, tokens, e, NULL, NULL);
}

int bw_cql_encode_rows_refusing(const bw_cql_bound *st, int64_t rows, int64_t first_row,
                                bw_buf *out, int64_t *ends, int64_t *tokens, bw_buf *refused,
                                int64_t *kept, bw_cql_row_error *e) {
    return encode_rows(st, rows, first_row, out, ends, tokens, e, refused, kept);
}
