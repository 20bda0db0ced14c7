"""ScyllaDB's protocol extensions for a load: shards and tablets.

A ScyllaDB node runs one shard per core; a request is served by the shard that owns its
partition's token when it arrives on a connection of that shard, and is forwarded inside the
node otherwise. A node says in its SUPPORTED answer how it shards (:func:`sharding_of`:
``SCYLLA_SHARD``, the shard of that connection; ``SCYLLA_NR_SHARDS``;
``SCYLLA_SHARDING_IGNORE_MSB``; ``SCYLLA_PARTITIONER``; ``SCYLLA_SHARD_AWARE_PORT`` and its TLS
twin), and a token's shard follows (:meth:`Sharding.shards`: ``_core.cql_shards``). A
connection made to the shard-aware port from a local port ``p`` belongs to shard
``p % nr_shards`` (:func:`source_ports`).

A table of a keyspace using tablets has its replicas per tablet, not where the token ring
puts them. A node asked for it in STARTUP (``TABLETS_ROUTING_V1``) attaches to the answer of a
request that reached a node or shard not holding the row a custom payload entry,
``tablets-routing-v1``: the tablet's token range ``(first, last]`` and its replicas as (host
id, shard) (:func:`parse_tablet`). :class:`TabletMap` keeps these (bounded) per table and
says where later rows of those ranges go; a token no tablet covers is routed by the ring.

>>> s = sharding_of(supported({"SCYLLA_SHARD": "1", "SCYLLA_NR_SHARDS": "4",
...     "SCYLLA_SHARDING_IGNORE_MSB": "12", "SCYLLA_PARTITIONER":
...     "org.apache.cassandra.dht.Murmur3Partitioner", "SCYLLA_SHARD_AWARE_PORT": "19042"}))
>>> s.shard, s.nr_shards, s.ignore_msb, s.shard_aware_port
(1, 4, 12, 19042)
>>> s.shard_of(0), s.shard_of(-2**63), s.shard_of(2**63 - 1)
(0, 0, 3)
"""
from __future__ import annotations

import bisect
import random
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import _core

MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"
#: The sharding algorithm whose rule :meth:`Sharding.shards` computes.
ALGORITHM = "biased-token-round-robin"
#: The payload entry and the STARTUP option of tablet routing.
TABLETS_PAYLOAD = "tablets-routing-v1"
TABLETS_OPTION = "TABLETS_ROUTING_V1"
#: The local ports a shard-aware connection is made from (the official driver's range).
LOCAL_PORTS = (49152, 65535)
#: Replicas a tablet may name, and tablets kept per table, at most.
MAX_REPLICAS = 64
MAX_TABLETS = 65536


def parse_supported(body: bytes) -> dict[str, list[str]]:
    """A SUPPORTED body (a ``[string multimap]``) as a dict; ``ValueError`` when it does not
    parse (every length checked against what is left)."""
    view = memoryview(body)
    at = 0

    def short() -> int:
        nonlocal at
        if at + 2 > len(view):
            raise ValueError("SUPPORTED is cut short")
        (n,) = struct.unpack_from(">H", view, at)
        at += 2
        return n

    def text() -> str:
        nonlocal at
        n = short()
        if at + n > len(view):
            raise ValueError("SUPPORTED is cut short")
        value = bytes(view[at:at + n]).decode("utf-8", "replace")
        at += n
        return value

    found: dict[str, list[str]] = {}
    for _ in range(short()):
        key = text()
        found[key] = [text() for _ in range(short())]
    return found


def supported(options: Mapping[str, str | Sequence[str]]) -> bytes:
    """A SUPPORTED body holding ``options`` (a value or a list of values per key)."""
    out = struct.pack(">H", len(options))
    for key, values in options.items():
        items = [values] if isinstance(values, str) else list(values)
        out += _string(key) + struct.pack(">H", len(items)) + b"".join(map(_string, items))
    return out


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


@dataclass(frozen=True)
class Sharding:
    """How a ScyllaDB node shards (:func:`sharding_of`), and the shard of the connection that
    read it."""

    shard: int
    nr_shards: int
    ignore_msb: int
    shard_aware_port: int | None = None
    shard_aware_port_ssl: int | None = None

    def shard_of(self, token: int) -> int:
        """The shard owning the Murmur3 ``token``."""
        return struct.unpack("=i", self.shards(struct.pack("=q", token)))[0]

    def shards(self, tokens: bytes) -> bytes:
        """Each native int64 token's shard, native int32 (``_core.cql_shards``)."""
        return _core.cql_shards(tokens, self.nr_shards, self.ignore_msb)

    def port(self, tls: bool) -> int | None:
        """The shard-aware port for plain TCP or TLS, None when the node has none."""
        return self.shard_aware_port_ssl if tls else self.shard_aware_port


