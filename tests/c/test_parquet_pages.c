/* The Thrift compact reader and the Parquet page reader on hand-made metadata and pages:
   fields by delta and by id, skipping nested values, the depth limit, every truncation of a
   header refused (the buffers are heap blocks of exactly their size, so the sanitizers see
   any read past them), PLAIN pages of scalars and lists, levels both RLE and bit-packed.
   sources: thrift_compact.c parquet_pages.c file_read.c
   libs: -DBW_HAVE_ZSTD -DBW_HAVE_SNAPPY -lzstd -lsnappy -lz
   requires: zstd.h snappy-c.h */
#define _POSIX_C_SOURCE 200809L /* fileno, ftruncate */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "parquet_pages.h"
#include "thrift_compact.h"

/* A copy of n bytes in a block of exactly n bytes. */
static uint8_t *exact(const uint8_t *p, size_t n) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    return copy;
}

TEST(fields_by_delta_and_by_id) {
    /* field 1 i32 = -3, field 200 (long form) i64 = 5, a nested struct skipped, stop */
    static const uint8_t data[] = {0x15, 0x05, 0x06, 0x90, 0x03, 0x0a, 0x1c, 0x15, 0x02,
                                   0x00, 0x00};
    uint8_t *buf = exact(data, sizeof data);
    bw_thrift t;
    bw_thrift_init(&t, buf, sizeof data);
    int16_t last = 0, id;
    int type;
    int32_t a = 0;
    int64_t b = 0;
    CHECK_EQ(bw_thrift_struct_begin(&t), 0);
    CHECK_EQ(bw_thrift_field(&t, &last, &type, &id), 0);
    CHECK(id == 1 && type == BW_THRIFT_I32);
    CHECK_EQ(bw_thrift_i32(&t, type, &a), 0);
    CHECK_EQ(a, -3);
    CHECK_EQ(bw_thrift_field(&t, &last, &type, &id), 0);
    CHECK(id == 200 && type == BW_THRIFT_I64);
    CHECK_EQ(bw_thrift_i64(&t, type, &b), 0);
    CHECK_EQ(b, 5);
    CHECK_EQ(bw_thrift_field(&t, &last, &type, &id), 0);
    CHECK(id == 201 && type == BW_THRIFT_STRUCT);
    CHECK_EQ(bw_thrift_skip(&t, type), 0);
    CHECK_EQ(bw_thrift_field(&t, &last, &type, &id), 0);
    CHECK_EQ(type, BW_THRIFT_STOP);
    CHECK(t.pos == t.end);
    free(buf);
}

TEST(every_truncation_is_refused) {
    static const uint8_t data[] = {0x19, 0x2c, 0x15, 0x02, 0x00, 0x18, 0x03, 'a', 'b', 'c',
                                   0x00, 0x1b, 0x01, 0x55, 0x02, 0x04, 0x00};
    for (size_t n = 0; n < sizeof data; n++) {
        uint8_t *buf = exact(data, n);
        bw_thrift t;
        bw_thrift_init(&t, buf, n);
        CHECK_EQ(bw_thrift_skip(&t, BW_THRIFT_STRUCT), -1);
        CHECK(t.error != NULL);
        free(buf);
    }
    uint8_t *buf = exact(data, sizeof data);
    bw_thrift t;
    bw_thrift_init(&t, buf, sizeof data);
    CHECK_EQ(bw_thrift_skip(&t, BW_THRIFT_STRUCT), 0);
    CHECK(t.pos == t.end);
    free(buf);
}

TEST(depth_and_lying_counts) {
    uint8_t deep[200];
    memset(deep, 0x1c, sizeof deep); /* struct in struct in struct ... */
    bw_thrift t;
    bw_thrift_init(&t, deep, sizeof deep);
    CHECK_EQ(bw_thrift_skip(&t, BW_THRIFT_STRUCT), -1);
    CHECK(strstr(t.error, "nested") != NULL);
    static const uint8_t long_list[] = {0xf5, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    bw_thrift_init(&t, long_list, sizeof long_list);
    CHECK_EQ(bw_thrift_skip(&t, BW_THRIFT_LIST), -1);
    static const uint8_t varint[] = {0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0x01, 0x00};
    bw_thrift_init(&t, varint, sizeof varint);
    CHECK_EQ(bw_thrift_skip(&t, BW_THRIFT_STRUCT), -1);
}

/* A v1 PLAIN uncompressed data page header for `values` values and `body` bytes. */
static size_t page_header(uint8_t *out, int values, int body) {
    size_t n = 0;
    out[n++] = 0x15; out[n++] = 0x00;                   /* type DATA_PAGE */
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * body);    /* uncompressed (body < 64) */
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * body);    /* compressed */
    out[n++] = 0x2c;                                    /* field 5: data page header */
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * values);  /* num_values */
    out[n++] = 0x15; out[n++] = 0x00;                   /* PLAIN */
    out[n++] = 0x15; out[n++] = 0x06;                   /* definition levels RLE */
    out[n++] = 0x15; out[n++] = 0x06;                   /* repetition levels RLE */
    out[n++] = 0x00;
    out[n++] = 0x00;
    return n;
}

