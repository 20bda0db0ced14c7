/* bulkwire's TLS client against an OpenSSL server in a thread of this process, over a
   socket pair, with a CA and certificates made here: configuration errors name their
   argument (a missing or foreign key, a key with a passphrase refused without a prompt, a
   CA that does not load); the server's certificate checked against names and IP literals;
   client certificates sent, and a server's refusal of a missing one reported from its
   alert; gathered writes arriving whole (over TLS 1.2 and 1.3), reads to the end of the
   stream; timeouts of the handshake, a write and a read; a peer that hangs up or speaks
   something else; the early-answer check, which takes session tickets in but never an
   answer's bytes, and keeps an error for the next call; a signal ending a wait with EINTR.
   sources: tls_send.c socket_send.c fork_origin.c
   libs: -DBW_HAVE_OPENSSL -lssl -lcrypto -lpthread
   requires: openssl/ssl.h */
#define _GNU_SOURCE /* mkdtemp, SA_* flags */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "check.h"
#include "clock.h"
#include "tls_send.h"

/* ---- a small PKI, made once ---- */

static EVP_PKEY *new_key(void) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
    if (ctx == NULL || EVP_PKEY_keygen_init(ctx) <= 0 ||
        EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) <= 0 ||
        EVP_PKEY_keygen(ctx, &key) <= 0)
        abort();
    EVP_PKEY_CTX_free(ctx);
    return key;
}

static void add_extension(X509 *cert, X509V3_CTX *ctx, int nid, const char *value) {
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    if (e == NULL || X509_add_ext(cert, e, -1) != 1)
        abort();
    X509_EXTENSION_free(e);
}

/* A certificate for key named cn, signed by issuer (NULL: self-signed, a CA); san (e.g.
   "DNS:localhost,IP:127.0.0.1") makes it a leaf. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                      const char *san) {
    static long serial = 1;
    X509 *cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(cert, issuer != NULL ? X509_get_subject_name(issuer) : name);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer != NULL ? issuer : cert, cert, NULL, NULL, 0);
    add_extension(cert, &v3, NID_basic_constraints, san != NULL ? "critical,CA:FALSE" : "critical,CA:TRUE");
    add_extension(cert, &v3, NID_subject_key_identifier, "hash");
    if (san != NULL)
        add_extension(cert, &v3, NID_subject_alt_name, san);
    else
        add_extension(cert, &v3, NID_key_usage, "critical,keyCertSign,cRLSign");
    if (X509_sign(cert, issuer_key != NULL ? issuer_key : key, EVP_sha256()) <= 0)
        abort();
    return cert;
}

static struct {
    char dir[64];
    EVP_PKEY *ca_key, *server_key, *client_key, *other_key;
    X509 *ca, *server, *client, *stranger_ca;
} pki;

static char paths[10][128];
enum { CA_PEM, SERVER_PEM, CLIENT_PEM, CLIENT_KEY, CLIENT_BOTH, OTHER_KEY, LOCKED_KEY,
       GARBAGE, STRANGER_CA_PEM, MISSING };

static void make_pki(void);
static void free_pki(void);

/* A file of the PKI, made on first use and removed at exit. */
static const char *path(int which) {
    if (pki.dir[0] == '\0') {
        make_pki();
        atexit(free_pki);
    }
    return paths[which];
}

static void write_pem(int which, const char *name, X509 *cert, EVP_PKEY *key,
                      const EVP_CIPHER *cipher) {
    snprintf(paths[which], sizeof paths[which], "%s/%s", pki.dir, name);
    FILE *f = fopen(paths[which], "w");
    if (f == NULL)
        abort();
    if (cert != NULL)
        PEM_write_X509(f, cert);
    if (key != NULL)
        PEM_write_PrivateKey(f, key, cipher, cipher ? (unsigned char *)"secret" : NULL,
                             cipher ? 6 : 0, NULL, NULL);
    fclose(f);
}

