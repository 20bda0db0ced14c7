/* Shortest round-trip decimal text for binary64 / binary32, laid out like float.__repr__.

   Digits come from the Schubfach method (R. Giulietti, "The Schubfach way to render doubles",
   2020): scale the value and its two rounding-interval bounds by a power of ten chosen so the
   interval is between 1 and 10 units wide, with one 128-bit multiplication each, rounded to
   odd so that comparisons against integers stay exact; then at most two candidates at each
   of two decimal lengths decide the answer. Written for this project from the paper. The
   common double (normal, not a power of two) takes a shortcut with one multiplication and two
   exact 64-bit comparisons, derived in the comment above bw_double_to_text. */
#include "float_text.h"

#include <stdint.h>
#include <string.h>

#include "float_text_table.h"
#include "int_text.h" /* bw_digit_pairs */

typedef unsigned __int128 bw_u128;

/* The three integer log approximations below are exact over |q| < 1100 and |e| < 350 (checked
   by tools/gen_pow10_table.py), which covers every binary64 exponent. */
static inline int floor_log10_pow2(int q) { return (q * 315653) >> 20; }
static inline int floor_log10_three_quarters_pow2(int q) { return (q * 315653 - 131008) >> 20; }
static inline int floor_log2_pow10(int e) { return (e * 1741647) >> 19; }

/* floor(P / 2^64) for the 192-bit product P = g * cp (g = g_hi * 2^64 + g_lo): P's lowest
   word is dropped, as the paper does. */
static inline bw_u128 product_hi(uint64_t g_hi, uint64_t g_lo, uint64_t cp)
{
    bw_u128 x = (bw_u128)g_lo * cp;
    return (bw_u128)g_hi * cp + (uint64_t)(x >> 64);
}

/* floor(g * cp / 2^128), with the lowest bit set when the division is inexact. g overestimates
   the true power by < 1 unit and cp < 2^60, so an exact quotient still leaves zero remainder
   bits here, and the paper shows inexact quotients stay far enough from integers. */
static inline uint64_t round_to_odd(uint64_t g_hi, uint64_t g_lo, uint64_t cp)
{
    bw_u128 y = product_hi(g_hi, g_lo, cp);
    return (uint64_t)(y >> 64) | ((uint64_t)y != 0);
}

/* The Schubfach choice, from the value's significand c and vb, vbl, vbr: 4 * c * 2^q / 10^k
   and the two interval bounds (4c - 2 or 4c - 1, 4c + 2 scaled the same way), all rounded to
   odd. Returns the decimal significand (it may carry trailing zeros); the exponent is k. */
static inline uint64_t schubfach_pick(uint64_t c, uint64_t vb, uint64_t vbl, uint64_t vbr)
{
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
    /* vb < mid, or a tie and s even; one comparison so no branch. */
    int closer_s = vb < mid + ((s & 1) ^ 1);
    /* Selected without branches: for random inputs every outcome is common. */
    uint64_t longer = t - (uint64_t)(uin & ((win ^ 1) | closer_s));
    uint64_t shorter = upin ? sp10 : tp10;
    uint64_t use_shorter = (uint64_t)0 - (uint64_t)(upin != wpin);
    return (shorter & use_shorter) | (longer & ~use_shorter);
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
    *e10 = k;
    return schubfach_pick(c, vb, vbl, vbr);
}

/* An empty asm statement that claims to change x: the compiler must compute x whatever the
   later selects pick, so it keeps them as conditional moves instead of branching around x. */
#if defined(__GNUC__)
#define BW_KEEP_IN_REGISTER(x) __asm__("" : "+r"(x))
#else
#define BW_KEEP_IN_REGISTER(x) ((void)0)
#endif

/* The Schubfach choice for a symmetric interval (c is not a power of two, or the exponent is
   the lowest), from vb and sp10 = 10 * floor(s / 10) and whether sp10 (upin) and tp10 =
   sp10 + 10 (wpin) are inside. The interval is 2^q / 10^k units wide, in [1, 10): so sp10 and
   tp10 are never both inside, and its half-width is at least 1/2 unit, exactly 1/2 only for
   q = k = 0, where the value is the integer s. The nearer of s and t = s + 1 is at most 1/2
   unit away, exactly 1/2 only for a tie, which needs a half-integer value: so the nearer one
   (ties to even) is always inside, and the paper's in-or-out tests for s and t, which only
   decide when one of them is outside, are not needed. */
