#include "buffer_pool.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static char *pool_data[BW_POOL_SLOTS];
static size_t pool_cap[BW_POOL_SLOTS];
static size_t pool_count;
static size_t pool_users;

void bw_pool_retain(void) {
    pthread_mutex_lock(&pool_mu);
    pool_users++;
    pthread_mutex_unlock(&pool_mu);
}

void bw_pool_unretain(void) {
    char *drop[BW_POOL_SLOTS];
    size_t ndrop = 0;
    pthread_mutex_lock(&pool_mu);
    if (pool_users > 0 && --pool_users == 0) {
        for (size_t i = 0; i < pool_count; i++)
            drop[ndrop++] = pool_data[i];
        pool_count = 0;
    }
    pthread_mutex_unlock(&pool_mu);
    for (size_t i = 0; i < ndrop; i++) /* outside the lock: munmap can be slow */
        free(drop[i]);
}

void bw_pool_release(char *data, size_t cap) {
    if (data == NULL)
        return;
    pthread_mutex_lock(&pool_mu);
    if (pool_users > 0 && pool_count < BW_POOL_SLOTS) {
        pool_data[pool_count] = data;
        pool_cap[pool_count] = cap;
        pool_count++;
        data = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
    free(data);
}

char *bw_pool_acquire(size_t capacity, size_t *cap) {
    char *data = NULL;
    size_t have = 0;
    pthread_mutex_lock(&pool_mu);
    if (pool_count > 0) { /* the most recently released: its pages are the warmest */
        pool_count--;
        data = pool_data[pool_count];
        have = pool_cap[pool_count];
    }
    pthread_mutex_unlock(&pool_mu);
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
    pthread_mutex_lock(&pool_mu);
    size_t total = 0;
    for (size_t i = 0; i < pool_count; i++)
        total += pool_cap[i];
    *buffers = pool_count;
    *bytes = total;
    *users = pool_users;
    pthread_mutex_unlock(&pool_mu);
}
