/* Decimal text of machine integers. No Python. */
#ifndef BW_INT_TEXT_H
#define BW_INT_TEXT_H
#include <stddef.h>
#include <stdint.h>
/* Longest text either writer produces ("-9223372036854775808"). */
#define BW_INT_TEXT_MAX 20
/* Write the decimal text of v; no NUL. Return bytes written. */
size_t bw_u64_to_text(uint64_t v, char *dst);
size_t bw_i64_to_text(int64_t v, char *dst);

/* "00" "01" ... "99": the two digits of n at bw_digit_pairs + 2 * n. The one table of the
   integer and float writers; hidden, so that the extension reads it directly, not through
   its symbol table. */
__attribute__((visibility("hidden"))) extern const char bw_digit_pairs[201];

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
