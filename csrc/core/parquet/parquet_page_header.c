/* Parquet page headers (PageHeader, with its data page header, v1 or v2, or its dictionary
   page header), read by their tables (bw_thrift_read_struct) into a bw_page_header
   (bw_parquet_page_header). See parquet_pages.h. */
#include <stddef.h>
#include <string.h>

#include "parquet_internal.h"

#define HEADER_I32(id, field) {id, BW_THRIFT_I32, offsetof(bw_page_header, field), NULL, NULL}

static const bw_thrift_field_spec data_page_fields[] = {
    HEADER_I32(1, num_values),
    HEADER_I32(2, encoding),
    HEADER_I32(3, def_encoding),
    HEADER_I32(4, rep_encoding),
};
static const bw_thrift_struct data_page_struct = BW_THRIFT_STRUCT_OF(data_page_fields);

static const bw_thrift_field_spec data_page_v2_fields[] = {
    HEADER_I32(1, num_values),
    HEADER_I32(3, num_rows),
    HEADER_I32(4, encoding),
    HEADER_I32(5, def_bytes),
    HEADER_I32(6, rep_bytes),
    {7, BW_THRIFT_TRUE, offsetof(bw_page_header, is_compressed), NULL, NULL},
};
static const bw_thrift_struct data_page_v2_struct = BW_THRIFT_STRUCT_OF(data_page_v2_fields);

static const bw_thrift_field_spec dictionary_page_fields[] = {
    HEADER_I32(1, num_values),
    HEADER_I32(2, encoding),
};
static const bw_thrift_struct dictionary_page_struct =
    BW_THRIFT_STRUCT_OF(dictionary_page_fields);

/* A data page header, v1 or v2: the first of either kind. */
static int read_data_page(bw_thrift *t, bw_page_header *h, bw_pq_refusal *r, int v2) {
    if (h->has_v1 || h->has_v2)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "page header: two data page "
                                               "headers"));
    h->is_compressed = 1; /* v2's default */
    int rc = bw_thrift_read_struct(t, v2 ? &data_page_v2_struct : &data_page_struct, h, r);
    *(v2 ? &h->has_v2 : &h->has_v1) = 1;
    return rc;
}

static int read_data_page_v1(bw_thrift *t, void *target, void *context) {
    return read_data_page(t, target, context, 0);
}

static int read_data_page_v2(bw_thrift *t, void *target, void *context) {
    return read_data_page(t, target, context, 1);
}

static int read_dictionary_page(bw_thrift *t, void *target, void *context) {
    bw_page_header *h = target;
    bw_pq_refusal *r = context;
    if (h->has_dictionary)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "page header: two dictionary page "
                                               "headers"));
    int rc = bw_thrift_read_struct(t, &dictionary_page_struct, h, r);
    h->has_dictionary = 1;
    return rc;
}

static const bw_thrift_field_spec page_header_fields[] = {
    HEADER_I32(1, type),
    HEADER_I32(2, uncompressed_size),
    HEADER_I32(3, compressed_size),
    {5, BW_THRIFT_STRUCT, 0, NULL, read_data_page_v1},
    {7, BW_THRIFT_STRUCT, 0, NULL, read_dictionary_page},
    {8, BW_THRIFT_STRUCT, 0, NULL, read_data_page_v2},
};
static const bw_thrift_struct page_header_struct = BW_THRIFT_STRUCT_OF(page_header_fields);

int bw_pq_parse_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                            size_t *header_size, int *ran_out, char *error) {
    bw_thrift t;
    bw_thrift_init(&t, data, size);
    memset(h, 0, sizeof *h);
    h->type = h->uncompressed_size = h->compressed_size = -1;
    h->num_values = h->encoding = h->def_encoding = h->rep_encoding = -1;
    h->num_rows = h->def_bytes = h->rep_bytes = -1;
    bw_pq_refusal r = {error, BW_PAGES_OK}; /* the context: a handler's refusal */
    int rc = bw_thrift_read_struct(&t, &page_header_struct, h, &r);
    /* only the Thrift reader runs out of bytes: a refusal of the header's own leaves it 0 */
    *ran_out = t.ran_out;
    if (rc != 0)
        return bw_pq_struct_read(rc, &t, &r, "page header", error);
    if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0)
        return bw_pq_malformed(error, "page header: type or sizes missing or negative");
    if ((int64_t)h->uncompressed_size > BW_PQ_MAX_PAGE_BYTES)
        return bw_pq_malformed(error, "page header: %d bytes uncompressed, more than the %lld "
                               "a page may hold", (int)h->uncompressed_size,
                               (long long)BW_PQ_MAX_PAGE_BYTES);
    *header_size = (size_t)(t.pos - data);
    return BW_PAGES_OK;
}

int bw_parquet_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                           size_t *header_size, char *error) {
    int ran_out;
    return bw_pq_parse_page_header(data, size, h, header_size, &ran_out, error);
}
