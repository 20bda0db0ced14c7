/* The CQL connection against a fake server on a loopback thread: the handshake (with and
   without SASL PLAIN, wrong and missing credentials), a pipeline whose answers come out of
   order with never more than the window in flight, an answer while a large request is still
   being written, the retryable errors re-sent with the same bytes (and given up after the
   bound), and the hostile answers: an unknown stream id, a wrong version byte, a truncated
   frame, a huge length (refused before any allocation), an error in the middle, a close in
   the middle of a frame, a server that stalls (the timeout fires). Every failure names the
   requests left unanswered. A cancel fired by another thread ends the connect, and a run,
   at once. Also the ERROR body's fields and every cut of it.
   sources: cql_conn.c cql_shard.c cql_wire.c out_buffer.c socket_send.c fork_origin.c status.c
   libs: -lpthread */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cql_conn.h"

/* ---- the fake server ---- */

typedef void (*script_fn)(int fd, void *arg);

typedef struct {
    int listen_fd;
    int port;
    script_fn script;
    void *arg;
    pthread_t thread;
} fake;

static void *fake_main(void *p) {
    fake *f = p;
    struct pollfd pfd = {f->listen_fd, POLLIN, 0};
    if (poll(&pfd, 1, 10000) == 1) {
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd >= 0) {
            f->script(fd, f->arg);
            close(fd);
        }
    }
    return NULL;
}

/* A TCP socket bound to a free port of the loopback address, listening when `listening`:
   the socket; its port in *port. */
