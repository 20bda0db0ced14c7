/* The Parquet footer as the page reader reads it (bw_parquet_index_locations), on footers
   written here: every field it asks for placed, the fields it does not ask for skipped
   wherever they are, the row group and column counts held to what the caller expects, the
   offset index and dictionary page placed inside the file, and every cut of a footer and
   every field of the wrong type refused with the reader's reason.
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

/* A column chunk: its offset index at `index` (length 40; -1: none), its dictionary page at
   `dictionary` (-1: no field), data pages at 100, 4000 bytes, codec 1, 3 nulls; unknown
   fields before, between and after, in ColumnChunk, ColumnMetaData and Statistics. */
static void put_chunk(pw_writer *w, int64_t index, int64_t dictionary, int dictionary_encoded) {
    pw_begin(w, 0);
    pw_binary(w, 1, "path", 4); /* file_path */
    pw_i64(w, 2, 4);           /* file_offset */
    pw_begin(w, 3);            /* meta_data */
    pw_i32(w, 1, 1);           /* type */
    pw_list(w, 2, BW_THRIFT_I32, 2);
    pw_varint(w, pw_zigzag(0));
    pw_varint(w, pw_zigzag(dictionary_encoded ? 8 : 3));
    pw_i32(w, 4, 1);    /* codec */
    pw_i64(w, 5, 1000); /* num_values */
    pw_i64(w, 6, 5000); /* total_uncompressed_size */
    pw_i64(w, 7, 4000); /* total_compressed_size */
    pw_i64(w, 9, 100);  /* data_page_offset */
    if (dictionary >= 0)
        pw_i64(w, 11, dictionary);
    pw_begin(w, 12); /* statistics */
    pw_binary(w, 1, "max", 3);
    pw_i64(w, 3, 3);
    pw_unknown_fields(w, 9);
    pw_end(w);
    pw_unknown_fields(w, 20);
    pw_end(w);
    if (index >= 0) {
        pw_i64(w, 4, index);
        pw_i32(w, 5, 40);
    }
    pw_unknown_fields(w, 30);
    pw_end(w);
}

/* A footer of `groups` row groups of `columns` chunks each (put_chunk), and its file:
   "PAR1", 200 bytes, the footer, its length, "PAR1". */
static size_t put_file(uint8_t *file, int groups, int columns, int64_t index,
                       int64_t dictionary) {
    pw_writer w = {.len = 0};
    pw_i32(&w, 1, 2); /* version */
    pw_unknown_fields(&w, 2);
    pw_list(&w, 4, BW_THRIFT_STRUCT, (uint32_t)groups);
    for (int g = 0; g < groups; g++) {
        pw_begin(&w, 0);
        pw_list(&w, 1, BW_THRIFT_STRUCT, (uint32_t)columns);
        for (int c = 0; c < columns; c++)
            put_chunk(&w, index, dictionary, 1);
        pw_i64(&w, 2, 4000); /* total_byte_size */
        pw_i64(&w, 3, 10);   /* num_rows */
        pw_end(&w);
    }
    pw_binary(&w, 6, "bulkwire tests", 14); /* created_by */
    pw_end(&w);
    memcpy(file, "PAR1", 4);
    memset(file + 4, 0, 200);
    memcpy(file + 204, w.data, w.len);
    size_t at = 204 + w.len;
    for (int i = 0; i < 4; i++)
        file[at + (size_t)i] = (uint8_t)(w.len >> (8 * i));
    memcpy(file + at + 4, "PAR1", 4);
    return at + 8;
}

static uint8_t file_bytes[1 << 17];

/* bw_parquet_index_locations on the n bytes of `file`, copied to a block of exactly n. */
static int locations(const uint8_t *file, size_t n, size_t groups, size_t columns,
                     int64_t *out, char *error) {
    uint8_t *copy = pw_exact(file, n);
    int rc = bw_parquet_index_locations(copy, -1, n, groups, columns, out, error);
    free(copy);
    return rc;
}

