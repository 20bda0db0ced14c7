#include "buffer_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define MOST_SLOTS (BW_POOL_SLOTS > BW_PAGE_POOL_SLOTS ? BW_POOL_SLOTS : BW_PAGE_POOL_SLOTS)

/* One pool: its kept buffers in the order they were released (the last is the warmest). */
typedef struct {
    pthread_mutex_t mu;
    void *data[MOST_SLOTS];
    size_t cap[MOST_SLOTS];
    size_t count, bytes;
    size_t slots, max_bytes;
    int only_while_used; /* keep nothing while no user is alive and nothing holds it */
    size_t users, holds;
    size_t reused;
} pool;

static pool body_pool = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, 0, BW_POOL_SLOTS, SIZE_MAX,
                         1, 0, 0, 0};
static pool page_pool = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, 0, BW_PAGE_POOL_SLOTS,
                         BW_PAGE_POOL_BYTES, 0, 0, 0, 0};

/* fork() from one thread while another holds a pool's lock would leave the child's copy
   locked for good: every buffer the child asks for would hang on it. The forking thread
   takes both locks first (always in this order), so the child's copies are ones it can
   release. */
static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;

static void lock_all(void) {
    pthread_mutex_lock(&body_pool.mu);
    pthread_mutex_lock(&page_pool.mu);
}
static void unlock_all(void) {
    pthread_mutex_unlock(&page_pool.mu);
    pthread_mutex_unlock(&body_pool.mu);
}
/* In the child, the threads that held the body pool (bw_pool_hold) are not there. */
static void unlock_all_in_child(void) {
    body_pool.holds = 0;
    unlock_all();
}
static void install_fork_handlers(void) {
    (void)pthread_atfork(lock_all, unlock_all, unlock_all_in_child);
}

/* Every entry takes a lock through this: the handlers exist before a lock is first used. */
static void enter(pool *p) {
    (void)pthread_once(&fork_handlers_once, install_fork_handlers);
    pthread_mutex_lock(&p->mu);
}
static void leave(pool *p) { pthread_mutex_unlock(&p->mu); }

/* Removes kept buffer i, the order of the others kept. Under the lock. */
static void *take_slot(pool *p, size_t i, size_t *cap) {
    void *data = p->data[i];
    *cap = p->cap[i];
    p->bytes -= p->cap[i];
    for (size_t j = i + 1; j < p->count; j++) {
        p->data[j - 1] = p->data[j];
        p->cap[j - 1] = p->cap[j];
    }
    p->count--;
    return data;
}

/* Keeps data when the pool may, else frees it (outside the lock: munmap can be slow). */
static void release(pool *p, void *data, size_t cap) {
    if (data == NULL)
        return;
    enter(p);
    if ((!p->only_while_used || p->users > 0 || p->holds > 0) && p->count < p->slots &&
        cap <= p->max_bytes - p->bytes) {
        p->data[p->count] = data;
        p->cap[p->count] = cap;
        p->count++;
        p->bytes += cap;
        data = NULL;
    }
    leave(p);
    free(data);
}

/* A buffer of at least `capacity` bytes: of the kept ones the smallest that holds it (the
   warmest of equals), else the largest grown, else a fresh one. New memory; NULL when out of
   memory. */
static void *acquire(pool *p, size_t capacity, size_t *cap) {
    void *data = NULL;
    size_t have = 0;
    enter(p);
    size_t fits = SIZE_MAX, largest = SIZE_MAX;
    for (size_t i = p->count; i-- > 0;) {
        if (p->cap[i] >= capacity && (fits == SIZE_MAX || p->cap[i] < p->cap[fits]))
            fits = i;
        if (largest == SIZE_MAX || p->cap[i] > p->cap[largest])
            largest = i;
    }
    size_t chosen = fits != SIZE_MAX ? fits : largest;
    if (chosen != SIZE_MAX) {
        data = take_slot(p, chosen, &have);
        p->reused++;
    }
    leave(p);
    if (data != NULL && have < capacity) {
        /* growing keeps the pages already there (mremap for large blocks) */
        void *grown = realloc(data, capacity);
        if (grown == NULL) {
            free(data);
            data = NULL;
        } else {
            data = grown;
            have = capacity;
        }
    }
    if (data == NULL) {
        data = malloc(capacity ? capacity : 1);
        have = capacity;
    }
    *cap = data != NULL ? have : 0;
    return data;
}

/* Pops kept buffers until the pool holds at most `bytes` (all of them when keep_none), and
   frees them outside the lock. */
static void shrink(pool *p, size_t bytes, int keep_none) {
    void *drop[MOST_SLOTS];
    size_t ndrop = 0, cap;
    enter(p);
    while (p->count > 0 && (keep_none || p->bytes > bytes))
        drop[ndrop++] = take_slot(p, 0, &cap); /* the coldest first */
    leave(p);
    for (size_t i = 0; i < ndrop; i++)
        free(drop[i]);
}

void bw_pool_retain(void) {
    enter(&body_pool);
    body_pool.users++;
    leave(&body_pool);
}

void bw_pool_unretain(void) {
    enter(&body_pool);
    int last = body_pool.users > 0 && --body_pool.users == 0 && body_pool.holds == 0;
    leave(&body_pool);
    if (last)
        shrink(&body_pool, 0, 1);
}

void bw_pool_hold(void) {
    enter(&body_pool);
    body_pool.holds++;
    leave(&body_pool);
}

void bw_pool_unhold(void) {
    enter(&body_pool);
    int last = body_pool.holds > 0 && --body_pool.holds == 0 && body_pool.users == 0;
    leave(&body_pool);
    if (last)
        shrink(&body_pool, 0, 1);
}

void bw_pool_release(char *data, size_t cap) { release(&body_pool, data, cap); }

char *bw_pool_acquire(size_t capacity, size_t *cap) { return acquire(&body_pool, capacity, cap); }

void bw_pool_stats(size_t *buffers, size_t *bytes, size_t *users) {
    enter(&body_pool);
    *buffers = body_pool.count;
    *bytes = body_pool.bytes;
    *users = body_pool.users;
    leave(&body_pool);
}

size_t bw_pool_holds(void) {
    enter(&body_pool);
    size_t holds = body_pool.holds;
    leave(&body_pool);
    return holds;
}

void *bw_page_buffer_acquire(size_t capacity, size_t *cap) {
    if (capacity < BW_PAGE_POOL_SMALLEST) {
        void *data = malloc(capacity ? capacity : 1);
        *cap = data != NULL ? capacity : 0;
        return data;
    }
    return acquire(&page_pool, capacity, cap);
}

void bw_page_buffer_release(void *data, size_t cap) {
    if (cap < BW_PAGE_POOL_SMALLEST)
        free(data);
    else
        release(&page_pool, data, cap);
}

void bw_page_buffer_limit(size_t bytes) {
    enter(&page_pool);
    page_pool.max_bytes = bytes;
    leave(&page_pool);
    shrink(&page_pool, bytes, 0);
}

void bw_page_buffer_stats(size_t *buffers, size_t *bytes, size_t *reused) {
    enter(&page_pool);
    *buffers = page_pool.count;
    *bytes = page_pool.bytes;
    *reused = page_pool.reused;
    leave(&page_pool);
}
