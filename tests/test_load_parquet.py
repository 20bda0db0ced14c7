"""load_parquet and the ``bulkwire load`` command: Parquet/IPC files to a bulk insert body, a
file or a server. The batch encoder itself is tested in test_encode_batch.py, whose oracle
(the command store() writes for the row's dict) these tests share.
"""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire import _core  # noqa: E402
from test_encode_batch import META, fsl, oracle, table_with, vectors  # noqa: E402


# ------------------------------------------------------------------ load_parquet

def write(table, path, row_group_size=None):
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def parsed(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data, json.loads(data)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["fsl", "list"])
def test_load_file_round_trip(tmp_path, dtype, layout):
    rows, dim = 500, 16
    v = vectors(rows, dim, dtype, seed=3)
    t = pa.float32() if dtype == np.float32 else pa.float64()
    arr = fsl(v) if layout == "fsl" else pa.array(list(v), pa.list_(t))
    table = table_with(arr, rows)
    src = write(table, tmp_path / "src.parquet", row_group_size=150)
    assert pq.ParquetFile(src).metadata.num_row_groups == 4
    result = bulkwire.load_parquet(src, batch_rows=128)
    assert result.rows == rows and result.target == str(tmp_path / "src.bulk.json")
    raw, docs = parsed(result.target)
    for workers in (1, 3):  # the same body whatever the number of encoding threads
        other = bulkwire.load_parquet(src,
                                      bulkwire.targets.request_file(str(tmp_path / f"w{workers}.json"), buffer_size=5000),
                                      batch_rows=64, threads=workers)
        assert parsed(other.target)[0] == raw
    assert result.body_bytes == len(raw) == result.wire_bytes
    assert raw == b"[" + oracle(table, vector_column="emb", prefix="embeddings/") + b"]"
    assert [d["Id"] for d in docs] == [f"embeddings/{i}" for i in table.column("id").to_pylist()]
    got = np.array([d["Document"]["emb"] for d in docs])
    assert np.array_equal(got.astype(np.float32).view(np.uint32), v.astype(np.float32).view(np.uint32))
    if dtype == np.float64:
        assert np.array_equal(got, v)
    assert [d["Document"]["name"] for d in docs] == table.column("name").to_pylist()
    assert [d["Document"]["score"] for d in docs] == table.column("score").to_pylist()
    assert all(d["Document"]["@metadata"] == META for d in docs)


def test_load_gzip_take_ipc_and_options(tmp_path):
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=2500, dim=8, row_group_rows=1000)
    table = pq.read_table(src)
    r = bulkwire.load_parquet(src,
                              bulkwire.targets.request_file(compress=True, float32="shortest", collection="Vectors"))
    raw, docs = parsed(r.target)
    assert r.target.endswith("s.bulk.json.gz") and r.wire_bytes == os.path.getsize(r.target) < r.body_bytes
    assert len(docs) == 2500 and docs[-1]["Id"] == "vectors/2499"
    assert docs[0]["Document"]["@metadata"]["@collection"] == "Vectors"
    got = np.array([d["Document"]["emb"] for d in docs], dtype=np.float32)
    assert np.array_equal(got, table.column("emb").combine_chunks().flatten().to_numpy().reshape(-1, 8))
    # take: just those rows, in that order, from Parquet and from Arrow IPC
    ipc = str(tmp_path / "s.arrow")
    pyarrow.feather.write_feather(table, ipc, compression="uncompressed", chunksize=700)
    for source in (src, ipc):
        out = str(tmp_path / "take.json")
        r = bulkwire.load_parquet(source, bulkwire.targets.request_file(out, id_prefix=""),
                                  take=[2499, 3, 3, 1500], columns=[])
        assert [d["Id"] for d in parsed(out)[1]] == ["2499", "3", "3", "1500"]
        assert parsed(out)[1][0]["Document"] == {"@metadata": META}
    r = bulkwire.load_parquet(ipc, bulkwire.targets.request_file(str(tmp_path / "all.json")),
                              batch_rows=333)
    assert parsed(r.target)[0] == parsed(bulkwire.load_parquet(src,
                                                               bulkwire.targets.request_file(str(tmp_path / "p.json"))).target)[0]


