"""What fresh memory costs an encoded output: minor page faults per document or per call.

    PYTHONPATH=pkg python benchmarks/bench_output_faults.py [--docs 5000] [--runs 5] [--dim 1024]
    PYTHONPATH=pkg python benchmarks/bench_output_faults.py --floats 1000000 [--runs 20]

Default: encodes the bench_encode list documents with bulkwire.dumps, once keeping each run's
outputs in a list (freed, and given back to the OS by glibc, before the next run) and once
dropping each output as it is made, and reports docs/s, minor page faults per document
(getrusage) and microseconds per document for both.

--floats N: one large output instead, ``bulkwire.dumps`` of a list of N floats, kept until the
next call or dropped at once; reports faults and milliseconds per call, with the output's size
in 4 KiB pages as the yardstick (one fault per output page is what writing fresh memory costs
without huge pages). Prints the load average and the commit.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import time

from _common import commit, print_command
from bench_encode import make_docs

import bulkwire


def measure(docs: list, runs: int, keep: bool) -> tuple:
    """(docs/s, faults per document, µs per document) over `runs` passes after a warm-up."""
    def one_pass():
        if keep:
            return [bulkwire.dumps(d) for d in docs]
        for d in docs:
            bulkwire.dumps(d)
        return None

    one_pass()
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for _ in range(runs):
        one_pass()
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    n = runs * len(docs)
    return n / seconds, faults / n, seconds / n * 1e6


def measure_large(values: list, runs: int, keep: bool) -> tuple:
    """(median faults per call, median ms per call, output bytes) of bulkwire.dumps(values)."""
    kept = bulkwire.dumps(values)
    size = len(kept)
    faults, millis = [], []
    for _ in range(runs):
        if not keep:
            kept = None
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        out = bulkwire.dumps(values)
        t = time.perf_counter() - t0
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        millis.append(t * 1e3)
        if keep:
            kept = out  # the previous output is freed only now, as a caller keeping it would
        del out
    return statistics.median(faults), statistics.median(millis), size




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--floats", type=int, default=0,
                        help="measure dumps of one list of this many floats instead")
    args = parser.parse_args()
    print_command()
    print(f"commit {commit()}, load average {os.getloadavg()[0]:.2f}")
    if args.floats:
        rng = random.Random(0)
        values = [rng.uniform(-1, 1) for _ in range(args.floats)]
        # kept and dropped alternate, so that drift hits both alike
        results: dict = {"kept": [], "dropped": []}
        for r in range(3):
            for label in (("kept", "dropped") if r % 2 == 0 else ("dropped", "kept")):
                results[label].append(measure_large(values, max(1, args.runs // 3), label == "kept"))
        for label, rs in results.items():
            faults = statistics.median(x[0] for x in rs)
            millis = statistics.median(x[1] for x in rs)
            pages = rs[0][2] / 4096
            print(f"{label:>8} dumps({args.floats:,} floats): {faults:>7,.0f} faults/call "
                  f"({faults / pages:.2f} per output page), {millis:7.2f} ms/call, "
                  f"output {rs[0][2] / 1e6:.1f} MB")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    docs = make_docs(args.docs, args.dim, as_array=False)
    for label, keep in (("kept", True), ("dropped", False)):
        rate, faults, micros = measure(docs, args.runs, keep)
        print(f"{label:>8} {rate:>10,.0f} docs/s {faults:>6.1f} faults/doc {micros:>7.1f} us/doc")


if __name__ == "__main__":
    main()
