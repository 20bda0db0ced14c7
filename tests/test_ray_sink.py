"""bulkwire.ray.BulkInsertDatasink on a real Ray instance (``ray.init(num_cpus=2)``) sending to
the loopback server in this process. Every row must arrive exactly once, with the bytes
bulkwire's own single-process ``load_parquet`` writes for it.

In CI: on the shared 2-core development machine, ``pip install "ray[data]"`` took 5 s from a
warm pip cache (the Ray wheel is one 79 MB download from PyPI) and ``ray.init(num_cpus=2)``
3.5 s; this whole file ran in 17 s (51 s in the sanitizer build, under load), well within a
few minutes, so it runs in CI. Ray is a test dependency (the ``test`` extra): without it these
tests fail, not skip.
"""
from __future__ import annotations

import io
import os
import pickle
import socket
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

# the ray extra (in test-all, not in the light test extra): a skip naming it without
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

import bulkwire
import bulkwire.ray
from bulkwire import _extras
from bulkwire.errors import BulkInsertError, RowError
from bulkwire.testing import LoopbackServer
from _ray_startup import init as init_ray
from sink_oracle import assert_exactly_once, make_table, received_commands, reference_commands

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


SANITIZER_BUILD = bool(os.environ.get("BULKWIRE_SANITIZER"))


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    """A local Ray with 2 CPUs whose workers import this bulkwire.

    Under the sanitizer build (``BULKWIRE_SANITIZER=1``, the ASan/UBSan runtimes in
    LD_PRELOAD) this process runs the instrumented build and Ray's processes run none of it.
    Ray's own native code is not clean under ASan: its setproctitle reads past a heap block
    as a worker starts, and its absl threads can crash a worker. A Ray Data task whose worker
    dies is retried without end, so such a crash hangs the run. Ray's daemons and workers
    therefore start without LD_PRELOAD, and the workers import the build installed in the
    environment, from the same source. The code a write task runs, ``load_arrow``, runs under
    the sanitizers in this process and in the Dask workers (test_dask_sink.py)."""
    inherited = {name: os.environ.pop(name) for name in ("LD_PRELOAD", "PYTHONPATH")
                 if name in os.environ}
    search_path = [p for p in inherited.get("PYTHONPATH", "").split(os.pathsep) if p]
    if SANITIZER_BUILD:
        search_path = [p for p in search_path
                       if os.path.abspath(p) != PACKAGE_PARENT]
    else:
        search_path.insert(0, PACKAGE_PARENT)
    options = dict(num_cpus=2, include_dashboard=False, log_to_driver=True,
                   object_store_memory=80 << 20, logging_level="warning",
                   runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(search_path)}}
                   if search_path else None)

    def worker_build() -> tuple[str, str, bool]:
        """Where a worker imports bulkwire from, its version, and whether ASan is loaded."""
        import bulkwire as worker_bulkwire
        with open("/proc/self/maps") as maps:
            return worker_bulkwire.__file__, worker_bulkwire.__version__, "libasan" in maps.read()

    try:
        init_ray(ray, **options)  # spawns the daemons, with this environment
    finally:
        os.environ.update(inherited)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        where, version, asan = ray.get(ray.remote(worker_build).remote(), timeout=300)
        assert not asan and version == bulkwire.__version__, (where, version, asan)
        if not SANITIZER_BUILD:
            assert where == bulkwire.__file__, where
        yield
    finally:
        ray.shutdown()


@pytest.fixture()
def server():
    with LoopbackServer() as srv:
        yield srv
        assert not srv.unexpected_errors


def test_every_row_once_with_the_reference_bytes(server, tmp_path):
    table = make_table(3000, 8)
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.ravendb(server.url, server.database, collection="Points"))
    ray.data.from_arrow(table).repartition(4).write_datasink(sink)
    assert sink.result is not None and sink.result.rows == 3000
    tasks = int(sink.result.source.split("(")[1].split()[0])
    assert tasks >= 2 and len(server.requests) == tasks  # one request per write task
    assert sink.result.body_bytes == sum(r.body_bytes for r in server.requests)
    assert_exactly_once(received_commands(server),
                        reference_commands(table, tmp_path, collection="Points"))


