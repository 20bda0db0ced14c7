"""Hostile Parquet files against the page reader: page headers whose counts and sizes claim
far more than the page's bytes hold, read by ``take`` in a child process whose address space
is limited to a few hundred MB above what the interpreter already uses. Each lookup must end
in a ``MalformedFileError`` naming the file and the column, or in the rows pyarrow reads; a
``MemoryError`` or a killed child is the defect these tests exist to catch.

The files are small ones pyarrow wrote (with page checksums: dropping a checksum leaves a
header room to grow into), one page header, one page body or the footer rewritten in place
with the Thrift codec of ``parquet_craft``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

import parquet_craft as pc
from examples_budget import EXAMPLES
from bulkwire import _core

#: what the lookup may allocate beyond the interpreter's address space before it
EXTRA_BYTES = 300 << 20
BIG = 2**31 - 1  # the most values or rows a page header can claim

_LIMITED_TAKE = r"""
import json, os, resource, sys
import pyarrow.parquet as pq
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import TableFile

path, warm, rows, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
with TableFile(warm) as f:  # the extension, pyarrow's pools and threads loaded and started
    f.take([0, 1])
pq.ParquetFile(warm).read_row_group(0)
if os.environ.get("BULKWIRE_SANITIZER") != "1":  # under ASan: max_allocation_size_mb instead
    size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, resource.RLIM_INFINITY))
try:
    with TableFile(path) as f:
        out = {"rows": f.take(rows).column(0).to_pylist()}
except MalformedFileError as exc:
    out = {"malformed": str(exc), "path": exc.path}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def warm_file(tmp_path_factory) -> str:
    """A file whose lookups load everything a lookup needs, before the limit is set."""
    path = str(tmp_path_factory.mktemp("warm") / "warm.parquet")
    pq.write_table(pa.table({"x": pa.array(np.arange(1000)), "l": pa.array([[1.0]] * 1000)}),
                   path, write_page_index=True)
    return path