def test_load_errors_leave_no_body(tmp_path):
    rows = [[0.5, 0.25]] * 700 + [[0.5]] + [[0.5, 0.25]] * 10
    src = write(pa.table({"id": list(range(711)), "v": pa.array(rows, pa.list_(pa.float32()))}),
                tmp_path / "bad.parquet", row_group_size=100)
    seen = []
    with pytest.raises(ValueError, match=r"column 'v', row 700: vector has 1 values, expected 2"):
        bulkwire.load_parquet(src, batch_rows=50, progress=lambda r, b: seen.append(r))
    assert seen[-1] == 700  # every batch before the bad one went out, none of its rows
    assert not os.path.exists(tmp_path / "bad.bulk.json")
    assert not os.path.exists(tmp_path / "bad.bulk.json.partial")
    with pytest.raises(ValueError, match=r"column 'v', row 700 \(take\[1\]\): vector has 1"):
        bulkwire.load_parquet(src, take=[3, 700])
    with pytest.raises(ValueError, match=r"id column 'key' is not a column of .*bad.parquet \(its columns: id, v\)"):
        bulkwire.load_parquet(src, bulkwire.targets.request_file(id_column="key"))
    with pytest.raises(TypeError, match=r"column 'id' cannot be the vector column: expected an Arrow "
                                        r"fixed_size_list, list or large_list of float32/float64"):
        bulkwire.load_parquet(src, vector_column="id")
    with pytest.raises(FileNotFoundError):
        bulkwire.load_parquet(tmp_path / "missing.parquet")
    with pytest.raises(IndexError, match=r"take\[0\] = 9999 is out of range"):
        bulkwire.load_parquet(src, take=[9999])


# ------------------------------------------------------------------ the command line

def run_cli(args, capsys):
    from bulkwire.cli import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_sample_and_load(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["sample", "s.parquet", "--rows", "300", "--dim", "4"], capsys)
    assert code == 0 and "wrote 300 rows x 4 float32 dims (seed 42) to s.parquet" in out
    code, out, err = run_cli(["load", "s.parquet", "--progress"], capsys)
    assert code == 0, err
    assert out.startswith("loaded 300 rows from s.parquet into s.bulk.json: ") and "rows/s" in out
    assert "300/300 rows" in err and "MB/s" in err
    assert len(json.load(open("s.bulk.json"))) == 300
    code, out, err = run_cli(["load", "s.parquet", "--gzip", "-q", "--out", "x.gz", "--take", "3,1"], capsys)
    assert code == 0 and err == "" and "(" in out
    assert [d["Id"] for d in json.loads(gzip.decompress(open("x.gz", "rb").read()))] == \
        ["embeddings/3", "embeddings/1"]


