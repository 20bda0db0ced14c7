"""Snappy Parquet pages, read page by page on every build by bulkwire's own decoder
(csrc/core/compress/snappy.c): against pyarrow (which wrote them with its snappy codec) on varied
data, and on hostile page bodies (cut short, a length prefix that lies, a copy reaching
before the start, random damage), which raise MalformedFileError naming the file and the
column, never something else, and exactly when pyarrow's snappy codec refuses the same
bytes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

import parquet_craft as pc
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import PAGES, TableFile

SNAPPY = pa.Codec("snappy")


def _write(path, table: pa.Table, **kw) -> bytes:
    options = dict(write_page_index=True, use_dictionary=False, compression="snappy",
                   data_page_size=1024, write_page_checksum=True)
    options.update(kw)
    pq.write_table(table, path, **options)
    return path.read_bytes()


def _values(draw_bytes: list) -> pa.Table:
    return pa.table({"b": pa.array(draw_bytes, pa.binary()),
                     "n": pa.array(np.arange(len(draw_bytes), dtype=np.int64) * 3)})


# repetitive as well as random bytes: the writer then makes copies of every kind, short and
# long offsets, overlapping runs
parts = st.one_of(st.binary(max_size=40), st.sampled_from([b"ab", b"abc" * 30, b"\0" * 70]))
values = st.lists(st.lists(parts, max_size=6).map(b"".join), min_size=1, max_size=120)


@given(rows=values, version=st.sampled_from(["1.0", "2.0"]))
@settings(max_examples=60)
def test_pages_read_as_pyarrow_reads_them(tmp_path_factory, rows, version):
    path = tmp_path_factory.mktemp("snappy") / "t.parquet"
    _write(path, _values(rows), data_page_version=version)
    expected = pq.read_table(path)
    picks = list(range(len(rows)))[::-1]
    with TableFile(str(path)) as f:
        assert f.paths == {"b": PAGES, "n": PAGES}
        got = f.take(picks)
        assert f.stats["b"]["pages_read"] > 0 and f.stats["b"]["row_groups"] == 0
    assert got.equals(expected.take(picks))


def _page_file(tmp_path, body_of) -> tuple:
    """A file whose first data page of column b has the body body_of(page) (same
    uncompressed size in its header); (path, the new body, the page's uncompressed size)."""
    rows = [bytes([i % 7]) * (i % 50) + b"tail" for i in range(300)]
    data = _write(tmp_path / "src.parquet", _values(rows))
    page = pc.read_page(data, pc.data_pages(data, 0, 0)[0])
    body = body_of(page.body)
    path = tmp_path / "bad.parquet"
    path.write_bytes(pc.replace_page(data, page, page.header, body))
    return str(path), body, page.header.get(pc.UNCOMPRESSED_SIZE)


def _varint(n: int) -> bytes:
    return pc.varint(n)


def _prefix_size(body: bytes) -> int:
    return pc.read_varint(body, 0)[1]


HOSTILE = {
    "cut short": lambda body: body[:len(body) // 2],
    "prefix one more": lambda body: _varint(pc.read_varint(body, 0)[0] + 1) + body[_prefix_size(body):],
    "prefix one less": lambda body: _varint(pc.read_varint(body, 0)[0] - 1) + body[_prefix_size(body):],
    # a copy of 4 bytes from 9 bytes back, as the first element: nothing is written yet
    "copy before the start": lambda body: body[:_prefix_size(body)] + b"\x01\x09" + body[_prefix_size(body):],
    "last byte dropped": lambda body: body[:-1],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_page_body_is_malformed(tmp_path, kind):
    path, body, size = _page_file(tmp_path, HOSTILE[kind])
    with pytest.raises(Exception):
        SNAPPY.decompress(body, decompressed_size=size)  # the reference refuses it too
    with TableFile(path) as f, pytest.raises(MalformedFileError) as caught:
        f.take([0, 1, 2])
    message = str(caught.value)
    assert path in message and "column 'b'" in message
    assert "snappy page does not decompress to" in message


@given(at=st.integers(min_value=0), value=st.integers(0, 255), cut=st.integers(0, 8))
@settings(max_examples=80)
def test_damaged_page_body_fails_exactly_when_the_reference_does(tmp_path_factory, at, value,
                                                                 cut):
    """One byte of a real page body changed and up to 8 bytes cut off its end: when
    pyarrow's snappy codec refuses the bytes, the read raises MalformedFileError; when it
    takes them, the read returns rows or raises MalformedFileError (the values may no longer
    be a valid page), never anything else."""
    tmp_path = tmp_path_factory.mktemp("damaged")

    def damage(body: bytes) -> bytes:
        raw = bytearray(body[:len(body) - cut] if cut < len(body) else body)
        raw[at % len(raw)] = value
        return bytes(raw)

    path, body, size = _page_file(tmp_path, damage)
    try:
        SNAPPY.decompress(body, decompressed_size=size)
        reference_ok = True
    except (pa.ArrowException, OSError, ValueError):
        reference_ok = False
    with TableFile(path) as f:
        try:
            f.take([0, 1, 2])
            ok = True
        except MalformedFileError as exc:
            assert path in str(exc)
            ok = False
    if not reference_ok:
        assert not ok
