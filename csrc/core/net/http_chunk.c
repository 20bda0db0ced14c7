#include "http_chunk.h"

#include <string.h>

size_t bw_chunk_head(char *dst, size_t n, int after_chunk) {
    static const char hex[] = "0123456789abcdef";
    char digits[2 * sizeof n];
    size_t count = 0;
    do {
        digits[sizeof digits - ++count] = hex[n & 15];
        n >>= 4;
    } while (n != 0);
    char *p = dst;
    if (after_chunk) {
        memcpy(p, BW_CHUNK_DATA_END, BW_CHUNK_DATA_END_LEN);
        p += BW_CHUNK_DATA_END_LEN;
    }
    memcpy(p, digits + sizeof digits - count, count);
    p += count;
    *p++ = '\r';
    *p++ = '\n';
    return (size_t)(p - dst);
}

const char *bw_chunk_end(int after_chunk, size_t *len) {
    static const char end[] = BW_CHUNK_DATA_END "0\r\n\r\n";
    *len = sizeof end - 1 - (after_chunk ? 0 : BW_CHUNK_DATA_END_LEN);
    return after_chunk ? end : end + BW_CHUNK_DATA_END_LEN;
}
