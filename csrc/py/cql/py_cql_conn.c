/* CqlConnection(host, port=9042, *, username=None, password=None, tls=None,
   connect_timeout=10.0, timeout=30.0, max_frame=0, throw_on_overload=False, cancel=None):
   one connection of the core's CQL engine.
   request(opcode, body) sends one request; run(opcode, bodies, ...) sends many through the
   pipeline. The GIL is released around the connect and every exchange; the bodies of a run
   are bytes objects held by the call, so no Python object is touched while it runs;
   run_packed(opcode, bodies, ends, rows=None, ...) sends bodies packed in one buffer (a row
   selection of them), with no Python object per body: its errors name a body by its index
   in `ends`, and its `sent` counts the selected bodies taken.
   Failures are bulkwire.errors exceptions: CqlServerError (the server's ERROR), ConnectError,
   TLSError, ConnectionLostError, TransportTimeoutError, ProtocolError; a run's carries `row`
   (the index of the body whose error stopped it, or None), `unacknowledged` (the sorted
   indexes of the bodies sent whose answers did not arrive) and `sent` (how many bodies, from
   the first, were taken: those not unacknowledged were acknowledged); an answer that is not a
   RESULT of the kind its request is answered with is a ProtocolError naming that body, which
   is unacknowledged. A signal handler that raises while any wait of the connection runs
   (Ctrl-C: the connect, the handshake, a request, a run) stops the call with its exception;
   the connection is then unusable (ConnectionLostError: interrupted).
   CqlCancel(): what another thread fires (cancel()) to end at once every wait of the
   connections given it (cancel=), those still being made included: each raises
   ConnectionLostError ("aborted"), and the connections are unusable afterwards. */
#include "py_cql_conn.h"

#include "cql_conn.h"
#include "cql_result.h"
#include "py_errors.h"
#include "py_fork_origin.h"
#include "py_guard.h"
#include "py_state.h"
#include "py_tls.h"

/* A call waiting for the server with the GIL released (`released` its thread's state):
   when a signal cuts a wait short, Python's handlers run. */
typedef struct {
    PyThreadState *released;
    int interrupted; /* a handler raised: its exception is set */
} signal_watch;

/* A wait was cut short by a signal: runs Python's signal handlers (taking the GIL for that
   moment). 1 when one raised (Ctrl-C: KeyboardInterrupt), which stops the call. The one
   interrupt check of every wait of a connection: connect, handshake, request, run. */
static int watch_interrupted(void *ctx) {
    signal_watch *w = ctx;
    PyEval_RestoreThread(w->released);
    int raised = PyErr_CheckSignals() < 0;
    w->released = PyEval_SaveThread();
    if (raised)
        w->interrupted = 1;
    return raised;
}

/* ---- CqlCancel ---- */

typedef struct {
    PyObject_HEAD
    bw_cancel cancel; /* open until closed and held by no open connection */
    bw_origin origin;
    int holders; /* open connections whose waits watch it (the GIL guards these fields) */
    int closing; /* close() was called: the pipe is closed once no connection holds it */
    int fired;
} CqlCancelObject;

/* tp_new: a new reference, or NULL (OSError when no pipe can be made). */
static PyObject *CqlCancel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":CqlCancel", keywords))
        return NULL;
    CqlCancelObject *self = (CqlCancelObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->cancel.fd[0] = self->cancel.fd[1] = -1;
    bw_origin_record(&self->origin);
    int err = bw_cancel_open(&self->cancel);
    if (err != 0) {
        Py_DECREF(self);
        bw_status st;
        bw_status_set(&st, BW_STATUS_OS, err, "%s", "");
        return bw_raise_status(&st);
    }
    return (PyObject *)self;
}

static void CqlCancel_dealloc(CqlCancelObject *self) {
    PyObject_GC_UnTrack(self);
    bw_cancel_close(&self->cancel); /* in a forked child: the child's own descriptors */
    bw_heap_free((PyObject *)self);
}

/* A connection no longer watches it: the last one closes a closing cancel's pipe. */
static void cancel_release(CqlCancelObject *self) {
    if (--self->holders == 0 && self->closing)
        bw_cancel_close(&self->cancel);
}

/* cancel(): None (a new reference). From any thread; idempotent. In a forked child nothing:
   the waits it would end are the parent's. */
static PyObject *CqlCancel_cancel(CqlCancelObject *self, PyObject *unused) {
    (void)unused;
    if (!bw_origin_inherited(&self->origin)) {
        bw_cancel_fire(&self->cancel); /* a closed pipe: nothing watches it any more */
        self->fired = 1;
    }
    Py_RETURN_NONE;
}

/* close(): None (a new reference). Idempotent; the pipe is closed now, or by the last open
   connection holding it when it closes. */
static PyObject *CqlCancel_close(CqlCancelObject *self, PyObject *unused) {
    (void)unused;
    self->closing = 1;
    if (self->holders == 0)
        bw_cancel_close(&self->cancel);
    Py_RETURN_NONE;
}

