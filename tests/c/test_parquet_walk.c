/* A column chunk without an offset index, walked page header by page header
   (bw_parquet_walk_pages) on chunks written here: a dictionary page first skipped, pages of
   another kind skipped, each data page's rows (v1: its values; v2: its num_rows) placed, the
   rows held to the row group's, and a dictionary page elsewhere, a page past the chunk's end,
   a chunk outside the file or a header the reader refuses each refused saying where.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -lz */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parquet_pages.h"
#include "parquet_writer.h"

static pw_writer w;
static size_t offsets[8];

/* The chunk from byte 4: a dictionary page (when `dictionary`), data pages of `rows[i]` rows
   (8 bytes each, PLAIN int64), an index page (type 1, skipped) after the first. */
static size_t put_chunk(int dictionary, const int *rows, int pages) {
    w.len = 0;
    pw_bytes(&w, "PAR1", 4);
    int k = 0;
    if (dictionary) {
        offsets[k++] = w.len;
        w.last[0] = 0;
        pw_dictionary_page_header(&w, 16, 16, 2);
        pw_bytes(&w, "0123456789abcdef", 16);
    }
    for (int i = 0; i < pages; i++) {
        offsets[k++] = w.len;
        w.last[0] = 0;
        pw_data_page_header(&w, 8 * rows[i], 8 * rows[i], rows[i]);
        for (int j = 0; j < 8 * rows[i]; j++)
            pw_byte(&w, (uint8_t)j);
        if (i == 0) {
            w.last[0] = 0;
            pw_i32(&w, 1, 1); /* INDEX_PAGE */
            pw_i32(&w, 2, 3);
            pw_i32(&w, 3, 3);
            pw_end(&w);
            pw_bytes(&w, "idx", 3);
        }
    }
    return w.len;
}

static int walk(size_t n, int64_t start, int64_t size, int64_t group_rows,
                bw_page_location **pages, size_t *count, char *error) {
    uint8_t *file = pw_exact(w.data, n);
    bw_chunk_walk walk = {.file = file, .fd = -1, .file_size = n, .chunk_start = start,
                          .chunk_size = size, .group_rows = group_rows,
                          .codec = BW_PQ_UNCOMPRESSED, .max_rep = 0, .list_size = 0,
                          .null_count = -1};
    int rc = bw_parquet_walk_pages(&walk, pages, count, error);
    free(file);
    return rc;
}

TEST(the_walk_places_every_data_page_and_its_rows) {
    static const int rows[] = {5, 3, 7};
    size_t n = put_chunk(1, rows, 3);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(walk(n, 4, (int64_t)n - 4, 15, &pages, &count, error), BW_PAGES_OK);
    CHECK_EQ(count, 3);
    int64_t first = 0;
    for (size_t i = 0; pages != NULL && i < count; i++) {
        CHECK_EQ(pages[i].offset, offsets[i + 1]);
        CHECK_EQ(pages[i].first_row, first);
        first += rows[i];
    }
    CHECK_EQ(pages[1].compressed_size, offsets[3] - offsets[2]);
    free(pages);
    /* rows other than the row group's */
    CHECK_EQ(walk(n, 4, (int64_t)n - 4, 16, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "the column chunk's pages hold 15 rows, its row group 16");
    CHECK_EQ(walk(n, 4, (int64_t)n - 4, 10, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "hold more than the row group's 10 rows") != NULL);
    CHECK(pages == NULL && count == 0);
}

TEST(what_lies_outside_the_chunk_or_out_of_place_is_refused) {
    static const int rows[] = {5, 3};
    size_t n = put_chunk(1, rows, 2);
    bw_page_location *pages = NULL;
    size_t count = 0;
    char error[BW_PAGES_ERROR_SIZE] = "", want[BW_PAGES_ERROR_SIZE];
    /* the chunk starting at its first data page, the dictionary page after it */
    CHECK_EQ(walk(n, (int64_t)offsets[1], (int64_t)(n - offsets[1]), 8, &pages, &count, error),
             BW_PAGES_OK);
    free(pages);
    w.len = offsets[1];
    w.last[0] = 0;
    pw_dictionary_page_header(&w, 16, 16, 2);
    pw_bytes(&w, "0123456789abcdef", 16);
    CHECK_EQ(walk(w.len, 4, (int64_t)w.len - 4, 5, &pages, &count, error), BW_PAGES_MALFORMED);
    snprintf(want, sizeof want, "dictionary page at %zu is not its chunk's first page",
             offsets[1]);
    CHECK_BYTES(error, strlen(error), want);
    /* a chunk that ends inside its last page, and one outside the file */
    n = put_chunk(0, rows, 2);
    CHECK_EQ(walk(n, 4, (int64_t)n - 5, 8, &pages, &count, error), BW_PAGES_MALFORMED);
    snprintf(want, sizeof want, "page at %zu of 24 bytes runs past its column chunk's end at %zu",
             offsets[1], n - 1);
    CHECK_BYTES(error, strlen(error), want);
    CHECK_EQ(walk(n, 4, (int64_t)n, 8, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "outside the file") != NULL);
    /* a header the reader refuses: said with where it is */
    w.data[offsets[1]] = 0x16; /* its type as an i64 */
    CHECK_EQ(walk(n, 4, (int64_t)n - 4, 8, &pages, &count, error), BW_PAGES_MALFORMED);
    snprintf(want, sizeof want, "page at %zu: page header: integer field of another type in "
             "metadata", offsets[1]);
    CHECK_BYTES(error, strlen(error), want);
}

RUN_TESTS(the_walk_places_every_data_page_and_its_rows,
          what_lies_outside_the_chunk_or_out_of_place_is_refused)
