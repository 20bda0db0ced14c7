/* Arrow record batch -> bulk insert commands, one per row, with no Python object per row.
   Core layer: knows the Arrow C Data Interface and bytes, not Python. The binding
   (py_encode_batch.c) resolves the columns of a batch into a bw_batch_plan, then calls
   bw_batch_validate once (every check that could fail) and bw_batch_write_row per row
   (which can then only fail for lack of memory).

   A row becomes exactly what the bulk insert writes for the equivalent dict:
     {"Id":"<prefix><id>","Type":"PUT","Document":{"<field>": <value>, ..., "@metadata": <m>}}
   with the field values as bulkwire.dumps writes them (json's spaces, ensure_ascii). */
#ifndef BW_ENCODE_BATCH_H
#define BW_ENCODE_BATCH_H
#include <stddef.h>
#include <stdint.h>

#include "arrow_c.h"
#include "out_buffer.h"

typedef enum {
    BW_COL_INT,       /* signed integers of `width` bytes */
    BW_COL_UINT,      /* unsigned integers of `width` bytes */
    BW_COL_FLOAT32,   /* written as the repr of the widened double, as float32.item() */
    BW_COL_FLOAT64,
    BW_COL_BOOL,
    BW_COL_UTF8,      /* 32-bit offsets */
    BW_COL_LARGE_UTF8,/* 64-bit offsets */
    BW_COL_TIMESTAMP, /* int64 in `per_second` units since the epoch, entity datetime text */
    BW_COL_NULL,      /* the null type: always null */
    BW_COL_VECTOR,    /* fixed_size_list / list / large_list of float32 or float64 */
} bw_col_kind;

typedef struct {
    bw_col_kind kind;
    const char *name;   /* UTF-8 column name (borrowed from the schema), for error messages */
    char *key;          /* `"<escaped name>": ` (owned by the plan's owner) */
    size_t key_len;
    int width;          /* bytes per integer */
    int64_t per_second; /* timestamps: 1, 1000, 1000000 or 1000000000 */
    int64_t tz_offset;  /* timestamps: seconds added to UTC for the wall clock */
    int has_tz;         /* timestamps: a time zone was given (datetime.max rule is naive only) */
    int64_t offset;     /* element index of row 0: parent offset + array offset */
    int64_t null_count;
    const uint8_t *validity; /* NULL when no value is null */
    const void *values;      /* fixed-width values, or the offsets of strings and lists */
    const char *data;        /* string bytes */
    /* vectors: the vectors reader's view (arrow_c.h), every offset applied */
    bw_arrow_vectors vec;
    int64_t dim;             /* elements per row, required of every row */
} bw_col;

typedef struct {
    int64_t length;      /* rows */
    bw_col id;           /* BW_COL_INT / BW_COL_UINT / BW_COL_UTF8 / BW_COL_LARGE_UTF8 */
    bw_col *fields;      /* the document's fields, in order (the vector is one of them) */
    size_t n_fields;
    const char *prefix;  /* the id prefix, already JSON-escaped (no quotes) */
    size_t prefix_len;
    const char *prefix_raw; /* the prefix as UTF-8, unescaped: the id rule judges it */
    size_t prefix_raw_len;
    const char *metadata;  /* JSON text of the @metadata object */
    size_t metadata_len;
    int float32_shortest;  /* vectors of float32: shortest round-trip text instead of widening */
} bw_batch_plan;

typedef struct {
    int64_t row;            /* row of the batch */
    const char *column;     /* column name */
    int is_type_error;      /* 1: TypeError, 0: ValueError */
    char message[160];
} bw_batch_error;

/* Checks every row for what would make it unencodable: a null id, a string id that is not
   a valid document id (prefix + id) by the one id rule, bw_document_id_check (document_id.h),
   a null vector, a vector of the wrong length or with a null element, invalid UTF-8,
   a timestamp outside datetime's years 1..9999. 0, or -1 with *err filled: the first bad row
   of the id column, else of the first field (in the plan's order) that has one. */
int bw_batch_validate(const bw_batch_plan *plan, bw_batch_error *err);

/* Appends row `row`'s command (no separator). The plan must have passed bw_batch_validate.
   0, or -1 out of memory. */
int bw_batch_write_row(const bw_batch_plan *plan, int64_t row, bw_buf *out);
#endif
