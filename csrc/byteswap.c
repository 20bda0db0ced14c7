#include "byteswap.h"

#include <string.h>

/* Contiguous loops: memcpy in and out of a register lets gcc emit unaligned vector loads and
   a byte shuffle for the whole loop. */
static void swap2_contig(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, src + 2 * i, 2);
        v = __builtin_bswap16(v);
        memcpy(dst + 2 * i, &v, 2);
    }
}

static void swap4_contig(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, src + 4 * i, 4);
        v = __builtin_bswap32(v);
        memcpy(dst + 4 * i, &v, 4);
    }
}

static void swap8_contig(char *dst, const char *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, src + 8 * i, 8);
        v = __builtin_bswap64(v);
        memcpy(dst + 8 * i, &v, 8);
    }
}

static inline void swap16_one(char *dst, const char *src) {
    uint64_t hi, lo;
    memcpy(&hi, src, 8);
    memcpy(&lo, src + 8, 8);
    hi = __builtin_bswap64(hi);
    lo = __builtin_bswap64(lo);
    memcpy(dst, &lo, 8);
    memcpy(dst + 8, &hi, 8);
}

void bw_copy_elements(char *dst, ptrdiff_t dst_stride, const char *src, ptrdiff_t src_stride,
                      size_t n, size_t width, int swap) {
    if (n == 0)
        return;
    if (!swap || width == 1) {
        if (dst_stride == (ptrdiff_t)width && src_stride == (ptrdiff_t)width) {
            memcpy(dst, src, n * width);
            return;
        }
        switch (width) {
        case 1:
            for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
                *dst = *src;
            return;
        case 2:
            for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
                memcpy(dst, src, 2);
            return;
        case 4:
            for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
                memcpy(dst, src, 4);
            return;
        case 8:
            for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
                memcpy(dst, src, 8);
            return;
        default:
            for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
                memcpy(dst, src, width);
            return;
        }
    }
    int contiguous = dst_stride == (ptrdiff_t)width && src_stride == (ptrdiff_t)width;
    switch (width) {
    case 2:
        if (contiguous) { swap2_contig(dst, src, n); return; }
        for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride) {
            uint16_t v;
            memcpy(&v, src, 2);
            v = __builtin_bswap16(v);
            memcpy(dst, &v, 2);
        }
        return;
    case 4:
        if (contiguous) { swap4_contig(dst, src, n); return; }
        for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride) {
            uint32_t v;
            memcpy(&v, src, 4);
            v = __builtin_bswap32(v);
            memcpy(dst, &v, 4);
        }
        return;
    case 8:
        if (contiguous) { swap8_contig(dst, src, n); return; }
        for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride) {
            uint64_t v;
            memcpy(&v, src, 8);
            v = __builtin_bswap64(v);
            memcpy(dst, &v, 8);
        }
        return;
    case 16:
        for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
            swap16_one(dst, src);
        return;
    default: /* any other width: reverse byte by byte */
        for (size_t i = 0; i < n; i++, dst += dst_stride, src += src_stride)
            for (size_t b = 0; b < width; b++)
                dst[b] = src[width - 1 - b];
        return;
    }
}

void bw_fill_strided(char *dst, ptrdiff_t stride, size_t n, unsigned char value) {
    for (size_t i = 0; i < n; i++, dst += stride)
        *dst = (char)value;
}
