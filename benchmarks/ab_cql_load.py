"""Two builds of the CQL loader against one node, and the node's replay ceiling, in one
session: ``before`` and ``after`` are directories holding a built ``bulkwire`` package; each
run is a fresh process (``bench_cql_load.py``'s own children: ``bulkwire`` with the tree's
package, ``ceiling`` with the checkout's), the three interleaved in a rotating order after
one untimed replay that warms the node up. Reports each one's median rows/s and the median
of its per-round ratios to the ceiling, with the load average::

    python -m tests.servers.cassandra -- python benchmarks/ab_cql_load.py --before ../before/pkg --rounds 8

needs a node at ``--host`` (``python -m tests.servers.cassandra -- COMMAND`` runs COMMAND
with one), numpy, pyarrow and a Cassandra driver (for the table's setup).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import _common  # noqa: F401 - the checkout's bulkwire, when built in place
from _common import PKG, print_command
from _rounds import load_average
from bench_cql_load import truncate, write_file

HERE = os.path.dirname(os.path.abspath(__file__))


def run(name: str, package: str, path: str, args: argparse.Namespace) -> dict:
    """One run of bench_cql_load.py's child ``name`` with ``package`` first on the path."""
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "bench_cql_load.py"), "--child", name, "--path",
         path, "--host", args.host, "--port", str(args.port), "--window", str(args.window)],
        capture_output=True, text=True, timeout=3600, env={**os.environ, "PYTHONPATH": package})
    if done.returncode != 0:
        sys.exit(f"{name} ({package}) failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["rows"] != args.rows:
        sys.exit(f"{name} ({package}) stored {result['rows']} of {args.rows} rows")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a directory holding a built bulkwire")
    parser.add_argument("--after", default=PKG, help="the same (default: the checkout's pkg)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9042)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--window", type=int, default=2)
    args = parser.parse_args()
    for tree in (args.before, args.after):
        if not os.path.isdir(os.path.join(tree, "bulkwire")):
            parser.error(f"no bulkwire package in {tree}")
    print_command()
    contenders = {"before": ("bulkwire", args.before), "after": ("bulkwire", args.after),
                  "ceiling": ("ceiling", PKG)}
    names = list(contenders)
    results: dict[str, list[dict]] = {name: [] for name in names}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ab-cql-") as folder:
        path = os.path.join(folder, "vectors.parquet")
        write_file(path, args.rows, args.dim)
        truncate(args.host, args.port, args.dim)
        run("ceiling", PKG, path, args)  # the node's JIT warmed up, untimed
        for round_index in range(args.rounds):
            start = round_index % len(names)
            for name in names[start:] + names[:start]:
                truncate(args.host, args.port, args.dim)
                loads.append(load_average())
                child, package = contenders[name]
                results[name].append(run(child, package, path, args))
    print(f"{args.rows:,} rows of id + vector<float, {args.dim}>, window {args.window}, "
          f"{args.rounds} rounds; load average {', '.join(loads)}")
    print(f"{'contender':<10}{'rows/s':>10}{'of the ceiling':>16}")
    for name in names:
        rate = statistics.median(args.rows / r["wall"] for r in results[name])
        ratio = statistics.median(c["wall"] / r["wall"]
                                  for r, c in zip(results[name], results["ceiling"]))
        print(f"{name:<10}{rate:>10,.0f}{ratio:>16.3f}")


if __name__ == "__main__":
    main()