TEST(every_field_asked_for_is_placed_and_the_others_skipped) {
    size_t n = put_file(file_bytes, 2, 3, 150, 60);
    int64_t out[BW_CHUNK_FIELDS * 6];
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(locations(file_bytes, n, 2, 3, out, error), BW_PAGES_OK);
    for (int i = 0; i < 6; i++) {
        const int64_t *chunk = out + BW_CHUNK_FIELDS * i;
        CHECK_EQ(chunk[BW_CHUNK_INDEX_OFFSET], 150);
        CHECK_EQ(chunk[BW_CHUNK_INDEX_LENGTH], 40);
        CHECK_EQ(chunk[BW_CHUNK_CODEC], 1);
        CHECK_EQ(chunk[BW_CHUNK_DICTIONARY], 60);
        CHECK_EQ(chunk[BW_CHUNK_START], 60); /* the dictionary page, before the data pages */
        CHECK_EQ(chunk[BW_CHUNK_SIZE], 4000);
        CHECK_EQ(chunk[BW_CHUNK_NULL_COUNT], 3);
    }
    /* no offset index, no dictionary page placed though the encodings list one */
    n = put_file(file_bytes, 1, 1, -1, -1);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_OK);
    CHECK(out[BW_CHUNK_INDEX_OFFSET] == -1 && out[BW_CHUNK_INDEX_LENGTH] == -1);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_DICTIONARY_UNLOCATED);
    CHECK_EQ(out[BW_CHUNK_START], 100);
    /* a dictionary page offset of 0 (the magic) places none; past the file, unlocated */
    n = put_file(file_bytes, 1, 1, -1, 0);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_DICTIONARY_UNLOCATED);
    CHECK_EQ(out[BW_CHUNK_START], 100);
    n = put_file(file_bytes, 1, 1, -1, 1 << 20);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(out[BW_CHUNK_DICTIONARY], BW_DICTIONARY_UNLOCATED);
    /* no row groups at all */
    n = put_file(file_bytes, 0, 0, -1, -1);
    CHECK_EQ(locations(file_bytes, n, 0, 0, out, error), BW_PAGES_OK);
}

