/* The RLE/bit-packed hybrid of Parquet pages on runs written here: RLE and bit-packed runs
   read to the values still wanted, a run header too long, an empty run or a run cut short
   refused; definition levels counted and each requested row placed (nulls at -1); a level
   above the maximum refused; repetition levels giving rows and their lengths, a page that
   starts inside a row or breaks a fixed list size kept as a defect; packed indices read at
   every bit width.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -lz */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parquet_internal.h"
#include "parquet_writer.h"

/* An RLE run of `count` copies of `value` (bit_width bits, in whole bytes). */
static void put_rle(pw_writer *w, uint64_t count, uint64_t value, int bit_width) {
    pw_varint(w, count << 1);
    for (int i = 0; i < (bit_width + 7) / 8; i++)
        pw_byte(w, (uint8_t)(value >> (8 * i)));
}

/* A bit-packed run of the n values (n a multiple of 8), bit_width bits each, LSB first. */
static void put_packed(pw_writer *w, const uint64_t *values, size_t n, int bit_width) {
    pw_varint(w, (n / 8) << 1 | 1);
    uint64_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= values[i] << bits;
        bits += bit_width;
        while (bits >= 8) {
            pw_byte(w, (uint8_t)acc);
            acc >>= 8;
            bits -= 8;
        }
    }
}

