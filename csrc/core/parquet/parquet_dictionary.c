/* The dictionary page of a Parquet column chunk, its values decompressed and laid out for
   lookups (bw_parquet_dictionary). See parquet_pages.h. */
#include <string.h>

#include "parquet_internal.h"

/* PLAIN byte arrays (n of them in size bytes) laid out for lookups: a uint64 count, count + 1
   uint64 offsets, the bytes. *out a page buffer of *capacity bytes (bw_pq_page_memory_free). */
static int index_byte_arrays(const uint8_t *plain, size_t size, size_t n, uint8_t **out,
                             size_t *capacity, char *error) {
    size_t at = 0, data_size = 0;
    for (size_t i = 0; i < n; i++) {
        if (size - at < 4 || bw_pq_le32(plain + at) > size - at - 4)
            return bw_pq_malformed(error, "dictionary value %zu overruns its page", i);
        data_size += bw_pq_le32(plain + at);
        at += 4 + (size_t)bw_pq_le32(plain + at);
    }
    void *memory = NULL;
    size_t memory_capacity = 0;
    if (bw_pq_page_memory_reserve(&memory, &memory_capacity, 8 * (n + 2) + data_size) !=
        BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    uint8_t *block = memory;
    uint64_t count = n, offset = 0;
    memcpy(block, &count, 8);
    uint8_t *data = block + 8 * (n + 2);
    at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(block + 8 + 8 * i, &offset, 8);
        uint32_t len = bw_pq_le32(plain + at);
        memcpy(data + offset, plain + at + 4, len);
        offset += len;
        at += 4 + (size_t)len;
    }
    memcpy(block + 8 + 8 * n, &offset, 8);
    *out = block;
    *capacity = memory_capacity;
    return BW_PAGES_OK;
}

int bw_parquet_dictionary(const uint8_t *file, int fd, size_t file_size, int64_t offset,
                          int64_t next_page, int codec, int value_width, uint8_t **values,
                          size_t *capacity, size_t *count, char *error) {
    *values = NULL;
    *capacity = 0;
    *count = 0;
    if (value_width != 0 && value_width != 4 && value_width != 8)
        return BW_PAGES_NOT_COVERED;
    if (offset < 0 || (uint64_t)offset >= file_size)
        return bw_pq_malformed(error, "dictionary page at %lld, outside the file (%zu bytes)",
                               (long long)offset, file_size);
    size_t room = file_size - (size_t)offset;
    bw_pq_buffer buffer = {NULL, 0};
    void *plain = NULL;
    size_t plain_capacity = 0;
    bw_page_header h;
    bw_pq_page page;
    int rc = bw_pq_read_header_at(file, fd, file_size, offset, room, &buffer, &h, &page, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    size_t header_size = page.header_size;
    if (h.type != BW_PQ_DICTIONARY_PAGE || !h.has_dictionary || h.num_values < 0) {
        rc = bw_pq_malformed(error, "no dictionary page at %lld", (long long)offset);
        goto cleanup;
    }
    if (h.encoding != BW_PQ_PLAIN && h.encoding != BW_PQ_PLAIN_DICTIONARY) {
        rc = BW_PAGES_NOT_COVERED;
        goto cleanup;
    }
    if ((uint64_t)h.compressed_size > room - header_size) {
        rc = bw_pq_malformed(error, "dictionary page of %d bytes overruns the file",
                             (int)h.compressed_size);
        goto cleanup;
    }
    /* a chunk's pages follow one another: a dictionary page that does not end where the first
       data page starts has a header that was misread, and a reader walking the chunk from
       its start refuses it */
    int64_t page_end = offset + (int64_t)header_size + (int64_t)h.compressed_size;
    if (next_page >= 0 && page_end != next_page) {
        rc = bw_pq_malformed(error, "dictionary page at %lld ends at %lld, not at the first data "
                             "page (%lld)", (long long)offset, (long long)page_end,
                             (long long)next_page);
        goto cleanup;
    }
    size_t plain_size = (size_t)h.uncompressed_size;
    size_t width = value_width ? (size_t)value_width : 4; /* a byte array: its length at least */
    if ((uint64_t)h.num_values > plain_size / width) {
        rc = bw_pq_malformed(error, "dictionary page of %d values has %zu bytes",
                             (int)h.num_values, plain_size);
        goto cleanup;
    }
    const uint8_t *body;
    rc = bw_pq_page_body(file, fd, file_size, &page, (size_t)h.compressed_size, &buffer, &body,
                         error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    rc = bw_pq_check_plain_size(codec, body, (size_t)h.compressed_size, plain_size, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    rc = bw_pq_page_memory_reserve(&plain, &plain_capacity, plain_size ? plain_size : 1);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    if (codec == BW_PQ_UNCOMPRESSED) {
        memcpy(plain, body, plain_size);
    } else if ((rc = bw_pq_decompress(codec, body, (size_t)h.compressed_size, plain, plain_size,
                                      error)) != BW_PAGES_OK) {
        goto cleanup;
    }
    if (value_width == 0) {
        rc = index_byte_arrays(plain, plain_size, (size_t)h.num_values, values, capacity,
                               error);
        if (rc == BW_PAGES_OK)
            *count = (size_t)h.num_values;
        goto cleanup;
    }
    *values = plain;
    *capacity = plain_capacity;
    plain = NULL;
    *count = (size_t)h.num_values;
cleanup:
    bw_pq_page_memory_free(plain, plain_capacity);
    bw_pq_buffer_free(&buffer);
    return rc;
}