static int loopback_socket(int listening, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    if (listening)
        CHECK_EQ(listen(fd, 4), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void fake_start(fake *f, script_fn script, void *arg) {
    f->script = script;
    f->arg = arg;
    f->listen_fd = loopback_socket(1, &f->port);
    CHECK_EQ(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_join(fake *f) {
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
}

/* Reads exactly n bytes (5 s at most). 0, or -1 on end, error or timeout. */
static int srv_read(int fd, void *buf, size_t n) {
    size_t at = 0;
    while (at < n) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1)
            return -1;
        ssize_t got = recv(fd, (char *)buf + at, n - at, 0);
        if (got <= 0)
            return -1;
        at += (size_t)got;
    }
    return 0;
}

/* One request frame; *body malloc'd. 0 or -1. */
static int srv_frame(int fd, bw_cql_header *h, uint8_t **body) {
    uint8_t head[BW_CQL_HEADER_SIZE];
    if (srv_read(fd, head, sizeof head) < 0 || bw_cql_header_read(head, h) < 0)
        return -1;
    *body = malloc(h->length ? h->length : 1);
    if (srv_read(fd, *body, h->length) < 0) {
        free(*body);
        return -1;
    }
    return 0;
}

static void srv_send_raw(int fd, const void *p, size_t n) {
    CHECK_EQ(send(fd, p, n, MSG_NOSIGNAL), (long long)n);
}

static void srv_send(int fd, uint8_t flags, int16_t stream, uint8_t opcode, const void *body,
                     size_t n) {
    uint8_t head[BW_CQL_HEADER_SIZE];
    bw_cql_header h = {0x84, flags, stream, opcode, (uint32_t)n};
    bw_cql_header_write(head, &h);
    srv_send_raw(fd, head, sizeof head);
    if (n)
        srv_send_raw(fd, body, n);
}

/* An ERROR body: code, message, and `extra` bytes of the code's fields. */
static void srv_error(int fd, int16_t stream, int32_t code, const char *message,
                      const void *extra, size_t extra_len) {
    bw_buf b;
    bw_buf_init(&b, 64);
    bw_cql_put_int(&b, code);
    bw_cql_put_string(&b, message, strlen(message));
    if (extra_len)
        bw_buf_append(&b, extra, extra_len);
    srv_send(fd, 0, stream, BW_CQL_OP_ERROR, b.data, b.len);
    bw_buf_free(&b);
}

/* Answers OPTIONS and STARTUP (READY); with a password, asks for it and checks it. 0 when the
   client went through the handshake it should. */
static int srv_handshake(int fd, const char *expected_plain, size_t plain_len) {
    bw_cql_header h;
    uint8_t *body;
    if (srv_frame(fd, &h, &body) < 0 || h.opcode != BW_CQL_OP_OPTIONS || h.version != 4)
        return -1;
    free(body);
    const uint8_t supported[] = {0, 1, 0, 11, 'C', 'Q', 'L', '_', 'V', 'E', 'R', 'S', 'I', 'O',
                                 'N', 0, 1, 0, 5, '3', '.', '0', '.', '0'};
    srv_send(fd, 0, h.stream, BW_CQL_OP_SUPPORTED, supported, sizeof supported);
    if (srv_frame(fd, &h, &body) < 0 || h.opcode != BW_CQL_OP_STARTUP)
        return -1;
    const uint8_t startup[] = {0, 1, 0, 11, 'C', 'Q', 'L', '_', 'V', 'E', 'R', 'S', 'I', 'O',
                               'N', 0, 5, '3', '.', '0', '.', '0'};
    int good = h.length == sizeof startup && memcmp(body, startup, sizeof startup) == 0;
    free(body);
    if (!good)
        return -1;
    if (expected_plain == NULL) {
        srv_send(fd, 0, h.stream, BW_CQL_OP_READY, NULL, 0);
        return 0;
    }
    const char name[] = "\0\x2f" "org.apache.cassandra.auth.PasswordAuthenticator";
    srv_send(fd, 0, h.stream, BW_CQL_OP_AUTHENTICATE, name, sizeof name - 1);
    if (srv_frame(fd, &h, &body) < 0 || h.opcode != BW_CQL_OP_AUTH_RESPONSE)
        return -1;
    bw_cql_cursor c = bw_cql_cursor_make(body, h.length);
    const uint8_t *token;
    int32_t n;
    good = bw_cql_get_bytes(&c, &token, &n) == 0 && (size_t)n == plain_len &&
           memcmp(token, expected_plain, plain_len) == 0;
    free(body);
    if (good)
        srv_send(fd, 0, h.stream, BW_CQL_OP_AUTH_SUCCESS, "\xff\xff\xff\xff", 4);
    else
        srv_error(fd, h.stream, BW_CQL_ERR_BAD_CREDENTIALS, "Provided username and/or password "
                  "are incorrect", NULL, 0);
    return good ? 0 : -1;
}

static bw_cql_options options_for(const fake *f) {
    bw_cql_options o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.port = f->port;
    o.connect_timeout_ms = 3000;
    o.timeout_ms = 3000;
    return o;
}

/* ---- the client's side of a run: numbered requests, answers recorded ---- */

#define MAX_REQUESTS 4096

typedef struct {
    int total;    /* requests to give */
    int given;
    size_t body_len; /* each body: its number's byte repeated */
    uint8_t *bodies;
    int answered[MAX_REQUESTS];
    int answers;
    int stop_after; /* the consumer stops after this many answers (0: never) */
} client;

static void client_init(client *c, int total, size_t body_len) {
    memset(c, 0, sizeof *c);
    c->total = total;
    c->body_len = body_len;
    c->bodies = malloc((size_t)total * (body_len ? body_len : 1));
    for (int i = 0; i < total; i++)
        memset(c->bodies + (size_t)i * body_len, i & 0xff, body_len);
}

static int client_produce(void *ctx, bw_cql_request *r) {
    client *c = ctx;
    if (c->given == c->total)
        return 0;
    r->opcode = BW_CQL_OP_EXECUTE;
    r->body = c->bodies + (size_t)c->given * c->body_len;
    r->len = c->body_len;
    r->tag = (uint64_t)c->given + 1000;
    c->given++;
    return 1;
}

static int client_consume(void *ctx, uint64_t tag, uint8_t opcode, const uint8_t *body,
                          size_t len) {
    client *c = ctx;
    CHECK_EQ(opcode, BW_CQL_OP_RESULT);
    /* the fake answers [int] 1 (Void) followed by the request's first body byte */
    CHECK_EQ(len, 5);
    if (tag >= 1000 && tag < 1000 + (uint64_t)c->total) {
        int i = (int)(tag - 1000);
        c->answered[i]++;
        if (len == 5 && c->body_len)
            CHECK_EQ(body[4], i & 0xff);
    } else {
        CHECK(!"an answer for a tag never given");
    }
    c->answers++;
    return c->stop_after && c->answers >= c->stop_after ? -1 : 0;
}

static void srv_result(int fd, int16_t stream, uint8_t first) {
    uint8_t body[5] = {0, 0, 0, 1, first};
    srv_send(fd, 0, stream, BW_CQL_OP_RESULT, body, sizeof body);
}

static int contains(const bw_cql_outcome *o, uint64_t tag) {
    for (size_t i = 0; i < o->unanswered_count; i++)
        if (o->unanswered[i] == tag)
            return 1;
    return 0;
}

/* ---- scripts ---- */

typedef struct {
    const char *plain;
    size_t plain_len;
    int handshake_ok;
    int window;         /* the most in flight the client may have */
    int max_in_flight;  /* seen */
    int requests;       /* to serve in total */
    int mode;           /* what the script does, per test */
    int resent_same;    /* retries carried the same body */
} server_state;

static void script_handshake_only(int fd, void *arg) {
    server_state *s = arg;
    s->handshake_ok = srv_handshake(fd, s->plain, s->plain_len) == 0;
    char byte;
    (void)srv_read(fd, &byte, 1); /* until the client closes */
}

/* What one connect against script_handshake_only gave. */
typedef struct {
    int connected;
    bw_cql_status st;
    char authenticator[128];
    char peer[64];
    int port;
    int server_ok; /* the server saw the handshake it expected */
} login_result;

/* Connects with these credentials to a fake server that wants the password "secret" of
   "cassandra" (or, when !wants_password, none), then closes. */
static login_result login(int wants_password, const char *username, const char *password) {
    login_result r;
    memset(&r, 0, sizeof r);
    server_state s = {0};
    if (wants_password) {
        s.plain = "\0cassandra\0secret";
        s.plain_len = 17;
    }
    fake f;
    fake_start(&f, script_handshake_only, &s);
    bw_cql_options o = options_for(&f);
    o.username = username;
    o.password = password;
    bw_cql_conn *conn = bw_cql_connect(&o, &r.st);
    r.connected = conn != NULL;
    r.port = f.port;
    if (conn != NULL) {
        snprintf(r.authenticator, sizeof r.authenticator, "%s", bw_cql_authenticator(conn));
        snprintf(r.peer, sizeof r.peer, "%s", bw_cql_peer(conn));
    }
    bw_cql_close(conn);
    fake_join(&f);
    r.server_ok = s.handshake_ok;
    return r;
}

TEST(handshake_without_authentication) {
    login_result r = login(0, NULL, NULL);
    CHECK(r.connected && r.server_ok);
    CHECK_EQ(r.st.kind, BW_CQL_OK);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", r.port);
    CHECK(strcmp(r.peer, want) == 0);
    CHECK_EQ(r.authenticator[0], '\0');
}

TEST(handshake_with_sasl_plain) {
    login_result r = login(1, "cassandra", "secret");
    CHECK(r.connected && r.server_ok);
    CHECK(strcmp(r.authenticator, "org.apache.cassandra.auth.PasswordAuthenticator") == 0);
}

TEST(wrong_credentials_are_the_servers_error) {
    login_result r = login(1, "cassandra", "wrong");
    CHECK(!r.connected);
    CHECK_EQ(r.st.kind, BW_CQL_E_SERVER);
    CHECK_EQ(r.st.error.code, BW_CQL_ERR_BAD_CREDENTIALS);
    CHECK(strstr(r.st.message, "password are incorrect") != NULL);
}

TEST(missing_credentials_say_the_server_wants_them) {
    login_result r = login(1, NULL, NULL);
    CHECK(!r.connected);
    CHECK_EQ(r.st.kind, BW_CQL_E_AUTH);
    CHECK(strstr(r.st.message, "PasswordAuthenticator") != NULL);
}

TEST(connection_refused_names_the_server) {
    fake f;
    f.port = 0;
    /* a port that was just free: bind, learn it, close */
    close(loopback_socket(0, &f.port));
    bw_cql_options o = options_for(&f);
    bw_cql_status st;
    CHECK(bw_cql_connect(&o, &st) == NULL);
    CHECK_EQ(st.kind, BW_CQL_E_CONNECT);
    CHECK_EQ(st.sys_errno, ECONNREFUSED);
    CHECK(strstr(st.message, "127.0.0.1:") != NULL);
}

/* Serves s->requests requests: collects whatever arrived, then answers the collected ones
   in reverse order (mode 0), or per the test's mode. */
static void script_pipeline(int fd, void *arg) {
    server_state *s = arg;
    if (srv_handshake(fd, NULL, 0) < 0)
        return;
    int served = 0;
    int16_t pending[MAX_REQUESTS];
    uint8_t firsts[MAX_REQUESTS];
    int held = 0;
    int in_flight = 0;
    while (served < s->requests) {
        bw_cql_header h;
        uint8_t *body;
        /* read one, then whatever else is already there */
        do {
            if (srv_frame(fd, &h, &body) < 0)
                return;
            in_flight++;
            if (in_flight > s->max_in_flight)
                s->max_in_flight = in_flight;
            pending[held] = h.stream;
            firsts[held] = h.length ? body[0] : 0;
            held++;
            free(body);
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 20) != 1)
                break;
        } while (held < MAX_REQUESTS);
        while (held > 0) {
            held--;
            srv_result(fd, pending[held], firsts[held]);
            in_flight--;
            served++;
        }
    }
}

