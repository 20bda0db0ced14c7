/* Decimal text of machine integers against printf's.
   sources: int_text.c */
#include <inttypes.h>
#include <stdint.h>

#include "check.h"
#include "int_text.h"

static int matches_printf_u64(uint64_t v) {
    char got[BW_INT_TEXT_MAX + 1], want[32];
    size_t n = bw_u64_to_text(v, got);
    int wn = snprintf(want, sizeof want, "%" PRIu64, v);
    return n == (size_t)wn && memcmp(got, want, n) == 0;
}

static int matches_printf_i64(int64_t v) {
    char got[BW_INT_TEXT_MAX + 1], want[32];
    size_t n = bw_i64_to_text(v, got);
    int wn = snprintf(want, sizeof want, "%" PRId64, v);
    return n == (size_t)wn && n <= BW_INT_TEXT_MAX && memcmp(got, want, n) == 0;
}

TEST(extremes) {
    char buf[BW_INT_TEXT_MAX + 8];
    memset(buf, '#', sizeof buf);
    size_t n = bw_i64_to_text(INT64_MIN, buf);
    CHECK_BYTES(buf, n, "-9223372036854775808");
    CHECK_EQ(n, BW_INT_TEXT_MAX);
    CHECK(buf[n] == '#'); /* no NUL, nothing past the text */
    n = bw_i64_to_text(INT64_MAX, buf);
    CHECK_BYTES(buf, n, "9223372036854775807");
    n = bw_u64_to_text(UINT64_MAX, buf);
    CHECK_BYTES(buf, n, "18446744073709551615");
    n = bw_u64_to_text(0, buf);
    CHECK_BYTES(buf, n, "0");
    n = bw_i64_to_text(-1, buf);
    CHECK_BYTES(buf, n, "-1");
}

TEST(every_power_of_ten_and_its_neighbours) {
    uint64_t p = 1;
    for (int e = 0; e <= 19; e++, p *= 10) {
        CHECK(matches_printf_u64(p));
        CHECK(matches_printf_u64(p - 1));
        CHECK(matches_printf_u64(p + 1));
        if (p <= (uint64_t)INT64_MAX) {
            CHECK(matches_printf_i64((int64_t)p));
            CHECK(matches_printf_i64(-(int64_t)p));
            CHECK(matches_printf_i64(1 - (int64_t)p));
        }
    }
}

TEST(small_and_random_values) {
    for (int64_t v = -100000; v <= 100000; v++)
        if (!matches_printf_i64(v)) {
            CHECK(!"small value differs from printf");
            break;
        }
    unsigned long long state = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) {
        uint64_t r = check_rand(&state);
        uint64_t v = r >> (r % 64); /* every length equally often */
        if (!matches_printf_u64(v) || !matches_printf_i64((int64_t)v)) {
            CHECK(!"random value differs from printf");
            break;
        }
    }
}

TEST(fixed_width_is_zero_padded) {
    char buf[16];
    bw_u32_to_fixed(7, 3, buf);
    CHECK_BYTES(buf, 3, "007");
    bw_u32_to_fixed(123456789, 9, buf);
    CHECK_BYTES(buf, 9, "123456789");
    bw_u32_to_fixed(0, 6, buf);
    CHECK_BYTES(buf, 6, "000000");
    bw_u32_to_fixed(59, 2, buf);
    CHECK_BYTES(buf, 2, "59");
}

RUN_TESTS(extremes, every_power_of_ten_and_its_neighbours, small_and_random_values,
          fixed_width_is_zero_padded)
