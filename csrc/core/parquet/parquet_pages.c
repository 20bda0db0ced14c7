/* Parquet page-granular reads: see parquet_pages.h. This file: the reader's errors, and the
   requested rows of one column chunk read from only the pages that hold them
   (bw_parquet_take_chunk). The footer, the offset index, page headers, the walk over a chunk
   without an index, dictionary pages, levels and codecs have files of their own beside it
   (parquet_internal.h says what they share). */
#include "parquet_pages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parquet_internal.h"

/* ---- errors ---------------------------------------------------------------------------- */

int bw_pq_malformed(char *error, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, BW_PAGES_ERROR_SIZE, format, args);
    va_end(args);
    return BW_PAGES_MALFORMED;
}

int bw_pq_thrift_failed(const bw_thrift *t, const char *what, char *error) {
    return bw_pq_malformed(error, "%s: %s", what, t->error ? t->error : "malformed");
}

int bw_pq_struct_read(int rc, const bw_thrift *t, const bw_pq_refusal *r, const char *what,
                      char *error) {
    if (rc == 0)
        return BW_PAGES_OK;
    if (rc == BW_PQ_HANDLED)
        return r->rc;
    return bw_pq_thrift_failed(t, what, error);
}

int bw_pq_struct_list(bw_thrift *t, int *seen, uint32_t *count) {
    int elem;
    if ((*seen)++ || bw_thrift_list(t, &elem, count) < 0 || elem != BW_THRIFT_STRUCT)
        return -1;
    return 0;
}

/* ---- one column chunk's rows ----------------------------------------------------------- */

/* Makes room for n more bytes in b (doubling): BW_PAGES_OK or BW_PAGES_NO_MEMORY. */
static int grow(bw_bytes *b, size_t n) {
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
    return BW_PAGES_OK;
}

/* n bytes of p (or room for them: p NULL) at the end of b. Inline, the growth out of line:
   it runs once per value taken. */
