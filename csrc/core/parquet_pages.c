/* Parquet page-granular reads: see parquet_pages.h. */
#include "parquet_pages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "file_read.h"
#include "thrift_compact.h"

#ifdef BW_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef BW_HAVE_SNAPPY
#include <snappy-c.h>
#endif

/* A page larger than this is refused before anything is allocated for it. */
#define MAX_PAGE_BYTES ((int64_t)1 << 30)

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
    if (length + 1 > buffer->capacity) {
        uint8_t *grown = realloc(buffer->data, length + 1);
        if (grown == NULL)
            return BW_PAGES_NO_MEMORY;
        buffer->data = grown;
        buffer->capacity = length + 1;
    }
    int rc = bw_read_exact(fd, buffer->data, length, offset, file_size, error,
                           BW_PAGES_ERROR_SIZE);
    if (rc != BW_READ_OK)
        return rc == BW_READ_SHORT ? BW_PAGES_MALFORMED : BW_PAGES_READ_FAILED;
    *bytes = buffer->data;
    return BW_PAGES_OK;
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

/* ColumnMetaData: the codec; whether any page may be dictionary encoded (dictionary 1) and
   where the dictionary page is; where the data pages start, the chunk's size and its null
   count, for a walk over its page headers. */
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
            m->dictionary = 1;
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
    where[0] = offset;
    where[1] = length;
    where[2] = m.codec;
    /* a dictionary page must lie inside the file; its header is checked when it is read */
    if (m.dictionary && (m.dictionary_offset < 0 || (uint64_t)m.dictionary_offset >= file_size))
        where[3] = BW_DICTIONARY_UNLOCATED;
    else
        where[3] = m.dictionary ? m.dictionary_offset : BW_NO_DICTIONARY;
    /* the chunk starts at its dictionary page when it has one before the data pages; offset 0
       is the file's magic, which some writers leave there to mean none */
    int64_t start = m.data_page_offset;
    if (m.dictionary_offset > 0 && (start < 0 || m.dictionary_offset < start))
        start = m.dictionary_offset;
    where[4] = start;
    where[5] = m.total_compressed_size;
    where[6] = m.null_count;
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
    free(buffer.data);
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
                            int64_t group_rows, bw_page_location **pages, size_t *count,
                            char *error) {
    bw_thrift t;
    bw_thrift_init(&t, data, size);
    bw_page_location *locs = NULL;
    size_t n_locs = 0;
    int rc = BW_PAGES_OK;
    int16_t last = 0, id;
    int type;
    *pages = NULL;
    *count = 0;
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
        for (uint32_t i = 0; i < n; i++) {
            rc = read_page_location(&t, &locs[i], error);
            if (rc != BW_PAGES_OK)
                goto cleanup;
            const bw_page_location *p = &locs[i];
            if ((uint64_t)p->offset > file_size ||
                (uint64_t)p->compressed_size > file_size - (uint64_t)p->offset) {
                rc = malformed(error, "offset index: page %u at %lld, %d bytes, outside the "
                               "file (%zu bytes)", (unsigned)i, (long long)p->offset,
                               (int)p->compressed_size, file_size);
                goto cleanup;
            }
            if ((i == 0 ? p->first_row != 0 : p->first_row <= locs[i - 1].first_row) ||
                p->first_row >= group_rows) {
                rc = malformed(error, "offset index: page %u starts at row %lld (row group of "
                               "%lld rows)", (unsigned)i, (long long)p->first_row,
                               (long long)group_rows);
                goto cleanup;
            }
        }
        n_locs = n;
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

int bw_parquet_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                           size_t *header_size, char *error) {
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
        if (bw_thrift_field(&t, &last, &type, &id) < 0)
            return thrift_failed(&t, "page header", error);
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
        if (rc < 0)
            return thrift_failed(&t, "page header", error);
    }
    if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0)
        return malformed(error, "page header: type or sizes missing or negative");
    *header_size = (size_t)(t.pos - data);
    return BW_PAGES_OK;
}

/* ---- levels ---------------------------------------------------------------------------- */

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
   the dictionary indices, which differ only in where the values go and what bounds them. */
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

/* Decodes `count` levels of the RLE/bit-packed hybrid at p (n bytes) into out; a level above
   max_level is malformed. */
