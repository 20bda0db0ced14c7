#define _GNU_SOURCE /* MSG_NOSIGNAL */
#include "socket_send.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

/* 1 when poll's revents say the peer sent something, or hung up. */
static int peer_spoke(short revents) { return (revents & (POLLIN | POLLHUP | POLLERR)) != 0; }

/* Waits until fd accepts more; watch: or until the peer answers. 0, BW_SEND_ANSWERED, or
   ETIMEDOUT / errno. */
static int wait_writable(int fd, long timeout_ms, int watch) {
    struct pollfd p = {.fd = fd, .events = (short)(POLLOUT | (watch ? POLLIN : 0))};
    for (;;) {
        int rc = poll(&p, 1, timeout_ms < 0 ? -1 : (int)timeout_ms);
        if (rc > 0)
            return watch && peer_spoke(p.revents) ? BW_SEND_ANSWERED
                                                  : 0; /* writable, or an error the next send reports */
        if (rc == 0)
            return ETIMEDOUT;
        if (errno != EINTR)
            return errno;
    }
}

int bw_send_all(int fd, struct iovec *iov, int count, long timeout_ms, int watch) {
    while (count > 0 && iov[0].iov_len == 0) {
        iov++;
        count--;
    }
    while (count > 0) {
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)count};
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
    return poll(&p, 1, 0) > 0 && peer_spoke(p.revents);
}
