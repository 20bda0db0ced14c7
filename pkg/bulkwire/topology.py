"""Which server of a RavenDB cluster a bulk insert goes to, the way the official client
decides it.

Given one URL (a ``str``), the bulk insert talks to that server only, as before: no topology
is asked. Given several (a list or tuple of URLs, even of one), they are the cluster's
entry points:

1. ``GET {url}/topology?name={database}`` is asked of each URL in order until one answers
   with a topology: its list of nodes (``Url``, ``ClusterTag``, ``ServerRole``). A URL that
   cannot be reached, times out, or answers an error or something that is not a topology is
   skipped, and the next one is asked; 401 and 403 stop at once (the certificate will not
   be better on another node).
2. ``GET .../operations/next-operation-id`` is asked of the topology's nodes, members first,
   each in the topology's order. A node that cannot be reached or answers 408, 502, 503 or
   504 is skipped; another error stops.
3. The bulk insert (and a later kill or ``operations/state``) goes to the node whose tag is
   the ``NodeTag`` of that answer: the node that issued the operation id. Without a tag, to
   the node that answered. An operation id belongs to its node, so once its body is under
   way a failure of that node fails the bulk insert; it is never replayed on another node.

When no URL gives a topology, or no node an operation id, the error names every server
tried and why each failed; its class is the nearest one of :mod:`bulkwire.errors` that
covers all of them (all refused: :class:`~bulkwire.errors.ConnectError`).

Every URL, given or listed in a topology, goes through :mod:`bulkwire.urls` (one parser
and validator): a URL given that it refuses raises ``ValueError`` or ``TypeError`` naming the
argument before any request; a topology node's URL that it refuses, or whose scheme is not
the scheme of the URLs given (a cluster never mixes schemes: an ``https://`` insert is never
sent to an ``http://`` node), makes that topology a :class:`~bulkwire.errors.ProtocolError`
of the server that answered it, so no request goes to that node.

Every connection is made by one function, ``connect(url)``, which returns the
:class:`~bulkwire.transport.HttpTransport` of that :class:`~bulkwire.urls.ServerUrl` and the
database, with the bulk insert's timeout and TLS settings; :func:`open_servers` makes it
from a bulk insert's arguments.

>>> [str(u) for u in server_urls(["http://a:8080", "http://b:8080"])]
['http://a:8080', 'http://b:8080']
"""
from __future__ import annotations

import http.client
import urllib.parse
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .errors import (BulkInsertError, ProtocolError, ServerError, TLSFileError,
                     TransportError, bulk_insert_case)
from .tls import TlsSettings
from .transport import HttpTransport, _json_answer, _protocol_error
from .urls import ServerUrl, check_scheme, parse_server_url, server_urls

__all__ = ["ServerNode", "Servers", "server_urls", "parse_topology", "open_servers"]

# statuses after which the official client tries the next node (the node is not serving now)
FAILOVER_STATUSES = frozenset({408, 502, 503, 504})
# statuses after which no other node is tried for the topology: the client is refused
REFUSED_STATUSES = frozenset({401, 403})

Connect = Callable[[ServerUrl], HttpTransport]


@dataclass(frozen=True)
class ServerNode:
    """One node of a database's topology: its URL, cluster tag (``"A"``) and role
    (``"Member"``, ``"Promotable"``, ``"Rehab"``; None when the topology does not say)."""

    url: ServerUrl
    tag: Optional[str]
    role: Optional[str]


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, for a message that must not repeat the value itself (a
    server's answer may hold anything, a URL with credentials included)."""
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _optional_str(node: dict, key: str, where: str) -> Optional[str]:
    value = node.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where} has a {key} that is {_json_kind(value)}, not a string")
    return value