static inline uint64_t schubfach_pick_sym(uint64_t vb, uint64_t sp10, int upin, int wpin)
{
    /* vb / 4 to nearest, ties to even: vb has two fraction bits and the sticky bit, so adding
       1 + (s odd) carries into s exactly when t is nearer or it is a tie and s is odd. */
    uint64_t f = (vb + 1 + ((vb >> 2) & 1)) >> 2;
    /* Selected without branches: in data with random digits each outcome is common (a
       shorter candidate is inside for about a third of the values), and a mispredicted branch
       here throws away the digit work of this value and of the next ones. */
    BW_KEEP_IN_REGISTER(f);
    f = upin ? sp10 : f;
    return wpin ? sp10 + 10 : f;
}

/* The same for a normal binary32 value with a symmetric interval (c in (2^23, 2^24)), with
   only the upper 64 bits of the power of ten, plus one so it still overestimates. The product
   with cp = (4c or a bound) << h < 2^30 is then above the exact one by less than 2^30 + 1
   units of 2^-64, so an integer quotient leaves the low word below 2^32, and every non-integer
   one leaves it at or above 2^32 with the right integer part (checked on all 2^32 binary32
   bit patterns against the 128-bit version above). */
static inline uint64_t round_to_odd_64(uint64_t g, uint64_t cp)
{
    bw_u128 x = (bw_u128)g * cp;
    return (uint64_t)(x >> 64) | (((uint64_t)x >> 32) != 0);
}

static inline uint64_t schubfach_float32(uint64_t c, int q, int *e10)
{
    uint64_t cb = c << 2;
    int k = floor_log10_pow2(q);
    int h = q + floor_log2_pow10(-k) + 1; /* 1..4 */
    uint64_t g = bw_pow10_g[k - BW_K_MIN][0] + 1;
    uint64_t vb = round_to_odd_64(g, cb << h);
    uint64_t vbl = round_to_odd_64(g, (cb - 2) << h);
    uint64_t vbr = round_to_odd_64(g, (cb + 2) << h);
    uint64_t odd = c & 1; /* an even c owns its interval bounds */
    uint64_t sp10 = ((vb >> 2) / 10) * 10;
    *e10 = k;
    return schubfach_pick_sym(vb, sp10, vbl + odd <= (sp10 << 2), ((sp10 + 10) << 2) + odd <= vbr);
}

static const uint64_t bw_pow10_u64[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u,
    10000000000u, 100000000000u, 1000000000000u, 10000000000000u, 100000000000000u,
    1000000000000000u, 10000000000000000u, 100000000000000000u, 1000000000000000000u,
    10000000000000000000u};

/* Number of decimal digits of f (1 <= f < 10^19). Only subnormals need it: a normal value's
   digit count is known to within one (see the callers). */
static inline int decimal_length(uint64_t f)
{
    /* bits * 1233 / 4096 approximates bits * log10(2) from below, off by at most one. */
    int bits = 64 - __builtin_clzll(f | 1);
    int n = (bits * 1233) >> 12;
    return n + (f >= bw_pow10_u64[n]);
}

#define BW_ASCII_ZEROS UINT64_C(0x3030303030303030)

/* The 16 digits after the lead one, kept in registers: hi and lo are the two 8-digit halves
   (each < 10^8). With SSE2 (every x86-64) both halves are converted at once in one vector;
   otherwise in two 64-bit registers. Either way the first digit goes to the lowest byte, the
   order memory wants on a little-endian machine. BW_FLOAT_TEXT_SCALAR forces the portable
   version (to test it on x86). */
#if defined(__SSE2__) && !defined(BW_FLOAT_TEXT_SCALAR)
#include <emmintrin.h>

typedef __m128i bw_digits16;

