/* The consumers of a body's queue: next_piece (one piece at a time, for BulkWriter.pieces and
   any transport) and pump_body (BulkInsert's sender loop in C, without the GIL). */
#include "py_body_pump.h"

#include "py_errors.h"
#include "py_state.h"

#include "py_piece.h"
#include "py_gzip_stream.h"
#include "py_handover_queue.h"
#include "py_tls.h"
#include "py_zstd_stream.h"
#include "http_chunk.h"
#include "socket_send.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

/* ---- the body's pieces: the one rule both consumers follow ----

   Plain: each handed-over buffer is a piece as it is. gzip (zstd alike: frame for member,
   flush for sync-flush): each buffer is compressed and sync-flushed into a piece; the buffer
   taken when the producer has finished and nothing is left waiting ends the member in the
   same piece; if the end comes after a buffer that did not end it, a last piece holds the
   trailer alone. BulkWriter.pieces() (any transport)
   takes the pieces one by one with next_piece; BulkInsert's sender sends them with the
   pump. Both decide with body_last_buffer / body_needs_trailer.

   Where the body's data ends: once the queue has ended (the producer closed it, the consumer
   did not), every buffer has been taken, and every piece sent from them carried all of its
   data decodable (a plain buffer as it is; compressed, flushed or ending the stream), the
   last one up to the array's closing ']'. What is left then carries no data: the trailer
   piece (the compressed stream's end) and the terminating chunk. next_piece marks the
   trailer piece (consumed None) and the pump sends both in pump_send_end, so each sender
   knows when an answer comes after the last data byte (see pump_send_end). */

/* The buffer just taken is the body's last: its piece ends the gzip member. */
static int body_last_buffer(bw_hq *q) { return bw_hq_drained(q); }

/* At the end of the queue: whether a piece with the gzip trailer alone must follow. */
static int body_needs_trailer(int compressing, int member_finished, bw_hq *q) {
    return compressing && !member_finished && !bw_hq_consumer_closed(q);
}

/* 1 for the core's own compressors (GzipStream, ZstdStream): driven without the GIL. */
static int native_compressor(PyObject *compressor) {
    return bw_is_gzip_stream(compressor) || bw_is_zstd_stream(compressor);
}

/* New reference: native_compressor's piece of data (NULL: none), as bw_gzip_write. */
static PyObject *native_write(PyObject *compressor, PyObject *data, int finish) {
    if (bw_is_zstd_stream(compressor))
        return bw_zstd_write((bw_zstd_object *)compressor, data, finish);
    return bw_gzip_write((bw_gzip_object *)compressor, data, finish);
}

static int native_finished(PyObject *compressor) {
    if (bw_is_zstd_stream(compressor))
        return ((bw_zstd_object *)compressor)->finished;
    return ((bw_gzip_object *)compressor)->finished;
}

/* 1 when the Python-side compressor (not a core stream) has ended its member, 0 when not,
   -1 with an exception set. */
static int foreign_gzip_finished(PyObject *gzip_obj) {
    PyObject *flag = PyObject_GetAttrString(gzip_obj, "finished");
    if (flag == NULL)
        return -1;
    int finished = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    return finished;
}

/* next_piece(queue, gzip=None) -> (piece, consumed) | None. New reference. Waits for the
   next buffer with the GIL released (Ctrl-C raises). piece: the buffer itself (plain), or
   what compressing it gave (None when nothing), or the gzip trailer (consumed None: it
   carries none of the body's data); consumed: the buffer's length. None at the end of the
   body, or when the consumer side was closed.
   gzip: a GzipStream or ZstdStream (compressed with the GIL released) or an object with the same
   compress(data) / finish(data=None) methods and a finished attribute. */
