/* TlsContext(certificate=None, key=None, ca=None, verify=True) and its connections: TLS
   sessions of bulkwire's own, on sockets Python connected, driven by the core (tls_send.c)
   with the GIL released. Python's ssl module cannot serve the body pump: its SSL objects are
   private to it, and it may be linked with another OpenSSL than this module. */
#include "py_tls.h"

#include "py_errors.h"
#include "py_fork_origin.h"
#include "py_guard.h"
#include "py_state.h"
#include "socket_send.h"

#include <errno.h>

int bw_parse_timeout_ms(PyObject *obj, long *ms) {
    if (obj == Py_None) {
        *ms = -1;
        return 0;
    }
    double seconds = PyFloat_AsDouble(obj);
    if (seconds == -1.0 && PyErr_Occurred())
        return -1;
    if (!(seconds > 0) || seconds > 1e7) {
        PyErr_SetString(PyExc_ValueError, "timeout must be a positive number of seconds or None");
        return -1;
    }
    *ms = (long)(seconds * 1000.0 + 0.999);
    return 0;
}

#ifdef BW_HAVE_OPENSSL

typedef struct {
    PyObject_HEAD
    bw_tls_config *config;
} TlsContextObject;

typedef struct {
    PyObject_HEAD
    bw_tls *tls;
    PyObject *context;   /* keeps the configuration alive */
    long timeout_ms;     /* < 0: none */
    bw_guard guard;      /* busy: a call runs with the GIL released, or the pump holds it */
    int close_requested; /* close() came while busy: done when the user lets go */
} TlsConnectionObject;


/* Raises TlsError(message) with its verify_failed attribute. Returns NULL. */
static PyObject *raise_tls_error(const char *message, int verify_failed) {
    bw_status st;
    bw_status_set(&st, BW_STATUS_TLS, 0, "%s", message);
    if (verify_failed)
        st.flags |= BW_STATUS_VERIFY_FAILED;
    return bw_raise_status(&st);
}

/* Sets the exception for a core result rc on tls (not 0, not EINTR): the session's failure,
   or the socket's errno. Returns NULL. */
static PyObject *raise_for(bw_tls *tls, int rc) {
    if (rc == BW_TLS_FAILED)
        return raise_tls_error(bw_tls_message(tls), bw_tls_verify_failed(tls));
    bw_status st;
    bw_status_from_errno(&st, rc);
    return bw_raise_status(&st);
}

PyObject *bw_tls_set_error(PyObject *obj, int rc) {
    return raise_for(((TlsConnectionObject *)obj)->tls, rc);
}

/* One of the core's calls, made resumable by this signature. */
typedef int (*tls_call)(bw_tls *tls, void *arg, long timeout_ms);

static int call_handshake(bw_tls *tls, void *arg, long timeout_ms) {
    (void)arg;
    return bw_tls_handshake(tls, timeout_ms);
}

typedef struct {
    struct iovec iov;
    int watch;
    int answered; /* watching, the server answered before the end (the rest unsent) */
} write_args;

static int call_write(bw_tls *tls, void *arg, long timeout_ms) {
    write_args *w = arg;
    int rc = bw_tls_write_all(tls, &w->iov, 1, timeout_ms, w->watch);
    if (rc != BW_SEND_ANSWERED)
        return rc;
    w->answered = 1;
    return 0;
}

typedef struct {
    void *buf;
    size_t len;
    size_t got;
} read_args;

static int call_read(bw_tls *tls, void *arg, long timeout_ms) {
    read_args *r = arg;
    return bw_tls_read(tls, r->buf, r->len, timeout_ms, &r->got);
}

/* Runs call with the GIL released; a wait interrupted by a signal runs the Python handlers
   (Ctrl-C raises here) and goes on. 0 done, or -1 with an exception set. */
