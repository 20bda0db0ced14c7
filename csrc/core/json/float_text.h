/* csrc/core/json/float_text.h */
#ifndef BW_FLOAT_TEXT_H
#define BW_FLOAT_TEXT_H
#include <stddef.h>
/* Room a caller must reserve before either writer; the text is never longer. */
#define BW_FLOAT_TEXT_MAX 32
/* Writes exactly what Python's float.__repr__ writes for v, except non-finite values, which are
   written as JSON's NaN / Infinity / -Infinity. No NUL terminator. Returns bytes written. */
size_t bw_double_to_text(double v, char *dst);
/* bw_double_to_text for a value written on its own (not in an array of them): a multiple of
   1/16 between 1/16 and 2^31 in magnitude (3.0, 1.5, -0.25) takes a short path, its exact
   decimal expansion with at most four fractional digits, which is then the shortest text
   that reads back as v (any shorter one is at least 1e-4 away, far past v's neighbours);
   every other value goes to bw_double_to_text. Same text, same room. */
size_t bw_lone_double_to_text(double v, char *dst);
/* The n doubles at values, values + stride, ... (native order, any alignment) as
   bw_double_to_text writes them, separated by ", ", at dst; returns the end. dst needs
   n * (BW_FLOAT_TEXT_MAX + 2) bytes of room. */
char *bw_doubles_to_text(const char *values, size_t n, ptrdiff_t stride, char *dst);
/* Same layout rules, but with the shortest decimal digits that round-trip through float32
   (e.g. 0.1f -> "0.1", not "0.10000000149011612"). Non-finite as above. */
size_t bw_float32_to_text(float v, char *dst);
#endif