@pytest.mark.parametrize("args, code, message", [
    (["load", "missing.parquet"], 1, "bulkwire: error: no such file: 'missing.parquet'"),
    (["load", "s.parquet", "--id-column", "key"], 1, "id column 'key' is not a column of s.parquet"),
    (["load", "s.parquet", "--vector-column", "id"], 1, "column 'id' cannot be the vector column"),
    (["load", "s.parquet", "--columns", "id,nope"], 1, "column 'nope' is not a column"),
    (["load", "bad.parquet"], 1, "column 'v', row 2: null vector"),
    (["load", "s.parquet", "--take", "1,-2"], 1, "take[1] = -2 is negative"),
    (["load", "s.parquet", "--take", "1,x"], 1, "--take: take[1] = 'x' is not an integer"),
    (["load", "s.parquet", "--url", "http://127.0.0.1:9"], 2, "--url needs --database"),
    (["load", "s.parquet", "--batch-rows", "0"], 2, "argument --batch-rows: must be positive"),
    (["sample", "s2.parquet", "--dim", "0"], 2, "argument --dim: must be positive"),
    (["load", "s.parquet", "--columns", ",,,"], 2, "--columns ',,,': empty column name"),
    (["load", "s.parquet", "--columns", "emb,,id"], 2, "--columns 'emb,,id': empty column name"),
    (["load", "s.parquet", "--columns", "emb,"], 2, "--columns 'emb,': empty column name"),
    (["load", "s.parquet", "--columns", ""], 2, "--columns '': empty column name"),
    (["load", "blank.parquet"], 1, "column 'id', row 1: id is only whitespace"),
    (["load", "crafted.arrow"], 1, "crafted.arrow' is malformed: column 'name'"),
])
def test_cli_errors(tmp_path, capsys, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    bulkwire.sample_parquet("s.parquet", rows=10, dim=2)
    write(pa.table({"id": [1, 2, 3], "v": pa.array([[1.0], [2.0], None], pa.list_(pa.float32()))}),
          "bad.parquet")
    write(pa.table({"id": ["a", "\u3000 ", "c"]}), "blank.parquet")
    crafted_ipc("crafted.arrow")
    try:
        got, out, err = run_cli(args, capsys)
    except SystemExit as exc:  # argparse usage errors
        got, (out, err) = exc.code, capsys.readouterr()
    assert got == code
    assert message in err
    assert not os.path.exists("bad.bulk.json")


def test_python_m_bulkwire(tmp_path):
    import subprocess
    import sys

    # the child imports the same bulkwire as this process (installed, or the in-place build)
    package_parent = os.path.dirname(os.path.dirname(bulkwire.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "bulkwire", "load", str(tmp_path / "nope.parquet")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "no such file" in p.stderr



# ------------------------------------------------------------------ the bulk insert (bulk branch)

def test_bytes_equal_bulkwriter_store(tmp_path):
    """The body equals what BulkWriter.store() writes for the equivalent dicts."""
    v = vectors(30, 6)
    table = table_with(fsl(v), 30)
    src = write(table, tmp_path / "t.parquet", row_group_size=7)
    for float32 in ("widen",):
        out = str(tmp_path / "o.json")
        bulkwire.load_parquet(src, bulkwire.targets.request_file(out, float32=float32),
                              batch_rows=5)
        w = bulkwire.BulkWriter()
        for row, vec in zip(table.to_pylist(), v):
            doc = {k: row[k] for k in ("emb", "name", "score", "ok")}
            doc["emb"] = vec  # a float32 ndarray, as a user would hold it
            w.store(doc, id=f"embeddings/{row['id']}", metadata={"@collection": "Embeddings"})
        w.close()
        assert open(out, "rb").read() == b"".join(bytes(c) for c in w.pieces())


@pytest.mark.parametrize("buffer_size", [1 << 20, 4096])  # small: batches of several pieces
@pytest.mark.parametrize("compress", [False, True])
def test_load_into_loopback_server(tmp_path, compress, buffer_size):
    from bulkwire.testing import LoopbackServer

    rows, dim = 900, 16
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=rows, dim=dim, row_group_rows=400)
    table = pq.read_table(src)
    with LoopbackServer() as server:
        r = bulkwire.load_parquet(src,
                                  bulkwire.targets.ravendb(server.url, server.database, compress=compress, buffer_size=buffer_size),
                                  batch_rows=100)
        assert r.rows == rows and len(server.documents) == rows
        request = server.requests[-1]
        assert request.complete and request.error is None
        assert (request.headers.get("Content-Encoding") == "gzip") == compress
        assert bytes(request.body) == open(bulkwire.load_parquet(src,
                                                                 bulkwire.targets.request_file(str(tmp_path / "b.json"))).target,
                                           "rb").read()
        assert r.body_bytes == len(request.body)
        if compress:
            assert r.wire_bytes == sum(request.wire_chunks) < r.body_bytes
        got = np.array([server.documents[f"embeddings/{i}"]["emb"] for i in range(rows)], np.float32)
        want = table.column("emb").combine_chunks().flatten().to_numpy().reshape(rows, dim)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_server_failure_and_bad_rows(tmp_path, capsys):
    from bulkwire.testing import LoopbackServer

    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=800, dim=64)
    with LoopbackServer() as server:
        server.fail_after_bytes = 1 << 18
        with pytest.raises(bulkwire.BulkInsertError, match="Simulated failure on the server"):
            bulkwire.load_parquet(src,
                                  bulkwire.targets.ravendb(server.url, server.database, buffer_size=1 << 16),
                                  batch_rows=100)
        server.fail_after_bytes = None
        code, out, err = run_cli(["load", src, "--url", server.url, "--database", "db", "-q"], capsys)
        assert code == 0 and "into http://127.0.0.1" in out
        server.fail_after_bytes = 1 << 18
        code, out, err = run_cli(["load", src, "--url", server.url, "--database", "db", "-q"], capsys)
        assert code == 3 and "bulkwire: error: Simulated failure on the server" in err
        server.fail_after_bytes = None
        # a bad row: the operation is killed, nothing of the bad batch went out
        bad = write(pa.table({"id": list(range(250)),
                              "v": pa.array([[1.0, 2.0]] * 200 + [None] + [[1.0, 2.0]] * 49,
                                            pa.list_(pa.float32()))}), tmp_path / "bad.parquet")
        before = len(server.requests)
        ops_before = set(server.operations)
        with pytest.raises(ValueError, match="column 'v', row 200: null vector"):
            bulkwire.load_parquet(bad,
                                  bulkwire.targets.ravendb(server.url, "db", buffer_size=100),
                                  batch_rows=100)
        (op,) = set(server.operations) - ops_before
        assert op in server.killed and server.operations[op]["Status"] == "Canceled"
        import re

        # The POST may still be on its way to the server's handler when the kill lands; what
        # did arrive holds only batches before the bad one.
        for request in server.requests[before:]:
            assert request.op_id == op
            sent = [int(i) for i in re.findall(rb'"Id":"embeddings/(\d+)"', bytes(request.body))]
            assert max(sent, default=0) < 200
    code, out, err = run_cli(["load", src, "--url", "http://127.0.0.1:9", "--database", "db", "-q"], capsys)
    assert code == 3 and "cannot reach the server" in err


def test_unknown_database_is_a_server_error(tmp_path, capsys):
    """The server's refusal reaches the caller as the server's own ServerError: its status,
    its body, the server's URL in the message (not a plain BulkInsertError without them)."""
    from bulkwire.testing import LoopbackServer

    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=50, dim=4)
    with LoopbackServer() as server:
        with pytest.raises(bulkwire.ServerError) as caught:
            bulkwire.load_parquet(src, bulkwire.targets.ravendb(server.url, "nope"))
        error = caught.value
        assert error.status == 404 and b"nope" in error.body
        assert f"HTTP 404 from GET {server.url}/databases/nope/" in str(error)
        assert isinstance(error, bulkwire.BulkwireError) and isinstance(error, RuntimeError)
        code, out, err = run_cli(["load", src, "--url", server.url, "--database", "nope", "-q"], capsys)
        assert code == 3 and f"HTTP 404 from GET {server.url}/databases/nope/" in err


