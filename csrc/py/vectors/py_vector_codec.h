/* The VectorCodec object shared by the vectors binding files (py_vectors.c: the type and its
   methods; py_encode_vector.c: Python/NumPy/Arrow -> CQL bytes; py_decode_vector.c: CQL bytes ->
   NumPy; py_vector_rows.c: what those two share). Binding layer. */
#ifndef BW_VECTOR_CODEC_H
#define BW_VECTOR_CODEC_H
#include "py_numpy.h"

#include "arrow_c.h"
#include "out_buffer.h"

typedef enum {
    BW_V_F32, BW_V_F64, BW_V_I8, BW_V_I16, BW_V_I32, BW_V_I64, BW_V_BOOL,
    BW_V_TIMESTAMP, BW_V_DATE, BW_V_TIME, BW_V_UUID, BW_V_TEXT, BW_V_ASCII, BW_V_BLOB,
    BW_V_VARINT,
} bw_vkind;

typedef struct {
    const char *name;  /* CQL name: "float", "smallint", ... */
    bw_vkind kind;
    int width;         /* bytes of one element's value on the wire; 0 when it varies */
    int prefixed;      /* 1: a variable-width subtype, every element behind its vint length */
    int npy_type;      /* native NumPy type of the values (numeric kinds), or -1 */
    char npy_kind;     /* NumPy dtype kind of that type: 'f', 'i', 'u', 'b'; 0 for none */
    long long lo, hi;  /* integer kinds: the values the wire may carry (the CQL range), checked
                          by every encode path and, where the driver checks, by decoding */
} bw_subtype;

/* Whether v is a value the subtype's wire may carry (integer kinds). */
static inline int bw_subtype_holds(const bw_subtype *st, long long v) {
    return v >= st->lo && v <= st->hi;
}

typedef struct {
    PyObject_HEAD
    const bw_subtype *st;
    Py_ssize_t dim;
    Py_ssize_t elem_size; /* wire bytes per element incl. prefix when constant, else 0 */
    Py_ssize_t row_size;  /* dim * elem_size when every row has the same size, else 0 */
    int driver_compat;    /* float32 from memory takes the driver's float->double->float trip:
                             signaling NaNs come out quiet, as struct.pack('>f') makes them */
} bw_vector_codec;

/* Numeric kinds: values live in NumPy/Arrow memory and are byte-swapped into place. */
static inline int bw_vkind_numeric(const bw_subtype *st) { return st->npy_type >= 0; }

/* py_encode_vector.c. All return new references, or NULL with an exception set. */
PyObject *bw_vec_serialize(bw_vector_codec *c, PyObject *v);
PyObject *bw_vec_serialize_many(bw_vector_codec *c, PyObject *batch);
PyObject *bw_vec_serialize_into(bw_vector_codec *c, PyObject *batch);
PyObject *bw_vec_serialize_rows(bw_vector_codec *c, PyObject *batch);
PyObject *bw_vec_to_json_many(bw_vector_codec *c, PyObject *batch, int float32_shortest);

/* py_decode_vector.c. New references, or NULL with an exception set. */
PyObject *bw_vec_deserialize(bw_vector_codec *c, PyObject *b);
PyObject *bw_vec_deserialize_many(bw_vector_codec *c, PyObject *items);
PyObject *bw_vec_deserialize_list(bw_vector_codec *c, PyObject *b);

/* py_vector_rows.c. Puts "row <row>: " in front of the pending exception's message when it is
   exactly a ValueError, or, with any_conversion_error, also a TypeError or OverflowError (the
   errors encoding a Python value can raise); any other exception passes unchanged. */
void bw_vec_prefix_row(Py_ssize_t row, int any_conversion_error);
/* A new VectorRows over the rows of c held back to back in `bytearray`, which it takes over
   (the reference is stolen, also on failure). New reference, or NULL. */
PyObject *bw_vec_rows_adopt(bw_vector_codec *c, PyObject *bytearray);
/* v itself (a new reference) when it is one whole row of a VectorRows written for c's subtype
   and dimension: a memoryview as VectorRows items are. NULL, without an exception, otherwise. */
PyObject *bw_vec_rows_ready_row(bw_vector_codec *c, PyObject *v);
/* Adds the VectorRows type to the module. 0, or -1 with an exception. */
int bw_vec_rows_add_type(PyObject *module);
#endif
