/* Strided element copies with an optional byte swap: the one loop that turns NumPy or Arrow
   memory into big-endian wire elements and back. No Python. */
#ifndef BW_BYTESWAP_H
#define BW_BYTESWAP_H
#include <stddef.h>
#include <stdint.h>

/* 1 when this machine stores multi-byte numbers most significant byte first. */
#define BW_NATIVE_BIG_ENDIAN (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

/* Copies n elements of `width` bytes (1, 2, 4, 8 or 16; 16 is copied or swapped as one
   16-byte unit) from src, whose elements are src_stride bytes apart (may be negative or 0),
   to dst, whose elements are dst_stride bytes apart. With swap != 0 each element's bytes are
   reversed. Neither pointer needs any alignment; the buffers must not overlap. The common
   contiguous cases (both strides == width) run in tight loops the compiler vectorises. */
void bw_copy_elements(char *dst, ptrdiff_t dst_stride, const char *src, ptrdiff_t src_stride,
                      size_t n, size_t width, int swap);

/* Writes byte `value` at dst, dst + stride, ... (n times): the constant length prefix of
   fixed-size elements inside a variable-width vector. */
void bw_fill_strided(char *dst, ptrdiff_t stride, size_t n, unsigned char value);
#endif
