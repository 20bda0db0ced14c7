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

Every connection is made by one function, ``connect(url)``, which returns the
:class:`~bulkwire.transport.HttpTransport` of that URL and the database, with the bulk
insert's timeout and TLS settings.

>>> server_urls("http://a:8080"), server_urls(["http://a:8080", "http://b:8080"])
(['http://a:8080'], ['http://a:8080', 'http://b:8080'])
"""
from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .errors import BulkInsertError, ProtocolError, ServerError, TransportError
from .transport import HttpTransport, _json_answer

__all__ = ["ServerNode", "Servers", "server_urls", "parse_topology"]

# statuses after which the official client tries the next node (the node is not serving now)
FAILOVER_STATUSES = frozenset({408, 502, 503, 504})
# statuses after which no other node is tried for the topology: the client is refused
REFUSED_STATUSES = frozenset({401, 403})

Connect = Callable[[str], HttpTransport]


def server_urls(url: Union[str, Sequence[str]], name: str = "url") -> List[str]:
    """The server URLs of a ``url`` argument: a ``str`` (one server) or a non-empty list or
    tuple of them (a cluster's nodes). Raises TypeError or ValueError naming ``name``."""
    if isinstance(url, str):
        return [url]
    if not isinstance(url, (list, tuple)):
        raise TypeError(f"{name} must be a str or a list of str, not {type(url).__name__}")
    if not url:
        raise ValueError(f"{name} must hold at least one URL")
    for index, item in enumerate(url):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{index}] must be a str, not {type(item).__name__}")
    if len(set(url)) != len(url):
        raise ValueError(f"{name} names a server more than once: {list(url)!r}")
    return list(url)


@dataclass(frozen=True)
class ServerNode:
    """One node of a database's topology: its URL, cluster tag (``"A"``) and role
    (``"Member"``, ``"Promotable"``, ``"Rehab"``; None when the topology does not say)."""

    url: str
    tag: Optional[str]
    role: Optional[str]


def _optional_str(node: dict, key: str, where: str) -> Optional[str]:
    value = node.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where} has a {key} that is not a string: {value!r:.80}")
    return value


def parse_topology(data: Any, what: str) -> List[ServerNode]:
    """The nodes of a decoded ``GET /topology`` answer (``{"Nodes": [{"Url": ...,
    "ClusterTag": ..., "ServerRole": ...}, ...], "Etag": ...}``), in its order. Raises
    :class:`~bulkwire.errors.ProtocolError`, naming the request ``what``, for any other shape.

    >>> parse_topology({"Nodes": [{"Url": "http://a:8080", "ClusterTag": "A",
    ...                            "ServerRole": "Member"}], "Etag": 3}, "GET /topology")
    [ServerNode(url='http://a:8080', tag='A', role='Member')]
    """
    nodes = data.get("Nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise ProtocolError(f"{what}: the answer is not a topology (a JSON object with a list "
                            f"\"Nodes\"): {json.dumps(data)[:200]}")
    if not nodes:
        raise ProtocolError(f"{what}: the topology lists no node holding the database")
    result = []
    for index, node in enumerate(nodes):
        where = f"node {index} of the topology"
        try:
            if not isinstance(node, dict):
                raise ValueError(f"{where} is not a JSON object: {node!r:.80}")
            url = node.get("Url")
            parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
            if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"{where} has no http:// or https:// Url: {url!r:.80}")
            parsed.port  # noqa: B018 - a port that is not a number raises ValueError here
            result.append(ServerNode(url, _optional_str(node, "ClusterTag", where),
                                     _optional_str(node, "ServerRole", where)))
        except ValueError as exc:
            raise ProtocolError(f"{what}: {exc}") from None
    return result


def _moves_on(error: BulkInsertError) -> bool:
    """Whether another node may do what this one could not: it is unreachable or not
    serving now (the official client's failover rule)."""
    if isinstance(error, TransportError):
        return True
    return (isinstance(error, ServerError) and not isinstance(error, ProtocolError)
            and error.status in FAILOVER_STATUSES)


def _all_failed(request: str, failures: List[Tuple[str, BulkInsertError]]) -> BulkInsertError:
    """One error for a request every server failed: each server's own error in its
    message, of the nearest class that covers them all, the last one as its cause."""
    tried = ", ".join(url for url, _ in failures)
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
    ``connect(url)`` the transport of a URL. Every URL is checked here, before any request.

    >>> from functools import partial
    >>> servers = Servers(["http://a:8080", "http://b:8080"], partial(HttpTransport, database="db"))
    >>> servers.clustered, servers.first.url_of("/operations/next-operation-id")
    (True, 'http://a:8080/databases/db/operations/next-operation-id')
    """

    def __init__(self, url: Union[str, Sequence[str]], connect: Connect) -> None:
        self.urls = server_urls(url)
        self.clustered = not isinstance(url, str)
        self._connect = connect
        self._entry = [connect(u) for u in self.urls]  # bad URLs raise now
        self.first = self._entry[0]
        self.nodes: Optional[List[ServerNode]] = None  # the topology, once asked
        self.topology_from: Optional[str] = None        # the URL that answered it

    def fetch_topology(self) -> List[ServerNode]:
        """The database's topology, from the first URL that gives one."""
        failures: List[Tuple[str, BulkInsertError]] = []
        for url, transport in zip(self.urls, self._entry):
            path = "/topology?name=" + urllib.parse.quote(transport.database, safe="")
            what = f"GET {transport.origin}{transport.root}{path}"
            try:
                status, body = transport.request("GET", path, server_wide=True)
                nodes = parse_topology(_json_answer(status, body, what), what)
            except BulkInsertError as exc:
                if (isinstance(exc, ServerError) and not isinstance(exc, ProtocolError)
                        and exc.status in REFUSED_STATUSES):
                    raise
                failures.append((url, exc))
                continue
            self.nodes, self.topology_from = nodes, url
            return nodes
        raise _all_failed("the topology request (GET /topology)", failures)

    def _node_transport(self, node: ServerNode) -> HttpTransport:
        try:
            return self._connect(node.url)
        except (TypeError, ValueError) as exc:  # the topology's URL is no URL of ours
            raise ProtocolError(f"the topology from {self.topology_from} lists node "
                                f"{node.tag!r} at {node.url!r}: {exc}") from None

    def open_operation(self) -> Tuple[HttpTransport, int, Optional[str]]:
        """A new bulk insert operation: ``(transport of the node that takes its request,
        operation id, node tag)``. Raises a :class:`~bulkwire.errors.BulkInsertError` when no
        server gives one."""
        if not self.clustered:
            op_id, tag = self.first.next_operation_id()
            return self.first, op_id, tag
        nodes = self.fetch_topology()
        # members first, each group in the topology's order
        order = ([node for node in nodes if node.role == "Member"] +
                 [node for node in nodes if node.role != "Member"])
        failures: List[Tuple[str, BulkInsertError]] = []
        for node in order:
            transport = self._node_transport(node)
            try:
                op_id, tag = transport.next_operation_id()
            except BulkInsertError as exc:
                if not _moves_on(exc):
                    raise
                failures.append((node.url, exc))
                continue
            return self._issuer(node, transport, tag), op_id, tag
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
                return self._node_transport(node)
        listed = ", ".join(repr(node.tag) for node in self.nodes)
        raise ProtocolError(f"{transport.url_of('/operations/next-operation-id')}: the operation "
                            f"id was issued by node {tag!r}, which the topology from "
                            f"{self.topology_from} does not list (it lists {listed})")
