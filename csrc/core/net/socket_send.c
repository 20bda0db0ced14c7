#define _GNU_SOURCE /* MSG_NOSIGNAL, pipe2 */
#include "socket_send.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int bw_cancel_open(bw_cancel *cancel) {
    if (pipe2(cancel->fd, O_CLOEXEC | O_NONBLOCK) == 0)
        return 0;
    cancel->fd[0] = cancel->fd[1] = -1;
    return errno;
}

void bw_cancel_fire(bw_cancel *cancel) {
    /* one byte, never read: the read end stays readable (a full pipe already is) */
    ssize_t rc;
    do
        rc = write(cancel->fd[1], "x", 1);
    while (rc < 0 && errno == EINTR);
}

int bw_cancel_fired(const bw_cancel *cancel) {
    if (cancel == NULL)
        return 0;
    struct pollfd p = {.fd = cancel->fd[0], .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

void bw_cancel_close(bw_cancel *cancel) {
    for (int i = 0; i < 2; i++) {
        if (cancel->fd[i] >= 0)
            close(cancel->fd[i]);
        cancel->fd[i] = -1;
    }
}

int bw_wait_fd(int fd, short events, const bw_cancel *cancel, long timeout_ms) {
    /* without a cancel, its entry's descriptor is -1, which poll() leaves out */
    struct pollfd p[2] = {{.fd = fd, .events = events},
                          {.fd = cancel != NULL ? cancel->fd[0] : -1, .events = POLLIN}};
    int rc = poll(p, 2, timeout_ms < 0 ? -1 : timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms);
    if (rc > 0 && p[1].revents != 0)
        return ECANCELED; /* first, whatever fd is ready for */
    if (rc > 0)
        return 0; /* ready, or an error the next call reports */
    if (rc == 0)
        return ETIMEDOUT;
    return errno;
}

/* Waits until fd accepts more, through signals; watch: or until the peer answers (sends
   something or hangs up). 0, BW_SEND_ANSWERED, or ETIMEDOUT / errno. */
static int wait_writable(int fd, long timeout_ms, int watch) {
    int rc;
    short events = (short)(POLLOUT | (watch ? POLLIN : 0));
    while ((rc = bw_wait_fd(fd, events, NULL, timeout_ms)) == EINTR) {
    }
    if (rc == 0 && watch && bw_peer_answered(fd))
        return BW_SEND_ANSWERED;
    return rc;
}

int bw_send_all(int fd, struct iovec *iov, int count, long timeout_ms, int watch) {
    while (count > 0 && iov[0].iov_len == 0) {
        iov++;
        count--;
    }
    while (count > 0) {
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)(count < IOV_MAX ? count : IOV_MAX)};
        /* MSG_NOSIGNAL: a closed peer is EPIPE here, never SIGPIPE */
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) { /* Python sockets with a timeout are non-blocking */
                int rc = wait_writable(fd, timeout_ms, watch);
                if (rc != 0)
                    return rc;
                continue;
            }
            return errno;
        }
        size_t left = (size_t)sent;
        while (count > 0 && left >= iov[0].iov_len) {
            left -= iov[0].iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov[0].iov_base = (char *)iov[0].iov_base + left;
            iov[0].iov_len -= left;
        }
    }
    return 0;
}

int bw_peer_answered(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}