TEST(runs_are_read_to_what_is_wanted_and_bad_ones_refused) {
    pw_writer w = {.len = 0};
    put_rle(&w, 1000, 3, 2);
    static const uint64_t v[16] = {1, 2, 3, 0, 1, 2, 3, 0, 3, 3, 3, 3, 0, 0, 0, 1};
    put_packed(&w, v, 16, 2);
    const uint8_t *p = w.data, *end = w.data + w.len;
    bw_pq_run r;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(bw_pq_read_run(&p, end, 2, "levels", 0, 10, &r, error), BW_PAGES_OK);
    CHECK(!r.bit_packed && r.take == 10 && r.value == 3);
    CHECK_EQ(bw_pq_read_run(&p, end, 2, "levels", 0, 12, &r, error), BW_PAGES_OK);
    CHECK(r.bit_packed && r.take == 12 && r.present == 4 && p == end);
    for (int i = 0; i < 16; i++)
        CHECK_EQ(bw_pq_packed_index(r.bits, r.present, i, 2, 3), v[i]);
    /* the stream ends, a run header of more than five bytes, an empty run, a cut run */
    CHECK_EQ(bw_pq_read_run(&p, end, 2, "levels", 12, 20, &r, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "levels end after 12 of 20");
    static const uint8_t long_header[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    p = long_header;
    CHECK_EQ(bw_pq_read_run(&p, p + 6, 1, "levels", 0, 1, &r, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "levels: run header too long");
    static const uint8_t empty[] = {0x00, 0x01, 0x01};
    p = empty;
    CHECK_EQ(bw_pq_read_run(&p, p + 3, 1, "dictionary indices", 0, 1, &r, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "dictionary indices: empty run");
    static const uint8_t cut_packed[] = {0x03, 0xff}, cut_rle[] = {0x02, 0xff};
    p = cut_packed;
    CHECK_EQ(bw_pq_read_run(&p, p + 2, 2, "levels", 0, 8, &r, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "levels end inside a bit-packed run");
    p = cut_rle;
    CHECK_EQ(bw_pq_read_run(&p, p + 2, 9, "levels", 0, 1, &r, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "levels end inside a run");
}

TEST(packed_indices_at_every_width) {
    unsigned long long rng = 7;
    for (int width = 1; width <= 32; width++) {
        uint64_t values[64];
        uint64_t mask = width == 32 ? 0xffffffffu : ((uint64_t)1 << width) - 1;
        for (int i = 0; i < 64; i++)
            values[i] = check_rand(&rng) & mask;
        pw_writer w = {.len = 0};
        put_packed(&w, values, 64, width);
        uint8_t *bits = pw_exact(w.data + 1, w.len - 1); /* past the run header */
        for (int i = 0; i < 64; i++)
            if (bw_pq_packed_index(bits, w.len - 1, i, width, mask) != values[i]) {
                CHECK(0);
                break;
            }
        free(bits);
    }
}

TEST(definition_levels_count_values_and_place_rows) {
    /* 24 levels, max 1: 8 present (RLE), then 16 bit-packed alternating, then nothing */
    pw_writer w = {.len = 0};
    put_rle(&w, 8, 1, 1);
    uint64_t v[16];
    for (int i = 0; i < 16; i++)
        v[i] = i % 2;
    put_packed(&w, v, 16, 1);
    int64_t rows[] = {0, 7, 8, 9, 23}, start[5], length[5];
    bw_pq_rows want = {rows, 0, 5, start, length};
    int64_t values = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(bw_pq_definition_levels(w.data, w.len, 1, 24, &want, &values, error), BW_PAGES_OK);
    CHECK_EQ(values, 16);
    CHECK(start[0] == 0 && start[1] == 7 && start[2] == -1 && start[3] == 8 && start[4] == 15);
    /* max 2 with a level of 3 */
    w.len = 0;
    put_rle(&w, 4, 3, 2);
    bw_pq_rows none = {NULL, 0, 0, NULL, NULL};
    CHECK_EQ(bw_pq_definition_levels(w.data, w.len, 2, 4, &none, &values, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "level 3 above the maximum 2");
    /* fewer levels than the page says */
    w.len = 0;
    put_rle(&w, 4, 1, 1);
    CHECK_EQ(bw_pq_definition_levels(w.data, w.len, 1, 10, &none, &values, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "levels end after 4 of 10");
}

TEST(repetition_levels_give_rows_and_defects) {
    /* rows of 3, 1 and 4 levels: 0 1 1 | 0 | 0 1 1 1 */
    static const uint64_t v[8] = {0, 1, 1, 0, 0, 1, 1, 1};
    pw_writer w = {.len = 0};
    put_packed(&w, v, 8, 1);
    int64_t rows[] = {1, 2}, start[2], length[2], count = 0;
    bw_pq_rows want = {rows, 0, 2, start, length};
    bw_pq_list_rows l = {.want = &want, .list_size = 0};
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(bw_pq_list_levels(w.data, w.len, 8, &l, &count, error), BW_PAGES_OK);
    CHECK_EQ(count, 3);
    CHECK(!l.defective && start[0] == 3 && length[0] == 1 && start[1] == 4 && length[1] == 4);
    /* the same rows against a fixed size of 3: the second row breaks it */
    l.list_size = 3;
    CHECK_EQ(bw_pq_list_levels(w.data, w.len, 8, &l, &count, error), BW_PAGES_OK);
    CHECK(l.defective && !l.starts_inside);
    CHECK_BYTES(l.defect, strlen(l.defect), "row 1 of a fixed_size_list of 3 holds 1 values");
    /* a page whose first level goes on a row before it */
    w.len = 0;
    put_rle(&w, 2, 1, 1);
    put_rle(&w, 3, 0, 1);
    bw_pq_rows none = {NULL, 0, 0, NULL, NULL};
    bw_pq_list_rows m = {.want = &none, .list_size = 0};
    CHECK_EQ(bw_pq_list_levels(w.data, w.len, 5, &m, &count, error), BW_PAGES_OK);
    CHECK(m.starts_inside && m.defective && count == 3);
    CHECK_BYTES(m.defect, strlen(m.defect), "page starts inside a row");
    /* a level above 1 */
    w.len = 0;
    put_rle(&w, 2, 2, 1);
    CHECK_EQ(bw_pq_list_levels(w.data, w.len, 2, &m, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "level 2 above the maximum 1");
}

RUN_TESTS(runs_are_read_to_what_is_wanted_and_bad_ones_refused, packed_indices_at_every_width,
          definition_levels_count_values_and_place_rows, repetition_levels_give_rows_and_defects)