@pytest.mark.parametrize("status", [400, 403, 500, 503])
def test_server_error_status_reaches_load_caller(tmp_path, status):
    """Whatever error status the server answers, load_parquet raises its ServerError with
    that status and the server's message and URL."""
    from bulkwire.testing import LoopbackServer

    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=20, dim=2)
    with LoopbackServer() as server:
        server.down_status = status
        with pytest.raises(bulkwire.ServerError) as caught:
            bulkwire.load_parquet(src, bulkwire.targets.ravendb(server.url, "db"))
    error = caught.value
    assert error.status == status
    assert b"is failing" in error.body and server.url in str(error)


def test_interrupted_load_aborts_the_operation(tmp_path):
    """Ctrl-C (here from the progress callback) during a load into a server kills the
    operation and propagates; no rows at all make no request."""
    from bulkwire.testing import LoopbackServer

    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=600, dim=8)

    def progress(rows, body):
        if rows >= 200:
            raise KeyboardInterrupt

    with LoopbackServer() as server:
        with pytest.raises(KeyboardInterrupt):
            bulkwire.load_parquet(src, bulkwire.targets.ravendb(server.url, "db"), batch_rows=100,
                                  progress=progress)
        # The kill is sent before the sender is cancelled; the POST itself may or may not have
        # reached the server's handler by then, so only the operation is certain to be seen.
        assert len(server.killed) == 1
        (op,) = server.killed
        assert server.operations[op]["Status"] == "Canceled"
        assert all(r.op_id == op for r in server.requests)
        empty = write(pa.table({"id": pa.array([], pa.int64())}), tmp_path / "empty.parquet")
        r = bulkwire.load_parquet(empty, bulkwire.targets.ravendb(server.url, "db"))
        assert r.rows == 0 and set(server.operations) == {op}
        assert all(r.op_id == op for r in server.requests)


