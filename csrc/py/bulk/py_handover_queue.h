/* HandoverQueue: the bounded queue between the producer and the consumer of a body, its
   blocking waits done with the GIL released. */
#ifndef BW_PY_HANDOVER_QUEUE_H
#define BW_PY_HANDOVER_QUEUE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>

#include "handover_queue.h"

/* How long a blocked put/get sleeps before it retakes the GIL to run signal handlers and
   look at the other side's state again. */
#define BW_WAIT_SLICE_MS 100

typedef struct {
    PyObject_HEAD
    bw_hq q;
    int ready;
    size_t waits; /* puts that found the queue full (changed with the GIL held) */
    /* What the body pump took from the queue (buffers, their bytes) and sent (pieces, their
       payload bytes), added as it goes, without the GIL: any thread may read them at any
       time (bw_queue_count_*). */
    _Atomic size_t taken_buffers, taken_bytes, sent_pieces, sent_bytes;
} bw_queue_object;

/* The consumer took a buffer of len bytes from the queue. Any thread, GIL or not. */
static inline void bw_queue_count_taken(bw_queue_object *queue, size_t len) {
    atomic_fetch_add_explicit(&queue->taken_buffers, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&queue->taken_bytes, len, memory_order_relaxed);
}

/* The consumer sent a piece whose payload is len bytes. Any thread, GIL or not. */
static inline void bw_queue_count_sent(bw_queue_object *queue, size_t len) {
    atomic_fetch_add_explicit(&queue->sent_pieces, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&queue->sent_bytes, len, memory_order_relaxed);
}

/* 1 when obj is a HandoverQueue (the type has no subclass), known without a lookup. */
int bw_is_queue(PyObject *obj);

/* Queues item (the queue takes a reference of its own), waiting for a free slot with the GIL
   released and running signal handlers between waits. 1 queued; 0 the consumer has closed
   the queue (item not kept); -1 with the exception a signal handler raised (Ctrl-C), or
   with RuntimeError in a forked child of the process that made the queue (not kept). */
int bw_queue_put(bw_queue_object *queue, PyObject *item);

/* As bw_queue_put, but the caller's reference to item is given away whatever the outcome:
   once queued, the queue's reference is the only one, so a consumer that finished with the
   item can free its memory at once, without waiting for the producer to run again. */
int bw_queue_put_steal(bw_queue_object *queue, PyObject *item);

/* New reference: the next item, or None once the producer has closed and everything was
   taken (or the consumer side was closed). Waits with the GIL released; NULL with the
   exception a signal handler raised, or with RuntimeError in a forked child of the process
   that made the queue. */
PyObject *bw_queue_get(bw_queue_object *queue);

/* Sets the RuntimeError of a queue used in a forked child of the process that made it (its
   producer, its consumer and its lock are that process's) and returns NULL. */
PyObject *bw_queue_raise_inherited(void);

/* Adds HandoverQueue. 0, or -1 with an exception set. */
int bw_queue_add_to_module(PyObject *module);
#endif
