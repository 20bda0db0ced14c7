/* Float text against the C library: strtod of the text gives back the same bits, no shorter
   digit string does (snprintf %.*e for every shorter precision), and the layout is
   float.__repr__'s. Also known shortest digits.
   sources: float_text.c
   libs: -lm */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "float_text.h"

/* float.__repr__'s layout of the decimal digits d (nd of them) times 10^(decpt - nd):
   positional for -4 <= decpt - 1 < 16, else d.ddde+XX. */
static size_t repr_layout(int negative, const char *d, int nd, int decpt, char *out) {
    size_t n = 0;
    if (negative)
        out[n++] = '-';
    int e = decpt - 1;
    if (e < -4 || e >= 16) {
        out[n++] = d[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, d + 1, (size_t)nd - 1);
            n += (size_t)nd - 1;
        }
        n += (size_t)sprintf(out + n, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (decpt <= 0) {
        out[n++] = '0';
        out[n++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[n++] = '0';
        memcpy(out + n, d, (size_t)nd);
        n += (size_t)nd;
    } else if (decpt < nd) {
        memcpy(out + n, d, (size_t)decpt);
        n += (size_t)decpt;
        out[n++] = '.';
        memcpy(out + n, d + decpt, (size_t)(nd - decpt));
        n += (size_t)(nd - decpt);
    } else {
        memcpy(out + n, d, (size_t)nd);
        n += (size_t)nd;
        for (int i = nd; i < decpt; i++)
            out[n++] = '0';
        out[n++] = '.';
        out[n++] = '0';
    }
    return n;
}

/* The shortest correctly rounded digits that read back as v (as float when is_float): the
   reference. Returns the text laid out like repr, and the digit count in *ndigits. */
static size_t reference_text(double v, int is_float, char *out, int *ndigits) {
    if (isnan(v))
        return (size_t)sprintf(out, "NaN");
    if (isinf(v))
        return (size_t)sprintf(out, v < 0 ? "-Infinity" : "Infinity");
    if (v == 0) {
        *ndigits = 1;
        return (size_t)sprintf(out, signbit(v) ? "-0.0" : "0.0");
    }
    char sci[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, fabs(v));
        int back = is_float ? strtof(sci, NULL) == (float)fabs(v) : strtod(sci, NULL) == fabs(v);
        if (!back)
            continue;
        char digits[24];
        int nd = 0;
        const char *s = sci;
        for (; *s != 'e'; s++)
            if (*s != '.')
                digits[nd++] = *s;
        while (nd > 1 && digits[nd - 1] == '0')
            nd--;
        *ndigits = nd;
        return repr_layout(signbit(v) != 0, digits, nd, atoi(s + 1) + 1, out);
    }
    return 0; /* not reached: 17 digits always round-trip */
}

/* Significant digits of a text the writer produced ("-1.25e-07" -> 3). */
static int significant_digits(const char *t, size_t n) {
    char digits[40];
    int nd = 0;
    for (size_t i = 0; i < n && t[i] != 'e'; i++)
        if (t[i] >= '0' && t[i] <= '9' && (nd > 0 || t[i] != '0'))
            digits[nd++] = t[i];
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    return nd;
}

/* 0 when the writer's text for v is right. The exact reference text is required, except
   when v is a power of two above the smallest normal: there the rounding interval is
   narrower below than above, so the nearest shortest digits need not be the correctly
   rounded ones the reference tries, and the text must only read back and be no longer. */
static int check_value(double v, int is_float, int asymmetric) {
    char got[BW_FLOAT_TEXT_MAX + 8], want[64];
    memset(got, '#', sizeof got);
    size_t n = is_float ? bw_float32_to_text((float)v, got) : bw_double_to_text(v, got);
    int want_digits = 0;
    size_t want_len = reference_text(v, is_float, want, &want_digits);
    if (n > BW_FLOAT_TEXT_MAX || got[n] != '#')
        return -1;
    if (n == want_len && memcmp(got, want, n) == 0)
        return 0;
    if (!asymmetric || isnan(v) || isinf(v))
        goto mismatch;
    got[n] = '\0';
    int back = is_float ? strtof(got, NULL) == (float)v : strtod(got, NULL) == v;
    if (back && significant_digits(got, n) <= want_digits) {
        got[n] = '#';
        return 0;
    }
mismatch:
    fprintf(stderr, "%s %.17g: got \"%.*s\", want \"%.*s\"\n", is_float ? "float32" : "double",
            v, (int)n, got, (int)want_len, want);
    return -1;
}

static int double_is_asymmetric(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return (bits & 0x000fffffffffffffULL) == 0 && ((bits >> 52) & 0x7ff) > 1;
}

static int float_is_asymmetric(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return (bits & 0x7fffff) == 0 && ((bits >> 23) & 0xff) > 1;
}

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

TEST(powers_of_two_and_neighbours) {
    for (int e = -1074; e <= 1023; e++) {
        double v = ldexp(1.0, e);
        double near[] = {v, nextafter(v, 0), nextafter(v, INFINITY)};
        for (int k = 0; k < 3; k++)
            if (check_value(near[k], 0, double_is_asymmetric(near[k])) != 0) {
                CHECK(!"double text differs from the reference");
                return;
            }
    }
    for (int e = -149; e <= 127; e++) {
        float v = ldexpf(1.0f, e);
        float near[] = {v, nextafterf(v, 0), nextafterf(v, INFINITY)};
        for (int k = 0; k < 3; k++)
            if (check_value(near[k], 1, float_is_asymmetric(near[k])) != 0) {
                CHECK(!"float32 text differs from the reference");
                return;
            }
    }
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

RUN_TESTS(known_shortest_digits, random_doubles_round_trip_shortest, powers_of_two_and_neighbours,
          random_float32_round_trip_shortest)
