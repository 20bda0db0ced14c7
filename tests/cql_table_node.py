"""A fake CQL node (:class:`cql_fake_node.FakeNode`) that keeps what a load sent: each
PREPAREd statement, and each EXECUTE's body and bound values, with a null (length -1) told
apart from an unset value (length -2). It prepares ``INSERT ... USING TTL ? AND TIMESTAMP
?`` as Cassandra does (the markers ``[ttl]``, an int, and ``[timestamp]``, a bigint, after
the columns'), and answers ``SELECT column_name, type FROM system_schema.columns`` with the
table's column types.
"""
from __future__ import annotations

import struct

from cql_fake_node import VARCHAR, FakeNode, rows, string

#: An unset value, as :func:`values` gives it (a null is None).
UNSET = "unset"
BIGINT, INT, BOOLEAN, DOUBLE, TIMESTAMP = 0x0002, 0x0009, 0x0004, 0x0007, 0x000B
TYPE_TEXT = {BIGINT: "bigint", INT: "int", VARCHAR: "text", BOOLEAN: "boolean",
             DOUBLE: "double", TIMESTAMP: "timestamp"}


def values(body: bytes) -> list:
    """The values an EXECUTE body binds: bytes, None for a null, :data:`UNSET` for unset."""
    (id_length,) = struct.unpack_from(">H", body)
    at = 2 + id_length + 3
    (count,) = struct.unpack_from(">H", body, at)
    at += 2
    out: list = []
    for _ in range(count):
        (length,) = struct.unpack_from(">i", body, at)
        out.append(UNSET if length == -2 else None if length < 0 else
                   body[at + 4:at + 4 + length])
        at += 4 + max(length, 0)
    return out


class TableNode(FakeNode):
    """The node of one table, ``columns`` ``[(name, kind, type id)]``; ``statements`` holds
    the PREPAREs, ``bodies`` the EXECUTE bodies, in the order received."""

    def __init__(self, columns: list[tuple[str, str, int]], **kw) -> None:
        self.statements: list[str] = []
        self.bodies: list[bytes] = []
        super().__init__(columns=columns, answer_query=self._types,
                         answer_execute=self._record, **kw)

    def _types(self, cql: str):
        if cql.startswith("SELECT column_name, type FROM system_schema.columns"):
            from cql_fake_node import RESULT

            return RESULT, rows("system_schema", "columns",
                                [("column_name", struct.pack(">H", VARCHAR)),
                                 ("type", struct.pack(">H", VARCHAR))],
                                [[n.encode(), TYPE_TEXT[t].encode()] for n, _, t in self.columns])
        return None

    def _record(self, n: int, body: bytes):
        with self.lock:
            self.bodies.append(body)
        return None

    @property
    def rows(self) -> list[list]:
        """The values of every EXECUTE, in the order received."""
        return [values(b) for b in self.bodies]

    def prepared(self, statement: str) -> bytes:
        with self.lock:
            self.statements.append(statement)
        names = [part.strip().strip('"') for part in
                 statement.split("(", 1)[1].split(")", 1)[0].split(",")]
        kinds = {n: (k, t) for n, k, t in self.columns}
        specs = [(n, kinds[n][1]) for n in names]
        using = statement.rsplit(" USING ", 1)[1] if " USING " in statement else ""
        if "TTL ?" in using:
            specs.append(("[ttl]", INT))
        if "TIMESTAMP ?" in using:
            specs.append(("[timestamp]", BIGINT))
        pk = [i for i, n in enumerate(names) if kinds[n][0] == "partition_key"]
        body = struct.pack(">i", 4) + struct.pack(">H", 2) + b"\x8f\x11"
        body += struct.pack(">iii", 0x0001, len(specs), len(pk))
        body += b"".join(struct.pack(">H", i) for i in pk)
        body += string(self.keyspace) + string(self.table)
        for name, t in specs:
            body += string(name) + struct.pack(">H", t)
        return body + struct.pack(">ii", 0x0004, 0)
