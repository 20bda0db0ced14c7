#include "int_text.h"

#include <string.h>

/* Two digits per division halves the number of (slow) divisions. */
const char bw_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

size_t bw_u64_to_text(uint64_t v, char *dst) {
    char tmp[BW_INT_TEXT_MAX];
    char *end = tmp + sizeof tmp;
    char *p = end;
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, bw_digit_pairs + 2 * pair, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, bw_digit_pairs + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    size_t n = (size_t)(end - p);
    memcpy(dst, p, n);
    return n;
}

size_t bw_i64_to_text(int64_t v, char *dst) {
    if (v >= 0)
        return bw_u64_to_text((uint64_t)v, dst);
    *dst = '-';
    /* negate in unsigned arithmetic so INT64_MIN does not overflow */
    return 1 + bw_u64_to_text(0 - (uint64_t)v, dst + 1);
}

void bw_u32_to_fixed(uint32_t v, int width, char *dst) {
    for (int i = width - 1; i >= 0; i--) {
        dst[i] = (char)('0' + v % 10);
        v /= 10;
    }
}
