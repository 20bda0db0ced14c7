/* HandoverQueue: the binding of the core queue (handover_queue.c). */
#include "py_handover_queue.h"

#include "py_fork_origin.h"
#include "py_state.h"

PyObject *bw_queue_raise_inherited(void) {
    return bw_raise_inherited("this HandoverQueue", "its producer, its consumer and its lock");
}

/* 0, or -1 with RuntimeError in a forked child of the process that made the queue. */
static int queue_check_origin(bw_queue_object *self) {
    if (!bw_hq_inherited(&self->q))
        return 0;
    bw_queue_raise_inherited();
    return -1;
}

/* New reference. */
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
    bw_queue_object *self = (bw_queue_object *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (bw_hq_init(&self->q, (size_t)maxsize) < 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    atomic_init(&self->taken_buffers, 0);
    atomic_init(&self->taken_bytes, 0);
    atomic_init(&self->sent_pieces, 0);
    atomic_init(&self->sent_bytes, 0);
    self->ready = 1;
    return (PyObject *)self;
}

static void queue_release_items(bw_queue_object *self) {
    void *item;
    while (bw_hq_pop_any(&self->q, &item))
        Py_DECREF((PyObject *)item);
}

static void Queue_dealloc(bw_queue_object *self) {
    PyObject_GC_UnTrack(self);
    if (self->ready) {
        queue_release_items(self);
        bw_hq_destroy(&self->q);
    }
    bw_heap_free((PyObject *)self);
}

int bw_is_queue(PyObject *obj) {
    return Py_TYPE(obj)->tp_dealloc == (destructor)Queue_dealloc;
}

int bw_queue_put(bw_queue_object *queue, PyObject *item) {
    Py_INCREF(item); /* the queue's reference, if it takes the item */
    return bw_queue_put_steal(queue, item);
}

int bw_queue_put_steal(bw_queue_object *queue, PyObject *item) {
    int waited = 0;
    for (;;) {
        /* fast path: a free slot, no GIL round trip */
        bw_hq_result rc = bw_hq_put(&queue->q, item, 0);
        if (rc == BW_HQ_TIMEOUT) {
            if (!waited)
                queue->waits++;
            waited = 1;
            Py_BEGIN_ALLOW_THREADS
            rc = bw_hq_put(&queue->q, item, BW_WAIT_SLICE_MS);
            Py_END_ALLOW_THREADS
        }
        if (rc == BW_HQ_OK)
            return 1;
        if (rc == BW_HQ_CLOSED) {
            Py_DECREF(item);
            return 0;
        }
        if (rc == BW_HQ_INHERITED) {
            Py_DECREF(item);
            bw_queue_raise_inherited();
            return -1;
        }
        if (PyErr_CheckSignals() < 0) {
            Py_DECREF(item);
            return -1;
        }
    }
}

PyObject *bw_queue_get(bw_queue_object *queue) {
    for (;;) {
        void *item = NULL;
        bw_hq_result rc = bw_hq_get(&queue->q, &item, 0);
        if (rc == BW_HQ_TIMEOUT) {
            Py_BEGIN_ALLOW_THREADS
            rc = bw_hq_get(&queue->q, &item, BW_WAIT_SLICE_MS);
            Py_END_ALLOW_THREADS
        }
        if (rc == BW_HQ_OK)
            return (PyObject *)item; /* the queue's reference becomes the caller's */
        if (rc == BW_HQ_CLOSED)
            Py_RETURN_NONE;
        if (rc == BW_HQ_INHERITED)
            return bw_queue_raise_inherited();
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
}

/* wait() -> bool. Waits, with the GIL released, until an item waits (True: the next get()
   returns it at once) or nothing more will come (False), taking nothing. */
static PyObject *Queue_wait(bw_queue_object *self, PyObject *unused) {
    (void)unused;
    for (;;) {
        bw_hq_result rc = bw_hq_wait(&self->q, 0);
        if (rc == BW_HQ_TIMEOUT) {
            Py_BEGIN_ALLOW_THREADS
            rc = bw_hq_wait(&self->q, BW_WAIT_SLICE_MS);
            Py_END_ALLOW_THREADS
        }
        if (rc == BW_HQ_OK)
            Py_RETURN_TRUE;
        if (rc == BW_HQ_CLOSED)
            Py_RETURN_FALSE;
        if (rc == BW_HQ_INHERITED)
            return bw_queue_raise_inherited();
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
}

/* put(item) -> bool. New reference. True once queued; False when the consumer has closed
   the queue (the item is then not kept). Ctrl-C raises KeyboardInterrupt while waiting. */
static PyObject *Queue_put(bw_queue_object *self, PyObject *item) {
    int taken = bw_queue_put(self, item);
    if (taken < 0)
        return NULL;
    return PyBool_FromLong(taken);
}

/* get() -> item | None. New reference. */
static PyObject *Queue_get(bw_queue_object *self, PyObject *unused) {
    (void)unused;
    return bw_queue_get(self);
}

/* New reference (None). */
static PyObject *Queue_close_producer(bw_queue_object *self, PyObject *unused) {
    (void)unused;
    if (queue_check_origin(self) < 0)
        return NULL;
    bw_hq_close_producer(&self->q);
    Py_RETURN_NONE;
}

/* The consumer is gone: waiting and future puts return False; waiting items are released.
   New reference (None). */
static PyObject *Queue_close_consumer(bw_queue_object *self, PyObject *unused) {
    (void)unused;
    if (queue_check_origin(self) < 0)
        return NULL;
    bw_hq_close_consumer(&self->q);
    queue_release_items(self);
    Py_RETURN_NONE;
}

static Py_ssize_t Queue_length(bw_queue_object *self) { return (Py_ssize_t)bw_hq_len(&self->q); }

/* The getset closure of each HandoverQueue attribute. */
typedef enum {
    QUEUE_MAXSIZE,
    QUEUE_PEAK,
    QUEUE_WAITS,
    QUEUE_PRODUCER_CLOSED,
    QUEUE_CONSUMER_CLOSED,
    QUEUE_DRAINED,
    QUEUE_TAKEN_BUFFERS,
    QUEUE_TAKEN_BYTES,
    QUEUE_SENT_PIECES,
    QUEUE_SENT_BYTES,
} queue_field;

/* New reference. */
static PyObject *Queue_get_field(bw_queue_object *self, void *closure) {
    switch ((queue_field)(intptr_t)closure) {
    case QUEUE_MAXSIZE: return PyLong_FromSize_t(bw_hq_capacity(&self->q));
    case QUEUE_PEAK: return PyLong_FromSize_t(bw_hq_peak(&self->q));
    case QUEUE_WAITS: return PyLong_FromSize_t(self->waits);
    case QUEUE_PRODUCER_CLOSED: return PyBool_FromLong(bw_hq_producer_closed(&self->q));
    case QUEUE_CONSUMER_CLOSED: return PyBool_FromLong(bw_hq_consumer_closed(&self->q));
    case QUEUE_DRAINED: return PyBool_FromLong(bw_hq_drained(&self->q));
    case QUEUE_TAKEN_BUFFERS:
        return PyLong_FromSize_t(atomic_load_explicit(&self->taken_buffers, memory_order_relaxed));
    case QUEUE_TAKEN_BYTES:
        return PyLong_FromSize_t(atomic_load_explicit(&self->taken_bytes, memory_order_relaxed));
    case QUEUE_SENT_PIECES:
        return PyLong_FromSize_t(atomic_load_explicit(&self->sent_pieces, memory_order_relaxed));
    case QUEUE_SENT_BYTES:
        return PyLong_FromSize_t(atomic_load_explicit(&self->sent_bytes, memory_order_relaxed));
    }
    Py_UNREACHABLE();
}

static PyMethodDef Queue_methods[] = {
    {"put", (PyCFunction)Queue_put, METH_O,
     "put(item) -> bool\n\nQueue item, waiting for a free slot with the GIL released. False "
     "when the consumer closed the queue. Ctrl-C interrupts the wait."},
    {"get", (PyCFunction)Queue_get, METH_NOARGS,
     "get() -> item | None\n\nThe next item, waiting with the GIL released; None at the end."},
    {"wait", (PyCFunction)Queue_wait, METH_NOARGS,
     "wait() -> bool\n\nWaits, with the GIL released, until an item waits (True: get() returns "
     "it at once) or nothing more will come (False); takes nothing. Ctrl-C interrupts the wait."},
    {"close_producer", (PyCFunction)Queue_close_producer, METH_NOARGS,
     "No more items will be put: get() returns None once the queue is empty."},
    {"close_consumer", (PyCFunction)Queue_close_consumer, METH_NOARGS,
     "No more items will be taken: put() returns False, waiting items are dropped."},
    {NULL, NULL, 0, NULL},
};

#define QUEUE_FIELD(name, doc, which) \
    {name, (getter)Queue_get_field, NULL, doc, (void *)(intptr_t)(which)}
static PyGetSetDef Queue_getset[] = {
    QUEUE_FIELD("maxsize", "The bound.", QUEUE_MAXSIZE),
    QUEUE_FIELD("peak", "Most items ever waiting at once.", QUEUE_PEAK),
    QUEUE_FIELD("waits", "Puts that found the queue full.", QUEUE_WAITS),
    QUEUE_FIELD("producer_closed", "close_producer() was called.", QUEUE_PRODUCER_CLOSED),
    QUEUE_FIELD("consumer_closed", "close_consumer() was called.", QUEUE_CONSUMER_CLOSED),
    QUEUE_FIELD("drained", "Producer closed and nothing left.", QUEUE_DRAINED),
    QUEUE_FIELD("taken_buffers", "Buffers the body pump took so far (live).",
                QUEUE_TAKEN_BUFFERS),
    QUEUE_FIELD("taken_bytes", "Their bytes (live).", QUEUE_TAKEN_BYTES),
    QUEUE_FIELD("sent_pieces", "Pieces the body pump sent so far (live).", QUEUE_SENT_PIECES),
    QUEUE_FIELD("sent_bytes", "Their payload bytes, compressed when compressing (live).",
                QUEUE_SENT_BYTES),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Queue_slots[] = {
    {Py_tp_doc, "HandoverQueue(maxsize=8)\n\nA bounded queue between one producer and one consumer "
                "thread; blocking waits release the GIL."},
    {Py_tp_new, Queue_new},
    {Py_tp_dealloc, Queue_dealloc},
    /* its type only: the items waiting inside are behind the core queue's lock, which the
       consumer's thread takes without the GIL (a piece refers to nothing) */
    {Py_tp_traverse, bw_heap_traverse_type},
    {Py_tp_methods, Queue_methods},
    {Py_tp_getset, Queue_getset},
    {Py_sq_length, Queue_length},
    {0, NULL},
};

static PyType_Spec Queue_spec = {
    .name = "bulkwire._core.HandoverQueue",
    .basicsize = sizeof(bw_queue_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Queue_slots,
};

int bw_queue_add_to_module(PyObject *module) {
    return bw_state_add_type(module, BW_TYPE_HANDOVER_QUEUE, &Queue_spec);
}
