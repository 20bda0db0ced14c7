/* Shortest round-trip decimal text for binary64 / binary32, laid out like float.__repr__.

   Digits come from the Schubfach method (R. Giulietti, "The Schubfach way to render doubles",
   2020): scale the value and its two rounding-interval bounds by a power of ten chosen so the
   interval is between 1 and 10 units wide, with one 128-bit multiplication each, rounded to
   odd so that comparisons against integers stay exact; then at most two candidates at each
   of two decimal lengths decide the answer. Written for this project from the paper. */
#include "float_text.h"

#include <stdint.h>
#include <string.h>

#include "float_text_table.h"

typedef unsigned __int128 bw_u128;

/* The three integer log approximations below are exact over |q| < 1100 and |e| < 350 (checked
   by tools/gen_pow10_table.py), which covers every binary64 exponent. */
static inline int floor_log10_pow2(int q) { return (q * 315653) >> 20; }
static inline int floor_log10_three_quarters_pow2(int q) { return (q * 315653 - 131008) >> 20; }
static inline int floor_log2_pow10(int e) { return (e * 1741647) >> 19; }

/* floor(g * cp / 2^128), with the lowest bit set when the division is inexact. g overestimates
   the true power by < 1 unit and cp < 2^60, so an exact quotient still leaves zero remainder
   bits here, and the paper shows inexact quotients stay far enough from integers. */
static inline uint64_t round_to_odd(uint64_t g_hi, uint64_t g_lo, uint64_t cp)
{
    bw_u128 x = (bw_u128)g_lo * cp;
    bw_u128 y = (bw_u128)g_hi * cp + (uint64_t)(x >> 64);
    uint64_t hi = (uint64_t)(y >> 64);
    uint64_t lo = (uint64_t)y;
    return hi | (lo != 0);
}

/* Value c * 2^q (c > 0). asym: c is the smallest normal significand and the exponent is not
   the lowest, so the gap below is half the gap above. Returns the decimal significand and
   sets *e10 so the result is f * 10^e10 (f may carry trailing zeros). */
static inline uint64_t schubfach(uint64_t c, int q, int asym, int *e10)
{
    /* Bounds are scaled by 4 so the midpoints to both neighbours are integers. */
    uint64_t cb = c << 2;
    uint64_t cbr = cb + 2;
    uint64_t cbl = asym ? cb - 1 : cb - 2;
    int k = asym ? floor_log10_three_quarters_pow2(q) : floor_log10_pow2(q);
    int h = q + floor_log2_pow10(-k) + 1; /* 1..4 */
    const uint64_t *g = bw_pow10_g[k - BW_K_MIN];
    uint64_t vb = round_to_odd(g[0], g[1], cb << h);
    uint64_t vbl = round_to_odd(g[0], g[1], cbl << h);
    uint64_t vbr = round_to_odd(g[0], g[1], cbr << h);
    /* Reading text back rounds half to even: an even c owns its interval bounds. */
    uint64_t odd = c & 1;
    vbl += odd;
    vbr -= odd;

    uint64_t s = vb >> 2;
    uint64_t t = s + 1;
    /* The interval is under 10 units wide, so at most one multiple of ten is inside it; if
       one is, it is the unique shortest candidate. */
    uint64_t sp10 = (s / 10) * 10;
    uint64_t tp10 = sp10 + 10;
    int upin = vbl <= (sp10 << 2);
    int wpin = (tp10 << 2) <= vbr;
    /* Otherwise s or t (at least one is inside): the one inside, or if both are, the closer;
       a tie goes to the even one, as repr does. */
    int uin = vbl <= (s << 2);
    int win = (t << 2) <= vbr;
    uint64_t mid = (s + t) << 1;
    int closer_s = vb < mid || (vb == mid && (s & 1) == 0);
    /* Selected without branches: for random inputs every outcome is common. */
    uint64_t longer = t - (uint64_t)(uin & ((win ^ 1) | closer_s));
    uint64_t shorter = upin ? sp10 : tp10;
    uint64_t use_shorter = (uint64_t)0 - (uint64_t)(upin != wpin);
    *e10 = k;
    return (shorter & use_shorter) | (longer & ~use_shorter);
}

static const char bw_digit_pairs[201] =
    "0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849"
    "5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

static const uint64_t bw_pow10_u64[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u,
    10000000000u, 100000000000u, 1000000000000u, 10000000000000u, 100000000000000u,
    1000000000000000u, 10000000000000000u, 100000000000000000u, 1000000000000000000u,
    10000000000000000000u};

/* Number of decimal digits of f (1 <= f < 10^19). */
static inline int decimal_length(uint64_t f)
{
    /* bits * 1233 / 4096 approximates bits * log10(2) from below, off by at most one. */
    int bits = 64 - __builtin_clzll(f | 1);
    int n = (bits * 1233) >> 12;
    return n + (f >= bw_pow10_u64[n]);
}

/* The 8 decimal digits of v < 10^8 as byte values 0..9, first digit in the lowest byte (the
   order memory wants on a little-endian machine), computed in one register: split into 4+4,
   then 2+2, then 1+1 digits per lane, with multiply-shift divisions exact for these ranges. */
static inline uint64_t digits8(uint32_t v)
{
    uint64_t x = (v / 10000) | ((uint64_t)(v % 10000) << 32);
    uint64_t hundreds = ((x * 10486) >> 20) & UINT64_C(0x0000007F0000007F);
    x = hundreds | ((x - hundreds * 100) << 16);
    uint64_t tens = ((x * 103) >> 10) & UINT64_C(0x000F000F000F000F);
    return tens | ((x - tens * 10) << 8);
}

#define BW_ASCII_ZEROS UINT64_C(0x3030303030303030)