TEST(counts_other_than_expected_are_refused) {
    int64_t out[BW_CHUNK_FIELDS * 6];
    char error[BW_PAGES_ERROR_SIZE] = "";
    size_t n = put_file(file_bytes, 2, 3, -1, -1);
    CHECK_EQ(locations(file_bytes, n, 1, 3, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "footer: 2 row groups, expected 1");
    CHECK_EQ(locations(file_bytes, n, 2, 2, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "footer: a row group has 3 columns, the schema 2");
    n = put_file(file_bytes, 0, 0, -1, -1);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "footer: 0 row groups, expected 1");
}

/* A footer made of the given bytes, as a file: "PAR1", 200 bytes, the footer, its length,
   "PAR1". */
static size_t raw_file(uint8_t *file, const pw_writer *w) {
    memcpy(file, "PAR1", 4);
    memset(file + 4, 0, 200);
    memcpy(file + 204, w->data, w->len);
    for (int i = 0; i < 4; i++)
        file[204 + w->len + (size_t)i] = (uint8_t)(w->len >> (8 * i));
    memcpy(file + 208 + w->len, "PAR1", 4);
    return w->len + 212;
}

static void check_refused(const pw_writer *w, size_t groups, const char *message) {
    int64_t out[BW_CHUNK_FIELDS * 4];
    char error[BW_PAGES_ERROR_SIZE] = "";
    size_t n = raw_file(file_bytes, w);
    CHECK_EQ(locations(file_bytes, n, groups, 1, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), message);
}

TEST(lists_the_footer_holds_wrongly_are_refused) {
    pw_writer w = {.len = 0};
    pw_i32(&w, 1, 2);
    pw_end(&w);
    check_refused(&w, 1, "footer: no row group list");
    /* two row group lists */
    pw_reset(&w);
    pw_list(&w, 4, BW_THRIFT_STRUCT, 0);
    pw_field(&w, 4, BW_THRIFT_LIST); /* long form: the same id again */
    pw_byte(&w, BW_THRIFT_STRUCT);
    pw_end(&w);
    check_refused(&w, 0, "footer: the row group list is malformed");
    /* a row group list of i32 */
    pw_reset(&w);
    pw_list(&w, 4, BW_THRIFT_I32, 1);
    pw_varint(&w, 2);
    pw_end(&w);
    check_refused(&w, 1, "footer: the row group list is malformed");
    /* a row group without its column list, and one with a column list of i64 */
    pw_reset(&w);
    pw_list(&w, 4, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_i64(&w, 3, 10);
    pw_end(&w);
    pw_end(&w);
    check_refused(&w, 1, "footer: a row group has no column list");
    pw_reset(&w);
    pw_list(&w, 4, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_list(&w, 1, BW_THRIFT_I64, 1);
    pw_varint(&w, 2);
    pw_end(&w);
    pw_end(&w);
    check_refused(&w, 1, "footer: a row group's column list is malformed");
    /* the row group list as another type is skipped as unknown: then there is none */
    pw_reset(&w);
    pw_binary(&w, 4, "x", 1);
    pw_end(&w);
    check_refused(&w, 1, "footer: no row group list");
}

/* A footer of one chunk whose ColumnChunk or ColumnMetaData has one field of another type. */
static void check_chunk_field_refused(int in_meta, int16_t id, int type, const char *message) {
    pw_writer w = {.len = 0};
    pw_list(&w, 4, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_list(&w, 1, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    if (in_meta)
        pw_begin(&w, 3);
    pw_field(&w, id, type);
    pw_varint(&w, 2);
    if (in_meta)
        pw_end(&w);
    pw_end(&w);
    pw_end(&w);
    pw_end(&w);
    check_refused(&w, 1, message);
}

TEST(integer_fields_of_another_type_are_refused) {
    const char *why = "footer: integer field of another type in metadata";
    check_chunk_field_refused(0, 4, BW_THRIFT_I32, why); /* offset index offset: i64 */
    check_chunk_field_refused(0, 5, BW_THRIFT_I64, why); /* its length: i32 */
    check_chunk_field_refused(1, 4, BW_THRIFT_I64, why); /* codec: i32 */
    check_chunk_field_refused(1, 7, BW_THRIFT_I32, why);
    check_chunk_field_refused(1, 9, BW_THRIFT_I16, why);
    check_chunk_field_refused(1, 11, BW_THRIFT_BYTE, why);
    /* the offset index outside the file */
    pw_writer w = {.len = 0};
    pw_list(&w, 4, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_list(&w, 1, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_i64(&w, 4, 30);
    pw_i32(&w, 5, 100000);
    pw_end(&w);
    pw_end(&w);
    pw_end(&w);
    int64_t out[BW_CHUNK_FIELDS];
    char error[BW_PAGES_ERROR_SIZE] = "";
    size_t n = raw_file(file_bytes, &w);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "offset index at 30, 100000 bytes, outside the file") != NULL);
}

TEST(every_cut_of_a_footer_is_refused) {
    pw_writer w = {.len = 0};
    pw_list(&w, 4, BW_THRIFT_STRUCT, 1);
    pw_begin(&w, 0);
    pw_list(&w, 1, BW_THRIFT_STRUCT, 1);
    put_chunk(&w, 150, 60, 1);
    pw_end(&w);
    pw_end(&w);
    int64_t out[BW_CHUNK_FIELDS];
    char error[BW_PAGES_ERROR_SIZE] = "";
    pw_writer cut = w;
    for (size_t len = 0; len < w.len; len++) {
        cut.len = len;
        size_t n = raw_file(file_bytes, &cut);
        int rc = locations(file_bytes, n, 1, 1, out, error);
        if (rc != BW_PAGES_MALFORMED || strncmp(error, "footer: ", 8) != 0) {
            CHECK(0);
            break;
        }
    }
    /* and the file around it: no magic, a length past the file */
    size_t n = raw_file(file_bytes, &w);
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_OK);
    CHECK_EQ(locations(file_bytes, 11, 1, 1, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "no Parquet footer at the end of the file");
    file_bytes[n - 1] = 'X';
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "no Parquet footer at the end of the file");
    file_bytes[n - 1] = '1';
    file_bytes[n - 6] = 0x7f;
    CHECK_EQ(locations(file_bytes, n, 1, 1, out, error), BW_PAGES_MALFORMED);
    CHECK(strstr(error, "larger than the file") != NULL);
}

RUN_TESTS(every_field_asked_for_is_placed_and_the_others_skipped,
          counts_other_than_expected_are_refused, lists_the_footer_holds_wrongly_are_refused,
          integer_fields_of_another_type_are_refused, every_cut_of_a_footer_is_refused)
