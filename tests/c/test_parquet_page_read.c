/* The page reader's bytes: a file's bytes found in memory or read through its descriptor (the
   same bytes; a file cut short since is an error saying it changed), a page header looked for
   in a window that grows only while the header runs past it, a page's body read after its
   header, a page past the size a page may take refused before it is read, and a data page's
   levels and values split, v1 and v2, each length checked against the page.
   sources: thrift_compact.c parquet_pages.c parquet_footer.c parquet_offset_index.c
   sources: parquet_page_header.c parquet_page_read.c parquet_levels.c parquet_codec.c
   sources: parquet_walk.c parquet_dictionary.c file_read.c snappy.c buffer_pool.c status.c
   libs: -lz */
#define _POSIX_C_SOURCE 200809L /* fileno, ftruncate */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "parquet_internal.h"
#include "parquet_writer.h"

static pw_writer page;

/* A v1 page at byte 10 of the file: its header with an unknown binary field of `padding`
   bytes (a header longer than the first window read through a descriptor), then a body of
   `body` bytes 0, 1, 2, ... */
static size_t put_page(int padding, int body) {
    pw_reset(&page);
    pw_bytes(&page, "PAR1......", 10);
    static uint8_t pad[1 << 15];
    pw_binary(&page, 100, pad, (size_t)padding); /* before the fields read: the long form */
    pw_data_page_header(&page, body, body, body);
    for (int i = 0; i < body; i++)
        pw_byte(&page, (uint8_t)i);
    return page.len;
}

static FILE *on_disk(size_t n) {
    FILE *f = tmpfile();
    fwrite(page.data, 1, n, f);
    fflush(f);
    return f;
}

TEST(a_page_read_through_the_descriptor_is_the_page_in_memory) {
    for (int padding = 0; padding <= 20000; padding += 5000) {
        size_t n = put_page(padding, 3000);
        FILE *f = on_disk(n);
        uint8_t *file = pw_exact(page.data, n);
        const uint8_t *bodies[2];
        size_t header_sizes[2];
        bw_pq_buffer buffers[2] = {{NULL, 0}, {NULL, 0}};
        for (int via_fd = 0; via_fd < 2; via_fd++) {
            bw_page_header h;
            bw_pq_page p;
            char error[BW_PAGES_ERROR_SIZE] = "";
            CHECK_EQ(bw_pq_read_header_at(via_fd ? NULL : file, fileno(f), n, 10, n - 10,
                                          &buffers[via_fd], &h, &p, error), BW_PAGES_OK);
            CHECK(h.compressed_size == 3000 && h.has_v1);
            /* through the descriptor, 4 KiB first, eight times more only while the header
               ran past what was read, never past the room given */
            size_t window = 4096;
            while (window < p.header_size)
                window *= 8;
            if (via_fd)
                CHECK_EQ(p.available, window < n - 10 ? window : n - 10);
            header_sizes[via_fd] = p.header_size;
            CHECK_EQ(bw_pq_page_body(via_fd ? NULL : file, fileno(f), n, &p, 3000,
                                     &buffers[via_fd], &bodies[via_fd], error), BW_PAGES_OK);
        }
        CHECK_EQ(header_sizes[0], header_sizes[1]);
        CHECK(memcmp(bodies[0], bodies[1], 3000) == 0 && bodies[0][2999] == (uint8_t)2999);
        bw_pq_buffer_free(&buffers[0]);
        bw_pq_buffer_free(&buffers[1]);
        free(file);
        fclose(f);
    }
}

TEST(a_file_cut_under_the_reader_says_it_changed) {
    size_t n = put_page(0, 10000); /* the header's window is read whole: the body is cut */
    FILE *f = on_disk(n);
    CHECK_EQ(ftruncate(fileno(f), (off_t)(n - 100)), 0);
    bw_pq_buffer buffer = {NULL, 0};
    bw_page_header h;
    bw_pq_page p;
    const uint8_t *body;
    char error[BW_PAGES_ERROR_SIZE] = "";
    CHECK_EQ(bw_pq_read_header_at(NULL, fileno(f), n, 10, n - 10, &buffer, &h, &p, error),
             BW_PAGES_OK);
    CHECK_EQ(bw_pq_page_body(NULL, fileno(f), n, &p, 10000, &buffer, &body, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "it changed since it was opened") != NULL);
    const uint8_t *bytes;
    CHECK_EQ(bw_pq_file_bytes(NULL, fileno(f), n, n - 50, 50, &buffer, &bytes, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "it changed since it was opened") != NULL);
    bw_pq_buffer_free(&buffer);
    fclose(f);
}

