"""The client side of bench_real_server.py for instruction counts: its entities through
``bulkwire.BulkInsert`` into the loopback server (``bulkwire.testing``, started in its own
process, so callgrind counts the client alone). Run it under callgrind with two counts and
divide the difference by the difference of the counts, so that one-time costs fall out:

    PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind --callgrind-out-file=cg.%p \\
        python benchmarks/callgrind_client.py small plain 4000
    PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind --callgrind-out-file=cg.%p \\
        python benchmarks/callgrind_client.py small plain 2000

``skip`` as a last argument builds the entities and opens no insert (the cost of the setup).
``--runs R`` inserts them R times into the same server (the benchmark's rounds after its warm-up
run): R=2 minus R=1 at the same count is one warm run, its fixed costs (the operation's
requests, the sender thread, the close) included; at ``docs`` 1 it is the fixed cost alone.
``official`` runs the ``ravendb`` client's bulk insert instead, into the same loopback server.
Each run's process CPU time (all its threads; the server's process is not counted) and its
page faults are printed too: run natively with ``--runs 4``, the median of the runs after the first is the client CPU
per document of a warm insert (for comparing CPU features, e.g. under ``GLIBC_TUNABLES``).
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time
import _common  # the checkout's bulkwire, when built in place
from bench_real_server import MODES, WORKLOADS, entities, official

import bulkwire


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("docs", type=int)
    parser.add_argument("client", nargs="?", choices=("bulkwire", "official", "skip"),
                        default="bulkwire")
    parser.add_argument("--runs", type=int, default=1, help="inserts of the same entities")
    args = parser.parse_args()
    items = entities(args.workload, args.docs)
    for item in items:  # the instance dicts exist, as after the benchmark's warm-up run
        vars(item)
    if args.client == "skip":
        return
    with _common.loopback_server("db") as url:
        compress = args.mode == "gzip"
        cpu, faults = [], []
        for _ in range(args.runs):
            start = time.process_time()
            faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            if args.client == "official":
                official(_Node(url), "db", items, compress)  # type: ignore[arg-type]
            else:
                with bulkwire.BulkInsert(url, "db", compress=compress) as bulk:
                    for i, item in enumerate(items):
                        bulk.store(item, id=f"docs/{i}")
            cpu.append(time.process_time() - start)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted)
        summary = _common.server_summary(url)
    if summary.get("documents") != args.docs or not summary.get("complete") or summary.get("error"):
        raise SystemExit(f"the server's last insert is not the {args.docs} documents: {summary}")
    print(f"{args.workload}, {args.mode}, {args.client}: {args.docs} documents x {args.runs}, "
          f"the last insert complete ({summary['wire_bytes']:,} bytes on the wire)")
    warm = cpu[1:] or cpu
    print(f"client CPU per document: {statistics.median(warm) / args.docs * 1e6:.2f} us "
          f"(median of {len(warm)} run(s){' after the first' if len(cpu) > 1 else ''})")
    warm_faults = faults[1:] or faults
    print(f"page faults per document: {statistics.median(warm_faults) / args.docs:.3f} "
          f"(the process's minor faults, every thread, median of the same runs)")


class _Node:
    """The one attribute of a server official() reads."""

    def __init__(self, url: str) -> None:
        self.url = url


if __name__ == "__main__":
    main()
