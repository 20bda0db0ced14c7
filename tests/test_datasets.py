"""load_parquet and ``bulkwire load`` over datasets: a directory, a glob, a list of Parquet /
Arrow IPC files, and Arrow data (a Table, a RecordBatchReader, a pyarrow.dataset, batches).
The oracle is the body ``BulkWriter.store`` writes for the rows of all files in order
(test_encode_batch.oracle); a schema that differs is refused before any document is sent.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire.testing import LoopbackServer  # noqa: E402
from test_encode_batch import oracle  # noqa: E402

EXAMPLES = min(25, settings.default.max_examples)


def part(first_id: int, rows: int, dim: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    values = pa.array(rng.random(rows * dim, dtype=np.float32))
    return pa.table({"id": pa.array(np.arange(first_id, first_id + rows), pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(values, dim),
                     "name": pa.array([f"n{first_id + i}" for i in range(rows)], pa.string())})


def write_parts(folder, sizes, *, ipc_every: int = 0, row_group: int = 7):
    """Files part-000.parquet, ... (every ipc_every-th one Arrow IPC); their tables in order."""
    os.makedirs(folder, exist_ok=True)
    tables, first = [], 0
    for i, rows in enumerate(sizes):
        table = part(first, rows, seed=i)
        if ipc_every and i % ipc_every == ipc_every - 1:
            pyarrow.feather.write_feather(table, os.path.join(folder, f"part-{i:03}.arrow"),
                                          compression="uncompressed", chunksize=row_group)
        else:
            pq.write_table(table, os.path.join(folder, f"part-{i:03}.parquet"),
                           row_group_size=row_group)
        tables.append(table)
        first += rows
    return tables


def expected_body(tables) -> bytes:
    whole = pa.concat_tables(tables)
    return b"[" + oracle(whole, vector_column="emb", prefix="embeddings/") + b"]"


@settings(max_examples=EXAMPLES)
@given(sizes=st.lists(st.integers(0, 30), min_size=1, max_size=5),
       row_group=st.integers(1, 12), batch_rows=st.integers(1, 40),
       ipc_every=st.sampled_from([0, 2]), threads=st.integers(1, 3))
def test_a_directory_is_its_files_in_name_order(tmp_path_factory, sizes, row_group, batch_rows,
                                                ipc_every, threads):
    folder = tmp_path_factory.mktemp("ds")
    tables = write_parts(str(folder / "data"), sizes, ipc_every=ipc_every, row_group=row_group)
    out = str(folder / "out.json")
    r = bulkwire.load_parquet(str(folder / "data"), bulkwire.targets.request_file(out),
                              batch_rows=batch_rows, threads=threads)
    assert open(out, "rb").read() == expected_body(tables)
    assert r.rows == sum(sizes) and r.body_bytes == os.path.getsize(out)


def test_directory_glob_list_and_streams_write_the_same_body(tmp_path):
    folder = tmp_path / "data"
    tables = write_parts(str(folder), [40, 0, 25, 33], ipc_every=3)
    (folder / "_SUCCESS").write_text("")  # what writers leave next to the data: not data
    (folder / ".part-000.parquet.crc").write_text("")
    nested = folder / "year=2026"
    expected = expected_body(tables)
    files = sorted(str(p) for p in folder.iterdir() if p.name.startswith("part-"))
    whole = pa.concat_tables(tables)
    sources = {
        "directory": str(folder),
        "directory, trailing slash": str(folder) + os.sep,
        "glob": str(folder / "part-*"),
        "list": files,
        "pathlib list": [folder / os.path.basename(f) for f in files],
        "table": whole,
        "reader": whole.to_reader(max_chunksize=9),
        "record batch": whole.combine_chunks().to_batches()[0],
        "batches": iter(whole.to_batches(max_chunksize=11)),
        "pyarrow.dataset": pads.dataset(pa.concat_tables(tables)),
        "__arrow_c_stream__": type("Stream", (), {"__arrow_c_stream__": lambda self, s=None:
                                                   whole.__arrow_c_stream__(s)})(),
    }
    for name, source in sources.items():
        out = str(tmp_path / "out.json")
        r = bulkwire.load_parquet(source, bulkwire.targets.request_file(out), batch_rows=16)
        assert open(out, "rb").read() == expected, name
        assert r.rows == whole.num_rows, name
    # a pyarrow.dataset over the Parquet files (its own order: compare the documents)
    assert files[2].endswith(".arrow")
    out = str(tmp_path / "ds.json")
    bulkwire.load_parquet(pads.dataset(files[:2] + files[3:], format="parquet"),
                          bulkwire.targets.request_file(out))
    got = {c["Id"]: c for c in json.loads(open(out, "rb").read())}
    want = json.loads(expected_body(tables[:2] + tables[3:]))
    assert got == {c["Id"]: c for c in want}
    os.mkdir(nested)  # a sub-folder is read too, after the folder's own files
    pq.write_table(part(10_000, 3), str(nested / "part-a.parquet"))
    r = bulkwire.load_parquet(str(folder), bulkwire.targets.request_file(str(tmp_path / "n.json")))
    assert r.rows == whole.num_rows + 3
    # the default body file of a directory sits next to it
    r = bulkwire.load_parquet(str(folder) + os.sep)
    assert r.target == str(folder) + ".bulk.json" and os.path.exists(r.target)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.set_column(1, "emb", t.column("emb").cast(pa.list_(pa.float64(), 4))),
     r"part-002.parquet': column 'emb' is fixed_size_list<\w+: double>\[4\], but "
     r"fixed_size_list<\w+: float>\[4\] in '.*part-000.parquet'"),
    (lambda t: t.drop_columns(["name"]), r"part-002.parquet' has no column 'name'"),
    (lambda t: t.append_column("extra", pa.array([1] * t.num_rows)),
     r"part-002.parquet' has a column 'extra' that '.*part-000.parquet' has not"),
    (lambda t: t.set_column(0, "id", t.column("id").cast(pa.string())),
     r"part-002.parquet': column 'id' is string, but int64"),
])
def test_a_file_that_differs_fails_before_any_document_is_sent(tmp_path, change, message):
    folder = tmp_path / "data"
    tables = write_parts(str(folder), [30, 30, 30])
    pq.write_table(change(tables[2]), str(folder / "part-002.parquet"))
    with LoopbackServer() as server:
        for workers in (1, 2):
            with pytest.raises(ValueError, match=message):
                bulkwire.load_parquet(str(folder), bulkwire.targets.ravendb(server.url, "db"),
                                      workers=workers)
        assert server.requests == [] and server.operations == {} and server.log == []
    with pytest.raises(ValueError, match=message):
        bulkwire.load_parquet(str(folder), bulkwire.targets.request_file(str(tmp_path / "x.json")))
    assert not os.path.exists(tmp_path / "x.json.partial") and not os.path.exists(tmp_path / "x.json")


def test_what_matches_nothing_is_named(tmp_path):
    os.mkdir(tmp_path / "empty")
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"no Parquet or Arrow IPC files .* in the directory '.*empty'"):
        bulkwire.load_parquet(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"no file matches '.*nothing-\*.parquet'"):
        bulkwire.load_parquet(str(tmp_path / "nothing-*.parquet"))
    with pytest.raises(FileNotFoundError, match=r"no such file: '.*missing.parquet'"):
        bulkwire.load_parquet([str(tmp_path / "missing.parquet")])
    with pytest.raises(ValueError, match="empty list"):
        bulkwire.load_parquet([])
    with pytest.raises(TypeError, match="path must be a file, directory or glob"):
        bulkwire.load_parquet(42)
    with pytest.raises(TypeError, match="iterable of pyarrow.RecordBatch, not of int"):
        bulkwire.load_parquet(iter([1, 2]),
                              bulkwire.targets.request_file(str(tmp_path / "x.json")))
    write_parts(str(tmp_path / "two"), [3, 3])
    with pytest.raises(ValueError, match="out is needed"):
        bulkwire.load_parquet(str(tmp_path / "two" / "*.parquet"))
    with pytest.raises(ValueError, match="take needs a single file"):
        bulkwire.load_parquet(str(tmp_path / "two"),
                              bulkwire.targets.request_file(str(tmp_path / "x.json")), take=[0])


def test_a_bad_row_names_its_file_and_the_files_row(tmp_path):
    folder = tmp_path / "data"
    write_parts(str(folder), [20, 20])
    bad = pa.table({"id": pa.array([100, None, 102], pa.int64()),
                    "emb": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(12, np.float32)), 4),
                    "name": ["a", "b", "c"]})
    pq.write_table(bad, str(folder / "part-005.parquet"))
    with pytest.raises(bulkwire.RowError) as info:
        bulkwire.load_parquet(str(folder), bulkwire.targets.request_file(str(tmp_path / "x.json")))
    assert info.value.source == str(folder / "part-005.parquet") and info.value.row == 1
    assert str(info.value) == f"{info.value.source!r}: column 'id', row 1: null id"


def test_arrow_data_into_a_server_is_one_request(tmp_path):
    whole = pa.concat_tables(write_parts(str(tmp_path / "d"), [50, 50]))
    with LoopbackServer() as server:
        r = bulkwire.load_arrow(whole.to_reader(max_chunksize=8),
                                bulkwire.targets.ravendb(server.url, "db"))
        assert r.rows == 100 and len(server.requests) == 1
        want = {c["Id"]: c["Document"] for c in json.loads(expected_body([whole]))}
        assert server.documents == want
        with pytest.raises(TypeError, match="not a path"):
            bulkwire.load_arrow(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"))
        with pytest.raises(ValueError, match="workers needs files"):
            bulkwire.load_parquet(whole, bulkwire.targets.ravendb(server.url, "db"), workers=2)


def test_cli_loads_a_directory_a_glob_and_several_paths(tmp_path, capsys):
    from bulkwire.cli import main

    tables = write_parts(str(tmp_path / "d"), [10, 20, 30])
    expected = expected_body(tables)
    runs = [[str(tmp_path / "d")], [str(tmp_path / "d" / "*.parquet")],
            [str(tmp_path / "d" / f"part-{i:03}.parquet") for i in range(3)]]
    for paths in runs:
        out = str(tmp_path / "o.json")
        assert main(["load", *paths, "--out", out, "-q", "--threads", "1"]) == 0
        assert open(out, "rb").read() == expected
        assert "loaded 60 rows" in capsys.readouterr().out
    pq.write_table(tables[0].drop_columns(["name"]), str(tmp_path / "d" / "part-009.parquet"))
    assert main(["load", str(tmp_path / "d"), "--out", str(tmp_path / "o.json")]) == 1
    err = capsys.readouterr().err
    assert "part-009.parquet' has no column 'name'" in err


# ------------------------------------------------------------------------------ not files

def special_files(folder) -> dict:
    """Things with a data file's name in a folder that are not regular files: {kind: path}."""
    import socket

    os.makedirs(folder, exist_ok=True)
    paths = {"FIFO": os.path.join(folder, "pipe.parquet"),
             "socket": os.path.join(folder, "sock.parquet"),
             "character device": os.path.join(folder, "null.parquet"),
             "symbolic link loop": os.path.join(folder, "loop-a.parquet")}
    os.mkfifo(paths["FIFO"])
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(paths["socket"])
    unix.close()  # the socket file stays
    os.symlink(os.devnull, paths["character device"])
    os.symlink("loop-b.parquet", paths["symbolic link loop"])
    os.symlink("loop-a.parquet", os.path.join(folder, "loop-b.parquet"))
    return paths


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["FIFO", "socket", "character device", "symbolic link loop"])
def test_a_fifo_socket_device_or_link_loop_is_refused_by_name_before_anything_is_sent(
        tmp_path, kind):
    """Found where a data file would be — in a directory, matched by a glob, or given as the
    path — a FIFO (never opened: that would wait for a writer, forever), a socket, a device
    file or a symbolic link loop raises ValueError naming it and saying what it is, before any
    file is read or any request made."""
    folder = tmp_path / "data"
    write_parts(str(folder), [5, 5])
    bad = special_files(str(tmp_path / "special"))[kind]
    target = str(folder / os.path.basename(bad))
    if kind == "symbolic link loop":  # a link into the loop
        os.symlink(bad, target)
    else:
        os.rename(bad, target)
    with LoopbackServer() as server:
        for path in (str(folder), str(folder / "*.parquet"), str(tmp_path / "**" / "*.parquet"),
                     target, [str(folder / "part-000.parquet"), target]):
            with pytest.raises(ValueError) as info:
                bulkwire.load_parquet(path, bulkwire.targets.ravendb(server.url, "db"))
            assert repr(target) in str(info.value) and kind in str(info.value), (path, info)
        assert not server.requests
    with pytest.raises(ValueError, match=kind):
        bulkwire.take(target, [0])


