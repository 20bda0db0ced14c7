/* CQL unsigned vint: the examples of the format, every length boundary, round trips and
   truncated input.
   sources: vint.c */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "vint.h"

TEST(format_examples) {
    unsigned char b[BW_VINT_MAX + 1];
    CHECK_EQ(bw_vint_write(0, b), 1);
    CHECK_EQ(b[0], 0x00);
    CHECK_EQ(bw_vint_write(127, b), 1);
    CHECK_EQ(b[0], 0x7f);
    CHECK_EQ(bw_vint_write(128, b), 2);
    CHECK(b[0] == 0x80 && b[1] == 0x80);
    CHECK_EQ(bw_vint_write(16384, b), 3);
    CHECK(b[0] == 0xc0 && b[1] == 0x40 && b[2] == 0x00);
    CHECK_EQ(bw_vint_write(UINT64_MAX, b), 9);
    CHECK_EQ(b[0], 0xff);
    for (int i = 1; i < 9; i++)
        CHECK_EQ(b[i], 0xff);
}

TEST(length_boundaries_round_trip) {
    unsigned char b[BW_VINT_MAX];
    for (int bits = 0; bits <= 64; bits++) {
        uint64_t top = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
        uint64_t values[] = {top, top + 1, top > 0 ? top - 1 : 0};
        for (int k = 0; k < 3; k++) {
            uint64_t v = values[k];
            size_t n = bw_vint_write(v, b);
            CHECK_EQ(n, bw_vint_size(v));
            /* k extra bytes hold 7 (k + 1) bits; 8 extra bytes hold all 64 */
            size_t want = 1;
            while (want < 9 && (v >> (7 * want)) != 0)
                want++;
            CHECK_EQ(n, want);
            uint64_t back = ~v;
            CHECK_EQ(bw_vint_read(b, n, &back), n);
            CHECK(back == v);
        }
    }
}

TEST(random_values_round_trip_with_trailing_bytes) {
    unsigned long long state = 1234567;
    unsigned char b[BW_VINT_MAX + 4];
    for (int i = 0; i < 100000; i++) {
        uint64_t r = check_rand(&state);
        uint64_t v = r >> (r % 64);
        size_t n = bw_vint_write(v, b);
        b[n] = 0xff; /* what follows must not be read as part of the vint */
        uint64_t back = 0;
        if (bw_vint_read(b, n + 1, &back) != n || back != v) {
            CHECK(!"random value does not round-trip");
            break;
        }
    }
}

TEST(truncated_input_is_refused) {
    unsigned char b[BW_VINT_MAX] = {0};
    uint64_t value = 42;
    CHECK_EQ(bw_vint_read(b, 0, &value), 0);
    for (uint64_t v = 128; v != 0 && v < UINT64_MAX / 2; v <<= 7) {
        size_t n = bw_vint_write(v, b);
        for (size_t avail = 0; avail < n; avail++) {
            /* a heap copy of exactly `avail` bytes: a read past it is a sanitizer report */
            unsigned char *exact = malloc(avail ? avail : 1);
            memcpy(exact, b, avail);
            CHECK_EQ(bw_vint_read(exact, avail, &value), 0);
            free(exact);
        }
    }
    CHECK_EQ(value, 42);
}

RUN_TESTS(format_examples, length_boundaries_round_trip,
          random_values_round_trip_with_trailing_bytes, truncated_input_is_refused)
