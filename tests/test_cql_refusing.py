"""``_core.cql_execute_bodies(..., refusing=True)``: every row of a batch judged in one pass.
Against the encoder run the usual way: the rows kept are the bytes, ends and tokens of the
good rows encoded alone (which tests/test_cql_values.py compares with the driver's), and
each row refused carries the column and reason of the RowError that row raises on its own.
Bad rows of every kind the encoder refuses (a null partition key, a vector of another
length, a vector holding a null, a timestamp out of range, text that is not ASCII),
anywhere in the batch; hostile arguments and sizes.
"""
from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bulkwire import _core
from bulkwire.errors import RowError, SchemaMismatchError

GOOD, NULL_KEY, SHORT, HOLE, FAR, NOT_ASCII = "good", "null key", "short", "hole", "far", "é"
KINDS = [GOOD, NULL_KEY, SHORT, HOLE, FAR, NOT_ASCII]
NAMES = ["k", "v", "t", "a"]
TYPES = ["bigint", "vector<float, 2>", "timestamp", "ascii"]
ID = b"prepared"


def batch_of(kinds: list[str]) -> pa.RecordBatch:
    """Row i of kind kinds[i]: k bigint (the partition key), v vector<float, 2>, t timestamp
    (seconds), a ascii."""
    return pa.record_batch({
        "k": pa.array([None if kind == NULL_KEY else i for i, kind in enumerate(kinds)],
                      pa.int64()),
        "v": pa.array([[float(i)] if kind == SHORT else [float(i), None] if kind == HOLE
                       else [float(i), 0.5] for i, kind in enumerate(kinds)],
                      pa.list_(pa.float32())),
        "t": pa.array([1 << 62 if kind == FAR else i for i, kind in enumerate(kinds)],
                      pa.int64()).cast(pa.timestamp("s")),
        "a": pa.array(["caf\u00e9" if kind == NOT_ASCII else f"r{i}"
                       for i, kind in enumerate(kinds)]),
    })


def encode(batch: pa.RecordBatch, first_row: int = 0, **kw):
    return _core.cql_execute_bodies(batch, ID, NAMES, TYPES, [0], 1, first_row=first_row, **kw)


def alone(batch: pa.RecordBatch, first_row: int) -> list:
    """Each row's verdict encoded on its own: (row, column, reason) for a refused one."""
    refused = []
    for i in range(batch.num_rows):
        try:
            encode(batch.slice(i, 1), first_row + i)
        except RowError as exc:
            refused.append((exc.row, exc.column, exc.reason))
    return refused


def check(kinds: list[str], first_row: int = 0) -> None:
    batch = batch_of(kinds)
    bodies, ends, tokens, refused = encode(batch, first_row, refusing=True)
    assert refused == alone(batch, first_row)
    assert [row - first_row for row, _, _ in refused] == [
        i for i, kind in enumerate(kinds) if kind != GOOD]
    good = [i for i, kind in enumerate(kinds) if kind == GOOD]
    want = encode(batch.take(pa.array(good, pa.int64())), first_row)
    assert (bytes(bodies), ends, tokens) == (bytes(want[0]), want[1], want[2])
    assert len(ends) == 8 * len(good) and len(tokens) == 8 * len(good)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=80),
       first_row=st.integers(0, 1 << 40))
def test_every_refused_row_is_listed_with_the_reason_it_has_alone(kinds, first_row):
    check(kinds, first_row)


@pytest.mark.parametrize("kind", KINDS[1:])
def test_each_kind_first_last_alone_and_everywhere(kind):
    check([kind] + [GOOD] * 5)
    check([GOOD] * 5 + [kind])
    check([kind])
    check([kind] * 7, first_row=100)
    check([GOOD, kind] * 4)


def test_none_bad_is_the_usual_encoding_and_an_empty_list():
    batch = batch_of([GOOD] * 20)
    bodies, ends, tokens, refused = encode(batch, 5, refusing=True)
    assert refused == [] and (bytes(bodies), ends, tokens) == tuple(
        bytes(x) if isinstance(x, bytearray) else x for x in encode(batch, 5))


