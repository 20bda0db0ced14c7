/* TlsContext and TlsConnection: the binding of the core's TLS (tls_send.c), bulkwire's own
   TLS client, whose sessions the body pump writes to with the GIL released. */
#ifndef BW_PY_TLS_H
#define BW_PY_TLS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tls_send.h"

/* For the pump: the session of the TlsConnection obj, marked in use (a second user is
   refused: RuntimeError). NULL with an exception set (not a TlsConnection, closed, in use,
   or built without OpenSSL). Call bw_tls_connection_release(obj) with the GIL after. */
bw_tls *bw_tls_connection_acquire(PyObject *obj);
void bw_tls_connection_release(PyObject *obj);

/* Sets the exception for rc, a result of the core's TLS calls on the session of obj
   (TimeoutError, TlsError, OSError); returns NULL. */
PyObject *bw_tls_set_error(PyObject *obj, int rc);

/* The configuration of the TlsContext obj, for a connection the core makes itself (the CQL
   connection). NULL with an exception set: TypeError when obj is not a TlsContext,
   RuntimeError when it was made by the process this one was forked from, or when built
   without OpenSSL. The TlsContext must be kept alive while the configuration is used. */
bw_tls_config *bw_tls_context_config(PyObject *obj);

/* timeout=: None or a positive number of seconds, as milliseconds (< 0: none). 0, or -1
   with an exception set. */
int bw_parse_timeout_ms(PyObject *obj, long *ms);

/* Adds TlsContext, TlsConnection, TlsError and TLS_LIBRARY (None when built without
   OpenSSL: then only TlsError and TLS_LIBRARY). 0, or -1 with an exception set. */
int bw_tls_add_to_module(PyObject *module);
#endif
