/* The bodies of the QUERY, PREPARE and EXECUTE requests (protocol v4), and the rows of an
   Arrow batch as EXECUTE bodies of a prepared statement, each with its partition token.
   Core layer: no Python; the row loop reads only memory, so it may run without the GIL. */
#ifndef BW_CQL_STATEMENT_H
#define BW_CQL_STATEMENT_H
#include <stddef.h>
#include <stdint.h>

#include "cql_values.h"
#include "out_buffer.h"

/* The query parameters' flags (v4: one byte). */
enum {
    BW_CQL_QF_VALUES = 0x01,
    BW_CQL_QF_SKIP_METADATA = 0x02,
    BW_CQL_QF_PAGE_SIZE = 0x04,
    BW_CQL_QF_PAGING_STATE = 0x08,
    BW_CQL_QF_SERIAL_CONSISTENCY = 0x10,
    BW_CQL_QF_TIMESTAMP = 0x20,
};

/* What follows the values of QUERY and EXECUTE. A field is written when set: page_size > 0,
   paging_state != NULL, serial_consistency != 0, has_timestamp. */
typedef struct {
    uint16_t consistency;
    int skip_metadata;
    int32_t page_size;
    const uint8_t *paging_state;
    size_t paging_state_len;
    uint16_t serial_consistency;
    int has_timestamp;
    int64_t timestamp; /* microseconds since the epoch */
} bw_cql_params;

/* The query parameters up to the values: consistency, flags and, when n_values >= 0, the
   values' [short] count (the caller then appends n_values [value]s). 0, or -1 (out of
   memory, or n_values > 65535). */
int bw_cql_put_params_head(bw_buf *out, const bw_cql_params *p, int n_values);
/* The rest of the parameters, after the values. 0, or -1. */
int bw_cql_put_params_tail(bw_buf *out, const bw_cql_params *p);

/* A QUERY body without values: [long string] query, then the parameters. 0, or -1. */
int bw_cql_put_query(bw_buf *out, const char *query, size_t n, const bw_cql_params *p);
/* A PREPARE body (v4): [long string] query. 0, or -1. */
int bw_cql_put_prepare(bw_buf *out, const char *query, size_t n);

/* Most partition key columns bw_cql_encode_rows takes. */
#define BW_CQL_MAX_PK 64

/* The prepared statement an Arrow batch is bound to. */
typedef struct {
    const uint8_t *id; /* the prepared id */
    size_t id_len;
    bw_cql_params params;
    bw_cql_column *columns; /* one per bind marker, in marker order */
    const char *const *names; /* their CQL names, for errors */
    int n_columns;
    const int *pk; /* bind marker index of each partition key component, in key order */
    int n_pk;      /* 0: no tokens */
} bw_cql_bound;

/* Why a row could not be written: the row (counted from first_row), the bind marker's
   column index (-1: none, out of memory) and the reason. */
typedef struct {
    int64_t row;
    int column;
    char reason[240];
} bw_cql_row_error;

/* Rows [0, rows) of the bound columns as EXECUTE bodies, back to back in out; ends[r] gets
   the offset in out just past row r's body, tokens[r] (when st->n_pk > 0) the Murmur3 token
   of its partition key. 0; -1 out of memory; -2 a row that cannot be written (*e says which
   and why: a null partition key, a non-ASCII ascii value, a timestamp out of range, a vector
   of the wrong length ...). On failure, ends and tokens are complete for the rows before the
   failing one. */
int bw_cql_encode_rows(const bw_cql_bound *st, int64_t rows, int64_t first_row, bw_buf *out,
                       int64_t *ends, int64_t *tokens, bw_cql_row_error *e);

/* As bw_cql_encode_rows, every row judged in one pass: a row that cannot be written is left
   out (out, ends and tokens hold the rows written, *kept of them, in order) and its error,
   a bw_cql_row_error with the reason bw_cql_encode_rows would give, appended to refused (an
   array of them, in row order); the rows after it go on. 0; -1 out of memory; -2 the
   statement itself cannot be written (a partition key of more than BW_CQL_MAX_PK columns:
   *e says so, as bw_cql_encode_rows does). */
int bw_cql_encode_rows_refusing(const bw_cql_bound *st, int64_t rows, int64_t first_row,
                                bw_buf *out, int64_t *ends, int64_t *tokens, bw_buf *refused,
                                int64_t *kept, bw_cql_row_error *e);

/* The token of a partition key given as its n components' serialized values: with one
   component, the token of its bytes; with more, of the routing key that joins them, each
   as [short length][bytes][0] (scratch holds it). 0; -1 out of memory; -2 a component
   longer than 65535 bytes in a composite key, or a null one (len < 0). */
int bw_cql_partition_token(const uint8_t *const *parts, const int32_t *lens, int n,
                           bw_buf *scratch, int64_t *token);
#endif
