"""ScyllaDB tablets: the tablets-routing-v1 payload parsed as the official driver parses it
(and refused when it lies), the tablet map against the driver's, and loads into emulated
nodes whose table has tablets (bulkwire.testing.scylla): after the first payloads, every row
on its replica's shard; a lying payload never crashes a load nor sends a row elsewhere than
to a node of the ring."""
from __future__ import annotations

import struct
import uuid

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core
from bulkwire.cql_scylla import (MAX_REPLICAS, Tablet, TabletMap, parse_tablet,
                                 tablet_payload)
from bulkwire.testing.scylla import ScyllaCluster, bulkwire_insert, driver_insert

from cassandra import cqltypes
from cassandra.metadata import Murmur3Token
from cassandra.tablets import Tablet as DriverTablet, Tablets as DriverTablets

CTYPE = cqltypes.lookup_casstype(
    "TupleType(LongType, LongType, ListType(TupleType(UUIDType, Int32Type)))")
TOKENS = st.integers(-(1 << 63), (1 << 63) - 1)
REPLICAS = st.lists(st.tuples(st.uuids(), st.integers(0, (1 << 31) - 1)), min_size=1,
                    max_size=8)


@st.composite
def ranges(draw):
    first, last = sorted(draw(st.lists(TOKENS, min_size=2, max_size=2, unique=True)))
    return first, last


@settings(max_examples=300, deadline=None)
@given(ranges(), REPLICAS)
def test_a_payload_is_read_as_the_driver_reads_it(span, replicas):
    payload = CTYPE.to_binary((span[0], span[1], replicas), 4)
    assert payload == tablet_payload(span[0], span[1], replicas)
    first, last, theirs = CTYPE.from_binary(payload, 4)
    assert parse_tablet(payload) == Tablet(first, last, tuple(tuple(r) for r in theirs))


def test_every_cut_of_a_payload_is_refused():
    payload = tablet_payload(-10, 10, [(uuid.uuid4(), 1), (uuid.uuid4(), 2)])
    for cut in range(len(payload)):
        with pytest.raises(ValueError):
            parse_tablet(payload[:cut])
    with pytest.raises(ValueError, match="after its three fields"):
        parse_tablet(payload + b"\0")


@pytest.mark.parametrize("first,last,replicas,match", [
    (5, 5, [(uuid.UUID(int=1), 0)], "empty"),
    (9, -9, [(uuid.UUID(int=1), 0)], "empty"),
    (0, 9, [], "names 0 replicas"),
    (0, 9, [(uuid.UUID(int=i), 0) for i in range(MAX_REPLICAS + 1)], "names 65 replicas"),
    (0, 9, [(uuid.UUID(int=1), -1)], "shard >= 0"),
])
def test_a_payload_that_lies_is_refused(first, last, replicas, match):
    with pytest.raises(ValueError, match=match):
        parse_tablet(tablet_payload(first, last, replicas))


def test_lengths_that_do_not_fit_are_refused():
    good = tablet_payload(0, 9, [(uuid.UUID(int=1), 0)])
    for bad in (struct.pack(">i", -1) + good[4:], struct.pack(">i", 1 << 30) + good[4:],
                good[:24] + struct.pack(">i", 0x7FFFFFFF) + good[28:],
                good[:12] + struct.pack(">i", 4) + good[16:],
                good[:28] + struct.pack(">i", 2) + good[32:]):
        with pytest.raises(ValueError):
            parse_tablet(bad)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_to_a_tablet_or_a_value_error(payload):
    try:
        tablet = parse_tablet(payload)
    except ValueError:
        return
    assert tablet.first < tablet.last and 0 < len(tablet.replicas) <= MAX_REPLICAS


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(ranges(), REPLICAS), min_size=1, max_size=12),
       st.lists(TOKENS, max_size=30))
def test_the_tablet_map_finds_what_the_drivers_finds(learned, tokens):
    ours, theirs = TabletMap(), DriverTablets({})
    for (first, last), replicas in learned:
        ours.learn(tablet_payload(first, last, replicas))
        theirs.add_tablet("ks", "t", DriverTablet(first, last, replicas))
    for token in tokens + [first, last, first + 1, last - 1]:
        mine = ours.find(token)
        found = theirs.get_tablet_for_key("ks", "t", Murmur3Token(token))
        assert (mine is None) == (found is None)
        if found is not None:
            assert (mine.first, mine.last) == (found.first_token, found.last_token)


def test_the_tablet_map_is_bounded_and_counts_what_it_refused():
    tablets = TabletMap(limit=4)
    for i in range(10):
        tablets.learn(tablet_payload(i * 10, i * 10 + 10, [(uuid.UUID(int=i + 1), 0)]))
    assert len(tablets) == 4
    assert tablets.find(5) is None and tablets.find(95).first == 90
    assert tablets.learn(b"garbage") is None and tablets.rejected == 1


def load(cluster: ScyllaCluster, rows: int, batch: int = 500):
    return bulkwire_insert(cluster, rows, batch)


