/* A bounded FIFO of opaque pointers between one producer and one consumer thread.
   Core layer: no Python. Waits are timed so that callers can drop and retake the GIL,
   run signal handlers and re-check the other side's state between waits.

   A queue belongs to the process that made it (fork_origin.h). In a forked child its lock
   may have been held by a thread that the child does not have, and the other side (the
   parent's sender or producer) is not there: put and get return BW_HQ_INHERITED at once; the
   other functions work on the child's copy without taking the lock, and bw_hq_destroy leaves
   the lock and conditions as they are. */
#ifndef BW_HANDOVER_QUEUE_H
#define BW_HANDOVER_QUEUE_H
#include <pthread.h>
#include <stddef.h>

#include "fork_origin.h"

typedef enum {
    BW_HQ_OK = 0,
    BW_HQ_TIMEOUT = 1, /* nothing happened within the timeout: check state and wait again */
    BW_HQ_CLOSED = 2,  /* put: the consumer is gone; get: the producer finished and all was taken */
    BW_HQ_INHERITED = 3, /* a forked child's copy of the queue: nothing was done */
} bw_hq_result;

/* The fields are private to handover_queue.c (they change under mu): read them through the
   functions below. The struct is public only so that it can be embedded. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_full;
    pthread_cond_t not_empty;
    void **slots;
    size_t cap, head, count;
    size_t peak;             /* the most items ever waiting at once */
    int producer_done;       /* no more puts will come */
    int consumer_closed;     /* no more gets will come: puts fail */
    bw_origin origin;        /* the process that made it */
} bw_hq;

/* 0, or -1 when out of memory / the primitives could not be created. cap >= 1. */
int bw_hq_init(bw_hq *q, size_t cap);
/* Frees the slots; items still inside are the caller's to release first (bw_hq_pop_any). */
void bw_hq_destroy(bw_hq *q);
/* Waits up to timeout_ms for a free slot. On BW_HQ_OK the queue owns item. */
bw_hq_result bw_hq_put(bw_hq *q, void *item, long timeout_ms);
/* Waits up to timeout_ms for an item. BW_HQ_OK sets *item; BW_HQ_CLOSED once the producer
   closed and everything was taken, or the consumer side was closed. */
bw_hq_result bw_hq_get(bw_hq *q, void **item, long timeout_ms);
/* Waits up to timeout_ms for an item, taking nothing: BW_HQ_OK once one waits (the next
   bw_hq_get returns it at once), BW_HQ_CLOSED once nothing more will come (the producer
   closed and everything was taken, or the consumer side was closed). */
bw_hq_result bw_hq_wait(bw_hq *q, long timeout_ms);
/* Takes any waiting item without blocking: 1 and *item, or 0 when empty (for draining). */
int bw_hq_pop_any(bw_hq *q, void **item);
void bw_hq_close_producer(bw_hq *q);
void bw_hq_close_consumer(bw_hq *q);
size_t bw_hq_len(bw_hq *q);
/* 1 in a forked child of the process that made the queue. */
int bw_hq_inherited(const bw_hq *q);

/* The bound given to bw_hq_init. */
size_t bw_hq_capacity(const bw_hq *q);
/* The most items ever waiting at once. */
size_t bw_hq_peak(bw_hq *q);
/* 1 once bw_hq_close_producer / bw_hq_close_consumer was called, else 0. */
int bw_hq_producer_closed(bw_hq *q);
int bw_hq_consumer_closed(bw_hq *q);
/* 1 when the producer has closed and every item was taken: nothing more will come. */
int bw_hq_drained(bw_hq *q);
#endif
