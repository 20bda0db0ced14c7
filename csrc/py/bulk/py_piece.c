/* Piece (a handed-over buffer) and the memory accounting of live pieces. */
#include "py_piece.h"

#include "py_state.h"

#include "buffer_pool.h"
#include "json_array.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Atomic: the body pump gives a sent piece's memory back without the GIL. The peak is
   only written with the GIL held. */
static _Atomic size_t live_piece_bytes, live_pieces;
static size_t peak_piece_bytes;

PyObject *bw_piece_from_memory(char *data, size_t len, size_t cap, int recycle) {
    PyTypeObject *type = bw_state_type(BW_TYPE_PIECE); /* borrowed */
    bw_piece_object *self = type != NULL ? (bw_piece_object *)type->tp_alloc(type, 0) : NULL;
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
    atomic_init(&self->pending, BW_PIECE_SETTLED);
    self->first_run = BW_JSON_RUN_NONE;
    atomic_fetch_add(&live_pieces, 1);
    size_t live = atomic_fetch_add(&live_piece_bytes, cap) + cap;
    if (live > peak_piece_bytes)
        peak_piece_bytes = live;
    return (PyObject *)self;
}

void bw_piece_set_pending(bw_piece_object *piece, size_t first_run) {
    piece->first_run = first_run;
    atomic_store_explicit(&piece->pending,
                          first_run != BW_JSON_RUN_NONE ? BW_PIECE_PENDING : BW_PIECE_SETTLED,
                          memory_order_release);
}

void bw_piece_settle(bw_piece_object *piece) {
    int expected = BW_PIECE_PENDING;
    if (atomic_load_explicit(&piece->pending, memory_order_acquire) == BW_PIECE_SETTLED)
        return;
    if (atomic_compare_exchange_strong_explicit(&piece->pending, &expected, BW_PIECE_SETTLING,
                                                memory_order_acquire, memory_order_acquire)) {
        piece->len = (Py_ssize_t)bw_json_runs_settle(piece->data, (size_t)piece->len,
                                                     piece->first_run);
        piece->first_run = BW_JSON_RUN_NONE;
        atomic_store_explicit(&piece->pending, BW_PIECE_SETTLED, memory_order_release);
        return;
    }
    /* Another thread is writing this piece's text (about a millisecond for a full buffer):
       only a piece that two threads read at once gets here. No lock: the producer and the
       sender settle different pieces at the same time. */
    while (atomic_load_explicit(&piece->pending, memory_order_acquire) != BW_PIECE_SETTLED)
        sched_yield();
}

void bw_piece_give_back(bw_piece_object *piece) {
    char *data = piece->data;
    size_t cap = piece->cap;
    piece->data = NULL;
    piece->len = 0;
    piece->cap = 0;
    atomic_fetch_sub(&live_piece_bytes, cap);
    if (piece->recycle)
        bw_pool_release(data, cap);
    else
        free(data);
}

static void Piece_dealloc(bw_piece_object *self) {
    PyObject_GC_UnTrack(self);
    atomic_fetch_sub(&live_pieces, 1);
    atomic_fetch_sub(&live_piece_bytes, self->cap);
    if (self->recycle)
        bw_pool_release(self->data, self->cap);
    else
        free(self->data);
    bw_heap_free((PyObject *)self);
}

int bw_is_piece(PyObject *obj) {
    return Py_TYPE(obj)->tp_dealloc == (destructor)Piece_dealloc;
}

static int Piece_getbuffer(bw_piece_object *self, Py_buffer *view, int flags) {
    bw_piece_settle(self);
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 1, flags);
}

static Py_ssize_t Piece_length(bw_piece_object *self) {
    bw_piece_settle(self);
    return self->len;
}

/* New reference. */
static PyObject *Piece_repr(bw_piece_object *self) {
    bw_piece_settle(self);
    return PyUnicode_FromFormat("<bulkwire Piece of %zd bytes>", self->len);
}

/* New reference. */
static PyObject *Piece_get_nbytes(bw_piece_object *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->cap);
}

/* New reference. */
static PyObject *Piece_get_address(bw_piece_object *self, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(self->data);
}