def test_the_reasons_in_words():
    _, _, _, refused = encode(batch_of([NULL_KEY, SHORT, HOLE, FAR, NOT_ASCII, GOOD]), 10,
                              refusing=True)
    assert [(row, column) for row, column, _ in refused] == [
        (10, "k"), (11, "v"), (12, "v"), (13, "t"), (14, "a")]
    reasons = [reason for _, _, reason in refused]
    assert "cannot be null" in reasons[0] and "has 1 values" in reasons[1]
    assert "holds a null value" in reasons[2] and "out of the range" in reasons[3]
    assert "not ASCII" in reasons[4]


def test_a_stream_of_batches_numbers_refused_rows_across_batches():
    table = pa.Table.from_batches([batch_of([GOOD, NOT_ASCII]), batch_of([NULL_KEY, GOOD])])
    bodies, ends, tokens, refused = encode(table, 3, refusing=True)
    assert [(row, column) for row, column, _ in refused] == [(4, "a"), (5, "k")]
    offsets = struct.unpack(f"={len(ends) // 8}q", ends)
    assert len(offsets) == 2 and offsets[-1] == len(bodies)


def test_without_a_partition_key_there_are_no_tokens():
    batch = batch_of([GOOD, SHORT, GOOD])
    bodies, ends, tokens, refused = _core.cql_execute_bodies(
        batch, ID, NAMES, TYPES, [], 1, refusing=True)
    assert tokens is None and len(ends) == 16 and [r for r, _, _ in refused] == [1]


def test_an_empty_batch_and_an_empty_stream():
    assert encode(batch_of([GOOD]).slice(0, 0), refusing=True)[3] == []
    empty = pa.RecordBatchReader.from_batches(batch_of([GOOD]).schema, [])
    assert encode(empty, refusing=True) == (bytearray(), b"", b"", [])


def test_a_large_batch_all_refused():
    n = 200_000
    batch = pa.record_batch({"k": pa.nulls(n, pa.int64()), "v": pa.array(
        [[0.0, 1.0]] * n, pa.list_(pa.float32())), "t": pa.array(range(n), pa.int64()).cast(
        pa.timestamp("s")), "a": pa.array(["x"] * n)})
    bodies, ends, tokens, refused = encode(batch, refusing=True)
    assert (len(bodies), ends, tokens, len(refused)) == (0, b"", b"", n)
    assert refused[0][:2] == (0, "k") and refused[-1][:2] == (n - 1, "k")


def test_a_huge_vector_refused_for_its_length():
    batch = batch_of([GOOD, GOOD])
    long_vector = pa.array([[0.5] * 1_000_000, [1.0, 2.0]], pa.list_(pa.float32()))
    batch = batch.set_column(1, "v", long_vector)
    _, ends, _, refused = encode(batch, refusing=True)
    assert [(row, column) for row, column, _ in refused] == [(0, "v")]
    assert "has 1000000 values" in refused[0][2] and len(ends) == 8


def test_hostile_arguments_are_refused_as_without_refusing():
    batch = batch_of([GOOD, NULL_KEY])
    with pytest.raises(SchemaMismatchError):
        _core.cql_execute_bodies(batch, ID, NAMES, ["int", *TYPES[1:]], [0], 1, refusing=True)
    with pytest.raises(ValueError, match="65535"):
        _core.cql_execute_bodies(batch, b"x" * 65536, NAMES, TYPES, [0], 1, refusing=True)
    with pytest.raises(TypeError):
        _core.cql_execute_bodies("not a batch", ID, NAMES, TYPES, [0], 1, refusing=True)
    with pytest.raises(TypeError):
        encode(batch, refusing=_NoTruth())
    with pytest.raises(ValueError, match="unset has"):
        encode(batch, refusing=True, unset=b"\0")
    with pytest.raises(ValueError, match="more than names or than 64"):
        _core.cql_execute_bodies(pa.record_batch({f"c{i}": pa.array([1]) for i in range(65)}),
                                 ID, [f"c{i}" for i in range(65)], ["bigint"] * 65,
                                 list(range(65)), 1, refusing=True)


class _NoTruth:
    def __bool__(self):
        raise TypeError("no truth value")
