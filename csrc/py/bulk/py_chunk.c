/* Chunk (a handed-over buffer) and the memory accounting of live chunks. */
#include "py_chunk.h"

#include "buffer_pool.h"
#include "json_array.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Atomic: the body pump gives a sent chunk's memory back without the GIL. The peak is
   only written with the GIL held. */
static _Atomic size_t live_chunk_bytes, live_chunks;
static size_t peak_chunk_bytes;

PyObject *bw_chunk_from_memory(char *data, size_t len, size_t cap, int recycle) {
    bw_chunk_object *self = PyObject_New(bw_chunk_object, &bw_chunk_type);
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
    atomic_init(&self->pending, BW_CHUNK_SETTLED);
    self->first_run = BW_JSON_RUN_NONE;
    atomic_fetch_add(&live_chunks, 1);
    size_t live = atomic_fetch_add(&live_chunk_bytes, cap) + cap;
    if (live > peak_chunk_bytes)
        peak_chunk_bytes = live;
    return (PyObject *)self;
}

void bw_chunk_set_pending(bw_chunk_object *chunk, size_t first_run) {
    chunk->first_run = first_run;
    atomic_store_explicit(&chunk->pending,
                          first_run != BW_JSON_RUN_NONE ? BW_CHUNK_PENDING : BW_CHUNK_SETTLED,
                          memory_order_release);
}

void bw_chunk_settle(bw_chunk_object *chunk) {
    int expected = BW_CHUNK_PENDING;
    if (atomic_load_explicit(&chunk->pending, memory_order_acquire) == BW_CHUNK_SETTLED)
        return;
    if (atomic_compare_exchange_strong_explicit(&chunk->pending, &expected, BW_CHUNK_SETTLING,
                                                memory_order_acquire, memory_order_acquire)) {
        chunk->len = (Py_ssize_t)bw_json_runs_settle(chunk->data, (size_t)chunk->len,
                                                     chunk->first_run);
        chunk->first_run = BW_JSON_RUN_NONE;
        atomic_store_explicit(&chunk->pending, BW_CHUNK_SETTLED, memory_order_release);
        return;
    }
    /* Another thread is writing this chunk's text (about a millisecond for a full buffer):
       only a chunk that two threads read at once gets here. No lock: the producer and the
       sender settle different chunks at the same time. */
    while (atomic_load_explicit(&chunk->pending, memory_order_acquire) != BW_CHUNK_SETTLED)
        sched_yield();
}

void bw_chunk_give_back(bw_chunk_object *chunk) {
    char *data = chunk->data;
    size_t cap = chunk->cap;
    chunk->data = NULL;
    chunk->len = 0;
    chunk->cap = 0;
    atomic_fetch_sub(&live_chunk_bytes, cap);
    if (chunk->recycle)
        bw_pool_release(data, cap);
    else
        free(data);
}

static void Chunk_dealloc(bw_chunk_object *self) {
    atomic_fetch_sub(&live_chunks, 1);
    atomic_fetch_sub(&live_chunk_bytes, self->cap);
    if (self->recycle)
        bw_pool_release(self->data, self->cap);
    else
        free(self->data);
    PyObject_Free(self);
}

static int Chunk_getbuffer(bw_chunk_object *self, Py_buffer *view, int flags) {
    bw_chunk_settle(self);
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 1, flags);
}

static Py_ssize_t Chunk_length(bw_chunk_object *self) {
    bw_chunk_settle(self);
    return self->len;
}

/* New reference. */
static PyObject *Chunk_repr(bw_chunk_object *self) {
    bw_chunk_settle(self);
    return PyUnicode_FromFormat("<bulkwire Chunk of %zd bytes>", self->len);
}

/* New reference. */
static PyObject *Chunk_get_nbytes(bw_chunk_object *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->cap);
}

/* New reference. */
static PyObject *Chunk_get_address(bw_chunk_object *self, void *closure) {
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

PyTypeObject bw_chunk_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bulkwire._core.Chunk",
    .tp_basicsize = sizeof(bw_chunk_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A finished piece of the request body: read-only bytes owned by C, exported\n"
              "through the buffer protocol (memoryview(chunk), bytes(chunk), sock.sendall(chunk)).",
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_repr = (reprfunc)Chunk_repr,
    .tp_as_buffer = &Chunk_as_buffer,
    .tp_as_sequence = &Chunk_as_sequence,
    .tp_getset = Chunk_getset,
};

/* make_chunk(data) -> Chunk: a chunk holding a copy of data (tests only). New
   reference. */
static PyObject *module_make_chunk(PyObject *module, PyObject *arg) {
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
    return bw_chunk_from_memory(data, n, n, 0);
}

/* _chunk_memory() -> (live_bytes, peak_bytes, live_chunks). New reference. */
static PyObject *module_chunk_memory(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    return Py_BuildValue("(nnn)", (Py_ssize_t)atomic_load(&live_chunk_bytes),
                         (Py_ssize_t)peak_chunk_bytes, (Py_ssize_t)atomic_load(&live_chunks));
}

/* pool_memory() -> (buffers, bytes, writers): what the buffer pool holds for reuse, and the
   writers alive (the pool keeps nothing without one). New reference. */
static PyObject *module_pool_memory(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    size_t buffers, bytes, writers;
    bw_pool_stats(&buffers, &bytes, &writers);
    return Py_BuildValue("(nnn)", (Py_ssize_t)buffers, (Py_ssize_t)bytes, (Py_ssize_t)writers);
}

/* New reference (None). */
static PyObject *module_reset_chunk_peak(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    peak_chunk_bytes = atomic_load(&live_chunk_bytes);
    Py_RETURN_NONE;
}

static PyMethodDef chunk_test_hooks[] = {
    {"chunk_memory", module_chunk_memory, METH_NOARGS,
     "chunk_memory() -> (live_bytes, peak_bytes, live_chunks) of Chunk objects."},
    {"pool_memory", module_pool_memory, METH_NOARGS,
     "pool_memory() -> (buffers, bytes, writers): what the body buffer pool keeps for reuse."},
    {"reset_chunk_peak", module_reset_chunk_peak, METH_NOARGS,
     "Restart the peak of live chunk bytes from the current value."},
    {"make_chunk", module_make_chunk, METH_O,
     "make_chunk(data) -> Chunk holding a copy of data."},
    {NULL, NULL, 0, NULL},
};

int bw_chunk_add_to_module(PyObject *module) {
    if (PyType_Ready(&bw_chunk_type) < 0 ||
        PyModule_AddObjectRef(module, "Chunk", (PyObject *)&bw_chunk_type) < 0)
        return -1;
    return 0;
}

int bw_chunk_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, chunk_test_hooks);
}
