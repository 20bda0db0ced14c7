/* Writing the request body to a connected socket, without Python: gathered writes that
   finish partial sends, with a timeout, and a check for an early answer from the server.
   Core layer: no Python, no GIL (the binding calls it with the GIL released). */
#ifndef BW_SOCKET_SEND_H
#define BW_SOCKET_SEND_H
#include <stddef.h>
#include <sys/uio.h>

/* Returned by a watching write (bw_send_all, bw_tls_write_all) when the peer answered while
   the write waited for room: the rest of iov was not sent. Neither 0 nor an errno value. */
#define BW_SEND_ANSWERED (-2)

/* Waits once until fd is ready for `events` (POLLIN, POLLOUT), at most timeout_ms (< 0: no
   limit; a timeout longer than poll() takes, INT_MAX ms, waits INT_MAX ms). 0 when ready (or
   in a state the next call on fd reports), ETIMEDOUT, EINTR when a signal came first, or
   another errno. The one wait of both senders (this file's and tls_send.c). */
int bw_wait_fd(int fd, short events, long timeout_ms);

/* Sends every byte of iov[0..count) (the array is consumed: entries are advanced), any
   number of entries (one sendmsg takes at most IOV_MAX of them). timeout_ms < 0 waits
   forever; a signal does not end a wait. watch: each wait for room also watches for an
   answer from the peer (bw_peer_answered), and stops the write with BW_SEND_ANSWERED when
   one comes. 0, or an errno value: ETIMEDOUT when the socket accepted nothing for
   timeout_ms, EPIPE / ECONNRESET when the peer is gone. */
int bw_send_all(int fd, struct iovec *iov, int count, long timeout_ms, int watch);

/* 1 when the peer already sent something (on a request socket: a response before the end
   of the body), 0 otherwise. */
int bw_peer_answered(int fd);
#endif