TEST(required_scalar_page) {
    uint8_t file[64];
    size_t h = page_header(file, 4, 16);
    for (int32_t i = 0; i < 4; i++) {
        int32_t v = 100 + i;
        memcpy(file + h + 4 * (size_t)i, &v, 4);
    }
    size_t size = h + 16;
    uint8_t *buf = exact(file, size);
    bw_page_location loc = {0, 0, (int32_t)size};
    int64_t rows[] = {1, 3}, lengths[2];
    bw_chunk_take q = {.file = buf, .file_size = size, .pages = &loc, .page_count = 1,
                       .group_rows = 4, .codec = BW_PQ_UNCOMPRESSED, .value_width = 4,
                       .rows = rows, .row_count = 2};
    bw_bytes out = {NULL, 0, 0};
    size_t pages = 0;
    char error[BW_PAGES_ERROR_SIZE];
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_OK);
    CHECK_EQ(out.size, 8);
    int32_t got[2];
    memcpy(got, out.data, 8);
    CHECK(got[0] == 101 && got[1] == 103 && lengths[0] == 1 && pages == 1);
    free(out.data);
    /* a page that says it holds 5 rows where the index says 4 */
    q.group_rows = 5;
    out = (bw_bytes){NULL, 0, 0};
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_MALFORMED);
    free(out.data);
    /* every truncation of the page */
    q.group_rows = 4;
    for (size_t n = 1; n < size; n++) {
        uint8_t *cut = exact(file, n);
        bw_page_location l = {0, 0, (int32_t)n};
        q.file = cut;
        q.file_size = n;
        q.pages = &l;
        out = (bw_bytes){NULL, 0, 0};
        CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_MALFORMED);
        free(out.data);
        free(cut);
    }
    free(buf);
}

TEST(list_page_with_bit_packed_and_rle_levels) {
    uint8_t file[96];
    /* levels: repetition 0,1,1,0,1,1 bit-packed; definition six 1s as one RLE run */
    static const uint8_t levels[] = {2, 0, 0, 0, 0x03, 0x36, 2, 0, 0, 0, 0x0c, 0x01};
    size_t h = page_header(file, 6, (int)sizeof levels + 24);
    memcpy(file + h, levels, sizeof levels);
    for (int i = 0; i < 6; i++) {
        float v = (float)i;
        memcpy(file + h + sizeof levels + 4 * (size_t)i, &v, 4);
    }
    size_t size = h + sizeof levels + 24;
    uint8_t *buf = exact(file, size);
    bw_page_location loc = {0, 0, (int32_t)size};
    int64_t rows[] = {1}, lengths[1];
    bw_chunk_take q = {.file = buf, .file_size = size, .pages = &loc, .page_count = 1,
                       .group_rows = 2, .codec = BW_PQ_UNCOMPRESSED, .value_width = 4,
                       .max_rep = 1, .max_def = 1, .list_size = 3, .rows = rows,
                       .row_count = 1};
    bw_bytes out = {NULL, 0, 0};
    size_t pages = 0;
    char error[BW_PAGES_ERROR_SIZE];
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_OK);
    float got[3];
    CHECK_EQ(out.size, 12);
    memcpy(got, out.data, 12);
    CHECK(got[0] == 3.0f && got[2] == 5.0f && lengths[0] == 3);
    free(out.data);
    q.list_size = 2; /* a fixed_size_list of 2 cannot hold these rows: corrupt */
    out = (bw_bytes){NULL, 0, 0};
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "row 0 of a fixed_size_list of 2 holds 3 values") != NULL);
    free(out.data);
    q.list_size = 3;
    q.max_def = 2; /* levels of 1 under a maximum of 2: a null somewhere: not covered */
    out = (bw_bytes){NULL, 0, 0};
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages, error), BW_PAGES_NOT_COVERED);
    free(out.data);
    free(buf);
}

