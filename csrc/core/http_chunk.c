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
        *p++ = '\r';
        *p++ = '\n';
    }
    memcpy(p, digits + sizeof digits - count, count);
    p += count;
    *p++ = '\r';
    *p++ = '\n';
    return (size_t)(p - dst);
}

const char *bw_chunk_end(int after_chunk, size_t *len) {
    static const char end[] = "\r\n0\r\n\r\n";
    *len = after_chunk ? sizeof end - 1 : sizeof end - 3;
    return after_chunk ? end : end + 2;
}
