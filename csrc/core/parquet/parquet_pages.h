/* Random access into Parquet files at page granularity: the footer's page index locations,
   the offset index (or, in a file without one, the same table found by walking a column
   chunk's page headers), page headers, and the requested rows of one column chunk read from
   only the pages that hold them.

   Every offset and length read from the file is checked against the file's size and the
   buffer it lives in before anything is read at it; a crafted file gives BW_PAGES_MALFORMED
   with a message, never a read out of bounds. What the page reader does not cover (an
   encoding other than PLAIN, a codec this build lacks, null or empty values) gives
   BW_PAGES_NOT_COVERED, and the caller reads the chunk another way.

   The file: `file` and `file_size`, the whole file in memory; or `file` NULL, and it is read
   through the descriptor `fd` with positioned reads of only the bytes needed (a page, a
   header, the footer), `file_size` being its size when it was opened. A file read that way
   which is cut short, even while it is read, gives BW_PAGES_MALFORMED saying the file
   changed, never a fault: a memory map of it would kill the process with SIGBUS at the
   first byte past its new end. A page header is looked for in 4 KiB first, and in more only
   while the bytes read end inside it, up to 16 MiB (a longer one is refused, as pyarrow
   refuses it); a page whose bytes in the file (header and body) or whose uncompressed body
   are more than 1 GiB is refused before it is read. */
#ifndef BW_PARQUET_PAGES_H
#define BW_PARQUET_PAGES_H
#include <stddef.h>
#include <stdint.h>

enum {
    BW_PAGES_OK = 0,
    BW_PAGES_NOT_COVERED = 1,
    BW_PAGES_MALFORMED = -1,
    BW_PAGES_NO_MEMORY = -2,
    BW_PAGES_READ_FAILED = -3, /* reading the file failed (the message says why) */
};

/* Parquet's enums, as far as this reader uses them. */
enum { BW_PQ_DATA_PAGE = 0, BW_PQ_DICTIONARY_PAGE = 2, BW_PQ_DATA_PAGE_V2 = 3 };
enum { BW_PQ_PLAIN = 0, BW_PQ_PLAIN_DICTIONARY = 2, BW_PQ_RLE = 3, BW_PQ_RLE_DICTIONARY = 8 };
enum { BW_PQ_UNCOMPRESSED = 0, BW_PQ_SNAPPY = 1, BW_PQ_GZIP = 2, BW_PQ_ZSTD = 6 };

/* Error messages fit in this many bytes. */
#define BW_PAGES_ERROR_SIZE 200

typedef struct {
    int64_t offset;          /* of the page header in the file */
    int64_t first_row;       /* of the row group's rows, the page's first */
    int32_t compressed_size; /* header included */
} bw_page_location;

typedef struct {
    int32_t type, uncompressed_size, compressed_size;
    int has_v1, has_v2, has_dictionary;
    int32_t num_values, encoding; /* v1, v2 and dictionary */
    int32_t def_encoding, rep_encoding; /* v1 */
    int32_t num_rows, def_bytes, rep_bytes, is_compressed; /* v2 */
} bw_page_header;

/* What the footer says of every column chunk, BW_CHUNK_FIELDS int64 each, chunk by chunk
   (row group major): the offset index's offset and length (-1 when absent), the codec (-1
   when the chunk has no metadata) and where its dictionary page starts (BW_NO_DICTIONARY when
   the footer places none and lists no dictionary encoding, BW_DICTIONARY_UNLOCATED when it
   lists one but places no dictionary page, or places it outside the file; a
   dictionary_page_offset of 0, the file's magic, places none); then, for a walk over its page
   headers, where the chunk starts (its dictionary page, or its first data page), its
   total_compressed_size and its statistics' null count (each -1 when the footer does not say;
   not checked against the file here, the walk checks them). From the footer of the whole
   file at `file`, which must hold exactly `groups` row groups of `columns` chunks. */
enum {
    BW_CHUNK_INDEX_OFFSET,     /* the offset index's offset */
    BW_CHUNK_INDEX_LENGTH,     /* and length */
    BW_CHUNK_CODEC,
    BW_CHUNK_DICTIONARY,       /* the dictionary page's offset, or one of the two below */
    BW_CHUNK_START,
    BW_CHUNK_SIZE,             /* total_compressed_size */
    BW_CHUNK_NULL_COUNT,
    BW_CHUNK_FIELDS            /* how many */
};
#define BW_NO_DICTIONARY (-1)
#define BW_DICTIONARY_UNLOCATED (-2)
int bw_parquet_index_locations(const uint8_t *file, int fd, size_t file_size, size_t groups,
                               size_t columns, int64_t *out, char *error);

/* An OffsetIndex: *pages is malloc'ed (free it), *count entries. Every page lies inside its
   column chunk's bytes [chunk_start, chunk_start + chunk_size) (from the footer: where its
   first page starts, its total_compressed_size; the chunk itself inside file_size), after
   the page before it; first rows never decrease, start at 0 and stay below group_rows. A
   page whose first row is the next one's holds no rows and is left out of *pages, whose
   first rows strictly increase. */
int bw_parquet_offset_index(const uint8_t *data, size_t size, size_t file_size,
                            int64_t chunk_start, int64_t chunk_size, int64_t group_rows,
                            bw_page_location **pages, size_t *count, char *error);

