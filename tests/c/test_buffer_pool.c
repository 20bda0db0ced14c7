/* The buffer pools. The body pool keeps at most BW_POOL_SLOTS buffers and only while a
   writer is alive, hands back the warmest one, grows a recycled buffer that is too small, and
   serves a child forked while another thread was using it. The page pool keeps buffers with
   no user alive, within its slots and its bytes, and hands back the smallest that fits.
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

TEST(a_hold_keeps_buffers_without_a_writer) {
    size_t buffers, bytes, users, cap;
    bw_pool_hold();
    bw_pool_release(bw_pool_acquire(64, &cap), 64);
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 1 && users == 0); /* held: kept with no writer */
    bw_pool_retain();
    bw_pool_unhold();
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 1 && users == 1); /* a writer is alive */
    bw_pool_unretain();
    stats(&buffers, &bytes, &users);
    CHECK(buffers == 0 && users == 0); /* neither: freed */
    bw_pool_unhold(); /* more ends than starts: no underflow */
    CHECK_EQ(bw_pool_holds(), 0);
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

/* 200 children forked while another thread runs `churner`, each running `child`: how many
   did not finish (hung on a lock copied held, or failed). The churning thread holds a pool's
   lock about half of the time: without the fork handlers, some child would get a copy of
   the lock that nobody can release. */
static int children_forked_while_churning(void *(*churner)(void *), int (*child)(void *)) {
    churning = 1;
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, churner, NULL), 0);
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++)
        hung = run_in_child(child, NULL, 5000) != 0;
    churning = 0;
    pthread_join(thread, NULL);
    return hung;
}

TEST(a_child_forked_while_another_thread_uses_the_pool_can_use_it) {
    bw_pool_retain();
    CHECK_EQ(children_forked_while_churning(churn, child_uses_the_pool), 0);
    bw_pool_unretain();
}

static void page_stats(size_t *buffers, size_t *bytes, size_t *reused) {
    bw_page_buffer_stats(buffers, bytes, reused);
}

#define PAGE_SIZED(n) (BW_PAGE_POOL_SMALLEST + (n))

TEST(the_page_pool_keeps_buffers_with_no_user_and_hands_back_the_smallest_that_fits) {
    size_t buffers, bytes, reused, reused_before, cap;
    page_stats(&buffers, &bytes, &reused_before);
    CHECK(buffers == 0 && bytes == 0);
    char *small = bw_page_buffer_acquire(PAGE_SIZED(1000), &cap);
    char *large = bw_page_buffer_acquire(PAGE_SIZED(5000), &cap);
    CHECK(small != NULL && large != NULL);
    bw_page_buffer_release(large, PAGE_SIZED(5000));
    bw_page_buffer_release(small, PAGE_SIZED(1000));
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 2 && bytes == PAGE_SIZED(5000) + PAGE_SIZED(1000));
    CHECK_EQ(reused, reused_before);
    /* the larger holds it, the warmer smaller one does not */
    char *got = bw_page_buffer_acquire(PAGE_SIZED(2000), &cap);
    CHECK(got == large && cap == PAGE_SIZED(5000));
    memset(got, 1, cap);
    bw_page_buffer_release(got, cap);
    /* both hold it: the smaller is handed back */
    got = bw_page_buffer_acquire(PAGE_SIZED(800), &cap);
    CHECK(got == small && cap == PAGE_SIZED(1000));
    bw_page_buffer_release(got, cap);
    /* more than any holds: the largest, grown */
    got = bw_page_buffer_acquire(PAGE_SIZED(9000), &cap);
    CHECK(got != NULL && cap == PAGE_SIZED(9000));
    memset(got, 2, cap);
    bw_page_buffer_release(got, cap);
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 2 && bytes == PAGE_SIZED(1000) + PAGE_SIZED(9000));
    CHECK_EQ(reused, reused_before + 3);
    bw_page_buffer_limit(0); /* keeps nothing, and frees what it held */
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 0 && bytes == 0);
    bw_page_buffer_limit(BW_PAGE_POOL_BYTES);
}

