/* The Parquet footer (FileMetaData), as far as page-granular reads need it: where every column
   chunk's offset index is, its codec, its dictionary page, and where its pages start, for a
   walk over their headers (bw_parquet_index_locations). Its structs are read by their tables
   (bw_thrift_read_struct). See parquet_pages.h. */
#include <stddef.h>
#include <string.h>

#include "parquet_internal.h"

/* ---- the structs ----------------------------------------------------------------------- */

/* Statistics: its null count. */
typedef struct {
    int64_t null_count;
} statistics;

/* What ColumnMetaData says of one chunk, -1 for what it does not say: the codec; whether any
   page may be dictionary encoded (the encodings list a dictionary encoding) and where the
   dictionary page is; where the data pages start, the chunk's size and its null count, for a
   walk over its page headers. */
typedef struct {
    int32_t codec;
    int dictionary;
    int64_t dictionary_offset, data_page_offset, total_compressed_size;
    statistics statistics;
} column_meta;

/* ColumnChunk: where its offset index is, and its metadata. */
typedef struct {
    int64_t index_offset;
    int32_t index_length;
    column_meta meta;
} column_chunk;

/* A row group being read: its column list seen, and where its chunks' fields go. */
typedef struct {
    int seen;
    int64_t *out;
} row_group;

/* The footer being read: its row group list seen. */
typedef struct {
    int seen;
} file_meta;

/* What the reading of one footer knows, and its refusal. */
typedef struct {
    bw_pq_refusal refusal;
    size_t file_size, groups, columns;
    int64_t *out;
} footer_reading;

/* ColumnMetaData.encodings: a dictionary encoding among them marks the chunk. */
static int read_encodings(bw_thrift *t, void *target, void *context) {
    (void)context;
    column_meta *m = target;
    int elem;
    uint32_t n;
    if (bw_thrift_list(t, &elem, &n) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        int32_t encoding;
        if (bw_thrift_i32(t, elem, &encoding) < 0)
            return -1;
        if (encoding == BW_PQ_PLAIN_DICTIONARY || encoding == BW_PQ_RLE_DICTIONARY)
            m->dictionary = 1;
    }
    return 0;
}

static const bw_thrift_field_spec statistics_fields[] = {
    {3, BW_THRIFT_I64, offsetof(statistics, null_count), NULL, NULL},
};
static const bw_thrift_struct statistics_struct = BW_THRIFT_STRUCT_OF(statistics_fields);

static const bw_thrift_field_spec column_meta_fields[] = {
    {2, BW_THRIFT_LIST, 0, NULL, read_encodings},
    {4, BW_THRIFT_I32, offsetof(column_meta, codec), NULL, NULL},
    {7, BW_THRIFT_I64, offsetof(column_meta, total_compressed_size), NULL, NULL},
    {9, BW_THRIFT_I64, offsetof(column_meta, data_page_offset), NULL, NULL},
    {11, BW_THRIFT_I64, offsetof(column_meta, dictionary_offset), NULL, NULL},
    {12, BW_THRIFT_STRUCT, offsetof(column_meta, statistics), &statistics_struct, NULL},
};
static const bw_thrift_struct column_meta_struct = BW_THRIFT_STRUCT_OF(column_meta_fields);

static const bw_thrift_field_spec column_chunk_fields[] = {
    {3, BW_THRIFT_STRUCT, offsetof(column_chunk, meta), &column_meta_struct, NULL},
    {4, BW_THRIFT_I64, offsetof(column_chunk, index_offset), NULL, NULL},
    {5, BW_THRIFT_I32, offsetof(column_chunk, index_length), NULL, NULL},
};
static const bw_thrift_struct column_chunk_struct = BW_THRIFT_STRUCT_OF(column_chunk_fields);

static int read_columns(bw_thrift *t, void *target, void *context);
static const bw_thrift_field_spec row_group_fields[] = {
    {1, BW_THRIFT_LIST, 0, NULL, read_columns},
};
static const bw_thrift_struct row_group_struct = BW_THRIFT_STRUCT_OF(row_group_fields);

static int read_row_groups(bw_thrift *t, void *target, void *context);
static const bw_thrift_field_spec file_meta_fields[] = {
    {4, BW_THRIFT_LIST, 0, NULL, read_row_groups},
};
static const bw_thrift_struct file_meta_struct = BW_THRIFT_STRUCT_OF(file_meta_fields);

/* ---- what the footer says of one chunk ------------------------------------------------- */

/* Where the chunk's dictionary page is, by its dictionary_page_offset, or -1: none. Offset 0
   (the file's magic, where no page can be) and below mean none: some writers leave 0 there
   for a chunk without a dictionary. The one reading of that field. */
static int64_t dictionary_page_offset(const column_meta *m) {
    return m->dictionary_offset > 0 ? m->dictionary_offset : -1;
}

