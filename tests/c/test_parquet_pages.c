/* The Thrift compact reader and the Parquet page reader on hand-made metadata and pages:
   fields by delta and by id, skipping nested values, the depth limit, every truncation of a
   header refused (the buffers are heap blocks of exactly their size, so the sanitizers see
   any read past them), PLAIN pages of scalars and lists, levels both RLE and bit-packed,
   headers whose counts and sizes claim far more than their bytes hold (every allocation is
   recorded: malloc and realloc wrapped at link time, so a test sees the largest one), and
   files read through a descriptor as in memory, cut short under the reader.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -DBW_HAVE_ZSTD -lzstd -lsnappy -lz -Wl,--wrap=malloc -Wl,--wrap=realloc
   requires: zstd.h snappy-c.h */
#define _POSIX_C_SOURCE 200809L /* fileno, ftruncate */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <snappy-c.h>
#include <zstd.h>

#include "check.h"
#include "buffer_pool.h"
#include "parquet_pages.h"
#include "thrift_compact.h"

/* The largest single allocation asked for since it was last set to 0: the core's malloc and
   realloc calls come here (-Wl,--wrap), then go to the real ones. */
static size_t largest_allocation;
void *__real_malloc(size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_realloc(void *p, size_t size);

void *__wrap_malloc(size_t size) {
    if (size > largest_allocation)
        largest_allocation = size;
    return __real_malloc(size);
}

void *__wrap_realloc(void *p, size_t size) {
    if (size > largest_allocation)
        largest_allocation = size;
    return __real_realloc(p, size);
}

/* From here on, every buffer the reader asks for is a fresh malloc that largest_allocation
   sees: the page buffer pool keeps none, so a request it could serve from a buffer an earlier
   test left there is not hidden. */
static void measure_allocations(void) {
    bw_page_buffer_limit(0);
    largest_allocation = 0;
}

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

static size_t put_varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        out[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* An i32 field `delta` ids after the previous one, its value zigzag encoded. */
static size_t put_i32(uint8_t *out, int delta, int64_t v) {
    out[0] = (uint8_t)(delta << 4 | 5);
    uint64_t zigzag = v >= 0 ? (uint64_t)v << 1 : ((uint64_t)(-(v + 1)) << 1) | 1;
    return 1 + put_varint(out + 1, zigzag);
}

/* The fields a page header starts with: its type and sizes. */
static size_t page_start(uint8_t *out, int type, int64_t uncompressed, int64_t compressed) {
    size_t n = 0;
    n += put_i32(out + n, 1, type);
    n += put_i32(out + n, 1, uncompressed);
    n += put_i32(out + n, 1, compressed);
    return n;
}

/* A v1 data page header: `values` values, the sizes, the encoding; levels RLE. */
static size_t data_page(uint8_t *out, int64_t values, int64_t uncompressed, int64_t compressed,
                        int encoding) {
    size_t n = page_start(out, BW_PQ_DATA_PAGE, uncompressed, compressed);
    out[n++] = 0x2c; /* field 5: the data page header */
    n += put_i32(out + n, 1, values);
    n += put_i32(out + n, 1, encoding);
    n += put_i32(out + n, 1, BW_PQ_RLE); /* definition levels */
    n += put_i32(out + n, 1, BW_PQ_RLE); /* repetition levels */
    out[n++] = 0x00;
    out[n++] = 0x00;
    return n;
}

/* A v1 PLAIN uncompressed data page header for `values` values and `body` bytes (each < 64:
   one byte each, at fixed places: the compressed size is byte 5). */
static size_t page_header(uint8_t *out, int values, int body) {
    return data_page(out, values, body, body, BW_PQ_PLAIN);
}

/* An RLE run of the hybrid: `count` times the one-byte `value`. */
static size_t rle_run(uint8_t *out, uint64_t count, uint8_t value) {
    size_t n = put_varint(out, count << 1);
    out[n++] = value;
    return n;
}

/* An uncompressed page of `values` values (encoding `encoding`) at file: its header, then
   its body (`size` bytes); the page's size. */
static size_t uncompressed_page(uint8_t *file, int64_t values, int encoding,
                                const uint8_t *body, size_t size) {
    size_t h = data_page(file, values, (int64_t)size, (int64_t)size, encoding);
    memcpy(file + h, body, size);
    return h + size;
}

/* v1 levels: their 4-byte length, then the runs already written at out + 4 (`runs` bytes). */
static size_t v1_levels(uint8_t *out, size_t runs) {
    uint32_t n = (uint32_t)runs;
    memcpy(out, &n, 4);
    return 4 + runs;
}

/* The values a take gave, into got (n bytes), when it gave n bytes (else a failed CHECK and
   got is left as it was). */
static void copy_values(const bw_bytes *out, void *got, size_t n) {
    CHECK_EQ(out->size, n);
    if (out->size == n)
        memcpy(got, out->data, n);
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
    int32_t got[2] = {0, 0};
    copy_values(&out, got, sizeof got);
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

/* A list page into file (96 bytes): 6 float32 values, 0 to 5, in 2 rows of 3; levels:
   repetition 0,1,1,0,1,1 bit-packed, definition six 1s as one RLE run. Its size; *levels_at:
   where its levels start (after the page header), unless NULL. */
static size_t six_value_list_page(uint8_t *file, size_t *levels_at) {
    static const uint8_t levels[] = {2, 0, 0, 0, 0x03, 0x36, 2, 0, 0, 0, 0x0c, 0x01};
    size_t h = page_header(file, 6, (int)sizeof levels + 24);
    memcpy(file + h, levels, sizeof levels);
    for (int i = 0; i < 6; i++) {
        float v = (float)i;
        memcpy(file + h + sizeof levels + 4 * (size_t)i, &v, 4);
    }
    if (levels_at != NULL)
        *levels_at = h;
    return h + sizeof levels + 24;
}

TEST(list_page_with_bit_packed_and_rle_levels) {
    uint8_t file[96];
    size_t size = six_value_list_page(file, NULL);
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
    float got[3] = {0, 0, 0};
    copy_values(&out, got, sizeof got);
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

/* An offset index: field 1, a list of 2 PageLocation structs {offset, size, first_row}:
   pages at 4 and 20, 16 bytes each, first rows 0 and 5. */
static const uint8_t two_pages[] = {0x19, 0x2c, 0x16, 0x08, 0x15, 0x20, 0x16, 0x00, 0x00,
                                    0x16, 0x28, 0x15, 0x20, 0x16, 0x0a, 0x00, 0x00};

TEST(offset_index_checks) {
    const uint8_t *good = two_pages;
    const size_t size = sizeof two_pages;
    uint8_t *buf = exact(good, size);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    /* pages at 4 and 20, 16 bytes each: a chunk of bytes 4 to 36 */
    CHECK_EQ(bw_parquet_offset_index(buf, size, 100, 4, 32, 10, &pages, &count, error),
             BW_PAGES_OK);
    CHECK(count == 2 && pages[1].offset == 20 && pages[1].first_row == 5 &&
          pages[0].compressed_size == 16);
    free(pages);
    /* the chunk past the end of a 30-byte file */
    CHECK_EQ(bw_parquet_offset_index(buf, size, 30, 4, 32, 10, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "outside the file") != NULL);
    /* first rows beyond the row group */
    CHECK_EQ(bw_parquet_offset_index(buf, size, 100, 4, 32, 5, &pages, &count, error),
             BW_PAGES_MALFORMED);
    for (size_t n = 0; n < size; n++) {
        uint8_t *cut = exact(good, n);
        CHECK_EQ(bw_parquet_offset_index(cut, n, 100, 4, 32, 10, &pages, &count, error),
                 BW_PAGES_MALFORMED);
        free(cut);
    }
    free(buf);
}

/* The offset index `good` (n bytes, at most 64) with bytes changed (byte at[i] to to[i]),
   for a chunk of bytes 0 to 64: refused, saying `message`. */
static void offset_index_refused(const uint8_t *good, size_t n, const size_t *at,
                                 const uint8_t *to, size_t changes, const char *message) {
    uint8_t changed[64];
    memcpy(changed, good, n);
    for (size_t i = 0; i < changes; i++)
        changed[at[i]] = to[i];
    uint8_t *buf = exact(changed, n);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(bw_parquet_offset_index(buf, n, 100, 0, 64, 10, &pages, &count, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, message) != NULL);
    free(pages);
    free(buf);
}

/* Three pages at 4, 20 and 36, 16 bytes each, first rows 0, 5 and 5 (byte 21 is the third
   page's first row). */
static const uint8_t three_pages[] = {0x19, 0x3c, 0x16, 0x08, 0x15, 0x20, 0x16, 0x00, 0x00,
                                      0x16, 0x28, 0x15, 0x20, 0x16, 0x0a, 0x00,
                                      0x16, 0x48, 0x15, 0x20, 0x16, 0x0a, 0x00, 0x00};

TEST(offset_index_leaves_out_pages_without_rows) {
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    /* the second page's first row is the third's: it holds no rows, and is left out */
    uint8_t *buf = exact(three_pages, sizeof three_pages);
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof three_pages, 100, 4, 48, 10, &pages, &count,
                                     error), BW_PAGES_OK);
    CHECK(count == 2 && pages[0].offset == 4 && pages[0].first_row == 0 &&
          pages[1].offset == 36 && pages[1].first_row == 5);
    free(pages);
    free(buf);
    /* two pages both at row 0: the first holds no rows */
    uint8_t both_first[sizeof two_pages];
    memcpy(both_first, two_pages, sizeof both_first);
    both_first[14] = 0x00;
    buf = exact(both_first, sizeof both_first);
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof both_first, 100, 4, 32, 10, &pages, &count,
                                     error), BW_PAGES_OK);
    CHECK(count == 1 && pages[0].offset == 20 && pages[0].first_row == 0);
    free(pages);
    free(buf);
    /* first rows that go down are refused, and so is a page at the row group's end */
    static const size_t third_first_row[] = {21};
    offset_index_refused(three_pages, sizeof three_pages, third_first_row,
                         (const uint8_t[]){0x06}, 1, "page 2 starts at row 3 (row group of 10");
    offset_index_refused(three_pages, sizeof three_pages, third_first_row,
                         (const uint8_t[]){0x14}, 1, "page 2 starts at row 10 (row group of 10");
}

