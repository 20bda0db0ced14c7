/* CQL vector<T, N> payloads -> NumPy arrays (zero-copy views where the wire layout is a
   NumPy dtype) or, for the driver drop-in, Python lists. */
#include "py_vector_codec.h"

#include "byteswap.h"
#include "vint.h"

static PyArray_Descr *descr_date; /* datetime64[D], native */
static PyArray_Descr *descr_time; /* timedelta64[ns], native */
static PyArray_Descr *descr_ts_be; /* >M8[ms]: the timestamp wire layout */
static PyObject *uuid_class;      /* uuid.UUID, imported on first use */

static int descr_from(const char *spec, PyArray_Descr **out) {
    PyObject *s = PyUnicode_FromString(spec);
    if (s == NULL)
        return -1;
    int ok = PyArray_DescrConverter(s, out);
    Py_DECREF(s);
    return ok ? 0 : -1;
}

/* Imports NumPy when it is not (deserialize makes arrays), then makes the dtypes above,
   once. 0, or -1 with an exception (ImportError without NumPy). */
static int decode_ready(void) {
    PyArray_Descr *date = NULL, *time = NULL, *ts_be = NULL;
    int rc = -1;
    if (descr_ts_be != NULL)
        return 0;
    if (bw_numpy_required() < 0)
        goto cleanup;
    if (descr_from("=M8[D]", &date) < 0 || descr_from("=m8[ns]", &time) < 0 ||
        descr_from(">M8[ms]", &ts_be) < 0)
        goto cleanup;
    /* kept unless code run meanwhile (a finalizer decoding a vector) made them first */
    if (descr_ts_be == NULL) {
        descr_date = date;
        descr_time = time;
        descr_ts_be = ts_be;
        date = time = ts_be = NULL;
    }
    rc = 0;
cleanup:
    Py_XDECREF(date);
    Py_XDECREF(time);
    Py_XDECREF(ts_be);
    return rc;
}

static PyObject *size_error(bw_vector_codec *c, Py_ssize_t observed) {
    PyErr_Format(PyExc_ValueError, "Expected vector of type %s and dimension %zd to have "
                 "serialized size %zd; observed serialized size of %zd instead", c->st->name,
                 c->dim, c->row_size, observed);
    return NULL;
}

/* Big-endian dtype of the wire element when the payload can be viewed in place. New ref. */
static PyArray_Descr *wire_descr(const bw_subtype *st) {
    if (st->prefixed || st->npy_type < 0 || st->kind == BW_V_BOOL)
        return NULL;
    if (st->kind == BW_V_TIMESTAMP) {
        Py_INCREF(descr_ts_be);
        return descr_ts_be;
    }
    PyArray_Descr *native = PyArray_DescrFromType(st->npy_type); /* new reference */
    if (native == NULL)
        return NULL;
    PyArray_Descr *be = PyArray_DescrNewByteorder(native, NPY_BIG);
    Py_DECREF(native);
    return be;
}

/* Native dtype of the decoded values (copies). New reference. */
static PyArray_Descr *native_descr(const bw_subtype *st) {
    switch (st->kind) {
    case BW_V_TIMESTAMP: {
        PyArray_Descr *be = descr_ts_be;
        return PyArray_DescrNewByteorder(be, NPY_NATIVE);
    }
    case BW_V_DATE: Py_INCREF(descr_date); return descr_date;
    case BW_V_TIME: Py_INCREF(descr_time); return descr_time;
    case BW_V_UUID: case BW_V_TEXT: case BW_V_ASCII: case BW_V_BLOB: case BW_V_VARINT:
        return PyArray_DescrFromType(NPY_OBJECT);
    default: return PyArray_DescrFromType(st->npy_type);
    }
}

/* Checks a constant-size payload of row_size bytes: every element of a prefixed subtype
   has the length byte it must have; time values are in the subtype's range (the encoder's
   rule; the driver refuses a day or more too); a timestamp is not INT64_MIN, which
   datetime64[ms] would read as NaT. 0, or -1 with a ValueError. */
