"""A CQL load's routing to ScyllaDB shards and tablets (:mod:`bulkwire.cql_scylla`), for
:class:`~bulkwire.load._cql_session._CqlSession`.

:class:`ShardRouter` holds a session's connections by (node, shard): a node's first
connection (to its ordinary port) says how it shards; a ScyllaDB node with the Murmur3
partitioner then gets one connection per shard as rows go there, made to its shard-aware port
from a local port of that shard, else (no such port, or it refused or closed the connection)
to its ordinary port again until the node hands a connection of that shard, at most
:data:`RECONNECTS_PER_SHARD` times the shard count (and :data:`CONNECTS_PER_NODE`
connections to a node in all); past that, the shard's rows go on the node's first connection
(the node forwards them), one run at a time (:meth:`ShardRouter.using`). A node that is not
ScyllaDB keeps its one connection. :meth:`ShardRouter.split` says the (node, shard) of each
row: a tablet learned (:meth:`ShardRouter.learn`, from the answers' payloads) names its
replica and shard; else the ring's node, at the shard of the token once a connection to the
node said how it shards (before that, the session splits the node's rows by shard itself,
once its first connection is made).
"""
from __future__ import annotations

import itertools
import threading
import uuid
from typing import Any, Callable

from ..cql_scylla import (TABLETS_OPTION, Sharding, Tablet, TabletMap, parse_supported,
                          sharding_of, source_ports)
from ..errors import ConnectError, ConnectionLostError, TransportTimeoutError

#: Connections to the ordinary port tried per shard (times the shard count) to find one of
#: a shard, and local ports tried at the shard-aware port.
RECONNECTS_PER_SHARD = 4
PORT_TRIES = 8
#: Connections made to one node beyond its first, at most, whatever its shard count says.
CONNECTS_PER_NODE = 256
#: The shard key of a node's first connection.
FIRST = -1
#: Rows of a batch sent first to learn their tablets (:meth:`ShardRouter.phases`).
PROBE_ROWS = 64


def _offers_tablets(body: bytes | None) -> bool:
    """Whether a SUPPORTED ``body`` offers tablet routing."""
    try:
        return bool(body) and TABLETS_OPTION in parse_supported(body)
    except ValueError:
        return False


