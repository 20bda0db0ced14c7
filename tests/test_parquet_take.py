"""bulkwire.take / TableFile against pyarrow.Table.take, on Parquet and Arrow IPC files."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire.parquet import TableFile, sample_parquet, take  # noqa: E402

ROWS = 3000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same table as Parquet (uneven row groups) and Arrow IPC (uneven record batches),
    with a few scalar columns and nulls besides the vectors."""
    d = tmp_path_factory.mktemp("take")
    base = sample_parquet(d / "base.parquet", rows=ROWS, dim=5, row_group_rows=700)
    table = pq.read_table(base)
    rng = np.random.default_rng(7)
    names = pa.array([f"n{i}" if i % 11 else None for i in range(ROWS)])
    table = table.append_column("name", names).append_column(
        "score", pa.array(rng.random(ROWS)))
    parquet_path = d / "t.parquet"
    pq.write_table(table, parquet_path, row_group_size=512)
    ipc_path = d / "t.arrow"
    pyarrow.feather.write_feather(table, ipc_path, compression="uncompressed", chunksize=333)
    return table, {"parquet": str(parquet_path), "ipc": str(ipc_path)}


def test_sample_is_seeded_and_shaped(tmp_path):
    a = sample_parquet(tmp_path / "a.parquet", rows=2500, dim=16)
    b = sample_parquet(tmp_path / "b.parquet", rows=2500, dim=16)
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert ta.equals(tb)
    assert ta.schema.field("id").type == pa.int64()
    assert ta.schema.field("emb").type == pa.list_(pa.float32(), 16)
    assert ta.column("id").to_pylist() == list(range(2500))
    values = ta.column("emb").combine_chunks().flatten().to_numpy()
    assert values.dtype == np.float32 and 0 <= values.min() and values.max() < 1
    # the whole stream comes from default_rng(42), row group by row group
    rng = np.random.default_rng(42)
    expected = np.concatenate([rng.random(n * 16, dtype=np.float32) for n in (1024, 1024, 452)])
    assert np.array_equal(values, expected)
    assert pq.ParquetFile(a).metadata.num_row_groups == 3
    c = pq.read_table(sample_parquet(tmp_path / "c.parquet", rows=10, dim=3, seed=1))
    assert not c.column("emb").equals(ta.slice(0, 10).column("emb"))


def test_sample_zero_rows_and_bad_args(tmp_path):
    assert pq.read_table(sample_parquet(tmp_path / "z.parquet", rows=0, dim=3)).num_rows == 0
    with pytest.raises(ValueError, match="dim must be positive"):
        sample_parquet(tmp_path / "x.parquet", rows=3, dim=0)
    with pytest.raises(TypeError, match="rows must be an int"):
        sample_parquet(tmp_path / "x.parquet", rows=3.0, dim=2)


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
@settings(max_examples=40)
@given(data=st.data())
def test_take_equals_table_take(files, fmt, data):
    table, paths = files
    indices = data.draw(st.lists(st.integers(0, ROWS - 1), max_size=60))
    expected = table.take(pa.array(indices, type=pa.int64()))
    got = take(paths[fmt], indices)
    assert got.schema == table.schema
    assert got.equals(expected)


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
def test_cached_handle_and_columns(files, fmt):
    table, paths = files
    rng = np.random.default_rng(42)
    with TableFile(paths[fmt], columns=["id", "name"]) as f:
        assert f.num_rows == ROWS
        for _ in range(5):
            idx = rng.integers(0, ROWS, size=50)
            assert f.take(idx).equals(table.select(["id", "name"]).take(idx))
        # numpy unsigned, pyarrow arrays, tuples are all accepted
        assert f.take(np.array([5, 1], dtype=np.uint16)).column("id").to_pylist() == [5, 1]
        assert f.take(pa.array([ROWS - 1])).column("id").to_pylist() == [ROWS - 1]
        assert take(f, (2, 2), columns=["id"]).column_names == ["id"]
    assert bulkwire.take(paths[fmt], [1]).num_rows == 1


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
def test_parquet_reads_only_touched_row_groups(files, fmt, monkeypatch, tmp_path):
    table, paths = files
    f = TableFile(paths[fmt])
    if fmt == "parquet":
        # without a page index: the touched chunks' page headers walked, one page each read
        monkeypatch.setattr(f._parquet, "read_row_group", None)
        monkeypatch.setattr(f._parquet, "read_row_groups", None)
        got = f.take([2999, 0, 1, 600, 2, 600])
        assert f.stats["id"] == {"pages": 3, "row_groups": 0, "pages_read": 3, "walks": 3}
        assert "paths={'id': 'walked pages'" in repr(f)
        assert got.column("id").to_pylist() == [2999, 0, 1, 600, 2, 600]
        # a codec the page reader lacks: one group at a time, never read_row_groups over
        # several (it concatenates them)
        brotli = tmp_path / "brotli.parquet"
        pq.write_table(table, brotli, row_group_size=512, compression="brotli")
        g = TableFile(brotli)
        read = []
        original = g._parquet.read_row_group
        monkeypatch.setattr(g._parquet, "read_row_group",
                            lambda n, **kw: (read.append(n), original(n, **kw))[1])
        monkeypatch.setattr(g._parquet, "read_row_groups", None)
        got = g.take([2999, 0, 1, 600, 2, 600])
        assert read == [0, 1, 5]
        assert g.stats["id"] == {"pages": 0, "row_groups": 3, "pages_read": 0, "walks": 0}
        assert g.paths["id"] == "row groups (BROTLI not covered)"
        assert got.column("id").to_pylist() == [2999, 0, 1, 600, 2, 600]
        g.close()
    assert list(f.offsets[:3]) == ([0, 512, 1024] if fmt == "parquet" else [0, 333, 666])
    f.close()