def test_memory_is_bounded_by_a_row_group(tmp_path):
    """Arrow memory during a load stays near one row group, not the file (pre_buffer off)."""
    rows, dim, group = 3000, 32, 100
    src = bulkwire.sample_parquet(tmp_path / "m.parquet", rows=rows, dim=dim, row_group_rows=group)
    group_bytes = group * dim * 4
    base = pa.total_allocated_bytes()
    peaks = []
    bulkwire.load_parquet(src, batch_rows=50, progress=lambda r, b: peaks.append(pa.total_allocated_bytes()))
    assert len(peaks) == rows // 50
    # decoding buffers take a few row groups' worth; pre-buffering took the whole file
    assert max(peaks) - base < 8 * group_bytes < rows * dim * 4 / 3


# ------------------------------------------------------------------ hostile files

def crafted_ipc(path, last_offset=60):
    """A real Arrow IPC file whose string column 'name' has its last offset patched past the
    end of its data buffer (3 rows, 6 bytes of text), as a crafted or corrupt file would."""
    import struct

    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["x", "yy", "zzz"]),
                      "other": pa.array(["aaaaaaaa", "bbbbbbbb", "cccccccc"])})
    pyarrow.feather.write_feather(table, str(path), compression="uncompressed")
    data = bytearray(open(path, "rb").read())
    pattern = struct.pack("<4i", 0, 1, 3, 6)
    at = data.find(pattern)
    assert at > 0 and data.find(pattern, at + 1) < 0
    data[at + 12:at + 16] = struct.pack("<i", last_offset)
    open(path, "wb").write(bytes(data))
    return str(path)


def test_the_batch_check_raises_malformed_file_error(tmp_path):
    """The check of a record batch read from a file (its buffers against its offsets) raises
    what TableFile raises for a malformed file: MalformedFileError, a ValueError naming the
    file (path) and the column."""
    from bulkwire.parquet import _check_batch

    src = crafted_ipc(tmp_path / "crafted.arrow")
    batch = pyarrow.ipc.open_file(pa.memory_map(src)).get_batch(0)  # pyarrow reads it as is
    with pytest.raises(bulkwire.MalformedFileError, match=r"crafted\.arrow' is malformed: "
                                                          r"column 'name': ") as caught:
        _check_batch(batch, src)
    assert caught.value.path == src and isinstance(caught.value, ValueError)
    _check_batch(pyarrow.ipc.open_file(crafted_ipc(tmp_path / "ok.arrow", last_offset=6))
                 .get_batch(0), src)  # a sound batch passes


def test_crafted_ipc_file_is_refused_naming_file_and_column(tmp_path):
    src = crafted_ipc(tmp_path / "crafted.arrow")
    # pyarrow itself reads the file without complaint: the check is ours
    table = pyarrow.ipc.open_file(pa.memory_map(src)).read_all()
    assert table.num_rows == 3
    server = bulkwire.targets.ravendb("http://127.0.0.1:9", "db")
    for target, kwargs in ((None, {}), (None, {"take": [2, 0]}), (None, {"columns": ["name"]}),
                           (server, {})):
        # the batch check raises what TableFile raises: MalformedFileError (a ValueError)
        with pytest.raises(bulkwire.MalformedFileError,
                           match=r"crafted\.arrow' is malformed: column 'name': "
                                 r".*(?i:offset).*(larger than|out of bounds)") as caught:
            bulkwire.load_parquet(src, target, **kwargs)
        assert caught.value.path == src and isinstance(caught.value, ValueError)
    assert not os.path.exists(tmp_path / "crafted.bulk.json")
    with pytest.raises(bulkwire.MalformedFileError, match=r"crafted\.arrow' is malformed: column 'name'"):
        bulkwire.take(src, [0])
    # an unpatched file loads
    ok = crafted_ipc(tmp_path / "ok.arrow", last_offset=6)
    r = bulkwire.load_parquet(ok)
    assert [d["Document"]["name"] for d in parsed(r.target)[1]] == ["x", "yy", "zzz"]


