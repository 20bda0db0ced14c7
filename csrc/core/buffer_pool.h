/* Recycling of bulk insert body buffers.

   Every handed-over buffer is about `buffer_size` bytes and lives only until the sender has
   written it to the socket. Freeing it returns its pages to the kernel (glibc serves such
   sizes with mmap, or trims them off the heap top), so the writer's next buffer takes one
   page fault, and a page zeroed by the kernel, per 4 KiB it writes: a third of the encoder's
   time on embedding documents. The pool keeps a few released buffers, already backed by
   memory, for the writer to fill again. It holds at most BW_POOL_SLOTS buffers, and only
   while at least one writer is alive. Knows nothing of Python; safe from any thread. */
#ifndef BW_BUFFER_POOL_H
#define BW_BUFFER_POOL_H
#include <stddef.h>

#define BW_POOL_SLOTS 4

/* A writer starts / ends: while the count is zero, released buffers are freed at once and
   the last end frees whatever the pool holds. */
void bw_pool_retain(void);
void bw_pool_unretain(void);

/* Takes ownership of data (malloc'd, `cap` bytes): keeps it for reuse or frees it. */
void bw_pool_release(char *data, size_t cap);

/* A buffer of at least `capacity` bytes (*cap receives its size): a recycled one when there
   is one, else fresh from malloc. NULL when out of memory. Free it with free() or hand it to
   bw_pool_release. */
char *bw_pool_acquire(size_t capacity, size_t *cap);

/* The capacity a body buffer of `threshold` starts with: room for a full one plus a typical
   command, so that filling it past the threshold does not reallocate (one huge command grows
   it by doubling). Every writer of body buffers (a writer's own, a batch's text written
   ahead) asks the pool for this much, so that the pool's buffers fit them all. */
static inline size_t bw_pool_body_capacity(size_t threshold) {
    size_t cap = threshold + threshold / 8 + 4096;
    return cap < threshold ? threshold : cap; /* overflow guard */
}

/* Buffers currently held by the pool, their bytes, and the writers alive (tests). */
void bw_pool_stats(size_t *buffers, size_t *bytes, size_t *users);
#endif