static inline int append(bw_bytes *b, const uint8_t *p, size_t n) {
    if (n > b->capacity - b->size && grow(b, n) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    if (n && p != NULL)
        memcpy(b->data + b->size, p, n);
    b->size += n;
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
            return bw_pq_malformed(error, "byte array value %lld overruns its page",
                                   (long long)value);
        uint32_t n = bw_pq_le32(p + at_byte);
        if (n > left - at_byte - 4)
            return bw_pq_malformed(error, "byte array value %lld of %u bytes overruns its page",
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
                      const bw_pq_rows *want, bw_bytes *values, int64_t *lengths,
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
                at_byte += 4 + (size_t)bw_pq_le32(p + at_byte);
            size_t size = bw_pq_le32(p + at_byte);
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
    const bw_pq_rows *want;
    bw_bytes *values;
    int64_t *lengths;
    size_t next;
    int64_t at, left;
} gather;

/* Moves to the next requested row that has values, appending the nulls on the way. */
static int gather_settle(gather *g) {
    const bw_pq_rows *w = g->want;
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
    return bw_pq_malformed(error, "dictionary index %llu past the %zu values",
                           (unsigned long long)index, dictionary_count);
}

/* A dictionary encoded page's value_count indices (the hybrid at p, n bytes, bit_width bits
   each) every one checked against the dictionary (a page with one index past it is refused,
   whichever rows are asked for, as other readers of the whole page find it), and as they
   pass, the values of the requested rows appended. */
static int take_dictionary(const bw_chunk_take *q, const uint8_t *p, size_t n, int bit_width,
                           int64_t value_count, const bw_pq_rows *want, bw_bytes *values,
                           int64_t *lengths, char *error) {
    const uint8_t *end = p + n;
    const uint64_t mask = bit_width == 32 ? 0xffffffffu : ((uint64_t)1 << bit_width) - 1;
    const size_t dictionary_count = q->dictionary_count;
    gather g = {q, want, values, lengths, 0, 0, 0};
    int rc = gather_settle(&g);
    int64_t done = 0;
    while (rc == BW_PAGES_OK && done < value_count) {
        bw_pq_run r = {0, 0, NULL, 0, 0};
        rc = bw_pq_read_run(&p, end, bit_width, "dictionary indices", done, value_count, &r,
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
                    uint64_t index = bw_pq_packed_index(r.bits, r.present, i, bit_width, mask);
                    if (index >= dictionary_count)
                        return index_past_dictionary(index, dictionary_count, error);
                }
                if (i == r.take)
                    break;
                uint64_t index = bw_pq_packed_index(r.bits, r.present, i, bit_width, mask);
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
        return bw_pq_malformed(error, "byte array dictionary of %zu bytes", size);
    memcpy(&count, q->dictionary, 8);
    if (count > size / 8 - 2)
        return bw_pq_malformed(error, "byte array dictionary of %llu values in %zu bytes",
                               (unsigned long long)count, size);
    size_t data_size = size - 8 * ((size_t)count + 2);
    uint64_t previous = 0;
    for (size_t i = 0; i <= count; i++) {
        uint64_t offset;
        memcpy(&offset, q->dictionary + 8 + 8 * i, 8);
        if (offset < previous || offset > data_size || (i == 0 && offset != 0))
            return bw_pq_malformed(error, "byte array dictionary offset %zu out of order", i);
        previous = offset;
    }
    q->dictionary_count = (size_t)count;
    return BW_PAGES_OK;
}

/* Reads page `loc` and appends the values of rows[first..last) (`page_rows` rows in the
   page). Everything the header says is checked against the page's bytes and rows before
   anything is allocated for it: the header and body fill the location exactly; a page of one
   value per row holds as many values as rows, a v2 page says as many rows; the uncompressed
   size is what the compressed bytes can hold (bw_pq_check_plain_size). */
static int take_from_page(const bw_chunk_take *q, const bw_page_location *loc,
                          int64_t page_rows, size_t first, size_t last, bw_pq_scratch *s,
                          bw_bytes *values, int64_t *lengths, char *error) {
    size_t page_size = (size_t)loc->compressed_size;
    if ((uint64_t)page_size > (uint64_t)BW_PQ_MAX_PAGE_BYTES) /* before anything is read */
        return bw_pq_page_too_large(page_size, error);
    bw_page_header h;
    bw_pq_page page;
    int rc = bw_pq_read_header_at(q->file, q->fd, q->file_size, loc->offset, page_size, &s->page,
                                  &h, &page, error);
    if (rc != BW_PAGES_OK)
        return rc;
    size_t header_size = page.header_size;
    if (h.type != BW_PQ_DATA_PAGE && h.type != BW_PQ_DATA_PAGE_V2)
        return bw_pq_malformed(error, "the offset index points at a page of type %d", (int)h.type);
    if ((h.type == BW_PQ_DATA_PAGE ? !h.has_v1 : !h.has_v2) || h.num_values < 0)
        return bw_pq_malformed(error, "data page without its data page header");
    if ((uint64_t)h.compressed_size > page_size - header_size)
        return bw_pq_malformed(error, "page of %d bytes overruns its %zu bytes in the offset index",
                               (int)h.compressed_size, page_size);
    if ((uint64_t)h.compressed_size != page_size - header_size)
        return bw_pq_malformed(error, "page of %zu bytes with its header, %zu in the offset index",
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
        return bw_pq_malformed(error, "page holds %lld values for %lld rows", (long long)count,
                               (long long)page_rows);
    if (h.type == BW_PQ_DATA_PAGE_V2 && h.num_rows != page_rows)
        return bw_pq_malformed(error, "v2 page says %d rows, the offset index %lld",
                               (int)h.num_rows, (long long)page_rows);
    const uint8_t *body;
    rc = bw_pq_page_body(q->file, q->fd, q->file_size, &page, (size_t)h.compressed_size, &s->page,
                         &body, error);
    if (rc != BW_PAGES_OK)
        return rc;
    bw_pq_parts d;
    rc = bw_pq_read_page_parts(q->codec, &h, body, q->max_rep, q->max_def, s, &d, error);
    if (rc != BW_PAGES_OK)
        return rc;

    size_t wanted = last - first;
    if (bw_pq_grow_spans(s, 2 * wanted * sizeof *s->spans) != BW_PAGES_OK)
        return BW_PAGES_NO_MEMORY;
    bw_pq_rows want = {q->rows + first, loc->first_row, wanted, s->spans,
                         s->spans + wanted};
    int64_t value_count = count;
    bw_pq_list_rows l = {.defective = 0};
    int64_t rows = 0;
    if (q->max_rep == 0) {
        for (size_t j = 0; j < wanted; j++) {
            want.start[j] = q->rows[first + j] - loc->first_row;
            want.length[j] = 1;
        }
        /* a scalar column's null is a level without a value */
        if (q->max_def > 0 &&
            (rc = bw_pq_definition_levels(d.def, d.def_size, q->max_def, count, &want,
                                          &value_count, error)) != BW_PAGES_OK)
            return rc;
    } else {
        l.want = &want;
        l.list_size = q->list_size;
        rc = bw_pq_list_levels(d.rep, d.rep_size, count, &l, &rows, error);
        if (rc != BW_PAGES_OK)
            return rc;
        /* a list's null or empty list (a level below max_def) is not covered */
        bw_pq_rows none = {NULL, 0, 0, NULL, NULL};
        int64_t values = count;
        if (q->max_def > 0 &&
            (rc = bw_pq_definition_levels(d.def, d.def_size, q->max_def, count, &none, &values,
                                          error)) != BW_PAGES_OK)
            return rc;
        if (values != count)
            return BW_PAGES_NOT_COVERED;
    }
    size_t width = (size_t)q->value_width;
    if (dictionary_encoded) {
        if (d.values_size < 1 || d.values[0] > 32)
            return bw_pq_malformed(error, "dictionary page indices without a bit width up to 32");
    } else if (width > 0 && (uint64_t)value_count > d.values_size / width) {
        return bw_pq_malformed(error, "page of %lld values has %zu bytes of values",
                               (long long)value_count, d.values_size);
    }
    if (q->max_rep > 0) {
        /* the whole page is counted, so an offset index that disagrees with it is caught */
        if (l.defective)
            return bw_pq_malformed(error, "%s", l.defect);
        if (rows != page_rows)
            return bw_pq_malformed(error, "page holds %lld rows, the offset index says %lld",
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
    bw_pq_scratch s = {0};
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
            rc = bw_pq_malformed(error, "row %lld is not in the row group's %lld rows, in order",
                                 (long long)row, (long long)q->group_rows);
            goto cleanup;
        }
        while (page + 1 < q->page_count && q->pages[page + 1].first_row <= row)
            page++;
        if (page >= q->page_count) {
            rc = bw_pq_malformed(error, "no page holds row %lld", (long long)row);
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
    bw_pq_scratch_free(&s);
    return rc;
}