def test_blank_string_ids_are_refused_like_store(tmp_path):
    from bulkwire.conventions import check_id

    for blank in [" ", "\t\n", "\u3000", "\x1c\x85", "a|"]:
        src = write(pa.table({"id": ["ok", blank]}), tmp_path / "b.parquet")
        with pytest.raises(ValueError) as info:
            bulkwire.load_parquet(src)
        assert "column 'id', row 1:" in str(info.value)
        with pytest.raises(ValueError):
            check_id(blank)
        with pytest.raises(ValueError):
            bulkwire.BulkWriter().store({"x": 1}, id=blank)
    # a prefix that is not blank makes a blank string id a valid one, for both
    r = bulkwire.load_parquet(write(pa.table({"id": ["ok", " "]}), tmp_path / "c.parquet"),
                              bulkwire.targets.request_file(id_prefix="p/"))
    assert [d["Id"] for d in parsed(r.target)[1]] == ["p/ok", "p/ "]
    assert check_id("p/ ") == "p/ "


def store_body(rows, ids, **store_kwargs) -> bytes:
    w = bulkwire.BulkWriter()
    for row, doc_id in zip(rows, ids):
        w.store(row, id=doc_id, **store_kwargs)
    w.close()
    return b"".join(bytes(c) for c in w.pieces())


def test_id_and_metadata_columns_follow_store(tmp_path):
    """A column named Id is left out of the document, as store leaves a dict's "Id" out; a
    column named @metadata cannot be a field (store wants a mapping there); the user's
    @collection is kept, as store keeps it. Body bytes equal BulkWriter.store's."""
    table = pa.table({"id": [1, 2], "Id": ["x/1", "x/2"], "name": ["a", "b"]})
    src = write(table, tmp_path / "t.parquet")
    out = str(tmp_path / "o.json")
    bulkwire.load_parquet(src, bulkwire.targets.request_file(out))
    body = open(out, "rb").read()
    rows = [{k: v for k, v in row.items() if k != "id"} for row in table.to_pylist()]
    assert "Id" in rows[0]
    assert body == store_body(rows, ["embeddings/1", "embeddings/2"],
                              metadata={"@collection": "Embeddings"})
    docs = json.loads(body)
    assert [list(d["Document"]) for d in docs] == [["name", "@metadata"]] * 2
    assert body.count(b'"Id"') == 2  # the commands' own
    with pytest.raises(ValueError, match=r"column 'Id' of .*t\.parquet cannot be a document field"):
        bulkwire.load_parquet(src, bulkwire.targets.request_file(out), columns=["name", "Id"])
    # Id as the id column: then it is the id
    r = bulkwire.load_parquet(src, bulkwire.targets.request_file(out, id_column="Id"))
    assert [d["Id"] for d in parsed(r.target)[1]] == ["x/1", "x/2"]
    assert [d["Document"]["id"] for d in parsed(r.target)[1]] == [1, 2]

    meta = write(pa.table({"id": [1], "@metadata": ['{"a": 1}'], "name": ["a"]}), tmp_path / "m.parquet")
    with pytest.raises(TypeError, match=r"column '@metadata' of .*m\.parquet cannot be a document field"):
        bulkwire.load_parquet(meta, bulkwire.targets.request_file(out))
    with pytest.raises(TypeError, match=r"column '@metadata'"):
        bulkwire.load_parquet(meta, bulkwire.targets.request_file(out), columns=["@metadata"])
    with pytest.raises(TypeError, match="@metadata must be a mapping"):
        bulkwire.BulkWriter().store({"@metadata": '{"a": 1}', "name": "a"}, id="e/1")
    bulkwire.load_parquet(meta, bulkwire.targets.request_file(out), columns=["name"])
    assert json.loads(open(out, "rb").read())[0]["Document"] == {"name": "a", "@metadata": META}

    # metadata=: merged as store merges it (collection "dicts": store's default for a dict),
    # the user's @collection and Raven-Python-Type kept
    for user_md in ({"@collection": "Mine", "k": 1}, {"Raven-Python-Type": "app.Row"}, {"k": [1, 2]}):
        bulkwire.load_parquet(src,
                              bulkwire.targets.request_file(out, metadata=user_md, collection="dicts"),
                              columns=["name"])
        rows = [{"name": n} for n in ("a", "b")]
        assert open(out, "rb").read() == store_body(rows, ["dicts/1", "dicts/2"], metadata=user_md)
    bulkwire.load_parquet(src,
                          bulkwire.targets.request_file(out, metadata={"@collection": "Mine"}, python_type=None),
                          columns=["name"])
    assert json.loads(open(out, "rb").read())[0]["Document"]["@metadata"] == {"@collection": "Mine"}