/* gcc turns a vector multiply by a small constant into a longer shift-and-add chain; this
   hides the constant's value so one multiply instruction stays. */
static inline __m128i opaque(__m128i c)
{
    __asm__("" : "+x"(c));
    return c;
}

/* Byte values 0..9: split each half into 4+4 digits (32-bit lanes), then 2+2 (16-bit lanes),
   then 1+1 (bytes), each step a multiply-shift division that is exact for its range. */
static inline bw_digits16 digits16(uint32_t hi, uint32_t lo)
{
    __m128i x = _mm_set_epi64x((long long)lo, (long long)hi);
    /* v / 10000 = v * 0xd1b71759 >> 45 for v < 10^8 (as compilers emit for uint32). */
    __m128i q = _mm_srli_epi64(_mm_mul_epu32(x, _mm_set1_epi64x(0xd1b71759)), 45);
    __m128i r = _mm_sub_epi32(x, _mm_mul_epu32(q, _mm_set1_epi64x(10000)));
    x = _mm_or_si128(q, _mm_slli_epi64(r, 32));
    /* v / 100 = v * 5243 >> 19 for v < 10^4 */
    __m128i h = _mm_srli_epi16(_mm_mulhi_epu16(x, _mm_set1_epi16(5243)), 3);
    x = _mm_or_si128(h, _mm_slli_epi32(_mm_sub_epi16(x, _mm_mullo_epi16(h, opaque(_mm_set1_epi16(100)))), 16));
    /* v / 10 = v * 6554 >> 16 for v < 100; then t + (v - 10t) * 256 = v * 256 - 2559 * t */
    __m128i t = _mm_mulhi_epu16(x, _mm_set1_epi16(6554));
    return _mm_add_epi16(_mm_slli_epi16(x, 8), _mm_mullo_epi16(t, opaque(_mm_set1_epi16(-2559))));
}

/* 1 + the position (1..16) of the last nonzero digit, or 1 if all are zero. */
static inline int significant_digits(bw_digits16 d)
{
    unsigned nonzero = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) ^ 0xffffu;
    return (31 ^ __builtin_clz((nonzero << 1) | 1)) + 1; /* bsr + 1 */
}

static inline bw_digits16 digits_ascii(bw_digits16 d) { return _mm_or_si128(d, _mm_set1_epi8('0')); }

static inline void store16(char *p, bw_digits16 a) { _mm_storeu_si128((__m128i *)(void *)p, a); }

/* Windows into these give the lane masks for a point after digit m + 1 (m = 0..15). */
static const unsigned char bw_keep_mask[32] = {
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255};
static const unsigned char bw_point_lane[32] = {[16] = '.'};
static const unsigned char bw_shift_mask[33] = {
    [17] = 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255};

/* ASCII digits a with '.' stored after digit m + 1 of the whole significand, at p + 1:
   lanes below m stay, lane m is the point, the rest move up one byte (a byte shift by a
   constant, so SSE2 has it). The digit shifted out of the block is stored at p + 17. */
static inline void store16_with_point(char *p, bw_digits16 a, int m)
{
    __m128i keep = _mm_loadu_si128((const __m128i *)(const void *)(bw_keep_mask + 16 - m));
    __m128i point = _mm_loadu_si128((const __m128i *)(const void *)(bw_point_lane + 16 - m));
    __m128i moved = _mm_loadu_si128((const __m128i *)(const void *)(bw_shift_mask + 16 - m));
    __m128i out = _mm_or_si128(_mm_or_si128(_mm_and_si128(a, keep), point),
                               _mm_and_si128(_mm_slli_si128(a, 1), moved));
    store16(p + 2, a); /* leaves digit 16 at p + 17; the next store covers the rest */
    store16(p + 1, out);
}
#else
typedef struct {
    uint64_t b1, b2; /* digits 2..9 and 10..17 of the 17 */
} bw_digits16;

/* The 8 decimal digits of v < 10^8 as byte values 0..9, computed in one register: split into
   4+4, then 2+2, then 1+1 digits per lane, with multiply-shift divisions exact for these
   ranges. */