def limited_take(path: str, rows: list, warm: str) -> dict:
    """``take(path, rows)`` (the first column's values) in a child process limited to
    EXTRA_BYTES more address space than it had before the lookup: ``{"rows": [...]}`` or
    ``{"malformed": message, "path": ...}``. Under the sanitizer build, where ASan's shadow
    memory makes RLIMIT_AS useless, ASan refuses any single allocation of that size."""
    env = dict(os.environ)
    if env.get("BULKWIRE_SANITIZER") == "1":
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1"
                               f":max_allocation_size_mb={EXTRA_BYTES >> 20}").lstrip(":")
    proc = subprocess.run([sys.executable, "-c", _LIMITED_TAKE, path, warm, json.dumps(rows),
                           str(EXTRA_BYTES)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, f"the lookup died (status {proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout.splitlines()[-1])


def assert_refused(result: dict, path: str, column: str, message: str) -> None:
    assert "malformed" in result, result
    assert result["path"] == path
    assert f"{path!r} is malformed: column {column!r}: " in result["malformed"], result
    assert message in result["malformed"], result


def _write(path, table, **kw) -> bytes:
    options = dict(write_page_index=True, use_dictionary=False, compression="none",
                   write_page_checksum=True, data_page_version="1.0")
    options.update(kw)
    pq.write_table(table, path, **options)
    return open(path, "rb").read()


def _save(tmp_path, data: bytes, name: str = "bomb.parquet") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _with_rows(data: bytes, rows: int) -> bytes:
    """The footer of a one-row-group, one-column file saying it holds `rows` rows."""
    meta, _ = pc.footer(data)
    meta.set(3, pc.I64, rows)
    group = meta.get(4)[1][0]
    group.set(3, pc.I64, rows)
    group.get(1)[1][0].get(3).set(5, pc.I64, rows)  # the column chunk's num_values
    return pc.with_footer(data, meta)


def _first_page(data: bytes, leaf: int = 0) -> pc.Page:
    return pc.read_page(data, pc.data_pages(data, 0, leaf)[0])


def _data_header(page: pc.Page) -> pc.Struct:
    return page.header.get(pc.DATA_PAGE_HEADER_V2) or page.header.get(pc.DATA_PAGE_HEADER)


def _levels(*runs: bytes) -> bytes:
    """v1 levels: their 4-byte length, then the runs."""
    body = b"".join(runs)
    return len(body).to_bytes(4, "little") + body


# ---- counts a page header claims ---------------------------------------------------------------

@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_page_claiming_2g_values_for_its_rows_is_refused(tmp_path, warm_file, version):
    """A page of 100 optional int64 rows whose header claims 2^31 - 1 values, its definition
    levels one RLE run of as many: refused before anything is sized by the claim (the
    reader had made level buffers of 2 GiB each from it)."""
    table = pa.table({"x": pa.array([None if i % 7 == 3 else i for i in range(100)],
                                    pa.int64())})
    data = _write(tmp_path / "src.parquet", table, data_page_version=version)
    page = _first_page(data)
    _data_header(page).set(pc.NUM_VALUES, pc.I32, BIG)
    body = page.body
    if version == "1.0":  # v1: the levels inside the body, rewritten as one long run
        body = _levels(pc.hybrid_rle(1, BIG, 1)) + body[len(_levels(b"")) + 8:]
        page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, len(body))
    path = _save(tmp_path, pc.replace_page(data, page, page.header, body))
    assert_refused(limited_take(path, [3, 50], warm_file), path, "x",
                   "page holds 2147483647 values for 100 rows")


def test_2g_rows_of_nulls_read_in_bounded_memory(tmp_path, warm_file):
    """A row group of 2^31 - 1 optional int64 rows, 8 values then nulls, in one page whose
    definition levels are two RLE runs: a legitimate file of a few hundred bytes. The rows
    asked for come back, with nothing sized by the page's 2^31 - 1 levels."""
    table = pa.table({"x": pa.array(np.arange(100, dtype=np.int64))})
    data = _write(tmp_path / "src.parquet", table)
    page = _first_page(data)
    _data_header(page).set(pc.NUM_VALUES, pc.I32, BIG)
    values = np.arange(8, dtype=np.int64) * 11
    body = _levels(pc.hybrid_rle(1, 8, 1), pc.hybrid_rle(0, BIG - 8, 1)) + values.tobytes()
    page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, len(body))
    path = _save(tmp_path, _with_rows(pc.replace_page(data, page, page.header, body), BIG))
    rows = [0, 3, 7, 8, 1000, BIG - 1]
    got = limited_take(path, rows, warm_file)
    # pyarrow reads the first rows in a batch; no reader reaches row 2^31 - 2 in bounded
    # memory but one that skips runs, and the levels say every row past the 8th is null
    first = next(pq.ParquetFile(path).iter_batches(batch_size=16)).column(0).to_pylist()
    assert first == values.tolist() + [None] * 8
    assert got == {"rows": [first[0], first[3], first[7], first[8], None, None]}


def test_2g_dictionary_indices_read_in_bounded_memory(tmp_path, warm_file):
    """A row group of 2^31 - 1 int64 rows, all one entry of the chunk's dictionary: one RLE
    run of its index. The rows come back without an index buffer of 8 GiB."""
    table = pa.table({"x": pa.array(np.arange(100) * 3, pa.int64())})
    data = _write(tmp_path / "src.parquet", table, use_dictionary=True)
    page = _first_page(data)
    _data_header(page).set(pc.NUM_VALUES, pc.I32, BIG)
    body = _levels(pc.hybrid_rle(1, BIG, 1)) + bytes([7]) + pc.hybrid_rle(5, BIG, 7)
    page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, len(body))
    path = _save(tmp_path, _with_rows(pc.replace_page(data, page, page.header, body), BIG))
    first = next(pq.ParquetFile(path).iter_batches(batch_size=16)).column(0).to_pylist()
    assert first == [15] * 16
    assert limited_take(path, [0, 9, BIG - 1], warm_file) == {"rows": [15, 15, 15]}


