#define _GNU_SOURCE /* MSG_NOSIGNAL, MSG_DONTWAIT, getaddrinfo, clock_gettime */
#include "cql_conn.h"
#include "cql_shard.h"

#include "fork_origin.h"
#include "socket_send.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Bytes asked of the socket per read. */
#define READ_STEP ((size_t)64 << 10)

struct bw_cql_conn {
    int fd;
    bw_tls *tls;
    bw_origin origin;
    long timeout_ms;
    uint32_t max_frame;
    bw_buf in;  /* bytes read, not yet taken as frames */
    bw_buf out; /* frames to write: out_sent of them written */
    size_t out_sent;
    int broken;
    _Atomic int aborted; /* bw_cql_abort was called (from any thread) */
    const bw_cancel *cancel; /* the options' cancel: ends every wait once fired */
    bw_cql_status broken_status;
    char peer[300];
    char authenticator[128];
    uint8_t *supported;     /* the SUPPORTED body of the handshake (malloc'd), and its length */
    size_t supported_len;
    bw_cql_kept payloads;   /* tablet routing entries answered, not yet taken */
};

/* ---- the ERROR body ---- */

const char *bw_cql_error_name(int32_t code) {
    switch (code) {
    case BW_CQL_ERR_SERVER: return "Server error";
    case BW_CQL_ERR_PROTOCOL: return "Protocol error";
    case BW_CQL_ERR_BAD_CREDENTIALS: return "Bad credentials";
    case BW_CQL_ERR_UNAVAILABLE: return "Unavailable";
    case BW_CQL_ERR_OVERLOADED: return "Overloaded";
    case BW_CQL_ERR_IS_BOOTSTRAPPING: return "Is bootstrapping";
    case BW_CQL_ERR_TRUNCATE: return "Truncate error";
    case BW_CQL_ERR_WRITE_TIMEOUT: return "Write timeout";
    case BW_CQL_ERR_READ_TIMEOUT: return "Read timeout";
    case BW_CQL_ERR_READ_FAILURE: return "Read failure";
    case BW_CQL_ERR_FUNCTION_FAILURE: return "Function failure";
    case BW_CQL_ERR_WRITE_FAILURE: return "Write failure";
    case BW_CQL_ERR_CDC_WRITE_FAILURE: return "CDC write failure";
    case BW_CQL_ERR_CAS_WRITE_UNKNOWN: return "CAS write unknown";
    case BW_CQL_ERR_SYNTAX: return "Syntax error";
    case BW_CQL_ERR_UNAUTHORIZED: return "Unauthorized";
    case BW_CQL_ERR_INVALID: return "Invalid";
    case BW_CQL_ERR_CONFIG: return "Config error";
    case BW_CQL_ERR_ALREADY_EXISTS: return "Already exists";
    case BW_CQL_ERR_UNPREPARED: return "Unprepared";
    default: return "Unknown";
    }
}

int bw_cql_error_retryable(int32_t code) {
    return code == BW_CQL_ERR_OVERLOADED || code == BW_CQL_ERR_WRITE_TIMEOUT ||
           code == BW_CQL_ERR_UNAVAILABLE;
}

/* Copies a counted string into a NUL-ended field of `room` bytes; 1 when it was cut. */
static int copy_text(char *dst, size_t room, const char *src, size_t n) {
    int cut = n >= room;
    if (cut)
        n = room - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return cut;
}

int bw_cql_error_parse(const uint8_t *body, size_t len, bw_cql_error *out) {
    bw_cql_cursor c = bw_cql_cursor_make(body, len);
    bw_cql_error e;
    memset(&e, 0, sizeof e);
    const char *s;
    size_t n;
    if (bw_cql_get_int(&c, &e.code) < 0 || bw_cql_get_string(&c, &s, &n) < 0)
        return -1;
    e.message_cut = copy_text(e.message, sizeof e.message, s, n);
    int32_t failures;
    switch (e.code) {
    case BW_CQL_ERR_UNAVAILABLE:
        if (bw_cql_get_short(&c, &e.consistency) < 0 || bw_cql_get_int(&c, &e.required) < 0 ||
            bw_cql_get_int(&c, &e.alive) < 0)
            return -1;
        e.has_consistency = 1;
        break;
    case BW_CQL_ERR_WRITE_TIMEOUT:
    case BW_CQL_ERR_WRITE_FAILURE:
    case BW_CQL_ERR_READ_TIMEOUT:
    case BW_CQL_ERR_READ_FAILURE:
        /* consistency, received, blockfor; then a failure's count, a write's type */
        if (bw_cql_get_short(&c, &e.consistency) < 0 || bw_cql_get_int(&c, &e.received) < 0 ||
            bw_cql_get_int(&c, &e.blockfor) < 0)
            return -1;
        e.has_consistency = 1;
        if ((e.code == BW_CQL_ERR_WRITE_FAILURE || e.code == BW_CQL_ERR_READ_FAILURE) &&
            bw_cql_get_int(&c, &failures) < 0)
            return -1;
        if (e.code == BW_CQL_ERR_WRITE_TIMEOUT || e.code == BW_CQL_ERR_WRITE_FAILURE) {
            if (bw_cql_get_string(&c, &s, &n) < 0)
                return -1;
            e.has_write_type = 1;
            copy_text(e.write_type, sizeof e.write_type, s, n);
        }
        break;
    default:
        break; /* overloaded carries nothing more; the others' fields are not needed */
    }
    *out = e;
    return 0;
}