static inline uint64_t digits8(uint32_t v)
{
    uint64_t x = (v / 10000) | ((uint64_t)(v % 10000) << 32);
    uint64_t hundreds = ((x * 10486) >> 20) & UINT64_C(0x0000007F0000007F);
    x = hundreds | ((x - hundreds * 100) << 16);
    uint64_t tens = ((x * 103) >> 10) & UINT64_C(0x000F000F000F000F);
    return tens | ((x - tens * 10) << 8);
}

static inline bw_digits16 digits16(uint32_t hi, uint32_t lo)
{
    bw_digits16 d = {digits8(hi), digits8(lo)};
    return d;
}

/* Trailing zero digits are the zero top bytes of the last nonzero block. */
static inline int significant_digits(bw_digits16 d)
{
    if (d.b2 != 0)
        return 17 - (__builtin_clzll(d.b2) >> 3);
    if (d.b1 != 0)
        return 9 - (__builtin_clzll(d.b1) >> 3);
    return 1;
}

static inline bw_digits16 digits_ascii(bw_digits16 d)
{
    d.b1 |= BW_ASCII_ZEROS;
    d.b2 |= BW_ASCII_ZEROS;
    return d;
}

static inline void store16(char *p, bw_digits16 a)
{
    memcpy(p, &a.b1, 8);
    memcpy(p + 8, &a.b2, 8);
}

/* Open a gap after lane m by shifting the lanes above it up a byte, in a register. */
static inline void store16_with_point(char *p, bw_digits16 a, int m)
{
    bw_u128 all = (bw_u128)a.b1 | ((bw_u128)a.b2 << 64);
    unsigned keep_bits = 8u * (unsigned)m;
    bw_u128 keep = ((bw_u128)1 << keep_bits) - 1;
    bw_u128 out = (all & keep) | ((bw_u128)'.' << keep_bits) | ((all & ~keep) << 8);
    memcpy(p + 1, &out, 16);
    p[17] = (char)(a.b2 >> 56);
}
#endif

/* repr layout at p of the 17 digits top (the first, 1..9) and d (the other 16), with the
   point at decpt (value = 0.d1d2...d17 * 10^decpt); returns the end. Digits are stored as
   whole 16-byte blocks, so scratch bytes may be left past the returned end, but only before
   p + 23; p is at most one byte (the sign) past dst, so this stays inside the
   BW_FLOAT_TEXT_MAX bytes every caller reserves. */
static inline char *layout_digits(char *p, uint32_t top, bw_digits16 d, int decpt)
{
    int n = significant_digits(d);
    char lead = (char)('0' + top);
    bw_digits16 a = digits_ascii(d);

    if (decpt > 16 || decpt <= -4) {
        /* d1[.d2...dn]e±XX */
        p[0] = lead;
        p[1] = '.';
        store16(p + 2, a);
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
        /* 0.ddd, 0.0ddd, 0.00ddd or 0.000ddd; one 8-byte store (the digits' store below
           overwrites what is past the zeros) */
        memcpy(p, "0.000000", 8);
        p += 2 - decpt;
        p[0] = lead;
        store16(p + 1, a);
        return p + n;
    }
    if (decpt >= n) {
        /* Integral: the digits past the significant ones are '0' already, as far as the point
           (decpt <= 16); then ".0". */
        p[0] = lead;
        store16(p + 1, a);
        p += decpt;
        memcpy(p, ".0", 2);
        return p + 2;
    }
    /* The point falls after digit decpt (1..16). */
    p[0] = lead;
    store16_with_point(p, a, decpt - 1);
    return p + n + 1;
}

/* The lead digit of f (exactly 17 digits: 10^16 <= f < 10^17), stored in *top, and the 16
   after it. The low 8-digit block first: the top 9 digits then split with 32-bit arithmetic. */
static inline bw_digits16 split17(uint64_t f, uint32_t *top)
{
    uint32_t top9 = (uint32_t)(f / 100000000u);
    uint32_t lo = (uint32_t)(f - (uint64_t)top9 * 100000000u);
    *top = top9 / 100000000u;
    return digits16(top9 - *top * 100000000u, lo);
}

