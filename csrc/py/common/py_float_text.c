/* Test hooks: bulkwire._core._testing.format_doubles / format_floats32 format every element of a 1-D
   contiguous float64 / float32 array and return the texts, each followed by '\n', as bytes.
   They exist so the tests and benchmarks can drive csrc/core/json/float_text.c in bulk. */
#define PY_SSIZE_T_CLEAN
#include "py_numpy.h" /* must precede any other NumPy header */
#include <Python.h>
#include <string.h>

#include "float_text.h"
#include "py_float_text.h"

/* Checks arg is a 1-D C-contiguous array of the given type; returns it (borrowed) or NULL. */
static PyArrayObject *checked_vector(PyObject *arg, int type_num, const char *fname, const char *dtype)
{
    int is_array = bw_numpy_is_array(arg);
    if (is_array < 0)
        return NULL;
    if (!is_array) {
        PyErr_Format(PyExc_TypeError, "%s() expects a numpy.ndarray of dtype %s, not %.200s", fname,
                     dtype, Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    if (PyArray_TYPE(a) != type_num || !PyArray_ISNOTSWAPPED(a)) {
        PyErr_Format(PyExc_TypeError, "%s() expects an array of native-endian dtype %s", fname, dtype);
        return NULL;
    }
    if (PyArray_NDIM(a) != 1) {
        PyErr_Format(PyExc_ValueError, "%s() expects a 1-D array, got %d dimensions", fname,
                     PyArray_NDIM(a));
        return NULL;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a)) {
        PyErr_Format(PyExc_ValueError, "%s() expects a contiguous array", fname);
        return NULL;
    }
    return a;
}

static PyObject *format_vector(PyObject *arg, int type_num, const char *fname, const char *dtype)
{
    PyArrayObject *a = checked_vector(arg, type_num, fname, dtype);
    if (a == NULL)
        return NULL;
    Py_ssize_t n = PyArray_DIM(a, 0);
    if (n > (PY_SSIZE_T_MAX - 1) / (BW_FLOAT_TEXT_MAX + 1))
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (BW_FLOAT_TEXT_MAX + 1));
    if (out == NULL)
        return NULL;
    /* Keeps the array (and so its memory) alive while the GIL is released. */
    Py_INCREF(a);
    const char *data = (const char *)PyArray_DATA(a);
    char *start = PyBytes_AS_STRING(out);
    char *p = start;
    Py_BEGIN_ALLOW_THREADS
    /* Two plain loops so each writer inlines; memcpy because the buffer may be unaligned. */
    if (type_num == NPY_FLOAT64) {
        for (Py_ssize_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, data + (size_t)i * sizeof v, sizeof v);
            p += bw_double_to_text(v, p);
            *p++ = '\n';
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, data + (size_t)i * sizeof v, sizeof v);
            p += bw_float32_to_text(v, p);
            *p++ = '\n';
        }
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(a);
    if (_PyBytes_Resize(&out, p - start) < 0)
        return NULL;
    return out;
}

static PyObject *module_format_doubles(PyObject *self, PyObject *arg)
{
    (void)self;
    return format_vector(arg, NPY_FLOAT64, "format_doubles", "float64");
}

static PyObject *module_format_floats32(PyObject *self, PyObject *arg)
{
    (void)self;
    return format_vector(arg, NPY_FLOAT32, "format_floats32", "float32");
}

static PyMethodDef float_text_functions[] = {
    {"format_doubles", module_format_doubles, METH_O,
     "format_doubles(a, /)\n--\n\nTest hook: each float64 of the 1-D contiguous array a as "
     "float.__repr__ text (NaN/Infinity for non-finite), each followed by a newline, as bytes."},
    {"format_floats32", module_format_floats32, METH_O,
     "format_floats32(a, /)\n--\n\nTest hook: each float32 of the 1-D contiguous array a with "
     "its shortest float32 round-trip digits, laid out like float.__repr__, each followed by a "
     "newline, as bytes."},
    {NULL, NULL, 0, NULL},
};

int bw_float_text_add_functions(PyObject *module)
{
    return PyModule_AddFunctions(module, float_text_functions);
}