def test_a_sink_made_from_a_target_writes_what_the_target_says(server, tmp_path):
    """TargetDatasink(target): the target's own options (gzip, a collection), the load's
    (columns): the same bytes as load_parquet into the same target; a target whose sessions
    are not confirmed each on its own, or a target's option given to the sink, is refused."""
    table = make_table(1200, 4, seed=3)
    target = bulkwire.targets.ravendb(server.url, server.database, collection="Points",
                                      compress="gzip")
    sink = bulkwire.ray.TargetDatasink(target, columns=["name", "emb"])
    ray.data.from_arrow(table).repartition(3).write_datasink(sink)
    assert sink.result.rows == 1200 and sink.result.compress == "gzip"
    assert sink.result.wire_bytes < sink.result.body_bytes
    assert_exactly_once(received_commands(server),
                        reference_commands(table, tmp_path, collection="Points",
                                           columns=["name", "emb"]))
    with pytest.raises(ValueError, match="must confirm each task's session on its own"):
        bulkwire.ray.TargetDatasink(bulkwire.targets.jsonl(str(tmp_path / "x.jsonl")))
    with pytest.raises(TypeError, match="collection is an option of the ravendb target"):
        bulkwire.ray.TargetDatasink(target, collection="Other")


def test_the_former_doors_warn_naming_the_target_datasink(server):
    """BulkInsertDatasink, CqlDatasink and write_cql still work, each warning with its new
    spelling, pointing at the caller."""
    with pytest.warns(DeprecationWarning, match=r"use bulkwire\.ray\.TargetDatasink\("
                                                r"bulkwire\.targets\.ravendb") as caught:
        sink = bulkwire.ray.BulkInsertDatasink(server.url, server.database)
    assert caught[0].filename == __file__
    ray.data.from_arrow(make_table(50, 2)).write_datasink(sink)
    assert sink.result.rows == 50
    with pytest.warns(DeprecationWarning, match=r"TargetDatasink\(bulkwire\.targets\.cql"):
        with pytest.raises(TypeError, match="collection"):
            bulkwire.ray.CqlDatasink("127.0.0.1", "ks", "t", collection="Points")
    with pytest.warns(DeprecationWarning, match=r"write_target\(ds, bulkwire\.targets\.cql"):
        with pytest.raises(TypeError, match="collection"):
            bulkwire.ray.write_cql(ray.data.from_arrow(make_table(5, 2)), "127.0.0.1", "ks",
                                   "t", collection="Points")


def test_pandas_blocks_and_options(server, tmp_path):
    """Blocks that are pandas frames (after map_batches), gzip, string ids, chosen columns:
    the same bytes as load_parquet with the same options."""
    table = make_table(1500, 3, seed=5)
    table = table.set_column(0, "id", pa.array([f"k{i}" for i in range(table.num_rows)]))
    document = dict(collection="Points", id_prefix="p/", float32="shortest")
    options = dict(document, columns=["name", "score", "emb"])
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.ravendb(server.url, server.database, compress="gzip", **document),
        batch_rows=100, columns=["name", "score", "emb"])
    ds = ray.data.from_arrow(table).repartition(3).map_batches(lambda frame: frame,
                                                               batch_format="pandas")
    ds.write_datasink(sink)
    assert sink.result.rows == 1500 and sink.result.wire_bytes < sink.result.body_bytes
    assert_exactly_once(received_commands(server), reference_commands(table, tmp_path, **options))


def test_only_the_configuration_is_pickled(server):
    """What Ray ships to each write task: the configuration, small, with no socket, thread,
    lock or bulk insert inside, before and after a write."""
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.ravendb(server.url, server.database, metadata={"k": "v"}))
    ray.data.from_arrow(make_table(200, 2)).write_datasink(sink)
    assert sink.result.rows == 200

    seen: list = []

    class Recorder(pickle.Pickler):
        def persistent_id(self, obj):
            seen.append(type(obj))
            return None

    Recorder(io.BytesIO(), protocol=5).dump(sink)
    forbidden = (socket.socket, threading.Thread, type(threading.Lock()), bulkwire.BulkInsert,
                 bulkwire.BulkWriter)
    assert not [t for t in seen if issubclass(t, forbidden)], seen
    assert {t.__name__ for t in seen} <= {"TargetDatasink", "SinkConfig", "LoadOptions",
                                          "ServerDescription", "dict", "str",
                                          "int", "bool", "NoneType", "tuple", "type"}, seen
    data = pickle.dumps(sink)
    assert len(data) < 1024, len(data)
    copy = pickle.loads(data)
    assert copy.config == sink.config and copy.result is None