static PyObject *module_next_piece(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *queue_obj, *gzip_obj = Py_None;
    PyTypeObject *queue_type = bw_state_type(BW_TYPE_HANDOVER_QUEUE); /* borrowed */
    if (queue_type == NULL ||
        !PyArg_ParseTuple(args, "O!|O:next_piece", queue_type, &queue_obj, &gzip_obj))
        return NULL;
    bw_hq *q = &((bw_queue_object *)queue_obj)->q;
    int compressing = gzip_obj != Py_None;
    int native = compressing && native_compressor(gzip_obj);
    PyObject *item = bw_queue_get((bw_queue_object *)queue_obj);
    if (item == NULL)
        return NULL;
    if (item == Py_None) {
        Py_DECREF(item);
        int finished = 1;
        if (compressing) {
            finished = native ? native_finished(gzip_obj) : foreign_gzip_finished(gzip_obj);
            if (finished < 0)
                return NULL;
        }
        if (!body_needs_trailer(compressing, finished, q))
            Py_RETURN_NONE;
        PyObject *trailer = native ? native_write(gzip_obj, NULL, 1)
                                   : PyObject_CallMethod(gzip_obj, "finish", NULL);
        if (trailer == NULL)
            return NULL;
        return Py_BuildValue("(NO)", trailer, Py_None);
    }
    if (bw_is_piece(item) &&
        atomic_load_explicit(&((bw_piece_object *)item)->pending, memory_order_acquire) !=
            BW_PIECE_SETTLED) {
        /* the float text is written here, off the producer's GIL */
        Py_BEGIN_ALLOW_THREADS
        bw_piece_settle((bw_piece_object *)item);
        Py_END_ALLOW_THREADS
    }
    Py_buffer view;
    if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(item);
        return NULL;
    }
    Py_ssize_t consumed = view.len;
    PyBuffer_Release(&view);
    if (!compressing)
        return Py_BuildValue("(Nn)", item, consumed);
    int last = body_last_buffer(q);
    PyObject *piece = native ? native_write(gzip_obj, item, last)
                             : PyObject_CallMethod(gzip_obj, last ? "finish" : "compress", "O", item);
    Py_DECREF(item);
    if (piece == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", piece, consumed);
}

/* ---- the body pump: the sender's loop in C, without the GIL ----

   The encoding thread holds the GIL nearly all the time, and a thread that wants it back
   waits for the interpreter's switch interval (5 ms) each time. A Python sender loop
   retakes it for every queue get and every send, which left the sender behind the encoder
   and the queue full. The pump takes buffers from the queue, compresses them (gzip), and
   writes each as one HTTP chunk with the GIL released the whole time. A sent piece that
   nobody else references gives its memory back at once (to the buffer pool, for the
   writer's next buffer); the object shells are released with the GIL every few pieces and
   at the end. */

#define PUMP_HELD 32

typedef struct {
    PyObject *item;  /* the queue's reference */
    Py_buffer view;  /* for items that are not Pieces (view.obj set) */
} pump_held;

/* How the pump ended. An answer before the last data byte was sent (PUMP_ANSWERED) is early:
   the server cannot have read the whole array. One after it (PUMP_ANSWERED_AT_END), with at
   most the trailer and the terminating chunk left, is the server's answer to the whole body. */
typedef enum {
    PUMP_DONE = 0,             /* sent whole, the terminating chunk last, no answer before */
    PUMP_ANSWERED = 1,         /* the server answered before the last data byte: nothing more sent */
    PUMP_CLOSED = 2,           /* the consumer side was closed (failure or abort) */
    PUMP_ANSWERED_AT_END = 3,  /* the server answered after the last data byte; the rest was
                                  still tried, its failure ignored */
} pump_outcome;

typedef struct {
    /* what to send, and where */
    bw_hq *q;
    bw_queue_object *queue; /* q's object: its live counts of what was taken and sent */
    bw_gzip_object *gz; /* NULL: not gzip */
    bw_zstd_object *zs; /* NULL: not zstd (both NULL: plain) */
    int fd;
    PyObject *tls_obj;  /* the TlsConnection, or NULL: the socket itself */
    bw_tls *tls;        /* its session, held for the pump's run */
    long timeout_ms;    /* < 0: no timeout */
    /* the state of the loop */
    PyThreadState *ts;  /* the saved thread state while the GIL is released */
    pump_held held[PUMP_HELD];
    int nheld;
    bw_buf out;         /* compressed output of the current piece */
    int gz_finished;    /* the member (gzip) or frame (zstd) was ended */
    /* the outcome */
    pump_outcome outcome;
    int sock_error;     /* an errno value */
    bw_gz_result gz_error;
    bw_zs_result zs_error;
    int py_error;       /* an exception is set */
    size_t buffers, body_bytes, pieces, wire_bytes;
} pump_state;

