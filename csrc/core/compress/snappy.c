/* Snappy decompression: see snappy.h.

   The stream: the uncompressed length as a little-endian base-128 varint (at most 5 bytes,
   at most 2^32 - 1), then elements until the input ends. Each element starts with a tag
   byte whose low two bits give its kind:
     00 literal: the length minus one in the upper six bits when below 60, else in the
        next 1-4 bytes (little-endian; 60 means one byte, 63 four); the bytes follow.
     01 copy: length 4-11 in bits 2-4, offset's bits 8-10 in bits 5-7 and its low byte next.
     10 copy: length 1-64 in the upper six bits (minus one), a 2-byte little-endian offset.
     11 copy: length 1-64 likewise, a 4-byte little-endian offset.
   A copy repeats `length` bytes starting `offset` bytes back in the output (offset >= 1;
   the ranges may overlap, repeating a pattern). The output must end exactly at the length
   the prefix says. */
#include "snappy.h"

#include <string.h>

int bw_snappy_length(const uint8_t *in, size_t in_size, size_t *length) {
    uint64_t value = 0;
    for (size_t i = 0; i < 5; i++) {
        if (i >= in_size)
            return -1;
        value |= (uint64_t)(in[i] & 0x7f) << (7 * i);
        if (!(in[i] & 0x80)) {
            if (value > UINT32_MAX)
                return -1;
            *length = (size_t)value;
            return 0;
        }
    }
    return -1;
}

static size_t varint_size(const uint8_t *in) {
    size_t i = 0;
    while (in[i] & 0x80)
        i++;
    return i + 1;
}

static uint32_t load_le(const uint8_t *p, size_t n) {
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

/* Copies `length` bytes from `offset` back, where 1 <= offset <= what was written and the
   copy fits in the output; op_end is the output's end. */
static void copy_back(uint8_t *op, uint8_t *op_end, size_t offset, size_t length) {
    const uint8_t *src = op - offset;
    if (offset >= 8 && (size_t)(op_end - op) >= length + 8) {
        /* 8 bytes at a time: each 8-byte step's source lies wholly in bytes already written, and
           the at most 7 bytes written past the copy are inside the output (overwritten by
           what follows) */
        for (size_t i = 0; i < length; i += 8)
            memcpy(op + i, src + i, 8);
        return;
    }
    if (offset >= length) {
        memcpy(op, src, length);
        return;
    }
    for (size_t i = 0; i < length; i++)  /* overlapping: the pattern repeats */
        op[i] = src[i];
}

int bw_snappy_decompress(const uint8_t *in, size_t in_size, uint8_t *out, size_t out_size,
                         const char **why) {
    size_t said;
    if (bw_snappy_length(in, in_size, &said) != 0) {
        *why = "its length prefix is cut short or says more than 4 GiB";
        return -1;
    }
    if (said != out_size) {
        *why = "its length prefix is not the page's uncompressed size";
        return -1;
    }
    const uint8_t *ip = in + varint_size(in), *ip_end = in + in_size;
    uint8_t *op = out, *op_end = out + out_size;
    while (ip < ip_end) {
        uint8_t tag = *ip++;
        size_t length, offset;
        switch (tag & 3) {
        case 0:
            length = tag >> 2;
            if (length >= 60) {
                size_t extra = length - 59;
                if ((size_t)(ip_end - ip) < extra) {
                    *why = "a literal's length is cut short";
                    return -1;
                }
                length = (size_t)load_le(ip, extra);
                ip += extra;
                if (length == UINT32_MAX) {  /* 2^32 bytes: more than any output holds */
                    *why = BW_SNAPPY_HUGE_LITERAL;
                    return -1;
                }
            }
            length += 1;
            if ((size_t)(ip_end - ip) < length) {
                *why = "a literal runs past the end of the input";
                return -1;
            }
            if ((size_t)(op_end - op) < length) {
                *why = "a literal runs past the length the prefix says";
                return -1;
            }
            if (length <= 16 && ip_end - ip >= 16 && op_end - op >= 16)
                memcpy(op, ip, 16);  /* a short literal copied whole: 16 bytes, both in bounds */
            else
                memcpy(op, ip, length);
            op += length;
            ip += length;
            continue;
        case 1:
            if (ip == ip_end) {
                *why = "a copy's offset is cut short";
                return -1;
            }
            length = ((tag >> 2) & 7) + 4;
            offset = ((size_t)(tag >> 5) << 8) | *ip++;
            break;
        case 2:
            if (ip_end - ip < 2) {
                *why = "a copy's offset is cut short";
                return -1;
            }
            length = (size_t)(tag >> 2) + 1;
            offset = load_le(ip, 2);
            ip += 2;
            break;
        default:
            if (ip_end - ip < 4) {
                *why = "a copy's offset is cut short";
                return -1;
            }
            length = (size_t)(tag >> 2) + 1;
            offset = load_le(ip, 4);
            ip += 4;
            break;
        }
        if (offset == 0 || offset > (size_t)(op - out)) {
            *why = "a copy reaches before the start of the output";
            return -1;
        }
        if ((size_t)(op_end - op) < length) {
            *why = "a copy runs past the length the prefix says";
            return -1;
        }
        copy_back(op, op_end, offset, length);
        op += length;
    }
    if (op != op_end) {
        *why = "it ends before the length its prefix says";
        return -1;
    }
    return 0;
}
