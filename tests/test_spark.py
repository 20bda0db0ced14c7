"""The Spark data source ``bulkwire`` (bulkwire.spark) on a local[2] SparkSession: every
target, one session per write task, the options and the schema judged on the driver before
any task runs, the commit's sums and the abort's report, and streaming micro-batches.

Needs pyspark (the ``spark`` extra) and a Java runtime; without pyspark the module skips
naming it (a failure under BULKWIRE_REQUIRE_EXTRAS=1).
"""
from __future__ import annotations

import collections
import gzip
import json
import os
import struct
import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

import bulkwire  # noqa: E402
import bulkwire.spark  # noqa: E402
from bulkwire import targets  # noqa: E402
from bulkwire.testing import LoopbackServer  # noqa: E402

from _spark_session import spark_session  # noqa: E402
from cql_fake_node import execute_values  # noqa: E402
from cql_nodes import EmulatedCluster  # noqa: E402

pytestmark = pytest.mark.timeout(300)

ROWS = 40  # rows of each DataFrame: ids 0..ROWS-1, in 2 partitions of ROWS // 2


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session = spark_session(str(tmp_path_factory.mktemp("spark")))
    try:
        yield session
    finally:
        session.stop()


def rows_of(ids) -> pa.Table:
    """The rows of these ids, as the DataFrame's Spark schema gives them to a task."""
    ids = np.asarray(ids, dtype=np.int64)
    vectors = [[np.float32(i), np.float32(i * 0.5)] for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "emb": pa.array(vectors, pa.list_(pa.float32())),
                     "v": pa.array([f"v{i}" for i in ids])})


def frame(spark, rows: int = ROWS, partitions: int = 2):
    """A DataFrame of ``rows_of(range(rows))`` whose partition p holds the p-th slice of
    consecutive ids."""
    return spark.range(0, rows, 1, numPartitions=partitions).selectExpr(
        "id", "array(cast(id as float), cast(id * 0.5 as float)) as emb",
        "concat('v', cast(id as string)) as v")


def put_ids(server) -> collections.Counter:
    """How many times each document id was PUT, over every request."""
    return collections.Counter(c["Id"] for r in server.requests for c in (r.commands or ())
                               if c.get("Type") == "PUT")