TEST(offset_index_checks) {
    /* field 1: list of 2 PageLocation structs {offset, size, first_row} */
    static const uint8_t good[] = {0x19, 0x2c, 0x16, 0x08, 0x15, 0x20, 0x16, 0x00, 0x00,
                                   0x16, 0x28, 0x15, 0x20, 0x16, 0x0a, 0x00, 0x00};
    uint8_t *buf = exact(good, sizeof good);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof good, 100, 10, &pages, &count, error),
             BW_PAGES_OK);
    CHECK(count == 2 && pages[1].offset == 20 && pages[1].first_row == 5 &&
          pages[0].compressed_size == 16);
    free(pages);
    /* the second page past the end of a 30-byte file */
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof good, 30, 10, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "outside the file") != NULL);
    /* first rows beyond the row group */
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof good, 100, 5, &pages, &count, error),
             BW_PAGES_MALFORMED);
    for (size_t n = 0; n < sizeof good; n++) {
        uint8_t *cut = exact(good, n);
        CHECK_EQ(bw_parquet_offset_index(cut, n, 100, 10, &pages, &count, error),
                 BW_PAGES_MALFORMED);
        free(cut);
    }
    free(buf);
}

/* A PLAIN dictionary page header for `values` values and `body` bytes (< 64). */
static size_t dictionary_header(uint8_t *out, int values, int body) {
    size_t n = 0;
    out[n++] = 0x15; out[n++] = 0x04;                   /* type DICTIONARY_PAGE */
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * body);
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * body);
    out[n++] = 0x4c;                                    /* field 7: dictionary page header */
    out[n++] = 0x15; out[n++] = (uint8_t)(2 * values);
    out[n++] = 0x15; out[n++] = 0x00;                   /* PLAIN */
    out[n++] = 0x00;
    out[n++] = 0x00;
    return n;
}

static int walk(const uint8_t *file, size_t file_size, int64_t start, int64_t size,
                int64_t rows, int max_rep, int64_t list_size, int64_t null_count,
                bw_page_location **pages, size_t *count, char *error) {
    bw_chunk_walk w = {.file = file, .file_size = file_size, .chunk_start = start,
                       .chunk_size = size, .group_rows = rows, .codec = BW_PQ_UNCOMPRESSED,
                       .max_rep = max_rep, .list_size = list_size, .null_count = null_count};
    return bw_parquet_walk_pages(&w, pages, count, error);
}

