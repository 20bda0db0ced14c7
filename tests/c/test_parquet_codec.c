/* The codecs of Parquet pages: the uncompressed size a header claims checked against what the
   compressed bytes can hold, codec by codec, before anything is allocated; gzip, zstd and
   snappy pages decompressed to exactly their size, a corrupt or short one refused with its
   reason; codecs this build does not read not covered; the codec table.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -DBW_HAVE_ZSTD -lzstd -lsnappy -lz
   requires: zstd.h snappy-c.h */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "check.h"
#include "parquet_internal.h"

static uint8_t plain[4096], packed[8192];

static void fill(void) {
    for (size_t i = 0; i < sizeof plain; i++)
        plain[i] = (uint8_t)(i % 7 == 0 ? i : 'a');
}

static size_t gzip(void) {
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    z.next_in = plain;
    z.avail_in = sizeof plain;
    z.next_out = packed;
    z.avail_out = sizeof packed;
    deflate(&z, Z_FINISH);
    size_t n = z.total_out;
    deflateEnd(&z);
    return n;
}

/* Checks, then decompresses, n bytes of `packed` with codec into exactly `size` bytes, as the
   reader does (an uncompressed page is only checked: its bytes are used where they are). */
static int round_trip(int codec, size_t n, size_t size, char *error) {
    uint8_t *in = malloc(n), *out = malloc(size ? size : 1);
    memcpy(in, packed, n);
    int rc = bw_pq_check_plain_size(codec, in, n, size, error);
    if (rc == BW_PAGES_OK && codec != BW_PQ_UNCOMPRESSED)
        rc = bw_pq_decompress(codec, in, n, out, size, error);
    if (rc == BW_PAGES_OK && size == sizeof plain)
        CHECK(memcmp(out, plain, size) == 0);
    free(in);
    free(out);
    return rc;
}

TEST(each_codec_decompresses_exactly_its_size) {
    fill();
    char error[BW_PAGES_ERROR_SIZE] = "";
    size_t n = gzip();
    CHECK_EQ(round_trip(BW_PQ_GZIP, n, sizeof plain, error), BW_PAGES_OK);
    CHECK_EQ(round_trip(BW_PQ_GZIP, n, sizeof plain - 1, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "gzip page does not inflate to its 4095 bytes");
    n = ZSTD_compress(packed, sizeof packed, plain, sizeof plain, 1);
    CHECK_EQ(round_trip(BW_PQ_ZSTD, n, sizeof plain, error), BW_PAGES_OK);
    CHECK_EQ(round_trip(BW_PQ_ZSTD, n, sizeof plain + 1, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "zstd page holds 4096 bytes, its header says 4097");
    size_t snappy_n = sizeof packed;
    snappy_compress((const char *)plain, sizeof plain, (char *)packed, &snappy_n);
    CHECK_EQ(round_trip(BW_PQ_SNAPPY, snappy_n, sizeof plain, error), BW_PAGES_OK);
    CHECK_EQ(round_trip(BW_PQ_SNAPPY, snappy_n, 10, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error),
                "snappy page does not decompress to the 10 bytes its header says");
    memcpy(packed, plain, 100);
    CHECK_EQ(round_trip(BW_PQ_UNCOMPRESSED, 100, 100, error), BW_PAGES_OK);
    CHECK_EQ(round_trip(BW_PQ_UNCOMPRESSED, 100, 101, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "uncompressed page of 100 bytes says 101");
}

TEST(a_claimed_size_past_what_the_bytes_hold_is_refused_before_decompressing) {
    char error[BW_PAGES_ERROR_SIZE] = "";
    static const uint8_t ten[10] = {0};
    CHECK_EQ(bw_pq_check_plain_size(BW_PQ_GZIP, ten, 10, 10320, error), BW_PAGES_OK);
    CHECK_EQ(bw_pq_check_plain_size(BW_PQ_GZIP, ten, 10, 10321, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error),
                "gzip page of 10 bytes cannot inflate to the 10321 its header says");
    CHECK_EQ(bw_pq_check_plain_size(BW_PQ_ZSTD, ten, 10, 5, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "zstd page does not start with a zstd frame");
    /* a frame that does not say its size: the ratio bounds it */
    static const uint8_t frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x01, 0x00, 0x00};
    CHECK_EQ(bw_pq_check_plain_size(BW_PQ_ZSTD, frame, sizeof frame, 9 * 32768, error),
             BW_PAGES_OK);
    CHECK_EQ(bw_pq_check_plain_size(BW_PQ_ZSTD, frame, sizeof frame, 9 * 32768 + 1, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error),
                "zstd page of 9 bytes cannot decompress to the 294913 its header says");
    /* corrupt bytes of the right claimed size */
    CHECK_EQ(bw_pq_decompress(BW_PQ_GZIP, ten, 10, packed, 5, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "gzip page does not inflate to its 5 bytes");
    static const uint8_t bad_snappy[] = {0x05, 0x7f};
    CHECK_EQ(bw_pq_decompress(BW_PQ_SNAPPY, bad_snappy, 2, packed, 5, error),
             BW_PAGES_MALFORMED);
    CHECK(strncmp(error, "snappy page does not decompress to its 5 bytes: ", 48) == 0);
}

TEST(codecs_not_read_here_are_not_covered_and_the_table_says_which) {
    char error[BW_PAGES_ERROR_SIZE] = "";
    static const uint8_t one[1] = {0};
    for (int codec = 3; codec <= 8; codec++)
        if (codec != BW_PQ_ZSTD) {
            CHECK_EQ(bw_pq_check_plain_size(codec, one, 1, 1, error), BW_PAGES_NOT_COVERED);
            CHECK_EQ(bw_pq_decompress(codec, one, 1, packed, 1, error), BW_PAGES_NOT_COVERED);
        }
    size_t count = 0;
    const bw_parquet_codec *table = bw_parquet_codecs(&count);
    CHECK_EQ(count, 8);
    for (size_t i = 0; i < count; i++) {
        CHECK_EQ(table[i].number, (int)i);
        CHECK_EQ(table[i].covered, i <= 2 || i == BW_PQ_ZSTD);
    }
    CHECK(strcmp(table[BW_PQ_ZSTD].library, "libzstd") == 0);
}

RUN_TESTS(each_codec_decompresses_exactly_its_size,
          a_claimed_size_past_what_the_bytes_hold_is_refused_before_decompressing,
          codecs_not_read_here_are_not_covered_and_the_table_says_which)