/* Starts a fake server running `script` for `total` requests in `mode`, and connects to it
   (timeout_ms for every wait, answers of 1 MiB at most). The connection, or NULL (a failed
   check). */
static bw_cql_conn *serve_and_connect(fake *f, script_fn script, server_state *s, int total,
                                      int mode, long timeout_ms, bw_cql_status *st) {
    memset(s, 0, sizeof *s);
    s->requests = total;
    s->mode = mode;
    fake_start(f, script, s);
    bw_cql_options o = options_for(f);
    o.timeout_ms = timeout_ms;
    o.max_frame = 1 << 20;
    bw_cql_conn *conn = bw_cql_connect(&o, st);
    CHECK(conn != NULL);
    return conn;
}

static void run_pipeline(int window, int total, size_t body_len) {
    server_state s;
    fake f;
    bw_cql_status st;
    bw_cql_conn *conn = serve_and_connect(&f, script_pipeline, &s, total, 0, 3000, &st);
    if (conn != NULL) {
        client c;
        client_init(&c, total, body_len);
        bw_cql_run_options ro = {window, 0, 1, 10, NULL};
        bw_cql_outcome out;
        CHECK_EQ(bw_cql_run(conn, &ro, client_produce, client_consume, &c, &out, &st), 0);
        CHECK_EQ(st.kind, BW_CQL_OK);
        CHECK_EQ(out.answered, total);
        CHECK_EQ(out.taken, total);
        CHECK_EQ(out.unanswered_count, 0);
        for (int i = 0; i < total; i++)
            CHECK_EQ(c.answered[i], 1);
        bw_cql_outcome_free(&out);
        free(c.bodies);
    }
    bw_cql_close(conn);
    fake_join(&f);
    CHECK(s.max_in_flight <= window);
    CHECK(s.max_in_flight >= 1);
}

