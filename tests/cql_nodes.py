"""Emulated CQL nodes in this process: enough of Cassandra for a load into one table.

Each :class:`EmulatedNode` listens on a loopback address and answers the native protocol
(v4 frames) as a node of a cluster does for ``bulkwire.cql.load_parquet``: the handshake,
``system_schema.columns`` of the one table ``ks.t (id bigint PRIMARY KEY, v text)``,
``system_schema.keyspaces`` (the keyspace's replication), ``system.local`` (with the node's
``host_id``, data centre and rack), ``system.peers_v2`` (or, for a node that has none, the
*Invalid* error an older server or Scylla answers) and ``system.peers``, ``PREPARE`` of the
INSERT, and
``EXECUTE`` of its rows, which it records. Every node advertises the client address
(and port, in ``system.peers_v2``) it is given, which need not be where it listens: the
node behind a port mapping, a NAT or a tunnel.

>>> with EmulatedCluster(2, advertised=[("127.0.0.201", 9042), ("127.0.0.202", 9042)]) as c:
...     c.nodes[0].endpoint[0]
'127.0.0.1'

``EmulatedCluster.owner(id)`` says which node owns a bigint key's token, computed with the
official driver's Murmur3 and the ring's rule (the first token at or after the key's,
clockwise), independently of bulkwire's own ring.
"""
from __future__ import annotations

import bisect
import hashlib
import re
import socket
import struct
import threading
import uuid
from typing import Sequence

from cql_frames import read_frame as _frame

KEYSPACE, TABLE = "ks", "t"
#: the table's columns: name -> (CQL type id, kind)
COLUMNS = {"id": (0x0002, "partition_key"), "v": (0x000D, "regular")}
TYPE_INET, TYPE_INT, TYPE_TEXT, TYPE_UUID, TYPE_MAP, TYPE_SET = (0x0010, 0x0009, 0x000D,
                                                                 0x000C, 0x0021, 0x0022)
INVALID = 0x2200


def _asked(cql: str, columns: list, rows: list) -> bytes:
    """The Rows body of the columns ``SELECT a, b FROM ...`` asks for, in its order, as a
    node answers it, from every column the table has (``columns``, each row's cells)."""
    names = [n.strip() for n in cql[len("SELECT "):cql.index(" FROM ")].split(",")]
    where = [[c for c, _ in columns].index(n) for n in names]
    return rows_body([columns[i] for i in where], [[row[i] for i in where] for row in rows])


