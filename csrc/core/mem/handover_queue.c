#define _POSIX_C_SOURCE 200809L
#include "handover_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int bw_hq_init(bw_hq *q, size_t cap) {
    q->slots = calloc(cap ? cap : 1, sizeof *q->slots);
    if (q->slots == NULL)
        return -1;
    q->cap = cap ? cap : 1;
    q->head = q->count = q->peak = 0;
    q->producer_done = q->consumer_closed = 0;
    bw_origin_record(&q->origin);
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        goto fail_slots;
    /* timed waits against the monotonic clock: wall-clock jumps must not stall a put */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto fail_attr;
    if (pthread_cond_init(&q->not_full, &attr) != 0)
        goto fail_mu;
    if (pthread_cond_init(&q->not_empty, &attr) != 0)
        goto fail_full;
    pthread_condattr_destroy(&attr);
    return 0;
fail_full:
    pthread_cond_destroy(&q->not_full);
fail_mu:
    pthread_mutex_destroy(&q->mu);
fail_attr:
    pthread_condattr_destroy(&attr);
fail_slots:
    free(q->slots);
    q->slots = NULL;
    return -1;
}

int bw_hq_inherited(const bw_hq *q) { return bw_origin_inherited(&q->origin); }

/* The lock and the wake-ups, in the process that made the queue. A forked child's copy is
   used without them: its lock may be held, and its conditions waited on, by threads the child
   does not have (signalling such a condition can block). */
static void lock(bw_hq *q) {
    if (!bw_hq_inherited(q))
        pthread_mutex_lock(&q->mu);
}

static void unlock(bw_hq *q) {
    if (!bw_hq_inherited(q))
        pthread_mutex_unlock(&q->mu);
}

static void wake_one(bw_hq *q, pthread_cond_t *cond) {
    if (!bw_hq_inherited(q))
        pthread_cond_signal(cond);
}

static void wake_all(bw_hq *q, pthread_cond_t *cond) {
    if (!bw_hq_inherited(q))
        pthread_cond_broadcast(cond);
}

void bw_hq_destroy(bw_hq *q) {
    if (q->slots == NULL)
        return;
    if (!bw_hq_inherited(q)) { /* a child's copy may be locked: destroying it is undefined */
        pthread_cond_destroy(&q->not_empty);
        pthread_cond_destroy(&q->not_full);
        pthread_mutex_destroy(&q->mu);
    }
    free(q->slots);
    q->slots = NULL;
}

static void deadline_after(struct timespec *ts, long timeout_ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

bw_hq_result bw_hq_put(bw_hq *q, void *item, long timeout_ms) {
    struct timespec deadline;
    bw_hq_result rc = BW_HQ_OK;
    if (bw_hq_inherited(q))
        return BW_HQ_INHERITED; /* the consumer is the parent's: a wait would never end */
    deadline_after(&deadline, timeout_ms);
    pthread_mutex_lock(&q->mu);
    while (!q->consumer_closed && q->count == q->cap) {
        if (pthread_cond_timedwait(&q->not_full, &q->mu, &deadline) == ETIMEDOUT) {
            rc = BW_HQ_TIMEOUT;
            break;
        }
    }
    if (q->consumer_closed) {
        rc = BW_HQ_CLOSED;
    } else if (rc == BW_HQ_OK) {
        q->slots[(q->head + q->count) % q->cap] = item;
        q->count++;
        if (q->count > q->peak)
            q->peak = q->count;
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* With q->mu held: waits up to timeout_ms until an item waits or nothing more will come.
   BW_HQ_OK when that happened, BW_HQ_TIMEOUT when not (the caller looks at the queue). */
static bw_hq_result wait_not_empty(bw_hq *q, long timeout_ms) {
    struct timespec deadline;
    deadline_after(&deadline, timeout_ms);
    while (q->count == 0 && !q->producer_done && !q->consumer_closed) {
        if (pthread_cond_timedwait(&q->not_empty, &q->mu, &deadline) == ETIMEDOUT)
            return BW_HQ_TIMEOUT;
    }
    return BW_HQ_OK;
}

bw_hq_result bw_hq_wait(bw_hq *q, long timeout_ms) {
    if (bw_hq_inherited(q))
        return BW_HQ_INHERITED; /* the producer is the parent's */
    pthread_mutex_lock(&q->mu);
    bw_hq_result rc = wait_not_empty(q, timeout_ms);
    if (q->consumer_closed || (q->count == 0 && q->producer_done))
        rc = BW_HQ_CLOSED;
    else if (q->count > 0)
        rc = BW_HQ_OK;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

bw_hq_result bw_hq_get(bw_hq *q, void **item, long timeout_ms) {
    if (bw_hq_inherited(q))
        return BW_HQ_INHERITED; /* the producer is the parent's */
    pthread_mutex_lock(&q->mu);
    bw_hq_result rc = wait_not_empty(q, timeout_ms);
    if (q->count > 0) {
        rc = BW_HQ_OK;
        *item = q->slots[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        pthread_cond_signal(&q->not_full);
    } else if (q->producer_done || q->consumer_closed) {
        rc = BW_HQ_CLOSED;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int bw_hq_pop_any(bw_hq *q, void **item) {
    int got = 0;
    lock(q);
    if (q->count > 0) {
        *item = q->slots[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        got = 1;
        wake_one(q, &q->not_full);
    }
    unlock(q);
    return got;
}

void bw_hq_close_producer(bw_hq *q) {
    lock(q);
    q->producer_done = 1;
    wake_all(q, &q->not_empty);
    unlock(q);
}

void bw_hq_close_consumer(bw_hq *q) {
    lock(q);
    q->consumer_closed = 1;
    wake_all(q, &q->not_full);
    wake_all(q, &q->not_empty);
    unlock(q);
}

/* The fields the accessors report, read together under the lock. */
typedef struct {
    size_t count, peak;
    int producer_done, consumer_closed;
} hq_snapshot;

static hq_snapshot snapshot(bw_hq *q) {
    lock(q);
    hq_snapshot s = {q->count, q->peak, q->producer_done, q->consumer_closed};
    unlock(q);
    return s;
}

size_t bw_hq_len(bw_hq *q) { return snapshot(q).count; }

/* The bound never changes after bw_hq_init: no lock. */
size_t bw_hq_capacity(const bw_hq *q) { return q->cap; }

size_t bw_hq_peak(bw_hq *q) { return snapshot(q).peak; }

int bw_hq_producer_closed(bw_hq *q) { return snapshot(q).producer_done; }

int bw_hq_consumer_closed(bw_hq *q) { return snapshot(q).consumer_closed; }

int bw_hq_drained(bw_hq *q) {
    hq_snapshot s = snapshot(q);
    return s.producer_done && s.count == 0;
}