TEST(pipeline_answers_out_of_order_within_the_window) {
    run_pipeline(1, 50, 16);
    run_pipeline(2, 50, 16);
    run_pipeline(8, 300, 16);
    run_pipeline(64, 1000, 3);
    run_pipeline(3, 10, 0);
}

TEST(large_requests_answered_while_being_written) {
    /* 4 MB bodies: the server answers each as soon as its header arrived */
    run_pipeline(2, 6, (size_t)4 << 20);
}

/* Answers the first request after reading only part of the stream: mode 1 answers a stream
   id nobody used; mode 2 a wrong version byte; mode 3 a huge length; mode 4 a truncated
   frame then close; mode 5 an Invalid error on the third of five requests in flight, the
   others answered; mode 6 stalls; mode 7 sends an EVENT on stream -1 then answers; mode 8 a
   RESULT with a warning before its message; mode 9 a READY on stream -1. */
static void script_hostile(int fd, void *arg) {
    server_state *s = arg;
    if (srv_handshake(fd, NULL, 0) < 0)
        return;
    bw_cql_header h[8];
    uint8_t *body;
    for (int i = 0; i < s->requests; i++) {
        if (srv_frame(fd, &h[i], &body) < 0)
            return;
        free(body);
    }
    switch (s->mode) {
    case 1:
        srv_result(fd, 77, 0);
        break;
    case 2: {
        uint8_t head[] = {0x83, 0, 0, 0, BW_CQL_OP_RESULT, 0, 0, 0, 4, 0, 0, 0, 1};
        srv_send_raw(fd, head, sizeof head);
        break;
    }
    case 3: {
        uint8_t head[] = {0x84, 0, 0, 0, BW_CQL_OP_RESULT, 0x7f, 0xff, 0xff, 0xff};
        srv_send_raw(fd, head, sizeof head);
        break;
    }
    case 4: {
        uint8_t head[] = {0x84, 0, 0, 0, BW_CQL_OP_RESULT, 0, 0, 0, 100, 0, 0, 0, 1};
        srv_send_raw(fd, head, sizeof head);
        return; /* closes mid-frame */
    }
    case 5:
        srv_result(fd, h[0].stream, 0);
        srv_error(fd, h[2].stream, BW_CQL_ERR_INVALID, "Invalid vector literal", NULL, 0);
        srv_result(fd, h[1].stream, 1);
        srv_result(fd, h[4].stream, 4);
        srv_result(fd, h[3].stream, 3);
        break;
    case 6:
        break; /* never answers */
    case 7: {
        const uint8_t event[] = {0, 13, 'S', 'C', 'H', 'E', 'M', 'A', '_', 'C', 'H', 'A', 'N',
                                 'G', 'E'};
        srv_send(fd, 0, -1, BW_CQL_OP_EVENT, event, sizeof event);
        for (int i = 0; i < s->requests; i++)
            srv_result(fd, h[i].stream, (uint8_t)i);
        break;
    }
    case 8:
        for (int i = 0; i < s->requests; i++) {
            const uint8_t body8[] = {0, 1, 0, 2, 'w', '!', 0, 0, 0, 1, (uint8_t)i};
            srv_send(fd, BW_CQL_FLAG_WARNING, h[i].stream, BW_CQL_OP_RESULT, body8,
                     sizeof body8);
        }
        break;
    case 9:
        srv_send(fd, 0, -1, BW_CQL_OP_READY, NULL, 0);
        break;
    case 10: /* "Request is too big" for one, the other never answered */
        srv_error(fd, h[0].stream, BW_CQL_ERR_PROTOCOL, "Request is too big", NULL, 0);
        break;
    }
    char byte;
    (void)srv_read(fd, &byte, 1); /* until the client closes (or 5 s) */
}

/* A run of `total` requests (window 8) against script_hostile mode; the status. */
static bw_cql_failure hostile_run(int mode, int total, long timeout_ms, bw_cql_outcome *out,
                                  bw_cql_status *st, double *took_ms, client *c) {
    server_state s;
    fake f;
    bw_cql_conn *conn = serve_and_connect(&f, script_hostile, &s, total, mode, timeout_ms, st);
    bw_cql_failure kind = BW_CQL_E_CONNECT;
    if (conn != NULL) {
        client_init(c, total, 1);
        bw_cql_run_options ro = {8, 0, 1, 10, NULL};
        double t0 = now_ms();
        int rc = bw_cql_run(conn, &ro, client_produce, client_consume, c, out, st);
        *took_ms = now_ms() - t0;
        kind = st->kind;
        CHECK_EQ(rc, kind == BW_CQL_OK ? 0 : -1);
        if (kind != BW_CQL_OK && kind != BW_CQL_E_SERVER) {
            /* the connection is unusable: the next run says so at once */
            bw_cql_outcome again;
            bw_cql_status st2;
            client c2;
            client_init(&c2, 1, 1);
            CHECK_EQ(bw_cql_run(conn, &ro, client_produce, client_consume, &c2, &again, &st2),
                     -1);
            CHECK_EQ(st2.kind, kind);
            CHECK_EQ(c2.given, 0);
            bw_cql_outcome_free(&again);
            free(c2.bodies);
        }
        free(c->bodies);
    }
    bw_cql_close(conn);
    fake_join(&f);
    return kind;
}

