/* CQL column types, the check of an Arrow column against one, and the column's values as
   protocol [bytes] read straight from Arrow memory (the C Data Interface buffers), so that
   a batch becomes bound values without an object per row. Core layer: no Python.

   A CQL type is carried across the Python line as its CQL text ("int", "vector<float, 4>"),
   the form system_schema.columns holds; bw_cql_type_parse reads it, bw_cql_type_text writes
   it, and the RESULT parser (cql_result.h) builds the same struct from a type [option]. */
#ifndef BW_CQL_VALUES_H
#define BW_CQL_VALUES_H
#include <stddef.h>
#include <stdint.h>

#include "arrow_c.h"
#include "out_buffer.h"

/* The type [option] ids of the protocol. A vector is a custom type (0x0000) whose class is
   org.apache.cassandra.db.marshal.VectorType(<element class>, N); here it has an id of its
   own, BW_CQL_T_VECTOR, with the element's id in `element`. */
enum {
    BW_CQL_T_CUSTOM = 0x0000,
    BW_CQL_T_ASCII = 0x0001,
    BW_CQL_T_BIGINT = 0x0002,
    BW_CQL_T_BLOB = 0x0003,
    BW_CQL_T_BOOLEAN = 0x0004,
    BW_CQL_T_COUNTER = 0x0005,
    BW_CQL_T_DECIMAL = 0x0006,
    BW_CQL_T_DOUBLE = 0x0007,
    BW_CQL_T_FLOAT = 0x0008,
    BW_CQL_T_INT = 0x0009,
    BW_CQL_T_TIMESTAMP = 0x000B,
    BW_CQL_T_UUID = 0x000C,
    BW_CQL_T_VARCHAR = 0x000D,
    BW_CQL_T_VARINT = 0x000E,
    BW_CQL_T_TIMEUUID = 0x000F,
    BW_CQL_T_INET = 0x0010,
    BW_CQL_T_DATE = 0x0011,
    BW_CQL_T_TIME = 0x0012,
    BW_CQL_T_SMALLINT = 0x0013,
    BW_CQL_T_TINYINT = 0x0014,
    BW_CQL_T_DURATION = 0x0015,
    BW_CQL_T_LIST = 0x0020,
    BW_CQL_T_MAP = 0x0021,
    BW_CQL_T_SET = 0x0022,
    BW_CQL_T_UDT = 0x0030,
    BW_CQL_T_TUPLE = 0x0031,
    BW_CQL_T_VECTOR = 0x1000, /* not a protocol id: see above */
};

/* Largest vector dimension read (as VectorCodec's). */
#define BW_CQL_MAX_DIMENSION (1 << 24)

typedef struct {
    uint16_t id;      /* BW_CQL_T_*; for types bulkwire does not bind, the protocol id */
    uint16_t element; /* BW_CQL_T_VECTOR: the element's id (a scalar type) */
    int32_t dimension; /* BW_CQL_T_VECTOR: N */
} bw_cql_type;

/* The CQL name of a scalar id ("int", "text", ...), or NULL for ids without one here. */
const char *bw_cql_type_name(uint16_t id);

/* Reads CQL type text: a scalar name ("int", "varchar", "text" ...), "vector<T, N>" with a
   scalar T, case-insensitive, blanks allowed around the parts; also a vector's marshal class
   "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 4)".
   0, or -1 with a message in err naming the text. */
int bw_cql_type_parse(const char *text, size_t n, bw_cql_type *t, char *err, size_t err_size);

/* Writes the type's CQL text ("vector<float, 4>") into out (NUL-ended, truncated to fit);
   collections and other types bulkwire does not bind by their kind alone ("set", "map",
   "list", "tuple", "udt", "custom"). */
void bw_cql_type_text(const bw_cql_type *t, char *out, size_t out_size);