/* A column chunk without an offset index, to be walked page header by page header. */
typedef struct {
    const uint8_t *file; /* or NULL: read from fd */
    int fd;
    size_t file_size;
    int64_t chunk_start, chunk_size; /* from the footer, unchecked */
    int64_t group_rows;
    int codec;
    int max_rep;       /* 0: one value per row; 1: a list per row */
    int64_t list_size; /* > 0: a fixed_size_list of this many values */
    int64_t null_count; /* the chunk's, from its statistics; -1 when unknown */
} bw_chunk_walk;

/* The page locations the offset index would give, found by walking the chunk's page headers
   from its start (a dictionary page first is skipped): *pages malloc'ed (free it), *count
   entries, first rows strictly increasing from 0, their rows adding up to group_rows exactly.
   A page's rows: its num_values without repetition, num_rows of a v2 page; of a v1 page of
   lists, num_values / list_size for a fixed_size_list chunk without nulls whose pages so far
   hold whole rows, else the page's repetition levels that start a row, the page
   decompressed to count them. Every header and page must lie inside the chunk, the chunk
   inside the file. BW_PAGES_NOT_COVERED when a v1 page of lists starts inside a row (legal
   without a page index: a row may run from one v1 page into the next; pages are read here
   whole rows at a time, so the caller reads such a chunk another way). */
int bw_parquet_walk_pages(const bw_chunk_walk *walk, bw_page_location **pages, size_t *count,
                          char *error);

/* A PageHeader at the start of data; *header_size is how many bytes it took. One saying
   more than 1 GiB uncompressed is refused. */
int bw_parquet_page_header(const uint8_t *data, size_t size, bw_page_header *header,
                           size_t *header_size, char *error);

typedef struct {
    const uint8_t *file; /* or NULL: read from fd */
    int fd;
    size_t file_size;
    const bw_page_location *pages;
    size_t page_count;
    int64_t group_rows;
    int codec;
    int value_width;   /* bytes per value: 4 or 8; 0 for BYTE_ARRAY (one value per row) */
    int max_rep;       /* 0: one value per row; 1: a list per row */
    int max_def;
    int64_t list_size; /* > 0: each row's list must hold exactly this many values */
    const int64_t *rows; /* sorted, unique, each in [0, group_rows) */
    /* the chunk's dictionary (bw_parquet_dictionary), NULL when it has none */
    const uint8_t *dictionary;
    size_t dictionary_count; /* values of 4 or 8 bytes; a byte array dictionary says its own */
    size_t dictionary_size;
    size_t row_count;
} bw_chunk_take;

typedef struct {
    uint8_t *data;
    size_t size, capacity;
} bw_bytes;

/* The values of the requested rows, appended to *values in row order; lengths[i] is how many
   values row i has (0 for a null scalar, its zeroed slot appended; for BYTE_ARRAY the byte
   length, -1 for a null). Reads only the pages holding them: *pages_read says how many.
   Whatever it returns, values->data may hold memory the caller frees (rows of a fixed width
   get their whole size at once, before the first page is read). */
int bw_parquet_take_chunk(const bw_chunk_take *request, bw_bytes *values, int64_t *lengths,
                          size_t *pages_read, char *error);

/* The values of the dictionary page at `offset` (PLAIN, `value_width` bytes each), decompressed
   into *values, a page buffer of *capacity bytes (give it back with bw_page_buffer_release,
   or free it); *count of them. The page must end at `next_page`, the
   chunk's first data page (-1: not known, not checked). value_width 0: BYTE_ARRAY values, laid
   out as a uint64 count, count + 1 uint64 offsets into the bytes that follow, the bytes. */
int bw_parquet_dictionary(const uint8_t *file, int fd, size_t file_size, int64_t offset,
                          int64_t next_page, int codec, int value_width, uint8_t **values,
                          size_t *capacity, size_t *count, char *error);

/* Parquet's CompressionCodec numbers, in the one table of them: each codec's number, its
   name in the format, whether this build reads such pages itself (1) or not (0: such chunks
   are read by row groups), and the library a build needs for that (NULL: none; a codec
   without a library and not covered is never read page by page). */
typedef struct {
    int number;
    const char *name;
    int covered;
    const char *library;
} bw_parquet_codec;

/* The table, in the order of the numbers (0 .. *count - 1). Static. */
const bw_parquet_codec *bw_parquet_codecs(size_t *count);

/* A zstd decoder the host supplies where libzstd is not linked: decompresses the in_size
   bytes at `in` into exactly out_size bytes at `out`. Returns BW_PAGES_OK, BW_PAGES_MALFORMED
   (the bytes are not a zstd stream of that size; the page reader writes the message) or
   BW_PAGES_NO_MEMORY. Called from any thread, once per page. */
typedef int (*bw_zstd_page_decoder)(const uint8_t *in, size_t in_size, uint8_t *out,
                                    size_t out_size);

/* Sets the zstd decoder (NULL: none) of a build without libzstd: zstd pages are then read
   page by page like the others, their sizes checked the same way (the table above still says
   what the build itself covers). With libzstd it does nothing. */
void bw_parquet_set_zstd_decoder(bw_zstd_page_decoder decoder);

#endif