static int run_call(TlsConnectionObject *self, tls_call call, void *arg) {
    for (;;) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = call(self->tls, arg, self->timeout_ms);
        Py_END_ALLOW_THREADS
        if (rc == 0)
            return 0;
        if (rc != EINTR) {
            raise_for(self->tls, rc);
            return -1;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

static void connection_close_now(TlsConnectionObject *self) {
    bw_tls *tls = self->tls;
    self->tls = NULL;
    if (tls != NULL) {
        Py_BEGIN_ALLOW_THREADS
        bw_tls_free(tls);
        Py_END_ALLOW_THREADS
    }
}

static const bw_guard_words connection_words = {
    .closed = "the TLS connection is closed",
    .what = "this TLS connection",
    .owned = "its session and the connection under it",
    .in_use = "the TLS connection is in use by another thread",
};

/* Marks the connection in use. 0, or -1 with an exception set. */
static int connection_enter(TlsConnectionObject *self) {
    return bw_guard_enter(&self->guard, &connection_words, self->tls == NULL,
                          self->tls != NULL && bw_tls_inherited(self->tls));
}

static void connection_leave(TlsConnectionObject *self) {
    bw_guard_leave(&self->guard);
    if (self->close_requested)
        connection_close_now(self);
}

bw_tls *bw_tls_connection_acquire(PyObject *obj) {
    PyTypeObject *connection_type = bw_state_type(BW_TYPE_TLS_CONNECTION); /* borrowed */
    if (connection_type == NULL)
        return NULL;
    if (!Py_IS_TYPE(obj, connection_type)) {
        PyErr_Format(PyExc_TypeError, "tls must be a TlsConnection or None, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    TlsConnectionObject *self = (TlsConnectionObject *)obj;
    if (connection_enter(self) < 0)
        return NULL;
    return self->tls;
}

void bw_tls_connection_release(PyObject *obj) { connection_leave((TlsConnectionObject *)obj); }

/* sendall(data, watch=False) -> bool. New reference. Every byte, with the GIL released;
   watch: unless the server answers while the write waits for room. True when it did (the
   rest of data unsent), else False. */
static PyObject *TlsConnection_sendall(TlsConnectionObject *self, PyObject *args) {
    Py_buffer view;
    int watch = 0;
    if (!PyArg_ParseTuple(args, "y*|p:sendall", &view, &watch))
        return NULL;
    PyObject *result = NULL;
    if (connection_enter(self) < 0)
        goto cleanup;
    write_args w = {{view.buf, (size_t)view.len}, watch, 0};
    int failed = run_call(self, call_write, &w);
    connection_leave(self);
    if (!failed)
        result = PyBool_FromLong(w.answered);
cleanup:
    PyBuffer_Release(&view);
    return result;
}

/* recv_into(buffer, nbytes=0) -> int. New reference. 0: the server ended the connection. */
static PyObject *TlsConnection_recv_into(TlsConnectionObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t nbytes = 0;
    if (!PyArg_ParseTuple(args, "w*|n:recv_into", &view, &nbytes))
        return NULL;
    PyObject *result = NULL;
    if (nbytes < 0 || nbytes > view.len) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be between 0 and the buffer's length");
        goto cleanup;
    }
    if (connection_enter(self) < 0)
        goto cleanup;
    read_args r = {view.buf, (size_t)(nbytes > 0 ? nbytes : view.len), 0};
    int failed = r.len > 0 ? run_call(self, call_read, &r) : 0;
    connection_leave(self);
    if (!failed)
        result = PyLong_FromSize_t(r.got);
cleanup:
    PyBuffer_Release(&view);
    return result;
}

/* answered() -> bool. New reference. */
static PyObject *TlsConnection_answered(TlsConnectionObject *self, PyObject *unused) {
    (void)unused;
    if (connection_enter(self) < 0)
        return NULL;
    int answered = bw_tls_peer_answered(self->tls);
    connection_leave(self);
    return PyBool_FromLong(answered);
}

/* close() -> None. New reference. */
static PyObject *TlsConnection_close(TlsConnectionObject *self, PyObject *unused) {
    (void)unused;
    if (self->guard.busy)
        self->close_requested = 1;
    else
        connection_close_now(self);
    Py_RETURN_NONE;
}

/* New reference. */
static PyObject *TlsConnection_get_timeout(TlsConnectionObject *self, void *closure) {
    (void)closure;
    if (self->timeout_ms < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble((double)self->timeout_ms / 1000.0);
}

static int TlsConnection_set_timeout(TlsConnectionObject *self, PyObject *value, void *closure) {
    (void)closure;
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "timeout cannot be deleted");
        return -1;
    }
    return bw_parse_timeout_ms(value, &self->timeout_ms);
}

/* New reference. */
static PyObject *TlsConnection_get_closed(TlsConnectionObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->tls == NULL);
}

static void TlsConnection_dealloc(TlsConnectionObject *self) {
    PyObject_GC_UnTrack(self);
    connection_close_now(self);
    Py_XDECREF(self->context);
    bw_heap_free((PyObject *)self);
}

/* The references it holds: its type and its TlsContext (which does not refer back). */
static int TlsConnection_traverse(TlsConnectionObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->context);
    return 0;
}

