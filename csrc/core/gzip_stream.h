/* One gzip member over a whole request body, written piece by piece: each piece is
   sync-flushed so the receiver can decode it on arrival. Core layer: no Python, no GIL
   (the binding calls it with the GIL released). Backends: zlib (always) and ISA-L's igzip
   (when built with BW_HAVE_ISAL, i.e. Debian's libisal-dev was found at build time). */
#ifndef BW_GZIP_STREAM_H
#define BW_GZIP_STREAM_H
#include <stddef.h>

#include "out_buffer.h"

typedef enum {
    BW_GZ_ZLIB = 0,
    BW_GZ_ISAL = 1,
} bw_gz_backend;

typedef struct bw_gzip_stream bw_gzip_stream;

/* 1 when the ISA-L backend was compiled in. */
int bw_gz_have_isal(void);
/* A new stream at the backend's fastest level (zlib 1, igzip 1). NULL when out of memory,
   when the backend is not compiled in, or when the compressor refuses to start. */
bw_gzip_stream *bw_gz_new(bw_gz_backend backend);
void bw_gz_free(bw_gzip_stream *gz);

typedef enum {
    BW_GZ_OK = 0,
    BW_GZ_NO_MEMORY = -1,
    BW_GZ_COMPRESSOR_FAILED = -2,
    BW_GZ_ALREADY_FINISHED = -3,
} bw_gz_result;

/* Compresses n bytes, then sync-flushes (finish=0) or ends the member (finish=1), appending
   everything produced to out. On an error out may hold part of the output: discard it, and
   the stream cannot go on (except after BW_GZ_ALREADY_FINISHED, which changes nothing). */
bw_gz_result bw_gz_write(bw_gzip_stream *gz, const void *data, size_t n, int finish,
                         bw_buf *out);

/* Totals so far: bytes in and bytes out. */
size_t bw_gz_total_in(const bw_gzip_stream *gz);
size_t bw_gz_total_out(const bw_gzip_stream *gz);
#endif