/* ---- status ---- */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sets *status (kind, errno, the message after "host:port: "); a failure that leaves the
   stream unusable marks the connection broken with it. Returns -1. */
static int fail(bw_cql_conn *conn, bw_cql_status *status, bw_cql_failure kind, int err,
                const char *fmt, ...) {
    status->kind = kind;
    status->sys_errno = err;
    int at = snprintf(status->message, sizeof status->message, "%s: ",
                      conn != NULL ? conn->peer : "");
    if (at < 0 || (size_t)at >= sizeof status->message)
        at = 0;
    va_list args;
    va_start(args, fmt);
    vsnprintf(status->message + at, sizeof status->message - (size_t)at, fmt, args);
    va_end(args);
    if (conn != NULL && kind != BW_CQL_E_SERVER && kind != BW_CQL_E_CALLBACK &&
        kind != BW_CQL_E_AUTH) {
        conn->broken = 1;
        conn->broken_status = *status;
    }
    return -1;
}

/* The status for an ERROR answer. */
static int fail_server(bw_cql_conn *conn, bw_cql_status *status, const bw_cql_error *error) {
    status->error = *error;
    return fail(conn, status, BW_CQL_E_SERVER, 0, "error 0x%04x (%s): %s", (unsigned)error->code,
                bw_cql_error_name(error->code), error->message);
}

/* The status for a transport result rc (an errno, ETIMEDOUT, BW_TLS_FAILED), while `doing`. */
static int fail_io(bw_cql_conn *conn, bw_cql_status *status, int rc, const char *doing) {
#ifdef BW_HAVE_OPENSSL
    if (rc == BW_TLS_FAILED && conn->tls != NULL)
        return fail(conn, status, BW_CQL_E_TLS, 0, "TLS failed while %s: %s", doing,
                    bw_tls_message(conn->tls));
#endif
    if (rc == ETIMEDOUT)
        return fail(conn, status, BW_CQL_E_TIMEOUT, ETIMEDOUT,
                    "no progress for %ld ms while %s", conn->timeout_ms, doing);
    if (rc == ECANCELED)
        return fail(conn, status, BW_CQL_E_LOST, ECANCELED, "aborted while %s", doing);
    return fail(conn, status, BW_CQL_E_LOST, rc, "connection lost while %s: %s", doing,
                strerror(rc));
}

/* ---- the socket ---- */

/* Connects a non-blocking TCP socket to one of host's addresses within timeout_ms. The
   descriptor, or -1 with *status set. */
/* Binds fd (of `family`) to the wildcard address at local `port`: a node's shard-aware port
   picks the shard by it. 0, or -1 with errno. */
static int bind_local_port(int fd, int family, int port) {
    struct sockaddr_storage local;
    socklen_t len;
    memset(&local, 0, sizeof local);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&local;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&local;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        len = sizeof *a;
    }
    return bind(fd, (struct sockaddr *)&local, len);
}

static int connect_tcp(bw_cql_conn *conn, const bw_cql_options *opt, bw_cql_status *status) {
    char port[16];
    snprintf(port, sizeof port, "%d", opt->port ? opt->port : 9042);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *found = NULL;
    int gai = getaddrinfo(opt->host, port, &hints, &found);
    if (gai != 0) {
        fail(conn, status, BW_CQL_E_CONNECT, 0, "cannot resolve the host: %s", gai_strerror(gai));
        return -1;
    }
    long long deadline = opt->connect_timeout_ms < 0 ? -1 : now_ms() + opt->connect_timeout_ms;
    int last = ECONNREFUSED;
    int fd = -1;
    for (struct addrinfo *ai = found; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int rc = 0;
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
            rc = errno;
        else if (opt->local_port > 0 && bind_local_port(fd, ai->ai_family, opt->local_port) < 0)
            rc = errno;
        else if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            rc = errno;
            while (rc == EINPROGRESS || rc == EINTR) {
                long left = deadline < 0 ? -1 : (long)(deadline - now_ms());
                rc = left == 0 || left < -1 ? ETIMEDOUT
                                            : bw_wait_fd(fd, POLLOUT, conn->cancel, left);
                int interrupted = rc == EINTR && opt->interrupted != NULL &&
                                  opt->interrupted(opt->interrupt_ctx);
                if (interrupted || rc == ECANCELED) {
                    close(fd);
                    freeaddrinfo(found);
                    if (interrupted)
                        fail(conn, status, BW_CQL_E_INTERRUPTED, EINTR,
                             "interrupted while connecting");
                    else
                        fail_io(conn, status, ECANCELED, "connecting");
                    return -1;
                }
                if (rc == EINTR)
                    continue;
                if (rc == 0) {
                    socklen_t len = sizeof rc;
                    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &len) < 0)
                        rc = errno;
                }
                break;
            }
        }
        if (rc != 0) {
            last = rc;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0) {
        fail(conn, status, BW_CQL_E_CONNECT, last, "cannot connect: %s", strerror(last));
        return -1;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* small frames, now */
    return fd;
}

/* Writes the frames waiting in conn->out, waiting for room at most the connection's timeout
   without a byte taken. 0 when all are written; BW_SEND_ANSWERED when the server answered
   while the write waited for room (the rest stays queued: read, then call again); EINTR
   when a wait was cut short by a signal and interrupted(ctx) said stop (the rest stays
   queued); else a transport result. */
