/* A column chunk's offset index (bw_parquet_offset_index) on indexes written here: the page
   locations read whatever unknown fields surround them, a location without a field or of the
   wrong type refused, the page list held to one list of structs, and every cut refused with
   the reader's reason. (The checks of where pages lie and of their rows: test_parquet_pages.c.)
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

/* A page location, its fields in the order given by `order` (a permutation of 1, 2, 3), with
   unknown fields around them; a field of id `missing` left out. */
static void put_location(pw_writer *w, int64_t offset, int32_t size, int64_t first_row,
                         const int *order, int missing) {
    pw_begin(w, 0);
    pw_unknown_fields(w, 50); /* then the fields asked for, by the long form */
    for (int i = 0; i < 3; i++) {
        int id = order[i];
        if (id == missing)
            continue;
        if (id == 2)
            pw_i32(w, 2, size);
        else
            pw_i64(w, (int16_t)id, id == 1 ? offset : first_row);
    }
    pw_unknown_fields(w, 4);
    pw_end(w);
}

/* Three pages of 100 bytes at 1000, 1100, 1200, first rows 0, 10, 20. */
static void put_index(pw_writer *w, const int *order, int missing) {
    pw_unknown_fields(w, 2);
    pw_list(w, 1, BW_THRIFT_STRUCT, 3);
    for (int i = 0; i < 3; i++)
        put_location(w, 1000 + 100 * i, 100, 10 * i, order, missing);
    pw_list(w, 2, BW_THRIFT_I64, 1); /* first_row_index... any other field: skipped */
    pw_varint(w, 4);
    pw_end(w);
}

static int read_index(const pw_writer *w, size_t n, bw_page_location **pages, size_t *count,
                      char *error) {
    uint8_t *copy = pw_exact(w->data, n);
    int rc = bw_parquet_offset_index(copy, n, 5000, 1000, 300, 30, pages, count, error);
    free(copy);
    return rc;
}

TEST(page_locations_are_read_in_any_field_order) {
    static const int orders[][3] = {{1, 2, 3}, {3, 2, 1}, {2, 3, 1}};
    for (size_t o = 0; o < 3; o++) {
        pw_writer w = {.len = 0};
        put_index(&w, orders[o], 0);
        bw_page_location *pages = NULL;
        size_t count = 0;
        char error[BW_PAGES_ERROR_SIZE] = "";
        CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_OK);
        CHECK_EQ(count, 3);
        for (size_t i = 0; pages != NULL && i < count; i++) {
            CHECK_EQ(pages[i].offset, 1000 + 100 * (int64_t)i);
            CHECK_EQ(pages[i].compressed_size, 100);
            CHECK_EQ(pages[i].first_row, 10 * (int64_t)i);
        }
        free(pages);
    }
}

TEST(a_location_without_a_field_or_of_another_type_is_refused) {
    static const int order[] = {1, 2, 3};
    char error[BW_PAGES_ERROR_SIZE] = "";
    bw_page_location *pages = NULL;
    size_t count = 0;
    for (int missing = 1; missing <= 3; missing++) {
        pw_writer w = {.len = 0};
        put_index(&w, order, missing);
        CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
        CHECK_BYTES(error, strlen(error),
                    "offset index: a page location lacks a field or is negative");
        CHECK(pages == NULL && count == 0);
    }
    /* the size as an i64, the offset as an i32 */
    static const uint8_t wrong[][8] = {{0x19, 0x1c, 0x16, 0x02, 0x16, 0x02, 0x00, 0x00},
                                       {0x19, 0x1c, 0x15, 0x02, 0x00, 0x00, 0x00, 0x00}};
    for (int i = 0; i < 2; i++) {
        pw_writer w = {.len = 0};
        pw_bytes(&w, wrong[i], i == 0 ? 8 : 6);
        CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
        CHECK_BYTES(error, strlen(error),
                    "offset index: integer field of another type in metadata");
    }
}

TEST(the_page_list_is_one_list_of_structs) {
    char error[BW_PAGES_ERROR_SIZE] = "";
    bw_page_location *pages = NULL;
    size_t count = 0;
    pw_writer w = {.len = 0};
    pw_i32(&w, 2, 1);
    pw_end(&w);
    CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "offset index: no page list");
    /* a page list of i64, two page lists */
    pw_reset(&w);
    pw_list(&w, 1, BW_THRIFT_I64, 1);
    pw_varint(&w, 2);
    pw_end(&w);
    CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "offset index: the page list is malformed");
    pw_reset(&w);
    pw_list(&w, 1, BW_THRIFT_STRUCT, 0);
    pw_field(&w, 1, BW_THRIFT_LIST);
    pw_byte(&w, BW_THRIFT_STRUCT);
    pw_end(&w);
    CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "offset index: the page list is malformed");
    /* the page list as a binary: skipped, so there is none */
    pw_reset(&w);
    pw_binary(&w, 1, "pages", 5);
    pw_end(&w);
    CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "offset index: no page list");
    /* an empty page list for a row group with rows */
    pw_reset(&w);
    pw_list(&w, 1, BW_THRIFT_STRUCT, 0);
    pw_end(&w);
    CHECK_EQ(read_index(&w, w.len, &pages, &count, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "offset index: no pages for 30 rows");
}

TEST(every_cut_of_an_index_is_refused_by_the_reader) {
    static const int order[] = {1, 2, 3};
    pw_writer w = {.len = 0};
    put_index(&w, order, 0);
    char error[BW_PAGES_ERROR_SIZE] = "";
    bw_page_location *pages = NULL;
    size_t count = 0;
    for (size_t n = 0; n < w.len; n++) {
        int rc = read_index(&w, n, &pages, &count, error);
        if (rc != BW_PAGES_MALFORMED || strncmp(error, "offset index: ", 14) != 0 ||
            pages != NULL) {
            CHECK(0);
            break;
        }
    }
}

RUN_TESTS(page_locations_are_read_in_any_field_order,
          a_location_without_a_field_or_of_another_type_is_refused,
          the_page_list_is_one_list_of_structs, every_cut_of_an_index_is_refused_by_the_reader)
