/* The dictionary page of a column chunk (bw_parquet_dictionary) on pages written here: PLAIN
   values of 4 or 8 bytes handed back as they are, byte arrays laid out for lookups (a count,
   offsets, the bytes), and a page that is not a dictionary page, does not end at the first
   data page, claims more values than its bytes hold or lies outside the file refused; an
   encoding other than PLAIN not covered.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -lz */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_pool.h"
#include "check.h"
#include "parquet_pages.h"
#include "parquet_writer.h"

static pw_writer w;

/* "PAR1", then a dictionary page of `values` values in the `body` bytes. */
static size_t put_dictionary(const void *body, int32_t size, int32_t values) {
    pw_reset(&w);
    pw_bytes(&w, "PAR1", 4);
    pw_dictionary_page_header(&w, size, size, values);
    pw_bytes(&w, body, (size_t)size);
    return w.len;
}

static int dictionary(size_t n, int64_t next_page, int width, uint8_t **values,
                      size_t *capacity, size_t *count, char *error) {
    uint8_t *file = pw_exact(w.data, n);
    int rc = bw_parquet_dictionary(file, -1, n, 4, next_page, BW_PQ_UNCOMPRESSED, width, values,
                                   capacity, count, error);
    free(file);
    return rc;
}

TEST(plain_values_and_byte_arrays) {
    static const int32_t ints[] = {7, -1, 40000, 3};
    size_t n = put_dictionary(ints, sizeof ints, 4);
    uint8_t *values = NULL;
    size_t capacity = 0, count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(dictionary(n, (int64_t)n, 4, &values, &capacity, &count, error), BW_PAGES_OK);
    CHECK(count == 4 && memcmp(values, ints, sizeof ints) == 0);
    bw_page_buffer_release(values, capacity);
    /* byte arrays "ab", "", "xyz" */
    static const uint8_t arrays[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 3, 0, 0, 0, 'x', 'y', 'z'};
    n = put_dictionary(arrays, sizeof arrays, 3);
    CHECK_EQ(dictionary(n, -1, 0, &values, &capacity, &count, error), BW_PAGES_OK);
    CHECK_EQ(count, 3);
    uint64_t header[5];
    memcpy(header, values, sizeof header);
    CHECK(header[0] == 3 && header[1] == 0 && header[2] == 2 && header[3] == 2 && header[4] == 5);
    CHECK(memcmp(values + 40, "abxyz", 5) == 0);
    bw_page_buffer_release(values, capacity);
    /* a byte array running past the page */
    static const uint8_t past[] = {2, 0, 0, 0, 'a', 'b', 9, 0, 0, 0, 'x'};
    n = put_dictionary(past, sizeof past, 2);
    CHECK_EQ(dictionary(n, -1, 0, &values, &capacity, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "dictionary value 1 overruns its page");
}

TEST(pages_that_are_not_the_chunks_dictionary_are_refused) {
    static const int64_t longs[] = {1, 2};
    size_t n = put_dictionary(longs, sizeof longs, 2);
    uint8_t *values = NULL;
    size_t capacity = 0, count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "", want[BW_PAGES_ERROR_SIZE];
    CHECK_EQ(dictionary(n, (int64_t)n + 1, 8, &values, &capacity, &count, error),
             BW_PAGES_MALFORMED);
    snprintf(want, sizeof want, "dictionary page at 4 ends at %zu, not at the first data page "
             "(%zu)", n, n + 1);
    CHECK_BYTES(error, strlen(error), want);
    n = put_dictionary(longs, sizeof longs, 3);
    CHECK_EQ(dictionary(n, -1, 8, &values, &capacity, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "dictionary page of 3 values has 16 bytes");
    /* a data page where the dictionary page should be */
    w.len = 4;
    w.last[0] = 0;
    pw_data_page_header(&w, 16, 16, 2);
    pw_bytes(&w, longs, sizeof longs);
    CHECK_EQ(dictionary(w.len, -1, 8, &values, &capacity, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "no dictionary page at 4");
    /* outside the file; an encoding other than PLAIN; a width this reader does not take */
    uint8_t *file = pw_exact(w.data, 4);
    CHECK_EQ(bw_parquet_dictionary(file, -1, 4, 4, -1, BW_PQ_UNCOMPRESSED, 8, &values,
                                   &capacity, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "dictionary page at 4, outside the file (4 bytes)");
    free(file);
    n = put_dictionary(longs, sizeof longs, 2);
    w.data[w.len - 16 - 3] = 2 * PW_RLE; /* the encoding (zigzag), before two stops */
    CHECK_EQ(dictionary(n, -1, 8, &values, &capacity, &count, error), BW_PAGES_NOT_COVERED);
    CHECK_EQ(dictionary(n, -1, 2, &values, &capacity, &count, error), BW_PAGES_NOT_COVERED);
    CHECK(values == NULL && count == 0);
}

RUN_TESTS(plain_values_and_byte_arrays, pages_that_are_not_the_chunks_dictionary_are_refused)
