"""What keeping encoded outputs alive costs: page faults per document, kept vs dropped.

    python benchmarks/bench_output_faults.py [--docs 5000] [--runs 5] [--dim 1024]

Encodes the bench_encode list documents with bulkwire.dumps, once keeping each run's outputs
in a list (freed, and given back to the OS by glibc, before the next run) and once dropping
each output as it is made, and reports docs/s, minor page faults per document
(getrusage) and microseconds per document for both.
"""
from __future__ import annotations

import argparse
import resource
import time

from _common import print_command
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=1024)
    args = parser.parse_args()
    print_command()
    docs = make_docs(args.docs, args.dim, as_array=False)
    for label, keep in (("kept", True), ("dropped", False)):
        rate, faults, micros = measure(docs, args.runs, keep)
        print(f"{label:>8} {rate:>10,.0f} docs/s {faults:>6.1f} faults/doc {micros:>7.1f} us/doc")


if __name__ == "__main__":
    main()
