"""Emulated CQL nodes the Cassandra/Scylla Python driver can use as well as bulkwire: the
nodes of :class:`cql_nodes.EmulatedCluster` answering, besides, what the driver asks before
a load (``SUPPORTED`` naming the CQL version, ``REGISTER``, ``SELECT *`` of ``system.local``
and ``system.peers``; ``system.peers_v2`` is refused, as an older server does, and any other
query gets no rows). For a driver connected with ``protocol_version=4``,
``schema_metadata_enabled=False`` and ``token_metadata_enabled=False``: its prepared INSERT
into ``ks.t (id bigint PRIMARY KEY, v text)`` (or ``ks.t (id bigint PRIMARY KEY, emb
vector<float, N>)``: ``DriverCluster(dimension=N)``) is stored as bulkwire's is.
"""
from __future__ import annotations

import struct
import uuid

from cql_fake_node import (BIGINT, FLOAT_VECTOR, INET, READY, RESULT, SET, SUPPORTED, UUID, VARCHAR, QUERY, rows,
                           string, text_set)
from cql_nodes import INVALID, EmulatedCluster, EmulatedNode
from cql_fake_node import error

REGISTER = 0x0B

_LOCAL = [("key", VARCHAR), ("cluster_name", VARCHAR), ("data_center", VARCHAR),
          ("rack", VARCHAR), ("partitioner", VARCHAR), ("release_version", VARCHAR),
          ("host_id", UUID), ("rpc_address", INET), ("broadcast_address", INET),
          ("listen_address", INET), ("schema_version", UUID)]
#: the tables the emulated node answers bulkwire's queries of
_EMULATED = (" FROM system.local", " FROM system.peers", "system_schema.columns",
             "system_schema.keyspaces")
_SCHEMA_VERSION = uuid.UUID(int=1).bytes


def _option(kind: int) -> bytes:
    return struct.pack(">H", kind)


class DriverNode(EmulatedNode):
    """An :class:`~cql_nodes.EmulatedNode` the Python driver can connect to."""

    def _answer(self, opcode: int, body: bytes):
        if opcode == 0x05:  # OPTIONS
            options = struct.pack(">H", 2) + string("CQL_VERSION") + _list(["3.4.5"]) \
                + string("COMPRESSION") + _list([])
            return SUPPORTED, options
        if opcode == REGISTER:
            return READY, b""
        if opcode == QUERY:
            (n,) = struct.unpack_from(">i", body)
            text = body[4:4 + n].decode()
            if text.startswith("SELECT *") or "schema_version" in text:  # the driver's
                return self._driver_rows(text)
            if not any(table in text for table in _EMULATED):  # another table: no rows
                return RESULT, rows("system", "none", [], [])
        return super()._answer(opcode, body)

    def _driver_rows(self, text: str):
        if "peers_v2" in text:
            return error(INVALID, "unconfigured table peers_v2")
        if "system.peers" in text:
            columns = [("peer", INET), ("data_center", VARCHAR), ("rack", VARCHAR),
                       ("host_id", UUID), ("rpc_address", INET), ("schema_version", UUID)]
            return RESULT, rows("system", "peers", [(n, _option(k)) for n, k in columns], [])
        local = self.local_cells()
        values = {"key": b"local", "cluster_name": b"emulated", "data_center": local["data_center"],
                  "rack": local["rack"], "partitioner": b"org.apache.cassandra.dht.Murmur3Partitioner",
                  "release_version": b"4.0.0", "host_id": local["host_id"],
                  "rpc_address": local["rpc_address"], "broadcast_address": local["peer"],
                  "listen_address": local["peer"], "schema_version": _SCHEMA_VERSION}
        return RESULT, rows("system", "local", [(n, _option(k)) for n, k in _LOCAL],
                            [[values[n] for n, _ in _LOCAL]])


def _list(items: list[str]) -> bytes:
    return struct.pack(">H", len(items)) + b"".join(string(i) for i in items)


class DriverCluster(EmulatedCluster):
    """One :class:`DriverNode` (the driver's load balancing sees one host); ``dimension``:
    the table's second column is ``emb vector<float, dimension>`` (its prepared metadata
    and ``system_schema.columns`` say so) instead of ``v text``."""

    def __init__(self, dimension: int | None = None) -> None:
        columns = None if dimension is None else [
            ("id", "partition_key", BIGINT), ("emb", "regular", FLOAT_VECTOR % dimension)]
        super().__init__(1, columns=columns)
        node = self.nodes[0]
        node.__class__ = DriverNode
