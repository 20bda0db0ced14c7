/* The zstd stream: pieces flushed so each decodes on arrival (by libzstd's own one-shot
   streaming decoder as the reference), one frame over the whole body, totals, no write after
   the end; and the bounded decoder: output never past its room, the end of the frame, bytes
   after it, a corrupt frame; a forked child's copy of a stream on several threads neither
   writes nor frees libzstd's context (whose workers are the parent's).
   sources: zstd_stream.c out_buffer.c fork_origin.c status.c
   libs: -DBW_HAVE_ZSTD -lzstd -lpthread
   requires: zstd.h */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <zstd.h>

#include "check.h"
#include "fork_child.h"
#include "zstd_stream.h"

/* Decodes in[0..n) with a fresh reference decoder: the bytes out, and whether the frame
   ended (ZSTD_decompressStream returned 0). */
static int reference_decode(const char *in, size_t n, char *out, size_t cap, size_t *out_len) {
    ZSTD_DStream *d = ZSTD_createDStream();
    ZSTD_inBuffer src = {in, n, 0};
    ZSTD_outBuffer dst = {out, cap, 0};
    size_t hint = 1;
    while (src.pos < src.size) {
        hint = ZSTD_decompressStream(d, &dst, &src);
        if (ZSTD_isError(hint))
            break;
    }
    ZSTD_freeDStream(d);
    *out_len = dst.pos;
    return !ZSTD_isError(hint) && hint == 0;
}

static char body[300000], plain[300000];

TEST(pieces_decode_on_arrival_and_end_one_frame) {
    bw_zstd_stream *zs = bw_zs_new(BW_ZSTD_LEVEL);
    CHECK(zs != NULL);
    if (zs == NULL)
        return;
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    size_t body_len = 0;
    unsigned long long state = 91;
    for (int round = 0; round < 6; round++) {
        size_t n = round == 3 ? 150000 : (size_t)round * 1000;
        for (size_t i = 0; i < n; i++) /* some repetition, some noise */
            body[body_len + i] = round == 3 ? (char)('a' + check_rand(&state) % 26) : (char)('0' + i % 7);
        CHECK_EQ(bw_zs_write(zs, body + body_len, n, round == 5, &out), BW_ZS_OK);
        body_len += n;
        size_t plain_len = 0;
        int ended = reference_decode(out.data, out.len, plain, sizeof plain, &plain_len);
        CHECK_EQ(plain_len, body_len); /* everything so far came out: flushed */
        CHECK(memcmp(plain, body, body_len) == 0);
        CHECK_EQ(ended, round == 5);
    }
    CHECK_EQ(bw_zs_write(zs, "x", 1, 0, &out), BW_ZS_ALREADY_FINISHED);
    CHECK_EQ(bw_zs_total_in(zs), body_len);
    CHECK_EQ(bw_zs_total_out(zs), out.len);
    bw_zs_free(zs);
    bw_buf_free(&out);
}

TEST(the_decoder_gives_at_most_its_room_and_stops_at_the_end) {
    bw_zstd_stream *zs = bw_zs_new(-3);
    bw_zstd_decoder *zd = bw_zsd_new();
    CHECK(zs != NULL && zd != NULL);
    if (zs == NULL || zd == NULL)
        return;
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    memset(body, 'z', sizeof body); /* one small frame that decodes to a lot */
    CHECK_EQ(bw_zs_write(zs, body, sizeof body, 1, &out), BW_ZS_OK);
    CHECK(out.len < 1000);
    CHECK_EQ(bw_buf_append(&out, "!", 1), 0); /* one byte after the end */
    size_t at = 0, total = 0, consumed, produced;
    int ended = 0, calls = 0;
    char room[4096];
    bw_zs_result rc = BW_ZS_OK;
    while (!ended && calls++ < 1000) {
        rc = bw_zsd_read(zd, out.data + at, out.len - at, &consumed, room, sizeof room, &produced, &ended);
        CHECK(produced <= sizeof room);
        CHECK(memcmp(room, body, produced) == 0);
        at += consumed;
        total += produced;
        if (rc != BW_ZS_OK)
            break;
    }
    CHECK(ended);
    CHECK_EQ(rc, BW_ZS_AFTER_END);
    CHECK_EQ(total, sizeof body);
    CHECK_EQ(at, out.len - 1); /* the byte after the end is not consumed */
    bw_zsd_free(zd);
    bw_zs_free(zs);
    bw_buf_free(&out);
}

