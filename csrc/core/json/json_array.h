/* Numbers in memory -> JSON text, as json.dumps writes the Python values NumPy's tolist()
   (or a float32 widened to a float) gives for them: one writer for NumPy arrays and scalars,
   Arrow vector columns and VectorCodec.to_json_many. No Python. */
#ifndef BW_JSON_ARRAY_H
#define BW_JSON_ARRAY_H
#include <stddef.h>

#include "float_text.h"
#include "out_buffer.h"

/* Element types, each in the machine's own byte order unless the caller says swapped. */
typedef enum {
    BW_NUM_BOOL, /* one byte, non-zero is true */
    BW_NUM_I8, BW_NUM_I16, BW_NUM_I32, BW_NUM_I64,
    BW_NUM_U8, BW_NUM_U16, BW_NUM_U32, BW_NUM_U64,
    BW_NUM_F16, /* IEEE binary16, written as its (exact) double */
    BW_NUM_F32, /* the repr of the widened double, or the shortest float32 text */
    BW_NUM_F64,
} bw_num_type;

/* Room one element's text takes at most, with its ", " separator (float text is the
   longest). */
#define BW_JSON_ELEMENT_ROOM (BW_FLOAT_TEXT_MAX + 2)

/* Text of a float32: "widen" (0) writes the repr of the exact double, as float32.item() and
   json give it; "shortest" (1) the shortest digits that read back as the same float32.
   Needs BW_FLOAT_TEXT_MAX bytes. Returns bytes written. */
static inline size_t bw_float32_text(float v, int float32_shortest, char *dst) {
    return float32_shortest ? bw_float32_to_text(v, dst) : bw_double_to_text((double)v, dst);
}

/* Appends the text of the element at p (alignment not needed). 0, or -1 out of memory. */
int bw_json_number(bw_buf *out, bw_num_type type, const char *p, int float32_shortest);

/* Appends "[e, e, ...]" of n elements, the first at p and each `stride` bytes after the
   previous one (alignment not needed); `swapped`: stored in the other byte order.
   0, or -1 out of memory. */
int bw_json_array(bw_buf *out, bw_num_type type, const char *p, size_t n, ptrdiff_t stride,
                  int swapped, int float32_shortest);

/* ---- arrays of doubles written later ("pending runs") ----

   A producer that must not spend its time on float text copies the doubles into the buffer
   now and has their text written later, in place, by another thread (bw_json_runs_settle),
   with this same writer. A pending run of n doubles takes BW_JSON_RUN_ROOM(n) bytes: the
   room of the longest possible "[e, e, ...]" text. So a buffer's length while runs are
   pending is an upper bound of its final length, and sizing decisions made on it hold. The
   room keeps a small header at its start (the run's length and the offset of the next run)
   and the doubles at its end, where writing the text from its start never reaches a double
   before it was read: settling allocates nothing and cannot fail. */
#define BW_JSON_RUN_NONE ((size_t)-1)
#define BW_JSON_RUN_ROOM(n) ((n) * BW_JSON_ELEMENT_ROOM + 2)

/* The pending runs of one buffer, as offsets into it (BW_JSON_RUN_NONE: none). */
typedef struct {
    size_t first, last;
} bw_json_runs;

static inline void bw_json_runs_clear(bw_json_runs *runs) {
    runs->first = runs->last = BW_JSON_RUN_NONE;
}

/* Reserves a pending run's room for n >= 1 doubles at the end of out and returns where the
   caller stores them (n times 8 bytes, native order, no alignment), or NULL when out of
   memory. Nothing is added to out until bw_json_run_commit: a caller that gives up just does
   not commit. */
char *bw_json_run_open(bw_buf *out, size_t n);
/* Adds the run opened by bw_json_run_open(out, n), its doubles stored, to out and to runs. */
void bw_json_run_commit(bw_buf *out, bw_json_runs *runs, size_t n);
/* Undoes every run committed after `saved` was taken (a copy of runs): the caller cuts the
   buffer back to where it was then. */
void bw_json_runs_rollback(bw_json_runs *runs, char *data, bw_json_runs saved);
/* Writes the text of every pending run of data[0..len), the first at offset `first`, in
   place, closing the gaps. Returns the final length (<= len). No allocation, no failure. */
size_t bw_json_runs_settle(char *data, size_t len, size_t first);
#endif