def parse_topology(data: Any, what: str, scheme: Optional[str] = None) -> List[ServerNode]:
    """The nodes of a decoded ``GET /topology`` answer (``{"Nodes": [{"Url": ...,
    "ClusterTag": ..., "ServerRole": ...}, ...], "Etag": ...}``), in its order. Each node's
    ``Url`` goes through :func:`bulkwire.urls.parse_server_url`, and with ``scheme`` it
    must have that scheme (:func:`bulkwire.urls.check_scheme`). Raises
    :class:`~bulkwire.errors.ProtocolError`, naming the request ``what`` and the node, for
    any other shape; no message repeats the answer's values.

    >>> parse_topology({"Nodes": [{"Url": "http://a:8080", "ClusterTag": "A",
    ...                            "ServerRole": "Member"}], "Etag": 3}, "GET /topology")
    [ServerNode(url=ServerUrl(scheme='http', host='a', port=8080, root=''), tag='A', role='Member')]
    >>> parse_topology({"Nodes": [{"Url": "http://b:8080", "ClusterTag": "B"}]},
    ...                "GET https://a:443/topology", scheme="https")
    Traceback (most recent call last):
    bulkwire.errors.BulkInsertProtocolError: GET https://a:443/topology: node 0 ('B') of the topology is http://b:8080, whose scheme (http://) differs from the cluster's (https://): a cluster never mixes schemes, and no request goes to a node whose scheme differs
    """
    nodes = data.get("Nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        shape = ("an object without a list \"Nodes\"" if isinstance(data, dict)
                 else _json_kind(data))
        raise _protocol_error(f"{what}: the answer is not a topology (a JSON object with a list "
                            f"\"Nodes\"), but {shape}")
    if not nodes:
        raise _protocol_error(f"{what}: the topology lists no node holding the database")
    result = []
    for index, node in enumerate(nodes):
        where = f"node {index} of the topology"
        try:
            if not isinstance(node, dict):
                raise ValueError(f"{where} is {_json_kind(node)}, not a JSON object")
            tag = _optional_str(node, "ClusterTag", where)
            if isinstance(tag, str):
                where = f"node {index} ({tag[:40]!r}) of the topology"
            url = node.get("Url")
            if url is None:
                raise ValueError(f"{where} has no Url")
            parsed = parse_server_url(url, where)
            if scheme is not None:
                check_scheme(parsed, scheme, where)
            result.append(ServerNode(parsed, tag, _optional_str(node, "ServerRole", where)))
        except (TypeError, ValueError) as exc:
            raise _protocol_error(f"{what}: {exc}") from None
    return result


def _moves_on(error: BulkInsertError) -> bool:
    """Whether another node may do what this one could not: it is unreachable or not
    serving now (the official client's failover rule)."""
    if isinstance(error, TransportError):
        return True
    return (isinstance(error, ServerError) and not isinstance(error, ProtocolError)
            and error.status in FAILOVER_STATUSES)


def _all_failed(request: str, failures: List[Tuple[ServerUrl, BulkInsertError]]) -> BulkInsertError:
    """One error for a request every server failed: each server's own error in its
    message, of the nearest class that covers them all, the last one as its cause."""
    tried = ", ".join(str(url) for url, _ in failures)
    reasons = "; ".join(str(error) for _, error in failures)
    message = (f"none of the {len(failures)} servers ({tried}) answered {request}: {reasons}"
               if len(failures) > 1 else reasons)
    last = failures[-1][1]
    kinds = {type(error) for _, error in failures}
    if len(kinds) == 1:
        return last.with_message(message)  # its status and body too
    common = next(cls for cls in type(last).__mro__
                  if all(isinstance(error, cls) for _, error in failures))
    error = common(message)
    error.__cause__ = last
    return error


