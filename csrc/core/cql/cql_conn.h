/* One connection to one Cassandra/Scylla node over the CQL native protocol v4: the connect
   (IPv4 or IPv6, under a timeout), TLS through tls_send.c, the handshake (OPTIONS, STARTUP
   with CQL_VERSION 3.0.0 and no compression, SASL PLAIN for PasswordAuthenticator), the
   ERROR body, and a request pipeline: requests from a producer callback, at most `window`
   in flight on stream ids of their own, answers read with poll() in any order, RESULT bodies
   handed to a consumer callback, the retryable errors (overloaded, write timeout,
   unavailable) re-sent a bounded number of times after a growing pause, and any other
   failure stopping the run with the tags of every request left unanswered.

   Nothing here routes: a caller that wants token-aware writes holds one connection per node
   and gives each its own requests. A connection is used by one thread at a time.
   Core layer: no Python, no GIL (the binding releases it around every call here). */
#ifndef BW_CQL_CONN_H
#define BW_CQL_CONN_H
#include <stddef.h>
#include <stdint.h>

#include "cql_shard.h"
#include "cql_wire.h"
#include "status.h"
#include "tls_send.h"

/* Room for a message: the server's (cut to fit), or ours saying what failed where. */
#define BW_CQL_MESSAGE_MAX 1024

/* What stopped a call (bw_cql_status.kind). */
typedef enum {
    BW_CQL_OK = 0,
    BW_CQL_E_CONNECT,   /* no connection: unknown host, refused, unreachable, connect timeout */
    BW_CQL_E_TLS,       /* the TLS handshake or a TLS record failed */
    BW_CQL_E_LOST,      /* the server closed or reset the connection, or it was aborted */
    BW_CQL_E_TIMEOUT,   /* nothing moved for the timeout while requests were in flight */
    BW_CQL_E_PROTOCOL,  /* the server sent what the protocol does not allow (a frame's
                           version, length or stream id; a body that does not parse) */
    BW_CQL_E_SERVER,    /* the server answered ERROR (status.error) */
    BW_CQL_E_AUTH,      /* the server wants credentials that were not given, or an
                           authentication exchange this client does not speak */
    BW_CQL_E_NOMEM,
    BW_CQL_E_CALLBACK,  /* the producer or the consumer said stop */
    BW_CQL_E_INHERITED, /* the connection belongs to the process this one was forked from */
    BW_CQL_E_INTERRUPTED /* the run's interrupted callback said stop after a signal */
} bw_cql_failure;

/* An ERROR body. The fields after `message` are those of the codes that carry them
   (has_* says which); the others are 0. */
typedef struct {
    int32_t code;
    char message[BW_CQL_MESSAGE_MAX]; /* NUL-ended, cut to fit (message_cut) */
    int message_cut;
    int has_consistency; /* unavailable, write/read timeout, write/read failure */
    uint16_t consistency;
    int32_t required, alive;  /* unavailable */
    int32_t received, blockfor; /* write/read timeout, write/read failure */
    int has_write_type;
    char write_type[32];       /* write timeout / failure: SIMPLE, BATCH, CAS, ... */
} bw_cql_error;

/* Parses an ERROR body (after the response extras). 0, or -1 when it does not parse (too
   short for its code's fields, a negative length). The fields of codes not listed above are
   not read; bytes after the parsed fields are allowed (later protocol versions add some). */
int bw_cql_error_parse(const uint8_t *body, size_t len, bw_cql_error *out);
/* The protocol's name of an error code ("Overloaded", "Write timeout", ...), or "Unknown". */
const char *bw_cql_error_name(int32_t code);
/* 1 for the codes a whole-row INSERT may be sent again after: overloaded, write timeout,
   unavailable. */
int bw_cql_error_retryable(int32_t code);

/* Why a call failed; kind BW_CQL_OK when it did not. */
typedef struct {
    bw_cql_failure kind;
    int sys_errno;                    /* the socket's errno (E_CONNECT, E_LOST), else 0 */
    bw_cql_error error;               /* E_SERVER: the server's error */
    char message[BW_CQL_MESSAGE_MAX]; /* what failed, naming the server (host:port) */
} bw_cql_status;