def after_first_batch(cluster: ScyllaCluster, batch: int) -> float:
    owned = [ok for key, ok in cluster.owned.items() if key >= batch]
    return sum(owned) / len(owned)


@pytest.mark.parametrize("nodes,rf,tablets", [(2, 1, 8), (3, 3, 16)])
def test_rows_go_to_their_tablets_replica_after_the_first_payloads(nodes, rf, tablets):
    with ScyllaCluster(nodes, 4, rf=rf, tablets=tablets) as cluster:
        result = load(cluster, 5000)
        assert result.rows == 5000 and len(cluster.stored) == 5000
        assert after_first_batch(cluster, 500) >= 0.99
        assert cluster.stats["forwarded"] <= 500


@pytest.mark.parametrize("nodes,rf,tablets", [(2, 1, 8), (3, 3, 16), (3, 3, 64)])
def test_every_row_but_the_probes_reaches_its_tablets_shard(nodes, rf, tablets):
    """The rows sent to learn the tablets (the probes) are the only ones forwarded: every
    other row is sent once the probes' answers are in, to its tablet's replica's shard."""
    with ScyllaCluster(nodes, 4, rf=rf, tablets=tablets) as cluster:
        probes: set[int] = set()
        result = bulkwire_insert(cluster, 5000, 1000, probes=probes)
        assert result.rows == 5000 and len(cluster.stored) == 5000
        missed = {key for key, ok in cluster.owned.items() if not ok}
        assert missed and missed <= probes, sorted(missed - probes)
        assert cluster.stats["before_payload"] == tablets  # one a tablet: all were learned


def test_a_node_that_sends_no_payload_leaves_the_ring_routing():
    with ScyllaCluster(2, 4, tablets=8, payload_for=lambda key, payload: None) as cluster:
        load(cluster, 2000)
        assert len(cluster.stored) == 2000
        # routed by the ring: about half of the rows on the wrong node
        assert cluster.stats["forwarded"] > 500


def lying(kind: str):
    unknown = uuid.UUID(int=12345)

    def payload_for(key: int, payload: bytes) -> bytes:
        tablet = parse_tablet(payload)
        if kind == "unknown host":
            return tablet_payload(tablet.first, tablet.last, [(unknown, 0)])
        if kind == "huge shard":
            return tablet_payload(tablet.first, tablet.last,
                                  [(h, 1 << 30) for h, _ in tablet.replicas])
        if kind == "whole ring":
            return tablet_payload(-(1 << 63), (1 << 63) - 1, [(unknown, 0)])
        if kind == "garbage":
            return payload[:-3] + b"\xff"
        return b"\x00\x00\x00\x08" * 5000  # too large to be kept
    return payload_for


@pytest.mark.parametrize("kind", ["unknown host", "huge shard", "whole ring", "garbage",
                                  "oversized"])
def test_a_payload_that_lies_neither_crashes_the_load_nor_misroutes_it(kind):
    with ScyllaCluster(2, 4, tablets=8, payload_for=lying(kind)) as cluster:
        result = load(cluster, 2000)
        assert result.rows == 2000 and len(cluster.stored) == 2000
        # every request reached one of the two nodes, at one of their four shards
        assert {node for node, _ in cluster.requests} <= {0, 1}
        assert {shard for _, shard in cluster.requests} <= {0, 1, 2, 3}


def execute_body(prepared_id: bytes, key: int) -> bytes:
    values = struct.pack(">i", 8) + struct.pack(">q", key) + struct.pack(">i", 1) + b"x"
    return (struct.pack(">H", len(prepared_id)) + prepared_id + struct.pack(">HB", 1, 1)
            + struct.pack(">H", 2) + values)


def prepared_id(conn) -> bytes:
    _, answer = conn.request(_core.CQL_OP_PREPARE,
                             _core.cql_prepare_body("INSERT INTO ks.t (id, v) VALUES (?, ?)"))
    (n,) = struct.unpack_from(">H", answer, 4)
    return answer[6:6 + n]


def test_a_connection_keeps_the_payloads_it_asked_for_within_its_bounds():
    with ScyllaCluster(2, 4, tablets=8) as cluster:
        node = cluster.nodes[0]
        with _core.CqlConnection(node.host, node.port, tablets_routing=True) as conn:
            pid = prepared_id(conn)
            bodies = [execute_body(pid, key) for key in range(600)]
            conn.run(_core.CQL_OP_EXECUTE, bodies)
            entries, dropped = conn.take_payloads()
            misrouted = cluster.stats["forwarded"]
            assert misrouted > 256
            assert len(entries) == 256 and dropped == misrouted - 256
            assert all(parse_tablet(e).first < parse_tablet(e).last for e in entries)
            assert conn.take_payloads() == ([], 0)
        with _core.CqlConnection(node.host, node.port) as conn:  # not asked: none sent
            conn.run(_core.CQL_OP_EXECUTE, [execute_body(prepared_id(conn), k)
                                            for k in range(50)])
            assert conn.take_payloads() == ([], 0)


