/* cql_ring.c: SimpleStrategy replicas on a token ring: wrap-around, distinct nodes, rf
   capped at the owners, duplicate tokens, bad arguments.
   sources: cql_ring.c */
#include "check.h"

#include <stdint.h>

#include "cql_ring.h"

TEST(replicas_walk_clockwise_distinct_nodes) {
    /* ring: 10 -> node 0, 20 -> node 1, 30 -> node 0, 40 -> node 2 */
    int64_t tokens[] = {30, 10, 40, 20};
    int32_t nodes[] = {0, 0, 2, 1};
    bw_cql_ring ring;
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 4, 3, 2), 0);
    CHECK_EQ(ring.rf, 2);
    const int32_t *r = bw_cql_ring_replicas(&ring, 5); /* range ending at 10 */
    CHECK_EQ(r[0], 0);
    CHECK_EQ(r[1], 1);
    r = bw_cql_ring_replicas(&ring, 20); /* a ring token belongs to its own range */
    CHECK_EQ(r[0], 1);
    CHECK_EQ(r[1], 0);
    r = bw_cql_ring_replicas(&ring, 35);
    CHECK_EQ(r[0], 2);
    CHECK_EQ(r[1], 0);
    r = bw_cql_ring_replicas(&ring, 41); /* past the last token: wraps to the first */
    CHECK_EQ(r[0], 0);
    r = bw_cql_ring_replicas(&ring, INT64_MIN);
    CHECK_EQ(r[0], 0);
    r = bw_cql_ring_replicas(&ring, INT64_MAX);
    CHECK_EQ(r[0], 0);
    bw_cql_ring_free(&ring);
}

TEST(rf_is_capped_and_duplicates_keep_the_first) {
    int64_t tokens[] = {5, 5, 9};
    int32_t nodes[] = {1, 0, 1};
    bw_cql_ring ring;
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 3, 3, 3), 0);
    CHECK_EQ(ring.rf, 1); /* only node 1 owns a token */
    CHECK_EQ(ring.n_tokens, 2);
    CHECK_EQ(bw_cql_ring_replicas(&ring, 0)[0], 1);
    bw_cql_ring_free(&ring);
}

TEST(bad_arguments) {
    int64_t tokens[] = {1};
    int32_t nodes[] = {3};
    bw_cql_ring ring;
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 0, 1, 1), -2);
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 1, 2, 1), -2);
    nodes[0] = 0;
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 1, 1, 0), -2);
    CHECK_EQ(bw_cql_ring_build(&ring, tokens, nodes, 1, 1, 1), 0);
    bw_cql_ring_free(&ring);
    bw_cql_ring_free(&ring); /* twice is harmless */
}

RUN_TESTS(replicas_walk_clockwise_distinct_nodes, rf_is_capped_and_duplicates_keep_the_first,
          bad_arguments)
