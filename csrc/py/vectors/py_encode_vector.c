/* Vector encoding: serialize, one vector (a sequence, a 1-D array or bytes). */
#include "py_encode_vector.h"

PyObject *bw_vec_passthrough(bw_vector_codec *c, PyObject *v) {
    if (c->st->prefixed || c->row_size == 0) {
        PyErr_Format(PyExc_TypeError, "bytes cannot be passed through for vector<%s, %zd>: %s is "
                     "a variable-width subtype; pass a sequence of values", c->st->name, c->dim,
                     c->st->name);
        return NULL;
    }
    Py_ssize_t n = PyBytes_Check(v) ? PyBytes_GET_SIZE(v) : PyByteArray_GET_SIZE(v);
    if (n != c->row_size) {
        PyErr_Format(PyExc_ValueError, "Expected vector of type %s and dimension %zd to have "
                     "serialized size %zd; observed serialized size of %zd instead", c->st->name,
                     c->dim, c->row_size, n);
        return NULL;
    }
    if (PyBytes_CheckExact(v))
        return Py_NewRef(v);
    return PyBytes_FromStringAndSize(PyBytes_Check(v) ? PyBytes_AS_STRING(v)
                                                      : PyByteArray_AS_STRING(v), n);
}

/* numpy.ma arrays would otherwise be read through their data, masked values included. */
int bw_vec_reject_masked(PyObject *v) {
    int exact = bw_numpy_is_exact_array(v);
    if (exact < 0)
        return -1;
    if (exact || !PyObject_HasAttrString(v, "mask"))
        return 0;
    PyErr_SetString(PyExc_TypeError, "masked arrays cannot be serialized: CQL vectors hold no "
                    "nulls; fill the masked values first (arr.filled(...))");
    return -1;
}

/* Writes a sequence's elements: constant-size kinds at dst, others appended to out. */
static int write_sequence(bw_vector_codec *c, PyObject *seq, char *dst, bw_buf *out) {
    for (Py_ssize_t i = 0; i < c->dim; i++) {
        /* a conversion hook may run Python code that resizes the list: re-check each time */
        if (i >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "the sequence changed size during serialization");
            return -1;
        }
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (c->st->kind == BW_V_F32 && PyFloat_CheckExact(item)) { /* the embedding case */
            double d = PyFloat_AS_DOUBLE(item);
            float f;
            uint32_t bits;
            if (double_to_float(d, &f) < 0)
                return bw_vec_range_error(c, i, item);
            memcpy(&bits, &f, 4);
            store_be32(dst + 4 * i, bits);
            continue;
        }
        Py_INCREF(item);
        int rc = dst != NULL ? bw_vec_put_fixed_item(c, item, i, dst + i * c->elem_size)
                             : bw_vec_put_var_item(c, item, i, out);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One row into dst (constant-size kinds; row_size bytes) or appended to out (others). */
int bw_vec_write_row(bw_vector_codec *c, PyObject *v, char *dst, bw_buf *out) {
    int is_array = bw_numpy_is_array(v);
    if (is_array < 0)
        return -1;
    if (is_array) {
        PyArrayObject *arr = (PyArrayObject *)v;
        if (bw_vec_reject_masked(v) < 0)
            return -1;
        if (PyArray_NDIM(arr) != 1) {
            bw_vec_shape_error(arr, "1", c->dim);
            return -1;
        }
        if (PyArray_DIM(arr, 0) != c->dim) {
            bw_vec_length_error(c, PyArray_DIM(arr, 0));
            return -1;
        }
        if (bw_vkind_numeric(c->st)) {
            bw_row_source s;
            PyArrayObject *src; /* holds the values s points to */
            if (bw_vec_array_source(c, arr, &s, &src) < 0)
                return -1;
            int rc = bw_vec_check_source(c, &s, 1, 0, 0);
            if (rc == 0)
                bw_vec_fill_row(c, &s, s.base, dst);
            Py_DECREF(src);
            return rc;
        }
    } else if (PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "expected a sequence of %s values for vector<%s, %zd>, got "
                     "str", c->st->name, c->st->name, c->dim);
        return -1;
    }
    PyObject *seq = PySequence_Fast(v, "expected a sequence, a 1-D numpy array or bytes for a "
                                       "CQL vector"); /* new reference */
    if (seq == NULL)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != c->dim)
        bw_vec_length_error(c, PySequence_Fast_GET_SIZE(seq));
    else
        rc = write_sequence(c, seq, dst, out);
    Py_DECREF(seq);
    return rc;
}

PyObject *bw_vec_serialize(bw_vector_codec *c, PyObject *v) {
    if (PyBytes_Check(v) || PyByteArray_Check(v))
        return bw_vec_passthrough(c, v);
    if (c->row_size > 0) {
        PyObject *result = PyBytes_FromStringAndSize(NULL, c->row_size); /* new reference */
        if (result == NULL)
            return NULL;
        if (bw_vec_write_row(c, v, PyBytes_AS_STRING(result), NULL) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        return result;
    }
    bw_buf out;
    if (bw_buf_init(&out, 16 * (size_t)c->dim) < 0)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    if (bw_vec_write_row(c, v, NULL, &out) == 0)
        result = PyBytes_FromStringAndSize(out.data, (Py_ssize_t)out.len);
    bw_buf_free(&out);
    return result;
}