@pytest.mark.parametrize("index", [True, False], ids=["offset-index", "walked"])
def test_list_page_claiming_2g_levels_is_refused(tmp_path, warm_file, index):
    """A page of lists whose header claims 2^31 - 1 levels, each run one RLE run of as many:
    refused by what its values' bytes can hold (through the offset index) or by the rows it
    would start (walked, without a page index), never by buffers of 2 GiB."""
    table = pa.table({"l": pa.array([[float(i)] * 2 for i in range(50)],
                                    pa.list_(pa.float64()))})
    data = _write(tmp_path / "src.parquet", table, write_page_index=index)
    page = _first_page(data)
    _data_header(page).set(pc.NUM_VALUES, pc.I32, BIG)
    body = (_levels(pc.hybrid_rle(0, BIG, 1)) + _levels(pc.hybrid_rle(3, BIG, 1))
            + bytes(16))
    page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, len(body))
    path = _save(tmp_path, pc.replace_page(data, page, page.header, body))
    message = ("page of 2147483647 values has 16 bytes of values" if index else
               "hold more than the row group's 50 rows")
    assert_refused(limited_take(path, [1], warm_file), path, "l", message)


# ---- sizes a page header claims ------------------------------------------------------------------

CODEC_MESSAGES = {"gzip": "gzip page of", "zstd": "zstd page holds",
                  "snappy": "snappy page does not decompress to the"}


@pytest.mark.parametrize("codec", sorted(CODEC_MESSAGES))
@pytest.mark.parametrize("kind", ["v1", "v2", "dictionary", "walked list"])
def test_uncompressed_size_beyond_the_compressed_bytes_is_refused(tmp_path, warm_file, codec,
                                                                  kind):
    """A compressed page whose header says it decompresses to 2^30 - 1 bytes, where its few
    compressed bytes cannot hold that many (the codec's own size, or its best ratio):
    refused before a buffer of that size is made, for data pages v1 and v2, for the
    dictionary page and for the list page a walk decompresses to count its rows."""
    if kind == "walked list":
        table = pa.table({"x": pa.array([[float(i)] for i in range(200)],
                                        pa.list_(pa.float64()))})
    else:
        table = pa.table({"x": pa.array(np.arange(200) % 3, pa.int64())})
    data = _write(tmp_path / "src.parquet", table, compression=codec,
                  use_dictionary=kind == "dictionary", write_page_index=kind != "walked list",
                  data_page_version="2.0" if kind == "v2" else "1.0")
    if kind == "dictionary":
        page = pc.read_page(data, int(pc.chunk_fields(data)[0, 0, 3]))
    else:
        page = _first_page(data)
    page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, 2**30 - 1)
    path = _save(tmp_path, pc.replace_page(data, page, page.header, page.body))
    assert_refused(limited_take(path, [5], warm_file), path, "x", CODEC_MESSAGES[codec])


def test_page_larger_than_a_page_may_be_is_refused(tmp_path, warm_file):
    """An uncompressed page claiming more than 1 GiB: refused by the header reader."""
    data = _write(tmp_path / "src.parquet", pa.table({"x": pa.array(np.arange(100))}))
    page = _first_page(data)
    page.header.set(pc.UNCOMPRESSED_SIZE, pc.I32, 2**30 + 1)
    path = _save(tmp_path, pc.replace_page(data, page, page.header, page.body))
    assert_refused(limited_take(path, [5], warm_file), path, "x",
                   "more than the 1073741824 a page may hold")