/* With the GIL: releases what the pump holds. */
static void pump_release(pump_state *st) {
    for (int i = 0; i < st->nheld; i++) {
        if (st->held[i].view.obj != NULL)
            PyBuffer_Release(&st->held[i].view);
        Py_DECREF(st->held[i].item);
    }
    st->nheld = 0;
}

/* Without the GIL: gives back the memory of every held piece that only the pump references.
   The count is read atomically; once it is 1 no other thread holds a reference, so it cannot
   rise again behind our back. Returns how many held items still have their memory (other
   bytes-likes always do: only releasing them, with the GIL, can free it). */
static int pump_give_back(pump_state *st) {
    int kept = 0;
    for (int i = 0; i < st->nheld; i++) {
        if (!bw_is_piece(st->held[i].item)) { /* released with the GIL */
            kept++;
            continue;
        }
        bw_piece_object *c = (bw_piece_object *)st->held[i].item;
        if (c->data == NULL)
            continue;
#ifdef Py_GIL_DISABLED
        (void)c; /* no single reference count to read: released with the thread attached */
        kept++;
#else
        if (__atomic_load_n(&((PyObject *)c)->ob_refcnt, __ATOMIC_ACQUIRE) == 1)
            bw_piece_give_back(c);
        else
            kept++;
#endif
    }
    return kept;
}

/* Without the GIL: every byte of iov, on the socket or through its TLS session; watch: unless
   the server answers while the write waits for room (BW_SEND_ANSWERED). 0, or an errno value
   (BW_TLS_FAILED: the session's message says why). */
static int pump_write(const pump_state *st, struct iovec *iov, int count, int watch) {
#ifdef BW_HAVE_OPENSSL
    if (st->tls != NULL) {
        int rc;
        /* a signal is the main thread's to handle; the consumed array resumes the write */
        while ((rc = bw_tls_write_all(st->tls, iov, count, st->timeout_ms, watch)) == EINTR)
            ;
        return rc;
    }
#endif
    return bw_send_all(st->fd, iov, count, st->timeout_ms, watch);
}

/* Without the GIL: the server already sent something (an answer before the end of the body,
   or over TLS an alert or the end of the session). */
static int pump_peer_answered(pump_state *st) {
#ifdef BW_HAVE_OPENSSL
    if (st->tls != NULL)
        return bw_tls_peer_answered(st->tls);
#endif
    return bw_peer_answered(st->fd);
}

/* Sends one HTTP chunk holding payload, a piece of the body's data (the CRLF ending the
   previous chunk rides in front). An answer that comes while the write waits for room came
   before the piece's last byte was sent: early. 0, or -1 with st->sock_error or the outcome
   set. */
static int pump_send_chunk(pump_state *st, const char *payload, size_t len) {
    char head[BW_CHUNK_HEAD_MAX];
    size_t head_len = bw_chunk_head(head, len, st->pieces > 0);
    struct iovec iov[2] = {{head, head_len}, {(void *)payload, len}};
    int rc = pump_write(st, iov, 2, 1);
    if (rc == BW_SEND_ANSWERED) {
        st->outcome = PUMP_ANSWERED;
        return -1;
    }
    st->sock_error = rc;
    if (st->sock_error != 0)
        return -1;
    st->pieces++;
    st->wire_bytes += len;
    bw_queue_count_sent(st->queue, len);
    return 0;
}

/* Without the GIL: compresses data into st->out when compressing (the last buffer ends the
   member). Sets *payload to what goes on the wire. 0, or -1 with st->gz_error set. */
static int pump_compress(pump_state *st, const char *data, size_t len, int finish,
                         const char **payload, size_t *payload_len) {
    if (st->gz == NULL && st->zs == NULL) {
        *payload = data;
        *payload_len = len;
        return 0;
    }
    st->out.len = 0;
    if (st->zs != NULL) {
        st->zs_error = bw_zs_write(st->zs->zs, data, len, finish, &st->out);
        if (st->zs_error != BW_ZS_OK)
            return -1;
    } else {
        st->gz_error = bw_gz_write(st->gz->gz, data, len, finish, &st->out);
        if (st->gz_error != BW_GZ_OK)
            return -1;
    }
    st->gz_finished = finish;
    *payload = st->out.data;
    *payload_len = st->out.len;
    return 0;
}