def test_a_failing_task_raises(server):
    table = make_table(800, 4)
    vectors = table.column("emb").to_pylist()
    vectors[650] = None  # a null vector in one write task
    table = table.set_column(4, "emb", pa.array(vectors, table.schema.field("emb").type))
    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    with pytest.raises(RowError, match="column 'emb'"):
        ray.data.from_arrow(table).repartition(4).write_datasink(sink)
    assert sink.result is None


def test_a_server_error_raises(server):
    server.fail_after_bytes = 1
    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    with pytest.raises(BulkInsertError, match="Simulated failure"):
        ray.data.from_arrow(make_table(300, 4)).repartition(2).write_datasink(sink)
    assert sink.result is None


def test_ids_come_from_the_id_column(server):
    """Split differently (as a retried task is), the same rows make the same PUTs."""
    table = make_table(600, 4)
    ray.data.from_arrow(table).repartition(2).write_datasink(
        bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database)))
    first = sorted(received_commands(server))
    server.requests.clear()
    ray.data.from_arrow(table).repartition(5).write_datasink(
        bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database)))
    assert sorted(received_commands(server)) == first


def test_columns_are_checked_before_any_request(server, tmp_path):
    """A column the arguments name that the rows lack fails in the write task before its
    request opens, naming the column; also after a fused read_parquet (whose first bundle,
    the one on_write_start sees, is the file listing, not the rows)."""
    import pyarrow.parquet as pq

    pq.write_table(make_table(10, 2), tmp_path / "rows.parquet")
    for ds in (ray.data.from_arrow(make_table(10, 2)), ray.data.read_parquet(str(tmp_path))):
        sink = bulkwire.ray.TargetDatasink(
            bulkwire.targets.ravendb(server.url, server.database, id_column="key"))
        with pytest.raises(ValueError, match=r"id column 'key' is not a column of write "
                                             r"task \d+ of the Ray Dataset \(its columns: "):
            ds.write_datasink(sink)
    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    ray.data.read_parquet(str(tmp_path)).write_datasink(sink)
    assert sink.result.rows == 10 and len(server.requests) == 1
    server.requests.clear()
    assert server.requests == []
    with pytest.raises(ValueError, match="compress must be"):
        bulkwire.ray.TargetDatasink(
            bulkwire.targets.ravendb(server.url, server.database, compress="lz4"))


def test_a_missing_ray_names_the_extra():
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['ray'] = None\n"
         "import bulkwire.ray\n"
         "try:\n    bulkwire.ray.TargetDatasink\nexcept ImportError as e:\n    print(e)\n"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": PACKAGE_PARENT})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(_extras.missing_extra("Ray support", "ray", "ray"))


def test_a_retried_task_repeats_the_same_puts(server, tmp_path):
    """A write task whose request the server fails, retried by Ray (retry_exceptions), sends
    the same PUTs again: the failed body is the start of the retried one, and every row is
    stored once with the reference bytes."""
    from sink_oracle import assert_retries_repeat, fail_first_requests

    table = make_table(1200, 4)
    watcher = fail_first_requests(server)
    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    ray.data.from_arrow(table).repartition(4).write_datasink(
        sink, ray_remote_args={"max_retries": 3, "retry_exceptions": True})
    watcher.join()
    assert sink.result.rows == 1200
    assert_retries_repeat(server, reference_commands(table, tmp_path))


# ------------------------------------------------------------------------------ killed workers

def answered_ids(server) -> set:
    """The ids of the commands in the requests the server answered 2xx."""
    from sink_oracle import raw_commands

    return {i for r in server.requests if r.succeeded for i, _ in raw_commands(bytes(r.body))}


