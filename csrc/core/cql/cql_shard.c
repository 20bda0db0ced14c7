/* ScyllaDB's shards and tablet routing entries: see cql_shard.h. */
#include "cql_shard.h"

#include <stdlib.h>
#include <string.h>

uint32_t bw_cql_shard_of(int64_t token, uint32_t nr_shards, unsigned ignore_msb) {
    /* the token biased to unsigned: -2^63 becomes 0 */
    uint64_t biased = (uint64_t)token ^ (UINT64_C(1) << 63);
    if (ignore_msb >= 64)
        return 0;
    biased <<= ignore_msb;
    /* the top 64 bits of biased * nr_shards, in two 32-bit halves (no 128-bit type in C11) */
    uint64_t low = (biased & 0xffffffffu) * nr_shards;
    uint64_t high = (biased >> 32) * nr_shards;
    return (uint32_t)(((low >> 32) + high) >> 32);
}

void bw_cql_shards_of(const int64_t *tokens, size_t n, uint32_t nr_shards, unsigned ignore_msb,
                      int32_t *out) {
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)bw_cql_shard_of(tokens[i], nr_shards, ignore_msb);
}

int bw_cql_supported_has(const uint8_t *body, size_t len, const char *key) {
    bw_cql_cursor c = bw_cql_cursor_make(body, len), items;
    uint16_t count;
    size_t want = strlen(key);
    if (bw_cql_get_string_multimap(&c, &count, &items) < 0)
        return 0;
    for (uint16_t i = 0; i < count; i++) {
        const char *name;
        size_t n;
        uint16_t values;
        bw_cql_cursor list;
        if (bw_cql_get_string(&items, &name, &n) < 0 ||
            bw_cql_get_string_list(&items, &values, &list) < 0)
            return 0;
        if (n == want && memcmp(name, key, n) == 0)
            return 1;
    }
    return 0;
}

/* Appends one entry (its native length, then its bytes). 0, or -1 when it is over a bound. */
static int kept_append(bw_cql_kept *kept, const uint8_t *p, size_t n) {
    uint32_t n32 = (uint32_t)n;
    if (n > BW_CQL_KEPT_ONE_MAX || kept->count >= BW_CQL_KEPT_MAX ||
        kept->len + sizeof n32 + n > BW_CQL_KEPT_BYTES)
        return -1;
    if (kept->len + sizeof n32 + n > kept->cap) {
        size_t cap = kept->cap ? kept->cap : 1024;
        while (cap < kept->len + sizeof n32 + n)
            cap *= 2;
        uint8_t *grown = realloc(kept->data, cap);
        if (grown == NULL)
            return -1;
        kept->data = grown;
        kept->cap = cap;
    }
    memcpy(kept->data + kept->len, &n32, sizeof n32);
    if (n > 0)
        memcpy(kept->data + kept->len + sizeof n32, p, n);
    kept->len += sizeof n32 + n;
    kept->count++;
    return 0;
}

int bw_cql_kept_take_payload(bw_cql_kept *kept, uint8_t flags, const uint8_t *body, size_t len) {
    if (!(flags & BW_CQL_FLAG_CUSTOM_PAYLOAD))
        return 0;
    bw_cql_cursor c = bw_cql_cursor_make(body, len), items;
    uint16_t count;
    if ((flags & BW_CQL_FLAG_TRACING) && bw_cql_skip(&c, 16) < 0)
        return -1;
    if ((flags & BW_CQL_FLAG_WARNING) && bw_cql_get_string_list(&c, &count, &items) < 0)
        return -1;
    if (bw_cql_get_bytes_map(&c, &count, &items) < 0)
        return -1;
    size_t want = strlen(BW_CQL_TABLETS_PAYLOAD);
    for (uint16_t i = 0; i < count; i++) {
        const char *name;
        size_t n;
        const uint8_t *value;
        int32_t vn;
        if (bw_cql_get_string(&items, &name, &n) < 0 || bw_cql_get_bytes(&items, &value, &vn) < 0)
            return -1;
        if (n != want || memcmp(name, BW_CQL_TABLETS_PAYLOAD, n) != 0 || vn < 0)
            continue;
        if (kept_append(kept, value, (size_t)vn) < 0)
            kept->dropped++;
    }
    return 0;
}

void bw_cql_kept_clear(bw_cql_kept *kept) {
    kept->len = 0;
    kept->count = 0;
    kept->dropped = 0;
}

void bw_cql_kept_free(bw_cql_kept *kept) {
    free(kept->data);
    memset(kept, 0, sizeof *kept);
}