/* Without the GIL, at the end of the queue: the gzip trailer when the last buffer did not
   carry it, then the terminating chunk. Every data byte is out by now (see "Where the body's
   data ends"): an answer that came meanwhile is the server's answer to the whole body, which
   a server may give once it has parsed the closing ']' (RavenDB does). The rest is still
   sent, as a courtesy to a server that goes on reading, and a failure to send it (the server
   may have closed its side) is ignored: the answer is in, and the caller reads it. */
static void pump_send_end(pump_state *st) {
    if (bw_hq_consumer_closed(st->q)) {
        st->outcome = PUMP_CLOSED;
        return;
    }
    int answered = pump_peer_answered(st);
    const char *tail = NULL;
    size_t tail_len = 0;
    if (body_needs_trailer(st->gz != NULL || st->zs != NULL, st->gz_finished, st->q) &&
        pump_compress(st, NULL, 0, 1, &tail, &tail_len) < 0) {
        if (!answered)
            return;
        /* the stream cannot end: it is not used again, and the answer stands */
        st->gz_error = BW_GZ_OK;
        st->zs_error = BW_ZS_OK;
        st->gz_finished = 1;
        tail_len = 0;
    }
    /* one write: the trailer's chunk, then the terminating chunk (the CRLF ending the
       previous chunk rides in front of each) */
    char head[BW_CHUNK_HEAD_MAX];
    size_t head_len = tail_len > 0 ? bw_chunk_head(head, tail_len, st->pieces > 0) : 0;
    size_t end_len;
    const char *end = bw_chunk_end(st->pieces > 0 || tail_len > 0, &end_len);
    struct iovec iov[3] = {{head, head_len}, {(void *)tail, tail_len}, {(void *)end, end_len}};
    int rc = pump_write(st, iov, 3, 0);
    if (rc == 0 && tail_len > 0) {
        st->pieces++;
        st->wire_bytes += tail_len;
        bw_queue_count_sent(st->queue, tail_len);
    }
    if (answered)
        st->outcome = PUMP_ANSWERED_AT_END;
    else
        st->sock_error = rc;
}

/* Without the GIL (retaken only for a bytes-like that is neither a Piece nor bytes): holds
   the item taken from the queue and finds its bytes. 0, or -1 with st->py_error set. */
static int pump_hold(pump_state *st, PyObject *item, const char **data, size_t *len) {
    pump_held *h = &st->held[st->nheld++];
    h->item = item;
    h->view.obj = NULL;
    if (bw_is_piece(item)) {
        bw_piece_settle((bw_piece_object *)item); /* the float text, on this thread */
        *data = ((bw_piece_object *)item)->data;
        *len = (size_t)((bw_piece_object *)item)->len;
    } else if (Py_IS_TYPE(item, &PyBytes_Type)) { /* immutable: readable without the GIL */
        *data = PyBytes_AS_STRING(item);
        *len = (size_t)PyBytes_GET_SIZE(item);
    } else { /* another bytes-like handed over as is: its buffer needs the GIL */
        PyEval_RestoreThread(st->ts);
        int bad = PyObject_GetBuffer(item, &h->view, PyBUF_SIMPLE);
        st->ts = PyEval_SaveThread();
        if (bad < 0) {
            h->view.obj = NULL;
            st->py_error = 1;
            return -1;
        }
        *data = h->view.buf;
        *len = (size_t)h->view.len;
    }
    return 0;
}

/* Without the GIL: one buffer from the queue, compressed and sent as one HTTP chunk (none
   when compressing gave nothing: an empty chunk would end the body). An answer before it is
   early: this buffer's data (maybe the array's end) is not out yet. 0 to go on, -1 to stop
   (the outcome or an error is set). */