typedef struct {
    const char *host;       /* a name or an IPv4 / IPv6 literal */
    int port;               /* 9042 when 0 */
    long connect_timeout_ms; /* the TCP connect and the TLS handshake; < 0: none */
    long timeout_ms;         /* any wait for the server to take or answer; < 0: none */
    const char *username;    /* PasswordAuthenticator (SASL PLAIN); NULL: none */
    const char *password;
    bw_tls_config *tls;      /* NULL: plain TCP */
    uint32_t max_frame;      /* the largest answer body taken; 0: BW_CQL_MAX_BODY */
    int throw_on_overload;   /* asks the server (STARTUP THROW_ON_OVERLOAD) to answer a
                                request over its limits with an overloaded error rather than
                                to stop reading the connection for a while */
    /* Called (with interrupt_ctx) when a wait of the connect (TCP, TLS, handshake) was cut
       short by a signal: nonzero stops it at once (E_INTERRUPTED). NULL: signals do not. */
    int (*interrupted)(void *ctx);
    void *interrupt_ctx;
    /* NULL, or a cancel (socket_send.h) that another thread fires to end the connect at once
       and every later call on the connection (E_LOST, "aborted"): each wait, from the TCP
       connect to the last answer, watches it. It must stay open until the connection is
       closed. */
    const bw_cancel *cancel;
    int local_port;      /* the local port to connect from (a shard-aware port picks the
                            node's shard by it); 0: any */
    int tablets_routing; /* asks in STARTUP for tablet routing entries (TABLETS_ROUTING_V1)
                            when the node offers them: kept in bw_cql_payloads */
} bw_cql_options;

typedef struct bw_cql_conn bw_cql_conn;

/* Connects and runs the handshake. The connection, or NULL with *status saying why. */
bw_cql_conn *bw_cql_connect(const bw_cql_options *options, bw_cql_status *status);
/* Closes the connection and frees it. In a forked child of the process that made it, only
   its own memory is freed (the socket and TLS session are the parent's). NULL accepted. */
void bw_cql_close(bw_cql_conn *conn);
/* Ends the connection's traffic at once, from any thread, while another thread may be in a
   call on it: that call's waits end (E_LOST, "aborted"), and every later call fails. The
   connection is still closed by bw_cql_close, once no call is on it. */
void bw_cql_abort(bw_cql_conn *conn);
/* 1 in a forked child of the process that made the connection. */
int bw_cql_inherited(const bw_cql_conn *conn);
/* 1 once a call failed in a way that leaves the stream unusable (every failure but
   E_SERVER, E_CALLBACK and E_AUTH, which come after whole answers): later calls fail at once
   with that status. */
int bw_cql_broken(const bw_cql_conn *conn);
/* "host:port" of the server. */
const char *bw_cql_peer(const bw_cql_conn *conn);
/* The authenticator class the server named (empty when it asked for none). */
const char *bw_cql_authenticator(const bw_cql_conn *conn);
/* The SUPPORTED body the node answered OPTIONS with (a [string multimap]; borrowed, valid
   until the connection is closed), its length in *len. */
const uint8_t *bw_cql_supported(const bw_cql_conn *conn, size_t *len);
/* The tablet routing entries of the answers the connection read (borrowed): the caller
   takes them (bw_cql_kept_clear) between calls on the connection. */
bw_cql_kept *bw_cql_payloads(bw_cql_conn *conn);

/* One request: its opcode and body (which must stay valid and unchanged until its answer
   is handed over or the run returns: a retry sends the same bytes again), and the caller's
   tag for it. */
typedef struct {
    uint8_t opcode;
    const uint8_t *body;
    size_t len;
    uint64_t tag;
} bw_cql_request;

/* The next request: 1 with *request filled, 0 when there are no more, -1 to stop the run
   (E_CALLBACK; message may be set through status). */
typedef int (*bw_cql_produce)(void *ctx, bw_cql_request *request);
/* The answer (any opcode but ERROR) to the request tagged `tag`: its body after the response
   extras. 0 takes it as the request's acknowledgement; -1 refuses it: the request is
   unanswered, the run stops as after a server's error (E_CALLBACK, failed_tag the first
   refused request's) once the requests in flight are answered, each answer judged. */