static void make_pki(void) {
    snprintf(pki.dir, sizeof pki.dir, "/tmp/bulkwire-tls-XXXXXX");
    if (mkdtemp(pki.dir) == NULL)
        abort();
    pki.ca_key = new_key();
    pki.server_key = new_key();
    pki.client_key = new_key();
    pki.other_key = new_key();
    pki.ca = new_cert(pki.ca_key, "bulkwire test CA", NULL, NULL, NULL);
    pki.server = new_cert(pki.server_key, "localhost", pki.ca, pki.ca_key,
                          "DNS:localhost,IP:127.0.0.1");
    pki.client = new_cert(pki.client_key, "bulkwire client", pki.ca, pki.ca_key, "DNS:client");
    EVP_PKEY *stranger_key = new_key();
    pki.stranger_ca = new_cert(stranger_key, "another CA", NULL, NULL, NULL);
    EVP_PKEY_free(stranger_key);
    write_pem(CA_PEM, "ca.pem", pki.ca, NULL, NULL);
    write_pem(SERVER_PEM, "server.pem", pki.server, NULL, NULL);
    write_pem(CLIENT_PEM, "client.pem", pki.client, NULL, NULL);
    write_pem(CLIENT_KEY, "client.key", NULL, pki.client_key, NULL);
    write_pem(CLIENT_BOTH, "client-both.pem", pki.client, pki.client_key, NULL);
    write_pem(OTHER_KEY, "other.key", NULL, pki.other_key, NULL);
    write_pem(LOCKED_KEY, "locked.key", NULL, pki.client_key, EVP_aes_128_cbc());
    write_pem(STRANGER_CA_PEM, "stranger-ca.pem", pki.stranger_ca, NULL, NULL);
    snprintf(paths[GARBAGE], sizeof paths[GARBAGE], "%s/garbage.pem", pki.dir);
    FILE *f = fopen(paths[GARBAGE], "w");
    fputs("this is not PEM\n", f);
    fclose(f);
    snprintf(paths[MISSING], sizeof paths[MISSING], "%s/missing.pem", pki.dir);
}

static void free_pki(void) {
    for (int i = 0; i < MISSING; i++)
        unlink(paths[i]);
    rmdir(pki.dir);
    X509_free(pki.ca);
    X509_free(pki.server);
    X509_free(pki.client);
    X509_free(pki.stranger_ca);
    EVP_PKEY_free(pki.ca_key);
    EVP_PKEY_free(pki.server_key);
    EVP_PKEY_free(pki.client_key);
    EVP_PKEY_free(pki.other_key);
}

/* ---- the server: a thread with its end of a socket pair ---- */

typedef struct peer peer;
struct peer {
    int fd;                 /* the server's end (blocking) */
    int client_fd;          /* the client's end */
    int max_version;        /* TLS1_2_VERSION or TLS1_3_VERSION */
    int want_client_cert;   /* refuse a client without a certificate */
    long delay_ms;          /* before the handshake */
    void (*after)(peer *p, SSL *ssl); /* after a handshake that succeeded */
    int accepted;
    char client_cn[64];
    unsigned char *got;     /* what `after` read */
    size_t got_len, expect;
    sem_t step;             /* the client lets `after` go on */
    sem_t done_step;        /* `after` tells the client a step is done */
    pthread_t thread;
};

static void *serve(void *arg) {
    peer *p = arg;
    sleep_ms(p->delay_ms);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_max_proto_version(ctx, p->max_version);
    SSL_CTX_use_certificate(ctx, pki.server);
    SSL_CTX_use_PrivateKey(ctx, pki.server_key);
    if (p->want_client_cert) {
        X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), pki.ca);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, p->fd);
    p->accepted = SSL_accept(ssl) == 1;
    if (p->accepted) {
        X509 *client = SSL_get1_peer_certificate(ssl);
        if (client != NULL) {
            X509_NAME_get_text_by_NID(X509_get_subject_name(client), NID_commonName, p->client_cn,
                                      sizeof p->client_cn);
            X509_free(client);
        }
        if (p->after != NULL)
            p->after(p, ssl);
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    close(p->fd);
    return NULL;
}

