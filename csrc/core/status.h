/* One status for every failure of the core that the binding turns into an exception: what
   kind of failure (one enum for all the rooms of the core), the system's errno when one
   caused it, and a message. A room of the core that keeps its own result codes (gzip,
   zstd, the CQL connection, file reads) has one function that fills a bw_status from
   them; the binding has one function that raises the exception of a status
   (py_errors.h: bw_raise_status). Core layer: no Python. */
#ifndef BW_STATUS_H
#define BW_STATUS_H
#include <stddef.h>

/* Room for a message, its NUL included; a longer one is cut to fit (bw_status.cut). A CQL
   connection's message (1024 bytes at most) and the rows it names fit. */
#define BW_STATUS_MESSAGE_MAX 1280

/* What failed. The exception each kind raises is in parentheses (py_errors.h). */
typedef enum {
    BW_STATUS_OK = 0,
    BW_STATUS_NO_MEMORY,       /* out of memory (MemoryError; the message is not used) */
    BW_STATUS_OS,              /* a system call failed (OSError: from sys_errno when the
                                  message is empty, else the message) */
    BW_STATUS_TIMED_OUT,       /* a socket wait ran out (TimeoutError) */
    BW_STATUS_FAILED,          /* a library under the core refused (RuntimeError) */
    BW_STATUS_INHERITED,       /* the object belongs to the process this one was forked
                                  from (RuntimeError) */
    BW_STATUS_INVALID,         /* input that cannot be decoded (ValueError) */
    BW_STATUS_MALFORMED,       /* a file's or a batch's data is inconsistent
                                  (bulkwire.errors.MalformedFileError) */
    BW_STATUS_TLS,             /* a TLS session or configuration failed (_core.TlsError;
                                  BW_STATUS_VERIFY_FAILED in flags: the certificate) */
    BW_STATUS_CONNECT,         /* no connection, or credentials it needs (ConnectError) */
    BW_STATUS_TLS_SESSION,     /* a connection's TLS failed (bulkwire.errors.TLSError) */
    BW_STATUS_CONNECTION_LOST, /* closed, reset or aborted (ConnectionLostError) */
    BW_STATUS_TIMEOUT,         /* a connection stalled (TransportTimeoutError) */
    BW_STATUS_PROTOCOL,        /* the peer broke the protocol (ProtocolError) */
    BW_STATUS_SERVER,          /* a CQL server answered ERROR (CqlServerError) */
    BW_STATUS_KINDS            /* how many */
} bw_status_kind;

/* bw_status.flags */
#define BW_STATUS_VERIFY_FAILED 1u /* BW_STATUS_TLS: the peer's certificate did not verify */

typedef struct {
    bw_status_kind kind;
    int sys_errno;        /* the errno behind the failure, or 0 */
    unsigned flags;
    int cut;              /* the message was cut to fit */
    char message[BW_STATUS_MESSAGE_MAX]; /* NUL-ended UTF-8; "" when there is none */
} bw_status;

/* Sets *st to BW_STATUS_OK, no errno, no flags, an empty message. */
void bw_status_clear(bw_status *st);

/* 1 when st says nothing failed. */
int bw_status_ok(const bw_status *st);

/* Sets *st to kind with sys_errno and the message made as printf makes it (cut to fit).
   Returns 0 for BW_STATUS_OK, else -1, so that a failing function may return it. */
int bw_status_set(bw_status *st, bw_status_kind kind, int sys_errno, const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Appends to the message as printf makes it (cut to fit, and then cut stays set). */
void bw_status_append(bw_status *st, const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The status of a socket call's errno (not 0): ETIMEDOUT is BW_STATUS_TIMED_OUT ("timed
   out"), any other BW_STATUS_OS with the errno and no message. Returns -1. */
int bw_status_from_errno(bw_status *st, int sys_errno);

/* BW_STATUS_INHERITED with the one message of an object a forked child inherited: `what`
   (e.g. "this CqlConnection") and what it owns that belongs to the parent (e.g. "its
   socket"). Returns -1. */
int bw_status_inherited(bw_status *st, const char *what, const char *owned);

/* The kind's name as the code spells it after BW_STATUS_ in lower case ("no_memory"), for
   messages and tests; "unknown" for a value outside the enum. A static string. */
const char *bw_status_kind_name(bw_status_kind kind);
#endif
