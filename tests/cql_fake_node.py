"""A fake CQL node in this process for a whole load (``bulkwire.load_parquet`` with a ``cql``
target): it does the handshake, answers the system-table queries (``system_schema.columns``,
``system.local``, ``system.peers``), PREPARE of the INSERT and each EXECUTE, on as many
connections as the load opens. Each answer can be replaced, to play a node that misbehaves:

- ``answer_query(cql) -> (opcode, body) | None``: a QUERY's answer (None: the table's);
- ``answer_execute(n, body) -> (opcode, body) | None | "silent"``: the n-th EXECUTE's
  (counted from 0 over every connection; None: RESULT Void; "silent": this one and every
  later one on the connection never answered);
- ``silent_at``: the first request of this kind (``"startup"``, ``"query"``, ``"prepare"``,
  ``"execute"``) is never answered (the node reads on, and answers nothing more).

``columns`` is the table: ``[(name, kind, cql type id or custom class name)]``, the partition key first; the
node listens on ``host`` (any 127.x.y.z) and ``port`` (0: any) and owns ``tokens``; ``peers``
are the other nodes its system.peers names, ``[(address, tokens)]``. Every node is in data
centre ``datacenter1``, rack ``rack1``; ``system_schema.keyspaces`` gives the keyspace
``replication`` (SimpleStrategy, one replica, by default). A subclass says what
the system tables hold (:meth:`FakeNode.local_cells`, :meth:`FakeNode.peer_cells`) and
records what each EXECUTE stored (:meth:`FakeNode.executed`): ``cql_nodes``' emulated
cluster is one.
"""
from __future__ import annotations

import socket
import struct
import threading
import uuid
from typing import Any, Callable

from cql_frames import read_exact as _read

OPTIONS, STARTUP, QUERY, PREPARE, EXECUTE = 0x05, 0x01, 0x07, 0x09, 0x0A
ERROR, READY, SUPPORTED, RESULT = 0x00, 0x02, 0x06, 0x08
BIGINT, INT, UUID, VARCHAR, INET, MAP, SET = (0x0002, 0x0009, 0x000C, 0x000D, 0x0010, 0x0021,
                                              0x0022)
TYPE_NAMES = {BIGINT: "bigint", INT: "int", VARCHAR: "text"}
#: a column of ``vector<float, N>``, as its custom type's class names it (``% N``)
FLOAT_VECTOR = ("org.apache.cassandra.db.marshal.VectorType("
                "org.apache.cassandra.db.marshal.FloatType, %d)")


def type_option(kind: int | str) -> bytes:
    """A column's type in a result's metadata: a type id, or (a str) a custom type's class
    name (a vector is one: :data:`FLOAT_VECTOR`)."""
    if isinstance(kind, str):
        return struct.pack(">H", 0x0000) + string(kind)
    return struct.pack(">H", kind)


def type_text(kind: int | str) -> str:
    """A column's type as ``system_schema.columns`` writes it."""
    if isinstance(kind, str):
        element, dimension = kind[kind.index("(") + 1:-1].rsplit(",", 1)
        name = element.strip().rsplit(".", 1)[1][:-len("Type")].lower()
        return f"vector<{name}, {int(dimension)}>"
    return TYPE_NAMES[kind]


def string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(raw)) + raw


