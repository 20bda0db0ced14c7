"""The command line's option values read from text: integers, ports, sizes (``50MB``), rates,
URLs, CQL hosts and address maps, column maps, constants, and ``--take``'s row indices.
"""
from __future__ import annotations

import argparse
import re


def _positive_int(text: str) -> int:
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


#: The units a size may end with (``50MB``, ``1GiB``, ``512k``): powers of 1000 without an
#: ``i``, of 1024 with one; ``K``/``M``/``G``/``T`` alone are powers of 1000.
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
               "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12,
               "tb": 10**12, "tib": 2**40}
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """A size in bytes from text: ``1048576``, ``50MB`` (10**6), ``1GiB`` (2**30), ``1.5M``.

    >>> parse_size("50MB"), parse_size("1GiB"), parse_size("512")
    (50000000, 1073741824, 512)
    """
    found = _SIZE.match(text)
    unit = found["unit"].lower() if found is not None else None
    if found is None or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (a number of bytes, or one with "
                                         f"a unit: 50MB, 1GiB)")
    return int(float(found["number"]) * _SIZE_UNITS[unit])


def _rate(text: str) -> float:
    """A rate of rows per second (``--max-rate``): a number (the load judges its range)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return int(value) if value.is_integer() else value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _port(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0-65535): {value}")
    return value


def _urls(text: str) -> list:
    """One --url value: a URL, or several separated by commas (a cluster's nodes), each
    judged by :func:`bulkwire.urls.parse_server_url` (argparse reports a refusal as usage)."""
    from .urls import parse_server_url

    try:
        if "@" in text:  # judged whole: a password may hold a comma, or an '@' and a comma
            parse_server_url(text, "URL")
        urls = [url.strip() for url in text.split(",")]
        if not all(urls):
            raise ValueError(f"empty URL in {text!r} (give one URL per --url, or the URLs "
                             f"separated by single commas)")
        for url in urls:
            parse_server_url(url, "URL")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return urls


def _cql_hosts(text: str) -> list:
    """One --cql value: HOST[:PORT], or several separated by commas, each judged by
    :func:`bulkwire.load.cql_target.parse_host`."""
    from .load.cql_target import parse_host

    hosts = [host.strip() for host in text.split(",")]
    try:
        for host in hosts:
            parse_host(host)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return hosts


def _column_map(text: str) -> list:
    """One --map value: SOURCE=TARGET, or several separated by commas; the pairs.

    >>> _column_map("emb=vector,id=pk")
    [('emb', 'vector'), ('id', 'pk')]
    """
    pairs = []
    for entry in text.split(","):
        source, equals, target = (part.strip() for part in entry.partition("="))
        if not (equals and source and target):
            raise argparse.ArgumentTypeError(f"{entry!r} is not SOURCE=TARGET (a column of the "
                                             f"data = its name in the target)")
        pairs.append((source, target))
    return pairs


def _constant(text: str) -> tuple:
    """One --set value: NAME=VALUE (the value as text, taken whole: it may hold commas and
    equals signs).

    >>> _constant("source=export-2026-12")
    ('source', 'export-2026-12')
    """
    name, equals, value = text.partition("=")
    if not (equals and name.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (a constant column)")
    return name.strip(), value


def _cql_address_map(text: str) -> list:
    """One --cql-address-map value: FROM=TO, or several separated by commas, each judged by
    :func:`bulkwire.load.cql_target.address_map_of`; the (FROM, TO) pairs.

    >>> _cql_address_map("172.17.0.3=127.0.0.1:19043,10.0.0.2:9042=tunnel")
    [('172.17.0.3', '127.0.0.1:19043'), ('10.0.0.2:9042', 'tunnel')]
    """
    from .load.cql_target import address_map_of

    pairs = []
    for entry in (one.strip() for one in text.split(",")):
        source, equals, target = entry.partition("=")
        if not (equals and source.strip() and target.strip()):
            raise argparse.ArgumentTypeError(f"{entry!r} is not FROM=TO (an address the "
                                             f"cluster advertises = HOST[:PORT])")
        try:
            address_map_of([(source, target)], what=f"entry {entry!r}")
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        pairs.append((source, target))
    return pairs


def _parse_take(text: str | None) -> list | None:
    """``--take 1,5,7`` or ``--take @file`` (whitespace/comma separated indices)."""
    if text is None:
        return None
    if text.startswith("@"):
        try:
            with open(text[1:]) as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"--take {text}: cannot read {text[1:]!r}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    items = [t for t in text.replace(",", " ").split() if t]
    out = []
    for pos, item in enumerate(items):
        try:
            out.append(int(item))
        except ValueError:
            raise ValueError(f"--take: take[{pos}] = {item!r} is not an integer") from None
    return out
