/* Binding for the bulk insert path: Chunk (a handed-over buffer), HandoverQueue (the
   bounded queue, waiting with the GIL released), GzipStream (deflate with the GIL released)
   and CommandWriter (framing + threshold over the walker). */
#include "py_bulk.h"
#include "py_bulk_writer.h"

#include "buffer_pool.h"
#include "gzip_stream.h"
#include "handover_queue.h"
#include "http_chunk.h"
#include "socket_send.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How long a blocked put/get sleeps before it retakes the GIL to run signal handlers and
   look at the other side's state again. */
#define WAIT_SLICE_MS 100

/* ---- memory accounting of live chunks (changed only with the GIL held) ---- */

/* Atomic: the body pump gives a sent chunk's memory back without the GIL. The peak is
   only written with the GIL held. */
static _Atomic size_t live_chunk_bytes, live_chunks;
static size_t peak_chunk_bytes;

/* ---- Chunk: immutable bytes owned by C, exported read-only through the buffer protocol ---- */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
    size_t cap;
    int recycle; /* a writer's buffer: its memory goes back to the pool */
} ChunkObject;

static PyTypeObject ChunkType;

/* New reference. Takes ownership of data (malloc'd, cap bytes allocated): frees it (or, with
   recycle, gives it back to the buffer pool) on failure and when the chunk dies. */
static PyObject *chunk_from_memory(char *data, size_t len, size_t cap, int recycle) {
    ChunkObject *self = PyObject_New(ChunkObject, &ChunkType);
    if (self == NULL) {
        if (recycle)
            bw_pool_release(data, cap);
        else
            free(data);
        return NULL;
    }
    self->data = data;
    self->len = (Py_ssize_t)len;
    self->cap = cap;
    self->recycle = recycle;
    atomic_fetch_add(&live_chunks, 1);
    size_t live = atomic_fetch_add(&live_chunk_bytes, cap) + cap;
    if (live > peak_chunk_bytes)
        peak_chunk_bytes = live;
    return (PyObject *)self;
}

static void Chunk_dealloc(ChunkObject *self) {
    atomic_fetch_sub(&live_chunks, 1);
    atomic_fetch_sub(&live_chunk_bytes, self->cap);
    if (self->recycle)
        bw_pool_release(self->data, self->cap);
    else
        free(self->data);
    PyObject_Free(self);
}

static int Chunk_getbuffer(ChunkObject *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 1, flags);
}

static Py_ssize_t Chunk_length(ChunkObject *self) { return self->len; }

static PyObject *Chunk_repr(ChunkObject *self) {
    return PyUnicode_FromFormat("<bulkwire Chunk of %zd bytes>", self->len);
}

static PyObject *Chunk_get_nbytes(ChunkObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->cap);
}

static PyObject *Chunk_get_address(ChunkObject *self, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(self->data);
}

