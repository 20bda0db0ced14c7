"""What a distributed engine's overhead costs: the same rows bulk inserted by plain
``load_parquet`` (what ``bulkwire load --url`` runs: one process, one request), by Dask
(``bulkwire.dask.to_bulk_insert``; a ``LocalCluster`` of 2 worker processes, one thread each)
by Ray (``bulkwire.ray.BulkInsertDatasink``; ``ray.init(num_cpus=2)``) and by Spark (the
``bulkwire`` data source of ``bulkwire.spark``; a ``local[2]`` session), into the loopback
server (``bulkwire.testing``, counting only) in a process of its own.

The data: one seeded Parquet file (int64 id, fixed_size_list<float32>[dim]) for
``load_parquet``, and the same rows as ``--parts`` Parquet files in a directory for the
engines (read with ``dd.read_parquet(dtype_backend="pyarrow")`` and ``ray.data.read_parquet``,
one partition per file; ``spark.read.parquet``, which groups small files into partitions). Each contender's run must report every row. The clusters are
started once, before the rounds (their start-up time is printed, not counted: a user's
cluster is already up). Rounds are interleaved, the order rotating each round; the result
is the median of the per-round ratios (engine rows/s over load_parquet's in the same round),
printed with the load average and the commit. "<engine> no-op" runs the same read and tasks
with a sink that only converts the partition to Arrow and counts its rows: the engine's own
cost, with no bulk insert.

    python benchmarks/bench_engines.py                       # 200,000 x 128, 5 rounds
    python benchmarks/bench_engines.py --rows 20000 --rounds 1 --engines dask   # a smoke run
    python benchmarks/bench_engines.py --engines dask,ray,spark    # Spark too (a Java runtime)
    python benchmarks/bench_engines.py --engines spark-cql --rows 1000000 --dim 768 \
        --rounds 3 --parts 2 --driver-rows 100000

``spark-cql`` measures Spark into a CQL table instead, as ``bench_spark.py`` does (its code):
client CPU per row, wall time and rows/s of ``load_parquet``, the ``bulkwire`` data source,
and the Python driver's ``foreachPartition`` job, into the emulated CQL node (a table of
``id bigint``, ``emb vector<float, dim>``) in a process of its own; the medians of the
per-round ratios of CPU per row against the goals (the data source within 1.5x of
``load_parquet``; the driver path at least 20x the data source's). ``--driver-rows N``: the
driver path, slow, loads the first N rows only. Needs scylla-driver (or cassandra-driver).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from _common import commit, loopback_server, print_command, split_parquet  # noqa: E402  (also puts the checkout's bulkwire first)

import bulkwire  # noqa: E402

# the engines' worker processes import the same bulkwire as this process
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")) if p)




def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def prepare(folder: str, rows: int, dim: int, parts: int) -> tuple[str, str]:
    """(the single file, the directory of ``parts`` files holding the same rows)."""
    import pyarrow.parquet as pq

    from bulkwire.parquet import sample_parquet

    single = os.path.join(folder, f"engines-{rows}x{dim}.parquet")
    sample_parquet(single, rows=rows, dim=dim, seed=42, row_group_rows=4096)
    return single, split_parquet(pq.read_table(single), folder, parts)


class Plain:
    name = "load_parquet"

    def __init__(self, single: str, directory: str, url: str) -> None:
        self.single, self.url = single, url

    def run(self) -> int:
        return bulkwire.load_parquet(self.single, url=self.url, database="bench").rows

    def close(self) -> None:
        pass


class Dask:
    name = "dask"

    def __init__(self, single: str, directory: str, url: str) -> None:
        import dask.dataframe as dd
        from distributed import Client, LocalCluster

        import bulkwire.dask

        start = time.perf_counter()
        self.cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                    dashboard_address=None)
        self.client = Client(self.cluster)
        where = set(self.client.run(lambda: __import__("bulkwire.dask").__file__).values())
        if where != {bulkwire.__file__}:
            raise SystemExit(f"Dask's workers import another bulkwire: {where}")
        self.startup = time.perf_counter() - start
        self.ddf = dd.read_parquet(directory, dtype_backend="pyarrow")
        self.to_bulk_insert, self.url = bulkwire.dask.to_bulk_insert, url

    def run(self) -> int:
        return self.to_bulk_insert(self.ddf, self.url, "bench").rows

    def run_engine_only(self) -> int:
        """The same partitions converted to Arrow as the sink converts them, and counted:
        what Dask costs before any bulk insert."""
        import pandas as pd
        import pyarrow as pa

        counted = self.ddf.map_partitions(
            lambda frame: pd.Series([pa.Table.from_pandas(frame, preserve_index=False).num_rows]),
            meta=(None, "int64"), enforce_metadata=False).compute()
        return int(counted.sum())

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def _counting_datasink():
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class CountingDatasink(Datasink):
        rows = 0

        def write(self, blocks, ctx):
            return sum(BlockAccessor.for_block(b).to_arrow().num_rows for b in blocks)

        def on_write_complete(self, write_result):
            self.rows = sum(write_result.write_returns)

    return CountingDatasink()


class EngineOnly:
    """An engine's run without the bulk insert (its scheduling, reading and data movement)."""

    def __init__(self, engine) -> None:
        self.engine, self.name = engine, engine.name + " no-op"

    def run(self) -> int:
        return self.engine.run_engine_only()

    def close(self) -> None:
        pass


