"""Replica placement (``bulkwire.cql_placement``) and the node each row goes to, without a
server.

The placement of random rings (nodes with one or many tokens, spread over data centres and
racks) and random replication maps (NetworkTopologyStrategy with a factor above a data
centre's node count, of 0, or missing for a data centre; SimpleStrategy) is compared with
the official driver's ``make_token_replica_map`` for every token of the ring: the replica
sets are equal. The driver can list one node twice when a node of a rack already used is met
again before the last rack is (and then places one node too few); there the set it gives is
still contained in bulkwire's, which holds as many nodes as the factor asks (at most the
data centre's nodes), and a hand-worked ring checks Cassandra's own rule for that case.

The routing: each range's node is the first replica in the local data centre that is up;
another data centre's replica only where the local one has none and the consistency is not
a LOCAL_* one; a local data centre with no replica at a LOCAL_* consistency, and a local
data centre no node is in, are errors naming what is wrong.
"""
from __future__ import annotations

import array
import random

import pytest
from hypothesis import given, settings, strategies as st

from cassandra.metadata import Murmur3Token, NetworkTopologyStrategy, SimpleStrategy

from bulkwire.cql_placement import NoLocalReplica, Placement, Replication, decode_text_map


class Host:
    """A host as the driver's placement reads it: ``datacenter`` and ``rack``."""

    def __init__(self, address: str, datacenter: str, rack: str) -> None:
        self.address, self.datacenter, self.rack = address, datacenter, rack

    def __repr__(self) -> str:
        return self.address


@st.composite
def clusters(draw):
    """(nodes {address: tokens}, locations {address: (dc, rack)}, replication options)."""
    dcs = draw(st.lists(st.sampled_from(["dc1", "dc2", "dc3"]), min_size=1, max_size=3,
                        unique=True))
    count = draw(st.integers(1, 9))
    vnodes = draw(st.integers(1, 4))
    tokens = draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=count * vnodes,
                           max_size=count * vnodes, unique=True))
    nodes, locations = {}, {}
    for i in range(count):
        address = f"10.0.0.{i + 1}"
        nodes[address] = tokens[i * vnodes:(i + 1) * vnodes]
        locations[address] = (draw(st.sampled_from(dcs)), draw(st.sampled_from(["r1", "r2",
                                                                                   "r3"])))
    if draw(st.booleans()):
        options = {"class": "SimpleStrategy", "replication_factor": str(draw(st.integers(1, 5)))}
    else:
        options = {"class": "NetworkTopologyStrategy"}
        for dc in dcs + ["dc9"]:  # dc9: a factor for a data centre no node is in
            if draw(st.booleans()):
                options[dc] = str(draw(st.integers(0, 5)))
    return nodes, locations, options


def driver_replicas(nodes, locations, options):
    """{token: [address, ...]} as the driver places them."""
    hosts = {a: Host(a, *locations[a]) for a in nodes}
    owner = {Murmur3Token(t): hosts[a] for a, ts in nodes.items() for t in ts}
    ring = sorted(owner)
    if options["class"] == "SimpleStrategy":
        strategy = SimpleStrategy(options)
    else:
        strategy = NetworkTopologyStrategy({k: v for k, v in options.items() if k != "class"})
    made = strategy.make_token_replica_map(owner, ring)
    return {t.value: [h.address for h in made.get(t, [])] for t in ring}


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_placement_is_the_drivers_for_every_token(cluster):
    nodes, locations, options = cluster
    placement = Placement(nodes, locations, Replication.of(options))
    expected = driver_replicas(nodes, locations, options)
    assert placement.tokens == sorted(expected)
    factors = Replication.of(options).factors
    for token, theirs in expected.items():
        ours = placement.replicas(token)
        assert len(ours) == len(set(ours)), (token, ours)
        if len(theirs) == len(set(theirs)):
            assert set(ours) == set(theirs), (token, ours, theirs)
        else:  # the driver placed a node twice: its set may be short
            assert set(theirs) <= set(ours), (token, ours, theirs)
            for dc in {locations[a][0] for a in ours}:
                members = [a for a in nodes if locations[a][0] == dc]
                assert sum(locations[a][0] == dc for a in ours) == \
                    min(factors[dc], len(members))