static PyBufferProcs Chunk_as_buffer = {(getbufferproc)Chunk_getbuffer, NULL};
static PySequenceMethods Chunk_as_sequence = {.sq_length = (lenfunc)Chunk_length};
static PyGetSetDef Chunk_getset[] = {
    {"nbytes", (getter)Chunk_get_nbytes, NULL, "Bytes allocated for this chunk.", NULL},
    {"address", (getter)Chunk_get_address, NULL, "Address of the memory (identity checks).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bulkwire._core.Chunk",
    .tp_basicsize = sizeof(ChunkObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A finished piece of the request body: read-only bytes owned by C, exported\n"
              "through the buffer protocol (memoryview(chunk), bytes(chunk), sock.sendall(chunk)).",
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_repr = (reprfunc)Chunk_repr,
    .tp_as_buffer = &Chunk_as_buffer,
    .tp_as_sequence = &Chunk_as_sequence,
    .tp_getset = Chunk_getset,
};

/* chunk_for_testing(data) -> Chunk: a chunk holding a copy of data (tests only). */
static PyObject *module_chunk_for_testing(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    size_t n = (size_t)view.len;
    char *data = malloc(n ? n : 1);
    if (data == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    memcpy(data, view.buf, n);
    PyBuffer_Release(&view);
    return chunk_from_memory(data, n, n, 0);
}

static PyObject *module_chunk_memory(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    return Py_BuildValue("(nnn)", (Py_ssize_t)atomic_load(&live_chunk_bytes),
                         (Py_ssize_t)peak_chunk_bytes, (Py_ssize_t)atomic_load(&live_chunks));
}

/* _pool_memory() -> (buffers, bytes, writers): what the buffer pool holds for reuse, and the
   writers alive (the pool keeps nothing without one). New reference. */
static PyObject *module_pool_memory(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    size_t buffers, bytes, writers;
    bw_pool_stats(&buffers, &bytes, &writers);
    return Py_BuildValue("(nnn)", (Py_ssize_t)buffers, (Py_ssize_t)bytes, (Py_ssize_t)writers);
}

static PyObject *module_reset_chunk_peak(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    peak_chunk_bytes = atomic_load(&live_chunk_bytes);
    Py_RETURN_NONE;
}

/* ---- HandoverQueue ---- */

typedef struct {
    PyObject_HEAD
    bw_hq q;
    int ready;
    size_t waits; /* puts that found the queue full (changed with the GIL held) */
} QueueObject;

static PyObject *Queue_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"maxsize", NULL};
    Py_ssize_t maxsize = 8;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n:HandoverQueue", keywords, &maxsize))
        return NULL;
    if (maxsize <= 0) {
        PyErr_Format(PyExc_ValueError, "maxsize must be a positive number of buffers, not %zd",
                     maxsize);
        return NULL;
    }
    QueueObject *self = (QueueObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (bw_hq_init(&self->q, (size_t)maxsize) < 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->ready = 1;
    return (PyObject *)self;
}

static void queue_release_items(QueueObject *self) {
    void *item;
    while (bw_hq_pop_any(&self->q, &item))
        Py_DECREF((PyObject *)item);
}

static void Queue_dealloc(QueueObject *self) {
    if (self->ready) {
        queue_release_items(self);
        bw_hq_destroy(&self->q);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* put(item) -> bool: True once queued; False when the consumer has closed the queue (the
   item is then not kept). Waits while the queue is full with the GIL released, waking
   every 100 ms to run signal handlers (Ctrl-C raises KeyboardInterrupt here). */
static PyObject *Queue_put(QueueObject *self, PyObject *item) {
    Py_INCREF(item); /* the queue's reference, if it takes the item */
    int waited = 0;
    for (;;) {
        bw_hq_result rc;
        rc = bw_hq_put(&self->q, item, 0); /* fast path: a free slot, no GIL round trip */
        if (rc == BW_HQ_TIMEOUT) {
            if (!waited)
                self->waits++;
            waited = 1;
            Py_BEGIN_ALLOW_THREADS
            rc = bw_hq_put(&self->q, item, WAIT_SLICE_MS);
            Py_END_ALLOW_THREADS
        }
        if (rc == BW_HQ_OK)
            Py_RETURN_TRUE;
        if (rc == BW_HQ_CLOSED) {
            Py_DECREF(item);
            Py_RETURN_FALSE;
        }
        if (PyErr_CheckSignals() < 0) {
            Py_DECREF(item);
            return NULL;
        }
    }
}

/* get() -> item, or None once the producer has closed and everything was taken (or the
   consumer side was closed). Waits with the GIL released. */
static PyObject *Queue_get(QueueObject *self, PyObject *unused) {
    (void)unused;
    for (;;) {
        void *item = NULL;
        bw_hq_result rc = bw_hq_get(&self->q, &item, 0);
        if (rc == BW_HQ_TIMEOUT) {
            Py_BEGIN_ALLOW_THREADS
            rc = bw_hq_get(&self->q, &item, WAIT_SLICE_MS);
            Py_END_ALLOW_THREADS
        }
        if (rc == BW_HQ_OK)
            return (PyObject *)item; /* the queue's reference becomes the caller's */
        if (rc == BW_HQ_CLOSED)
            Py_RETURN_NONE;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
}

static PyObject *Queue_close_producer(QueueObject *self, PyObject *unused) {
    (void)unused;
    bw_hq_close_producer(&self->q);
    Py_RETURN_NONE;
}

/* The consumer is gone: waiting and future puts return False; waiting items are released. */
static PyObject *Queue_close_consumer(QueueObject *self, PyObject *unused) {
    (void)unused;
    bw_hq_close_consumer(&self->q);
    queue_release_items(self);
    Py_RETURN_NONE;
}

static Py_ssize_t Queue_length(QueueObject *self) { return (Py_ssize_t)bw_hq_len(&self->q); }

/* The getset closure of each HandoverQueue attribute. */
typedef enum {
    QUEUE_MAXSIZE,
    QUEUE_PEAK,
    QUEUE_WAITS,
    QUEUE_PRODUCER_CLOSED,
    QUEUE_CONSUMER_CLOSED,
    QUEUE_DRAINED,
} queue_field;

/* New reference. */
static PyObject *Queue_get_field(QueueObject *self, void *closure) {
    switch ((queue_field)(intptr_t)closure) {
    case QUEUE_MAXSIZE: return PyLong_FromSize_t(bw_hq_capacity(&self->q));
    case QUEUE_PEAK: return PyLong_FromSize_t(bw_hq_peak(&self->q));
    case QUEUE_WAITS: return PyLong_FromSize_t(self->waits);
    case QUEUE_PRODUCER_CLOSED: return PyBool_FromLong(bw_hq_producer_closed(&self->q));
    case QUEUE_CONSUMER_CLOSED: return PyBool_FromLong(bw_hq_consumer_closed(&self->q));
    case QUEUE_DRAINED: return PyBool_FromLong(bw_hq_drained(&self->q));
    }
    Py_UNREACHABLE();
}

static PyMethodDef Queue_methods[] = {
    {"put", (PyCFunction)Queue_put, METH_O,
     "put(item) -> bool\n\nQueue item, waiting for a free slot with the GIL released. False "
     "when the consumer closed the queue. Ctrl-C interrupts the wait."},
    {"get", (PyCFunction)Queue_get, METH_NOARGS,
     "get() -> item | None\n\nThe next item, waiting with the GIL released; None at the end."},
    {"close_producer", (PyCFunction)Queue_close_producer, METH_NOARGS,
     "No more items will be put: get() returns None once the queue is empty."},
    {"close_consumer", (PyCFunction)Queue_close_consumer, METH_NOARGS,
     "No more items will be taken: put() returns False, waiting items are dropped."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Queue_getset[] = {
    {"maxsize", (getter)Queue_get_field, NULL, "The bound.", (void *)QUEUE_MAXSIZE},
    {"peak", (getter)Queue_get_field, NULL, "Most items ever waiting at once.", (void *)QUEUE_PEAK},
    {"waits", (getter)Queue_get_field, NULL, "Puts that found the queue full.",
     (void *)QUEUE_WAITS},
    {"producer_closed", (getter)Queue_get_field, NULL, "close_producer() was called.",
     (void *)QUEUE_PRODUCER_CLOSED},
    {"consumer_closed", (getter)Queue_get_field, NULL, "close_consumer() was called.",
     (void *)QUEUE_CONSUMER_CLOSED},
    {"drained", (getter)Queue_get_field, NULL, "Producer closed and nothing left.",
     (void *)QUEUE_DRAINED},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Queue_as_sequence = {.sq_length = (lenfunc)Queue_length};

static PyTypeObject QueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bulkwire._core.HandoverQueue",
    .tp_basicsize = sizeof(QueueObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HandoverQueue(maxsize=8)\n\nA bounded queue between one producer and one consumer "
              "thread; blocking waits release the GIL.",
    .tp_new = Queue_new,
    .tp_dealloc = (destructor)Queue_dealloc,
    .tp_methods = Queue_methods,
    .tp_getset = Queue_getset,
    .tp_as_sequence = &Queue_as_sequence,
};

/* ---- GzipStream ---- */

typedef struct {
    PyObject_HEAD
    bw_gzip_stream *gz;
    bw_gz_backend backend;
    int busy;
    int finished;
} GzipObject;

static PyObject *Gzip_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"backend", NULL};
    const char *name = "auto";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$s:GzipStream", keywords, &name))
        return NULL;
    bw_gz_backend backend;
    if (strcmp(name, "auto") == 0) {
        backend = bw_gz_have_isal() ? BW_GZ_ISAL : BW_GZ_ZLIB;
    } else if (strcmp(name, "zlib") == 0) {
        backend = BW_GZ_ZLIB;
    } else if (strcmp(name, "isal") == 0) {
        if (!bw_gz_have_isal()) {
            PyErr_SetString(PyExc_ValueError,
                            "backend 'isal' is not available: bulkwire was built without "
                            "libisal (install Debian's libisal-dev and rebuild)");
            return NULL;
        }
        backend = BW_GZ_ISAL;
    } else {
        PyErr_Format(PyExc_ValueError, "backend must be 'auto', 'zlib' or 'isal', not '%s'", name);
        return NULL;
    }
    GzipObject *self = (GzipObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->backend = backend;
    self->gz = bw_gz_new(backend);
    if (self->gz == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void Gzip_dealloc(GzipObject *self) {
    bw_gz_free(self->gz);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *gzip_write(GzipObject *self, PyObject *data, int finish) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "GzipStream used from two threads at once");
        return NULL;
    }
    if (self->finished) {
        PyErr_SetString(PyExc_ValueError, "the gzip stream is already finished");
        return NULL;
    }
    Py_buffer view = {0};
    if (data != NULL && PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!finish && view.len == 0) { /* no empty chunks */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    bw_buf out;
    if (bw_buf_init(&out, 0) < 0) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    bw_gz_result rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = bw_gz_write(self->gz, view.buf, (size_t)view.len, finish, &out);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (data != NULL)
        PyBuffer_Release(&view);
    if (rc != BW_GZ_OK) {
        bw_buf_free(&out);
        if (rc == BW_GZ_NO_MEMORY)
            return PyErr_NoMemory();
        PyErr_SetString(PyExc_RuntimeError, "the deflate stream failed");
        return NULL;
    }
    if (finish)
        self->finished = 1;
    if (out.len == 0) {
        bw_buf_free(&out);
        Py_RETURN_NONE;
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
    return chunk_from_memory(mem, len, cap, 0);
}

static PyObject *Gzip_compress(GzipObject *self, PyObject *data) { return gzip_write(self, data, 0); }

static PyObject *Gzip_finish(GzipObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", NULL};
    PyObject *data = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:finish", keywords, &data))
        return NULL;
    return gzip_write(self, data, 1);
}

static PyObject *Gzip_get_backend(GzipObject *self, void *closure) {
    (void)closure;
    return PyUnicode_FromString(self->backend == BW_GZ_ISAL ? "isal" : "zlib");
}

/* The getset closure of GzipStream's byte counts. */
typedef enum { GZIP_TOTAL_IN, GZIP_TOTAL_OUT } gzip_total;

/* New reference. */
static PyObject *Gzip_get_total(GzipObject *self, void *closure) {
    switch ((gzip_total)(intptr_t)closure) {
    case GZIP_TOTAL_IN: return PyLong_FromSize_t(bw_gz_total_in(self->gz));
    case GZIP_TOTAL_OUT: return PyLong_FromSize_t(bw_gz_total_out(self->gz));
    }
    Py_UNREACHABLE();
}

static PyObject *Gzip_get_finished(GzipObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->finished);
}

static PyMethodDef Gzip_methods[] = {
    {"compress", (PyCFunction)Gzip_compress, METH_O,
     "compress(data) -> Chunk | None\n\nDeflate data and sync-flush, with the GIL released. "
     "None for empty input (no empty chunks)."},
    {"finish", (PyCFunction)(void (*)(void))Gzip_finish, METH_VARARGS | METH_KEYWORDS,
     "finish(data=None) -> Chunk\n\nDeflate the last data and end the gzip member."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Gzip_getset[] = {
    {"backend", (getter)Gzip_get_backend, NULL, "'zlib' or 'isal'.", NULL},
    {"total_in", (getter)Gzip_get_total, NULL, "Bytes compressed so far.", (void *)GZIP_TOTAL_IN},
    {"total_out", (getter)Gzip_get_total, NULL, "Bytes produced so far.", (void *)GZIP_TOTAL_OUT},
    {"finished", (getter)Gzip_get_finished, NULL, "The member was ended (finish()).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GzipType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bulkwire._core.GzipStream",
    .tp_basicsize = sizeof(GzipObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "GzipStream(*, backend='auto')\n\nOne gzip member at the fastest level, written "
              "piece by piece, each piece sync-flushed. backend: 'auto', 'zlib' or 'isal'.",
    .tp_new = Gzip_new,
    .tp_dealloc = (destructor)Gzip_dealloc,
    .tp_methods = Gzip_methods,
    .tp_getset = Gzip_getset,
};

/* ---- CommandWriter ---- */

typedef struct {
    PyObject_HEAD
    bw_bulk_writer w;
    int ready;
    int busy;
    int owned;
    unsigned long owner; /* the producer's thread: the first to call a store method */
    PyObject *skip_keys; /* the default ("Id", "@metadata") */
} WriterObject;

/* A writer takes documents from one thread. Checking only for overlapping calls caught a
   second thread at random (only when the GIL switched inside a call); the owner check
   refuses every call from another thread, before anything changes. It runs with the GIL
   held, so claiming cannot race. 0, or -1 with RuntimeError set. */
static int writer_check_thread(WriterObject *self) {
    unsigned long me = PyThread_get_thread_ident();
    if (!self->owned) {
        self->owner = me;
        self->owned = 1;
        return 0;
    }
    if (self->owner == me)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "a bulk insert takes documents from one thread only: this BulkWriter (or "
                    "BulkInsert) belongs to the thread that first stored into it, and this call "
                    "came from another thread; use one per producer thread");
    return -1;
}

static PyObject *Writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"buffer_size", NULL};
    Py_ssize_t buffer_size = 1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n:CommandWriter", keywords, &buffer_size))
        return NULL;
    if (buffer_size <= 0) {
        PyErr_Format(PyExc_ValueError, "buffer_size must be a positive number of bytes, not %zd",
                     buffer_size);
        return NULL;
    }
    WriterObject *self = (WriterObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    bw_encode_options opts = {.hook_kind = BW_HOOK_ENTITY, .hook = NULL, .ensure_ascii = 1,
                              .float32_shortest = 0};
    if (bw_bulk_writer_init(&self->w, (size_t)buffer_size, &opts) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->ready = 1;
    self->skip_keys = Py_BuildValue("(ss)", "Id", "@metadata");
    if (self->skip_keys == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void Writer_dealloc(WriterObject *self) {
    if (self->ready)
        bw_bulk_writer_free(&self->w);
    Py_XDECREF(self->skip_keys);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *writer_take(WriterObject *self) {
    size_t len, cap;
    char *mem = bw_bulk_writer_detach(&self->w, &len, &cap);
    if (mem == NULL)
        Py_RETURN_NONE;
    return chunk_from_memory(mem, len, cap, 1);
}

/* put(id, entity, metadata) -> Chunk | None */
static PyObject *Writer_put(WriterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "put() takes 3 arguments (id, entity, metadata), %zd given",
                     nargs);
        return NULL;
    }
    if (writer_check_thread(self) < 0)
        return NULL;
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "id must be a str, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (!PyDict_Check(args[2])) {
        PyErr_Format(PyExc_TypeError, "metadata must be a dict, not %.100s",
                     Py_TYPE(args[2])->tp_name);
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "bulk insert store methods cannot run concurrently");
        return NULL;
    }
    self->busy = 1;
    int rc = bw_bulk_writer_put(&self->w, args[0], args[1], args[2], self->skip_keys);
    self->busy = 0;
    if (rc < 0)
        return NULL;
    if (!bw_bulk_writer_over_threshold(&self->w))
        Py_RETURN_NONE;
    return writer_take(self);
}

/* finish() -> Chunk: ends the array and hands over what is left. */
static PyObject *Writer_finish(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (writer_check_thread(self) < 0)
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "bulk insert store methods cannot run concurrently");
        return NULL;
    }
    if (bw_bulk_writer_finish(&self->w) < 0)
        return NULL;
    return writer_take(self);
}

/* ---- CommandWriter: pre-encoded commands (BulkWriter.store_encoded) ---- */

/* put_encoded(data, count, continued=False) -> Chunk | None (a new reference): copies data
   (any contiguous bytes-like) into the current buffer after the separator; returns the buffer
   when it went over the threshold. */
static PyObject *Writer_put_encoded(WriterObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "count", "continued", NULL};
    Py_buffer view = {0};
    Py_ssize_t count = 0;
    int continued = 0;
    PyObject *result = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*n|p:put_encoded", keywords, &view, &count,
                                     &continued))
        return NULL;
    if (writer_check_thread(self) < 0)
        goto cleanup;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "bulk insert store methods cannot run concurrently");
        goto cleanup;
    }
    self->busy = 1;
    int rc = bw_bulk_writer_put_encoded(&self->w, view.buf, (size_t)view.len, count, continued);
    self->busy = 0;
    if (rc < 0)
        goto cleanup;
    if (bw_bulk_writer_over_threshold(&self->w))
        result = writer_take(self);
    else
        result = Py_NewRef(Py_None);
cleanup:
    PyBuffer_Release(&view);
    return result;
}

/* put_external(length, count, continued=False) -> Chunk | None (a new reference): the caller
   sends `length` bytes of commands as a piece of its own; the separator goes into the current
   buffer, which is handed over (returned; None when empty) to go out before that piece. */
static PyObject *Writer_put_external(WriterObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"length", "count", "continued", NULL};
    Py_ssize_t length = 0, count = 0;
    int continued = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nn|p:put_external", keywords, &length, &count,
                                     &continued))
        return NULL;
    if (length <= 0) {
        PyErr_Format(PyExc_ValueError, "length must be positive, not %zd", length);
        return NULL;
    }
    if (writer_check_thread(self) < 0)
        return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "bulk insert store methods cannot run concurrently");
        return NULL;
    }
    if (bw_bulk_writer_put_external(&self->w, (size_t)length, count, continued) < 0)
        return NULL;
    return writer_take(self);
}

