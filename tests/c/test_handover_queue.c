/* The bounded handover queue: FIFO order, the bound, timeouts, both close directions, and a
   producer and a consumer thread passing many items.
   sources: handover_queue.c
   libs: -lpthread */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "handover_queue.h"

#define ITEM(i) ((void *)(uintptr_t)(i))

TEST(fifo_order_and_the_bound) {
    bw_hq q;
    CHECK_EQ(bw_hq_init(&q, 3), 0);
    for (uintptr_t i = 1; i <= 3; i++)
        CHECK_EQ(bw_hq_put(&q, ITEM(i), 10), BW_HQ_OK);
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
    CHECK_EQ(bw_hq_init(&q, 4), 0);
    CHECK_EQ(bw_hq_put(&q, ITEM(7), 10), BW_HQ_OK);
    bw_hq_close_producer(&q);
    void *item = NULL;
    CHECK_EQ(bw_hq_get(&q, &item, 10), BW_HQ_OK);
    CHECK(item == ITEM(7));
    CHECK_EQ(bw_hq_get(&q, &item, 1000), BW_HQ_CLOSED); /* at once, not after the timeout */
    bw_hq_destroy(&q);
}

TEST(consumer_close_refuses_puts_and_leaves_items_to_drain) {
    bw_hq q;
    CHECK_EQ(bw_hq_init(&q, 4), 0);
    CHECK_EQ(bw_hq_put(&q, ITEM(1), 10), BW_HQ_OK);
    CHECK_EQ(bw_hq_put(&q, ITEM(2), 10), BW_HQ_OK);
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
    CHECK_EQ(bw_hq_init(&q, 0), 0);
    CHECK_EQ(bw_hq_put(&q, ITEM(1), 10), BW_HQ_OK);
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
    CHECK_EQ(bw_hq_init(&q, 8), 0);
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, producer, &q), 0);
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
    CHECK_EQ(bw_hq_init(&q, 2), 0);
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, closing_consumer, &q), 0);
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

RUN_TESTS(fifo_order_and_the_bound, wraps_around_the_ring, producer_close_drains_then_reports_closed,
          consumer_close_refuses_puts_and_leaves_items_to_drain, zero_capacity_means_one,
          threads_pass_every_item_in_order, a_blocked_producer_wakes_when_the_consumer_closes)
