"""RESULT parsing (``_core.cql_parse_result``) and the QUERY/PREPARE bodies
(``_core.cql_query_body``, ``_core.cql_prepare_body``): bodies the driver writes are parsed to
what the driver reads from them, hostile bodies (cut short, counts past the bytes, random
bytes) fail with ValueError and never crash or allocate unboundedly, and the request bodies
equal the driver's ``QueryMessage`` / ``PrepareMessage`` encodings."""
from __future__ import annotations

import io
import pathlib
import struct

import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("cassandra")
from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.protocol import PrepareMessage, QueryMessage  # noqa: E402

from bulkwire import _core  # noqa: E402
from bulkwire.cql_statements import Prepared  # noqa: E402

SEEDS = pathlib.Path(__file__).parent / "c" / "fuzz" / "corpus" / "cql_result"


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def rows_body(columns: list[tuple[str, int]], rows: list[list[bytes | None]]) -> bytes:
    out = [struct.pack(">iii", 2, 1, len(columns)), s("ks"), s("t")]
    out += [s(name) + struct.pack(">H", tid) for name, tid in columns]
    out.append(struct.pack(">i", len(rows)))
    for row in rows:
        for cell in row:
            out.append(struct.pack(">i", -1) if cell is None else struct.pack(">i", len(cell)) + cell)
    return b"".join(out)


@given(st.lists(st.lists(st.one_of(st.none(), st.binary(max_size=20)), min_size=3, max_size=3),
                max_size=10))
@settings(max_examples=100, deadline=None)
def test_rows_are_the_cells_written(rows) -> None:
    body = rows_body([("a", 0x0D), ("b", 0x03), ("c", 0x09)], rows)
    result = _core.cql_parse_result(body)
    assert result["kind"] == "rows"
    assert result["columns"] == [("ks", "t", "a", "text"), ("ks", "t", "b", "blob"),
                                 ("ks", "t", "c", "int")]
    assert [list(r) for r in result["rows"]] == rows
    # every cut short body is refused, none read past its end
    for cut in range(len(body)):
        with pytest.raises(ValueError, match="malformed RESULT"):
            _core.cql_parse_result(body[:cut])


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.iterdir()))
def test_every_prefix_of_a_seed_is_refused_or_read(seed: str) -> None:
    body = (SEEDS / seed).read_bytes()
    assert _core.cql_parse_result(body)["kind"]
    for cut in range(len(body)):
        try:
            _core.cql_parse_result(body[:cut])
        except ValueError as exc:
            assert str(exc).startswith("malformed RESULT")


@pytest.mark.parametrize("body,why", [
    (struct.pack(">iii", 2, 0, 0x7fffffff), "more columns than the body holds"),
    (struct.pack(">iii", 2, 4, 0x10000) + struct.pack(">i", 0x7fffffff), "more cells"),
    (struct.pack(">iii", 2, 0, -1), "negative column count"),
    (struct.pack(">iH", 4, 0) + struct.pack(">iii", 0, 1, 0x7fffffff), "partition key"),
    (struct.pack(">iH", 4, 0) + struct.pack(">iiiH", 4, 1, 1, 5), "partition key index"),
    (struct.pack(">i", 9), "unknown kind 9"),
    (struct.pack(">iii", 2, 1, 1) + s("k") + s("t") + s("c") + struct.pack(">H", 0x99),
     "unknown type"),
    (struct.pack(">iii", 2, 1, 1) + s("k") + s("t") + s("c") + struct.pack(">H", 0x20) * 40,
     "unknown type"),  # list<list<list<...>>> past the depth bound
])
def test_hostile_bodies_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        _core.cql_parse_result(body)


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_random_bodies_are_refused_or_read(body: bytes) -> None:
    try:
        _core.cql_parse_result(body)
    except ValueError as exc:
        assert str(exc).startswith("malformed RESULT")


def test_prepared_reads_vector_types_and_the_partition_key() -> None:
    vector = "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.DoubleType, 7)"
    body = (struct.pack(">iH", 4, 3) + b"abc" + struct.pack(">iiiHH", 1, 3, 2, 2, 0) + s("ks")
            + s("t") + s("k") + struct.pack(">H", 9) + s("v") + struct.pack(">H", 0) + s(vector)
            + s("j") + struct.pack(">H", 0x0D) + struct.pack(">ii", 4, 0))
    p = Prepared.from_result(body)
    assert p.id == b"abc" and list(p.pk_indexes) == [2, 0]
    assert p.types == ["int", "vector<double, 7>", "text"] and p.names == ["k", "v", "j"]
    with pytest.raises(ValueError, match="expected a Prepared"):
        Prepared.from_result(struct.pack(">i", 1))


def driver_body(message) -> bytes:
    f = io.BytesIO()
    message.send_body(f, 4)
    return f.getvalue()


@given(st.text(max_size=200), st.sampled_from([ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                                                ConsistencyLevel.LOCAL_SERIAL]),
       st.integers(0, 5000), st.one_of(st.none(), st.binary(min_size=1, max_size=30)))
@settings(max_examples=100, deadline=None)
def test_query_body_equals_the_drivers(query: str, consistency: int, page_size: int,
                                       paging_state: bytes | None) -> None:
    want = driver_body(QueryMessage(query, consistency, fetch_size=page_size or None,
                                    paging_state=paging_state))
    assert _core.cql_query_body(query, consistency, page_size=page_size,
                                paging_state=paging_state) == want


@given(st.text(max_size=200))
@settings(max_examples=50, deadline=None)
def test_prepare_body_equals_the_drivers(query: str) -> None:
    assert _core.cql_prepare_body(query) == driver_body(PrepareMessage(query))