@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
@pytest.mark.parametrize("bad, exc, message", [
    ([0, -1], IndexError, r"indices\[1\] = -1 is negative"),
    ([ROWS], IndexError, rf"indices\[0\] = {ROWS} is out of range for {ROWS} rows"),
    ([2 ** 70], IndexError, r"indices\[0\] = \d+ is out of range"),
    ([1, 2.5], TypeError, r"indices must be integers, got dtype float64 \(indices\[1\] = 2.5\)"),
    ([True], TypeError, "got dtype bool"),
    (["1"], TypeError, "got dtype <U1"),
    ("12", TypeError, "indices must be a sequence of integers, not str"),
    (5, TypeError, "not a scalar int"),
    ([[1, 2]], ValueError, "one-dimensional"),
    ([1, None], TypeError, r"indices\[1\] = None is not an integer"),
])
def test_bad_indices(files, fmt, bad, exc, message):
    with pytest.raises(exc, match=message):
        take(files[1][fmt], bad)


def test_not_a_table_file_and_missing_column(tmp_path, files):
    p = tmp_path / "x.csv"
    p.write_text("id\n1\n")
    with pytest.raises(ValueError, match="neither a Parquet file nor an Arrow IPC file"):
        take(p, [0])
    with pytest.raises(KeyError, match="'nope' is not a column"):
        take(files[1]["parquet"], [0], columns=["nope"])
    assert take(files[1]["parquet"], []).num_rows == 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("fmt", ["parquet", "ipc"])
def test_close_racing_lookups_in_other_threads(files, fmt):
    """close() while other threads look rows up, over and over: every lookup returns the
    right rows or raises ValueError saying the file is closed; close() itself never raises
    (it waits for the lookups running), leaves the object closed for good, and no descriptor
    is left open."""
    import os
    import threading

    table, paths = files
    indices = np.random.default_rng(5).integers(0, ROWS, 200)
    want = table.take(pa.array(indices))
    open_before = len(os.listdir("/proc/self/fd"))
    for iteration in range(150):
        f = TableFile(paths[fmt])
        start = threading.Barrier(3)
        failures: list = []
        taken = [0]

        def lookups() -> None:
            start.wait()
            try:
                for _ in range(50):
                    try:
                        got = f.take(indices)
                    except ValueError as exc:
                        assert "closed" in str(exc), exc
                        return
                    assert got.equals(want)
                    taken[0] += 1
            except BaseException as exc:  # noqa: BLE001 - the main thread raises it
                failures.append(exc)

        threads = [threading.Thread(target=lookups) for _ in range(2)]
        for t in threads:
            t.start()
        start.wait()
        if iteration % 3:  # let some lookups start first
            threading.Event().wait(0.0005 * (iteration % 5))
        f.close()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        if failures:
            raise failures[0]
        with pytest.raises(ValueError, match="closed"):
            f.take([0])
        f.close()  # again: nothing left to release
    assert len(os.listdir("/proc/self/fd")) <= open_before


