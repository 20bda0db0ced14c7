/* The reference for float text: the shortest correctly rounded digits that read back
   (found with snprintf and strtod/strtof), laid out like float.__repr__. Shared by the unit
   test and the fuzz target. */
#ifndef BW_FLOAT_REFERENCE_H
#define BW_FLOAT_REFERENCE_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "float_text.h"

/* float.__repr__'s layout of the decimal digits d (nd of them) times 10^(decpt - nd):
   positional for -4 <= decpt - 1 < 16, else d.ddde+XX. */
static inline size_t repr_layout(int negative, const char *d, int nd, int decpt, char *out) {
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
static inline size_t reference_text(double v, int is_float, char *out, int *ndigits) {
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
static inline int significant_digits(const char *t, size_t n) {
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
static inline int check_value(double v, int is_float, int asymmetric) {
    char got[BW_FLOAT_TEXT_MAX + 8], want[64];
    memset(got, '#', sizeof got);
    size_t n = is_float ? bw_float32_to_text((float)v, got) : bw_double_to_text(v, got);
    int want_digits = 0;
    size_t want_len = reference_text(v, is_float, want, &want_digits);
    /* the writer may use all of its reserved room, never more */
    if (n > BW_FLOAT_TEXT_MAX || memcmp(got + BW_FLOAT_TEXT_MAX, "########", 8) != 0) {
        fprintf(stderr, "%.17g: %zu bytes, or written past the reserved room\n", v, n);
        return -1;
    }
    if (n == want_len && memcmp(got, want, n) == 0)
        return 0;
    if (!asymmetric || isnan(v) || isinf(v))
        goto mismatch;
    got[n] = '\0';
    int back = is_float ? strtof(got, NULL) == (float)v : strtod(got, NULL) == v;
    if (back && significant_digits(got, n) <= want_digits)
        return 0;
mismatch:
    fprintf(stderr, "%s %.17g: got \"%.*s\", want \"%.*s\"\n", is_float ? "float32" : "double",
            v, (int)n, got, (int)want_len, want);
    return -1;
}

static inline int double_is_asymmetric(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return (bits & 0x000fffffffffffffULL) == 0 && ((bits >> 52) & 0x7ff) > 1;
}

static inline int float_is_asymmetric(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return (bits & 0x7fffff) == 0 && ((bits >> 23) & 0xff) > 1;
}

#endif