def test_empty_column_names_are_refused(tmp_path):
    src = write(pa.table({"id": [1], "a": [2]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"columns\[1\] is an empty column name"):
        bulkwire.load_parquet(src, columns=["a", ""])
    with pytest.raises(TypeError, match=r"columns\[0\] must be a str, not int"):
        bulkwire.load_parquet(src, columns=[3])


def test_the_official_client_writes_the_same_documents():
    """The official client's own conversion of a dict entity with an "Id" member and a
    user-given @collection: the body leaves Id out and keeps the user's @collection, as
    bulkwire's conventions do (its dict entity's own @metadata it replaces; bulkwire merges)."""
    pytest.importorskip("ravendb")
    from ravendb.documents.conventions import DocumentConventions
    from ravendb.documents.session.document_info import DocumentInfo
    from ravendb.documents.session.entity_to_json import EntityToJsonStatic
    from ravendb.json.metadata_as_dictionary import MetadataAsDictionary

    conventions = DocumentConventions()

    def official(entity, metadata):
        md = MetadataAsDictionary(dict(metadata))
        # BulkInsertOperation._fill_metadata_if_needed: set where the user did not
        md.setdefault("@collection", conventions.get_collection_name(entity))
        md.setdefault("Raven-Python-Type", conventions.get_python_class_name(entity.__class__))
        doc = EntityToJsonStatic.convert_entity_to_json(entity, conventions,
                                                        DocumentInfo(metadata_instance=md), True)
        return json.dumps(doc).encode()

    for entity, metadata in (({"Id": "x/1", "name": "a", "n": 2}, {}),
                             ({"name": "a", "Id": "x/1"}, {"@collection": "Mine", "k": "v"}),
                             ({"name": "a"}, {"Raven-Python-Type": "app.Row"})):
        body = store_body([entity], ["x/1"], metadata=metadata)
        command = json.loads(body)[0]
        assert bulkwire.dumps(command["Document"]) == official(entity, metadata)


# ------------------------------------------------------------------ one rule per place

def test_row_errors_carry_column_and_row_as_attributes(tmp_path):
    from bulkwire.errors import RowError

    table = pa.table({"id": pa.array([1, 2, None, 4]), "v": fsl(vectors(4, 2))})
    with pytest.raises(RowError) as info:
        _core.encode_batch(table, "id", ["v"], vector_column="v", row_base=10)
    assert (info.value.column, info.value.row, info.value.reason) == ("id", 12, "null id")
    assert info.value.take_index is None and isinstance(info.value, ValueError)
    assert str(info.value) == "column 'id', row 12: null id"
    # with take, the file's row and the position in take, from the attributes
    src = write(table, tmp_path / "t.parquet")
    with pytest.raises(RowError) as info:
        bulkwire.load_parquet(src, take=[3, 0, 2])
    assert (info.value.column, info.value.row, info.value.take_index) == ("id", 2, 2)
    assert info.value.source == src  # a dataset's rows name their file
    assert str(info.value) == f"{src!r}: column 'id', row 2 (take[2]): null id"


def test_column_types_are_judged_by_the_encoder_before_any_row(tmp_path):
    """The encoder alone judges column types; the load asks it before reading a row, so a
    column it cannot write is refused even when the file has no rows, and no file is left."""
    empty = pa.table({"id": pa.array([], pa.int64()),
                      "t": pa.array([], pa.timestamp("s", "Europe/Paris"))})
    src = write(empty, tmp_path / "e.parquet")
    with pytest.raises(TypeError, match=r"column 't' has timestamps in time zone 'Europe/Paris'"):
        bulkwire.load_parquet(src)
    assert not os.path.exists(tmp_path / "e.bulk.json")
    assert not os.path.exists(tmp_path / "e.bulk.json.partial")
    dates = write(pa.table({"id": [1], "d": pa.array([1], pa.date32())}), tmp_path / "d.parquet")
    with pytest.raises(TypeError, match=r"column 'd' has Arrow type date32\[day\], which cannot be a document field"):
        bulkwire.load_parquet(dates)
    floats = write(pa.table({"id": [1.5], "x": [1]}), tmp_path / "f.parquet")
    with pytest.raises(TypeError, match=r"id column 'id' must hold integers or strings"):
        bulkwire.load_parquet(floats)
    # the vector column found automatically is one the encoder takes as a vector
    two = write(pa.table({"id": [1], "a": pa.array([[1.0]], pa.large_list(pa.float32())),
                          "b": pa.array([[1]], pa.list_(pa.int64()))}), tmp_path / "two.parquet")
    with pytest.raises(TypeError, match=r"column 'b' has Arrow type list<int64>"):
        bulkwire.load_parquet(two)  # a is the vector; b, a list of integers, cannot be a field
    r = bulkwire.load_parquet(two, columns=["a"])
    assert parsed(r.target)[1][0]["Document"]["a"] == [1.0]


def test_load_hands_the_encoders_buffers_over_unchecked(tmp_path, monkeypatch):
    """The commands C just wrote go to the writer as they are: store_encoded's check of
    user-given bytes is not run on them."""
    import bulkwire._bulk_writer
    import bulkwire.bulk

    def refused(*args):
        raise AssertionError("the load re-checked the encoder's bytes")

    # the check's own module (BulkWriter's) and the insert's
    monkeypatch.setattr(bulkwire._bulk_writer, "_encoded_pieces", refused)
    monkeypatch.setattr(bulkwire.bulk, "_encoded_pieces", refused)
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=300, dim=4)
    r = bulkwire.load_parquet(src, bulkwire.targets.request_file(buffer_size=1024), batch_rows=64)
    assert r.rows == 300 and len(parsed(r.target)[1]) == 300


@pytest.mark.parametrize("compress", [False, True])
def test_a_file_that_cannot_be_written_raises_its_own_error(tmp_path, monkeypatch, compress):
    import errno

    import bulkwire.load.ravendb_target

    class Full:
        def __init__(self, f):
            self.f, self.written = f, 0

        def write(self, data):
            if self.written > 4000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return self.f.write(data)

        def close(self):
            self.f.close()

    monkeypatch.setattr(bulkwire.load.ravendb_target, "open", lambda path, mode: Full(open(path, mode)),
                        raising=False)
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=2000, dim=16)
    with pytest.raises(OSError, match="No space left on device"):
        bulkwire.load_parquet(src,
                              bulkwire.targets.request_file(buffer_size=1024, compress=compress),
                              batch_rows=100)
    assert os.listdir(tmp_path) == ["s.parquet"]