/* cancelled: bool (a new reference). */
static PyObject *CqlCancel_get_cancelled(CqlCancelObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->fired);
}

static PyMethodDef CqlCancel_methods[] = {
    {"cancel", (PyCFunction)CqlCancel_cancel, METH_NOARGS,
     "Ends at once every wait of the connections given this cancel, from any thread, those "
     "still being made included (ConnectionLostError: aborted), and every later one."},
    {"close", (PyCFunction)CqlCancel_close, METH_NOARGS,
     "Closes its pipe, at once or when the last open connection given it closes; no "
     "connection can be given it afterwards."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CqlCancel_getset[] = {
    {"cancelled", (getter)CqlCancel_get_cancelled, NULL, "whether cancel() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot CqlCancel_slots[] = {
    {Py_tp_doc, "CqlCancel(): given to CqlConnection(cancel=...), its cancel() ends every wait "
                "of those connections at once, from any thread, the connect included. close() "
                "closes its pipe once no open connection holds it."},
    {Py_tp_new, CqlCancel_new},
    {Py_tp_dealloc, CqlCancel_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, CqlCancel_methods},
    {Py_tp_getset, CqlCancel_getset},
    {0, NULL},
};

static PyType_Spec CqlCancel_spec = {
    .name = "bulkwire._core.CqlCancel",
    .basicsize = sizeof(CqlCancelObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = CqlCancel_slots,
};

/* ---- CqlConnection ---- */

typedef struct {
    PyObject_HEAD
    bw_cql_conn *conn;
    PyObject *tls;    /* the TlsContext whose configuration the connection uses, or NULL */
    PyObject *cancel; /* the CqlCancel its waits watch, or NULL: held while conn is open */
    bw_guard guard;   /* busy: a call runs with the GIL released */
    unsigned long long overloaded; /* requests re-sent after an Overloaded answer, in all */
} CqlConnectionObject;

/* Sets key in dict to a new reference `value` (consumed). 0 or -1. */
static int set_item(PyObject *dict, const char *key, PyObject *value) {
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* What the connection's guard says (py_guard.h). */
static const bw_guard_words connection_words = {
    .closed = "the CqlConnection is closed",
    .what = "this CqlConnection",
    .owned = "its socket and TLS session",
    .in_use = "the CqlConnection is in use by another call",
};

/* Raises the exception for *status, through the core's one status; with an outcome (a
   run), its rows too: the message names them, and the exception carries unacknowledged,
   failure (the message without the rows), sent and row. A server's error also carries its
   code, name and server_message (and the fields of the codes that have them). Returns
   NULL. */
static PyObject *raise_status(const bw_cql_status *status, bw_cql_outcome *outcome) {
    if (status->kind == BW_CQL_E_INHERITED) /* named as Python names it */
        return bw_raise_inherited(connection_words.what, connection_words.owned);
    bw_status st;
    bw_cql_status_get(status, &st);
    if (st.kind == BW_STATUS_NO_MEMORY)
        return bw_raise_status(&st);
    PyObject *kwargs = NULL, *attrs = NULL, *rows = NULL;
    size_t n = outcome != NULL ? outcome->unanswered_count : 0;
    if (n > 0)
        qsort(outcome->unanswered, n, sizeof *outcome->unanswered, compare_u64);
    if (outcome != NULL && (outcome->has_failed_tag || n > 0)) {
        if (outcome->has_failed_tag)
            bw_status_append(&st, " (row %llu; ", (unsigned long long)outcome->failed_tag);
        else
            bw_status_append(&st, " (");
        bw_status_append(&st, "%zu row(s) not acknowledged: ", n);
        for (size_t i = 0; i < n && i < 8; i++)
            bw_status_append(&st, "%s%llu", i ? ", " : "",
                             (unsigned long long)outcome->unanswered[i]);
        bw_status_append(&st, "%s)", n > 8 ? ", ..." : "");
    }
    attrs = PyDict_New();
    if (attrs == NULL)
        goto cleanup;
    if (status->kind == BW_CQL_E_SERVER) {
        const bw_cql_error *e = &status->error;
        kwargs = Py_BuildValue(
            "{s:i,s:s,s:s}", "code", (int)e->code, "server_message", e->message, "name",
            bw_cql_error_name(e->code));
        if (kwargs == NULL)
            goto cleanup;
        if (e->has_consistency &&
            (set_item(attrs, "consistency", PyLong_FromLong(e->consistency)) < 0 ||
             set_item(attrs, "required", PyLong_FromLong(e->required)) < 0 ||
             set_item(attrs, "alive", PyLong_FromLong(e->alive)) < 0 ||
             set_item(attrs, "received", PyLong_FromLong(e->received)) < 0 ||
             set_item(attrs, "blockfor", PyLong_FromLong(e->blockfor)) < 0))
            goto cleanup;
        if (e->has_write_type &&
            set_item(attrs, "write_type", PyUnicode_FromString(e->write_type)) < 0)
            goto cleanup;
    }
    rows = PyList_New((Py_ssize_t)n);
    if (rows == NULL)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(outcome->unanswered[i]);
        if (v == NULL)
            goto cleanup;
        PyList_SET_ITEM(rows, (Py_ssize_t)i, v);
    }
    /* `failure`: the message without the rows, for a caller that names them its own way */
    if (PyDict_SetItemString(attrs, "unacknowledged", rows) < 0 ||
        set_item(attrs, "failure", PyUnicode_FromString(status->message)) < 0 ||
        set_item(attrs, "sent", outcome != NULL ? PyLong_FromUnsignedLongLong(outcome->taken)
                                                : PyLong_FromLong(0)) < 0 ||
        set_item(attrs, "row", outcome != NULL && outcome->has_failed_tag
                                   ? PyLong_FromUnsignedLongLong(outcome->failed_tag)
                                   : Py_NewRef(Py_None)) < 0)
        goto cleanup;
    bw_raise_status_with(&st, kwargs, attrs);
cleanup:
    Py_XDECREF(rows);
    Py_XDECREF(attrs);
    Py_XDECREF(kwargs);
    return NULL;
}

/* Takes the connection for a call: 0, or -1 with an exception (closed, in use, inherited). */
static int enter(CqlConnectionObject *self) {
    return bw_guard_enter(&self->guard, &connection_words, self->conn == NULL,
                          self->conn != NULL && bw_cql_inherited(self->conn));
}

/* The connection no longer watches its cancel (none: nothing). */
static void release_cancel(CqlConnectionObject *self) {
    if (self->cancel != NULL)
        cancel_release((CqlCancelObject *)self->cancel);
    Py_CLEAR(self->cancel);
}

/* tp_new: a new reference, or NULL. */
static PyObject *CqlConnection_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"host", "port", "username", "password", "tls", "connect_timeout",
                               "timeout", "max_frame", "throw_on_overload", "cancel",
                               "local_port", "tablets_routing", NULL};
    const char *host;
    int port = 9042;
    const char *username = NULL, *password = NULL;
    PyObject *tls = Py_None, *connect_timeout = NULL, *timeout = NULL, *cancel = Py_None;
    unsigned long max_frame = 0;
    int throw_on_overload = 0, local_port = 0, tablets_routing = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|i$zzOOOkpOip:CqlConnection", keywords,
                                     &host, &port, &username, &password, &tls,
                                     &connect_timeout, &timeout, &max_frame,
                                     &throw_on_overload, &cancel, &local_port,
                                     &tablets_routing))
        return NULL;
    if (local_port < 0 || local_port > 65535) {
        PyErr_Format(PyExc_ValueError, "local_port must be 0..65535, not %d", local_port);
        return NULL;
    }
    PyTypeObject *cancel_type = bw_state_type(BW_TYPE_CQL_CANCEL); /* borrowed */
    if (cancel_type == NULL)
        return NULL;
    if (cancel != Py_None && !PyObject_TypeCheck(cancel, cancel_type)) {
        PyErr_Format(PyExc_TypeError, "cancel must be a CqlCancel or None, not %.100s",
                     Py_TYPE(cancel)->tp_name);
        return NULL;
    }
    /* a forked child's copy of a cancel would be fired by the parent, never by the child */
    if (cancel != Py_None && bw_check_origin(&((CqlCancelObject *)cancel)->origin,
                                             "this CqlCancel", "the waits it ends") < 0)
        return NULL;
    if (cancel != Py_None && ((CqlCancelObject *)cancel)->closing) {
        PyErr_SetString(PyExc_ValueError, "the CqlCancel is closed");
        return NULL;
    }
    if (port < 1 || port > 65535) {
        PyErr_Format(PyExc_ValueError, "port must be 1..65535, not %d", port);
        return NULL;
    }
    if ((username == NULL) != (password == NULL)) {
        PyErr_SetString(PyExc_ValueError, "username and password go together");
        return NULL;
    }
    if (max_frame > BW_CQL_MAX_BODY) {
        PyErr_Format(PyExc_ValueError, "max_frame must be at most %lu bytes",
                     (unsigned long)BW_CQL_MAX_BODY);
        return NULL;
    }
    bw_cql_options o;
    memset(&o, 0, sizeof o);
    o.host = host;
    o.port = port;
    o.username = username;
    o.password = password;
    o.max_frame = (uint32_t)max_frame;
    o.throw_on_overload = throw_on_overload;
    o.local_port = local_port;
    o.tablets_routing = tablets_routing;
    o.connect_timeout_ms = 10000;
    o.timeout_ms = 30000;
    if ((connect_timeout != NULL && bw_parse_timeout_ms(connect_timeout, &o.connect_timeout_ms) < 0) ||
        (timeout != NULL && bw_parse_timeout_ms(timeout, &o.timeout_ms) < 0))
        return NULL;
    if (tls != Py_None && (o.tls = bw_tls_context_config(tls)) == NULL)
        return NULL;
    if (cancel != Py_None)
        o.cancel = &((CqlCancelObject *)cancel)->cancel;
    CqlConnectionObject *self = (CqlConnectionObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->tls = tls != Py_None ? Py_NewRef(tls) : NULL;
    if (cancel != Py_None) {
        self->cancel = Py_NewRef(cancel);
        ((CqlCancelObject *)cancel)->holders++;
    }
    bw_cql_status status;
    bw_cql_conn *conn;
    signal_watch watch = {NULL, 0};
    o.interrupted = watch_interrupted;
    o.interrupt_ctx = &watch;
    watch.released = PyEval_SaveThread();
    conn = bw_cql_connect(&o, &status);
    PyEval_RestoreThread(watch.released);
    if (conn == NULL) {
        Py_DECREF(self);
        /* interrupted: the handler's exception (KeyboardInterrupt) stands */
        return watch.interrupted ? NULL : raise_status(&status, NULL);
    }
    self->conn = conn;
    return (PyObject *)self;
}

static void CqlConnection_dealloc(CqlConnectionObject *self) {
    PyObject_GC_UnTrack(self);
    bw_cql_close(self->conn); /* in a forked child: only its memory */
    Py_XDECREF(self->tls);
    release_cancel(self); /* unless close() did */
    bw_heap_free((PyObject *)self);
}

/* The references it holds: its type, its TlsContext and its CqlCancel (neither refers back
   to it, so there is nothing to clear). */
static int CqlConnection_traverse(CqlConnectionObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->tls);
    Py_VISIT(self->cancel);
    return 0;
}