TEST(offset_index_pages_stay_in_their_chunk) {
    uint8_t *buf = exact(two_pages, sizeof two_pages);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    /* every chunk range but one that holds both pages (bytes 4 to 36): refused (the first
       page starts before it, or the second ends after it), and so is a chunk outside the
       file */
    for (int64_t start = 0; start <= 8; start++)
        for (int64_t size = 28; size <= 36; size++) {
            int rc = bw_parquet_offset_index(buf, sizeof two_pages, 100, start, size, 10,
                                             &pages, &count, error);
            int holds = start <= 4 && start + size >= 36;
            CHECK_EQ(rc, holds ? BW_PAGES_OK : BW_PAGES_MALFORMED);
            if (!holds)
                CHECK(strstr(error, "outside its column chunk (bytes") != NULL);
            free(pages);
            pages = NULL;
        }
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof two_pages, 100, -1, 40, 10, &pages, &count,
                                     error), BW_PAGES_MALFORMED);
    CHECK_EQ(bw_parquet_offset_index(buf, sizeof two_pages, 30, 0, 40, 10, &pages, &count,
                                     error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "column chunk at 0, 40 bytes, outside the file") != NULL);
    free(buf);
    /* the second page at 12: it overlaps the first (4 to 20) */
    static const size_t second_offset[] = {10};
    offset_index_refused(two_pages, sizeof two_pages, second_offset, (const uint8_t[]){0x18}, 1,
                         "page 1 at 12 starts before the end of the page before it (20)");
    /* the pages the other way round */
    static const size_t both_offsets[] = {3, 10, 14};
    offset_index_refused(two_pages, sizeof two_pages, both_offsets,
                         (const uint8_t[]){0x28, 0x08, 0x0a}, 3,
                         "starts before the end of the page before it");
}