static void start_peer(peer *p, int max_version, void (*after)(peer *, SSL *)) {
    int fds[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    p->client_fd = fds[0];
    p->fd = fds[1];
    p->max_version = max_version;
    p->after = after;
    p->accepted = 0;
    p->client_cn[0] = '\0';
    sem_init(&p->step, 0, 0);
    sem_init(&p->done_step, 0, 0);
    pthread_create(&p->thread, NULL, serve, p);
}

/* After the server thread ended: frees what the peer holds, closes the client's end. */
static void finish_peer(peer *p) {
    sem_destroy(&p->step);
    sem_destroy(&p->done_step);
    free(p->got);
    p->got = NULL;
    close(p->client_fd);
}

static void join_peer(peer *p) {
    pthread_join(p->thread, NULL);
    finish_peer(p);
}

/* `after` steps */
static void read_expected(peer *p, SSL *ssl) {
    p->got = malloc(p->expect + 1);
    p->got_len = 0;
    while (p->got_len < p->expect) {
        int n = SSL_read(ssl, p->got + p->got_len, (int)(p->expect - p->got_len));
        if (n <= 0)
            break;
        p->got_len += (size_t)n;
    }
}

static void read_then_answer(peer *p, SSL *ssl) {
    read_expected(p, ssl);
    SSL_write(ssl, "HTTP/1.1 201 Created\r\n\r\n", 24);
    SSL_shutdown(ssl);
}

/* In the server's `after` step: tells the client it got here, then waits to be let go on. */
static void server_pause(peer *p) {
    sem_post(&p->done_step);
    sem_wait(&p->step);
}

/* On the client: waits for the server's next pause; lets it go on. */
static void until_the_server_pauses(peer *p) { sem_wait(&p->done_step); }
static void let_the_server_go_on(peer *p) { sem_post(&p->step); }

/* `after`: the server holds the session open until the client lets it go on, then ends. */
static void pause_after_the_handshake(peer *p, SSL *ssl) {
    (void)ssl;
    server_pause(p);
}

/* ---- the client ---- */

static bw_tls_config *config(const char *cert, const char *key, const char *ca, int verify) {
    bw_tls_arg bad = BW_TLS_ARG_NONE;
    char message[BW_TLS_MESSAGE_MAX] = "";
    bw_tls_config *c = bw_tls_config_new(cert, key, ca, verify, &bad, message);
    if (c == NULL)
        fprintf(stderr, "configuration refused (argument %d): %s\n", (int)bad, message);
    return c;
}

/* A session to the peer's server, handshake done (0) or its result. */
static int connect_to(peer *p, bw_tls_config *c, const char *host, bw_tls **out) {
    char message[BW_TLS_MESSAGE_MAX] = "";
    *out = bw_tls_new(c, p->client_fd, host, message);
    if (*out == NULL) {
        fprintf(stderr, "bw_tls_new: %s\n", message);
        return -2;
    }
    return bw_tls_handshake(*out, 5000);
}

/* A session to "localhost", handshake done, with a server of that version running `after`. */
static bw_tls *session_with(peer *p, bw_tls_config *c, int version, void (*after)(peer *, SSL *)) {
    start_peer(p, version, after);
    bw_tls *tls = NULL;
    CHECK_EQ(connect_to(p, c, "localhost", &tls), 0);
    return tls;
}

TEST(configuration_errors_name_their_argument) {
    struct {
        int cert, key, ca, verify;
        bw_tls_arg bad; /* BW_TLS_ARG_NONE: accepted */
    } cases[] = {
        {MISSING, -1, CA_PEM, 1, BW_TLS_ARG_CERTIFICATE},
        {GARBAGE, -1, CA_PEM, 1, BW_TLS_ARG_CERTIFICATE},
        {CLIENT_PEM, MISSING, CA_PEM, 1, BW_TLS_ARG_KEY},
        {CLIENT_PEM, GARBAGE, CA_PEM, 1, BW_TLS_ARG_KEY},
        {CLIENT_PEM, OTHER_KEY, CA_PEM, 1, BW_TLS_ARG_KEY},   /* not the certificate's key */
        {CLIENT_PEM, LOCKED_KEY, CA_PEM, 1, BW_TLS_ARG_KEY},  /* a passphrase: no prompt */
        {CLIENT_PEM, -1, CA_PEM, 1, BW_TLS_ARG_CERTIFICATE},  /* no key in the certificate file */
        {CLIENT_BOTH, -1, CA_PEM, 1, BW_TLS_ARG_NONE},        /* the key in the certificate file */
        {CLIENT_PEM, CLIENT_KEY, CA_PEM, 1, BW_TLS_ARG_NONE},
        {-1, -1, MISSING, 1, BW_TLS_ARG_CA},
        {-1, -1, GARBAGE, 1, BW_TLS_ARG_CA},
        {-1, -1, MISSING, 0, BW_TLS_ARG_NONE},                /* not verifying: no CA read */
        {-1, -1, -1, 1, BW_TLS_ARG_NONE},                     /* the system's CAs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bw_tls_arg bad = (bw_tls_arg)99;
        char message[BW_TLS_MESSAGE_MAX];
        memset(message, 'x', sizeof message);
        bw_tls_config *c = bw_tls_config_new(
            cases[i].cert >= 0 ? path(cases[i].cert) : NULL,
            cases[i].key >= 0 ? path(cases[i].key) : NULL,
            cases[i].ca >= 0 ? path(cases[i].ca) : NULL, cases[i].verify, &bad, message);
        if (cases[i].bad == BW_TLS_ARG_NONE) {
            CHECK(c != NULL);
        } else {
            CHECK(c == NULL);
            CHECK_EQ(bad, cases[i].bad);
            size_t len = strnlen(message, sizeof message);
            CHECK(len > 0 && len < sizeof message); /* a reason, NUL-ended in its room */
            if (c != NULL || bad != cases[i].bad)
                fprintf(stderr, "case %zu: %s\n", i, message);
        }
        bw_tls_config_free(c);
        CHECK(ERR_peek_error() == 0); /* the thread's error queue is left empty */
    }
    bw_tls_config_free(NULL);
}

