#include "vint.h"

size_t bw_vint_write(uint64_t v, unsigned char *dst) {
    size_t size = bw_vint_size(v);
    size_t extra = size - 1;
    /* big-endian value in `size` bytes, then the leading 1-bits over the first byte */
    for (size_t i = size; i-- > 0; v >>= 8)
        dst[i] = (unsigned char)(v & 0xff);
    if (extra == 8)
        dst[0] = 0xff;
    else
        dst[0] |= (unsigned char)(0xff00u >> extra);
    return size;
}

size_t bw_vint_read(const unsigned char *src, size_t avail, uint64_t *value) {
    if (avail == 0)
        return 0;
    unsigned first = src[0];
    size_t extra = 0;
    while (extra < 8 && (first & (0x80u >> extra)))
        extra++;
    if (avail < extra + 1)
        return 0;
    uint64_t v = extra == 8 ? 0 : (first & (0xffu >> (extra + 1)));
    for (size_t i = 1; i <= extra; i++)
        v = (v << 8) | src[i];
    *value = v;
    return extra + 1;
}
