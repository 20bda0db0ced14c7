"""The CQL statement layer: a prepared statement's description, an Arrow batch's rows as
EXECUTE bodies with their partition tokens, and the token ring that routes each row to a
replica. The bytes are written in C (``bulkwire._core``): no Python object per row.

>>> import pyarrow as pa
>>> prepared = Prepared(id=b"\\x01\\x02", columns=[("ks", "t", "k", "int"), ("ks", "t", "v", "text")],
...                     pk_indexes=[0])
>>> batch = pa.record_batch({"k": pa.array([1, 2], pa.int32()), "v": pa.array(["a", None])})
>>> rows = execute_bodies(batch, prepared, consistency=1)
>>> len(rows), rows.body(1)[:5]
(2, b'\\x00\\x02\\x01\\x02\\x00')
>>> ring = TokenRing({"10.0.0.1": [0], "10.0.0.2": [1 << 62]}, replication_factor=1)
>>> ring.replicas(5)
['10.0.0.2']
"""
from __future__ import annotations

import array
import dataclasses
import ipaddress
import struct
import uuid
from typing import Any, Iterator, Mapping, Sequence

from . import _core


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A prepared statement: its ``id``, its bind markers' ``columns`` as (keyspace, table,
    name, CQL type text) in marker order, and the markers holding the partition key
    (``pk_indexes``, in key order)."""

    id: bytes
    columns: Sequence[tuple[str, str, str, str]]
    pk_indexes: Sequence[int]

    @classmethod
    def from_result(cls, body: bytes) -> "Prepared":
        """From the RESULT body a PREPARE was answered with (``ValueError`` when it is not a
        well-formed Prepared result)."""
        result = _core.cql_parse_result(body)
        if result["kind"] != "prepared":
            raise ValueError(f"expected a Prepared RESULT, got {result['kind']!r}")
        return cls(result["id"], result["columns"], result["pk_indexes"])

    @property
    def names(self) -> list[str]:
        """The bind markers' column names."""
        return [c[2] for c in self.columns]

    @property
    def types(self) -> list[str]:
        """The bind markers' CQL types, as CQL text."""
        return [c[3] for c in self.columns]


@dataclasses.dataclass(frozen=True)
class ExecuteBodies:
    """The EXECUTE bodies of a batch's rows: ``bodies`` back to back, ``ends[i]`` the end of
    row i's body, ``tokens[i]`` its partition token (empty without a partition key)."""

    bodies: bytearray
    ends: array.array
    tokens: array.array

    def __len__(self) -> int:
        return len(self.ends)

    def body(self, i: int) -> bytes:
        """Row i's body (a copy)."""
        start = self.ends[i - 1] if i > 0 else 0
        return bytes(self.bodies[start:self.ends[i]])

    def __iter__(self) -> Iterator[bytes]:
        return (self.body(i) for i in range(len(self)))


def check_schema(schema: Any, prepared: Prepared) -> None:
    """Checks that every bound column is in the Arrow ``schema`` (anything with
    ``__arrow_c_schema__``) with a type that binds to its CQL type; raises
    :class:`bulkwire.errors.SchemaMismatchError` naming the first that is not."""
    _core.cql_check_schema(schema, prepared.names, prepared.types)


def execute_bodies(batch: Any, prepared: Prepared, *, consistency: int, first_row: int = 0,
                   serial_consistency: int = 0, timestamp: int | None = None) -> ExecuteBodies:
    """Every row of ``batch`` (an Arrow record batch, table or stream) as an EXECUTE body of
    ``prepared``, binding each marker to the column of its name. The schema is checked first
    (:class:`~bulkwire.errors.SchemaMismatchError`); a row that cannot be written raises
    :class:`~bulkwire.errors.RowError` (rows counted from ``first_row``)."""
    bodies, ends, tokens = _core.cql_execute_bodies(
        batch, prepared.id, prepared.names, prepared.types, list(prepared.pk_indexes),
        consistency, first_row=first_row, serial_consistency=serial_consistency,
        timestamp=timestamp)
    return ExecuteBodies(bodies, array.array("q", ends), array.array("q", tokens or b""))


def decode_inet(value: bytes) -> str:
    """A CQL ``inet`` value as text."""
    return str(ipaddress.ip_address(value))