static int write_pending(bw_cql_conn *conn, int (*interrupted)(void *ctx), void *ctx) {
    for (;;) {
        size_t left = conn->out.len - conn->out_sent;
        if (left == 0)
            return 0;
        struct iovec iov = {conn->out.data + conn->out_sent, left};
        int rc;
#ifdef BW_HAVE_OPENSSL
        if (conn->tls != NULL)
            /* an interrupted TLS record must be finished with the same bytes: no watching
               here; the window bounds what the server may have to write meanwhile */
            rc = bw_tls_write_all(conn->tls, &iov, 1, conn->timeout_ms, 0);
        else
#endif
            /* what the socket takes now; the wait for room is this loop's, so that a
               signal ends it */
            rc = bw_send_all(conn->fd, &iov, 1, 0, 1);
        /* the writers advance their array: a whole write leaves nothing of it to read */
        conn->out_sent = rc == 0 ? conn->out.len : conn->out.len - iov.iov_len;
        if (conn->out_sent == conn->out.len) {
            conn->out.len = 0;
            conn->out_sent = 0;
        }
        if (rc == ETIMEDOUT && conn->tls == NULL) {
            rc = bw_wait_fd(conn->fd, POLLOUT | POLLIN, conn->cancel, conn->timeout_ms);
            if (rc == 0 && bw_peer_answered(conn->fd))
                return BW_SEND_ANSWERED;
            if (rc == 0)
                continue;
        }
        if (rc != EINTR)
            return rc;
        if (interrupted != NULL && interrupted(ctx))
            return EINTR;
    }
}

/* read_some found the socket readable but nothing to take (a spurious wakeup). */
#define NOTHING_YET (-3)

/* Reads what the server sent, waiting at most wait_ms (< 0: no limit). 0 with *got bytes
   appended to conn->in (0: the server ended the connection), or ETIMEDOUT, EINTR,
   NOTHING_YET, another transport result. */