/* A PLAIN dictionary page header for `values` values and the sizes. */
static size_t dictionary_page(uint8_t *out, int64_t values, int64_t uncompressed,
                              int64_t compressed) {
    size_t n = page_start(out, BW_PQ_DICTIONARY_PAGE, uncompressed, compressed);
    out[n++] = 0x4c; /* field 7: the dictionary page header */
    n += put_i32(out + n, 1, values);
    n += put_i32(out + n, 1, BW_PQ_PLAIN);
    out[n++] = 0x00;
    out[n++] = 0x00;
    return n;
}

/* A PLAIN dictionary page header for `values` values and `body` bytes (< 64). */
static size_t dictionary_header(uint8_t *out, int values, int body) {
    return dictionary_page(out, values, body, body);
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
    size_t h, size = six_value_list_page(file, &h);
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
    /* no nulls: num_values / list_size where that divides; where it does not, a row may go
       on into the next page, and the levels are counted (a row of another length is found
       when the page is read) */
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 2, 1, 3, 0, &pages, &count, error), BW_PAGES_OK);
    free(pages);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 2, 1, 4, 0, &pages, &count, error), BW_PAGES_OK);
    CHECK(count == 1 && pages[0].first_row == 0);
    free(pages);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 3, 1, 0, -1, &pages, &count, error),
             BW_PAGES_MALFORMED);
    free(buf);
    /* a page whose levels start inside a row: not covered (the chunk is read another way) */
    file[h + 5] = 0x37; /* repetition levels 1,1,1,0,1,1 */
    buf = exact(file, size);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 1, 1, 0, -1, &pages, &count, error),
             BW_PAGES_NOT_COVERED);
    free(buf);
}

/* A v1 PLAIN page of float lists at out: `n` (at most 8) repetition levels rep[] bit-packed,
   as many definition levels of 1 (one RLE run), the values 100 + i; its size. */
static size_t list_page(uint8_t *out, const int *rep, int n) {
    uint8_t body[64];
    size_t b = 0;
    uint8_t bits = 0;
    for (int i = 0; i < n; i++)
        bits |= (uint8_t)(rep[i] << i);
    body[4] = 0x03; /* one bit-packed group */
    body[5] = bits;
    b = v1_levels(body, 2);
    b += v1_levels(body + b, rle_run(body + b + 4, (uint64_t)n, 1));
    for (int i = 0; i < n; i++) {
        float v = 100.0f + (float)i;
        memcpy(body + b + 4 * (size_t)i, &v, 4);
    }
    b += 4 * (size_t)n;
    size_t h = page_header(out, n, (int)b);
    memcpy(out + h, body, b);
    return h + b;
}