/* A hostile run that must fail with `kind`, a message holding `says` and `unanswered`
   requests left; the outcome for more checks (the caller frees it). */
static void expect_failure(int mode, int total, long timeout_ms, bw_cql_failure kind,
                           const char *says, size_t unanswered, bw_cql_outcome *out,
                           double *took) {
    bw_cql_status st;
    client c;
    CHECK_EQ(hostile_run(mode, total, timeout_ms, out, &st, took, &c), kind);
    if (strstr(st.message, says) == NULL) {
        fprintf(stderr, "message \"%s\" does not say \"%s\"\n", st.message, says);
        CHECK(!"the message");
    }
    CHECK_EQ(out->unanswered_count, unanswered);
}

TEST(unknown_stream_id_is_a_protocol_error_naming_every_request_out) {
    bw_cql_outcome out;
    double took;
    expect_failure(1, 3, 3000, BW_CQL_E_PROTOCOL, "stream id 77", 3, &out, &took);
    CHECK(contains(&out, 1000) && contains(&out, 1001) && contains(&out, 1002));
    bw_cql_outcome_free(&out);
}

TEST(wrong_version_byte_is_a_protocol_error) {
    bw_cql_outcome out;
    double took;
    expect_failure(2, 2, 3000, BW_CQL_E_PROTOCOL, "0x83", 2, &out, &took);
    bw_cql_outcome_free(&out);
}

TEST(huge_length_is_refused_before_it_is_read) {
    bw_cql_outcome out;
    double took;
    expect_failure(3, 2, 3000, BW_CQL_E_PROTOCOL, "2147483647 bytes", 2, &out, &took);
    bw_cql_outcome_free(&out);
}

TEST(close_in_the_middle_of_a_frame_is_a_lost_connection) {
    bw_cql_outcome out;
    double took;
    expect_failure(4, 4, 3000, BW_CQL_E_LOST,
                   "closed the connection with 4 request(s) unanswered", 4, &out, &took);
    CHECK_EQ(out.answered, 0);
    bw_cql_outcome_free(&out);
}

TEST(error_in_the_middle_ends_the_run_at_once) {
    /* the answers read with the error are taken; those not read yet are not waited for */
    bw_cql_outcome out;
    double took;
    bw_cql_status st;
    client c;
    CHECK_EQ(hostile_run(5, 5, 3000, &out, &st, &took, &c), BW_CQL_E_SERVER);
    CHECK(strstr(st.message, "error 0x2200 (Invalid): Invalid vector literal") != NULL);
    CHECK(out.has_failed_tag && out.failed_tag == 1002);
    CHECK(contains(&out, 1002) && !contains(&out, 1000));
    CHECK_EQ(out.answered + out.unanswered_count, 5);
    CHECK_EQ(out.taken, 5);
    bw_cql_outcome_free(&out);
    /* the server answers one request with an error and never the other in flight */
    CHECK_EQ(hostile_run(10, 2, 30000, &out, &st, &took, &c), BW_CQL_E_SERVER);
    CHECK(took < 10000); /* not the timeout of 30 s */
    CHECK(contains(&out, 1000) && contains(&out, 1001));
    CHECK_EQ(out.answered, 0);
    bw_cql_outcome_free(&out);
}

TEST(a_stalled_server_times_out) {
    bw_cql_outcome out;
    double took = 0;
    expect_failure(6, 3, 300, BW_CQL_E_TIMEOUT, "no progress for 300 ms", 3, &out, &took);
    CHECK(took >= 250 && took < 3000);
    bw_cql_outcome_free(&out);
}

TEST(events_and_warnings_are_not_answers) {
    bw_cql_outcome out;
    bw_cql_status st;
    client c;
    double took;
    CHECK_EQ(hostile_run(7, 4, 3000, &out, &st, &took, &c), BW_CQL_OK);
    CHECK_EQ(out.answered, 4);
    bw_cql_outcome_free(&out);
    CHECK_EQ(hostile_run(8, 4, 3000, &out, &st, &took, &c), BW_CQL_OK);
    CHECK_EQ(out.answered, 4);
    bw_cql_outcome_free(&out);
    expect_failure(9, 2, 3000, BW_CQL_E_PROTOCOL, "stream id -1", 2, &out, &took);
    bw_cql_outcome_free(&out);
}

