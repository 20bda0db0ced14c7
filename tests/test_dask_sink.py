"""bulkwire.dask.to_bulk_insert on a real Dask cluster: a ``LocalCluster`` with 2 worker
processes (1 thread each) sending to the loopback server in this process. Every row must
arrive exactly once, with the bytes bulkwire's own single-process ``load_parquet`` writes for
it. Also the mechanism underneath (``_arrow_sink.load_arrow``: one request per piece of a
table, whatever the split) against the same reference, with hypothesis.

Dask is a test dependency (the ``test`` extra): without it these tests fail, not skip.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

# the dask extra (in test-all, not in the light test extra): a skip naming it without
pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
Client, LocalCluster = distributed.Client, distributed.LocalCluster

import bulkwire
import bulkwire.dask
from bulkwire import _arrow_sink, _extras
from bulkwire.errors import BulkInsertError, RowError
from bulkwire.testing import LoopbackServer
from sink_oracle import assert_exactly_once, make_table, received_commands, reference_commands

from examples_budget import EXAMPLES as _EXAMPLES  # noqa: E402

EXAMPLES = max(10, _EXAMPLES // 2)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


@pytest.fixture(scope="module")
def client():
    """2 worker processes that import this bulkwire (the checkout's, when run from it)."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, previous) if p)
    try:
        with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                          dashboard_address=None, memory_limit="1GiB") as cluster, \
                Client(cluster) as dask_client:
            files = set(dask_client.run(lambda: __import__("bulkwire").__file__).values())
            assert files == {bulkwire.__file__}, files
            yield dask_client
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


@pytest.fixture()
def server():
    with LoopbackServer() as srv:
        yield srv
        assert not srv.unexpected_errors, "\n".join(srv.unexpected_errors)


def arrow_backed(table: pa.Table, npartitions: int):
    """A Dask DataFrame of ``table`` with Arrow-backed columns (what dtype_backend="pyarrow" gives)."""
    return dd.from_pandas(table.to_pandas(types_mapper=pd.ArrowDtype), npartitions=npartitions,
                          sort=False)


def test_every_row_once_with_the_reference_bytes(client, server, tmp_path):
    table = make_table(3000, 8)
    ddf = arrow_backed(table, 4)
    assert ddf.npartitions == 4
    result = bulkwire.dask.to_target(
        ddf, bulkwire.targets.ravendb(server.url, server.database, collection="Points"))
    assert result.rows == 3000
    assert len(server.requests) == 4  # one request per partition
    assert result.body_bytes == sum(r.body_bytes for r in server.requests)
    assert result.wire_bytes == result.body_bytes
    # the work was done on the workers: each ran partitions, and the client none
    assert len(client.run(lambda: 0)) == 2
    assert_exactly_once(received_commands(server),
                        reference_commands(table, tmp_path, collection="Points"))


def test_read_parquet_pyarrow_backend_and_options(client, server, tmp_path):
    """A Parquet directory read with dtype_backend="pyarrow", gzip on the wire, string ids
    with a prefix, chosen columns and float32="shortest": the same bytes as load_parquet with
    the same options."""
    table = make_table(2000, 5, seed=11)
    table = table.set_column(0, "id", pa.array([f"k{i}" for i in range(table.num_rows)]))
    folder = tmp_path / "parts"
    folder.mkdir()
    for n, start in enumerate(range(0, 2000, 700)):
        pq.write_table(table.slice(start, 700), folder / f"part-{n}.parquet")
    ddf = dd.read_parquet(str(folder), dtype_backend="pyarrow")
    assert ddf.npartitions == 3
    document = dict(collection="Points", id_prefix="points/", float32="shortest",
                    metadata={"Source": "dask"})
    options = dict(document, columns=["name", "emb"])
    result = bulkwire.dask.to_target(
        ddf, bulkwire.targets.ravendb(server.url, server.database, compress=True, **document),
        batch_rows=128, columns=["name", "emb"])
    assert result.rows == 2000 and result.wire_bytes < result.body_bytes
    assert len(server.requests) == 3
    assert all(r.headers.get("Content-Encoding") == "gzip" for r in server.requests)
    assert_exactly_once(received_commands(server), reference_commands(table, tmp_path, **options))