def _ipc_table(draw, rows: int):
    """A table of the column types an Arrow IPC lookup reads row by row (and some it reads
    by whole record batches), nulls at every level."""
    import decimal

    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))

    def mask(p: float):
        return rng.random(rows) < p

    def maybe(values, p: float = 0.2):
        nulls = mask(p)
        return [None if n else v for v, n in zip(values, nulls)]

    floats = rng.random(rows * 6).astype(np.float32)
    inner = pa.array(floats, mask=rng.random(rows * 6) < 0.1)
    nested = pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(inner, 3), 2)
    nested = pa.FixedSizeListArray.from_arrays(nested.values, 2, mask=pa.array(mask(0.2))) \
        if rows else nested
    lists = [list(rng.random(int(rng.integers(0, 5))).astype(np.float32)) for _ in range(rows)]
    return pa.table({
        "id": pa.array(np.arange(rows), pa.int64()),
        "i8": pa.array(rng.integers(-100, 100, rows).astype(np.int8), mask=mask(0.3)),
        "f64": pa.array(rng.random(rows), mask=mask(0.1)),
        "ts": pa.array(rng.integers(0, 10 ** 12, rows), pa.timestamp("us")),
        "dec": pa.array(maybe([decimal.Decimal(int(v)) / 100 for v in
                               rng.integers(0, 10 ** 6, rows)]), pa.decimal128(12, 2)),
        "fsb": pa.array(maybe([bytes([i % 256]) * 3 for i in range(rows)]), pa.binary(3)),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(floats), 6),
        "nested": nested,
        "s": pa.array(maybe([f"row {i}" * int(rng.integers(0, 3)) for i in range(rows)])),
        "ls": pa.array(maybe([f"é{i}" for i in range(rows)]), pa.large_string()),
        "bin": pa.array(maybe([bytes(rng.integers(0, 256, int(rng.integers(0, 4))).astype(
            np.uint8)) for _ in range(rows)]), pa.binary()),
        "list": pa.array(maybe(lists), pa.list_(pa.float32())),
        "llist": pa.array(maybe(lists), pa.large_list(pa.float64())),
        "flag": pa.array(maybe([bool(v) for v in rng.integers(0, 2, rows)])),
        "dict": pa.array(maybe([f"k{v}" for v in rng.integers(0, 4, rows)])).dictionary_encode(),
        "struct": pa.array(maybe([{"a": i, "b": str(i)} for i in range(rows)])),
    })


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_ipc_lookups_equal_pyarrow_for_every_column_type(tmp_path_factory, data):
    """Arrow IPC lookups (row by row for fixed-width values, fixed-size lists of them at any
    depth, strings, binaries and lists of fixed-width values; whole record batches for the
    rest) give what pyarrow's take gives, nulls at every level, uncompressed and zstd, in any
    order with repeats."""
    rows = data.draw(st.integers(0, 300))
    table = _ipc_table(data.draw, rows)
    path = tmp_path_factory.mktemp("ipc") / "t.arrow"
    chunk = data.draw(st.integers(1, 120))
    compression = data.draw(st.sampled_from(["uncompressed", "zstd"]))
    pyarrow.feather.write_feather(table, str(path), compression=compression, chunksize=chunk)
    indices = data.draw(st.lists(st.integers(0, rows - 1), max_size=80)) if rows else []
    with TableFile(path) as f:
        got = f.take(indices)
        assert got.schema == table.schema
        assert got.equals(table.take(pa.array(indices, type=pa.int64())))
        again = data.draw(st.lists(st.integers(0, rows - 1), max_size=20)) if rows else []
        assert f.take(again).equals(table.take(pa.array(again, type=pa.int64())))