static int pump_send_buffer(pump_state *st, PyObject *item) {
    pump_give_back(st); /* before a send that may block: the memory bound counts on it */
    const char *data, *payload;
    size_t len, payload_len;
    if (pump_hold(st, item, &data, &len) < 0)
        return -1;
    st->buffers++;
    st->body_bytes += len;
    bw_queue_count_taken(st->queue, len);
    if (pump_compress(st, data, len, body_last_buffer(st->q), &payload, &payload_len) < 0)
        return -1;
    if (pump_peer_answered(st)) {
        st->outcome = PUMP_ANSWERED;
        return -1;
    }
    if (payload_len > 0 && pump_send_chunk(st, payload, payload_len) < 0)
        return -1;
    /* Memory that only the pump still references goes back now; the producer may not have
       dropped its own reference to the latest piece yet, so all held pieces are looked at
       again after each send. Too many that stay referenced elsewhere: their shells are
       released with the GIL, so the memory bound holds. */
    if (pump_give_back(st) > 1 || st->nheld == PUMP_HELD) {
        PyEval_RestoreThread(st->ts);
        pump_release(st);
        st->ts = PyEval_SaveThread();
    }
    return 0;
}

/* Without the GIL: the loop, until the end of the body, an early answer, a closed consumer
   side or an error. */
static void pump_run(pump_state *st) {
    for (;;) {
        void *got = NULL;
        bw_hq_result rc = bw_hq_get(st->q, &got, BW_WAIT_SLICE_MS);
        if (rc == BW_HQ_TIMEOUT)
            continue;
        if (rc == BW_HQ_INHERITED) { /* refused before the loop (pump_parse_args) */
            st->outcome = PUMP_CLOSED;
            return;
        }
        if (rc == BW_HQ_CLOSED) {
            pump_send_end(st);
            return;
        }
        if (pump_send_buffer(st, (PyObject *)got) < 0)
            return;
    }
}

/* pump_body's arguments, checked. 0, or -1 with an exception set. */
static int pump_parse_args(PyObject *args, PyObject *kwargs, PyObject **queue_obj,
                           pump_state *st) {
    static char *keywords[] = {"queue", "fd", "gzip", "timeout", "tls", NULL};
    PyObject *gzip_obj = Py_None, *timeout_obj = Py_None, *tls_obj = Py_None;
    PyTypeObject *queue_type = bw_state_type(BW_TYPE_HANDOVER_QUEUE); /* borrowed */
    if (queue_type == NULL ||
        !PyArg_ParseTupleAndKeywords(args, kwargs, "O!i|OOO:pump_body", keywords, queue_type,
                                     queue_obj, &st->fd, &gzip_obj, &timeout_obj, &tls_obj))
        return -1;
    if (st->fd < 0) {
        PyErr_Format(PyExc_ValueError, "fd must be an open socket's descriptor, not %d", st->fd);
        return -1;
    }
    /* a forked child's copies: the queue's other side, and the streams' threads, are the
       parent's */
    if (bw_hq_inherited(&((bw_queue_object *)*queue_obj)->q)) {
        bw_queue_raise_inherited();
        return -1;
    }
    if (bw_is_zstd_stream(gzip_obj)) {
        st->zs = (bw_zstd_object *)gzip_obj;
        if (bw_zs_inherited(st->zs->zs)) {
            bw_zstd_set_error(BW_ZS_INHERITED, st->zs->zs);
            return -1;
        }
        if (st->zs->guard.busy || st->zs->finished) {
            PyErr_SetString(PyExc_ValueError, "zstd stream is in use or already finished");
            return -1;
        }
    } else if (gzip_obj != Py_None) {
        if (!bw_is_gzip_stream(gzip_obj)) {
            PyErr_Format(PyExc_TypeError, "gzip must be a GzipStream, a ZstdStream or None, "
                         "not %.100s", Py_TYPE(gzip_obj)->tp_name);
            return -1;
        }
        st->gz = (bw_gzip_object *)gzip_obj;
        if (bw_gz_inherited(st->gz->gz)) {
            bw_gzip_raise_inherited();
            return -1;
        }
        if (st->gz->guard.busy || st->gz->finished) {
            PyErr_SetString(PyExc_ValueError, "gzip stream is in use or already finished");
            return -1;
        }
    }
    if (bw_parse_timeout_ms(timeout_obj, &st->timeout_ms) < 0)
        return -1;
    st->queue = (bw_queue_object *)*queue_obj;
    st->q = &st->queue->q;
    if (tls_obj != Py_None) { /* last: nothing fails after it is held */
        st->tls = bw_tls_connection_acquire(tls_obj);
        if (st->tls == NULL)
            return -1;
        st->tls_obj = tls_obj;
    }
    return 0;
}

