/* Parquet page-granular reads: see parquet_pages.h. */
#include "parquet_pages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buffer_pool.h"
#include "file_read.h"
#include "snappy.h"
#include "thrift_compact.h"

#ifdef BW_HAVE_ZSTD
#include <zstd.h>
#else
#include <stdatomic.h>
#endif

/* A page larger than this uncompressed, or whose bytes in the file (its header and
   compressed body) are more than this, is refused before anything is read or allocated for
   it. */
#define MAX_PAGE_BYTES ((int64_t)1 << 30)

/* A page header is looked for in at most this many bytes, whatever lengths its fields claim:
   a longer one is refused, as pyarrow's reader refuses it. */
#define MAX_PAGE_HEADER_BYTES ((size_t)16 << 20)

static int malformed(char *error, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, BW_PAGES_ERROR_SIZE, format, args);
    va_end(args);
    return BW_PAGES_MALFORMED;
}

static int thrift_failed(const bw_thrift *t, const char *what, char *error) {
    return malformed(error, "%s: %s", what, t->error ? t->error : "malformed");
}

static uint32_t read_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t read_le64(const uint8_t *p) {
    return (uint64_t)read_le32(p) | (uint64_t)read_le32(p + 4) << 32;
}

/* ---- the file's bytes ------------------------------------------------------------------ */

/* Memory that bytes of a file read through its descriptor are read into. */
typedef struct {
    uint8_t *data;
    size_t capacity;
} read_buffer;

/* Room for `need` bytes in *data (*capacity bytes; NULL: none yet), what it holds kept.
   Blocks of a page's size come from the page buffer pool and go back to it
   (page_memory_free), so a page read into one touches memory already backed by pages, even
   in a file opened for one lookup. A small block (a page header's window) that must hold a
   page moves to a pooled one: growing it in place would take fresh pages. */
static int page_memory_reserve(void **data, size_t *capacity, size_t need) {
    if (need <= *capacity)
        return BW_PAGES_OK;
    if (*data != NULL && *capacity >= BW_PAGE_POOL_SMALLEST) {
        void *grown = realloc(*data, need); /* a pooled block: mremap keeps its pages */
        if (grown == NULL)
            return BW_PAGES_NO_MEMORY;
        *data = grown;
        *capacity = need;
        return BW_PAGES_OK;
    }
    size_t got;
    void *fresh = bw_page_buffer_acquire(need, &got);
    if (fresh == NULL)
        return BW_PAGES_NO_MEMORY;
    if (*data != NULL) {
        memcpy(fresh, *data, *capacity);
        free(*data);
    }
    *data = fresh;
    *capacity = got;
    return BW_PAGES_OK;
}

static void page_memory_free(void *data, size_t capacity) {
    bw_page_buffer_release(data, capacity);
}

/* Room for `length` bytes (and one more) in the buffer, what it holds kept. */
static int buffer_reserve(read_buffer *buffer, size_t length) {
    return page_memory_reserve((void **)&buffer->data, &buffer->capacity, length + 1);
}

static void buffer_free(read_buffer *buffer) { page_memory_free(buffer->data, buffer->capacity); }

/* Reads bytes [offset, offset + length) of the file `fd` into out (see file_bytes). */
static int read_into(int fd, uint8_t *out, size_t length, uint64_t offset, size_t file_size,
                     char *error) {
    int rc = bw_read_exact(fd, out, length, offset, file_size, error, BW_PAGES_ERROR_SIZE);
    if (rc != BW_READ_OK)
        return rc == BW_READ_SHORT ? BW_PAGES_MALFORMED : BW_PAGES_READ_FAILED;
    return BW_PAGES_OK;
}

/* Bytes [offset, offset + length) of the file, which the caller checked lie inside its
   file_size bytes: *bytes points into `file` when the whole file is in memory, else (file
   NULL) at `buffer`, where they were read from `fd`. A file that ends sooner than file_size
   changed since its size was taken (cut short, or replaced in place): malformed, saying so,
   never a read past its end. A read that fails is BW_PAGES_READ_FAILED. */
static int file_bytes(const uint8_t *file, int fd, size_t file_size, uint64_t offset,
                      size_t length, read_buffer *buffer, const uint8_t **bytes, char *error) {
    if (file != NULL) {
        *bytes = file + offset;
        return BW_PAGES_OK;
    }
    int rc = buffer_reserve(buffer, length);
    if (rc == BW_PAGES_OK)
        rc = read_into(fd, buffer->data, length, offset, file_size, error);
    if (rc == BW_PAGES_OK)
        *bytes = buffer->data;
    return rc;
}

/* ---- footer ---------------------------------------------------------------------------- */

/* Statistics: the null count (*null_count, left alone when absent). */
static int read_statistics(bw_thrift *t, int64_t *null_count) {
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return -1;
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return -1;
        if (type == BW_THRIFT_STOP)
            break;
        if ((id == 3 ? bw_thrift_i64(t, type, null_count) : bw_thrift_skip(t, type)) < 0)
            return -1;
    }
    return bw_thrift_struct_end(t);
}

/* What ColumnMetaData says of one chunk, -1 for what it does not say. */
typedef struct {
    int64_t codec, dictionary, dictionary_offset, data_page_offset, total_compressed_size,
        null_count;
} column_meta;

/* Where the chunk's dictionary page is, by its dictionary_page_offset, or -1: none. Offset 0
   (the file's magic, where no page can be) and below mean none: some writers leave 0 there
   for a chunk without a dictionary. The one reading of that field. */
static int64_t dictionary_page_offset(const column_meta *m) {
    return m->dictionary_offset > 0 ? m->dictionary_offset : -1;
}

/* ColumnMetaData: the codec; whether any page may be dictionary encoded (dictionary 1: the
   encodings list a dictionary encoding) and where the dictionary page is; where the data
   pages start, the chunk's size and its null count, for a walk over its page headers. */
static int read_column_meta(bw_thrift *t, column_meta *m) {
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return -1;
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return -1;
        if (type == BW_THRIFT_STOP)
            break;
        int rc;
        if (id == 4) {
            int32_t codec;
            rc = bw_thrift_i32(t, type, &codec);
            m->codec = codec;
        } else if (id == 7) {
            rc = bw_thrift_i64(t, type, &m->total_compressed_size);
        } else if (id == 9) {
            rc = bw_thrift_i64(t, type, &m->data_page_offset);
        } else if (id == 11) {
            rc = bw_thrift_i64(t, type, &m->dictionary_offset);
        } else if (id == 12 && type == BW_THRIFT_STRUCT) {
            rc = read_statistics(t, &m->null_count);
        } else if (id == 2 && type == BW_THRIFT_LIST) {
            int elem;
            uint32_t n;
            rc = bw_thrift_list(t, &elem, &n);
            for (uint32_t i = 0; rc == 0 && i < n; i++) {
                int32_t encoding = -1;
                rc = bw_thrift_i32(t, elem, &encoding);
                if (encoding == 2 || encoding == 8) /* PLAIN_DICTIONARY, RLE_DICTIONARY */
                    m->dictionary = 1;
            }
        } else {
            rc = bw_thrift_skip(t, type);
        }
        if (rc < 0)
            return -1;
    }
    return bw_thrift_struct_end(t);
}

static int read_column_chunk(bw_thrift *t, size_t file_size, int64_t *where, char *error) {
    int64_t offset = -1;
    int32_t length = -1;
    column_meta m = {-1, 0, -1, -1, -1, -1};
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return thrift_failed(t, "footer", error);
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return thrift_failed(t, "footer", error);
        if (type == BW_THRIFT_STOP)
            break;
        int rc = id == 4   ? bw_thrift_i64(t, type, &offset)
                 : id == 5 ? bw_thrift_i32(t, type, &length)
                 : id == 3 && type == BW_THRIFT_STRUCT ? read_column_meta(t, &m)
                           : bw_thrift_skip(t, type);
        if (rc < 0)
            return thrift_failed(t, "footer", error);
    }
    bw_thrift_struct_end(t);
    if (offset >= 0 || length >= 0) {
        if (offset < 0 || length <= 0 || (uint64_t)offset > file_size ||
            (uint64_t)length > file_size - (uint64_t)offset)
            return malformed(error, "offset index at %lld, %lld bytes, outside the file "
                             "(%zu bytes)", (long long)offset, (long long)length, file_size);
    } else {
        offset = length = -1;
    }
    where[BW_CHUNK_INDEX_OFFSET] = offset;
    where[BW_CHUNK_INDEX_LENGTH] = length;
    where[BW_CHUNK_CODEC] = m.codec;
    /* a dictionary page the footer places must lie inside the file (its header is checked
       when it is read); pages dictionary encoded without one placed are not read here */
    const int64_t dictionary = dictionary_page_offset(&m);
    if (dictionary >= 0 && (uint64_t)dictionary >= file_size)
        where[BW_CHUNK_DICTIONARY] = BW_DICTIONARY_UNLOCATED;
    else if (dictionary >= 0)
        where[BW_CHUNK_DICTIONARY] = dictionary;
    else
        where[BW_CHUNK_DICTIONARY] = m.dictionary ? BW_DICTIONARY_UNLOCATED : BW_NO_DICTIONARY;
    /* the chunk starts at its dictionary page when it has one before the data pages */
    int64_t start = m.data_page_offset;
    if (dictionary >= 0 && (start < 0 || dictionary < start))
        start = dictionary;
    where[BW_CHUNK_START] = start;
    where[BW_CHUNK_SIZE] = m.total_compressed_size;
    where[BW_CHUNK_NULL_COUNT] = m.null_count;
    return BW_PAGES_OK;
}

