/* The Arrow C Data Interface (https://arrow.apache.org/docs/format/CDataInterface.html) and
   a reader for vector columns: fixed_size_list / list / large_list of float32 or float64.
   No Python: the binding (py_arrow.h) gets the structs out of PyCapsules; this part only
   reads memory, so callers may run it with the GIL released.

   Ownership: whoever holds a struct whose `release` is non-NULL must call release(struct)
   exactly once; a moved-from or released struct has release == NULL. */
#ifndef BW_ARROW_C_H
#define BW_ARROW_C_H
#include <stddef.h>
#include <stdint.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif /* ARROW_C_STREAM_INTERFACE */

/* Checks an array against its schema and the layout rules of the C Data Interface, for
   every node of the tree (children and dictionaries too), before anything reads its memory.

   What "in bounds" means here. The interface carries lengths and offsets, not buffer sizes,
   so what a buffer holds is taken from its array: offset + length elements (validity bits,
   fixed-width values, offset + length + 1 offsets) and, for strings, the bytes up to the
   last offset of the array's slice. Everything else that is read is derived from those
   numbers, and checked here:
     - release callbacks are set (a moved-out or released struct has release == NULL), the
       format string is there, n_buffers and n_children are what the format needs (schema
       and array agree), buffer and child pointers are not NULL where they will be read;
     - length >= 0, offset >= 0, offset + length does not overflow, -1 <= null_count <=
       length, and a validity bitmap exists when null_count says there are nulls;
     - string and list offsets over the slice are non-negative and never decrease (so a row
       never spans a negative length), a string column without a data buffer has only empty
       strings, list offsets end within the child's length, a fixed_size_list's child holds
       (offset + length) * N values, a struct's children hold offset + length rows.
   Formats bulkwire does not read are checked for the generic rules only. A source whose
   buffer sizes are known (pyarrow reading a file) must check those sizes itself (pyarrow's
   Array.validate(): load_parquet does so for every batch it reads).
   0, or -1 with a message in err naming the column ("column 'emb' > 'item': ...").
   Recursion stops at BW_ARROW_MAX_DEPTH levels (a crafted tree may be a cycle). */
#define BW_ARROW_MAX_DEPTH 64
int bw_arrow_validate(const struct ArrowSchema *schema, const struct ArrowArray *array,
                      char *err, size_t err_size);

/* Calls s->release when set and clears it; NULL-safe. */
void bw_arrow_schema_release(struct ArrowSchema *s);
void bw_arrow_array_release(struct ArrowArray *a);
void bw_arrow_stream_release(struct ArrowArrayStream *s);

/* Bit i of a validity bitmap (LSB first); a NULL bitmap means "all valid". */
static inline int bw_arrow_bit(const uint8_t *bitmap, int64_t i) {
    return bitmap == NULL || ((bitmap[i >> 3] >> (i & 7)) & 1);
}

/* Size of the primitive with this format: 'f' -> 4, 'g' -> 8, 'e' -> 2, 'i'/'I' -> 4,
   'l'/'L' -> 8, 's'/'S' -> 2, 'c'/'C' -> 1; 0 for anything else. */
int bw_arrow_primitive_width(const char *format);

/* N of a "+w:N" format, or -1 when format is not a fixed_size_list (or N is malformed). */
int64_t bw_arrow_fixed_list_size(const char *format);

/* The Arrow type of format in words, as pyarrow and Parquet users name it ("int32",
   "string", "date32[day]", "timestamp[ms, tz=UTC]", "fixed_size_list<float32, 4>"), into out
   (NUL-ended, truncated to out_size): the one description of an Arrow type that every error
   uses. child_format: a list's value format, or NULL. A format it does not know is quoted
   as it is ("Arrow format '...'"). format may be NULL. */
void bw_arrow_type_words(const char *format, const char *child_format, char *out,
                         size_t out_size);

/* bw_arrow_type_words of a schema node, its first child's format taken as the value format
   of a list; a dictionary-encoded node is "dictionary<values=..., indices=...>". schema may
   be NULL. */
void bw_arrow_schema_words(const struct ArrowSchema *schema, char *out, size_t out_size);

