/* Vector encoding: to_json_many, rows as the JSON arrays bulkwire.dumps writes. */
#include "py_encode_vector.h"

#include "json_array.h"
#include "py_arrow.h"

typedef struct {
    const bw_row_source *s;
    Py_ssize_t rows;
    Py_ssize_t dim;
    int shortest;
    bw_buf *out;
    size_t *ends; /* ends[r]: out->len after row r */
} json_job;

/* Writes every row as "[v, v, ...]" like bulkwire.dumps(row). No Python: runs without the
   GIL. 0, or -1 when out of memory. */
static int json_rows(const json_job *j) {
    const bw_row_source *s = j->s;
    bw_num_type type = s->src_width == 4 ? BW_NUM_F32 : BW_NUM_F64;
    int swapped = s->swap == BW_NATIVE_BIG_ENDIAN; /* stored in the other byte order */
    for (Py_ssize_t r = 0; r < j->rows; r++) {
        if (bw_json_array(j->out, type, bw_row_ptr(s, r), (size_t)j->dim, s->elem_stride, swapped,
                          j->shortest) < 0)
            return -1;
        j->ends[r] = j->out->len;
    }
    return 0;
}

/* Appends the JSON text of `rows` rows to list, one bytes object per row. 0 or -1. */
static int emit_json(const bw_row_source *s, Py_ssize_t rows, Py_ssize_t dim, int shortest,
                     PyObject *list) {
    bw_buf out;
    int rc = -1;
    size_t *ends = PyMem_Malloc(sizeof(size_t) * (size_t)(rows > 0 ? rows : 1));
    if (ends == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (bw_buf_init(&out, 0) < 0) {
        PyMem_Free(ends);
        PyErr_NoMemory();
        return -1;
    }
    json_job job = {.s = s, .rows = rows, .dim = dim, .shortest = shortest, .out = &out,
                    .ends = ends};
    int written;
    Py_BEGIN_ALLOW_THREADS
    written = json_rows(&job);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    size_t start = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *b = PyBytes_FromStringAndSize(out.data + start, (Py_ssize_t)(ends[r] - start));
        if (b == NULL || PyList_Append(list, b) < 0) {
            Py_XDECREF(b);
            goto cleanup;
        }
        Py_DECREF(b);
        start = ends[r];
    }
    rc = 0;
cleanup:
    bw_buf_free(&out);
    PyMem_Free(ends);
    return rc;
}

/* A row that bw_arrow_vectors_check refused, as the ValueError to_json_many raises: shorter
   wording than serialize_many's, each what its callers match on. */
static void arrow_row_error(const bw_vector_codec *c, int64_t row, bw_arrow_row_problem why,
                            int64_t len) {
    (void)c;
    (void)len;
    PyErr_Format(PyExc_ValueError, "row %lld: %s", (long long)row,
                 why == BW_ARROW_ROW_NULL ? "null vector"
                 : why == BW_ARROW_ROW_WRONG_LENGTH ? "wrong number of values"
                 : why == BW_ARROW_ROW_NULL_VALUE ? "null value inside the vector"
                 : "malformed Arrow offsets");
}

/* Where to_json_many puts an Arrow batch's rows. */
typedef struct {
    PyObject *list;
    int shortest;
} json_sink;

/* bw_vec_arrow_reader.emit: the rows as JSON text (either float width as it stands). */
static int emit_json_rows(void *ctx, bw_vector_codec *c, const bw_row_source *s,
                          Py_ssize_t rows, Py_ssize_t first_row) {
    (void)first_row;
    const json_sink *sink = ctx;
    return emit_json(s, rows, c->dim, sink->shortest, sink->list);
}

static const bw_vec_arrow_reader json_reader = {
    .refuse = NULL, .row_error = arrow_row_error, .emit = emit_json_rows};

PyObject *bw_vec_to_json_many(bw_vector_codec *c, PyObject *batch, int float32_shortest) {
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    int rc, is_array = bw_numpy_is_array(batch);
    if (is_array < 0) {
        rc = -1;
    } else if (is_array) {
        PyArrayObject *arr = (PyArrayObject *)batch;
        PyArray_Descr *d = PyArray_DESCR(arr);
        if (PyArray_NDIM(arr) != 2 || PyArray_DIM(arr, 1) != c->dim) {
            bw_vec_shape_error(arr, "2", c->dim);
            rc = -1;
        } else if (d->kind != 'f' || (PyDataType_ELSIZE(d) != 4 && PyDataType_ELSIZE(d) != 8)) {
            PyErr_Format(PyExc_TypeError, "to_json_many reads float32 or float64 arrays, got "
                         "dtype %S", (PyObject *)d);
            rc = -1;
        } else {
            bw_row_source s = {.base = PyArray_BYTES(arr), .row_stride = PyArray_STRIDE(arr, 0),
                            .elem_stride = PyArray_STRIDE(arr, 1),
                            .src_width = (int)PyDataType_ELSIZE(d),
                            .swap = BW_NATIVE_BIG_ENDIAN ? PyArray_ISBYTESWAPPED(arr)
                                                         : !PyArray_ISBYTESWAPPED(arr)};
            rc = emit_json(&s, PyArray_DIM(arr, 0), c->dim, float32_shortest, list);
        }
    } else if (bw_arrow_source_check(batch)) {
        json_sink sink = {.list = list, .shortest = float32_shortest};
        rc = bw_vec_arrow_rows(c, batch, &json_reader, &sink);
    } else {
        PyErr_Format(PyExc_TypeError, "to_json_many expects a 2-D float numpy array or an Arrow "
                     "vector array/stream, got %.80s", Py_TYPE(batch)->tp_name);
        rc = -1;
    }
    if (rc < 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
}
