/* csrc/core/float_text.h */
#ifndef BW_FLOAT_TEXT_H
#define BW_FLOAT_TEXT_H
#include <stddef.h>
/* Room a caller must reserve before either writer; the text is never longer. */
#define BW_FLOAT_TEXT_MAX 32
/* Writes exactly what Python's float.__repr__ writes for v, except non-finite values, which are
   written as JSON's NaN / Infinity / -Infinity. No NUL terminator. Returns bytes written. */
size_t bw_double_to_text(double v, char *dst);
/* Same layout rules, but with the shortest decimal digits that round-trip through float32
   (e.g. 0.1f -> "0.1", not "0.10000000149011612"). Non-finite as above. */
size_t bw_float32_to_text(float v, char *dst);
#endif
