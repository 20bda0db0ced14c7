/* The NumPy rule: an ndarray is written as ndarray.tolist() would give it, a NumPy scalar
   as .item() would give it, without creating those Python objects for the common dtypes. */
#include "py_numpy.h"
#include "py_encoder.h"

#include "float_text.h"
#include "int_text.h"

#include <math.h>

/* IEEE binary16 -> double, exact (every half is a double); saves linking npymath. */
static double half_to_double(uint16_t h) {
    int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude;
    if (exponent == 0)
        magnitude = ldexp((double)mantissa, -24);
    else if (exponent == 31)
        magnitude = mantissa ? NAN : INFINITY;
    else
        magnitude = ldexp((double)(mantissa | 0x400), exponent - 25);
    return sign ? -magnitude : magnitude;
}

/* Dtypes written straight from memory (either byte order). */
static int is_direct_type(int type_num) {
    switch (type_num) {
    case NPY_BOOL:
    case NPY_BYTE: case NPY_UBYTE: case NPY_SHORT: case NPY_USHORT:
    case NPY_INT: case NPY_UINT: case NPY_LONG: case NPY_ULONG:
    case NPY_LONGLONG: case NPY_ULONGLONG:
    case NPY_HALF: case NPY_FLOAT: case NPY_DOUBLE:
        return 1;
    default:
        return 0;
    }
}

/* One element of a direct dtype; room for it must already be reserved. Unaligned arrays
   are allowed, hence memcpy. */
static inline void put_element(bw_buf *out, int type_num, const char *p, int shortest) {
    char *dst = bw_buf_tail(out);
    switch (type_num) {
    case NPY_BOOL:
        if (*p) { memcpy(dst, "true", 4); out->len += 4; }
        else { memcpy(dst, "false", 5); out->len += 5; }
        return;
#define SIGNED_CASE(num, ctype) \
    case num: { ctype v; memcpy(&v, p, sizeof v); out->len += bw_i64_to_text((int64_t)v, dst); return; }
#define UNSIGNED_CASE(num, ctype) \
    case num: { ctype v; memcpy(&v, p, sizeof v); out->len += bw_u64_to_text((uint64_t)v, dst); return; }
    SIGNED_CASE(NPY_BYTE, npy_byte)
    SIGNED_CASE(NPY_SHORT, npy_short)
    SIGNED_CASE(NPY_INT, npy_int)
    SIGNED_CASE(NPY_LONG, npy_long)
    SIGNED_CASE(NPY_LONGLONG, npy_longlong)
    UNSIGNED_CASE(NPY_UBYTE, npy_ubyte)
    UNSIGNED_CASE(NPY_USHORT, npy_ushort)
    UNSIGNED_CASE(NPY_UINT, npy_uint)
    UNSIGNED_CASE(NPY_ULONG, npy_ulong)
    UNSIGNED_CASE(NPY_ULONGLONG, npy_ulonglong)
#undef SIGNED_CASE
#undef UNSIGNED_CASE
    case NPY_HALF: {
        npy_half v;
        memcpy(&v, p, sizeof v);
        out->len += bw_double_to_text(half_to_double(v), dst);
        return;
    }
    case NPY_FLOAT: {
        float v;
        memcpy(&v, p, sizeof v);
        out->len += shortest ? bw_float32_to_text(v, dst) : bw_double_to_text((double)v, dst);
        return;
    }
    default: { /* NPY_DOUBLE */
        double v;
        memcpy(&v, p, sizeof v);
        out->len += bw_double_to_text(v, dst);
        return;
    }
    }
}

/* Every direct element fits in this (float text is the longest), plus ", ". */
#define ELEMENT_ROOM (BW_FLOAT_TEXT_MAX + 2)

/* Reverses the element at p into a native-order copy (byte-swapped arrays). */
static inline const char *native_copy(const char *p, int itemsize, char *tmp) {
    for (int i = 0; i < itemsize; i++)
        tmp[i] = p[itemsize - 1 - i];
    return tmp;
}