def _ipc_metadata_ranges(data: bytes) -> list:
    """(start, end) of each FlatBuffer in an Arrow IPC file: every message (after its
    continuation marker and length) and the footer."""
    ranges, at = [], 8
    while True:
        at = data.find(b"\xff\xff\xff\xff", at)
        if at < 0:
            break
        length = int.from_bytes(data[at + 4:at + 8], "little", signed=True)
        if 0 < length <= len(data) - at - 8:
            ranges.append((at + 8, at + 8 + length))
        at += 4
    footer_length = int.from_bytes(data[-10:-6], "little", signed=True)
    ranges.append((len(data) - 10 - footer_length, len(data) - 10))
    return ranges


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_ipc_metadata_with_hostile_bytes_is_refused_or_read_never_crashes(tmp_path_factory,
                                                                        data):
    """Bytes of an IPC file's FlatBuffers (its messages' record batch headers: lengths, null
    counts, buffer offsets and lengths, vtables; and its footer) overwritten: a lookup
    returns rows or raises a ValueError or OSError naming the file. Never another exception,
    a crash or a read outside the file."""
    rows = 40
    table = pa.table({
        "id": pa.array(np.arange(rows), pa.int64()),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(rows * 3, dtype=np.float32)), 3),
        "name": pa.array([None if i % 7 == 0 else f"n{i}" for i in range(rows)]),
        "list": pa.array([[float(i)] * (i % 3) for i in range(rows)], pa.list_(pa.float64())),
    })
    path = tmp_path_factory.mktemp("ipc") / "t.arrow"
    pyarrow.feather.write_feather(table, str(path), compression="uncompressed", chunksize=16)
    original = path.read_bytes()
    ranges = _ipc_metadata_ranges(original)
    changed = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        start, end = data.draw(st.sampled_from(ranges))
        at = data.draw(st.integers(start, end - 1))
        changed[at] = data.draw(st.integers(0, 255))
    path.write_bytes(bytes(changed))
    indices = data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=12))
    try:
        with TableFile(path) as f:
            got = f.take(indices)
    except IndexError as exc:  # the file now says it holds fewer rows (a batch's length)
        assert "out of range" in str(exc), exc
        return
    except (ValueError, OSError) as exc:
        assert str(path) in str(exc), exc
        return
    assert got.num_rows == len(indices)


