/* A deflate block for comma-separated numbers, coded quickly: every byte is a literal except
   where the text after a comma repeats the text after the comma before it (", -0.", ", 0.0"),
   which becomes a back-reference to it. The Huffman codes are made for the block's own
   counts (RFC 1951: a "dynamic Huffman" block).

   Why: embedding bodies are mostly float digits. Random digits leave a general LZ77 matcher
   almost nothing to find, so it spends about 23 instructions per byte searching and ends near
   the bytes' entropy anyway. What repeats in such text is the start of each number, right
   after its separator: one candidate per comma finds it, and the rest is counting and table
   lookups, a few instructions per byte. Whether a body is such a body is for the caller to
   judge (gzip_stream.c compares the sizes on a sample block).

   Core layer: no Python; it allocates only the output buffer and the code's match list. */
#ifndef BW_DEFLATE_COMMAS_H
#define BW_DEFLATE_COMMAS_H
#include <stddef.h>
#include <stdint.h>

#include "out_buffer.h"

/* The literal/length alphabet: 256 bytes, end-of-block, 29 length codes (RFC 1951). */
#define BW_COMMA_LENGTH_SYMBOLS 286
/* The distance alphabet. */
#define BW_COMMA_DISTANCE_SYMBOLS 30

/* One back-reference: where it starts in the block, its length and distance. */
typedef struct {
    uint32_t start;
    uint16_t length, distance_less_one;
} bw_comma_match;

/* A block's codes and back-references, found from its text before a byte is written, so
   that its exact coded size is known up front. Entries hold a bit-reversed code in the low
   16 bits, its length above. Start it zeroed; it may be made again for the next block (its
   match list is kept and grown), and bw_comma_code_free releases it. */
typedef struct {
    uint32_t entry[BW_COMMA_LENGTH_SYMBOLS];
    uint32_t distance_entry[BW_COMMA_DISTANCE_SYMBOLS];
    unsigned char header[768]; /* the block header as bits, least significant first */
    size_t header_bits;
    uint64_t block_bits; /* header, literals, matches, end-of-block */
    bw_comma_match *matches;
    size_t match_count, match_cap;
} bw_comma_code;

/* Makes the codes for a block of data[0..n) (n below 4 GiB). 0, or -1 when out of memory
   (the code then cannot be written, but may be made again or freed). */
int bw_comma_code_make(const unsigned char *data, size_t n, bw_comma_code *code);
void bw_comma_code_free(bw_comma_code *code);

/* The bytes bw_comma_block_write appends for this code: the block, then a sync-flush marker
   (an empty stored block) that ends it on a byte boundary. */
size_t bw_comma_block_size(const bw_comma_code *code);

/* Appends the block coding data[0..n) (the bytes the code was made from) and the sync-flush
   marker to out. The block is not final (BFINAL 0) and refers only to its own bytes, so any
   deflate block may come before or after it. 0, or -1 when out of memory (out then holds
   nothing new). */
int bw_comma_block_write(const bw_comma_code *code, const unsigned char *data, size_t n,
                         bw_buf *out);
#endif
