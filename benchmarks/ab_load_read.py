"""A load's client work before the network, before and after a change: a Parquet file of ids
and 768-dimension float32 vectors (the file of ``bench_cql_load.py``) read batch by batch as a
load reads it (``bulkwire.load.datasets._file_batches``, 4 MiB batches of CQL bodies), and
each batch written as the EXECUTE bodies of a CQL load (``_core.cql_execute_bodies``). No
server: what this measures is the CPU a load spends beside the node on the same machine.

``--before`` and ``--after`` are directories holding a built ``bulkwire`` package (``pkg/`` of
two checkouts). Every run is a fresh process (imports outside the clock); the rounds are
interleaved, the order rotating each round; reported: the median CPU µs per row of each, the
median of the per-round ratios after / before, and the load average.

    python benchmarks/ab_load_read.py --before ../before/pkg --after pkg --rounds 7
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _rounds import load_average

CHILD = r"""
import json, sys, time
import numpy, pyarrow.parquet, pyarrow.compute
from bulkwire import _core
from bulkwire.load.datasets import _file_batches


class Plan:
    read_columns = ["id", "emb"]
    vector_column = "emb"


path, batch_rows, encode = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
names, types = ["id", "emb"], ["bigint", "vector<float, 768>"]
rows = 0
started, cpu = time.perf_counter(), time.process_time()
for batch in _file_batches(path, Plan(), batch_rows):
    if encode:
        _core.cql_execute_bodies(batch, b"0123456789abcdef", names, types, [0], 0x000A)
    rows += batch.num_rows
print(json.dumps({"rows": rows, "wall": time.perf_counter() - started,
                  "cpu": time.process_time() - cpu,
                  "pandas": "pandas" in sys.modules}))
"""


def run(tree: str, path: str, batch_rows: int, encode: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    done = subprocess.run([sys.executable, "-c", CHILD, path, str(batch_rows),
                           "1" if encode else "0"], capture_output=True, text=True, env=env,
                          timeout=600)
    if done.returncode != 0:
        sys.exit(f"{tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a directory holding a built bulkwire")
    parser.add_argument("--after", default="pkg", help="a directory holding a built bulkwire")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_cql_load import write_file

    folder = tempfile.mkdtemp(prefix="ab-load-read-")
    path = os.path.join(folder, "vectors.parquet")
    write_file(path, args.rows, 768)
    batch_rows = (4 << 20) // (64 + 4 * 768)  # a CQL float vector load's default batch
    trees = {"before": args.before, "after": args.after}
    results: dict = {(kind, name): [] for kind in ("read", "read+bodies") for name in trees}
    loads = []
    try:
        for round_index in range(args.rounds):
            order = list(trees) if round_index % 2 == 0 else list(trees)[::-1]
            loads.append(load_average())
            for kind in ("read", "read+bodies"):
                for name in order:
                    result = run(trees[name], path, batch_rows, kind == "read+bodies")
                    if result["rows"] != args.rows:
                        sys.exit(f"{name} read {result['rows']} of {args.rows} rows")
                    results[(kind, name)].append(result)
    finally:
        os.unlink(path)
        os.rmdir(folder)
    print(f"{args.rows:,} rows of id + 768 float32 from Parquet, batches of {batch_rows} rows, "
          f"{args.rounds} interleaved rounds, a fresh process per run; load average "
          f"{', '.join(loads)}")
    print(f"{'work':<14}{'before CPU us/row':>20}{'after CPU us/row':>19}{'after / before':>17}"
          f"{'pandas imported (before, after)':>34}")
    for kind in ("read", "read+bodies"):
        before, after = results[(kind, "before")], results[(kind, "after")]
        ratio = statistics.median(a["cpu"] / b["cpu"] for a, b in zip(after, before))
        cpu = [statistics.median(r["cpu"] for r in runs) / args.rows * 1e6
               for runs in (before, after)]
        pandas = (any(r["pandas"] for r in before), any(r["pandas"] for r in after))
        print(f"{kind:<14}{cpu[0]:>20.2f}{cpu[1]:>19.2f}{ratio:>17.3f}{str(pandas):>34}")


if __name__ == "__main__":
    main()