/* The chunk's BW_CHUNK_FIELDS at `where`, its offset index checked to lie inside the file. */
static int place_chunk(const column_chunk *c, size_t file_size, int64_t *where, char *error) {
    int64_t offset = c->index_offset;
    int64_t length = c->index_length;
    const column_meta *m = &c->meta;
    if (offset >= 0 || length >= 0) {
        if (offset < 0 || length <= 0 || (uint64_t)offset > file_size ||
            (uint64_t)length > file_size - (uint64_t)offset)
            return bw_pq_malformed(error, "offset index at %lld, %lld bytes, outside the file "
                                   "(%zu bytes)", (long long)offset, (long long)length,
                                   file_size);
    } else {
        offset = length = -1;
    }
    where[BW_CHUNK_INDEX_OFFSET] = offset;
    where[BW_CHUNK_INDEX_LENGTH] = length;
    where[BW_CHUNK_CODEC] = m->codec;
    /* a dictionary page the footer places must lie inside the file (its header is checked
       when it is read); pages dictionary encoded without one placed are not read here */
    const int64_t dictionary = dictionary_page_offset(m);
    if (dictionary >= 0 && (uint64_t)dictionary >= file_size)
        where[BW_CHUNK_DICTIONARY] = BW_DICTIONARY_UNLOCATED;
    else if (dictionary >= 0)
        where[BW_CHUNK_DICTIONARY] = dictionary;
    else
        where[BW_CHUNK_DICTIONARY] = m->dictionary ? BW_DICTIONARY_UNLOCATED : BW_NO_DICTIONARY;
    /* the chunk starts at its dictionary page when it has one before the data pages */
    int64_t start = m->data_page_offset;
    if (dictionary >= 0 && (start < 0 || dictionary < start))
        start = dictionary;
    where[BW_CHUNK_START] = start;
    where[BW_CHUNK_SIZE] = m->total_compressed_size;
    where[BW_CHUNK_NULL_COUNT] = m->statistics.null_count;
    return BW_PAGES_OK;
}

/* ---- the lists ------------------------------------------------------------------------- */

/* RowGroup.columns: exactly the schema's columns, each chunk's fields placed. */
static int read_columns(bw_thrift *t, void *target, void *context) {
    row_group *g = target;
    footer_reading *f = context;
    bw_pq_refusal *r = &f->refusal;
    uint32_t n;
    if (bw_pq_struct_list(t, &g->seen, &n) < 0)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "footer: a row group's column list "
                                               "is malformed"));
    if (n != f->columns)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "footer: a row group has %u columns, "
                                               "the schema %zu", (unsigned)n, f->columns));
    for (uint32_t c = 0; c < n; c++) {
        column_chunk chunk = {-1, -1, {-1, 0, -1, -1, -1, {-1}}};
        int rc = bw_thrift_read_struct(t, &column_chunk_struct, &chunk, f);
        if (rc != 0)
            return rc;
        rc = place_chunk(&chunk, f->file_size, g->out + BW_CHUNK_FIELDS * c, r->error);
        if (rc != BW_PAGES_OK)
            return bw_pq_refuse(r, rc);
    }
    return 0;
}

/* FileMetaData.row_groups: exactly the row groups expected, each with its column list. */
static int read_row_groups(bw_thrift *t, void *target, void *context) {
    file_meta *m = target;
    footer_reading *f = context;
    bw_pq_refusal *r = &f->refusal;
    uint32_t n;
    if (bw_pq_struct_list(t, &m->seen, &n) < 0)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "footer: the row group list is "
                                               "malformed"));
    if (n != f->groups)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "footer: %u row groups, expected %zu",
                                               (unsigned)n, f->groups));
    for (uint32_t i = 0; i < n; i++) {
        row_group g = {0, f->out + BW_CHUNK_FIELDS * f->columns * i};
        int rc = bw_thrift_read_struct(t, &row_group_struct, &g, f);
        if (rc != 0)
            return rc;
        if (!g.seen)
            return bw_pq_refuse(r, bw_pq_malformed(r->error, "footer: a row group has no "
                                                   "column list"));
    }
    return 0;
}

/* ---- the footer ------------------------------------------------------------------------ */

/* The footer at `footer` (footer_size bytes) of a file of file_size bytes. */
static int read_footer(const uint8_t *footer, uint32_t footer_size, size_t file_size,
                       size_t groups, size_t columns, int64_t *out, char *error) {
    bw_thrift t;
    bw_thrift_init(&t, footer, footer_size);
    footer_reading f = {{error, BW_PAGES_OK}, file_size, groups, columns, out};
    file_meta m = {0};
    int rc = bw_thrift_read_struct(&t, &file_meta_struct, &m, &f);
    rc = bw_pq_struct_read(rc, &t, &f.refusal, "footer", error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (!m.seen && groups != 0)
        return bw_pq_malformed(error, "footer: no row group list");
    return BW_PAGES_OK;
}

int bw_parquet_index_locations(const uint8_t *file, int fd, size_t file_size, size_t groups,
                               size_t columns, int64_t *out, char *error) {
    if (file_size < 12)
        return bw_pq_malformed(error, "no Parquet footer at the end of the file");
    bw_pq_buffer buffer = {NULL, 0};
    const uint8_t *tail;
    int rc = bw_pq_file_bytes(file, fd, file_size, file_size - 8, 8, &buffer, &tail, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    if (memcmp(tail + 4, "PAR1", 4) != 0) {
        rc = bw_pq_malformed(error, "no Parquet footer at the end of the file");
        goto cleanup;
    }
    uint32_t footer_size = bw_pq_le32(tail);
    if ((uint64_t)footer_size > file_size - 12) {
        rc = bw_pq_malformed(error, "footer length %u larger than the file",
                             (unsigned)footer_size);
        goto cleanup;
    }
    const uint8_t *footer;
    rc = bw_pq_file_bytes(file, fd, file_size, file_size - 8 - footer_size, footer_size,
                          &buffer, &footer, error);
    if (rc == BW_PAGES_OK)
        rc = read_footer(footer, footer_size, file_size, groups, columns, out, error);
cleanup:
    bw_pq_buffer_free(&buffer);
    return rc;
}