/* PumpResult: what pump_body gives back, by name. */
static PyStructSequence_Field pump_result_fields[] = {
    {"outcome", "how the sending ended: PUMP_DONE, PUMP_ANSWERED, PUMP_CLOSED or "
                "PUMP_ANSWERED_AT_END"},
    {"buffers", "the buffers taken from the queue"},
    {"body_bytes", "their bytes"},
    {"pieces", "the pieces sent, each as one HTTP chunk"},
    {"wire_bytes", "the bytes sent on the connection"},
    {NULL, NULL},
};

static PyStructSequence_Desc pump_result_desc = {
    "bulkwire._core.PumpResult", "What pump_body did: how it ended, and what it sent.",
    pump_result_fields, 5,
};


/* New reference: the outcome and counts (a PumpResult), or NULL with the error the loop
   ended with. */
static PyObject *pump_result(pump_state *st) {
    if (st->py_error)
        return NULL;
    bw_status status;
    if (st->gz_error != BW_GZ_OK) {
        bw_gz_status(st->gz_error, &status);
        return bw_raise_status(&status);
    }
    if (st->zs_error != BW_ZS_OK)
        return bw_zstd_set_error(st->zs_error, st->zs->zs);
    if (st->sock_error == BW_TLS_FAILED)
        return bw_tls_set_error(st->tls_obj, st->sock_error);
    if (st->sock_error != 0) {
        bw_status_from_errno(&status, st->sock_error);
        return bw_raise_status(&status);
    }
    PyTypeObject *result_type = bw_state_type(BW_TYPE_PUMP_RESULT); /* borrowed */
    PyObject *result = result_type != NULL ? PyStructSequence_New(result_type) : NULL; /* new */
    if (result == NULL)
        return NULL;
    Py_ssize_t counts[] = {(Py_ssize_t)st->buffers, (Py_ssize_t)st->body_bytes,
                           (Py_ssize_t)st->pieces, (Py_ssize_t)st->wire_bytes};
    PyObject *outcome = PyLong_FromLong((long)st->outcome);
    if (outcome == NULL)
        goto fail;
    PyStructSequence_SET_ITEM(result, 0, outcome);
    for (Py_ssize_t i = 0; i < 4; i++) {
        PyObject *count = PyLong_FromSsize_t(counts[i]);
        if (count == NULL)
            goto fail;
        PyStructSequence_SET_ITEM(result, i + 1, count);
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}

/* pump_body(queue, fd, gzip=None, timeout=None, tls=None) -> PumpResult(outcome, buffers,
   body_bytes, pieces, wire_bytes). New reference. tls: a TlsConnection on the socket fd,
   through which the body goes. outcome (pump_outcome, exported as the module's PUMP_*
   constants): PUMP_DONE the body was sent whole (with the terminating chunk), PUMP_ANSWERED
   the server answered before the last data byte (nothing more sent), PUMP_CLOSED the
   consumer side was closed (failure or abort), PUMP_ANSWERED_AT_END the server answered
   after the last data byte (the trailer and terminating chunk were still tried). Raises
   OSError / TimeoutError("timed out") from the socket. */
static PyObject *module_pump_body(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    PyObject *queue_obj;
    pump_state st = {.outcome = PUMP_DONE};
    if (pump_parse_args(args, kwargs, &queue_obj, &st) < 0)
        return NULL;
    if (st.gz != NULL) /* free: pump_parse_args checked */
        st.gz->guard.busy = 1;
    if (st.zs != NULL)
        st.zs->guard.busy = 1;
    Py_INCREF(queue_obj);
    st.ts = PyEval_SaveThread();
    pump_run(&st);
    PyEval_RestoreThread(st.ts);
    pump_release(&st);
    PyObject *result = pump_result(&st);
    if (st.tls_obj != NULL)
        bw_tls_connection_release(st.tls_obj); /* after its message was read */
    bw_buf_free(&st.out);
    if (st.gz != NULL) {
        bw_guard_leave(&st.gz->guard);
        if (st.gz_finished || st.gz_error != BW_GZ_OK)
            st.gz->finished = 1; /* a failed stream cannot continue either */
    }
    if (st.zs != NULL) {
        bw_guard_leave(&st.zs->guard);
        if (st.gz_finished || st.zs_error != BW_ZS_OK)
            st.zs->finished = 1;
    }
    Py_DECREF(queue_obj);
    return result;
}

/* http_chunk(piece) -> bytes (new reference): piece framed as one whole HTTP chunk (size
   line, data, CRLF) by the pump's framing; a sender that ends each chunk with it sends the
   same bytes as the pump, which lets the CRLF ride with the next size line. */
static PyObject *module_http_chunk(PyObject *module, PyObject *piece) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(piece, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *chunk = NULL;
    if (view.len == 0) { /* an empty chunk would end the body */
        PyErr_SetString(PyExc_ValueError, "an HTTP chunk cannot be empty: the empty chunk ends the body");
        goto cleanup;
    }
    char head[BW_CHUNK_HEAD_MAX];
    size_t head_len = bw_chunk_head(head, (size_t)view.len, 0);
    chunk = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)head_len + view.len + BW_CHUNK_DATA_END_LEN);
    if (chunk == NULL)
        goto cleanup;
    char *at = PyBytes_AS_STRING(chunk);
    memcpy(at, head, head_len);
    memcpy(at + head_len, view.buf, (size_t)view.len);
    memcpy(at + head_len + (size_t)view.len, BW_CHUNK_DATA_END, BW_CHUNK_DATA_END_LEN);
