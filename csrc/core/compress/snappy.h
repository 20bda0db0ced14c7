/* Snappy decompression (the raw format: a varint of the uncompressed length, then literals
   and back-references), for Parquet pages compressed with snappy. Its own code: no library,
   the same on every build.

   Every input is hostile: a length prefix that does not match what the elements produce, an
   element cut short, a copy reaching before the start of the output or past its end, all
   fail with a reason and never read or write outside the given buffers. */
#ifndef BW_SNAPPY_H
#define BW_SNAPPY_H

#include <stddef.h>
#include <stdint.h>

/* The uncompressed length the stream at `in` (`in_size` bytes) says of itself. 0 and
   *length set, or -1 when the prefix is cut short or says more than 2^32 - 1 bytes. */
int bw_snappy_length(const uint8_t *in, size_t in_size, size_t *length);

/* The reason for a literal that says 2^32 bytes (libsnappy's 32-bit arithmetic reads it as
   an empty one). */
#define BW_SNAPPY_HUGE_LITERAL "a literal says 4 GiB"

/* Decompresses the stream at `in` into `out`, which must be exactly the length it says
   (`out_size`). 0, or -1 with *why (a static string) saying what is wrong; `out` may then
   hold part of the output. */
int bw_snappy_decompress(const uint8_t *in, size_t in_size, uint8_t *out, size_t out_size,
                         const char **why);

#endif
