#define _GNU_SOURCE /* MSG_NOSIGNAL */
#include "socket_send.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>

int bw_wait_fd(int fd, short events, long timeout_ms) {
    struct pollfd p = {.fd = fd, .events = events};
    int rc = poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms);
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
    while ((rc = bw_wait_fd(fd, (short)(POLLOUT | (watch ? POLLIN : 0)), timeout_ms)) == EINTR) {
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
