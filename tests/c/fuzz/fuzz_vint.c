/* libFuzzer target: CQL vint. The input read as a vint must never be read past its end (the
   input is a heap block of exactly its size), must be refused exactly when it ends before
   the vint does, and what it reads must re-encode to a vint that reads back the same; every
   8 input bytes as a value must round-trip at the length bw_vint_size gives.
   sources: vint.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vint.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t value = 0;
    size_t used = bw_vint_read(data, size, &value);
    if (size == 0) {
        REQUIRE(used == 0);
    } else {
        size_t declared = 1;
        while (declared < 9 && (data[0] & (0x80u >> (declared - 1))))
            declared++;
        REQUIRE(used == (declared <= size ? declared : 0));
    }
    if (used > 0) {
        unsigned char again[BW_VINT_MAX];
        size_t n = bw_vint_write(value, again);
        REQUIRE(n == bw_vint_size(value) && n <= used); /* the shortest form, never longer */
        uint64_t back = ~value;
        REQUIRE(bw_vint_read(again, n, &back) == n && back == value);
        if (n == used)
            REQUIRE(memcmp(again, data, n) == 0); /* the shortest form is unique */
    }
    for (size_t i = 0; i + 8 <= size; i += 8) {
        uint64_t v;
        memcpy(&v, data + i, 8);
        v >>= data[i] % 64; /* every length, not mostly 9-byte ones */
        unsigned char buf[BW_VINT_MAX];
        size_t n = bw_vint_write(v, buf);
        REQUIRE(n == bw_vint_size(v));
        uint64_t back = ~v;
        REQUIRE(bw_vint_read(buf, n, &back) == n && back == v);
        REQUIRE(bw_vint_read(buf, n - 1, &back) == 0);
    }
    return 0;
}
