/* Writing the request body to a connected socket, without Python: gathered writes that
   finish partial sends, with a timeout, and a check for an early answer from the server;
   the one wait on a socket, which another thread can end (bw_cancel).
   Core layer: no Python, no GIL (the binding calls it with the GIL released). */
#ifndef BW_SOCKET_SEND_H
#define BW_SOCKET_SEND_H
#include <stddef.h>
#include <sys/uio.h>

/* Returned by a watching write (bw_send_all, bw_tls_write_all) when the peer answered while
   the write waited for room: the rest of iov was not sent. Neither 0 nor an errno value. */
#define BW_SEND_ANSWERED (-2)

/* A way for one thread to end another's waits at once: a pipe (close-on-exec, non-blocking)
   whose read end turns readable, for good, when the cancel is fired. A wait given it
   (bw_wait_fd) watches that end too. The owner keeps it open while any wait may use it. */
typedef struct {
    int fd[2]; /* the read end, the write end */
} bw_cancel;

/* Opens the pipe. 0, or an errno (EMFILE, ...). */
int bw_cancel_open(bw_cancel *cancel);
/* Fires it: every wait given it, now or later, in any thread, ends with ECANCELED. From any
   thread; firing again changes nothing. */
void bw_cancel_fire(bw_cancel *cancel);
/* 1 once fired (NULL: 0). Never waits. */
int bw_cancel_fired(const bw_cancel *cancel);
/* Closes the pipe, once no wait can use it. */
void bw_cancel_close(bw_cancel *cancel);

/* Waits once until fd is ready for `events` (POLLIN, POLLOUT), at most timeout_ms (< 0: no
   limit; a timeout longer than poll() takes, INT_MAX ms, waits INT_MAX ms), or until cancel
   (NULL: none) is fired. 0 when ready (or in a state the next call on fd reports), ECANCELED
   when cancel is fired (whether fd is ready or not), ETIMEDOUT, EINTR when a signal came
   first, or another errno. The one wait of both senders (this file's and tls_send.c) and of
   the CQL connection. */
int bw_wait_fd(int fd, short events, const bw_cancel *cancel, long timeout_ms);

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
