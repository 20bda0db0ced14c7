/* A reader of the Thrift compact protocol, for the Parquet metadata bulkwire parses itself
   (the footer's column chunks, the offset index, page headers). It never reads past `end`:
   every read checks what is left first, and nesting deeper than BW_THRIFT_MAX_DEPTH is
   refused, so a crafted buffer gives an error and never a read out of bounds or a deep
   recursion. */
#ifndef BW_THRIFT_COMPACT_H
#define BW_THRIFT_COMPACT_H
#include <stddef.h>
#include <stdint.h>

#define BW_THRIFT_MAX_DEPTH 32

/* Compact protocol type codes (field headers and list elements). */
enum {
    BW_THRIFT_STOP = 0,
    BW_THRIFT_TRUE = 1,
    BW_THRIFT_FALSE = 2,
    BW_THRIFT_BYTE = 3,
    BW_THRIFT_I16 = 4,
    BW_THRIFT_I32 = 5,
    BW_THRIFT_I64 = 6,
    BW_THRIFT_DOUBLE = 7,
    BW_THRIFT_BINARY = 8,
    BW_THRIFT_LIST = 9,
    BW_THRIFT_SET = 10,
    BW_THRIFT_MAP = 11,
    BW_THRIFT_STRUCT = 12,
};

typedef struct {
    const uint8_t *pos, *end;
    int depth;         /* structs entered and not yet left */
    const char *error; /* the first failure; reads after it fail at once */
    int ran_out;       /* the first failure was the data ending where more was needed: the
                          same bytes followed by more might have read */
} bw_thrift;

void bw_thrift_init(bw_thrift *t, const uint8_t *data, size_t size);

/* Each returns 0 on success and -1 on failure, with t->error set. */
int bw_thrift_struct_begin(bw_thrift *t);
int bw_thrift_struct_end(bw_thrift *t);
/* The next field of the struct being read: *type is BW_THRIFT_STOP at its end. `last_id`
   carries the previous field's id, as the delta encoding needs (0 at the struct's start). */
int bw_thrift_field(bw_thrift *t, int16_t *last_id, int *type, int16_t *id);
/* An integer field of exactly the type the schema gives it: a reader generated from the
   schema does not take an i16 or i64 where it wants an i32, so neither does this one. */
int bw_thrift_i32(bw_thrift *t, int type, int32_t *value);
int bw_thrift_i64(bw_thrift *t, int type, int64_t *value);
/* A list or set header: its element type and count (checked against what is left). */
int bw_thrift_list(bw_thrift *t, int *elem_type, uint32_t *count);
/* Skips a value of the given type, nested values included. */
int bw_thrift_skip(bw_thrift *t, int type);

/* ---- a struct read by its table ------------------------------------------------------------

   A struct the reader knows is a table of the fields it wants: each field's id, the type the
   schema gives it and where its value goes in a target the caller owns. bw_thrift_read_struct
   reads one struct to its stop, counted as one level of nesting (BW_THRIFT_MAX_DEPTH):
   - a field the table does not name is skipped, nested values included;
   - an integer field (BW_THRIFT_I32, BW_THRIFT_I64) is read whatever its wire type, so one of
     another wire type is refused ("integer field of another type in metadata"), as a reader
     generated from the schema refuses it;
   - a bool, struct or list field of another wire type is skipped, as an unknown field is;
   - a field that comes again overwrites what the first one wrote. */

/* Reads the value of a struct or list field itself, `t` at its value: returns 0; -1 when a
   read of t failed (t->error says why); or any other value, a refusal of the caller's own
   (what it refuses and why is the caller's to keep in `context`), which ends the read of every
   struct it is nested in and which bw_thrift_read_struct returns as it is. */
typedef int (*bw_thrift_handler)(bw_thrift *t, void *target, void *context);

typedef struct bw_thrift_struct bw_thrift_struct;

typedef struct {
    int16_t id;
    /* BW_THRIFT_I32 (an int32_t at target + offset), BW_THRIFT_I64 (an int64_t), BW_THRIFT_TRUE
       (a bool of either wire type: an int32_t, 1 or 0), BW_THRIFT_STRUCT or BW_THRIFT_LIST */
    uint8_t type;
    size_t offset;
    /* a struct without a handler: its table, read into target + offset */
    const bw_thrift_struct *nested;
    /* a struct or a list: called with the target (not moved by offset) and the context */
    bw_thrift_handler handler;
} bw_thrift_field_spec;

struct bw_thrift_struct {
    const bw_thrift_field_spec *fields;
    size_t count;
};

/* The table of an array of field specs. */
#define BW_THRIFT_STRUCT_OF(specs) {(specs), sizeof(specs) / sizeof((specs)[0])}

/* Reads the struct at t's position into target: 0, -1 (t->error set), or what a handler
   returned of its own. */
int bw_thrift_read_struct(bw_thrift *t, const bw_thrift_struct *table, void *target,
                          void *context);

#endif
