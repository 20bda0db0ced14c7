#define _POSIX_C_SOURCE 200809L /* pthread_sigmask, sigtimedwait */
#include "tls_send.h"

#include "fork_origin.h"

#ifdef BW_HAVE_OPENSSL
#include "socket_send.h" /* bw_wait_fd, BW_SEND_ANSWERED */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* Entries shorter than this (HTTP chunk heads, the end of the body) are gathered with what follows
   into one record instead of going out as a record of their own. */
#define GATHER_SMALL 512
#define GATHER_MAX 16384 /* one full TLS record */

struct bw_tls_config {
    SSL_CTX *ctx;
    bw_origin origin;  /* the process that made it */
};

struct bw_tls {
    SSL *ssl;
    int fd;
    int broken;        /* a fatal error happened: no close_notify at the end */
    int pending;       /* an error the early-answer check met: every write reports it, and
                          the next read (which takes it) */
    int verify_failed;
    const bw_cancel *cancel; /* ends every wait once fired; NULL: none */
    bw_origin origin;  /* the process that made it: the session is that process's */
    char message[BW_TLS_MESSAGE_MAX];
};

/* A write to a peer that hung up raises SIGPIPE in the writing thread unless the process
   ignores it (Python does; a program that embeds Python need not). libssl writes with
   write(), which has no MSG_NOSIGNAL, so every call into it that may write (the handshake,
   writes, reads and peeks, which answer the protocol's own records, the close_notify) runs
   with SIGPIPE blocked in this thread, and a SIGPIPE it raised is taken back before the mask
   is restored: the caller sees EPIPE, never the signal, as with socket_send.c. */
typedef struct {
    sigset_t old_mask;
    int was_pending; /* a SIGPIPE was already pending: it is not ours to take */
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g) {
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    g->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &g->old_mask);
}

static void sigpipe_restore(const sigpipe_guard *g) {
    int saved_errno = errno;
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        const struct timespec none = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &none) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old_mask, NULL);
    errno = saved_errno;
}

/* OpenSSL's reason for the first error in this thread's queue, the most precise one (e.g. "no
   start line" under "PEM lib"); the queue is emptied. */
static void take_error(char *message, size_t size, const char *fallback) {
    unsigned long e = ERR_peek_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    if (reason != NULL)
        snprintf(message, size, "%s", reason);
    else if (e != 0)
        ERR_error_string_n(e, message, size);
    else
        snprintf(message, size, "%s", fallback);
    ERR_clear_error();
}

/* A key with a passphrase is refused: OpenSSL would otherwise ask for it on the terminal.
   userdata, when not NULL, is an int set to 1: the key was encrypted. */
static int refuse_passphrase(char *buf, int size, int rwflag, void *userdata) {
    (void)buf, (void)size, (void)rwflag;
    if (userdata != NULL)
        *(int *)userdata = 1;
    return -1;
}

/* Frees config; message says what (and OpenSSL's reason, when it gave one). Returns NULL. */
static bw_tls_config *config_fail(bw_tls_config *config, bw_tls_arg arg, bw_tls_arg *bad,
                                  char *message, const char *what) {
    char reason[128]; /* OpenSSL's reasons are a few words */
    *bad = arg;
    take_error(reason, sizeof reason, "");
    if (reason[0] != '\0')
        snprintf(message, BW_TLS_MESSAGE_MAX, "%s (OpenSSL: %s)", what, reason);
    else
        snprintf(message, BW_TLS_MESSAGE_MAX, "%s", what);
    bw_tls_config_free(config);
    return NULL;
}

/* 1 when OpenSSL's error queue says a private key was refused because it is not the key of
   the certificate (OpenSSL checks that while loading the key); the queue is left as it is. */
static int key_mismatch(void) {
    unsigned long e = ERR_peek_error();
    return ERR_GET_LIB(e) == ERR_LIB_X509 && (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH ||
                                              ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH);
}

/* 0 when the client certificate just loaded into ctx is valid now (or its dates cannot be
   read: the server judges it then); otherwise 1, with message saying since or until when. */
static int certificate_out_of_date(SSL_CTX *ctx, char *message) {
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    if (leaf == NULL)
        return 0;
    const ASN1_TIME *limit = NULL;
    const char *what = NULL;
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
        limit = X509_get0_notAfter(leaf);
        what = "the certificate has expired: it was valid until";
    } else if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0) {
        limit = X509_get0_notBefore(leaf);
        what = "the certificate is not valid yet: it is valid from";
    }
    if (limit == NULL)
        return 0;
    struct tm when;
    char date[64] = "a date it cannot tell";
    if (ASN1_TIME_to_tm(limit, &when) == 1)
        strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &when);
    snprintf(message, BW_TLS_MESSAGE_MAX, "%s %s; a server refuses it (renew the client "
             "certificate)", what, date);
    ERR_clear_error();
    return 1;
}