static PyMethodDef TlsConnection_methods[] = {
    {"sendall", (PyCFunction)TlsConnection_sendall, METH_VARARGS,
     "sendall(data, watch=False) -> bool\n\nEncrypt and send every byte of data, with the GIL "
     "released; with watch, unless the server answers while the write waits for room. True "
     "when it did (the rest unsent), else False."},
    {"recv_into", (PyCFunction)TlsConnection_recv_into, METH_VARARGS,
     "recv_into(buffer, nbytes=0) -> int\n\nRead at most nbytes (0: the buffer's length) into "
     "buffer; 0 when the server ended the connection."},
    {"answered", (PyCFunction)TlsConnection_answered, METH_NOARGS,
     "answered() -> bool\n\nWhether the server already sent something other than TLS records "
     "of its own (an answer, an alert, the end), without waiting or consuming it."},
    {"close", (PyCFunction)TlsConnection_close, METH_NOARGS,
     "close() -> None\n\nEnd the session (the socket stays open: its owner closes it). In a "
     "forked child of the process that made it, only the child's copy is dropped: nothing is "
     "sent."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef TlsConnection_getset[] = {
    {"timeout", (getter)TlsConnection_get_timeout, (setter)TlsConnection_set_timeout,
     "Seconds any wait may last, or None.", NULL},
    {"closed", (getter)TlsConnection_get_closed, NULL, "close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot TlsConnection_slots[] = {
    {Py_tp_doc, "A TLS session on a connected socket, made by TlsContext.connect."},
    {Py_tp_dealloc, TlsConnection_dealloc},
    {Py_tp_traverse, TlsConnection_traverse},
    {Py_tp_methods, TlsConnection_methods},
    {Py_tp_getset, TlsConnection_getset},
    {0, NULL},
};

/* Made by TlsContext.connect only: the type cannot be called. */
static PyType_Spec TlsConnection_spec = {
    .name = "bulkwire._core.TlsConnection",
    .basicsize = sizeof(TlsConnectionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = TlsConnection_slots,
};

/* Raises TLSFileError("<argument>=<path!r>: <message>") (a ValueError) for a file that
   cannot be used, with the attributes argument ("certificate", "key" or "ca"), path (as
   given) and reason (message). Returns NULL. */
static PyObject *raise_file_error(bw_tls_arg bad, PyObject *path, const char *message) {
    static const char *names[] = {"", "certificate", "key", "ca"};
    PyObject *args = Py_BuildValue("(N)", PyUnicode_FromFormat("%s=%R: %s", names[bad], path,
                                                               message));
    PyObject *attrs = Py_BuildValue("{sssOss}", "argument", names[bad], "path", path, "reason",
                                    message);
    if (args != NULL && attrs != NULL)
        bw_raise(BW_ERROR_TLS_FILE, args, attrs);
    Py_XDECREF(args);
    Py_XDECREF(attrs);
    return NULL;
}

/* New reference. */
static PyObject *TlsContext_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"certificate", "key", "ca", "verify", NULL};
    PyObject *cert_obj = Py_None, *key_obj = Py_None, *ca_obj = Py_None;
    int verify = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOp:TlsContext", keywords, &cert_obj,
                                     &key_obj, &ca_obj, &verify))
        return NULL;
    PyObject *paths[3] = {NULL, NULL, NULL};
    PyObject *given[3] = {cert_obj, key_obj, ca_obj};
    TlsContextObject *self = NULL;
    for (int i = 0; i < 3; i++) {
        if (given[i] != Py_None && !PyUnicode_FSConverter(given[i], &paths[i]))
            goto cleanup;
    }
    if (paths[1] != NULL && paths[0] == NULL) {
        PyErr_SetString(PyExc_ValueError, "key needs certificate");
        goto cleanup;
    }
    const char *files[3];
    for (int i = 0; i < 3; i++)
        files[i] = paths[i] != NULL ? PyBytes_AS_STRING(paths[i]) : NULL;
    bw_tls_arg bad = BW_TLS_ARG_NONE;
    char message[BW_TLS_MESSAGE_MAX];
    bw_tls_config *config;
    Py_BEGIN_ALLOW_THREADS /* reading files */
    config = bw_tls_config_new(files[0], files[1], files[2], verify, &bad, message);
    Py_END_ALLOW_THREADS
    if (config == NULL) {
        if (bad == BW_TLS_ARG_NONE)
            raise_tls_error(message, 0);
        else
            raise_file_error(bad, given[bad - 1], message);
        goto cleanup;
    }
    self = (TlsContextObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        bw_tls_config_free(config);
        goto cleanup;
    }
    self->config = config;
cleanup:
    for (int i = 0; i < 3; i++)
        Py_XDECREF(paths[i]);
    return (PyObject *)self;
}

/* connect(fd, server_hostname, timeout=None) -> TlsConnection. New reference. The handshake
   on the connected socket fd (made non-blocking), with the GIL released; Ctrl-C raises. */