/* request(opcode, body) -> (opcode, bytes): a new reference. */
static PyObject *CqlConnection_request(CqlConnectionObject *self, PyObject *args) {
    int opcode;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "iy*:request", &opcode, &body))
        return NULL;
    PyObject *result = NULL;
    if (opcode < 0 || opcode > 255) {
        PyErr_Format(PyExc_ValueError, "opcode must be 0..255, not %d", opcode);
        goto cleanup;
    }
    if (enter(self) < 0)
        goto cleanup;
    uint8_t answer_opcode = 0;
    uint8_t *answer = NULL;
    size_t answer_len = 0;
    bw_cql_status status;
    signal_watch watch = {NULL, 0};
    watch.released = PyEval_SaveThread();
    int rc = bw_cql_request_one(self->conn, (uint8_t)opcode, body.buf, (size_t)body.len,
                                &answer_opcode, &answer, &answer_len, watch_interrupted,
                                &watch, &status);
    PyEval_RestoreThread(watch.released);
    bw_guard_leave(&self->guard);
    if (rc < 0) {
        if (!watch.interrupted) /* else the handler's exception stands */
            raise_status(&status, NULL);
        goto cleanup;
    }
    result = Py_BuildValue("(iy#)", (int)answer_opcode, (const char *)answer,
                           (Py_ssize_t)answer_len);
    free(answer);
