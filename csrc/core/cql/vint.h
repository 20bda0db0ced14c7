/* CQL unsigned vint (as in vector<T, N> element lengths): the number of leading 1-bits of
   the first byte is the number of extra bytes that follow; the value is big-endian in the
   remaining bits. 127 -> 7f, 128 -> 80 80, 16384 -> c0 40 00. Never zig-zag. No Python. */
#ifndef BW_VINT_H
#define BW_VINT_H
#include <stddef.h>
#include <stdint.h>

/* The longest encoding (a 64-bit value: ff + 8 bytes). */
#define BW_VINT_MAX 9

/* Bytes the encoding of v takes (1..9). */
static inline size_t bw_vint_size(uint64_t v) {
    size_t extra = 0;
    /* k extra bytes hold 7 * (k + 1) bits, up to 8 extra bytes (64 bits). */
    while (extra < 8 && (v >> (7 * (extra + 1))) != 0)
        extra++;
    return extra + 1;
}

/* Writes v at dst (room for BW_VINT_MAX bytes is enough); returns the bytes written. */
size_t bw_vint_write(uint64_t v, unsigned char *dst);

/* Reads one vint from src, which holds `avail` bytes. Returns the bytes consumed and sets
   *value, or 0 when src ends before the vint does. */
size_t bw_vint_read(const unsigned char *src, size_t avail, uint64_t *value);
#endif