/* Takes one request slowly (256 KiB every 20 ms), then answers it. */
static void script_slow_reader(int fd, void *arg) {
    server_state *s = arg;
    if (srv_handshake(fd, NULL, 0) < 0)
        return;
    uint8_t head[BW_CQL_HEADER_SIZE];
    bw_cql_header h;
    if (srv_read(fd, head, sizeof head) < 0 || bw_cql_header_read(head, &h) < 0)
        return;
    static uint8_t piece[256 << 10];
    for (size_t left = h.length; left > 0;) {
        size_t n = left < sizeof piece ? left : sizeof piece;
        if (srv_read(fd, piece, n) < 0)
            return;
        left -= n;
        sleep_ms(20);
    }
    s->handshake_ok = 1;
    srv_result(fd, h.stream, piece[0]);
    char byte;
    (void)srv_read(fd, &byte, 1);
}

TEST(a_slow_but_moving_write_is_not_a_timeout) {
    /* 32 MiB taken at about 12 MiB/s with a timeout of 1 s: every wait is short, the whole
       write is not; the timeout counts from the last byte that moved either way */
    server_state s;
    fake f;
    bw_cql_status st;
    bw_cql_conn *conn = serve_and_connect(&f, script_slow_reader, &s, 1, 0, 1000, &st);
    if (conn != NULL) {
        client c;
        client_init(&c, 1, (size_t)32 << 20);
        bw_cql_run_options ro = {1, 0, 1, 10, NULL};
        bw_cql_outcome out;
        CHECK_EQ(bw_cql_run(conn, &ro, client_produce, client_consume, &c, &out, &st), 0);
        if (st.kind != BW_CQL_OK)
            fprintf(stderr, "%s\n", st.message);
        CHECK_EQ(out.answered, 1);
        bw_cql_outcome_free(&out);
        free(c.bodies);
    }
    bw_cql_close(conn);
    fake_join(&f);
    CHECK(s.handshake_ok);
}

/* Retries: each request is answered `mode` times with a retryable error (overloaded, write
   timeout, unavailable in turn), then with a RESULT; every resent body is compared with the
   first. */
static void script_retry(int fd, void *arg) {
    server_state *s = arg;
    if (srv_handshake(fd, NULL, 0) < 0)
        return;
    int failures[MAX_REQUESTS] = {0};
    uint8_t seen[MAX_REQUESTS];
    int done = 0;
    s->resent_same = 1;
    while (done < s->requests) {
        bw_cql_header h;
        uint8_t *body;
        if (srv_frame(fd, &h, &body) < 0)
            return;
        int i = body[0];
        if (failures[i] > 0 && (h.length != 1 || body[0] != seen[i]))
            s->resent_same = 0;
        seen[i] = body[0];
        free(body);
        if (failures[i] < s->mode) {
            static const uint8_t unavailable[] = {0, 4, 0, 0, 0, 2, 0, 0, 0, 1};
            static const uint8_t write_timeout[] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 6,
                                                    'S', 'I', 'M', 'P', 'L', 'E'};
            switch (failures[i] % 3) {
            case 0:
                srv_error(fd, h.stream, BW_CQL_ERR_OVERLOADED, "Server is in overloaded state",
                          NULL, 0);
                break;
            case 1:
                srv_error(fd, h.stream, BW_CQL_ERR_WRITE_TIMEOUT, "Operation timed out",
                          write_timeout, sizeof write_timeout);
                break;
            default:
                srv_error(fd, h.stream, BW_CQL_ERR_UNAVAILABLE, "Cannot achieve consistency",
                          unavailable, sizeof unavailable);
            }
            failures[i]++;
            continue;
        }
        srv_result(fd, h.stream, (uint8_t)i);
        done++;
    }
    char byte;
    (void)srv_read(fd, &byte, 1);
}

/* What a run against script_retry gave: its outcome (free it), its status, whether every
   request was resent with the same bytes, and how long it took (ms). */
typedef struct {
    bw_cql_outcome out;
    bw_cql_status st;
    int resent_same;
    double took;
} retried;

static bw_cql_failure retry_run(int failures_each, int max_retries, int total, retried *r) {
    server_state s;
    fake f;
    r->resent_same = 0;
    r->took = 0;
    bw_cql_conn *conn = serve_and_connect(&f, script_retry, &s, total, failures_each, 3000,
                                          &r->st);
    bw_cql_failure kind = BW_CQL_E_CONNECT;
    if (conn != NULL) {
        client c;
        client_init(&c, total, 1);
        bw_cql_run_options ro = {4, max_retries, 20, 40, NULL};
        double t0 = now_ms();
        bw_cql_run(conn, &ro, client_produce, client_consume, &c, &r->out, &r->st);
        r->took = now_ms() - t0;
        kind = r->st.kind;
        free(c.bodies);
    }
    bw_cql_close(conn);
    fake_join(&f);
    r->resent_same = s.resent_same;
    return kind;
}