static int check_row(bw_vector_codec *c, const unsigned char *p) {
    const bw_subtype *st = c->st;
    if (st->prefixed) {
        for (Py_ssize_t i = 0; i < c->dim; i++) {
            if (p[i * c->elem_size] != (unsigned char)st->width) {
                PyErr_Format(PyExc_ValueError, "vector element %zd has length byte 0x%02x; %s "
                             "elements are %d bytes", i, p[i * c->elem_size], st->name,
                             st->width);
                return -1;
            }
        }
    }
    if (st->kind != BW_V_TIME && st->kind != BW_V_TIMESTAMP)
        return 0;
    p += st->prefixed;
    for (Py_ssize_t i = 0; i < c->dim; i++, p += c->elem_size) {
        int64_t v = (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
                              (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
                              (uint64_t)p[6] << 8 | (uint64_t)p[7]);
        if (st->kind == BW_V_TIME && !bw_subtype_holds(st, v)) {
            PyErr_Format(PyExc_ValueError, "vector element %zd holds %lld, out of range for time "
                         "(nanoseconds since midnight, below %lld)", i, (long long)v,
                         st->hi + 1);
            return -1;
        }
        if (st->kind == BW_V_TIMESTAMP && v == INT64_MIN) {
            PyErr_Format(PyExc_ValueError, "vector element %zd holds %lld ms, which "
                         "datetime64[ms] cannot hold (it reads as NaT)", i, (long long)v);
            return -1;
        }
    }
    return 0;
}

/* Decodes a constant-size numeric row into native values at dst (no Python; no GIL needed).
   Dates become days since 1970 (int64), the rest keep their width. */
static void decode_numeric_row(const bw_vector_codec *c, const char *src, char *dst) {
    const bw_subtype *st = c->st;
    if (st->kind == BW_V_BOOL) {
        for (Py_ssize_t i = 0; i < c->dim; i++)
            dst[i] = src[i] != 0;
        return;
    }
    if (st->prefixed)
        src++;
    if (st->kind == BW_V_DATE) {
        for (Py_ssize_t i = 0; i < c->dim; i++, src += c->elem_size) {
            const unsigned char *u = (const unsigned char *)src;
            uint32_t raw = (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
            int64_t days = (int64_t)raw - ((int64_t)1 << 31);
            memcpy(dst + 8 * i, &days, 8);
        }
        return;
    }
    bw_copy_elements(dst, st->width, src, c->elem_size, (size_t)c->dim, (size_t)st->width,
                     !BW_NATIVE_BIG_ENDIAN);
}

static PyObject *uuid_from(const char *p) {
    if (uuid_class == NULL) {
        PyObject *mod = PyImport_ImportModule("uuid"); /* new reference */
        if (mod == NULL)
            return NULL;
        uuid_class = PyObject_GetAttrString(mod, "UUID");
        Py_DECREF(mod);
        if (uuid_class == NULL)
            return NULL;
    }
    PyObject *kwargs = Py_BuildValue("{sy#}", "bytes", p, (Py_ssize_t)16);
    if (kwargs == NULL)
        return NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *u = empty ? PyObject_Call(uuid_class, empty, kwargs) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(kwargs);
    return u;
}

static PyObject *var_element(const bw_subtype *st, const char *p, Py_ssize_t n) {
    switch (st->kind) {
    case BW_V_TEXT: return PyUnicode_DecodeUTF8(p, n, NULL);
    case BW_V_ASCII: return PyUnicode_DecodeASCII(p, n, NULL);
    case BW_V_BLOB: return PyBytes_FromStringAndSize(p, n);
    default: /* varint */
        if (n <= 8) {
            int64_t v = n > 0 && (p[0] & 0x80) ? -1 : 0;
            for (Py_ssize_t i = 0; i < n; i++)
                v = (int64_t)(((uint64_t)v << 8) | (unsigned char)p[i]);
            return PyLong_FromLongLong(v);
        }
        PyObject *raw = PyBytes_FromStringAndSize(p, n);
        if (raw == NULL)
            return NULL;
        PyObject *v = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "Os", raw, "big");
        Py_DECREF(raw);
        if (v == NULL)
            return NULL;
        if (p[0] & 0x80) { /* negative: subtract 2**(8n) */
            PyObject *one = PyLong_FromLong(1);
            PyObject *shift = PyLong_FromSsize_t(8 * n);
            PyObject *span = one && shift ? PyNumber_Lshift(one, shift) : NULL;
            PyObject *neg = span ? PyNumber_Subtract(v, span) : NULL;
            Py_XDECREF(one);
            Py_XDECREF(shift);
            Py_XDECREF(span);
            Py_DECREF(v);
            v = neg;
        }
        return v;
    }
}

/* Fills obj[0..dim) (an object array row, all NULL) from a payload. 0, or -1. */
static int decode_object_row(bw_vector_codec *c, const char *p, Py_ssize_t len, PyObject **obj) {
    const bw_subtype *st = c->st;
    if (st->kind == BW_V_UUID) {
        for (Py_ssize_t i = 0; i < c->dim; i++)
            if ((obj[i] = uuid_from(p + 16 * i)) == NULL)
                return -1;
        return 0;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < c->dim; i++) {
        uint64_t n = 0;
        size_t used = bw_vint_read((const unsigned char *)p + at, (size_t)(len - at), &n);
        /* an empty varint holds no number: the driver refuses it too */
        if (used == 0 || n > (uint64_t)(len - at - (Py_ssize_t)used) ||
            (n == 0 && st->kind == BW_V_VARINT)) {
            /* the driver's wording */
            PyErr_Format(PyExc_ValueError, "Error reading additional data during vector "
                         "deserialization after successfully adding %zd elements", i);
            return -1;
        }
        at += (Py_ssize_t)used;
        if ((obj[i] = var_element(st, p + at, (Py_ssize_t)n)) == NULL) {
            /* a malformed payload is a ValueError naming the element (and, in
               deserialize_many, the row), as every other decoding error */
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyErr_NormalizeException(&type, &value, &tb);
                PyErr_Format(PyExc_ValueError, "vector element %zd: %S", i, value);
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
            }
            return -1;
        }
        at += (Py_ssize_t)n;
    }
    if (at < len) {
        PyErr_SetString(PyExc_ValueError,
                        "Additional bytes remaining after vector deserialization completed");
        return -1;
    }
    return 0;
}