static PyObject *TlsContext_connect(TlsContextObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"fd", "server_hostname", "timeout", NULL};
    int fd;
    const char *host;
    PyObject *timeout_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "is|O:connect", keywords, &fd, &host,
                                     &timeout_obj))
        return NULL;
    if (fd < 0) {
        PyErr_Format(PyExc_ValueError, "fd must be an open socket's descriptor, not %d", fd);
        return NULL;
    }
    long timeout_ms;
    if (bw_parse_timeout_ms(timeout_obj, &timeout_ms) < 0)
        return NULL;
    if (bw_tls_config_inherited(self->config))
        return bw_raise_inherited("this TlsContext", "its OpenSSL context and its locks");
    PyTypeObject *connection_type = bw_state_type(BW_TYPE_TLS_CONNECTION); /* borrowed */
    if (connection_type == NULL)
        return NULL;
    TlsConnectionObject *conn =
        (TlsConnectionObject *)connection_type->tp_alloc(connection_type, 0);
    if (conn == NULL)
        return NULL;
    conn->tls = NULL;
    conn->context = Py_NewRef((PyObject *)self);
    conn->timeout_ms = timeout_ms;
    conn->guard = (bw_guard){0};
    conn->close_requested = 0;
    char message[BW_TLS_MESSAGE_MAX];
    conn->tls = bw_tls_new(self->config, fd, host, message);
    if (conn->tls == NULL) {
        Py_DECREF(conn);
        return raise_tls_error(message, 0);
    }
    conn->guard.busy = 1; /* new: nothing else can hold it yet */
    int failed = run_call(conn, call_handshake, NULL);
    connection_leave(conn);
    if (failed) {
        Py_DECREF(conn);
        return NULL;
    }
    return (PyObject *)conn;
}

bw_tls_config *bw_tls_context_config(PyObject *obj) {
    PyTypeObject *context_type = bw_state_type(BW_TYPE_TLS_CONTEXT); /* borrowed */
    if (context_type == NULL)
        return NULL;
    if (!PyObject_TypeCheck(obj, context_type)) {
        PyErr_Format(PyExc_TypeError, "tls must be a bulkwire._core.TlsContext, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    bw_tls_config *config = ((TlsContextObject *)obj)->config;
    if (bw_tls_config_inherited(config)) {
        bw_raise_inherited("this TlsContext", "its OpenSSL context and its locks");
        return NULL;
    }
    return config;
}

static void TlsContext_dealloc(TlsContextObject *self) {
    PyObject_GC_UnTrack(self);
    bw_tls_config_free(self->config);
    bw_heap_free((PyObject *)self);
}

static PyMethodDef TlsContext_methods[] = {
    {"connect", (PyCFunction)(void (*)(void))TlsContext_connect, METH_VARARGS | METH_KEYWORDS,
     "connect(fd, server_hostname, timeout=None) -> TlsConnection\n\nThe TLS handshake on the "
     "connected socket fd, with the GIL released; the server's certificate is checked against "
     "server_hostname when verifying. Raises TlsError, TimeoutError or OSError."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot TlsContext_slots[] = {
    {Py_tp_doc, "TlsContext(certificate=None, key=None, ca=None, verify=True)\n\nThe client "
                "side of TLS through the linked OpenSSL: certificate (PEM: the certificate and "
                "its chain, and the key when key is None), ca (a PEM bundle; None: the "
                "system's CAs), verify=False skips verifying the server. ValueError names the "
                "argument and file that could not be used."},
    {Py_tp_new, TlsContext_new},
    {Py_tp_dealloc, TlsContext_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, TlsContext_methods},
    {0, NULL},
};

static PyType_Spec TlsContext_spec = {
    .name = "bulkwire._core.TlsContext",
    .basicsize = sizeof(TlsContextObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = TlsContext_slots,
};

static int add_types(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_TLS_CONTEXT, &TlsContext_spec) < 0 ||
        bw_state_add_type(module, BW_TYPE_TLS_CONNECTION, &TlsConnection_spec) < 0)
        return -1;
    return PyModule_AddStringConstant(module, "TLS_LIBRARY", bw_tls_library());
}

#else /* without OpenSSL */

bw_tls *bw_tls_connection_acquire(PyObject *obj) {
    (void)obj;
    PyErr_SetString(PyExc_ValueError, "bulkwire was built without OpenSSL: no TLS in the pump");
    return NULL;
}

void bw_tls_connection_release(PyObject *obj) { (void)obj; }

PyObject *bw_tls_set_error(PyObject *obj, int rc) {
    (void)obj;
    bw_status st;
    bw_status_set(&st, BW_STATUS_OS, rc, "%s", "");
    return bw_raise_status(&st);
}

static int add_types(PyObject *module) { return PyModule_AddObjectRef(module, "TLS_LIBRARY", Py_None); }

bw_tls_config *bw_tls_context_config(PyObject *obj) {
    (void)obj;
    PyErr_SetString(PyExc_RuntimeError, "bulkwire was built without OpenSSL: no TLS of its own");
    return NULL;
}

#endif

/* TlsError is made with the other error classes (py_errors.c). */
int bw_tls_add_to_module(PyObject *module) { return add_types(module); }