/* The layout of f * 10^(decpt - 17) where f has exactly 17 digits (10^16 <= f < 10^17). */
static inline char *layout(char *p, uint64_t f, int decpt)
{
    uint32_t top;
    bw_digits16 d = split17(f, &top);
    return layout_digits(p, top, d, decpt);
}

/* The same for f with exactly 9 digits (a float's at most 9): 32-bit divisions only, and the
   last 8 of the 16 digits are zeros. */
static inline char *layout9(char *p, uint32_t f, int decpt)
{
    uint32_t top = f / 100000000u;
    return layout_digits(p, top, digits16(f - top * 100000000u, 0), decpt);
}

/* float32 powers of two (the gap below is half the one above) and subnormals (fewer digits):
   rare, so out of line, which keeps the common path free of their cases. */
__attribute__((noinline)) static uint64_t schubfach_rare(uint64_t c, int q, int asym, int *e10)
{
    return schubfach(c, q, asym, e10);
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

/* Everything bw_double_to_text's common path leaves: zero, non-finite values, powers of two
   (the gap below is half the one above), subnormals (fewer digits) and the rare values whose
   candidates that path cannot place exactly. Out of line, so the common path carries none of
   it; the general Schubfach step. */
__attribute__((noinline, cold)) static size_t double_to_text_rare(uint64_t bits, char *dst)
{
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    int bexp = (int)((bits >> 52) & 0x7ff);
    int negative = (int)(bits >> 63);
    if (bexp == 0x7ff)
        return write_special(negative, frac != 0, dst);

    char *p = dst;
    *p = '-';
    p += negative;
    if (bexp == 0 && frac == 0) {
        memcpy(p, "0.0", 3);
        return (size_t)(p + 3 - dst);
    }
    int e10;
    uint64_t f;
    if (bexp == 0)
        f = schubfach(frac, -1074, 0, &e10);
    else if (frac == 0)
        f = schubfach(UINT64_C(1) << 52, bexp - 1075, bexp > 1, &e10);
    else
        f = schubfach(frac | (UINT64_C(1) << 52), bexp - 1075, 0, &e10);
    int len = decimal_length(f);
    return (size_t)(layout(p, f * bw_pow10_u64[17 - len], e10 + len) - dst);
}

#if defined(__GNUC__)
#define BW_INLINE_ALWAYS __attribute__((always_inline)) inline
#else
#define BW_INLINE_ALWAYS inline
#endif

/* The common path, up to the digits: a normal double that is not a power of two, so a symmetric interval.
   Schubfach with cp = 4c << h and the 192-bit product P = g * cp gives vb = round_to_odd(P),
   and the bounds' products are exactly P - D and P + D with D = g * (2 << h) = g << (h + 1).
   With s = vb >> 2 and sp10 = 10 * floor(s / 10), schubfach_pick_sym needs only
     upin: vbl + odd <= 4 sp10, i.e. floor((P - D) / 2^64) < 4 sp10 * 2^64 + (1 - odd)
     wpin: 4 tp10 + odd <= vbr, i.e. floor((P + D) / 2^64) >= 4 tp10 * 2^64 + odd
   (round_to_odd's sticky bit folded into the word below). With Z = P - 4 sp10 * 2^128, which
   is in [0, 40 * 2^128) as 4 sp10 <= floor(P / 2^128) = 4 s + (vb & 3) < 4 sp10 + 40, read
     upin: Z - (1 - odd) * 2^64 < D,    wpin: Z + D >= 40 * 2^128 + odd * 2^64.
   z = floor(Z / 2^71) and d = floor(D / 2^71) = g_hi >> (6 - h) fit 63 bits (D < 20 * 2^128),
   and the bounds Z in [z, z + 1) * 2^71, D in [d, d + 1) * 2^71 settle both tests exactly,
   upin as m = d - z > 0 and wpin as n = z + d - 40 * 2^57 > 0, unless m or n is 0 or -1: a
   bound on sp10 or tp10, or within 2^-57 units of it. Those values take the general step; in
   practice they are integer-valued doubles from 2^54 up whose bound x -+ ulp/2 is a multiple
   of 10^(k+1) (about 1 in 2000 random bit patterns, none in data with fractions; the tests
   build them for every exponent where they exist). So the paper's two other multiplications
   are only done there.
   Sets *f_out to the decimal significand scaled to exactly 17 digits and *decpt_out to the
   point's place (value = 0.d1d2...d17 * 10^decpt), and returns 1; returns 0 when the value
   is not on this path (the outputs are then meaningless). No branch: the caller tests the
   result once, after the work of this value (and of the next, in the array loop) is issued.
   The row of the exponent holds k, h and d, so no logarithm is computed here. */
static BW_INLINE_ALWAYS int common_decimal(uint64_t bits, uint64_t *f_out, int *decpt_out)
{
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    unsigned bexp = (unsigned)(bits >> 52) & 0x7ff;
    int on_path = (bexp - 1 < 0x7fe) & (frac != 0);
    const bw_exponent_row *row = &bw_exponent_rows[bexp];
    bw_u128 y = product_hi(row->g_hi, row->g_lo, (frac | (UINT64_C(1) << 52)) << row->shift);
    uint64_t y_hi = (uint64_t)(y >> 64), y_lo = (uint64_t)y;
    uint64_t sp10 = ((y_hi >> 2) / 10) * 10;
    uint64_t z = ((y_hi - (sp10 << 2)) << 57) | (y_lo >> 7);
    uint64_t d = row->d;
    uint64_t grid = UINT64_C(40) << 57;
    /* m = d - z and n = z + d - grid taken modulo 2^64 (z + d < 2^64): 0 or -1 is x + 1 <= 1,
       and then m > 0 is d > z, n > 0 is z + d > grid. */
    on_path &= (d - z + 1 > 1) & (z + d - grid + 1 > 1);
    uint64_t f = schubfach_pick_sym(y_hi | (y_lo != 0), sp10, d > z, z + d > grid);
    /* A normal double's digits f lie in [2^52, 10 * 2^53), so f has 16 or 17 digits. */
    int has16 = f < UINT64_C(10000000000000000);
    uint64_t f10 = f * 10;
    BW_KEEP_IN_REGISTER(f10); /* a select, not a branch: the digit count is data, not a trend */
    *f_out = has16 ? f10 : f;
    *decpt_out = row->k + 17 - has16;
    return on_path;
}

/* One double's text at dst; returns its length. */
static BW_INLINE_ALWAYS size_t double_to_text(double v, char *dst)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint64_t f;
    int decpt;
    if (__builtin_expect(!common_decimal(bits, &f, &decpt), 0))
        return double_to_text_rare(bits, dst);
    /* Signs are random in real data: store unconditionally, advance by the sign bit. */
    char *p = dst;
    *p = '-';
    p += bits >> 63;
    return (size_t)(layout(p, f, decpt) - dst);
}

