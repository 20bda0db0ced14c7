/* Sending on a socket: every byte of the gathered entries arrives in order (empty entries
   anywhere, more entries than one sendmsg takes, partial sends on a non-blocking socket with
   a small send buffer), the timeout when the peer reads nothing (and a timeout too large for
   poll's int is not cut short), a gone peer is EPIPE / ECONNRESET and never SIGPIPE, a bad
   descriptor its errno, signals during a wait, the early-answer check, which never takes
   the answer's bytes, and a watching write, which an answer stops while it waits for room.
   sources: socket_send.c
   libs: -lpthread */
#define _GNU_SOURCE /* pipe2, SA_* flags */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "socket_send.h"

/* A connected pair; fds[0] non-blocking with a small send buffer when `small`. */
static void make_pair(int fds[2], int nonblocking, int small) {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    if (small) {
        int size = 4096;
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    if (nonblocking)
        fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
}

/* A reader thread: after `delay_ms`, reads until end of stream into `got` (at most cap),
   `pause_ms` between reads of at most `step` bytes. */
typedef struct {
    int fd;
    long delay_ms, pause_ms;
    size_t step, cap, len;
    char *got;
    pthread_t thread;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    sleep_ms(r->delay_ms);
    for (;;) {
        size_t want = r->cap - r->len < r->step ? r->cap - r->len : r->step;
        ssize_t n = read(r->fd, r->got + r->len, want ? want : 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        r->len += (size_t)n;
        if (r->pause_ms)
            sleep_ms(r->pause_ms);
    }
    return NULL;
}

static void start_reader(reader *r, int fd, long delay_ms, long pause_ms, size_t step, size_t cap) {
    r->fd = fd;
    r->delay_ms = delay_ms;
    r->pause_ms = pause_ms;
    r->step = step;
    r->cap = cap;
    r->len = 0;
    r->got = malloc(cap + 1);
    pthread_create(&r->thread, NULL, read_all, r);
}

static void join_reader(reader *r) { pthread_join(r->thread, NULL); }

/* Random bytes cut into `count` entries of random lengths (some empty), pointing into data. */
static void cut(struct iovec *iov, int count, char *data, size_t total, unsigned long long *rng) {
    size_t used = 0;
    for (int i = 0; i < count; i++) {
        size_t left = total - used;
        size_t n = i == count - 1 ? left : (check_rand(rng) % 4 == 0 ? 0 : check_rand(rng) % (2 * total / (size_t)count + 1));
        if (n > left)
            n = left;
        iov[i].iov_base = data + used;
        iov[i].iov_len = n;
        used += n;
    }
}

TEST(every_byte_arrives_in_order_through_partial_sends) {
    enum { TOTAL = 1 << 21, ENTRIES = 300 };
    char *data = malloc(TOTAL);
    unsigned long long rng = 7;
    for (size_t i = 0; i < TOTAL; i++)
        data[i] = (char)check_rand(&rng);
    for (int nonblocking = 0; nonblocking <= 1; nonblocking++) {
        int fds[2];
        make_pair(fds, nonblocking, 1);
        struct iovec iov[ENTRIES];
        cut(iov, ENTRIES, data, TOTAL, &rng);
        reader r;
        start_reader(&r, fds[1], 0, 0, 777, TOTAL); /* small reads: many partial sends */
        CHECK_EQ(bw_send_all(fds[0], iov, ENTRIES, 10000, 0), 0);
        close(fds[0]);
        join_reader(&r);
        CHECK_EQ(r.len, TOTAL);
        CHECK(memcmp(r.got, data, TOTAL) == 0);
        free(r.got);
        close(fds[1]);
    }
    free(data);
}

TEST(empty_entries_anywhere_and_nothing_to_send) {
    int fds[2];
    make_pair(fds, 1, 0);
    char a[] = "ab", b[] = "cde";
    struct iovec iov[] = {{a, 0}, {a, 2}, {b, 0}, {b, 0}, {b, 3}, {a, 0}};
    CHECK_EQ(bw_send_all(fds[0], iov, 6, 1000, 0), 0);
    char got[8] = {0};
    CHECK_EQ(read(fds[1], got, sizeof got), 5);
    CHECK_BYTES(got, 5, "abcde");
    /* nothing to send makes no call at all: even a closed descriptor is fine */
    struct iovec none[] = {{a, 0}, {b, 0}};
    CHECK_EQ(bw_send_all(-1, none, 2, 1000, 0), 0);
    CHECK_EQ(bw_send_all(-1, none, 0, 1000, 0), 0);
    close(fds[0]);
    close(fds[1]);
}

TEST(more_entries_than_one_sendmsg_takes) {
    /* IOV_MAX entries is what one sendmsg accepts: more must still all be sent */
    enum { ENTRIES = 3 * IOV_MAX + 7 };
    static struct iovec iov[ENTRIES];
    static char data[ENTRIES * 3];
    for (int i = 0; i < ENTRIES * 3; i++)
        data[i] = (char)('a' + i % 26);
    for (int i = 0; i < ENTRIES; i++) {
        iov[i].iov_base = data + 3 * i;
        iov[i].iov_len = 3;
    }
    int fds[2];
    make_pair(fds, 1, 0);
    reader r;
    start_reader(&r, fds[1], 0, 0, 1 << 16, sizeof data);
    CHECK_EQ(bw_send_all(fds[0], iov, ENTRIES, 5000, 0), 0);
    close(fds[0]);
    join_reader(&r);
    CHECK_EQ(r.len, sizeof data);
    CHECK(r.len != sizeof data || memcmp(r.got, data, sizeof data) == 0);
    free(r.got);
    close(fds[1]);
}

TEST(a_peer_that_reads_nothing_times_out) {
    int fds[2];
    make_pair(fds, 1, 1);
    enum { TOTAL = 1 << 20 };
    char *data = calloc(1, TOTAL);
    struct iovec iov = {data, TOTAL};
    double start = now_ms();
    CHECK_EQ(bw_send_all(fds[0], &iov, 1, 150, 0), ETIMEDOUT);
    double took = now_ms() - start;
    CHECK(took >= 140 && took < 5000);
    CHECK(iov.iov_len < TOTAL); /* the entry says what is left */
    free(data);
    close(fds[0]);
    close(fds[1]);
}

TEST(a_timeout_past_what_poll_takes_is_not_cut_short) {
    /* 2^32 + 1 ms: cut to poll's int it would be 1 ms. The reader starts after 300 ms. */
    int fds[2];
    make_pair(fds, 1, 1);
    enum { TOTAL = 1 << 20 };
    char *data = calloc(1, TOTAL);
    struct iovec iov = {data, TOTAL};
    reader r;
    start_reader(&r, fds[1], 300, 0, 1 << 16, TOTAL);
    long long huge = (1LL << 32) + 1;
    CHECK_EQ(bw_send_all(fds[0], &iov, 1, (long)huge, 0), 0);
    close(fds[0]);
    join_reader(&r);
    CHECK_EQ(r.len, TOTAL);
    free(r.got);
    free(data);
    close(fds[1]);
}

TEST(a_gone_peer_is_epipe_or_econnreset_never_sigpipe) {
    /* SIGPIPE at its default would kill this process: sending must not raise it */
    signal(SIGPIPE, SIG_DFL);
    char data[4096] = {0};
    int fds[2];
    make_pair(fds, 1, 0);
    close(fds[1]);
    struct iovec iov = {data, sizeof data};
    CHECK_EQ(bw_send_all(fds[0], &iov, 1, 1000, 0), EPIPE);
    close(fds[0]);
    /* TCP on loopback: a peer that closed with unread data resets the connection */
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    CHECK_EQ(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    CHECK_EQ(listen(listener, 1), 0);
    getsockname(listener, (struct sockaddr *)&addr, &len);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(connect(client, (struct sockaddr *)&addr, sizeof addr), 0);
    int server = accept(listener, NULL, NULL);
    iov.iov_base = data;
    iov.iov_len = sizeof data;
    CHECK_EQ(bw_send_all(client, &iov, 1, 1000, 0), 0);
    sleep_ms(50);
    close(server); /* unread data: the kernel answers with a reset */
    sleep_ms(50);
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++) {
        iov.iov_base = data;
        iov.iov_len = sizeof data;
        rc = bw_send_all(client, &iov, 1, 1000, 0);
    }
    CHECK(rc == EPIPE || rc == ECONNRESET);
    close(client);
    close(listener);
}

TEST(not_a_socket_is_its_errno) {
    char data[] = "x";
    struct iovec iov = {data, 1};
    CHECK_EQ(bw_send_all(-1, &iov, 1, 100, 0), EBADF);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    iov.iov_base = data;
    iov.iov_len = 1;
    CHECK_EQ(bw_send_all(p[1], &iov, 1, 100, 0), ENOTSOCK);
    close(p[0]);
    close(p[1]);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

TEST(signals_during_a_wait_do_not_end_it) {
    /* a timer signal every 5 ms, without SA_RESTART: each wait and send it interrupts goes
       on; the reader starts after 200 ms */
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 5000}, {0, 5000}}, off = {{0, 0}, {0, 0}};
    enum { TOTAL = 1 << 20 };
    char *data = calloc(1, TOTAL);
    for (int nonblocking = 0; nonblocking <= 1; nonblocking++) {
        int fds[2];
        make_pair(fds, nonblocking, 1);
        reader r;
        start_reader(&r, fds[1], 200, 0, 1 << 16, TOTAL);
        struct iovec iov = {data, TOTAL};
        alarms = 0;
        setitimer(ITIMER_REAL, &every, NULL);
        CHECK_EQ(bw_send_all(fds[0], &iov, 1, 5000, 0), 0);
        setitimer(ITIMER_REAL, &off, NULL);
        CHECK(alarms > 0);
        close(fds[0]);
        join_reader(&r);
        CHECK_EQ(r.len, TOTAL);
        free(r.got);
        close(fds[1]);
    }
    free(data);
    signal(SIGALRM, SIG_DFL);
}

TEST(the_early_answer_check_never_takes_the_answer) {
    int fds[2];
    make_pair(fds, 1, 0);
    CHECK_EQ(bw_peer_answered(fds[0]), 0);
    CHECK_EQ(bw_peer_answered(fds[0]), 0);
    CHECK_EQ(write(fds[1], "HTTP/1.1 4", 10), 10);
    CHECK_EQ(bw_peer_answered(fds[0]), 1);
    CHECK_EQ(bw_peer_answered(fds[0]), 1);
    char got[16];
    CHECK_EQ(read(fds[0], got, sizeof got), 10); /* every byte still there */
    CHECK_BYTES(got, 10, "HTTP/1.1 4");
    CHECK_EQ(bw_peer_answered(fds[0]), 0);
    /* the end of the stream is an answer too: the server gave up on the request */
    close(fds[1]);
    CHECK_EQ(bw_peer_answered(fds[0]), 1);
    close(fds[0]);
}

TEST(a_watching_write_stops_when_the_peer_answers_while_it_waits_for_room) {
    int fds[2];
    make_pair(fds, 1, 1);
    enum { TOTAL = 1 << 20 };
    char *data = calloc(1, TOTAL);
    CHECK_EQ(write(fds[1], "HTTP/1.1 2", 10), 10); /* the peer answers and reads nothing */
    struct iovec iov = {data, TOTAL};
    double start = now_ms();
    CHECK_EQ(bw_send_all(fds[0], &iov, 1, 5000, 1), BW_SEND_ANSWERED);
    CHECK(now_ms() - start < 2500);
    CHECK(iov.iov_len > 0 && iov.iov_len < TOTAL); /* what fitted went, the rest is left */
    /* not watching, the same write waits for room until its timeout */
    CHECK_EQ(bw_send_all(fds[0], &iov, 1, 150, 0), ETIMEDOUT);
    char got[16];
    CHECK_EQ(read(fds[0], got, sizeof got), 10); /* the answer untouched */
    CHECK_BYTES(got, 10, "HTTP/1.1 2");
    free(data);
    close(fds[0]);
    close(fds[1]);
}

RUN_TESTS(every_byte_arrives_in_order_through_partial_sends,
          empty_entries_anywhere_and_nothing_to_send, more_entries_than_one_sendmsg_takes,
          a_peer_that_reads_nothing_times_out, a_timeout_past_what_poll_takes_is_not_cut_short,
          a_gone_peer_is_epipe_or_econnreset_never_sigpipe, not_a_socket_is_its_errno,
          signals_during_a_wait_do_not_end_it, the_early_answer_check_never_takes_the_answer,
          a_watching_write_stops_when_the_peer_answers_while_it_waits_for_room)