def cell(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def text_set(items: list[str]) -> bytes:
    out = struct.pack(">i", len(items))
    for item in items:
        out += cell(item.encode())
    return out


def text_map(items: dict[str, str]) -> bytes:
    out = struct.pack(">i", len(items))
    for key, value in items.items():
        out += cell(key.encode()) + cell(value.encode())
    return out


def rows(keyspace: str, table: str, columns: list[tuple[str | bytes, bytes]],
         values: list[list[bytes | None]]) -> bytes:
    """A RESULT Rows body: ``columns`` as (name, type option bytes), ``values`` the cells."""
    body = struct.pack(">iii", 2, 0x0001, len(columns)) + string(keyspace) + string(table)
    for name, option in columns:
        body += string(name) + option
    body += struct.pack(">i", len(values))
    for row in values:
        body += b"".join(cell(v) for v in row)
    return body


def error(code: int, message: str) -> tuple[int, bytes]:
    raw = message.encode()
    return ERROR, struct.pack(">iH", code, len(raw)) + raw


VOID = (RESULT, struct.pack(">i", 1))


class FakeNode:
    """The node, listening on 127.0.0.1 until closed (a context manager). ``executes`` counts
    the EXECUTE requests answered; ``address`` is ``127.0.0.1:port``."""

    def __init__(self, keyspace: str = "ks", table: str = "t",
                 columns: list[tuple[str, str, int]] | None = None, *,
                 answer_query: Callable[[str], tuple[int, bytes] | None] | None = None,
                 answer_execute: Callable[[int, bytes], tuple[int, bytes] | None] | None = None,
                 silent_at: str | None = None, tokens: list[str] | None = None,
                 host: str = "127.0.0.1", port: int = 0,
                 peers: list[tuple[str, list[str]]] | None = None,
                 replication: dict[str, str] | None = None) -> None:
        self.keyspace, self.table = keyspace, table
        self.columns = columns or [("id", "partition_key", BIGINT), ("v", "regular", INT)]
        self.answer_query, self.answer_execute = answer_query, answer_execute
        self.silent_at = silent_at
        self.tokens = tokens or ["0"]
        self.executes = 0
        self.seen: dict[str, int] = {}  # requests received, by kind, answered or not
        self.lock = threading.Lock()
        self.host, self.peers = host, peers or []
        self.replication = replication or {"class": "SimpleStrategy", "replication_factor": "1"}
        self.connections = 0  # connections accepted
        self.listener = socket.create_server((host, port))
        self.port = self.listener.getsockname()[1]
        self.address = f"{host}:{self.port}"
        self.conns: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "FakeNode":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ the table's answers

    def type_rows(self) -> bytes:
        """``SELECT column_name, type FROM system_schema.columns``: the types as the schema
        writes them."""
        return rows("system_schema", "columns", [("column_name", struct.pack(">H", VARCHAR)),
                                                 ("type", struct.pack(">H", VARCHAR))],
                    [[n.encode(), type_text(t).encode()] for n, _, t in self.columns])

    def schema_rows(self) -> bytes:
        return rows("system_schema", "columns", [("column_name", struct.pack(">H", VARCHAR)),
                                                 ("kind", struct.pack(">H", VARCHAR))],
                    [[n.encode(), k.encode()] for n, k, _ in self.columns])

    def keyspace_rows(self) -> bytes:
        return rows("system_schema", "keyspaces",
                    [("replication", struct.pack(">HHH", MAP, VARCHAR, VARCHAR))],
                    [[text_map(self.replication)]])

    def system_rows(self, query: str) -> bytes:
        """The Rows a node answers to ``SELECT a, b, ... FROM system.local`` (itself:
        :meth:`local_cells`), ``system.peers_v2`` (each peer's native address, at the port it
        is reached at here) or ``system.peers`` (:meth:`peer_cells`): the columns asked, in the
        order asked."""
        names = [n.strip() for n in query[len("SELECT "):query.index(" FROM ")].split(",")]
        table = query.split(" FROM ", 1)[1].split()[0]
        inet, tokens = struct.pack(">H", INET), struct.pack(">HH", SET, VARCHAR)
        kinds = {"host_id": struct.pack(">H", UUID), "peer": inet, "rpc_address": inet,
                 "native_address": inet, "native_port": struct.pack(">H", INT),
                 "data_center": struct.pack(">H", VARCHAR), "rack": struct.pack(">H", VARCHAR),
                 "tokens": tokens}
        nodes = [self.local_cells()] if table == "system.local" else self.peer_cells()
        return rows("system", table.split(".", 1)[1], [(n, kinds[n]) for n in names],
                    [[cells[n] for n in names] for cells in nodes])

    def local_cells(self) -> dict:
        """This node's cells in ``system.local``, by column name."""
        return node_cells(host_id(self.host), self.host, self.host, None, self.tokens)

    def peer_cells(self) -> list[dict]:
        """The cells of each row of ``system.peers``/``peers_v2`` (no native_port: a peer is
        reached at the port given with its address, else at the contact point's)."""
        return [node_cells(host_id(a), a, a, None, t) for a, t in self.peers]

    def prepared(self, statement: str) -> bytes:
        names = [part.strip().strip('"') for part in
                 statement.split("(", 1)[1].split(")", 1)[0].split(",")]
        kinds = {n: (k, t) for n, k, t in self.columns}
        pk = [i for i, n in enumerate(names) if kinds[n][0] == "partition_key"]
        body = struct.pack(">i", 4) + struct.pack(">H", 2) + b"\x8f\x11"
        body += struct.pack(">iii", 0x0001, len(names), len(pk))
        body += b"".join(struct.pack(">H", i) for i in pk)
        body += string(self.keyspace) + string(self.table)
        for n in names:
            body += string(n) + type_option(kinds[n][1])
        return body + struct.pack(">ii", 0x0004, 0)

    def executed(self, values: list[bytes | None]) -> None:
        """An EXECUTE answered as stored, with its bound ``values`` (a subclass records them)."""

    # ------------------------------------------------------------------ the connections

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _silent(self, kind: str) -> bool:
        return self.silent_at == kind

    def _serve(self, conn: socket.socket) -> None:
        mute = False
        try:
            while True:
                head = _read(conn, 9)
                _, _, stream, opcode, length = struct.unpack(">BBhBi", head)
                body = _read(conn, length)
                kind = {OPTIONS: "startup", STARTUP: "startup", QUERY: "query",
                        PREPARE: "prepare", EXECUTE: "execute"}.get(opcode, "")
                with self.lock:
                    self.seen[kind] = self.seen.get(kind, 0) + 1
                if mute or self._silent(kind):
                    mute = True
                    continue
                answer = self._answer(opcode, body)
                if answer is None:  # this request and every later one unanswered
                    mute = True
                    continue
                conn.sendall(struct.pack(">BBhBi", 0x84, 0, stream, answer[0], len(answer[1]))
                             + answer[1])
        except (EOFError, OSError):
            pass

    def _answer(self, opcode: int, body: bytes) -> tuple[int, bytes] | None:
        if opcode == OPTIONS:
            return SUPPORTED, struct.pack(">H", 0)
        if opcode == STARTUP:
            return READY, b""
        if opcode in (QUERY, PREPARE):
            (n,) = struct.unpack_from(">i", body)
            text = body[4:4 + n].decode()
            if opcode == PREPARE:
                return RESULT, self.prepared(text)
            given = self.answer_query(text) if self.answer_query is not None else None
            if given is not None:
                return given
            if "SELECT column_name, type FROM system_schema.columns" in text:
                return RESULT, self.type_rows()
            if "system_schema.columns" in text:
                return RESULT, self.schema_rows()
            if "system_schema.keyspaces" in text:
                return RESULT, self.keyspace_rows()
            return RESULT, self.system_rows(text)
        if opcode == EXECUTE:
            with self.lock:
                n, self.executes = self.executes, self.executes + 1
            given = self.answer_execute(n, body) if self.answer_execute is not None else None
            if given is None:
                self.executed(execute_values(body))
            return None if given == "silent" else VOID if given is None else given
        return error(0x000A, f"opcode {opcode} is not played by the fake node")


def refusing(value: int) -> Callable[[int, bytes], Any]:
    """An ``answer_execute``: Invalid for the row whose int ``v`` (the last value) is
    ``value``; no answer to any later row."""
    refused: list[int] = []

    def answer(n: int, body: bytes) -> Any:
        if refused:
            return "silent"
        if struct.unpack_from(">i", body, len(body) - 4)[0] == value:
            refused.append(n)
            return error(0x2200, f"row with v={value} refused")
        return None
    return answer


def execute_values(body: bytes) -> list[bytes | None]:
    """The values an EXECUTE body binds (after its statement id, consistency and flags)."""
    (id_length,) = struct.unpack_from(">H", body)
    at = 2 + id_length + 3
    (count,) = struct.unpack_from(">H", body, at)
    at += 2
    values: list[bytes | None] = []
    for _ in range(count):
        (length,) = struct.unpack_from(">i", body, at)
        values.append(None if length < 0 else body[at + 4:at + 4 + length])
        at += 4 + max(length, 0)
    return values


def node_cells(node_id: bytes, peer: str, address: str, port: int | None,
               tokens: list[str], datacenter: str = "datacenter1", rack: str = "rack1") -> dict:
    """A node's row of the system tables, by column: its ``host_id``, its cluster address
    (``peer``), the client ``address`` (rpc and native) and native ``port`` (None: not
    given) it advertises, its ``tokens``, its data centre and rack."""
    return {"host_id": node_id, "peer": inet(peer), "rpc_address": inet(address),
            "native_address": inet(address),
            "native_port": None if port is None else struct.pack(">i", port),
            "data_center": datacenter.encode(), "rack": rack.encode(),
            "tokens": text_set([str(t) for t in tokens])}


def inet(address: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)


def host_id(address: str) -> bytes:
    """The host_id of the fake node at ``address``: the same for every answer naming it."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, address).bytes
