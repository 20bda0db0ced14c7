#include "int_text.h"

#include <string.h>

/* Two digits per division halves the number of (slow) divisions. */
const char bw_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* How many decimal digits v has (1 for 0). */
static inline size_t digit_count(uint64_t v) {
    size_t n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

size_t bw_u64_to_text(uint64_t v, char *dst) {
    if (v < 10) { /* the most common integers of a document: written at once */
        dst[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        memcpy(dst, bw_digit_pairs + 2 * v, 2);
        return 2;
    }
    /* straight into place, two digits at a time from the end */
    size_t n = digit_count(v);
    char *p = dst + n;
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, bw_digit_pairs + 2 * pair, 2);
    }
    if (v >= 10)
        memcpy(p - 2, bw_digit_pairs + 2 * v, 2);
    else
        p[-1] = (char)('0' + v);
    return n;
}

size_t bw_i64_to_text(int64_t v, char *dst) {
    if (v >= 0)
        return bw_u64_to_text((uint64_t)v, dst);
    *dst = '-';
    /* negate in unsigned arithmetic so INT64_MIN does not overflow */
    return 1 + bw_u64_to_text(0 - (uint64_t)v, dst + 1);
}