size_t bw_double_to_text(double v, char *dst) { return double_to_text(v, dst); }

static inline uint64_t load_bits(const char *p)
{
    uint64_t bits;
    memcpy(&bits, p, sizeof bits);
    return bits;
}

/* A ", " then the text of the value with these bits at dst; returns the end. */
static inline char *separator_then_text(uint64_t bits, char *dst)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    dst[0] = ',';
    dst[1] = ' ';
    return dst + 2 + double_to_text(v, dst + 2);
}

/* The text of the double stored at p, at dst; returns its length. */
static inline size_t double_to_text_at(const char *p, char *dst)
{
    double v;
    memcpy(&v, p, sizeof v);
    return double_to_text(v, dst);
}

/* ", ", the sign and the digits of a value the common path took; returns the end. */
static inline char *separator_then_layout(char *dst, uint64_t bits, uint32_t top,
                                          bw_digits16 digits, int decpt)
{
    dst[0] = ',';
    dst[1] = ' ';
    dst[2] = '-';
    dst += 2 + (bits >> 63);
    return layout_digits(dst, top, digits, decpt);
}

/* The loops over a group are unrolled so that its values stay in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define BW_UNROLL_GROUP _Pragma("GCC unroll 4")
#elif defined(__clang__)
#define BW_UNROLL_GROUP _Pragma("unroll")
#else
#define BW_UNROLL_GROUP
#endif

/* One loop with the common path inlined: no call per value, and the registers the path needs
   are saved once per array instead of once per value. Values go four at a time: each one's
   digits are a long chain of dependent multiplications, and with independent chains side by
   side in the instruction stream the processor overlaps them (measured 16% fewer cycles a
   value than one at a time, two at a time 13%). A group with any value off the common path
   (zero, a power of two, ...) is written value by value. */
