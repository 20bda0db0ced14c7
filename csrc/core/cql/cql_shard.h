/* ScyllaDB's protocol extensions, the parts a loader needs: the shard of a Murmur3 token on
   a node of N shards, a key looked up in a SUPPORTED body, and the tablet routing entries a
   node attaches to its answers (custom payload `tablets-routing-v1`), kept in a bounded
   store until the caller takes them.
   Core layer: no Python. */
#ifndef BW_CQL_SHARD_H
#define BW_CQL_SHARD_H
#include <stddef.h>
#include <stdint.h>

#include "cql_wire.h"

/* Shards a node may say it has: more is taken as a node without shard awareness. */
#define BW_CQL_SHARDS_MAX 4096
/* The custom payload entry of a tablet's routing, and the STARTUP option asking for it. */
#define BW_CQL_TABLETS_PAYLOAD "tablets-routing-v1"
#define BW_CQL_TABLETS_OPTION "TABLETS_ROUTING_V1"
/* Tablet entries kept unread per connection, and their bytes at most (each one's too). */
#define BW_CQL_KEPT_MAX 256
#define BW_CQL_KEPT_BYTES (1u << 20)
#define BW_CQL_KEPT_ONE_MAX 65536

/* The shard owning `token` on a node of nr_shards (1..BW_CQL_SHARDS_MAX) shards whose
   sharding ignores the ignore_msb (0..63) most significant bits: the token biased to
   unsigned, shifted left by ignore_msb within 64 bits, times nr_shards, its top 64 bits. */
uint32_t bw_cql_shard_of(int64_t token, uint32_t nr_shards, unsigned ignore_msb);
/* Each of n tokens' shard into out[i]. */
void bw_cql_shards_of(const int64_t *tokens, size_t n, uint32_t nr_shards, unsigned ignore_msb,
                      int32_t *out);

/* 1 when the SUPPORTED body (a [string multimap]) names `key`, 0 when it does not or does
   not parse. */
int bw_cql_supported_has(const uint8_t *body, size_t len, const char *key);

/* The tablet routing entries a connection received and the caller has not taken. */
typedef struct {
    uint8_t *data; /* the entries back to back, each after its 4-byte native length */
    size_t len, cap;
    size_t count;
    size_t dropped; /* entries not kept: too many, too large */
} bw_cql_kept;

/* Keeps the `tablets-routing-v1` entry of a response's custom payload, if it has one
   (`flags` the frame's, `body` from the start of its response extras). 0; -1 when the
   extras do not parse (nothing kept); an entry over the bounds is counted in `dropped`. */
int bw_cql_kept_take_payload(bw_cql_kept *kept, uint8_t flags, const uint8_t *body, size_t len);
void bw_cql_kept_clear(bw_cql_kept *kept);
void bw_cql_kept_free(bw_cql_kept *kept);
#endif
