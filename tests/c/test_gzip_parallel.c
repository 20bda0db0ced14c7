/* The parallel gzip stream (blocks deflated at once, each primed with the 32 KiB before it
   and sync-flushed, joined into one member): zlib's inflate, as the reference, gives back
   exactly the input for bodies around the 32 KiB and 1 MiB boundaries, written whole or in
   pieces, on 1 to 4 threads, with both backends; each piece decodes on arrival; the CRC
   combiner agrees with the CRC of the whole; the dictionary is really used; a forked child
   neither writes through the parent's helpers nor waits for them when it frees its copy.
   sources: gzip_stream.c deflate_commas.c out_buffer.c fork_origin.c status.c
   libs: -DBW_HAVE_ISAL -lisal -lz -lpthread
   requires: isa-l/igzip_lib.h */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <zlib.h>

#include "check.h"
#include "fork_child.h"
#include "gzip_stream.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* JSON-like float text: compressible, but not trivially. */
static void fill_body(unsigned char *body, size_t n, unsigned long long seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r = (unsigned)(seed >> 59);
        body[i] = r < 10 ? (unsigned char)('0' + r) : r < 13 ? ',' : r < 15 ? '.' : '-';
    }
}

typedef struct {
    z_stream z;
    unsigned char *plain;
    size_t cap, len;
    int status;
} gunzipper;

static int gunzip_start(gunzipper *g, size_t cap) {
    memset(g, 0, sizeof *g);
    g->plain = malloc(cap + 1);
    g->cap = cap;
    return g->plain != NULL && inflateInit2(&g->z, 15 + 16) == Z_OK ? 0 : -1;
}

/* Feeds more of the member; everything that can be decoded so far lands in plain. */
static void gunzip_feed(gunzipper *g, const char *in, size_t n) {
    g->z.next_in = (Bytef *)in;
    g->z.avail_in = (uInt)n;
    g->z.next_out = g->plain + g->len;
    g->z.avail_out = (uInt)(g->cap + 1 - g->len);
    g->status = inflate(&g->z, Z_SYNC_FLUSH);
    g->len = (size_t)(g->z.next_out - g->plain);
}

static void gunzip_end(gunzipper *g) {
    inflateEnd(&g->z);
    free(g->plain);
}

/* Writes body[0..n) in pieces of `piece` bytes (0: whole) through a parallel stream and
   checks each piece decodes on arrival and the member ends with exactly the body. */
static void round_trip(bw_gz_backend backend, int threads, const unsigned char *body, size_t n,
                       size_t piece) {
    bw_gzip_stream *gz = bw_gz_new_parallel(backend, threads);
    CHECK(gz != NULL);
    if (gz == NULL)
        return;
    CHECK_EQ(bw_gz_threads(gz), threads);
    gunzipper g;
    CHECK_EQ(gunzip_start(&g, n), 0);
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    size_t done = 0, wire = 0;
    do {
        size_t step = piece == 0 || n - done < piece ? n - done : piece;
        int last = done + step == n;
        out.len = 0;
        CHECK_EQ(bw_gz_write(gz, body + done, step, last, &out), BW_GZ_OK);
        wire += out.len;
        done += step;
        gunzip_feed(&g, out.data, out.len);
        CHECK_EQ(g.len, done); /* everything so far decodes on arrival */
        CHECK_EQ(g.z.avail_in, 0);
        CHECK_EQ(g.status, last ? Z_STREAM_END : (out.len ? Z_OK : Z_BUF_ERROR));
    } while (done < n);
    CHECK(g.len == n && (n == 0 || memcmp(g.plain, body, n) == 0));
    CHECK_EQ(bw_gz_total_in(gz), n);
    CHECK_EQ(bw_gz_total_out(gz), wire);
    CHECK(bw_gz_write(gz, "x", 1, 0, &out) == BW_GZ_ALREADY_FINISHED);
    gunzip_end(&g);
    bw_buf_free(&out);
    bw_gz_free(gz);
}