def test_offset_index_claiming_4g_pages_is_refused(tmp_path, warm_file):
    """An offset index whose page list claims 2^32 - 1 entries in a few bytes: the Thrift
    reader checks every count against the bytes left before anything is sized by it."""
    data = bytearray(_write(tmp_path / "src.parquet", pa.table({"x": pa.array(np.arange(10))})))
    offset, length = (int(v) for v in pc.chunk_fields(bytes(data))[0, 0, :2])
    blob = bytes([0x19, 0xFC]) + pc.varint(2**32 - 1)  # field 1: a list of structs
    blob += bytes(length - len(blob))
    data[offset:offset + length] = blob
    path = _save(tmp_path, bytes(data))
    assert_refused(limited_take(path, [5], warm_file), path, "x", "offset index")


def test_crafting_leaves_a_file_pyarrow_reads(tmp_path):
    """The crafting itself is sound: a page rewritten with nothing changed, and a footer
    re-encoded as it was, give a file that reads as the original."""
    table = pa.table({"x": pa.array(np.arange(300) % 7, pa.int64()),
                      "s": pa.array([f"v{i % 5}" for i in range(300)])})
    for codec in ("none", "gzip"):
        data = _write(tmp_path / "src.parquet", table, compression=codec, use_dictionary=True)
        page = _first_page(data, 1)
        meta, _ = pc.footer(data)
        out = pc.with_footer(pc.replace_page(data, page, page.header, page.body), meta)
        assert out != data  # the checksum dropped, a filler field in its place
        assert pq.read_table(pa.BufferReader(out)).equals(table)
        assert pc.write_struct(pc.footer(out)[0]) == pc.write_struct(meta)
        assert _core.parquet_index_locations(out, 1, 2).tolist() == \
            _core.parquet_index_locations(data, 1, 2).tolist()


# ---- offset index entries outside their column chunk --------------------------------------------

def _accounts(rows: int = 600) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "balance": pa.array(rng.standard_normal(rows) * 1000),
        "debt": pa.array(rng.standard_normal(rows) * -50),
        "tags": pa.array([[float(i)] * (i % 3 + 1) for i in range(rows)],
                         pa.list_(pa.float64())),
        "name": pa.array([f"n{i % 40}" for i in range(rows)]),
    })


def _offset_index(data: bytes, group: int, column: int) -> pc.Struct:
    meta, _ = pc.footer(data)
    chunk = pc.column_chunk(meta, group, column)
    return pc.read_struct(data, chunk.get(4))[0]


def _with_offset_index(data: bytes, group: int, column: int, index: pc.Struct) -> bytes:
    """The file with one chunk's offset index replaced (the new one put before the footer)."""
    blob = pc.write_struct(index)
    data, at = pc.with_blob(data, blob)
    meta, _ = pc.footer(data)
    chunk = pc.column_chunk(meta, group, column)
    chunk.set(4, pc.I64, at)
    chunk.set(5, pc.I32, len(blob))
    return pc.with_footer(data, meta)


@pytest.mark.parametrize("dictionary", [False, True], ids=["plain", "dictionary"])
def test_swapped_offset_indexes_are_refused(tmp_path, dictionary):
    """Two float64 columns' offset indexes swapped in the footer: each now lists the pages of
    the other column's chunk, which read as values of the right type. pyarrow, which does not
    read the offset index, reads the file as it was; take refuses it, naming the column,
    where it returned the debts as balances."""
    table = _accounts()
    data = _write(tmp_path / "src.parquet", table, data_page_size=512, write_batch_size=50,
                  row_group_size=300, use_dictionary=dictionary, compression="snappy")
    meta, _ = pc.footer(data)
    balance, debt = pc.column_chunk(meta, 1, 1), pc.column_chunk(meta, 1, 2)
    for field in (4, 5):
        b, d = balance.get(field), debt.get(field)
        balance.set(field, pc.I64 if field == 4 else pc.I32, d)
        debt.set(field, pc.I64 if field == 4 else pc.I32, b)
    path = _save(tmp_path, pc.with_footer(data, meta), "swapped.parquet")
    assert pq.read_table(path).equals(table)
    from bulkwire.errors import MalformedFileError
    from bulkwire.parquet import take
    for column in ("balance", "debt"):
        with pytest.raises(MalformedFileError, match=rf"swapped\.parquet' is malformed: column "
                                                     rf"'{column}': offset index: page 0 at "
                                                     rf"\d+, \d+ bytes, outside its column "
                                                     rf"chunk") as info:
            take(path, [310, 450], columns=[column])
        assert info.value.path == path
    # the rows of the row group whose indexes are intact still read
    assert take(path, [5, 299]).equals(table.take([5, 299]))


