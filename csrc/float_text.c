/* Placeholder: correct but slow (tries each precision with snprintf). Being replaced by a
   shortest-digits algorithm. */
#include "float_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t write_non_finite(double v, char *dst) {
    if (isnan(v)) { memcpy(dst, "NaN", 3); return 3; }
    if (v > 0) { memcpy(dst, "Infinity", 8); return 8; }
    memcpy(dst, "-Infinity", 9);
    return 9;
}

/* digits: shortest significant digits, decpt: value = 0.d1d2.. x 10^decpt */
static size_t layout(int negative, const char *digits, int ndigits, int decpt, char *dst) {
    char *p = dst;
    if (negative) *p++ = '-';
    if (decpt <= -4 || decpt > 16) {
        *p++ = digits[0];
        if (ndigits > 1) {
            *p++ = '.';
            memcpy(p, digits + 1, (size_t)ndigits - 1);
            p += ndigits - 1;
        }
        int e = decpt - 1;
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        if (e < 0) e = -e;
        p += sprintf(p, "%02d", e);
    } else if (decpt <= 0) {
        *p++ = '0'; *p++ = '.';
        for (int i = 0; i < -decpt; i++) *p++ = '0';
        memcpy(p, digits, (size_t)ndigits); p += ndigits;
    } else if (ndigits <= decpt) {
        memcpy(p, digits, (size_t)ndigits); p += ndigits;
        for (int i = ndigits; i < decpt; i++) *p++ = '0';
        *p++ = '.'; *p++ = '0';
    } else {
        memcpy(p, digits, (size_t)decpt); p += decpt;
        *p++ = '.';
        memcpy(p, digits + decpt, (size_t)(ndigits - decpt)); p += ndigits - decpt;
    }
    return (size_t)(p - dst);
}

static size_t shortest(double v, int is_float32, char *dst) {
    if (!isfinite(v)) return write_non_finite(v, dst);
    int negative = signbit(v) != 0;
    double a = fabs(v);
    if (a == 0) return layout(negative, "0", 1, 1, dst);
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, a);
        double back = strtod(tmp, NULL);
        if (is_float32 ? (float)back == (float)a : back == a) break;
    }
    char digits[24];
    int nd = 0;
    char *q = tmp;
    for (; *q != 'e'; q++) if (*q != '.') digits[nd++] = *q;
    int e10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    return layout(negative, digits, nd, e10 + 1, dst);
}

size_t bw_double_to_text(double v, char *dst) { return shortest(v, 0, dst); }
size_t bw_float32_to_text(float v, char *dst) { return shortest((double)v, 1, dst); }