def decode_text_items(value: bytes, per_element: int, kind: str) -> list[str]:
    """The UTF-8 items of a CQL collection of text: [int n], then ``per_element`` [bytes]
    items for each of the n elements (1 for a set or a list, 2 for a map's key and value).
    ``ValueError`` naming ``kind`` when the bytes do not hold exactly that."""
    try:
        (count,), at, items = struct.unpack_from(">i", value), 4, []
        if count < 0:
            raise ValueError("a negative count")
        for _ in range(per_element * count):
            (n,) = struct.unpack_from(">i", value, at)
            if n < 0 or at + 4 + n > len(value):
                raise ValueError("an item runs past the value")
            items.append(value[at + 4:at + 4 + n].decode())
            at += 4 + n
    except struct.error as exc:
        raise ValueError(f"malformed {kind} value: {exc}") from None
    if at != len(value):
        raise ValueError(f"malformed {kind} value: bytes after the last item")
    return items


def decode_text_set(value: bytes) -> list[str]:
    """A CQL ``set<text>`` (or ``list<text>``) value: [int n], then n [bytes] UTF-8 items.
    ``ValueError`` when the bytes do not hold exactly that."""
    return decode_text_items(value, 1, "set<text>")


#: The queries whose answers :func:`ring_nodes` reads: the node that answers, its peers as
#: Cassandra 4+ lists them (with each one's native port), and its peers as older servers and
#: Scylla list them (no port: ``system.peers_v2`` is not a table there).
SELECT_LOCAL = "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.local"
SELECT_PEERS_V2 = ("SELECT host_id, peer, native_address, native_port, data_center, rack, "
                   "tokens FROM system.peers_v2")
SELECT_PEERS = "SELECT host_id, peer, rpc_address, data_center, rack, tokens FROM system.peers"


@dataclasses.dataclass(frozen=True)
class RingNode:
    """A node of the ring as the system tables describe it: ``address``, the client address
    it advertises (``rpc_address``, or ``native_address`` in ``system.peers_v2``; its
    ``peer`` address where that is unset or 0.0.0.0); ``port``, the native port it advertises
    (``native_port`` of ``system.peers_v2``; None where the table has none: ``system.local``
    and ``system.peers``); its ``tokens``; ``local``: the row of ``system.local``, the
    node that answered the queries; its ``host_id`` (the node's identity, which its
    addresses are not: a node keeps it when its address changes), None where not read; and
    its ``datacenter`` and ``rack`` (``data_center`` and ``rack``), None where not read.

    >>> RingNode("10.0.0.2", 9042, (-5, 7), local=False).port
    9042
    """

    address: str
    port: int | None
    tokens: tuple[int, ...]
    local: bool = False
    host_id: uuid.UUID | None = None
    datacenter: str | None = None
    rack: str | None = None