def test_a_load_does_not_import_pandas(tmp_path):
    """pandas costs a load 0.3 s and 45 MB; nothing on the load path needs it."""
    import subprocess
    import sys

    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=10, dim=4)
    package_parent = os.path.dirname(os.path.dirname(bulkwire.__file__))
    code = ("import sys, bulkwire; bulkwire.load_parquet(sys.argv[1]); "
            "assert 'pandas' not in sys.modules, 'pandas was imported'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_parent, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code, src], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("tls", [{"certificate": "client.pem"}, {"ca": "ca.pem"},
                                 {"certificate": "client.pem", "ca": False}])
def test_tls_arguments_without_url_are_refused_before_the_source_is_read(tls, tmp_path):
    """The former spelling's certificate/ca name a server's TLS: without url nothing is read
    or written, and the error names them (the source does not even exist), after the
    warning that names the new spelling."""
    missing = tmp_path / "not-there.parquet"
    with pytest.warns(DeprecationWarning, match=r"load_parquet\((certificate|ca)=\.\.\.\) is "
                                                r"deprecated: use .*targets\.request_file"), \
            pytest.raises(ValueError, match=f"^{', '.join(tls)} need url"):
        bulkwire.load_parquet(missing, **tls)
    assert list(tmp_path.iterdir()) == []
