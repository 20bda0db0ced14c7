/* bw_stream_write: see py_stream_write.h. */
#include "py_stream_write.h"

#include "py_piece.h"

#include <stdlib.h>

PyObject *bw_stream_write(bw_stream_write_fn write, void *stream, bw_guard *guard,
                          const bw_guard_words *words, int inherited, int *finished,
                          const char *kind, PyObject *data, int finish, int *failure) {
    *failure = 0;
    if (bw_guard_enter(guard, words, 0, inherited) < 0)
        return NULL;
    if (*finished) {
        bw_guard_leave(guard);
        PyErr_Format(PyExc_ValueError, "the %s stream is already finished", kind);
        return NULL;
    }
    Py_buffer view = {0};
    if (data != NULL && PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        bw_guard_leave(guard);
        return NULL;
    }
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
    Py_BEGIN_ALLOW_THREADS
    rc = write(stream, view.buf, (size_t)view.len, finish, &out);
    Py_END_ALLOW_THREADS
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
    bw_guard_leave(guard);
    bw_buf_free(&out);
    if (data != NULL)
        PyBuffer_Release(&view);
    return result;
}
