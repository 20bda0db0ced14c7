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
from dataclasses import dataclass, field as dataclass_field
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from .. import _core
from ..cql_placement import Placement, Replication, decode_text_map
from ..cql_statements import (SELECT_LOCAL, SELECT_PEERS, SELECT_PEERS_V2, Prepared,
                              RingNode, ring_nodes)
from ..errors import (ConnectError, ConnectionLostError, CqlServerError, ProtocolError,
                      TLSError, TransportTimeoutError)
from ..load_options import LoadOptions
from .._arrow import _pyarrow
# the options (their defaults and judges), the rows and the session: rooms of their own,
# their names kept here
from ._cql_options import (CONSISTENCY_LEVELS, DEFAULT_CONSISTENCY, DEFAULT_PORT,
                           DEFAULT_RETRIES, DEFAULT_TIMEOUT, DEFAULT_WINDOW, LOCAL_LEVELS,
                           MAX_TTL, NULLS, RETRIES_RANGE, TIMESTAMP_MARKER, TTL_MARKER,
                           WINDOW_RANGE, _check_using, _endpoint, _spelled, _tls_context,
                           address_map_of, check_retries, check_window, consistency_code,
                           parse_host)
from ._cql_rows import _CqlEncoder, _CqlPlan, _per_row_type
from ._cql_session import _CqlSession
from .interface import DescriptionDefaults, _cut, _short, kind_constructor

__all__ = ["CONSISTENCY_LEVELS", "DEFAULT_CONSISTENCY", "DEFAULT_PORT", "DEFAULT_RETRIES",
           "DEFAULT_TIMEOUT", "DEFAULT_WINDOW", "LOCAL_LEVELS", "MAX_TTL", "NULLS",
           "RETRIES_RANGE", "TIMESTAMP_MARKER", "TTL_MARKER", "WINDOW_RANGE", "CqlDescription",
           "address_map_of", "check_retries", "check_window", "consistency_code", "cql",
           "parse_host"]


def _quoted(name: str) -> str:
    """A CQL identifier, quoted (its case kept)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text(cell: bytes | None) -> str:
    return "" if cell is None else cell.decode()


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


def _no_handshake(exc: BaseException, *, tls: bool) -> ConnectError:
    """The ``ConnectError`` for a connection lost or timed out during its handshake, before
    the node was ready. A port whose client_encryption_options take only TLS resets a plain
    connection at its first bytes: without TLS, the message says so."""
    hint = ("; a port that takes only TLS resets a plain connection so: does the node want "
            "TLS (tls=True, --cql-tls)?") if isinstance(exc, ConnectionLostError) and not tls \
        else ""
    return ConnectError(f"{exc} (the handshake did not complete: no connection was made)"
                        f"{hint}")