def ring_nodes(local: Mapping[str, Any], peers: Mapping[str, Any]) -> list[RingNode]:
    """The nodes owning tokens, from the parsed RESULT Rows (``_core.cql_parse_result``) of
    :data:`SELECT_LOCAL` and of :data:`SELECT_PEERS_V2` or :data:`SELECT_PEERS` (the
    columns are found by name): the node that answered first, then its peers in their order.
    A node without tokens (one still joining) is left out; ``ValueError`` when no node is
    left.

    >>> import struct
    >>> def rows(names, *cells):
    ...     return {"columns": [("system", "t", n, "") for n in names], "rows": list(cells)}
    >>> tokens = lambda *ts: struct.pack(">i", len(ts)) + b"".join(
    ...     struct.pack(">i", len(str(t))) + str(t).encode() for t in ts)
    >>> local = rows(["rpc_address", "tokens"], [bytes([172, 17, 0, 2]), tokens(0)])
    >>> peers = rows(["peer", "native_address", "native_port", "tokens"],
    ...              [bytes([10, 0, 0, 3]), bytes([172, 17, 0, 3]), struct.pack(">i", 9142),
    ...               tokens(1 << 62)])
    >>> [(n.address, n.port, n.tokens, n.local) for n in ring_nodes(local, peers)]
    [('172.17.0.2', None, (0,), True), ('172.17.0.3', 9142, (4611686018427387904,), False)]
    """
    nodes = []
    for result, is_local in ((local, True), (peers, False)):
        names = [c[2] for c in result["columns"]]
        for row in result["rows"]:
            cell = dict(zip(names, row))
            raw = cell.get("native_address") or cell.get("rpc_address")
            address = decode_inet(raw) if raw else None
            if address in (None, "0.0.0.0", "::") and cell.get("peer"):
                address = decode_inet(cell["peer"])
            if address is None or cell.get("tokens") is None:
                continue
            port = cell.get("native_port")
            if port is not None and len(port) != 4:
                raise ValueError(f"the native_port of {address} is {len(port)} bytes, not an int")
            host_id = cell.get("host_id")
            if host_id is not None and len(host_id) != 16:
                raise ValueError(f"the host_id of {address} is {len(host_id)} bytes, not a uuid")
            tokens = tuple(int(t) for t in decode_text_set(cell["tokens"]))
            if not tokens:  # an empty set, as a null: a node still joining owns nothing
                continue
            outside = [t for t in tokens if not -(1 << 63) <= t < (1 << 63)]
            if outside:
                raise ValueError(f"the token {outside[0]} of {address} is not a Murmur3 token "
                                 "(a signed 64-bit number)")
            nodes.append(RingNode(address, None if port is None else struct.unpack(">i", port)[0],
                                  tokens,
                                  local=is_local,
                                  host_id=None if host_id is None else uuid.UUID(bytes=host_id),
                                  datacenter=_text_cell(cell.get("data_center")),
                                  rack=_text_cell(cell.get("rack"))))
    if not nodes:
        raise ValueError("system.local and system.peers name no node with tokens")
    return nodes


def _text_cell(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


class TokenRing:
    """The Murmur3 token ring of a cluster with SimpleStrategy replica placement: the replicas
    of a token are the first ``replication_factor`` distinct nodes clockwise from the first
    ring token at or after it. ``nodes`` maps each node's address to its tokens. The lookups
    are C (``_core.CqlRing``): :meth:`primaries` routes a whole batch's tokens at once."""

    def __init__(self, nodes: Mapping[str, Sequence[int]], replication_factor: int) -> None:
        self.addresses = list(nodes)
        #: each node's tokens, as given (a ring of some of the nodes is made from them)
        self.tokens = {a: list(nodes[a]) for a in self.addresses}
        tokens = [t for a in self.addresses for t in nodes[a]]
        owners = [i for i, a in enumerate(self.addresses) for _ in nodes[a]]
        self._ring = _core.CqlRing(tokens, owners, len(self.addresses), replication_factor)

    @classmethod
    def from_system_tables(cls, local: Mapping[str, Any], peers: Mapping[str, Any],
                           replication_factor: int) -> "TokenRing":
        """From the parsed RESULT Rows (``_core.cql_parse_result``) of :data:`SELECT_LOCAL`
        and of :data:`SELECT_PEERS_V2` or :data:`SELECT_PEERS`: each node by the client
        address it advertises, with its tokens (:func:`ring_nodes`)."""
        nodes: dict[str, list[int]] = {}
        for node in ring_nodes(local, peers):
            nodes.setdefault(node.address, []).extend(node.tokens)
        return cls(nodes, replication_factor)

    @property
    def replication_factor(self) -> int:
        """Replicas per token: the one asked for, at most the nodes owning tokens."""
        return self._ring.rf

    def without(self, addresses: Sequence[str]) -> "TokenRing":
        """The ring of the other nodes (their tokens and replication factor): where a token
        goes when ``addresses`` cannot be reached. ``ValueError`` when none is left."""
        nodes = {a: t for a, t in self.tokens.items() if a not in set(addresses)}
        if not nodes:
            raise ValueError("no node of the ring is left")
        return TokenRing(nodes, self.replication_factor)

    def replicas(self, token: int) -> list[str]:
        """The addresses of the replicas of ``token``, primary first."""
        return [self.addresses[i] for i in self._ring.replicas(token)]

    def primaries(self, tokens: array.array | bytes) -> array.array:
        """Each token's primary replica as an index into :attr:`addresses` (int32 array)."""
        return array.array("i", self._ring.primaries(tokens))