def test_arrow_columns_reach_the_encoder_as_arrow(monkeypatch):
    """A partition of Arrow-backed columns reaches the encoder with its Arrow types: the
    fixed_size_list vector stays a fixed_size_list of float32 (not an object column of
    arrays), strings stay strings, the index is not a column."""
    table = make_table(50, 3)
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    frame.index = frame.index + 1000  # a partition's index: not a field
    seen = []
    monkeypatch.setattr(bulkwire.dask, "load_arrow",
                        lambda data, config, source, task=None: seen.append((data, source)) or
                        _arrow_sink.LoadResult(len(data), 1, 1, 0.0, source, "", False))
    config = _arrow_sink.SinkConfig("http://127.0.0.1:1", "db")
    stats = bulkwire.dask._load_partition(frame, config, partition_info={"number": 5})
    (data, source), = seen
    assert data.schema == table.schema
    assert data.equals(table)
    assert source == "partition 5 of the Dask DataFrame"
    assert stats.rows.tolist() == [50]


def test_a_failing_partition_raises(client, server):
    """A null id in one partition: the call raises that partition's RowError (pickled back
    from the worker, naming the column, row and partition), never a result."""
    table = make_table(1200, 4)
    ids = table.column("id").to_pylist()
    ids[1000] = None  # in the last of 4 partitions (rows 900..1199): its row 100
    table = table.set_column(0, "id", pa.array(ids, pa.int64()))
    with pytest.raises(RowError) as caught:
        bulkwire.dask.to_target(arrow_backed(table, 4),
                                bulkwire.targets.ravendb(server.url, server.database))
    assert caught.value.column == "id" and caught.value.row == 100
    assert "in partition 3 of the Dask DataFrame" in getattr(caught.value, "__notes__", [])


def test_a_server_error_raises(client, server):
    server.fail_after_bytes = 1
    with pytest.raises(BulkInsertError, match="Simulated failure"):
        bulkwire.dask.to_target(arrow_backed(make_table(400, 4), 2),
                                bulkwire.targets.ravendb(server.url, server.database))
    assert server.requests and all(r.status == 500 for r in server.requests)


def test_ids_come_from_the_id_column(client, server):
    """Split differently (as a retried or rebalanced run may be), the same rows make the same
    PUTs: ids and bytes depend on the row, not on its partition or position."""
    table = make_table(900, 4)
    bulkwire.dask.to_target(arrow_backed(table, 3),
                            bulkwire.targets.ravendb(server.url, server.database))
    first = sorted(received_commands(server))
    server.requests.clear()
    shuffled = table.take(pa.array(list(range(899, -1, -1))))
    bulkwire.dask.to_target(arrow_backed(shuffled, 5),
                            bulkwire.targets.ravendb(server.url, server.database))
    assert len(server.requests) == 5
    assert sorted(received_commands(server)) == first


def test_empty_partitions_make_no_request(client, server, tmp_path):
    table = make_table(600, 4)
    ddf = arrow_backed(table, 4)
    kept = ddf[ddf["id"] < 150]  # rows only in the first partition
    result = bulkwire.dask.to_target(kept, bulkwire.targets.ravendb(server.url, server.database))
    assert result.rows == 150 and len(server.requests) == 1
    assert_exactly_once(received_commands(server),
                        reference_commands(table.slice(0, 150), tmp_path))


def test_arguments_are_checked_before_any_task(server):
    ddf = arrow_backed(make_table(10, 2), 2)
    # (error, its message, the target's options, to_target's options)
    for error, message, target_options, options in [
            (ValueError, "id column 'key' is not a column of the Dask DataFrame",
             {"id_column": "key"}, {}),
            (ValueError, "vector column 'v'", {}, {"vector_column": "v"}),
            (ValueError, "compress must be", {"compress": "lz4"}, {}),
            (ValueError, "float32 must be", {"float32": "round"}, {}),
            (TypeError, "columns must be a sequence", {}, {"columns": "name"})]:
        with pytest.raises(error, match=message):
            bulkwire.dask.to_target(
                ddf, bulkwire.targets.ravendb(server.url, server.database, **target_options),
                **options)
    with pytest.raises(TypeError, match="ddf must be a dask.dataframe.DataFrame, not DataFrame"):
        bulkwire.dask.to_target(pd.DataFrame({"id": [1]}),
                                bulkwire.targets.ravendb(server.url, server.database))
    assert server.requests == []


