/* Vector encoding: serialize_many/_into, a batch from a 2-D array, an Arrow array or
   stream, or a sequence of vectors. */
#include "py_encode_vector.h"

#include "py_arrow.h"

/* Rows [0, rows) of s to the sink, once every value passed bw_vec_check_source (first_row:
   the number of rows before s in the batch, for error messages). */
static int emit(bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                Py_ssize_t first_row, bw_vec_sink *k) {
    if (bw_vec_check_source(c, s, rows, first_row, 1) < 0)
        return -1;
    return k->list ? bw_vec_emit_rows_list(c, s, rows, k->list)
                   : bw_vec_emit_rows_into(c, s, rows, k->bytearray);
}

static int many_from_ndarray(bw_vector_codec *c, PyArrayObject *arr, bw_vec_sink *k) {
    if (PyArray_NDIM(arr) != 2 || PyArray_DIM(arr, 1) != c->dim) {
        bw_vec_shape_error(arr, "2", c->dim);
        return -1;
    }
    bw_row_source s;
    PyArrayObject *src; /* holds the values s points to */
    if (bw_vec_array_source(c, arr, &s, &src) < 0)
        return -1;
    int rc = emit(c, &s, PyArray_DIM(src, 0), 0, k);
    Py_DECREF(src);
    return rc;
}

/* A row that bw_arrow_vectors_check refused, as the ValueError serialize_many/_into raise. */
static void arrow_row_error(const bw_vector_codec *c, int64_t row, bw_arrow_row_problem why,
                            int64_t len) {
    if (why == BW_ARROW_ROW_NULL)
        PyErr_Format(PyExc_ValueError, "row %lld is null: CQL vectors cannot be null here",
                     (long long)row);
    else if (why == BW_ARROW_ROW_WRONG_LENGTH)
        PyErr_Format(PyExc_ValueError, "row %lld has %lld values, expected %zd "
                     "(dimension of vector<%s, %zd>)", (long long)row, (long long)len, c->dim,
                     c->st->name, c->dim);
    else if (why == BW_ARROW_ROW_NULL_VALUE)
        PyErr_Format(PyExc_ValueError, "row %lld holds a null value: CQL vectors cannot "
                     "hold nulls", (long long)row);
    else
        PyErr_Format(PyExc_ValueError, "row %lld: malformed Arrow offsets", (long long)row);
}

/* CQL float rows would have to narrow float64 values, which NumPy input refuses too. */
static int refuse_narrowing(const bw_vector_codec *c, const bw_arrow_vectors *v) {
    if (v->value_width == 8 && c->st->kind == BW_V_F32) {
        PyErr_Format(PyExc_TypeError, "cannot cast Arrow float64 values to float (float32) "
                     "under NumPy's 'safe' casting rule; cast the column explicitly, e.g. "
                     "pyarrow.compute.cast(col, pyarrow.list_(pyarrow.float32(), %zd))",
                     c->dim);
        return -1;
    }
    return 0;
}

/* bw_vec_arrow_reader.emit: the rows as CQL values into the sink (ctx). */
static int emit_to_sink(void *ctx, bw_vector_codec *c, const bw_row_source *s, Py_ssize_t rows,
                        Py_ssize_t first_row) {
    return emit(c, s, rows, first_row, (bw_vec_sink *)ctx);
}

static const bw_vec_arrow_reader cql_rows_reader = {
    .refuse = refuse_narrowing, .row_error = arrow_row_error, .emit = emit_to_sink};

static int many_from_arrow(bw_vector_codec *c, PyObject *obj, bw_vec_sink *k) {
    if (c->st->kind != BW_V_F32 && c->st->kind != BW_V_F64) {
        PyErr_Format(PyExc_TypeError, "Arrow input is read for float and double vectors only, "
                     "not %s", c->st->name);
        return -1;
    }
    return bw_vec_arrow_rows(c, obj, &cql_rows_reader, k);
}

