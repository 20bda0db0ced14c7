"""The token ring (``bulkwire.cql_statements.TokenRing``, ``_core.CqlRing``): SimpleStrategy
replicas of any token equal the driver's ``TokenMap`` over synthetic rings (hypothesis over
node counts, tokens per node, replication factors and tokens, the ring's ends included), and
the system tables' cells are read as the driver reads them."""
from __future__ import annotations

import array

import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("cassandra")
from cassandra.metadata import KeyspaceMetadata, Murmur3Token, TokenMap  # noqa: E402

from bulkwire import _core  # noqa: E402
from bulkwire.cql_statements import TokenRing, decode_text_set  # noqa: E402

LONG = st.integers(-(1 << 63), (1 << 63) - 1)


class _Metadata:
    """What TokenMap reads of the cluster metadata: the keyspaces."""

    def __init__(self, rf: int) -> None:
        self.keyspaces = {"ks": KeyspaceMetadata("ks", True, "SimpleStrategy",
                                                 {"replication_factor": str(rf)})}


def driver_replicas(nodes: dict[str, list[int]], rf: int, token: int) -> list[str]:
    owners: dict = {}
    for address, tokens in nodes.items():
        for t in tokens:
            owners.setdefault(Murmur3Token(t), address)  # the first claim of a token wins
    token_map = TokenMap(Murmur3Token, owners, sorted(owners), _Metadata(rf))
    return list(token_map.get_replicas("ks", Murmur3Token(token)))


@st.composite
def rings(draw):
    count = draw(st.integers(1, 6))
    nodes = {f"10.0.0.{i + 1}": draw(st.lists(LONG, min_size=1, max_size=8))
             for i in range(count)}
    return nodes, draw(st.integers(1, 7))


@given(rings(), st.lists(st.one_of(LONG, st.sampled_from([-(1 << 63), (1 << 63) - 1, 0])),
                         min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_replicas_equal_the_drivers_token_map(ring_rf, tokens) -> None:
    nodes, rf = ring_rf
    ring = TokenRing(nodes, rf)
    # a token that is a ring token itself belongs to that token's range
    tokens = tokens + [t for ts in nodes.values() for t in ts][:5]
    for token in tokens:
        assert ring.replicas(token) == driver_replicas(nodes, rf, token)
    primaries = ring.primaries(array.array("q", tokens))
    assert [ring.addresses[i] for i in primaries] == [ring.replicas(t)[0] for t in tokens]


def test_replication_factor_is_at_most_the_owners() -> None:
    ring = TokenRing({"a": [1], "b": [2]}, replication_factor=3)
    assert ring.replication_factor == 2
    assert sorted(ring.replicas(0)) == ["a", "b"]


@pytest.mark.parametrize("args", [([], [], 1, 1), ([1], [0], 1, 0), ([1], [0], 0, 1)])
def test_a_ring_needs_tokens_nodes_and_rf(args) -> None:
    with pytest.raises(ValueError):
        _core.CqlRing(*args)


def test_a_node_index_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes\\[1\\]"):
        _core.CqlRing([1, 2], [0, 5], 2, 1)


def test_primaries_needs_whole_int64s() -> None:
    with pytest.raises(ValueError, match="int64"):
        _core.CqlRing([1], [0], 1, 1).primaries(b"1234")


@given(st.lists(st.text(max_size=20), max_size=10))
def test_decode_text_set_equals_the_drivers(items) -> None:
    from cassandra.cqltypes import lookup_casstype
    t = lookup_casstype("SetType(UTF8Type)")
    assert decode_text_set(t.serialize(items, 4)) == items


@pytest.mark.parametrize("value", [b"", b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00\x00\x00\x05ab",
                                   b"\x00\x00\x00\x00x"])
def test_decode_text_set_refuses_malformed_values(value) -> None:
    with pytest.raises(ValueError):
        decode_text_set(value)
