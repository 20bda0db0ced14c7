"""Float text on the sender's thread against float text on the producer's: the same
``BulkInsert`` with ``defer_float_text=True`` and ``False``, interleaved round by round (the
order rotating), into the loopback server in its own process, in one client process.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=pkg python benchmarks/bench_float_text_thread.py --dim 1024 --rounds 6
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=pkg taskset -c 0 python benchmarks/bench_float_text_thread.py --modes plain
    perf record -F 999 -- python benchmarks/bench_float_text_thread.py --modes plain --only deferred

Documents are the bulk insert benchmark's ``Embedding(Id, Name, Rank, Vector)``, the vector a
list of Python floats. Prints docs/s per contender (median), the median of the per-round
ratios (deferred / on the producer), and the load average; each run's document count is
checked at the server.
"""
from __future__ import annotations

import argparse
import os
import statistics

from _common import loopback_server, server_summary, timed_insert
from bench_bulk_insert import make_entities


def insert_seconds(url: str, entities: list, compress: bool, defer: bool) -> float:
    seconds, _ = timed_insert(url, entities, compress=compress, defer_float_text=defer)
    got = server_summary(url)
    if got["documents"] != len(entities) or got.get("error"):
        raise SystemExit(f"the server got {got['documents']} of {len(entities)} documents "
                         f"({got.get('error')})")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--modes", nargs="+", default=["plain", "gzip"], choices=["plain", "gzip"])
    parser.add_argument("--only", choices=["deferred", "producer"],
                        help="run one setting only, --rounds times (for a profiler)")
    options = parser.parse_args()
    import bulkwire.transport  # noqa: F401 - imported before the clock, as the benchmark does

    entities = make_entities(options.docs, options.dim)
    with loopback_server() as url:
        for mode in options.modes:
            rates: dict = {True: [], False: []}
            ratios = []
            if options.only is not None:
                defer = options.only == "deferred"
                for _ in range(options.rounds):
                    seconds = insert_seconds(url, entities, mode == "gzip", defer)
                    print(f"{options.dim} dims {mode:5}: {options.docs / seconds:,.0f} docs/s, text on "
                          f"the {'sender' if defer else 'producer'} load {os.getloadavg()[0]:.2f}",
                          flush=True)
                continue
            for r in range(options.rounds):
                seconds = {}
                for defer in ((True, False) if r % 2 == 0 else (False, True)):
                    seconds[defer] = insert_seconds(url, entities, mode == "gzip", defer)
                    rates[defer].append(options.docs / seconds[defer])
                ratios.append(seconds[False] / seconds[True])
            print(f"{options.dim} dims {mode:5}: text on the sender {statistics.median(rates[True]):>9,.0f} docs/s, "
                  f"on the producer {statistics.median(rates[False]):>9,.0f} docs/s, "
                  f"ratio {statistics.median(ratios):.2f}x (median of {options.rounds} rounds) "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
