/* Float text against the C library: strtod of the text gives back the same bits, no shorter
   digit string does (snprintf %.*e for every shorter precision), and the layout is
   float.__repr__'s. Also known shortest digits.
   sources: float_text.c int_text.c
   libs: -lm */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "float_reference.h"
#include "float_text.h"

TEST(known_shortest_digits) {
    static const struct { double v; const char *text; } cases[] = {
        {0.1, "0.1"}, {0.3, "0.3"}, {1.0 / 3, "0.3333333333333333"}, {2.0 / 3, "0.6666666666666666"},
        {1.5, "1.5"}, {100.0, "100.0"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"},
        {1e22, "1e+22"}, {1e23, "1e+23"}, {123456789012345680.0, "1.2345678901234568e+17"},
        {0.0001, "0.0001"}, {0.00001, "1e-05"}, {5e-324, "5e-324"}, {DBL_MAX, "1.7976931348623157e+308"},
        {DBL_MIN, "2.2250738585072014e-308"}, {-0.0, "-0.0"}, {0.0, "0.0"}, {-2.5, "-2.5"},
        {9007199254740993.0, "9007199254740992.0"}, {NAN, "NaN"}, {INFINITY, "Infinity"},
        {-INFINITY, "-Infinity"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[BW_FLOAT_TEXT_MAX];
        size_t n = bw_double_to_text(cases[i].v, got);
        CHECK_BYTES(got, n, cases[i].text);
    }
    static const struct { float v; const char *text; } fcases[] = {
        {0.1f, "0.1"}, {16777216.0f, "16777216.0"}, {FLT_MAX, "3.4028235e+38"}, {1e-45f, "1e-45"},
        {FLT_MIN, "1.1754944e-38"}, {1.0f / 3, "0.33333334"}, {-0.0f, "-0.0"}, {NAN, "NaN"},
        {1e16f, "1e+16"}, {-INFINITY, "-Infinity"},
    };
    for (size_t i = 0; i < sizeof fcases / sizeof fcases[0]; i++) {
        char got[BW_FLOAT_TEXT_MAX];
        size_t n = bw_float32_to_text(fcases[i].v, got);
        CHECK_BYTES(got, n, fcases[i].text);
    }
}

TEST(random_doubles_round_trip_shortest) {
    unsigned long long state = 0x853c49e6748fea9bULL;
    for (int i = 0; i < 150000; i++) {
        uint64_t r = check_rand(&state);
        double v;
        switch (i % 3) {
        case 0: memcpy(&v, &r, 8); break;                                   /* any bit pattern */
        case 1: v = (double)(int64_t)(r >> (r % 64)) * ((r & 1) ? 1 : -1); break; /* integers */
        default: v = (double)(r % 1000000) / pow(10, (double)((r >> 32) % 30)); break; /* short decimals */
        }
        if (check_value(v, 0, double_is_asymmetric(v)) != 0) {
            CHECK(!"double text differs from the reference");
            break;
        }
    }
}

/* 2^e and its neighbours toward 0 and toward infinity, as doubles or (is_float) float32s,
   against the reference: 0, or -1 after a failed CHECK. */
static int check_power_of_two(int e, int is_float) {
    float f = ldexpf(1.0f, e);
    double v = ldexp(1.0, e);
    double near[] = {v, nextafter(v, 0), nextafter(v, INFINITY)};
    if (is_float)
        near[1] = nextafterf(f, 0), near[2] = nextafterf(f, INFINITY);
    for (int k = 0; k < 3; k++) {
        int asymmetric = is_float ? float_is_asymmetric((float)near[k])
                                  : double_is_asymmetric(near[k]);
        if (check_value(near[k], is_float, asymmetric) == 0)
            continue;
        if (is_float)
            CHECK(!"float32 text differs from the reference");
        else
            CHECK(!"double text differs from the reference");
        return -1;
    }
    return 0;
}

TEST(powers_of_two_and_neighbours) {
    for (int e = -1074; e <= 1023; e++)
        if (check_power_of_two(e, 0) < 0)
            return;
    for (int e = -149; e <= 127; e++)
        if (check_power_of_two(e, 1) < 0)
            return;
}

TEST(random_float32_round_trip_shortest) {
    unsigned long long state = 0xda3e39cb94b95bdbULL;
    for (int i = 0; i < 150000; i++) {
        uint32_t bits = (uint32_t)(check_rand(&state) >> 32);
        float f;
        memcpy(&f, &bits, 4);
        if (check_value((double)f, 1, float_is_asymmetric(f)) != 0) {
            CHECK(!"float32 text differs from the reference");
            break;
        }
    }
}

/* 0 when the short path of the lone value v gives bw_double_to_text's text; else -1 after
   a failed CHECK showing both. */
static int lone_text_is_the_same(double v) {
    char got[BW_FLOAT_TEXT_MAX], want[BW_FLOAT_TEXT_MAX + 1];
    size_t n = bw_lone_double_to_text(v, got);
    size_t m = bw_double_to_text(v, want);
    want[m] = '\0';
    if (n == m && memcmp(got, want, n) == 0)
        return 0;
    CHECK_BYTES(got, n, want);
    return -1;
}

/* The short path of a lone value gives bw_double_to_text's text, inside its range (every
   multiple of 1/16 up to 2^20, and near 2^31), at its edges and outside it. */
TEST(lone_values_as_bw_double_to_text) {
    double edges[] = {0.0, -0.0, 1.0 / 16, -1.0 / 16, 1.0 / 32, 3.0 / 32, 2147483648.0,
                      2147483648.0 - 1.0 / 16, -(2147483648.0 - 1.0 / 16), 2147483647.5,
                      4294967296.0, 1e16, 1e-5, 0.1, 1.0 / 3, NAN, INFINITY, -INFINITY, DBL_MAX,
                      5e-324, 1e300 * 16};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        lone_text_is_the_same(edges[i]);
    for (int64_t k = -(1 << 24); k <= (1 << 24); k += 7)
        if (lone_text_is_the_same((double)k / 16) < 0)
            break;
    uint64_t state = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        double v = i % 2 ? (double)(int64_t)(state % 68719476736ULL - 34359738368LL) / 16
                         : (double)(int64_t)(state >> 11) / (double)(1ULL << (state % 60));
        if (lone_text_is_the_same(v) < 0)
            break;
    }
}

/* An array of doubles at any stride and alignment is written as bw_double_to_text writes
   each value (itself checked against the C library above), separated by ", ", within the
   room the header asks for: common values with both signs, and every rare case (zero,
   non-finite, subnormal, powers of two, integers past 2^54 whose bounds fall on the grid). */
TEST(arrays_of_doubles_as_each_value) {
    enum { MOST = 300, ROOM = MOST * (BW_FLOAT_TEXT_MAX + 2) };
    static const double rare[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 5e-324, DBL_MIN, DBL_MAX,
                                  1.0, 2.0, 0.5, 1e16, 1e22, 1e-5, 18014398509481984.0,
                                  18014398509481988.0, 9007199254740993.0, 123456789012345680.0};
    static char bytes[MOST * 24 + 8], got[ROOM + 64], want[ROOM];
    uint64_t state = 88172645463325252ULL;
    for (int round = 0; round < 400; round++) {
        size_t n = round < 3 ? (size_t)round : (size_t)(round * 7 % MOST) + 1;
        ptrdiff_t stride = round % 3 == 0 ? 8 : round % 3 == 1 ? 24 : 9;
        size_t offset = (size_t)round % 8;
        char *w = want;
        for (size_t i = 0; i < n; i++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            double v;
            if (state % 5 == 0) {
                v = rare[(state >> 8) % (sizeof rare / sizeof rare[0])];
            } else {
                /* embedding-like values, and any exponent */
                uint64_t bits = state % 5 == 1 ? state : (state >> 12) | (UINT64_C(0x3fd) << 52) |
                                                             (state << 63);
                memcpy(&v, &bits, sizeof v);
            }
            memcpy(bytes + offset + i * (size_t)stride, &v, sizeof v);
            if (i) {
                memcpy(w, ", ", 2);
                w += 2;
            }
            w += bw_double_to_text(v, w);
        }
        memset(got, 0x55, sizeof got);
        char *end = bw_doubles_to_text(bytes + offset, n, stride, got);
        size_t room = n * (BW_FLOAT_TEXT_MAX + 2);
        int guard_kept = 1;
        for (size_t i = room; i < sizeof got; i++)
            guard_kept &= got[i] == 0x55;
        CHECK(guard_kept);
        *w = '\0';
        CHECK_BYTES(got, (size_t)(end - got), want);
        if (!guard_kept || (size_t)(end - got) != (size_t)(w - want))
            break;
    }
}

RUN_TESTS(arrays_of_doubles_as_each_value, lone_values_as_bw_double_to_text, known_shortest_digits, random_doubles_round_trip_shortest, powers_of_two_and_neighbours,
          random_float32_round_trip_shortest)