@pytest.mark.timeout(60)
def test_what_has_no_data_name_is_left_alone_and_links_to_files_and_folders_are_followed(
        tmp_path):
    """A FIFO or a socket without a data file's name is not part of the dataset (it is never
    opened); a symbolic link to a data file, or to a folder of them, is followed."""
    folder = tmp_path / "data"
    tables = write_parts(str(folder), [5, 6])
    os.mkfifo(folder / "pipe")
    elsewhere = tmp_path / "elsewhere"
    more = write_parts(str(elsewhere), [7])
    os.symlink(elsewhere, folder / "z-linked")
    other = write_parts(str(tmp_path / "single"), [0, 0, 4])
    os.symlink(tmp_path / "single" / "part-002.parquet", folder / "y.parquet")
    r = bulkwire.load_parquet(str(folder), bulkwire.targets.request_file(str(tmp_path / "o.json")))
    # in name order: part-000, part-001, y.parquet, then the linked folder's file
    assert open(r.target, "rb").read() == expected_body(tables + [other[2]] + more)


@pytest.mark.timeout(60)
def test_a_folder_reached_twice_is_refused_naming_both_paths(tmp_path):
    """A symbolic link back to a folder above it (a loop: a walk, or a ``**`` glob, would go
    round forever or read the same files again and again), or a second link to a folder of
    the dataset: ValueError naming the link and the folder."""
    folder = tmp_path / "data"
    write_parts(str(folder / "sub"), [3])
    os.symlink("../..", folder / "sub" / "up")
    os.symlink(".", folder / "sub" / "here")  # two loops: a ** glob would double per level
    for path in (str(folder), str(folder / "**" / "*.parquet")):
        with pytest.raises(ValueError, match=r"'.*(up|here)' is the folder '.*' again"):
            bulkwire.load_parquet(path, bulkwire.targets.request_file(str(tmp_path / "o.json")))
    os.unlink(folder / "sub" / "up")
    os.unlink(folder / "sub" / "here")
    os.symlink(folder / "sub", folder / "twice")
    with pytest.raises(ValueError, match=r"'.*twice' is the folder '.*sub' again"):
        bulkwire.load_parquet(str(folder), bulkwire.targets.request_file(str(tmp_path / "o.json")))