PyObject *bw_vec_deserialize(bw_vector_codec *c, PyObject *b) {
    Py_buffer view;
    if (decode_ready() < 0)
        return NULL;
    if (PyObject_GetBuffer(b, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    npy_intp dim = c->dim;
    if (c->row_size > 0 && view.len != c->row_size) {
        size_error(c, view.len);
        goto cleanup;
    }
    if (c->row_size > 0 && check_row(c, view.buf) < 0)
        goto cleanup;
    PyArray_Descr *wire = wire_descr(c->st); /* new reference or NULL */
    if (wire != NULL) { /* zero-copy view, like numpy.frombuffer(b, '>f4') */
        result = PyArray_FromBuffer(b, wire, dim, 0); /* steals wire */
        goto cleanup;
    }
    if (PyErr_Occurred())
        goto cleanup;
    PyArray_Descr *descr = native_descr(c->st); /* new reference, stolen below */
    if (descr == NULL)
        goto cleanup;
    result = PyArray_NewFromDescr(&PyArray_Type, descr, 1, &dim, NULL, NULL, 0, NULL);
    if (result == NULL)
        goto cleanup;
    if (bw_vkind_numeric(c->st)) {
        decode_numeric_row(c, view.buf, PyArray_BYTES((PyArrayObject *)result));
    } else if (decode_object_row(c, view.buf, view.len,
                                 (PyObject **)PyArray_DATA((PyArrayObject *)result)) < 0) {
        Py_CLEAR(result);
    }
cleanup:
    PyBuffer_Release(&view);
    return result;
}

PyObject *bw_vec_deserialize_many(bw_vector_codec *c, PyObject *items) {
    if (decode_ready() < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(items, "deserialize_many expects a sequence of bytes");
    if (seq == NULL)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq), got = 0;
    Py_buffer *views = PyMem_Calloc((size_t)(rows > 0 ? rows : 1), sizeof(Py_buffer));
    if (views == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (; got < rows; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_SIMPLE) < 0)
            goto cleanup;
        if (c->row_size > 0 && views[got].len != c->row_size) {
            got++;
            size_error(c, views[got - 1].len);
            bw_vec_prefix_row(got - 1, 0);
            goto cleanup;
        }
        if (c->row_size > 0 && check_row(c, views[got].buf) < 0) {
            got++;
            bw_vec_prefix_row(got - 1, 0);
            goto cleanup;
        }
    }
    PyArray_Descr *descr = native_descr(c->st); /* new reference, stolen below */
    if (descr == NULL)
        goto cleanup;
    npy_intp shape[2] = {rows, c->dim};
    result = PyArray_NewFromDescr(&PyArray_Type, descr, 2, shape, NULL, NULL, 0, NULL);
    if (result == NULL)
        goto cleanup;
    char *out = PyArray_BYTES((PyArrayObject *)result);
    if (bw_vkind_numeric(c->st)) {
        npy_intp row_bytes = PyArray_STRIDE((PyArrayObject *)result, 0);
        /* the buffers are exported to us (bytes cannot change; bytearrays cannot resize) */
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; r++)
            decode_numeric_row(c, views[r].buf, out + r * row_bytes);
        Py_END_ALLOW_THREADS
    } else {
        for (Py_ssize_t r = 0; r < rows; r++) {
            if (decode_object_row(c, views[r].buf, views[r].len, (PyObject **)out + r * c->dim) < 0) {
                bw_vec_prefix_row(r, 0);
                Py_CLEAR(result);
                break;
            }
        }
    }
cleanup:
    if (views != NULL) {
        for (Py_ssize_t r = 0; r < got; r++)
            PyBuffer_Release(&views[r]);
        PyMem_Free(views);
    }
    Py_DECREF(seq);
    return result;
}