def _short_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def _cell(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _inet(address: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)


def _tokens(tokens: Sequence[int]) -> bytes:
    items = [str(t).encode() for t in tokens]
    return struct.pack(">i", len(items)) + b"".join(struct.pack(">i", len(i)) + i for i in items)


def _text_map(items: dict) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(
        _cell(k.encode()) + _cell(v.encode()) for k, v in items.items())


def rows_body(columns: Sequence[tuple[str, int]], rows: Sequence[Sequence[bytes | None]]) -> bytes:
    """A RESULT Rows body of ``columns`` (name, type id; a set is of text, a map of text to
    text) in table system.t."""
    out = [struct.pack(">iii", 2, 1, len(columns)), _short_string("system"), _short_string("t")]
    for name, type_id in columns:
        out.append(_short_string(name) + struct.pack(">H", type_id))
        if type_id == TYPE_SET:
            out.append(struct.pack(">H", TYPE_TEXT))
        if type_id == TYPE_MAP:
            out.append(struct.pack(">HH", TYPE_TEXT, TYPE_TEXT))
    out.append(struct.pack(">i", len(rows)))
    out += [b"".join(_cell(c) for c in row) for row in rows]
    return b"".join(out)


def error_body(code: int, message: str) -> bytes:
    return struct.pack(">i", code) + _short_string(message)


def murmur3_token(key: int) -> int:
    """The token of a bigint partition key, as the official driver computes it."""
    from cassandra.metadata import Murmur3Token

    return Murmur3Token.from_key(struct.pack(">q", key)).value


class EmulatedNode:
    """One node: listens on ``listen`` (host, port 0 for any), advertises ``advertised``
    (address, native port or None) and owns ``tokens``. ``rows`` records the ids of the
    EXECUTEs it answered, ``connections`` counts the connections it accepted."""

    def __init__(self, cluster: "EmulatedCluster", listen: tuple[str, int],
                 advertised: tuple[str, int | None] | None, tokens: Sequence[int],
                 peer: str, peers_v2: bool, datacenter: str = "datacenter1",
                 rack: str = "rack1") -> None:
        self.cluster = cluster
        self.listener = socket.create_server(listen)
        self.endpoint: tuple[str, int] = self.listener.getsockname()[:2]
        self.advertised = advertised or self.endpoint
        self.tokens = list(tokens)
        self.peer = peer  # its cluster (listen) address, as system.peers names it
        self.peers_v2 = peers_v2
        self.datacenter, self.rack = datacenter, rack
        self.host_id = uuid.uuid4()
        self.rows: list[int] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stops listening (the node is gone: nothing answers at its address)."""
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30.0)
        with conn:
            try:
                while True:
                    stream, opcode, body = _frame(conn)
                    answer_opcode, answer = self._answer(opcode, body)
                    conn.sendall(struct.pack(">BBhBi", 0x84, 0, stream, answer_opcode,
                                             len(answer)) + answer)
            except (EOFError, OSError):
                pass

    def _answer(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == 0x05:  # OPTIONS -> SUPPORTED
            return 0x06, struct.pack(">H", 0)
        if opcode == 0x01:  # STARTUP -> READY
            return 0x02, b""
        if opcode == 0x07:  # QUERY
            (length,) = struct.unpack_from(">i", body)
            return self._query(body[4:4 + length].decode())
        if opcode == 0x09:  # PREPARE
            (length,) = struct.unpack_from(">i", body)
            return 0x08, self._prepare(body[4:4 + length].decode())
        if opcode == 0x0A:  # EXECUTE
            self._execute(body)
            return 0x08, struct.pack(">i", 1)
        return 0x00, error_body(0x000A, f"opcode 0x{opcode:02x} is not emulated")

    def _query(self, cql: str) -> tuple[int, bytes]:
        others = [n for n in self.cluster.nodes if n is not self]
        if "system_schema.columns" in cql:
            found = KEYSPACE in cql and TABLE in cql
            return 0x08, rows_body([("column_name", TYPE_TEXT), ("kind", TYPE_TEXT)],
                                   [[n.encode(), kind.encode()] for n, (_, kind) in
                                    COLUMNS.items()] if found else [])
        if "system_schema.keyspaces" in cql:
            found = f"'{KEYSPACE}'" in cql
            return 0x08, rows_body([("replication", TYPE_MAP)],
                                   [[_text_map(self.cluster.replication)]] if found else [])
        where = [("data_center", TYPE_TEXT), ("rack", TYPE_TEXT)]
        if "FROM system.local" in cql:
            return 0x08, _asked(
                cql, [("host_id", TYPE_UUID), ("rpc_address", TYPE_INET), *where,
                      ("tokens", TYPE_SET)],
                [[self.host_id.bytes, _inet(self.advertised[0]), self.datacenter.encode(),
                  self.rack.encode(), _tokens(self.tokens)]])
        if "FROM system.peers_v2" in cql:
            if not self.peers_v2:
                return 0x00, error_body(INVALID, "unconfigured table peers_v2")
            return 0x08, _asked(
                cql, [("host_id", TYPE_UUID), ("peer", TYPE_INET), ("native_address", TYPE_INET),
                      ("native_port", TYPE_INT), *where, ("tokens", TYPE_SET)],
                [[n.host_id.bytes, _inet(n.peer), _inet(n.advertised[0]),
                  None if n.advertised[1] is None else struct.pack(">i", n.advertised[1]),
                  n.datacenter.encode(), n.rack.encode(), _tokens(n.tokens)] for n in others])
        if "FROM system.peers" in cql:
            return 0x08, _asked(
                cql, [("host_id", TYPE_UUID), ("peer", TYPE_INET), ("rpc_address", TYPE_INET),
                      *where, ("tokens", TYPE_SET)],
                [[n.host_id.bytes, _inet(n.peer), _inet(n.advertised[0]), n.datacenter.encode(),
                  n.rack.encode(), _tokens(n.tokens)] for n in others])
        return 0x00, error_body(INVALID, f"query not emulated: {cql}")

    @staticmethod
    def _prepare(cql: str) -> bytes:
        names = [n.strip('"') for n in re.search(r"\(([^)]*)\) VALUES", cql).group(1).split(", ")]
        statement_id = hashlib.md5(cql.encode()).digest()
        pk = [i for i, n in enumerate(names) if COLUMNS[n][1] == "partition_key"]
        out = [struct.pack(">iH", 4, len(statement_id)), statement_id,
               struct.pack(">iii", 1, len(names), len(pk)), struct.pack(f">{len(pk)}H", *pk),
               _short_string(KEYSPACE), _short_string(TABLE)]
        out += [_short_string(n) + struct.pack(">H", COLUMNS[n][0]) for n in names]
        out.append(struct.pack(">ii", 4, 0))  # no result metadata
        return b"".join(out)

    def _execute(self, body: bytes) -> None:
        (id_length,) = struct.unpack_from(">H", body)
        at = 2 + id_length + 3  # the id, the consistency, the flags
        (count,) = struct.unpack_from(">H", body, at)
        at += 2
        values = []
        for _ in range(count):
            (length,) = struct.unpack_from(">i", body, at)
            values.append(None if length < 0 else body[at + 4:at + 4 + length])
            at += 4 + max(length, 0)
        key = struct.unpack(">q", values[0])[0]
        with self.lock:
            self.rows.append(key)
        with self.cluster.lock:
            self.cluster.stored[key] = None if values[1] is None else values[1].decode()


class EmulatedCluster:
    """``count`` emulated nodes of one cluster, each listening on ``listen[i]`` (default
    127.0.0.1, any port) and advertising ``advertised[i]`` ((address, port or None); default
    where it listens), with 8 tokens each spread over the ring. ``peers_v2``: whether the
    nodes have ``system.peers_v2`` (Cassandra 4 and later) or only ``system.peers``.
    ``datacenters[i]`` and ``racks[i]``: node i's data centre and rack (default
    ``datacenter1``, ``rack1``); ``replication``: the keyspace's replication map (default
    SimpleStrategy, one replica). ``stored`` maps each id written to its ``v``."""

    def __init__(self, count: int, *, advertised: Sequence[tuple[str, int | None]] | None = None,
                 listen: Sequence[tuple[str, int]] | None = None, peers_v2: bool = True,
                 datacenters: Sequence[str] | None = None, racks: Sequence[str] | None = None,
                 replication: dict[str, str] | None = None) -> None:
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
                    racks[i] if racks else "rack1"))
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
