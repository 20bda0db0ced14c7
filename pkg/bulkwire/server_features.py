"""What the server of a bulk insert can read, from its version (``GET /build/version``).

A server older than the RavenDB release that added a part of the bulk insert protocol does not
say so when it gets it: RavenDB 4.1 answers a zstd body, a ``Counters``, ``TimeSeriesBulkInsert``
or ``AttachmentPUT`` command with ``HTTP 500 ... Failed to process bulk insert``, which names
neither the feature nor the version. So before such a body goes out, :func:`require` asks the
node that takes the insert for its version (once per insert) and raises
:class:`~bulkwire.errors.UnsupportedByServer`, naming the feature, the server and its version,
when the version is known to be older. A server that does not tell its version is given the
body: its own answer decides.

``compress=True`` (gzip) needs no question: every RavenDB server reads gzip bodies.

>>> parse_version({"FullVersion": "4.1.0", "ProductVersion": "4.1"})
((4, 1, 0), '4.1.0')
>>> parse_version({"ProductVersion": "7.2"})
((7, 2), '7.2')
>>> parse_version({"Nothing": 1}) is None
True
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Optional, Tuple

from .errors import BulkInsertError, UnsupportedByServer

__all__ = ["FEATURES", "parse_version", "server_version", "require"]

#: feature -> (the first RavenDB version that reads it in a bulk insert, what it is)
FEATURES: Dict[str, Tuple[Tuple[int, ...], str]] = {
    "zstd": ((7, 0), "zstd bodies (Content-Encoding: zstd)"),
    "counters": ((4, 2), "counters in a bulk insert"),
    "time series": ((5, 0), "time series in a bulk insert"),
    "attachments": ((5, 1), "attachments in a bulk insert"),
}

#: seconds the version question may take (it only decides between a clear error and letting
#: the server answer the body)
VERSION_TIMEOUT = 5.0

Version = Tuple[Tuple[int, ...], str]
_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(answer: Any) -> Optional[Version]:
    """``(numbers, text)`` of a ``GET /build/version`` answer (its ``FullVersion``, else its
    ``ProductVersion``), or None when it holds neither."""
    if not isinstance(answer, dict):
        return None
    for key in ("FullVersion", "ProductVersion"):
        text = answer.get(key)
        if isinstance(text, str):
            match = _VERSION.match(text.strip())
            if match:
                return tuple(int(g) for g in match.groups() if g is not None), text.strip()
    return None


def server_version(transport: Any) -> Optional[Version]:
    """The version of the server behind ``transport`` (an :class:`~bulkwire.transport.HttpTransport`),
    or None when it does not tell (no answer, an error, another shape)."""
    try:
        status, body = transport.request("GET", "/build/version", server_wide=True,
                                         timeout=transport.short_timeout(VERSION_TIMEOUT))
    except BulkInsertError:
        return None
    if status != 200:
        return None
    try:
        return parse_version(json.loads(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def require(feature: str, transport: Any, version: Optional[Version]) -> None:
    """Raises :class:`~bulkwire.errors.UnsupportedByServer` when ``version`` (of the server
    behind ``transport``) is older than the first one that reads ``feature``."""
    first, what = FEATURES[feature]
    if version is None or version[0] >= first:
        return
    needed = ".".join(map(str, first))
    raise UnsupportedByServer(
        f"the server at {transport.origin} runs RavenDB {version[1]}, which does not read "
        f"{what} (RavenDB {needed} or later does)"
        + ("; compress=True sends gzip, which every version reads" if feature == "zstd" else ""),
        feature=feature, server_version=version[1])
