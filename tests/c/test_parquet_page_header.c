/* Parquet page headers (bw_parquet_page_header, and the reader's own parse that says whether
   the bytes ran out) on headers written here: every kind read whatever unknown fields surround
   it, v2's is_compressed and its default, each header kind held to one, integer fields of
   another type refused, and every cut refused as running out of bytes.
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

static int parse(const pw_writer *w, size_t n, bw_page_header *h, size_t *used, int *ran_out,
                 char *error) {
    uint8_t *copy = pw_exact(w->data, n);
    int rc = bw_pq_parse_page_header(copy, n, h, used, ran_out, error);
    free(copy);
    return rc;
}

/* Parses the header w holds, which must be accepted whole; its fields in *h. */
static void check_accepted(const pw_writer *w, bw_page_header *h) {
    size_t used;
    int ran_out;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(parse(w, w->len, h, &used, &ran_out, error), BW_PAGES_OK);
    CHECK_EQ(used, w->len);
}

TEST(each_kind_of_header_is_read_and_unknown_fields_skipped) {
    pw_writer w = {.len = 0};
    pw_unknown_fields(&w, 20);
    pw_i32(&w, 1, PW_DATA_PAGE_V2);
    pw_i32(&w, 2, 300);
    pw_i32(&w, 3, 200);
    pw_i32(&w, 4, 7); /* crc: skipped */
    pw_begin(&w, 8);
    pw_i32(&w, 1, 50);
    pw_i32(&w, 2, 1); /* num_nulls: skipped */
    pw_i32(&w, 3, 40);
    pw_i32(&w, 4, PW_PLAIN);
    pw_i32(&w, 5, 9);
    pw_i32(&w, 6, 0);
    pw_bool(&w, 7, 0);
    pw_unknown_fields(&w, 8);
    pw_end(&w);
    pw_end(&w);
    size_t len = w.len;
    pw_bytes(&w, "body", 4);
    bw_page_header h;
    size_t used = 0;
    int ran_out = -1;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(parse(&w, w.len, &h, &used, &ran_out, error), BW_PAGES_OK);
    CHECK_EQ(used, len);
    CHECK_EQ(ran_out, 0);
    CHECK(h.type == PW_DATA_PAGE_V2 && h.uncompressed_size == 300 && h.compressed_size == 200);
    CHECK(h.has_v2 && !h.has_v1 && !h.has_dictionary);
    CHECK(h.num_values == 50 && h.num_rows == 40 && h.encoding == PW_PLAIN);
    CHECK(h.def_bytes == 9 && h.rep_bytes == 0 && h.is_compressed == 0);
    CHECK(h.def_encoding == -1 && h.rep_encoding == -1);
    /* v1 and dictionary headers, each with what the other kinds leave at -1 */
    pw_reset(&w);
    pw_data_page_header(&w, 10, 10, 5);
    CHECK_EQ(parse(&w, w.len, &h, &used, &ran_out, error), BW_PAGES_OK);
    CHECK(h.has_v1 && !h.has_v2 && h.num_values == 5 && h.def_encoding == PW_RLE);
    CHECK(h.num_rows == -1 && h.is_compressed == 1);
    pw_reset(&w);
    pw_dictionary_page_header(&w, 16, 16, 4);
    CHECK_EQ(parse(&w, w.len, &h, &used, &ran_out, error), BW_PAGES_OK);
    CHECK(h.has_dictionary && !h.has_v1 && h.num_values == 4 && h.encoding == PW_PLAIN);
}

TEST(v2_is_compressed_unless_it_says_not_and_a_bool_of_another_type_is_skipped) {
    for (int form = 0; form < 3; form++) {
        pw_writer w = {.len = 0};
        pw_i32(&w, 1, PW_DATA_PAGE_V2);
        pw_i32(&w, 2, 3);
        pw_i32(&w, 3, 3);
        pw_begin(&w, 8);
        if (form == 0)
            pw_bool(&w, 7, 1);
        else if (form == 1)
            pw_i32(&w, 7, 0); /* not a bool: skipped, the default stays */
        pw_end(&w);
        pw_end(&w);
        bw_page_header h;
        check_accepted(&w, &h);
        CHECK_EQ(h.is_compressed, 1);
    }
}

