#include "buffer_pool.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static char *pool_data[BW_POOL_SLOTS];
static size_t pool_cap[BW_POOL_SLOTS];
static size_t pool_count;
static size_t pool_users;

/* fork() from one thread while another holds pool_mu would leave the child's copy locked for
   good: every writer the child makes would hang on it. The forking thread takes the lock
   first, so the child's copy is one it can release. */
static pthread_once_t pool_fork_once = PTHREAD_ONCE_INIT;

static void pool_lock(void) { pthread_mutex_lock(&pool_mu); }
static void pool_unlock(void) { pthread_mutex_unlock(&pool_mu); }
static void pool_install_fork_handlers(void) {
    (void)pthread_atfork(pool_lock, pool_unlock, pool_unlock);
}

/* Every entry takes the lock through this: the handlers exist before the lock is first used. */
static void pool_enter(void) {
    (void)pthread_once(&pool_fork_once, pool_install_fork_handlers);
    pool_lock();
}

void bw_pool_retain(void) {
    pool_enter();
    pool_users++;
    pool_unlock();
}

void bw_pool_unretain(void) {
    char *drop[BW_POOL_SLOTS];
    size_t ndrop = 0;
    pool_enter();
    if (pool_users > 0 && --pool_users == 0) {
        for (size_t i = 0; i < pool_count; i++)
            drop[ndrop++] = pool_data[i];
        pool_count = 0;
    }
    pool_unlock();
    for (size_t i = 0; i < ndrop; i++) /* outside the lock: munmap can be slow */
        free(drop[i]);
}

void bw_pool_release(char *data, size_t cap) {
    if (data == NULL)
        return;
    pool_enter();
    if (pool_users > 0 && pool_count < BW_POOL_SLOTS) {
        pool_data[pool_count] = data;
        pool_cap[pool_count] = cap;
        pool_count++;
        data = NULL;
    }
    pool_unlock();
    free(data);
}

char *bw_pool_acquire(size_t capacity, size_t *cap) {
    char *data = NULL;
    size_t have = 0;
    pool_enter();
    if (pool_count > 0) { /* the most recently released: its pages are the warmest */
        pool_count--;
        data = pool_data[pool_count];
        have = pool_cap[pool_count];
    }
    pool_unlock();
    if (data != NULL && have < capacity) {
        /* Handed-over buffers are trimmed to their length, a little short of a fresh
           buffer's room: growing keeps the pages already there (mremap for large blocks). */
        char *grown = realloc(data, capacity);
        if (grown == NULL) {
            free(data);
            data = NULL;
        } else {
            data = grown;
            have = capacity;
        }
    }
    if (data == NULL) {
        data = malloc(capacity);
        have = capacity;
    }
    *cap = data != NULL ? have : 0;
    return data;
}

void bw_pool_stats(size_t *buffers, size_t *bytes, size_t *users) {
    pool_enter();
    size_t total = 0;
    for (size_t i = 0; i < pool_count; i++)
        total += pool_cap[i];
    *buffers = pool_count;
    *bytes = total;
    *users = pool_users;
    pool_unlock();
}