TEST(gathered_writes_arrive_whole_and_the_answer_is_read_to_its_end) {
    enum { TOTAL = 300000, ENTRIES = 200 };
    unsigned char *data = malloc(TOTAL);
    unsigned long long rng = 11;
    for (size_t i = 0; i < TOTAL; i++)
        data[i] = (unsigned char)check_rand(&rng);
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    for (int v = 0; v < 2; v++) {
        /* entries of every size class: empty, a few bytes (gathered), around 512, large */
        struct iovec iov[ENTRIES];
        size_t used = 0;
        for (int i = 0; i < ENTRIES; i++) {
            size_t n;
            switch (check_rand(&rng) % 5) {
            case 0: n = 0; break;
            case 1: n = 1 + check_rand(&rng) % 20; break;
            case 2: n = 500 + check_rand(&rng) % 24; break;
            case 3: n = 1 + check_rand(&rng) % 4000; break;
            default: n = 10000 + check_rand(&rng) % 30000; break;
            }
            if (n > TOTAL - used || i == ENTRIES - 1)
                n = i == ENTRIES - 1 ? TOTAL - used : 0;
            iov[i].iov_base = data + used;
            iov[i].iov_len = n;
            used += n;
        }
        peer p = {.expect = TOTAL};
        bw_tls *tls = session_with(&p, c, versions[v], read_then_answer);
        CHECK_EQ(bw_tls_write_all(tls, iov, ENTRIES, 5000, 0), 0);
        for (int i = 0; i < ENTRIES; i++)
            CHECK_EQ(iov[i].iov_len, 0); /* every entry consumed */
        char answer[64];
        size_t len = 0, got = 1;
        while (got > 0 && len < sizeof answer) {
            CHECK_EQ(bw_tls_read(tls, answer + len, sizeof answer - len, 5000, &got), 0);
            len += got;
        }
        CHECK_BYTES(answer, len, "HTTP/1.1 201 Created\r\n\r\n");
        CHECK_EQ(bw_tls_read(tls, answer, sizeof answer, 5000, &got), 0); /* still the end */
        CHECK_EQ(got, 0);
        bw_tls_free(tls);
        pthread_join(p.thread, NULL);
        CHECK(p.accepted);
        CHECK_EQ(p.got_len, TOTAL);
        CHECK(p.got_len == TOTAL && memcmp(p.got, data, TOTAL) == 0);
        finish_peer(&p);
    }
    bw_tls_config_free(c);
    free(data);
}

/* A handshake to `host` with the given trust; its result, and the session's verdicts. */
static int handshake_with(const char *ca, int verify, const char *host, int *verify_failed,
                          char *message) {
    bw_tls_config *c = config(NULL, NULL, ca, verify);
    peer p = {0};
    start_peer(&p, TLS1_3_VERSION, NULL);
    bw_tls *tls;
    int rc = connect_to(&p, c, host, &tls);
    *verify_failed = bw_tls_verify_failed(tls);
    snprintf(message, BW_TLS_MESSAGE_MAX, "%s", bw_tls_message(tls));
    bw_tls_free(tls);
    bw_tls_config_free(c);
    join_peer(&p);
    return rc;
}

