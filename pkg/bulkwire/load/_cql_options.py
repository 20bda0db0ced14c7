"""The CQL target's options judged (:func:`bulkwire.load.cql_target.cql` reads them): the
write consistency levels, the window and retries of a connection, ``HOST[:PORT]`` and the
address map, the TTL and write time, the TLS files; and the defaults of each.
"""
from __future__ import annotations

import ipaddress
from typing import Any, Iterable, Mapping

from .. import _core
from ..errors import TLSError

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


def _int_within(name: str, value: Any, bounds: tuple[int, int]) -> int:
    """``value`` when it is an int (not a bool) within ``bounds``, both ends included;
    ``ValueError`` naming the option ``name`` otherwise."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int {low}..{high}, not {value!r}")
    return value


def check_window(window: Any) -> int:
    """``window`` (requests in flight per connection), an int in :data:`WINDOW_RANGE`;
    ``ValueError`` naming it otherwise.

    >>> check_window(2)
    2
    """
    return _int_within("window", window, WINDOW_RANGE)


def check_retries(retries: Any) -> int:
    """``retries`` (re-sends of an overloaded answer), an int in :data:`RETRIES_RANGE`;
    ``ValueError`` naming it otherwise.

    >>> check_retries(0)
    0
    """
    return _int_within("retries", retries, RETRIES_RANGE)


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
