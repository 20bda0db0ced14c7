"""Emulated CQL nodes in this process: enough of Cassandra for a load into one table, a
cluster of :class:`cql_fake_node.FakeNode` s.

Each :class:`EmulatedNode` listens on a loopback address and answers the native protocol (v4
frames) as a node of a cluster does for ``bulkwire.load_parquet`` with a ``cql`` target: the
handshake, ``system_schema.columns`` of the one table ``ks.t (id bigint PRIMARY KEY, v
text)``, ``system_schema.keyspaces`` (the keyspace's replication), ``system.local`` (with the
node's ``host_id``, data centre and rack), ``system.peers_v2`` (or, for a node that has none,
the *Invalid* error an older server or Scylla answers) and ``system.peers``, ``PREPARE`` of
the INSERT, and ``EXECUTE`` of its rows, which it records. Every node advertises the client
address (and port, in ``system.peers_v2``) it is given, which need not be where it listens:
the node behind a port mapping, a NAT or a tunnel.

>>> with EmulatedCluster(2, advertised=[("127.0.0.201", 9042), ("127.0.0.202", 9042)]) as c:
...     c.nodes[0].endpoint[0]
'127.0.0.1'

``EmulatedCluster.owner(id)`` says which node owns a bigint key's token, computed with the
official driver's Murmur3 and the ring's rule (the first token at or after the key's,
clockwise), independently of bulkwire's own ring.
"""
from __future__ import annotations

import bisect
import socket
import struct
import threading
import uuid
from typing import Sequence

from cql_fake_node import BIGINT, VARCHAR, FakeNode, error, node_cells

KEYSPACE, TABLE = "ks", "t"
INVALID = 0x2200


def murmur3_token(key: int) -> int:
    """The token of a bigint partition key, as the official driver computes it."""
    from cassandra.metadata import Murmur3Token

    return Murmur3Token.from_key(struct.pack(">q", key)).value


class EmulatedNode(FakeNode):
    """One node of ``ks.t (id bigint PRIMARY KEY, v text)``: listens on ``listen`` (host, port
    0 for any), advertises ``advertised`` (address, native port or None) and owns ``tokens``.
    ``rows`` records the ids of the EXECUTEs it answered, ``connections`` counts the
    connections it accepted."""

    def __init__(self, cluster: "EmulatedCluster", listen: tuple[str, int],
                 advertised: tuple[str, int | None] | None, tokens: Sequence[int],
                 peer: str, peers_v2: bool, datacenter: str = "datacenter1",
                 rack: str = "rack1", columns: list[tuple[str, str, int | str]] | None = None
                 ) -> None:
        self.cluster = cluster
        self.datacenter, self.rack = datacenter, rack
        self.peer = peer  # its cluster (listen) address, as system.peers names it
        self.peers_v2 = peers_v2
        self.host_id = uuid.uuid4()
        self.rows: list[int] = []
        super().__init__(KEYSPACE, TABLE, columns or [("id", "partition_key", BIGINT),
                                                      ("v", "regular", VARCHAR)],
                         tokens=[str(t) for t in tokens], host=listen[0], port=listen[1],
                         answer_query=self._peers_v2_or_invalid,
                         replication=cluster.replication)
        self.endpoint: tuple[str, int] = self.listener.getsockname()[:2]
        self.advertised = advertised or self.endpoint
        self.tokens = list(tokens)

    def close(self) -> None:
        """Stops listening (the node is gone: nothing answers at its address)."""
        self.listener.close()

    def _peers_v2_or_invalid(self, cql: str) -> tuple[int, bytes] | None:
        if "FROM system.peers_v2" in cql and not self.peers_v2:
            return error(INVALID, "unconfigured table peers_v2")
        return None

    def local_cells(self) -> dict:
        return node_cells(self.host_id.bytes, self.peer, self.advertised[0], None, self.tokens,
                          self.datacenter, self.rack)

    def peer_cells(self) -> list[dict]:
        return [node_cells(n.host_id.bytes, n.peer, n.advertised[0], n.advertised[1], n.tokens,
                           n.datacenter, n.rack)
                for n in self.cluster.nodes if n is not self]

    def executed(self, values: list[bytes | None]) -> None:
        key = struct.unpack(">q", values[0])[0]
        with self.lock:
            self.rows.append(key)
        with self.cluster.lock:
            self.cluster.stored[key] = (None if values[1] is None else values[1].decode()
                                        if self.columns[1][2] == VARCHAR else values[1])


