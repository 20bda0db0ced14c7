/* The map from a C failure to bulkwire's exception classes: see py_errors.h. */
#include "py_errors.h"

#include "py_state.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>


/* The names in bulkwire.errors of the kinds whose class lives there (NULL: made here). */
static const char *const error_names[BW_ERROR_KINDS] = {
    [BW_ERROR_ROW] = "RowError",
    [BW_ERROR_MALFORMED] = "MalformedFileError",
    [BW_ERROR_TLS_FILE] = "TLSFileError",
    [BW_ERROR_TLS] = NULL,
    [BW_ERROR_SCHEMA_MISMATCH] = "SchemaMismatchError",
    [BW_ERROR_CQL_SERVER] = "CqlServerError",
    [BW_ERROR_CONNECT] = "ConnectError",
    [BW_ERROR_TLS_SESSION] = "TLSError",
    [BW_ERROR_CONNECTION_LOST] = "ConnectionLostError",
    [BW_ERROR_TIMEOUT] = "TransportTimeoutError",
    [BW_ERROR_PROTOCOL] = "ProtocolError",
};

/* Borrowed reference: the class of kind in the state of this interpreter's module, or NULL
   with RuntimeError set (the module is not made yet, or already torn down). */
static PyObject *error_class(bw_error_kind kind) {
    bw_module_state *state = bw_state();
    if (state == NULL)
        return NULL;
    PyObject *cls = state->errors.classes[kind];
    if (cls == NULL)
        PyErr_SetString(PyExc_RuntimeError, "bulkwire._core's exception classes are torn down");
    return cls;
}

/* Raises cls(*args, **kwargs) (all borrowed; kwargs may be NULL), each item of attrs (a
   dict, or NULL) set on the exception. Always NULL. */
static PyObject *raise_call(PyObject *cls, PyObject *args, PyObject *kwargs, PyObject *attrs) {
    PyObject *exc = PyObject_Call(cls, args, kwargs); /* new reference */
    if (exc == NULL)
        return NULL;
    if (attrs != NULL) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(attrs, &pos, &key, &value))
            if (PyObject_SetAttr(exc, key, value) < 0)
                goto cleanup;
    }
    PyErr_SetObject(cls, exc);
cleanup:
    Py_DECREF(exc);
    return NULL;
}

PyObject *bw_raise(bw_error_kind kind, PyObject *args, PyObject *attrs) {
    PyObject *cls = error_class(kind);
    return cls != NULL ? raise_call(cls, args, NULL, attrs) : NULL;
}

/* Raises cls(message, **kwargs) (cls, kwargs and attrs borrowed; cls NULL: error_class's
   exception stands), each item of attrs set on the exception. Always NULL. */
static PyObject *raise_class(PyObject *cls, const char *message, PyObject *kwargs,
                             PyObject *attrs) {
    if (cls == NULL)
        return NULL;
    PyObject *text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    if (text == NULL)
        return NULL;
    PyObject *args = PyTuple_Pack(1, text); /* new reference */
    Py_DECREF(text);
    if (args == NULL)
        return NULL;
    raise_call(cls, args, kwargs, attrs);
    Py_DECREF(args);
    return NULL;
}