static int read_some(bw_cql_conn *conn, long wait_ms, size_t *got) {
    *got = 0;
    if (bw_buf_reserve(&conn->in, READ_STEP) < 0)
        return ENOMEM;
    size_t room = conn->in.cap - conn->in.len;
#ifdef BW_HAVE_OPENSSL
    if (conn->tls != NULL) {
        int rc = bw_tls_read(conn->tls, conn->in.data + conn->in.len, room, wait_ms, got);
        if (rc == 0)
            conn->in.len += *got;
        return rc;
    }
#endif
    int rc = bw_wait_fd(conn->fd, POLLIN, conn->cancel, wait_ms);
    if (rc != 0)
        return rc;
    ssize_t n = recv(conn->fd, conn->in.data + conn->in.len, room, MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? NOTHING_YET : errno;
    conn->in.len += (size_t)n;
    *got = (size_t)n;
    return 0;
}

/* ---- the run ---- */

typedef enum { SLOT_FREE, SLOT_SENT, SLOT_BACKOFF } slot_state;

typedef struct {
    slot_state state;
    bw_cql_request request;
    int attempts;
    long long due; /* SLOT_BACKOFF: when it is sent again */
} slot;

typedef struct {
    bw_cql_conn *conn;
    const bw_cql_run_options *options;
    bw_cql_consume consume;
    void *ctx;
    bw_cql_outcome *outcome;
    bw_cql_status *status;
    slot *slots;
    int *free_ids; /* a stack of free stream ids */
    int free_count;
    int busy;      /* slots not free */
    int sent;      /* slots SENT */
    int stopping;  /* a failure was recorded: take no new requests, answer what is out */
    int end_now;   /* a server's error or a refused answer: the run ends once the answers
                      already read are taken, without waiting for those still out */
} run_state;

/* Appends the frame of slot id's request to the output. 0, or -1 when out of memory. */
static int queue_frame(run_state *rs, int id) {
    slot *s = &rs->slots[id];
    bw_cql_header h = {BW_CQL_VERSION_4, 0, (int16_t)id, s->request.opcode,
                       (uint32_t)s->request.len};
    if (bw_buf_reserve(&rs->conn->out, BW_CQL_HEADER_SIZE + s->request.len) < 0)
        return -1;
    bw_cql_header_write((uint8_t *)bw_buf_tail(&rs->conn->out), &h);
    rs->conn->out.len += BW_CQL_HEADER_SIZE;
    if (s->request.len)
        bw_buf_put(&rs->conn->out, s->request.body, s->request.len);
    if (s->state != SLOT_SENT)
        rs->sent++;
    s->state = SLOT_SENT;
    return 0;
}

static void release_slot(run_state *rs, int id) {
    slot *s = &rs->slots[id];
    if (s->state == SLOT_SENT)
        rs->sent--;
    s->state = SLOT_FREE;
    rs->free_ids[rs->free_count++] = id;
    rs->busy--;
}

/* Records slot id's request as unanswered and frees the slot. */
static void give_up_slot(run_state *rs, int id) {
    bw_cql_outcome *o = rs->outcome;
    o->unanswered[o->unanswered_count++] = rs->slots[id].request.tag;
    release_slot(rs, id);
}

/* The first failure stops the run: later ones only add unanswered requests. Requests
   waiting for a retry are given up at once; those in flight are still answered. */
static void begin_stop(run_state *rs) {
    rs->stopping = 1;
    for (int id = 0; id < rs->options->window; id++)
        if (rs->slots[id].state == SLOT_BACKOFF)
            give_up_slot(rs, id);
}

/* A connection that can no longer be read: every request out is unanswered. */
static void abandon_all(run_state *rs) {
    rs->stopping = 1;
    for (int id = 0; id < rs->options->window; id++)
        if (rs->slots[id].state != SLOT_FREE)
            give_up_slot(rs, id);
}

/* The pause before retry number `attempt` (1, 2, ...). */
static long long backoff(const bw_cql_run_options *o, int attempt) {
    long long pause = o->backoff_ms > 0 ? o->backoff_ms : 0;
    for (int i = 1; i < attempt && pause < o->backoff_max_ms; i++)
        pause *= 2;
    return pause > o->backoff_max_ms && o->backoff_max_ms >= 0 ? o->backoff_max_ms : pause;
}

/* The run stops at once at the answer of slot `id` (a server error, or one its consumer
   refused): the slot is given up and the stop begins; first_failure (the answer set the
   run's status) makes its request's tag the outcome's failed tag. 0: take_frame's result. */
static int stop_at_answer(run_state *rs, int id, int first_failure) {
    if (first_failure) {
        rs->outcome->has_failed_tag = 1;
        rs->outcome->failed_tag = rs->slots[id].request.tag;
    }
    give_up_slot(rs, id);
    begin_stop(rs);
    rs->end_now = 1;
    return 0;
}

/* One whole frame (header h, its body). 0, or -1 when it stops the run for good (the
   connection is broken; status set). A server error or a consumer's stop sets the status
   (if none yet) and begins the stop, returning 0. */
static int take_frame(run_state *rs, const bw_cql_header *h, const uint8_t *body) {
    bw_cql_conn *conn = rs->conn;
    bw_cql_status *st = rs->status;
    bw_cql_status scratch;
    bw_cql_status *first = st->kind == BW_CQL_OK ? st : &scratch;
    if (h->stream < 0) {
        if (h->opcode == BW_CQL_OP_EVENT)
            return 0; /* not registered for, but harmless */
        return fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                    "answered opcode 0x%02x on stream id %d, which no request uses",
                    (unsigned)h->opcode, (int)h->stream);
    }
    if (h->stream >= rs->options->window || rs->slots[h->stream].state != SLOT_SENT)
        return fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                    "answered on stream id %d, which has no request in flight", (int)h->stream);
    if (h->flags & BW_CQL_FLAG_COMPRESSION)
        return fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                    "sent a compressed frame on a connection without compression");
    int id = h->stream;
    slot *s = &rs->slots[id];
    bw_cql_cursor c = bw_cql_cursor_make(body, h->length);
    if (bw_cql_kept_take_payload(&conn->payloads, h->flags, body, h->length) < 0 ||
        bw_cql_skip_response_extras(&c, h->flags) < 0)
        return fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                    "sent a frame (stream id %d) too short for its flags 0x%02x", id,
                    (unsigned)h->flags);
    if (h->opcode == BW_CQL_OP_ERROR) {
        bw_cql_error e;
        if (bw_cql_error_parse(c.p, c.left, &e) < 0)
            return fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                        "sent an ERROR body that does not parse (stream id %d, %zu bytes)", id,
                        c.left);
        if (!rs->stopping && bw_cql_error_retryable(e.code) &&
            s->attempts < rs->options->max_retries) {
            s->attempts++;
            rs->outcome->retries++;
            if (e.code == BW_CQL_ERR_OVERLOADED)
                rs->outcome->overloaded++;
            s->state = SLOT_BACKOFF;
            rs->sent--;
            s->due = now_ms() + backoff(rs->options, s->attempts);
            return 0;
        }
        if (first == st)
            fail_server(conn, st, &e);
        return stop_at_answer(rs, id, first == st);
    }
    /* every answer is judged, those after a failure too: one the consumer refuses is not
       an acknowledgement */
    if (rs->consume(rs->ctx, s->request.tag, h->opcode, c.p, c.left) < 0) {
        if (first == st)
            fail(conn, st, BW_CQL_E_CALLBACK, 0, "the answer's consumer refused an answer");
        return stop_at_answer(rs, id, first == st);
    }
    release_slot(rs, id);
    rs->outcome->answered++;
    return 0;
}

/* Takes every whole frame in conn->in. 0, or -1 when the connection broke (status set). */
static int take_frames(run_state *rs) {
    bw_cql_conn *conn = rs->conn;
    size_t at = 0;
    int rc = 0;
    bw_cql_status scratch;
    while (conn->in.len - at >= BW_CQL_HEADER_SIZE) {
        bw_cql_status *first = rs->status->kind == BW_CQL_OK ? rs->status : &scratch;
        const uint8_t *p = (const uint8_t *)conn->in.data + at;
        bw_cql_header h;
        if (bw_cql_header_read(p, &h) < 0 || h.length > conn->max_frame) {
            uint32_t claimed = (uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 |
                               (uint32_t)p[7] << 8 | p[8];
            rc = fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                      "sent a frame of %lu bytes, over the limit of %lu", (unsigned long)claimed,
                      (unsigned long)conn->max_frame);
            break;
        }
        if (h.version != (BW_CQL_RESPONSE_BIT | BW_CQL_VERSION_4)) {
            rc = fail(conn, first, BW_CQL_E_PROTOCOL, 0,
                      "answered with version byte 0x%02x, not 0x84 (a response of protocol "
                      "v4)", (unsigned)h.version);
            break;
        }
        if (conn->in.len - at - BW_CQL_HEADER_SIZE < h.length)
            break; /* the rest of this frame is still to come */
        if (take_frame(rs, &h, p + BW_CQL_HEADER_SIZE) < 0) {
            rc = -1;
            break;
        }
        at += BW_CQL_HEADER_SIZE + h.length;
    }
    if (rc < 0) {
        conn->in.len = 0;
        return -1;
    }
    memmove(conn->in.data, conn->in.data + at, conn->in.len - at);
    conn->in.len -= at;
    return 0;
}

