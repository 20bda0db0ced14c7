/* One zstd frame over a whole request body, written piece by piece: each piece ends with a
   flush (ZSTD_e_flush) so the receiver can decode it on arrival; and the decoder of such a
   frame with a bound on what one call gives back. Core layer: no Python, no GIL (the binding
   calls it with the GIL released). Compiled against libzstd when built with BW_HAVE_ZSTD
   (Debian's libzstd-dev found at build time); without it every constructor returns NULL. */
#ifndef BW_ZSTD_STREAM_H
#define BW_ZSTD_STREAM_H
#include <stddef.h>

#include "out_buffer.h"
#include "status.h"

/* The level of every bulkwire zstd stream: the fastest level whose output (literals kept
   Huffman-coded) is no larger than ISA-L's level 1 on float-vector and small-document
   bodies (see performance.md). */
#define BW_ZSTD_LEVEL (-5)

/* The job size of a stream on several threads: libzstd's smallest, so that a 1 MiB buffer
   makes two jobs. */
#define BW_ZSTD_JOB_SIZE (512 << 10)
/* The most workers one stream asks for. */
#define BW_ZSTD_THREADS_MAX 16

/* The largest window the decoder accepts (8 MiB; the encoder's level uses at most 2 MiB). */
#define BW_ZSTD_WINDOW_LOG_MAX 23

typedef struct bw_zstd_stream bw_zstd_stream;
typedef struct bw_zstd_decoder bw_zstd_decoder;

typedef enum {
    BW_ZS_OK = 0,
    BW_ZS_NO_MEMORY = -1,
    BW_ZS_FAILED = -2,          /* the library refused: see bw_zs_error_text */
    BW_ZS_ALREADY_FINISHED = -3,
    BW_ZS_AFTER_END = -4,       /* decoder: bytes after the end of the frame */
    BW_ZS_INHERITED = -5,       /* a stream on several threads, in a forked child */
} bw_zs_result;

/* 1 when libzstd was compiled in. */
int bw_zs_have_zstd(void);

/* A new stream at the given level (BW_ZSTD_LEVEL for a body; negative levels are zstd's
   fastest, and here keep Huffman-coded literals) with a content checksum. NULL when out of memory, when the level is refused, or
   when libzstd is not compiled in. */
bw_zstd_stream *bw_zs_new(int level);
/* The same on `threads` of libzstd's own workers (ZSTD_c_nbWorkers; 1: none): each write is cut
   into jobs of BW_ZSTD_JOB_SIZE compressed at once, and the output is still ONE frame (each
   job primed with the input before it), so any streaming decoder takes it as before; separate
   frames, though valid, are not what every server's decoder reads past. NULL also when
   libzstd was built without threads. Such a stream belongs to the process that made it
   (fork_origin.h): in a forked child bw_zs_write returns BW_ZS_INHERITED, and bw_zs_free
   leaves libzstd's context alone (freeing it would join workers the child does not have). */
bw_zstd_stream *bw_zs_new_parallel(int level, int threads);
/* The range of levels libzstd takes (0..0 without libzstd). */
int bw_zs_min_level(void);
int bw_zs_max_level(void);
void bw_zs_free(bw_zstd_stream *zs);
/* 1 for a stream on several threads in a forked child of the process that made it. */
int bw_zs_inherited(const bw_zstd_stream *zs);

/* Compresses n bytes, then flushes (finish=0) or ends the frame (finish=1), appending
   everything produced to out. On an error out may hold part of the output: discard it, and
   the stream cannot go on (except after BW_ZS_ALREADY_FINISHED, which changes nothing). */
bw_zs_result bw_zs_write(bw_zstd_stream *zs, const void *data, size_t n, int finish, bw_buf *out);

/* Totals so far: bytes in and bytes out. */
size_t bw_zs_total_in(const bw_zstd_stream *zs);
size_t bw_zs_total_out(const bw_zstd_stream *zs);

/* A new decoder of one frame. NULL when out of memory or libzstd is not compiled in. */
bw_zstd_decoder *bw_zsd_new(void);
void bw_zsd_free(bw_zstd_decoder *zd);

/* Decodes from in[0..n) into out[0..room): *consumed input bytes were taken, *produced bytes
   written, *ended set once the frame was decoded whole and everything flushed. Output may
   stay inside the decoder when out fills up: call again (with n == 0) until *produced < room.
   BW_ZS_AFTER_END for input after the end; BW_ZS_FAILED for a corrupt frame (the decoder
   cannot go on). */
bw_zs_result bw_zsd_read(bw_zstd_decoder *zd, const void *in, size_t n, size_t *consumed,
                         void *out, size_t room, size_t *produced, int *ended);

/* The library's words for the last BW_ZS_FAILED of a stream or decoder (static text). */
const char *bw_zs_error_text(const bw_zstd_stream *zs);
const char *bw_zsd_error_text(const bw_zstd_decoder *zd);

/* The status of a stream's failed write, rc not BW_ZS_OK: BW_STATUS_NO_MEMORY,
   BW_STATUS_INHERITED, or BW_STATUS_FAILED ("the zstd stream failed: " and libzstd's
   reason). Returns -1. */
int bw_zs_status(bw_zs_result rc, const bw_zstd_stream *zs, bw_status *st);
/* The status of a decoder's failed read: BW_STATUS_INVALID ("corrupt zstd frame: " and
   libzstd's reason). Returns -1. */
int bw_zsd_status(const bw_zstd_decoder *zd, bw_status *st);
#endif