/* repr layout of f * 10^e10 (0 < f < 10^17) at p; returns the end. Digits are stored as whole
   8- and 16-byte blocks, so scratch bytes may be left past the returned end, but only before
   p + 22; p is at most one byte (the sign) past dst, so this stays inside the
   BW_FLOAT_TEXT_MAX bytes every caller reserves. */
static inline char *layout(char *p, uint64_t f, int e10)
{
    int len = decimal_length(f);
    int decpt = len + e10; /* value = 0.d1d2...dn * 10^decpt */
    /* Scale to exactly 17 digits so every block sits at a fixed place. */
    f *= bw_pow10_u64[17 - len];
    uint64_t top = f / UINT64_C(10000000000000000);
    uint64_t rest = f - top * UINT64_C(10000000000000000);
    uint32_t mid = (uint32_t)(rest / 100000000u);
    uint64_t b1 = digits8(mid);                                       /* digits 2..9 */
    uint64_t b2 = digits8((uint32_t)(rest - (uint64_t)mid * 100000000u)); /* digits 10..17 */
    /* Trailing zero digits are the zero top bytes of the last nonzero block. */
    int n;
    if (b2 != 0)
        n = 17 - (__builtin_clzll(b2) >> 3);
    else if (b1 != 0)
        n = 9 - (__builtin_clzll(b1) >> 3);
    else
        n = 1;
    char lead = (char)('0' + top);
    b1 |= BW_ASCII_ZEROS;
    b2 |= BW_ASCII_ZEROS;

    if (decpt > 16 || decpt <= -4) {
        /* d1[.d2...dn]e±XX */
        p[0] = lead;
        p[1] = '.';
        memcpy(p + 2, &b1, 8);
        memcpy(p + 10, &b2, 8);
        p += n > 1 ? n + 1 : 1;
        int x = decpt - 1;
        p[0] = 'e';
        p[1] = x < 0 ? '-' : '+';
        x = x < 0 ? -x : x;
        if (x >= 100) {
            p[2] = (char)('0' + x / 100);
            memcpy(p + 3, bw_digit_pairs + 2 * (x % 100), 2);
            return p + 5;
        }
        memcpy(p + 2, bw_digit_pairs + 2 * x, 2);
        return p + 4;
    }
    if (decpt <= 0) {
        /* 0.ddd, 0.0ddd, 0.00ddd or 0.000ddd */
        memcpy(p, "0.000", 5);
        p += 2 - decpt;
        p[0] = lead;
        memcpy(p + 1, &b1, 8);
        memcpy(p + 9, &b2, 8);
        return p + n;
    }
    if (decpt >= n) {
        /* Integral: the digits past the significant ones are '0' already, as far as the point
           (decpt <= 16); then ".0". */
        p[0] = lead;
        memcpy(p + 1, &b1, 8);
        memcpy(p + 9, &b2, 8);
        p += decpt;
        memcpy(p, ".0", 2);
        return p + 2;
    }
    /* The point falls after digit decpt (1..16): open a gap in the 16 digits after the lead
       one by shifting the part past the point up a byte, in a register. */
    bw_u128 all = (bw_u128)b1 | ((bw_u128)b2 << 64);
    unsigned keep_bits = 8u * (unsigned)(decpt - 1);
    bw_u128 keep = ((bw_u128)1 << keep_bits) - 1;
    bw_u128 out = (all & keep) | ((bw_u128)'.' << keep_bits) | ((all & ~keep) << 8);
    p[0] = lead;
    memcpy(p + 1, &out, 16);
    p[17] = (char)(b2 >> 56);
    return p + n + 1;
}

static size_t write_special(int negative, int is_nan, char *dst)
{
    if (is_nan) {
        memcpy(dst, "NaN", 3);
        return 3;
    }
    if (negative) {
        memcpy(dst, "-Infinity", 9);
        return 9;
    }
    memcpy(dst, "Infinity", 8);
    return 8;
}

size_t bw_double_to_text(double v, char *dst)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    int bexp = (int)((bits >> 52) & 0x7ff);
    int negative = (int)(bits >> 63);
    if (bexp == 0x7ff)
        return write_special(negative, frac != 0, dst);

    char *p = dst;
    if (negative)
        *p++ = '-';
    uint64_t c;
    int q, asym;
    if (bexp != 0) {
        c = frac | (UINT64_C(1) << 52);
        q = bexp - 1075;
        asym = frac == 0 && bexp > 1;
    } else {
        if (frac == 0) {
            memcpy(p, "0.0", 3);
            return (size_t)(p + 3 - dst);
        }
        c = frac;
        q = -1074;
        asym = 0;
    }
    int e10;
    uint64_t f = schubfach(c, q, asym, &e10);
    return (size_t)(layout(p, f, e10) - dst);
}

size_t bw_float32_to_text(float v, char *dst)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint32_t frac = bits & ((UINT32_C(1) << 23) - 1);
    int bexp = (int)((bits >> 23) & 0xff);
    int negative = (int)(bits >> 31);
    if (bexp == 0xff)
        return write_special(negative, frac != 0, dst);

    char *p = dst;
    if (negative)
        *p++ = '-';
    uint64_t c;
    int q, asym;
    if (bexp != 0) {
        c = frac | (UINT32_C(1) << 23);
        q = bexp - 150;
        asym = frac == 0 && bexp > 1;
    } else {
        if (frac == 0) {
            memcpy(p, "0.0", 3);
            return (size_t)(p + 3 - dst);
        }
        c = frac;
        q = -149;
        asym = 0;
    }
    /* The binary64 table is more precise than binary32 needs; the same step applies. */
    int e10;
    uint64_t f = schubfach(c, q, asym, &e10);
    return (size_t)(layout(p, f, e10) - dst);
}