def sharding_of(body: bytes | None) -> Sharding | None:
    """The sharding a SUPPORTED ``body`` states, or None where routing by shard does not
    apply: a node that is not ScyllaDB, a partitioner other than Murmur3, or options that do
    not hold (another sharding algorithm than :data:`ALGORITHM`, a shard count of 0 or over
    ``_core.CQL_SHARDS_MAX``, a shard outside it, an
    ``ignore_msb`` outside 0..63, a port outside 1..65535 is taken as none)."""
    if not body:
        return None
    try:
        options = parse_supported(body)
    except ValueError:
        return None

    def one(key: str) -> str | None:
        values = options.get(key)
        return values[0] if values else None

    def number(key: str, low: int, high: int) -> int | None:
        text = one(key)
        if text is None or not text.isdigit() or len(text) > 10:
            return None
        value = int(text)
        return value if low <= value <= high else None

    if one("SCYLLA_NR_SHARDS") is None:
        return None
    partitioner, algorithm = one("SCYLLA_PARTITIONER"), one("SCYLLA_SHARDING_ALGORITHM")
    if partitioner is not None and partitioner != MURMUR3 or \
            algorithm is not None and algorithm != ALGORITHM:
        return None
    count = number("SCYLLA_NR_SHARDS", 1, _core.CQL_SHARDS_MAX)
    shard = number("SCYLLA_SHARD", 0, (count or 1) - 1)
    msb = number("SCYLLA_SHARDING_IGNORE_MSB", 0, 63) if one(
        "SCYLLA_SHARDING_IGNORE_MSB") is not None else 0
    if count is None or shard is None or msb is None:
        return None
    return Sharding(shard, count, msb, number("SCYLLA_SHARD_AWARE_PORT", 1, 65535),
                    number("SCYLLA_SHARD_AWARE_PORT_SSL", 1, 65535))


def source_ports(shard: int, nr_shards: int, rng: random.Random | None = None,
                 low: int = LOCAL_PORTS[0], high: int = LOCAL_PORTS[1]) -> Iterator[int]:
    """The local ports to connect from to reach ``shard`` at a shard-aware port, each once:
    every port ``p`` of ``low..high - 1`` with ``p % nr_shards == shard``, from a random one
    on, wrapping around (as the official driver chooses them)."""
    rng = rng or random.Random()

    def aligned(value: int) -> int:
        return value + (-value) % nr_shards

    start = aligned(rng.randrange(low, high)) + shard
    first = aligned(low) + shard
    yield from range(start, high, nr_shards)
    yield from range(first, min(start, high), nr_shards)


# ------------------------------------------------------------------------------ tablets


@dataclass(frozen=True)
class Tablet:
    """A tablet: the tokens ``(first, last]`` and its ``replicas`` as (host id, shard)."""

    first: int
    last: int
    replicas: tuple[tuple[uuid.UUID, int], ...]


def parse_tablet(payload: bytes) -> Tablet:
    """The ``tablets-routing-v1`` entry (a CQL ``tuple<bigint, bigint, list<tuple<uuid,
    int>>>``) as a :class:`Tablet`; ``ValueError`` when it is not one (a length past the end,
    a null, bytes left over, ``first >= last``, no replica, more than :data:`MAX_REPLICAS`,
    a negative shard)."""
    top = _Cells(memoryview(payload))
    first, last, listed = top.long(), top.long(), _Cells(top.cell())
    top.done("the tablet entry has bytes after its three fields")
    if first >= last:
        raise ValueError(f"the tablet entry's range ({first}, {last}] is empty")
    count = listed.int(raw=True)
    if not 0 < count <= MAX_REPLICAS:
        raise ValueError(f"the tablet entry names {count} replicas")
    replicas = []
    for _ in range(count):
        pair = _Cells(listed.cell())
        host, shard = pair.cell(), pair.int()
        pair.done("a replica of the tablet entry has bytes after (uuid, int)")
        if len(host) != 16 or shard < 0:
            raise ValueError("a replica of the tablet entry is not (uuid, shard >= 0)")
        replicas.append((uuid.UUID(bytes=bytes(host)), shard))
    listed.done("the tablet entry's replica list has bytes after its replicas")
    return Tablet(first, last, tuple(replicas))


