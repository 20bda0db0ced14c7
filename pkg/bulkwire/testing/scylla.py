"""An emulated ScyllaDB cluster in this process: enough of the native protocol (v4) and of
ScyllaDB's extensions for a load into one table, to test and measure shard and tablet routing
without a ScyllaDB server. It is an emulation: it follows ScyllaDB's documented protocol
extensions and the official Python driver's rules, and proves nothing about a real server.

>>> with ScyllaCluster(nodes=1, shards=4) as cluster:
...     node = cluster.nodes[0]
...     node.shards, node.shard_port > 0
(4, True)

Each :class:`ScyllaNode` listens on an ordinary port (each connection accepted there bound to
the next shard, round robin) and, unless told not to, on a shard-aware port (a connection
bound to the shard ``client port % shards``). It answers OPTIONS with ``SCYLLA_SHARD`` (the
connection's shard), ``SCYLLA_NR_SHARDS``, ``SCYLLA_SHARDING_IGNORE_MSB``,
``SCYLLA_PARTITIONER``, ``SCYLLA_SHARD_AWARE_PORT`` and, in tablets mode,
``TABLETS_ROUTING_V1``; the system tables of the one table ``ks.t (id bigint PRIMARY KEY, v
text)`` (``system.local``, ``system.peers``; ``system.peers_v2`` is answered *Invalid*, as
ScyllaDB does; ``SELECT *`` and any list of their columns); PREPARE of an INSERT into it;
and EXECUTE of its rows, each recorded with whether it arrived on a shard owning it:

- vnodes (``tablets=0``): the ring's replicas (``rf`` nodes met clockwise from the token),
  on the shard :func:`shard_of` the token;
- tablets (``tablets=N``): N tablets of equal token ranges, tablet ``i`` on nodes
  ``i, i+1, ...`` (``rf`` of them) at shard ``(i + k) % shards`` of its k-th replica. A row
  that reaches another node or shard is answered with the ``tablets-routing-v1`` custom
  payload naming its tablet's range and replicas, when the connection asked for it in
  STARTUP.

:attr:`ScyllaCluster.stats` counts the rows, and where each arrived: ``owned`` (on an owning
shard of a replica), else ``forwarded``, split into ``other_shard`` (a replica, another of its
shards: the node forwards it between shards) and ``other_node`` (a node that is no replica: it
forwards it to the replicas); in tablets mode the forwarded rows are split again by whether
their tablet's payload had been answered before they arrived (``after_payload``, to any
connection) or not (``before_payload``). :attr:`ScyllaCluster.requests` counts requests per
(node, shard).
"""
from __future__ import annotations

import bisect
import socket
import struct
import threading
import uuid
from typing import Any, Callable, Sequence

KEYSPACE, TABLE = "ks", "t"
MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"
OPTIONS, STARTUP, QUERY, PREPARE, EXECUTE, REGISTER = 0x05, 0x01, 0x07, 0x09, 0x0A, 0x0B
ERROR, READY, SUPPORTED, RESULT = 0x00, 0x02, 0x06, 0x08
CUSTOM_PAYLOAD = 0x04
_BIGINT, _INT, _UUID, _VARCHAR, _INET, _BOOLEAN, _MAP, _SET = (
    0x0002, 0x0009, 0x000C, 0x000D, 0x0010, 0x0004, 0x0021, 0x0022)
_PREPARED_ID = b"\x5c\x11"


def shard_of(token: int, shards: int, ignore_msb: int) -> int:
    """The shard owning ``token`` on a node of ``shards`` shards (ScyllaDB's rule: the token
    biased by 2**63, shifted left by ``ignore_msb`` within 64 bits, times ``shards``, its
    bits above the 64th)."""
    biased = ((token + (1 << 63)) << ignore_msb) & ((1 << 64) - 1)
    return (biased * shards) >> 64


def token_of(key: int) -> int:
    """The Murmur3 token of a bigint partition key."""
    from .. import _core

    return _core.cql_partition_token([struct.pack(">q", key)])