def test_ipc_lookups_read_only_the_rows_they_take(tmp_path, monkeypatch):
    """Uncompressed IPC: a vector, an id and a string column are read row by row; no record
    batch is read whole, and the bytes read are about those of the rows."""
    from bulkwire import _core

    rows, dim = 20_000, 64
    values = pa.array(np.random.default_rng(1).random(rows * dim, dtype=np.float32))
    table = pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                      "emb": pa.FixedSizeListArray.from_arrays(values, dim),
                      "name": pa.array([f"n{i}" for i in range(rows)])})
    path = tmp_path / "big.arrow"
    pyarrow.feather.write_feather(table, str(path), compression="uncompressed", chunksize=4096)
    read = []
    real = _core.read_ranges
    monkeypatch.setattr(_core, "read_ranges",
                        lambda fd, size, at, n: read.append(int(np.sum(n))) or real(fd, size, at, n))
    with TableFile(path) as f:
        monkeypatch.setattr(f._ipc, "whole_batch", None)  # would fail if called
        f.take([0])  # the offsets of the string column's first batch read and checked
        read.clear()
        indices = [19_999, 5, 6, 7, 12_345]
        assert f.take(indices).equals(table.take(pa.array(indices)))
    row_bytes = 8 + dim * 4 + 8
    assert sum(read) <= len(indices) * row_bytes + 3 * (4096 // 8 + 4097 * 4)


def test_ipc_columns_of_one_name_are_read_each_from_its_own_place(tmp_path):
    """Arrow IPC allows two columns of one name: each is read from where it is."""
    table = pa.Table.from_arrays([pa.array([1, 2, 3]), pa.array(["a", "b", "c"]),
                                  pa.array([7.5, 8.5, 9.5])], names=["x", "x", "y"])
    path = tmp_path / "dup.arrow"
    pyarrow.feather.write_feather(table, str(path), compression="uncompressed")
    with TableFile(path) as f:
        assert f.take([2, 0]).equals(table.take(pa.array([2, 0])))


@pytest.mark.parametrize("layout", ["pages", "row groups", "ipc"])
def test_random_access_does_not_import_pandas(tmp_path, layout):
    """pandas costs a process 0.3 s and 45 MB at its first use: writing the sample, taking
    rows page by page, from whole row groups (a reordered take) or from Arrow IPC need
    none of it (``pa.array`` of a NumPy array would import it)."""
    import subprocess
    import sys

    path = str(tmp_path / "s.parquet")
    if layout != "pages":  # written here: the child only reads
        sample_parquet(path, rows=300, dim=4, row_group_rows=100)
        table = pq.read_table(path).append_column(
            "name", pa.array(["x"] * 300, pa.large_string()))
        if layout == "ipc":
            path = str(tmp_path / "s.arrow")
            pyarrow.feather.write_feather(table, path, compression="zstd", chunksize=64)
        else:
            path = str(tmp_path / "r.parquet")
            pq.write_table(table, path, row_group_size=100, use_dictionary=["name"])
    code = r"""
import os, sys
import bulkwire
from bulkwire.parquet import TableFile
path, layout = sys.argv[1], sys.argv[2]
if layout == "pages":
    bulkwire.sample_parquet(path, rows=300, dim=4, row_group_rows=100)
with TableFile(path) as f:
    got = f.take([250, 3, 3, 120])
assert got.column("id").to_pylist() == [250, 3, 3, 120], got
assert "pandas" not in sys.modules, "pandas was imported"
"""
    package_parent = os.path.dirname(os.path.dirname(bulkwire.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_parent,
                                                      os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code, path, layout],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_file_reopened_for_each_lookup_reads_its_pages_into_kept_memory(tmp_path):
    """``take(path, rows)`` opens and closes the file every time. Its pages (about 1 MiB
    each here: a dictionary page and data pages per chunk) are read into buffers the previous
    lookup gave back, so a lookup takes almost no fresh page of memory. With the page buffer
    pool emptied and kept empty, the same lookups take thousands of page faults each. Whatever
    the file, what the pool keeps stays within 16 buffers and 16 MiB.

    The child runs with glibc told to give every freed block of 64 KiB or more back to the
    system at once: the worst case the pool is there for, made certain. Left to itself,
    glibc keeps or trims freed memory depending on the heap's layout, which changes with
    things as small as the file's path (runs of the same child took 48 to 1,467 faults a
    lookup without the pool)."""
    import json
    import subprocess
    import sys

    code = r"""
import json, resource, sys
import bulkwire
from bulkwire._core import _testing
from bulkwire.parquet import take
path = sys.argv[1]
bulkwire.sample_parquet(path, rows=24 * 1024, dim=256, row_group_rows=1024)
indices = [group * 1024 + row for group in range(0, 24, 3) for row in range(5, 25)]

def faults_per_lookup(lookups=10):
    for _ in range(3):
        take(path, indices)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(lookups):
        got = take(path, indices)
        assert got.column("id").to_pylist() == indices
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / lookups

reused_before = _testing.parquet_page_buffers()[2]
kept = faults_per_lookup()
reused = _testing.parquet_page_buffers()[2] - reused_before
take(path, list(range(0, 24 * 1024, 1000)))  # every row group: 24 dictionaries held, then given back
buffers, held, _ = _testing.parquet_page_buffers()
_testing.parquet_page_buffers(0)
fresh = faults_per_lookup()
print(json.dumps({"kept": kept, "fresh": fresh, "reused": reused, "buffers": buffers,
                  "held": held}))
"""
    package_parent = os.path.dirname(os.path.dirname(bulkwire.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_parent,
                                                      os.environ.get("PYTHONPATH", "")]),
               MALLOC_MMAP_THRESHOLD_=str(64 << 10), MALLOC_TRIM_THRESHOLD_="0")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v.parquet")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    # 13 lookups of 8 row groups, two chunks each: every one reads a dictionary and a page
    assert seen["reused"] >= 13 * 8 * 2, seen
    assert seen["fresh"] > 100, seen  # what the pool saves: 1 MiB pages read into new memory
    assert seen["kept"] * 5 < seen["fresh"], seen
    assert seen["buffers"] <= 16 and seen["held"] <= 16 << 20, seen


def test_an_ipc_file_without_columns_gives_the_rows_asked_for(tmp_path):
    """A schema of no columns over record batches of rows (a valid Arrow file; also what a
    footer whose field count was overwritten says): a lookup returns as many rows as it
    asked for, in a table of no columns, never an empty table."""
    path = str(tmp_path / "no-columns.arrow")
    empty = pa.record_batch([pa.nulls(5)], names=["x"]).select([])
    with pa.ipc.new_file(path, pa.schema([])) as writer:
        writer.write_batch(empty)
        writer.write_batch(empty)
    with TableFile(path) as f:
        assert f.num_rows == 10
        got = f.take([9, 0, 0, 4])
    assert (got.num_rows, got.num_columns) == (4, 0)
    assert bulkwire.take(path, [3]).num_rows == 1