TEST(walker_leaves_rows_across_v1_pages_to_another_reader) {
    /* three rows of three values in v1 pages of 4, 3 and 2 levels: row 1 starts in the first
       page and ends in the second, row 2 goes on into the third; the second page's 3 values
       would pass for a whole row of a fixed_size_list of 3 by their count alone */
    static const int first[] = {0, 1, 1, 0}, second[] = {1, 1, 0}, third[] = {1, 1};
    uint8_t file[256];
    size_t size = list_page(file, first, 4);
    size += list_page(file + size, second, 3);
    size += list_page(file + size, third, 2);
    uint8_t *buf = exact(file, size);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE];
    for (int64_t list_size = 0; list_size <= 3; list_size += 3)
        for (int64_t nulls = -1; nulls <= 0; nulls++) {
            CHECK_EQ(walk(buf, size, 0, (int64_t)size, 3, 1, list_size, nulls, &pages, &count,
                          error), BW_PAGES_NOT_COVERED);
            CHECK(pages == NULL && count == 0);
        }
    free(buf);
    /* the same rows in pages that each start at a row: walked */
    static const int row[] = {0, 1, 1}, two_rows[] = {0, 1, 1, 0, 1, 1};
    size = list_page(file, row, 3);
    size += list_page(file + size, two_rows, 6);
    buf = exact(file, size);
    CHECK_EQ(walk(buf, size, 0, (int64_t)size, 3, 1, 3, 0, &pages, &count, error), BW_PAGES_OK);
    CHECK(count == 2 && pages[0].first_row == 0 && pages[1].first_row == 1);
    free(pages);
    free(buf);
}

/* A file of `size` bytes (at least 64) whose footer holds one row group of one column chunk:
   data pages at 4, 32 bytes, codec UNCOMPRESSED, dictionary_page_offset `dictionary` (-1:
   the field left out), the encodings RLE_DICTIONARY when `dictionary_encoded`, else PLAIN. */
static size_t one_chunk_file(uint8_t *file, size_t size, int64_t dictionary,
                             int dictionary_encoded) {
    uint8_t footer[64];
    size_t n = 0;
    footer[n++] = 0x49; /* FileMetaData field 4: row groups, a list */
    footer[n++] = 0x1c; /* of 1 struct */
    footer[n++] = 0x19; /* RowGroup field 1: columns, a list */
    footer[n++] = 0x1c; /* of 1 struct */
    footer[n++] = 0x3c; /* ColumnChunk field 3: ColumnMetaData */
    footer[n++] = 0x29; /* field 2: encodings, a list */
    footer[n++] = 0x15; /* of 1 i32 */
    footer[n++] = dictionary_encoded ? 0x10 : 0x00; /* RLE_DICTIONARY (8) or PLAIN (0) */
    n += put_i32(footer + n, 2, BW_PQ_UNCOMPRESSED); /* field 4: codec */
    footer[n++] = 0x36;                              /* field 7: total_compressed_size */
    n += put_varint(footer + n, 32 << 1);
    footer[n++] = 0x26; /* field 9: data_page_offset */
    n += put_varint(footer + n, 4 << 1);
    if (dictionary >= 0) {
        footer[n++] = 0x26; /* field 11: dictionary_page_offset */
        n += put_varint(footer + n, (uint64_t)dictionary << 1);
    }
    footer[n++] = 0x00; /* ColumnMetaData, ColumnChunk, RowGroup, FileMetaData end */
    footer[n++] = 0x00;
    footer[n++] = 0x00;
    footer[n++] = 0x00;
    memset(file, 0, size);
    memcpy(file, "PAR1", 4);
    size_t at = size - 8 - n;
    memcpy(file + at, footer, n);
    uint32_t length = (uint32_t)n;
    memcpy(file + size - 8, &length, 4);
    memcpy(file + size - 4, "PAR1", 4);
    return size;
}

