"""A loopback server speaking the RavenDB bulk insert protocol, for tests and benchmarks.

>>> with LoopbackServer() as server:                       # doctest: +SKIP
...     with bulkwire.BulkInsert(server.url, server.database) as bulk:
...         bulk.store({"Name": "a"}, id="things/1")
...     server.documents["things/1"]["Name"]
'a'

It listens on 127.0.0.1 (an ephemeral port), reads the chunked (and gzip or zstd) body as it
arrives, chunk by chunk, parses the command stream and keeps the documents. On request it
stalls (stops reading the body until :meth:`resume`), fails mid-stream (HTTP 500 with an
error body that ``operations/state`` then reports), finishes the request early, or answers
as soon as the array's closing ``]`` has arrived, before the rest of the body
(``answer_at_array_end``, as RavenDB does).

Every request it cannot accept (bad framing, a corrupt or truncated gzip or zstd stream, a body that
is not an array of PUT commands, a bad ``id`` parameter, an unknown database or path, a
client that goes silent) is answered with a 4xx status and an error body
``{"Type": ..., "Message": ..., "Error": ...}``, and the bulk insert's operation, when there
is one, becomes ``Faulted`` with the same message. The parsers behind it work without a
socket: :func:`decode_body` turns the bytes of a request body into its commands or raises
:class:`RequestError`.

It also answers the few requests the official Python client makes before a bulk insert
(``topology``, ``cluster/topology``, ``build/version``), so that client can be benchmarked
against it. :class:`LoopbackCluster` runs several of them as the nodes of one cluster.

Its modules: :mod:`.wire` (the body readers and inflaters), :mod:`.commands` (the command
checker), :mod:`.server`, :mod:`.cluster`, and :mod:`.pki` (a small PKI for TLS, with the
``cryptography`` package; imported on its own: ``from bulkwire.testing.pki import make_pki``).
:mod:`.scylla`, imported on its own, emulates ScyllaDB nodes (shards, the shard-aware port,
tablets) for CQL loads: ``from bulkwire.testing.scylla import ScyllaCluster``.
``python -m bulkwire.testing`` runs ``bulkwire serve``.
"""
from __future__ import annotations

from .cluster import LoopbackCluster
from .commands import decode_body, holds_whole_array, parse_commands
from .server import LoopbackServer, ReceivedRequest, serve
from .wire import (MAX_BODY_BYTES, MAX_CHUNK_SIZE, MAX_SIZE_LINE, ChunkedReader, GzipInflater,
                   LengthReader, RequestError, ZstdInflater)

__all__ = ["LoopbackServer", "LoopbackCluster", "ReceivedRequest", "RequestError",
           "ChunkedReader", "LengthReader", "GzipInflater", "ZstdInflater", "parse_commands",
           "decode_body", "holds_whole_array"]