TEST(small_page_buffers_are_never_kept) {
    size_t buffers, bytes, reused, reused_before, cap;
    page_stats(&buffers, &bytes, &reused_before);
    char *kept = bw_page_buffer_acquire(PAGE_SIZED(0), &cap);
    bw_page_buffer_release(kept, cap);
    /* a small request does not take the page-sized buffer */
    char *small = bw_page_buffer_acquire(BW_PAGE_POOL_SMALLEST - 1, &cap);
    CHECK(small != NULL && small != kept && cap == BW_PAGE_POOL_SMALLEST - 1);
    bw_page_buffer_release(small, cap);
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 1 && bytes == PAGE_SIZED(0) && reused == reused_before);
    bw_page_buffer_limit(0);
    bw_page_buffer_limit(BW_PAGE_POOL_BYTES);
}

TEST(the_page_pool_keeps_within_its_slots_and_its_bytes) {
    size_t buffers, bytes, reused, cap;
    char *taken[BW_PAGE_POOL_SLOTS + 3];
    for (int i = 0; i < BW_PAGE_POOL_SLOTS + 3; i++) {
        taken[i] = bw_page_buffer_acquire(PAGE_SIZED(0), &cap);
        CHECK(taken[i] != NULL);
    }
    for (int i = 0; i < BW_PAGE_POOL_SLOTS + 3; i++)
        bw_page_buffer_release(taken[i], PAGE_SIZED(0));
    page_stats(&buffers, &bytes, &reused);
    CHECK_EQ(buffers, BW_PAGE_POOL_SLOTS);
    CHECK_EQ(bytes, BW_PAGE_POOL_SLOTS * PAGE_SIZED(0));
    bw_page_buffer_limit(0);
    /* a buffer the bytes bound has no room for is freed, however many slots are free */
    bw_page_buffer_limit(BW_PAGE_POOL_BYTES);
    size_t most = BW_PAGE_POOL_BYTES - BW_PAGE_POOL_SMALLEST;
    char *big = bw_page_buffer_acquire(most, &cap), *more = bw_page_buffer_acquire(PAGE_SIZED(1), &cap);
    CHECK(big != NULL && more != NULL);
    bw_page_buffer_release(big, most);
    bw_page_buffer_release(more, PAGE_SIZED(1));
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 1 && bytes == most);
    /* a lower limit frees the coldest until what is kept fits */
    bw_page_buffer_limit(50);
    page_stats(&buffers, &bytes, &reused);
    CHECK(buffers == 0 && bytes == 0);
    bw_page_buffer_limit(BW_PAGE_POOL_BYTES);
}

/* In the child: page buffers taken and given back. */
static int child_uses_the_page_pool(void *unused) {
    (void)unused;
    size_t cap;
    void *data = bw_page_buffer_acquire(PAGE_SIZED(0), &cap);
    if (data == NULL)
        return 1;
    bw_page_buffer_release(data, cap);
    return 0;
}

static void *churn_pages(void *unused) {
    (void)unused;
    size_t cap;
    while (churning)
        bw_page_buffer_release(bw_page_buffer_acquire(PAGE_SIZED(0), &cap), PAGE_SIZED(0));
    return NULL;
}

TEST(a_child_forked_while_another_thread_uses_the_page_pool_can_use_it) {
    CHECK_EQ(children_forked_while_churning(churn_pages, child_uses_the_page_pool), 0);
    bw_page_buffer_limit(0);
    bw_page_buffer_limit(BW_PAGE_POOL_BYTES);
}

RUN_TESTS(without_a_writer_released_buffers_are_freed,
          keeps_at_most_the_slots_and_hands_back_the_warmest, a_small_recycled_buffer_grows,
          retains_nest, a_hold_keeps_buffers_without_a_writer,
          a_child_forked_while_another_thread_uses_the_pool_can_use_it,
          the_page_pool_keeps_buffers_with_no_user_and_hands_back_the_smallest_that_fits,
          small_page_buffers_are_never_kept, the_page_pool_keeps_within_its_slots_and_its_bytes,
          a_child_forked_while_another_thread_uses_the_page_pool_can_use_it)
