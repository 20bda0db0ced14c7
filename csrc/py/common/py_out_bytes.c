/* Output buffers that become their own bytes result (see py_out_bytes.h). */
#include "py_out_bytes.h"

#include <stdlib.h>

/* bw_buf.regrow for an output: below BW_OUT_BYTES_FROM the scratch memory grows by realloc;
   past it the content moves into a new bytes object once, and then that object grows. */
static int grow_output(bw_buf *buf, size_t cap) {
    /* growth of a Python object needs the GIL; a writer without it gets out-of-memory
       (buffer unchanged) rather than a crash */
    if (!PyGILState_Check())
        return buf->owner == NULL ? 1 : -1;
    if (cap > (size_t)PY_SSIZE_T_MAX)
        return -1;
    if (buf->owner == NULL) {
        if (cap <= BW_OUT_BYTES_FROM)
            return 1;
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap); /* new reference */
        if (bytes == NULL) {
            PyErr_Clear(); /* the writer reports the failure as MemoryError itself */
            return -1;
        }
        char *data = PyBytes_AS_STRING(bytes);
        bw_advise_huge_pages(data + buf->len, cap - buf->len);
        memcpy(data, buf->data, buf->len);
        free(buf->data);
        buf->data = data;
        buf->cap = cap;
        buf->owner = bytes;
        return 0;
    }
    PyObject *bytes = buf->owner;
    /* large blocks grow by remapping, without a copy; on failure the bytes object is freed */
    if (_PyBytes_Resize(&bytes, (Py_ssize_t)cap) < 0) {
        PyErr_Clear();
        buf->data = NULL;
        buf->len = 0;
        buf->cap = 0;
        buf->owner = NULL;
        return -1;
    }
    buf->data = PyBytes_AS_STRING(bytes);
    bw_advise_huge_pages(buf->data + buf->cap, cap - buf->cap); /* the part not touched yet */
    buf->cap = cap;
    buf->owner = bytes;
    return 0;
}

void bw_out_bytes_begin(bw_buf *buf) {
    buf->len = 0;
    buf->regrow = grow_output;
}

/* Leaves buf empty, without memory, as bw_buf_init expects it. */
static void forget_owner(bw_buf *buf) {
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    buf->owner = NULL;
}

PyObject *bw_out_bytes_finish(bw_buf *buf) {
    buf->regrow = NULL;
    if (buf->owner == NULL) {
        if (buf->data == NULL) /* a failed growth lost the output */
            return PyErr_NoMemory();
        return PyBytes_FromStringAndSize(buf->data, (Py_ssize_t)buf->len);
    }
    PyObject *bytes = buf->owner;
    Py_ssize_t len = (Py_ssize_t)buf->len;
    forget_owner(buf);
    /* shrinking gives the unused tail back without touching it */
    if (_PyBytes_Resize(&bytes, len) < 0)
        return NULL;
    return bytes;
}

void bw_out_bytes_abandon(bw_buf *buf) {
    buf->regrow = NULL;
    if (buf->owner != NULL) {
        Py_DECREF((PyObject *)buf->owner);
        forget_owner(buf);
    }
}
