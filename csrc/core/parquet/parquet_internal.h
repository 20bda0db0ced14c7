/* What the files of the Parquet page reader share, and nothing outside it uses (its interface
   is parquet_pages.h): the error messages, the file's bytes and the memory pages are read
   into, a page's header and body read from the file and its parts decompressed, the
   RLE/bit-packed hybrid of levels and dictionary indices, the codecs. No Python. */
#ifndef BW_PARQUET_INTERNAL_H
#define BW_PARQUET_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "parquet_pages.h"
#include "thrift_compact.h"

/* A page larger than this uncompressed, or whose bytes in the file (its header and
   compressed body) are more than this, is refused before anything is read or allocated for
   it. */
#define BW_PQ_MAX_PAGE_BYTES ((int64_t)1 << 30)

/* A page header is looked for in at most this many bytes, whatever lengths its fields claim:
   a longer one is refused, as pyarrow's reader refuses it. */
#define BW_PQ_MAX_PAGE_HEADER_BYTES ((size_t)16 << 20)

/* Writes the message into error (BW_PAGES_ERROR_SIZE bytes); BW_PAGES_MALFORMED. */
int bw_pq_malformed(char *error, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* A Thrift read of `what` (the footer, the offset index, a page header) that failed:
   "<what>: <the reader's reason>"; BW_PAGES_MALFORMED. */
int bw_pq_thrift_failed(const bw_thrift *t, const char *what, char *error);

/* A refusal of the reader's own while a struct is read by its table: a handler that refuses
   what it read writes the message into `error`, keeps the code in `rc`, and returns
   BW_PQ_HANDLED (bw_pq_refuse), which ends the read. Every reading's context starts with one. */
#define BW_PQ_HANDLED 1
typedef struct {
    char *error;
    int rc;
} bw_pq_refusal;

static inline int bw_pq_refuse(bw_pq_refusal *r, int rc) {
    r->rc = rc;
    return BW_PQ_HANDLED;
}

/* The result of reading a struct of `what` by its table (rc: bw_thrift_read_struct's): OK;
   the refusal kept in r when a handler refused; else the Thrift reader's failure, as
   bw_pq_thrift_failed. */
int bw_pq_struct_read(int rc, const bw_thrift *t, const bw_pq_refusal *r, const char *what,
                      char *error);

/* The header of a list of structs that may come once in its struct (*seen counts it): 0, or -1
   when it came before, is not a list header or holds something else than structs. */
int bw_pq_struct_list(bw_thrift *t, int *seen, uint32_t *count);

static inline uint32_t bw_pq_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t bw_pq_le64(const uint8_t *p) {
    return (uint64_t)bw_pq_le32(p) | (uint64_t)bw_pq_le32(p + 4) << 32;
}

/* ---- the file's bytes (parquet_page_read.c) ---- */

/* Memory that bytes of a file read through its descriptor are read into. */
typedef struct {
    uint8_t *data;
    size_t capacity;
} bw_pq_buffer;

/* Room for `need` bytes in *data (*capacity bytes; NULL: none yet), what it holds kept.
   Blocks of a page's size come from the page buffer pool and go back to it
   (bw_pq_page_memory_free), so a page read into one touches memory already backed by pages,
   even in a file opened for one lookup. A small block (a page header's window) that must
   hold a page moves to a pooled one: growing it in place would take fresh pages. */
int bw_pq_page_memory_reserve(void **data, size_t *capacity, size_t need);
void bw_pq_page_memory_free(void *data, size_t capacity);
void bw_pq_buffer_free(bw_pq_buffer *buffer);

/* Bytes [offset, offset + length) of the file, which the caller checked lie inside its
   file_size bytes: *bytes points into `file` when the whole file is in memory, else (file
   NULL) at `buffer`, where they were read from `fd`. A file that ends sooner than file_size
   changed since its size was taken (cut short, or replaced in place): malformed, saying so,
   never a read past its end. A read that fails is BW_PAGES_READ_FAILED. */
int bw_pq_file_bytes(const uint8_t *file, int fd, size_t file_size, uint64_t offset,
                     size_t length, bw_pq_buffer *buffer, const uint8_t **bytes, char *error);

/* ---- a page read from the file (parquet_page_read.c) ---- */

/* A page as far as it has been read: `available` bytes at `bytes`, from the file's byte `at`
   on, its header (header_size bytes) among them. */
typedef struct {
    int64_t at;
    size_t header_size, available;
    const uint8_t *bytes;
} bw_pq_page;

/* The page header at `at`, read from at most `room` bytes of the file (which the caller
   checked lie inside it): a header that would run past them is refused by the header reader,
   as if the file ended there. Through the descriptor, a window of 4 KiB is read first, and
   eight times more only while the header runs past what was read, up to
   BW_PQ_MAX_PAGE_HEADER_BYTES: a page's header, not its body, and never more because a field
   claims it. A header refused for what it says (a size past BW_PQ_MAX_PAGE_BYTES, a field of
   the wrong type) is refused at once. */
int bw_pq_read_header_at(const uint8_t *file, int fd, size_t file_size, int64_t at,
                         size_t room, bw_pq_buffer *buffer, bw_page_header *h, bw_pq_page *p,
                         char *error);

/* *body: the body_size bytes after the page's header, which the caller checked lie inside
   the room its header was read from; read now (only those not read with the header) when
   they were not. The page, header and body, must be at most BW_PQ_MAX_PAGE_BYTES: checked
   before anything is read or allocated for it. */
int bw_pq_page_body(const uint8_t *file, int fd, size_t file_size, bw_pq_page *p,
                    size_t body_size, bw_pq_buffer *buffer, const uint8_t **body, char *error);

/* A page of `bytes` with its header, more than a page may hold. */
int bw_pq_page_too_large(uint64_t bytes, char *error);

/* Buffers reused from page to page: the decompressed page, and two int64 per requested row of
   a page (bw_pq_rows' start and length). Neither is sized by what a page header says: the
   first by what the page's compressed bytes can hold (bw_pq_check_plain_size), the second by
   the rows asked for. */
typedef struct {
    uint8_t *plain;
    int64_t *spans;
    size_t plain_capacity, spans_capacity; /* bytes */
    bw_pq_buffer page; /* the page's bytes, read from the file's descriptor */
} bw_pq_scratch;

int bw_pq_grow_spans(bw_pq_scratch *s, size_t need);
void bw_pq_scratch_free(bw_pq_scratch *s);

/* A data page's parts, after decompression: its repetition and definition levels (those the
   column has) and its values. */
typedef struct {
    const uint8_t *rep, *def, *values;
    size_t rep_size, def_size, values_size;
} bw_pq_parts;

/* The parts of the data page whose header is h and whose compressed_size bytes are at body,
   decompressed into s->plain when compressed (after bw_pq_check_plain_size). */
int bw_pq_read_page_parts(int codec, const bw_page_header *h, const uint8_t *body,
                          int max_rep, int max_def, bw_pq_scratch *s, bw_pq_parts *d,
                          char *error);

/* ---- page headers (parquet_page_header.c) ---- */

/* bw_parquet_page_header; *ran_out set when the header does not parse only because the
   `size` bytes end inside it (more bytes might hold it), cleared otherwise. */
int bw_pq_parse_page_header(const uint8_t *data, size_t size, bw_page_header *h,
                            size_t *header_size, int *ran_out, char *error);

/* ---- the RLE/bit-packed hybrid (parquet_levels.c) ---- */

/* One run of the RLE/bit-packed hybrid, as far as the `count - done` values still wanted go. */
typedef struct {
    int bit_packed;
    int64_t take;         /* values of the run to use */
    const uint8_t *bits;  /* bit-packed: the run's bytes, `present` of them */
    size_t present;
    uint64_t value;       /* RLE: the repeated value */
} bw_pq_run;

/* Reads the run at *p (advanced past it) of `bit_width`-bit values: its header, then its
   repeated value or the bounds of its packed bytes. A bit-packed run must hold all its
   groups, the last one's padding included, as pyarrow's reader requires of levels and
   dictionary indices alike. `what` names the stream, `done` and `count` where it is, for the
   error. Shared by the levels and the dictionary indices, which differ only in what the
   values mean and what bounds them. */
int bw_pq_read_run(const uint8_t **p, const uint8_t *end, int bit_width, const char *what,
                   int64_t done, int64_t count, bw_pq_run *r, char *error);

/* Value i of a bit-packed run of dictionary indices (bit_width at most 32: a value starts
   within its first byte, so one 8-byte load holds it, and only the run's last 7 bytes are
   read byte by byte). */
static inline uint64_t bw_pq_packed_index(const uint8_t *bits, size_t present, int64_t i,
                                          int bit_width, uint64_t mask) {
    /* inline: it runs once per value of a dictionary-encoded page, in the readers' loops */
    uint64_t bit = (uint64_t)i * (uint64_t)bit_width;
    size_t byte = (size_t)(bit >> 3);
    uint64_t word = 0;
    if (present - byte >= 8)
        word = bw_pq_le64(bits + byte);
    else
        for (size_t k = 0; byte + k < present; k++)
            word |= (uint64_t)bits[byte + k] << (8 * k);
    return (word >> (bit & 7)) & mask;
}

/* The rows asked of one page: rows[0..count), ascending, `first_row` the page's first. For
   each, where its values are among the page's values: start[j] (-1 for a null) and length[j]
   of them. */
typedef struct {
    const int64_t *rows;
    int64_t first_row;
    size_t count;
    int64_t *start, *length;
} bw_pq_rows;

/* The definition levels of a page: `count` levels of the hybrid at p (n bytes), each checked
   to be at most max_def; *value_count the levels at max_def (the page's values). For a page
   of one value per row, also each requested row's start: its value's position among the
   page's values, -1 for a null (`want` asks for no rows where the page has lists). */
int bw_pq_definition_levels(const uint8_t *p, size_t n, int max_def, int64_t count,
                            const bw_pq_rows *want, int64_t *value_count, char *error);

/* Where the rows of a page of lists are, from its repetition levels: a level of 0 starts a
   row. `row` is the row open (-1 before the first), `row_start` its first level. */
typedef struct {
    const bw_pq_rows *want;
    int64_t list_size; /* > 0: every row must hold exactly this many levels */
    int64_t row, row_start;
    size_t next;       /* the next requested row */
    int starts_inside; /* the page's first level goes on a row of the page before it */
    int defective;     /* a defect found (the first one is in `defect`) */
    char defect[BW_PAGES_ERROR_SIZE];
} bw_pq_list_rows;

/* The repetition levels of a page of lists (`count` levels at p, n bytes, each 0 or 1): *rows
   the rows they start, and each requested row's first level and level count. A page that
   starts inside a row (l->starts_inside; legal for a v1 page of a chunk without a page index,
   whose rows may go on from one page to the next, and the walk leaves such a chunk to
   another reader), or whose rows are not list_size long (list_size > 0), is a defect here:
   the first one is kept in l->defect and the levels are still read to their end (and
   checked), since a page with a null is read another way whatever else is wrong with it. */
int bw_pq_list_levels(const uint8_t *p, size_t n, int64_t count, bw_pq_list_rows *l,
                      int64_t *rows, char *error);

/* ---- decompression (parquet_codec.c) ---- */

/* Checks, before anything is allocated for it, that `plain_size` bytes (what a page header
   says its `in_size` bytes at `in` decompress to) can come out of them: equal for an
   uncompressed page, the size a snappy or zstd stream says of itself where it says it, and
   never more than the codec's best ratio (and never more than BW_PQ_MAX_PAGE_BYTES: the
   header reader refuses that). So a page cannot make the reader allocate more than its own
   bytes can hold. BW_PAGES_NOT_COVERED for a codec this build does not read. */
int bw_pq_check_plain_size(int codec, const uint8_t *in, size_t in_size, size_t plain_size,
                           char *error);

/* Decompresses the in_size bytes at `in` into exactly out_size bytes at `out`. */
int bw_pq_decompress(int codec, const uint8_t *in, size_t in_size, uint8_t *out,
                     size_t out_size, char *error);

#endif
