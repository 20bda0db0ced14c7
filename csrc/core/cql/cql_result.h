/* The RESULT message of the CQL native protocol (v4): Void, Rows (metadata and rows),
   Set_keyspace, Prepared (id, bind metadata with the partition key's indexes, result
   metadata) and Schema_change. Every read is bounded by the body: a hostile body fails with
   a message, never reads past its end, and allocates at most in proportion to its length.
   Core layer: no Python. Strings and byte runs point into the body (not NUL-ended), which
   must outlive the result. */
#ifndef BW_CQL_RESULT_H
#define BW_CQL_RESULT_H
#include <stddef.h>
#include <stdint.h>

#include "cql_values.h"
#include "cql_wire.h"

enum {
    BW_CQL_RESULT_VOID = 0x0001,
    BW_CQL_RESULT_ROWS = 0x0002,
    BW_CQL_RESULT_SET_KEYSPACE = 0x0003,
    BW_CQL_RESULT_PREPARED = 0x0004,
    BW_CQL_RESULT_SCHEMA_CHANGE = 0x0005,
};

/* Metadata flags. */
enum {
    BW_CQL_META_GLOBAL_TABLES_SPEC = 0x0001,
    BW_CQL_META_HAS_MORE_PAGES = 0x0002,
    BW_CQL_META_NO_METADATA = 0x0004,
};

/* Type [option]s nested deeper than this are refused (collections of collections ...). */
#define BW_CQL_MAX_TYPE_DEPTH 16

typedef struct {
    const char *keyspace, *table, *name;
    size_t keyspace_len, table_len, name_len;
    bw_cql_type type; /* a vector's custom class is read as BW_CQL_T_VECTOR; collections and
                         other custom types keep their protocol id */
    const char *custom; /* the class of a custom type ([string]) or NULL */
    size_t custom_len;
} bw_cql_colspec;

typedef struct {
    int32_t flags;
    int32_t columns_count;
    bw_cql_colspec *columns;      /* columns_count items, or NULL with No_metadata */
    const uint8_t *paging_state;  /* Has_more_pages: its bytes, else NULL */
    int32_t paging_state_len;
    int32_t pk_count;             /* Prepared bind metadata: the partition key's */
    uint16_t *pk_indexes;         /* bind marker indexes, pk_count of them */
} bw_cql_metadata;

typedef struct {
    int32_t kind;
    /* ROWS */
    bw_cql_metadata metadata;     /* also a Prepared's result metadata */
    int32_t rows_count;
    bw_cql_cursor rows;           /* the rows' cells, rows_count * columns_count [bytes],
                                     each already checked to be there */
    /* SET_KEYSPACE */
    const char *keyspace;
    size_t keyspace_len;
    /* PREPARED */
    const uint8_t *id;
    size_t id_len;
    bw_cql_metadata bind;
    /* SCHEMA_CHANGE: change type, target, keyspace, name (table, type, function), and the
       argument types of a function or aggregate as a [string list] cursor */
    const char *change, *target, *name;
    size_t change_len, target_len, name_len;
    uint16_t arg_count;
    bw_cql_cursor args;
} bw_cql_result;

/* Parses a RESULT body (after any frame extras). 0, or -1 with a message in err saying what
   is malformed; the result then holds nothing to free. On success free it with
   bw_cql_result_free. */
int bw_cql_result_parse(const uint8_t *body, size_t n, bw_cql_result *r, char *err,
                        size_t err_size);
void bw_cql_result_free(bw_cql_result *r);
#endif
