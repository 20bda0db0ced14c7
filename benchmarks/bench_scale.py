"""Loads past one core: the same Parquet dataset (a directory of files) loaded by
``bulkwire.load_parquet`` with 1 and 2 worker processes (and 1 process with 1 encoding
thread, to see what the threads give), into the loopback bulk insert server running in a
process of its own (counting documents and bytes). Prints rows/s of each, and the ratio of
2 workers to 1 as the median of per-round ratios: contenders run interleaved, one run each
per round, in a rotating order, each in a fresh process, so a burst of load on the machine
hits them alike. The load average is printed next to each result.

    python benchmarks/bench_scale.py                         # 4 files, 40,000 x 768, 5 rounds
    python benchmarks/bench_scale.py --contenders w1,w2,dask,ray   # with the engines

Engines (when installed): ``dask`` is ``bulkwire.dask.to_bulk_insert`` over
``dask.dataframe.read_parquet(..., dtype_backend="pyarrow")`` on a LocalCluster of 2 worker
processes; ``ray`` is ``ray.data.read_parquet(...).write_datasink(BulkInsertDatasink(...))``
with ``num_cpus=2``. Their start-up (cluster, imports) is outside the timed region, as is
every contender's import of bulkwire and pyarrow.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import PKG  # noqa: F401  (puts the checkout's build first when there is one)
from _rounds import rotation

DATABASE = "bench"

#: name -> (what it is, the child's arguments)
CONTENDERS = {
    "w1": ("load_parquet, 1 process (2 encoding threads: the default)", ["--workers", "1"]),
    "w1t1": ("load_parquet, 1 process, 1 encoding thread", ["--workers", "1", "--threads", "1"]),
    "w2": ("load_parquet, 2 worker processes (1 encoding thread each: the default)",
           ["--workers", "2"]),
    "dask": ("bulkwire.dask.to_bulk_insert, LocalCluster of 2 worker processes", ["--engine", "dask"]),
    "ray": ("bulkwire.ray.BulkInsertDatasink, ray with num_cpus=2", ["--engine", "ray"]),
}


def prepare(folder: str, rows: int, dim: int, files: int) -> str:
    from bulkwire.parquet import sample_parquet

    path = os.path.join(folder, f"scale-{rows}x{dim}-{files}")
    if not os.path.isdir(path):
        os.makedirs(path + ".tmp", exist_ok=True)
        per_file = rows // files
        for i in range(files):
            n = per_file if i < files - 1 else rows - per_file * (files - 1)
            sample_parquet(os.path.join(path + ".tmp", f"part-{i:03}.parquet"), rows=n, dim=dim,
                           seed=i, id_start=i * per_file, row_group_rows=1024)
        os.replace(path + ".tmp", path)
    return path


# ------------------------------------------------------------------ the server, its own process

def serve() -> None:
    """The loopback server; each line on stdin gets the totals so far (one JSON line)."""
    from bulkwire.testing import LoopbackServer

    with LoopbackServer(DATABASE, keep_body=False) as server:
        print(server.url, flush=True)
        for _ in sys.stdin:
            done = [r for r in server.requests if r.status is not None or r.error is not None]
            print(json.dumps({"requests": len(server.requests), "finished": len(done),
                              "documents": sum(r.put_commands for r in server.requests),
                              "body_bytes": sum(r.body_bytes for r in server.requests),
                              "errors": [r.error for r in server.requests if r.error]}), flush=True)


class Server:
    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (os.path.dirname(os.path.dirname(sys.modules["bulkwire"].__file__)),
                        os.environ.get("PYTHONPATH", "")) if p))
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env)
        self.url = self.process.stdout.readline().strip()

    def cpu_seconds(self) -> float:
        """The server process's CPU time so far (user + system)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def totals(self) -> dict:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(10)


# ------------------------------------------------------------------ one measured run (a child)

