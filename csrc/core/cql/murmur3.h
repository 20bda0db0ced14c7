/* Partition tokens as Cassandra's and Scylla's Murmur3Partitioner computes them: the first
   64-bit half of MurmurHash3 x64 128 (seed 0) of the partition key's bytes, as a signed
   long, with the tail bytes read as signed (Java) bytes, and the minimum long mapped to the
   maximum (the minimum is the ring's "no token"). No Python. */
#ifndef BW_MURMUR3_H
#define BW_MURMUR3_H
#include <stddef.h>
#include <stdint.h>

/* The first half of the hash as the partitioner computes it, before the minimum is mapped
   (what the driver's cassandra.murmur3.murmur3 returns). */
int64_t bw_murmur3_hash(const uint8_t *key, size_t len);

/* The token of a partition key: bw_murmur3_hash with INT64_MIN mapped to INT64_MAX. */
int64_t bw_murmur3_token(const uint8_t *key, size_t len);
#endif