static PyGetSetDef Piece_getset[] = {
    {"nbytes", (getter)Piece_get_nbytes, NULL, "Bytes allocated for this piece.", NULL},
    {"address", (getter)Piece_get_address, NULL, "Address of the memory (identity checks).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Piece_slots[] = {
    {Py_tp_doc, "A finished piece of the request body: read-only bytes owned by C, exported\n"
                "through the buffer protocol (memoryview(piece), bytes(piece), "
                "sock.sendall(piece))."},
    {Py_tp_dealloc, Piece_dealloc},
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_repr, Piece_repr},
    {Py_bf_getbuffer, Piece_getbuffer},
    {Py_sq_length, Piece_length},
    {Py_tp_getset, Piece_getset},
    {0, NULL},
};

/* Made by the writer and the streams only: the type cannot be called. */
static PyType_Spec Piece_spec = {
    .name = "bulkwire._core.Piece",
    .basicsize = sizeof(bw_piece_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Piece_slots,
};

/* make_piece(data) -> Piece: a piece holding a copy of data (tests only). New
   reference. */
static PyObject *module_make_piece(PyObject *module, PyObject *arg) {
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
    return bw_piece_from_memory(data, n, n, 0);
}

/* piece_memory() -> (live_bytes, peak_bytes, live_pieces). New reference. */
static PyObject *module_piece_memory(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    return Py_BuildValue("(nnn)", (Py_ssize_t)atomic_load(&live_piece_bytes),
                         (Py_ssize_t)peak_piece_bytes, (Py_ssize_t)atomic_load(&live_pieces));
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
static PyObject *module_reset_piece_peak(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    peak_piece_bytes = atomic_load(&live_piece_bytes);
    Py_RETURN_NONE;
}

/* hold_buffer_pool() -> None (new reference): the body buffer pool keeps its buffers for
   the next writer until release_buffer_pool() (the thread kept for the next insert's body
   holds it while it lives). */
static PyObject *module_hold_buffer_pool(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    bw_pool_hold();
    Py_RETURN_NONE;
}

/* release_buffer_pool() -> None (new reference): ends one hold_buffer_pool(); the last one,
   with no writer alive, frees what the pool keeps. */
static PyObject *module_release_buffer_pool(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    bw_pool_unhold();
    Py_RETURN_NONE;
}

/* pool_holds() -> int (new reference): the holds of the body buffer pool (tests). */
static PyObject *module_pool_holds(PyObject *module, PyObject *args) {
    (void)module;
    (void)args;
    return PyLong_FromSize_t(bw_pool_holds());
}

static PyMethodDef piece_functions[] = {
    {"hold_buffer_pool", module_hold_buffer_pool, METH_NOARGS,
     "hold_buffer_pool() -> None\n\nThe body buffer pool keeps its buffers for the next writer "
     "until release_buffer_pool(), even while no writer is alive."},
    {"release_buffer_pool", module_release_buffer_pool, METH_NOARGS,
     "release_buffer_pool() -> None\n\nEnds one hold_buffer_pool(); the last one, with no writer "
     "alive, frees the buffers the pool keeps."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef piece_test_hooks[] = {
    {"pool_holds", module_pool_holds, METH_NOARGS,
     "pool_holds() -> int: the holds of the body buffer pool (hold_buffer_pool)."},
    {"piece_memory", module_piece_memory, METH_NOARGS,
     "piece_memory() -> (live_bytes, peak_bytes, live_pieces) of Piece objects."},
    {"pool_memory", module_pool_memory, METH_NOARGS,
     "pool_memory() -> (buffers, bytes, writers): what the body buffer pool keeps for reuse."},
    {"reset_piece_peak", module_reset_piece_peak, METH_NOARGS,
     "Restart the peak of live piece bytes from the current value."},
    {"make_piece", module_make_piece, METH_O,
     "make_piece(data) -> Piece holding a copy of data."},
    {NULL, NULL, 0, NULL},
};

int bw_piece_add_to_module(PyObject *module) {
    if (PyModule_AddFunctions(module, piece_functions) < 0)
        return -1;
    return bw_state_add_type(module, BW_TYPE_PIECE, &Piece_spec);
}

int bw_piece_add_test_hooks(PyObject *testing) {
    return PyModule_AddFunctions(testing, piece_test_hooks);
}
