"""The fixed client CPU of one bulk insert: many small inserts (one document each, by
default) into the loopback server running in a process of its own, so that only the
client's work is counted (its process CPU, every thread: the operation id request, the
connection, the sender thread, the answer).

Each tree is a directory holding a built ``bulkwire`` package (default: the checkout's
``pkg``); with two or more, the trees are compared, each run a fresh process, rounds
interleaved in a rotating order, and the median of the per-round ratios to the first tree
reported with the load average::

    python benchmarks/bench_insert_overhead.py --inserts 1000 --rounds 5
    python benchmarks/bench_insert_overhead.py --tree before=/tmp/before/pkg --tree after=pkg

The same server serves every run (one loopback server, started here with the first tree's
package).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _common  # noqa: F401 - the checkout's bulkwire, when built in place
from _common import PKG, loopback_server, print_command
from _rounds import load_average


def child(url: str, inserts: int, docs: int) -> None:
    """One run: ``inserts`` inserts of ``docs`` documents; prints JSON {cpu_us_per_insert}."""
    import bulkwire

    documents = [{"Name": f"n{i}", "Age": i} for i in range(docs)]

    def run(count: int) -> None:
        for i in range(count):
            with bulkwire.BulkInsert(url, "bench") as bulk:
                for j, document in enumerate(documents):
                    bulk.store(document, f"people/{i}-{j}")

    run(20)  # imports, the first connection, the first thread
    began = time.process_time()
    run(inserts)
    print(json.dumps({"cpu_us_per_insert": (time.process_time() - began) / inserts * 1e6}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inserts", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=1, help="documents per insert")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="a directory holding a built bulkwire package (repeatable; "
                             "default: the checkout's pkg)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.inserts, args.docs)
        return
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"checkout": PKG}
    for name, path in trees.items():
        if not os.path.isdir(os.path.join(path, "bulkwire")):
            parser.error(f"--tree {name}={path}: no bulkwire package in {path}")
    print_command()
    names = list(trees)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    loads = []
    with loopback_server() as url:
        for round_index in range(args.rounds):
            start = round_index % len(names)
            for name in names[start:] + names[:start]:
                loads.append(load_average())
                env = {**os.environ, "PYTHONPATH": trees[name]}
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", url,
                                       "--inserts", str(args.inserts), "--docs", str(args.docs)],
                                      capture_output=True, text=True, env=env, timeout=3600)
                if done.returncode != 0:
                    sys.exit(f"{name} failed:\n{done.stderr}")
                cpu[name].append(json.loads(done.stdout.strip().splitlines()[-1])
                                 ["cpu_us_per_insert"])
    print(f"{args.inserts} inserts of {args.docs} document(s) into the loopback server, "
          f"{args.rounds} rounds; load average {', '.join(loads)}")
    first = names[0]
    print(f"{'tree':<12}{'client CPU us/insert':>22}{f'/ {first}':>14}")
    for name in names:
        ratio = statistics.median(c / f for c, f in zip(cpu[name], cpu[first]))
        print(f"{name:<12}{statistics.median(cpu[name]):>22.0f}{ratio:>14.3f}")


if __name__ == "__main__":
    main()