def test_a_task_names_itself_for_a_column_its_rows_lack_whatever_the_target(server):
    """The check a task runs before its session opens (``_arrow_sink.load_arrow``, the
    code of a Dask partition and of a Ray write task) judges a target given as a value as
    one given by its URL: a column the arguments name that the rows lack raises naming
    the column and the task, in the message itself; a CQL table asks for no id column."""
    table = make_table(10, 2)
    described = _arrow_sink.SinkConfig(
        described=bulkwire.targets.ravendb(server.url, server.database, id_column="key"))
    with pytest.raises(ValueError, match=r"^id column 'key' is not a column of write task 3 "
                                         r"\(its columns: id, name, "):
        _arrow_sink.load_arrow(table, described, source="write task 3")
    vector = _arrow_sink.SinkConfig(options=bulkwire.LoadOptions(vector_column="v"),
                                    described=bulkwire.targets.ravendb(server.url,
                                                                       server.database))
    with pytest.raises(ValueError, match=r"^vector column 'v' is not a column of partition 2"):
        _arrow_sink.load_arrow(table, vector, source="partition 2")
    assert server.requests == []
    table_of = _arrow_sink.SinkConfig(options=bulkwire.LoadOptions(columns=["id", "nope"]),
                                      described=bulkwire.targets.cql("127.0.0.1:1", "ks", "t"))
    with pytest.raises(ValueError, match=r"^column 'nope' is not a column of write task 4"):
        _arrow_sink.load_arrow(table, table_of, source="write task 4")
    cql = _arrow_sink.SinkConfig(described=bulkwire.targets.cql("127.0.0.1:1", "ks", "t"))
    cql.check_columns(["k", "v"], "rows without an id")  # no id column asked for


@settings(max_examples=EXAMPLES, deadline=None)
@given(rows=st.integers(0, 300), dim=st.integers(1, 9), cuts=st.lists(st.integers(0, 300), max_size=6),
       seed=st.integers(0, 2**32 - 1), batch_rows=st.one_of(st.none(), st.integers(1, 64)))
def test_any_split_sends_the_reference_bytes(tmp_path_factory, rows, dim, cuts, seed, batch_rows):
    """The mechanism both sinks share: a table cut into pieces anywhere, each piece one
    request (as tables or batch iterators), gives every row once with load_parquet's bytes."""
    table = make_table(rows, dim, seed=seed)
    edges = sorted({0, rows, *(min(c, rows) for c in cuts)})
    pieces = [table.slice(a, b - a) for a, b in zip(edges, edges[1:])]
    reference = reference_commands(table, tmp_path_factory.mktemp("ref")) if rows else {}
    with LoopbackServer() as srv:
        config = _arrow_sink.SinkConfig(srv.url, srv.database,
                                        bulkwire.LoadOptions(batch_rows=batch_rows))
        for n, piece in enumerate(pieces):
            data = piece if n % 2 else iter(piece.to_batches(max_chunksize=7))
            result = _arrow_sink.load_arrow(data, config, source=f"piece {n}")
            assert result.rows == piece.num_rows
        assert len(srv.requests) == sum(1 for p in pieces if p.num_rows)
        if rows:
            assert_exactly_once(received_commands(srv), reference)
        else:
            assert srv.requests == []


def test_row_error_survives_pickling():
    error = RowError("v", 700, "null vector", take_index=1)
    error.__notes__ = ["in partition 2"]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is RowError and str(copy) == str(error)
    assert (copy.column, copy.row, copy.reason, copy.take_index, copy.__notes__) == \
        ("v", 700, "null vector", 1, ["in partition 2"])


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": PACKAGE_PARENT, **env})