cleanup:
    PyBuffer_Release(&body);
    return result;
}

/* The bodies of a run, as the producer gives them. */
typedef struct {
    uint8_t opcode;
    PyObject *items; /* the bytes objects (a list or tuple the call holds) */
    Py_ssize_t count;
    Py_ssize_t next;
    const char **data; /* their memory, read with the GIL before the run */
    size_t *lens;
    const int32_t *tags; /* each body's tag (its row), or NULL: its index */
    int refused;         /* an answer was not an acknowledgement: `why` says what it was */
    char why[256];
    signal_watch watch;
} run_bodies;

/* A wait of the run was cut short by a signal (watch_interrupted). */
static int bodies_interrupted(void *ctx) {
    run_bodies *b = ctx;
    return watch_interrupted(&b->watch);
}

static int bodies_produce(void *ctx, bw_cql_request *request) {
    run_bodies *b = ctx;
    if (b->next == b->count)
        return 0;
    request->opcode = b->opcode;
    request->body = (const uint8_t *)b->data[b->next];
    request->len = b->lens[b->next];
    request->tag = b->tags != NULL ? (uint64_t)b->tags[b->next] : (uint64_t)b->next;
    b->next++;
    return 1;
}

/* The kind's name, for a message. */
static const char *result_kind_name(int32_t kind) {
    switch (kind) {
    case BW_CQL_RESULT_VOID: return "Void";
    case BW_CQL_RESULT_ROWS: return "Rows";
    case BW_CQL_RESULT_SET_KEYSPACE: return "Set_keyspace";
    case BW_CQL_RESULT_PREPARED: return "Prepared";
    default: return "Schema_change";
    }
}

/* An answer is an acknowledgement only as a RESULT whose body parses, of a kind the request
   is answered with: Void or Rows for EXECUTE and BATCH (an INSERT, or a conditional one),
   Prepared for PREPARE, any kind for another opcode. Anything else is refused (-1), with
   what it was in b->why (the first one's). */