@pytest.mark.timeout(180)
def test_a_write_task_whose_worker_is_killed_fails_the_write(server):
    """kill -9 of the worker process running a write task, in the middle of its request
    (the server stalled), with no retry allowed: write_datasink raises, ``sink.result``
    stays None, and the error says that no row is confirmed by the write."""
    from sink_oracle import kill_a_sender

    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    server.stall(after_bytes=1)
    killer = kill_a_sender(server, sending=1)
    try:
        with pytest.raises(Exception) as info:
            ray.data.from_arrow(make_table(2000, 4)).repartition(4).write_datasink(
                sink, ray_remote_args={"max_retries": 0})
    finally:
        killer.join()
    assert killer.killed and sink.result is None
    assert "WorkerCrashedError" in type(info.value).__name__ + repr(info.value)
    assert any(n.startswith("not confirmed by the server: any row of the Ray Dataset")
               for n in getattr(info.value, "__notes__", ()))


@pytest.mark.timeout(180)
def test_a_killed_write_task_that_ray_runs_again_is_counted_once(server, tmp_path):
    """The same kill with Ray's default retries: the task runs again, and the write reports
    success only once every write task's request was answered 2xx; the result counts each
    row once, and every row is in an answered request."""
    from sink_oracle import kill_a_sender

    table = make_table(2000, 4)
    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    server.stall(after_bytes=1)
    killer = kill_a_sender(server, sending=1)
    try:
        ray.data.from_arrow(table).repartition(4).write_datasink(sink)
    finally:
        killer.join()
    assert killer.killed and len(server.requests) >= 5  # the killed task was sent again
    assert sink.result.rows == 2000
    assert answered_ids(server) == set(reference_commands(table, tmp_path))


def test_a_write_is_a_success_only_when_the_confirmed_rows_are_ray_s_rows(server):
    """on_write_complete checks the rows the server confirmed against the rows Ray says it
    gave the write tasks: one row short raises, and ``result`` stays None."""
    from types import SimpleNamespace

    from bulkwire.load import LoadResult

    sink = bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(server.url, server.database))
    sink.on_write_start()
    parts = [LoadResult(500, 10, 10, 0.1, "", "", False), LoadResult(499, 10, 10, 0.1, "", "",
                                                                     False)]
    with pytest.raises(BulkInsertError, match="the target confirmed 999 rows of the Ray "
                                              "Dataset, but its write tasks were given 1,000"):
        sink.on_write_complete(SimpleNamespace(num_rows=1000, write_returns=parts))
    assert sink.result is None
    sink.on_write_complete(SimpleNamespace(num_rows=999, write_returns=parts))
    assert sink.result.rows == 999


# ------------------------------------------------------------------ into a CQL table

from bulkwire.errors import ConnectError, SchemaMismatchError  # noqa: E402
from test_cql_load import KEYSPACE, make_table as make_cql_table, session  # noqa: E402,F401
from test_cql_sinks import (CONFIG_TYPES, LOADED, PASSWORD, TABLE_COLUMNS,  # noqa: E402
                            assert_read_back, closed_port, pickled_types)


def test_the_cql_datasink_pickles_only_its_configuration():
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.cql(["127.0.0.1"], "ks", "t", username="u", password=PASSWORD),
        batch_rows=64)
    types = pickled_types(sink)
    assert {t.__name__ for t in types} <= CONFIG_TYPES | {"TargetDatasink"}, types
    data = pickle.dumps(sink)
    assert len(data) < 1024, len(data)
    copy = pickle.loads(data)
    assert copy.config == sink.config and copy.result is None
    assert copy.get_name() == "Target" and PASSWORD not in repr(copy.config)
    with pytest.raises(TypeError, match="collection is not an option of the cql target"):
        bulkwire.ray.TargetDatasink(bulkwire.targets.cql("127.0.0.1", "ks", "t"),
                                    collection="Points")


class Dataset:
    """What write_cql uses of a Ray Dataset: its schema, and the write it records."""

    def __init__(self, schema):
        self._schema, self.written = schema, []

    def schema(self):
        return self._schema

    def write_datasink(self, sink, ray_remote_args=None):
        self.written.append(sink)