cleanup:
    PyBuffer_Release(&view);
    return chunk;
}

static PyMethodDef pump_functions[] = {
    {"next_piece", module_next_piece, METH_VARARGS,
     "next_piece(queue, gzip=None) -> (piece, consumed) | None\n\nThe body's next piece for a "
     "consumer (BulkWriter.pieces): the next buffer, compressed when gzip (a gzip or zstd "
     "stream) is given (the last "
     "buffer ends the member; a trailer-only piece, consumed None, follows when it could "
     "not), waiting with the GIL released. None at the end or when the consumer side was "
     "closed."},
    {"http_chunk", module_http_chunk, METH_O,
     "http_chunk(piece) -> bytes\n\nThe piece (a non-empty bytes-like) as one whole HTTP chunk: "
     "size line, data, CRLF, framed as the body pump frames it (for senders that cannot run the "
     "pump, e.g. TLS). The body then ends with HTTP_LAST_CHUNK."},
    {"pump_body", (PyCFunction)(void (*)(void))module_pump_body, METH_VARARGS | METH_KEYWORDS,
     "pump_body(queue, fd, gzip=None, timeout=None, tls=None) -> PumpResult(outcome, buffers, "
     "body_bytes, pieces, wire_bytes)\n\nSend the queue's buffers on the connected socket fd (through its "
     "TlsConnection tls when given) as HTTP chunks (through gzip, a GzipStream or ZstdStream, "
     "when given), with the GIL released, until the producer closes the queue; "
     "then the terminating chunk. outcome: PUMP_DONE sent whole, PUMP_ANSWERED the server "
     "answered before the last data byte, PUMP_CLOSED the consumer side was closed, "
     "PUMP_ANSWERED_AT_END the server answered after the last data byte (the body's end was "
     "still tried)."},
    {NULL, NULL, 0, NULL},
};

int bw_body_pump_add_to_module(PyObject *module) {
    size_t end_len;
    const char *end = bw_chunk_end(0, &end_len);
    PyObject *last_chunk = PyBytes_FromStringAndSize(end, (Py_ssize_t)end_len);
    if (last_chunk == NULL)
        return -1;
    int added = PyModule_AddObjectRef(module, "HTTP_LAST_CHUNK", last_chunk);
    Py_DECREF(last_chunk);
    if (added < 0 || bw_tls_add_to_module(module) < 0)
        return -1;
    if (bw_state_keep_type(module, BW_TYPE_PUMP_RESULT,
                           PyStructSequence_NewType(&pump_result_desc), "PumpResult") < 0 ||
        PyModule_AddIntConstant(module, "PUMP_DONE", PUMP_DONE) < 0 ||
        PyModule_AddIntConstant(module, "PUMP_ANSWERED", PUMP_ANSWERED) < 0 ||
        PyModule_AddIntConstant(module, "PUMP_CLOSED", PUMP_CLOSED) < 0 ||
        PyModule_AddIntConstant(module, "PUMP_ANSWERED_AT_END", PUMP_ANSWERED_AT_END) < 0)
        return -1;
    return PyModule_AddFunctions(module, pump_functions);
}