static int bodies_consume(void *ctx, uint64_t tag, uint8_t opcode, const uint8_t *body,
                          size_t len) {
    (void)tag;
    run_bodies *b = ctx;
    char why[sizeof b->why];
    if (opcode != BW_CQL_OP_RESULT) {
        snprintf(why, sizeof why, "opcode 0x%02x, not RESULT", (unsigned)opcode);
    } else {
        bw_cql_result r;
        char err[128];
        if (bw_cql_result_parse(body, len, &r, err, sizeof err) < 0) {
            snprintf(why, sizeof why, "a RESULT body that does not parse (%zu bytes: %s)", len,
                     err);
        } else {
            int32_t kind = r.kind;
            bw_cql_result_free(&r);
            int execute = b->opcode == BW_CQL_OP_EXECUTE || b->opcode == BW_CQL_OP_BATCH;
            if (execute ? kind == BW_CQL_RESULT_VOID || kind == BW_CQL_RESULT_ROWS
                        : b->opcode != BW_CQL_OP_PREPARE || kind == BW_CQL_RESULT_PREPARED)
                return 0;
            snprintf(why, sizeof why, "a RESULT of kind %s, not %s", result_kind_name(kind),
                     execute ? "Void or Rows" : "Prepared");
        }
    }
    if (!b->refused) {
        b->refused = 1;
        memcpy(b->why, why, sizeof why);
    }
    return -1;
}

/* The run's options, judged: 0, or -1 with ValueError. */
static int check_run_options(int opcode, int window, int max_retries, double backoff,
                             double backoff_max) {
    if (opcode < 0 || opcode > 255) {
        PyErr_Format(PyExc_ValueError, "opcode must be 0..255, not %d", opcode);
        return -1;
    }
    if (window < 1 || window > BW_CQL_MAX_WINDOW) {
        PyErr_Format(PyExc_ValueError, "window must be 1..%d, not %d", BW_CQL_MAX_WINDOW, window);
        return -1;
    }
    if (max_retries < 0 || max_retries > BW_CQL_MAX_RETRIES || !(backoff >= 0 && backoff <= 3600) ||
        !(backoff_max >= backoff && backoff_max <= 3600)) {
        PyErr_Format(PyExc_ValueError, "max_retries must be 0..%d and 0 <= backoff <= "
                     "backoff_max <= 3600 seconds", BW_CQL_MAX_RETRIES);
        return -1;
    }
    return 0;
}

/* Sends b's bodies through the pipeline with the GIL released: (answered, retries), a new
   reference, or NULL with the run's exception. */
static PyObject *run_bodies_now(CqlConnectionObject *self, run_bodies *b, int window,
                                int max_retries, double backoff, double backoff_max) {
    if (enter(self) < 0)
        return NULL;
    PyObject *result = NULL;
    bw_cql_run_options ro = {window, max_retries, (long)(backoff * 1000.0),
                             (long)(backoff_max * 1000.0), bodies_interrupted};
    bw_cql_outcome outcome;
    bw_cql_status status;
    b->watch.released = PyEval_SaveThread();
    int rc = bw_cql_run(self->conn, &ro, bodies_produce, bodies_consume, b, &outcome, &status);
    PyEval_RestoreThread(b->watch.released);
    bw_guard_leave(&self->guard);
    self->overloaded += (unsigned long long)outcome.overloaded;
    if (b->watch.interrupted) {
        /* the handler's exception (KeyboardInterrupt) stands; the connection is broken */
        assert(PyErr_Occurred());
    } else if (rc == 0) {
        result = Py_BuildValue("(KK)", (unsigned long long)outcome.answered,
                               (unsigned long long)outcome.retries);
    } else {
        if (status.kind == BW_CQL_E_CALLBACK && b->refused)
            snprintf(status.message, sizeof status.message, "%s: answered a request with %s",
                     bw_cql_peer(self->conn), b->why);
        raise_status(&status, &outcome);
    }
    bw_cql_outcome_free(&outcome);
    return result;
}

/* run(opcode, bodies, *, window=CQL_DEFAULT_WINDOW, max_retries=CQL_DEFAULT_RETRIES,
       backoff=0.05, backoff_max=2.0)
   -> (answered, retries): a new reference. */