def test_a_connection_drops_a_payload_too_large_to_keep():
    with ScyllaCluster(2, 4, tablets=8,
                       payload_for=lambda key, payload: b"\0" * 70_000) as cluster:
        node = cluster.nodes[0]
        with _core.CqlConnection(node.host, node.port, tablets_routing=True) as conn:
            conn.run(_core.CQL_OP_EXECUTE, [execute_body(prepared_id(conn), k)
                                            for k in range(40)])
            entries, dropped = conn.take_payloads()
            assert entries == [] and dropped == cluster.stats["forwarded"] > 0


def test_the_driver_learns_the_emulators_tablets():
    """The emulator's tablet payloads are the driver's: the official driver routes the rows
    of a tablet to its replica's shard once answered with the tablet."""
    with ScyllaCluster(2, 4, tablets=8) as cluster:
        stats = driver_insert(cluster, 800, concurrency=4)
        assert stats["rows"] == 800
        assert stats["forwarded"] <= 8 * 4  # about one per tablet, while learning


def test_a_miss_is_counted_by_whether_its_tablets_payload_was_answered_before():
    """A client that never follows the payloads (round robin, one row at a time): of each
    tablet, the first row off its owning shard arrived before any payload of the tablet
    was answered, every later one after."""
    with ScyllaCluster(2, 4, tablets=8) as cluster:
        stats = driver_insert(cluster, 400, concurrency=1, token_aware=False)
        answered, before, after = set(), 0, 0
        for key, (_, _, arrival) in cluster.arrivals.items():  # in the order they arrived
            if arrival == "owned":
                continue
            tablet = cluster.tablet_of(bulkwire_token(key))[0]
            before, after = before + (tablet not in answered), after + (tablet in answered)
            answered.add(tablet)
    assert len(answered) == 8 and after > 100
    assert (stats["before_payload"], stats["after_payload"]) == (before, after) == (8, after)
    assert stats["forwarded"] == before + after


def bulkwire_token(key: int) -> int:
    return Murmur3Token.from_key(struct.pack(">q", key)).value


def test_the_rows_of_a_batch_no_tablet_holds_are_probed_first_while_probes_teach():
    from bulkwire.cql_scylla import supported
    from bulkwire.load.cql_shards import PROBE_ROWS, ShardRouter

    router = ShardRouter(None, False, {}, lambda node: True,
                         supported({"TABLETS_ROUTING_V1": ""}))
    tokens = np.arange(-500, 500, dtype=np.int64) * (1 << 50)
    probe, later = router.phases(np, tokens.tobytes(), len(tokens))
    assert len(probe) == PROBE_ROWS and len(later) == 1
    assert sorted(np.concatenate([probe, later[0]]).tolist()) == list(range(len(tokens)))
    router.tablets.learn(tablet_payload(-(1 << 63), 0, [(uuid.uuid4(), 0)]))
    router.tablets.learn(tablet_payload(1 << 57, 1 << 58, [(uuid.uuid4(), 0)]))
    # the probe taught tablets: the rows of the rest no tablet holds are probed next, one
    # of each gap between the tablets learned, (0, 2**57] and (2**58, 2**63)
    again, *rest = router.probed(np, tokens.tobytes(), later[0])
    assert len(again) == 2 and router.probing
    assert 0 < tokens[again[0]] <= 1 << 57 < 1 << 58 < tokens[again[1]]
    assert sorted(np.concatenate([probe, again, *rest]).tolist()) == list(range(len(tokens)))
    # this one taught nothing: the rest is sent as it is, and later batches are still probed
    assert router.probed(np, tokens.tobytes(), rest[0]) == [rest[0]] and router.probing
    probe, later = router.phases(np, tokens.tobytes(), len(tokens))
    router.tablets.learn(tablet_payload(0, (1 << 63) - 1, [(uuid.uuid4(), 0)]))
    # every row of the rest is held now: sent as it is
    assert router.probed(np, tokens.tobytes(), later[0]) == [later[0]] and router.probing
    router.tablets = type(router.tablets)()
    router.tablets.learn(tablet_payload(-(1 << 63), 0, [(uuid.uuid4(), 0)]))
    probe, _ = router.phases(np, tokens.tobytes(), len(tokens))
    assert (tokens[probe] > 0).all()  # only rows no tablet holds
    # this probe taught nothing: no more probes
    assert router.probed(np, tokens.tobytes(), _[0]) == [_[0]]
    assert not router.probing and router.phases(np, tokens.tobytes(), len(tokens)) == (None, [])
    # a node that offers no tablet routing is never probed
    plain = ShardRouter(None, False, {}, lambda node: True, supported({"CQL_VERSION": "3"}))
    assert plain.phases(np, tokens.tobytes(), len(tokens)) == (None, [])


def test_a_failure_in_the_probe_names_every_row_of_the_batch_not_acknowledged():
    with ScyllaCluster(2, 4, tablets=8, refuse=lambda key: True) as cluster:
        with pytest.raises(bulkwire.errors.CqlServerError) as caught:
            load(cluster, 1000)
        assert caught.value.source_unacknowledged == list(range(500))
        assert cluster.stats["rows"] == 0