def test_imports_are_lazy():
    done = run_python("import sys, bulkwire, bulkwire.dask, bulkwire.ray\n"
                      "print(sorted(m for m in ('dask', 'distributed', 'ray', 'pandas') if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_missing_dask_names_the_extra():
    done = run_python("import sys; sys.modules['dask'] = None\n"
                      "import bulkwire.dask\n"
                      "try:\n    bulkwire.dask.to_target(None, "
                      "bulkwire.targets.ravendb('http://x', 'db'))\n"
                      "except ImportError as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(_extras.missing_extra("Dask support", "dask", "dask"))


def test_bench_engines_runs():
    """The benchmark docs/performance.md quotes still runs (tiny, Dask only; nothing timed):
    every contender loads every row, and the ratios are printed."""
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    done = subprocess.run([sys.executable, os.path.join(bench, "bench_engines.py"), "--rows", "3000",
                           "--dim", "4", "--parts", "3", "--rounds", "1", "--engines", "dask"],
                          cwd=bench, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": PACKAGE_PARENT})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("commit ") for line in lines)
    summary = [line.split()[0] for line in lines[lines.index(next(l for l in lines if l.startswith("median"))) + 1:]]
    assert summary == ["load_parquet", "dask", "dask"]  # dask, then "dask no-op"
    assert "x load_parquet" in lines[-1]


def test_a_retried_partition_repeats_the_same_puts(client, server, tmp_path):
    """A partition whose request the server fails, retried by Dask (compute retries), sends
    the same PUTs again: the failed body is the start of the retried one, and every row is
    stored once with the reference bytes."""
    from sink_oracle import assert_retries_repeat, fail_first_requests

    table = make_table(1200, 4)
    watcher = fail_first_requests(server)
    result = bulkwire.dask.to_target(arrow_backed(table, 4),
                                     bulkwire.targets.ravendb(server.url, server.database),
                                     compute_kwargs={"retries": 3})
    watcher.join()
    assert result.rows == 1200
    assert_retries_repeat(server, reference_commands(table, tmp_path))


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_local_schedulers(server, tmp_path, scheduler):
    """Without a cluster: Dask's thread pool runs several partitions' requests at once in this
    process (each its own bulk insert), or one after another; the same documents either way."""
    table = make_table(1000, 4, seed=3)
    result = bulkwire.dask.to_target(arrow_backed(table, 5),
                                     bulkwire.targets.ravendb(server.url, server.database),
                                     compute_kwargs={"scheduler": scheduler})
    assert result.rows == 1000 and len(server.requests) == 5
    assert_exactly_once(received_commands(server), reference_commands(table, tmp_path))


# ------------------------------------------------------------------------------ killed workers

def worker_pids(client) -> set:
    return set(client.run(os.getpid).values())


def answered_ids(server) -> set:
    """The ids of the commands in the requests the server answered 2xx."""
    from sink_oracle import raw_commands

    return {i for r in server.requests if r.succeeded for i, _ in raw_commands(bytes(r.body))}


def partition_ids(ddf) -> list[set]:
    """Each partition's document ids (the rows of make_table are ids 0..n-1, in order)."""
    sizes = ddf.map_partitions(len).compute(scheduler="sync").tolist()
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [{f"embeddings/{row}" for row in range(start, start + size)}
            for start, size in zip(starts, sizes)]


@pytest.mark.timeout(180)
def test_a_worker_killed_mid_partition_is_run_again_and_only_then_reported(client, server,
                                                                            tmp_path):
    """kill -9 of a worker process in the middle of its partition's request (the server
    stalled, so the answer cannot come before the kill): Dask runs the partition again, and
    the call returns only once every partition's request was answered 2xx; the result
    counts each row once, and every row is in an answered request with the reference
    bytes."""
    from sink_oracle import kill_a_sender, raw_commands

    table = make_table(2000, 4)
    reference = reference_commands(table, tmp_path)
    server.stall(after_bytes=1)
    killer = kill_a_sender(server, among=worker_pids(client))
    try:
        result = bulkwire.dask.to_target(arrow_backed(table, 4),
                                         bulkwire.targets.ravendb(server.url, server.database))
    finally:
        killer.join()
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed one
    # the killed worker's partition was sent again (its first request may still have been
    # read whole from the kernel's buffers: an answer no one was there to receive)
    assert killer.killed and len(server.requests) >= 5
    assert result.rows == 2000
    assert answered_ids(server) == set(reference)
    for request in server.requests:
        if request.succeeded:
            assert all(reference[i] == raw for i, raw in raw_commands(bytes(request.body)))


@pytest.mark.timeout(180)
def test_a_partition_whose_worker_keeps_dying_fails_the_call_naming_the_unconfirmed(client,
                                                                                    server):
    """The same kill where Dask may not run the partition again (allowed-failures 0): the
    call raises (KilledWorker), never returns a result; ``unconfirmed`` (and a note) lists
    the partitions no 2xx answer confirmed, and every partition it leaves out is in
    answered requests."""
    from sink_oracle import kill_a_sender

    ddf = arrow_backed(make_table(2000, 4), 4)
    ids = partition_ids(ddf)
    scheduler = client.cluster.scheduler
    allowed, scheduler.allowed_failures = scheduler.allowed_failures, 0
    server.stall(after_bytes=1)
    killer = kill_a_sender(server, among=worker_pids(client))
    try:
        with pytest.raises(Exception) as info:
            bulkwire.dask.to_target(ddf, bulkwire.targets.ravendb(server.url, server.database))
    finally:
        scheduler.allowed_failures = allowed
        killer.join()
        client.wait_for_workers(2, timeout=60)
    assert killer.killed and type(info.value).__name__ == "KilledWorker"
    unconfirmed = info.value.unconfirmed
    assert unconfirmed and set(unconfirmed) <= {0, 1, 2, 3}
    assert any(n.startswith(f"not confirmed by the server: {len(unconfirmed)} of the Dask "
                            f"DataFrame's 4 partitions") for n in info.value.__notes__)
    confirmed = set().union(*(ids[i] for i in range(4) if i not in unconfirmed))
    assert confirmed <= answered_ids(server)


def test_to_target_writes_what_the_target_says(server, tmp_path):
    """to_target(ddf, target): the target's own options, the load's (columns), the same bytes
    as load_parquet into the same target (on the synchronous scheduler); a file target, or a
    target's option given to the load, is refused."""
    table = make_table(900, 4, seed=11)
    ddf = dd.from_pandas(table.to_pandas(types_mapper=pd.ArrowDtype), npartitions=3)
    target = bulkwire.targets.ravendb(server.url, server.database, collection="Points")
    result = bulkwire.dask.to_target(ddf, target, columns=["name", "emb"],
                                     compute_kwargs={"scheduler": "sync"})
    assert result.rows == 900 and len(server.requests) == 3
    assert_exactly_once(received_commands(server),
                        reference_commands(table, tmp_path, collection="Points",
                                           columns=["name", "emb"]))
    with pytest.raises(ValueError, match="must confirm each task's session on its own"):
        bulkwire.dask.to_target(ddf, bulkwire.targets.request_file(str(tmp_path / "x.json")))
    with pytest.raises(TypeError, match="float32 is an option of the ravendb target"):
        bulkwire.dask.to_target(ddf, target, float32="shortest")


def test_the_former_doors_warn_naming_to_target(server):
    """to_bulk_insert and to_cql still work, each warning with its new spelling, pointing at
    the caller."""
    table = make_table(60, 4, seed=2)
    ddf = dd.from_pandas(table.to_pandas(types_mapper=pd.ArrowDtype), npartitions=2)
    with pytest.warns(DeprecationWarning, match=r"use bulkwire\.dask\.to_target\(ddf, "
                                                r"bulkwire\.targets\.ravendb") as caught:
        result = bulkwire.dask.to_bulk_insert(ddf, server.url, server.database,
                                              compute_kwargs={"scheduler": "sync"})
    assert result.rows == 60 and caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=r"bulkwire\.targets\.cql\(hosts"):
        with pytest.raises(TypeError, match="collection"):
            bulkwire.dask.to_cql(ddf, "127.0.0.1", "ks", "t", collection="Points")
