"""Parquet of ids and 768-dimension float32 vectors into one Cassandra/Scylla node, four ways:

- ``driver``: what VectorDBBench's Cassandra client does: the file read with pyarrow, the
  rows as Python lists, the INSERT prepared once, ``execute_concurrent_with_args``;
- ``driver+install``: the same with ``bulkwire.cql.install()`` (the driver's VectorType
  serialization done by bulkwire);
- ``bulkwire``: ``bulkwire.load_parquet(path, bulkwire.targets.cql(...))``: connect, schema,
  PREPARE, the ring, the file read, the bodies written, every row sent and acknowledged;
  with ``--tree NAME=PATH`` (repeatable), one ``bulkwire@NAME`` contender per build instead,
  each run with that build's package (``_trees.py``; a build from before targets were values
  runs ``bulkwire.cql.load_parquet``);
- ``ceiling``: the node's ceiling for this client: every EXECUTE body written in advance
  (``_core.cql_execute_bodies``, not timed) and replayed through ``_core.CqlConnection``;
- ``ceiling+read`` (only with ``--only``): the same replay while another thread of the same
  process reads the file again and writes every body once more, discarding them: the
  loader's own work beside a sender that never waits for it. Where the loader falls short of
  the ceiling by about as much as this does, the gap is the loader's CPU taken from the node
  on shared cores, not the loader's pipeline.

Every run is a fresh process (nothing warm is shared) that times its own load: wall seconds
and CPU seconds of the process (every thread), from which rows/s and client CPU µs per row.
The modules a contender uses (numpy, pyarrow, the driver, bulkwire) are imported before its
clock starts, as the ceiling's are: a process imports them once, whatever it loads.
Rounds are interleaved, the order rotating each round (``_rounds.rotation``); the table is
truncated before each run. Reports the median of each, the median of the per-round ratios
of each contender's rate to the ceiling's, each build's rate and client CPU per row against
the baseline build's (medians of per-round ratios), and the load average.

    python benchmarks/bench_cql_load.py --host 127.0.0.1 --rows 100000 --rounds 3
    python benchmarks/bench_cql_load.py --rows 100000 --rounds 5 --only bulkwire,ceiling \
        --tree before=../before/pkg --tree after=pkg

needs a node at ``--host`` (``tests/servers/cassandra`` starts one: ``python -m
servers.cassandra`` from tests/), numpy, pyarrow and scylla-driver (or cassandra-driver).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common  # noqa: F401 - the checkout's bulkwire when built in place (not a --tree's child's)
import _trees
from _rounds import load_average, rotation

KEYSPACE = "bulkwire_bench"
TABLE = "vectors"
CONTENDERS = ["driver", "driver+install", "bulkwire", "ceiling"]


def write_file(path: str, rows: int, dim: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = np.random.default_rng(7).standard_normal((rows, dim), dtype=np.float32)
    pq.write_table(pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)),
                             "emb": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()),
                                                                      dim)}),
                   path, row_group_size=10_000)


def driver_session(host: str, port: int):
    from cassandra.cluster import Cluster

    cluster = Cluster([host], port=port)
    return cluster, cluster.connect()


def run_driver(path: str, host: str, port: int, window: int, install: bool) -> int:
    import pyarrow.parquet as pq
    from cassandra.concurrent import execute_concurrent_with_args

    if install:
        import bulkwire.cql

        bulkwire.cql.install()
    cluster, session = driver_session(host, port)
    try:
        insert = session.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (id, emb) VALUES (?, ?)")
        table = pq.read_table(path)
        params = list(zip(table.column("id").to_pylist(), table.column("emb").to_pylist()))
        results = execute_concurrent_with_args(session, insert, params, concurrency=window,
                                               raise_on_first_error=True)
        return sum(1 for ok, _ in results if ok)
    finally:
        cluster.shutdown()


def run_bulkwire(path: str, host: str, port: int, window: int) -> int:
    import bulkwire

    if _trees.has_targets():
        return bulkwire.load_parquet(path, bulkwire.targets.cql(f"{host}:{port}", KEYSPACE, TABLE,
                                                                window=window)).rows
    import bulkwire.cql  # a build from before targets were values

    return bulkwire.cql.load_parquet(path, f"{host}:{port}", KEYSPACE, TABLE,
                                     window=window).rows


def ceiling_bodies(path: str, host: str, port: int):
    """Every row's EXECUTE body, written before the clock starts."""
    import pyarrow.parquet as pq

    from bulkwire import _core
    from bulkwire.load.cql_target import CqlDescription

    target = CqlDescription.of(f"{host}:{port}", KEYSPACE, TABLE)
    conn, _ = target.contact()
    with conn:
        prepared = target.prepare(conn, ["id", "emb"])
    table = pq.read_table(path).combine_chunks()
    bodies, ends, _ = _core.cql_execute_bodies(table, prepared.id, prepared.names,
                                               prepared.types, list(prepared.pk_indexes),
                                               0x000A)
    return target, prepared, bodies, ends, table.num_rows