def test_a_rack_met_again_before_the_last_rack_fills_the_factor_as_cassandra_does():
    """One data centre, racks A (a1, a2, a3) and B (b1), factor 4, the ring met as a1, a2, a2
    (a second token), b1, a3: every node is a replica (4 asked, 4 nodes); the driver gives
    a1, b1, a2, a2."""
    walk = ["a1", "a2", "a2", "b1", "a3"]
    nodes: dict = {}
    for token, address in enumerate(walk):
        nodes.setdefault(address, []).append(token * 100)
    locations = {a: ("d", a[0].upper()) for a in nodes}
    options = {"class": "NetworkTopologyStrategy", "d": "4"}
    placement = Placement(nodes, locations, Replication.of(options))
    assert placement.replicas(0) == ["a1", "a2", "b1", "a3"]
    assert driver_replicas(nodes, locations, options)[0] == ["a1", "b1", "a2", "a2"]


def test_racks_are_preferred_then_the_skipped_nodes_fill_the_factor():
    """Factor 2 over racks r1 (n1, n2) and r2 (n3), met n1, n2, n3: n1 and n3 (n2 shares
    n1's rack); factor 3: all three."""
    nodes = {"n1": [0], "n2": [10], "n3": [20]}
    locations = {"n1": ("d", "r1"), "n2": ("d", "r1"), "n3": ("d", "r2")}
    two = Placement(nodes, locations, Replication.of({"class": "NetworkTopologyStrategy",
                                                      "d": "2"}))
    assert two.replicas(-5) == ["n1", "n3"]
    three = Placement(nodes, locations, Replication.of({"class": "NetworkTopologyStrategy",
                                                        "d": "3"}))
    assert three.replicas(-5) == ["n1", "n2", "n3"]


def test_local_and_everywhere_strategies_place_on_every_node():
    nodes = {"a": [0], "b": [10]}
    for name in ("LocalStrategy", "org.apache.cassandra.locator.EverywhereStrategy"):
        placement = Placement(nodes, {"a": ("d", "r"), "b": ("d", "r")},
                              Replication.of({"class": name}))
        assert placement.replicas(5) == ["b", "a"]


TWO_DCS = {"a1": [0], "b1": [100], "a2": [200], "b2": [300]}
WHERE = {"a1": ("dc1", "r1"), "a2": ("dc1", "r1"), "b1": ("dc2", "r1"), "b2": ("dc2", "r1")}


def routed(routes, tokens):
    return [routes.addresses[i] for i in routes.primaries(array.array("q", tokens))]


def test_each_row_goes_to_the_first_local_replica_and_past_a_node_down_to_the_next():
    placement = Placement(TWO_DCS, WHERE, Replication.of(
        {"class": "NetworkTopologyStrategy", "dc1": "2", "dc2": "2"}))
    tokens = [-7, 50, 150, 250, 350]
    # token 50's range is met b1, a2, b2, a1: its first dc1 replica is a2, its first dc2 b1
    assert routed(placement.route("dc1"), tokens) == ["a1", "a2", "a2", "a1", "a1"]
    assert routed(placement.route("dc2"), tokens) == ["b1", "b1", "b2", "b2", "b1"]
    assert routed(placement.route("dc1", down=["a2"]), tokens) == ["a1"] * 5
    # no dc1 node up: the dc2 replicas, unless the consistency is a LOCAL_* one (then a dc1
    # node would coordinate; with none up, any node does)
    assert routed(placement.route("dc1", down=["a1", "a2"]), tokens) == \
        ["b1", "b1", "b2", "b2", "b1"]


