"""Several loopback servers as the nodes of one cluster (:class:`LoopbackCluster`)."""
from __future__ import annotations

import socket
from typing import Any, Dict, List, Optional, Tuple

from .server import LoopbackServer, ReceivedRequest


class LoopbackCluster:
    """Several :class:`LoopbackServer` nodes of one cluster (tags ``A``, ``B``, ...), each
    holding ``database`` and answering ``GET /topology?name=<database>`` with every node, in
    order, and ``next-operation-id`` with its own tag, as RavenDB's nodes do.

    A node can be killed (:meth:`kill`: its port refuses connections from then on, its URL
    stays in the topology) or made to fail (:meth:`fail`: it answers every request with an
    error status). ``roles`` holds each node's ``ServerRole`` in the topology; :meth:`sequence`
    lists the requests all nodes received, in order.

    >>> with LoopbackCluster(2) as cluster:                 # doctest: +SKIP
    ...     cluster.kill(0)
    ...     with bulkwire.BulkInsert(cluster.urls, cluster.database) as bulk:
    ...         bulk.store({"Name": "a"}, id="things/1")
    ...     cluster.servers[1].documents["things/1"]["Name"]
    'a'
    """

    def __init__(self, nodes: int = 3, database: str = "db", **options: Any) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 26:
            raise ValueError(f"nodes must be an int from 1 to 26, not {nodes!r}")
        self.database = database
        self.journal: List[Tuple[str, str]] = []  # (node URL, "METHOD path")
        self.roles: List[str] = ["Member"] * nodes
        self.etag = 1
        self.servers: List[LoopbackServer] = []
        self._tombstones: Dict[int, socket.socket] = {}
        try:
            for index in range(nodes):
                server = LoopbackServer(database, **options)
                server.node_tag = chr(ord("A") + index)
                server.topology = self.topology
                server.journal = self.journal
                self.servers.append(server)
        except BaseException:
            self.close()
            raise
        self.urls: List[str] = [server.url for server in self.servers]
        self.tags: List[str] = [server.node_tag for server in self.servers]

    def topology(self) -> dict:
        """The database topology every node answers."""
        return {"Nodes": [{"Url": url, "ClusterTag": tag, "Database": self.database,
                           "ServerRole": role}
                          for url, tag, role in zip(self.urls, self.tags, self.roles)],
                "Etag": self.etag}

    def kill(self, index: int) -> None:
        """Node ``index`` dies: its server stops, and its port stays bound without listening,
        so a connection to its URL is refused (and no other server can take the port)."""
        server = self.servers[index]
        port = int(self.urls[index].rpartition(":")[2])
        server.close()
        tombstone = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            tombstone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tombstone.bind(("127.0.0.1", port))
        except BaseException:
            tombstone.close()
            raise
        self._tombstones[index] = tombstone

    def fail(self, index: int, status: Optional[int] = 503) -> None:
        """Node ``index`` answers every request with ``status`` (None: serves again)."""
        self.servers[index].down_status = status

    def answer_topology(self, index: int, answer: Any) -> None:
        """What node ``index`` answers to ``GET /topology``: a JSON value, or bytes sent as
        they are (None: the cluster's topology again)."""
        self.servers[index].topology = self.topology if answer is None else (lambda: answer)

    def sequence(self) -> List[Tuple[int, str]]:
        """``(node index, "METHOD path")`` of every request any node received, in order."""
        index = {url: i for i, url in enumerate(self.urls)}
        return [(index[url], line) for url, line in self.journal]

    @property
    def requests(self) -> List[Tuple[str, ReceivedRequest]]:
        """``(tag, request)`` of every bulk insert request, node by node."""
        return [(server.node_tag, request) for server in self.servers
                for request in server.requests]

    @property
    def unexpected_errors(self) -> List[str]:
        return [trace for server in self.servers for trace in server.unexpected_errors]

    def close(self) -> None:
        for index, server in enumerate(self.servers):
            if index not in self._tombstones:
                server.close()
        for tombstone in self._tombstones.values():
            tombstone.close()
        self._tombstones.clear()

    def __enter__(self) -> "LoopbackCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