/* claim() -> None: the calling thread becomes the producer, or RuntimeError when another
   thread already is. */
static PyObject *Writer_claim(WriterObject *self, PyObject *unused) {
    (void)unused;
    if (writer_check_thread(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The getset closure of each CommandWriter attribute. */
typedef enum {
    WRITER_COMMANDS,
    WRITER_BYTES,
    WRITER_BUFFERED,
    WRITER_CAPACITY,
    WRITER_HANDOVERS,
    WRITER_BUFFER_SIZE,
    WRITER_FINISHED,
} writer_field;

/* New reference. */
static PyObject *Writer_get_field(WriterObject *self, void *closure) {
    switch ((writer_field)(intptr_t)closure) {
    case WRITER_COMMANDS: return PyLong_FromSsize_t(self->w.commands);
    case WRITER_BYTES: return PyLong_FromSize_t(self->w.bytes);
    case WRITER_BUFFERED: return PyLong_FromSize_t(self->w.buf.len);
    case WRITER_CAPACITY: return PyLong_FromSize_t(self->w.buf.cap);
    case WRITER_HANDOVERS: return PyLong_FromSize_t(self->w.handovers);
    case WRITER_BUFFER_SIZE: return PyLong_FromSize_t(self->w.threshold);
    case WRITER_FINISHED: return PyBool_FromLong(self->w.finished);
    }
    Py_UNREACHABLE();
}

static PyMethodDef Writer_methods[] = {
    {"put", (PyCFunction)(void (*)(void))Writer_put, METH_FASTCALL,
     "put(id, entity, metadata) -> Chunk | None\n\nAppend one PUT command; returns the buffer "
     "when it went over the threshold (handed over: the writer starts a new one). On error "
     "nothing of the command stays in the buffer."},
    {"finish", (PyCFunction)Writer_finish, METH_NOARGS,
     "finish() -> Chunk\n\nEnd the array and hand over the last buffer."},
    {"put_encoded", (PyCFunction)(void (*)(void))Writer_put_encoded, METH_VARARGS | METH_KEYWORDS,
     "put_encoded(data, count, continued=False) -> Chunk | None\n\nCopy already encoded commands "
     "(joined by ',', no leading ',') into the buffer after the separator ('[' or ','; none when "
     "continued); returns the buffer when it went over the threshold. The bytes are trusted."},
    {"put_external", (PyCFunction)(void (*)(void))Writer_put_external, METH_VARARGS | METH_KEYWORDS,
     "put_external(length, count, continued=False) -> Chunk | None\n\nThe caller sends length "
     "bytes of commands as a piece of its own: the separator is written into the buffer, which is "
     "handed over (returned; None when empty) and must go out right before that piece."},
    {"claim", (PyCFunction)Writer_claim, METH_NOARGS,
     "claim() -> None\n\nMake the calling thread the writer's producer, or raise RuntimeError "
     "when another thread already is (the first thread to call a store method owns it)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Writer_getset[] = {
    {"commands", (getter)Writer_get_field, NULL, "Commands written.", (void *)WRITER_COMMANDS},
    {"bytes", (getter)Writer_get_field, NULL, "Body bytes written.", (void *)WRITER_BYTES},
    {"buffered", (getter)Writer_get_field, NULL, "Bytes in the current buffer.",
     (void *)WRITER_BUFFERED},
    {"capacity", (getter)Writer_get_field, NULL, "Bytes allocated for the current buffer.",
     (void *)WRITER_CAPACITY},
    {"handovers", (getter)Writer_get_field, NULL, "Buffers handed over.", (void *)WRITER_HANDOVERS},
    {"buffer_size", (getter)Writer_get_field, NULL, "The threshold.", (void *)WRITER_BUFFER_SIZE},
    {"finished", (getter)Writer_get_field, NULL, "finish() was called.", (void *)WRITER_FINISHED},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bulkwire._core.CommandWriter",
    .tp_basicsize = sizeof(WriterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CommandWriter(buffer_size=1 << 20)\n\nFrames bulk insert PUT commands into "
              "buffers of about buffer_size bytes.",
    .tp_new = Writer_new,
    .tp_dealloc = (destructor)Writer_dealloc,
    .tp_methods = Writer_methods,
    .tp_getset = Writer_getset,
};


/* ---- the body's pieces: the one rule both consumers follow ----

   Plain: each handed-over buffer is a piece as it is. gzip: each buffer is compressed and
   sync-flushed into a piece; the buffer taken when the producer has finished and nothing is
   left waiting ends the member in the same piece; if the end comes after a buffer that did
   not end it, a last piece holds the trailer alone. BulkWriter.chunks() (any transport)
   takes the pieces one by one with next_piece; BulkInsert's sender sends them with the
   pump. Both decide with body_last_buffer / body_needs_trailer. */

/* The buffer just taken is the body's last: its piece ends the gzip member. */
static int body_last_buffer(bw_hq *q) { return bw_hq_drained(q); }

/* At the end of the queue: whether a piece with the gzip trailer alone must follow. */
static int body_needs_trailer(int compressing, int member_finished, bw_hq *q) {
    return compressing && !member_finished && !bw_hq_consumer_closed(q);
}

/* next_piece(queue, gzip=None) -> (piece, consumed) | None. New reference. Waits for the
   next buffer with the GIL released (Ctrl-C raises). piece: the buffer itself (plain), or
   what compressing it gave (None when nothing), or the gzip trailer (consumed 0); consumed:
   the buffer's length. None at the end of the body, or when the consumer side was closed.
   gzip: a GzipStream (compressed with the GIL released) or an object with the same
   compress(data) / finish(data=None) methods and a finished attribute. */
static PyObject *module_next_piece(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *queue_obj, *gzip_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O!|O:next_piece", &QueueType, &queue_obj, &gzip_obj))
        return NULL;
    bw_hq *q = &((QueueObject *)queue_obj)->q;
    int compressing = gzip_obj != Py_None;
    int native = compressing && Py_IS_TYPE(gzip_obj, &GzipType);
    PyObject *item = Queue_get((QueueObject *)queue_obj, NULL);
    if (item == NULL)
        return NULL;
    if (item == Py_None) {
        Py_DECREF(item);
        int finished = 1;
        if (compressing) {
            if (native) {
                finished = ((GzipObject *)gzip_obj)->finished;
            } else {
                PyObject *flag = PyObject_GetAttrString(gzip_obj, "finished");
                if (flag == NULL)
                    return NULL;
                finished = PyObject_IsTrue(flag);
                Py_DECREF(flag);
                if (finished < 0)
                    return NULL;
            }
        }
        if (!body_needs_trailer(compressing, finished, q))
            Py_RETURN_NONE;
        PyObject *trailer = native ? gzip_write((GzipObject *)gzip_obj, NULL, 1)
                                   : PyObject_CallMethod(gzip_obj, "finish", NULL);
        if (trailer == NULL)
            return NULL;
        return Py_BuildValue("(Nn)", trailer, (Py_ssize_t)0);
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
    PyObject *piece = native ? gzip_write((GzipObject *)gzip_obj, item, last)
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
   writes each as one HTTP chunk with the GIL released the whole time. A sent chunk that
   nobody else references gives its memory back at once (to the buffer pool, for the
   writer's next buffer); the object shells are released with the GIL every few chunks and
   at the end. */

#define PUMP_HELD 32

typedef struct {
    PyObject *item;  /* the queue's reference */
    Py_buffer view;  /* for items that are not Chunks (view.obj set) */
} pump_held;

/* With the GIL: releases what the pump holds. */
static void pump_release(pump_held *held, int *count) {
    for (int i = 0; i < *count; i++) {
        if (held[i].view.obj != NULL)
            PyBuffer_Release(&held[i].view);
        Py_DECREF(held[i].item);
    }
    *count = 0;
}

/* Without the GIL: the memory of a sent chunk only the pump references goes back now. */
static inline void chunk_give_back(ChunkObject *c) {
    char *data = c->data;
    size_t cap = c->cap;
    c->data = NULL;
    c->len = 0;
    c->cap = 0;
    atomic_fetch_sub(&live_chunk_bytes, cap);
    if (c->recycle)
        bw_pool_release(data, cap);
    else
        free(data);
}

/* Without the GIL: gives back the memory of every held chunk that only the pump references.
   The count is read atomically; once it is 1 no other thread holds a reference, so it cannot
   rise again behind our back. Returns how many held items still have their memory (other
   bytes-likes always do: only releasing them, with the GIL, can free it). */
static int pump_give_back(pump_held *held, int count) {
    int kept = 0;
    for (int i = 0; i < count; i++) {
        if (!Py_IS_TYPE(held[i].item, &ChunkType)) { /* bytes-likes: released with the GIL */
            kept++;
            continue;
        }
        ChunkObject *c = (ChunkObject *)held[i].item;
        if (c->data == NULL)
            continue;
#ifdef Py_GIL_DISABLED
        (void)c; /* no single reference count to read: released with the thread attached */
        kept++;
#else
        if (__atomic_load_n(&((PyObject *)c)->ob_refcnt, __ATOMIC_ACQUIRE) == 1)
            chunk_give_back(c);
        else
            kept++;
#endif
    }
    return kept;
}

enum { PUMP_DONE = 0, PUMP_ANSWERED = 1, PUMP_CLOSED = 2 };

/* pump_body(queue, fd, gzip=None, timeout=None) -> (outcome, buffers, body_bytes, pieces,
   wire_bytes). New reference. outcome: 0 the body was sent whole (with the terminating
   chunk), 1 the server answered first (nothing more sent), 2 the consumer side was closed
   (failure or abort). Raises OSError / TimeoutError("timed out") from the socket. */
static PyObject *module_pump_body(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *keywords[] = {"queue", "fd", "gzip", "timeout", NULL};
    PyObject *queue_obj, *gzip_obj = Py_None, *timeout_obj = Py_None;
    int fd;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!i|OO:pump_body", keywords, &QueueType,
                                     &queue_obj, &fd, &gzip_obj, &timeout_obj))
        return NULL;
    if (fd < 0) {
        PyErr_Format(PyExc_ValueError, "fd must be an open socket's descriptor, not %d", fd);
        return NULL;
    }
    GzipObject *gz = NULL;
    if (gzip_obj != Py_None) {
        if (!Py_IS_TYPE(gzip_obj, &GzipType)) {
            PyErr_Format(PyExc_TypeError, "gzip must be a GzipStream or None, not %.100s",
                         Py_TYPE(gzip_obj)->tp_name);
            return NULL;
        }
        gz = (GzipObject *)gzip_obj;
        if (gz->busy || gz->finished) {
            PyErr_SetString(PyExc_ValueError, "gzip stream is in use or already finished");
            return NULL;
        }
    }
    long timeout_ms = -1;
    if (timeout_obj != Py_None) {
        double seconds = PyFloat_AsDouble(timeout_obj);
        if (seconds == -1.0 && PyErr_Occurred())
            return NULL;
        if (!(seconds > 0) || seconds > 1e7) {
            PyErr_SetString(PyExc_ValueError, "timeout must be a positive number of seconds or None");
            return NULL;
        }
        timeout_ms = (long)(seconds * 1000.0 + 0.999);
    }
    bw_hq *q = &((QueueObject *)queue_obj)->q;
    pump_held held[PUMP_HELD];
    int nheld = 0;
    bw_buf out = {NULL, 0, 0};
    size_t buffers = 0, body_bytes = 0, pieces = 0, wire_bytes = 0;
    int outcome = PUMP_DONE, sock_error = 0, py_error = 0, gz_finished = 0;
    bw_gz_result gz_error = BW_GZ_OK;
    if (gz != NULL)
        gz->busy = 1;
    Py_INCREF(queue_obj);

    PyThreadState *ts = PyEval_SaveThread();
    for (;;) {
        void *got = NULL;
        bw_hq_result rc = bw_hq_get(q, &got, WAIT_SLICE_MS);
        if (rc == BW_HQ_TIMEOUT)
            continue;
        if (rc == BW_HQ_CLOSED) {
            if (bw_hq_consumer_closed(q)) {
                outcome = PUMP_CLOSED;
                break;
            }
            /* An answer that came before the end means the server did not take the whole
               body: the terminating chunk would make it look complete. */
            if (bw_peer_answered(fd)) {
                outcome = PUMP_ANSWERED;
                break;
            }
            /* the end: the gzip trailer when the last buffer did not carry it, then the
               terminating chunk (the CRLF ending the previous chunk rides with it) */
            const char *tail = NULL;
            size_t tail_len = 0;
            if (body_needs_trailer(gz != NULL, gz_finished, q)) {
                out.len = 0;
                gz_error = bw_gz_write(gz->gz, NULL, 0, 1, &out);
                if (gz_error != BW_GZ_OK)
                    break;
                gz_finished = 1;
                tail = out.data;
                tail_len = out.len;
            }
            char head[BW_CHUNK_HEAD_MAX];
            size_t head_len = tail_len > 0 ? bw_chunk_head(head, tail_len, pieces > 0) : 0;
            size_t end_len;
            const char *end = bw_chunk_end(pieces > 0 || tail_len > 0, &end_len);
            struct iovec iov[3] = {{head, head_len}, {(void *)tail, tail_len}, {(void *)end, end_len}};
            sock_error = bw_send_all(fd, iov, 3, timeout_ms);
            if (sock_error == 0 && tail_len > 0) {
                pieces++;
                wire_bytes += tail_len;
            }
            break;
        }
        PyObject *item = (PyObject *)got;
        pump_give_back(held, nheld); /* before a send that may block: the bound counts on it */
        pump_held *h = &held[nheld++];
        h->item = item;
        h->view.obj = NULL;
        const char *data;
        size_t len;
        if (Py_IS_TYPE(item, &ChunkType)) {
            data = ((ChunkObject *)item)->data;
            len = (size_t)((ChunkObject *)item)->len;
        } else if (Py_IS_TYPE(item, &PyBytes_Type)) { /* immutable: readable without the GIL */
            data = PyBytes_AS_STRING(item);
            len = (size_t)PyBytes_GET_SIZE(item);
        } else { /* another bytes-like handed over as is: its buffer needs the GIL */
            PyEval_RestoreThread(ts);
            int bad = PyObject_GetBuffer(item, &h->view, PyBUF_SIMPLE);
            ts = PyEval_SaveThread();
            if (bad < 0) {
                h->view.obj = NULL;
                py_error = 1;
                break;
            }
            data = h->view.buf;
            len = (size_t)h->view.len;
        }
        buffers++;
        body_bytes += len;
        const char *payload = data;
        size_t payload_len = len;
        if (gz != NULL) {
            int finish = body_last_buffer(q);
            out.len = 0;
            gz_error = bw_gz_write(gz->gz, data, len, finish, &out);
            if (gz_error != BW_GZ_OK)
                break;
            gz_finished = finish;
            payload = out.data;
            payload_len = out.len;
        }
        if (bw_peer_answered(fd)) {
            outcome = PUMP_ANSWERED;
            break;
        }
        if (payload_len > 0) { /* no empty chunks: an empty one would end the body */
            char head[BW_CHUNK_HEAD_MAX];
            size_t head_len = bw_chunk_head(head, payload_len, pieces > 0);
            struct iovec iov[2] = {{head, head_len}, {(void *)payload, payload_len}};
            sock_error = bw_send_all(fd, iov, 2, timeout_ms);
            if (sock_error != 0)
                break;
            pieces++;
            wire_bytes += payload_len;
        }
        /* Memory that only the pump still references goes back now; the producer may not
           have dropped its own reference to the latest chunk yet, so all held chunks are
           looked at again after each send. Too many that stay referenced elsewhere: their
           shells are released with the GIL, so the memory bound holds. */
        if (pump_give_back(held, nheld) > 1 || nheld == PUMP_HELD) {
            PyEval_RestoreThread(ts);
            pump_release(held, &nheld);
            ts = PyEval_SaveThread();
        }
    }
    PyEval_RestoreThread(ts);

    pump_release(held, &nheld);
    bw_buf_free(&out);
    if (gz != NULL) {
        gz->busy = 0;
        if (gz_finished || gz_error != BW_GZ_OK)
            gz->finished = 1; /* a failed stream cannot continue either */
    }
    Py_DECREF(queue_obj);
    if (py_error)
        return NULL;
    if (gz_error == BW_GZ_NO_MEMORY)
        return PyErr_NoMemory();
    if (gz_error != BW_GZ_OK) {
        PyErr_SetString(PyExc_RuntimeError, "the deflate stream failed");
        return NULL;
    }
    if (sock_error == ETIMEDOUT) {
        PyErr_SetString(PyExc_TimeoutError, "timed out");
        return NULL;
    }
    if (sock_error != 0) {
        errno = sock_error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(innnn)", outcome, (Py_ssize_t)buffers, (Py_ssize_t)body_bytes,
                         (Py_ssize_t)pieces, (Py_ssize_t)wire_bytes);
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

static PyMethodDef bulk_functions[] = {
    {"next_piece", module_next_piece, METH_VARARGS,
     "next_piece(queue, gzip=None) -> (piece, consumed) | None\n\nThe body's next piece for a "
     "consumer (BulkWriter.chunks): the next buffer, compressed when gzip is given (the last "
     "buffer ends the member; a trailer-only piece follows when it could not), waiting with "
     "the GIL released. None at the end or when the consumer side was closed."},
    {"http_chunk", module_http_chunk, METH_O,
     "http_chunk(piece) -> bytes\n\nThe piece (a non-empty bytes-like) as one whole HTTP chunk: "
     "size line, data, CRLF, framed as the body pump frames it (for senders that cannot run the "
     "pump, e.g. TLS). The body then ends with HTTP_LAST_CHUNK."},
    {"pump_body", (PyCFunction)(void (*)(void))module_pump_body, METH_VARARGS | METH_KEYWORDS,
     "pump_body(queue, fd, gzip=None, timeout=None) -> (outcome, buffers, body_bytes, pieces, "
     "wire_bytes)\n\nSend the queue's buffers on the connected socket fd as HTTP chunks "
     "(through gzip when given), with the GIL released, until the producer closes the queue; "
     "then the terminating chunk. outcome: 0 sent whole, 1 the server answered first, 2 the "
     "consumer side was closed."},
    {"_chunk_memory", module_chunk_memory, METH_NOARGS,
     "_chunk_memory() -> (live_bytes, peak_bytes, live_chunks) of Chunk objects."},
    {"_pool_memory", module_pool_memory, METH_NOARGS,
     "_pool_memory() -> (buffers, bytes, writers): what the body buffer pool keeps for reuse."},
    {"_reset_chunk_peak", module_reset_chunk_peak, METH_NOARGS,
     "Restart the peak of live chunk bytes from the current value."},
    {"_chunk_for_testing", module_chunk_for_testing, METH_O,
     "_chunk_for_testing(data) -> Chunk holding a copy of data."},
    {NULL, NULL, 0, NULL},
};

int bw_bulk_add_to_module(PyObject *module) {
    if (PyType_Ready(&ChunkType) < 0 || PyType_Ready(&QueueType) < 0 ||
        PyType_Ready(&GzipType) < 0 || PyType_Ready(&WriterType) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "Chunk", (PyObject *)&ChunkType) < 0 ||
        PyModule_AddObjectRef(module, "HandoverQueue", (PyObject *)&QueueType) < 0 ||
        PyModule_AddObjectRef(module, "GzipStream", (PyObject *)&GzipType) < 0 ||
        PyModule_AddObjectRef(module, "CommandWriter", (PyObject *)&WriterType) < 0 ||
        PyModule_AddIntConstant(module, "HAVE_ISAL", bw_gz_have_isal()) < 0)
        return -1;
    size_t end_len;
    const char *end = bw_chunk_end(0, &end_len);
    PyObject *last_chunk = PyBytes_FromStringAndSize(end, (Py_ssize_t)end_len);
    if (last_chunk == NULL)
        return -1;
    int added = PyModule_AddObjectRef(module, "HTTP_LAST_CHUNK", last_chunk);
    Py_DECREF(last_chunk);
    if (added < 0)
        return -1;
    return PyModule_AddFunctions(module, bulk_functions);
}