TEST(the_server_certificate_is_checked_against_the_host) {
    char message[BW_TLS_MESSAGE_MAX];
    int failed;
    CHECK_EQ(handshake_with(path(CA_PEM), 1, "localhost", &failed, message), 0);
    CHECK_EQ(failed, 0);
    CHECK_EQ(handshake_with(path(CA_PEM), 1, "127.0.0.1", &failed, message), 0); /* IP SAN */
    const char *wrong[] = {"otherhost", "127.0.0.2", "::1", "localhost.example"};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        CHECK_EQ(handshake_with(path(CA_PEM), 1, wrong[i], &failed, message), BW_TLS_FAILED);
        CHECK_EQ(failed, 1);
        CHECK(strncmp(message, "certificate verify failed: ", 27) == 0);
    }
    /* signed by a CA the client does not trust */
    CHECK_EQ(handshake_with(path(STRANGER_CA_PEM), 1, "localhost", &failed, message), BW_TLS_FAILED);
    CHECK_EQ(failed, 1);
    CHECK(strstr(message, "certificate verify failed: ") == message);
    /* verify=0 takes any certificate for any name */
    CHECK_EQ(handshake_with(path(STRANGER_CA_PEM), 0, "otherhost", &failed, message), 0);
    CHECK_EQ(failed, 0);
}

TEST(a_client_certificate_is_sent_and_its_absence_reported_from_the_alert) {
    /* with one: the server sees it */
    bw_tls_config *c = config(path(CLIENT_PEM), path(CLIENT_KEY), path(CA_PEM), 1);
    peer p = {.want_client_cert = 1};
    bw_tls *tls = session_with(&p, c, TLS1_3_VERSION, NULL);
    pthread_join(p.thread, NULL);
    CHECK(p.accepted);
    CHECK_BYTES(p.client_cn, strlen(p.client_cn), "bulkwire client");
    bw_tls_free(tls);
    bw_tls_config_free(c);
    finish_peer(&p);
    /* without: under TLS 1.3 the client's handshake ends first; the server's alert is the
       reason a later write reports, after the server hung up */
    c = config(NULL, NULL, path(CA_PEM), 1);
    peer q = {.want_client_cert = 1};
    start_peer(&q, TLS1_3_VERSION, NULL);
    CHECK_EQ(connect_to(&q, c, "localhost", &tls), 0);
    pthread_join(q.thread, NULL); /* refused, closed */
    CHECK(!q.accepted);
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    CHECK_EQ(bw_tls_write_all(tls, &iov, 1, 1000, 0), BW_TLS_FAILED);
    CHECK(strstr(bw_tls_message(tls), "certificate required") != NULL);
    CHECK_EQ(bw_tls_verify_failed(tls), 0);
    bw_tls_free(tls);
    bw_tls_config_free(c);
    finish_peer(&q);
}

