"""ScyllaDB shard awareness: a token's shard as the official driver computes it, the sharding
read from SUPPORTED (and refused when it lies), the shard-aware port's local ports, and a load
into the emulated nodes of bulkwire.testing.scylla putting every row on its owning shard."""
from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core
from bulkwire.cql_scylla import MURMUR3, Sharding, sharding_of, source_ports, supported
from bulkwire.testing.scylla import ScyllaCluster, bulkwire_insert, driver_insert, shard_of

from cassandra.connection import ShardAwarePortGenerator
from cassandra.shard_info import ShardingInfo, _ShardingInfo

TOKENS = st.integers(-(1 << 63), (1 << 63) - 1)


def driver_shard(token: int, shards: int, msb: int) -> int:
    return _ShardingInfo(0, shards, MURMUR3, "", msb, None, None).shard_id_from_token(token)


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, min_size=1, max_size=50), st.integers(1, _core.CQL_SHARDS_MAX),
       st.integers(0, 63))
def test_the_shard_of_a_token_is_the_drivers(tokens, shards, msb):
    ours = struct.unpack(f"={len(tokens)}i",
                         _core.cql_shards(struct.pack(f"={len(tokens)}q", *tokens), shards, msb))
    assert list(ours) == [driver_shard(t, shards, msb) for t in tokens]
    # the driver's compiled twin, where it has one, agrees (it takes counts below 2**31)
    compiled = ShardingInfo(0, shards, MURMUR3, "", msb, None, None)
    assert list(ours) == [compiled.shard_id_from_token(t) for t in tokens]
    # the emulator's own rule (pure Python) is the driver's too
    assert [shard_of(t, shards, msb) for t in tokens] == list(ours)


def test_the_shard_at_the_edges_of_the_ring():
    for shards in (1, 2, 3, 4, 7, 64, 4096):
        for msb in (0, 1, 12, 63):
            for token in (-(1 << 63), -(1 << 63) + 1, -1, 0, 1, (1 << 63) - 1):
                assert Sharding(0, shards, msb).shard_of(token) == driver_shard(token, shards, msb)


def test_cql_shards_refuses_what_it_cannot_compute():
    for shards, msb in ((0, 12), (-1, 12), (_core.CQL_SHARDS_MAX + 1, 12), (4, 64), (4, -1)):
        with pytest.raises(ValueError, match="nr_shards"):
            _core.cql_shards(b"\0" * 8, shards, msb)
    with pytest.raises(ValueError, match="multiple of 8"):
        _core.cql_shards(b"\0" * 7, 4, 12)
    assert _core.cql_shards(b"", 4, 12) == b""


SCYLLA = {"SCYLLA_SHARD": "2", "SCYLLA_NR_SHARDS": "4", "SCYLLA_SHARDING_IGNORE_MSB": "12",
          "SCYLLA_PARTITIONER": MURMUR3, "SCYLLA_SHARD_AWARE_PORT": "19042",
          "SCYLLA_SHARDING_ALGORITHM": "biased-token-round-robin",
          "SCYLLA_SHARD_AWARE_PORT_SSL": "19142", "CQL_VERSION": "3.0.0"}


def test_sharding_is_read_from_supported():
    s = sharding_of(supported(SCYLLA))
    assert s == Sharding(2, 4, 12, 19042, 19142)
    assert s.port(tls=False) == 19042 and s.port(tls=True) == 19142


@pytest.mark.parametrize("change", [
    {"SCYLLA_NR_SHARDS": "0"}, {"SCYLLA_NR_SHARDS": "4097"}, {"SCYLLA_NR_SHARDS": "99999999999"},
    {"SCYLLA_NR_SHARDS": "-4"}, {"SCYLLA_NR_SHARDS": "four"}, {"SCYLLA_NR_SHARDS": ""},
    {"SCYLLA_SHARD": "4"}, {"SCYLLA_SHARD": "-1"}, {"SCYLLA_SHARDING_IGNORE_MSB": "64"},
    {"SCYLLA_PARTITIONER": "org.apache.cassandra.dht.RandomPartitioner"},
    {"SCYLLA_SHARDING_ALGORITHM": "another-rule"}])
def test_a_supported_that_lies_or_another_partitioner_leaves_shards_out(change):
    assert sharding_of(supported({**SCYLLA, **change})) is None


