"""Rate limits and rejected rows of the engine sinks (bulkwire.spark, bulkwire.dask): a rate
limit is the whole write's, divided among the tasks that run at once, and measured here where
the rows arrive; with ``max_errors``, each task that rejected rows writes them to its own
``part-<task>.parquet`` in the ``rejected`` directory, and every good row is stored."""
from __future__ import annotations

import os
import struct
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
from bulkwire import LoadOptions, targets
from bulkwire._arrow_sink import SinkConfig, rate_share
from cql_fake_node import BIGINT, INT, FakeNode, error, execute_values

ASCII = 0x0001
ROWS = 120
#: ids whose row the client refuses: a null id (here, the row's v says which) and text that
#: is not ASCII; and the ids the node refuses
NULL_ID = {7, 67}
NOT_ASCII = {11, 71, 101}
REFUSED = {i for i in range(ROWS) if i % 20 == 3}
BAD = NULL_ID | NOT_ASCII | REFUSED


class RefusingNode(FakeNode):
    """``ks.t (id bigint, v int, a ascii)``: refuses (Invalid) each id in ``refused``,
    records every other row's v once per EXECUTE, with when it came."""

    def __init__(self, refused: set = REFUSED) -> None:
        self.refused = refused
        self.stored: list[int] = []
        self.times: list[float] = []
        self.record = threading.Lock()
        super().__init__(columns=[("id", "partition_key", BIGINT), ("v", "regular", INT),
                                  ("a", "regular", ASCII)], answer_execute=self._answer_row)

    def _answer_row(self, n: int, body: bytes):
        values = execute_values(body)
        (row_id,) = struct.unpack(">q", values[0])
        if row_id in self.refused:
            return error(0x2200, f"id {row_id} is not welcome")
        with self.record:
            self.stored.append(struct.unpack(">i", values[1])[0])
            self.times.append(time.monotonic())
        return None


def bad_rows() -> pa.Table:
    v = list(range(ROWS))
    return pa.table({"id": pa.array([None if i in NULL_ID else i for i in v], pa.int64()),
                     "v": pa.array(v, pa.int32()),
                     "a": pa.array(["caf\u00e9" if i in NOT_ASCII else "ok" for i in v])})


def assert_rejected_once(folder: str, tasks: int) -> int:
    """Every bad row in exactly one task's file, no good row in any; the rows counted."""
    files = sorted(os.listdir(folder))
    assert files and all(f.startswith("part-") and f.endswith(".parquet") for f in files)
    assert len(files) <= tasks
    rows = [row for f in files for row in pq.read_table(os.path.join(folder, f)).to_pylist()]
    assert sorted(row["v"] for row in rows) == sorted(BAD)
    reasons = {row["v"]: row["_reason"] for row in rows}
    assert all("not welcome" in reasons[i] for i in REFUSED)
    assert all("null" in reasons[i] for i in NULL_ID)
    assert all("ASCII" in reasons[i] for i in NOT_ASCII)
    return len(rows)


def test_a_rate_limit_is_shared_by_the_tasks_that_run_at_once():
    options = LoadOptions(max_rows_per_second=1000, max_bytes_per_second=1 << 20)
    shared = rate_share(options, 4)
    assert (shared.max_rows_per_second, shared.max_bytes_per_second) == (250, 1 << 18)
    assert rate_share(options, 1) is options
    assert rate_share(LoadOptions(max_rows_per_second=3), 8).max_rows_per_second == 1
    config = SinkConfig(url="http://127.0.0.1:9", database="db", options=options)
    assert config.per_task(2).options.max_rows_per_second == 500


@pytest.mark.parametrize("fields, message", [({"dry_run": True}, "dry_run is not an option"),
                                             ({"report": "run.json"}, "report is a load's own")])
def test_the_sinks_refuse_a_dry_run_and_a_report(fields, message):
    with pytest.raises(ValueError, match=message):
        SinkConfig(url="http://127.0.0.1:9", database="db", options=LoadOptions(**fields))


def test_a_rejected_file_is_refused_where_a_directory_is_needed(tmp_path):
    taken = tmp_path / "bad.parquet"
    taken.write_bytes(b"")
    with pytest.raises(ValueError, match="rejected must be a directory"):
        SinkConfig(url="http://127.0.0.1:9", database="db",
                   options=LoadOptions(max_errors=5, rejected=str(taken)))


# ---------------------------------------------------------------------------- Dask