TEST(a_corrupt_frame_fails_and_stays_failed) {
    bw_zstd_decoder *zd = bw_zsd_new();
    CHECK(zd != NULL);
    if (zd == NULL)
        return;
    char bad[24] = "\x28\xb5\x2f\xfd"; /* the magic, then a frame header no decoder takes */
    memset(bad + 4, 0xff, sizeof bad - 4);
    size_t consumed, produced;
    int ended;
    char room[64];
    CHECK_EQ(bw_zsd_read(zd, bad, sizeof bad, &consumed, room, sizeof room, &produced, &ended),
             BW_ZS_FAILED);
    CHECK(strlen(bw_zsd_error_text(zd)) > 0);
    CHECK_EQ(bw_zsd_read(zd, "", 0, &consumed, room, sizeof room, &produced, &ended), BW_ZS_FAILED);
    bw_zsd_free(zd);
    bw_zs_free(NULL);
    bw_zsd_free(NULL);
}

/* In the child: the stream refuses to write and frees without joining the workers. */
static int child_writes_and_frees_a_copy(void *zs) {
    bw_buf out;
    if (bw_buf_init(&out, 0) < 0)
        return 1;
    int rc = bw_zs_write(zs, "abc", 3, 0, &out) == BW_ZS_INHERITED && out.len == 0 &&
                     bw_zs_inherited(zs) ? 0 : 2;
    bw_buf_free(&out);
    bw_zs_free(zs);
    return rc;
}

static char big[3 << 20], big_plain[3 << 20];

TEST(a_forked_child_leaves_the_workers_alone) {
    bw_zstd_stream *zs = bw_zs_new_parallel(BW_ZSTD_LEVEL, 2);
    CHECK(zs != NULL);
    if (zs == NULL)
        return;
    unsigned long long state = 7;
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + check_rand(&state) % 20);
    bw_buf out;
    CHECK_EQ(bw_buf_init(&out, 0), 0);
    size_t half = sizeof big / 2;
    CHECK_EQ(bw_zs_write(zs, big, half, 0, &out), BW_ZS_OK); /* the workers run now */
    CHECK(!bw_zs_inherited(zs));
    CHECK_EQ(run_in_child(child_writes_and_frees_a_copy, zs, 5000), 0);
    CHECK_EQ(bw_zs_write(zs, big + half, sizeof big - half, 1, &out), BW_ZS_OK);
    size_t plain_len = 0;
    CHECK(reference_decode(out.data, out.len, big_plain, sizeof big_plain, &plain_len));
    CHECK(plain_len == sizeof big && memcmp(big_plain, big, sizeof big) == 0);
    bw_buf_free(&out);
    bw_zs_free(zs);
}

TEST(failures_as_statuses) {
    bw_status st;
    bw_zstd_decoder *zd = bw_zsd_new();
    CHECK(zd != NULL);
    char out[64];
    size_t consumed, produced;
    int ended;
    const char junk[] = "this is not a zstd frame at all";
    CHECK(bw_zsd_read(zd, junk, sizeof junk, &consumed, out, sizeof out, &produced, &ended) !=
          BW_ZS_OK);
    CHECK_EQ(bw_zsd_status(zd, &st), -1);
    CHECK_EQ(st.kind, BW_STATUS_INVALID);
    CHECK(strncmp(st.message, "corrupt zstd frame: ", 20) == 0 && strlen(st.message) > 20);
    bw_zsd_free(zd);
    bw_zs_status(BW_ZS_NO_MEMORY, NULL, &st);
    CHECK_EQ(st.kind, BW_STATUS_NO_MEMORY);
    bw_zs_status(BW_ZS_INHERITED, NULL, &st);
    CHECK_EQ(st.kind, BW_STATUS_INHERITED);
    bw_zstd_stream *zs = bw_zs_new(3);
    CHECK(zs != NULL);
    bw_zs_status(BW_ZS_FAILED, zs, &st);
    CHECK_EQ(st.kind, BW_STATUS_FAILED);
    CHECK(strncmp(st.message, "the zstd stream failed: ", 24) == 0);
    bw_zs_free(zs);
}

RUN_TESTS(pieces_decode_on_arrival_and_end_one_frame, the_decoder_gives_at_most_its_room_and_stops_at_the_end,
          a_corrupt_frame_fails_and_stays_failed, a_forked_child_leaves_the_workers_alone,
          failures_as_statuses)