def test_a_node_that_is_not_scylla_or_a_body_that_does_not_parse_has_no_sharding():
    assert sharding_of(supported({"CQL_VERSION": "3.0.0", "COMPRESSION": ["lz4"]})) is None
    assert sharding_of(None) is None and sharding_of(b"") is None
    body = supported(SCYLLA)
    for cut in range(len(body)):
        sharding_of(body[:cut])  # a cut body parses to something or nothing, never raises
    assert sharding_of(b"\xff\xff") is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_supported_body_is_read_safely(body):
    found = sharding_of(body)
    assert found is None or 1 <= found.nr_shards <= _core.CQL_SHARDS_MAX


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 64), st.data())
def test_the_local_ports_of_a_shard_are_the_drivers(shards, data):
    shard = data.draw(st.integers(0, shards - 1))
    ours = list(source_ports(shard, shards, random.Random(data.draw(st.integers()))))
    assert len(ours) == len(set(ours)) and all(p % shards == shard for p in ours)
    assert all(49152 <= p < 65535 for p in ours)
    theirs = list(ShardAwarePortGenerator(49152, 65535).generate(shard, shards))
    assert set(ours) == set(theirs)


def load(cluster: ScyllaCluster, rows: int, batch: int = 1000):
    return bulkwire_insert(cluster, rows, batch)


def test_every_row_reaches_its_shard_on_a_connection_per_shard():
    with ScyllaCluster(1, 4) as cluster:
        result = load(cluster, 4000)
        assert result.rows == 4000 and len(cluster.stored) == 4000
        assert cluster.stats == {"rows": 4000, "owned": 4000, "forwarded": 0,
                                 "other_shard": 0, "other_node": 0, "before_payload": 0,
                                 "after_payload": 0}
        node = cluster.nodes[0]
        assert {shard for _, shard in cluster.requests} == {0, 1, 2, 3}
        # the shards the first (ordinary) connection did not have: one shard-aware each
        aware = [shard for port, shard in node.connections if port == "shard-aware"]
        assert len(aware) == len(set(aware)) <= 3


def test_every_row_reaches_its_shard_on_three_nodes_with_three_replicas():
    with ScyllaCluster(3, 4, rf=3) as cluster:
        load(cluster, 3000)
        assert cluster.stats["owned"] == 3000 and len(cluster.stored) == 3000


def test_without_a_shard_aware_port_the_node_is_reconnected_until_every_shard_is_met():
    with ScyllaCluster(1, 4, shard_aware_port=False) as cluster:
        load(cluster, 2000)
        assert cluster.stats["owned"] == 2000
        node = cluster.nodes[0]
        assert all(port == "ordinary" for port, _ in node.connections)
        assert len(node.connections) <= 3 + 4 * 4  # bounded


def test_a_shard_aware_port_that_accepts_then_closes_falls_back_to_the_ordinary_port():
    with ScyllaCluster(1, 4, shard_port_closes=True) as cluster:
        load(cluster, 2000)
        assert cluster.stats["owned"] == 2000 and len(cluster.stored) == 2000
        aware = [1 for port, _ in cluster.nodes[0].connections if port == "shard-aware"]
        assert len(aware) == 1  # tried once, then left alone


@pytest.mark.parametrize("lie", ["0", "100000", "x"])
def test_a_node_lying_about_its_shard_count_is_loaded_as_a_node_without_shards(lie):
    with ScyllaCluster(1, 4, supported={"SCYLLA_NR_SHARDS": lie}) as cluster:
        result = load(cluster, 1000)
        assert result.rows == 1000 and len(cluster.stored) == 1000
        # one connection for the rows (plus the plan's, which read the ring): no shard-aware one
        assert all(port == "ordinary" for port, _ in cluster.nodes[0].connections)
        assert len(cluster.nodes[0].connections) == 2


def test_a_connection_from_a_local_port_is_bound_to_that_ports_shard():
    with ScyllaCluster(1, 4) as cluster:
        node = cluster.nodes[0]
        for shard in range(4):
            for port in source_ports(shard, 4):
                try:
                    conn = _core.CqlConnection(node.host, node.shard_port, local_port=port)
                except bulkwire.errors.ConnectError:
                    continue  # that port is taken here
                with conn:
                    assert sharding_of(conn.supported).shard == shard
                break
    with pytest.raises(ValueError, match="local_port"):
        _core.CqlConnection("127.0.0.1", 9042, local_port=70000)