static int read_row_group(bw_thrift *t, size_t file_size, size_t columns, int64_t *out,
                          char *error) {
    int16_t last = 0, id;
    int type;
    int seen = 0;
    if (bw_thrift_struct_begin(t) < 0)
        return thrift_failed(t, "footer", error);
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return thrift_failed(t, "footer", error);
        if (type == BW_THRIFT_STOP)
            break;
        if (id != 1 || type != BW_THRIFT_LIST) {
            if (bw_thrift_skip(t, type) < 0)
                return thrift_failed(t, "footer", error);
            continue;
        }
        int elem;
        uint32_t n;
        if (seen++ || bw_thrift_list(t, &elem, &n) < 0 || elem != BW_THRIFT_STRUCT)
            return malformed(error, "footer: a row group's column list is malformed");
        if (n != columns)
            return malformed(error, "footer: a row group has %u columns, the schema %zu",
                             (unsigned)n, columns);
        for (uint32_t c = 0; c < n; c++) {
            int rc = read_column_chunk(t, file_size, out + BW_CHUNK_FIELDS * c, error);
            if (rc != BW_PAGES_OK)
                return rc;
        }
    }
    bw_thrift_struct_end(t);
    if (!seen)
        return malformed(error, "footer: a row group has no column list");
    return BW_PAGES_OK;
}

/* The footer at `footer` (footer_size bytes) of a file of file_size bytes. */
static int read_footer(const uint8_t *footer, uint32_t footer_size, size_t file_size,
                       size_t groups, size_t columns, int64_t *out, char *error) {
    bw_thrift t;
    bw_thrift_init(&t, footer, footer_size);
    int16_t last = 0, id;
    int type;
    int seen = 0;
    if (bw_thrift_struct_begin(&t) < 0)
        return thrift_failed(&t, "footer", error);
    for (;;) {
        if (bw_thrift_field(&t, &last, &type, &id) < 0)
            return thrift_failed(&t, "footer", error);
        if (type == BW_THRIFT_STOP)
            break;
        if (id != 4 || type != BW_THRIFT_LIST) {
            if (bw_thrift_skip(&t, type) < 0)
                return thrift_failed(&t, "footer", error);
            continue;
        }
        int elem;
        uint32_t n;
        if (seen++ || bw_thrift_list(&t, &elem, &n) < 0 || elem != BW_THRIFT_STRUCT)
            return malformed(error, "footer: the row group list is malformed");
        if (n != groups)
            return malformed(error, "footer: %u row groups, expected %zu", (unsigned)n, groups);
        for (uint32_t g = 0; g < n; g++) {
            int rc = read_row_group(&t, file_size, columns, out + BW_CHUNK_FIELDS * columns * g,
                                    error);
            if (rc != BW_PAGES_OK)
                return rc;
        }
    }
    if (!seen && groups != 0)
        return malformed(error, "footer: no row group list");
    return BW_PAGES_OK;
}

int bw_parquet_index_locations(const uint8_t *file, int fd, size_t file_size, size_t groups,
                               size_t columns, int64_t *out, char *error) {
    if (file_size < 12)
        return malformed(error, "no Parquet footer at the end of the file");
    read_buffer buffer = {NULL, 0};
    const uint8_t *tail;
    int rc = file_bytes(file, fd, file_size, file_size - 8, 8, &buffer, &tail, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    if (memcmp(tail + 4, "PAR1", 4) != 0) {
        rc = malformed(error, "no Parquet footer at the end of the file");
        goto cleanup;
    }
    uint32_t footer_size = read_le32(tail);
    if ((uint64_t)footer_size > file_size - 12) {
        rc = malformed(error, "footer length %u larger than the file", (unsigned)footer_size);
        goto cleanup;
    }
    const uint8_t *footer;
    rc = file_bytes(file, fd, file_size, file_size - 8 - footer_size, footer_size, &buffer,
                    &footer, error);
    if (rc == BW_PAGES_OK)
        rc = read_footer(footer, footer_size, file_size, groups, columns, out, error);
cleanup:
    buffer_free(&buffer);
    return rc;
}

/* ---- offset index ---------------------------------------------------------------------- */

static int read_page_location(bw_thrift *t, bw_page_location *loc, char *error) {
    int64_t offset = -1, first_row = -1;
    int32_t size = -1;
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return thrift_failed(t, "offset index", error);
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return thrift_failed(t, "offset index", error);
        if (type == BW_THRIFT_STOP)
            break;
        int rc = id == 1   ? bw_thrift_i64(t, type, &offset)
                 : id == 2 ? bw_thrift_i32(t, type, &size)
                 : id == 3 ? bw_thrift_i64(t, type, &first_row)
                           : bw_thrift_skip(t, type);
        if (rc < 0)
            return thrift_failed(t, "offset index", error);
    }
    bw_thrift_struct_end(t);
    if (offset < 0 || size <= 0 || first_row < 0)
        return malformed(error, "offset index: a page location lacks a field or is negative");
    loc->offset = offset;
    loc->compressed_size = size;
    loc->first_row = first_row;
    return BW_PAGES_OK;
}

int bw_parquet_offset_index(const uint8_t *data, size_t size, size_t file_size,
                            int64_t chunk_start, int64_t chunk_size, int64_t group_rows,
                            bw_page_location **pages, size_t *count, char *error) {
    bw_thrift t;
    bw_thrift_init(&t, data, size);
    bw_page_location *locs = NULL;
    size_t n_locs = 0;
    int rc = BW_PAGES_OK;
    int16_t last = 0, id;
    int type;
    *pages = NULL;
    *count = 0;
    if (chunk_start < 0 || chunk_size < 0 || (uint64_t)chunk_start > file_size ||
        (uint64_t)chunk_size > file_size - (uint64_t)chunk_start)
        return malformed(error, "column chunk at %lld, %lld bytes, outside the file (%zu "
                         "bytes)", (long long)chunk_start, (long long)chunk_size, file_size);
    const int64_t chunk_end = chunk_start + chunk_size;
    bw_thrift_struct_begin(&t);
    for (;;) {
        if (bw_thrift_field(&t, &last, &type, &id) < 0) {
            rc = thrift_failed(&t, "offset index", error);
            goto cleanup;
        }
        if (type == BW_THRIFT_STOP)
            break;
        if (id != 1 || type != BW_THRIFT_LIST) {
            if (bw_thrift_skip(&t, type) < 0) {
                rc = thrift_failed(&t, "offset index", error);
                goto cleanup;
            }
            continue;
        }
        int elem;
        uint32_t n;
        if (locs != NULL || bw_thrift_list(&t, &elem, &n) < 0 || elem != BW_THRIFT_STRUCT) {
            rc = malformed(error, "offset index: the page list is malformed");
            goto cleanup;
        }
        locs = malloc((n ? n : 1) * sizeof *locs);
        if (locs == NULL) {
            rc = BW_PAGES_NO_MEMORY;
            goto cleanup;
        }
        int64_t previous_end = chunk_start;
        size_t kept = 0;
        for (uint32_t i = 0; i < n; i++) {
            rc = read_page_location(&t, &locs[kept], error);
            if (rc != BW_PAGES_OK)
                goto cleanup;
            const bw_page_location *p = &locs[kept];
            /* inside its own chunk (a page of another chunk would read as this column's),
               after the page before it */
            if (p->offset < chunk_start || p->compressed_size > chunk_end - p->offset) {
                rc = malformed(error, "offset index: page %u at %lld, %d bytes, outside its "
                               "column chunk (bytes %lld to %lld)", (unsigned)i,
                               (long long)p->offset, (int)p->compressed_size,
                               (long long)chunk_start, (long long)chunk_end);
                goto cleanup;
            }
            if (p->offset < previous_end) {
                rc = malformed(error, "offset index: page %u at %lld starts before the end of "
                               "the page before it (%lld)", (unsigned)i, (long long)p->offset,
                               (long long)previous_end);
                goto cleanup;
            }
            previous_end = p->offset + p->compressed_size;
            if ((kept == 0 ? p->first_row != 0 : p->first_row < locs[kept - 1].first_row) ||
                p->first_row >= group_rows) {
                rc = malformed(error, "offset index: page %u starts at row %lld (row group of "
                               "%lld rows)", (unsigned)i, (long long)p->first_row,
                               (long long)group_rows);
                goto cleanup;
            }
            /* A page whose first row is the next page's holds no rows, by the index's own
               count: pyarrow writes such empty pages (no values) now and then. It is left
               out, as the walk of a chunk without an index leaves out pages without rows,
               so the first rows kept strictly increase. */
            if (kept > 0 && p->first_row == locs[kept - 1].first_row)
                locs[kept - 1] = locs[kept];
            else
                kept++;
        }
        n_locs = kept;
    }
    if (locs == NULL) {
        rc = malformed(error, "offset index: no page list");
        goto cleanup;
    }
    if (n_locs == 0 && group_rows > 0) {
        rc = malformed(error, "offset index: no pages for %lld rows", (long long)group_rows);
        goto cleanup;
    }
    *pages = locs;
    *count = n_locs;
    locs = NULL;
cleanup:
    free(locs);
    return rc;
}

/* ---- page headers ---------------------------------------------------------------------- */

static int read_data_header(bw_thrift *t, bw_page_header *h, int v2) {
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return -1;
    h->is_compressed = 1; /* v2's default */
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return -1;
        if (type == BW_THRIFT_STOP)
            break;
        int rc;
        if (id == 1)
            rc = bw_thrift_i32(t, type, &h->num_values);
        else if (!v2 && id == 2)
            rc = bw_thrift_i32(t, type, &h->encoding);
        else if (!v2 && id == 3)
            rc = bw_thrift_i32(t, type, &h->def_encoding);
        else if (!v2 && id == 4)
            rc = bw_thrift_i32(t, type, &h->rep_encoding);
        else if (v2 && id == 3)
            rc = bw_thrift_i32(t, type, &h->num_rows);
        else if (v2 && id == 4)
            rc = bw_thrift_i32(t, type, &h->encoding);
        else if (v2 && id == 5)
            rc = bw_thrift_i32(t, type, &h->def_bytes);
        else if (v2 && id == 6)
            rc = bw_thrift_i32(t, type, &h->rep_bytes);
        else if (v2 && id == 7 && (type == BW_THRIFT_TRUE || type == BW_THRIFT_FALSE)) {
            h->is_compressed = type == BW_THRIFT_TRUE;
            rc = 0;
        } else
            rc = bw_thrift_skip(t, type);
        if (rc < 0)
            return -1;
    }
    return bw_thrift_struct_end(t);
}