static void every_size_and_piece(bw_gz_backend backend) {
    static const size_t sizes[] = {0, 1, 32 * KIB - 1, 32 * KIB, 32 * KIB + 1, 64 * KIB,
                                   64 * KIB + 1, 128 * KIB + 7, MIB - 1, MIB, MIB + 1,
                                   3 * MIB + 5};
    static const size_t pieces[] = {0, 1000, 32 * KIB, MIB};
    unsigned char *body = malloc(3 * MIB + 5);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    fill_body(body, 3 * MIB + 5, 42);
    for (int threads = 1; threads <= 4; threads++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++)
                if (pieces[p] == 0 || sizes[s] / pieces[p] < 200) /* not 3000 one-byte pieces */
                    round_trip(backend, threads, body, sizes[s], pieces[p]);
    free(body);
}

TEST(zlib_blocks_inflate_to_the_body) { every_size_and_piece(BW_GZ_ZLIB); }

TEST(isal_blocks_inflate_to_the_body) { every_size_and_piece(BW_GZ_ISAL); }

TEST(the_crc_combiner_agrees_with_the_whole) {
    unsigned char body[100000];
    fill_body(body, sizeof body, 7);
    unsigned long whole = crc32(0, body, sizeof body);
    static const size_t cuts[] = {0, 1, 32768, 65536, 99999, 100000};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        size_t cut = cuts[i];
        unsigned long head = crc32(0, body, (uInt)cut);
        unsigned long tail = crc32(0, body + cut, (uInt)(sizeof body - cut));
        CHECK_EQ(bw_gz_crc_combine(head, tail, sizeof body - cut), whole);
    }
}

TEST(header_and_end_alone_are_an_empty_member) {
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    CHECK_EQ(bw_gz_put_header(&out), 0);
    CHECK_EQ(bw_gz_put_end(&out, 0, 0), 0);
    CHECK_EQ(out.len, BW_GZ_HEADER_LEN + BW_GZ_END_LEN);
    gunzipper g;
    CHECK_EQ(gunzip_start(&g, 0), 0);
    gunzip_feed(&g, out.data, out.len);
    CHECK_EQ(g.status, Z_STREAM_END);
    CHECK_EQ(g.len, 0);
    gunzip_end(&g);
    bw_buf_free(&out);
}

static void random_run(unsigned char *run, size_t n, unsigned long long seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        run[i] = (unsigned char)(seed >> 56);
    }
}

/* A 16 KiB incompressible run repeated over 1 MiB: four blocks deflated apart would each
   carry it as literals (eight with two writes); primed with the input before them, only the
   first does. zlib: ISA-L's level 1 finds too few of these matches even in one stream. */
TEST(each_block_is_primed_with_the_input_before_it) {
    unsigned char *body = malloc(MIB);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    random_run(body, 16 * KIB, 3);
    for (size_t at = 16 * KIB; at < MIB; at += 16 * KIB)
        memcpy(body + at, body, 16 * KIB);
    bw_gzip_stream *gz = bw_gz_new_parallel(BW_GZ_ZLIB, 4);
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    CHECK(gz != NULL);
    if (gz != NULL) {
        CHECK_EQ(bw_gz_write(gz, body, MIB / 2, 0, &out), BW_GZ_OK);
        CHECK_EQ(bw_gz_write(gz, body + MIB / 2, MIB / 2, 1, &out), BW_GZ_OK);
        CHECK(out.len < 48 * KIB); /* apart: over 128 KiB */
    }
    bw_gz_free(gz);
    bw_buf_free(&out);
    free(body);
}

/* The next write's first block is primed with the tail of the writes before it (kept by the
   stream: the caller's buffer may be gone): the same incompressible run again costs little. */
static void history_primes_the_next_write(bw_gz_backend backend) {
    unsigned char run[16 * KIB];
    random_run(run, sizeof run, 5);
    bw_gzip_stream *gz = bw_gz_new_parallel(backend, 2);
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    CHECK(gz != NULL);
    if (gz != NULL) {
        CHECK_EQ(bw_gz_write(gz, run, sizeof run, 0, &out), BW_GZ_OK);
        size_t first = out.len;
        CHECK(first > sizeof run);
        unsigned char copy[sizeof run];
        memcpy(copy, run, sizeof run);
        memset(run, 0, sizeof run);
        CHECK_EQ(bw_gz_write(gz, copy, sizeof copy, 1, &out), BW_GZ_OK);
        CHECK(out.len - first < 2 * KIB);
    }
    bw_gz_free(gz);
    bw_buf_free(&out);
}