TEST(a_silent_peer_times_out) {
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    /* the handshake: nobody answers the hello */
    int fds[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    char message[BW_TLS_MESSAGE_MAX];
    bw_tls *tls = bw_tls_new(c, fds[0], "localhost", message);
    double start = now_ms();
    CHECK_EQ(bw_tls_handshake(tls, 150), ETIMEDOUT);
    double took = now_ms() - start;
    CHECK(took >= 140 && took < 5000);
    bw_tls_free(tls);
    close(fds[0]);
    close(fds[1]);
    /* a read and a write, after a handshake, against a server that waits */
    peer p = {0};
    tls = session_with(&p, c, TLS1_3_VERSION, pause_after_the_handshake);
    until_the_server_pauses(&p);
    char buf[16];
    size_t got = 99;
    start = now_ms();
    CHECK_EQ(bw_tls_read(tls, buf, sizeof buf, 150, &got), ETIMEDOUT);
    CHECK(now_ms() - start >= 140);
    CHECK_EQ(got, 0);
    enum { TOTAL = 16 << 20 }; /* more than the socket pair buffers */
    char *data = calloc(1, TOTAL);
    struct iovec iov = {data, TOTAL};
    start = now_ms();
    CHECK_EQ(bw_tls_write_all(tls, &iov, 1, 150, 0), ETIMEDOUT);
    CHECK(now_ms() - start >= 140);
    CHECK(iov.iov_len > 0); /* not all of it went */
    free(data);
    let_the_server_go_on(&p);
    join_peer(&p);
    bw_tls_free(tls);
    bw_tls_config_free(c);
}

/* A peer that reads the client's hello, then `does` one thing and hangs up. */
typedef struct {
    int fd;
    const char *reply; /* written raw (not TLS), or NULL */
} raw_peer;

static void *raw_serve(void *arg) {
    raw_peer *r = arg;
    char hello[4096];
    ssize_t n = read(r->fd, hello, sizeof hello);
    (void)n;
    if (r->reply != NULL) {
        ssize_t w = write(r->fd, r->reply, strlen(r->reply));
        (void)w;
    }
    close(r->fd);
    return NULL;
}

TEST(a_peer_that_hangs_up_or_speaks_another_protocol_fails_the_handshake) {
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    const char *replies[] = {NULL, "HTTP/1.1 400 Bad Request\r\n\r\n"};
    for (int i = 0; i < 2; i++) {
        int fds[2];
        CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
        raw_peer r = {fds[1], replies[i]};
        pthread_t thread;
        pthread_create(&thread, NULL, raw_serve, &r);
        char message[BW_TLS_MESSAGE_MAX];
        bw_tls *tls = bw_tls_new(c, fds[0], "localhost", message);
        int rc = bw_tls_handshake(tls, 5000);
        pthread_join(thread, NULL);
        /* never success, never a wait's result: a reset or OpenSSL's reason */
        CHECK(rc == ECONNRESET || rc == EPIPE || rc == BW_TLS_FAILED);
        CHECK(rc != BW_TLS_FAILED || strlen(bw_tls_message(tls)) > 0);
        if (i == 1)
            CHECK_EQ(rc, BW_TLS_FAILED); /* not TLS: OpenSSL says why */
        CHECK_EQ(bw_tls_verify_failed(tls), 0);
        bw_tls_free(tls);
        close(fds[0]);
    }
    bw_tls_config_free(c);
}

static void tickets_then_answer(peer *p, SSL *ssl) {
    server_pause(p); /* the handshake (and TLS 1.3's session tickets) went out */
    SSL_write(ssl, "HTTP/1.1 413", 12);
    server_pause(p);
    SSL_shutdown(ssl);
    server_pause(p);
}

/* Waits until fd has something to read. */
static void wait_readable(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    poll(&pfd, 1, 5000);
}

TEST(the_early_answer_check_takes_tickets_in_but_never_an_answer) {
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    peer p = {0};
    bw_tls *tls = session_with(&p, c, TLS1_3_VERSION, tickets_then_answer);
    until_the_server_pauses(&p);
    wait_readable(p.client_fd); /* the session tickets */
    CHECK_EQ(bw_tls_peer_answered(tls), 0);
    CHECK_EQ(bw_tls_peer_answered(tls), 0);
    let_the_server_go_on(&p);
    until_the_server_pauses(&p);
    wait_readable(p.client_fd);
    CHECK_EQ(bw_tls_peer_answered(tls), 1);
    CHECK_EQ(bw_tls_peer_answered(tls), 1);
    char buf[32];
    size_t got = 0;
    CHECK_EQ(bw_tls_read(tls, buf, sizeof buf, 1000, &got), 0);
    CHECK_BYTES(buf, got, "HTTP/1.1 413"); /* all of it, still there */
    CHECK_EQ(bw_tls_peer_answered(tls), 0);
    let_the_server_go_on(&p);
    until_the_server_pauses(&p);
    wait_readable(p.client_fd);
    CHECK_EQ(bw_tls_peer_answered(tls), 1); /* close_notify: the end is an answer */
    CHECK_EQ(bw_tls_read(tls, buf, sizeof buf, 1000, &got), 0);
    CHECK_EQ(got, 0);
    let_the_server_go_on(&p);
    join_peer(&p);
    bw_tls_free(tls);
    bw_tls_config_free(c);
}

static void garbage_after_handshake(peer *p, SSL *ssl) {
    (void)ssl;
    server_pause(p);
    static const char junk[] = "\x17\x03\x03\x00\x05junk!"; /* an application record that does not decrypt */
    ssize_t w = write(p->fd, junk, sizeof junk - 1);
    (void)w;
    server_pause(p);
}

TEST(an_error_the_check_meets_is_reported_by_the_next_call_once) {
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    peer p = {0};
    bw_tls *tls = session_with(&p, c, TLS1_3_VERSION, garbage_after_handshake);
    until_the_server_pauses(&p);
    let_the_server_go_on(&p);
    until_the_server_pauses(&p);
    wait_readable(p.client_fd);
    CHECK_EQ(bw_tls_peer_answered(tls), 1);
    CHECK_EQ(bw_tls_peer_answered(tls), 1); /* still pending: said again, not lost */
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    CHECK_EQ(bw_tls_write_all(tls, &iov, 1, 1000, 0), BW_TLS_FAILED);
    CHECK(strlen(bw_tls_message(tls)) > 0);
    CHECK_EQ(iov.iov_len, 1); /* nothing was written */
    let_the_server_go_on(&p);
    join_peer(&p);
    bw_tls_free(tls); /* broken: no close_notify attempted */
    bw_tls_config_free(c);
}

TEST(a_peer_that_hung_up_is_an_error_never_sigpipe) {
    /* SIGPIPE at its default kills the process: libssl writes with write(), so the writes
       and the close_notify to a peer that is gone must not raise it */
    signal(SIGPIPE, SIG_DFL);
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    for (int version = 0; version < 2; version++) {
        peer p = {0};
        bw_tls *tls = session_with(&p, c, version ? TLS1_3_VERSION : TLS1_2_VERSION, pause_after_the_handshake);
        until_the_server_pauses(&p);
        let_the_server_go_on(&p);
        pthread_join(p.thread, NULL); /* the server's end is closed */
        char data[20000] = {0};
        int rc = 0;
        for (int i = 0; i < 10 && rc == 0; i++) {
            struct iovec iov = {data, sizeof data};
            rc = bw_tls_write_all(tls, &iov, 1, 1000, 0);
        }
        CHECK(rc == EPIPE || rc == ECONNRESET || rc == BW_TLS_FAILED);
        bw_tls_free(tls);
        finish_peer(&p);
    }
    /* a session whose server left right after the handshake: the close_notify at the end */
    peer p = {0};
    bw_tls *tls = session_with(&p, c, TLS1_3_VERSION, NULL);
    pthread_join(p.thread, NULL);
    bw_tls_free(tls);
    finish_peer(&p);
    bw_tls_config_free(c);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

TEST(a_signal_ends_a_wait_with_eintr_and_the_handshake_resumes) {
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm; /* no SA_RESTART: poll returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    /* the server thread must not take the signals */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    peer p = {.delay_ms = 200};
    start_peer(&p, TLS1_3_VERSION, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    char message[BW_TLS_MESSAGE_MAX];
    bw_tls *tls = bw_tls_new(c, p.client_fd, "localhost", message);
    struct itimerval every = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
    alarms = 0;
    setitimer(ITIMER_REAL, &every, NULL);
    int rc, interrupted = 0;
    while ((rc = bw_tls_handshake(tls, 5000)) == EINTR)
        interrupted++;
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_DFL);
    CHECK_EQ(rc, 0);
    CHECK(interrupted > 0);
    pthread_join(p.thread, NULL);
    CHECK(p.accepted);
    bw_tls_free(tls);
    finish_peer(&p);
    bw_tls_config_free(c);
}

TEST(a_bad_descriptor_and_the_library) {
    bw_tls_config *c = config(NULL, NULL, path(CA_PEM), 1);
    char message[BW_TLS_MESSAGE_MAX] = "";
    CHECK(bw_tls_new(c, -1, "localhost", message) == NULL);
    CHECK_BYTES(message, strlen(message), strerror(EBADF));
    bw_tls_free(NULL);
    bw_tls_config_free(c);
    CHECK(strncmp(bw_tls_library(), "OpenSSL ", 8) == 0);
}

RUN_TESTS(a_peer_that_hung_up_is_an_error_never_sigpipe,
          configuration_errors_name_their_argument,
          gathered_writes_arrive_whole_and_the_answer_is_read_to_its_end,
          the_server_certificate_is_checked_against_the_host,
          a_client_certificate_is_sent_and_its_absence_reported_from_the_alert,
          a_silent_peer_times_out,
          a_peer_that_hangs_up_or_speaks_another_protocol_fails_the_handshake,
          the_early_answer_check_takes_tickets_in_but_never_an_answer,
          an_error_the_check_meets_is_reported_by_the_next_call_once,
          a_signal_ends_a_wait_with_eintr_and_the_handshake_resumes,
          a_bad_descriptor_and_the_library)
