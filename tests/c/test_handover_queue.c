/* The bounded handover queue: FIFO order, the bound, timeouts, both close directions, a
   producer and a consumer thread passing many items, and a forked child's copy, which never
   waits and never takes the lock (its other side and the lock's holder are the parent's).
   sources: handover_queue.c fork_origin.c
   libs: -lpthread */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "fork_child.h"
#include "handover_queue.h"

#define ITEM(i) ((void *)(uintptr_t)(i))

/* Makes q with `capacity` and puts ITEM(1) to ITEM(items) into it. */
static void queue_holding(bw_hq *q, size_t capacity, uintptr_t items) {
    CHECK_EQ(bw_hq_init(q, capacity), 0);
    for (uintptr_t i = 1; i <= items; i++)
        CHECK_EQ(bw_hq_put(q, ITEM(i), 10), BW_HQ_OK);
}

/* Makes q with `capacity` and starts `thread` running fn(q). */
static void queue_with_thread(bw_hq *q, size_t capacity, pthread_t *thread, void *(*fn)(void *)) {
    queue_holding(q, capacity, 0);
    CHECK_EQ(pthread_create(thread, NULL, fn, q), 0);
}

TEST(fifo_order_and_the_bound) {
    bw_hq q;
    queue_holding(&q, 3, 3);
    CHECK_EQ(bw_hq_len(&q), 3);
    /* full: the put times out and the queue does not take the item */
    CHECK_EQ(bw_hq_put(&q, ITEM(4), 20), BW_HQ_TIMEOUT);
    CHECK_EQ(bw_hq_len(&q), 3);
    void *item = NULL;
    for (uintptr_t i = 1; i <= 3; i++) {
        CHECK_EQ(bw_hq_get(&q, &item, 10), BW_HQ_OK);
        CHECK(item == ITEM(i));
    }
    /* empty and still open: the get times out */
    CHECK_EQ(bw_hq_get(&q, &item, 20), BW_HQ_TIMEOUT);
    bw_hq_destroy(&q);
}

TEST(wraps_around_the_ring) {
    bw_hq q;
    CHECK_EQ(bw_hq_init(&q, 2), 0);
    void *item = NULL;
    for (uintptr_t i = 1; i <= 11; i++) {
        CHECK_EQ(bw_hq_put(&q, ITEM(i), 10), BW_HQ_OK);
        CHECK_EQ(bw_hq_get(&q, &item, 10), BW_HQ_OK);
        CHECK(item == ITEM(i));
    }
    bw_hq_destroy(&q);
}

TEST(producer_close_drains_then_reports_closed) {
    bw_hq q;
    queue_holding(&q, 4, 1);
    bw_hq_close_producer(&q);
    void *item = NULL;
    CHECK_EQ(bw_hq_get(&q, &item, 10), BW_HQ_OK);
    CHECK(item == ITEM(1));
    CHECK_EQ(bw_hq_get(&q, &item, 1000), BW_HQ_CLOSED); /* at once, not after the timeout */
    bw_hq_destroy(&q);
}

TEST(consumer_close_refuses_puts_and_leaves_items_to_drain) {
    bw_hq q;
    queue_holding(&q, 4, 2);
    bw_hq_close_consumer(&q);
    CHECK_EQ(bw_hq_put(&q, ITEM(3), 1000), BW_HQ_CLOSED);
    void *item = NULL;
    int drained = 0;
    while (bw_hq_pop_any(&q, &item))
        drained++;
    CHECK_EQ(drained, 2);
    CHECK_EQ(bw_hq_pop_any(&q, &item), 0);
    CHECK_EQ(bw_hq_len(&q), 0);
    bw_hq_destroy(&q);
}

TEST(zero_capacity_means_one) {
    bw_hq q;
    queue_holding(&q, 0, 1);
    CHECK_EQ(bw_hq_put(&q, ITEM(2), 10), BW_HQ_TIMEOUT);
    bw_hq_destroy(&q);
    bw_hq_destroy(&q); /* a second destroy is harmless */
}

enum { PASSED_ITEMS = 20000 };

static void *producer(void *arg) {
    bw_hq *q = arg;
    for (uintptr_t i = 1; i <= PASSED_ITEMS;) {
        int rc = bw_hq_put(q, ITEM(i), 50);
        if (rc == BW_HQ_OK)
            i++;
        else if (rc == BW_HQ_CLOSED)
            break;
    }
    bw_hq_close_producer(q);
    return NULL;
}

