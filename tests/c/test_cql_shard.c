/* cql_shard.c: a token's shard at the edges of the ring and for a shard count that is not a
   power of two, a key looked up in a SUPPORTED body (and a body that does not parse), and the
   tablet routing entries kept from a response's custom payload within their bounds.
   sources: cql_shard.c cql_wire.c out_buffer.c status.c */
#include "check.h"

#include <stdint.h>
#include <string.h>

#include "cql_shard.h"

TEST(shard_of_edges) {
    /* the lowest token is shard 0, the highest the last shard, whatever the count */
    for (uint32_t n = 1; n <= 4096; n = n * 3 + 1) {
        CHECK_EQ(bw_cql_shard_of(INT64_MIN, n, 12), 0u);
        CHECK_EQ(bw_cql_shard_of(INT64_MAX, n, 0), n - 1);
    }
    /* ignore_msb 0: the ring cut into equal parts; token 0 is half way */
    CHECK_EQ(bw_cql_shard_of(0, 4, 0), 2u);
    CHECK_EQ(bw_cql_shard_of(0, 3, 0), 1u);
    CHECK_EQ(bw_cql_shard_of(-1, 2, 0), 0u);
    /* ignore_msb 12: the 12 top bits of the biased token do not count */
    CHECK_EQ(bw_cql_shard_of(0, 4, 12), 0u);
    CHECK_EQ(bw_cql_shard_of(INT64_MIN + (INT64_C(1) << 51), 4, 12), 2u);
    CHECK_EQ(bw_cql_shard_of(12345, 4, 64), 0u); /* past 63: every bit shifted out */
    int64_t tokens[] = {INT64_MIN, 0, INT64_MAX};
    int32_t out[3];
    bw_cql_shards_of(tokens, 3, 4, 0, out);
    CHECK_EQ(out[0], 0);
    CHECK_EQ(out[1], 2);
    CHECK_EQ(out[2], 3);
}

/* Writes the [short] n at out; returns the bytes written. */
static size_t put_short(uint8_t *out, size_t n) {
    out[0] = (uint8_t)(n >> 8);
    out[1] = (uint8_t)n;
    return 2;
}

/* Writes the [string] s at out; returns the bytes written. */
static size_t put_string(uint8_t *out, const char *s) {
    size_t n = strlen(s);
    put_short(out, n);
    memcpy(out + 2, s, n);
    return 2 + n;
}

/* A [string multimap] of one key with one value. */
static size_t multimap(uint8_t *out, const char *key, const char *value) {
    size_t at = put_short(out, 1);
    at += put_string(out + at, key);
    at += put_short(out + at, 1);
    return at + put_string(out + at, value);
}

TEST(supported_has) {
    uint8_t body[128];
    size_t n = multimap(body, "TABLETS_ROUTING_V1", "");
    CHECK_EQ(bw_cql_supported_has(body, n, "TABLETS_ROUTING_V1"), 1);
    CHECK_EQ(bw_cql_supported_has(body, n, "TABLETS_ROUTING"), 0);
    CHECK_EQ(bw_cql_supported_has(body, n, "SCYLLA_SHARD"), 0);
    for (size_t cut = 0; cut < n; cut++) /* a cut body names nothing */
        CHECK_EQ(bw_cql_supported_has(body, cut, "TABLETS_ROUTING_V1"), 0);
    CHECK_EQ(bw_cql_supported_has(NULL, 0, "X"), 0);
}

/* A custom payload ([bytes map]) of one entry `key` -> n bytes of `fill`, then "BODY". */
static size_t payload(uint8_t *out, const char *key, size_t n, uint8_t fill) {
    size_t at = put_short(out, 1);
    at += put_string(out + at, key);
    for (int shift = 24; shift >= 0; shift -= 8)
        out[at++] = (uint8_t)(n >> shift);
    memset(out + at, fill, n);
    at += n;
    memcpy(out + at, "BODY", 4);
    return at + 4;
}

TEST(kept_payloads) {
    static uint8_t frame[BW_CQL_KEPT_ONE_MAX + 64];
    bw_cql_kept kept;
    memset(&kept, 0, sizeof kept);
    size_t n = payload(frame, BW_CQL_TABLETS_PAYLOAD, 10, 7);
    CHECK_EQ(bw_cql_kept_take_payload(&kept, 0, frame, n), 0); /* no flag: nothing */
    CHECK_EQ(kept.count, 0u);
    CHECK_EQ(bw_cql_kept_take_payload(&kept, BW_CQL_FLAG_CUSTOM_PAYLOAD, frame, n), 0);
    CHECK_EQ(kept.count, 1u);
    CHECK_EQ(kept.len, 14u);
    CHECK_EQ(kept.data[4], 7);
    /* another key is not kept */
    n = payload(frame, "other", 10, 7);
    CHECK_EQ(bw_cql_kept_take_payload(&kept, BW_CQL_FLAG_CUSTOM_PAYLOAD, frame, n), 0);
    CHECK_EQ(kept.count, 1u);
    /* a cut payload does not parse: nothing kept */
    n = payload(frame, BW_CQL_TABLETS_PAYLOAD, 10, 7);
    CHECK_EQ(bw_cql_kept_take_payload(&kept, BW_CQL_FLAG_CUSTOM_PAYLOAD, frame, 20), -1);
    CHECK_EQ(kept.count, 1u);
    /* one too large is dropped and counted */
    n = payload(frame, BW_CQL_TABLETS_PAYLOAD, BW_CQL_KEPT_ONE_MAX + 1, 1);
    CHECK_EQ(bw_cql_kept_take_payload(&kept, BW_CQL_FLAG_CUSTOM_PAYLOAD, frame, n), 0);
    CHECK_EQ(kept.count, 1u);
    CHECK_EQ(kept.dropped, 1u);
    /* at most BW_CQL_KEPT_MAX entries */
    n = payload(frame, BW_CQL_TABLETS_PAYLOAD, 3, 2);
    for (int i = 0; i < BW_CQL_KEPT_MAX + 5; i++)
        CHECK_EQ(bw_cql_kept_take_payload(&kept, BW_CQL_FLAG_CUSTOM_PAYLOAD, frame, n), 0);
    CHECK_EQ(kept.count, (size_t)BW_CQL_KEPT_MAX);
    CHECK_EQ(kept.dropped, 7u);
    bw_cql_kept_clear(&kept);
    CHECK_EQ(kept.count, 0u);
    CHECK_EQ(kept.len, 0u);
    bw_cql_kept_free(&kept);
    bw_cql_kept_free(&kept); /* twice is harmless */
}

RUN_TESTS(shard_of_edges, supported_has, kept_payloads)
