/* What the rooms of vector encoding share (binding layer; knows Python and NumPy):
     py_encode_vector_element.c  one element from a Python object, and the element errors;
     py_encode_vector_memory.c   rows read from NumPy or Arrow memory (no Python per row);
     py_encode_vector.c          serialize: one vector;
     py_encode_vector_batch.c    serialize_many/_into: a batch from NumPy, Arrow or a sequence;
     py_encode_vector_json.c     to_json_many: rows as JSON arrays.
   The public calls are in py_vector_codec.h. */
#ifndef BW_PY_ENCODE_VECTOR_H
#define BW_PY_ENCODE_VECTOR_H
#include "py_vector_codec.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "byteswap.h"

/* ---- encode_vector_element.c ---- */

static inline void store_be32(char *dst, uint32_t v) {
#if !BW_NATIVE_BIG_ENDIAN
    v = __builtin_bswap32(v);
#endif
    memcpy(dst, &v, 4);
}

static inline void store_be64(char *dst, uint64_t v) {
#if !BW_NATIVE_BIG_ENDIAN
    v = __builtin_bswap64(v);
#endif
    memcpy(dst, &v, 8);
}

/* float32 rounding with Python's struct rule: finite values that round past FLT_MAX overflow.
   Done without the undefined out-of-range conversion. 0, or -1 when it overflows. */
static inline int double_to_float(double d, float *out) {
    if (isfinite(d) && fabs(d) >= 0x1.ffffffp127)
        return -1;
    *out = (float)d;
    return 0;
}

/* The element errors, with the driver's wording where it has one. Each returns -1 (or NULL)
   with the exception set. */
PyObject *bw_vec_length_error(bw_vector_codec *c, Py_ssize_t observed);
int bw_vec_null_error(Py_ssize_t index, const char *null_name); /* None, NaT */
int bw_vec_range_error(bw_vector_codec *c, Py_ssize_t index, PyObject *item);
/* Writes element `index` of a constant-size kind at dst (elem_size bytes, prefix included). */
int bw_vec_put_fixed_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, char *dst);
/* Variable-size elements: vint length + content, appended to out. */
int bw_vec_put_var_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, bw_buf *out);

/* ---- encode_vector_memory.c ---- */

/* Rows of numeric values in NumPy or Arrow memory. */
typedef struct {
    const char *base;              /* row 0, when rows are evenly spaced */
    npy_intp row_stride;
    npy_intp elem_stride;
    const bw_arrow_vectors *arrow; /* non-NULL: rows found through the Arrow offsets */
    int src_width;                 /* bytes of one source value */
    int swap;                      /* source byte order is not big-endian */
    int nat;                       /* datetime64/timedelta64 source: INT64_MIN is NaT, a null */
    long long offset;              /* wire value = source value + offset (date from days) */
} bw_row_source;

static inline const char *bw_row_ptr(const bw_row_source *s, Py_ssize_t r) {
    if (s->arrow != NULL) {
        int64_t first = 0, count = 0;
        bw_arrow_vectors_row(s->arrow, r, &first, &count);
        return s->arrow->values + first * s->arrow->value_width;
    }
    return s->base + r * s->row_stride;
}

/* The rule the sequence path applies per element, over rows [0, rows) of values in memory.
   Errors name the row (first_row + r) when name_rows. 0, or -1 with an exception. */
int bw_vec_check_source(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                        Py_ssize_t first_row, int name_rows);
/* One row of a numeric kind: no Python, may run without the GIL. */
void bw_vec_fill_row(const bw_vector_codec *c, const bw_row_source *s, const char *src,
                     char *dst);
/* `rows` rows filled from s as new bytes objects appended to list, or grown onto bytearray.
   0, or -1 with an exception. */
int bw_vec_emit_rows_list(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                          PyObject *list);
int bw_vec_emit_rows_into(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                          PyObject *bytearray);
/* How one caller reads Arrow vectors through bw_vec_arrow_rows: serialize_many/_into (CQL
   rows) and to_json_many (JSON arrays) each have their own. */
typedef struct {
    /* Refuses a batch before its rows are checked: 0, or -1 with an exception (NULL: every
       batch is read). */
    int (*refuse)(const bw_vector_codec *c, const bw_arrow_vectors *v);
    /* Sets the exception for a row bw_arrow_vectors_check refused (row counted from the first
       batch's first row, len the row's number of values). */
    void (*row_error)(const bw_vector_codec *c, int64_t row, bw_arrow_row_problem why,
                      int64_t len);
    /* Hands on `rows` checked rows of s (first_row rows came before them). 0, or -1 with an
       exception. */
    int (*emit)(void *ctx, bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                Py_ssize_t first_row);
} bw_vec_arrow_reader;
/* Reads an Arrow array or stream batch by batch: each batch's vectors are viewed, refused or
   checked for c's dimension, then handed to reader->emit with ctx. 0, or -1 with an
   exception. */
int bw_vec_arrow_rows(bw_vector_codec *c, PyObject *obj, const bw_vec_arrow_reader *reader,
                      void *ctx);
/* The values of a 1-D (one row) or 2-D array as a row source over *held, a new reference to
   arr or to its safe cast that the caller releases. 0, or -1 with a TypeError. */
int bw_vec_array_source(bw_vector_codec *c, PyArrayObject *arr, bw_row_source *s,
                        PyArrayObject **held);
/* ValueError naming the array's shape and the expected one ("1" or "2" dimensions); NULL. */
PyObject *bw_vec_shape_error(PyArrayObject *arr, const char *expected, Py_ssize_t dim);

/* ---- encode_vector.c ---- */

/* bytes or bytearray of one serialized row, checked for size: a new reference, or NULL. */
PyObject *bw_vec_passthrough(bw_vector_codec *c, PyObject *v);
/* TypeError for numpy.ma arrays (their masked values would be read). 0, or -1. */
int bw_vec_reject_masked(PyObject *v);
/* One row into dst (constant-size kinds; row_size bytes) or appended to out (others). */
int bw_vec_write_row(bw_vector_codec *c, PyObject *v, char *dst, bw_buf *out);

/* ---- encode_vector_batch.c ---- */

/* Where serialize_many/_into put the rows. */
typedef struct {
    PyObject *list;      /* list of bytes being built, or NULL */
    PyObject *bytearray; /* contiguous output, or NULL */
} bw_vec_sink;

#endif