static PyObject *CqlConnection_run(CqlConnectionObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"opcode", "bodies", "window", "max_retries", "backoff",
                               "backoff_max", NULL};
    int opcode;
    PyObject *bodies_obj;
    int window = BW_CQL_DEFAULT_WINDOW, max_retries = BW_CQL_DEFAULT_RETRIES;
    double backoff = 0.05, backoff_max = 2.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iO|$iidd:run", keywords, &opcode,
                                     &bodies_obj, &window, &max_retries, &backoff, &backoff_max))
        return NULL;
    if (check_run_options(opcode, window, max_retries, backoff, backoff_max) < 0)
        return NULL;
    run_bodies b;
    memset(&b, 0, sizeof b);
    b.opcode = (uint8_t)opcode;
    PyObject *result = NULL;
    /* a tuple of its own: the caller's list may change while the GIL is released */
    b.items = PySequence_Tuple(bodies_obj);
    if (b.items == NULL)
        return NULL;
    b.count = PyTuple_GET_SIZE(b.items);
    b.data = PyMem_Malloc((size_t)(b.count ? b.count : 1) * sizeof *b.data);
    b.lens = PyMem_Malloc((size_t)(b.count ? b.count : 1) * sizeof *b.lens);
    if (b.data == NULL || b.lens == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < b.count; i++) {
        PyObject *item = PyTuple_GET_ITEM(b.items, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "bodies[%zd] must be bytes, not %.100s", i,
                         Py_TYPE(item)->tp_name);
            goto cleanup;
        }
        b.data[i] = PyBytes_AS_STRING(item);
        b.lens[i] = (size_t)PyBytes_GET_SIZE(item);
    }
    result = run_bodies_now(self, &b, window, max_retries, backoff, backoff_max);
cleanup:
    PyMem_Free(b.data);
    PyMem_Free(b.lens);
    Py_DECREF(b.items);
    return result;
}

/* run_packed(opcode, bodies, ends, rows=None, *, window=CQL_DEFAULT_WINDOW,
   max_retries=CQL_DEFAULT_RETRIES, backoff=0.05,
   backoff_max=2.0) -> (answered, retries): a new reference. `bodies` holds the bodies back to
   back, `ends` (int64, native order) the end of each; `rows` (int32), when given, the bodies
   to send, in order (else every body). Each body's tag, in errors, is its index in `ends`.
   The buffers are held (a bytearray cannot be resized) until the run returns; no Python
   object is made per body. */
static PyObject *CqlConnection_run_packed(CqlConnectionObject *self, PyObject *args,
                                          PyObject *kwargs) {
    static char *keywords[] = {"opcode", "bodies", "ends", "rows", "window", "max_retries",
                               "backoff", "backoff_max", NULL};
    int opcode;
    Py_buffer bodies = {0}, ends = {0}, rows = {0};
    int have_rows = 0;
    PyObject *rows_obj = Py_None;
    int window = BW_CQL_DEFAULT_WINDOW, max_retries = BW_CQL_DEFAULT_RETRIES;
    double backoff = 0.05, backoff_max = 2.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iy*y*|O$iidd:run_packed", keywords, &opcode,
                                     &bodies, &ends, &rows_obj, &window, &max_retries,
                                     &backoff, &backoff_max))
        return NULL;
    run_bodies b;
    memset(&b, 0, sizeof b);
    b.opcode = (uint8_t)opcode;
    int64_t *end_at = NULL;
    int32_t *tags = NULL;
    PyObject *result = NULL;
    if (check_run_options(opcode, window, max_retries, backoff, backoff_max) < 0)
        goto cleanup;
    if (rows_obj != Py_None) {
        if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0)
            goto cleanup;
        have_rows = 1;
    }
    if (ends.len % (Py_ssize_t)sizeof(int64_t) != 0 ||
        (have_rows && rows.len % (Py_ssize_t)sizeof(int32_t) != 0)) {
        PyErr_SetString(PyExc_ValueError, "ends must hold int64 values and rows int32 values "
                        "(a whole number of them)");
        goto cleanup;
    }
    Py_ssize_t n_ends = ends.len / (Py_ssize_t)sizeof(int64_t);
    /* the ends and rows copied out: a buffer's memory need not be aligned for its items */
    end_at = PyMem_Malloc((size_t)(n_ends ? n_ends : 1) * sizeof *end_at);
    b.count = have_rows ? rows.len / (Py_ssize_t)sizeof(int32_t) : n_ends;
    tags = PyMem_Malloc((size_t)(b.count ? b.count : 1) * sizeof *tags);
    b.data = PyMem_Malloc((size_t)(b.count ? b.count : 1) * sizeof *b.data);
    b.lens = PyMem_Malloc((size_t)(b.count ? b.count : 1) * sizeof *b.lens);
    if (end_at == NULL || tags == NULL || b.data == NULL || b.lens == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    memcpy(end_at, ends.buf, (size_t)n_ends * sizeof *end_at);
    int64_t previous = 0;
    for (Py_ssize_t i = 0; i < n_ends; i++) {
        if (end_at[i] < previous || end_at[i] > (int64_t)bodies.len) {
            PyErr_Format(PyExc_ValueError, "ends[%zd] = %lld is not between the previous end "
                         "(%lld) and the bodies' length (%zd)", i, (long long)end_at[i],
                         (long long)previous, bodies.len);
            goto cleanup;
        }
        previous = end_at[i];
    }
    if (have_rows)
        memcpy(tags, rows.buf, (size_t)b.count * sizeof *tags);
    for (Py_ssize_t i = 0; i < b.count; i++) {
        if (!have_rows)
            tags[i] = (int32_t)i;
        else if (tags[i] < 0 || tags[i] >= n_ends) {
            PyErr_Format(PyExc_ValueError, "rows[%zd] = %d is not a body (there are %zd)", i,
                         (int)tags[i], n_ends);
            goto cleanup;
        }
        int64_t start = tags[i] > 0 ? end_at[tags[i] - 1] : 0;
        b.data[i] = (const char *)bodies.buf + start;
        b.lens[i] = (size_t)(end_at[tags[i]] - start);
    }
    b.tags = tags;
    result = run_bodies_now(self, &b, window, max_retries, backoff, backoff_max);
cleanup:
    PyMem_Free(b.data);
    PyMem_Free(b.lens);
    PyMem_Free(tags);
    PyMem_Free(end_at);
    if (have_rows)
        PyBuffer_Release(&rows);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&bodies);
    return result;
}