TEST(retryable_errors_are_sent_again_with_the_same_bytes) {
    retried r;
    CHECK_EQ(retry_run(3, 3, 10, &r), BW_CQL_OK);
    CHECK_EQ(r.out.answered, 10);
    CHECK_EQ(r.out.retries, 30);
    CHECK(r.resent_same);
    /* pauses of 20, 40, 40 ms before the three retries of each request */
    CHECK(r.took >= 100);
    bw_cql_outcome_free(&r.out);
}

TEST(retries_are_bounded) {
    retried r;
    CHECK_EQ(retry_run(3, 2, 1, &r), BW_CQL_E_SERVER);
    CHECK_EQ(r.st.error.code, BW_CQL_ERR_UNAVAILABLE); /* the third error: the bound reached */
    CHECK(r.st.error.has_consistency && r.st.error.consistency == BW_CQL_QUORUM);
    CHECK(r.st.error.required == 2 && r.st.error.alive == 1);
    CHECK(r.out.has_failed_tag && r.out.failed_tag == 1000);
    CHECK_EQ(r.out.retries, 2);
    CHECK_EQ(r.out.unanswered_count, 1);
    bw_cql_outcome_free(&r.out);
}

/* ---- a cancel fired by another thread ---- */

/* Reads what the client sends and answers nothing, until the client closes; with a
   server_state, after the handshake (its handshake_ok set), else from the first byte. */
static void script_silent(int fd, void *arg) {
    server_state *s = arg;
    if (s != NULL)
        s->handshake_ok = srv_handshake(fd, NULL, 0) == 0;
    char byte;
    while (srv_read(fd, &byte, 1) == 0) {
    }
}

static void *fire_after_200_ms(void *cancel) {
    sleep_ms(200);
    bw_cancel_fire(cancel);
    return NULL;
}

/* Fires cancel from another thread 200 ms from now: the thread, to join. */
static pthread_t fire_soon(bw_cancel *cancel) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fire_after_200_ms, cancel), 0);
    return t;
}

TEST(a_cancel_ends_a_connect_and_every_later_wait_at_once) {
    bw_cancel cancel;
    CHECK_EQ(bw_cancel_open(&cancel), 0);
    CHECK(!bw_cancel_fired(&cancel) && !bw_cancel_fired(NULL));
    /* a handshake whose answer never comes, under timeouts of a minute */
    fake f;
    fake_start(&f, script_silent, NULL);
    bw_cql_options o = options_for(&f);
    o.connect_timeout_ms = o.timeout_ms = 60000;
    o.cancel = &cancel;
    pthread_t firing = fire_soon(&cancel);
    bw_cql_status st;
    double t0 = now_ms();
    bw_cql_conn *conn = bw_cql_connect(&o, &st);
    double took = now_ms() - t0;
    pthread_join(firing, NULL);
    CHECK(conn == NULL);
    CHECK_EQ(st.kind, BW_CQL_E_LOST);
    CHECK(strstr(st.message, "aborted") != NULL);
    CHECK(took >= 150 && took < 5000);
    fake_join(&f);
    /* fired: a later connect fails before connecting */
    CHECK(bw_cancel_fired(&cancel));
    int listener = loopback_socket(1, &o.port);
    CHECK(bw_cql_connect(&o, &st) == NULL);
    CHECK_EQ(st.kind, BW_CQL_E_LOST);
    struct pollfd p = {listener, POLLIN, 0};
    CHECK_EQ(poll(&p, 1, 0), 0); /* no connection came */
    close(listener);
    bw_cancel_close(&cancel);
    CHECK(cancel.fd[0] == -1 && cancel.fd[1] == -1);
    /* a connection made with a cancel: a run waiting for an answer ends when it fires */
    CHECK_EQ(bw_cancel_open(&cancel), 0);
    server_state s = {0};
    fake_start(&f, script_silent, &s);
    o = options_for(&f);
    o.timeout_ms = 60000;
    o.cancel = &cancel;
    conn = bw_cql_connect(&o, &st);
    CHECK(conn != NULL);
    if (conn != NULL) {
        client c;
        client_init(&c, 1, 1);
        bw_cql_run_options ro = {2, 0, 0, 0, NULL};
        bw_cql_outcome out;
        firing = fire_soon(&cancel);
        t0 = now_ms();
        CHECK_EQ(bw_cql_run(conn, &ro, client_produce, client_consume, &c, &out, &st), -1);
        took = now_ms() - t0;
        pthread_join(firing, NULL);
        CHECK_EQ(st.kind, BW_CQL_E_LOST);
        CHECK(strstr(st.message, "aborted") != NULL);
        CHECK(took >= 150 && took < 5000);
        CHECK(out.unanswered_count == 1 && contains(&out, 1000));
        bw_cql_outcome_free(&out);
        free(c.bodies);
    }
    bw_cql_close(conn);
    fake_join(&f);
    CHECK(s.handshake_ok);
    bw_cancel_close(&cancel);
}

/* ---- the ERROR body ---- */

