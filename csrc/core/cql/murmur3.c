/* MurmurHash3 x64 128, the first half, as Murmur3Partitioner computes it. */
#include "murmur3.h"

#include <string.h>

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static const uint64_t C1 = 0x87c37b91114253d5ULL, C2 = 0x4cf5ad432745937fULL;

/* The scrambles of a block's two halves before they enter h1 and h2. */
static inline uint64_t mix_k1(uint64_t k1) { return rotl64(k1 * C1, 31) * C2; }
static inline uint64_t mix_k2(uint64_t k2) { return rotl64(k2 * C2, 33) * C1; }

static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* A little-endian 64-bit block, whatever the machine's order. */
static inline uint64_t block64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Tail byte i as the partitioner reads it: a signed byte widened to a long, so a byte of
   0x80 or more sets every bit above it. */
static inline uint64_t tail_byte(const uint8_t *tail, int i) {
    return (uint64_t)(int64_t)(int8_t)tail[i] << (8 * (i & 7));
}

int64_t bw_murmur3_hash(const uint8_t *key, size_t len) {
    uint64_t h1 = 0, h2 = 0;
    size_t nblocks = len / 16;
    for (size_t i = 0; i < nblocks; i++) {
        h1 ^= mix_k1(block64(key + 16 * i));
        h1 = rotl64(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;
        h2 ^= mix_k2(block64(key + 16 * i + 8));
        h2 = rotl64(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
    }
    const uint8_t *tail = key + 16 * nblocks;
    int rest = (int)(len & 15);
    uint64_t k1 = 0, k2 = 0;
    for (int i = rest - 1; i >= 8; i--)
        k2 ^= tail_byte(tail, i);
    if (rest > 8)
        h2 ^= mix_k2(k2);
    for (int i = (rest < 8 ? rest : 8) - 1; i >= 0; i--)
        k1 ^= tail_byte(tail, i);
    if (rest > 0)
        h1 ^= mix_k1(k1);
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    int64_t out;
    memcpy(&out, &h1, sizeof out); /* two's complement bits as the signed long */
    return out;
}

int64_t bw_murmur3_token(const uint8_t *key, size_t len) {
    int64_t h = bw_murmur3_hash(key, len);
    return h == INT64_MIN ? INT64_MAX : h;
}
