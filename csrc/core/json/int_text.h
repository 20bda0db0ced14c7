/* Decimal text of machine integers. No Python. */
#ifndef BW_INT_TEXT_H
#define BW_INT_TEXT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* Longest text either writer produces ("-9223372036854775808"). */
#define BW_INT_TEXT_MAX 20

/* "00" "01" ... "99": the two digits of n at bw_digit_pairs + 2 * n. The one table of the
   integer and float writers; hidden, so that the extension reads it directly, not through
   its symbol table. */
__attribute__((visibility("hidden"))) extern const char bw_digit_pairs[201];

/* How many decimal digits v has (1 for 0). */
static inline size_t bw_digit_count(uint64_t v) {
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

/* Write the decimal text of v; no NUL. Return bytes written. Inline: most integers of a
   document are a digit or two, written at once. */
static inline size_t bw_u64_to_text(uint64_t v, char *dst) {
    if (v < 10) {
        dst[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        memcpy(dst, bw_digit_pairs + 2 * v, 2);
        return 2;
    }
    /* straight into place, two digits at a time from the end */
    size_t n = bw_digit_count(v);
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

static inline size_t bw_i64_to_text(int64_t v, char *dst) {
    if (v >= 0)
        return bw_u64_to_text((uint64_t)v, dst);
    *dst = '-';
    /* negate in unsigned arithmetic so INT64_MIN does not overflow */
    return 1 + bw_u64_to_text(0 - (uint64_t)v, dst + 1);
}

/* Write exactly `width` digits of v (zero-padded); v must fit. Two digits a step from the
   table; inline, since its callers (dates, times) make several calls of a few digits each. */
static inline void bw_u32_to_fixed(uint32_t v, int width, char *dst) {
    int i = width;
    while (i >= 2) {
        i -= 2;
        dst[i] = bw_digit_pairs[2 * (v % 100)];
        dst[i + 1] = bw_digit_pairs[2 * (v % 100) + 1];
        v /= 100;
    }
    if (i == 1)
        dst[0] = (char)('0' + v % 10);
}
#endif