def test_bulkwire_does_not_import_pyspark_and_a_missing_pyspark_names_the_extra():
    from _spark_session import PACKAGE_PARENT
    from bulkwire import _extras

    def run(code):
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": PACKAGE_PARENT})

    done = run("import sys, bulkwire, bulkwire.targets\nprint('pyspark' in sys.modules)")
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
    done = run("import sys; sys.modules['pyspark'] = None\n"
               "try:\n    import bulkwire.spark\nexcept ImportError as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(_extras.missing_extra("Spark support", "pyspark", "spark"))


def test_request_file_writes_each_partition_as_load_arrow_does(spark, tmp_path):
    out = tmp_path / "bodies"
    (frame(spark).write.format("bulkwire").option("target", "request_file")
     .option("collection", "Points").mode("append").save(str(out) + "/"))
    half = ROWS // 2
    for p, ids in enumerate((range(0, half), range(half, ROWS))):
        expected = tmp_path / f"expected-{p}.bulk.json"
        bulkwire.load_arrow(rows_of(ids), targets.request_file(expected, collection="Points"))
        assert (out / f"part-{p:05d}.bulk.json").read_bytes() == expected.read_bytes()
    assert sorted(os.listdir(out)) == ["part-00000.bulk.json", "part-00001.bulk.json"]
    result = bulkwire.spark.last_result(spark)
    assert result.committed and result.rows == ROWS and result.tasks == 2
    assert result.partitions == [0, 1] and result.unconfirmed_tasks == 0
    assert result.body_bytes == sum(os.path.getsize(out / f) for f in os.listdir(out))
    assert sorted(map(os.path.basename, result.outputs)) == sorted(os.listdir(out))


def test_request_file_path_with_a_partition_placeholder_compressed(spark, tmp_path):
    pattern = str(tmp_path / "points-{partition}.json.zst")
    (frame(spark).write.format("bulkwire").option("target", "request_file")
     .option("out", pattern).option("compress", "zstd").mode("append").save())
    expected = tmp_path / "expected.zst"
    bulkwire.load_arrow(rows_of(range(ROWS // 2, ROWS)),
                        targets.request_file(expected, compress="zstd"))
    assert (tmp_path / "points-00001.json.zst").read_bytes() == expected.read_bytes()
    assert os.path.exists(tmp_path / "points-00000.json.zst")


def test_jsonl_one_file_per_partition_in_a_folder(spark, tmp_path):
    out = tmp_path / "lines"
    (frame(spark).write.format("bulkwire").option("target", "jsonl").option("compress", "gzip")
     .mode("append").save(str(out) + "/"))  # save(path) is the jsonl target's own path
    assert sorted(os.listdir(out)) == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    expected = tmp_path / "expected.jsonl.gz"
    bulkwire.load_arrow(rows_of(range(0, ROWS // 2)), targets.jsonl(str(expected)))
    assert (gzip.decompress((out / "part-00000.jsonl.gz").read_bytes())
            == gzip.decompress(expected.read_bytes()))
    assert bulkwire.spark.last_result(spark).rows == ROWS


def test_one_file_for_every_task_is_refused_on_the_driver(spark, tmp_path):
    with pytest.raises(Exception, match=r"one file per Spark task.*\{partition\}"):
        (frame(spark).write.format("bulkwire").option("target", "request_file")
         .option("out", str(tmp_path / "all.bulk.json")).mode("append").save())
    assert os.listdir(tmp_path) == []


def spark_schema():
    """The Spark schema of ``rows_of``'s rows (and of ``frame``'s)."""
    from pyspark.sql.types import (ArrayType, FloatType, LongType, StringType, StructField,
                                   StructType)

    return StructType([StructField("id", LongType()),
                       StructField("emb", ArrayType(FloatType())),
                       StructField("v", StringType())])


def file_job(kind: str, out, result_dir=None):
    """The batch job of a file target of ``kind`` into the folder ``out``, as the driver
    judges it, and its file's final name for a partition."""
    from bulkwire import _spark_options

    option = "out" if kind == "request_file" else "path"
    job = _spark_options._job({"target": kind, option: str(out) + "/"}, spark_schema(),
                              False, False, None if result_dir is None else str(result_dir))
    return job, lambda p: job.task_target(p, None)[1]


def task_write(writer, monkeypatch, partition: int, ids, attempt: int = 0):
    """``writer.write`` as Spark's task of ``partition`` (its attempt ``attempt``) runs it,
    on the rows of ``ids``."""
    from bulkwire import _spark_tasks

    monkeypatch.setattr(_spark_tasks, "_task_ids", lambda: (partition, attempt, None))
    return writer.write(iter(rows_of(ids).to_batches(max_chunksize=7)))


@pytest.mark.parametrize("kind", ["jsonl", "request_file"])
def test_a_file_task_gives_no_final_name_the_driver_s_commit_does(kind, tmp_path,
                                                                  monkeypatch):
    out = tmp_path / "out"
    job, final = file_job(kind, out, tmp_path)
    writer = bulkwire.spark.BulkwireWriter(job)
    messages = [task_write(writer, monkeypatch, p, range(p * 10, p * 10 + 10), 4 + p)
                for p in (0, 1)]
    # the tasks ended: each file is there under its attempt's hidden temporary name only
    assert [m.output for m in messages] == [final(0), final(1)]
    assert sorted(os.listdir(out)) == sorted(os.path.basename(m.temporary) for m in messages)
    for p, m in enumerate(messages):
        assert os.path.basename(m.temporary).startswith(
            "." + os.path.basename(final(p)) + f".attempt-{4 + p}-")
        assert not os.path.exists(final(p))
    writer.commit(messages)
    assert sorted(os.listdir(out)) == sorted(os.path.basename(final(p)) for p in (0, 1))
    for p in (0, 1):  # each final file is the load of its partition's rows
        expected = tmp_path / f"expected-{p}"
        make = targets.jsonl if kind == "jsonl" else targets.request_file
        bulkwire.load_arrow(rows_of(range(p * 10, p * 10 + 10)), make(str(expected)))
        assert open(final(p), "rb").read() == expected.read_bytes()
    result = bulkwire.spark.SparkWriteResult(**json.loads((tmp_path / "last.json").read_text()))
    assert result.committed and result.rows == 20 and result.outputs == [final(0), final(1)]


def test_the_driver_s_abort_removes_the_tasks_temporary_files(tmp_path, monkeypatch):
    out = tmp_path / "out"
    job, final = file_job("jsonl", out, tmp_path)
    writer = bulkwire.spark.BulkwireWriter(job)
    messages = [task_write(writer, monkeypatch, p, range(p * 10, p * 10 + 10), p)
                for p in (0, 1)]
    # partition 2's task finished too, but its message never reached the driver (Spark
    # cancelled the task when another failed); and another job's file is in the folder
    lost = task_write(writer, monkeypatch, 2, range(20, 30))
    other = out / ".part-00000.jsonl.gz.attempt-0-0123abcd"
    other.write_bytes(b"another final name's")
    assert len(os.listdir(out)) == 4
    writer.abort([messages[0], None, messages[1]])  # None: partition 2's, a failed task's
    assert os.listdir(out) == [other.name] and not os.path.exists(lost.temporary)
    result = bulkwire.spark.SparkWriteResult(**json.loads((tmp_path / "last.json").read_text()))
    assert (result.committed, result.rows, result.unconfirmed_tasks, result.outputs) \
        == (False, 20, 1, [])


def rejecting_job(out, rejected, result_dir):
    """The batch job of a JSON Lines target into the folder ``out`` whose rows with a null
    id go to the directory ``rejected`` (at most 5 a task)."""
    from bulkwire import _spark_options

    return _spark_options._job({"target": "jsonl", "path": str(out) + "/", "max_errors": "5",
                                "rejected": str(rejected)}, spark_schema(), False, False,
                               str(result_dir))


def task_write_nulls(writer, monkeypatch, partition: int, ids, null: set, attempt: int = 0):
    """``task_write`` of rows whose id is null where it is in ``null``."""
    from bulkwire import _spark_tasks

    rows = rows_of(ids)
    rows = rows.set_column(0, "id", pa.array([None if i in null else i for i in ids],
                                             pa.int64()))
    monkeypatch.setattr(_spark_tasks, "_task_ids", lambda: (partition, attempt, None))
    return writer.write(iter(rows.to_batches(max_chunksize=7)))


def test_a_task_s_rejected_file_takes_a_final_name_only_at_the_driver_s_commit(
        tmp_path, monkeypatch):
    out, rejected = tmp_path / "out", tmp_path / "rejected"
    writer = bulkwire.spark.BulkwireWriter(rejecting_job(out, rejected, tmp_path))
    nulls = [{3, 5}, {12}]
    messages = [task_write_nulls(writer, monkeypatch, p, range(p * 10, p * 10 + 10),
                                 nulls[p], 2) for p in (0, 1)]
    # the tasks ended (as they do when a killed driver ends their input): their rejected
    # files are there under their attempts' hidden names only, never as part-<partition>
    assert [m.rejected_rows for m in messages] == [2, 1]
    assert sorted(os.listdir(rejected)) == sorted(
        os.path.basename(m.rejected_temporary) for m in messages)
    assert all(name.startswith(".part-") and ".attempt-2-" in name
               for name in os.listdir(rejected))
    writer.commit(messages)
    assert sorted(os.listdir(rejected)) == ["part-0.parquet", "part-1.parquet"]
    for p in (0, 1):
        thrown = pq.read_table(rejected / f"part-{p}.parquet")
        assert sorted(thrown.column("v").to_pylist()) == sorted(f"v{i}" for i in nulls[p])
    result = bulkwire.spark.SparkWriteResult(**json.loads((tmp_path / "last.json").read_text()))
    assert result.committed and (result.rows, result.rejected_rows) == (17, 3)


def test_the_driver_s_abort_keeps_finished_tasks_rejected_files_only(tmp_path, monkeypatch):
    out, rejected = tmp_path / "out", tmp_path / "rejected"
    writer = bulkwire.spark.BulkwireWriter(rejecting_job(out, rejected, tmp_path))
    done = task_write_nulls(writer, monkeypatch, 0, range(10), {4})
    # partition 1 finished too, but its message never reached the driver
    lost = task_write_nulls(writer, monkeypatch, 1, range(10, 20), {15})
    writer.abort([done, None])
    # the finished task's rows refused are kept under its final name; its output is not;
    # the lost attempt's files are gone
    assert os.listdir(rejected) == ["part-0.parquet"] and os.listdir(out) == []
    assert pq.read_table(rejected / "part-0.parquet").column("v").to_pylist() == ["v4"]
    assert not os.path.exists(lost.rejected_temporary) and not os.path.exists(lost.temporary)


def test_a_rejected_file_changed_before_the_commit_fails_it_naming_the_file(
        tmp_path, monkeypatch):
    out, rejected = tmp_path / "out", tmp_path / "rejected"
    writer = bulkwire.spark.BulkwireWriter(rejecting_job(out, rejected, tmp_path))
    message = task_write_nulls(writer, monkeypatch, 0, range(10), {1})
    with open(message.rejected_temporary, "ab") as f:
        f.write(b"more")
    with pytest.raises(bulkwire.LoadError, match="rejected file .*changed after its task"):
        writer.commit([message])
    assert not os.path.exists(message.output)  # nothing renamed: not even the output
    assert not os.path.exists(rejected / "part-0.parquet")


def test_a_second_attempt_s_message_for_a_partition_is_not_committed_twice(tmp_path,
                                                                           monkeypatch):
    out = tmp_path / "out"
    job, final = file_job("jsonl", out, tmp_path)
    writer = bulkwire.spark.BulkwireWriter(job)
    first = task_write(writer, monkeypatch, 0, range(10), attempt=1)
    again = task_write(writer, monkeypatch, 0, range(10), attempt=2)
    other = task_write(writer, monkeypatch, 1, range(10, 20), attempt=3)
    # an attempt whose message never arrived (Spark denied its commit: another attempt of
    # its partition had committed), written as a task killed mid-write leaves it
    denied = task_write(writer, monkeypatch, 1, range(10, 20), attempt=4)
    os.rename(denied.temporary, denied.temporary + ".partial")
    assert len({first.temporary, again.temporary}) == 2 and len(os.listdir(out)) == 4
    writer.commit([first, other, again])
    assert sorted(os.listdir(out)) == ["part-00000.jsonl", "part-00001.jsonl"]
    lines = [json.loads(line)["v"] for p in (0, 1) for line in open(final(p))]
    assert lines == [f"v{i}" for i in range(20)]  # each row once
    result = bulkwire.spark.SparkWriteResult(**json.loads((tmp_path / "last.json").read_text()))
    assert (result.rows, result.tasks, result.partitions) == (20, 2, [0, 1])


@pytest.mark.parametrize("change", ["removed", "appended to", "rewritten"])
def test_a_temporary_file_changed_before_the_commit_fails_it_naming_the_file(
        change, tmp_path, monkeypatch):
    out = tmp_path / "out"
    job, final = file_job("jsonl", out, tmp_path)
    writer = bulkwire.spark.BulkwireWriter(job)
    messages = [task_write(writer, monkeypatch, p, range(p * 10, p * 10 + 10), p)
                for p in (0, 1)]
    changed = messages[1].temporary
    if change == "removed":
        os.unlink(changed)
    elif change == "appended to":
        with open(changed, "ab") as f:
            f.write(b'{"v": "v99"}\n')
    else:  # the same size, written later
        data = open(changed, "rb").read()
        os.utime(changed, ns=(messages[1].mtime_ns + 10**9, messages[1].mtime_ns + 10**9))
        with open(changed, "wb") as f:
            f.write(data.replace(b"v10", b"v77"))
        os.utime(changed, ns=(messages[1].mtime_ns + 10**9, messages[1].mtime_ns + 10**9))
    with pytest.raises(bulkwire.errors.LoadError) as raised:
        writer.commit(messages)
    assert repr(changed) in str(raised.value) and "partition 1" in str(raised.value)
    assert ("changed after its task wrote it" in str(raised.value)) == (change != "removed")
    # no file was renamed (partition 0's neither): Spark's abort then removes the others
    assert not os.path.exists(final(0)) and not os.path.exists(final(1))
    writer.abort(messages)
    assert os.listdir(out) == []


@pytest.mark.skipif(not bulkwire.spark.STREAMING,
                    reason="this PySpark has no DataSourceStreamArrowWriter (PySpark >= 4.1)")
def test_a_replayed_micro_batch_s_commit_replaces_its_files_whole(tmp_path, monkeypatch):
    from bulkwire import _spark_options, _spark_tasks

    out = tmp_path / "out"
    job = _spark_options._job({"target": "jsonl", "path": str(out) + "/"}, spark_schema(),
                              False, True, str(tmp_path))
    writer = bulkwire.spark.BulkwireStreamWriter(job)

    def micro_batch(batch_id: int, first: int) -> list:
        messages = []
        for p in (0, 1):
            monkeypatch.setattr(_spark_tasks, "_task_ids", lambda: (p, 0, batch_id))
            ids = range(first + p * 5, first + p * 5 + 5)
            messages.append(writer.write(iter(rows_of(ids).to_batches())))
        assert all(os.path.basename(m.temporary).startswith(
            f".part-{batch_id:05d}-{m.partition:05d}.jsonl.attempt-0-") for m in messages)
        return messages

    writer.commit(micro_batch(0, 0), 0)
    writer.commit(micro_batch(1, 10), 1)
    committed = {n: (out / n).read_bytes() for n in os.listdir(out)}
    assert sorted(committed) == [f"part-{b:05d}-{p:05d}.jsonl" for b in (0, 1) for p in (0, 1)]
    # micro-batch 1 again, as Spark replays it from its checkpoint: its files replaced whole
    # by the commit (the replay's tasks left the committed ones as they were)
    replayed = micro_batch(1, 10)
    writer.abort(micro_batch(2, 20), 2)  # and the next one aborted: nothing of it stays
    inodes = {n: os.stat(out / n).st_ino for n in committed}
    assert {n: (out / n).read_bytes() for n in committed} == committed
    writer.commit(replayed, 1)
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == committed
    assert sorted(n for n in committed if os.stat(out / n).st_ino != inodes[n]) \
        == ["part-00001-00000.jsonl", "part-00001-00001.jsonl"]
    lines = [json.loads(line)["v"] for n in sorted(committed) for line in open(out / n)]
    assert lines == [f"v{i}" for i in range(20)]


def after_a_file(pattern: str):
    """A mapInArrow function whose partition 1 waits until a file matching the glob
    ``pattern`` exists (up to 120 s)."""
    def wait(batches):
        import glob as glob_
        import time as time_

        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 1:
            deadline = time_.monotonic() + 120
            while not glob_.glob(pattern) and time_.monotonic() < deadline:
                time_.sleep(0.1)
        yield from batches
    return wait


def test_a_failing_file_task_leaves_no_file_of_any_partition(spark, tmp_path):
    half = ROWS // 2
    out = tmp_path / "lines"
    df = frame(spark).selectExpr(f"if(id = {half + 3}, null, id) as id", "emb", "v")
    # partition 1 (which fails on its row without an id) starts once partition 0's task
    # has left its whole file, under its temporary name
    df = df.mapInArrow(after_a_file(str(out / ".part-00000.jsonl.attempt-*[0-9a-f]")),
                       df.schema)
    with pytest.raises(Exception, match="id") as raised:
        df.write.format("bulkwire").option("target", "jsonl").mode("append").save(
            str(out) + "/")
    assert "partition 1" in str(raised.value)
    # no final name; the abort removed partition 0's file (through its task's message, or,
    # when Spark cancelled that task before its message came, by its name)
    assert os.listdir(out) == []
    result = bulkwire.spark.last_result(spark)
    assert not result.committed and result.partitions in ([], [0]) and result.outputs == []


def test_ravendb_every_row_once_one_request_per_task(spark):
    with LoopbackServer() as server:
        (frame(spark, partitions=3).write.format("bulkwire").option("target", "ravendb")
         .option("url", server.url).option("database", server.database)
         .option("collection", "Points").option("batch_rows", "7").mode("append").save())
        assert put_ids(server) == collections.Counter(f"points/{i}" for i in range(ROWS))
        assert len(server.requests) == 3 and all(r.succeeded for r in server.requests)
        assert server.documents["points/5"]["emb"] == [5.0, 2.5]
        result = bulkwire.spark.last_result(spark)
        assert (result.committed, result.rows, result.tasks, result.retries) == (True, ROWS, 3, 0)
        assert result.body_bytes == sum(r.body_bytes for r in server.requests)


def test_cql_every_row_stored_once_routed_to_its_owner(spark):
    with EmulatedCluster(3) as cluster:
        (frame(spark).select("id", "v").write.format("bulkwire").option("target", "cql")
         .option("hosts", cluster.contact(0)).option("keyspace", "ks").option("table", "t")
         .option("window", "8").mode("append").save())
        assert cluster.stored == {i: f"v{i}" for i in range(ROWS)}
        sent = [collections.Counter(node.rows) for node in cluster.nodes]
        want = [collections.Counter() for _ in cluster.nodes]
        for i in range(ROWS):
            want[cluster.owner(i)][i] += 1
        assert sent == want
        result = bulkwire.spark.last_result(spark)
        assert (result.committed, result.rows, result.tasks) == (True, ROWS, 2)
        assert "ks.t" in result.target


def second_partition_after_the_first(url: str):
    """A mapInArrow function whose partition 1 waits until the loopback server at ``url``
    received a whole request (partition 0's), and a moment more for that task to end."""
    def wait(batches):
        import json as json_
        import time as time_
        import urllib.request

        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 1:
            deadline = time_.monotonic() + 120
            while time_.monotonic() < deadline:
                with urllib.request.urlopen(f"{url}/_loopback/last", timeout=10) as answer:
                    if json_.loads(answer.read()).get("complete"):
                        break
                time_.sleep(0.1)
            time_.sleep(2)
        yield from batches
    return wait


def test_a_failing_task_aborts_and_says_what_was_confirmed(spark):
    half = ROWS // 2
    # partition 1 holds a row without an id: its task fails, partition 0's commits
    df = frame(spark).selectExpr(f"if(id = {half + 3}, null, id) as id", "emb", "v")
    with LoopbackServer() as server:
        df = df.mapInArrow(second_partition_after_the_first(server.url), df.schema)
        with pytest.raises(Exception, match="id") as raised:
            (df.write.format("bulkwire").option("target", "ravendb")
             .option("url", server.url).option("database", server.database)
             .mode("append").save())
        assert "partition 1" in str(raised.value)
        assert set(server.documents) == {f"embeddings/{i}" for i in range(half)}
        result = bulkwire.spark.last_result(spark)
        assert not result.committed
        assert (result.partitions, result.rows, result.unconfirmed_tasks) == ([0], half, 1)
        assert "aborted" in result.summary()


def test_an_unknown_option_is_named(spark, tmp_path):
    with pytest.raises(Exception, match="colour is not an option of the bulkwire data source "
                                        "for the request_file target"):
        (frame(spark).write.format("bulkwire").option("target", "request_file")
         .option("colour", "blue").mode("append").save(str(tmp_path) + "/"))
    with pytest.raises(Exception, match="unknown target kind 'mongodb'"):
        frame(spark).write.format("bulkwire").option("target", "mongodb").mode("append").save()
    with pytest.raises(Exception, match="window must be an int, not 'wide'"):
        (frame(spark).write.format("bulkwire").option("target", "cql")
         .option("hosts", "127.0.0.1").option("keyspace", "ks").option("table", "t")
         .option("window", "wide").mode("append").save())
    assert os.listdir(tmp_path) == []


def test_a_path_names_a_file_targets_output_only(spark, tmp_path):
    with pytest.raises(Exception, match="save\\(path\\) names a file target's output; the "
                                        "ravendb target has none"):
        (frame(spark).write.format("bulkwire").option("target", "ravendb")
         .option("url", "http://127.0.0.1:9").option("database", "db").mode("append")
         .save(str(tmp_path)))
    with pytest.raises(Exception, match="save\\(path\\) and option 'out' both name"):
        (frame(spark).write.format("bulkwire").option("target", "request_file")
         .option("out", str(tmp_path) + "/a/").mode("append").save(str(tmp_path) + "/b/"))
    assert os.listdir(tmp_path) == []


def test_modes_other_than_append_are_refused_naming_the_mode(spark, tmp_path):
    with LoopbackServer() as server:
        def writer():
            return (frame(spark).write.format("bulkwire").option("target", "ravendb")
                    .option("url", server.url).option("database", server.database))

        with pytest.raises(Exception, match="not mode 'overwrite'"):
            writer().mode("overwrite").save()
        with pytest.raises(Exception, match="ErrorIfExists"):
            writer().save()  # Spark's default mode
        assert server.requests == []


def marking(folder: str):
    """A mapInArrow function that leaves a file in ``folder`` for each task that runs it."""
    def mark_running(batches):
        from pyspark import TaskContext

        open(os.path.join(folder, str(TaskContext.get().partitionId())), "w").close()
        yield from batches
    return mark_running


def test_a_column_the_target_cannot_take_fails_before_any_task(spark, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    df = frame(spark).selectExpr("id", "emb", "map('k', id) as tags")
    df = df.mapInArrow(marking(str(marks)), df.schema)
    with LoopbackServer() as server:
        with pytest.raises(Exception, match="column 'tags' has Arrow type map"):
            (df.write.format("bulkwire").option("target", "ravendb")
             .option("url", server.url).option("database", server.database)
             .mode("append").save())
        assert server.requests == []
    assert os.listdir(marks) == []  # no task ran
    assert bulkwire.spark.last_result(spark) is None  # not an earlier write's
    # the same job without the column runs its tasks: the marks can appear
    with LoopbackServer() as server:
        (df.drop("tags").write.format("bulkwire").option("target", "ravendb")
         .option("url", server.url).option("database", server.database)
         .mode("append").save())
        assert len(server.documents) == ROWS
    assert sorted(os.listdir(marks)) == ["0", "1"]


@pytest.mark.skipif(not bulkwire.spark.STREAMING,
                    reason="this PySpark has no DataSourceStreamArrowWriter (PySpark >= 4.1)")
def test_streaming_from_parquet_files_each_micro_batch_committed_replay_idempotent(
        spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for f in range(3):
        pq.write_table(rows_of(range(f * 10, f * 10 + 10)), source / f"part-{f}.parquet")
    schema = spark.read.parquet(str(source)).schema

    def run(server, checkpoint):
        query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                 .parquet(str(source)).writeStream.format("bulkwire")
                 .option("target", "ravendb").option("url", server.url)
                 .option("database", server.database)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None

    with LoopbackServer() as server:
        run(server, tmp_path / "checkpoint-1")
        assert put_ids(server) == collections.Counter(f"embeddings/{i}" for i in range(30))
        result = bulkwire.spark.last_result(spark)
        assert result.committed and result.batch_id == 2 and result.rows == 10
        stored = {k: dict(v) for k, v in server.documents.items()}
        # the whole stream again (a new checkpoint: every micro-batch replayed) writes the
        # same documents under the same ids
        run(server, tmp_path / "checkpoint-2")
        assert put_ids(server) == collections.Counter(
            {f"embeddings/{i}": 2 for i in range(30)})
        assert {k: dict(v) for k, v in server.documents.items()} == stored


@pytest.mark.skipif(not bulkwire.spark.STREAMING,
                    reason="this PySpark has no DataSourceStreamArrowWriter (PySpark >= 4.1)")
def test_streaming_request_files_are_named_by_micro_batch_and_partition(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for f in range(2):
        pq.write_table(rows_of(range(f * 10, f * 10 + 10)), source / f"part-{f}.parquet")
    schema = spark.read.parquet(str(source)).schema
    out = tmp_path / "out"
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(str(source)).writeStream.format("bulkwire")
             .option("target", "request_file").option("out", str(out) + "/")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    assert sorted(os.listdir(out)) == ["part-00000-00000.bulk.json",
                                       "part-00001-00000.bulk.json"]
    # each micro-batch is one file of the source (which one first is Spark's choice): each
    # body is load_arrow's for its rows, and every row is in one body once
    ids = []
    for name in os.listdir(out):
        body = (out / name).read_bytes()
        these = sorted(int(c["Id"].split("/")[1]) for c in json.loads(body))
        expected = tmp_path / f"expected-{name}"
        bulkwire.load_arrow(rows_of(these), targets.request_file(expected))
        assert body == expected.read_bytes()
        ids += these
    assert sorted(ids) == list(range(20))


OVERLOADED, WRITE_TIMEOUT, INVALID_QUERY = 0x1001, 0x1100, 0x2200


def cql_error(code: int, message: str, extra: bytes = b"") -> tuple:
    raw = message.encode()
    return 0x00, struct.pack(">iH", code, len(raw)) + raw + extra


def key_of(body: bytes) -> int:
    return struct.unpack(">q", execute_values(body)[0])[0]


def test_cql_overloaded_and_timed_out_rows_are_retried_counted_and_stored_once(spark):
    seen: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def answer(n: int, body: bytes):
        key = key_of(body)
        with lock:
            seen[key] += 1
            first = seen[key] == 1
        if first and key % 3 == 0:
            return cql_error(OVERLOADED, "Server is in overloaded state")
        if first and key % 5 == 0:  # write timeout: consistency ONE, 0 of 1 acknowledged
            return cql_error(WRITE_TIMEOUT, "Operation timed out",
                             struct.pack(">Hii", 0x0001, 0, 1) + struct.pack(">H", 6) + b"SIMPLE")
        return None

    with EmulatedCluster(2) as cluster:
        for node in cluster.nodes:
            node.answer_execute = answer
        (frame(spark).select("id", "v").write.format("bulkwire").option("target", "cql")
         .option("hosts", cluster.contact(0)).option("keyspace", "ks").option("table", "t")
         .option("retries", "3").mode("append").save())
        assert cluster.stored == {i: f"v{i}" for i in range(ROWS)}
        assert sorted(k for node in cluster.nodes for k in node.rows) == list(range(ROWS))
    retried = [i for i in range(ROWS) if i % 3 == 0 or i % 5 == 0]
    assert all(seen[i] == (2 if i in retried else 1) for i in range(ROWS))
    result = bulkwire.spark.last_result(spark)
    assert (result.committed, result.rows, result.tasks) == (True, ROWS, 2)
    # each task's commit message counted its own retries; the commit summed them
    assert result.retries == len(retried)
    assert f"{len(retried)} retries" in result.summary()


def test_cql_a_failing_task_aborts_and_says_what_was_confirmed(spark, tmp_path):
    half = ROWS // 2
    done = tmp_path / "first-partition-stored"
    stored_first: set = set()
    lock = threading.Lock()

    def answer(n: int, body: bytes):
        key = key_of(body)
        if key == half + 3:  # a row of partition 1 the table refuses
            return cql_error(INVALID_QUERY, "refused row")
        if key < half:
            with lock:
                stored_first.add(key)
                if len(stored_first) == half:
                    done.touch()
        return None

    df = frame(spark).select("id", "v")
    df = df.mapInArrow(second_partition_after(str(done)), df.schema)
    with EmulatedCluster(1) as cluster:
        cluster.nodes[0].answer_execute = answer
        with pytest.raises(Exception, match="refused row") as raised:
            (df.write.format("bulkwire").option("target", "cql")
             .option("hosts", cluster.contact(0)).option("keyspace", "ks").option("table", "t")
             .mode("append").save())
        assert "partition 1" in str(raised.value)
        assert set(range(half)) <= set(cluster.stored)
        assert half + 3 not in cluster.stored
    result = bulkwire.spark.last_result(spark)
    assert not result.committed
    assert (result.partitions, result.rows, result.unconfirmed_tasks) == ([0], half, 1)
    assert "aborted: 1 task confirmed 20 rows (partitions 0), 1 task not" in result.summary()


def second_partition_after(marker: str):
    """A mapInArrow function whose partition 1 waits until the file ``marker`` exists (the
    test makes it once partition 0's rows are stored), and a moment more for that task to
    end."""
    def wait(batches):
        import time as time_

        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 1:
            deadline = time_.monotonic() + 120
            while not os.path.exists(marker) and time_.monotonic() < deadline:
                time_.sleep(0.1)
            time_.sleep(2)
        yield from batches
    return wait


@pytest.mark.skipif(not bulkwire.spark.STREAMING,
                    reason="this PySpark has no DataSourceStreamArrowWriter (PySpark >= 4.1)")
@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"),
                    reason="counts the workers' connections in /proc (Linux)")
def test_streaming_into_cql_keeps_one_session_per_worker_process(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    files = 3
    for f in range(files):
        ids = range(f * 10, f * 10 + 10)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "v": pa.array([f"v{i}" for i in ids])}),
                       source / f"part-{f}.parquet")
    schema = spark.read.parquet(str(source)).schema
    batches: list = []

    def run(cluster, checkpoint):
        query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                 .parquet(str(source)).writeStream.format("bulkwire")
                 .option("target", "cql").option("hosts", cluster.contact(0))
                 .option("keyspace", "ks").option("table", "t")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None
        batches.append(bulkwire.spark.last_result(spark))

    with EmulatedCluster(1) as cluster:
        node = cluster.nodes[0]
        run(cluster, tmp_path / "checkpoint-1")
        assert cluster.stored == {i: f"v{i}" for i in range(files * 10)}
        last = batches[-1]
        assert last.committed and last.batch_id == files - 1 and last.rows == 10
        # each worker process that ran a micro-batch's task holds one connection to the node,
        # its session's, open between micro-batches
        holding = connections_to(node.endpoint[1])
        assert set(last.pids) <= set(holding) and set(holding.values()) == {1}, holding
        # and made two: its first task read the table and the ring (one connection), then
        # opened the session (the node's own connection); the query's writer, made on the
        # driver, read the table once. Nothing more over the micro-batches.
        assert node.connections == 1 + 2 * len(holding), (node.connections, holding)
        # the stream again from its start (a new checkpoint: a new query): every micro-batch
        # replayed writes the same keys, through the sessions the worker processes kept
        before = node.connections
        run(cluster, tmp_path / "checkpoint-2")
        added = set(connections_to(node.endpoint[1])) - set(holding)
        assert node.connections == before + 1 + 2 * len(added)
        assert collections.Counter(node.rows) == collections.Counter(
            {i: 2 for i in range(files * 10)})
        assert cluster.stored == {i: f"v{i}" for i in range(files * 10)}


def connections_to(port: int) -> dict:
    """The processes holding an established TCP connection to ``port`` on loopback, with how
    many each holds (Linux: /proc/net/tcp and each process's descriptors)."""
    sockets = set()
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            if int(fields[2].split(":")[1], 16) == port and fields[3] == "01":
                sockets.add(f"socket:[{fields[9]}]")
    held: collections.Counter = collections.Counter()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                    held[int(pid)] += 1
        except OSError:  # a process that ended meanwhile, or not ours
            continue
    return dict(held)


def test_a_kept_cql_session_serves_the_next_task_and_a_forked_child_opens_its_own():
    """A streaming task's session (``_write`` with ``keep``, called here outside Spark) is
    kept for the process's next task; a child forked while another thread holds the kept
    sessions' lock opens its own, and the parent's goes on serving; at exit they close."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from forked import forked_child_exit_code

    from bulkwire import _spark_kept, _spark_options, _spark_tasks

    schema = StructType([StructField("id", LongType()), StructField("v", StringType())])

    def rows(first: int) -> list:
        ids = list(range(first, first + 5))
        return [pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64()),
                                            "v": [f"v{i}" for i in ids]})]

    with EmulatedCluster(1) as cluster:
        node = cluster.nodes[0]
        job = _spark_options._job({"target": "cql", "hosts": cluster.contact(0),
                                   "keyspace": "ks", "table": "t"}, schema, False, True, None)
        assert node.connections == 1  # the driver's judgement read the table
        try:
            assert _spark_tasks._write(job, iter(rows(0)), keep=True).rows == 5
            assert node.connections == 3  # the table and the ring read, the node's own
            assert _spark_tasks._write(job, iter(rows(5)), keep=True).rows == 5
            assert node.connections == 3  # the same session

            def in_the_child():
                if _spark_tasks._write(job, iter(rows(10)), keep=True).rows != 5:
                    raise AssertionError("rows")

            assert forked_child_exit_code(_spark_kept, "_kept_lock", in_the_child) == 0
            assert node.connections == 5  # the child's own two
            assert _spark_tasks._write(job, iter(rows(15)), keep=True).rows == 5
            assert node.connections == 5  # the parent's session went on
            assert cluster.stored == {i: f"v{i}" for i in range(20)}
        finally:
            _spark_kept._close_kept()
        assert _spark_tasks._write(job, iter(rows(20)), keep=True).rows == 5
        assert node.connections == 7  # closed at exit: a new session, the table read again
        _spark_kept._close_kept()