bw_tls_config *bw_tls_config_new(const char *cert_file, const char *key_file,
                                 const char *ca_file, int verify, bw_tls_arg *bad,
                                 char message[BW_TLS_MESSAGE_MAX]) {
    ERR_clear_error();
    bw_tls_config *config = calloc(1, sizeof *config);
    if (config == NULL) {
        *bad = BW_TLS_ARG_NONE;
        snprintf(message, BW_TLS_MESSAGE_MAX, "out of memory");
        return NULL;
    }
    bw_origin_record(&config->origin);
    config->ctx = SSL_CTX_new(TLS_client_method());
    if (config->ctx == NULL)
        return config_fail(config, BW_TLS_ARG_NONE, bad, message, "cannot create a TLS context");
    SSL_CTX *ctx = config->ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* a write resumed after a wait may gather its bytes at another address */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* a server that closes without close_notify ends the stream as on plain TCP: HTTP's
       own framing tells a complete answer from a cut one */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    int encrypted = 0;
    SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &encrypted);
    if (cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
            SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
            return config_fail(config, BW_TLS_ARG_CERTIFICATE, bad, message,
                               "it holds no PEM certificate that can be read");
        }
        if (certificate_out_of_date(ctx, message)) {
            *bad = BW_TLS_ARG_CERTIFICATE;
            bw_tls_config_free(config);
            return NULL;
        }
        bw_tls_arg key_arg = key_file != NULL ? BW_TLS_ARG_KEY : BW_TLS_ARG_CERTIFICATE;
        int key_loaded = SSL_CTX_use_PrivateKey_file(ctx, key_file != NULL ? key_file : cert_file,
                                                     SSL_FILETYPE_PEM);
        SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL); /* &encrypted is not used after this */
        if (key_loaded != 1)
            return config_fail(config, key_arg, bad, message,
                               encrypted ? "the private key is encrypted (protected by a "
                                           "passphrase), and none is ever asked for: give it "
                                           "unencrypted, or an ssl_context with it loaded"
                               : key_mismatch() ? "the private key does not match the certificate"
                                                : "it holds no PEM private key that can be read");
        if (SSL_CTX_check_private_key(ctx) != 1)
            return config_fail(config, key_arg, bad, message,
                               "the private key does not match the certificate");
    }
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (!verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        int loaded = ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                                     : SSL_CTX_set_default_verify_paths(ctx);
        if (loaded != 1)
            return config_fail(config, BW_TLS_ARG_CA, bad, message,
                               ca_file != NULL ? "it holds no PEM CA certificate that can be read"
                                               : "the system's trusted CAs cannot be loaded");
    }
    ERR_clear_error();
    return config;
}

int bw_tls_config_inherited(const bw_tls_config *config) {
    return bw_origin_inherited(&config->origin);
}

void bw_tls_config_free(bw_tls_config *config) {
    if (config == NULL)
        return;
    if (!bw_tls_config_inherited(config)) /* a child leaves the parent's context alone */
        SSL_CTX_free(config->ctx);
    free(config);
}

static int is_ip_literal(const char *host) {
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

bw_tls *bw_tls_new(bw_tls_config *config, int fd, const char *host,
                   char message[BW_TLS_MESSAGE_MAX]) {
    ERR_clear_error();
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        snprintf(message, BW_TLS_MESSAGE_MAX, "%s", strerror(errno));
        return NULL;
    }
    bw_tls *tls = calloc(1, sizeof *tls);
    if (tls == NULL) {
        snprintf(message, BW_TLS_MESSAGE_MAX, "out of memory");
        return NULL;
    }
    bw_origin_record(&tls->origin);
    tls->fd = fd;
    tls->ssl = SSL_new(config->ctx);
    if (tls->ssl == NULL || SSL_set_fd(tls->ssl, fd) != 1)
        goto fail;
    if (is_ip_literal(host)) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(tls->ssl), host) != 1)
            goto fail;
    } else if (SSL_set_tlsext_host_name(tls->ssl, host) != 1 || SSL_set1_host(tls->ssl, host) != 1) {
        goto fail;
    }
    return tls;
fail:
    take_error(message, BW_TLS_MESSAGE_MAX, "cannot create a TLS session");
    tls->broken = 1;
    bw_tls_free(tls);
    return NULL;
}

int bw_tls_inherited(const bw_tls *tls) { return bw_origin_inherited(&tls->origin); }

void bw_tls_set_cancel(bw_tls *tls, const bw_cancel *cancel) { tls->cancel = cancel; }

