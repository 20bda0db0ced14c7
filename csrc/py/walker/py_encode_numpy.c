/* The NumPy rule: an ndarray is written as ndarray.tolist() would give it, a NumPy scalar
   as .item() would give it, without creating those Python objects for the common dtypes. */
#include "py_numpy.h"
#include "py_encoder.h"

#include "json_array.h"

/* The element type of a dtype written straight from memory (either byte order): 0, or -1
   for the other dtypes. NumPy's C integer types are named by C type, whose sizes vary. */
#define INTEGER_OF_SIZE(size, prefix) \
    ((size) == 1 ? prefix##8 : (size) == 2 ? prefix##16 : (size) == 4 ? prefix##32 : prefix##64)
static int direct_type(int type_num, bw_num_type *type) {
    switch (type_num) {
    case NPY_BOOL: *type = BW_NUM_BOOL; return 0;
    case NPY_BYTE: *type = INTEGER_OF_SIZE(sizeof(npy_byte), BW_NUM_I); return 0;
    case NPY_SHORT: *type = INTEGER_OF_SIZE(sizeof(npy_short), BW_NUM_I); return 0;
    case NPY_INT: *type = INTEGER_OF_SIZE(sizeof(npy_int), BW_NUM_I); return 0;
    case NPY_LONG: *type = INTEGER_OF_SIZE(sizeof(npy_long), BW_NUM_I); return 0;
    case NPY_LONGLONG: *type = INTEGER_OF_SIZE(sizeof(npy_longlong), BW_NUM_I); return 0;
    case NPY_UBYTE: *type = INTEGER_OF_SIZE(sizeof(npy_ubyte), BW_NUM_U); return 0;
    case NPY_USHORT: *type = INTEGER_OF_SIZE(sizeof(npy_ushort), BW_NUM_U); return 0;
    case NPY_UINT: *type = INTEGER_OF_SIZE(sizeof(npy_uint), BW_NUM_U); return 0;
    case NPY_ULONG: *type = INTEGER_OF_SIZE(sizeof(npy_ulong), BW_NUM_U); return 0;
    case NPY_ULONGLONG: *type = INTEGER_OF_SIZE(sizeof(npy_ulonglong), BW_NUM_U); return 0;
    case NPY_HALF: *type = BW_NUM_F16; return 0;
    case NPY_FLOAT: *type = BW_NUM_F32; return 0;
    case NPY_DOUBLE: *type = BW_NUM_F64; return 0;
    default: return -1;
    }
}
#undef INTEGER_OF_SIZE

/* Direct dtypes only: the rows are read from memory while no Python code runs, so the data
   pointer cannot go stale. */
static int write_direct_dimension(bw_walker *w, PyArrayObject *arr, bw_num_type type, int dim,
                                  const char *p) {
    npy_intp n = PyArray_DIM(arr, dim);
    npy_intp stride = PyArray_STRIDE(arr, dim);
    bw_buf *out = w->out;
    if (dim == PyArray_NDIM(arr) - 1) {
        if (bw_json_array(out, type, p, (size_t)n, stride, !PyArray_ISNOTSWAPPED(arr),
                          w->opts->float32_shortest) < 0)
            return bw_out_of_memory();
        return 0;
    }
    if (bw_buf_append(out, "[", 1) < 0)
        return bw_out_of_memory();
    for (npy_intp i = 0; i < n; i++, p += stride) {
        if (i > 0 && bw_buf_append(out, ", ", 2) < 0)
            return bw_out_of_memory();
        if (write_direct_dimension(w, arr, type, dim + 1, p) < 0)
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
    bw_num_type type;
    if (PyArray_NDIM(arr) > 0 && direct_type(PyArray_TYPE(arr), &type) == 0)
        return write_direct_dimension(w, arr, type, 0, PyArray_DATA(arr));
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
    bw_num_type type;
    if (direct_type(type_num, &type) == 0) {
        union { npy_longlong i; double d; char bytes[16]; } value;
        PyArray_ScalarAsCtype(obj, &value);
        if (bw_json_number(w->out, type, value.bytes, w->opts->float32_shortest) < 0)
            return bw_out_of_memory();
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
    /* nothing is a NumPy object before NumPy is imported: then nothing is asked of it */
    int rc = bw_numpy_imported();
    if (rc <= 0)
        return rc;
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
