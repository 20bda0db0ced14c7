/* The CQL native protocol's notation (protocol v4 and later), big-endian: writers that append
   to a bw_buf, and a bounded read cursor whose every get either consumes a whole well-formed
   item or fails (-1) with the cursor unchanged, never reading past its end. Also the 9-byte
   frame header of v3/v4/v5 (segments of v5 framing are not handled here), the opcodes,
   consistency levels, error codes and frame flags. Core layer: no Python.

   Notation (the protocol's own names):
     [byte]          1 byte            [short]  2 bytes, unsigned
     [int]           4 bytes, signed   [long]   8 bytes, signed
     [string]        [short] n, n bytes of UTF-8
     [long string]   [int] n, n bytes of UTF-8
     [bytes]         [int] n, n bytes; n < 0: null (no bytes follow)
     [value]         [bytes], where n == -2 also means "not set" (v4)
     [short bytes]   [short] n, n bytes
     [string list]   [short] n, n [string]
     [string map]    [short] n, n pairs of [string] key, [string] value
     [string multimap] [short] n, n pairs of [string] key, [string list] value
     [bytes map]     [short] n, n pairs of [string] key, [bytes] value */
#ifndef BW_CQL_WIRE_H
#define BW_CQL_WIRE_H
#include <stddef.h>
#include <stdint.h>

#include "out_buffer.h"

/* The frame header: version, flags, stream (signed short), opcode, body length (int). */
#define BW_CQL_HEADER_SIZE 9
/* The version byte of a request; a response has the top bit set. */
#define BW_CQL_VERSION_4 0x04
#define BW_CQL_RESPONSE_BIT 0x80
/* The largest body the protocol allows (256 MiB). */
#define BW_CQL_MAX_BODY ((uint32_t)256 << 20)

/* Frame flags. */
enum {
    BW_CQL_FLAG_COMPRESSION = 0x01,
    BW_CQL_FLAG_TRACING = 0x02,
    BW_CQL_FLAG_CUSTOM_PAYLOAD = 0x04,
    BW_CQL_FLAG_WARNING = 0x08,
    BW_CQL_FLAG_BETA = 0x10
};

/* Opcodes. */
enum {
    BW_CQL_OP_ERROR = 0x00,
    BW_CQL_OP_STARTUP = 0x01,
    BW_CQL_OP_READY = 0x02,
    BW_CQL_OP_AUTHENTICATE = 0x03,
    BW_CQL_OP_OPTIONS = 0x05,
    BW_CQL_OP_SUPPORTED = 0x06,
    BW_CQL_OP_QUERY = 0x07,
    BW_CQL_OP_RESULT = 0x08,
    BW_CQL_OP_PREPARE = 0x09,
    BW_CQL_OP_EXECUTE = 0x0A,
    BW_CQL_OP_REGISTER = 0x0B,
    BW_CQL_OP_EVENT = 0x0C,
    BW_CQL_OP_BATCH = 0x0D,
    BW_CQL_OP_AUTH_CHALLENGE = 0x0E,
    BW_CQL_OP_AUTH_RESPONSE = 0x0F,
    BW_CQL_OP_AUTH_SUCCESS = 0x10
};

/* Consistency levels ([consistency] is a [short]). */
enum {
    BW_CQL_ANY = 0x0000,
    BW_CQL_ONE = 0x0001,
    BW_CQL_TWO = 0x0002,
    BW_CQL_THREE = 0x0003,
    BW_CQL_QUORUM = 0x0004,
    BW_CQL_ALL = 0x0005,
    BW_CQL_LOCAL_QUORUM = 0x0006,
    BW_CQL_EACH_QUORUM = 0x0007,
    BW_CQL_SERIAL = 0x0008,
    BW_CQL_LOCAL_SERIAL = 0x0009,
    BW_CQL_LOCAL_ONE = 0x000A
};

/* Error codes of an ERROR body. */
enum {
    BW_CQL_ERR_SERVER = 0x0000,
    BW_CQL_ERR_PROTOCOL = 0x000A,
    BW_CQL_ERR_BAD_CREDENTIALS = 0x0100,
    BW_CQL_ERR_UNAVAILABLE = 0x1000,
    BW_CQL_ERR_OVERLOADED = 0x1001,
    BW_CQL_ERR_IS_BOOTSTRAPPING = 0x1002,
    BW_CQL_ERR_TRUNCATE = 0x1003,
    BW_CQL_ERR_WRITE_TIMEOUT = 0x1100,
    BW_CQL_ERR_READ_TIMEOUT = 0x1200,
    BW_CQL_ERR_READ_FAILURE = 0x1300,
    BW_CQL_ERR_FUNCTION_FAILURE = 0x1400,
    BW_CQL_ERR_WRITE_FAILURE = 0x1500,
    BW_CQL_ERR_CDC_WRITE_FAILURE = 0x1600,
    BW_CQL_ERR_CAS_WRITE_UNKNOWN = 0x1700,
    BW_CQL_ERR_SYNTAX = 0x2000,
    BW_CQL_ERR_UNAUTHORIZED = 0x2100,
    BW_CQL_ERR_INVALID = 0x2200,
    BW_CQL_ERR_CONFIG = 0x2300,
    BW_CQL_ERR_ALREADY_EXISTS = 0x2400,
    BW_CQL_ERR_UNPREPARED = 0x2500
};