TEST(error_bodies_parse_with_their_fields_and_every_cut_fails) {
    bw_buf b;
    bw_buf_init(&b, 64);
    bw_cql_put_int(&b, BW_CQL_ERR_WRITE_TIMEOUT);
    bw_cql_put_string(&b, "Operation timed out", 19);
    bw_cql_put_short(&b, BW_CQL_LOCAL_QUORUM);
    bw_cql_put_int(&b, 1);
    bw_cql_put_int(&b, 2);
    bw_cql_put_string(&b, "SIMPLE", 6);
    bw_cql_error e;
    CHECK_EQ(bw_cql_error_parse((const uint8_t *)b.data, b.len, &e), 0);
    CHECK(e.code == BW_CQL_ERR_WRITE_TIMEOUT && strcmp(e.message, "Operation timed out") == 0);
    CHECK(e.has_consistency && e.consistency == BW_CQL_LOCAL_QUORUM);
    CHECK(e.received == 1 && e.blockfor == 2);
    CHECK(e.has_write_type && strcmp(e.write_type, "SIMPLE") == 0);
    CHECK(bw_cql_error_retryable(e.code));
    for (size_t cut = 0; cut < b.len; cut++) {
        uint8_t *exact = malloc(cut ? cut : 1);
        memcpy(exact, b.data, cut);
        CHECK_EQ(bw_cql_error_parse(exact, cut, &e), -1);
        free(exact);
    }
    /* overloaded: nothing after the message */
    b.len = 0;
    bw_cql_put_int(&b, BW_CQL_ERR_OVERLOADED);
    bw_cql_put_string(&b, "busy", 4);
    CHECK_EQ(bw_cql_error_parse((const uint8_t *)b.data, b.len, &e), 0);
    CHECK(e.code == BW_CQL_ERR_OVERLOADED && !e.has_consistency);
    CHECK(strcmp(bw_cql_error_name(e.code), "Overloaded") == 0);
    CHECK(!bw_cql_error_retryable(BW_CQL_ERR_INVALID));
    /* a message longer than the field: cut, NUL-ended */
    b.len = 0;
    bw_cql_put_int(&b, BW_CQL_ERR_INVALID);
    static char big[3000];
    memset(big, 'm', sizeof big);
    bw_cql_put_string(&b, big, sizeof big);
    CHECK_EQ(bw_cql_error_parse((const uint8_t *)b.data, b.len, &e), 0);
    CHECK(e.message_cut && strlen(e.message) == BW_CQL_MESSAGE_MAX - 1);
    bw_buf_free(&b);
}

TEST(every_failure_has_its_status) {
    static const struct {
        bw_cql_failure failure;
        bw_status_kind kind;
    } map[] = {
        {BW_CQL_E_CONNECT, BW_STATUS_CONNECT},
        {BW_CQL_E_AUTH, BW_STATUS_CONNECT},
        {BW_CQL_E_TLS, BW_STATUS_TLS_SESSION},
        {BW_CQL_E_LOST, BW_STATUS_CONNECTION_LOST},
        {BW_CQL_E_INTERRUPTED, BW_STATUS_CONNECTION_LOST},
        {BW_CQL_E_TIMEOUT, BW_STATUS_TIMEOUT},
        {BW_CQL_E_PROTOCOL, BW_STATUS_PROTOCOL},
        {BW_CQL_E_CALLBACK, BW_STATUS_PROTOCOL},
        {BW_CQL_E_SERVER, BW_STATUS_SERVER},
        {BW_CQL_E_NOMEM, BW_STATUS_NO_MEMORY},
        {BW_CQL_E_INHERITED, BW_STATUS_INHERITED},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        bw_cql_status status;
        memset(&status, 0, sizeof status);
        status.kind = map[i].failure;
        status.sys_errno = ECONNRESET;
        snprintf(status.message, sizeof status.message, "127.0.0.1:9042: failure %zu", i);
        bw_status st;
        CHECK_EQ(bw_cql_status_get(&status, &st), -1);
        CHECK_EQ(st.kind, map[i].kind);
        CHECK_EQ(st.sys_errno, ECONNRESET);
        CHECK(strcmp(st.message, status.message) == 0);
    }
}

RUN_TESTS(handshake_without_authentication, handshake_with_sasl_plain,
          wrong_credentials_are_the_servers_error, missing_credentials_say_the_server_wants_them,
          connection_refused_names_the_server, pipeline_answers_out_of_order_within_the_window,
          large_requests_answered_while_being_written,
          unknown_stream_id_is_a_protocol_error_naming_every_request_out,
          wrong_version_byte_is_a_protocol_error, huge_length_is_refused_before_it_is_read,
          close_in_the_middle_of_a_frame_is_a_lost_connection,
          error_in_the_middle_ends_the_run_at_once, a_stalled_server_times_out,
          events_and_warnings_are_not_answers, retryable_errors_are_sent_again_with_the_same_bytes,
          retries_are_bounded, a_slow_but_moving_write_is_not_a_timeout,
          a_cancel_ends_a_connect_and_every_later_wait_at_once,
          error_bodies_parse_with_their_fields_and_every_cut_fails,
          every_failure_has_its_status)
