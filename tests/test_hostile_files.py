"""Files that change or lie under bulkwire: a Parquet or Arrow IPC file cut short, rewritten
in place, replaced (renamed over) or grown while a TableFile has it open, while a lookup or a
load reads it; Arrow IPC files whose string and list offsets were patched to decrease or to
point past their buffers.

Each hostile case runs in a child process, so a crash (SIGBUS from a memory-mapped file cut
short) fails the test instead of killing pytest; the child reports, case by case, either the
exception raised or whether the rows it got are the rows of the file as it was opened (the
reference: pyarrow's read of an untouched copy).
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROWS = 20_000
DIM = 8

#: The child: runs every (change, entry) case on a fresh copy of the file, prints one JSON
#: line per case. argv: the file, the cases as JSON, another file of the same layout (its
#: bytes rewrite the file in place when their sizes are the same).
CHILD = r'''
import contextlib, json, os, shutil, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, pyarrow.feather
import bulkwire
from bulkwire.parquet import TableFile

source, cases, other_file = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
folder = os.path.dirname(source)
ext = os.path.splitext(source)[1]


def read(path):
    if ext == ".parquet":
        return pq.read_table(path)
    return pyarrow.feather.read_table(path)


def mutate(path, change):
    size = os.path.getsize(path)
    if change == "truncate":
        os.truncate(path, size // 2)
    elif change == "rewrite":  # the same size, other bytes: another writer's, or a corruption
        data = bytearray(open(path, "rb").read())
        other = open(other_file, "rb").read()
        if len(other) == size:  # the same layout, other values: only the values differ
            data = other
        else:
            for i in range(8, size // 2):
                data[i] ^= 0x5A
        with open(path, "r+b") as f:
            f.write(bytes(data))
    elif change == "replace":  # another file renamed over it
        other = path + ".other"
        shutil.copyfile(path, other)
        with open(other, "r+b") as f:
            f.seek(8)
            f.write(b"\x00" * (size // 3))
        os.replace(other, path)
    elif change == "grow":
        with open(path, "ab") as f:
            f.write(b"\x01" * 65536)


@contextlib.contextmanager
def changed_on_open(path, change):
    """TableFile opens the file, then it changes (before any row is read)."""
    real = TableFile._open

    def opened(self, pa):
        real(self, pa)
        mutate(path, change)
    TableFile._open = opened
    try:
        yield
    finally:
        TableFile._open = real


def body(path):
    return [(c["Id"], c["Document"]) for c in json.load(open(path))]


for case in cases:
    change, entry = case["change"], case["entry"]
    print(f"running {change} {entry}", file=sys.stderr, flush=True)
    path = os.path.join(folder, f"case-{change}-{entry}{ext}")
    pristine = path + ".pristine" + ext
    shutil.copyfile(source, path)
    shutil.copyfile(source, pristine)
    old = os.stat(path).st_mtime_ns - 10 ** 10  # modified 10 s ago: any rewrite shows
    os.utime(path, ns=(old, old))
    idx = case["indices"]
    out, reference = path + ".json", path + ".ref.json"
    target, reference_target = (bulkwire.targets.request_file(name, id_column="id")
                                for name in (out, reference))
    options = dict(vector_column="emb")
    result = {"change": change, "entry": entry}
    try:
        if entry == "TableFile.take":
            with TableFile(path) as f:
                f.take([0, 1])  # the page index read, the first pages walked
                mutate(path, change)
                got = f.take(idx)
            result["same"] = got.equals(read(pristine).take(pa.array(idx)))
        elif entry == "bulkwire.take":
            with changed_on_open(path, change):
                got = bulkwire.take(path, idx)
            result["same"] = got.equals(read(pristine).take(pa.array(idx)))
        elif entry == "load_parquet(take=)":
            with changed_on_open(path, change):
                bulkwire.load_parquet(path, target, take=idx, **options)
            bulkwire.load_parquet(pristine, reference_target, take=idx, **options)
            result["same"] = body(out) == body(reference)
        else:  # a load that goes on while the file changes, after its first batch
            done = []

            def progress(rows, body_bytes):
                if not done:
                    done.append(1)
                    mutate(path, change)
            bulkwire.load_parquet(path, target, batch_rows=1000, progress=progress,
                                  **options)
            bulkwire.load_parquet(pristine, reference_target, batch_rows=1000, **options)
            result["same"] = body(out) == body(reference)
    except Exception as exc:
        result["error"] = type(exc).__name__
        result["is_os_error"] = isinstance(exc, OSError)
        result["message"] = str(exc)
    print(json.dumps(result), flush=True)
'''


def run_child(code: str, *args: str, timeout: float = 300) -> list:
    """The child's JSON lines; a child that dies (a signal) or hangs fails the test."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())
    died = (signal.Signals(-done.returncode).name if done.returncode < 0
            else f"exit code {done.returncode}")
    assert done.returncode == 0, f"the child died ({died}); its last words:\n{done.stderr[-3000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def table(seed: int = 3):
    rng = np.random.default_rng(seed)
    values = pa.array(rng.random(ROWS * DIM, dtype=np.float32))
    return pa.table({"id": pa.array(np.arange(ROWS), pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(values, DIM),
                     "name": pa.array([f"row {i}" if i % 13 else None for i in range(ROWS)]),
                     "flag": pa.array([i % 3 == 0 for i in range(ROWS)])})


def write(path, layout: str, seed: int = 3) -> str:
    """The table as ``layout``: Parquet with a page index (pages), without one (walked
    pages), Arrow IPC uncompressed (rows read one by one) or zstd (batches read whole)."""
    t = table(seed)
    if layout == "page index":
        pq.write_table(t, path, write_page_index=True, use_dictionary=False,
                       compression="none", row_group_size=5000, data_page_size=16 << 10)
    elif layout == "walked pages":
        pq.write_table(t, path, row_group_size=5000, data_page_size=16 << 10)
    elif layout == "ipc":
        pyarrow.feather.write_feather(t, path, compression="uncompressed", chunksize=1000)
    else:
        pyarrow.feather.write_feather(t, path, compression="zstd", chunksize=1000)
    return str(path)


CHANGES = ("truncate", "rewrite", "replace", "grow")
ENTRIES = ("TableFile.take", "bulkwire.take", "load_parquet(take=)", "load_parquet")
LAYOUTS = {"page index": "parquet", "walked pages": "parquet", "ipc": "arrow",
           "ipc zstd": "arrow"}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_file_that_changes_under_a_reader_never_crashes_it(tmp_path, layout):
    """Cut short, rewritten with other bytes of the same size, replaced by a rename, or grown
    — after a TableFile opened it (and read a first row), right after ``bulkwire.take`` or
    ``load_parquet(take=)`` opened it, or after a load's first batch: the reader raises
    MalformedFileError (or OSError) naming the file, or returns exactly the rows of the file
    as it was opened. A file cut short or rewritten is always an error: its rows cannot be
    read, or would be another file's (with a page index and in uncompressed IPC, the rewrite
    is another file of the same size and layout: only its values differ)."""
    from bulkwire.errors import MalformedFileError

    source = write(tmp_path / f"data.{LAYOUTS[layout]}", layout)
    other = write(tmp_path / f"other.{LAYOUTS[layout]}", layout, seed=4)
    indices = [ROWS - 1, 0, 7, 7, ROWS // 2 + 3, ROWS - 2, 4999, 5000, 12345]
    cases = [{"change": c, "entry": e, "indices": indices} for c in CHANGES for e in ENTRIES]
    results = run_child(CHILD, source, json.dumps(cases), other)
    assert len(results) == len(cases)
    for r in results:
        where = f"{layout}, {r['change']}, {r['entry']}"
        if "error" in r:
            assert r["error"] == MalformedFileError.__name__ or r["is_os_error"], (where, r)
            assert f"case-{r['change']}-" in r["message"], (where, r)  # the file is named
        else:
            assert r["same"], (where, r)
        if r["change"] in ("truncate", "rewrite"):
            assert "error" in r, (where, r)
            assert "changed since" in r["message"], (where, r)
        if r["change"] == "replace" and r["entry"] in ("TableFile.take", "load_parquet"):
            assert r.get("same"), (where, r)  # the open file is read: the rows it held


# ------------------------------------------------------------------------------ lying offsets

def crafted_ipc(path, column: str, offsets: list) -> str:
    """An Arrow IPC file (uncompressed, one record batch of 4 rows) whose column ``column``
    (a string, binary, list of float32, or list of strings: its inner offsets) has its
    offsets [0, 3, 6, 9, 12] patched to ``offsets``."""
    rows = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]
    columns = {
        "id": pa.array([10, 11, 12, 13], pa.int64()),
        "emb": pa.array([[0.5, 0.25]] * 4, pa.list_(pa.float32(), 2)),
        "s": pa.array(["aaa", "bbb", "ccc", "ddd"]),
        "b": pa.array([b"AAA", b"BBB", b"CCC", b"DDD"]),
        "l": pa.array(rows, pa.list_(pa.float32())),
        "ls": pa.array([["aaa"], ["bbb"], ["ccc"], ["ddd"]], pa.list_(pa.string())),
    }
    # each column's own offsets, so that the one patched is found alone
    lengths = {"s": 3, "b": 3, "l": 3, "ls": 3}
    t = pa.table({"id": columns["id"], "emb": columns["emb"], column: columns[column]})
    pyarrow.feather.write_feather(t, str(path), compression="uncompressed")
    data = bytearray(open(path, "rb").read())
    n = lengths[column]
    pattern = struct.pack("<5i", 0, n, 2 * n, 3 * n, 4 * n)
    at = data.find(pattern)
    assert at > 0 and data.find(pattern, at + 1) < 0
    data[at:at + 20] = struct.pack("<5i", *offsets)
    open(path, "wb").write(bytes(data))
    return str(path)


#: offsets of 4 rows of 3 values each, patched: decreasing, pointing into another row (row 2
#: starts back at row 0's bytes), past the end in the middle, past the end at the last
LIES = {"decreasing": [0, 6, 3, 9, 12], "into another row": [0, 3, 0, 9, 12],
        "past the end inside": [0, 3, 4000, 9, 12], "past the end last": [0, 3, 6, 9, 4000]}

CRAFTED_CHILD = r'''
import json, os, sys
import bulkwire
from bulkwire.parquet import TableFile

path, entries, options = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = path + ".json"
for entry in entries:
    print("running", entry, file=sys.stderr, flush=True)
    result = {"entry": entry}
    try:
        if entry == "TableFile.take":
            with TableFile(path) as f:
                for rows in ([2], [0, 1, 2, 3], [3, 1]):
                    result["rows"] = f.take(rows).to_pylist()
        elif entry == "bulkwire.take":
            result["rows"] = bulkwire.take(path, [1, 2]).to_pylist()
        elif entry == "load_parquet(take=)":
            bulkwire.load_parquet(path, bulkwire.targets.request_file(out), take=[2, 1],
                                  **options)
            result["rows"] = json.load(open(out))
        else:
            bulkwire.load_parquet(path, bulkwire.targets.request_file(out), **options)
            result["rows"] = json.load(open(out))
    except Exception as exc:
        result["error"] = type(exc).__name__
        result["value_error"] = isinstance(exc, ValueError)
        result["message"] = str(exc)
    print(json.dumps(result, default=repr), flush=True)
'''

#: per column: the entries that read it, and the load's options. A binary column and a list
#: of strings cannot be document fields (the encoder refuses their type before reading a
#: row), so only lookups read them; a list of float32 is loaded as the vector column.
READERS = {"s": (ENTRIES, {"vector_column": "emb"}),
           "b": (ENTRIES[:2], {}),
           "l": (ENTRIES, {"vector_column": "l", "columns": ["l"]}),
           "ls": (ENTRIES[:2], {})}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("column", ["s", "b", "l", "ls"])
@pytest.mark.parametrize("lie", list(LIES))
def test_lying_ipc_offsets_are_refused_naming_file_and_column(tmp_path, column, lie):
    """Offsets that decrease, point back into another row or past their buffer, in a string,
    a binary, a list of float32 or the strings inside a list: TableFile.take, bulkwire.take,
    load_parquet(take=) and a plain load_parquet all raise ValueError (MalformedFileError or
    RowError) naming the file and the column, before any row is read; never a crash, never
    None rows or another row's bytes."""
    path = crafted_ipc(tmp_path / f"lie-{column}.arrow", column, LIES[lie])
    entries, options = READERS[column]
    results = run_child(CRAFTED_CHILD, path, json.dumps(entries), json.dumps(options))
    assert [r["entry"] for r in results] == list(entries)
    for r in results:
        assert "error" in r and r["value_error"], (lie, column, r)
        assert f"lie-{column}.arrow" in r["message"], r
        assert f"'{column}'" in r["message"], r


def as_json(value):
    """``value`` as the child reports it (bytes by their repr)."""
    return json.loads(json.dumps(value, default=repr))


def test_honest_offsets_read_as_written(tmp_path):
    """The same files, offsets left as written: every entry reads the rows pyarrow reads."""
    for column in ("s", "b", "l", "ls"):
        path = crafted_ipc(tmp_path / f"ok-{column}.arrow", column, [0, 3, 6, 9, 12])
        entries, options = READERS[column]
        results = run_child(CRAFTED_CHILD, path, json.dumps(entries), json.dumps(options))
        want = pyarrow.feather.read_table(path)
        assert [r["entry"] for r in results] == list(entries)
        for r in results:
            assert "error" not in r, r
            if r["entry"] == "TableFile.take":
                assert r["rows"] == as_json(want.take(pa.array([3, 1])).to_pylist())
            elif r["entry"] == "bulkwire.take":
                assert r["rows"] == as_json(want.take(pa.array([1, 2])).to_pylist())
            else:  # the documents hold the rows' values
                column = options["columns"][0] if "columns" in options else column
                rows = [3, 2, 1, 0] if r["entry"] == "load_parquet" else [2, 1]
                got = {c["Id"]: c["Document"][column] for c in r["rows"]}
                assert sorted(got.values()) == sorted(want.column(column).take(
                    pa.array(rows)).to_pylist())


def test_a_batch_is_validated_once_whatever_the_lookups(tmp_path, monkeypatch):
    """The offsets of a record batch are read and validated by its first lookup; later
    lookups of the same batch read only their rows."""
    from bulkwire import _ipc
    from bulkwire.parquet import TableFile

    path = crafted_ipc(tmp_path / "once.arrow", "s", [0, 3, 6, 9, 12])
    calls = []
    real = _ipc._offsets_checked
    monkeypatch.setattr(_ipc, "_offsets_checked",
                        lambda *args: calls.append(1) or real(*args))
    with TableFile(path) as f:
        for rows in ([0], [3, 2], [1, 1, 0], [2]):
            assert f.take(rows).column("s").to_pylist() == [["aaa", "bbb", "ccc", "ddd"][i]
                                                             for i in rows]
    assert len(calls) == 1
