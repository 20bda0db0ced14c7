/* The token ring of a Murmur3Partitioner cluster and SimpleStrategy replica placement: the
   replicas of a token are the first `rf` distinct nodes met clockwise from the first ring
   token at or after it (wrapping past the largest). Built once from every node's tokens
   (system.local and system.peers); each lookup is a binary search. Core layer: no Python. */
#ifndef BW_CQL_RING_H
#define BW_CQL_RING_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t *tokens;   /* sorted ascending, n_tokens of them */
    int32_t *replicas; /* n_tokens * rf node indexes: row i for the range ending at tokens[i] */
    size_t n_tokens;
    int rf;            /* replicas per token: min(requested rf, nodes) */
    int n_nodes;
} bw_cql_ring;

/* Builds the ring from n_tokens (token, node index) pairs, node indexes in [0, n_nodes).
   Equal tokens keep the first node that claims them. 0; -1 out of memory; -2 bad arguments
   (no tokens, rf < 1, a node index out of range). */
int bw_cql_ring_build(bw_cql_ring *ring, const int64_t *tokens, const int32_t *nodes,
                      size_t n_tokens, int n_nodes, int rf);
void bw_cql_ring_free(bw_cql_ring *ring);

/* The replicas of token (ring->rf node indexes, the primary first). */
const int32_t *bw_cql_ring_replicas(const bw_cql_ring *ring, int64_t token);
#endif