char *bw_doubles_to_text(const char *values, size_t n, ptrdiff_t stride, char *dst)
{
    enum { GROUP = 4 };
    if (n == 0)
        return dst;
    dst += double_to_text_at(values, dst);
    size_t i = 1;
    for (values += stride; n - i >= GROUP; i += GROUP, values += GROUP * stride) {
        uint64_t bits[GROUP], f[GROUP];
        int decpt[GROUP], on_path = 1;
        BW_UNROLL_GROUP
        for (int j = 0; j < GROUP; j++) {
            bits[j] = load_bits(values + j * stride);
            on_path &= common_decimal(bits[j], &f[j], &decpt[j]);
        }
        if (__builtin_expect(!on_path, 0)) {
            BW_UNROLL_GROUP
            for (int j = 0; j < GROUP; j++)
                dst = separator_then_text(bits[j], dst);
            continue;
        }
        uint32_t top[GROUP];
        bw_digits16 digits[GROUP];
        BW_UNROLL_GROUP
        for (int j = 0; j < GROUP; j++)
            digits[j] = split17(f[j], &top[j]);
        BW_UNROLL_GROUP
        for (int j = 0; j < GROUP; j++)
            dst = separator_then_layout(dst, bits[j], top[j], digits[j], decpt[j]);
    }
    for (; i < n; i++, values += stride)
        dst = separator_then_text(load_bits(values), dst);
    return dst;
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
    *p = '-';
    p += negative;
    int e10, len;
    uint64_t f;
    if (__builtin_expect(bexp != 0 && frac != 0, 1)) {
        f = schubfach_float32(frac | (UINT32_C(1) << 23), bexp - 150, &e10);
        /* A normal float's digits f lie in [2^23, 10 * 2^24): 7, 8 or 9 digits. */
        len = 7 + (f >= 10000000u) + (f >= 100000000u);
    } else {
        if (bexp == 0 && frac == 0) {
            memcpy(p, "0.0", 3);
            return (size_t)(p + 3 - dst);
        }
        if (bexp != 0)
            f = schubfach_rare(UINT32_C(1) << 23, bexp - 150, bexp > 1, &e10);
        else
            f = schubfach_rare(frac, -149, 0, &e10);
        len = decimal_length(f);
    }
    return (size_t)(layout9(p, (uint32_t)(f * bw_pow10_u64[9 - len]), e10 + len) - dst);
}

size_t bw_lone_double_to_text(double v, char *dst) {
    double sixteenths = v * 16.0, magnitude = v < 0 ? -sixteenths : sixteenths;
    /* in range (1 .. 2^35 sixteenths: NaN fails both tests) and a whole number of them */
    if (!(magnitude >= 1.0 && magnitude < 34359738368.0) ||
        (double)(uint64_t)magnitude != magnitude)
        return bw_double_to_text(v, dst);
    uint64_t whole = (uint64_t)magnitude;
    char *p = dst;
    if (v < 0)
        *p++ = '-';
    p += bw_u64_to_text(whole >> 4, p);
    *p++ = '.';
    uint32_t fraction = (uint32_t)(whole & 15) * 625; /* ten-thousandths: 0 .. 9375 */
    if (fraction == 0) {
        *p++ = '0';
    } else {
        bw_u32_to_fixed(fraction, 4, p);
        p += 4;
        while (p[-1] == '0') /* the shortest: no trailing zero after the first digit */
            p--;
    }
    return (size_t)(p - dst);
}