class _Cells:
    """Reads CQL cells (a 4-byte length, then that many bytes) from ``view``, every length
    checked against what is left: ``ValueError`` otherwise."""

    def __init__(self, view: memoryview) -> None:
        self.view, self.at = view, 0

    def int(self, raw: bool = False) -> int:
        value = self.view[self.at:self.at + 4] if raw else self.cell()
        if len(value) != 4:
            raise ValueError("the tablet entry has an int that is not 4 bytes")
        if raw:
            self.at += 4
        return struct.unpack(">i", value)[0]

    def long(self) -> int:
        value = self.cell()
        if len(value) != 8:
            raise ValueError("a token of the tablet entry is not 8 bytes")
        return struct.unpack(">q", value)[0]

    def cell(self) -> memoryview:
        if self.at + 4 > len(self.view):
            raise ValueError("the tablet entry is cut short")
        (n,) = struct.unpack_from(">i", self.view, self.at)
        if n < 0 or self.at + 4 + n > len(self.view):
            raise ValueError(f"the tablet entry has a length {n} that does not fit")
        self.at += 4 + n
        return self.view[self.at - n:self.at]

    def done(self, message: str) -> None:
        if self.at != len(self.view):
            raise ValueError(message)


def tablet_payload(first: int, last: int, replicas: Sequence[tuple[uuid.UUID, int]]) -> bytes:
    """The ``tablets-routing-v1`` entry of a tablet (the inverse of :func:`parse_tablet`)."""
    def cell(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    items = struct.pack(">i", len(replicas)) + b"".join(
        cell(cell(host.bytes) + cell(struct.pack(">i", shard))) for host, shard in replicas)
    return cell(struct.pack(">q", first)) + cell(struct.pack(">q", last)) + cell(items)


class TabletMap:
    """The tablets learned of one table, at most ``limit`` (the oldest dropped past it): a
    tablet learned replaces those whose ranges it overlaps. Thread-safe."""

    def __init__(self, limit: int = MAX_TABLETS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._lasts: list[int] = []
        self._tablets: list[Tablet] = []
        self._order: list[Tablet] = []  # by age, for the bound
        self.rejected = 0  # entries that did not parse
        self.learned = 0  # entries kept

    def __len__(self) -> int:
        return len(self._tablets)

    def learn(self, payload: bytes) -> Tablet | None:
        """Keeps the tablet of one payload entry; None (counted in :attr:`rejected`) when the
        entry is not one."""
        try:
            tablet = parse_tablet(payload)
        except ValueError:
            self.rejected += 1
            return None
        with self._lock:
            self.learned += 1
            # the tablets overlapping (first, last]: those whose last > first, up to the
            # first whose range starts at or after last
            at = bisect.bisect_right(self._lasts, tablet.first)
            end = at
            while end < len(self._tablets) and self._tablets[end].first < tablet.last:
                end += 1
            for old in self._tablets[at:end]:
                self._order.remove(old)
            self._tablets[at:end] = [tablet]
            self._lasts[at:end] = [tablet.last]
            self._order.append(tablet)
            while len(self._order) > self.limit:
                oldest = self._order.pop(0)
                where = self._tablets.index(oldest)
                del self._tablets[where], self._lasts[where]
        return tablet

    def find(self, token: int) -> Tablet | None:
        """The tablet holding ``token``, or None."""
        with self._lock:
            at = bisect.bisect_left(self._lasts, token)
            if at < len(self._tablets) and self._tablets[at].first < token:
                return self._tablets[at]
        return None

    def gaps(self, np: Any, tokens: Any) -> Any:
        """For tokens no tablet learned holds (int64 array): the gap between the tablets
        learned each is in, as the index of the first tablet after it (int64 array; the
        number of tablets: after the last)."""
        with self._lock:
            lasts = np.array(self._lasts, dtype=np.int64)
        return np.searchsorted(lasts, tokens, side="left")

    def route(self, np: Any, tokens: Any, choose: Callable[[Tablet], tuple[int, int] | None]
              ) -> tuple[Any, Any]:
        """Each token's (node, shard) by the tablets (int32 arrays, -1 where no tablet holds
        it or ``choose`` names no replica for it); ``choose(tablet)`` is the (node, shard) a
        tablet's rows go to, or None."""
        nodes = np.full(len(tokens), -1, dtype=np.int32)
        shards = np.full(len(tokens), -1, dtype=np.int32)
        with self._lock:
            if not self._tablets:
                return nodes, shards
            lasts = np.array(self._lasts, dtype=np.int64)
            firsts = np.array([t.first for t in self._tablets], dtype=np.int64)
            tablets = list(self._tablets)
        chosen = [choose(t) or (-1, -1) for t in tablets] + [(-1, -1)]
        table = np.array(chosen, dtype=np.int32)
        at = np.searchsorted(lasts, tokens, side="left")
        inside = np.zeros(len(tokens), dtype=bool)
        held = at < len(tablets)
        inside[held] = firsts[at[held]] < tokens[held]
        pick = np.where(inside, at, len(tablets))
        return table[pick, 0], table[pick, 1]