TEST(threads_pass_every_item_in_order) {
    bw_hq q;
    pthread_t thread;
    queue_with_thread(&q, 8, &thread, producer);
    uintptr_t expect = 1;
    int out_of_order = 0;
    for (;;) {
        void *item = NULL;
        int rc = bw_hq_get(&q, &item, 50);
        if (rc == BW_HQ_CLOSED)
            break;
        if (rc == BW_HQ_OK)
            out_of_order += item != ITEM(expect++);
    }
    pthread_join(thread, NULL);
    CHECK_EQ(out_of_order, 0);
    CHECK_EQ(expect - 1, PASSED_ITEMS);
    bw_hq_destroy(&q);
}

static void *closing_consumer(void *arg) {
    bw_hq *q = arg;
    void *item;
    for (int taken = 0; taken < 100;)
        if (bw_hq_get(q, &item, 50) == BW_HQ_OK)
            taken++;
    bw_hq_close_consumer(q);
    return NULL;
}

TEST(a_blocked_producer_wakes_when_the_consumer_closes) {
    bw_hq q;
    pthread_t thread;
    queue_with_thread(&q, 2, &thread, closing_consumer);
    int rc = BW_HQ_OK;
    for (uintptr_t i = 1; rc != BW_HQ_CLOSED; i++) {
        /* a long timeout: the close, not the clock, must end the wait */
        rc = bw_hq_put(&q, ITEM(i), 60000);
        CHECK(rc != BW_HQ_TIMEOUT);
        if (rc == BW_HQ_TIMEOUT)
            break;
    }
    pthread_join(thread, NULL);
    void *item;
    while (bw_hq_pop_any(&q, &item)) {
    }
    bw_hq_destroy(&q);
}

/* ---- a forked child's copy ---- */

typedef struct {
    bw_hq *q;
    pthread_mutex_t mu; /* the test's own: holder waits on `go` under it */
    pthread_cond_t cond;
    int holding, go;
} lock_holder;

/* Takes the queue's lock and keeps it until told to let go. */
static void *hold_the_queue_lock(void *arg) {
    lock_holder *h = arg;
    pthread_mutex_lock(&h->q->mu);
    pthread_mutex_lock(&h->mu);
    h->holding = 1;
    pthread_cond_broadcast(&h->cond);
    while (!h->go)
        pthread_cond_wait(&h->cond, &h->mu);
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_unlock(&h->q->mu);
    return NULL;
}

/* In the child: closing the copy both ways (waking a parent's waiter, if any) and
   destroying it return at once. */
static int child_closes_and_destroys_the_copy(void *arg) {
    bw_hq *q = arg;
    bw_hq_close_producer(q);
    bw_hq_close_consumer(q);
    bw_hq_destroy(q);
    return 0;
}

/* In the child, with the queue's lock held by a thread it does not have: every call returns
   at once (put and get refused), and destroying the copy does not touch the lock. */
static int child_uses_a_locked_copy(void *arg) {
    bw_hq *q = arg;
    void *item = NULL;
    if (!bw_hq_inherited(q))
        return 1;
    if (bw_hq_put(q, ITEM(9), 60000) != BW_HQ_INHERITED ||
        bw_hq_get(q, &item, 60000) != BW_HQ_INHERITED)
        return 2;
    if (bw_hq_len(q) != 1 || bw_hq_peak(q) != 1 || bw_hq_drained(q))
        return 3;
    if (!bw_hq_pop_any(q, &item) || item != ITEM(1))
        return 4;
    return child_closes_and_destroys_the_copy(q);
}

TEST(a_child_forked_while_another_thread_holds_the_lock_never_waits_on_it) {
    bw_hq q;
    queue_holding(&q, 2, 1);
    lock_holder h = {.q = &q, .holding = 0, .go = 0};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cond, NULL);
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, hold_the_queue_lock, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.holding)
        pthread_cond_wait(&h.cond, &h.mu);
    pthread_mutex_unlock(&h.mu);
    CHECK_EQ(run_in_child(child_uses_a_locked_copy, &q, 5000), 0);
    pthread_mutex_lock(&h.mu);
    h.go = 1;
    pthread_cond_broadcast(&h.cond);
    pthread_mutex_unlock(&h.mu);
    pthread_join(thread, NULL);
    /* the parent's queue is untouched by the child */
    CHECK(!bw_hq_inherited(&q));
    void *item = NULL;
    CHECK_EQ(bw_hq_get(&q, &item, 0), BW_HQ_OK);
    CHECK(item == ITEM(1));
    bw_hq_destroy(&q);
    pthread_cond_destroy(&h.cond);
    pthread_mutex_destroy(&h.mu);
}

