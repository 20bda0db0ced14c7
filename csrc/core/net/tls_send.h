/* TLS on a connected socket through OpenSSL's libssl, without Python: the handshake (server
   verification, client certificate), whole writes of gathered buffers, reads, and the check
   for an early answer, each waiting with poll() under a timeout. The binding calls these with
   the GIL released, so the body pump sends a TLS body exactly as it sends a plain one.
   Compiled to nothing unless BW_HAVE_OPENSSL (setup.py defines it when libssl is found).
   Core layer: no Python. */
#ifndef BW_TLS_SEND_H
#define BW_TLS_SEND_H
#include <stddef.h>
#include <sys/uio.h>

#include "socket_send.h" /* bw_cancel */

/* Returned, besides 0 and errno values (ETIMEDOUT, EINTR, EPIPE, ECONNRESET, ...), when
   OpenSSL failed: the reason is in the connection's (or the caller's) message buffer. */
#define BW_TLS_FAILED (-1)
/* Room for a message: OpenSSL's reason and, for a refused server certificate, the
   verification's own. */
#define BW_TLS_MESSAGE_MAX 320

/* What one side of a handshake needs: the client certificate and key, the trusted CAs, and
   whether the server's certificate is verified at all. One per BulkInsert, shared by its
   connections (OpenSSL makes that safe across threads). */
typedef struct bw_tls_config bw_tls_config;

/* A TLS session on a socket the caller owns (bw_tls_free never closes it). Used by one
   thread at a time. */
typedef struct bw_tls bw_tls;

/* Which argument a configuration error is about. */
typedef enum {
    BW_TLS_ARG_NONE = 0,
    BW_TLS_ARG_CERTIFICATE,
    BW_TLS_ARG_KEY,
    BW_TLS_ARG_CA
} bw_tls_arg;

/* A configuration: cert_file (PEM: the certificate, and the chain after it) and key_file
   (PEM; NULL: the key is in cert_file) when given, else no client certificate; ca_file (a
   PEM bundle) or, when NULL, the system's trusted CAs; verify 0 skips verifying the server.
   NULL on failure, with *bad naming the argument (BW_TLS_ARG_NONE: out of memory or a
   library failure) and message saying why (what is wrong, then OpenSSL's reason when it gave
   one). A key protected by a passphrase is refused, never prompted for; a certificate that
   has expired, or is not valid yet, is refused with its date. */
bw_tls_config *bw_tls_config_new(const char *cert_file, const char *key_file,
                                 const char *ca_file, int verify, bw_tls_arg *bad,
                                 char message[BW_TLS_MESSAGE_MAX]);
/* Frees the configuration; in a forked child of the process that made it, only its own
   memory (OpenSSL's context, whose locks that process's threads may hold, is left alone). */
void bw_tls_config_free(bw_tls_config *config);
/* 1 in a forked child of the process that made the configuration: no session may be made
   with it there. */
int bw_tls_config_inherited(const bw_tls_config *config);

/* A session on the connected socket fd (made non-blocking: every wait is a poll), for the
   server host (a name or an IP literal: sent as SNI when a name, and checked against the
   server's certificate when verifying). NULL on failure (message says why). */
bw_tls *bw_tls_new(bw_tls_config *config, int fd, const char *host,
                   char message[BW_TLS_MESSAGE_MAX]);

/* Every later wait of the session also ends, with ECANCELED, once cancel is fired (NULL:
   none; socket_send.h). cancel must stay open while the session may wait. */
void bw_tls_set_cancel(bw_tls *tls, const bw_cancel *cancel);

/* Ends the session: a close_notify when the connection is still good (never waiting), then
   frees it. NULL is accepted. In a forked child of the process that made the session, only
   its own memory is freed: no close_notify, nothing written to the socket, OpenSSL's state
   left alone (the parent still uses the session on the same connection). */
void bw_tls_free(bw_tls *tls);
/* 1 in a forked child of the process that made the session: it may not be used there. */
int bw_tls_inherited(const bw_tls *tls);

/* The handshake, resumable: 0 done; ETIMEDOUT when nothing moved for timeout_ms (< 0: no
   limit); EINTR when a wait was interrupted by a signal (call again to go on); ECANCELED
   when the session's cancel was fired; another errno from the socket; BW_TLS_FAILED with
   bw_tls_message (e.g. the server's certificate failed verification, or the server refused
   ours). */
int bw_tls_handshake(bw_tls *tls, long timeout_ms);

/* Writes every byte of iov[0..count) (the array is consumed: entries are advanced, so a
   call that returned EINTR is resumed by calling again with the same array). Small entries
   are gathered into one TLS record. watch: each wait for room also watches for an answer
   from the server (bw_tls_peer_answered), and stops the write with BW_SEND_ANSWERED
   (socket_send.h) when one comes; the session is then only read. Results as for
   bw_tls_handshake; EPIPE / ECONNRESET when the peer is gone. */
int bw_tls_write_all(bw_tls *tls, struct iovec *iov, int count, long timeout_ms, int watch);

/* Reads at most len bytes into buf: *got is 0 when the server ended the connection
   (close_notify or end of stream). Results as for bw_tls_handshake. */
int bw_tls_read(bw_tls *tls, void *buf, size_t len, long timeout_ms, size_t *got);

/* 1 when the server already sent something other than TLS records of its own (TLS 1.3
   session tickets follow the handshake): an answer, an alert or the end of the
   connection; 0 otherwise. Never waits, never consumes an answer's bytes. An alert or a
   socket error met here is returned by every later write and by the next read. */
int bw_tls_peer_answered(bw_tls *tls);

/* The reason of the last BW_TLS_FAILED on this session. */
const char *bw_tls_message(const bw_tls *tls);

/* 1 when the handshake failed because the server's certificate did not verify. */
int bw_tls_verify_failed(const bw_tls *tls);

/* The OpenSSL linked, e.g. "OpenSSL 3.0.19 27 Jan 2026". */
const char *bw_tls_library(void);
#endif
