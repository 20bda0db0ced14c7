/* The one place the binding maps a failure of the C code to a Python exception class of
   bulkwire's (binding layer; knows Python). The classes are looked up once, when the module
   is executed, and kept in its state; every C file that raises a bulkwire error goes through
   bw_raise or bw_raise_status. */
#ifndef BW_PY_ERRORS_H
#define BW_PY_ERRORS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "status.h"

/* What failed, each kind one class:
   BW_ERROR_ROW        bulkwire.errors.RowError(column, row, reason): a row of a batch
   BW_ERROR_MALFORMED  bulkwire.errors.MalformedFileError(message): a file's or a batch's data
                       that is inconsistent (the caller names the file)
   BW_ERROR_TLS_FILE   bulkwire.errors.TLSFileError(message): a certificate, key or CA file
   BW_ERROR_TLS        bulkwire._core.TlsError(message): a TLS session failed; an OSError and
                       a bulkwire.errors.BulkwireError (bulkwire.transport maps it to TLSError)
   BW_ERROR_SCHEMA_MISMATCH  bulkwire.errors.SchemaMismatchError(message, column, arrow_type,
                       cql_type): an Arrow column that cannot be bound to its CQL column
   BW_ERROR_CQL_SERVER bulkwire.errors.CqlServerError(message, code=, server_message=, name=):
                       a CQL node's ERROR answer
   BW_ERROR_CONNECT, BW_ERROR_TLS_SESSION, BW_ERROR_CONNECTION_LOST, BW_ERROR_TIMEOUT,
   BW_ERROR_PROTOCOL   bulkwire.errors.ConnectError, TLSError, ConnectionLostError,
                       TransportTimeoutError, ProtocolError (message): a connection's failures */
typedef enum {
    BW_ERROR_ROW,
    BW_ERROR_MALFORMED,
    BW_ERROR_TLS_FILE,
    BW_ERROR_TLS,
    BW_ERROR_SCHEMA_MISMATCH,
    BW_ERROR_CQL_SERVER,
    BW_ERROR_CONNECT,
    BW_ERROR_TLS_SESSION,
    BW_ERROR_CONNECTION_LOST,
    BW_ERROR_TIMEOUT,
    BW_ERROR_PROTOCOL,
    BW_ERROR_KINDS
} bw_error_kind;

/* Raises kind(*args) with each item of attrs (a dict, or NULL) set as an attribute of the
   exception. args and attrs are borrowed. Always NULL, with the exception set (the
   failure's own, e.g. MemoryError, when the exception could not be made). */
PyObject *bw_raise(bw_error_kind kind, PyObject *args, PyObject *attrs);

/* Raises kind(message) for a kind that takes the message alone, the message made as
   PyUnicode_FromFormat makes it. Always NULL. */
PyObject *bw_raise_format(bw_error_kind kind, const char *format, ...);

/* Raises the exception of a failed status of the core (status.h; the one place a status
   kind becomes an exception class): MemoryError, OSError (the errno's own words and
   subclass when the message is empty), TimeoutError, RuntimeError, ValueError, or the
   bulkwire class of the kind, with the message. Always NULL. */
PyObject *bw_raise_status(const bw_status *st);

/* bw_raise_status with keyword arguments for the class (kwargs, a dict or NULL) and
   attributes set on the exception (attrs, a dict or NULL), both borrowed; they apply to the
   kinds raised as a class of their own (not MemoryError, nor OSError from an errno). */
PyObject *bw_raise_status_with(const bw_status *st, PyObject *kwargs, PyObject *attrs);

/* The exception classes by kind: strong references, kept in the module's state
   (py_state.h). */
typedef struct {
    PyObject *classes[BW_ERROR_KINDS];
} bw_errors_state;

/* Imports bulkwire.errors and keeps its classes in state; makes TlsError and adds it to
   module. Call it first (after bw_state_register): every other part may raise through
   bw_raise. 0, or -1 with an exception set. */
int bw_errors_add_to_module(PyObject *module, bw_errors_state *state);

/* Adds the test hook raise_status (bw_raise_status of a status made in Python) to the
   _testing module. 0, or -1 with an exception set. */
int bw_errors_add_test_hooks(PyObject *testing);
#endif
