/* The buffer pool: keeps at most BW_POOL_SLOTS buffers and only while a writer is alive,
   hands back the warmest one, grows a recycled buffer that is too small, and serves a child
   forked while another thread was using it.
   sources: buffer_pool.c
   libs: -lpthread */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "buffer_pool.h"
#include "check.h"
#include "fork_child.h"

static void stats(size_t *buffers, size_t *bytes, size_t *users) {
    bw_pool_stats(buffers, bytes, users);
}

TEST(without_a_writer_released_buffers_are_freed) {
    size_t buffers, bytes, users;
    bw_pool_release(malloc(100), 100);
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 0 && bytes == 0 && users == 0);
    bw_pool_release(NULL, 0); /* nothing to keep */
    stats(&buffers, &bytes, &users);
    CHECK_EQ(buffers, 0);
}

TEST(keeps_at_most_the_slots_and_hands_back_the_warmest) {
    size_t buffers, bytes, users, cap;
    bw_pool_retain();
    char *kept[BW_POOL_SLOTS + 2];
    for (int i = 0; i < BW_POOL_SLOTS + 2; i++) {
        kept[i] = bw_pool_acquire(256, &cap);
        CHECK(kept[i] != NULL && cap >= 256);
    }
    for (int i = 0; i < BW_POOL_SLOTS + 2; i++)
        bw_pool_release(kept[i], 256);
    stats(&buffers, &bytes, &users);
    CHECK_EQ(buffers, BW_POOL_SLOTS);
    CHECK_EQ(bytes, BW_POOL_SLOTS * 256);
    CHECK_EQ(users, 1);
    /* the last one kept is the first handed back */
    char *again = bw_pool_acquire(256, &cap);
    CHECK(again == kept[BW_POOL_SLOTS - 1]);
    CHECK_EQ(cap, 256);
    memset(again, 0xab, cap); /* all of it is writable */
    bw_pool_release(again, cap);
    bw_pool_unretain();
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 0 && bytes == 0 && users == 0);
}

TEST(a_small_recycled_buffer_grows) {
    size_t cap;
    bw_pool_retain();
    char *small = bw_pool_acquire(16, &cap);
    CHECK(small != NULL);
    memcpy(small, "0123456789abcdef", 16);
    bw_pool_release(small, 16);
    char *big = bw_pool_acquire(1 << 20, &cap);
    CHECK(big != NULL);
    CHECK_EQ(cap, 1 << 20);
    CHECK(memcmp(big, "0123456789abcdef", 16) == 0); /* realloc'd, not replaced */
    memset(big, 0, cap);
    free(big);
    bw_pool_unretain();
}

TEST(retains_nest) {
    size_t buffers, bytes, users, cap;
    bw_pool_retain();
    bw_pool_retain();
    bw_pool_release(bw_pool_acquire(64, &cap), 64);
    bw_pool_unretain();
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 1 && users == 1); /* a writer is still alive */
    bw_pool_unretain();
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 0 && users == 0);
    bw_pool_unretain(); /* more ends than starts: no underflow */
    stats(&buffers, &bytes, &users);
    CHECK_EQ(users, 0);
}

static volatile int churning;

/* Another thread's work: the pool's lock taken and released all the time. */
static void *churn(void *unused) {
    (void)unused;
    size_t cap;
    while (churning)
        bw_pool_release(bw_pool_acquire(256, &cap), 256);
    return NULL;
}

/* In the child: a writer of its own takes and gives back buffers. */
static int child_uses_the_pool(void *unused) {
    (void)unused;
    size_t cap;
    bw_pool_retain();
    char *data = bw_pool_acquire(256, &cap);
    if (data == NULL)
        return 1;
    bw_pool_release(data, cap);
    bw_pool_unretain();
    return 0;
}

TEST(a_child_forked_while_another_thread_uses_the_pool_can_use_it) {
    /* The churning thread holds the pool's lock about half of the time: without the fork
       handlers, a fork from this thread would leave some child with a copy of the lock that
       nobody can release. */
    bw_pool_retain();
    churning = 1;
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, churn, NULL), 0);
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++)
        hung = run_in_child(child_uses_the_pool, NULL, 5000) != 0;
    churning = 0;
    pthread_join(thread, NULL);
    CHECK_EQ(hung, 0);
    bw_pool_unretain();
}

RUN_TESTS(without_a_writer_released_buffers_are_freed,
          keeps_at_most_the_slots_and_hands_back_the_warmest, a_small_recycled_buffer_grows,
          retains_nest, a_child_forked_while_another_thread_uses_the_pool_can_use_it)