def test_offset_index_entry_pointing_into_another_chunk_is_refused(tmp_path):
    """One page location of `balance` pointed at a page of `debt` with the same rows."""
    table = _accounts()
    data = _write(tmp_path / "src.parquet", table, data_page_size=512, write_batch_size=50,
                  compression="none")
    index = _offset_index(data, 0, 1)
    other = _offset_index(data, 0, 2).get(1)[1]
    pages = index.get(1)[1]
    assert pages[2].get(3) == other[2].get(3)  # same first row
    pages[2].set(1, pc.I64, other[2].get(1)).set(2, pc.I32, other[2].get(2))
    path = _save(tmp_path, _with_offset_index(data, 0, 1, index), "moved.parquet")
    assert pq.read_table(path).equals(table)
    from bulkwire.errors import MalformedFileError
    from bulkwire.parquet import take
    with pytest.raises(MalformedFileError, match=r"moved\.parquet' is malformed: column "
                                                 r"'balance': offset index: page 2 at"):
        take(path, [0], columns=["balance"])


moves = st.one_of(
    st.tuples(st.just("by"), st.integers(-24, 24), st.integers(-24, 24)),  # bytes, size
    st.tuples(st.just("to"), st.integers(0, 4), st.integers(0, 40)))      # another page


@settings(max_examples=max(10, EXAMPLES // 2))
@given(column=st.integers(1, 4), page=st.integers(0, 40), move=moves,
       first_row=st.integers(-3, 3), dictionary=st.booleans(),
       rows=st.lists(st.integers(0, 599), min_size=1, max_size=12))
def test_displaced_page_locations_give_the_rows_or_refuse(tmp_path_factory, column, page, move,
                                                          first_row, dictionary, rows):
    """One page location of a chunk moved: by a few bytes (its offset, its size), onto
    another page of the row group (of its own chunk or another column's), and its first row
    by a few rows. take gives pyarrow's rows of the file (pyarrow does not read the offset
    index) or raises MalformedFileError, never other values."""
    table = _accounts()
    key = ("accounts", dictionary)
    if key not in _FILES:
        _FILES[key] = _write(tmp_path_factory.mktemp("acc") / "a.parquet", table,
                             data_page_size=512, write_batch_size=50,
                             use_dictionary=dictionary, compression="snappy")
    data = _FILES[key]
    index = _offset_index(data, 0, column)
    pages = index.get(1)[1]
    location = pages[page % len(pages)]
    if move[0] == "by":
        location.set(1, pc.I64, location.get(1) + move[1])
        location.set(2, pc.I32, max(1, location.get(2) + move[2]))
    else:
        others = _offset_index(data, 0, move[1]).get(1)[1]
        other = others[move[2] % len(others)]
        location.set(1, pc.I64, other.get(1)).set(2, pc.I32, other.get(2))
    location.set(3, pc.I64, max(0, location.get(3) + first_row))
    path = _save(tmp_path_factory.mktemp("disp"), _with_offset_index(data, 0, column, index))
    name = table.column_names[column]
    from bulkwire.errors import MalformedFileError
    from bulkwire.parquet import take
    try:
        got = take(path, rows, columns=[name])
    except MalformedFileError:
        return
    assert got.equals(pq.read_table(path, columns=[name]).take(rows))


_FILES: dict = {}