def test_a_data_centre_without_replicas_routes_to_another_only_outside_local_levels():
    placement = Placement(TWO_DCS, WHERE, Replication.of(
        {"class": "NetworkTopologyStrategy", "dc1": "1"}))
    placement.check_local("dc2", False, "ks")
    assert set(routed(placement.route("dc2"), [-7, 50, 150, 250, 350])) == {"a1", "a2"}
    with pytest.raises(NoLocalReplica) as caught:
        placement.check_local("dc2", True, "ks")
    message = str(caught.value)
    assert "keyspace ks" in message and "dc2" in message
    assert "{'class': 'NetworkTopologyStrategy', 'dc1': '1'}" in message
    # a local data centre with replicas is fine at LOCAL_* levels
    placement.check_local("dc1", True, "ks")


def test_a_simple_strategy_range_without_a_local_replica_fails_local_levels():
    """SimpleStrategy with one replica: the ranges a dc2 node holds have no dc1 replica."""
    placement = Placement(TWO_DCS, WHERE, Replication.of({"class": "SimpleStrategy",
                                                          "replication_factor": "1"}))
    placement.check_local("dc1", False, "ks")
    with pytest.raises(NoLocalReplica, match="keyspace ks .* has no replica in the local "
                                             "data centre dc1"):
        placement.check_local("dc1", True, "ks")
    every = Placement(TWO_DCS, WHERE, Replication.of({"class": "SimpleStrategy",
                                                      "replication_factor": "2"}))
    every.check_local("dc1", True, "ks")  # two nodes met: one of each data centre


def test_a_local_dc_no_node_is_in_names_the_data_centres_there_are():
    placement = Placement(TWO_DCS, WHERE, Replication.of({"class": "SimpleStrategy",
                                                          "replication_factor": "1"}))
    with pytest.raises(ValueError, match="'dc3' is the data centre of no node; the cluster's "
                                         "data centres are dc1, dc2"):
        placement.check_local("dc3", False, "ks")


@settings(max_examples=150, deadline=None)
@given(clusters(), st.data())
def test_the_route_is_a_local_replica_up_whenever_there_is_one(cluster, data):
    nodes, locations, options = cluster
    placement = Placement(nodes, locations, Replication.of(options))
    local = data.draw(st.sampled_from(placement.datacenters()))
    down = data.draw(st.lists(st.sampled_from(sorted(nodes)), unique=True,
                              max_size=len(nodes) - 1))
    local_only = data.draw(st.booleans())
    routes = placement.route(local, down, local_only)
    rng = random.Random(0)
    probes = placement.tokens + [rng.randrange(-(1 << 63), 1 << 63) for _ in range(20)]
    for token, node in zip(probes, routed(routes, probes)):
        replicas = [r for r in placement.replicas(token) if r not in down]
        assert node not in down
        mine = [r for r in replicas if locations[r][0] == local]
        if mine:
            assert node == mine[0], (token, replicas)
        elif replicas and not local_only:
            assert node == replicas[0], (token, replicas)
        elif any(locations[a][0] == local and a not in down for a in nodes):
            assert locations[node][0] == local


def test_a_replication_map_is_read_from_its_cql_value():
    raw = b"".join([b"\x00\x00\x00\x02"] + [len(x).to_bytes(4, "big") + x for x in
                                             (b"class", b"SimpleStrategy",
                                              b"replication_factor", b"2")])
    assert decode_text_map(raw) == {"class": "SimpleStrategy", "replication_factor": "2"}
    with pytest.raises(ValueError):
        decode_text_map(raw[:-1])
    with pytest.raises(ValueError):
        Replication.of({"class": "NetworkTopologyStrategy", "dc1": "three"})
    assert Replication.of({"class": "NetworkTopologyStrategy", "dc1": "3/1"}).factors == \
        {"dc1": 2}


def test_a_text_collection_with_a_negative_count_is_refused():
    """A set<text> (the tokens of system.local) or map<text, text> (a keyspace's replication)
    whose count is negative is malformed, never an empty collection."""
    import struct

    from bulkwire.cql_placement import decode_text_map
    from bulkwire.cql_statements import decode_text_set

    for decode in (decode_text_set, decode_text_map):
        with pytest.raises(ValueError, match="a negative count"):
            decode(struct.pack(">i", -1))