def read_alongside(path: str, prepared) -> None:
    """The loader's reading and body writing of the file, the bodies discarded."""
    import pyarrow.parquet as pq

    from bulkwire import _core

    for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=2048):
        _core.cql_execute_bodies(batch, prepared.id, prepared.names, prepared.types,
                                 list(prepared.pk_indexes), 0x000A)


def import_modules(name: str) -> None:
    """Imports what the contender's run imports, before its clock starts: a process pays for
    its imports once (about 0.2 s of wall and 0.35 s of CPU here, numpy's BLAS threads
    starting included), not per load, and the ceiling's replay has imported all of it before
    its clock too."""
    import numpy  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    if name.startswith("driver"):
        import cassandra.cluster  # noqa: F401
        import cassandra.concurrent  # noqa: F401
    if name != "driver":
        import bulkwire.cql  # noqa: F401
        import bulkwire.load.cql_target  # noqa: F401
        import bulkwire.load.entry  # noqa: F401

        if _trees.has_targets():
            import bulkwire.targets  # noqa: F401


def child(name: str, path: str, host: str, port: int, window: int) -> None:
    """One timed run; prints JSON {rows, wall, cpu, package: where bulkwire came from}."""
    import_modules(name)
    reader = None
    if name.startswith("ceiling"):
        from bulkwire import _core

        target, prepared, bodies, ends, rows = ceiling_bodies(path, host, port)
        conn = target.connect(host, port)
        target.prepare(conn, ["id", "emb"])
    if name == "ceiling+read":
        import threading

        reader = threading.Thread(target=read_alongside, args=(path, prepared))
    started, cpu = time.perf_counter(), time.process_time()
    if reader is not None:
        reader.start()
    if name.startswith("ceiling"):
        answered, _ = conn.run_packed(_core.CQL_OP_EXECUTE, bodies, ends, window=window)
        conn.close()
        done = int(answered)
        if reader is not None:
            reader.join()
    elif name == "bulkwire":
        done = run_bulkwire(path, host, port, window)
    else:
        done = run_driver(path, host, port, window, install=name == "driver+install")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(json.dumps({"rows": done, "wall": wall, "cpu": cpu,
                      "package": _trees.package_folder() if name != "driver" else None}))


def node_cpu_seconds() -> float | None:
    """CPU seconds (user + system) of the Cassandra JVMs this machine runs (their command line
    names CassandraDaemon), read from /proc; None when there is none to see (a remote node)."""
    ticks, found = 0, False
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CassandraDaemon" not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        found = True
    return ticks / os.sysconf("SC_CLK_TCK") if found else None


def truncate(host: str, port: int, dim: int) -> None:
    cluster, session = driver_session(host, port)
    try:
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{TABLE} "
                        f"(id bigint PRIMARY KEY, emb vector<float, {dim}>)")
        session.execute(f"TRUNCATE {KEYSPACE}.{TABLE}")
    finally:
        cluster.shutdown()