static int read_dictionary_header(bw_thrift *t, bw_page_header *h) {
    int16_t last = 0, id;
    int type;
    if (bw_thrift_struct_begin(t) < 0)
        return -1;
    for (;;) {
        if (bw_thrift_field(t, &last, &type, &id) < 0)
            return -1;
        if (type == BW_THRIFT_STOP)
            break;
        int rc = id == 1   ? bw_thrift_i32(t, type, &h->num_values)
                 : id == 2 ? bw_thrift_i32(t, type, &h->encoding)
                           : bw_thrift_skip(t, type);
        if (rc < 0)
            return -1;
    }
    return bw_thrift_struct_end(t);
}

/* bw_parquet_page_header; *ran_out set when the header does not parse only because the
   `size` bytes end inside it (more bytes might hold it), cleared otherwise. */
static int parse_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                             size_t *header_size, int *ran_out, char *error) {
    *ran_out = 0;
    bw_thrift t;
    bw_thrift_init(&t, data, size);
    memset(h, 0, sizeof *h);
    h->type = h->uncompressed_size = h->compressed_size = -1;
    h->num_values = h->encoding = h->def_encoding = h->rep_encoding = -1;
    h->num_rows = h->def_bytes = h->rep_bytes = -1;
    int16_t last = 0, id;
    int type;
    bw_thrift_struct_begin(&t);
    for (;;) {
        if (bw_thrift_field(&t, &last, &type, &id) < 0) {
            *ran_out = t.ran_out;
            return thrift_failed(&t, "page header", error);
        }
        if (type == BW_THRIFT_STOP)
            break;
        int rc;
        if (id == 1)
            rc = bw_thrift_i32(&t, type, &h->type);
        else if (id == 2)
            rc = bw_thrift_i32(&t, type, &h->uncompressed_size);
        else if (id == 3)
            rc = bw_thrift_i32(&t, type, &h->compressed_size);
        else if (id == 7 && type == BW_THRIFT_STRUCT) {
            if (h->has_dictionary)
                return malformed(error, "page header: two dictionary page headers");
            rc = read_dictionary_header(&t, h);
            h->has_dictionary = 1;
        } else if ((id == 5 || id == 8) && type == BW_THRIFT_STRUCT) {
            if (h->has_v1 || h->has_v2)
                return malformed(error, "page header: two data page headers");
            rc = read_data_header(&t, h, id == 8);
            *(id == 8 ? &h->has_v2 : &h->has_v1) = 1;
        } else
            rc = bw_thrift_skip(&t, type);
        if (rc < 0) {
            *ran_out = t.ran_out;
            return thrift_failed(&t, "page header", error);
        }
    }
    if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0)
        return malformed(error, "page header: type or sizes missing or negative");
    if ((int64_t)h->uncompressed_size > MAX_PAGE_BYTES)
        return malformed(error, "page header: %d bytes uncompressed, more than the %lld a "
                         "page may hold", (int)h->uncompressed_size, (long long)MAX_PAGE_BYTES);
    *header_size = (size_t)(t.pos - data);
    return BW_PAGES_OK;
}

int bw_parquet_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                           size_t *header_size, char *error) {
    int ran_out;
    return parse_page_header(data, size, h, header_size, &ran_out, error);
}

static int page_too_large(uint64_t bytes, char *error) {
    return malformed(error, "page of %llu bytes with its header, more than the %lld a page "
                     "may hold", (unsigned long long)bytes, (long long)MAX_PAGE_BYTES);
}

/* ---- a page read from the file --------------------------------------------------------- */

/* Bytes a page header is first looked for in, when the file is read through its descriptor:
   more are read only while the header does not parse in what was read because they end
   inside it. */
#define HEADER_WINDOW 4096

/* A page as far as it has been read: `available` bytes at `bytes`, from the file's byte `at`
   on, its header (header_size bytes) among them. */
typedef struct {
    int64_t at;
    size_t header_size, available;
    const uint8_t *bytes;
} page_read;

/* The page header at `at`, read from at most `room` bytes of the file (which the caller
   checked lie inside it): a header that would run past them is refused by the header reader,
   as if the file ended there. Through the descriptor, HEADER_WINDOW bytes are read first, and
   eight times more only while the header runs past what was read, up to
   MAX_PAGE_HEADER_BYTES: a page's header, not its body, and never more because a field
   claims it. A header refused for what it says (a size past MAX_PAGE_BYTES, a field of the
   wrong type) is refused at once. */
static int read_header_at(const uint8_t *file, int fd, size_t file_size, int64_t at,
                          size_t room, read_buffer *buffer, bw_page_header *h, page_read *p,
                          char *error) {
    const size_t most = room < MAX_PAGE_HEADER_BYTES ? room : MAX_PAGE_HEADER_BYTES;
    size_t window = file != NULL || most < HEADER_WINDOW ? most : HEADER_WINDOW;
    for (;;) {
        int rc = file_bytes(file, fd, file_size, (uint64_t)at, window, buffer, &p->bytes,
                            error);
        if (rc != BW_PAGES_OK)
            return rc;
        int ran_out;
        rc = parse_page_header(p->bytes, window, h, &p->header_size, &ran_out, error);
        p->at = at;
        p->available = window;
        if (rc == BW_PAGES_MALFORMED && ran_out && window == most && most < room)
            return malformed(error, "page header longer than the %zu bytes a header may take",
                             MAX_PAGE_HEADER_BYTES);
        if (rc != BW_PAGES_MALFORMED || !ran_out || window == most)
            return rc;
        window = most / 8 < window ? most : window * 8;
    }
}

/* *body: the body_size bytes after the page's header, which the caller checked lie inside
   the room its header was read from; read now (only those not read with the header) when
   they were not. The page, header and body, must be at most MAX_PAGE_BYTES: checked before
   anything is read or allocated for it. */
static int page_body(const uint8_t *file, int fd, size_t file_size, page_read *p,
                     size_t body_size, read_buffer *buffer, const uint8_t **body, char *error) {
    uint64_t need = (uint64_t)p->header_size + body_size;
    if (need > (uint64_t)MAX_PAGE_BYTES)
        return page_too_large(need, error);
    if (need > p->available) {
        if (file != NULL) {
            p->bytes = file + p->at;
        } else {
            /* p->bytes is buffer->data: the bytes read with the header are kept */
            int rc = buffer_reserve(buffer, (size_t)need);
            if (rc == BW_PAGES_OK)
                rc = read_into(fd, buffer->data + p->available, (size_t)need - p->available,
                               (uint64_t)p->at + p->available, file_size, error);
            if (rc != BW_PAGES_OK)
                return rc;
            p->bytes = buffer->data;
        }
        p->available = (size_t)need;
    }
    *body = p->bytes + p->header_size;
    return BW_PAGES_OK;
}

/* ---- the RLE/bit-packed hybrid (levels and dictionary indices) ------------------------- */

/* The levels and dictionary indices of a page are read run by run and never stored: an RLE
   run costs the same whatever length its header claims, a bit-packed run one step per value
   its bytes hold, so what reading a page costs, in memory and in time, is bounded by its
   bytes and by the rows asked for, never by the counts its header declares. */

/* The header of one run of the RLE/bit-packed hybrid (a ULEB128 int at *p, advanced past it):
   *run its length (values for an RLE run, groups of 8 for a bit-packed one), *bit_packed
   which kind. `what` names the stream and `done`/`count` where it stopped, for the error. */
static int read_hybrid_run_header(const uint8_t **p, const uint8_t *end, const char *what,
                                  int64_t done, int64_t count, uint64_t *run, int *bit_packed,
                                  char *error) {
    uint64_t header = 0;
    int shift = 0;
    for (;;) {
        if (*p >= end)
            return malformed(error, "%s end after %lld of %lld", what, (long long)done,
                             (long long)count);
        if (shift > 28)
            return malformed(error, "%s: run header too long", what);
        uint8_t b = *(*p)++;
        header |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    *run = header >> 1;
    *bit_packed = (int)(header & 1);
    if (*run == 0)
        return malformed(error, "%s: empty run", what);
    return BW_PAGES_OK;
}

/* One run of the RLE/bit-packed hybrid, as far as the `count - done` values still wanted go. */
typedef struct {
    int bit_packed;
    int64_t take;         /* values of the run to use */
    const uint8_t *bits;  /* bit-packed: the run's bytes, `present` of them */
    size_t present;
    uint64_t value;       /* RLE: the repeated value */
} hybrid_run;

/* Reads the run at *p (advanced past it) of `bit_width`-bit values: its header, then its
   repeated value or the bounds of its packed bytes. A bit-packed run must hold all its
   groups, the last one's padding included, as pyarrow's reader requires of levels and
   dictionary indices alike. `what` names the stream for the error. Shared by the levels and
   the dictionary indices, which differ only in what the values mean and what bounds them. */
static int read_hybrid_run(const uint8_t **p, const uint8_t *end, int bit_width,
                           const char *what, int64_t done, int64_t count, hybrid_run *r,
                           char *error) {
    uint64_t run = 0;
    int rc = read_hybrid_run_header(p, end, what, done, count, &run, &r->bit_packed, error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (r->bit_packed) { /* run counts groups of 8 */
        uint64_t values = run * 8, bytes = run * (uint64_t)bit_width;
        if (bytes > (uint64_t)(end - *p))
            return malformed(error, "%s end inside a bit-packed run", what);
        r->take = values < (uint64_t)(count - done) ? (int64_t)values : count - done;
        r->present = (size_t)bytes;
        r->bits = *p;
        *p += r->present;
        return BW_PAGES_OK;
    }
    int value_bytes = (bit_width + 7) / 8; /* one value repeated run times */
    if (end - *p < value_bytes)
        return malformed(error, "%s end inside a run", what);
    r->value = 0;
    for (int i = 0; i < value_bytes; i++)
        r->value |= (uint64_t)(*p)[i] << (8 * i);
    *p += value_bytes;
    r->take = run < (uint64_t)(count - done) ? (int64_t)run : count - done;
    return BW_PAGES_OK;
}

/* Value i of a bit-packed run of levels (bit_width at most 8: a value spans two bytes at
   most), `present` bytes at bits. */
static unsigned packed_level(const uint8_t *bits, size_t present, int64_t i, int bit_width,
                             unsigned mask) {
    uint64_t bit = (uint64_t)i * (uint64_t)bit_width;
    uint64_t byte = bit >> 3;
    unsigned word = bits[byte];
    if (byte + 1 < present)
        word |= (unsigned)bits[byte + 1] << 8;
    return (word >> (bit & 7)) & mask;
}

/* Value i of a bit-packed run of dictionary indices (bit_width at most 32: a value starts
   within its first byte, so one 8-byte load holds it, and only the run's last 7 bytes are
   read byte by byte). */
static uint64_t packed_index(const uint8_t *bits, size_t present, int64_t i, int bit_width,
                             uint64_t mask) {
    uint64_t bit = (uint64_t)i * (uint64_t)bit_width;
    size_t byte = (size_t)(bit >> 3);
    uint64_t word = 0;
    if (present - byte >= 8)
        word = read_le64(bits + byte);
    else
        for (size_t k = 0; byte + k < present; k++)
            word |= (uint64_t)bits[byte + k] << (8 * k);
    return (word >> (bit & 7)) & mask;
}

static int popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555u);
    x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
    return (int)((x * 0x0101010101010101u) >> 56);
}