/* Ends the `open` structs still open in w, checks that the header it then holds is refused
   with `message` (not for want of bytes), and empties w for the next case. */
static void check_refused(pw_writer *w, int open, const char *message) {
    for (int i = 0; i < open; i++)
        pw_end(w);
    bw_page_header h;
    size_t used;
    int ran_out = -1;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(parse(w, w->len, &h, &used, &ran_out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), message);
    CHECK_EQ(ran_out, 0);
    pw_reset(w);
}

TEST(what_a_header_says_wrongly_is_refused) {
    pw_writer w = {.len = 0};
    pw_data_page_header(&w, 10, 10, 5);
    w.len--; /* the top struct goes on: a second data page header, v2 */
    pw_begin(&w, 8);
    check_refused(&w, 2, "page header: two data page headers");
    pw_dictionary_page_header(&w, 10, 10, 5);
    w.len--;
    pw_field(&w, 7, BW_THRIFT_STRUCT); /* the long form: the same id again */
    check_refused(&w, 2, "page header: two dictionary page headers");
    /* sizes missing or negative, a size past what a page may hold */
    pw_i32(&w, 1, PW_DATA_PAGE);
    pw_i32(&w, 2, 10);
    check_refused(&w, 1, "page header: type or sizes missing or negative");
    pw_data_page_header(&w, (1 << 30) + 1, 10, 5);
    check_refused(&w, 0, "page header: 1073741825 bytes uncompressed, more than the 1073741824 "
                         "a page may hold");
    /* integer fields of another type, at the top and in a data page header */
    pw_i64(&w, 1, PW_DATA_PAGE);
    check_refused(&w, 1, "page header: integer field of another type in metadata");
    pw_i32(&w, 1, PW_DATA_PAGE);
    pw_begin(&w, 5);
    pw_i64(&w, 1, 5);
    check_refused(&w, 2, "page header: integer field of another type in metadata");
    /* a data page header of another type is skipped: the page has none */
    pw_i32(&w, 1, PW_DATA_PAGE);
    pw_i32(&w, 2, 3);
    pw_i32(&w, 3, 3);
    pw_binary(&w, 5, "v1", 2);
    pw_end(&w);
    bw_page_header h;
    check_accepted(&w, &h);
    CHECK(!h.has_v1 && h.num_values == -1);
}

TEST(every_cut_runs_out_and_the_public_reader_says_the_same) {
    pw_writer w = {.len = 0};
    pw_unknown_fields(&w, 20);
    pw_data_page_header(&w, 100, 90, 5);
    for (size_t n = 0; n < w.len; n++) {
        bw_page_header h;
        size_t used;
        int ran_out = 0;
        char error[BW_PAGES_ERROR_SIZE] = "", public_error[BW_PAGES_ERROR_SIZE] = "";
        int rc = parse(&w, n, &h, &used, &ran_out, error);
        uint8_t *copy = pw_exact(w.data, n);
        int public_rc = bw_parquet_page_header(copy, n, &h, &used, public_error);
        free(copy);
        if (rc != BW_PAGES_MALFORMED || !ran_out || strncmp(error, "page header: ", 13) != 0 ||
            public_rc != rc || strcmp(error, public_error) != 0) {
            CHECK(0);
            break;
        }
    }
}

RUN_TESTS(each_kind_of_header_is_read_and_unknown_fields_skipped,
          v2_is_compressed_unless_it_says_not_and_a_bool_of_another_type_is_skipped,
          what_a_header_says_wrongly_is_refused,
          every_cut_runs_out_and_the_public_reader_says_the_same)
