/* Recycling of large buffers: bulk insert bodies, and the Parquet page reader's pages.

   Freeing a buffer of a megabyte or more returns its pages to the kernel (glibc serves such
   sizes with mmap, or trims them off the heap top), so the next buffer of that size takes
   one page fault, and a page zeroed by the kernel, per 4 KiB written. For a writer of
   embedding documents that was a third of the encoder's time; for a lookup that reopens a
   Parquet file it was half of the lookup (each reads dictionary and data pages of about
   1 MiB into fresh buffers). A pool keeps a few released buffers, already backed by memory,
   for the next one. Knows nothing of Python; safe from any thread, and from a child forked
   while another thread uses a pool.

   Two pools, one implementation:
   - body buffers (bw_pool_*): at most BW_POOL_SLOTS, kept only while at least one writer is
     alive (bw_pool_retain) or something holds the pool for the next writer (bw_pool_hold:
     the thread kept for the next insert's body, so that the next insert writes into memory
     already backed, not into fresh pages);
   - page buffers (bw_page_buffer_*): at most BW_PAGE_POOL_SLOTS buffers of at least
     BW_PAGE_POOL_SMALLEST bytes and BW_PAGE_POOL_BYTES bytes in all, kept while the process
     lives, so that a file opened for one lookup and closed reads the next lookup's pages
     into warm memory. */
#ifndef BW_BUFFER_POOL_H
#define BW_BUFFER_POOL_H
#include <stddef.h>

/* A writer's default queue holds 8 buffers; with the one being written and the one being sent,
   10 are alive at its peak: the pool keeps that many and a couple more, so that a writer in
   its steady state takes no fresh buffer. */
#define BW_POOL_SLOTS 12
#define BW_PAGE_POOL_SLOTS 16
#define BW_PAGE_POOL_BYTES ((size_t)16 << 20)
#define BW_PAGE_POOL_SMALLEST ((size_t)64 << 10)

/* ---- body buffers ---- */

/* A writer starts / ends: while the count is zero, released buffers are freed at once and
   the last end frees whatever the pool holds. */
void bw_pool_retain(void);
void bw_pool_unretain(void);

/* Something other than a writer keeps the pool's buffers for the next writer while it holds
   it (holds nest; more ends than starts do not underflow). When neither a writer nor a hold
   is left, the pool frees what it keeps. A forked child starts with no hold. */
void bw_pool_hold(void);
void bw_pool_unhold(void);
size_t bw_pool_holds(void);

/* Takes ownership of data (malloc'd, `cap` bytes): keeps it for reuse or frees it. */
void bw_pool_release(char *data, size_t cap);

/* A buffer of at least `capacity` bytes (*cap receives its size): of the recycled ones the
   smallest that holds it (the warmest of equals), else the largest grown, else fresh from
   malloc. NULL when out of memory. Free it with free() or hand it to
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

/* ---- page buffers ---- */

/* As bw_pool_acquire, from the page pool: for BW_PAGE_POOL_SMALLEST bytes or more, the
   smallest kept buffer that holds `capacity` bytes, else the largest kept one grown (its
   pages kept), else a fresh one; for fewer, fresh memory from malloc (the heap serves small
   blocks without new pages, and a small request must not take a page-sized buffer away).
   What it held before is unspecified. NULL when out of memory. */
void *bw_page_buffer_acquire(size_t capacity, size_t *cap);

/* Takes ownership of data (from bw_page_buffer_acquire or malloc, `cap` bytes): keeps it
   when it is BW_PAGE_POOL_SMALLEST bytes or more and the pool has a slot and room for its
   bytes, else frees it. */
void bw_page_buffer_release(void *data, size_t cap);

/* At most `bytes` kept from now on (tests: 0 keeps none); what is kept beyond it is freed. */
void bw_page_buffer_limit(size_t bytes);

/* Buffers held, their bytes, and how many acquisitions a kept buffer served (tests). */
void bw_page_buffer_stats(size_t *buffers, size_t *bytes, size_t *reused);
#endif