/* How many of bits [from, to) of a bit-packed run of one-bit values are set. */
static int64_t count_set_bits(const uint8_t *bits, int64_t from, int64_t to) {
    int64_t n = 0;
    for (; from < to && (from & 7); from++)
        n += bits[from >> 3] >> (from & 7) & 1;
    for (; to - from >= 64; from += 64)
        n += popcount64(read_le64(bits + (from >> 3)));
    for (; from < to; from++)
        n += bits[from >> 3] >> (from & 7) & 1;
    return n;
}

static int level_bit_width(int max_level) {
    int bit_width = 0;
    while ((1 << bit_width) <= max_level)
        bit_width++;
    return bit_width;
}

static int level_too_high(unsigned level, int max_level, char *error) {
    return malformed(error, "level %u above the maximum %d", level, max_level);
}

/* The rows asked of one page: rows[0..count), ascending, `first_row` the page's first. For
   each, where its values are among the page's values: start[j] (-1 for a null) and length[j]
   of them. */
typedef struct {
    const int64_t *rows;
    int64_t first_row;
    size_t count;
    int64_t *start, *length;
} page_request;

/* The definition levels of a page: `count` levels of the hybrid at p (n bytes), each checked
   to be at most max_def; *value_count the levels at max_def (the page's values). For a page
   of one value per row, also each requested row's start: its value's position among the
   page's values, -1 for a null (`want` asks for no rows where the page has lists). */
static int definition_levels(const uint8_t *p, size_t n, int max_def, int64_t count,
                         const page_request *want, int64_t *value_count, char *error) {
    const int bit_width = level_bit_width(max_def);
    const unsigned mask = (1u << bit_width) - 1;
    const uint8_t *end = p + n;
    int64_t done = 0, values = 0;
    size_t j = 0;
    while (done < count) {
        hybrid_run r = {0, 0, NULL, 0, 0};
        int rc = read_hybrid_run(&p, end, bit_width, "levels", done, count, &r, error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (r.bit_packed) {
            int64_t i = 0;
            while (i < r.take) {
                /* the levels up to the next requested row: counted, and checked */
                int64_t stop = r.take;
                if (j < want->count && want->rows[j] - want->first_row - done < stop)
                    stop = want->rows[j] - want->first_row - done;
                if (max_def == 1) { /* one bit each: a value where it is set */
                    values += count_set_bits(r.bits, i, stop);
                    i = stop;
                }
                for (; i < stop; i++) {
                    unsigned level = packed_level(r.bits, r.present, i, bit_width, mask);
                    if (level > (unsigned)max_def)
                        return level_too_high(level, max_def, error);
                    values += level == (unsigned)max_def;
                }
                if (i == r.take)
                    break;
                unsigned level = packed_level(r.bits, r.present, i, bit_width, mask);
                if (level > (unsigned)max_def)
                    return level_too_high(level, max_def, error);
                want->start[j++] = level == (unsigned)max_def ? values : -1;
                values += level == (unsigned)max_def;
                i++;
            }
        } else {
            if (r.value > (unsigned)max_def)
                return level_too_high((unsigned)r.value, max_def, error);
            int present = r.value == (unsigned)max_def;
            for (; j < want->count && want->rows[j] - want->first_row < done + r.take; j++)
                want->start[j] = present ? values + (want->rows[j] - want->first_row - done)
                                         : -1;
            if (present)
                values += r.take;
        }
        done += r.take;
    }
    *value_count = values;
    return BW_PAGES_OK;
}

/* Where the rows of a page of lists are, from its repetition levels: a level of 0 starts a
   row. `row` is the row open (-1 before the first), `row_start` its first level. */
typedef struct {
    const page_request *want;
    int64_t list_size; /* > 0: every row must hold exactly this many levels */
    int64_t row, row_start;
    size_t next;       /* the next requested row */
    int starts_inside; /* the page's first level goes on a row of the page before it */
    int defective;     /* a defect found (the first one is in `defect`) */
    char defect[BW_PAGES_ERROR_SIZE];
} list_rows;

/* The open row ends before level `at`. */
static void end_row(list_rows *l, int64_t at) {
    if (l->row < 0)
        return;
    int64_t n = at - l->row_start;
    /* every row, not only the requested ones: a page whose levels break the fixed size is
       corrupt, and pyarrow would read its rows otherwise than we do */
    if (l->list_size > 0 && n != l->list_size && !l->defective) {
        l->defective = 1;
        snprintf(l->defect, sizeof l->defect,
                 "row %lld of a fixed_size_list of %lld holds %lld values",
                 (long long)(l->want->first_row + l->row), (long long)l->list_size,
                 (long long)n);
    }
    const page_request *w = l->want;
    if (l->next < w->count && w->rows[l->next] - w->first_row == l->row) {
        w->start[l->next] = l->row_start;
        w->length[l->next++] = n;
    }
}

/* The repetition levels of a page of lists (`count` levels at p, n bytes, each 0 or 1): *rows
   the rows they start, and each requested row's first level and level count. A page that
   starts inside a row (l->starts_inside; legal for a v1 page of a chunk without a page index,
   whose rows may go on from one page to the next, and the walk leaves such a chunk to
   another reader), or whose rows are not list_size long (list_size > 0), is a defect here:
   the first one is kept in l->defect and the levels are still read to their end (and
   checked), since a page with a null is read another way whatever else is wrong with it. */
static int list_levels(const uint8_t *p, size_t n, int64_t count, list_rows *l, int64_t *rows,
                       char *error) {
    const uint8_t *end = p + n;
    const page_request *w = l->want;
    int64_t done = 0;
    l->row = -1;
    l->row_start = 0;
    l->next = 0;
    l->starts_inside = 0;
    l->defective = 0;
    while (done < count) {
        hybrid_run r = {0, 0, NULL, 0, 0};
        int rc = read_hybrid_run(&p, end, 1, "levels", done, count, &r, error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (r.bit_packed) {
            for (int64_t i = 0; i < r.take; i++) {
                /* eight levels that go on the open row, at once (a long list's) */
                while ((i & 7) == 0 && r.take - i >= 8 && r.bits[i >> 3] == 0xff && done + i > 0)
                    i += 8;
                if (i == r.take)
                    break;
                if (packed_level(r.bits, r.present, i, 1, 1) == 0) {
                    end_row(l, done + i);
                    l->row++;
                    l->row_start = done + i;
                } else if (done + i == 0) {
                    l->starts_inside = l->defective = 1;
                    snprintf(l->defect, sizeof l->defect, "page starts inside a row");
                }
            }
        } else if (r.value > 1) {
            return level_too_high((unsigned)r.value, 1, error);
        } else if (r.value == 1) {
            if (done == 0) {
                l->starts_inside = l->defective = 1;
                snprintf(l->defect, sizeof l->defect, "page starts inside a row");
            }
        } else { /* r.take rows of one level each, the last one left open */
            end_row(l, done);
            l->row++;
            l->row_start = done;
            if (r.take > 1) {
                const int64_t last_closed = l->row + r.take - 2;
                if (l->list_size > 0 && l->list_size != 1 && !l->defective) {
                    l->defective = 1;
                    snprintf(l->defect, sizeof l->defect,
                             "row %lld of a fixed_size_list of %lld holds 1 values",
                             (long long)(w->first_row + l->row), (long long)l->list_size);
                }
                for (; l->next < w->count && w->rows[l->next] - w->first_row <= last_closed;
                     l->next++) {
                    w->start[l->next] = done + (w->rows[l->next] - w->first_row - l->row);
                    w->length[l->next] = 1;
                }
                l->row += r.take - 1;
                l->row_start = done + r.take - 1;
            }
        }
        done += r.take;
    }
    end_row(l, count); /* the page's end ends its last row */
    *rows = l->row + 1;
    return BW_PAGES_OK;
}

/* ---- decompression --------------------------------------------------------------------- */

#ifndef BW_HAVE_ZSTD
/* The host's zstd decoder where libzstd is not linked (NULL: none, zstd pages not covered). */
static _Atomic(bw_zstd_page_decoder) zstd_decoder = NULL;
#endif

void bw_parquet_set_zstd_decoder(bw_zstd_page_decoder decoder) {
#ifdef BW_HAVE_ZSTD
    (void)decoder; /* libzstd decodes them */
#else
    atomic_store(&zstd_decoder, decoder);
#endif
}

/* Whether zstd pages are read here: libzstd linked, or a decoder set. */
static int zstd_decodable(void) {
#ifdef BW_HAVE_ZSTD
    return 1;
#else
    return atomic_load(&zstd_decoder) != NULL;
#endif
}

#define ZSTD_MAGIC 0xFD2FB528u

/* Reads the zstd frame header at `in` (RFC 8878, 3.1.1): -1 when the bytes do not start
   with a frame; 1 with *said the content size it declares when it declares one and it is the
   only frame, ending exactly at in + in_size (its blocks walked by their headers); 0
   otherwise (no size declared, more frames, or a frame cut short: decompression judges). */
static int zstd_frame_size(const uint8_t *in, size_t in_size, uint64_t *said) {
    if (in_size < 5 || read_le32(in) != ZSTD_MAGIC)
        return -1;
    uint8_t descriptor = in[4];
    if (descriptor & 0x08) /* the reserved bit */
        return -1;
    int single_segment = (descriptor >> 5) & 1, checksum = (descriptor >> 2) & 1;
    static const size_t dictionary_id_bytes[4] = {0, 1, 2, 4};
    static const size_t size_bytes[4] = {0, 2, 4, 8};
    size_t fcs = size_bytes[descriptor >> 6];
    if (fcs == 0 && single_segment)
        fcs = 1;
    if (fcs == 0)
        return 0;
    size_t at = 5 + (size_t)!single_segment + dictionary_id_bytes[descriptor & 3];
    if (at + fcs > in_size)
        return 0;
    uint64_t size = 0;
    for (size_t i = 0; i < fcs; i++)
        size |= (uint64_t)in[at + i] << (8 * i);
    if (fcs == 2)
        size += 256;
    at += fcs;
    for (;;) { /* the blocks: a 3-byte header each, its last bit set on the last one */
        if (in_size - at < 3)
            return 0;
        uint32_t header = (uint32_t)in[at] | (uint32_t)in[at + 1] << 8 | (uint32_t)in[at + 2] << 16;
        uint32_t type = (header >> 1) & 3, block = header >> 3;
        at += 3;
        size_t body = type == 1 ? 1 : block; /* an RLE block holds one byte */
        if (type == 3 || in_size - at < body)
            return 0;
        at += body;
        if (header & 1)
            break;
    }
    if (checksum) {
        if (in_size - at < 4)
            return 0;
        at += 4;
    }
    if (at != in_size)
        return 0;
    *said = size;
    return 1;
}

/* The most bytes one compressed byte can become: deflate codes a match of 258 bytes in two
   bits at best; a zstd block of at most 128 KiB takes at least 4 bytes (an RLE block). */
#define DEFLATE_MAX_RATIO 1032
#define ZSTD_MAX_RATIO 32768

/* Checks, before anything is allocated for it, that `plain_size` bytes (what a page header
   says its `in_size` bytes at `in` decompress to) can come out of them: equal for an
   uncompressed page, the size a snappy or zstd stream says of itself where it says it, and
   never more than the codec's best ratio (and never more than MAX_PAGE_BYTES: the header
   reader refuses that). So a page cannot make the reader allocate more than its own bytes
   can hold. BW_PAGES_NOT_COVERED for a codec this build does not read. */
static int check_plain_size(int codec, const uint8_t *in, size_t in_size, size_t plain_size,
                            char *error) {
    switch (codec) {
    case BW_PQ_UNCOMPRESSED:
        if (in_size != plain_size)
            return malformed(error, "uncompressed page of %zu bytes says %zu", in_size,
                             plain_size);
        return BW_PAGES_OK;
    case BW_PQ_GZIP:
        if ((uint64_t)plain_size > (uint64_t)in_size * DEFLATE_MAX_RATIO)
            return malformed(error, "gzip page of %zu bytes cannot inflate to the %zu its "
                             "header says", in_size, plain_size);
        return BW_PAGES_OK;
    case BW_PQ_ZSTD: {
        if (!zstd_decodable())
            return BW_PAGES_NOT_COVERED;
        /* a single frame that says its size must say the header's; otherwise the ratio */
        uint64_t said = 0;
        int frame = zstd_frame_size(in, in_size, &said);
        if (frame < 0)
            return malformed(error, "zstd page does not start with a zstd frame");
        if (frame > 0) {
            if (said != (uint64_t)plain_size)
                return malformed(error, "zstd page holds %llu bytes, its header says %zu",
                                 (unsigned long long)said, plain_size);
        } else if ((uint64_t)plain_size > (uint64_t)in_size * ZSTD_MAX_RATIO) {
            return malformed(error, "zstd page of %zu bytes cannot decompress to the %zu its "
                             "header says", in_size, plain_size);
        }
        return BW_PAGES_OK;
    }
    case BW_PQ_SNAPPY: {
        size_t said = 0;
        if (bw_snappy_length(in, in_size, &said) != 0 || said != plain_size)
            return malformed(error, "snappy page does not decompress to the %zu bytes its "
                             "header says", plain_size);
        return BW_PAGES_OK;
    }
    default:
        return BW_PAGES_NOT_COVERED;
    }
}

static int decompress(int codec, const uint8_t *in, size_t in_size, uint8_t *out,
                      size_t out_size, char *error) {
    switch (codec) {
    case BW_PQ_GZIP: {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 32) != Z_OK)
            return BW_PAGES_NO_MEMORY;
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)in_size;
        z.next_out = out;
        z.avail_out = (uInt)out_size;
        int zrc = inflate(&z, Z_FINISH);
        size_t produced = (size_t)z.total_out;
        inflateEnd(&z);
        if (zrc != Z_STREAM_END || produced != out_size)
            return malformed(error, "gzip page does not inflate to its %zu bytes", out_size);
        return BW_PAGES_OK;
    }
    case BW_PQ_ZSTD: {
        int rc;
#ifdef BW_HAVE_ZSTD
        size_t produced = ZSTD_decompress(out, out_size, in, in_size);
        rc = ZSTD_isError(produced) || produced != out_size ? BW_PAGES_MALFORMED : BW_PAGES_OK;
#else
        bw_zstd_page_decoder decoder = atomic_load(&zstd_decoder);
        if (decoder == NULL)
            return BW_PAGES_NOT_COVERED;
        rc = decoder(in, in_size, out, out_size);
#endif
        if (rc == BW_PAGES_NO_MEMORY)
            return rc;
        if (rc != BW_PAGES_OK)
            return malformed(error, "zstd page does not decompress to its %zu bytes", out_size);
        return BW_PAGES_OK;
    }
    case BW_PQ_SNAPPY: {
        const char *why = NULL;
        if (bw_snappy_decompress(in, in_size, out, out_size, &why) != 0)
            return malformed(error, "snappy page does not decompress to its %zu bytes: %s",
                             out_size, why);
        return BW_PAGES_OK;
    }
    default:
        return BW_PAGES_NOT_COVERED;
    }
}

