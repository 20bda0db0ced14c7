"""A Cassandra or Scylla table as a load's target: each row of the data one prepared INSERT,
routed to a replica of its partition in the local data centre.

:func:`cql` makes the target (listed in :data:`bulkwire.targets.KINDS`), a
:class:`CqlDescription` (a :class:`~bulkwire.load.interface.ResumableTarget`):
its :meth:`~CqlDescription.plan` connects, reads the table's columns from
``system_schema.columns``, prepares ``INSERT INTO ks.table (columns) VALUES (?, ...)`` and
checks the Arrow schema against the prepared statement (``_core.cql_check_schema``) before
any row is read. Its encoder (:class:`_CqlEncoder`) writes a batch's rows as EXECUTE bodies
back to back with their partition tokens, in C (``_core.cql_execute_bodies``: no Python
object per row). Its session (:class:`_CqlSession`) routes each row to the first replica of
its token in the local data centre (the ring, data centres and racks read from
``system.local`` and ``system.peers``, the keyspace's replication from
``system_schema.keyspaces``: :mod:`bulkwire.cql_placement`; a node found down is left out,
its rows going to the next replica there), one connection per node (per shard of a
ScyllaDB node, and rows of a ScyllaDB tablet to its replica:
:mod:`bulkwire.load.cql_shards`), and sends
each node's rows pipelined (``CqlConnection.run_packed``, the GIL released);
:meth:`_CqlSession.store` returns once every row of the batch was acknowledged, so a unit of
work is confirmed only when all its rows were.
"""
from __future__ import annotations

import contextlib
import ipaddress
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field as dataclass_field
from typing import Any, ClassVar, Iterable, Iterator, Mapping, Sequence

from .. import _core
from ..cql_placement import Placement, Replication, decode_text_map
from ..cql_statements import (SELECT_LOCAL, SELECT_PEERS, SELECT_PEERS_V2, Prepared,
                              RingNode, ring_nodes)
from ..errors import (ConnectError, ConnectionLostError, CqlServerError, ProtocolError,
                      ServerError, TLSError, TransportTimeoutError, _name_source_rows)
from ..load_options import LoadOptions
from .._arrow import _pyarrow
from .cql_shards import ShardRouter
from .interface import DescriptionDefaults, _cut, _short, kind_constructor

#: The write consistency levels by name (the protocol's codes). SERIAL and LOCAL_SERIAL are
#: for conditional updates, which a load does not make.
CONSISTENCY_LEVELS = {"ANY": 0x0000, "ONE": 0x0001, "TWO": 0x0002, "THREE": 0x0003,
                      "QUORUM": 0x0004, "ALL": 0x0005, "LOCAL_QUORUM": 0x0006,
                      "EACH_QUORUM": 0x0007, "LOCAL_ONE": 0x000A}
#: The levels counted in the coordinator's data centre alone: a coordinator there needs a
#: replica there.
LOCAL_LEVELS = ("LOCAL_ONE", "LOCAL_QUORUM")


def consistency_code(name: Any) -> int:
    """The protocol's code of a write consistency level named ``name`` (any case);
    ``ValueError`` listing the levels a write may use otherwise."""
    if not isinstance(name, str) or name.upper() not in CONSISTENCY_LEVELS:
        raise ValueError(f"consistency must be one of {', '.join(CONSISTENCY_LEVELS)} (the "
                         f"levels of a write; SERIAL and LOCAL_SERIAL are a conditional "
                         f"update's), not {name!r}")
    return CONSISTENCY_LEVELS[name.upper()]


#: The driver's default for a session's statements.
DEFAULT_CONSISTENCY = "LOCAL_ONE"
DEFAULT_PORT = 9042
#: Requests in flight per connection (2: Cassandra 5.0.9 fails inserts into a table with a
#: vector index when more than its processors + 1 are in flight, and no node has fewer than
#: one processor), and the overloaded answers re-sent by default: the connection's own.
DEFAULT_WINDOW = _core.CQL_DEFAULT_WINDOW
DEFAULT_RETRIES = _core.CQL_DEFAULT_RETRIES
#: The range a connection's window may take (the protocol's stream ids), and its retries.
WINDOW_RANGE = (1, _core.CQL_MAX_WINDOW)
RETRIES_RANGE = (0, _core.CQL_MAX_RETRIES)
#: Seconds a node may take to answer, by default.
DEFAULT_TIMEOUT = 30.0
#: The longest TTL a cell may have (Cassandra's limit, 20 years), in seconds.
MAX_TTL = 630720000
#: What a null in a column that is not part of the primary key is written as: "unset" (the
#: cell left as it is: no tombstone; protocol v4+) or "null" (a tombstone).
NULLS = ("unset", "null")
#: The bind markers of ``USING TTL ? AND TIMESTAMP ?``, as the server names them.
TTL_MARKER, TIMESTAMP_MARKER = "[ttl]", "[timestamp]"


def check_window(window: Any) -> int:
    """``window`` (requests in flight per connection), an int in :data:`WINDOW_RANGE`;
    ``ValueError`` naming it otherwise."""
    low, high = WINDOW_RANGE
    if isinstance(window, bool) or not isinstance(window, int) or not low <= window <= high:
        raise ValueError(f"window must be an int {low}..{high}, not {window!r}")
    return window


def check_retries(retries: Any) -> int:
    """``retries`` (re-sends of an overloaded answer), an int in :data:`RETRIES_RANGE`;
    ``ValueError`` naming it otherwise."""
    low, high = RETRIES_RANGE
    if isinstance(retries, bool) or not isinstance(retries, int) or not low <= retries <= high:
        raise ValueError(f"retries must be an int {low}..{high}, not {retries!r}")
    return retries


def parse_host(host: str) -> tuple[str, int]:
    """``HOST[:PORT]`` (``[V6]:PORT`` for an IPv6 address with a port) as (host, port),
    the port 9042 when not given; ``ValueError`` naming the host otherwise.

    >>> parse_host("10.0.0.1"), parse_host("db:9142"), parse_host("[::1]:9043")
    (('10.0.0.1', 9042), ('db', 9142), ('::1', 9043))
    """
    name, port = _endpoint(host)
    return name, DEFAULT_PORT if port is None else port


def _endpoint(host: str, what: str = "a CQL host") -> tuple[str, int | None]:
    """``HOST[:PORT]`` as (host, port or None when not given), the host spelled one way
    (an IP address as ``ipaddress`` writes it, a name in lower case); ``ValueError`` naming
    ``host`` (``what`` it is) otherwise."""
    if not isinstance(host, str) or not host.strip():
        raise ValueError(f"{what} must be a non-empty str HOST[:PORT], not {host!r}")
    text = host.strip()
    port: Any = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1:] not in ("",) and not text[end + 1:].startswith(":"):
            raise ValueError(f"{what} {host!r} is not [ADDRESS]:PORT")
        name, rest = text[1:end], text[end + 1:]
        if rest:
            port = rest[1:]
    elif text.count(":") == 1:
        name, port = text.split(":")
    else:
        name = text  # a name, an IPv4 address or a bare IPv6 address
    if port is not None:
        try:
            port = int(port)
        except ValueError:
            raise ValueError(f"{what} {host!r}: the port {port!r} is not a number") from None
    if port is not None and not 0 < port < 65536 or not name:
        raise ValueError(f"{what} {host!r}: the port must be 1..65535 and the host named")
    try:
        name = str(ipaddress.ip_address(name))  # one spelling per address
    except ValueError:
        name = name.lower()
    return name, port


