"""Client CPU per row of a Spark job writing into a CQL table, three ways, into the same
emulated node (``tests/cql_driver_node.py``: one node of ``ks.t (id bigint PRIMARY KEY, v
text)``, or with ``--dim N`` of ``ks.t (id bigint PRIMARY KEY, emb vector<float, N>)``, run
in a process of its own, so that serving is not counted):

- ``load_parquet``: ``bulkwire.load_parquet`` of the Parquet file, in this process, without
  Spark: the CPU time of this process (every thread) over the load;
- ``spark``: the same rows (the same file, as ``--parts`` files) read by ``spark.read.parquet``
  and written by the ``bulkwire`` data source (``bulkwire.spark``); the CPU time of the
  Python workers' write tasks, each measured by the task (``TaskWritten.cpu_seconds``: reading
  its Arrow batches from Spark, encoding, sending) and summed by the job's commit;
- ``driver``: the same DataFrame written the way users write it with the Python driver
  (scylla-driver or cassandra-driver): ``foreachPartition``, a ``Cluster`` per partition, the
  INSERT prepared, ``execute_concurrent_with_args`` over the partition's rows (a vector as
  Spark's ``Row`` hands it: a Python list of floats, serialized by the driver's own
  ``VectorType``); the CPU time
  of each partition's function (``time.process_time``: the worker process, every thread,
  the driver's event loop included) summed through an accumulator.

The figure is CPU seconds per row, not wall time: the machine may be shared, and CPU time
is what a cluster pays. The JVM's own CPU (reading the Parquet files, handing rows to
Python) is not counted for either Spark contender. Every run must store every row.
Contenders run once untimed (imports, the Python workers started), then in ``--rounds``
interleaved rounds whose order rotates; printed: each round's figures with the load
average, then the medians of the per-round ratios ``spark / load_parquet`` (goal: at most
1.5) and ``driver / spark`` (goal: at least 20).

    python benchmarks/bench_spark.py --rows 20000 --rounds 3
    python benchmarks/bench_spark.py --rows 20000 --rounds 3 --dim 768
    python benchmarks/bench_spark.py --rows 1000000 --driver-rows 100000 --dim 768

``--driver-rows N``: the driver path, which is slow, loads the first N rows only (its CPU
per row set against the others' at ``--rows``).

The driver connects with ``protocol_version=4``, no compression, no schema or token
metadata: what the emulated node answers (less start-up work than against a real node).
Needs pyspark, a Java runtime and scylla-driver (or cassandra-driver).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _common import commit, print_command, split_parquet  # noqa: E402  (also puts the checkout's bulkwire first)
from _rounds import load_average, median_ratio, rotation

import bulkwire  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


def serve_emulated_node(dimension: int | None) -> None:
    """``--serve``: one emulated node the driver can use too; prints ``HOST:PORT`` and the
    rows it stored when asked (a line ``count`` on stdin), until stdin ends."""
    sys.path.insert(0, TESTS)
    from cql_driver_node import DriverCluster

    with DriverCluster(dimension) as cluster:
        print(cluster.contact(0), flush=True)
        for line in sys.stdin:
            if line.strip() == "count":
                node = cluster.nodes[0]
                print(f"{len(node.rows)} {len(cluster.stored)}", flush=True)


class Node:
    """The emulated node in a process of its own."""

    def __init__(self, dimension: int) -> None:
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                                         "--dim", str(dimension)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
        self.contact = self.process.stdout.readline().strip()
        if not self.contact:
            raise SystemExit("the emulated CQL node did not start")

        self.executed = 0  # the EXECUTEs it stored, when last asked

    def check(self, name: str, rows: int, expected: int) -> None:
        """Exits unless the run ``name`` reported ``expected`` rows and the node stored as
        many since the last check."""
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        executed = int(self.process.stdout.readline().split()[0])
        stored, self.executed = executed - self.executed, executed
        if rows != expected or stored != expected:
            raise SystemExit(f"{name}: {rows} rows reported, {stored} stored, of {expected}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def prepare(folder: str, rows: int, text_bytes: int, parts: int, dimension: int,
            driver_rows: int | None = None) -> tuple[str, str, str]:
    """(one Parquet file of ``rows`` rows: id, v (or id, emb: ``dimension`` float32s), the
    directory of the same rows as ``parts`` files, the directory of the first
    ``driver_rows`` of them as ``parts`` files: the same directory when that is all)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = np.arange(rows, dtype=np.int64)
    if dimension:
        values = np.random.default_rng(7).standard_normal((rows, dimension), dtype=np.float32)
        table = pa.table({"id": ids, "emb": pa.FixedSizeListArray.from_arrays(
            pa.array(values.ravel()), dimension)})
    else:
        pad = "x" * max(text_bytes - 8, 0)
        table = pa.table({"id": ids, "v": pa.array([f"{i:08d}{pad}" for i in range(rows)])})
    single = os.path.join(folder, "rows.parquet")
    pq.write_table(table, single, row_group_size=4096)
    directory = split_parquet(table, folder, parts)
    if driver_rows is None or driver_rows >= rows:
        return single, directory, directory
    return single, directory, split_parquet(table.slice(0, driver_rows), folder, parts,
                                            name="first")


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def driver_partition(contact: str, rows_counted, cpu_counted, concurrency: int, column: str):
    """The ``foreachPartition`` function of the driver path (``column``: the second
    column's name; its values bound as the ``Row`` holds them)."""
    host, port = contact.rsplit(":", 1)

    def write(rows) -> None:
        import time as time_

        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.concurrent import execute_concurrent_with_args
        from cassandra.policies import RoundRobinPolicy

        began = time_.process_time()
        profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy())
        cluster = Cluster([host], port=int(port), protocol_version=4, compression=False,
                          schema_metadata_enabled=False, token_metadata_enabled=False,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            session = cluster.connect()
            insert = session.prepare(f"INSERT INTO ks.t (id, {column}) VALUES (?, ?)")
            params = [(row[0], row[1]) for row in rows]
            execute_concurrent_with_args(session, insert, params, concurrency=concurrency,
                                         raise_on_first_error=True)
        finally:
            cluster.shutdown()
        rows_counted.add(len(params))
        cpu_counted.add(time_.process_time() - began)
    return write


class Bench:
    def __init__(self, single: str, directory: str, first: str, node: Node, concurrency: int,
                 column: str) -> None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")) if p)
        from pyspark.sql import SparkSession

        import bulkwire.spark

        self.spark = (SparkSession.builder.master("local[2]").appName("bench_spark")
                      .config("spark.ui.enabled", "false")
                      .config("spark.driver.host", "127.0.0.1")
                      .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        self.spark.sparkContext.setLogLevel("ERROR")
        bulkwire.spark.register(self.spark)
        self.single, self.directory, self.first, self.node = single, directory, first, node
        self.concurrency, self.column = concurrency, column
        logging_quiet()

    def load_parquet(self) -> tuple[int, float]:
        from bulkwire import targets

        before = _cpu_self()
        rows = bulkwire.load_parquet(self.single, targets.cql(
            self.node.contact, keyspace="ks", table="t"), progress=False).rows
        return rows, _cpu_self() - before

    def spark_source(self) -> tuple[int, float]:
        import bulkwire.spark

        (self.spark.read.parquet(self.directory).write.format("bulkwire")
         .option("target", "cql").option("hosts", self.node.contact)
         .option("keyspace", "ks").option("table", "t").mode("append").save())
        result = bulkwire.spark.last_result(self.spark)
        return result.rows, result.cpu_seconds

    def driver(self) -> tuple[int, float]:
        context = self.spark.sparkContext
        rows, cpu = context.accumulator(0), context.accumulator(0.0)
        self.spark.read.parquet(self.first).foreachPartition(
            driver_partition(self.node.contact, rows, cpu, self.concurrency, self.column))
        return rows.value, cpu.value

    def close(self) -> None:
        self.spark.stop()


def logging_quiet() -> None:
    import logging

    quiet = logging.getLogger("bulkwire.spark")  # the commits' lines: not on stderr
    quiet.addHandler(logging.NullHandler())
    quiet.setLevel(logging.INFO)
    logging.getLogger("cassandra").setLevel(logging.ERROR)


def _print_round(round_index: int, name: str, rows: int, cpu: float, wall: float) -> None:
    """One contender's run of a round: CPU per row, wall time, rate, the load average."""
    print(f"  round {round_index + 1} {name:12s} {cpu / rows * 1e6:9.2f} µs CPU per row  "
          f"{wall:6.2f} s wall  {rows / wall:>9,.0f} rows/s  (load average {load_average()})",
          flush=True)


def measure(rows: int, rounds: int, dim: int = 0, text_bytes: int = 64, parts: int = 2,
            concurrency: int = 64, driver_rows: int | None = None) -> dict:
    """Runs the three contenders (one warm-up run each, then ``rounds`` interleaved rounds)
    and prints each round and the medians; returns ``{"cpu_per_row": {name: [...]}, "wall":
    {name: [...]}, "rows": {name: rows}, "spark / load_parquet": median ratio, "driver /
    spark": median ratio}``. ``driver_rows``: the driver path loads only the first
    ``driver_rows`` rows (a size it can do in the time; None: all): its CPU per row is set
    against the others' at ``rows``. Used by ``bench_engines.py --engines spark``."""
    value = f"vector<float, {dim}>" if dim else f"{text_bytes}-byte text"
    measured = commit()  # the code measured, named once (the tree may move on meanwhile)
    driver_rows = min(driver_rows or rows, rows)
    print(f"commit {measured}, {os.cpu_count()} cores, {rows:,} rows (bigint id, {value})"
          + (f", the driver path {driver_rows:,} of them" if driver_rows != rows else "")
          + f", {parts} Spark partitions, local[2]", flush=True)
    node = Node(dim)
    expected = {"load_parquet": rows, "spark": rows, "driver": driver_rows}
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as folder:
        single, directory, first = prepare(folder, rows, text_bytes, parts, dim, driver_rows)
        bench = Bench(single, directory, first, node, concurrency, "emb" if dim else "v")
        contenders = {"load_parquet": bench.load_parquet, "spark": bench.spark_source,
                      "driver": bench.driver}
        try:
            for name, run in contenders.items():  # warm-up: imports, workers, connections
                node.check(name, run()[0], expected[name])
            per_row: dict = {name: [] for name in contenders}
            walls: dict = {name: [] for name in contenders}
            names = list(contenders)
            for round_index, name in rotation(names, rounds):
                began = time.perf_counter()
                done, cpu = contenders[name]()
                wall = time.perf_counter() - began
                node.check(name, done, expected[name])
                per_row[name].append(cpu / done)
                walls[name].append(wall)
                _print_round(round_index, name, done, cpu, wall)
        finally:
            bench.close()
            node.close()
    spark_vs_plain = median_ratio(per_row["spark"], per_row["load_parquet"])
    driver_vs_spark = median_ratio(per_row["driver"], per_row["spark"])
    print(f"median of {rounds} rounds (commit {measured}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    for name in names:
        wall = statistics.median(walls[name])
        print(f"  {name:12s} {statistics.median(per_row[name]) * 1e6:9.2f} µs CPU per row  "
              f"{wall:7.2f} s wall  {expected[name] / wall:>9,.0f} rows/s  "
              f"({expected[name]:,} rows)")
    print(f"  spark / load_parquet CPU per row: {spark_vs_plain:.2f}x (goal <= 1.5; per round "
          f"{', '.join(f'{s / p:.2f}' for s, p in zip(per_row['spark'], per_row['load_parquet']))})")
    print(f"  driver / spark CPU per row: {driver_vs_spark:.1f}x (goal >= 20; per round "
          f"{', '.join(f'{d / s:.1f}' for d, s in zip(per_row['driver'], per_row['spark']))})",
          flush=True)
    return {"cpu_per_row": per_row, "wall": walls, "rows": expected,
            "spark / load_parquet": spark_vs_plain, "driver / spark": driver_vs_spark}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--text-bytes", type=int, default=64, help="bytes of each row's v")
    parser.add_argument("--dim", type=int, default=0,
                        help="rows of id + emb vector<float, DIM> (0: id + v text)")
    parser.add_argument("--parts", type=int, default=2, help="files (Spark partitions)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64,
                        help="execute_concurrent's requests in flight (the driver path)")
    parser.add_argument("--driver-rows", type=int, default=None,
                        help="the driver path loads only the first N rows (default: all)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_emulated_node(args.dim or None)
        return
    print_command()
    measure(args.rows, args.rounds, dim=args.dim, text_bytes=args.text_bytes, parts=args.parts,
            concurrency=args.concurrency, driver_rows=args.driver_rows)


if __name__ == "__main__":
    main()
