/* libFuzzer target: snappy decompression. The input is a stream (a heap block of exactly its
   size, so a read past it is a finding); its output buffer is exactly the length the stream
   says, at most 1 MiB (a longer claim is decompressed into nothing: it must fail, not write).
   A stream that decompresses must decompress the same twice, and a stream whose prefix says
   one byte more or less must fail. The reference is libsnappy: a stream decompresses here
   exactly when it decompresses there, to the same bytes (but for a literal that says 2^32
   bytes, which libsnappy's 32-bit sum reads as an empty one and this decoder refuses).
   sources: snappy.c
   libs: -lsnappy */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>

#include "snappy.h"

#define REQUIRE(cond) ((cond) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t length = 0;
    if (bw_snappy_length(data, size, &length) != 0)
        return 0;
    const char *why = NULL;
    if (length > ((size_t)1 << 20)) {
        uint8_t none;
        REQUIRE(bw_snappy_decompress(data, size, &none, 0, &why) == -1 && why != NULL);
        return 0;
    }
    uint8_t *out = malloc(length ? length : 1), *again = malloc(length + 1);
    REQUIRE(out != NULL && again != NULL);
    int rc = bw_snappy_decompress(data, size, out, length, &why);
    REQUIRE(rc == 0 || why != NULL);
    size_t reference_length = length;
    int reference_ok = snappy_uncompress((const char *)data, size, (char *)again,
                                         &reference_length) == SNAPPY_OK;
    REQUIRE(reference_ok == (rc == 0) ||
            (reference_ok && strcmp(why, BW_SNAPPY_HUGE_LITERAL) == 0));
    if (rc == 0)
        REQUIRE(reference_length == length && memcmp(out, again, length) == 0);
    if (rc == 0) {
        REQUIRE(bw_snappy_decompress(data, size, again, length, &why) == 0);
        REQUIRE(memcmp(out, again, length) == 0);
        /* the output must be exactly the prefix's length: a buffer one longer or shorter is
           refused before anything is written past it */
        REQUIRE(bw_snappy_decompress(data, size, again, length + 1, &why) == -1);
        if (length > 0)
            REQUIRE(bw_snappy_decompress(data, size, again, length - 1, &why) == -1);
    }
    free(out);
    free(again);
    return 0;
}