/* close(): None (a new reference). Idempotent. */
static PyObject *CqlConnection_close(CqlConnectionObject *self, PyObject *unused) {
    (void)unused;
    if (self->guard.busy) {
        bw_guard_refuse_in_use(&connection_words);
        return NULL;
    }
    bw_cql_close(self->conn);
    self->conn = NULL;
    release_cancel(self); /* no wait watches it any more */
    Py_RETURN_NONE;
}

/* abort(): None (a new reference). Allowed while another thread's call runs on the
   connection, which then ends at once (ConnectionLostError); the connection is unusable
   afterwards. Idempotent. */
static PyObject *CqlConnection_abort(CqlConnectionObject *self, PyObject *unused) {
    (void)unused;
    bw_cql_abort(self->conn);
    Py_RETURN_NONE;
}

/* __enter__: self (a new reference). */
static PyObject *CqlConnection_enter(CqlConnectionObject *self, PyObject *unused) {
    (void)unused;
    return Py_NewRef((PyObject *)self);
}

/* __exit__: None (a new reference). */
static PyObject *CqlConnection_exit(CqlConnectionObject *self, PyObject *args) {
    (void)args;
    return CqlConnection_close(self, NULL);
}

/* peer: "host:port" (a new reference). */
static PyObject *CqlConnection_get_peer(CqlConnectionObject *self, void *closure) {
    (void)closure;
    if (self->conn == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(bw_cql_peer(self->conn));
}

/* authenticator: the class the server named, or "" (a new reference). */
static PyObject *CqlConnection_get_authenticator(CqlConnectionObject *self, void *closure) {
    (void)closure;
    if (self->conn == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(bw_cql_authenticator(self->conn));
}

/* supported: the SUPPORTED body of the handshake, bytes (a new reference). */
static PyObject *CqlConnection_get_supported(CqlConnectionObject *self, void *closure) {
    (void)closure;
    if (self->conn == NULL)
        Py_RETURN_NONE;
    size_t len;
    const uint8_t *body = bw_cql_supported(self->conn, &len);
    return PyBytes_FromStringAndSize((const char *)body, (Py_ssize_t)len);
}

/* take_payloads() -> (list[bytes], dropped): a new reference; the store emptied. */
static PyObject *CqlConnection_take_payloads(CqlConnectionObject *self, PyObject *unused) {
    (void)unused;
    if (self->conn == NULL) {
        PyErr_SetString(PyExc_ValueError, "the connection is closed");
        return NULL;
    }
    bw_cql_kept *kept = bw_cql_payloads(self->conn); /* borrowed */
    PyObject *list = PyList_New(0), *result = NULL;
    if (list == NULL)
        return NULL;
    for (size_t at = 0; at + 4 <= kept->len;) {
        uint32_t n;
        memcpy(&n, kept->data + at, 4);
        PyObject *item = PyBytes_FromStringAndSize((const char *)kept->data + at + 4, n);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            goto cleanup;
        }
        Py_DECREF(item);
        at += 4 + (size_t)n;
    }
    result = Py_BuildValue("(On)", list, (Py_ssize_t)kept->dropped);
    if (result != NULL)
        bw_cql_kept_clear(kept);
cleanup:
    Py_DECREF(list);
    return result;
}

/* closed: bool (a new reference). */
static PyObject *CqlConnection_get_closed(CqlConnectionObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->conn == NULL);
}

/* The requests this connection re-sent after an Overloaded answer: a new reference. */
static PyObject *CqlConnection_get_overloaded(CqlConnectionObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->overloaded);
}

