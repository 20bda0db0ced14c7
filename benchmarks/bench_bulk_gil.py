"""Does the GIL hand-off limit bulk insert? BulkInsert in one process against the loopback
server (its own process), alternating the interpreter's switch interval between the default
5 ms and 0.5 ms (the order alternating too); median docs/s and blocked puts for each, and the
median of the per-round ratios. If the sender thread waited for
the GIL, the short interval would be clearly faster and the long one would show blocked puts.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=pkg python benchmarks/bench_bulk_gil.py 384 7 plain
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import loopback_server
from bench_bulk_insert import make_entities
from _rounds import load_average

import bulkwire
import bulkwire.transport  # noqa: F401  (http.client, imported before the clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dim", type=int, nargs="?", default=384, help="dimensions (default: 384)")
    parser.add_argument("runs", type=int, nargs="?", default=7, help="rounds (default: 7)")
    parser.add_argument("body", nargs="?", choices=("plain", "gzip"), default="plain",
                        help="the body's encoding (default: plain)")
    options = parser.parse_args()
    dim, runs, compress = options.dim, options.runs, options.body == "gzip"
    entities = make_entities(10_000, dim)
    rates: dict = {}
    blocked: dict = {}
    with loopback_server("bench") as url:
        for round_index in range(runs):
            for interval in ((0.005, 0.0005) if round_index % 2 == 0 else (0.0005, 0.005)):
                sys.setswitchinterval(interval)
                start = time.perf_counter()
                with bulkwire.BulkInsert(url, "bench", compress=compress) as bulk:
                    for entity in entities:
                        bulk.store(entity)
                rates.setdefault(interval, []).append(len(entities) / (time.perf_counter() - start))
                blocked.setdefault(interval, []).append(bulk.stats.blocked_puts)
    sys.setswitchinterval(0.005)
    for interval in rates:
        print(f"switch interval {interval * 1000:g} ms: {statistics.median(rates[interval]):,.0f} docs/s, "
              f"blocked puts (median) {statistics.median(blocked[interval]):g}")
    ratio = statistics.median(short / default for short, default in zip(rates[0.0005], rates[0.005]))
    print(f"0.5 ms against 5 ms: {ratio:.2f}x (median of per-round ratios; load average "
          f"{load_average()})")


if __name__ == "__main__":
    main()