class Ray:
    name = "ray"

    def __init__(self, single: str, directory: str, url: str) -> None:
        import ray
        import ray.data

        import bulkwire.ray

        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=200 << 20, logging_level="warning")
        ray.data.DataContext.get_current().enable_progress_bars = False
        where = ray.get(ray.remote(lambda: __import__("bulkwire.ray").__file__).remote())
        if where != bulkwire.__file__:
            raise SystemExit(f"Ray's workers import another bulkwire: {where}")
        self.startup = time.perf_counter() - start
        self.ray, self.directory, self.url = ray, directory, url
        self.sink_class = bulkwire.ray.BulkInsertDatasink

    def run(self) -> int:
        sink = self.sink_class(self.url, "bench")
        self.ray.data.read_parquet(self.directory).write_datasink(sink)
        return sink.result.rows

    def run_engine_only(self) -> int:
        """The same read and write tasks with a sink that only counts the Arrow rows: what
        Ray costs before any bulk insert."""
        counter = _counting_datasink()
        self.ray.data.read_parquet(self.directory).write_datasink(counter)
        return counter.rows

    def close(self) -> None:
        self.ray.shutdown()


def _arrow_rows(batches):
    """A mapInArrow function: the rows of a partition's Arrow batches, counted."""
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"rows": [sum(batch.num_rows for batch in batches)]})


class Spark:
    name = "spark"

    def __init__(self, single: str, directory: str, url: str) -> None:
        import sys

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this Python
        from pyspark.sql import SparkSession

        import bulkwire.spark

        start = time.perf_counter()
        self.spark = (SparkSession.builder.master("local[2]").appName("bench_engines")
                      .config("spark.ui.enabled", "false")
                      .config("spark.driver.host", "127.0.0.1").getOrCreate())
        self.spark.sparkContext.setLogLevel("ERROR")
        bulkwire.spark.register(self.spark)
        where = self.spark.sparkContext.parallelize([0], 1).map(
            lambda _: __import__("bulkwire.spark").__file__).collect()[0]
        if where != bulkwire.__file__:
            raise SystemExit(f"Spark's workers import another bulkwire: {where}")
        self.startup = time.perf_counter() - start
        self.directory, self.url = directory, url
        self.last_result = bulkwire.spark.last_result

    def run(self) -> int:
        (self.spark.read.parquet(self.directory).write.format("bulkwire")
         .option("target", "ravendb").option("url", self.url).option("database", "bench")
         .mode("append").save())
        return self.last_result(self.spark).rows

    def run_engine_only(self) -> int:
        """The same read, its partitions handed to Python workers as Arrow batches, as the
        data source's write tasks receive them, and counted: what Spark costs before any
        bulk insert."""
        counted = (self.spark.read.parquet(self.directory).mapInArrow(_arrow_rows, "rows long")
                   .groupBy().sum("rows").collect())
        return int(counted[0][0])

    def close(self) -> None:
        self.spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--parts", type=int, default=8, help="files (partitions) for the engines")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engines", default="dask,ray",
                        help="comma-separated: dask, ray, spark (bulk insert), spark-cql")
    parser.add_argument("--driver-rows", type=int, default=None,
                        help="spark-cql: the driver path loads only the first N rows")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - {"dask", "ray", "spark", "spark-cql"}
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")

    print_command()
    if "spark-cql" in engines:
        engines.remove("spark-cql")
        import bench_spark

        print("Spark into a CQL table (emulated node): client CPU per row")
        bench_spark.measure(args.rows, args.rounds, dim=args.dim, parts=args.parts,
                            driver_rows=args.driver_rows)
        if not engines:
            return
    print(f"commit {commit()}, {os.cpu_count()} cores, {args.rows:,} rows x {args.dim} float32, "
          f"{args.parts} files for the engines")
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as folder, loopback_server() as url:
        single, directory = prepare(folder, args.rows, args.dim, args.parts)
        contenders = [Plain(single, directory, url)]
        try:
            for name in engines:
                engine = {"dask": Dask, "ray": Ray, "spark": Spark}[name](single, directory, url)
                print(f"{name}: cluster up in {engine.startup:.1f} s (not counted)")
                contenders.append(engine)
                contenders.append(EngineOnly(engine))
            for contender in contenders:  # warm-up: imports, first connections, page cache
                if contender.run() != args.rows:
                    raise SystemExit(f"{contender.name}: not every row was loaded")
            rates: dict = {c.name: [] for c in contenders}
            ratios: dict = {c.name: [] for c in contenders[1:]}
            for round_index in range(args.rounds):
                shift = round_index % len(contenders)
                order = contenders[shift:] + contenders[:shift]
                this_round = {}
                for contender in order:
                    start = time.perf_counter()
                    rows = contender.run()
                    seconds = time.perf_counter() - start
                    if rows != args.rows:
                        raise SystemExit(f"{contender.name}: {rows} of {args.rows} rows loaded")
                    this_round[contender.name] = rows / seconds
                    rates[contender.name].append(rows / seconds)
                    print(f"  round {round_index + 1} {contender.name:12s} {rows / seconds:>12,.0f} rows/s"
                          f"  (load average {load_average()})")
                for name in ratios:
                    ratios[name].append(this_round[name] / this_round["load_parquet"])
        finally:
            for contender in contenders:
                contender.close()
    print(f"median of {args.rounds} rounds (commit {commit()}, load average {load_average()}):")
    print(f"  {'load_parquet':12s} {statistics.median(rates['load_parquet']):>12,.0f} rows/s")
    for name, values in ratios.items():
        print(f"  {name:12s} {statistics.median(rates[name]):>12,.0f} rows/s  "
              f"{statistics.median(values):.2f}x load_parquet (median of per-round ratios)")


if __name__ == "__main__":
    main()
