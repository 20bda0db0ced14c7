/* Vector encoding: one element from a Python object, as the driver converts it. */
#include "py_encode_vector.h"

#include "vint.h"

PyObject *bw_vec_length_error(bw_vector_codec *c, Py_ssize_t observed) {
    /* the driver's wording */
    PyErr_Format(PyExc_ValueError, "Expected sequence of size %zd for vector of type %s and "
                 "dimension %zd, observed sequence of length %zd", c->dim, c->st->name, c->dim,
                 observed);
    return NULL;
}

/* A null element: None in a sequence, NaT in a datetime64/timedelta64 array. */
int bw_vec_null_error(Py_ssize_t index, const char *null_name) {
    PyErr_Format(PyExc_TypeError, "vector element %zd is %s: CQL vectors cannot hold nulls",
                 index, null_name);
    return -1;
}

/* -1 in so many words: the compiler then sees that no value was produced. */
static int none_error(Py_ssize_t index) {
    bw_vec_null_error(index, "None");
    return -1;
}

int bw_vec_range_error(bw_vector_codec *c, Py_ssize_t index, PyObject *item) {
    PyErr_Format(PyExc_OverflowError, "vector element %zd (%R) is out of range for %s", index,
                 item, c->st->name);
    return -1;
}

static int item_to_double(PyObject *item, Py_ssize_t index, double *out) {
    if (PyFloat_CheckExact(item)) {
        *out = PyFloat_AS_DOUBLE(item);
        return 0;
    }
    if (item == Py_None)
        return none_error(index);
    double d = PyFloat_AsDouble(item);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    *out = d;
    return 0;
}

/* Integer value of item, within the subtype's range. exact: only int itself (the driver's
   timestamp); plain: int and subclasses only (the driver's date); else anything with
   __index__. */