def address_map_of(entries: Mapping[str, str] | Iterable[tuple[str, str]] | None,
                   what: str = "address_map") -> tuple[tuple[str, str], ...]:
    """An address map judged and spelled one way: ``(advertised, reached)`` pairs, sorted.

    ``advertised`` is an IP address as the cluster advertises a node (``ADDRESS`` for the
    node at any port, ``ADDRESS:PORT`` for the node at that native port: ``[V6]:PORT`` for
    IPv6); ``reached`` is where this machine reaches it, ``HOST[:PORT]`` (a name or an
    address; without a port, the node's own port). ``entries`` is a mapping or (advertised,
    reached) pairs; an entry that is not one of these, or an advertised address given twice,
    is a ``ValueError`` naming ``what`` and the entry.

    >>> address_map_of({"172.17.0.3": "127.0.0.1:19043", "10.0.0.2:9042": "Tunnel"})
    (('10.0.0.2:9042', 'tunnel'), ('172.17.0.3', '127.0.0.1:19043'))
    >>> address_map_of({"db1": "127.0.0.1"})
    Traceback (most recent call last):
    ...
    ValueError: address_map: 'db1' is not an IP address (the cluster advertises its nodes by address)
    """
    if entries is None:
        return ()
    pairs = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
    seen: dict[str, tuple[Any, str]] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"{what} must map str to str, not hold {pair!r}")
        source, target = pair
        if not isinstance(source, str) or not isinstance(target, str):
            raise TypeError(f"{what} must map str to str, not {source!r} to {target!r}")
        host, port = _endpoint(source, f"{what}: the advertised address")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"{what}: {source!r} is not an IP address (the cluster "
                             f"advertises its nodes by address)") from None
        key = host if port is None else _spelled(host, port)
        to_host, to_port = _endpoint(target, f"{what}: {source!r} maps to")
        if key in seen:
            raise ValueError(f"{what}: {seen[key][0]!r} and {source!r} are the same address")
        seen[key] = (source, to_host if to_port is None else _spelled(to_host, to_port))
    return tuple(sorted((key, value) for key, (_, value) in seen.items()))


