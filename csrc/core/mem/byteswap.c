#include "byteswap.h"

#include <string.h>

/* Contiguous loops. The swaps are written as shifts and masks: with plain SSE2 (the x86-64
   baseline, no pshufb) gcc vectorises these, while __builtin_bswap* stays one element at a
   time. memcpy in and out keeps them free of alignment and aliasing assumptions. */
static inline uint16_t swap16(uint16_t v) { return (uint16_t)((v >> 8) | (v << 8)); }

static inline uint32_t swap32(uint32_t v) {
    v = ((v & 0x00ff00ffu) << 8) | ((v >> 8) & 0x00ff00ffu);
    return (v << 16) | (v >> 16);
}

static inline uint64_t swap64(uint64_t v) {
    v = ((v & 0x00ff00ff00ff00ffull) << 8) | ((v >> 8) & 0x00ff00ff00ff00ffull);
    v = ((v & 0x0000ffff0000ffffull) << 16) | ((v >> 16) & 0x0000ffff0000ffffull);
    return (v << 32) | (v >> 32);
}

#define SWAP_CONTIG(name, type, swap)                                \
    static void name(char *restrict dst, const char *restrict src, size_t n) { \
        for (size_t i = 0; i < n; i++) {                             \
            type v;                                                  \
            memcpy(&v, src + sizeof(type) * i, sizeof(type));        \
            v = swap(v);                                             \
            memcpy(dst + sizeof(type) * i, &v, sizeof(type));        \
        }                                                            \
    }

/* With AVX2 (checked at run time) the same loops run 32 bytes at a time. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define BW_HAVE_AVX2_CLONES 1
#define AVX2 __attribute__((target("avx2")))
AVX2 SWAP_CONTIG(swap2_contig_avx2, uint16_t, swap16)
AVX2 SWAP_CONTIG(swap4_contig_avx2, uint32_t, swap32)
AVX2 SWAP_CONTIG(swap8_contig_avx2, uint64_t, swap64)
#endif
SWAP_CONTIG(swap2_contig_base, uint16_t, swap16)
SWAP_CONTIG(swap4_contig_base, uint32_t, swap32)
SWAP_CONTIG(swap8_contig_base, uint64_t, swap64)

static int have_avx2(void) {
#ifdef BW_HAVE_AVX2_CLONES
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return cached;
#else
    return 0;
#endif
}

static void swap2_contig(char *dst, const char *src, size_t n) {
#ifdef BW_HAVE_AVX2_CLONES
    if (have_avx2()) { swap2_contig_avx2(dst, src, n); return; }
#endif
    swap2_contig_base(dst, src, n);
}

static void swap4_contig(char *dst, const char *src, size_t n) {
#ifdef BW_HAVE_AVX2_CLONES
    if (have_avx2()) { swap4_contig_avx2(dst, src, n); return; }
#endif
    swap4_contig_base(dst, src, n);
}

static void swap8_contig(char *dst, const char *src, size_t n) {
#ifdef BW_HAVE_AVX2_CLONES
    if (have_avx2()) { swap8_contig_avx2(dst, src, n); return; }
#endif
    swap8_contig_base(dst, src, n);
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