void bw_tls_free(bw_tls *tls) {
    if (tls == NULL)
        return;
    /* A forked child's copy of a session: a close_notify would be written into the parent's
       session on the shared socket (the server would take it for the parent's end), and
       SSL_free may take locks that the parent's threads held. The child's copy of the memory
       is left as it is. */
    if (tls->ssl != NULL && !bw_tls_inherited(tls)) {
        if (!tls->broken && SSL_is_init_finished(tls->ssl)) {
            sigpipe_guard guard;
            sigpipe_block(&guard);
            SSL_shutdown(tls->ssl); /* non-blocking: sent if the socket takes it, else dropped */
            sigpipe_restore(&guard);
        }
        SSL_free(tls->ssl);
        ERR_clear_error();
    }
    free(tls);
}

/* After an SSL call returned r <= 0: waits when it wants to, else says why it failed.
   0 to call again; otherwise the result to return. */
static int settle(bw_tls *tls, int r, long timeout_ms) {
    int saved_errno = errno;
    switch (SSL_get_error(tls->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return bw_wait_fd(tls->fd, POLLIN, tls->cancel, timeout_ms);
    case SSL_ERROR_WANT_WRITE:
        return bw_wait_fd(tls->fd, POLLOUT, tls->cancel, timeout_ms);
    case SSL_ERROR_SYSCALL:
        tls->broken = 1;
        if (ERR_peek_last_error() == 0) {
            ERR_clear_error();
            return saved_errno != 0 ? saved_errno : ECONNRESET; /* 0: end of stream mid-record */
        }
        take_error(tls->message, sizeof tls->message, "TLS failed");
        return BW_TLS_FAILED;
    case SSL_ERROR_ZERO_RETURN: /* close_notify where no end may come (handshake, write) */
        tls->broken = 1;
        ERR_clear_error();
        return EPIPE;
    default:
        tls->broken = 1;
        long verified = SSL_get_verify_result(tls->ssl);
        if (verified != X509_V_OK && !SSL_is_init_finished(tls->ssl)) {
            tls->verify_failed = 1;
            snprintf(tls->message, sizeof tls->message, "certificate verify failed: %s",
                     X509_verify_cert_error_string(verified));
            ERR_clear_error();
        } else {
            take_error(tls->message, sizeof tls->message, "TLS failed");
        }
        return BW_TLS_FAILED;
    }
}

/* The error the early-answer check met, once. */
static int take_pending(bw_tls *tls) {
    int rc = tls->pending;
    tls->pending = 0;
    return rc;
}

static int handshake(bw_tls *tls, long timeout_ms) {
    ERR_clear_error();
    for (;;) {
        int r = SSL_connect(tls->ssl);
        if (r == 1)
            return 0;
        int rc = settle(tls, r, timeout_ms);
        if (rc != 0)
            return rc;
    }
}

/* After a write found the connection gone (rc: EPIPE, ECONNRESET): the alert the server sent
   before closing, when it did, is the reason. Under TLS 1.3 the client's handshake ends before
   the server has judged the client's certificate: a refusal arrives as an alert that a write
   may overtake. Returns BW_TLS_FAILED with the alert's message, or rc. */
static int alert_behind(bw_tls *tls, int rc) {
    char byte;
    size_t got;
    ERR_clear_error();
    int r = SSL_peek_ex(tls->ssl, &byte, 1, &got);
    if (r != 1 && SSL_get_error(tls->ssl, r) == SSL_ERROR_SSL && ERR_peek_error() != 0) {
        take_error(tls->message, sizeof tls->message, "TLS failed");
        return BW_TLS_FAILED;
    }
    ERR_clear_error();
    return rc;
}

static int peer_answered(bw_tls *tls);

/* A write that wants room, watching: waits until the socket takes more (0) or the server
   answered (BW_SEND_ANSWERED); a readable socket holding only TLS records of the protocol's
   own (taken in by the check) is waited past. Or ETIMEDOUT / EINTR / errno. */
static int wait_room_watching(bw_tls *tls, long timeout_ms) {
    int rc = bw_wait_fd(tls->fd, POLLIN | POLLOUT, tls->cancel, timeout_ms);
    if (rc == 0 && peer_answered(tls))
        return BW_SEND_ANSWERED;
    return rc;
}

/* Writes len bytes (OpenSSL completes the whole write before it reports success); watch:
   see bw_tls_write_all. */
static int write_whole(bw_tls *tls, const void *data, size_t len, long timeout_ms, int watch) {
    for (;;) {
        size_t written;
        int r = SSL_write_ex(tls->ssl, data, len, &written);
        if (r == 1)
            return 0;
        if (watch && SSL_get_error(tls->ssl, r) == SSL_ERROR_WANT_WRITE) {
            int rc = wait_room_watching(tls, timeout_ms);
            if (rc != 0)
                return rc;
            continue;
        }
        int rc = settle(tls, r, timeout_ms);
        if (rc == EPIPE || rc == ECONNRESET)
            return alert_behind(tls, rc);
        if (rc != 0)
            return rc;
    }
}

static int write_all(bw_tls *tls, struct iovec *iov, int count, long timeout_ms, int watch) {
    if (tls->pending != 0) /* left for the read of the answer, which must see it too */
        return tls->pending;
    ERR_clear_error();
    char gather[GATHER_MAX];
    while (count > 0) {
        if (iov[0].iov_len == 0) {
            iov++;
            count--;
            continue;
        }
        const char *data = iov[0].iov_base;
        size_t len = iov[0].iov_len;
        if (len < GATHER_SMALL && count > 1) {
            len = 0;
            for (int i = 0; i < count && len < GATHER_MAX; i++) {
                size_t take = iov[i].iov_len < GATHER_MAX - len ? iov[i].iov_len : GATHER_MAX - len;
                memcpy(gather + len, iov[i].iov_base, take);
                len += take;
            }
            data = gather;
        }
        int rc = write_whole(tls, data, len, timeout_ms, watch);
        if (rc != 0)
            return rc;
        while (len > 0) { /* the entries just written, whole or in part */
            size_t step = len < iov[0].iov_len ? len : iov[0].iov_len;
            iov[0].iov_base = (char *)iov[0].iov_base + step;
            iov[0].iov_len -= step;
            len -= step;
            if (iov[0].iov_len == 0) {
                iov++;
                count--;
            }
        }
    }
    return 0;
}

static int read_some(bw_tls *tls, void *buf, size_t len, long timeout_ms, size_t *got) {
    *got = 0;
    if (tls->pending != 0)
        return take_pending(tls);
    ERR_clear_error();
    for (;;) {
        int r = SSL_read_ex(tls->ssl, buf, len, got);
        if (r == 1)
            return 0;
        int reason = SSL_get_error(tls->ssl, r);
        if (reason == SSL_ERROR_ZERO_RETURN ||
            (reason == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0 && errno == 0)) {
            ERR_clear_error(); /* the server ended the stream: as on plain TCP, 0 bytes */
            *got = 0;
            return 0;
        }
        int rc = settle(tls, r, timeout_ms);
        if (rc != 0)
            return rc;
    }
}

static int peer_answered(bw_tls *tls) {
    if (tls->pending != 0 || SSL_pending(tls->ssl) > 0)
        return 1;
    struct pollfd p = {.fd = tls->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0)
        return 0;
    /* readable: TLS records of the protocol's own are taken in, an answer stays unread */
    ERR_clear_error();
    char byte;
    size_t got;
    int r = SSL_peek_ex(tls->ssl, &byte, 1, &got);
    if (r == 1)
        return 1;
    int reason = SSL_get_error(tls->ssl, r);
    if (reason == SSL_ERROR_WANT_READ || reason == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return 0;
    }
    if (reason == SSL_ERROR_ZERO_RETURN ||
        (reason == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0 && errno == 0)) {
        ERR_clear_error(); /* the end of the stream: the read that follows sees it */
        return 1;
    }
    tls->pending = settle(tls, r, 0); /* an alert or a socket error: the next call says it */
    if (tls->pending == 0)
        tls->pending = ECONNRESET;
    return 1;
}

int bw_tls_handshake(bw_tls *tls, long timeout_ms) {
    sigpipe_guard guard;
    sigpipe_block(&guard);
    int rc = handshake(tls, timeout_ms);
    sigpipe_restore(&guard);
    return rc;
}

int bw_tls_write_all(bw_tls *tls, struct iovec *iov, int count, long timeout_ms, int watch) {
    sigpipe_guard guard;
    sigpipe_block(&guard);
    int rc = write_all(tls, iov, count, timeout_ms, watch);
    sigpipe_restore(&guard);
    return rc;
}

int bw_tls_read(bw_tls *tls, void *buf, size_t len, long timeout_ms, size_t *got) {
    sigpipe_guard guard;
    sigpipe_block(&guard);
    int rc = read_some(tls, buf, len, timeout_ms, got);
    sigpipe_restore(&guard);
    return rc;
}

int bw_tls_peer_answered(bw_tls *tls) {
    sigpipe_guard guard;
    sigpipe_block(&guard);
    int rc = peer_answered(tls);
    sigpipe_restore(&guard);
    return rc;
}

const char *bw_tls_message(const bw_tls *tls) { return tls->message; }

int bw_tls_verify_failed(const bw_tls *tls) { return tls->verify_failed; }

const char *bw_tls_library(void) { return OpenSSL_version(OPENSSL_VERSION); }

#else
/* Built without OpenSSL: the binding offers no TLS of its own. */
typedef int bw_tls_send_unused;
#endif