class EmulatedCluster:
    """``count`` emulated nodes of one cluster, each listening on ``listen[i]`` (default
    127.0.0.1, any port) and advertising ``advertised[i]`` ((address, port or None); default
    where it listens), with 8 tokens each spread over the ring. ``peers_v2``: whether the
    nodes have ``system.peers_v2`` (Cassandra 4 and later) or only ``system.peers``.
    ``datacenters[i]`` and ``racks[i]``: node i's data centre and rack (default
    ``datacenter1``, ``rack1``); ``replication``: the keyspace's replication map (default
    SimpleStrategy, one replica). ``columns``: the table's ``[(name, kind, type id or custom
    class name)]``, the bigint ``id`` first (default ``id bigint PRIMARY KEY, v text``).
    ``stored`` maps each id written to its ``v`` (text) or the bytes of its second column."""

    def __init__(self, count: int, *, advertised: Sequence[tuple[str, int | None]] | None = None,
                 listen: Sequence[tuple[str, int]] | None = None, peers_v2: bool = True,
                 datacenters: Sequence[str] | None = None, racks: Sequence[str] | None = None,
                 replication: dict[str, str] | None = None,
                 columns: list[tuple[str, str, int | str]] | None = None) -> None:
        self.lock = threading.Lock()
        self.replication = replication or {"class": "SimpleStrategy",
                                           "replication_factor": "1"}
        self.stored: dict[int, str | None] = {}
        self.nodes: list[EmulatedNode] = []
        step = (1 << 64) // (8 * count)
        try:
            for i in range(count):
                tokens = [-(1 << 63) + step * (i + count * j) + 12345 for j in range(8)]
                self.nodes.append(EmulatedNode(
                    self, listen[i] if listen else ("127.0.0.1", 0),
                    advertised[i] if advertised else None, tokens, f"127.0.1.{i + 1}",
                    peers_v2, datacenters[i] if datacenters else "datacenter1",
                    racks[i] if racks else "rack1", columns))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "EmulatedCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def contact(self, i: int = 0) -> str:
        """``HOST:PORT`` where node ``i`` listens."""
        host, port = self.nodes[i].endpoint
        return f"{host}:{port}"

    def owner(self, key: int) -> int:
        """The index of the node owning ``key``'s token."""
        ring = sorted((t, i) for i, n in enumerate(self.nodes) for t in n.tokens)
        at = bisect.bisect_left([t for t, _ in ring], murmur3_token(key))
        return ring[at % len(ring)][1]


    def walk(self, key: int) -> list[int]:
        """The indexes of the nodes met walking the ring clockwise from ``key``'s token, each
        once, in the order met."""
        ring = sorted((t, i) for i, n in enumerate(self.nodes) for t in n.tokens)
        at = bisect.bisect_left([t for t, _ in ring], murmur3_token(key))
        met: list[int] = []
        for j in range(len(ring)):
            node = ring[(at + j) % len(ring)][1]
            if node not in met:
                met.append(node)
        return met

    def replicas(self, key: int) -> list[int]:
        """The indexes of the replicas of ``key``'s token, as the official driver places them
        (its ``make_token_replica_map`` of the cluster's replication), in its order."""
        from cassandra.metadata import Murmur3Token, ReplicationStrategy

        class Host:
            def __init__(self, i: int, node: EmulatedNode) -> None:
                self.i, self.datacenter, self.rack = i, node.datacenter, node.rack

        hosts = [Host(i, n) for i, n in enumerate(self.nodes)]
        owners = {Murmur3Token(t): hosts[i] for i, n in enumerate(self.nodes) for t in n.tokens}
        ring = sorted(owners)
        options = dict(self.replication)
        strategy = ReplicationStrategy.create(options.pop("class"), options)
        made = strategy.make_token_replica_map(owners, ring)
        at = bisect.bisect_left([t.value for t in ring], murmur3_token(key))
        return [h.i for h in made[ring[at % len(ring)]]]


def free_port_on(hosts: Sequence[str]) -> int:
    """A port free on every one of ``hosts`` (loopback addresses) at once."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = probe.getsockname()[1]
        try:
            for host in hosts:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise OSError(f"no port free on all of {hosts}")
