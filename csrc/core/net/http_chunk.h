/* HTTP/1.1 chunked transfer coding of a request body (RFC 9112, section 7.1): each piece goes
   out as one chunk, `<size in hex> CRLF <data> CRLF`, and the body ends with the last chunk
   `0 CRLF CRLF`. The CRLF that closes a chunk's data is sent in front of whatever comes next
   (the next chunk's head, or the end), so that a piece's data can go out as it is, without a
   copy. Core layer: no Python. */
#ifndef BW_HTTP_CHUNK_H
#define BW_HTTP_CHUNK_H
#include <stddef.h>

/* The CRLF that ends a chunk's data (a sender that frames whole chunks appends it). */
#define BW_CHUNK_DATA_END "\r\n"
#define BW_CHUNK_DATA_END_LEN 2

/* Room for the longest chunk head: CRLF, 16 hex digits, CRLF. */
#define BW_CHUNK_HEAD_MAX 20

/* Writes the head of a chunk of n bytes (n > 0: an empty chunk would end the body) into dst
   (BW_CHUNK_HEAD_MAX bytes): the CRLF closing the previous chunk when after_chunk, then n in
   hex and CRLF. Returns its length. */
size_t bw_chunk_head(char *dst, size_t n, int after_chunk);

/* The bytes that end the body: the CRLF closing the previous chunk when after_chunk, then the
   last chunk. Sets *len. */
const char *bw_chunk_end(int after_chunk, size_t *len);
#endif
