/* One gzip member over a whole request body, written piece by piece: each piece is
   sync-flushed so the receiver can decode it on arrival. Core layer: no Python, no GIL
   (the binding calls it with the GIL released). Backends: zlib (always) and ISA-L's igzip
   (when built with BW_HAVE_ISAL, i.e. Debian's libisal-dev was found at build time). */
#ifndef BW_GZIP_STREAM_H
#define BW_GZIP_STREAM_H
#include <stddef.h>

#include "out_buffer.h"
#include "status.h"

typedef enum {
    BW_GZ_ZLIB = 0,
    BW_GZ_ISAL = 1,
} bw_gz_backend;

typedef struct bw_gzip_stream bw_gzip_stream;

/* Parallel streams (bw_gz_new_parallel) cut each write into blocks of at least this many
   bytes (and at most 1 GiB), one per thread: smaller writes are one block. */
#define BW_GZ_BLOCK_MIN ((size_t)64 << 10)
/* The most threads one parallel stream runs. */
#define BW_GZ_THREADS_MAX 16

/* 1 when the ISA-L backend was compiled in. */
int bw_gz_have_isal(void);
/* A new stream at the backend's fastest level (zlib 1, igzip 1). NULL when out of memory,
   when the backend is not compiled in, or when the compressor refuses to start. */
bw_gzip_stream *bw_gz_new(bw_gz_backend backend);
/* A stream that deflates each write as blocks on up to `threads` threads at once (the calling
   thread is one of them), pigz-style: each block is raw deflate primed with the 32 KiB of
   input before it and sync-flushed, so the blocks in order, a final empty block and the
   trailer (the blocks' CRC-32s combined, ISIZE) are one gzip member, decodable piece by
   piece like bw_gz_new's. The bytes differ from bw_gz_new's; what they inflate to does not.
   threads is clamped to 1..BW_GZ_THREADS_MAX (1: the blocks run on the calling thread).
   NULL as bw_gz_new. A parallel stream belongs to the process that made it
   (fork_origin.h): in a forked child bw_gz_write returns BW_GZ_INHERITED, and bw_gz_free
   frees the memory but leaves the helpers' lock and threads alone (they are the parent's). */
bw_gzip_stream *bw_gz_new_parallel(bw_gz_backend backend, int threads);
/* 1 for a parallel stream in a forked child of the process that made it. */
int bw_gz_inherited(const bw_gzip_stream *gz);
/* The threads a stream runs (1 for bw_gz_new's). */
int bw_gz_threads(const bw_gzip_stream *gz);
void bw_gz_free(bw_gzip_stream *gz);

/* The member's pieces around the blocks, for the parallel stream and its tests: the 10-byte
   header; and the end (a final empty fixed-Huffman block, CRC-32 and ISIZE little-endian),
   which follows sync-flushed blocks. Each returns -1 when out of memory, else 0. */
#define BW_GZ_HEADER_LEN 10
#define BW_GZ_END_LEN 10
int bw_gz_put_header(bw_buf *out);
int bw_gz_put_end(bw_buf *out, unsigned long crc, unsigned long long total_in);
/* The CRC-32 of a block of len2 bytes with CRC crc2 appended to input with CRC crc1. */
unsigned long bw_gz_crc_combine(unsigned long crc1, unsigned long crc2, size_t len2);

typedef enum {
    BW_GZ_OK = 0,
    BW_GZ_NO_MEMORY = -1,
    BW_GZ_COMPRESSOR_FAILED = -2,
    BW_GZ_ALREADY_FINISHED = -3,
    BW_GZ_INHERITED = -4, /* a parallel stream in a forked child: its helpers are the parent's */
} bw_gz_result;

/* Compresses n bytes, then sync-flushes (finish=0) or ends the member (finish=1), appending
   everything produced to out. On an error out may hold part of the output: discard it, and
   the stream cannot go on (except after BW_GZ_ALREADY_FINISHED, which changes nothing). */
bw_gz_result bw_gz_write(bw_gzip_stream *gz, const void *data, size_t n, int finish,
                         bw_buf *out);

/* Totals so far: bytes in and bytes out. */
size_t bw_gz_total_in(const bw_gzip_stream *gz);
size_t bw_gz_total_out(const bw_gzip_stream *gz);
/* Blocks a parallel stream wrote with the comma coder (deflate_commas.h) so far: it samples
   a block now and then and codes the blocks after it that way when, on the sample, the
   comma block came within 3% of the matched one's size (float arrays do; JSON keys do not).
   Always 0 for bw_gz_new's streams. */
size_t bw_gz_comma_blocks(const bw_gzip_stream *gz);

/* The status of a failed write's result rc (not BW_GZ_OK): BW_STATUS_NO_MEMORY, or
   BW_STATUS_FAILED ("the deflate stream failed"). Returns -1. */
int bw_gz_status(bw_gz_result rc, bw_status *st);
#endif