def child(args: argparse.Namespace) -> None:
    import pyarrow.parquet  # noqa: F401  (imports outside the timed region)

    import bulkwire

    if args.engine == "dask":
        import dask.dataframe as dd
        from dask.distributed import Client, LocalCluster

        import bulkwire.dask

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, \
                Client(cluster):
            frame = dd.read_parquet(args.path, dtype_backend="pyarrow")
            start = time.perf_counter()
            result = bulkwire.dask.to_bulk_insert(frame, args.url, DATABASE)
            seconds = time.perf_counter() - start
        rows = result.rows
    elif args.engine == "ray":
        import ray

        from bulkwire.ray import BulkInsertDatasink

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        data = ray.data.read_parquet(args.path)
        start = time.perf_counter()
        data.write_datasink(BulkInsertDatasink(args.url, DATABASE))
        seconds = time.perf_counter() - start
        rows = data.count()
        ray.shutdown()
    else:
        start = time.perf_counter()
        result = bulkwire.load_parquet(args.path, url=args.url, database=DATABASE,
                                       workers=args.workers, threads=args.threads)
        seconds = time.perf_counter() - start
        rows = result.rows
    import resource

    cpu = sum(getattr(resource.getrusage(who), field)
              for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for field in ("ru_utime", "ru_stime"))
    print(json.dumps({"rows": rows, "seconds": seconds, "client_cpu": cpu}))


def run_one(args: argparse.Namespace, name: str, path: str, server: Server) -> dict:
    before = server.totals()
    server_cpu = server.cpu_seconds()
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--path", path,
                           "--url", server.url, *CONTENDERS[name][1]],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for _ in range(100):  # the requests' last answers
        after = server.totals()
        if after["finished"] == after["requests"]:
            break
        time.sleep(0.05)
    got = after["documents"] - before["documents"]
    if got != args.rows or after["errors"] != before["errors"]:
        raise SystemExit(f"{name}: the server got {got} of {args.rows} documents "
                         f"({after['errors']})")
    result["load"] = os.getloadavg()[0]
    result["server_cpu"] = server.cpu_seconds() - server_cpu
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--contenders", default="w1,w1t1,w2",
                    help=f"comma-separated, of: {', '.join(CONTENDERS)}")
    ap.add_argument("--data-dir", default=os.path.join("/tmp", "bulkwire-bench"))
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve()
    if args.child:
        return child(args)
    import bulkwire

    names = args.contenders.split(",")
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        ap.error(f"unknown contender {unknown[0]!r} (known: {', '.join(CONTENDERS)})")
    path = prepare(args.data_dir, args.rows, args.dim, args.files)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    print("command: python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]))
    print(f"# commit {commit or '?'}; bulkwire {bulkwire.__file__}; {os.cpu_count()} cores; "
          f"{args.rows:,} rows x {args.dim} float32 in {args.files} Parquet files ({path}); "
          f"the loopback server in its own process; {args.rounds} rounds, rotating order")
    server = Server()
    runs: dict = {n: [] for n in names}
    try:
        for round_, name in rotation(names, args.rounds):
            r = run_one(args, name, path, server)
            runs[name].append(r)
            print(f"  round {round_ + 1} {name:<5} {r['rows'] / r['seconds']:>10,.0f} rows/s  "
                  f"{r['seconds']:.2f} s  CPU: client {r['client_cpu']:.2f} s (with start-up), "
                  f"server {r['server_cpu']:.2f} s  load average {r['load']:.2f}", flush=True)
    finally:
        server.close()
    print()
    print("| contender | rows/s (median) | seconds (median) | client CPU s | server CPU s | "
          "load average (median) |")
    print("|---|---|---|---|---|---|")
    for name in names:
        def median(key: str) -> float:
            return statistics.median(r[key] for r in runs[name])
        print(f"| {CONTENDERS[name][0]} | {args.rows / median('seconds'):,.0f} | "
              f"{median('seconds'):.2f} | {median('client_cpu'):.2f} | {median('server_cpu'):.2f} | "
              f"{median('load'):.2f} |")
    print()
    base = "w1" if "w1" in names else names[0]
    for name in names:
        if name == base:
            continue
        ratios = [b["seconds"] / o["seconds"] for b, o in zip(runs[base], runs[name])]
        print(f"{name} / {base}: {statistics.median(ratios):.2f}x rows/s (median of per-round "
              f"ratios {', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