TEST(the_next_write_is_primed_with_the_last_32_kib) {
    history_primes_the_next_write(BW_GZ_ZLIB);
    history_primes_the_next_write(BW_GZ_ISAL);
}

TEST(threads_are_clamped_and_a_missing_backend_refused) {
    bw_gzip_stream *gz = bw_gz_new_parallel(BW_GZ_ZLIB, 0);
    CHECK(gz != NULL && bw_gz_threads(gz) == 1);
    bw_gz_free(gz);
    gz = bw_gz_new_parallel(BW_GZ_ZLIB, 1000);
    CHECK(gz != NULL && bw_gz_threads(gz) == BW_GZ_THREADS_MAX);
    bw_gz_free(gz);
    CHECK(bw_gz_new_parallel((bw_gz_backend)99, 2) == NULL);
    gz = bw_gz_new(BW_GZ_ZLIB);
    CHECK(gz != NULL && bw_gz_threads(gz) == 1);
    bw_gz_free(gz);
}

/* In the child: the stream refuses to write (its helpers are the parent's) and frees without
   joining them. */
static int child_writes_and_frees_a_copy(void *gz) {
    bw_buf out;
    if (bw_buf_init(&out, 0) < 0)
        return 1;
    int rc = bw_gz_write(gz, "abc", 3, 0, &out) == BW_GZ_INHERITED && out.len == 0 &&
                     bw_gz_inherited(gz) ? 0 : 2;
    bw_buf_free(&out);
    bw_gz_free(gz);
    return rc;
}

static void a_forked_child_leaves_the_helpers_alone(bw_gz_backend backend) {
    size_t n = 3 * MIB;
    unsigned char *body = malloc(n);
    CHECK(body != NULL);
    if (body == NULL)
        return;
    fill_body(body, n, 5);
    bw_gzip_stream *gz = bw_gz_new_parallel(backend, 3);
    bw_buf out;
    CHECK(gz != NULL && bw_buf_init(&out, 0) == 0);
    CHECK_EQ(bw_gz_write(gz, body, n / 2, 0, &out), BW_GZ_OK); /* the helpers run now */
    CHECK(!bw_gz_inherited(gz));
    CHECK_EQ(run_in_child(child_writes_and_frees_a_copy, gz, 5000), 0);
    CHECK_EQ(bw_gz_write(gz, body + n / 2, n - n / 2, 1, &out), BW_GZ_OK); /* the parent goes on */
    gunzipper g;
    CHECK_EQ(gunzip_start(&g, n), 0);
    gunzip_feed(&g, out.data, out.len);
    CHECK_EQ(g.status, Z_STREAM_END);
    CHECK(g.len == n && memcmp(g.plain, body, n) == 0);
    gunzip_end(&g);
    bw_buf_free(&out);
    bw_gz_free(gz);
    free(body);
}

TEST(a_forked_child_leaves_the_helpers_alone_zlib) { a_forked_child_leaves_the_helpers_alone(BW_GZ_ZLIB); }

TEST(a_forked_child_leaves_the_helpers_alone_isal) { a_forked_child_leaves_the_helpers_alone(BW_GZ_ISAL); }

RUN_TESTS(zlib_blocks_inflate_to_the_body, isal_blocks_inflate_to_the_body,
          the_crc_combiner_agrees_with_the_whole, header_and_end_alone_are_an_empty_member,
          each_block_is_primed_with_the_input_before_it,
          the_next_write_is_primed_with_the_last_32_kib,
          threads_are_clamped_and_a_missing_backend_refused,
          a_forked_child_leaves_the_helpers_alone_zlib, a_forked_child_leaves_the_helpers_alone_isal)
