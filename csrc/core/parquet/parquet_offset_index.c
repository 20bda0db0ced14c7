/* A column chunk's OffsetIndex: its page locations, each checked to lie inside the chunk after
   the page before it, their first rows in order (bw_parquet_offset_index). Its structs are
   read by their tables (bw_thrift_read_struct). See parquet_pages.h. */
#include <stddef.h>
#include <stdlib.h>

#include "parquet_internal.h"

/* What the reading of one offset index knows and has kept, and its refusal. */
typedef struct {
    bw_pq_refusal refusal;
    int64_t chunk_start, chunk_end, group_rows;
    int seen;               /* the page list */
    bw_page_location *locs; /* its locations */
    size_t n_locs;
} index_reading;

static const bw_thrift_field_spec page_location_fields[] = {
    {1, BW_THRIFT_I64, offsetof(bw_page_location, offset), NULL, NULL},
    {2, BW_THRIFT_I32, offsetof(bw_page_location, compressed_size), NULL, NULL},
    {3, BW_THRIFT_I64, offsetof(bw_page_location, first_row), NULL, NULL},
};
static const bw_thrift_struct page_location_struct = BW_THRIFT_STRUCT_OF(page_location_fields);

static int read_page_locations(bw_thrift *t, void *target, void *context);
static const bw_thrift_field_spec offset_index_fields[] = {
    {1, BW_THRIFT_LIST, 0, NULL, read_page_locations},
};
static const bw_thrift_struct offset_index_struct = BW_THRIFT_STRUCT_OF(offset_index_fields);

/* OffsetIndex.page_locations: each page inside its own chunk (a page of another chunk would
   read as this column's), after the page before it, its first row in order and inside the
   row group. */
static int read_page_locations(bw_thrift *t, void *target, void *context) {
    (void)target;
    index_reading *x = context;
    bw_pq_refusal *r = &x->refusal;
    uint32_t n;
    if (bw_pq_struct_list(t, &x->seen, &n) < 0)
        return bw_pq_refuse(r, bw_pq_malformed(r->error, "offset index: the page list is "
                                               "malformed"));
    bw_page_location *locs = x->locs = malloc((n ? n : 1) * sizeof *locs);
    if (locs == NULL)
        return bw_pq_refuse(r, BW_PAGES_NO_MEMORY);
    const int64_t chunk_start = x->chunk_start, chunk_end = x->chunk_end;
    int64_t previous_end = chunk_start;
    size_t kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        bw_page_location *p = &locs[kept];
        p->offset = p->first_row = -1;
        p->compressed_size = -1;
        int rc = bw_thrift_read_struct(t, &page_location_struct, p, x);
        if (rc != 0)
            return rc;
        if (p->offset < 0 || p->compressed_size <= 0 || p->first_row < 0)
            return bw_pq_refuse(r, bw_pq_malformed(r->error, "offset index: a page location "
                                                   "lacks a field or is negative"));
        if (p->offset < chunk_start || p->compressed_size > chunk_end - p->offset)
            return bw_pq_refuse(r, bw_pq_malformed(r->error, "offset index: page %u at %lld, "
                                                   "%d bytes, outside its column chunk (bytes "
                                                   "%lld to %lld)", (unsigned)i,
                                                   (long long)p->offset,
                                                   (int)p->compressed_size,
                                                   (long long)chunk_start,
                                                   (long long)chunk_end));
        if (p->offset < previous_end)
            return bw_pq_refuse(r, bw_pq_malformed(r->error, "offset index: page %u at %lld "
                                                   "starts before the end of the page before "
                                                   "it (%lld)", (unsigned)i,
                                                   (long long)p->offset,
                                                   (long long)previous_end));
        previous_end = p->offset + p->compressed_size;
        if ((kept == 0 ? p->first_row != 0 : p->first_row < locs[kept - 1].first_row) ||
            p->first_row >= x->group_rows)
            return bw_pq_refuse(r, bw_pq_malformed(r->error, "offset index: page %u starts at "
                                                   "row %lld (row group of %lld rows)",
                                                   (unsigned)i, (long long)p->first_row,
                                                   (long long)x->group_rows));
        /* A page whose first row is the next page's holds no rows, by the index's own count:
           pyarrow writes such empty pages (no values) now and then. It is left out, as the
           walk of a chunk without an index leaves out pages without rows, so the first rows
           kept strictly increase. */
        if (kept > 0 && p->first_row == locs[kept - 1].first_row)
            locs[kept - 1] = locs[kept];
        else
            kept++;
    }
    x->n_locs = kept;
    return 0;
}

int bw_parquet_offset_index(const uint8_t *data, size_t size, size_t file_size,
                            int64_t chunk_start, int64_t chunk_size, int64_t group_rows,
                            bw_page_location **pages, size_t *count, char *error) {
    *pages = NULL;
    *count = 0;
    if (chunk_start < 0 || chunk_size < 0 || (uint64_t)chunk_start > file_size ||
        (uint64_t)chunk_size > file_size - (uint64_t)chunk_start)
        return bw_pq_malformed(error, "column chunk at %lld, %lld bytes, outside the file (%zu "
                               "bytes)", (long long)chunk_start, (long long)chunk_size,
                               file_size);
    bw_thrift t;
    bw_thrift_init(&t, data, size);
    index_reading r = {{error, BW_PAGES_OK}, chunk_start, chunk_start + chunk_size, group_rows,
                       0, NULL, 0};
    int rc = bw_thrift_read_struct(&t, &offset_index_struct, NULL, &r);
    rc = bw_pq_struct_read(rc, &t, &r.refusal, "offset index", error);
    if (rc != BW_PAGES_OK)
        goto cleanup;
    if (r.locs == NULL) {
        rc = bw_pq_malformed(error, "offset index: no page list");
        goto cleanup;
    }
    if (r.n_locs == 0 && group_rows > 0) {
        rc = bw_pq_malformed(error, "offset index: no pages for %lld rows",
                             (long long)group_rows);
        goto cleanup;
    }
    *pages = r.locs;
    *count = r.n_locs;
    r.locs = NULL;
cleanup:
    free(r.locs);
    return rc;
}