/* ---- one column chunk ------------------------------------------------------------------ */

static int append(bw_bytes *b, const uint8_t *p, size_t n) {
    if (n > b->capacity - b->size) {
        size_t want = b->capacity ? b->capacity : 4096;
        while (want - b->size < n) {
            if (want > SIZE_MAX / 2)
                return BW_PAGES_NO_MEMORY;
            want *= 2;
        }
        uint8_t *grown = realloc(b->data, want);
        if (grown == NULL)
            return BW_PAGES_NO_MEMORY;
        b->data = grown;
        b->capacity = want;
    }
    if (n && p != NULL)
        memcpy(b->data + b->size, p, n);
    b->size += n;
    return BW_PAGES_OK;
}

/* Buffers reused from page to page: the decompressed page, and two int64 per requested row of
   a page (page_request's start and length). Neither is sized by what a page header says:
   the first by what the page's compressed bytes can hold (check_plain_size), the second by
   the rows asked for. */
typedef struct {
    uint8_t *plain;
    int64_t *spans;
    size_t plain_capacity, spans_capacity; /* bytes */
    read_buffer page; /* the page's bytes, read from the file's descriptor */
} scratch;

static int grow_spans(scratch *s, size_t need) {
    if (need <= s->spans_capacity)
        return BW_PAGES_OK;
    int64_t *grown = realloc(s->spans, need);
    if (grown == NULL)
        return BW_PAGES_NO_MEMORY;
    s->spans = grown;
    s->spans_capacity = need;
    return BW_PAGES_OK;
}

static void scratch_free(scratch *s) {
    page_memory_free(s->plain, s->plain_capacity);
    free(s->spans);
    buffer_free(&s->page);
}

/* Where a v1 page's levels are: a 4-byte length, then that many bytes of the hybrid. */
static int v1_level_bytes(const uint8_t **p, size_t *left, const uint8_t **levels,
                          size_t *size, const char *what, char *error) {
    if (*left < 4)
        return malformed(error, "page ends before its %s levels", what);
    uint32_t n = read_le32(*p);
    if (n > *left - 4)
        return malformed(error, "%s levels of %u bytes overrun the page", what, (unsigned)n);
    *levels = *p + 4;
    *size = n;
    *p += 4 + (size_t)n;
    *left -= 4 + (size_t)n;
    return BW_PAGES_OK;
}

/* A data page's parts, after decompression: its repetition and definition levels (those the
   column has) and its values. */
typedef struct {
    const uint8_t *rep, *def, *values;
    size_t rep_size, def_size, values_size;
} page_parts;

/* The parts of the data page whose header is h and whose compressed_size bytes are at body,
   decompressed into s->plain when compressed (after check_plain_size). */