/* The driver's own result: a list of Python floats / ints, for the numeric subtypes. */
PyObject *bw_vec_deserialize_list(bw_vector_codec *c, PyObject *b) {
    const bw_subtype *st = c->st;
    if (!bw_vkind_numeric(st) || st->kind == BW_V_BOOL || st->kind == BW_V_TIMESTAMP ||
        st->kind == BW_V_DATE || st->kind == BW_V_TIME) {
        PyErr_Format(PyExc_TypeError, "no list decoding for %s", st->name);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(b, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *list = NULL;
    if (view.len != c->row_size) {
        size_error(c, view.len);
        goto cleanup;
    }
    if (check_row(c, view.buf) < 0)
        goto cleanup;
    list = PyList_New(c->dim);
    if (list == NULL)
        goto cleanup;
    const unsigned char *p = (const unsigned char *)view.buf + st->prefixed;
    for (Py_ssize_t i = 0; i < c->dim; i++, p += c->elem_size) {
        union { uint64_t u64; uint32_t u32; uint16_t u16; double d; float f; int64_t i64;
                int32_t i32; int16_t i16; int8_t i8; } v;
        PyObject *item;
        switch (st->width) {
        case 1: memcpy(&v.i8, p, 1); break;
        case 2: v.u16 = (uint16_t)(p[0] << 8 | p[1]); break;
        case 4: memcpy(&v.u32, p, 4); if (!BW_NATIVE_BIG_ENDIAN) v.u32 = __builtin_bswap32(v.u32); break;
        default: memcpy(&v.u64, p, 8); if (!BW_NATIVE_BIG_ENDIAN) v.u64 = __builtin_bswap64(v.u64); break;
        }
        switch (st->kind) {
        case BW_V_F32: item = PyFloat_FromDouble((double)v.f); break;
        case BW_V_F64: item = PyFloat_FromDouble(v.d); break;
        case BW_V_I8: item = PyLong_FromLong(v.i8); break;
        case BW_V_I16: item = PyLong_FromLong(v.i16); break;
        case BW_V_I32: item = PyLong_FromLong(v.i32); break;
        default: item = PyLong_FromLongLong(v.i64); break;
        }
        if (item == NULL) {
            Py_CLEAR(list);
            goto cleanup;
        }
        PyList_SET_ITEM(list, i, item);
    }
cleanup:
    PyBuffer_Release(&view);
    return list;
}