static int decode_levels(const uint8_t *p, size_t n, int max_level, uint8_t *out,
                         int64_t count, char *error) {
    int bit_width = 0;
    while ((1 << bit_width) <= max_level)
        bit_width++;
    const uint8_t *end = p + n;
    unsigned mask = (1u << bit_width) - 1;
    int64_t done = 0;
    while (done < count) {
        hybrid_run r;
        int rc = read_hybrid_run(&p, end, bit_width, "levels", done, count, &r, error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (r.bit_packed) {
            /* locals, not the struct's fields: the byte stores below may alias them */
            const uint8_t *bits = r.bits;
            const size_t present = r.present;
            const int64_t take = r.take;
            for (int64_t i = 0; i < take; i++) {
                uint64_t bit = (uint64_t)i * (uint64_t)bit_width;
                uint64_t byte = bit >> 3;
                unsigned word = bits[byte];
                if (byte + 1 < present)
                    word |= (unsigned)bits[byte + 1] << 8;
                unsigned value = (word >> (bit & 7)) & mask;
                if (value > (unsigned)max_level)
                    return malformed(error, "level %u above the maximum %d", value, max_level);
                out[done + i] = (uint8_t)value;
            }
        } else {
            if (r.value > (unsigned)max_level)
                return malformed(error, "level %u above the maximum %d", (unsigned)r.value,
                                 max_level);
            memset(out + done, (int)r.value, (size_t)r.take);
        }
        done += r.take;
    }
    return BW_PAGES_OK;
}

/* Decodes `count` dictionary indices of the RLE/bit-packed hybrid at p (n bytes, `bit_width`
   bits each) into out; an index at or past dictionary_count is malformed. */
static int decode_indices(const uint8_t *p, size_t n, int bit_width, size_t dictionary_count,
                          uint32_t *out, int64_t count, char *error) {
    const uint8_t *end = p + n;
    int64_t done = 0;
    uint64_t mask = bit_width == 32 ? 0xffffffffu : ((uint64_t)1 << bit_width) - 1;
    while (done < count) {
        hybrid_run r;
        int rc = read_hybrid_run(&p, end, bit_width, "dictionary indices", done, count, &r,
                                 error);
        if (rc != BW_PAGES_OK)
            return rc;
        if (r.bit_packed) {
            const uint8_t *bits = r.bits;
            const size_t present = r.present;
            const int64_t take = r.take;
            /* Every index of the page is decoded (a page with one past the dictionary is
               refused whichever rows are asked for), so this loop runs over whole pages:
               one 8-byte load per value (a value of up to 32 bits starts within its first
               byte), and byte by byte only within the run's last 7 bytes. */
            for (int64_t i = 0; i < take; i++) {
                uint64_t bit = (uint64_t)i * (uint64_t)bit_width;
                size_t byte = (size_t)(bit >> 3);
                uint64_t word = 0;
                if (present - byte >= 8)
                    word = read_le64(bits + byte);
                else
                    for (size_t k = 0; byte + k < present; k++)
                        word |= (uint64_t)bits[byte + k] << (8 * k);
                uint64_t value = (word >> (bit & 7)) & mask;
                if (value >= dictionary_count)
                    return malformed(error, "dictionary index %llu past the %zu values",
                                     (unsigned long long)value, dictionary_count);
                out[done + i] = (uint32_t)value;
            }
        } else {
            if (r.value >= dictionary_count)
                return malformed(error, "dictionary index %llu past the %zu values",
                                 (unsigned long long)r.value, dictionary_count);
            for (int64_t i = 0; i < r.take; i++)
                out[done + i] = (uint32_t)r.value;
        }
        done += r.take;
    }
    return BW_PAGES_OK;
}

/* ---- decompression --------------------------------------------------------------------- */

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
#ifdef BW_HAVE_ZSTD
    case BW_PQ_ZSTD: {
        size_t produced = ZSTD_decompress(out, out_size, in, in_size);
        if (ZSTD_isError(produced) || produced != out_size)
            return malformed(error, "zstd page does not decompress to its %zu bytes", out_size);
        return BW_PAGES_OK;
    }
#endif
#ifdef BW_HAVE_SNAPPY
    case BW_PQ_SNAPPY: {
        size_t produced = out_size;
        if (snappy_uncompress((const char *)in, in_size, (char *)out, &produced) != SNAPPY_OK ||
            produced != out_size)
            return malformed(error, "snappy page does not decompress to its %zu bytes",
                             out_size);
        return BW_PAGES_OK;
    }
#endif
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

typedef struct {
    uint8_t *plain;   /* decompressed page */
    uint8_t *rep, *def;
    uint32_t *index; /* dictionary indices of a dictionary encoded page */
    size_t plain_capacity, rep_capacity, def_capacity, index_count;
    read_buffer page; /* the page's bytes, read from the file's descriptor */
} scratch;

static int grow(uint8_t **p, size_t *capacity, size_t need) {
    if (need <= *capacity)
        return BW_PAGES_OK;
    uint8_t *grown = realloc(*p, need);
    if (grown == NULL)
        return BW_PAGES_NO_MEMORY;
    *p = grown;
    *capacity = need;
    return BW_PAGES_OK;
}

/* Appends values [start, start + n) of a page: straight from its PLAIN bytes, or through its
   dictionary indices when index is not NULL. */
static int append_values(const bw_chunk_take *q, const uint8_t *plain, const uint32_t *index,
                         size_t start, size_t n, bw_bytes *values) {
    size_t width = (size_t)q->value_width;
    if (index == NULL)
        return append(values, plain + start * width, n * width);
    size_t at = values->size;
    int rc = append(values, NULL, n * width); /* room first, then the gather */
    if (rc != BW_PAGES_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        memcpy(values->data + at + i * width, q->dictionary + (size_t)index[start + i] * width,
               width);
    return BW_PAGES_OK;
}

/* Levels of a v1 page: a 4-byte length, then the hybrid encoding. */
static int v1_levels(const uint8_t **p, size_t *left, int max_level, uint8_t *out,
                     int64_t count, const char *what, char *error) {
    if (*left < 4)
        return malformed(error, "page ends before its %s levels", what);
    uint32_t n = read_le32(*p);
    if (n > *left - 4)
        return malformed(error, "%s levels of %u bytes overrun the page", what, (unsigned)n);
    int rc = decode_levels(*p + 4, n, max_level, out, count, error);
    *p += 4 + (size_t)n;
    *left -= 4 + (size_t)n;
    return rc;
}

/* Entry i of a BYTE_ARRAY dictionary (bw_parquet_dictionary's layout: a uint64 count, count
   + 1 uint64 offsets, the bytes), already checked by check_byte_dictionary. */
static void byte_dictionary_entry(const bw_chunk_take *q, uint32_t i, const uint8_t **data,
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
   refused here too, whichever of its rows are asked for. */
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

/* The BYTE_ARRAY rows rows[first..last) of a page (one value per row): the value bytes
   appended, lengths[i] the byte length or -1 for a null. PLAIN values have no stride, so the
   values are walked up to the last requested row; check_plain_byte_arrays has already
   checked every length. */
static int take_byte_arrays(const bw_chunk_take *q, const scratch *s, const uint8_t *p,
                            size_t left, const uint32_t *index, int64_t count,
                            int64_t value_count, int64_t first_row, size_t first, size_t last,
                            bw_bytes *values, int64_t *lengths, char *error) {
    if (index == NULL) {
        int rc = check_plain_byte_arrays(p, left, value_count, error);
        if (rc != BW_PAGES_OK)
            return rc;
    }
    int64_t level = 0, value = 0;
    size_t at_byte = 0;
    for (size_t i = first; i < last; i++) {
        int64_t at = q->rows[i] - first_row;
        /* the values of the levels before this row, skipped */
        for (; level < at; level++) {
            if (value_count != count && s->def[level] != q->max_def)
                continue;
            if (index == NULL)
                at_byte += 4 + (size_t)read_le32(p + at_byte);
            value++;
        }
        level = at + 1;
        if (value_count != count && s->def[at] != q->max_def) {
            lengths[i] = -1;
            continue;
        }
        const uint8_t *data;
        size_t size;
        if (index == NULL) {
            size = read_le32(p + at_byte);
            data = p + at_byte + 4;
            at_byte += 4 + size;
        } else {
            byte_dictionary_entry(q, index[value], &data, &size);
        }
        value++;
        int rc = append(values, data, size);
        if (rc != BW_PAGES_OK)
            return rc;
        lengths[i] = (int64_t)size;
    }
    return BW_PAGES_OK;
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

/* Reads page `page` and appends the values of rows[first..last) (page-relative
   `page_first_row`, `page_rows` rows). */
static int take_from_page(const bw_chunk_take *q, const bw_page_location *loc,
                          int64_t page_rows, size_t first, size_t last, scratch *s,
                          bw_bytes *values, int64_t *lengths, char *error) {
    size_t page_size = (size_t)loc->compressed_size;
    const uint8_t *page;
    int rc = file_bytes(q->file, q->fd, q->file_size, (uint64_t)loc->offset, page_size,
                        &s->page, &page, error);
    if (rc != BW_PAGES_OK)
        return rc;
    bw_page_header h;
    size_t header_size;
    rc = bw_parquet_page_header(page, page_size, &h, &header_size, error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (h.type != BW_PQ_DATA_PAGE && h.type != BW_PQ_DATA_PAGE_V2)
        return malformed(error, "the offset index points at a page of type %d", (int)h.type);
    if ((h.type == BW_PQ_DATA_PAGE ? !h.has_v1 : !h.has_v2) || h.num_values < 0)
        return malformed(error, "data page without its data page header");
    if ((uint64_t)h.compressed_size > page_size - header_size)
        return malformed(error, "page of %d bytes overruns its %zu bytes in the offset index",
                         (int)h.compressed_size, page_size);
    if ((int64_t)h.uncompressed_size > MAX_PAGE_BYTES)
        return malformed(error, "page of %d bytes uncompressed", (int)h.uncompressed_size);
    int dictionary_encoded =
        h.encoding == BW_PQ_PLAIN_DICTIONARY || h.encoding == BW_PQ_RLE_DICTIONARY;
    if (h.encoding != BW_PQ_PLAIN && !(dictionary_encoded && q->dictionary != NULL))
        return BW_PAGES_NOT_COVERED;
    if (h.type == BW_PQ_DATA_PAGE &&
        ((q->max_rep > 0 && h.rep_encoding != BW_PQ_RLE) ||
         (q->max_def > 0 && h.def_encoding != BW_PQ_RLE)))
        return BW_PAGES_NOT_COVERED;
    int64_t count = h.num_values;
    /* one more repetition level than the page has: the end-of-page sentinel */
    if (grow(&s->rep, &s->rep_capacity, (size_t)count + 1) != BW_PAGES_OK ||
        grow(&s->def, &s->def_capacity, (size_t)count + 1) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;

    const uint8_t *body = page + header_size;
    size_t body_size = (size_t)h.compressed_size, plain_size = (size_t)h.uncompressed_size;
    const uint8_t *p;
    size_t left;
    if (h.type == BW_PQ_DATA_PAGE_V2) {
        if (h.rep_bytes < 0 || h.def_bytes < 0 ||
            (uint64_t)h.rep_bytes + (uint64_t)h.def_bytes > body_size ||
            (uint64_t)h.rep_bytes + (uint64_t)h.def_bytes > plain_size)
            return malformed(error, "v2 page levels overrun the page");
        size_t levels = (size_t)h.rep_bytes + (size_t)h.def_bytes;
        if (q->max_rep > 0) {
            rc = decode_levels(body, (size_t)h.rep_bytes, q->max_rep, s->rep, count, error);
            if (rc != BW_PAGES_OK)
                return rc;
        }
        if (q->max_def > 0) {
            rc = decode_levels(body + h.rep_bytes, (size_t)h.def_bytes, q->max_def, s->def,
                               count, error);
            if (rc != BW_PAGES_OK)
                return rc;
        }
        if (!h.is_compressed || q->codec == BW_PQ_UNCOMPRESSED) {
            if (body_size != plain_size)
                return malformed(error, "uncompressed page of %zu bytes says %zu", body_size,
                                 plain_size);
            p = body + levels;
            left = body_size - levels;
        } else {
            if (grow(&s->plain, &s->plain_capacity, plain_size - levels + 1) != BW_PAGES_OK)
                return BW_PAGES_NO_MEMORY;
            rc = decompress(q->codec, body + levels, body_size - levels, s->plain,
                            plain_size - levels, error);
            if (rc != BW_PAGES_OK)
                return rc;
            p = s->plain;
            left = plain_size - levels;
        }
    } else {
        if (q->codec == BW_PQ_UNCOMPRESSED) {
            if (body_size != plain_size)
                return malformed(error, "uncompressed page of %zu bytes says %zu", body_size,
                                 plain_size);
            p = body;
        } else {
            if (grow(&s->plain, &s->plain_capacity, plain_size + 1) != BW_PAGES_OK)
                return BW_PAGES_NO_MEMORY;
            rc = decompress(q->codec, body, body_size, s->plain, plain_size, error);
            if (rc != BW_PAGES_OK)
                return rc;
            p = s->plain;
        }
        left = plain_size;
        if (q->max_rep > 0 &&
            (rc = v1_levels(&p, &left, q->max_rep, s->rep, count, "repetition", error)) != 0)
            return rc;
        if (q->max_def > 0 &&
            (rc = v1_levels(&p, &left, q->max_def, s->def, count, "definition", error)) != 0)
            return rc;
    }
    /* a scalar column's null is a level without a value; a list's null or empty list is not
       covered */
    int64_t value_count = count;
    if (q->max_def > 0) {
        if (q->max_rep > 0) {
            for (int64_t i = 0; i < count; i++)
                if (s->def[i] != q->max_def)
                    return BW_PAGES_NOT_COVERED;
        } else {
            value_count = 0;
            for (int64_t i = 0; i < count; i++)
                value_count += s->def[i] == q->max_def;
        }
    }
    int64_t first_row = loc->first_row;
    if (q->max_rep == 0 && count != page_rows)
        return malformed(error, "page holds %lld values for %lld rows", (long long)count,
                         (long long)page_rows);
    size_t width = (size_t)q->value_width;
    const uint32_t *index = NULL;
    if (dictionary_encoded) {
        if (left < 1 || p[0] > 32)
            return malformed(error, "dictionary page indices without a bit width up to 32");
        if (s->index_count < (size_t)count + 1) {
            uint32_t *grown = realloc(s->index, ((size_t)count + 1) * sizeof *grown);
            if (grown == NULL)
                return BW_PAGES_NO_MEMORY;
            s->index = grown;
            s->index_count = (size_t)count + 1;
        }
        /* every index of the page is decoded, not only up to the last row asked for: an
           index past the dictionary anywhere makes the page malformed, as other readers of
           the whole page find it */
        rc = decode_indices(p + 1, left - 1, p[0], q->dictionary_count, s->index, value_count,
                            error);
        if (rc != BW_PAGES_OK)
            return rc;
        index = s->index;
    } else if (width > 0 && (uint64_t)value_count > left / width) {
        return malformed(error, "page of %lld values has %zu bytes of values",
                         (long long)value_count, left);
    }
    if (width == 0)
        return take_byte_arrays(q, s, p, left, index, count, value_count, first_row, first,
                                last, values, lengths, error);
    if (q->max_rep == 0) {
        /* levels before the requested row counted once, rows in order: the value of a row is
           the number of non-null levels before it */
        int64_t level = 0, value = 0;
        for (size_t i = first; i < last; i++) {
            int64_t at = q->rows[i] - first_row;
            if (value_count != count) {
                for (; level < at; level++)
                    value += s->def[level] == q->max_def;
                if (s->def[at] != q->max_def) { /* null: a zeroed slot, length 0 */
                    static const uint8_t zeros[8];
                    if ((rc = append(values, zeros, width)) != 0)
                        return rc;
                    lengths[i] = 0;
                    continue;
                }
            } else {
                value = at;
            }
            if ((rc = append_values(q, p, index, (size_t)value, 1, values)) != 0)
                return rc;
            lengths[i] = 1;
        }
        return BW_PAGES_OK;
    }
    if (count > 0 && s->rep[0] != 0)
        return malformed(error, "page starts inside a row");
    /* one pass over the repetition levels, copying each requested row as it ends; the whole
       page is counted, so an offset index that disagrees with it is caught */
    int64_t row = -1, start = 0;
    size_t next = first;
    s->rep[count] = 0; /* a sentinel: the page's end ends its last row */
    for (int64_t i = 0; i <= count; i++) {
        if (s->rep[i] != 0)
            continue;
        int64_t n = i - start;
        /* every row, not only the requested ones: a page whose levels break the fixed size
           is corrupt, and pyarrow would read its rows otherwise than we do */
        if (row >= 0 && q->list_size > 0 && n != q->list_size)
            return malformed(error, "row %lld of a fixed_size_list of %lld holds %lld values",
                             (long long)(first_row + row), (long long)q->list_size,
                             (long long)n);
        if (row >= 0 && next < last && first_row + row == q->rows[next]) {
            if ((rc = append_values(q, p, index, (size_t)start, (size_t)n, values)) != 0)
                return rc;
            lengths[next++] = n;
        }
        row++;
        start = i;
    }
    if (row != page_rows || next < last)
        return malformed(error, "page holds %lld rows, the offset index says %lld",
                         (long long)row, (long long)page_rows);
    return BW_PAGES_OK;
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
    free(s.plain);
    free(s.rep);
    free(s.def);
    free(s.index);
    free(s.page.data);
    return rc;
}

/* ---- a page whose size is known only from its header ---------------------------------- */

/* Bytes a page header is first looked for in, when the file is read through its descriptor:
   more are read only while the header does not parse in what was read. */
#define HEADER_WINDOW 4096

/* A page as far as it has been read: `available` bytes at `bytes`, from the file's byte `at`
   on, its header (header_size bytes) among them. */
typedef struct {
    int64_t at;
    size_t header_size, available;
    const uint8_t *bytes;
} page_read;

/* The page header at `at`, read from at most `room` bytes of the file: a header that would
   run past them is refused by the header reader, as if the file ended there. Through the
   descriptor, HEADER_WINDOW bytes are read first, and more only while the header does not
   parse in those: a page's header, not its body. */
static int read_header_at(const uint8_t *file, int fd, size_t file_size, int64_t at,
                          size_t room, read_buffer *buffer, bw_page_header *h, page_read *p,
                          char *error) {
    size_t window = file != NULL || room < HEADER_WINDOW ? room : HEADER_WINDOW;
    for (;;) {
        int rc = file_bytes(file, fd, file_size, (uint64_t)at, window, buffer, &p->bytes,
                            error);
        if (rc != BW_PAGES_OK)
            return rc;
        rc = bw_parquet_page_header(p->bytes, window, h, &p->header_size, error);
        if (rc != BW_PAGES_MALFORMED || window == room) {
            p->at = at;
            p->available = window;
            return rc;
        }
        window = room / 8 < window ? room : window * 8;
    }
}

/* *body: the body_size bytes after the page's header, which the caller checked lie inside
   the room its header was read from; read now when they were not read with the header. */
static int page_body(const uint8_t *file, int fd, size_t file_size, page_read *p,
                     size_t body_size, read_buffer *buffer, const uint8_t **body, char *error) {
    size_t need = p->header_size + body_size;
    if (need > p->available) {
        int rc = file_bytes(file, fd, file_size, (uint64_t)p->at, need, buffer, &p->bytes,
                            error);
        if (rc != BW_PAGES_OK)
            return rc;
        p->available = need;
    }
    *body = p->bytes + p->header_size;
    return BW_PAGES_OK;
}

/* ---- a chunk without an offset index --------------------------------------------------- */

/* *rows: the rows of a v1 data page of lists (`page`: its header read; its body,
   compressed_size bytes after the header, read here), its repetition levels that start a
   row, counted with the page decompressed. */
static int count_list_page_rows(const bw_chunk_walk *w, const bw_page_header *h,
                                page_read *page, scratch *s, int64_t *rows, char *error) {
    if (h->rep_encoding != BW_PQ_RLE)
        return BW_PAGES_NOT_COVERED;
    if ((int64_t)h->uncompressed_size > MAX_PAGE_BYTES)
        return malformed(error, "page of %d bytes uncompressed", (int)h->uncompressed_size);
    size_t body_size = (size_t)h->compressed_size, plain_size = (size_t)h->uncompressed_size;
    const uint8_t *body;
    int read = page_body(w->file, w->fd, w->file_size, page, body_size, &s->page, &body, error);
    if (read != BW_PAGES_OK)
        return read;
    const uint8_t *p = body;
    if (w->codec == BW_PQ_UNCOMPRESSED) {
        if (body_size != plain_size)
            return malformed(error, "uncompressed page of %zu bytes says %zu", body_size,
                             plain_size);
    } else {
        if (grow(&s->plain, &s->plain_capacity, plain_size + 1) != BW_PAGES_OK)
            return BW_PAGES_NO_MEMORY;
        int rc = decompress(w->codec, body, body_size, s->plain, plain_size, error);
        if (rc != BW_PAGES_OK)
            return rc;
        p = s->plain;
    }
    int64_t count = h->num_values;
    if (grow(&s->rep, &s->rep_capacity, (size_t)count + 1) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    size_t left = plain_size;
    int rc = v1_levels(&p, &left, w->max_rep, s->rep, count, "repetition", error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (count > 0 && s->rep[0] != 0)
        return malformed(error, "page starts inside a row");
    int64_t starts = 0;
    for (int64_t i = 0; i < count; i++)
        starts += s->rep[i] == 0;
    *rows = starts;
    return BW_PAGES_OK;
}

/* *rows: how many of the row group's rows the data page holds (see bw_parquet_walk_pages). */
static int data_page_rows(const bw_chunk_walk *w, const bw_page_header *h, int64_t at,
                          page_read *page, scratch *s, int64_t *rows, char *error) {
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
       has one, so only a chunk the statistics say has none is counted this way */
    if (w->list_size > 0 && w->null_count == 0) {
        if (h->num_values % w->list_size != 0)
            return malformed(error, "data page at %lld holds %d values, not rows of a "
                             "fixed_size_list of %lld", (long long)at, (int)h->num_values,
                             (long long)w->list_size);
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
    int64_t at = w->chunk_start, rows = 0;
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
        rc = data_page_rows(w, &h, at, &page, &s, &page_rows, error);
        if (rc != BW_PAGES_OK)
            goto cleanup;
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
    free(s.plain);
    free(s.rep);
    free(s.def);
    free(s.index);
    free(s.page.data);
    return rc;
}

/* PLAIN byte arrays (n of them in size bytes) laid out for lookups: a uint64 count, count + 1
   uint64 offsets, the bytes. *out malloc'ed. */
static int index_byte_arrays(const uint8_t *plain, size_t size, size_t n, uint8_t **out,
                             char *error) {
    size_t at = 0, data_size = 0;
    for (size_t i = 0; i < n; i++) {
        if (size - at < 4 || read_le32(plain + at) > size - at - 4)
            return malformed(error, "dictionary value %zu overruns its page", i);
        data_size += read_le32(plain + at);
        at += 4 + (size_t)read_le32(plain + at);
    }
    uint8_t *block = malloc(8 * (n + 2) + data_size);
    if (block == NULL)
        return BW_PAGES_NO_MEMORY;
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
    return BW_PAGES_OK;
}

int bw_parquet_dictionary(const uint8_t *file, int fd, size_t file_size, int64_t offset,
                          int64_t next_page, int codec, int value_width, uint8_t **values,
                          size_t *count, char *error) {
    *values = NULL;
    *count = 0;
    if (value_width != 0 && value_width != 4 && value_width != 8)
        return BW_PAGES_NOT_COVERED;
    if (offset < 0 || (uint64_t)offset >= file_size)
        return malformed(error, "dictionary page at %lld, outside the file (%zu bytes)",
                         (long long)offset, file_size);
    size_t room = file_size - (size_t)offset;
    read_buffer buffer = {NULL, 0};
    uint8_t *plain = NULL;
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
    if ((int64_t)h.uncompressed_size > MAX_PAGE_BYTES) {
        rc = malformed(error, "dictionary page of %d bytes uncompressed",
                       (int)h.uncompressed_size);
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
    plain = malloc(plain_size ? plain_size : 1);
    if (plain == NULL) {
        rc = BW_PAGES_NO_MEMORY;
        goto cleanup;
    }
    if (codec == BW_PQ_UNCOMPRESSED) {
        if ((size_t)h.compressed_size != plain_size) {
            rc = malformed(error, "uncompressed dictionary page of %d bytes says %zu",
                           (int)h.compressed_size, plain_size);
            goto cleanup;
        }
        memcpy(plain, body, plain_size);
    } else if ((rc = decompress(codec, body, (size_t)h.compressed_size, plain, plain_size,
                                error)) != BW_PAGES_OK) {
        goto cleanup;
    }
    if (value_width == 0) {
        rc = index_byte_arrays(plain, plain_size, (size_t)h.num_values, values, error);
        if (rc == BW_PAGES_OK)
            *count = (size_t)h.num_values;
        goto cleanup;
    }
    *values = plain;
    plain = NULL;
    *count = (size_t)h.num_values;
cleanup:
    free(plain);
    free(buffer.data);
    return rc;
}

int bw_parquet_have_snappy(void) {
#ifdef BW_HAVE_SNAPPY
    return 1;
#else
    return 0;
#endif
}

int bw_parquet_have_zstd(void) {
#ifdef BW_HAVE_ZSTD
    return 1;
#else
    return 0;
#endif
}