static int read_page_parts(int codec, const bw_page_header *h, const uint8_t *body,
                           int max_rep, int max_def, scratch *s, page_parts *d, char *error) {
    size_t body_size = (size_t)h->compressed_size, plain_size = (size_t)h->uncompressed_size;
    memset(d, 0, sizeof *d);
    int rc;
    if (h->type == BW_PQ_DATA_PAGE_V2) { /* levels first, never compressed */
        if (h->rep_bytes < 0 || h->def_bytes < 0 ||
            (uint64_t)h->rep_bytes + (uint64_t)h->def_bytes > body_size ||
            (uint64_t)h->rep_bytes + (uint64_t)h->def_bytes > plain_size)
            return malformed(error, "v2 page levels overrun the page");
        size_t levels = (size_t)h->rep_bytes + (size_t)h->def_bytes;
        d->rep = body;
        d->rep_size = (size_t)h->rep_bytes;
        d->def = body + h->rep_bytes;
        d->def_size = (size_t)h->def_bytes;
        int compressed = h->is_compressed && codec != BW_PQ_UNCOMPRESSED;
        rc = check_plain_size(compressed ? codec : BW_PQ_UNCOMPRESSED, body + levels,
                              body_size - levels, plain_size - levels, error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (!compressed) {
            d->values = body + levels;
        } else {
            if (page_memory_reserve((void **)&s->plain, &s->plain_capacity,
                                    plain_size - levels + 1) != BW_PAGES_OK)
                return BW_PAGES_NO_MEMORY;
            rc = decompress(codec, body + levels, body_size - levels, s->plain,
                            plain_size - levels, error);
            if (rc != BW_PAGES_OK)
                return rc;
            d->values = s->plain;
        }
        d->values_size = plain_size - levels;
        return BW_PAGES_OK;
    }
    const uint8_t *p = body;
    rc = check_plain_size(codec, body, body_size, plain_size, error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (codec != BW_PQ_UNCOMPRESSED) {
        if (page_memory_reserve((void **)&s->plain, &s->plain_capacity, plain_size + 1) !=
            BW_PAGES_OK)
            return BW_PAGES_NO_MEMORY;
        rc = decompress(codec, body, body_size, s->plain, plain_size, error);
        if (rc != BW_PAGES_OK)
            return rc;
        p = s->plain;
    }
    size_t left = plain_size;
    if (max_rep > 0 &&
        (rc = v1_level_bytes(&p, &left, &d->rep, &d->rep_size, "repetition", error)) != 0)
        return rc;
    if (max_def > 0 &&
        (rc = v1_level_bytes(&p, &left, &d->def, &d->def_size, "definition", error)) != 0)
        return rc;
    d->values = p;
    d->values_size = left;
    return BW_PAGES_OK;
}

/* Entry i of a BYTE_ARRAY dictionary (bw_parquet_dictionary's layout: a uint64 count, count
   + 1 uint64 offsets, the bytes), already checked by check_byte_dictionary. */
static void byte_dictionary_entry(const bw_chunk_take *q, uint64_t i, const uint8_t **data,
                                  size_t *size) {
    const uint8_t *offsets = q->dictionary + 8;
    uint64_t from, to;
    memcpy(&from, offsets + 8 * (size_t)i, 8);
    memcpy(&to, offsets + 8 * ((size_t)i + 1), 8);
    *data = q->dictionary + 8 * (q->dictionary_count + 2) + from;
    *size = (size_t)(to - from);
}

/* Checks that the page's value_count PLAIN BYTE_ARRAY values (each a 4-byte length and its
   bytes) all lie inside its `left` bytes, so that a page another reader would refuse is
   refused here too, whichever of its rows are asked for. Stops at the first value that does
   not fit: at most left / 4 steps. */
static int check_plain_byte_arrays(const uint8_t *p, size_t left, int64_t value_count,
                                   char *error) {
    size_t at_byte = 0;
    for (int64_t value = 0; value < value_count; value++) {
        if (left - at_byte < 4)
            return malformed(error, "byte array value %lld overruns its page",
                             (long long)value);
        uint32_t n = read_le32(p + at_byte);
        if (n > left - at_byte - 4)
            return malformed(error, "byte array value %lld of %u bytes overruns its page",
                             (long long)value, (unsigned)n);
        at_byte += 4 + (size_t)n;
    }
    return BW_PAGES_OK;
}

/* A null row of the page: a zeroed slot of length 0 for a fixed width, length -1 for a byte
   array. */
static int append_null(const bw_chunk_take *q, bw_bytes *values, int64_t *length) {
    static const uint8_t zeros[8];
    *length = q->value_width ? 0 : -1;
    return append(values, zeros, (size_t)q->value_width);
}

/* The requested rows of a PLAIN page (value_count values in n bytes at p, checked to hold
   them), their values copied out: a fixed width straight from its place, byte arrays by
   walking the value lengths up to the last one asked for. */
static int take_plain(const bw_chunk_take *q, const uint8_t *p, size_t n, int64_t value_count,
                      const page_request *want, bw_bytes *values, int64_t *lengths,
                      char *error) {
    size_t width = (size_t)q->value_width;
    int rc;
    if (width == 0 && (rc = check_plain_byte_arrays(p, n, value_count, error)) != BW_PAGES_OK)
        return rc;
    int64_t value = 0;
    size_t at_byte = 0;
    for (size_t j = 0; j < want->count; j++) {
        if (want->start[j] < 0) {
            rc = append_null(q, values, &lengths[j]);
        } else if (width > 0) {
            lengths[j] = want->length[j];
            rc = append(values, p + (size_t)want->start[j] * width,
                        (size_t)want->length[j] * width);
        } else {
            for (; value < want->start[j]; value++)
                at_byte += 4 + (size_t)read_le32(p + at_byte);
            size_t size = read_le32(p + at_byte);
            lengths[j] = (int64_t)size;
            rc = append(values, p + at_byte + 4, size);
            at_byte += 4 + size;
            value++;
        }
        if (rc != BW_PAGES_OK)
            return rc;
    }
    return BW_PAGES_OK;
}

/* Appends `n` copies of dictionary value `index` (n is 1 for a byte array; *length its size). */
static int append_dictionary_value(const bw_chunk_take *q, uint64_t index, int64_t n,
                                   bw_bytes *values, int64_t *length) {
    size_t width = (size_t)q->value_width;
    if (width == 0) {
        const uint8_t *data;
        size_t size;
        byte_dictionary_entry(q, index, &data, &size);
        *length = (int64_t)size;
        return append(values, data, size);
    }
    size_t at = values->size;
    int rc = append(values, NULL, (size_t)n * width); /* room first, then the copies */
    if (rc != BW_PAGES_OK)
        return rc;
    const uint8_t *value = q->dictionary + (size_t)index * width;
    for (int64_t i = 0; i < n; i++)
        memcpy(values->data + at + (size_t)i * width, value, width);
    return BW_PAGES_OK;
}

/* The requested row being filled from a dictionary encoded page: row `next`, whose values
   from position `at` on are still wanted, `left` of them. */
typedef struct {
    const bw_chunk_take *q;
    const page_request *want;
    bw_bytes *values;
    int64_t *lengths;
    size_t next;
    int64_t at, left;
} gather;

/* Moves to the next requested row that has values, appending the nulls on the way. */
static int gather_settle(gather *g) {
    const page_request *w = g->want;
    for (; g->next < w->count; g->next++) {
        int64_t start = w->start[g->next], length = w->length[g->next];
        if (start >= 0 && length > 0) {
            g->at = start;
            g->left = length;
            if (g->q->value_width) /* a byte array's length is its value's, once read */
                g->lengths[g->next] = length;
            return BW_PAGES_OK;
        }
        if (start >= 0) {
            g->lengths[g->next] = 0;
        } else {
            int rc = append_null(g->q, g->values, &g->lengths[g->next]);
            if (rc != BW_PAGES_OK)
                return rc;
        }
    }
    return BW_PAGES_OK;
}

/* n values of the row being filled are `index`. */
static int gather_take(gather *g, uint64_t index, int64_t n) {
    int rc = append_dictionary_value(g->q, index, n, g->values, &g->lengths[g->next]);
    if (rc != BW_PAGES_OK)
        return rc;
    g->at += n;
    g->left -= n;
    if (g->left > 0)
        return BW_PAGES_OK;
    g->next++;
    return gather_settle(g);
}

static int index_past_dictionary(uint64_t index, size_t dictionary_count, char *error) {
    return malformed(error, "dictionary index %llu past the %zu values",
                     (unsigned long long)index, dictionary_count);
}

/* A dictionary encoded page's value_count indices (the hybrid at p, n bytes, bit_width bits
   each) every one checked against the dictionary (a page with one index past it is refused,
   whichever rows are asked for, as other readers of the whole page find it), and as they
   pass, the values of the requested rows appended. */
static int take_dictionary(const bw_chunk_take *q, const uint8_t *p, size_t n, int bit_width,
                           int64_t value_count, const page_request *want, bw_bytes *values,
                           int64_t *lengths, char *error) {
    const uint8_t *end = p + n;
    const uint64_t mask = bit_width == 32 ? 0xffffffffu : ((uint64_t)1 << bit_width) - 1;
    const size_t dictionary_count = q->dictionary_count;
    gather g = {q, want, values, lengths, 0, 0, 0};
    int rc = gather_settle(&g);
    int64_t done = 0;
    while (rc == BW_PAGES_OK && done < value_count) {
        hybrid_run r = {0, 0, NULL, 0, 0};
        rc = read_hybrid_run(&p, end, bit_width, "dictionary indices", done, value_count, &r,
                             error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (r.bit_packed) {
            int64_t i = 0;
            while (i < r.take && rc == BW_PAGES_OK) {
                /* the indices up to the next one wanted: checked only */
                int64_t stop = r.take;
                if (g.next < want->count && g.at - done < stop)
                    stop = g.at - done;
                for (; i < stop; i++) {
                    uint64_t index = packed_index(r.bits, r.present, i, bit_width, mask);
                    if (index >= dictionary_count)
                        return index_past_dictionary(index, dictionary_count, error);
                }
                if (i == r.take)
                    break;
                uint64_t index = packed_index(r.bits, r.present, i, bit_width, mask);
                if (index >= dictionary_count)
                    return index_past_dictionary(index, dictionary_count, error);
                rc = gather_take(&g, index, 1);
                i++;
            }
        } else {
            if (r.value >= dictionary_count)
                return index_past_dictionary(r.value, dictionary_count, error);
            while (rc == BW_PAGES_OK && g.next < want->count && g.at < done + r.take) {
                int64_t n_here = done + r.take - g.at;
                rc = gather_take(&g, r.value, n_here < g.left ? n_here : g.left);
            }
        }
        done += r.take;
    }
    return rc;
}

/* A BYTE_ARRAY dictionary handed in from outside: its count, offsets and bytes agree with its
   size, offsets never decrease. Sets q->dictionary_count. */
static int check_byte_dictionary(bw_chunk_take *q, char *error) {
    size_t size = q->dictionary_size;
    uint64_t count;
    if (size < 16)
        return malformed(error, "byte array dictionary of %zu bytes", size);
    memcpy(&count, q->dictionary, 8);
    if (count > size / 8 - 2)
        return malformed(error, "byte array dictionary of %llu values in %zu bytes",
                         (unsigned long long)count, size);
    size_t data_size = size - 8 * ((size_t)count + 2);
    uint64_t previous = 0;
    for (size_t i = 0; i <= count; i++) {
        uint64_t offset;
        memcpy(&offset, q->dictionary + 8 + 8 * i, 8);
        if (offset < previous || offset > data_size || (i == 0 && offset != 0))
            return malformed(error, "byte array dictionary offset %zu out of order", i);
        previous = offset;
    }
    q->dictionary_count = (size_t)count;
    return BW_PAGES_OK;
}

/* Reads page `loc` and appends the values of rows[first..last) (`page_rows` rows in the
   page). Everything the header says is checked against the page's bytes and rows before
   anything is allocated for it: the header and body fill the location exactly; a page of one
   value per row holds as many values as rows, a v2 page says as many rows; the uncompressed
   size is what the compressed bytes can hold (check_plain_size). */
static int take_from_page(const bw_chunk_take *q, const bw_page_location *loc,
                          int64_t page_rows, size_t first, size_t last, scratch *s,
                          bw_bytes *values, int64_t *lengths, char *error) {
    size_t page_size = (size_t)loc->compressed_size;
    if ((uint64_t)page_size > (uint64_t)MAX_PAGE_BYTES) /* before anything is read */
        return page_too_large(page_size, error);
    bw_page_header h;
    page_read page;
    int rc = read_header_at(q->file, q->fd, q->file_size, loc->offset, page_size, &s->page,
                            &h, &page, error);
    if (rc != BW_PAGES_OK)
        return rc;
    size_t header_size = page.header_size;
    if (h.type != BW_PQ_DATA_PAGE && h.type != BW_PQ_DATA_PAGE_V2)
        return malformed(error, "the offset index points at a page of type %d", (int)h.type);
    if ((h.type == BW_PQ_DATA_PAGE ? !h.has_v1 : !h.has_v2) || h.num_values < 0)
        return malformed(error, "data page without its data page header");
    if ((uint64_t)h.compressed_size > page_size - header_size)
        return malformed(error, "page of %d bytes overruns its %zu bytes in the offset index",
                         (int)h.compressed_size, page_size);
    if ((uint64_t)h.compressed_size != page_size - header_size)
        return malformed(error, "page of %zu bytes with its header, %zu in the offset index",
                         header_size + (size_t)h.compressed_size, page_size);
    int dictionary_encoded =
        h.encoding == BW_PQ_PLAIN_DICTIONARY || h.encoding == BW_PQ_RLE_DICTIONARY;
    if (h.encoding != BW_PQ_PLAIN && !(dictionary_encoded && q->dictionary != NULL))
        return BW_PAGES_NOT_COVERED;
    if (h.type == BW_PQ_DATA_PAGE &&
        ((q->max_rep > 0 && h.rep_encoding != BW_PQ_RLE) ||
         (q->max_def > 0 && h.def_encoding != BW_PQ_RLE)))
        return BW_PAGES_NOT_COVERED;
    const int64_t count = h.num_values;
    if (q->max_rep == 0 && count != page_rows)
        return malformed(error, "page holds %lld values for %lld rows", (long long)count,
                         (long long)page_rows);
    if (h.type == BW_PQ_DATA_PAGE_V2 && h.num_rows != page_rows)
        return malformed(error, "v2 page says %d rows, the offset index %lld",
                         (int)h.num_rows, (long long)page_rows);
    const uint8_t *body;
    rc = page_body(q->file, q->fd, q->file_size, &page, (size_t)h.compressed_size, &s->page,
                   &body, error);
    if (rc != BW_PAGES_OK)
        return rc;
    page_parts d;
    rc = read_page_parts(q->codec, &h, body, q->max_rep, q->max_def, s, &d, error);
    if (rc != BW_PAGES_OK)
        return rc;

    size_t wanted = last - first;
    if (grow_spans(s, 2 * wanted * sizeof *s->spans) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    page_request want = {q->rows + first, loc->first_row, wanted, s->spans,
                         s->spans + wanted};
    int64_t value_count = count;
    list_rows l = {.defective = 0};
    int64_t rows = 0;
    if (q->max_rep == 0) {
        for (size_t j = 0; j < wanted; j++) {
            want.start[j] = q->rows[first + j] - loc->first_row;
            want.length[j] = 1;
        }
        /* a scalar column's null is a level without a value */
        if (q->max_def > 0 && (rc = definition_levels(d.def, d.def_size, q->max_def, count, &want,
                                                  &value_count, error)) != BW_PAGES_OK)
            return rc;
    } else {
        l.want = &want;
        l.list_size = q->list_size;
        rc = list_levels(d.rep, d.rep_size, count, &l, &rows, error);
        if (rc != BW_PAGES_OK)
            return rc;
        /* a list's null or empty list (a level below max_def) is not covered */
        page_request none = {NULL, 0, 0, NULL, NULL};
        int64_t values = count;
        if (q->max_def > 0 && (rc = definition_levels(d.def, d.def_size, q->max_def, count, &none,
                                                  &values, error)) != BW_PAGES_OK)
            return rc;
        if (values != count)
            return BW_PAGES_NOT_COVERED;
    }
    size_t width = (size_t)q->value_width;
    if (dictionary_encoded) {
        if (d.values_size < 1 || d.values[0] > 32)
            return malformed(error, "dictionary page indices without a bit width up to 32");
    } else if (width > 0 && (uint64_t)value_count > d.values_size / width) {
        return malformed(error, "page of %lld values has %zu bytes of values",
                         (long long)value_count, d.values_size);
    }
    if (q->max_rep > 0) {
        /* the whole page is counted, so an offset index that disagrees with it is caught */
        if (l.defective)
            return malformed(error, "%s", l.defect);
        if (rows != page_rows)
            return malformed(error, "page holds %lld rows, the offset index says %lld",
                             (long long)rows, (long long)page_rows);
    }
    if (dictionary_encoded)
        return take_dictionary(q, d.values + 1, d.values_size - 1, d.values[0], value_count,
                               &want, values, lengths + first, error);
    return take_plain(q, d.values, d.values_size, value_count, &want, values, lengths + first,
                      error);
}

/* Rows of fixed width (a scalar, a fixed-size list) take a size known before the first page
   is read: `values` gets it at once, rather than growing by doubling from 4 KiB, which in
   the heap copies what it holds at every step (as many bytes again as the values for a
   batch of a load). Bounded: a list size from a crafted schema reserves nothing, and the
   values then grow as they are read. Nothing is reserved when allocating fails. */
#define TAKE_RESERVE_MAX ((size_t)64 << 20)
static void reserve_fixed_rows(const bw_chunk_take *q, bw_bytes *values) {
    if (q->value_width == 0 || values->capacity != 0 || q->row_count == 0 ||
        (q->max_rep != 0 && q->list_size <= 0) || q->list_size > (int64_t)TAKE_RESERVE_MAX)
        return;
    size_t per_row = (size_t)q->value_width * (size_t)(q->list_size > 0 ? q->list_size : 1);
    if (q->row_count > TAKE_RESERVE_MAX / per_row)
        return;
    uint8_t *data = malloc(q->row_count * per_row);
    if (data != NULL) {
        values->data = data;
        values->capacity = q->row_count * per_row;
    }
}

int bw_parquet_take_chunk(const bw_chunk_take *q, bw_bytes *values, int64_t *lengths,
                          size_t *pages_read, char *error) {
    scratch s = {0};
    int rc = BW_PAGES_OK;
    *pages_read = 0;
    if ((q->value_width != 0 && q->value_width != 4 && q->value_width != 8) ||
        (q->value_width == 0 && q->max_rep != 0) || q->max_rep < 0 || q->max_rep > 1 ||
        q->max_def < 0 || q->max_def > 255)
        return BW_PAGES_NOT_COVERED;
    bw_chunk_take checked = *q;
    if (q->value_width == 0 && q->dictionary != NULL &&
        check_byte_dictionary(&checked, error) != BW_PAGES_OK)
        return BW_PAGES_MALFORMED;
    q = &checked;
    reserve_fixed_rows(q, values);
    size_t page = 0, i = 0;
    while (i < q->row_count) {
        int64_t row = q->rows[i];
        if (row < 0 || row >= q->group_rows || (i > 0 && row <= q->rows[i - 1])) {
            rc = malformed(error, "row %lld is not in the row group's %lld rows, in order",
                           (long long)row, (long long)q->group_rows);
            goto cleanup;
        }
        while (page + 1 < q->page_count && q->pages[page + 1].first_row <= row)
            page++;
        if (page >= q->page_count) {
            rc = malformed(error, "no page holds row %lld", (long long)row);
            goto cleanup;
        }
        int64_t page_end =
            page + 1 < q->page_count ? q->pages[page + 1].first_row : q->group_rows;
        size_t last = i + 1;
        while (last < q->row_count && q->rows[last] < page_end && q->rows[last] > q->rows[last - 1])
            last++;
        rc = take_from_page(q, &q->pages[page], page_end - q->pages[page].first_row, i, last,
                            &s, values, lengths, error);
        if (rc != BW_PAGES_OK)
            goto cleanup;
        ++*pages_read;
        i = last;
    }
cleanup:
    scratch_free(&s);
    return rc;
}

/* ---- a chunk without an offset index --------------------------------------------------- */

/* *rows: the rows of a v1 data page of lists (`page`: its header read; its body,
   compressed_size bytes after the header, read here), its repetition levels that start a
   row, counted with the page decompressed. BW_PAGES_NOT_COVERED when its first level goes on
   a row of the page before it: v1 pages of a chunk without a page index need not start at a
   row (a row may run from one page into the next), and pages are read here only whole rows
   at a time, so such a chunk is read another way. */
static int count_list_page_rows(const bw_chunk_walk *w, const bw_page_header *h,
                                page_read *page, scratch *s, int64_t *rows, char *error) {
    if (h->rep_encoding != BW_PQ_RLE)
        return BW_PAGES_NOT_COVERED;
    const uint8_t *body;
    int rc = page_body(w->file, w->fd, w->file_size, page, (size_t)h->compressed_size,
                       &s->page, &body, error);
    if (rc != BW_PAGES_OK)
        return rc;
    page_parts d;
    rc = read_page_parts(w->codec, h, body, 1, 0, s, &d, error);
    if (rc != BW_PAGES_OK)
        return rc;
    page_request none = {NULL, 0, 0, NULL, NULL};
    list_rows l = {.want = &none, .list_size = 0};
    rc = list_levels(d.rep, d.rep_size, h->num_values, &l, rows, error);
    if (rc == BW_PAGES_OK && l.starts_inside)
        return BW_PAGES_NOT_COVERED;
    if (rc == BW_PAGES_OK && l.defective)
        rc = malformed(error, "%s", l.defect);
    return rc;
}

/* *rows: how many of the row group's rows the data page holds (see bw_parquet_walk_pages);
   levels_before: the levels of the chunk's data pages before it. */
static int data_page_rows(const bw_chunk_walk *w, const bw_page_header *h, int64_t at,
                          int64_t levels_before, page_read *page, scratch *s, int64_t *rows,
                          char *error) {
    if ((h->type == BW_PQ_DATA_PAGE ? !h->has_v1 : !h->has_v2) || h->num_values < 0)
        return malformed(error, "data page at %lld without its data page header",
                         (long long)at);
    if (h->type == BW_PQ_DATA_PAGE_V2) {
        if (h->num_rows < 0 || (h->num_rows == 0 && h->num_values > 0))
            return malformed(error, "v2 data page at %lld says %d rows", (long long)at,
                             (int)h->num_rows);
        *rows = h->num_rows;
        return BW_PAGES_OK;
    }
    if (w->max_rep == 0) {
        *rows = h->num_values;
        return BW_PAGES_OK;
    }
    /* without nulls every row of a fixed_size_list has exactly list_size levels; a null row
       has one, so only a chunk the statistics say has none is counted this way, and only a
       page that starts and ends at a row by those counts (a row may go on from one v1 page
       into the next: such pages have their levels counted) */
    if (w->list_size > 0 && w->null_count == 0 && levels_before % w->list_size == 0 &&
        h->num_values % w->list_size == 0) {
        *rows = h->num_values / w->list_size;
        return BW_PAGES_OK;
    }
    return count_list_page_rows(w, h, page, s, rows, error);
}

int bw_parquet_walk_pages(const bw_chunk_walk *w, bw_page_location **pages, size_t *count,
                          char *error) {
    scratch s = {0};
    bw_page_location *locs = NULL;
    size_t n_locs = 0, capacity = 0;
    int rc = BW_PAGES_OK;
    *pages = NULL;
    *count = 0;
    if (w->max_rep < 0 || w->max_rep > 1)
        return BW_PAGES_NOT_COVERED;
    if (w->chunk_start < 0 || w->chunk_size < 0 || (uint64_t)w->chunk_start > w->file_size ||
        (uint64_t)w->chunk_size > w->file_size - (uint64_t)w->chunk_start)
        return malformed(error, "column chunk at %lld, %lld bytes, outside the file (%zu "
                         "bytes)", (long long)w->chunk_start, (long long)w->chunk_size,
                         w->file_size);
    const int64_t end = w->chunk_start + w->chunk_size;
    int64_t at = w->chunk_start, rows = 0, levels = 0;
    while (at < end) {
        bw_page_header h;
        page_read page;
        char why[BW_PAGES_ERROR_SIZE];
        /* the header is read from the chunk's remaining bytes only: one that would run past
           the chunk is refused by the header reader itself */
        rc = read_header_at(w->file, w->fd, w->file_size, at, (size_t)(end - at), &s.page, &h,
                            &page, why);
        if (rc != BW_PAGES_OK) {
            if (rc == BW_PAGES_MALFORMED)
                rc = malformed(error, "page at %lld: %s", (long long)at, why);
            else
                snprintf(error, BW_PAGES_ERROR_SIZE, "%s", why);
            goto cleanup;
        }
        size_t header_size = page.header_size;
        if ((uint64_t)h.compressed_size > (uint64_t)(end - at) - header_size) {
            rc = malformed(error, "page at %lld of %d bytes runs past its column chunk's end "
                           "at %lld", (long long)at, (int)h.compressed_size, (long long)end);
            goto cleanup;
        }
        int64_t page_size = (int64_t)header_size + h.compressed_size;
        if (page_size > INT32_MAX) {
            rc = malformed(error, "page at %lld of %lld bytes", (long long)at,
                           (long long)page_size);
            goto cleanup;
        }
        if (h.type == BW_PQ_DICTIONARY_PAGE) {
            if (at != w->chunk_start || !h.has_dictionary) {
                rc = malformed(error, "dictionary page at %lld is not its chunk's first page",
                               (long long)at);
                goto cleanup;
            }
            at += page_size;
            continue;
        }
        if (h.type != BW_PQ_DATA_PAGE && h.type != BW_PQ_DATA_PAGE_V2) {
            at += page_size; /* an index page, or a kind other readers skip too: no rows */
            continue;
        }
        int64_t page_rows = 0;
        rc = data_page_rows(w, &h, at, levels, &page, &s, &page_rows, error);
        if (rc != BW_PAGES_OK)
            goto cleanup;
        levels += h.num_values;
        if (page_rows > w->group_rows - rows) {
            rc = malformed(error, "pages up to the one at %lld hold more than the row group's "
                           "%lld rows", (long long)at, (long long)w->group_rows);
            goto cleanup;
        }
        if (page_rows > 0) { /* a page without rows holds nothing to take */
            if (n_locs == capacity) {
                size_t want = capacity ? 2 * capacity : 64;
                bw_page_location *grown = realloc(locs, want * sizeof *grown);
                if (grown == NULL) {
                    rc = BW_PAGES_NO_MEMORY;
                    goto cleanup;
                }
                locs = grown;
                capacity = want;
            }
            locs[n_locs].offset = at;
            locs[n_locs].compressed_size = (int32_t)page_size;
            locs[n_locs].first_row = rows;
            n_locs++;
            rows += page_rows;
        }
        at += page_size;
    }
    if (rows != w->group_rows) {
        rc = malformed(error, "the column chunk's pages hold %lld rows, its row group %lld",
                       (long long)rows, (long long)w->group_rows);
        goto cleanup;
    }
    *pages = locs;
    *count = n_locs;
    locs = NULL;
cleanup:
    free(locs);
    scratch_free(&s);
    return rc;
}

/* PLAIN byte arrays (n of them in size bytes) laid out for lookups: a uint64 count, count + 1
   uint64 offsets, the bytes. *out a page buffer of *capacity bytes (page_memory_free). */
static int index_byte_arrays(const uint8_t *plain, size_t size, size_t n, uint8_t **out,
                             size_t *capacity, char *error) {
    size_t at = 0, data_size = 0;
    for (size_t i = 0; i < n; i++) {
        if (size - at < 4 || read_le32(plain + at) > size - at - 4)
            return malformed(error, "dictionary value %zu overruns its page", i);
        data_size += read_le32(plain + at);
        at += 4 + (size_t)read_le32(plain + at);
    }
    void *memory = NULL;
    size_t memory_capacity = 0;
    if (page_memory_reserve(&memory, &memory_capacity, 8 * (n + 2) + data_size) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    uint8_t *block = memory;
    uint64_t count = n, offset = 0;
    memcpy(block, &count, 8);
    uint8_t *data = block + 8 * (n + 2);
    at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(block + 8 + 8 * i, &offset, 8);
        uint32_t len = read_le32(plain + at);
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
        return malformed(error, "dictionary page at %lld, outside the file (%zu bytes)",
                         (long long)offset, file_size);
    size_t room = file_size - (size_t)offset;
    read_buffer buffer = {NULL, 0};
    void *plain = NULL;
    size_t plain_capacity = 0;
    bw_page_header h;
    page_read page;
    int rc = read_header_at(file, fd, file_size, offset, room, &buffer, &h, &page, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    size_t header_size = page.header_size;
    if (h.type != BW_PQ_DICTIONARY_PAGE || !h.has_dictionary || h.num_values < 0) {
        rc = malformed(error, "no dictionary page at %lld", (long long)offset);
        goto cleanup;
    }
    if (h.encoding != BW_PQ_PLAIN && h.encoding != BW_PQ_PLAIN_DICTIONARY) {
        rc = BW_PAGES_NOT_COVERED;
        goto cleanup;
    }
    if ((uint64_t)h.compressed_size > room - header_size) {
        rc = malformed(error, "dictionary page of %d bytes overruns the file",
                       (int)h.compressed_size);
        goto cleanup;
    }
    /* a chunk's pages follow one another: a dictionary page that does not end where the first
       data page starts has a header that was misread, and a reader walking the chunk from
       its start refuses it */
    int64_t page_end = offset + (int64_t)header_size + (int64_t)h.compressed_size;
    if (next_page >= 0 && page_end != next_page) {
        rc = malformed(error, "dictionary page at %lld ends at %lld, not at the first data "
                       "page (%lld)", (long long)offset, (long long)page_end,
                       (long long)next_page);
        goto cleanup;
    }
    size_t plain_size = (size_t)h.uncompressed_size;
    size_t width = value_width ? (size_t)value_width : 4; /* a byte array: its length at least */
    if ((uint64_t)h.num_values > plain_size / width) {
        rc = malformed(error, "dictionary page of %d values has %zu bytes",
                       (int)h.num_values, plain_size);
        goto cleanup;
    }
    const uint8_t *body;
    rc = page_body(file, fd, file_size, &page, (size_t)h.compressed_size, &buffer, &body,
                   error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    rc = check_plain_size(codec, body, (size_t)h.compressed_size, plain_size, error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    rc = page_memory_reserve(&plain, &plain_capacity, plain_size ? plain_size : 1);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    if (codec == BW_PQ_UNCOMPRESSED) {
        memcpy(plain, body, plain_size);
    } else if ((rc = decompress(codec, body, (size_t)h.compressed_size, plain, plain_size,
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
    page_memory_free(plain, plain_capacity);
    buffer_free(&buffer);
    return rc;
}

#ifdef BW_HAVE_ZSTD
#define ZSTD_COVERED 1
#else
#define ZSTD_COVERED 0 /* unless a decoder is set: bw_parquet_set_zstd_decoder */
#endif

static const bw_parquet_codec codecs[] = {
    {BW_PQ_UNCOMPRESSED, "UNCOMPRESSED", 1, NULL},
    {BW_PQ_SNAPPY, "SNAPPY", 1, NULL}, /* bulkwire's own decompressor (snappy.c) */
    {BW_PQ_GZIP, "GZIP", 1, NULL},
    {3, "LZO", 0, NULL},
    {4, "BROTLI", 0, NULL},
    {5, "LZ4", 0, NULL},
    {BW_PQ_ZSTD, "ZSTD", ZSTD_COVERED, "libzstd"},
    {7, "LZ4_RAW", 0, NULL},
};

const bw_parquet_codec *bw_parquet_codecs(size_t *count) {
    *count = sizeof codecs / sizeof codecs[0];
    return codecs;
}