class Servers:
    """The server(s) of one bulk insert: ``url`` as :func:`server_urls` takes it,
    ``connect(url)`` the transport of a :class:`~bulkwire.urls.ServerUrl`. Every URL given
    is checked here, before any request; ``urls`` holds them, ``scheme`` is theirs (and
    every topology node's).

    >>> from functools import partial
    >>> servers = Servers(["http://a:8080", "http://b:8080"], partial(HttpTransport, database="db"))
    >>> servers.clustered, servers.first.url_of("/operations/next-operation-id")
    (True, 'http://a:8080/databases/db/operations/next-operation-id')
    """

    def __init__(self, url: Union[str, Sequence[str]], connect: Connect) -> None:
        self.urls = server_urls(url)
        self.scheme = self.urls[0].scheme
        self.clustered = not isinstance(url, str)
        self._connect = connect
        self._entry = [connect(u) for u in self.urls]  # bad arguments raise now
        self.first = self._entry[0]
        self.nodes: Optional[List[ServerNode]] = None  # the topology, once asked
        self.topology_from: Optional[ServerUrl] = None  # the URL that answered it

    def fetch_topology(self) -> List[ServerNode]:
        """The database's topology, from the first URL that gives one."""
        failures: List[Tuple[ServerUrl, BulkInsertError]] = []
        for url, transport in zip(self.urls, self._entry):
            path = "/topology?name=" + urllib.parse.quote(transport.database, safe="")
            what = f"GET {transport.origin}{transport.root}{path}"
            try:
                status, body = transport.request("GET", path, server_wide=True)
                nodes = parse_topology(_json_answer(status, body, what), what, self.scheme)
            except BulkInsertError as exc:
                if (isinstance(exc, ServerError) and not isinstance(exc, ProtocolError)
                        and exc.status in REFUSED_STATUSES):
                    raise
                failures.append((url, exc))
                continue
            self.nodes, self.topology_from = nodes, url
            return nodes
        raise _all_failed("the topology request (GET /topology)", failures)

    def open_operation(self) -> Tuple[HttpTransport, int, Optional[str],
                                      Optional[http.client.HTTPConnection]]:
        """A new bulk insert operation: ``(transport of the node that takes its request,
        operation id, node tag, connection)``: the connection the id was asked on, still
        open, when that node also takes the request (the caller owns it), else None. Raises
        a :class:`~bulkwire.errors.BulkInsertError` when no server gives one."""
        if not self.clustered:
            conn = self.first.connect()
            op_id, tag = self.first.next_operation_id(conn)
            return self.first, op_id, tag, conn
        nodes = self.fetch_topology()
        # members first, each group in the topology's order
        order = ([node for node in nodes if node.role == "Member"] +
                 [node for node in nodes if node.role != "Member"])
        failures: List[Tuple[ServerUrl, BulkInsertError]] = []
        for node in order:
            transport = self._connect(node.url)
            conn = transport.connect()
            try:
                op_id, tag = transport.next_operation_id(conn)
            except BulkInsertError as exc:
                if not _moves_on(exc):
                    raise
                failures.append((node.url, exc))
                continue
            try:
                issuer = self._issuer(node, transport, tag)
            except BaseException:
                conn.close()
                raise
            if issuer is not transport:  # another node takes the request
                conn.close()
                return issuer, op_id, tag, None
            return issuer, op_id, tag, conn
        raise _all_failed("the operation id request (GET .../operations/next-operation-id)",
                          failures)

    def _issuer(self, answered: ServerNode, transport: HttpTransport,
                tag: Optional[str]) -> HttpTransport:
        """The transport of the node that issued an operation id with ``tag``, answered by
        ``answered`` (through ``transport``)."""
        if tag is None or not tag.strip() or tag == answered.tag:
            return transport
        assert self.nodes is not None
        for node in self.nodes:
            if node.tag == tag:
                return self._connect(node.url)
        listed = ", ".join(repr(node.tag) for node in self.nodes)
        raise _protocol_error(f"{transport.url_of('/operations/next-operation-id')}: the operation "
                            f"id was issued by node {tag!r}, which the topology from "
                            f"{self.topology_from} does not list (it lists {listed})")


def open_servers(url: Union[str, Sequence[str]], database: str, *,
                 timeout: Optional[float] = 300.0, certificate: Any = None, ca: Any = None,
                 ssl_context: Any = None) -> Servers:
    """The :class:`Servers` of a bulk insert's arguments (see :class:`bulkwire.BulkInsert`):
    the URLs, the database, the timeout and the TLS files are all checked here, before any
    request, and raise naming the argument (a TLS file that cannot be used:
    :class:`~bulkwire.errors.TLSFileError`, naming the file).

    >>> open_servers("https://a:8443", "db", ca=False).first.tls.verify
    False
    """
    try:
        tls = (None if certificate is None and ca is None and ssl_context is None
               else TlsSettings(certificate, ca, ssl_context=ssl_context))
    except TLSFileError as exc:  # a bulk insert's: also a BulkInsertError
        raise bulk_insert_case(exc) from None
    # every connection of this bulk insert, to whichever node, is made by connect(url)
    return Servers(url, partial(HttpTransport, database=database, timeout=timeout, tls=tls))