def _spelled(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _quoted(name: str) -> str:
    """A CQL identifier, quoted (its case kept)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text(cell: bytes | None) -> str:
    return "" if cell is None else cell.decode()


@dataclass(frozen=True)
class _CqlPlan:
    """The bound columns (in the order of the INSERT's markers: the data's), the prepared
    statement, and a vector column (for the batch size)."""

    read_columns: list[str]
    vector_column: str | None
    prepared: Prepared
    #: bytes an element of the vector takes in an EXECUTE body (for the batch size)
    value_bytes: int = 8
    #: the data's column bound to each marker (the table's columns: their own names; the
    #: markers of USING TTL ? and TIMESTAMP ?: ttl_column and timestamp_column)
    bound: tuple[str, ...] = ()
    #: one byte per marker: not 0 where its nulls are sent unset (empty: none)
    unset: bytes = b""
    #: the per-row TTL and write time columns (None: not given)
    ttl_column: str | None = None
    timestamp_column: str | None = None


@dataclass(frozen=True)
class _CqlEncoder:
    """A batch's rows as EXECUTE bodies of the plan's statement: ``[bodies, ends, tokens,
    row_base, prepared]`` (``_core.cql_execute_bodies``; a bad row raises RowError with its source
    row)."""

    plan: _CqlPlan
    consistency: int

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> list:
        return self._bodies(batch, row_base, False)

    def refusing(self, batch: Any, dim: int = -1, row_base: int = 0) -> tuple[list, list]:
        """``(encoded, refused)``: the batch's rows the encoder takes, encoded as calling it
        encodes them, and each row it refuses as ``(row, column, reason)`` (the row counted
        from ``row_base``, in order; the column and reason of the RowError calling it would
        raise), judged in one pass. A per-row TTL or write time out of range still raises
        RowError at the first (judged before the rows)."""
        *encoded, refused = self._bodies(batch, row_base, True)
        return encoded, refused

    def _bodies(self, batch: Any, row_base: int, refusing: bool) -> list:
        plan = self.plan
        p = plan.prepared
        if not plan.bound:  # the statement's own markers, nothing sent unset
            bodies, ends, tokens, *refused = _core.cql_execute_bodies(
                batch, p.id, p.names, p.types, list(p.pk_indexes), self.consistency,
                first_row=row_base, refusing=refusing)
            return [bodies, ends, tokens or b"", row_base, p, *refused]
        if plan.ttl_column is not None:
            batch = _per_row(batch, plan.ttl_column, "ttl_column", row_base)
        if plan.timestamp_column is not None:
            batch = _per_row(batch, plan.timestamp_column, "timestamp_column", row_base)
        bodies, ends, tokens, *refused = _core.cql_execute_bodies(
            batch, p.id, list(plan.bound), p.types, list(p.pk_indexes), self.consistency,
            first_row=row_base, unset=plan.unset, refusing=refusing)
        return [bodies, ends, tokens or b"", row_base, p, *refused]


def _per_row_type(pa: Any, t: Any, option: str, name: str) -> Any:
    """The Arrow type column ``name`` (``option``: ``ttl_column`` or ``timestamp_column``,
    whose type is ``t``) is sent as: int32 seconds for a TTL, int64 microseconds for a write
    time. ``TypeError`` naming the option and the column when ``t`` is not an integer (nor,
    for a write time, an Arrow timestamp)."""
    if option == "ttl_column" and pa.types.is_integer(t):
        return pa.int32()
    if option == "timestamp_column" and (pa.types.is_integer(t) or pa.types.is_timestamp(t)):
        return pa.int64()
    what = ("integers (seconds)" if option == "ttl_column"
            else "integers (microseconds since the epoch) or timestamps")
    raise TypeError(f"{option} {name!r} holds {t}, not {what}")


def _per_row(batch: Any, name: str, option: str, row_base: int) -> Any:
    """``batch`` with its column ``name`` (a per-row TTL or write time: ``option``) checked
    and as the CQL marker takes it (a TTL 0..MAX_TTL as int32; a write time in microseconds
    as int64; an Arrow timestamp in seconds or milliseconds scaled, in nanoseconds cut to
    microseconds): :class:`~bulkwire.errors.RowError` naming the first row out of range. A
    null stays null (sent unset: the table's default)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..errors import RowError

    i = batch.schema.get_field_index(name)
    column = batch.column(i)
    scale = 1
    if pa.types.is_timestamp(column.type):
        if column.type.unit == "ns":
            column = column.cast(pa.timestamp("us", column.type.tz), safe=False)
        scale = {"s": 1_000_000, "ms": 1000}.get(column.type.unit, 1)
        column = column.view(pa.int64())
    want = _per_row_type(pa, column.type, option, name)
    if option == "ttl_column":
        low, high = 0, MAX_TTL
    else:
        low, high = -(1 << 63) // scale, ((1 << 63) - 1) // scale
    if column.null_count < len(column):
        bounds = pc.min_max(column)
        least, most = bounds["min"].as_py(), bounds["max"].as_py()
        if least < low or most > high:
            # each bound compared only where a value passes it (then it is of the column's type)
            below = pc.less(column, pa.scalar(low, column.type)) if least < low else None
            above = pc.greater(column, pa.scalar(high, column.type)) if most > high else None
            bad = above if below is None else below if above is None else pc.or_(below, above)
            row = pc.index(bad, True).as_py()
            value = column[row].as_py()
            what = (f"a TTL of {value} s is out of 0..{MAX_TTL} (20 years, the longest "
                    f"Cassandra takes)" if option == "ttl_column" else
                    f"a write time of {value} x {scale} microseconds is out of the range of "
                    f"a signed 64-bit integer" if scale > 1 else
                    f"a write time of {value} is out of the range of a signed 64-bit integer")
            raise RowError(name, row_base + row, what)
    if column.type != want:
        column = column.cast(want)
    if scale > 1:
        column = pc.multiply(column, scale)
    return batch.set_column(i, name, column)


@dataclass(frozen=True)
class _Ring:
    """What a load reads of the cluster once (:meth:`CqlDescription.read_ring`) and hands to
    each of its sessions: the ``host_id`` of every node the ring was read with (a connection
    must reach one of them), the keyspace's replica placement, the local data centre, and
    the contact point that listed the ring (``HOST:PORT``, for messages). Plain values only:
    it is pickled with the description to worker processes."""

    members: frozenset
    placement: Placement
    local_dc: str | None
    contact: str
    #: (host_id, HOST:PORT where it is reached) of each node that has a host_id
    hosts: tuple = ()
    #: the SUPPORTED body the contact point answered (its protocol extensions), or None
    supported: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class CqlDescription(DescriptionDefaults):
    """A CQL table: ``hosts`` (``HOST[:PORT]``, normalized; the contact points), ``keyspace``
    and ``table`` (as the schema stores them), the write ``consistency`` (a name of
    :data:`CONSISTENCY_LEVELS`), ``username``/``password`` (PasswordAuthenticator),
    ``tls`` (``{"certificate": ..., "ca": ...}``, or None for plain TCP), ``window`` (requests
    in flight per connection), ``retries`` (overloaded, write timeout and unavailable answers
    re-sent at most that many times, after a doubling pause), ``timeout`` (seconds) and
    ``address_map`` (:func:`address_map_of`: where the nodes the cluster advertises are
    reached; see :meth:`reached`) and ``local_dc`` (the data centre whose replicas the rows
    go to; None: the contact point's); ``ttl`` and ``timestamp`` (the load's TTL in seconds
    and write time in microseconds, None: the table's), ``ttl_column`` and
    ``timestamp_column`` (the data's columns holding each row's) and ``nulls`` (a null
    outside the primary key sent ``"unset"`` or ``"null"``)..

    The ring and the replica placement are read once per load, by :meth:`plan`, and kept
    with the description (an attribute, not a field: neither compared nor shown) for every
    session it opens, those of worker processes included, which receive it pickled with
    the description: a few lists of the ring's tokens and nodes, cheaper to send than to
    read again from the cluster and compute (three queries and a walk of the ring per
    token). A session of a description no plan was made with reads it itself."""

    hosts: tuple[str, ...]
    keyspace: str
    table: str
    consistency: str = DEFAULT_CONSISTENCY
    username: str | None = None
    password: str | None = dataclass_field(default=None, repr=False)
    tls: Mapping[str, Any] | None = None
    window: int = DEFAULT_WINDOW
    retries: int = DEFAULT_RETRIES
    timeout: float = DEFAULT_TIMEOUT
    address_map: tuple[tuple[str, str], ...] = ()
    local_dc: str | None = None
    ttl: int | None = None
    timestamp: int | None = None
    ttl_column: str | None = None
    timestamp_column: str | None = None
    nulls: str = "unset"

    units = True
    kind: ClassVar[str] = "cql"

    @classmethod
    def of(cls, *args: Any, **options: Any) -> "CqlDescription":
        """:func:`cql`'s description (its arguments, every one judged)."""
        return cql(*args, **options)

    # -------------------------------------------------------------------- connections

    def connect(self, host: str, port: int, cancel: Any = None, *, local_port: int = 0,
                tablets_routing: bool = False) -> Any:
        """A logged-in connection to one node (``ConnectError`` naming it when refused, and
        when the connection is lost or times out before the node is ready: no connection
        was made, so :meth:`contact` goes on to the next contact point). ``cancel``, a
        ``_core.CqlCancel``, ends the connect and every later wait of the connection once
        cancelled (``ConnectionLostError``: aborted). ``local_port``: the port to connect
        from (0: any); ``tablets_routing``: ask a ScyllaDB node for tablet routing entries."""
        try:
            return _core.CqlConnection(
                host, port, username=self.username, password=self.password,
                tls=_tls_context(self.tls) if self.tls is not None else None,
                timeout=self.timeout, connect_timeout=min(self.timeout, 10.0), cancel=cancel,
                local_port=local_port, tablets_routing=tablets_routing)
        except (ConnectionLostError, TransportTimeoutError) as exc:
            if cancel is not None and cancel.cancelled:
                raise  # aborted: nothing about the node to say
            raise _no_handshake(exc, tls=self.tls is not None) from exc

    def contact(self) -> tuple[Any, tuple[str, int]]:
        """A connection to the first of :attr:`hosts` that answers, and that contact point
        (host, port); else the last failure, naming every host tried."""
        failures = []
        for spelled in self.hosts:
            point = parse_host(spelled)
            try:
                return self.connect(*point), point
            except (ConnectError, TLSError) as exc:
                failures.append(exc)
        error = failures[-1]
        if len(failures) > 1:
            error.add_note("no CQL host answered: " +
                           "; ".join(str(exc) for exc in failures))
        raise error

    def query(self, conn: Any, cql: str) -> dict:
        """The parsed RESULT of one ``SELECT`` (at ONE): Rows of the columns it names, else
        a ``ProtocolError`` naming the node, the query and what the answer is."""
        _, answer = conn.request(_core.CQL_OP_QUERY, _core.cql_query_body(cql, 0x0001))
        with _answer_to(conn, cql):
            result = _core.cql_parse_result(answer)
            if result["kind"] != "rows":
                raise ValueError(f"a RESULT of kind {result['kind']}, not Rows")
            names = [column[2] for column in result["columns"]]
            asked = [name.strip() for name in cql[len("SELECT "):cql.index(" FROM ")].split(",")]
            if names != asked:
                raise ValueError(f"Rows of the columns {names}, not {asked}")
        return result

    def ring(self, conn: Any, contact: tuple[str, int]) -> list[tuple[tuple[str, int], RingNode]]:
        """The nodes owning tokens, as the node at ``contact`` (``conn``) lists them, each
        with the (host, port) it is reached at (:meth:`reached`): that node first. Its peers
        are read from ``system.peers_v2`` (Cassandra 4 and later: each one's native port
        with it), or from ``system.peers`` where the server has no such table."""
        local = self.query(conn, SELECT_LOCAL)
        try:
            peers = self.query(conn, SELECT_PEERS_V2)
        except CqlServerError as exc:
            if exc.code != 0x2200:  # Invalid: an unknown table (older servers, Scylla)
                raise
            peers = self.query(conn, SELECT_PEERS)
        with _answer_to(conn, "system.local and system.peers"):
            nodes = ring_nodes(local, peers)
        return [(self.reached(contact, node), node) for node in nodes]

    def replication(self, conn: Any) -> Replication:
        """The keyspace's replication, as ``system_schema.keyspaces`` holds it
        (``ValueError`` when the keyspace does not exist)."""
        query = (f"SELECT replication FROM system_schema.keyspaces "
                 f"WHERE keyspace_name = {_literal(self.keyspace)}")
        result = self.query(conn, query)
        with _answer_to(conn, "system_schema.keyspaces"):
            rows = result["rows"]
            if not rows or rows[0][0] is None:
                raise KeyError(f"no replication for keyspace {self.keyspace}")
            return Replication.of(decode_text_map(rows[0][0]))

    def placement(self, conn: Any, contact: tuple[str, int]) -> tuple[list, Placement, str | None]:
        """The ring as the node at ``contact`` lists it (:meth:`ring`), the keyspace's
        replica placement over its nodes as they are reached (``HOST:PORT``; nodes reached
        at one place are one node), and the local data centre (:attr:`local_dc`, else the
        contact point's). Judged before any row is sent: ``ValueError`` when no node is in
        the local data centre (naming the ones there are), and, at a LOCAL_* consistency,
        when the local data centre holds no replica of some token (naming the keyspace,
        its replication and the data centre)."""
        found = self.ring(conn, contact)
        replication = self.replication(conn)
        tokens: dict[str, list[int]] = {}
        locations: dict[str, tuple[str | None, str | None]] = {}
        for reached, node in found:
            name = _spelled(*reached)
            tokens.setdefault(name, []).extend(node.tokens)
            locations.setdefault(name, (node.datacenter, node.rack))
        placement = Placement(tokens, locations, replication)
        local_dc = self.local_dc
        if local_dc is None:
            local_dc = next((n.datacenter for _, n in found if n.local), None)
        if local_dc is not None:
            placement.check_local(local_dc, self.consistency in LOCAL_LEVELS, self.keyspace)
        return found, placement, local_dc

    def read_ring(self, conn: Any, contact: tuple[str, int]) -> _Ring:
        """:meth:`placement` as a session takes it (:class:`_Ring`)."""
        found, placement, local_dc = self.placement(conn, contact)
        members = frozenset(node.host_id for _, node in found if node.host_id is not None)
        hosts = tuple((node.host_id, _spelled(*reached)) for reached, node in found
                      if node.host_id is not None)
        return _Ring(members, placement, local_dc, _spelled(*contact), hosts,
                     getattr(conn, "supported", None))

    def reached(self, contact: tuple[str, int], node: RingNode) -> tuple[str, int]:
        """Where ``node`` is reached: the node that answered at ``contact`` at that contact
        point, always; a peer at the address it advertises, at its advertised port, or,
        where it advertises none, at the port given with its address in :attr:`hosts`, else
        at ``contact``'s port, unless :attr:`address_map` maps it (``ADDRESS:PORT`` first,
        then ``ADDRESS``; a mapped ``HOST`` without a port keeps the port).

        >>> d = CqlDescription.of("127.0.0.1:19042", "ks", "t",
        ...                       address_map={"172.17.0.3": "127.0.0.1:19043"})
        >>> contact = ("127.0.0.1", 19042)
        >>> d.reached(contact, RingNode("172.17.0.2", None, (0,), local=True))
        ('127.0.0.1', 19042)
        >>> d.reached(contact, RingNode("172.17.0.3", 9042, (1,)))
        ('127.0.0.1', 19043)
        >>> d.reached(contact, RingNode("172.17.0.4", None, (2,)))
        ('172.17.0.4', 19042)
        """
        if node.local:
            return contact
        port = node.port
        if port is None:
            given = [p for h, p in map(parse_host, self.hosts) if h == node.address]
            port = given[0] if given else contact[1]
        mapped = dict(self.address_map)
        target = mapped.get(_spelled(node.address, port), mapped.get(node.address))
        if target is None:
            return node.address, port
        host, mapped_port = _endpoint(target)
        return host, port if mapped_port is None else mapped_port

    def insert(self, names: Sequence[str]) -> str:
        """The INSERT of the table's columns ``names``, with ``USING TTL`` and ``TIMESTAMP``
        when the target has them (a marker, ``?``, for a per-row column).

        >>> CqlDescription.of("h", "ks", "t", ttl=60, timestamp_column="ts").insert(["k"])
        'INSERT INTO "ks"."t" ("k") VALUES (?) USING TTL 60 AND TIMESTAMP ?'
        """
        using = [f"{word} {'?' if column is not None else value}"
                 for word, value, column in (("TTL", self.ttl, self.ttl_column),
                                             ("TIMESTAMP", self.timestamp, self.timestamp_column))
                 if value is not None or column is not None]
        return (f"INSERT INTO {_quoted(self.keyspace)}.{_quoted(self.table)} "
                f"({', '.join(map(_quoted, names))}) VALUES ({', '.join('?' * len(names))})"
                + (f" USING {' AND '.join(using)}" if using else ""))

    def markers(self) -> int:
        """The markers of ``USING`` (after the columns'): one per per-row column given."""
        return (self.ttl_column is not None) + (self.timestamp_column is not None)

    def prepare(self, conn: Any, names: Sequence[str]) -> Prepared:
        """PREPARE of the INSERT of ``names`` on ``conn`` (:meth:`insert`)."""
        _, answer = conn.request(_core.CQL_OP_PREPARE, _core.cql_prepare_body(self.insert(names)))
        return Prepared.from_result(answer)

    def columns_of(self, conn: Any, what: str) -> dict:
        """``{column name: its <what>}`` of the table, read from ``system_schema.columns``
        on ``conn`` (``what``: ``kind``, ``type``); empty when there is no such table."""
        result = self.query(conn, f"SELECT column_name, {what} FROM system_schema.columns "
                                  f"WHERE keyspace_name = {_literal(self.keyspace)} AND "
                                  f"table_name = {_literal(self.table)}")
        with _answer_to(conn, "system_schema.columns"):
            return {_text(row[0]): _text(row[1]) for row in result["rows"]}

    def column_types(self, names: Sequence[str]) -> dict:
        """The Arrow type each of the table's columns ``names`` takes a constant value as
        (:mod:`bulkwire.load.mapping`: the value converted once), read from
        ``system_schema.columns``; None for a type without one here (the schema check
        judges it). ``ValueError`` naming a name that is not a column of the table."""
        pa = _pyarrow()
        arrow = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
                 "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(),
                 "boolean": pa.bool_(), "text": pa.string(), "varchar": pa.string(),
                 "ascii": pa.string(), "blob": pa.binary(), "timestamp": pa.timestamp("ms"),
                 "date": pa.date32(), "uuid": pa.binary(16), "timeuuid": pa.binary(16)}
        conn, _ = self.contact()
        with conn:
            types = self.columns_of(conn, "type")
        for name in names:
            if name not in types:
                raise ValueError(f"constant column {name!r} is not a column of "
                                 f"{self.keyspace}.{self.table}")
        return {name: arrow.get(types[name].strip().lower()) for name in names}

    # -------------------------------------------------------------------- TargetDescription

    def plan(self, schema: Any, source: str, options: LoadOptions) -> _CqlPlan:
        """The table's columns read, the data's columns (``columns``: these only) matched to
        them by name, the INSERT prepared and the Arrow types checked against its markers.
        ``ttl_column`` and ``timestamp_column`` are read, never bound to a column of the
        table."""
        per_row = [(option, name) for option, name in (("ttl_column", self.ttl_column),
                                                       ("timestamp_column", self.timestamp_column))
                   if name is not None]
        for option, name in per_row:
            if name not in schema.names:
                raise ValueError(f"{option} {name!r} is not a column of {source}")
            _per_row_type(_pyarrow(), schema.field(name).type, option, name)
        wanted = [name for name in options.columns or schema.names
                  if name not in (self.ttl_column, self.timestamp_column)]
        for name in wanted:
            if name not in schema.names:
                raise ValueError(f"{source} has no column {name!r}")
        conn, contact = self.contact()
        with conn:
            kinds = self.columns_of(conn, "kind")
            if not kinds:
                raise ValueError(f"table {self.keyspace}.{self.table} does not exist at "
                                 f"{conn.peer}")
            extra = [name for name in wanted if name not in kinds]
            if extra:
                raise ValueError(f"column {extra[0]!r} of {source} is not a column of "
                                 f"{self.keyspace}.{self.table} (leave it out with columns=)")
            missing = [name for name, kind in kinds.items()
                       if kind in ("partition_key", "clustering") and name not in wanted]
            if missing:
                raise ValueError(f"{source} has no column {missing[0]!r}, a primary key "
                                 f"column of {self.keyspace}.{self.table}")
            # the local data centre judged before any row; the ring kept for the sessions
            ring = self.read_ring(conn, contact)
            prepared = self.prepare(conn, wanted)
        object.__setattr__(self, "_ring", ring)
        bound = tuple(wanted) + tuple(name for _, name in per_row)
        if len(prepared.names) != len(bound):
            raise ProtocolError(f"{conn.peer} prepared {self.insert(wanted)} with "
                                f"{len(prepared.names)} markers, not {len(bound)}")
        # a null sent unset leaves the cell as it is (no tombstone); a key column's null
        # stays null, refused (a partition key's by the client, a clustering one's by the
        # server); a per-row TTL or write time left unset is the table's default
        keys = {name for name, kind in kinds.items() if kind in ("partition_key", "clustering")}
        unset = bytes(i >= len(wanted) or self.nulls == "unset" and name not in keys
                      for i, name in enumerate(bound))
        read = list(bound)
        checked = schema
        if per_row:  # checked as the encoder sends them (int32 seconds, int64 microseconds)
            pa = _pyarrow()
            for option, name in per_row:
                i = checked.get_field_index(name)
                checked = checked.set(i, pa.field(name, _per_row_type(
                    pa, checked.field(i).type, option, name)))
        _core.cql_check_schema(checked, list(bound), prepared.types)
        extra = dict(bound=bound, unset=unset, ttl_column=self.ttl_column,
                     timestamp_column=self.timestamp_column)
        if not per_row and not any(unset):  # the statement's markers, nothing sent unset
            extra = {}
        vectors = [(name, t) for name, t in zip(prepared.names, prepared.types)
                   if t.startswith("vector<")]
        if not vectors:
            return _CqlPlan(read, None, prepared, **extra)
        name, cql_type = vectors[0]
        # 4 bytes a float; 8 a double, a bigint, or at most (as far as the batch size goes)
        # anything else
        value_bytes = 4 if cql_type.startswith(("vector<float,", "vector<int,")) else 8
        return _CqlPlan(read, name, prepared, value_bytes, **extra)

    def encoder(self, schema: Any, plan: _CqlPlan, options: LoadOptions) -> _CqlEncoder:
        return _CqlEncoder(plan, CONSISTENCY_LEVELS[self.consistency])

    def placed(self, path: Any, files: list[str] | None) -> "CqlDescription":
        return self

    def describe(self) -> str:
        return f"{self.keyspace}.{self.table} at {', '.join(self.hosts)}"

    def request_per_unit(self, resume: bool) -> bool:
        return resume

    def open(self) -> "_CqlSession":
        return _CqlSession(self)

    # -------------------------------------------------------------------- ResumableTarget

    def resuming(self) -> "CqlDescription":
        return self  # an INSERT of the same row writes the same cells again

    def resume_options(self, encode: _CqlEncoder, options: LoadOptions) -> dict:
        recorded = {"columns": list(encode.plan.prepared.names),
                    "types": list(encode.plan.prepared.types), "consistency": self.consistency}
        # the options that change what a row writes, when given (a state recorded without
        # them is one of a load without them)
        for name in ("ttl", "timestamp", "ttl_column", "timestamp_column"):
            if getattr(self, name) is not None:
                recorded[name] = getattr(self, name)
        return recorded

    def resume_identity(self) -> dict:
        return {"hosts": list(self.hosts), "keyspace": self.keyspace, "table": self.table}

    def checked_identity(self, recorded: Any) -> dict:
        """``{"hosts": ["HOST:PORT", ...], "keyspace": ..., "table": ...}``, the hosts
        normalized and sorted."""
        if not (isinstance(recorded, dict) and set(recorded) == {"hosts", "keyspace", "table"}
                and all(isinstance(recorded[k], str) and recorded[k]
                        for k in ("keyspace", "table"))
                and isinstance(recorded["hosts"], list) and recorded["hosts"]
                and all(isinstance(h, str) for h in recorded["hosts"])):
            raise ValueError(f"target is {_short(recorded)}, not an object of CQL hosts, a "
                             f"keyspace and a table")
        hosts = sorted({_spelled(*parse_host(h)) for h in recorded["hosts"]})
        return {"hosts": hosts, "keyspace": recorded["keyspace"], "table": recorded["table"]}

    def identity_mismatch(self, recorded: dict) -> str:
        theirs = f"{recorded['keyspace']}.{recorded['table']} at {', '.join(recorded['hosts'])}"
        return (f"was written by a load into {_cut(theirs, 300)}; this load is into "
                f"{self.describe()}: a state file belongs to one table of one cluster (give "
                f"this load its own state file)")


@kind_constructor("cql")
def cql(hosts: str | Sequence[str], keyspace: str, table: str, *,
        consistency: str = DEFAULT_CONSISTENCY, username: str | None = None,
        password: str | None = None, tls: bool = False, certificate: Any = None,
        ca: Any = None, window: int = DEFAULT_WINDOW, retries: int = DEFAULT_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        address_map: Mapping[str, str] | None = None,
        local_dc: str | None = None, ttl: int | None = None, timestamp: int | None = None,
        ttl_column: str | None = None, timestamp_column: str | None = None,
        nulls: str = "unset") -> CqlDescription:
    """A Cassandra or Scylla table, ``keyspace.table``, as a load's target: each row one
    prepared INSERT of the data's columns, matched to the table's columns by name, and routed
    to a replica of its partition in the local data centre.

    ``hosts``: ``HOST[:PORT]`` (port 9042 by default) or a list of them, the contact points;
    the node that answers at one is loaded there, the other nodes are found in
    ``system.peers_v2`` (or ``system.peers``) and reached at the address and port each
    advertises, unless ``address_map`` maps it: ``{"ADDRESS" or "ADDRESS:PORT":
    "HOST[:PORT]"}``, an advertised address (at any port, or at that port) to where this
    machine reaches it (a port mapping, a NAT, a tunnel), e.g.
    ``{"172.17.0.3": "127.0.0.1:19043"}``. ``consistency``: the write consistency (a name of
    :data:`CONSISTENCY_LEVELS`, any case; default ``LOCAL_ONE``, the driver's default).
    ``username``/``password``: PasswordAuthenticator. ``tls`` (or ``certificate``/``ca``,
    as for the RavenDB target): TLS. ``window``: requests in flight per connection
    (:data:`DEFAULT_WINDOW`). ``retries``: overloaded, write timeout and unavailable answers
    re-sent at most that many times, after a doubling pause. ``timeout``: seconds a node
    may take to answer. ``local_dc``: the data centre the rows go to, each to the first
    replica of its token there (clockwise), as the driver's data-centre-aware routing does;
    by default the data centre of the node that answers at the contact point. A keyspace
    with no replica there sends the rows to another data centre's replicas, except at
    LOCAL_ONE and LOCAL_QUORUM, which fail before any row is sent.

    ``ttl``: seconds every row's cells live (0..:data:`MAX_TTL`; 0: for ever), and
    ``timestamp``: the write time of every row, microseconds since the epoch (a signed
    64-bit int): ``INSERT ... USING TTL 3600 AND TIMESTAMP 1767225600000000``.
    ``ttl_column`` and ``timestamp_column``: a column of the data holding each row's
    (``USING TTL ? AND TIMESTAMP ?``; integers, or Arrow timestamps for the write time),
    read but not written as a column; a null there is the table's default (sent unset).
    A value out of range is a :class:`~bulkwire.errors.RowError` naming the row.
    ``nulls``: a null in a column outside the primary key is sent ``"unset"`` (the
    default: the cell is left as it is, no tombstone is written; protocol v4) or, with
    ``"null"``, as a null (a tombstone, as an INSERT of that null does). A null in a
    primary key column is an error either way.

    Every argument is judged now (``ValueError`` or ``TypeError`` naming it; the TLS files
    read); the table's columns are read and the Arrow schema checked against the prepared
    INSERT when a load starts, before any row is read
    (:class:`bulkwire.errors.SchemaMismatchError` naming the column).

    >>> from bulkwire import targets
    >>> target = targets.cql(["db1:9142", "db2"], "ks", "points", consistency="quorum")
    >>> target.hosts, target.consistency, target.window == DEFAULT_WINDOW
    (('db1:9142', 'db2:9042'), 'QUORUM', True)
    """
    given = [hosts] if isinstance(hosts, str) else list(hosts)
    if not given:
        raise ValueError("hosts must name at least one CQL node")
    spelled = tuple(sorted({_spelled(*parse_host(h)) for h in given}))
    for name, value in (("keyspace", keyspace), ("table", table)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty str, not {value!r}")
    consistency_code(consistency)
    if (username is None) != (password is None):
        raise ValueError("username and password go together (PasswordAuthenticator)")
    check_window(window)
    check_retries(retries)
    if local_dc is not None and (not isinstance(local_dc, str) or not local_dc):
        raise ValueError(f"local_dc must be a non-empty str (a data centre), not {local_dc!r}")
    if not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise ValueError(f"timeout must be 0 < seconds <= 3600, not {timeout!r}")
    if address_map is not None and not isinstance(address_map, Mapping):
        raise TypeError(f"address_map must be a mapping of advertised addresses to "
                        f"HOST[:PORT], not {type(address_map).__name__}")
    mapped = address_map_of(address_map)
    _check_using(ttl, timestamp, ttl_column, timestamp_column)
    if nulls not in NULLS:
        raise ValueError(f"nulls must be one of {', '.join(map(repr, NULLS))}, not {nulls!r}")
    settings = None
    if tls or certificate is not None or ca is not None:
        settings = {"certificate": certificate, "ca": ca}
        _tls_context(settings)  # the files judged now, before anything is read
    return CqlDescription(hosts=spelled, keyspace=keyspace, table=table,
               consistency=consistency.upper(), username=username, password=password,
               tls=settings, window=window, retries=retries, timeout=float(timeout),
               address_map=mapped, local_dc=local_dc, ttl=ttl, timestamp=timestamp,
               ttl_column=ttl_column, timestamp_column=timestamp_column, nulls=nulls)


def _check_using(ttl: Any, timestamp: Any, ttl_column: Any, timestamp_column: Any) -> None:
    """The TTL and write time options: ``ValueError`` or ``TypeError`` naming the option."""
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int)
                            or not 0 <= ttl <= MAX_TTL):
        raise ValueError(f"ttl must be an int 0..{MAX_TTL} (seconds; 20 years at most), "
                         f"not {ttl!r}")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                  or not -(1 << 63) <= timestamp < (1 << 63)):
        raise ValueError(f"timestamp must be an int (microseconds since the epoch, a signed "
                         f"64-bit integer), not {timestamp!r}")
    for name, value in (("ttl_column", ttl_column), ("timestamp_column", timestamp_column)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{name} must be a non-empty str (a column), not {value!r}")
    if ttl is not None and ttl_column is not None:
        raise ValueError("ttl and ttl_column exclude each other (one TTL for the load, or "
                         "one per row)")
    if timestamp is not None and timestamp_column is not None:
        raise ValueError("timestamp and timestamp_column exclude each other (one write time "
                         "for the load, or one per row)")
    if ttl_column is not None and ttl_column == timestamp_column:
        raise ValueError(f"ttl_column and timestamp_column are both {ttl_column!r}")

def _tls_context(settings: Mapping[str, Any]) -> Any:
    """bulkwire's own TLS context for ``certificate`` and ``ca`` (:class:`bulkwire.tls.TlsSettings`
    reads and judges the files)."""
    from ..tls import TlsSettings

    tls = TlsSettings(settings.get("certificate"), settings.get("ca"))
    if not tls.native:
        raise TLSError("CQL over TLS needs bulkwire's own TLS client (this build has none)")
    return tls._native_context


class _CqlSession:
    """One session into the table: the ring and the keyspace's replica placement the load's
    plan read (:class:`_Ring`; read here for a description no plan was made with), one
    connection per node opened when a row first goes to it (the statement prepared
    there), each batch's rows sent to their nodes in parallel (each row to the first replica
    of its token in the local data centre: :meth:`CqlDescription.placement`,
    :meth:`~bulkwire.cql_placement.Placement.route`); :meth:`store` returns once every row
    was acknowledged. A node found down is left out of the session (:meth:`store`)."""

    def __init__(self, target: CqlDescription) -> None:
        self.target = target
        ring = getattr(target, "_ring", None)  # read by the load's plan
        if ring is None:
            conn, contact = target.contact()
            with conn:
                ring = target.read_ring(conn, contact)
        self.placement, self.local_dc, self.contact = ring.placement, ring.local_dc, ring.contact
        offered = ring.supported  # the cluster's extensions (SUPPORTED)
        #: the host_id of every node the ring was read with (a connection must reach one)
        self.members = ring.members
        #: (host, port) of each node, as it is reached; the placement names it HOST:PORT
        self.nodes = [parse_host(name) for name in self.placement.addresses]
        self.index = {name: i for i, name in enumerate(self.placement.addresses)}
        self.local_only = target.consistency in LOCAL_LEVELS
        self.dead: set[str] = set()
        self.live = self.placement.route(self.local_dc, (), self.local_only)
        #: the connections by (node, shard), and the tablets learned (ScyllaDB)
        self.router = ShardRouter(self._open, target.tls is not None, {
            host_id: self.index[address] for host_id, address in ring.hosts
            if address in self.index}, self._usable, offered)
        self.prepared: tuple[bytes, Sequence[str]] | None = None
        #: every connection of the session watches it: abort() ends each wait at once, in
        #: any thread, those of connections still being made or preparing included
        self.cancel = _core.CqlCancel()
        self.lock = threading.Lock()
        # a job per node, or per shard of a ScyllaDB node
        self.pool = ThreadPoolExecutor(min(64, 8 * len(self.nodes)),
                                       thread_name_prefix="bulkwire-cql")
        self.body_bytes = self.wire_bytes = 0
        self.retries = 0
        #: of the retries, those after an "overloaded" answer
        self.overloaded = 0

    #: with rejected rows (``max_errors``), called with the batch's row a node refused and
    #: why, before the batch's other rows go on; None: a refused row fails the load
    on_refused: Any = None

    def _open(self, node: int, local_port: int = 0, port: int | None = None) -> Any:
        """A new connection to ``node`` (at ``port``, else where it is reached), identified
        and the statement prepared there."""
        assert self.prepared is not None
        prepared_id, names = self.prepared
        host, reached_port = self.nodes[node]
        conn = self.target.connect(host, reached_port if port is None else port,
                                   cancel=self.cancel, local_port=local_port,
                                   tablets_routing=True)
        try:
            self._identify(conn)
            # the statement's markers of USING TTL ? / TIMESTAMP ? are not columns
            prepared = self.target.prepare(conn, names[:len(names) - self.target.markers()])
            if prepared.id != prepared_id:
                raise ServerError(f"{conn.peer} prepared the INSERT as another statement "
                                  f"(the table changed during the load?)")
        except BaseException:
            conn.close()
            raise
        return conn

    def _usable(self, node: int) -> bool:
        """Whether rows may go to ``node``: alive, and in the local data centre (when
        one is known)."""
        address = self.placement.addresses[node]
        return address not in self.dead and (
            self.local_dc is None or self.placement.locations[address][0] == self.local_dc)

    def _conn(self, node: int, prepared_id: bytes, names: Sequence[str],
              shard: int = -1) -> Any:
        """The connection for ``node``'s rows of ``shard`` (-1: its first connection)."""
        if self.prepared is None:
            self.prepared = (prepared_id, names)
        return self.router.get(node, shard)

    def _identify(self, conn: Any) -> None:
        """Checks that ``conn`` reached a node of the ring (its ``host_id``, which stays with
        a node whatever its address): an address can come to answer as another node (one
        that left or restarted elsewhere, its address taken by another), of this cluster or
        of another. ``ConnectError`` otherwise: the node the ring names is not there."""
        if not self.members:
            return
        rows = self.target.query(conn, "SELECT host_id FROM system.local")["rows"]
        cell = rows[0][0] if len(rows) == 1 and rows[0] else None
        host_id = uuid.UUID(bytes=cell) if cell is not None and len(cell) == 16 else None
        if host_id not in self.members:
            raise ConnectError(f"{conn.peer}: answers as node {host_id}, which is not a node "
                               f"of the cluster {self.contact} lists (its address taken by "
                               f"another node?): not loaded there")

    def _run(self, job: tuple[int, int], encoded: list, rows: Any) -> tuple[int, int]:
        bodies, ends, tokens, _, p = encoded
        node, shard = job
        conn = self._conn(node, p.id, p.names, shard)
        sharding = self.router.sharding.get(node)
        if shard == -1 and sharding is not None and tokens:
            # the node's first connection said now that it shards: its rows by shard
            return self._run_by_shard(node, sharding, encoded, rows)
        return self._send(conn, bodies, ends, rows)

    def _send(self, conn: Any, bodies: Any, ends: Any, rows: Any) -> tuple[int, int]:
        with self.router.using(conn):  # a connection may serve several shards' rows
            before = conn.overloaded
            try:
                return conn.run_packed(_core.CQL_OP_EXECUTE, bodies, ends, rows,
                                       window=self.target.window,
                                       max_retries=self.target.retries)
            finally:
                self.router.learn(conn)
                with self.lock:
                    self.overloaded += conn.overloaded - before

    def _run_by_shard(self, node: int, sharding: Any, encoded: list,
                      rows: Any) -> tuple[int, int]:
        """Sends ``rows`` (None: the batch's) of ``node`` each on the connection of its
        token's shard, one shard after another. A failure names, as not acknowledged
        (``unacknowledged``), every row it leaves so: in flight or never sent."""
        import numpy as np

        bodies, ends, tokens, _, p = encoded
        selection = (np.arange(len(ends) // 8, dtype=np.int32) if rows is None
                     else np.asarray(rows, dtype=np.int32))
        chosen = np.frombuffer(tokens, dtype=np.int64)[selection]
        shards = np.frombuffer(sharding.shards(chosen.tobytes()), dtype=np.int32)
        done, answered, retries = np.zeros(len(selection), dtype=bool), 0, 0
        for shard in np.unique(shards):
            part = np.flatnonzero(shards == shard)
            try:
                conn = self._conn(node, p.id, p.names, int(shard))
                got = self._send(conn, bodies, ends, selection[part])
            except BaseException as exc:
                sent = getattr(exc, "sent", 0) or 0
                in_flight = list(getattr(exc, "unacknowledged", None) or [])
                left = np.concatenate([selection[part][sent:], selection[~done][
                    ~np.isin(np.flatnonzero(~done), part)]])
                exc.unacknowledged = sorted(set(in_flight) | set(left.tolist()))  # type: ignore[attr-defined]
                exc.sent = len(selection)  # type: ignore[attr-defined]
                raise
            done[part] = True
            answered, retries = answered + got[0], retries + got[1]
        return answered, retries

    def store(self, encoded: list, rows: int) -> int:
        """Sends one batch's rows, each to the first replica of its token in the local data
        centre; returns the body bytes once every row was acknowledged. A node that cannot
        be reached, or whose connection is lost or times out, is left out of the session
        while another node is left: its rows not acknowledged go to their next replica up
        in the local data centre (:meth:`~bulkwire.cql_placement.Placement.route` says
        where, when none is), which coordinates their writes at the load's consistency. Any
        other failure (and the last node's) raises the node's error, with the source rows it
        names (``source_row``: the row the server refused; a note lists the rows not
        acknowledged)."""
        if not rows:
            return 0
        import numpy as np

        bodies, ends, tokens, row_base, _ = encoded
        # the batch's rows still to send (None: all of them), and the parts sent after them
        pending, later = self.router.phases(np, tokens, rows)
        while True:
            jobs = self._jobs(np, tokens, pending, encoded[4])
            if self.pool is None or len(jobs) == 1:
                outcomes = [self._outcome(n, encoded, sel) for n, sel in jobs]
            else:
                outcomes = list(self.pool.map(lambda job: self._outcome(job[0], encoded, job[1]),
                                              jobs))
            failures, again = [], []
            for ((node, _), selection), outcome in zip(jobs, outcomes):
                if not isinstance(outcome, BaseException):
                    self.retries += outcome[1]
                elif _node_down(outcome) and len(self.nodes) - len(self.dead) > 1:
                    if self.placement.addresses[node] not in self.dead:
                        self._down(node)
                    again.append(_not_acknowledged(np, outcome, selection, rows))
                elif self.on_refused is not None and _refused_row(outcome):
                    # the row goes to the rejected file; the others not acknowledged again
                    self.on_refused(outcome.row, f"refused by the server: {outcome.failure}")
                    if set(getattr(outcome, "unacknowledged", None) or ()) - {outcome.row}:
                        self._reconnect(node)  # answers still due: the connection is done
                    left = _not_acknowledged(np, outcome, selection, rows)
                    again.append(left[left != outcome.row])
                else:
                    failures.append((outcome, selection))
            if failures:  # every row of the batch not acknowledged: the failed runs', and
                # those of nodes left out, which will not be sent again
                missing = again + [_not_acknowledged(np, e, sel, rows)
                                   for e, sel in failures] + later
                error = _named(failures[0][0], row_base, rows,
                               np.unique(np.concatenate(missing)).tolist())
                # the error's traceback will hold this frame: it must not hold the error
                del outcomes, failures, outcome, missing
                try:
                    raise error
                finally:
                    del error
            again = [left for left in again if len(left)]
            if not again and not later:
                break
            if again:
                pending = np.concatenate(again)
            else:
                parts = self.router.probed(np, tokens, later.pop(0))
                pending, later = parts[0], parts[1:] + later
        self.body_bytes += len(bodies)
        self.wire_bytes += len(bodies) + 9 * rows  # each body in a frame of its own
        return len(bodies)

    def _jobs(self, np: Any, tokens: bytes, pending: Any, p: Prepared) -> list:
        """((node, shard), selection) for each live node (and shard of a ScyllaDB node:
        :class:`~bulkwire.load.cql_shards.ShardRouter`) rows go to: the rows (``pending``, or
        all) whose token it is the route of (selection None: every row of the batch)."""
        if self.prepared is None:
            self.prepared = (p.id, p.names)
        single = len(self.live.used) == 1 and not len(self.router.tablets)
        if single and self.router.sharding.get(self.index[self.live.used[0]]) is None:
            # one node takes every token: its first connection (split by shard there)
            return [((self.index[self.live.used[0]], -1),
                     None if pending is None else pending.astype(np.int32))]
        chosen_tokens = np.frombuffer(tokens, dtype=np.int64)
        if pending is not None:
            chosen_tokens = chosen_tokens[pending]
        to_node = np.array([self.index[a] for a in self.live.addresses], dtype=np.int32)
        owners = to_node[np.frombuffer(self.live.primaries(chosen_tokens.tobytes()),
                                       dtype=np.int32)]
        owners, shards = self.router.split(np, chosen_tokens, owners)
        keys = owners.astype(np.int64) * 65536 + (shards.astype(np.int64) + 1)
        present = np.unique(keys)
        jobs = []
        for key in present:
            job = (int(key) // 65536, int(key) % 65536 - 1)
            if pending is None and len(present) == 1:
                jobs.append((job, None))
            else:
                rows = np.flatnonzero(keys == key)
                selection = rows if pending is None else pending[rows]
                jobs.append((job, selection.astype(np.int32)))
        return jobs

    def _reconnect(self, node: int) -> None:
        """Closes the connections to ``node``: the next row for it opens another."""
        for conn in self.router.drop(node):
            conn.close()

    def _down(self, node: int) -> None:
        """Leaves ``node`` out of the session: its connections closed, the ring without it."""
        for conn in self.router.drop(node):
            conn.close()
        self.dead.add(self.placement.addresses[node])
        self.live = self.placement.route(self.local_dc, sorted(self.dead), self.local_only)

    def _outcome(self, job: tuple[int, int], encoded: list, rows: Any) -> Any:
        try:
            return self._run(job, encoded, rows)
        except BaseException as exc:  # noqa: BLE001 - raised by store, with its rows
            return exc

    def close(self) -> None:
        self._shutdown()

    def abort(self) -> None:
        """Ends the session at once: a connect, a PREPARE or a run still waiting for a node in
        another thread (after Ctrl-C in the main one) ends now, not at its timeout."""
        self.cancel.cancel()
        self._shutdown()

    def _shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        for conn in self.router.all():
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing what failed says nothing more
                pass
        self.cancel.close()  # its pipe closed (every connection that held it is closed)
        self.router.release()  # it held this session's methods


@contextlib.contextmanager
def _answer_to(conn: Any, query: str) -> Iterator[None]:
    """Reading ``conn``'s answer to ``query``: what it does not hold as that query's answer
    (a cell of another type, a token that is not a Murmur3 token, a name that is not UTF-8,
    a body that does not parse) is a ``ProtocolError`` naming the node, the query and what
    was wrong, never a bare Python error."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
        what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
        raise ProtocolError(f"{conn.peer}: the answer to {query} is malformed: {what}") from exc


def _refused_row(exc: BaseException) -> bool:
    """Whether ``exc`` is a node refusing one row as invalid (the rows around it unharmed):
    a row that may be set aside."""
    return (isinstance(exc, CqlServerError) and exc.code == 0x2200
            and getattr(exc, "row", None) is not None)


def _node_down(exc: BaseException) -> bool:
    """Whether ``exc`` says the node is gone (unreachable, connection lost, no answer), not
    that it refused something: a TLS failure is the configuration's, not the node's."""
    return (isinstance(exc, (ConnectError, ConnectionLostError, TransportTimeoutError))
            and not isinstance(exc, TLSError))


def _not_acknowledged(np: Any, exc: BaseException, selection: Any, rows: int) -> Any:
    """The batch's rows of a failed run that were not acknowledged: those in flight
    (``unacknowledged``) and those never sent (from ``sent`` on; all of them when the
    connection was never made)."""
    chosen = np.arange(rows, dtype=np.int32) if selection is None else selection
    in_flight = np.array(getattr(exc, "unacknowledged", None) or [], dtype=np.int32)
    return np.concatenate([in_flight, chosen[getattr(exc, "sent", 0) or 0:]])


def _named(exc: BaseException, row_base: int, rows: int, missing: list) -> BaseException:
    """``exc`` in the rows of the source (``errors._name_source_rows``): the refused row (its
    ``row`` in the batch of ``rows`` rows, counted from ``row_base``) and ``missing``, the
    batch's rows not acknowledged (the others were)."""
    if not isinstance(exc, Exception):  # Ctrl-C: nothing of the server's to word
        return exc
    exc._batch_stop = row_base + rows  # type: ignore[attr-defined]
    row = getattr(exc, "row", None)
    _name_source_rows(exc, None if row is None else row_base + row,
                      [row_base + r for r in missing])
    return exc


def _no_handshake(exc: BaseException, *, tls: bool) -> ConnectError:
    """The ``ConnectError`` for a connection lost or timed out during its handshake, before
    the node was ready. A port whose client_encryption_options take only TLS resets a plain
    connection at its first bytes: without TLS, the message says so."""
    hint = ("; a port that takes only TLS resets a plain connection so: does the node want "
            "TLS (tls=True, --cql-tls)?") if isinstance(exc, ConnectionLostError) and not tls \
        else ""
    return ConnectError(f"{exc} (the handshake did not complete: no connection was made)"
                        f"{hint}")
