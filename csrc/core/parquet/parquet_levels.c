/* The RLE/bit-packed hybrid of Parquet pages: its runs, the definition levels of a page and the
   repetition levels of a page of lists, and the values of a bit-packed run of dictionary
   indices. See parquet_internal.h. */
#include <stdio.h>

#include "parquet_internal.h"

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
            return bw_pq_malformed(error, "%s end after %lld of %lld", what, (long long)done,
                                   (long long)count);
        if (shift > 28)
            return bw_pq_malformed(error, "%s: run header too long", what);
        uint8_t b = *(*p)++;
        header |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    *run = header >> 1;
    *bit_packed = (int)(header & 1);
    if (*run == 0)
        return bw_pq_malformed(error, "%s: empty run", what);
    return BW_PAGES_OK;
}

int bw_pq_read_run(const uint8_t **p, const uint8_t *end, int bit_width,
                   const char *what, int64_t done, int64_t count, bw_pq_run *r,
                   char *error) {
    uint64_t run = 0;
    int rc = read_hybrid_run_header(p, end, what, done, count, &run, &r->bit_packed, error);
    if (rc != BW_PAGES_OK)
        return rc;
    if (r->bit_packed) { /* run counts groups of 8 */
        uint64_t values = run * 8, bytes = run * (uint64_t)bit_width;
        if (bytes > (uint64_t)(end - *p))
            return bw_pq_malformed(error, "%s end inside a bit-packed run", what);
        r->take = values < (uint64_t)(count - done) ? (int64_t)values : count - done;
        r->present = (size_t)bytes;
        r->bits = *p;
        *p += r->present;
        return BW_PAGES_OK;
    }
    int value_bytes = (bit_width + 7) / 8; /* one value repeated run times */
    if (end - *p < value_bytes)
        return bw_pq_malformed(error, "%s end inside a run", what);
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
        n += popcount64(bw_pq_le64(bits + (from >> 3)));
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
    return bw_pq_malformed(error, "level %u above the maximum %d", level, max_level);
}

int bw_pq_definition_levels(const uint8_t *p, size_t n, int max_def, int64_t count,
                            const bw_pq_rows *want, int64_t *value_count, char *error) {
    const int bit_width = level_bit_width(max_def);
    const unsigned mask = (1u << bit_width) - 1;
    const uint8_t *end = p + n;
    int64_t done = 0, values = 0;
    size_t j = 0;
    while (done < count) {
        bw_pq_run r = {0, 0, NULL, 0, 0};
        int rc = bw_pq_read_run(&p, end, bit_width, "levels", done, count, &r, error);
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

/* The open row ends before level `at`. */
static void end_row(bw_pq_list_rows *l, int64_t at) {
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
    const bw_pq_rows *w = l->want;
    if (l->next < w->count && w->rows[l->next] - w->first_row == l->row) {
        w->start[l->next] = l->row_start;
        w->length[l->next++] = n;
    }
}

int bw_pq_list_levels(const uint8_t *p, size_t n, int64_t count, bw_pq_list_rows *l, int64_t *rows,
                      char *error) {
    const uint8_t *end = p + n;
    const bw_pq_rows *w = l->want;
    int64_t done = 0;
    l->row = -1;
    l->row_start = 0;
    l->next = 0;
    l->starts_inside = 0;
    l->defective = 0;
    while (done < count) {
        bw_pq_run r = {0, 0, NULL, 0, 0};
        int rc = bw_pq_read_run(&p, end, 1, "levels", done, count, &r, error);
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