def test_write_cql_checks_the_table_before_any_write_task():
    """The Dataset's schema is checked on the driver before the write starts: with no node
    listening, the connection's error naming it, and nothing written."""
    port = closed_port()
    ds = Dataset(ray.data.from_arrow(make_table(10, 2)).schema())
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        bulkwire.ray.write_target(ds, bulkwire.targets.cql(f"127.0.0.1:{port}", "ks", "t"))
    assert ds.written == []
    with pytest.raises(ValueError, match="window must be"):
        bulkwire.ray.write_target(ds, bulkwire.targets.cql("127.0.0.1", "ks", "t", window=0))
    assert ds.written == []


def test_write_cql_judges_the_datasets_arrow_schema(monkeypatch):
    """What the driver's check judges: the Dataset's Arrow schema, for Arrow and for pandas
    blocks (converted as the write tasks convert them)."""
    from bulkwire.load.cql_target import CqlDescription

    seen = []
    monkeypatch.setattr(CqlDescription, "plan",
                        lambda self, schema, source, options: seen.append((schema, source)))
    table = make_table(10, 2).drop_columns(["count"])
    for ds in (ray.data.from_arrow(table),
               ray.data.from_arrow(table).map_batches(lambda f: f, batch_format="pandas")):
        ds = Dataset(ds.schema())
        bulkwire.ray.write_target(ds, bulkwire.targets.cql("127.0.0.1", "ks", "t"))
        assert len(ds.written) == 1
    arrow, pandas = seen
    assert arrow == (table.schema, "the Ray Dataset")
    assert pandas[0].names == table.schema.names and pandas[1] == "the Ray Dataset"


@pytest.mark.cassandra_server
def test_a_ray_dataset_of_vectors_is_read_back_exactly(cassandra_node, session):
    table = make_cql_table(session, "ray_sink", TABLE_COLUMNS)
    source = make_table(2000, 64, seed=21)
    ds = ray.data.from_arrow(source.select(LOADED)).repartition(3)
    result = bulkwire.ray.write_target(
        ds, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table), batch_rows=300)
    assert result.rows == 2000
    assert result.target == f"{KEYSPACE}.{table} at {cassandra_node.address}:9042"
    assert_read_back(session, table, source)
    # the datasink on its own: each write task checks its blocks and loads them
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table), columns=LOADED)
    ray.data.from_arrow(source).repartition(2).write_datasink(sink)
    assert sink.result.rows == 2000
    assert_read_back(session, table, source)


@pytest.mark.cassandra_server
def test_a_write_task_with_a_vector_of_the_wrong_length_fails_the_write(cassandra_node,
                                                                       session):
    table = make_cql_table(session, "ray_sink_bad", TABLE_COLUMNS)
    source = make_table(2000, 64, seed=22).select(LOADED)
    vectors = source.column("emb").to_pylist()
    vectors[1500] = vectors[1500] + [0.5]  # 65 elements
    source = source.set_column(3, "emb", pa.array(vectors, pa.list_(pa.float32())))
    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    with pytest.raises(RowError, match="column 'emb'") as caught:
        ray.data.from_arrow(source).repartition(4).write_datasink(sink)
    assert sink.result is None
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "of the Ray Dataset" in notes and "not confirmed by the server" in notes
    # its row counted from the write task's first row (each task holds a run of 500 rows)
    assert (1500 - caught.value.row) % 500 == 0


def test_rows_set_aside_by_the_write_tasks_count_among_those_given():
    from types import SimpleNamespace

    from bulkwire import LoadOptions, targets
    from bulkwire.load import LoadResult
    from bulkwire.ray import TargetDatasink

    sink = TargetDatasink(targets.ravendb("http://127.0.0.1:1", "db"),
                          options=LoadOptions(max_errors=5, rejected="rejected-rows"))
    sink.on_write_start()
    parts = [LoadResult(500, 10, 10, 0.1, "", "", False), LoadResult(497, 10, 10, 0.1, "", "",
                                                                     False)]
    parts[1].rejected_rows = 3
    sink.on_write_complete(SimpleNamespace(num_rows=1000, write_returns=parts))
    assert (sink.result.rows, sink.result.rejected_rows) == (997, 3)
    parts[1].rejected_rows = 2
    with pytest.raises(Exception, match=r"confirmed 997 rows of the Ray Dataset \(2 more "
                                        r"rejected\), but its write tasks were given 1,000"):
        sink.on_write_complete(SimpleNamespace(num_rows=1000, write_returns=parts))