static int many_from_sequence(bw_vector_codec *c, PyObject *batch, bw_vec_sink *k) {
    PyObject *seq = PySequence_Fast(batch, "expected a 2-D numpy array, an Arrow array or "
                                           "stream, or a sequence of vectors"); /* new ref */
    if (seq == NULL)
        return -1;
    int rc = -1;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq);
    if (k->bytearray != NULL) {
        if (rows > PY_SSIZE_T_MAX / c->row_size) {
            PyErr_NoMemory();
            goto cleanup;
        }
        if (PyByteArray_Resize(k->bytearray, rows * c->row_size) < 0)
            goto cleanup;
        bw_advise_huge_pages(PyByteArray_AS_STRING(k->bytearray), (size_t)(rows * c->row_size));
    }
    for (Py_ssize_t r = 0; r < rows && r < PySequence_Fast_GET_SIZE(seq); r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, r);
        Py_INCREF(row);
        if (k->list != NULL) {
            PyObject *b = bw_vec_serialize(c, row); /* new reference */
            Py_DECREF(row);
            if (b == NULL || PyList_Append(k->list, b) < 0) {
                Py_XDECREF(b);
                bw_vec_prefix_row(r, 1);
                goto cleanup;
            }
            Py_DECREF(b);
            continue;
        }
        int wrote;
        if (PyBytes_Check(row) || PyByteArray_Check(row)) {
            PyObject *b = bw_vec_passthrough(c, row); /* new reference */
            wrote = b ? 0 : -1;
            if (b != NULL) {
                memcpy(PyByteArray_AS_STRING(k->bytearray) + r * c->row_size,
                       PyBytes_AS_STRING(b), (size_t)c->row_size);
                Py_DECREF(b);
            }
        } else {
            /* re-read the address each row: the bytearray is ours, but stay simple */
            wrote = bw_vec_write_row(c, row,
                                     PyByteArray_AS_STRING(k->bytearray) + r * c->row_size, NULL);
        }
        Py_DECREF(row);
        if (wrote < 0) {
            bw_vec_prefix_row(r, 1);
            goto cleanup;
        }
    }
    if (PySequence_Fast_GET_SIZE(seq) != rows) {
        PyErr_SetString(PyExc_RuntimeError, "the sequence changed size during serialization");
        goto cleanup;
    }
    rc = 0;
cleanup:
    Py_DECREF(seq);
    return rc;
}

/* Whether obj has a NumPy object dtype (a pandas Series of per-row arrays, as to_pandas()
   makes of a vector column): iterating it is far cheaper than its Arrow export, which would
   convert every row. */
static int has_object_dtype(PyObject *obj) {
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype"); /* new reference */
    if (dtype == NULL) {
        PyErr_Clear();
        return 0;
    }
    /* no NumPy dtype exists before NumPy is imported (a failure of the gate is the caller's,
       which asked it first) */
    int imported = bw_numpy_imported();
    if (imported < 0)
        PyErr_Clear();
    int yes = imported > 0 && PyArray_DescrCheck(dtype) &&
              ((PyArray_Descr *)dtype)->type_num == NPY_OBJECT;
    Py_DECREF(dtype);
    return yes;
}

static int many(bw_vector_codec *c, PyObject *batch, bw_vec_sink *k) {
    int is_array = bw_numpy_is_array(batch);
    if (is_array < 0)
        return -1;
    if (is_array) {
        PyArrayObject *arr = (PyArrayObject *)batch;
        if (bw_vec_reject_masked(batch) < 0)
            return -1;
        /* a 1-D object array holds one vector per row: a sequence of vectors */
        if (bw_vkind_numeric(c->st) && !(PyArray_NDIM(arr) == 1 && PyArray_TYPE(arr) == NPY_OBJECT))
            return many_from_ndarray(c, arr, k);
        return many_from_sequence(c, batch, k);
    }
    if (bw_arrow_source_check(batch) && !has_object_dtype(batch))
        return many_from_arrow(c, batch, k);
    if (PyUnicode_Check(batch) || PyBytes_Check(batch) || PyByteArray_Check(batch)) {
        PyErr_Format(PyExc_TypeError, "expected a batch of vectors (2-D numpy array, Arrow "
                     "array or sequence of vectors), got %.80s", Py_TYPE(batch)->tp_name);
        return -1;
    }
    return many_from_sequence(c, batch, k);
}

PyObject *bw_vec_serialize_many(bw_vector_codec *c, PyObject *batch) {
    bw_vec_sink k = {.list = PyList_New(0), .bytearray = NULL};
    if (k.list == NULL)
        return NULL;
    if (many(c, batch, &k) < 0) {
        Py_DECREF(k.list);
        return NULL;
    }
    return k.list;
}

/* New reference: a bytearray holding every row of batch back to back (`method` names the
   caller in the error for variable-size rows). */
static PyObject *rows_back_to_back(bw_vector_codec *c, PyObject *batch, const char *method) {
    if (c->row_size == 0) {
        PyErr_Format(PyExc_ValueError, "%s needs rows of one size; vector<%s, %zd> "
                     "rows vary in size, use serialize_many", method, c->st->name, c->dim);
        return NULL;
    }
    bw_vec_sink k = {.list = NULL, .bytearray = PyByteArray_FromStringAndSize(NULL, 0)};
    if (k.bytearray == NULL)
        return NULL;
    if (many(c, batch, &k) < 0) {
        Py_DECREF(k.bytearray);
        return NULL;
    }
    return k.bytearray;
}

PyObject *bw_vec_serialize_into(bw_vector_codec *c, PyObject *batch) {
    PyObject *bytearray = rows_back_to_back(c, batch, "serialize_into"); /* new reference */
    if (bytearray == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", bytearray, c->row_size); /* steals the bytearray */
}

PyObject *bw_vec_serialize_rows(bw_vector_codec *c, PyObject *batch) {
    PyObject *bytearray = rows_back_to_back(c, batch, "serialize_rows"); /* new reference */
    if (bytearray == NULL)
        return NULL;
    return bw_vec_rows_adopt(c, bytearray);
}
