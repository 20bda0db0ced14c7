/* libFuzzer target: float text. The input's bytes are a double (8 bytes) or a float32 (4);
   the text must read back to the same bits (strtod / strtof), no shorter digit string may
   read back (snprintf %.*e at every shorter precision), and it must be the reference's
   (float.__repr__'s digits and layout; see float_reference.h for the one allowed
   difference). All the input's doubles, as one array, must be each one's text joined.
   sources: float_text.c int_text.c
   libs: -lm */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "float_reference.h"
#include "float_text.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

/* No precision below the text's own digit count reads back as v. */
static void require_no_shorter(double v, int is_float, int digits) {
    char sci[64];
    for (int p = 1; p < digits; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, v);
        if (is_float)
            REQUIRE(strtof(sci, NULL) != (float)v);
        else
            REQUIRE(strtod(sci, NULL) != v);
    }
}

/* v as a double, or (is_float) as the float32 it holds: its text reads back to the same
   bits, no shorter digit string does, and it is the reference's. */
static void check_text(double v, int is_float) {
    char text[BW_FLOAT_TEXT_MAX + 1];
    float f = (float)v;
    size_t n = is_float ? bw_float32_to_text(f, text) : bw_double_to_text(v, text);
    REQUIRE(n > 0 && n <= BW_FLOAT_TEXT_MAX);
    text[n] = '\0';
    if (isfinite(v)) {
        double back = is_float ? (double)strtof(text, NULL) : strtod(text, NULL);
        REQUIRE(memcmp(&back, &v, sizeof v) == 0);
        require_no_shorter(v, is_float, significant_digits(text, n));
    }
    int asymmetric = is_float ? float_is_asymmetric(f) : double_is_asymmetric(v);
    REQUIRE(check_value(v, is_float, asymmetric) == 0);
}

/* The input's doubles written as one array (in groups, a group with a rare value value by
   value) are each one's text, separated by ", ", and stay inside the room the header asks for. */
static void check_array(const uint8_t *data, size_t n) {
    enum { MOST = 512 };
    static char got[MOST * (BW_FLOAT_TEXT_MAX + 2) + 1], want[MOST * (BW_FLOAT_TEXT_MAX + 2)];
    n = n < MOST ? n : MOST;
    char *w = want;
    for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, data + 8 * i, 8);
        if (i) {
            memcpy(w, ", ", 2);
            w += 2;
        }
        w += bw_double_to_text(v, w);
    }
    got[n * (BW_FLOAT_TEXT_MAX + 2)] = 0x55;
    char *end = bw_doubles_to_text((const char *)data, n, 8, got);
    REQUIRE(got[n * (BW_FLOAT_TEXT_MAX + 2)] == 0x55);
    REQUIRE(end - got == w - want && memcmp(got, want, (size_t)(w - want)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_array(data, size / 8);
    for (; size >= 8; data += 8, size -= 8) {
        double v;
        memcpy(&v, data, 8);
        check_text(v, 0);
    }
    if (size >= 4) {
        float f;
        memcpy(&f, data, 4);
        check_text((double)f, 1);
    }
    return 0;
}
