/* bw_stream_write: see py_stream_write.h. */
#include "py_stream_write.h"

#include "py_piece.h"

#include <stdlib.h>

PyObject *bw_stream_write(bw_stream_write_fn write, void *stream, int *busy, int *finished,
                          const char *type_name, const char *kind, PyObject *data, int finish,
                          int *failure) {
    *failure = 0;
    if (*busy) {
        PyErr_Format(PyExc_RuntimeError, "%s used from two threads at once", type_name);
        return NULL;
    }
    if (*finished) {
        PyErr_Format(PyExc_ValueError, "the %s stream is already finished", kind);
        return NULL;
    }
    Py_buffer view = {0};
    if (data != NULL && PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    bw_buf out = {0};
    if (!finish && view.len == 0) { /* no empty pieces */
        result = Py_NewRef(Py_None);
        goto cleanup;
    }
    if (bw_buf_init(&out, 0) < 0) {
        result = PyErr_NoMemory();
        goto cleanup;
    }
    int rc;
    *busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = write(stream, view.buf, (size_t)view.len, finish, &out);
    Py_END_ALLOW_THREADS
    *busy = 0;
    if (rc != 0) {
        *failure = rc;
        goto cleanup;
    }
    if (finish)
        *finished = 1;
    if (out.len == 0) {
        result = Py_NewRef(Py_None);
        goto cleanup;
    }
    if (out.cap - out.len > 4096) { /* compressed output is small: give the rest back */
        char *shrunk = realloc(out.data, out.len);
        if (shrunk != NULL) {
            out.data = shrunk;
            out.cap = out.len;
        }
    }
    size_t len, cap = out.cap;
    char *mem = bw_buf_detach(&out, &len);
    result = bw_piece_from_memory(mem, len, cap, 0);
cleanup:
    bw_buf_free(&out);
    if (data != NULL)
        PyBuffer_Release(&view);
    return result;
}