TEST(dictionary_page_offset_0_is_no_dictionary) {
    uint8_t file[96];
    int64_t out[BW_CHUNK_FIELDS];
    char error[BW_PAGES_ERROR_SIZE];
    /* 0, the file's magic, where some writers leave "none": no dictionary, the chunk starts
       at its data pages */
    size_t size = one_chunk_file(file, sizeof file, 0, 0);
    CHECK_EQ(bw_parquet_index_locations(file, -1, size, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_NO_DICTIONARY);
    CHECK_EQ(out[BW_CHUNK_START], 4);
    CHECK_EQ(out[BW_CHUNK_SIZE], 32);
    /* the field left out: the same */
    one_chunk_file(file, sizeof file, -1, 0);
    CHECK_EQ(bw_parquet_index_locations(file, -1, size, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_NO_DICTIONARY);
    CHECK_EQ(out[BW_CHUNK_START], 4);
    /* dictionary encoded pages with no dictionary page placed (0 or left out): unlocated */
    for (int64_t dictionary = -1; dictionary <= 0; dictionary++) {
        one_chunk_file(file, sizeof file, dictionary, 1);
        CHECK_EQ(bw_parquet_index_locations(file, -1, size, 1, 1, out, error), BW_PAGES_OK);
        CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_DICTIONARY_UNLOCATED);
        CHECK_EQ(out[BW_CHUNK_START], 4);
    }
    /* a dictionary page placed before the data pages: there, and the chunk starts at it */
    one_chunk_file(file, sizeof file, 2, 1);
    CHECK_EQ(bw_parquet_index_locations(file, -1, size, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], 2);
    CHECK_EQ(out[BW_CHUNK_START], 2);
    /* placed past the file's end: unlocated */
    one_chunk_file(file, sizeof file, 4000, 1);
    CHECK_EQ(bw_parquet_index_locations(file, -1, size, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_DICTIONARY_UNLOCATED);
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
    CHECK(count == 2 && read_count == 2);
    /* field by field: the struct's padding bytes are whatever the heap held */
    for (size_t i = 0; i < 2 && i < count && i < read_count; i++)
        CHECK(in_memory[i].offset == read[i].offset &&
              in_memory[i].first_row == read[i].first_row &&
              in_memory[i].compressed_size == read[i].compressed_size);
    uint8_t *dictionary = NULL;
    size_t dictionary_capacity = 0, dictionary_count = 0;
    CHECK_EQ(bw_parquet_dictionary(NULL, fd, size, 0, (int64_t)first, 0, 4, &dictionary,
                                   &dictionary_capacity, &dictionary_count, error), BW_PAGES_OK);
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
                                   &dictionary_capacity, &dictionary_count, error),
             BW_PAGES_MALFORMED);
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

#define BIG ((int64_t)INT32_MAX) /* the most values a page header can claim */
/* What any page here may allocate: far less than one byte per claimed value. */
#define SMALL ((size_t)1 << 20)

/* Reads rows of a one-page chunk made of `size` bytes at file (copied into a block of exactly
   that size); *out holds the values (free them). */
static int take_one_page(const uint8_t *file, size_t size, int64_t group_rows, int codec,
                         int width, int max_rep, int max_def, const int64_t *rows,
                         size_t row_count, const uint8_t *dictionary, size_t dictionary_size,
                         bw_bytes *out, int64_t *lengths, char *error) {
    uint8_t *buf = exact(file, size);
    bw_page_location loc = {0, 0, (int32_t)size};
    bw_chunk_take q = {.file = buf, .file_size = size, .pages = &loc, .page_count = 1,
                       .group_rows = group_rows, .codec = codec, .value_width = width,
                       .max_rep = max_rep, .max_def = max_def, .rows = rows,
                       .row_count = row_count, .dictionary = dictionary,
                       .dictionary_count = width ? dictionary_size / (size_t)width : 0,
                       .dictionary_size = dictionary_size};
    size_t pages = 0;
    *out = (bw_bytes){NULL, 0, 0};
    measure_allocations();
    int rc = bw_parquet_take_chunk(&q, out, lengths, &pages, error);
    free(buf);
    return rc;
}

/* Row 1 of a one-page chunk of optional int32 values (or lists of them: max_rep 1) is
   refused, saying `message`, with nothing allocated near what the page claims. */
static void refused_without_allocating(const uint8_t *file, size_t size, int64_t group_rows,
                                       int max_rep, const char *message) {
    int64_t rows[] = {1}, lengths[1];
    bw_bytes out;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(take_one_page(file, size, group_rows, BW_PQ_UNCOMPRESSED, 4, max_rep, 1, rows, 1,
                           NULL, 0, &out, lengths, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, message) != NULL);
    CHECK(largest_allocation < SMALL);
    free(out.data);
}

TEST(claimed_values_allocate_nothing) {
    /* an optional int32 page claiming 2^31 - 1 values, its definition levels one RLE run of
       as many: for a row group of 4 rows it is refused before anything is sized by it */
    uint8_t file[128], body[64];
    size_t runs = rle_run(body + 4, (uint64_t)BIG, 1);
    size_t b = v1_levels(body, runs);
    memset(body + b, 0, 16);
    size_t size = uncompressed_page(file, BIG, BW_PQ_PLAIN, body, b + 16);
    refused_without_allocating(file, size, 4, 0, "page holds 2147483647 values for 4 rows");
    /* the same claim where the row group does have 2^31 - 1 rows: 3 values, then nulls, all
       in two runs: the rows come back, and nothing was sized by the count */
    runs = rle_run(body + 4, 3, 1);
    runs += rle_run(body + 4 + runs, (uint64_t)BIG - 3, 0);
    b = v1_levels(body, runs);
    for (int32_t i = 0; i < 3; i++)
        memcpy(body + b + 4 * (size_t)i, &(int32_t){70 + i}, 4);
    size = uncompressed_page(file, BIG, BW_PQ_PLAIN, body, b + 12);
    int64_t rows[] = {1, BIG - 2}, lengths[2];
    bw_bytes out;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(take_one_page(file, size, BIG, BW_PQ_UNCOMPRESSED, 4, 0, 1, rows, 2, NULL, 0,
                           &out, lengths, error), BW_PAGES_OK);
    int32_t got[2] = {0, -1};
    copy_values(&out, got, sizeof got);
    CHECK(got[0] == 71 && lengths[0] == 1 && got[1] == 0 && lengths[1] == 0);
    CHECK(largest_allocation < SMALL);
    free(out.data);
}

TEST(claimed_dictionary_indices_allocate_nothing) {
    /* a required int32 page of 2^31 - 1 rows: one RLE run of dictionary index 3 */
    static const int32_t dictionary[] = {10, 11, 12, 13};
    uint8_t file[64];
    uint8_t body[16] = {2}; /* bit width 2 */
    size_t b = 1 + rle_run(body + 1, (uint64_t)BIG, 3);
    size_t size = uncompressed_page(file, BIG, BW_PQ_RLE_DICTIONARY, body, b);
    int64_t rows[] = {0, 12345, BIG - 1}, lengths[3];
    bw_bytes out;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(take_one_page(file, size, BIG, BW_PQ_UNCOMPRESSED, 4, 0, 0, rows, 3,
                           (const uint8_t *)dictionary, sizeof dictionary, &out, lengths,
                           error), BW_PAGES_OK);
    int32_t got[3] = {0, 0, 0};
    copy_values(&out, got, sizeof got);
    CHECK(got[0] == 13 && got[1] == 13 && got[2] == 13 && lengths[2] == 1);
    CHECK(largest_allocation < SMALL);
    free(out.data);
    /* the run's index past the dictionary: refused, whichever rows are asked for */
    body[1 + put_varint(body + 1, (uint64_t)BIG << 1)] = 3;
    size = uncompressed_page(file, BIG, BW_PQ_RLE_DICTIONARY, body, b);
    CHECK_EQ(take_one_page(file, size, BIG, BW_PQ_UNCOMPRESSED, 4, 0, 0, rows, 1,
                           (const uint8_t *)dictionary, 3 * 4, &out, lengths, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "dictionary index 3 past the 3 values") != NULL);
    free(out.data);
}

TEST(claimed_list_levels_allocate_nothing) {
    /* a page of lists claiming 2^31 - 1 levels: every one starts a row and holds a value */
    uint8_t file[128], body[64];
    size_t runs = rle_run(body + 4, (uint64_t)BIG, 0);
    size_t b = v1_levels(body, runs);
    runs = rle_run(body + b + 4, (uint64_t)BIG, 1);
    b += v1_levels(body + b, runs);
    memset(body + b, 0, 16);
    size_t size = uncompressed_page(file, BIG, BW_PQ_PLAIN, body, b + 16);
    refused_without_allocating(file, size, 2, 1,
                               "page of 2147483647 values has 16 bytes of values");
    /* walked as a chunk without an offset index: its rows counted, none stored */
    uint8_t *buf = exact(file, size);
    bw_chunk_walk w = {.file = buf, .file_size = size, .chunk_start = 0,
                       .chunk_size = (int64_t)size, .group_rows = 2,
                       .codec = BW_PQ_UNCOMPRESSED, .max_rep = 1, .null_count = -1};
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    measure_allocations();
    CHECK_EQ(bw_parquet_walk_pages(&w, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "hold more than the row group's 2 rows") != NULL);
    CHECK(largest_allocation < SMALL);
    free(buf);
}

/* body (n bytes) compressed with codec into out (room for `room`); its size. zstd_sized 0:
   a zstd frame that does not say its content size. */
static size_t compress_body(int codec, const uint8_t *body, size_t n, uint8_t *out,
                            size_t room, int zstd_sized) {
    if (codec == BW_PQ_GZIP) {
        z_stream z;
        memset(&z, 0, sizeof z);
        deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (Bytef *)(uintptr_t)body;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)room;
        deflate(&z, Z_FINISH);
        size_t made = z.total_out;
        deflateEnd(&z);
        return made;
    }
    if (codec == BW_PQ_SNAPPY) {
        size_t made = room;
        snappy_compress((const char *)body, n, (char *)out, &made);
        return made;
    }
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, zstd_sized);
    size_t made = ZSTD_compress2(c, out, room, body, n);
    ZSTD_freeCCtx(c);
    return made;
}

