/* A Parquet column chunk without an offset index: the page locations the index would give,
   found by walking its page headers (bw_parquet_walk_pages). See parquet_pages.h. */
#include <stdio.h>
#include <stdlib.h>

#include "parquet_internal.h"

/* *rows: the rows of a v1 data page of lists (`page`: its header read; its body,
   compressed_size bytes after the header, read here), its repetition levels that start a
   row, counted with the page decompressed. BW_PAGES_NOT_COVERED when its first level goes on
   a row of the page before it: v1 pages of a chunk without a page index need not start at a
   row (a row may run from one page into the next), and pages are read here only whole rows
   at a time, so such a chunk is read another way. */
static int count_list_page_rows(const bw_chunk_walk *w, const bw_page_header *h,
                                bw_pq_page *page, bw_pq_scratch *s, int64_t *rows, char *error) {
    if (h->rep_encoding != BW_PQ_RLE)
        return BW_PAGES_NOT_COVERED;
    const uint8_t *body;
    int rc = bw_pq_page_body(w->file, w->fd, w->file_size, page, (size_t)h->compressed_size,
                             &s->page, &body, error);
    if (rc != BW_PAGES_OK)
        return rc;
    bw_pq_parts d;
    rc = bw_pq_read_page_parts(w->codec, h, body, 1, 0, s, &d, error);
    if (rc != BW_PAGES_OK)
        return rc;
    bw_pq_rows none = {NULL, 0, 0, NULL, NULL};
    bw_pq_list_rows l = {.want = &none, .list_size = 0};
    rc = bw_pq_list_levels(d.rep, d.rep_size, h->num_values, &l, rows, error);
    if (rc == BW_PAGES_OK && l.starts_inside)
        return BW_PAGES_NOT_COVERED;
    if (rc == BW_PAGES_OK && l.defective)
        rc = bw_pq_malformed(error, "%s", l.defect);
    return rc;
}

/* *rows: how many of the row group's rows the data page holds (see bw_parquet_walk_pages);
   levels_before: the levels of the chunk's data pages before it. */
static int data_page_rows(const bw_chunk_walk *w, const bw_page_header *h, int64_t at,
                          int64_t levels_before, bw_pq_page *page, bw_pq_scratch *s, int64_t *rows,
                          char *error) {
    if ((h->type == BW_PQ_DATA_PAGE ? !h->has_v1 : !h->has_v2) || h->num_values < 0)
        return bw_pq_malformed(error, "data page at %lld without its data page header",
                               (long long)at);
    if (h->type == BW_PQ_DATA_PAGE_V2) {
        if (h->num_rows < 0 || (h->num_rows == 0 && h->num_values > 0))
            return bw_pq_malformed(error, "v2 data page at %lld says %d rows", (long long)at,
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
    bw_pq_scratch s = {0};
    bw_page_location *locs = NULL;
    size_t n_locs = 0, capacity = 0;
    int rc = BW_PAGES_OK;
    *pages = NULL;
    *count = 0;
    if (w->max_rep < 0 || w->max_rep > 1)
        return BW_PAGES_NOT_COVERED;
    if (w->chunk_start < 0 || w->chunk_size < 0 || (uint64_t)w->chunk_start > w->file_size ||
        (uint64_t)w->chunk_size > w->file_size - (uint64_t)w->chunk_start)
        return bw_pq_malformed(error, "column chunk at %lld, %lld bytes, outside the file (%zu "
                               "bytes)", (long long)w->chunk_start, (long long)w->chunk_size,
                               w->file_size);
    const int64_t end = w->chunk_start + w->chunk_size;
    int64_t at = w->chunk_start, rows = 0, levels = 0;
    while (at < end) {
        bw_page_header h;
        bw_pq_page page;
        char why[BW_PAGES_ERROR_SIZE];
        /* the header is read from the chunk's remaining bytes only: one that would run past
           the chunk is refused by the header reader itself */
        rc = bw_pq_read_header_at(w->file, w->fd, w->file_size, at, (size_t)(end - at), &s.page, &h,
                                  &page, why);
        if (rc != BW_PAGES_OK) {
            if (rc == BW_PAGES_MALFORMED)
                rc = bw_pq_malformed(error, "page at %lld: %s", (long long)at, why);
            else
                snprintf(error, BW_PAGES_ERROR_SIZE, "%s", why);
            goto cleanup;
        }
        size_t header_size = page.header_size;
        if ((uint64_t)h.compressed_size > (uint64_t)(end - at) - header_size) {
            rc = bw_pq_malformed(error, "page at %lld of %d bytes runs past its column chunk's end "
                                 "at %lld", (long long)at, (int)h.compressed_size, (long long)end);
            goto cleanup;
        }
        int64_t page_size = (int64_t)header_size + h.compressed_size;
        if (page_size > INT32_MAX) {
            rc = bw_pq_malformed(error, "page at %lld of %lld bytes", (long long)at,
                                 (long long)page_size);
            goto cleanup;
        }
        if (h.type == BW_PQ_DICTIONARY_PAGE) {
            if (at != w->chunk_start || !h.has_dictionary) {
                rc = bw_pq_malformed(error, "dictionary page at %lld is not its chunk's first page",
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
            rc = bw_pq_malformed(error, "pages up to the one at %lld hold more than the row "
                                 "group's %lld rows", (long long)at, (long long)w->group_rows);
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
        rc = bw_pq_malformed(error, "the column chunk's pages hold %lld rows, its row group %lld",
                             (long long)rows, (long long)w->group_rows);
        goto cleanup;
    }
    *pages = locs;
    *count = n_locs;
    locs = NULL;
cleanup:
    free(locs);
    bw_pq_scratch_free(&s);
    return rc;
}