def test_globs_match_what_glob_matches(tmp_path):
    """Without links, a glob matches the files :func:`glob.glob` matches (``**`` included),
    in name order, each once."""
    import glob

    from bulkwire.load.datasets import _dataset_files

    for name in ("a/x.parquet", "a/b/y.parquet", "a/_u/z.parquet", "a/.h/h.parquet",
                 "a/.dot.parquet", "c/w.pq", "top.parquet"):
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        pq.write_table(part(0, 1), str(tmp_path / name))
    for pattern in ("*.parquet", "**/*.parquet", "**", "a/**/*.parquet", "*/*.parquet",
                    "a/.*", "?/*.p?", "[ab]/**/*", "**/b/*", "a/**/**/*.parquet"):
        full = str(tmp_path / pattern)
        want = sorted(dict.fromkeys(p for p in glob.glob(full, recursive=True)
                                    if not os.path.isdir(p)))
        assert _dataset_files(full) == want, pattern


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["FIFO", "loop"])
def test_cli_refuses_a_fifo_or_a_loop_with_exit_2(tmp_path, kind):
    """``bulkwire load`` on a dataset holding a FIFO or a symbolic link loop: exit 2 (the
    PATH given cannot be loaded) with the message naming it, no hang, nothing written."""
    import subprocess
    import sys

    folder = tmp_path / "data"
    write_parts(str(folder), [3])
    if kind == "FIFO":
        os.mkfifo(folder / "part-001.parquet")
    else:
        os.symlink(".", folder / "up")
    out = tmp_path / "o.json"
    done = subprocess.run([sys.executable, "-m", "bulkwire", "load", str(folder), "--out",
                           str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    name = "part-001.parquet' is a FIFO" if kind == "FIFO" else "up' is the folder"
    assert done.stderr.startswith("bulkwire: error: ") and name in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bad_row_taken_is_named_by_the_files_row_whatever_the_threads(tmp_path, threads):
    """Without encoding threads, a row error used to carry the position in the batch taken."""
    bad = pa.table({"id": pa.array([0, 1, None, 3], pa.int64())})
    src = str(tmp_path / "t.parquet")
    pq.write_table(bad, src)
    with pytest.raises(bulkwire.RowError) as info:
        bulkwire.load_parquet(src, bulkwire.targets.request_file(str(tmp_path / "x.json")),
                              take=[3, 2], threads=threads)
    assert (info.value.row, info.value.take_index, info.value.source) == (2, 1, src)