# ------------------------------------------------------------------------------ wire bits


def _sized(raw: bytes | None, head: str) -> bytes:
    """``raw`` after its length packed as ``head`` (-1 for None: a null cell)."""
    return struct.pack(head, -1 if raw is None else len(raw)) + (raw or b"")


def _string(text: str | bytes) -> bytes:
    """A ``[string]``: its length in 2 bytes, then its UTF-8 bytes."""
    return _sized(text.encode() if isinstance(text, str) else text, ">H")


def _cell(value: bytes | None) -> bytes:
    """A ``[bytes]`` cell: its length in 4 bytes (-1: null), then its bytes."""
    return _sized(value, ">i")


def _text_set(items: Sequence[str]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(_cell(i.encode()) for i in items)


def _text_map(items: dict[str, str]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(
        _cell(k.encode()) + _cell(v.encode()) for k, v in items.items())


def _inet(address: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)


def _rows(keyspace: str, table: str, columns: list[tuple[str, bytes]],
          values: list[list[bytes | None]]) -> bytes:
    """A RESULT Rows body (global table spec): ``columns`` (name, type option), the cells."""
    spec = [struct.pack(">iii", 2, 0x0001, len(columns)), _string(keyspace), _string(table)]
    spec += [_string(name) + option for name, option in columns]
    cells = [_cell(value) for row in values for value in row]
    return b"".join(spec) + struct.pack(">i", len(values)) + b"".join(cells)


def _error(code: int, message: str) -> tuple[int, bytes]:
    return ERROR, struct.pack(">i", code) + _string(message)


def _take(stream: Any, n: int) -> bytes:
    """``n`` bytes of a buffered socket reader; ``EOFError`` when the client closed first."""
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data


def _tablet_payload(first: int, last: int, replicas: Sequence[tuple[uuid.UUID, int]]) -> bytes:
    items = struct.pack(">i", len(replicas)) + b"".join(
        _cell(_cell(host.bytes) + _cell(struct.pack(">i", shard))) for host, shard in replicas)
    return _cell(struct.pack(">q", first)) + _cell(struct.pack(">q", last)) + _cell(items)


_TYPES = {"key": _VARCHAR, "host_id": _UUID, "peer": _INET, "rpc_address": _INET,
          "native_address": _INET, "broadcast_address": _INET, "listen_address": _INET,
          "native_port": _INT, "data_center": _VARCHAR, "rack": _VARCHAR, "tokens": _SET,
          "partitioner": _VARCHAR, "cluster_name": _VARCHAR, "release_version": _VARCHAR,
          "cql_version": _VARCHAR, "schema_version": _UUID, "bootstrapped": _VARCHAR,
          "preferred_ip": _INET}


def _option(kind: int) -> bytes:
    return struct.pack(">HH", _SET, _VARCHAR) if kind == _SET else struct.pack(">H", kind)


# ------------------------------------------------------------------------------ the nodes


class ScyllaNode:
    """One emulated node: ``shards`` shards, its ``tokens`` on the ring, listening on
    127.0.0.1 at :attr:`port` and (``shard_aware_port``) :attr:`shard_port` (0: none).
    ``shard_port_closes``: the shard-aware port accepts, then closes each connection at once.
    ``supported``: SUPPORTED options replacing the node's own (to play a node that lies)."""

    def __init__(self, cluster: "ScyllaCluster", index: int, shards: int,
                 tokens: Sequence[int], host: str = "127.0.0.1",
                 ports: tuple[int, int] = (0, 0), *, shard_aware_port: bool = True,
                 shard_port_closes: bool = False, ignore_msb: int = 12,
                 supported: dict[str, str] | None = None) -> None:
        self.cluster, self.index, self.shards = cluster, index, shards
        self.tokens, self.ignore_msb = list(tokens), ignore_msb
        self.host_id = uuid.uuid5(uuid.NAMESPACE_DNS, f"scylla-node-{index}-{id(cluster)}")
        self.override = supported
        self.shard_port_closes = shard_port_closes
        self.lock = threading.Lock()
        self.next_shard = 0
        self.closed = False
        self.sockets: list[socket.socket] = []
        self.host = host
        self.listener = socket.create_server((host, ports[0]))
        self.port = self.listener.getsockname()[1]
        try:
            self.shard_listener = socket.create_server((host, ports[1])) if shard_aware_port \
                else None
        except OSError:
            self.listener.close()
            raise
        self.shard_port = self.shard_listener.getsockname()[1] if self.shard_listener else 0
        #: connections accepted on each port, and the shards they were bound to
        self.connections: list[tuple[str, int]] = []
        for listener, aware in ((self.listener, False), (self.shard_listener, True)):
            if listener is not None:
                threading.Thread(target=self._accept, args=(listener, aware),
                                 daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self.closed = True
        for s in [self.listener, self.shard_listener, *self.sockets]:
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def supported(self, shard: int) -> dict[str, str]:
        options: dict[str, Any] = {"CQL_VERSION": "3.0.0", "COMPRESSION": [],
                   "SCYLLA_SHARD": str(shard), "SCYLLA_NR_SHARDS": str(self.shards),
                   "SCYLLA_PARTITIONER": MURMUR3, "SCYLLA_SHARDING_ALGORITHM":
                   "biased-token-round-robin",
                   "SCYLLA_SHARDING_IGNORE_MSB": str(self.ignore_msb)}
        if self.shard_port:
            options["SCYLLA_SHARD_AWARE_PORT"] = str(self.shard_port)
        if self.cluster.tablets:
            options["TABLETS_ROUTING_V1"] = ""
        if self.override is not None:
            options.update(self.override)
        return options

    # -------------------------------------------------------------- connections

    def _accept(self, listener: socket.socket, aware: bool) -> None:
        while not self.closed:
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            with self.lock:
                if aware:
                    shard = peer[1] % self.shards
                else:
                    shard, self.next_shard = self.next_shard, (self.next_shard + 1) % self.shards
                self.connections.append(("shard-aware" if aware else "ordinary", shard))
                self.sockets.append(conn)
            if aware and self.shard_port_closes:
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn, shard), daemon=True).start()

    def _serve(self, conn: socket.socket, shard: int) -> None:
        state = {"tablets": False}
        reader = conn.makefile("rb")
        try:
            while True:
                version, _, stream, opcode, length = struct.unpack(">BBhBi", _take(reader, 9))
                body = _take(reader, length)
                if version & 0x7F != 4:
                    answer, payload = _error(0x000A, "Invalid or unsupported protocol version "
                                                     f"({version & 0x7F}); supported: 4"), None
                    reply = 0x80 | (version & 0x7F)
                else:
                    answer, payload = self._answer(opcode, body, shard, state)
                    reply = 0x84
                flags, extra = 0, b""
                if payload is not None:
                    flags, extra = CUSTOM_PAYLOAD, struct.pack(">H", 1) + _string(
                        "tablets-routing-v1") + _cell(payload)
                data = extra + answer[1]
                conn.sendall(struct.pack(">BBhBi", reply, flags, stream, answer[0], len(data))
                             + data)
        except (EOFError, OSError, struct.error):
            pass
        finally:
            reader.close()
            conn.close()

    def _answer(self, opcode: int, body: bytes, shard: int,
                state: dict) -> tuple[tuple[int, bytes], bytes | None]:
        if opcode == OPTIONS:
            options = self.supported(shard)
            out = struct.pack(">H", len(options))
            for key, value in options.items():
                values = [value] if isinstance(value, str) else list(value)
                out += _string(key) + struct.pack(">H", len(values)) + b"".join(
                    _string(v) for v in values)
            return (SUPPORTED, out), None
        if opcode == STARTUP:
            (count,) = struct.unpack_from(">H", body)
            at, asked = 2, {}
            for _ in range(count):
                (n,) = struct.unpack_from(">H", body, at)
                key = body[at + 2:at + 2 + n].decode()
                at += 2 + n
                (n,) = struct.unpack_from(">H", body, at)
                asked[key] = body[at + 2:at + 2 + n].decode()
                at += 2 + n
            state["tablets"] = bool(self.cluster.tablets) and "TABLETS_ROUTING_V1" in asked
            return (READY, b""), None
        if opcode == REGISTER:
            return (READY, b""), None
        if opcode in (QUERY, PREPARE):
            (n,) = struct.unpack_from(">i", body)
            text = body[4:4 + n].decode()
            if opcode == PREPARE:
                return self._prepared(text), None
            return self._query(text), None
        if opcode == EXECUTE:
            return self._execute(body, shard, state["tablets"])
        return _error(0x000A, f"opcode {opcode} is not emulated"), None

    # -------------------------------------------------------------- queries

    def _query(self, text: str) -> tuple[int, bytes]:
        compact = " ".join(text.split())
        lower = compact.lower()
        if " from system.peers_v2" in lower:
            return _error(0x2200, "unconfigured table peers_v2")
        if " from system_schema.columns" in lower and lower.startswith("select column_name, kind"):
            option = struct.pack(">H", _VARCHAR)
            return RESULT, _rows("system_schema", "columns",
                                 [("column_name", option), ("kind", option)],
                                 [[b"id", b"partition_key"], [b"v", b"regular"]])
        if " from system_schema.keyspaces" in lower:
            if "replication" not in lower.split(" from ")[0] and "*" not in lower:
                return RESULT, _rows("system_schema", "keyspaces", [], [])
            return RESULT, self._keyspaces(lower)
        if " from system.local" in lower or " from system.peers" in lower:
            local = " from system.local" in lower
            nodes = [self] if local else [n for n in self.cluster.nodes if n is not self]
            names = [c.strip() for c in compact[len("SELECT "):lower.index(" from ")].split(",")]
            if names == ["*"]:
                names = (["key", "host_id", "broadcast_address", "listen_address", "rpc_address",
                          "data_center", "rack", "tokens", "partitioner", "cluster_name",
                          "release_version", "cql_version", "schema_version", "bootstrapped"]
                         if local else ["peer", "host_id", "rpc_address", "data_center",
                                        "rack", "tokens", "release_version",
                                        "schema_version", "preferred_ip"])
            columns = [(n, _option(_TYPES.get(n, _VARCHAR))) for n in names]
            return RESULT, _rows("system", "local" if local else "peers", columns,
                                 [[node._cell(n) for n in names] for node in nodes])
        if " from system_schema." in lower or " from system." in lower:
            return RESULT, _rows("system", "any", [("keyspace_name", struct.pack(">H", _VARCHAR))],
                                 [])
        return _error(0x2200, f"the emulated node does not answer {compact!r}")

    def _keyspaces(self, lower: str) -> bytes:
        text = struct.pack(">H", _VARCHAR)
        columns = [("keyspace_name", text), ("durable_writes", struct.pack(">H", _BOOLEAN)),
                   ("replication", struct.pack(">HHH", _MAP, _VARCHAR, _VARCHAR))]
        replication = {"class": "org.apache.cassandra.locator.SimpleStrategy",
                       "replication_factor": str(self.cluster.rf)}
        row = [KEYSPACE.encode(), b"\x01", _text_map(replication)]
        if "keyspace_name" in lower.split(" from ")[0] or "*" in lower:
            return _rows("system_schema", "keyspaces", columns, [row])
        return _rows("system_schema", "keyspaces", columns[2:], [row[2:]])

    def _cell(self, name: str) -> bytes | None:
        address = self.host
        cells = {"key": b"local", "host_id": self.host_id.bytes, "peer": _inet(address),
                 "broadcast_address": _inet(address), "listen_address": _inet(address),
                 "rpc_address": _inet(address), "native_address": _inet(address),
                 "native_port": struct.pack(">i", self.port),
                 "data_center": b"datacenter1", "rack": b"rack1",
                 "tokens": _text_set([str(t) for t in self.tokens]),
                 "partitioner": MURMUR3.encode(), "cluster_name": b"emulated",
                 "release_version": b"3.0.8", "cql_version": b"3.3.1",
                 "schema_version": uuid.UUID(int=1).bytes, "bootstrapped": b"COMPLETED"}
        return cells.get(name)

    def _prepared(self, text: str) -> tuple[int, bytes]:
        if "insert into" not in text.lower():
            return _error(0x2200, "the emulated node prepares only the INSERT of ks.t")
        names = [p.strip().strip('"') for p in text.split("(", 1)[1].split(")", 1)[0].split(",")]
        kinds = {"id": _BIGINT, "v": _VARCHAR}
        if sorted(names) != ["id", "v"] and names != ["id"]:
            return _error(0x2200, f"ks.t has no columns {names}")
        body = struct.pack(">i", 4) + _string(_PREPARED_ID)
        body += struct.pack(">iii", 0x0001, len(names), 1) + struct.pack(">H", names.index("id"))
        body += _string(KEYSPACE) + _string(TABLE)
        for n in names:
            body += _string(n) + struct.pack(">H", kinds[n])
        self._names = names
        return RESULT, body + struct.pack(">ii", 0x0004, 0)

    # -------------------------------------------------------------- rows

    def _execute(self, body: bytes, shard: int,
                 tablets: bool) -> tuple[tuple[int, bytes], bytes | None]:
        (n,) = struct.unpack_from(">H", body)
        at = 2 + n + 3  # the id, the consistency and the flags
        (count,) = struct.unpack_from(">H", body, at)
        at += 2
        values = []
        for _ in range(count):
            (length,) = struct.unpack_from(">i", body, at)
            values.append(None if length < 0 else body[at + 4:at + 4 + length])
            at += 4 + max(length, 0)
        names = getattr(self, "_names", ["id", "v"])
        key = struct.unpack(">q", values[names.index("id")])[0]
        if self.cluster.refuse is not None and self.cluster.refuse(key):
            return _error(0x2200, f"the emulated node refuses the row of id {key}"), None
        token = token_of(key)
        owners = self.cluster.owners(token)
        owned = (self.index, shard) in owners
        arrival = "owned" if owned else (
            "other_shard" if any(node == self.index for node, _ in owners) else "other_node")
        payload, tablet = None, None
        if self.cluster.tablets:
            first, last, replicas = self.cluster.tablet_of(token)
            tablet = first
            if not owned and tablets:
                payload = _tablet_payload(first, last, [(self.cluster.nodes[i].host_id, s)
                                                        for i, s in replicas])
                if self.cluster.payload_for is not None:  # a node that lies
                    payload = self.cluster.payload_for(key, payload)
        self.cluster.record(self.index, shard, key, arrival, tablet, payload is not None)
        return (RESULT, struct.pack(">i", 1)), payload


class ScyllaCluster:
    """``nodes`` emulated nodes (:class:`ScyllaNode`) of ``shards`` shards each, ``rf``
    replicas per token, and ``tablets`` tablets for the table (0: vnodes, 8 tokens per node
    spread over the ring). Node i listens on ``127.0.0.{first_host + i}``, every node at the
    same ports. ``payload_for(id, payload)``, when given, replaces the tablet payload a
    misrouted row is answered with (None: none), to play a node that lies; ``refuse(id)``,
    when it says so, has the row answered with an *Invalid* error. The other
    arguments go to every node. A context manager."""

    def __init__(self, nodes: int = 1, shards: int = 4, *, rf: int = 1, tablets: int = 0,
                 first_host: int = 61,
                 payload_for: Callable[[int, bytes], bytes | None] | None = None,
                 refuse: Callable[[int], bool] | None = None,
                 **node_options: Any) -> None:
        if not 1 <= rf <= nodes:
            raise ValueError(f"rf must be 1..{nodes}, not {rf}")
        self.rf, self.tablets, self.payload_for = rf, tablets, payload_for
        self.refuse = refuse
        self.lock = threading.Lock()
        self.stats = {"rows": 0, "owned": 0, "forwarded": 0, "other_shard": 0,
                      "other_node": 0, "before_payload": 0, "after_payload": 0}
        #: the tablets (their first token) a payload was answered for
        self.payloads: set[int | None] = set()
        #: requests per (node, shard), and the ids stored
        self.requests: dict[tuple[int, int], int] = {}
        self.stored: set[int] = set()
        #: each id's last arrival: whether on a shard owning it
        self.owned: dict[int, bool] = {}
        #: each id's last arrival: (node, shard, ``owned``/``other_shard``/``other_node``)
        self.arrivals: dict[int, tuple[int, int, str]] = {}
        self.nodes: list[ScyllaNode] = []
        step = (1 << 64) // (8 * nodes)
        # every node at the same ports on an address of its own (127.0.0.N), as a cluster
        # is: its peers are found at the port of the contact point
        for attempt in range(50):
            try:
                for i in range(nodes):
                    tokens = [-(1 << 63) + step * (i + nodes * j) + 12345 for j in range(8)]
                    ports = (0, 0) if i == 0 else (self.nodes[0].port,
                                                    self.nodes[0].shard_port)
                    self.nodes.append(ScyllaNode(self, i, shards, tokens,
                                                 f"127.0.0.{first_host + i}", ports,
                                                 **node_options))
                break
            except OSError:
                self.close()
                self.nodes = []
                if attempt == 49:
                    raise
            except BaseException:
                self.close()
                raise

    def contact(self, i: int = 0) -> str:
        """``HOST:PORT`` of node ``i``'s ordinary port."""
        return self.nodes[i].address

    def close(self) -> None:
        """Every node stops listening and closes its connections."""
        while self.nodes:
            self.nodes.pop().close()

    def __enter__(self) -> "ScyllaCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tablet_of(self, token: int) -> tuple[int, int, list[tuple[int, int]]]:
        """The tablet holding ``token``: (first, last, [(node, shard)]), its range
        ``(first, last]``."""
        span = (1 << 64) // self.tablets
        i = min((token + (1 << 63) - 1) // span, self.tablets - 1) if token > -(1 << 63) else 0
        first = -(1 << 63) + i * span if i else -(1 << 63)
        last = (1 << 63) - 1 if i == self.tablets - 1 else -(1 << 63) + (i + 1) * span
        shards = self.nodes[0].shards
        return first, last, [((i + k) % len(self.nodes), (i + k) % shards)
                             for k in range(self.rf)]

    def owners(self, token: int) -> list[tuple[int, int]]:
        """The (node, shard) pairs owning ``token``."""
        if self.tablets:
            return self.tablet_of(token)[2]
        ring = self._ring()
        at = bisect.bisect_left(ring, (token, -1)) % len(ring)
        met: list[int] = []
        for j in range(len(ring)):
            node = ring[(at + j) % len(ring)][1]
            if node not in met:
                met.append(node)
        return [(i, shard_of(token, self.nodes[i].shards, self.nodes[i].ignore_msb))
                for i in met[:self.rf]]

    def _ring(self) -> list[tuple[int, int]]:
        ring = getattr(self, "_sorted_ring", None)
        if ring is None:
            ring = self._sorted_ring = sorted((t, i) for i, n in enumerate(self.nodes)
                                              for t in n.tokens)
        return ring

    def record(self, node: int, shard: int, key: int, arrival: str = "owned",
               tablet: int | None = None, paid: bool = False) -> None:
        """Counts the row of id ``key`` arrived on ``shard`` of ``node``: ``arrival`` is
        ``owned`` (an owning shard of a replica), ``other_shard`` (a replica, another
        shard) or ``other_node`` (a node no replica); ``tablet`` the first token of its
        tablet (None: vnodes), ``paid`` whether its answer carries the tablet's payload."""
        with self.lock:
            stats = self.stats
            stats["rows"] += 1
            stats["owned" if arrival == "owned" else "forwarded"] += 1
            if arrival != "owned":
                stats[arrival] += 1
                if tablet is not None:
                    stats["after_payload" if tablet in self.payloads else
                          "before_payload"] += 1
            if paid:
                self.payloads.add(tablet)
            self.requests[(node, shard)] = self.requests.get((node, shard), 0) + 1
            self.stored.add(key)
            self.owned[key] = arrival == "owned"
            self.arrivals[key] = (node, shard, arrival)


def ids_table(rows: int) -> Any:
    """The Arrow table of ``ks.t``'s rows ``id`` 0..rows-1, ``v`` the id as text."""
    import pyarrow as pa

    return pa.table({"id": pa.array(range(rows), pa.int64()),
                     "v": pa.array([str(i) for i in range(rows)])})


def bulkwire_insert(cluster: ScyllaCluster, rows: int, batch_rows: int = 1000,
                    probes: set[int] | None = None) -> Any:
    """Loads :func:`ids_table` of ``rows`` rows into ``cluster`` with ``bulkwire``, in batches
    of ``batch_rows``; the load's result. ``probes``, when given, receives the ids of the
    rows the load sent as probes (to learn their tablets before sending the rest)."""
    import bulkwire

    def load() -> Any:
        return bulkwire.load_parquet(ids_table(rows),
                                     bulkwire.targets.cql(cluster.contact(), KEYSPACE, TABLE),
                                     batch_rows=batch_rows)

    if probes is None:
        return load()
    from ..load.cql_shards import ShardRouter

    ids = {token_of(key): key for key in range(rows)}
    phases, probed = ShardRouter.phases, ShardRouter.probed

    def keep(tokens: bytes, probe: Any) -> None:
        chosen = memoryview(tokens).cast("q")
        probes.update(ids[chosen[int(i)]] for i in probe)

    def phases_kept(self: Any, np: Any, tokens: bytes, count: int) -> Any:
        probe, later = phases(self, np, tokens, count)
        if probe is not None:
            keep(tokens, probe)
        return probe, later

    def probed_kept(self: Any, np: Any, tokens: bytes, rest: Any) -> list:
        parts = probed(self, np, tokens, rest)
        if parts[0] is not rest:
            keep(tokens, parts[0])
        return parts

    ShardRouter.phases, ShardRouter.probed = phases_kept, probed_kept  # type: ignore
    try:
        return load()
    finally:
        ShardRouter.phases, ShardRouter.probed = phases, probed  # type: ignore


def driver_insert(cluster: ScyllaCluster, rows: int, concurrency: int = 8,
                  wait: float = 10.0, token_aware: bool = True) -> dict:
    """Inserts the ids ``0..rows-1`` into ``cluster`` with the official driver
    (``scylla-driver``: token aware unless ``token_aware`` is false (then round robin over
    the nodes), the INSERT prepared, ``execute_concurrent_with_args`` with ``concurrency``
    requests in flight) once its connections to every shard are up (at most ``wait``
    seconds); the cluster's :attr:`~ScyllaCluster.stats` then."""
    import logging
    import time

    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.policies import RoundRobinPolicy, TokenAwarePolicy

    logging.getLogger("cassandra").setLevel(logging.CRITICAL)
    host, port = cluster.contact().split(":")
    policy = TokenAwarePolicy(RoundRobinPolicy()) if token_aware else RoundRobinPolicy()
    client = Cluster([host], port=int(port), protocol_version=4, compression=False,
                     execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(
                         load_balancing_policy=policy)})
    try:
        session = client.connect()
        shards = sum(node.shards for node in cluster.nodes)
        deadline = time.monotonic() + wait
        while (sum(len(pool._connections) for pool in session._pools.values()) < shards
               and time.monotonic() < deadline):
            time.sleep(0.05)
        statement = session.prepare("INSERT INTO ks.t (id, v) VALUES (?, ?)")
        execute_concurrent_with_args(session, statement, [(i, str(i)) for i in range(rows)],
                                     concurrency=concurrency)
    finally:
        client.shutdown()
    return dict(cluster.stats)
