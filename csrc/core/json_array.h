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
#endif