TEST(claimed_uncompressed_sizes_allocate_nothing) {
    /* a required int32 page of 4 values, compressed: with its true size it reads; claiming
       2^30 - 1 bytes, more than its few compressed bytes can hold, it is refused before the
       buffer for that is made, by every codec (zstd with and without its content size) */
    uint8_t body[16], compressed[256], file[512];
    for (int32_t i = 0; i < 4; i++)
        memcpy(body + 4 * i, &(int32_t){i + 1}, 4);
    static const int codecs[] = {BW_PQ_GZIP, BW_PQ_SNAPPY, BW_PQ_ZSTD, BW_PQ_ZSTD};
    for (int c = 0; c < 4; c++) {
        size_t n = compress_body(codecs[c], body, sizeof body, compressed, sizeof compressed,
                                 c != 3);
        int64_t rows[] = {2}, lengths[1];
        bw_bytes out;
        char error[BW_PAGES_ERROR_SIZE] = "";
        for (int lie = 0; lie <= 1; lie++) {
            int64_t claimed = lie ? ((int64_t)1 << 30) - 1 : (int64_t)sizeof body;
            size_t h = data_page(file, 4, claimed, (int64_t)n, BW_PQ_PLAIN);
            memcpy(file + h, compressed, n);
            int rc = take_one_page(file, h + n, 4, codecs[c], 4, 0, 0, rows, 1, NULL, 0, &out,
                                   lengths, error);
            CHECK_EQ(rc, lie ? BW_PAGES_MALFORMED : BW_PAGES_OK);
            if (!lie)
                CHECK(out.size == 4 && memcmp(out.data, body + 8, 4) == 0);
            CHECK(largest_allocation < SMALL);
            free(out.data);
            /* the same bytes as a dictionary page */
            h = dictionary_page(file, 4, claimed, (int64_t)n);
            memcpy(file + h, compressed, n);
            uint8_t *buf = exact(file, h + n), *values = NULL;
            size_t values_capacity = 0, count = 0;
            measure_allocations();
            rc = bw_parquet_dictionary(buf, -1, h + n, 0, -1, codecs[c], 4, &values,
                                       &values_capacity, &count, error);
            CHECK_EQ(rc, lie ? BW_PAGES_MALFORMED : BW_PAGES_OK);
            CHECK(lie || count == 4);
            CHECK(largest_allocation < SMALL);
            free(values);
            free(buf);
        }
    }
}