def test_dask_rejected_rows_land_once_in_each_partitions_file(tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import bulkwire.dask

    frame = bad_rows().to_pandas(types_mapper=pd.ArrowDtype)
    ddf = dd.from_pandas(frame, npartitions=3, sort=False)
    folder = str(tmp_path / "rejected")
    with RefusingNode() as node:
        result = bulkwire.dask.to_target(ddf, targets.cql(node.address, "ks", "t"),
                                         max_errors=len(BAD), rejected=folder,
                                         compute_kwargs={"scheduler": "threads"})
    assert sorted(set(node.stored)) == sorted(set(range(ROWS)) - BAD)
    assert result.rows == ROWS - len(BAD)
    assert result.rejected_rows == assert_rejected_once(folder, 3) == len(BAD)


def test_dask_max_errors_applies_to_each_partition(tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import bulkwire.dask
    from bulkwire.load.rejects import TooManyRejected

    ddf = dd.from_pandas(bad_rows().to_pandas(types_mapper=pd.ArrowDtype), npartitions=3,
                         sort=False)
    folder = tmp_path / "r"
    with RefusingNode() as node, pytest.raises(TooManyRejected):
        # no partition may reject more than 2 rows: each of the three has 3 or 4 bad ones
        bulkwire.dask.to_target(ddf, targets.cql(node.address, "ks", "t"), max_errors=2,
                                rejected=str(folder), compute_kwargs={"scheduler": "sync"})
    # the failed partition's rows rejected before it stopped (more than 2), in its own file
    (name,) = os.listdir(folder)
    assert name in {f"part-{p}.parquet" for p in range(3)}
    kept = pq.read_table(folder / name).column("v").to_pylist()
    assert len(kept) > 2 and set(kept) <= BAD


# ---------------------------------------------------------------------------- Spark

@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    from _spark_session import spark_session

    session = spark_session(str(tmp_path_factory.mktemp("spark")))
    try:
        yield session
    finally:
        session.stop()


def test_spark_rejected_rows_land_once_in_each_tasks_file(spark, tmp_path):
    import bulkwire.spark

    folder = str(tmp_path / "rejected")
    frame = spark.createDataFrame(bad_rows().to_pylist(), "id bigint, v int, a string"
                                  ).repartition(3)
    with RefusingNode() as node:
        (frame.write.format("bulkwire").option("target", "cql").option("hosts", node.address)
         .option("keyspace", "ks").option("table", "t").option("max_errors", str(len(BAD)))
         .option("rejected", folder).mode("append").save())
    assert sorted(set(node.stored)) == sorted(set(range(ROWS)) - BAD)
    result = bulkwire.spark.last_result(spark)
    assert result.committed and result.rows == ROWS - len(BAD)
    assert result.rejected_rows == assert_rejected_once(folder, 3) == len(BAD)
    assert f"{len(BAD)} rejected rows" in result.summary()


def test_spark_refuses_a_dry_run_and_a_report_naming_them(spark, tmp_path):
    for name, message in (("dry_run", "dry_run is not an option of the bulkwire data source"),
                          ("report", "report is a load's own")):
        with pytest.raises(Exception, match=message):
            (spark.range(3).write.format("bulkwire").option("target", "cql")
             .option("hosts", "127.0.0.1:9").option("keyspace", "ks").option("table", "t")
             .option(name, "true" if name == "dry_run" else str(tmp_path / "r.json"))
             .mode("append").save())


def test_spark_rate_limit_is_the_whole_writes_at_the_receiving_end(spark):
    """2 partitions, run at once (local[2]): 1,200 rows at 600 rows/s take about 2 s; the
    node sees at most the limit (each task at the limit would make it twice that)."""
    import bulkwire.spark

    limit, rows = 600, 1200
    assert spark.sparkContext.defaultParallelism == 2
    frame = spark.range(0, rows, 1, numPartitions=2).selectExpr(
        "id", "cast(id as int) as v", "'ok' as a")
    with RefusingNode(refused=set()) as node:
        (frame.write.format("bulkwire").option("target", "cql").option("hosts", node.address)
         .option("keyspace", "ks").option("table", "t")
         .option("max_rows_per_second", str(limit)).mode("append").save())
        times = sorted(node.times)
    assert bulkwire.spark.last_result(spark).rows == len(times) == rows
    # over the whole run and over its second half (a load may start with a quarter of a
    # second's credit: the margin; each task at the whole limit would double the rate)
    span = times[-1] - times[0]
    assert (len(times) - 1) / span <= limit * 1.25, (len(times), span)
    half = times[len(times) // 2:]
    assert (len(half) - 1) / (half[-1] - half[0]) <= limit * 1.3
