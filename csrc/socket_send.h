/* Writing the request body to a connected socket, without Python: HTTP/1.1 chunk framing,
   gathered writes that finish partial sends, with a timeout, and a check for an early answer
   from the server.
   Core layer: no Python, no GIL (the binding calls it with the GIL released). */
#ifndef BW_SOCKET_SEND_H
#define BW_SOCKET_SEND_H
#include <stddef.h>
#include <sys/uio.h>

/* ---- HTTP/1.1 chunked transfer coding: the one framing of the body, whoever sends it ----
   A chunk is "<size in hex>\r\n" <data> "\r\n"; the body ends with the chunk of size 0,
   "0\r\n\r\n". A sender that gathers writes lets the CRLF that ends a chunk ride with the
   next size line (after_chunk); the bytes on the wire are the same. */

/* Room for the longest chunk head: CRLF, 16 hex digits, CRLF. */
#define BW_HTTP_CHUNK_HEAD_MAX 24
/* The CRLF that ends a chunk's data. */
#define BW_HTTP_CHUNK_TAIL "\r\n"
#define BW_HTTP_CHUNK_TAIL_LEN 2

/* Writes the size line of a chunk of len (> 0) bytes into dst (BW_HTTP_CHUNK_HEAD_MAX bytes),
   preceded by the CRLF ending the previous chunk when after_chunk. Returns its length. */
size_t bw_http_chunk_head(char *dst, size_t len, int after_chunk);

/* The terminating chunk, preceded by the CRLF ending the previous chunk when after_chunk;
   *len receives its length. Static text. */
const char *bw_http_chunk_end(int after_chunk, size_t *len);

/* Sends every byte of iov[0..count) (the array is consumed: entries are advanced).
   timeout_ms < 0 waits forever. 0, or an errno value: ETIMEDOUT when the socket accepted
   nothing for timeout_ms, EPIPE / ECONNRESET when the peer is gone. */
int bw_send_all(int fd, struct iovec *iov, int count, long timeout_ms);

/* 1 when the peer already sent something (on a request socket: a response before the end
   of the body), 0 otherwise. */
int bw_peer_answered(int fd);
#endif