enum { INT_INDEX, INT_PLAIN, INT_EXACT };
static int item_to_int(bw_vector_codec *c, PyObject *item, Py_ssize_t index, int rule,
                       long long *out) {
    if (item == Py_None)
        return none_error(index);
    PyObject *number;
    if (PyLong_CheckExact(item) || (rule != INT_EXACT && PyLong_Check(item))) {
        number = Py_NewRef(item);
    } else if (rule == INT_INDEX) {
        number = PyNumber_Index(item); /* new reference */
        if (number == NULL)
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "vector element %zd: expected an int for %s, got %.80s",
                     index, c->st->name, Py_TYPE(item)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
    Py_DECREF(number);
    if (v == -1 && !overflow && PyErr_Occurred())
        return -1;
    if (overflow || !bw_subtype_holds(c->st, v))
        return bw_vec_range_error(c, index, item);
    *out = v;
    return 0;
}

/* Writes element `index` of a constant-size kind at dst (elem_size bytes, prefix included). */
int bw_vec_put_fixed_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, char *dst) {
    const bw_subtype *st = c->st;
    long long v;
    if (st->prefixed)
        *dst++ = (char)st->width;
    switch (st->kind) {
    case BW_V_F32: {
        double d;
        float f;
        uint32_t bits;
        if (item_to_double(item, index, &d) < 0)
            return -1;
        if (double_to_float(d, &f) < 0)
            return bw_vec_range_error(c, index, item);
        memcpy(&bits, &f, 4);
        store_be32(dst, bits);
        return 0;
    }
    case BW_V_F64: {
        double d;
        uint64_t bits;
        if (item_to_double(item, index, &d) < 0)
            return -1;
        memcpy(&bits, &d, 8);
        store_be64(dst, bits);
        return 0;
    }
    case BW_V_I8:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        *dst = (char)(int8_t)v;
        return 0;
    case BW_V_I16: {
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        uint16_t u = (uint16_t)(int16_t)v;
        dst[0] = (char)(u >> 8);
        dst[1] = (char)(u & 0xff);
        return 0;
    }
    case BW_V_I32:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        store_be32(dst, (uint32_t)(int32_t)v);
        return 0;
    case BW_V_I64:
        if (item_to_int(c, item, index, INT_INDEX, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_TIMESTAMP:
        if (item_to_int(c, item, index, INT_EXACT, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_DATE:
        if (item_to_int(c, item, index, INT_PLAIN, &v) < 0)
            return -1;
        store_be32(dst, (uint32_t)v);
        return 0;
    case BW_V_TIME:
        if (item_to_int(c, item, index, INT_PLAIN, &v) < 0)
            return -1;
        store_be64(dst, (uint64_t)v);
        return 0;
    case BW_V_BOOL:
        if (item == Py_True || item == Py_False) {
            *dst = item == Py_True;
            return 0;
        }
        if (item == Py_None)
            return none_error(index);
        PyErr_Format(PyExc_TypeError, "vector element %zd: expected a bool for boolean, got "
                     "%.80s", index, Py_TYPE(item)->tp_name);
        return -1;
    case BW_V_UUID: {
        if (item == Py_None)
            return none_error(index);
        PyObject *raw = PyObject_GetAttrString(item, "bytes"); /* new reference */
        if (raw == NULL || !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16) {
            Py_XDECREF(raw);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected a uuid.UUID for %s, got "
                         "%.80s", index, st->name, Py_TYPE(item)->tp_name);
            return -1;
        }
        memcpy(dst, PyBytes_AS_STRING(raw), 16);
        Py_DECREF(raw);
        return 0;
    }
    default:
        PyErr_SetString(PyExc_SystemError, "bulkwire: not a constant-size vector subtype");
        return -1;
    }
}

/* Variable-size elements: vint length + content, appended to out. */
int bw_vec_put_var_item(bw_vector_codec *c, PyObject *item, Py_ssize_t index, bw_buf *out) {
    const char *data = NULL;
    Py_ssize_t size = 0;
    PyObject *owned = NULL; /* keeps data alive */
    Py_buffer view;
    int have_view = 0, rc = -1;
    unsigned char small[9];
    if (item == Py_None)
        return none_error(index);
    switch (c->st->kind) {
    case BW_V_TEXT:
    case BW_V_ASCII:
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected a str for %s, got %.80s",
                         index, c->st->name, Py_TYPE(item)->tp_name);
            return -1;
        }
        if (c->st->kind == BW_V_ASCII && !PyUnicode_IS_ASCII(item)) {
            owned = PyUnicode_AsASCIIString(item); /* raises UnicodeEncodeError */
            if (owned == NULL)
                return -1;
            data = PyBytes_AS_STRING(owned);
            size = PyBytes_GET_SIZE(owned);
            break;
        }
        data = PyUnicode_AsUTF8AndSize(item, &size);
        if (data == NULL)
            return -1;
        break;
    case BW_V_BLOB:
        if (PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected bytes for blob, got str",
                         index);
            return -1;
        }
        if (PyBytes_CheckExact(item) || PyByteArray_CheckExact(item)) {
            if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0)
                return -1;
            have_view = 1;
            data = view.buf;
            size = view.len;
            break;
        }
        /* Anything else is what bytes(item) makes of it, as the driver's blob packing:
           __bytes__ first, an object with __index__ (a NumPy integer) gives that many zero
           bytes, then the buffer (any layout) or an iterable of ints; its errors as they are */
        owned = PyObject_CallOneArg((PyObject *)&PyBytes_Type, item); /* new reference */
        if (owned == NULL)
            return -1;
        data = PyBytes_AS_STRING(owned);
        size = PyBytes_GET_SIZE(owned);
        break;
    default: { /* BW_V_VARINT: minimal two's complement, big-endian */
        if (!PyLong_Check(item)) { /* as the driver: its varint packing works on ints only */
            PyErr_Format(PyExc_TypeError, "vector element %zd: expected an int for varint, got "
                         "%.80s", index, Py_TYPE(item)->tp_name);
            return -1;
        }
        PyObject *number = Py_NewRef(item);
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
        if (v == -1 && !overflow && PyErr_Occurred()) {
            Py_DECREF(number);
            return -1;
        }
        if (!overflow) {
            Py_DECREF(number);
            /* bytes needed: bit length of v (or of ~v when negative) // 8 + 1 */
            uint64_t magnitude = v < 0 ? ~(uint64_t)v : (uint64_t)v;
            int bits = magnitude == 0 ? 0 : 64 - __builtin_clzll(magnitude);
            size = bits / 8 + 1;
            for (Py_ssize_t i = size; i-- > 0; v >>= 8) /* arithmetic shift keeps the sign */
                small[i] = (unsigned char)(v & 0xff);
            data = (const char *)small;
            break;
        }
        /* big: (bit_length of v, or of ~v when negative) // 8 + 1 bytes, signed */
        PyObject *basis = overflow < 0 ? PyNumber_Invert(number) : Py_NewRef(number);
        PyObject *nbits = basis ? PyObject_CallMethod(basis, "bit_length", NULL) : NULL;
        Py_XDECREF(basis);
        Py_ssize_t n = nbits ? PyLong_AsSsize_t(nbits) : -1;
        Py_XDECREF(nbits);
        PyObject *method = n >= 0 ? PyObject_GetAttrString(number, "to_bytes") : NULL;
        PyObject *args = method ? Py_BuildValue("(ns)", n / 8 + 1, "big") : NULL;
        PyObject *kwargs = args ? Py_BuildValue("{sO}", "signed", Py_True) : NULL;
        owned = kwargs ? PyObject_Call(method, args, kwargs) : NULL; /* new reference */
        Py_XDECREF(kwargs);
        Py_XDECREF(args);
        Py_XDECREF(method);
        Py_DECREF(number);
        if (owned == NULL)
            return -1;
        data = PyBytes_AS_STRING(owned);
        size = PyBytes_GET_SIZE(owned);
        break;
    }
    }
    if (bw_buf_reserve(out, BW_VINT_MAX + (size_t)size) < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    out->len += bw_vint_write((uint64_t)size, (unsigned char *)bw_buf_tail(out));
    bw_buf_put(out, data, (size_t)size);
    rc = 0;
cleanup:
    if (have_view)
        PyBuffer_Release(&view);
    Py_XDECREF(owned);
    return rc;
}