typedef int (*bw_cql_consume)(void *ctx, uint64_t tag, uint8_t opcode, const uint8_t *body,
                              size_t len);

/* A run's requests in flight at most: the stream ids of protocol v4 are 0..32767. */
#define BW_CQL_MAX_WINDOW 32768
/* Requests in flight per connection by default: 2, since Cassandra 5.0.9 fails inserts into
   a table with a vector index when more than its processors + 1 are in flight, and no node
   has fewer than one. */
#define BW_CQL_DEFAULT_WINDOW 2
/* Times one request is re-sent by default after a retryable error (overloaded, write
   timeout, unavailable), and at most. */
#define BW_CQL_DEFAULT_RETRIES 5
#define BW_CQL_MAX_RETRIES 32768

typedef struct {
    int window;          /* requests in flight at most (1..BW_CQL_MAX_WINDOW) */
    int max_retries;     /* times one request is sent again after a retryable error (>= 0) */
    long backoff_ms;     /* the pause before the first retry; doubled each time */
    long backoff_max_ms; /* the longest pause */
    /* Called (with the run's ctx) when a wait was cut short by a signal: nonzero stops the
       run at once (E_INTERRUPTED; the connection is then unusable, as answers are still
       due). NULL: signals do not stop a run. */
    int (*interrupted)(void *ctx);
} bw_cql_run_options;

/* What a run did: of the requests taken, those not unanswered were answered. unanswered: the tags of the requests sent (or waiting to be sent again)
   whose answers did not arrive, in no order (malloc'd, the caller frees it; NULL when none).
   failed_tag: the request whose ERROR stopped the run (has_failed_tag). */
typedef struct {
    uint64_t taken;    /* requests taken into the window (a body over the protocol's limit
                          is refused, not taken) */
    uint64_t answered;
    uint64_t retries;
    uint64_t overloaded; /* of the retries, those after an Overloaded answer */
    uint64_t *unanswered;
    size_t unanswered_count;
    int has_failed_tag;
    uint64_t failed_tag;
} bw_cql_outcome;

/* Runs requests until the producer has no more and every one is answered: 0 then (status
   kind OK). Otherwise -1, *status says why and *outcome which requests are unanswered. Never
   returns 0 while a request it took is unanswered. A server's error (not retried) or a
   refused answer ends the run as soon as the answers already read are taken: requests still
   out are unanswered, and the connection, whose answers to them may still come, is then
   unusable (E_LOST); with none out it stays usable. */
int bw_cql_run(bw_cql_conn *conn, const bw_cql_run_options *options, bw_cql_produce produce,
               bw_cql_consume consume, void *ctx, bw_cql_outcome *outcome,
               bw_cql_status *status);
/* Frees outcome->unanswered. */
void bw_cql_outcome_free(bw_cql_outcome *outcome);

/* One request, answered: *answer_body (malloc'd, the caller frees it) and *answer_opcode.
   0, or -1 with *status (E_SERVER for an ERROR answer). Not retried. interrupted (with
   interrupt_ctx; NULL: none) as a run's: nonzero after a signal stops the wait at once
   (E_INTERRUPTED; the connection is then unusable). */
int bw_cql_request_one(bw_cql_conn *conn, uint8_t opcode, const uint8_t *body, size_t len,
                       uint8_t *answer_opcode, uint8_t **answer_body, size_t *answer_len,
                       int (*interrupted)(void *ctx), void *interrupt_ctx,
                       bw_cql_status *status);

/* The one status of a connection's failure (kind not BW_CQL_OK), its message copied:
   E_SERVER is BW_STATUS_SERVER (the server's error stays in the bw_cql_status), E_TLS
   BW_STATUS_TLS_SESSION, E_LOST and E_INTERRUPTED BW_STATUS_CONNECTION_LOST, E_TIMEOUT
   BW_STATUS_TIMEOUT, E_PROTOCOL and E_CALLBACK BW_STATUS_PROTOCOL, E_NOMEM
   BW_STATUS_NO_MEMORY, E_INHERITED BW_STATUS_INHERITED, E_CONNECT and E_AUTH
   BW_STATUS_CONNECT. Returns -1. */
int bw_cql_status_get(const bw_cql_status *status, bw_status *st);
#endif