static PyMethodDef CqlConnection_methods[] = {
    {"request", (PyCFunction)CqlConnection_request, METH_VARARGS,
     "request(opcode, body) -> (opcode, bytes): one request, its answer (not retried)."},
    {"run", (PyCFunction)(void (*)(void))CqlConnection_run, METH_VARARGS | METH_KEYWORDS,
     "run(opcode, bodies, *, window=CQL_DEFAULT_WINDOW, max_retries=CQL_DEFAULT_RETRIES, "
     "backoff=0.05, backoff_max=2.0) -> "
     "(answered, retries): every body sent as a request of opcode, at most window in flight; "
     "overloaded, write timeout and unavailable re-sent up to max_retries times after a "
     "doubling pause. Raises with row and unacknowledged on any other failure."},
    {"run_packed", (PyCFunction)(void (*)(void))CqlConnection_run_packed,
     METH_VARARGS | METH_KEYWORDS,
     "run_packed(opcode, bodies, ends, rows=None, *, window=CQL_DEFAULT_WINDOW, "
     "max_retries=CQL_DEFAULT_RETRIES, backoff=0.05, "
     "backoff_max=2.0) -> (answered, retries): as run, the bodies packed back to back in one "
     "buffer, ends (int64) the end of each, rows (int32) the ones to send (default: all); a "
     "body's row in errors is its index in ends."},
    {"close", (PyCFunction)CqlConnection_close, METH_NOARGS, "Closes the connection."},
    {"take_payloads", (PyCFunction)CqlConnection_take_payloads, METH_NOARGS,
     "take_payloads() -> (list[bytes], dropped): the tablet routing entries (custom payload "
     "tablets-routing-v1) of the answers read since the last call, and how many were not "
     "kept (over the store's bounds)."},
    {"abort", (PyCFunction)CqlConnection_abort, METH_NOARGS,
     "Ends the connection's traffic at once, from any thread: a call running on it in another "
     "thread raises ConnectionLostError; the connection is unusable afterwards."},
    {"__enter__", (PyCFunction)CqlConnection_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)CqlConnection_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CqlConnection_getset[] = {
    {"peer", (getter)CqlConnection_get_peer, NULL, "host:port of the server", NULL},
    {"authenticator", (getter)CqlConnection_get_authenticator, NULL,
     "the authenticator class the server named, or ''", NULL},
    {"closed", (getter)CqlConnection_get_closed, NULL, "whether close() was called", NULL},
    {"overloaded", (getter)CqlConnection_get_overloaded, NULL,
     "requests re-sent after an Overloaded answer, over every run so far", NULL},
    {"supported", (getter)CqlConnection_get_supported, NULL,
     "the SUPPORTED body the node answered OPTIONS with (a [string multimap]), bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot CqlConnection_slots[] = {
    {Py_tp_doc, "CqlConnection(host, port=9042, *, username=None, password=None, tls=None, "
                "connect_timeout=10.0, timeout=30.0, max_frame=0, throw_on_overload=False, "
                "cancel=None, local_port=0, tablets_routing=False): a CQL native protocol v4 "
                "connection (handshake and PasswordAuthenticator done); cancel, a CqlCancel, "
                "ends its connect and every later wait once cancelled; local_port, the port "
                "it connects from (0: any); tablets_routing asks the node for tablet routing "
                "entries (take_payloads) when it offers them."},
    {Py_tp_new, CqlConnection_new},
    {Py_tp_dealloc, CqlConnection_dealloc},
    {Py_tp_traverse, CqlConnection_traverse},
    {Py_tp_methods, CqlConnection_methods},
    {Py_tp_getset, CqlConnection_getset},
    {0, NULL},
};

static PyType_Spec CqlConnection_spec = {
    .name = "bulkwire._core.CqlConnection",
    .basicsize = sizeof(CqlConnectionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = CqlConnection_slots,
};

int bw_cql_conn_add_to_module(PyObject *module) {
    if (bw_state_add_type(module, BW_TYPE_CQL_CONNECTION, &CqlConnection_spec) < 0 ||
        bw_state_add_type(module, BW_TYPE_CQL_CANCEL, &CqlCancel_spec) < 0)
        return -1;
    static const struct {
        const char *name;
        int value;
    } opcodes[] = {{"CQL_OP_QUERY", BW_CQL_OP_QUERY}, {"CQL_OP_PREPARE", BW_CQL_OP_PREPARE},
                   {"CQL_OP_EXECUTE", BW_CQL_OP_EXECUTE}, {"CQL_OP_RESULT", BW_CQL_OP_RESULT},
                   {"CQL_OP_OPTIONS", BW_CQL_OP_OPTIONS}, {"CQL_OP_SUPPORTED", BW_CQL_OP_SUPPORTED}};
    for (size_t i = 0; i < sizeof opcodes / sizeof opcodes[0]; i++)
        if (PyModule_AddIntConstant(module, opcodes[i].name, opcodes[i].value) < 0)
            return -1;
    /* the run's limits and defaults, read by the CQL target's options */
    if (PyModule_AddIntConstant(module, "CQL_MAX_WINDOW", BW_CQL_MAX_WINDOW) < 0 ||
        PyModule_AddIntConstant(module, "CQL_DEFAULT_WINDOW", BW_CQL_DEFAULT_WINDOW) < 0 ||
        PyModule_AddIntConstant(module, "CQL_DEFAULT_RETRIES", BW_CQL_DEFAULT_RETRIES) < 0 ||
        PyModule_AddIntConstant(module, "CQL_MAX_RETRIES", BW_CQL_MAX_RETRIES) < 0)
        return -1;
    return 0;
}
