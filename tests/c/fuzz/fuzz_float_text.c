/* libFuzzer target: float text. The input's bytes are a double (8 bytes) or a float32 (4);
   the text must read back to the same bits (strtod / strtof), no shorter digit string may
   read back (snprintf %.*e at every shorter precision), and it must be the reference's
   (float.__repr__'s digits and layout; see float_reference.h for the one allowed
   difference).
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

static void check_double(double v) {
    char text[BW_FLOAT_TEXT_MAX + 1];
    size_t n = bw_double_to_text(v, text);
    REQUIRE(n > 0 && n <= BW_FLOAT_TEXT_MAX);
    text[n] = '\0';
    if (isfinite(v)) {
        double back = strtod(text, NULL);
        REQUIRE(memcmp(&back, &v, sizeof v) == 0);
        require_no_shorter(v, 0, significant_digits(text, n));
    }
    REQUIRE(check_value(v, 0, double_is_asymmetric(v)) == 0);
}

static void check_float(float f) {
    char text[BW_FLOAT_TEXT_MAX + 1];
    size_t n = bw_float32_to_text(f, text);
    REQUIRE(n > 0 && n <= BW_FLOAT_TEXT_MAX);
    text[n] = '\0';
    if (isfinite(f)) {
        float back = strtof(text, NULL);
        REQUIRE(memcmp(&back, &f, sizeof f) == 0);
        require_no_shorter((double)f, 1, significant_digits(text, n));
    }
    REQUIRE(check_value((double)f, 1, float_is_asymmetric(f)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (; size >= 8; data += 8, size -= 8) {
        double v;
        memcpy(&v, data, 8);
        check_double(v);
    }
    if (size >= 4) {
        float f;
        memcpy(&f, data, 4);
        check_float(f);
    }
    return 0;
}
