/* Helpers the vector encode and decode paths share (declared in py_vector_codec.h). */
#include "py_vector_codec.h"

/* The many-row calls report which row failed, as the driver's loops do, by rewriting the
   row's own message rather than wrapping the exception: callers (and the tests that compare
   with the Scylla driver) match on the exception's type and text. */
void bw_vec_prefix_row(Py_ssize_t row, int any_conversion_error) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == PyExc_ValueError ||
        (any_conversion_error && (type == PyExc_TypeError || type == PyExc_OverflowError))) {
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *msg = value ? PyObject_Str(value) : NULL; /* new reference */
        if (msg != NULL) {
            PyErr_Format(type, "row %zd: %U", row, msg);
            Py_DECREF(msg);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return;
        }
        PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
}