int bw_cql_run(bw_cql_conn *conn, const bw_cql_run_options *options, bw_cql_produce produce,
               bw_cql_consume consume, void *ctx, bw_cql_outcome *outcome,
               bw_cql_status *status) {
    memset(outcome, 0, sizeof *outcome);
    memset(status, 0, sizeof *status);
    if (bw_origin_inherited(&conn->origin))
        return fail(NULL, status, BW_CQL_E_INHERITED, 0,
                    "the connection belongs to the process this one was forked from");
    if (conn->broken) {
        *status = conn->broken_status;
        return -1;
    }
    int window = options->window;
    if (window < 1 || window > BW_CQL_MAX_WINDOW || options->max_retries < 0)
        return fail(conn, status, BW_CQL_E_CALLBACK, 0,
                    "window must be 1..%d and max_retries >= 0", BW_CQL_MAX_WINDOW);
    run_state rs = {.conn = conn, .options = options, .consume = consume, .ctx = ctx,
                    .outcome = outcome, .status = status};
    rs.slots = calloc((size_t)window, sizeof *rs.slots);
    rs.free_ids = malloc((size_t)window * sizeof *rs.free_ids);
    outcome->unanswered = malloc((size_t)window * sizeof *outcome->unanswered);
    int result = -1;
    if (rs.slots == NULL || rs.free_ids == NULL || outcome->unanswered == NULL) {
        fail(NULL, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory for a window of %d", window);
        goto done;
    }
    for (int i = 0; i < window; i++)
        rs.free_ids[i] = window - 1 - i; /* stream id 0 first */
    rs.free_count = window;
    int producer_done = 0;
    long long quiet_since = now_ms(); /* the last time bytes moved, either way */
    for (;;) {
        /* new requests while the window has room */
        while (!rs.stopping && !producer_done && rs.free_count > 0) {
            bw_cql_request req;
            int got = produce(ctx, &req);
            if (got < 0) {
                fail(conn, status, BW_CQL_E_CALLBACK, 0, "the request producer stopped the run");
                begin_stop(&rs);
                break;
            }
            if (got == 0) {
                producer_done = 1;
                break;
            }
            if (req.len > BW_CQL_MAX_BODY) {
                fail(conn, status, BW_CQL_E_CALLBACK, 0,
                     "a request body of %zu bytes is over the protocol's limit", req.len);
                outcome->has_failed_tag = 1;
                outcome->failed_tag = req.tag;
                begin_stop(&rs);
                break;
            }
            outcome->taken++;
            int id = rs.free_ids[--rs.free_count];
            rs.busy++;
            rs.slots[id].request = req;
            rs.slots[id].attempts = 0;
            rs.slots[id].state = SLOT_FREE;
            if (queue_frame(&rs, id) < 0) {
                rs.slots[id].state = SLOT_SENT; /* counted unanswered below */
                rs.sent++;
                fail(conn, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory for a request");
                abandon_all(&rs);
                goto done;
            }
        }
        /* retries that are due */
        long long now = now_ms();
        long long next_due = -1;
        for (int id = 0; id < window && !rs.stopping; id++) {
            slot *s = &rs.slots[id];
            if (s->state != SLOT_BACKOFF)
                continue;
            if (s->due <= now) {
                if (queue_frame(&rs, id) < 0) {
                    fail(conn, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory for a request");
                    abandon_all(&rs);
                    goto done;
                }
            } else if (next_due < 0 || s->due < next_due) {
                next_due = s->due;
            }
        }
        if (rs.busy == 0 && (producer_done || rs.stopping))
            break;
        size_t unwritten = conn->out.len - conn->out_sent;
        int wrote = write_pending(conn, options->interrupted, ctx);
        if (conn->out.len - conn->out_sent < unwritten)
            quiet_since = now_ms(); /* the server took bytes: it is not stalled */
        if (wrote == EINTR) {
            bw_cql_status scratch;
            fail(conn, status->kind == BW_CQL_OK ? status : &scratch, BW_CQL_E_INTERRUPTED,
                 EINTR, "interrupted with %d request(s) unanswered", rs.busy);
            abandon_all(&rs);
            goto done;
        }
        if (wrote != 0 && wrote != BW_SEND_ANSWERED) {
            bw_cql_status scratch;
            fail_io(conn, status->kind == BW_CQL_OK ? status : &scratch, wrote,
                    "sending requests");
            abandon_all(&rs);
            goto done;
        }
        if (rs.sent == 0)
            quiet_since = now_ms(); /* only pauses before retries: nothing is awaited */
        /* wait for answers, or until the next retry is due */
        long long deadline = conn->timeout_ms < 0 ? -1 : quiet_since + conn->timeout_ms;
        now = now_ms();
        long wait = -1;
        if (deadline >= 0)
            wait = deadline > now ? (long)(deadline - now) : 0;
        if (next_due >= 0 && (wait < 0 || next_due - now < wait))
            wait = next_due > now ? (long)(next_due - now) : 0;
        size_t got = 0;
        int rc = wrote == BW_SEND_ANSWERED ? read_some(conn, 0, &got)
                                           : read_some(conn, wait, &got);
        if (rc == 0 && got == 0) {
            bw_cql_status scratch;
            fail(conn, status->kind == BW_CQL_OK ? status : &scratch, BW_CQL_E_LOST, 0,
                 conn->aborted ? "the connection was aborted with %d request(s) unanswered"
                               : "the server closed the connection with %d request(s) "
                                 "unanswered", rs.busy);
            abandon_all(&rs);
            goto done;
        }
        if (rc == 0) {
            quiet_since = now_ms();
            if (take_frames(&rs) < 0) {
                abandon_all(&rs);
                goto done;
            }
            if (rs.end_now && rs.busy > 0) {
                /* a failure of the run's: it ends now, whatever the requests still out do
                   (a node may never answer them); their answers may still come, so the
                   connection is not used again */
                int out = rs.busy;
                abandon_all(&rs);
                conn->broken = 1;
                memset(&conn->broken_status, 0, sizeof conn->broken_status);
                conn->broken_status.kind = BW_CQL_E_LOST;
                snprintf(conn->broken_status.message, sizeof conn->broken_status.message,
                         "%s: not used again: a run ended at an error with %d request(s) "
                         "unanswered, whose answers may still come", conn->peer, out);
                goto done;
            }
            continue;
        }
        if (rc == NOTHING_YET)
            continue;
        if (rc == EINTR) {
            if (options->interrupted != NULL && options->interrupted(ctx)) {
                bw_cql_status scratch;
                fail(conn, status->kind == BW_CQL_OK ? status : &scratch, BW_CQL_E_INTERRUPTED,
                     EINTR, "interrupted with %d request(s) unanswered", rs.busy);
                abandon_all(&rs);
                goto done;
            }
            continue;
        }
        if (rc == ETIMEDOUT) {
            if (rs.sent > 0 && deadline >= 0 && now_ms() >= deadline) {
                bw_cql_status scratch;
                fail_io(conn, status->kind == BW_CQL_OK ? status : &scratch, ETIMEDOUT,
                        "waiting for answers");
                abandon_all(&rs);
                goto done;
            }
            continue; /* a retry is due */
        }
        bw_cql_status scratch;
        fail_io(conn, status->kind == BW_CQL_OK ? status : &scratch, rc, "reading answers");
        abandon_all(&rs);
        goto done;
    }
    result = status->kind == BW_CQL_OK ? 0 : -1;
done:
    free(rs.slots);
    free(rs.free_ids);
    if (outcome->unanswered_count == 0) {
        free(outcome->unanswered);
        outcome->unanswered = NULL;
    }
    return result;
}

void bw_cql_outcome_free(bw_cql_outcome *outcome) {
    free(outcome->unanswered);
    outcome->unanswered = NULL;
    outcome->unanswered_count = 0;
}

/* ---- one request ---- */

typedef struct {
    uint8_t opcode;
    const uint8_t *body;
    size_t len;
    int given;
    uint8_t answer_opcode;
    uint8_t *answer;
    size_t answer_len;
    int nomem;
    int (*interrupted)(void *ctx);
    void *interrupt_ctx;
} single;

static int single_interrupted(void *ctx) {
    single *one = ctx;
    return one->interrupted(one->interrupt_ctx);
}

static int single_produce(void *ctx, bw_cql_request *request) {
    single *one = ctx;
    if (one->given)
        return 0;
    one->given = 1;
    request->opcode = one->opcode;
    request->body = one->body;
    request->len = one->len;
    request->tag = 0;
    return 1;
}

static int single_consume(void *ctx, uint64_t tag, uint8_t opcode, const uint8_t *body,
                          size_t len) {
    (void)tag;
    single *one = ctx;
    one->answer = malloc(len ? len : 1);
    if (one->answer == NULL) {
        one->nomem = 1;
        return -1;
    }
    if (len)
        memcpy(one->answer, body, len);
    one->answer_len = len;
    one->answer_opcode = opcode;
    return 0;
}

int bw_cql_request_one(bw_cql_conn *conn, uint8_t opcode, const uint8_t *body, size_t len,
                       uint8_t *answer_opcode, uint8_t **answer_body, size_t *answer_len,
                       int (*interrupted)(void *ctx), void *interrupt_ctx,
                       bw_cql_status *status) {
    single one = {opcode, body, len, 0, 0, NULL, 0, 0, interrupted, interrupt_ctx};
    bw_cql_run_options options = {1, 0, 0, 0, interrupted != NULL ? single_interrupted : NULL};
    bw_cql_outcome outcome;
    int rc = bw_cql_run(conn, &options, single_produce, single_consume, &one, &outcome, status);
    bw_cql_outcome_free(&outcome);
    if (one.nomem) {
        status->kind = BW_CQL_E_NOMEM;
        snprintf(status->message, sizeof status->message, "%s: out of memory for an answer",
                 conn->peer);
    }
    if (rc < 0 || one.nomem) {
        free(one.answer);
        return -1;
    }
    *answer_opcode = one.answer_opcode;
    *answer_body = one.answer;
    *answer_len = one.answer_len;
    return 0;
}

/* ---- the handshake ---- */

/* The STARTUP exchange and, when the server asks, SASL PLAIN. 0, or -1 with *status. */
static int handshake(bw_cql_conn *conn, const bw_cql_options *opt, bw_cql_status *status) {
    bw_buf body;
    uint8_t op = 0;
    uint8_t *answer = NULL;
    size_t answer_len = 0;
    int rc = -1;
    if (bw_buf_init(&body, 64) < 0)
        return fail(conn, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory");
    /* OPTIONS: the server says what it supports (a [string multimap]) */
    if (bw_cql_request_one(conn, BW_CQL_OP_OPTIONS, NULL, 0, &op, &answer, &answer_len,
                           opt->interrupted, opt->interrupt_ctx, status) < 0)
        goto cleanup;
    {
        bw_cql_cursor c = bw_cql_cursor_make(answer, answer_len);
        uint16_t count;
        bw_cql_cursor items;
        if (op != BW_CQL_OP_SUPPORTED || bw_cql_get_string_multimap(&c, &count, &items) < 0) {
            fail(conn, status, BW_CQL_E_PROTOCOL, 0,
                 "answered OPTIONS with opcode 0x%02x, not a SUPPORTED body", (unsigned)op);
            goto cleanup;
        }
    }
    conn->supported = answer; /* kept: the caller reads the node's extensions in it */
    conn->supported_len = answer_len;
    answer = NULL;
    const char *keys[3] = {"CQL_VERSION", NULL, NULL};
    const char *values[3] = {"3.0.0", NULL, NULL};
    size_t options = 1;
    if (opt->throw_on_overload) {
        keys[options] = "THROW_ON_OVERLOAD";
        values[options++] = "1";
    }
    if (opt->tablets_routing &&
        bw_cql_supported_has(conn->supported, conn->supported_len, BW_CQL_TABLETS_OPTION)) {
        keys[options] = BW_CQL_TABLETS_OPTION;
        values[options++] = "";
    }
    if (bw_cql_put_string_map(&body, keys, values, options) < 0) {
        fail(conn, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory");
        goto cleanup;
    }
    if (bw_cql_request_one(conn, BW_CQL_OP_STARTUP, (const uint8_t *)body.data, body.len, &op,
                           &answer, &answer_len, opt->interrupted, opt->interrupt_ctx,
                           status) < 0)
        goto cleanup;
    if (op == BW_CQL_OP_READY) {
        rc = 0;
        goto cleanup;
    }
    if (op != BW_CQL_OP_AUTHENTICATE) {
        fail(conn, status, BW_CQL_E_PROTOCOL, 0,
             "answered STARTUP with opcode 0x%02x, not READY or AUTHENTICATE", (unsigned)op);
        goto cleanup;
    }
    {
        bw_cql_cursor c = bw_cql_cursor_make(answer, answer_len);
        const char *name;
        size_t n;
        if (bw_cql_get_string(&c, &name, &n) < 0) {
            fail(conn, status, BW_CQL_E_PROTOCOL, 0, "sent an AUTHENTICATE body without a name");
            goto cleanup;
        }
        copy_text(conn->authenticator, sizeof conn->authenticator, name, n);
    }
    if (opt->username == NULL || opt->password == NULL) {
        fail(conn, status, BW_CQL_E_AUTH, 0,
             "the server requires authentication (%s): give a username and a password",
             conn->authenticator);
        goto cleanup;
    }
    /* SASL PLAIN: authorization id (empty), NUL, user, NUL, password */
    {
        size_t nu = strlen(opt->username), np = strlen(opt->password);
        body.len = 0;
        if (nu + np + 2 > INT32_MAX || bw_buf_reserve(&body, 4 + nu + np + 2) < 0) {
            fail(conn, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory");
            goto cleanup;
        }
        bw_cql_put_int(&body, (int32_t)(nu + np + 2));
        bw_buf_putc(&body, '\0');
        bw_buf_put(&body, opt->username, nu);
        bw_buf_putc(&body, '\0');
        bw_buf_put(&body, opt->password, np);
    }
    free(answer);
    answer = NULL;
    rc = bw_cql_request_one(conn, BW_CQL_OP_AUTH_RESPONSE, (const uint8_t *)body.data, body.len,
                            &op, &answer, &answer_len, opt->interrupted, opt->interrupt_ctx,
                            status);
    memset(body.data, 0, body.len); /* the password leaves no copy behind */
    if (rc < 0)
        goto cleanup;
    rc = -1;
    if (op != BW_CQL_OP_AUTH_SUCCESS) {
        fail(conn, status, BW_CQL_E_AUTH, 0,
             "answered the credentials with opcode 0x%02x, not AUTH_SUCCESS (%s asks for more "
             "than SASL PLAIN)", (unsigned)op, conn->authenticator);
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(answer);
    bw_buf_free(&body);
    return rc;
}

bw_cql_conn *bw_cql_connect(const bw_cql_options *opt, bw_cql_status *status) {
    memset(status, 0, sizeof *status);
    bw_cql_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) {
        fail(NULL, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory");
        return NULL;
    }
    conn->fd = -1;
    conn->cancel = opt->cancel;
    bw_origin_record(&conn->origin);
    conn->timeout_ms = opt->timeout_ms;
    conn->max_frame = opt->max_frame ? opt->max_frame : BW_CQL_MAX_BODY;
    int port = opt->port ? opt->port : 9042;
    if (strchr(opt->host, ':') != NULL)
        snprintf(conn->peer, sizeof conn->peer, "[%s]:%d", opt->host, port);
    else
        snprintf(conn->peer, sizeof conn->peer, "%s:%d", opt->host, port);
    if (bw_buf_init(&conn->in, READ_STEP) < 0 || bw_buf_init(&conn->out, 4096) < 0) {
        fail(NULL, status, BW_CQL_E_NOMEM, ENOMEM, "out of memory");
        goto failed;
    }
    if (bw_cancel_fired(conn->cancel)) { /* no name looked up, nothing connected */
        fail_io(conn, status, ECANCELED, "connecting");
        goto failed;
    }
    conn->fd = connect_tcp(conn, opt, status);
    if (conn->fd < 0)
        goto failed;
    if (opt->tls != NULL) {
#ifdef BW_HAVE_OPENSSL
        char message[BW_TLS_MESSAGE_MAX];
        conn->tls = bw_tls_new(opt->tls, conn->fd, opt->host, message);
        if (conn->tls == NULL) {
            fail(conn, status, BW_CQL_E_TLS, 0, "TLS: %s", message);
            goto failed;
        }
        bw_tls_set_cancel(conn->tls, conn->cancel);
        int rc;
        while ((rc = bw_tls_handshake(conn->tls, opt->connect_timeout_ms)) == EINTR) {
            if (opt->interrupted != NULL && opt->interrupted(opt->interrupt_ctx)) {
                fail(conn, status, BW_CQL_E_INTERRUPTED, EINTR,
                     "interrupted during the TLS handshake");
                goto failed;
            }
        }
        if (rc != 0) {
            if (rc == BW_TLS_FAILED)
                fail(conn, status, BW_CQL_E_TLS, 0, "TLS handshake failed: %s",
                     bw_tls_message(conn->tls));
            else if (rc == ECANCELED)
                fail_io(conn, status, rc, "doing the TLS handshake");
            else
                fail(conn, status, rc == ETIMEDOUT ? BW_CQL_E_TIMEOUT : BW_CQL_E_CONNECT, rc,
                     "TLS handshake: %s", strerror(rc));
            goto failed;
        }
#else
        fail(conn, status, BW_CQL_E_TLS, 0, "built without OpenSSL: no TLS");
        goto failed;
#endif
    }
    if (handshake(conn, opt, status) < 0)
        goto failed;
    return conn;
failed:
    bw_cql_close(conn);
    return NULL;
}

void bw_cql_close(bw_cql_conn *conn) {
    if (conn == NULL)
        return;
#ifdef BW_HAVE_OPENSSL
    bw_tls_free(conn->tls); /* in a forked child: only its memory */
#endif
    if (conn->fd >= 0)
        close(conn->fd); /* the child's own descriptor: the parent's stays open */
    bw_buf_free(&conn->in);
    bw_buf_free(&conn->out);
    free(conn->supported);
    bw_cql_kept_free(&conn->payloads);
    free(conn);
}

void bw_cql_abort(bw_cql_conn *conn) {
    if (conn == NULL || conn->fd < 0 || bw_origin_inherited(&conn->origin))
        return;
    conn->aborted = 1;
    shutdown(conn->fd, SHUT_RDWR); /* a wait on it, in any thread, wakes to its end */
}

int bw_cql_inherited(const bw_cql_conn *conn) { return bw_origin_inherited(&conn->origin); }
int bw_cql_broken(const bw_cql_conn *conn) { return conn->broken; }
const char *bw_cql_peer(const bw_cql_conn *conn) { return conn->peer; }
const char *bw_cql_authenticator(const bw_cql_conn *conn) { return conn->authenticator; }
const uint8_t *bw_cql_supported(const bw_cql_conn *conn, size_t *len) {
    *len = conn->supported_len;
    return conn->supported;
}
bw_cql_kept *bw_cql_payloads(bw_cql_conn *conn) { return &conn->payloads; }

int bw_cql_status_get(const bw_cql_status *status, bw_status *st) {
    bw_status_kind kind;
    switch (status->kind) {
    case BW_CQL_E_SERVER: kind = BW_STATUS_SERVER; break;
    case BW_CQL_E_TLS: kind = BW_STATUS_TLS_SESSION; break;
    case BW_CQL_E_LOST:
    case BW_CQL_E_INTERRUPTED: kind = BW_STATUS_CONNECTION_LOST; break;
    case BW_CQL_E_TIMEOUT: kind = BW_STATUS_TIMEOUT; break;
    case BW_CQL_E_PROTOCOL:
    case BW_CQL_E_CALLBACK: kind = BW_STATUS_PROTOCOL; break;
    case BW_CQL_E_NOMEM: kind = BW_STATUS_NO_MEMORY; break;
    case BW_CQL_E_INHERITED: kind = BW_STATUS_INHERITED; break;
    default: kind = BW_STATUS_CONNECT; break; /* no connection, or credentials it needs */
    }
    return bw_status_set(st, kind, status->sys_errno, "%s", status->message);
}
