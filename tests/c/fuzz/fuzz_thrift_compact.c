/* libFuzzer target: the Thrift compact reader and the Parquet page reader on hostile bytes.
   The first byte picks what the rest is read as: a struct skipped whole, a page header (and
   the rest walked as a column chunk's pages), an offset index, a footer (the rest as a whole
   file), or a one-page column chunk read with levels, width and codec taken from the next
   bytes (bit 6: with a dictionary of four values, bit 7: BYTE_ARRAY values, one per row).
   The input is a heap block of exactly its size, so any read past it stops the run; every
   success must stay inside it, and a chunk read must hand back exactly its rows' values. The
   runner's memory limits make an input that has the reader allocate far more than its bytes
   can hold a finding (the bomb-* seeds: headers claiming 2^31 values or a 1 GiB page).
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -DBW_HAVE_ZSTD -lzstd -lz */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parquet_pages.h"
#include "thrift_compact.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

static const int codecs[] = {BW_PQ_UNCOMPRESSED, BW_PQ_SNAPPY, BW_PQ_GZIP, BW_PQ_ZSTD};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    int mode = data[0] % 5;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    char error[BW_PAGES_ERROR_SIZE];
    switch (mode) {
    case 0: {
        bw_thrift t;
        bw_thrift_init(&t, in, n);
        int rc = bw_thrift_skip(&t, BW_THRIFT_STRUCT);
        REQUIRE(t.pos >= in && t.pos <= in + n);
        REQUIRE((rc == 0) == (t.error == NULL));
        break;
    }
    case 1: {
        bw_page_header h;
        size_t used = 0;
        if (bw_parquet_page_header(in, n, &h, &used, error) == BW_PAGES_OK)
            REQUIRE(used <= n && h.uncompressed_size >= 0 && h.compressed_size >= 0);
        /* the same bytes as a column chunk without an offset index, its page headers walked
           to their end (a row count no page adds up to, so every page is walked) */
        bw_chunk_walk walk = {.file = in, .file_size = n, .chunk_start = 0,
                              .chunk_size = (int64_t)n, .group_rows = INT64_MAX,
                              .codec = codecs[n % 4], .max_rep = (int)(n >> 2) & 1,
                              .list_size = (int64_t)((n >> 3) & 3),
                              .null_count = (n >> 5) & 1 ? 0 : -1};
        bw_page_location *pages = NULL;
        size_t count = 0;
        REQUIRE(bw_parquet_walk_pages(&walk, &pages, &count, error) != BW_PAGES_OK &&
                pages == NULL && count == 0);
        break;
    }
    case 2: {
        bw_page_location *pages = NULL;
        size_t count = 0;
        /* a chunk of bytes 64 to 3072 of a 4096-byte file */
        if (bw_parquet_offset_index(in, n, 4096, 64, 3008, 1000, &pages, &count, error) ==
            BW_PAGES_OK) {
            for (size_t i = 0; i < count; i++) {
                REQUIRE(pages[i].offset >= 64 &&
                        pages[i].offset + pages[i].compressed_size <= 3072);
                REQUIRE(i == 0 ||
                        pages[i].offset >= pages[i - 1].offset + pages[i - 1].compressed_size);
                REQUIRE(pages[i].first_row < 1000 &&
                        (i == 0 ? pages[i].first_row == 0
                                : pages[i].first_row > pages[i - 1].first_row));
            }
        }
        free(pages);
        break;
    }
    case 3: {
        int64_t out[BW_CHUNK_FIELDS * 2 * 2];
        if (bw_parquet_index_locations(in, -1, n, 2, 2, out, error) == BW_PAGES_OK)
            for (int i = 0; i < 4; i++) {
                const int64_t *chunk = out + BW_CHUNK_FIELDS * i;
                REQUIRE(chunk[0] == -1 ||
                        (chunk[0] >= 0 && (size_t)(chunk[0] + chunk[1]) <= n));
                /* a dictionary page is placed inside the file and never at 0, its magic */
                const int64_t dictionary = chunk[BW_CHUNK_DICTIONARY];
                REQUIRE(dictionary == BW_NO_DICTIONARY || dictionary == BW_DICTIONARY_UNLOCATED ||
                        (dictionary > 0 && (size_t)dictionary < n));
            }
        break;
    }
    default: {
        if (n < 4)
            return 0;
        /* parameters, then the page as the whole "file" */
        int width = in[0] & 0x80 ? 0 : in[0] & 1 ? 8 : 4;
        int max_rep = width ? (in[0] >> 1) & 1 : 0, max_def = (in[0] >> 2) & 3;
        /* a byte array dictionary in bw_parquet_dictionary's layout: "", "a", "bc", "def" */
        static const uint64_t byte_dictionary[] = {4, 0, 0, 1, 3, 6, 0x666564636261};
        static const uint64_t fixed_dictionary[] = {1, 2, 3, 4};
        const uint8_t *dictionary = NULL;
        size_t dictionary_size = 0;
        if (in[0] & 0x40) {
            dictionary = (const uint8_t *)(width ? fixed_dictionary : byte_dictionary);
            dictionary_size = width ? 4 * (size_t)width : 6 * 8 + 6;
        }
        int codec = codecs[(in[0] >> 4) & 3];
        int64_t group_rows = 1 + in[1];
        int64_t list_size = in[2] & 3;
        int64_t rows[8];
        size_t row_count = 0;
        for (int64_t r = in[3] % group_rows; r < group_rows && row_count < 8; r += 1 + in[3] % 7)
            rows[row_count++] = r;
        bw_page_location loc = {0, 0, (int32_t)(n - 4)};
        if (n - 4 == 0)
            return 0;
        /* A list page with a dictionary holds as many values as its header says in a few
           bytes (one RLE run of one index): a row of 2^31 values is its data, not a bomb, and
           would trip the memory limit by the output alone. Such pages are read here only
           when they claim at most 2^20 values; everything else the reader allocates is
           bounded by the page's bytes and the rows asked for, whatever the header says. */
        bw_page_header header;
        size_t header_size;
        if (dictionary != NULL && max_rep > 0 && list_size == 0 &&
            bw_parquet_page_header(in + 4, n - 4, &header, &header_size, error) == BW_PAGES_OK &&
            header.num_values > (1 << 20))
            return 0;
        uint8_t *file = malloc(n - 4);
        memcpy(file, in + 4, n - 4);
        bw_chunk_take q = {.file = file, .file_size = n - 4, .pages = &loc, .page_count = 1,
                           .group_rows = group_rows, .codec = codec, .value_width = width,
                           .max_rep = max_rep, .max_def = max_def, .list_size = list_size,
                           .rows = rows, .row_count = row_count, .dictionary = dictionary,
                           .dictionary_count = width ? 4 : 0,
                           .dictionary_size = dictionary_size};
        bw_bytes values = {NULL, 0, 0};
        int64_t lengths[8];
        size_t pages_read = 0;
        if (bw_parquet_take_chunk(&q, &values, lengths, &pages_read, error) == BW_PAGES_OK) {
            size_t total = 0;
            for (size_t i = 0; i < row_count; i++) {
                if (width == 0) { /* bytes of the value, -1 for a null (a PLAIN page of a
                                     dictionary chunk holds any length) */
                    REQUIRE(lengths[i] >= -1);
                    total += lengths[i] > 0 ? (size_t)lengths[i] : 0;
                    continue;
                }
                REQUIRE(lengths[i] >= 0);
                if (max_rep == 0)
                    REQUIRE(lengths[i] == 1 || (max_def > 0 && lengths[i] == 0));
                else if (list_size > 0)
                    REQUIRE(lengths[i] == list_size);
                /* a null scalar keeps its zeroed slot */
                total += max_rep == 0 ? 1 : (size_t)lengths[i];
            }
            REQUIRE(values.size == total * (size_t)(width ? width : 1));
            REQUIRE(row_count == 0 || pages_read == 1);
        }
        free(values.data);
        free(file);
        break;
    }
    }
    return 0;
}