/* ---- writers: 0, or -1 when out of memory or when a length does not fit the notation
   (the buffer is then unchanged) ---- */

int bw_cql_put_byte(bw_buf *buf, uint8_t v);
int bw_cql_put_short(bw_buf *buf, uint16_t v);
int bw_cql_put_int(bw_buf *buf, int32_t v);
int bw_cql_put_long(bw_buf *buf, int64_t v);
/* [string]: n <= 65535. */
int bw_cql_put_string(bw_buf *buf, const char *s, size_t n);
/* [long string]: n <= INT32_MAX. */
int bw_cql_put_long_string(bw_buf *buf, const char *s, size_t n);
/* [bytes]: p == NULL writes null (length -1) whatever n is; else n <= INT32_MAX. */
int bw_cql_put_bytes(bw_buf *buf, const void *p, size_t n);
/* [short bytes]: n <= 65535. */
int bw_cql_put_short_bytes(bw_buf *buf, const void *p, size_t n);
/* [string list] of n NUL-ended strings (n <= 65535, each <= 65535 bytes). */
int bw_cql_put_string_list(bw_buf *buf, const char *const *items, size_t n);
/* [string map] of n pairs of NUL-ended strings keys[i] -> values[i]. */
int bw_cql_put_string_map(bw_buf *buf, const char *const *keys, const char *const *values,
                          size_t n);
/* Overwrites the [int] at offset `at` (which must lie inside the buffer, 4 bytes): the
   length of something whose size is known only once written. */
void bw_cql_patch_int(bw_buf *buf, size_t at, int32_t v);

/* ---- the bounded read cursor ---- */

typedef struct {
    const uint8_t *p;
    size_t left;
} bw_cql_cursor;

static inline bw_cql_cursor bw_cql_cursor_make(const void *p, size_t n) {
    bw_cql_cursor c;
    c.p = (const uint8_t *)p;
    c.left = n;
    return c;
}

/* Each get: 0 with the item consumed, or -1 (too few bytes, or a length that is negative
   where the notation forbids it) with the cursor unchanged and the outputs untouched.
   Strings and byte runs point into the cursor's memory; they are not NUL-ended. */
int bw_cql_get_byte(bw_cql_cursor *c, uint8_t *v);
int bw_cql_get_short(bw_cql_cursor *c, uint16_t *v);
int bw_cql_get_int(bw_cql_cursor *c, int32_t *v);
int bw_cql_get_long(bw_cql_cursor *c, int64_t *v);
/* n raw bytes. */
int bw_cql_get_raw(bw_cql_cursor *c, size_t n, const uint8_t **p);
int bw_cql_skip(bw_cql_cursor *c, size_t n);
int bw_cql_get_string(bw_cql_cursor *c, const char **s, size_t *n);
int bw_cql_get_long_string(bw_cql_cursor *c, const char **s, size_t *n);
/* [bytes]: *n is the length, or -1 for null (*p then NULL); a length below -1 fails. */
int bw_cql_get_bytes(bw_cql_cursor *c, const uint8_t **p, int32_t *n);
/* [value]: as [bytes], and -2 ("not set") accepted too (*n == -2, *p NULL). */
int bw_cql_get_value(bw_cql_cursor *c, const uint8_t **p, int32_t *n);
int bw_cql_get_short_bytes(bw_cql_cursor *c, const uint8_t **p, size_t *n);
/* The compound items are checked whole before anything is consumed: *count is their number
   of entries and *items a cursor over exactly their entries (after the count), which the
   caller reads with the gets above, each then certain to succeed. */
int bw_cql_get_string_list(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items);
int bw_cql_get_string_map(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items);
int bw_cql_get_string_multimap(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items);
int bw_cql_get_bytes_map(bw_cql_cursor *c, uint16_t *count, bw_cql_cursor *items);

/* ---- the frame header ---- */

typedef struct {
    uint8_t version; /* with BW_CQL_RESPONSE_BIT on a response */
    uint8_t flags;
    int16_t stream;
    uint8_t opcode;
    uint32_t length; /* of the body that follows */
} bw_cql_header;

/* Writes the 9 bytes of h at out. */
void bw_cql_header_write(uint8_t out[BW_CQL_HEADER_SIZE], const bw_cql_header *h);
/* Appends the header. 0, or -1 when out of memory. */
int bw_cql_put_header(bw_buf *buf, const bw_cql_header *h);
/* Reads 9 bytes; -1 when the length's top bit is set (a negative [int]: no body has it). */
int bw_cql_header_read(const uint8_t in[BW_CQL_HEADER_SIZE], bw_cql_header *h);

/* Moves a response body's cursor past what the frame flags put before the message itself:
   the tracing id (16 bytes), the warnings ([string list]) and the custom payload ([bytes
   map]), in that order. 0, or -1 when the body is too short for them (cursor unchanged). */
int bw_cql_skip_response_extras(bw_cql_cursor *c, uint8_t flags);
#endif