def test_the_driver_puts_every_row_on_its_shard_in_the_emulator():
    """The emulator's shard rule is the driver's: the official driver, token aware, reaches
    the owning shard with every row."""
    with ScyllaCluster(1, 4) as cluster:
        stats = driver_insert(cluster, 400)
        assert (stats["rows"], stats["owned"], stats["forwarded"]) == (400, 400, 0)


def test_a_row_off_its_owning_shard_is_counted_by_where_it_arrived():
    """Each row the emulator records as on an owning shard, on another shard of its replica
    or on a node that is no replica is where the official driver's token map and shard rule
    place it; the counts add up. Every row goes through one connection to the first node's
    shard 0, so that every kind is met."""
    from cassandra.metadata import Murmur3Token, SimpleStrategy

    from test_scylla_tablets import execute_body, prepared_id

    with ScyllaCluster(3, 4, rf=1) as cluster:
        node = cluster.nodes[0]
        with _core.CqlConnection(node.host, node.port) as conn:
            conn.run(_core.CQL_OP_EXECUTE, [execute_body(prepared_id(conn), k)
                                            for k in range(600)])
        assert {shard for _, shard in cluster.requests} == {0}
        stats = dict(cluster.stats)
        ring = sorted(Murmur3Token(t) for node in cluster.nodes for t in node.tokens)
        owner = {Murmur3Token(t): node.index for node in cluster.nodes for t in node.tokens}
        replicas = SimpleStrategy({"replication_factor": "1"}).make_token_replica_map(
            owner, ring)
        counted = {"owned": 0, "other_shard": 0, "other_node": 0}
        for key, (node, shard, arrival) in cluster.arrivals.items():
            token = Murmur3Token.from_key(struct.pack(">q", key))
            at = next((t for t in ring if t >= token), ring[0])
            (replica,) = replicas[at]
            want = ("other_node" if node != replica else
                    "owned" if shard == driver_shard(token.value, 4, 12) else "other_shard")
            assert arrival == want, (key, node, shard)
            counted[arrival] += 1
    assert min(counted.values()) > 20, counted  # every kind met
    assert stats["rows"] == 600 == sum(counted.values())
    assert (stats["owned"], stats["other_shard"], stats["other_node"]) == (
        counted["owned"], counted["other_shard"], counted["other_node"])
    assert stats["forwarded"] == stats["other_shard"] + stats["other_node"]
    assert stats["before_payload"] == stats["after_payload"] == 0  # vnodes: no payloads


def test_a_node_claiming_more_shards_than_it_has_costs_a_bounded_number_of_connections():
    """4096 shards claimed, 4 real: the connections made to find the missing shards stop at
    the bound, the rows of the shards not found go on the node's first connection (one run
    at a time), and every row is stored."""
    from bulkwire.load.cql_shards import CONNECTS_PER_NODE

    with ScyllaCluster(1, 4, supported={"SCYLLA_NR_SHARDS": "4096"}) as cluster:
        result = load(cluster, 2000, batch=500)
        assert result.rows == 2000 and len(cluster.stored) == 2000
        assert len(cluster.nodes[0].connections) <= 3 + CONNECTS_PER_NODE


@pytest.mark.parametrize("refused", [700, 1700])  # in the first batch, and in a later one
def test_a_refused_row_fails_the_load_naming_every_row_not_acknowledged(refused):
    """The first batch of a node is split by shard once its first connection says how it
    shards, a later batch is sent per shard in parallel: either way a refused row fails the
    load, and every row of the batch is either stored or named as not acknowledged."""
    with ScyllaCluster(1, 4, refuse=lambda key: key == refused) as cluster:
        with pytest.raises(bulkwire.errors.CqlServerError) as caught:
            load(cluster, 2000)
        error = caught.value
        assert error.source_row == refused and refused in error.source_unacknowledged
        batch = range(refused // 1000 * 1000, refused // 1000 * 1000 + 1000)
        named = set(error.source_unacknowledged)
        assert named <= set(batch)
        assert {key for key in batch if key not in cluster.stored} <= named