TEST(a_header_past_its_room_and_a_page_past_its_limit_are_refused) {
    size_t n = put_page(0, 100);
    uint8_t *file = pw_exact(page.data, n);
    bw_pq_buffer buffer = {NULL, 0};
    bw_page_header h;
    bw_pq_page p;
    const uint8_t *body;
    char error[BW_PAGES_ERROR_SIZE] = "";
    /* a room that ends inside the header: as if the file ended there */
    CHECK_EQ(bw_pq_read_header_at(file, -1, n, 10, 5, &buffer, &h, &p, error),
             BW_PAGES_MALFORMED);
    CHECK(strncmp(error, "page header: metadata ends inside", 33) == 0);
    CHECK_EQ(bw_pq_read_header_at(file, -1, n, 10, n - 10, &buffer, &h, &p, error),
             BW_PAGES_OK);
    CHECK_EQ(bw_pq_page_body(file, -1, n, &p, ((size_t)1 << 30), &buffer, &body, error),
             BW_PAGES_MALFORMED);
    CHECK(strstr(error, "bytes with its header, more than the 1073741824 a page may hold") !=
          NULL);
    free(file);
}

/* A v1 page body: repetition levels (4-byte length), definition levels, values. */
TEST(a_data_pages_parts_are_split_and_their_lengths_checked) {
    static const uint8_t body[] = {2, 0, 0, 0, 0xaa, 0xbb, 1, 0, 0, 0, 0xcc, 'v', 'a', 'l'};
    bw_page_header h = {.type = BW_PQ_DATA_PAGE, .uncompressed_size = sizeof body,
                        .compressed_size = sizeof body, .has_v1 = 1};
    bw_pq_scratch s = {0};
    bw_pq_parts d;
    char error[BW_PAGES_ERROR_SIZE] = "";
    uint8_t *copy = pw_exact(body, sizeof body);
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_UNCOMPRESSED, &h, copy, 1, 1, &s, &d, error),
             BW_PAGES_OK);
    CHECK(d.rep_size == 2 && d.rep[0] == 0xaa && d.def_size == 1 && d.def[0] == 0xcc);
    CHECK(d.values_size == 3 && memcmp(d.values, "val", 3) == 0);
    /* only definition levels: the first length is theirs */
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_UNCOMPRESSED, &h, copy, 0, 1, &s, &d, error),
             BW_PAGES_OK);
    CHECK(d.rep == NULL && d.def_size == 2 && d.values_size == sizeof body - 6);
    free(copy);
    /* lengths past the page, a page too short for a length */
    static const uint8_t long_levels[] = {9, 0, 0, 0, 1, 2};
    h.uncompressed_size = h.compressed_size = sizeof long_levels;
    copy = pw_exact(long_levels, sizeof long_levels);
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_UNCOMPRESSED, &h, copy, 1, 0, &s, &d, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "repetition levels of 9 bytes overrun the page");
    h.uncompressed_size = h.compressed_size = 3;
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_UNCOMPRESSED, &h, copy, 0, 1, &s, &d, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "page ends before its definition levels");
    free(copy);
    /* v2: levels first, their lengths in the header */
    static const uint8_t v2[] = {0xaa, 0xcc, 0xdd, 'v'};
    bw_page_header h2 = {.type = BW_PQ_DATA_PAGE_V2, .uncompressed_size = 4,
                         .compressed_size = 4, .has_v2 = 1, .rep_bytes = 1, .def_bytes = 2,
                         .is_compressed = 0};
    copy = pw_exact(v2, sizeof v2);
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_SNAPPY, &h2, copy, 1, 1, &s, &d, error), BW_PAGES_OK);
    CHECK(d.rep_size == 1 && d.def_size == 2 && d.values_size == 1 && d.values[0] == 'v');
    h2.def_bytes = 4;
    CHECK_EQ(bw_pq_read_page_parts(BW_PQ_SNAPPY, &h2, copy, 1, 1, &s, &d, error),
             BW_PAGES_MALFORMED);
    CHECK_BYTES(error, strlen(error), "v2 page levels overrun the page");
    free(copy);
    bw_pq_scratch_free(&s);
}

RUN_TESTS(a_page_read_through_the_descriptor_is_the_page_in_memory,
          a_file_cut_under_the_reader_says_it_changed,
          a_header_past_its_room_and_a_page_past_its_limit_are_refused,
          a_data_pages_parts_are_split_and_their_lengths_checked)