/* How a column's values are read and written: chosen by bw_cql_column_plan. */
typedef enum {
    BW_CQL_READ_INT,       /* signed integer (width src_width) -> big-endian wire_width */
    BW_CQL_READ_FLOAT32,   /* float32 -> float (signaling NaNs quieted, as the driver does) */
    BW_CQL_READ_FLOAT64,   /* float64 -> double, and float32 widened to double */
    BW_CQL_READ_BOOL,      /* bit -> one byte 0/1 */
    BW_CQL_READ_UTF8,      /* utf8 / large_utf8 -> text */
    BW_CQL_READ_ASCII,     /* utf8 / large_utf8 -> ascii, each byte checked below 0x80 */
    BW_CQL_READ_BINARY,    /* binary / large_binary / fixed_size_binary(16) -> blob */
    BW_CQL_READ_UUID,      /* fixed_size_binary(16) -> uuid / timeuuid */
    BW_CQL_READ_TIMESTAMP, /* timestamp[s|ms] or date64 -> milliseconds since the epoch */
    BW_CQL_READ_DATE,      /* date32 -> days with the epoch at 2**31 */
    BW_CQL_READ_VECTOR,    /* list / fixed_size_list -> vector<T, N>, by the vector hook */
} bw_cql_read;

/* Fills one vector row's `size` wire bytes at dst (values only, no [bytes] length), from the
   Arrow view; the binding supplies it (the one vector serializer). Runs without the GIL. */
typedef void (*bw_cql_vector_fill)(const void *ctx, const bw_arrow_vectors *v, int64_t first,
                                   char *dst);

/* One bound column: the Arrow array it reads and how. */
typedef struct {
    bw_cql_type type;
    bw_cql_read read;
    int src_width;   /* READ_INT: bytes of the Arrow value */
    int wire_width;  /* fixed-size values: bytes on the wire; 0 when it varies */
    int64_t scale;   /* READ_TIMESTAMP: milliseconds per source unit (1 or 1000) */
    int large;       /* 64-bit offsets */
    const struct ArrowArray *array; /* the column (its offset applied by the reader) */
    int64_t base;                   /* rows of the column before row 0: the offset of the
                                       record batch (struct) the column belongs to */
    bw_arrow_vectors vectors;       /* READ_VECTOR: the view */
    bw_cql_vector_fill fill;        /* READ_VECTOR */
    const void *fill_ctx;
    int null_unset;                 /* a null is written unset (length -2, protocol v4+),
                                       not null (-1): the column is left as it is */
} bw_cql_column;

/* The schema check of one column: whether the Arrow type (format, and child_format for a
   list's values) may be bound to CQL type t, and how. 0 with col->type, read, widths set;
   -1 with err "column '<name>': <Arrow type in words> cannot be bound to <CQL type>[: why]"
   (name is the CQL column's). */
int bw_cql_column_plan(const char *name, const char *format, const char *child_format,
                       const bw_cql_type *t, bw_cql_column *col, char *err, size_t err_size);

/* Binds the planned column to its array (validated with bw_arrow_validate), whose row 0 is
   row `base` of the array (the offset of the record batch holding it). For a vector,
   fill/fill_ctx must be set first. 0, or -1 with err. */
int bw_cql_column_bind(bw_cql_column *col, const struct ArrowSchema *schema,
                       const struct ArrowArray *array, int64_t base, char *err,
                       size_t err_size);

/* Appends row r's value as [bytes] (null: length -1, or -2, unset, with null_unset).
   *value_at gets the offset in out of
   the value's first byte (after its length), *value_len its length (-1 for null), for the
   routing key. 0; -1 out of memory (err empty); -2 when the value cannot be written (err
   says why: a non-ASCII byte for ascii, a timestamp out of range, a vector row of the wrong
   length or with a null value). */
int bw_cql_column_write(const bw_cql_column *col, int64_t r, bw_buf *out, size_t *value_at,
                        int32_t *value_len, char *err, size_t err_size);
#endif