def run_child(name: str, path: str, args: argparse.Namespace,
              tree: _trees.Tree | None = None) -> dict:
    """One run of ``name`` in a fresh process (with ``tree``'s package, if given): its JSON
    result."""
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", name, "--path", path,
         "--host", args.host, "--port", str(args.port), "--window", str(args.window)],
        capture_output=True, text=True, timeout=3600, env=_trees.environment(tree))
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    _trees.check_ran(tree, result["package"])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9042)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=2,
                        help="requests in flight (the driver's concurrency, bulkwire's window)")
    parser.add_argument("--only", help="comma-separated contenders (default: all)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed replays of the file before the first round (the "
                             "node's JIT warmed up)")
    _trees.add_arguments(parser)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.path, args.host, args.port, args.window)
        return
    names = args.only.split(",") if args.only else CONTENDERS
    unknown = set(names) - set(CONTENDERS) - {"ceiling+read"}
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    if "ceiling+read" in names and "ceiling" not in names:
        parser.error("ceiling+read is measured against the ceiling: add ceiling to --only")
    trees = _trees.trees_of(parser, args)
    if trees and "bulkwire" not in names:
        parser.error("--tree measures the bulkwire contender: add bulkwire to --only")
    builds = {t.contender: t for t in trees}
    if trees:  # bulkwire: one contender per build, in its place
        at = names.index("bulkwire")
        names = names[:at] + list(builds) + names[at + 1:]
    folder = tempfile.mkdtemp(prefix="bench-cql-")
    path = os.path.join(folder, "vectors.parquet")
    write_file(path, args.rows, args.dim)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    loads = []
    try:
        # A fresh node's JIT compiles its write path during the first load, which then runs
        # at half the speed of the next: one untimed replay first, so that no contender's
        # first run pays for it.
        for _ in range(args.warmup):
            truncate(args.host, args.port, args.dim)
            run_child("ceiling", path, args)
        for _, name in rotation(names, args.rounds):
            truncate(args.host, args.port, args.dim)
            loads.append(load_average())
            node_before = node_cpu_seconds()
            result = run_child("bulkwire" if name in builds else name, path, args,
                               builds.get(name))
            node_after = node_cpu_seconds()
            if node_before is not None and node_after is not None:
                # over the child's whole life (its setup too): a floor of the node's
                # cores during the timed load
                result["node_cpu"] = node_after - node_before
            if result["rows"] != args.rows:
                sys.exit(f"{name} stored {result['rows']} of {args.rows} rows")
            runs[name].append(result)
    finally:
        os.unlink(path)
        os.rmdir(folder)
    print(f"{args.rows:,} rows of id + vector<float, {args.dim}> from Parquet into "
          f"{args.host}:{args.port}, window {args.window}, {args.warmup} untimed warm-up "
          f"replay(s), {args.rounds} interleaved rounds, a fresh process per run; load "
          f"average {', '.join(loads)}")
    ceiling = runs.get("ceiling")
    print(f"{'contender':<16}{'rows/s':>12}{'client CPU us/row':>20}{'node CPU us/row':>18}"
          + (f"{'rows/s / ceiling':>18}" if ceiling else ""))
    for name in names:
        rate = statistics.median(args.rows / r["wall"] for r in runs[name])
        cpu = statistics.median(r["cpu"] / args.rows * 1e6 for r in runs[name])
        node = [r["node_cpu"] / args.rows * 1e6 for r in runs[name] if "node_cpu" in r]
        node_text = f"{statistics.median(node):.1f}" if node else "-"
        # the runs of one round are paired: the median of the per-round ratios
        against = (f"{statistics.median(c['wall'] / r['wall'] for r, c in zip(runs[name], ceiling)):>18.3f}"
                   if ceiling else "")
        print(f"{name:<16}{rate:>12,.0f}{cpu:>20.1f}{node_text:>18}{against}")
    if trees:
        report_trees(runs, trees)


def report_trees(runs: dict[str, list[dict]], trees: list[_trees.Tree]) -> None:
    """Each build's rate and client CPU per row against each other build's: the medians of
    the per-round ratios (a rate ratio above 1 is faster; a CPU ratio below 1 is cheaper)."""
    print(_trees.table("rows/s", {t.contender: [1 / r["wall"] for r in runs[t.contender]]
                                  for t in trees}, trees))
    print(_trees.table("client CPU per row", {t.contender: [r["cpu"] for r in runs[t.contender]]
                                              for t in trees}, trees))


if __name__ == "__main__":
    main()
