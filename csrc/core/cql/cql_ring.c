/* SimpleStrategy replicas on a Murmur3 token ring. */
#include "cql_ring.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t token;
    int32_t node;
    size_t order; /* position in the input: equal tokens keep the first */
} entry;

static int by_token(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int bw_cql_ring_build(bw_cql_ring *ring, const int64_t *tokens, const int32_t *nodes,
                      size_t n_tokens, int n_nodes, int rf) {
    memset(ring, 0, sizeof *ring);
    if (n_tokens == 0 || n_nodes < 1 || rf < 1 || n_tokens > SIZE_MAX / sizeof(entry))
        return -2;
    for (size_t i = 0; i < n_tokens; i++)
        if (nodes[i] < 0 || nodes[i] >= n_nodes)
            return -2;
    int rc = -1;
    entry *e = malloc(n_tokens * sizeof *e);
    unsigned char *seen = calloc((size_t)n_nodes, 1);
    if (e == NULL || seen == NULL)
        goto cleanup;
    for (size_t i = 0; i < n_tokens; i++)
        e[i] = (entry){tokens[i], nodes[i], i};
    qsort(e, n_tokens, sizeof *e, by_token);
    size_t n = 0;
    for (size_t i = 0; i < n_tokens; i++)
        if (n == 0 || e[i].token != e[n - 1].token)
            e[n++] = e[i];
    /* nodes that own a token: the replica count cannot exceed them */
    int owners = 0;
    for (size_t i = 0; i < n; i++)
        if (!seen[e[i].node]) {
            seen[e[i].node] = 1;
            owners++;
        }
    ring->rf = rf < owners ? rf : owners;
    ring->n_tokens = n;
    ring->n_nodes = n_nodes;
    ring->tokens = malloc(n * sizeof *ring->tokens);
    if (ring->tokens == NULL || n > SIZE_MAX / sizeof(int32_t) / (size_t)ring->rf)
        goto cleanup;
    ring->replicas = malloc(n * (size_t)ring->rf * sizeof *ring->replicas);
    if (ring->replicas == NULL)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        ring->tokens[i] = e[i].token;
        memset(seen, 0, (size_t)n_nodes);
        int32_t *row = ring->replicas + i * (size_t)ring->rf;
        int got = 0;
        for (size_t j = 0; j < n && got < ring->rf; j++) {
            int32_t node = e[(i + j) % n].node;
            if (!seen[node]) {
                seen[node] = 1;
                row[got++] = node;
            }
        }
    }
    rc = 0;
cleanup:
    free(e);
    free(seen);
    if (rc < 0)
        bw_cql_ring_free(ring);
    return rc;
}

void bw_cql_ring_free(bw_cql_ring *ring) {
    free(ring->tokens);
    free(ring->replicas);
    memset(ring, 0, sizeof *ring);
}

const int32_t *bw_cql_ring_replicas(const bw_cql_ring *ring, int64_t token) {
    /* the first ring token >= token; past the last, the first */
    size_t lo = 0, hi = ring->n_tokens;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring->tokens[mid] < token)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == ring->n_tokens)
        lo = 0;
    return ring->replicas + lo * (size_t)ring->rf;
}