PyObject *bw_raise_status_with(const bw_status *st, PyObject *kwargs, PyObject *attrs) {
    PyObject *cls;
    switch (st->kind) {
    case BW_STATUS_NO_MEMORY: return PyErr_NoMemory();
    case BW_STATUS_OS:
        if (st->message[0] == '\0') {
            errno = st->sys_errno;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        cls = PyExc_OSError;
        break;
    case BW_STATUS_TIMED_OUT: cls = PyExc_TimeoutError; break;
    case BW_STATUS_FAILED:
    case BW_STATUS_INHERITED: cls = PyExc_RuntimeError; break;
    case BW_STATUS_INVALID: cls = PyExc_ValueError; break;
    case BW_STATUS_MALFORMED: cls = error_class(BW_ERROR_MALFORMED); break;
    case BW_STATUS_TLS:
        cls = error_class(BW_ERROR_TLS);
        if (attrs == NULL) { /* its verify_failed attribute, from the flag */
            PyObject *verify = Py_BuildValue(
                "{sO}", "verify_failed",
                (st->flags & BW_STATUS_VERIFY_FAILED) ? Py_True : Py_False); /* new */
            if (verify == NULL)
                return NULL;
            raise_class(cls, st->message, kwargs, verify);
            Py_DECREF(verify);
            return NULL;
        }
        break;
    case BW_STATUS_CONNECT: cls = error_class(BW_ERROR_CONNECT); break;
    case BW_STATUS_TLS_SESSION: cls = error_class(BW_ERROR_TLS_SESSION); break;
    case BW_STATUS_CONNECTION_LOST: cls = error_class(BW_ERROR_CONNECTION_LOST); break;
    case BW_STATUS_TIMEOUT: cls = error_class(BW_ERROR_TIMEOUT); break;
    case BW_STATUS_PROTOCOL: cls = error_class(BW_ERROR_PROTOCOL); break;
    case BW_STATUS_SERVER: cls = error_class(BW_ERROR_CQL_SERVER); break;
    default:
        PyErr_Format(PyExc_SystemError, "no exception for a status of kind %s: %s",
                     bw_status_kind_name(st->kind), st->message);
        return NULL;
    }
    return raise_class(cls, st->message, kwargs, attrs);
}

PyObject *bw_raise_status(const bw_status *st) {
    return bw_raise_status_with(st, NULL, NULL);
}

PyObject *bw_raise_format(bw_error_kind kind, const char *format, ...) {
    va_list vargs;
    va_start(vargs, format);
    PyObject *message = PyUnicode_FromFormatV(format, vargs); /* new reference */
    va_end(vargs);
    if (message == NULL)
        return NULL;
    PyObject *args = PyTuple_Pack(1, message);
    Py_DECREF(message);
    if (args == NULL)
        return NULL;
    bw_raise(kind, args, NULL);
    Py_DECREF(args);
    return NULL;
}

/* New reference: _core.TlsError, an OSError (what the socket layer raises) that is also a
   bulkwire.errors.BulkwireError (root, borrowed). */
static PyObject *make_tls_error(PyObject *root) {
    PyObject *bases = PyTuple_Pack(2, PyExc_OSError, root);
    if (bases == NULL)
        return NULL;
    PyObject *cls = PyErr_NewExceptionWithDoc(
        "bulkwire._core.TlsError",
        "TLS failed: the handshake (verify_failed: the server's certificate did not verify), "
        "or an alert from the server (e.g. it refused the client certificate).",
        bases, NULL);
    Py_DECREF(bases);
    return cls;
}

int bw_errors_add_to_module(PyObject *module, bw_errors_state *state) {
    int rc = -1;
    PyObject *errors = PyImport_ImportModule("bulkwire.errors"); /* new reference */
    if (errors == NULL)
        return -1;
    PyObject *root = PyObject_GetAttrString(errors, "BulkwireError"); /* new reference */
    if (root == NULL)
        goto cleanup;
    for (int kind = 0; kind < BW_ERROR_KINDS; kind++) {
        Py_CLEAR(state->classes[kind]);
        state->classes[kind] = error_names[kind] != NULL
                                   ? PyObject_GetAttrString(errors, error_names[kind])
                                   : make_tls_error(root);
        if (state->classes[kind] == NULL)
            goto cleanup;
    }
    if (PyModule_AddObjectRef(module, "TlsError", state->classes[BW_ERROR_TLS]) < 0)
        goto cleanup;
    rc = 0;
cleanup:
    Py_XDECREF(root);
    Py_DECREF(errors);
    return rc;
}

/* _testing.raise_status(kind, message, errno=0, verify_failed=False): raises what
   bw_raise_status raises for a status of kind (its name, bw_status_kind_name's words).
   Always NULL. */
static PyObject *testing_raise_status(PyObject *self, PyObject *args) {
    (void)self;
    const char *name, *message;
    int sys_errno = 0, verify_failed = 0;
    if (!PyArg_ParseTuple(args, "ss|ip:raise_status", &name, &message, &sys_errno,
                          &verify_failed))
        return NULL;
    for (int kind = 0; kind <= BW_STATUS_KINDS; kind++) {
        if (strcmp(name, bw_status_kind_name((bw_status_kind)kind)) != 0)
            continue;
        bw_status st;
        bw_status_set(&st, (bw_status_kind)kind, sys_errno, "%s", message);
        if (verify_failed)
            st.flags |= BW_STATUS_VERIFY_FAILED;
        return bw_raise_status(&st);
    }
    return PyErr_Format(PyExc_ValueError, "no status kind named %s", name);
}

static PyMethodDef testing_methods[] = {
    {"raise_status", testing_raise_status, METH_VARARGS,
     "raise_status(kind, message, errno=0, verify_failed=False): the exception of a core "
     "status of that kind."},
    {NULL, NULL, 0, NULL},
};

int bw_errors_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, testing_methods);
}