TEST(page_larger_than_a_page_may_be) {
    uint8_t file[64];
    size_t h = data_page(file, 4, ((int64_t)1 << 30) + 1, 16, BW_PQ_PLAIN);
    memset(file + h, 0, 16);
    bw_page_header header;
    size_t header_size;
    char error[BW_PAGES_ERROR_SIZE] = "";
    uint8_t *buf = exact(file, h + 16);
    CHECK_EQ(bw_parquet_page_header(buf, h + 16, &header, &header_size, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "more than the 1073741824 a page may hold") != NULL);
    free(buf);
}

/* A file of `size` bytes (sparse: zeros) whose first bytes are `head` (n of them), open for
   reading through its descriptor. */
static FILE *sparse_file(const uint8_t *head, size_t n, off_t size) {
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL && fwrite(head, 1, n, tmp) == n && fflush(tmp) == 0 &&
          ftruncate(fileno(tmp), size) == 0);
    return tmp;
}

/* The walk, the dictionary reader and a page location of chunk [0, size) of the file at fd,
   each refused saying `message`, with no allocation near SMALL (`location`: the page
   location's size). */
static void every_reader_refuses(int fd, size_t size, int32_t location, const char *message) {
    char error[BW_PAGES_ERROR_SIZE] = "";
    bw_chunk_walk w = {.file = NULL, .fd = fd, .file_size = size, .chunk_start = 0,
                       .chunk_size = (int64_t)size, .group_rows = 4,
                       .codec = BW_PQ_UNCOMPRESSED, .null_count = -1};
    bw_page_location *pages = NULL;
    size_t count = 0;
    measure_allocations();
    CHECK_EQ(bw_parquet_walk_pages(&w, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, message) != NULL);
    CHECK(largest_allocation < SMALL);
    uint8_t *values = NULL;
    size_t values_capacity = 0;
    measure_allocations();
    CHECK_EQ(bw_parquet_dictionary(NULL, fd, size, 0, -1, BW_PQ_UNCOMPRESSED, 4, &values,
                                   &values_capacity, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, message) != NULL);
    CHECK(largest_allocation < SMALL);
    bw_page_location loc = {0, 0, location};
    int64_t rows[] = {0}, lengths[1];
    bw_chunk_take q = {.file = NULL, .fd = fd, .file_size = size, .pages = &loc,
                       .page_count = 1, .group_rows = 4, .codec = BW_PQ_UNCOMPRESSED,
                       .value_width = 4, .rows = rows, .row_count = 1};
    bw_bytes out = {NULL, 0, 0};
    size_t pages_read = 0;
    measure_allocations();
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, message) != NULL);
    CHECK(largest_allocation < SMALL);
    free(out.data);
}

TEST(a_header_refused_for_what_it_says_is_read_no_further) {
    /* a header saying 2^30 + 1 bytes uncompressed at the start of a 64 MiB chunk read through
       the descriptor: refused from the first bytes read, the rest of the chunk never read */
    uint8_t head[64];
    size_t h = data_page(head, 4, ((int64_t)1 << 30) + 1, 16, BW_PQ_PLAIN);
    size_t size = (size_t)64 << 20;
    FILE *tmp = sparse_file(head, h, (off_t)size);
    every_reader_refuses(fileno(tmp), size, 32 << 20, "more than the 1073741824 a page may hold");
    fclose(tmp);
}