typedef enum {
    BW_ARROW_FIXED_SIZE_LIST, /* "+w:N" */
    BW_ARROW_LIST,            /* "+l", 32-bit offsets */
    BW_ARROW_LARGE_LIST,      /* "+L", 64-bit offsets */
} bw_arrow_list_kind;

/* A borrowed view of one Arrow array of vectors, every offset already applied. Valid while
   the ArrowArray it was made from is not released. */
typedef struct {
    bw_arrow_list_kind kind;
    char value_format;         /* 'f' (float32) or 'g' (float64); bw_arrow_numeric_lists_view
                                  also 'c', 's', 'i', 'l' (signed integers) */
    int value_width;           /* bytes of one value: 4 or 8 (1 to 8 for integers) */
    int64_t length;            /* rows */
    int64_t list_size;         /* N for a fixed_size_list, else -1 */
    const uint8_t *validity;   /* row validity bitmap or NULL; index with validity_offset + row */
    int64_t validity_offset;
    const int32_t *offsets32;  /* BW_ARROW_LIST: row r spans [offsets32[r], offsets32[r+1]) */
    const int64_t *offsets64;  /* BW_ARROW_LARGE_LIST: likewise */
    const char *values;        /* first child value (child offset applied) */
    int64_t values_length;     /* child values available from `values` */
    const uint8_t *value_validity; /* child bitmap or NULL; index with value_validity_offset + k */
    int64_t value_validity_offset;
    int64_t value_null_count;  /* child null_count as reported (-1: unknown) */
} bw_arrow_vectors;

/* Fills *v from a schema/array pair describing fixed_size_list<float32|float64>[N],
   list<...> or large_list<...>. 0, or -1 with a message in err (err_size bytes, NUL-ended):
   an unsupported type names its format string. */
int bw_arrow_vectors_view(const struct ArrowSchema *schema, const struct ArrowArray *array,
                          bw_arrow_vectors *v, char *err, size_t err_size);

/* The same view over lists whose values may also be signed integers (int8, int16, int32,
   int64: value_format 'c', 's', 'i', 'l'), for CQL vectors of integer elements. */
int bw_arrow_numeric_lists_view(const struct ArrowSchema *schema,
                                const struct ArrowArray *array, bw_arrow_vectors *v, char *err,
                                size_t err_size);

/* Row r (0 <= r < v->length). Returns 0 and sets *first (index of the row's first value,
   relative to v->values) and *count; returns 1 when the row is null. */
static inline int bw_arrow_vectors_row(const bw_arrow_vectors *v, int64_t r, int64_t *first,
                                       int64_t *count) {
    if (!bw_arrow_bit(v->validity, v->validity_offset + r))
        return 1;
    switch (v->kind) {
    case BW_ARROW_FIXED_SIZE_LIST:
        *first = r * v->list_size;
        *count = v->list_size;
        break;
    case BW_ARROW_LIST:
        *first = v->offsets32[r];
        *count = (int64_t)v->offsets32[r + 1] - v->offsets32[r];
        break;
    default:
        *first = v->offsets64[r];
        *count = v->offsets64[r + 1] - v->offsets64[r];
        break;
    }
    return 0;
}

/* Whether any of the `count` values from index `first` is null. */
int bw_arrow_vectors_has_null_value(const bw_arrow_vectors *v, int64_t first, int64_t count);

/* Why bw_arrow_vectors_check refused a row. The values are part of the binding's test hook
   (_arrow_vectors_info's "why"): keep them. */
typedef enum {
    BW_ARROW_ROW_OK = 0,
    BW_ARROW_ROW_NULL = 1,          /* the row itself is null */
    BW_ARROW_ROW_WRONG_LENGTH = 2,  /* not `dimension` values (*bad_len says how many) */
    BW_ARROW_ROW_NULL_VALUE = 3,    /* a null value inside the row */
    BW_ARROW_ROW_BAD_OFFSETS = 4,   /* offsets out of the values buffer's range */
} bw_arrow_row_problem;

/* Checks every row has `dimension` non-null values (dimension < 0: any length, values still
   non-null). 0, or -1 with *bad_row and *why set (*bad_len too for a wrong length). */
int bw_arrow_vectors_check(const bw_arrow_vectors *v, int64_t dimension, int64_t *bad_row,
                           bw_arrow_row_problem *why, int64_t *bad_len);
#endif