class ShardRouter:
    """The connections of one session by (node, :data:`FIRST` or a shard), and its tablets.

    ``open(node, local_port=0, port=None) -> connection`` makes a ready connection to node
    (identified and the statement prepared; ``port`` None: its ordinary port); ``tls``
    whether the session uses TLS (the shard-aware port of TLS is then used);
    ``hosts`` maps a host id to its node; ``usable(node)`` says whether a tablet's replica
    there may take rows (alive, in the local data centre)."""

    def __init__(self, open: Callable[..., Any], tls: bool, hosts: dict[uuid.UUID, int],
                 usable: Callable[[int], bool], supported: bytes | None = None) -> None:
        self.open, self.tls, self.hosts, self.usable = open, tls, hosts, usable
        self.conns: dict[tuple[int, int], Any] = {}
        self.sharding: dict[int, Sharding | None] = {}
        self.tablets = TabletMap()
        self.lock = threading.Lock()
        self.node_locks: dict[int, threading.Lock] = {}
        self.no_shard_port: set[int] = set()
        self.connects: dict[int, int] = {}  # connections made per node beyond its first
        self.fallback: dict[int, set[int]] = {}  # shards served by a node's first connection
        self.conn_locks: dict[int, threading.Lock] = {}  # by id() of a connection
        #: connections made per node, to the shard-aware and the ordinary ports
        self.made = {"shard-aware": 0, "ordinary": 0, "closed": 0}
        #: whether a batch's rows no tablet holds are probed first (:meth:`phases`): while
        #: the cluster offers tablet routing and probes teach tablets
        self.probing = _offers_tablets(supported)
        self._learned_before = 0
        self._reprobe = False  # whether the probe answered was not a batch's first

    def using(self, conn: Any) -> threading.Lock:
        """The lock held while a run uses ``conn``: a node's first connection may serve the
        rows of several shards (those no connection of their own could be made for), and a
        connection takes one run at a time."""
        with self.lock:
            return self.conn_locks.setdefault(id(conn), threading.Lock())

    def _spend(self, node: int) -> bool:
        """Whether one more connection to ``node`` may be made (:data:`CONNECTS_PER_NODE`)."""
        with self.lock:
            made = self.connects.get(node, 0)
            if made >= CONNECTS_PER_NODE:
                return False
            self.connects[node] = made + 1
            return True

    def _node_lock(self, node: int) -> threading.Lock:
        with self.lock:
            return self.node_locks.setdefault(node, threading.Lock())

    def get(self, node: int, shard: int = FIRST) -> Any:
        """The connection for ``shard`` of ``node`` (made now if need be): that shard's, the
        node's first one where the node does not shard or no connection of the shard could
        be made."""
        with self.lock:
            conn = self.conns.get((node, shard))
        if conn is not None:
            return conn
        with self._node_lock(node):
            with self.lock:
                first = self.conns.get((node, FIRST))
            if first is None:
                first = self.open(node)
                sharding = sharding_of(getattr(first, "supported", None))
                with self.lock:
                    self.conns[(node, FIRST)] = first
                    self.sharding[node] = sharding
                    if sharding is not None:
                        self.conns.setdefault((node, sharding.shard), first)
            sharding = self.sharding.get(node)
            if shard == FIRST or sharding is None or not 0 <= shard < sharding.nr_shards:
                return first
            with self.lock:
                conn = self.conns.get((node, shard))
            if conn is None:
                conn = self._shard_conn(node, shard, sharding)
                with self.lock:
                    if conn is None:  # none of its own: the first connection serves it
                        conn = first
                        self.fallback.setdefault(node, set()).add(shard)
                    self.conns.setdefault((node, shard), conn)
            return conn

    def _keep(self, node: int, conn: Any, want: int) -> Any:
        """``conn`` when its shard is ``want``; else kept for its own shard when that has
        none yet (closed otherwise); None then."""
        found = sharding_of(getattr(conn, "supported", None))
        if found is not None and found.shard == want:
            return conn
        with self.lock:
            if found is not None and (node, found.shard) not in self.conns:
                self.conns[(node, found.shard)] = conn
                return None
        conn.close()
        return None

    def _shard_conn(self, node: int, shard: int, sharding: Sharding) -> Any:
        """A connection of ``shard``, or None when none could be made within the bounds."""
        port = sharding.port(self.tls)
        if port is not None and node not in self.no_shard_port:
            for local in itertools.islice(source_ports(shard, sharding.nr_shards), PORT_TRIES):
                if not self._spend(node):
                    return None
                try:
                    conn = self.open(node, local_port=local, port=port)
                except ConnectError as exc:
                    if "in use" in str(exc) or "not available" in str(exc):
                        continue  # that local port is taken: the next one of the shard
                    self.no_shard_port.add(node)
                    break
                except (ConnectionLostError, TransportTimeoutError):
                    self.no_shard_port.add(node)  # it accepts, then closes: not usable
                    self.made["closed"] += 1
                    break
                self.made["shard-aware"] += 1
                kept = self._keep(node, conn, shard)
                if kept is not None:
                    return kept
                break  # the port does not bind by the local port (a NAT between): reconnect
        for _ in range(RECONNECTS_PER_SHARD * sharding.nr_shards):
            with self.lock:
                if (node, shard) in self.conns:
                    return self.conns[(node, shard)]
            if not self._spend(node):
                return None
            try:
                conn = self.open(node)
            except (ConnectError, ConnectionLostError, TransportTimeoutError):
                return None
            self.made["ordinary"] += 1
            kept = self._keep(node, conn, shard)
            if kept is not None:
                return kept
        return None

    # ------------------------------------------------------------------ tablets

    def learn(self, conn: Any) -> None:
        """Keeps the tablets the answers read on ``conn`` named."""
        take = getattr(conn, "take_payloads", None)
        if take is None or getattr(conn, "closed", True):
            return
        entries, _ = take()
        for entry in entries:
            self.tablets.learn(entry)

    def choose(self, tablet: Tablet) -> tuple[int, int] | None:
        """Where a tablet's rows go: its first replica on a node of the ring that may take
        rows, at the replica's shard when the node has it (else -1: any connection); None
        when no replica is such a node (the ring routes them)."""
        for host, shard in tablet.replicas:
            node = self.hosts.get(host)
            if node is None or not self.usable(node):
                continue
            sharding = self.sharding.get(node)
            return node, shard if sharding is not None and shard < sharding.nr_shards else -1
        return None

    def phases(self, np: Any, tokens: bytes, rows: int) -> tuple[Any, list]:
        """The parts a batch of ``rows`` rows (their ``tokens``) is sent in, in order: the
        first (None: every row) and the list of the later ones (int32 row arrays). While
        :attr:`probing`, a batch with rows no tablet learned holds sends first a probe of
        :data:`PROBE_ROWS` of them, spread over them, so that the answers teach their
        tablets before the rest is routed."""
        if not self.probing or rows <= 2 * PROBE_ROWS:
            return None, []
        chosen = np.frombuffer(tokens, dtype=np.int64)
        held = self.tablets.route(np, chosen, lambda tablet: (0, 0))[0] >= 0
        unknown = np.flatnonzero(~held)
        if not len(unknown):
            return None, []
        probe = unknown[::max(1, len(unknown) // PROBE_ROWS)][:PROBE_ROWS].astype(np.int32)
        rest = np.setdiff1d(np.arange(rows, dtype=np.int32), probe).astype(np.int32)
        self._learned_before, self._reprobe = self.tablets.learned, False
        return probe, [rest]

    def probed(self, np: Any, tokens: bytes, rest: Any) -> list:
        """The parts to send once a probe was answered, ``rest`` the rows left of the batch
        (``tokens``: those of the whole batch). When the probe taught a tablet and rows of
        ``rest`` are still held by none learned: first a probe of one of them per gap
        between the tablets learned (each gap holds one tablet unknown at least, whose
        payload the row's answer brings when the ring misroutes it), then the others; else
        ``[rest]``. Probing ends for the load when a batch's first probe taught no tablet
        (a table without tablets, or rows the ring routes right)."""
        taught = self.tablets.learned != self._learned_before
        first, self._reprobe = not self._reprobe, True
        if not taught:
            if first:
                self.probing = False
            return [rest]
        chosen = np.frombuffer(tokens, dtype=np.int64)[rest]
        held = self.tablets.route(np, chosen, lambda tablet: (0, 0))[0] >= 0
        unknown = rest[~held]
        if not len(unknown):
            return [rest]
        gaps = self.tablets.gaps(np, chosen[~held])
        probe = np.sort(unknown[np.unique(gaps, return_index=True)[1]][:PROBE_ROWS])
        probe = probe.astype(np.int32)
        self._learned_before = self.tablets.learned
        left = np.setdiff1d(rest, probe).astype(np.int32)
        return [probe, left] if len(left) else [probe]

    def split(self, np: Any, tokens: Any, owners: Any) -> Any:
        """Each row's shard (int32; -1: the node's first connection), and ``owners`` (each
        row's node by the ring, int32) changed where a tablet names another: ``(owners,
        shards)``."""
        shards = np.full(len(tokens), -1, dtype=np.int32)
        owners = owners.copy()
        routed = np.zeros(len(tokens), dtype=bool)
        if len(self.tablets):
            t_nodes, t_shards = self.tablets.route(np, tokens, self.choose)
            routed = t_nodes >= 0
            owners[routed] = t_nodes[routed]
            shards[routed] = t_shards[routed]
        for node in np.unique(owners[~routed]):
            sharding = self.sharding.get(int(node))  # known once a connection was made
            if sharding is None:
                continue
            rows = np.flatnonzero((owners == node) & ~routed)
            shards[rows] = np.frombuffer(sharding.shards(tokens[rows].tobytes()),
                                         dtype=np.int32)
            served = self.fallback.get(int(node))
            if served:  # one job for the shards the first connection serves
                shards[(owners == node) & np.isin(shards, list(served))] = sharding.shard
        return owners, shards

    def drop(self, node: int) -> list:
        """Forgets ``node``'s connections, returned (distinct) for closing."""
        with self.lock:
            keys = [k for k in self.conns if k[0] == node]
            conns = [self.conns.pop(k) for k in keys]
            self.connects.pop(node, None)
            self.fallback.pop(node, None)
        return list({id(c): c for c in conns}.values())

    def release(self) -> None:
        """Drops the session's callables (``open``, ``usable``: bound methods of the session
        that holds this router), so that an ended session is no reference cycle."""
        self.open = self.usable = _ended

    def all(self) -> list:
        """Every connection (distinct), forgotten."""
        with self.lock:
            conns, self.conns = list(self.conns.values()), {}
        return list({id(c): c for c in conns}.values())


def _ended(*args: Any, **kwargs: Any) -> Any:
    """What an ended session's router calls: nothing more may be opened or chosen."""
    raise RuntimeError("the CQL session has ended")