TEST(a_header_is_looked_for_in_at_most_16_mib) {
    /* a header with a field claiming 1 GiB (id 9, binary: skipped) in a 64 MiB chunk: looked
       for in 16 MiB at most, as pyarrow looks, whatever the field claims */
    uint8_t head[64];
    size_t n = page_start(head, BW_PQ_DATA_PAGE, 16, 16);
    head[n++] = 0x68; /* field 9 (delta 6): binary */
    n += put_varint(head + n, (uint64_t)1 << 30);
    size_t size = (size_t)64 << 20;
    FILE *tmp = sparse_file(head, n, (off_t)size);
    char error[BW_PAGES_ERROR_SIZE] = "";
    bw_chunk_walk w = {.file = NULL, .fd = fileno(tmp), .file_size = size, .chunk_start = 0,
                       .chunk_size = (int64_t)size, .group_rows = 4,
                       .codec = BW_PQ_UNCOMPRESSED, .null_count = -1};
    bw_page_location *pages = NULL;
    size_t count = 0;
    measure_allocations();
    CHECK_EQ(bw_parquet_walk_pages(&w, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "page header longer than the 16777216 bytes a header may take") != NULL);
    CHECK(largest_allocation <= ((size_t)16 << 20) + 1);
    fclose(tmp);
    /* a header of 3 MiB (a field of that many bytes) is found, the window grown to it */
    size_t pad = (size_t)3 << 20;
    uint8_t *file = malloc(pad + 64 + 16);
    size_t ph = padded_page_header(file, 4, 16, pad);
    for (int32_t i = 0; i < 4; i++)
        memcpy(file + ph + 4 * (size_t)i, &(int32_t){40 + i}, 4);
    tmp = sparse_file(file, ph + 16, (off_t)(ph + 16));
    w.fd = fileno(tmp);
    w.file_size = ph + 16;
    w.chunk_size = (int64_t)(ph + 16);
    CHECK_EQ(bw_parquet_walk_pages(&w, &pages, &count, error), BW_PAGES_OK);
    CHECK(count == 1 && pages[0].compressed_size == (int32_t)(ph + 16));
    free(pages);
    fclose(tmp);
    free(file);
}

TEST(a_page_location_past_the_page_limit_is_refused_before_it_is_read) {
    /* an offset index location of 2^30 + 1 bytes in a file that has them: refused before a
       byte of it is read or a buffer made for it */
    uint8_t head[64];
    size_t h = page_header(head, 4, 16);
    size_t size = ((size_t)1 << 30) + 4096;
    FILE *tmp = sparse_file(head, h, (off_t)size);
    bw_page_location loc = {0, 0, (int32_t)(((int64_t)1 << 30) + 1)};
    int64_t rows[] = {0}, lengths[1];
    bw_chunk_take q = {.file = NULL, .fd = fileno(tmp), .file_size = size, .pages = &loc,
                       .page_count = 1, .group_rows = 4, .codec = BW_PQ_UNCOMPRESSED,
                       .value_width = 4, .rows = rows, .row_count = 1};
    bw_bytes out = {NULL, 0, 0};
    size_t pages_read = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    measure_allocations();
    CHECK_EQ(bw_parquet_take_chunk(&q, &out, lengths, &pages_read, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "page of 1073741825 bytes with its header, more than the 1073741824 a "
                        "page may hold") != NULL);
    CHECK(largest_allocation < SMALL);
    free(out.data);
    fclose(tmp);
}

TEST(the_codec_table_is_indexed_by_number_and_covers_what_the_build_reads) {
    size_t count = 0;
    const bw_parquet_codec *codecs = bw_parquet_codecs(&count);
    CHECK_EQ(count, 8);
    for (size_t i = 0; i < count; i++)
        CHECK_EQ(codecs[i].number, i);
    CHECK(codecs[BW_PQ_UNCOMPRESSED].covered && codecs[BW_PQ_GZIP].covered);
    CHECK(codecs[BW_PQ_SNAPPY].covered && codecs[BW_PQ_ZSTD].covered); /* built with both here */
    CHECK(strcmp(codecs[BW_PQ_ZSTD].name, "ZSTD") == 0 && codecs[4].library == NULL &&
          !codecs[4].covered);
}

RUN_TESTS(fields_by_delta_and_by_id, every_truncation_is_refused, depth_and_lying_counts,
          required_scalar_page, list_page_with_bit_packed_and_rle_levels, offset_index_checks,
          offset_index_leaves_out_pages_without_rows, offset_index_pages_stay_in_their_chunk,
          walker_bounds, walker_rows_of_list_pages,
          walker_leaves_rows_across_v1_pages_to_another_reader,
          dictionary_page_offset_0_is_no_dictionary,
          integers_of_another_type_are_refused,
          descriptor_reads_are_the_memory_reads_and_a_cut_file_is_an_error,
          claimed_values_allocate_nothing, claimed_dictionary_indices_allocate_nothing,
          claimed_list_levels_allocate_nothing, claimed_uncompressed_sizes_allocate_nothing,
          page_larger_than_a_page_may_be, a_header_refused_for_what_it_says_is_read_no_further,
          a_header_is_looked_for_in_at_most_16_mib,
          a_page_location_past_the_page_limit_is_refused_before_it_is_read,
          the_codec_table_is_indexed_by_number_and_covers_what_the_build_reads)
