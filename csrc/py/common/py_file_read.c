/* Files read with positioned reads: see py_file_read.h. The reads run with the GIL released;
   the descriptor stays open meanwhile because the caller (bulkwire.parquet.TableFile) does
   not close it while one of its lookups runs. */
#define PY_SSIZE_T_CLEAN
#include "py_numpy.h" /* must precede any other NumPy header */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "file_read.h"
#include "py_errors.h"
#include "py_file_read.h"

/* Error messages of reads fit in this many bytes. */
#define READ_ERROR_SIZE 200

int bw_file_arg_get(PyObject *arg, bw_file_arg *file) {
    file->view.obj = NULL;
    if (PyTuple_Check(arg)) {
        int fd;
        long long size;
        if (!PyArg_ParseTuple(arg, "iL;file must be a buffer or a tuple (fd, size)", &fd,
                              &size))
            return -1;
        if (fd < 0 || size < 0 || (unsigned long long)size > (unsigned long long)PY_SSIZE_T_MAX) {
            PyErr_Format(PyExc_ValueError, "file: descriptor %d and size %lld must be "
                         "non-negative", fd, size);
            return -1;
        }
        file->data = NULL;
        file->fd = fd;
        file->size = (size_t)size;
        return 0;
    }
    if (PyObject_GetBuffer(arg, &file->view, PyBUF_SIMPLE) < 0) {
        file->view.obj = NULL;
        return -1;
    }
    file->data = file->view.buf;
    file->fd = -1;
    file->size = (size_t)file->view.len;
    return 0;
}

void bw_file_arg_release(bw_file_arg *file) {
    if (file->view.obj != NULL)
        PyBuffer_Release(&file->view);
}

PyObject *bw_raise_read_error(int rc, const char *error) {
    bw_status st;
    bw_read_status(rc, error, &st);
    return bw_raise_status(&st);
}

/* read_ranges(fd, size, offsets, lengths) -> uint8 array: the bytes of ranges
   [offsets[i], offsets[i] + lengths[i]) of the file, one after another (ranges that follow
   one another in the file read at once), each range checked to lie inside the file's `size`
   bytes (its size when it was opened). A file that ends
   sooner raises MalformedFileError (it changed), a read that fails OSError. The reads run with the
   GIL released. New reference. */
static PyObject *module_read_ranges(PyObject *self, PyObject *args) {
    (void)self;
    if (bw_numpy_required() < 0) /* reads its arguments as arrays, and makes one */
        return NULL;
    int fd;
    long long size;
    PyObject *offsets_arg, *lengths_arg;
    if (!PyArg_ParseTuple(args, "iLOO:read_ranges", &fd, &size, &offsets_arg, &lengths_arg))
        return NULL;
    PyArrayObject *offsets = NULL, *lengths = NULL;
    PyObject *result = NULL, *out = NULL;
    offsets = (PyArrayObject *)PyArray_FROMANY(offsets_arg, NPY_INT64, 1, 1, NPY_ARRAY_IN_ARRAY);
    lengths = (PyArrayObject *)PyArray_FROMANY(lengths_arg, NPY_INT64, 1, 1, NPY_ARRAY_IN_ARRAY);
    if (offsets == NULL || lengths == NULL)
        goto cleanup;
    npy_intp count = PyArray_DIM(offsets, 0);
    if (PyArray_DIM(lengths, 0) != count) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths must be of one length");
        goto cleanup;
    }
    if (fd < 0 || size < 0) {
        PyErr_Format(PyExc_ValueError, "descriptor %d and size %lld must be non-negative", fd,
                     size);
        goto cleanup;
    }
    const int64_t *at = PyArray_DATA(offsets), *n = PyArray_DATA(lengths);
    uint64_t total = 0;
    for (npy_intp i = 0; i < count; i++) {
        if (at[i] < 0 || n[i] < 0 || at[i] > size || n[i] > size - at[i]) {
            PyErr_Format(PyExc_ValueError, "range %zd: %lld bytes at %lld, outside the file "
                         "(%lld bytes)", (Py_ssize_t)i, (long long)n[i], (long long)at[i], size);
            goto cleanup;
        }
        total += (uint64_t)n[i];
        if (total > (uint64_t)PY_SSIZE_T_MAX) {
            PyErr_SetString(PyExc_ValueError, "ranges too large");
            goto cleanup;
        }
    }
    npy_intp dims[1] = {(npy_intp)total};
    out = PyArray_SimpleNew(1, dims, NPY_UINT8);
    if (out == NULL)
        goto cleanup;
    uint8_t *dest = PyArray_DATA((PyArrayObject *)out);
    char error[READ_ERROR_SIZE];
    int rc = BW_READ_OK;
    /* only raw memory below: the arrays are ours until we return */
    Py_BEGIN_ALLOW_THREADS
    npy_intp i = 0;
    while (i < count && rc == BW_READ_OK) {
        /* ranges that follow one another in the file: one read */
        int64_t start = at[i], length = n[i];
        for (i++; i < count && at[i] == start + length; i++)
            length += n[i];
        rc = bw_read_exact(fd, dest, (size_t)length, (uint64_t)start, (size_t)size, error,
                           sizeof error);
        dest += length;
    }
    Py_END_ALLOW_THREADS
    if (rc != BW_READ_OK) {
        bw_raise_read_error(rc, error);
        goto cleanup;
    }
    result = out;
    out = NULL;
cleanup:
    Py_XDECREF(out);
    Py_XDECREF(offsets);
    Py_XDECREF(lengths);
    return result;
}

static PyMethodDef file_read_functions[] = {
    {"read_ranges", module_read_ranges, METH_VARARGS,
     "read_ranges(fd, size, offsets, lengths): the bytes of the file's ranges, one after "
     "another (pread, the GIL released); ValueError when the file ends sooner than size."},
    {NULL, NULL, 0, NULL},
};

int bw_file_read_add_to_module(PyObject *module) {
    return PyModule_AddFunctions(module, file_read_functions);
}