TEST(walker_bounds) {
    /* a dictionary page of 2 values, then two data pages of 4 rows each */
    uint8_t file[160];
    size_t n = dictionary_header(file, 2, 8);
    size_t dictionary = n + 8;
    memset(file + n, 0, 8);
    size_t first = dictionary, h = page_header(file + first, 4, 16);
    memset(file + first + h, 0, 16);
    size_t second = first + h + 16;
    page_header(file + second, 4, 16);
    memset(file + second + h, 0, 16);
    size_t size = second + h + 16;
    uint8_t *buf = exact(file, size);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 8, 0, 0, -1, &pages, &count, error),
             BW_PAGES_OK);
    CHECK(count == 2 && pages[0].offset == (int64_t)first && pages[1].offset == (int64_t)second);
    CHECK(pages[0].compressed_size == (int32_t)(h + 16) && pages[1].first_row == 4);
    free(pages);
    /* rows that do not add up to the row group's, either way */
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 7, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "more than the row group's 7 rows") != NULL);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 9, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "hold 8 rows, its row group 9") != NULL);
    /* a chunk that ends anywhere inside its last page, or starts outside the file */
    for (size_t end = 1; end < size; end++) {
        CHECK_EQ(walk(buf, size, 0, (int64_t)end, 8, 0, 0, -1, &pages, &count, error),
                 BW_PAGES_MALFORMED);
        CHECK(pages == NULL && count == 0);
    }
    CHECK_EQ(walk(buf, size, 0, (int64_t)size + 1, 8, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "outside the file") != NULL);
    CHECK_EQ(walk(buf, size, (int64_t)size + 1, 0, 0, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK_EQ(walk(buf, size, -4, 8, 8, 0, 0, -1, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_EQ(walk(buf, size, 0, INT64_MAX, 8, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    /* every truncation of the file under the footer's chunk size: the walk stays inside */
    for (size_t cut_size = 0; cut_size < size; cut_size++) {
        uint8_t *cut = exact(file, cut_size);
        CHECK_EQ(walk(cut, cut_size, 0, (int64_t)size, 8, 0, 0, -1, &pages, &count, error),
                 BW_PAGES_MALFORMED);
        free(cut);
    }
    /* the second data page's compressed size grown by one: past the chunk's end */
    file[second + 5] = (uint8_t)(2 * 17);
    uint8_t *grown = exact(file, size);
    CHECK_EQ(walk(grown, size, 0, (int64_t)size, 8, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "runs past its column chunk's end") != NULL);
    free(grown);
    /* the first data page's shrunk by one: the next header read from inside its values */
    file[second + 5] = (uint8_t)(2 * 16);
    file[first + 5] = (uint8_t)(2 * 15);
    uint8_t *shrunk = exact(file, size);
    CHECK_EQ(walk(shrunk, size, 0, (int64_t)size, 8, 0, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    free(shrunk);
    free(buf);
    /* a dictionary page after a data page */
    file[first + 5] = (uint8_t)(2 * 16);
    uint8_t swapped[160];
    memcpy(swapped, file + first, h + 16);
    memcpy(swapped + h + 16, file, dictionary);
    uint8_t *late = exact(swapped, h + 16 + dictionary);
    CHECK_EQ(walk(late, h + 16 + dictionary, 0, (int64_t)(h + 16 + dictionary), 4, 0, 0, -1,
                  &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "is not its chunk's first page") != NULL);
    free(late);
}

TEST(integers_of_another_type_are_refused) {
    /* a page header whose type is written as an i16 (0x14), as an i64 (0x16): a reader
       generated from the schema drops such a field and refuses the header, so must we */
    uint8_t file[64];
    size_t h = page_header(file, 4, 16);
    memset(file + h, 0, 16);
    bw_page_header header;
    size_t header_size;
    char error[BW_PAGES_ERROR_SIZE];
    for (int type = 0x14; type <= 0x16; type++) {
        file[0] = (uint8_t)type;
        uint8_t *buf = exact(file, h + 16);
        CHECK_EQ(bw_parquet_page_header(buf, h + 16, &header, &header_size, error),
                 type == 0x15 ? BW_PAGES_OK : BW_PAGES_MALFORMED);
        free(buf);
    }
}

TEST(walker_rows_of_list_pages) {
    /* the list page of list_page_with_bit_packed_and_rle_levels: 6 values, 2 rows of 3 */
    uint8_t file[96];
    static const uint8_t levels[] = {2, 0, 0, 0, 0x03, 0x36, 2, 0, 0, 0, 0x0c, 0x01};
    size_t h = page_header(file, 6, (int)sizeof levels + 24);
    memcpy(file + h, levels, sizeof levels);
    memset(file + h + sizeof levels, 0, 24);
    size_t size = h + sizeof levels + 24;
    uint8_t *buf = exact(file, size);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    /* nulls unknown: the repetition levels counted; a list: the same */
    for (int64_t list_size = 0; list_size <= 3; list_size += 3) {
        CHECK_EQ(walk(buf, size, 0, (int64_t)size, 2, 1, list_size, -1, &pages, &count,
                      error), BW_PAGES_OK);
        CHECK(count == 1 && pages[0].first_row == 0);
        free(pages);
    }
    /* no nulls: num_values / list_size, which must divide */
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 2, 1, 3, 0, &pages, &count, error), BW_PAGES_OK);
    free(pages);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 2, 1, 4, 0, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "not rows of a fixed_size_list of 4") != NULL);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 3, 1, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    free(buf);
    /* a page whose levels start inside a row */
    file[h + 5] = 0x37; /* repetition levels 1,1,1,0,1,1 */
    buf = exact(file, size);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 1, 1, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "inside a row") != NULL);
    free(buf);
}

/* page_header's page with a field of `pad` bytes (id 9, unknown: skipped) in its header. */
static size_t padded_page_header(uint8_t *out, int values, int body, size_t pad) {
    size_t n = page_header(out, values, body) - 1; /* without the header's stop */
    out[n++] = 0x48;                               /* field 9 (delta 4): binary */
    for (size_t left = pad; ; left >>= 7) {        /* its length, ULEB128 */
        out[n++] = (uint8_t)((left & 0x7f) | (left >= 0x80 ? 0x80 : 0));
        if (left < 0x80)
            break;
    }
    memset(out + n, 'p', pad);
    n += pad;
    out[n++] = 0x00;
    return n;
}

TEST(descriptor_reads_are_the_memory_reads_and_a_cut_file_is_an_error) {
    /* a dictionary page, a data page whose header is larger than the first read of a header,
       a data page: the walk, the dictionary and the rows through a descriptor as in memory */
    static uint8_t file[20000];
    size_t n = dictionary_header(file, 2, 8);
    for (int32_t i = 0; i < 2; i++)
        memcpy(file + n + 4 * (size_t)i, &(int32_t){7 + i}, 4);
    size_t first = n + 8, h1 = padded_page_header(file + first, 4, 16, 10000);
    for (int32_t i = 0; i < 4; i++)
        memcpy(file + first + h1 + 4 * (size_t)i, &(int32_t){100 + i}, 4);
    size_t second = first + h1 + 16, h2 = page_header(file + second, 4, 16);
    for (int32_t i = 0; i < 4; i++)
        memcpy(file + second + h2 + 4 * (size_t)i, &(int32_t){200 + i}, 4);
    size_t size = second + h2 + 16;
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL && fwrite(file, 1, size, tmp) == size && fflush(tmp) == 0);
    int fd = fileno(tmp);
    char error[BW_PAGES_ERROR_SIZE];
    bw_page_location *in_memory = NULL, *read = NULL;
    size_t count = 0, read_count = 0;
    CHECK_EQ(walk(file, size, 0, (int64_t)size, 8, 0, 0, -1, &in_memory, &count, error),
             BW_PAGES_OK);
    bw_chunk_walk w = {.file = NULL, .fd = fd, .file_size = size, .chunk_start = 0,
                       .chunk_size = (int64_t)size, .group_rows = 8,
                       .codec = BW_PQ_UNCOMPRESSED, .null_count = -1};
    CHECK_EQ(bw_parquet_walk_pages(&w, &read, &read_count, error), BW_PAGES_OK);
    CHECK(count == 2 && read_count == 2 &&
          memcmp(in_memory, read, 2 * sizeof *read) == 0);
    uint8_t *dictionary = NULL;
    size_t dictionary_count = 0;
    CHECK_EQ(bw_parquet_dictionary(NULL, fd, size, 0, (int64_t)first, 0, 4, &dictionary,
                                   &dictionary_count, error), BW_PAGES_OK);
    int32_t d[2];
    CHECK(dictionary_count == 2);
    memcpy(d, dictionary, 8);
    CHECK(d[0] == 7 && d[1] == 8);
    free(dictionary);
    int64_t rows[] = {1, 6}, lengths[2];
    bw_chunk_take q = {.file = NULL, .fd = fd, .file_size = size, .pages = read,
                       .page_count = 2, .group_rows = 8, .codec = BW_PQ_UNCOMPRESSED,
                       .value_width = 4, .rows = rows, .row_count = 2};
    bw_bytes out = {NULL, 0, 0};
    size_t pages_read = 0;
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_OK);
    int32_t got[2] = {0, 0};
    CHECK(out.size == 8 && pages_read == 2);
    memcpy(got, out.data, 8);
    CHECK(got[0] == 101 && got[1] == 202);
    free(out.data);
    /* the file cut inside the second page: its rows are an error saying the file changed,
       the first page's still read as they were */
    CHECK_EQ(ftruncate(fd, (off_t)(second + 3)), 0);
    out = (bw_bytes){NULL, 0, 0};
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "changed since it was opened") != NULL);
    free(out.data);
    q.rows = rows;
    q.row_count = 1;
    out = (bw_bytes){NULL, 0, 0};
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_OK);
    free(out.data);
    bw_page_location *none = NULL;
    CHECK_EQ(bw_parquet_walk_pages(&w, &none, &read_count, error), BW_PAGES_MALFORMED);
    CHECK(none == NULL && strstr(error, "changed since it was opened") != NULL);
    CHECK_EQ(ftruncate(fd, 0), 0);
    CHECK_EQ(bw_parquet_dictionary(NULL, fd, size, 0, (int64_t)first, 0, 4, &dictionary,
                                   &dictionary_count, error), BW_PAGES_MALFORMED);
    CHECK(dictionary == NULL);
    fclose(tmp);
    /* a descriptor that is not open: the read fails */
    out = (bw_bytes){NULL, 0, 0};
    q.fd = -1;
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_READ_FAILED);
    CHECK(strstr(error, "cannot read") != NULL);
    free(out.data);
    free(in_memory);
    free(read);
}

RUN_TESTS(fields_by_delta_and_by_id, every_truncation_is_refused, depth_and_lying_counts,
          required_scalar_page, list_page_with_bit_packed_and_rle_levels, offset_index_checks,
          walker_bounds, walker_rows_of_list_pages, integers_of_another_type_are_refused,
          descriptor_reads_are_the_memory_reads_and_a_cut_file_is_an_error)
