/* The gzip stream (zlib backend): pieces sync-flushed so each decodes on arrival, one member
   over the whole body, totals, and no write after the end.
   sources: gzip_stream.c deflate_commas.c out_buffer.c fork_origin.c status.c
   libs: -lz -lpthread */
#include <stdlib.h>
#include <zlib.h>

#include "check.h"
#include "gzip_stream.h"

/* Inflates everything in `in` (a gzip member, possibly unfinished) into out; returns the
   zlib status of the last call: Z_STREAM_END for a complete member, Z_OK/Z_BUF_ERROR when
   the input ran out at a flush point. */
static int gunzip(const char *in, size_t n, char *out, size_t cap, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return Z_STREAM_ERROR;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    *out_len = cap - z.avail_out;
    inflateEnd(&z);
    return rc;
}

/* A zlib stream and its empty output buffer; NULL (a failed CHECK) when it was not made. */
static bw_gzip_stream *zlib_stream(bw_buf *out) {
    bw_gzip_stream *gz = bw_gz_new(BW_GZ_ZLIB);
    CHECK(gz != NULL);
    if (gz != NULL)
        CHECK_EQ(bw_buf_init(out, 0), 0);
    return gz;
}

TEST(pieces_decode_on_arrival_and_end_one_member) {
    bw_buf out;
    bw_gzip_stream *gz = zlib_stream(&out);
    if (gz == NULL)
        return;
    static char body[200000], plain[200000];
    size_t body_len = 0;
    unsigned long long state = 77;
    const char *pieces[] = {"[", "{\"Id\":\"a\"}", ",", "", "]"};
    for (int round = 0; round < 5; round++) {
        const char *piece = pieces[round];
        size_t n = strlen(piece);
        if (round == 3) { /* a large, barely compressible piece */
            for (size_t i = 0; i < 100000; i++)
                body[body_len + i] = (char)('a' + check_rand(&state) % 26);
            piece = body + body_len;
            n = 100000;
        } else {
            memcpy(body + body_len, piece, n);
        }
        body_len += n;
        CHECK_EQ(bw_gz_write(gz, piece, n, round == 4, &out), 0);
        size_t plain_len = 0;
        int rc = gunzip(out.data, out.len, plain, sizeof plain, &plain_len);
        /* everything written so far decodes now, not only after the end */
        CHECK(rc == (round == 4 ? Z_STREAM_END : Z_OK));
        CHECK(plain_len == body_len && memcmp(plain, body, body_len) == 0);
    }
    CHECK_EQ(bw_gz_total_in(gz), body_len);
    CHECK_EQ(bw_gz_total_out(gz), out.len);
    size_t len_before = out.len;
    CHECK(bw_gz_write(gz, "x", 1, 0, &out) != 0); /* the member has ended */
    CHECK_EQ(out.len, len_before);
    CHECK_EQ(bw_gz_total_in(gz), body_len);
    bw_gz_free(gz);
    bw_buf_free(&out);
}

TEST(an_empty_body_is_a_valid_member) {
    bw_buf out;
    bw_gzip_stream *gz = zlib_stream(&out);
    if (gz == NULL)
        return;
    CHECK_EQ(bw_gz_write(gz, "", 0, 1, &out), 0);
    char plain[8];
    size_t plain_len = 1;
    CHECK_EQ(gunzip(out.data, out.len, plain, sizeof plain, &plain_len), Z_STREAM_END);
    CHECK_EQ(plain_len, 0);
    bw_gz_free(gz);
    bw_buf_free(&out);
}

TEST(a_backend_not_compiled_in_is_refused) {
    if (!bw_gz_have_isal())
        CHECK(bw_gz_new(BW_GZ_ISAL) == NULL);
    CHECK(bw_gz_new((bw_gz_backend)99) == NULL);
    bw_gz_free(NULL);
}

TEST(a_failed_write_as_a_status) {
    bw_status st;
    CHECK_EQ(bw_gz_status(BW_GZ_NO_MEMORY, &st), -1);
    CHECK_EQ(st.kind, BW_STATUS_NO_MEMORY);
    bw_gz_status(BW_GZ_COMPRESSOR_FAILED, &st);
    CHECK_EQ(st.kind, BW_STATUS_FAILED);
    CHECK(strcmp(st.message, "the deflate stream failed") == 0);
}

RUN_TESTS(pieces_decode_on_arrival_and_end_one_member, an_empty_body_is_a_valid_member,
          a_backend_not_compiled_in_is_refused,
          a_failed_write_as_a_status)