static int write_direct_row(bw_walker *w, int type_num, const char *p, npy_intp n,
                            npy_intp stride, int swapped, int itemsize) {
    bw_buf *out = w->out;
    int shortest = w->opts->float32_shortest;
    if ((size_t)n > (SIZE_MAX - 2) / ELEMENT_ROOM || bw_buf_reserve(out, (size_t)n * ELEMENT_ROOM + 2) < 0)
        return bw_out_of_memory();
    bw_buf_putc(out, '[');
    /* The two embedding dtypes get loops of their own: no per-element type switch. */
    if (swapped) {
        char tmp[8];
        for (npy_intp i = 0; i < n; i++, p += stride) {
            if (i) { bw_buf_putc(out, ','); bw_buf_putc(out, ' '); }
            put_element(out, type_num, native_copy(p, itemsize, tmp), shortest);
        }
    } else if (type_num == NPY_FLOAT && !shortest) {
        for (npy_intp i = 0; i < n; i++, p += stride) {
            float v;
            memcpy(&v, p, sizeof v);
            if (i) { bw_buf_putc(out, ','); bw_buf_putc(out, ' '); }
            out->len += bw_double_to_text((double)v, bw_buf_tail(out));
        }
    } else if (type_num == NPY_DOUBLE) {
        for (npy_intp i = 0; i < n; i++, p += stride) {
            double v;
            memcpy(&v, p, sizeof v);
            if (i) { bw_buf_putc(out, ','); bw_buf_putc(out, ' '); }
            out->len += bw_double_to_text(v, bw_buf_tail(out));
        }
    } else {
        for (npy_intp i = 0; i < n; i++, p += stride) {
            if (i) { bw_buf_putc(out, ','); bw_buf_putc(out, ' '); }
            put_element(out, type_num, p, shortest);
        }
    }
    bw_buf_putc(out, ']');
    return 0;
}

/* Direct dtypes only: the rows are read from memory while no Python code runs, so the data
   pointer cannot go stale. */
static int write_direct_dimension(bw_walker *w, PyArrayObject *arr, int dim, const char *p) {
    npy_intp n = PyArray_DIM(arr, dim);
    npy_intp stride = PyArray_STRIDE(arr, dim);
    if (dim == PyArray_NDIM(arr) - 1)
        return write_direct_row(w, PyArray_TYPE(arr), p, n, stride, !PyArray_ISNOTSWAPPED(arr),
                                (int)PyArray_ITEMSIZE(arr));
    bw_buf *out = w->out;
    if (bw_buf_append(out, "[", 1) < 0)
        return bw_out_of_memory();
    for (npy_intp i = 0; i < n; i++, p += stride) {
        if (i > 0 && bw_buf_append(out, ", ", 2) < 0)
            return bw_out_of_memory();
        if (write_direct_dimension(w, arr, dim + 1, p) < 0)
            return -1;
    }
    if (bw_buf_append(out, "]", 1) < 0)
        return bw_out_of_memory();
    return 0;
}

/* Walks what a call produced (a new reference, or NULL on error) and releases it. */
static int walk_produced(bw_walker *w, PyObject *produced) {
    if (produced == NULL)
        return -1;
    int rc = bw_walk(w, produced);
    Py_DECREF(produced);
    return rc;
}

static int write_array(bw_walker *w, PyArrayObject *arr) {
    /* A subclass may override tolist(), which is what the round trip calls. */
    if (!PyArray_CheckExact(arr))
        return walk_produced(w, PyObject_CallMethod((PyObject *)arr, "tolist", NULL));
    if (PyArray_NDIM(arr) > 0 && is_direct_type(PyArray_TYPE(arr)))
        return write_direct_dimension(w, arr, 0, PyArray_DATA(arr));
    /* Other dtypes (object, strings, datetime64...) run Python code per element, and a hook
       on an element may resize or refill the array: the elements are taken as tolist()
       takes them, all at once when the array is reached, exactly what the round trip walks. */
    return walk_produced(w, PyArray_ToList(arr));
}

static int write_scalar(bw_walker *w, PyObject *obj) {
    PyArray_Descr *descr = PyArray_DescrFromScalar(obj); /* new reference */
    if (descr == NULL)
        return -1;
    int type_num = descr->type_num;
    Py_DECREF(descr);
    if (is_direct_type(type_num)) {
        union { npy_longlong i; double d; char bytes[16]; } value;
        PyArray_ScalarAsCtype(obj, &value);
        if (bw_buf_reserve(w->out, ELEMENT_ROOM) < 0)
            return bw_out_of_memory();
        put_element(w->out, type_num, value.bytes, w->opts->float32_shortest);
        return 0;
    }
    PyObject *item = PyObject_CallMethod(obj, "item", NULL); /* new reference */
    if (item != NULL && Py_TYPE(item) == Py_TYPE(obj)) {
        /* e.g. longdouble: .item() gives the scalar back, json would loop on it */
        PyErr_Format(PyExc_TypeError, "%R is not JSON serializable (NumPy %.100s has no Python "
                     "equivalent)", obj, Py_TYPE(obj)->tp_name);
        Py_CLEAR(item);
    }
    return walk_produced(w, item);
}

int bw_numpy_encode(bw_walker *w, PyObject *obj, int exact_only) {
    int rc;
    if (exact_only ? PyArray_CheckExact(obj) : PyArray_Check(obj)) {
        rc = write_array(w, (PyArrayObject *)obj);
    } else if (PyArray_IsScalar(obj, Generic) &&
               (!exact_only || !(Py_TYPE(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE))) {
        rc = write_scalar(w, obj);
    } else {
        return 0;
    }
    return rc < 0 ? -1 : 1;
}
