"""One read workload repeated in one process, for a profiler or a counter to watch.

Wall time on a shared machine says little about a change in the read path; instruction
counts (callgrind) and task-clock and page faults (``perf stat``) do. This script runs one
workload a fixed number of times so that two builds can be compared under those tools, and
prints its own wall and CPU time per repetition (``getrusage``: user + system).

Workloads:
- ``take``: ``bulkwire.take(path, indices)`` of one pattern of ``random_access.py``
  ("correlated" or "uniform"), the file reopened for every lookup;
- ``load``: ``load_parquet(path, out=..., compress=...)`` into a file (the encoder and the
  compressor without a server).

The data files are made once under --data (the random-access set: 50,000 × 256, row groups
of 1,024; the load set: 5,000 × 1,024). Examples::

    python benchmarks/profile_reads.py take --repeat 200
    valgrind --tool=callgrind python benchmarks/profile_reads.py take --repeat 30
    perf stat -e task-clock,page-faults python benchmarks/profile_reads.py take --repeat 200
    python benchmarks/profile_reads.py load --compress gzip --repeat 3

Subtract a ``--repeat 0`` run (imports and warm-up only) from a counted run to get the cost
per repetition.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import _common  # noqa: F401 - the checkout's in-place build first, when there is one
from bench_load_parquet import prepare as _data_file  # the sample file, made once
from random_access import patterns


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=("take", "load"))
    parser.add_argument("--repeat", type=int, default=100,
                        help="timed repetitions after the warm-up (default: 100)")
    parser.add_argument("--pattern", choices=("correlated", "uniform"), default="correlated",
                        help="take: the indices looked up (default: correlated)")
    parser.add_argument("--compress", choices=("none", "gzip", "zstd"), default="gzip",
                        help="load: the output's compression (default: gzip)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "bulkwire-bench"),
                        help="where the data files are made once (default: %(default)s)")
    options = parser.parse_args(argv)
    if options.repeat < 0:
        parser.error("--repeat must not be negative")
    import bulkwire

    if options.workload == "take":
        path = _data_file(options.data, 50_000, 256)
        indices = patterns(50_000)[options.pattern]

        def once() -> None:
            table = bulkwire.take(path, indices)
            if table.num_rows != len(indices):
                raise SystemExit(f"took {table.num_rows} rows, asked for {len(indices)}")
        warm_up = 20
    else:
        path = _data_file(options.data, 5_000, 1_024)
        compress = False if options.compress == "none" else options.compress
        out = os.path.join(options.data, f"profile-out-{os.getpid()}")

        def once() -> None:
            result = bulkwire.load_parquet(path, out=out, compress=compress)
            if result.rows != 5_000:
                raise SystemExit(f"loaded {result.rows} rows of 5,000")
        warm_up = 1
    try:
        for _ in range(warm_up):
            once()
        cpu, wall = _cpu_seconds(), time.perf_counter()
        for _ in range(options.repeat):
            once()
        wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    finally:
        if options.workload == "load" and os.path.exists(out):
            os.unlink(out)
    if options.repeat:
        print(f"{options.workload}: {options.repeat} repetitions, per repetition "
              f"wall {wall / options.repeat * 1e3:.3f} ms, CPU {cpu / options.repeat * 1e3:.3f} ms, "
              f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