static void *wait_for_an_item(void *arg) {
    void *item = NULL;
    bw_hq_get(arg, &item, 60000);
    return item;
}

TEST(a_child_forked_while_another_thread_waits_on_the_queue_never_blocks) {
    bw_hq q;
    pthread_t thread;
    queue_with_thread(&q, 2, &thread, wait_for_an_item);
    struct timespec step = {0, 20000000L}; /* let the thread reach its wait */
    nanosleep(&step, NULL);
    /* in the child, waking the parent's waiter (the closes) must not block */
    CHECK_EQ(run_in_child(child_closes_and_destroys_the_copy, &q, 5000), 0);
    CHECK_EQ(bw_hq_put(&q, ITEM(7), 0), BW_HQ_OK); /* the parent's waiter gets it */
    void *got = NULL;
    pthread_join(thread, &got);
    CHECK(got == ITEM(7));
    bw_hq_destroy(&q);
}

static void *put_one_later(void *arg) {
    struct timespec step = {0, 20000000L}; /* the other thread is waiting by then, mostly */
    nanosleep(&step, NULL);
    CHECK_EQ(bw_hq_put(arg, ITEM(9), 1000), BW_HQ_OK);
    return NULL;
}

TEST(wait_takes_nothing_and_tells_an_item_from_the_end) {
    bw_hq q;
    CHECK_EQ(bw_hq_init(&q, 2), 0);
    CHECK_EQ(bw_hq_wait(&q, 10), BW_HQ_TIMEOUT); /* empty and open */
    CHECK_EQ(bw_hq_put(&q, ITEM(1), 10), BW_HQ_OK);
    CHECK_EQ(bw_hq_wait(&q, 10), BW_HQ_OK);
    CHECK_EQ(bw_hq_wait(&q, 10), BW_HQ_OK); /* still there: nothing was taken */
    CHECK_EQ(bw_hq_len(&q), 1);
    void *item = NULL;
    CHECK_EQ(bw_hq_get(&q, &item, 0), BW_HQ_OK);
    CHECK(item == ITEM(1));
    /* a put from another thread ends the wait (the long timeout is never reached) */
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, put_one_later, &q), 0);
    CHECK_EQ(bw_hq_wait(&q, 60000), BW_HQ_OK);
    pthread_join(thread, NULL);
    CHECK_EQ(bw_hq_len(&q), 1);
    /* the producer's end: an item still waits, then nothing more comes */
    bw_hq_close_producer(&q);
    CHECK_EQ(bw_hq_wait(&q, 60000), BW_HQ_OK);
    CHECK_EQ(bw_hq_get(&q, &item, 0), BW_HQ_OK);
    CHECK_EQ(bw_hq_wait(&q, 60000), BW_HQ_CLOSED);
    bw_hq_destroy(&q);
    /* the consumer's end, with items waiting */
    CHECK_EQ(bw_hq_init(&q, 2), 0);
    CHECK_EQ(bw_hq_put(&q, ITEM(1), 10), BW_HQ_OK);
    bw_hq_close_consumer(&q);
    CHECK_EQ(bw_hq_wait(&q, 60000), BW_HQ_CLOSED);
    while (bw_hq_pop_any(&q, &item))
        ;
    bw_hq_destroy(&q);
}

RUN_TESTS(wait_takes_nothing_and_tells_an_item_from_the_end, fifo_order_and_the_bound, wraps_around_the_ring, producer_close_drains_then_reports_closed,
          consumer_close_refuses_puts_and_leaves_items_to_drain, zero_capacity_means_one,
          threads_pass_every_item_in_order, a_blocked_producer_wakes_when_the_consumer_closes,
          a_child_forked_while_another_thread_holds_the_lock_never_waits_on_it,
          a_child_forked_while_another_thread_waits_on_the_queue_never_blocks)
