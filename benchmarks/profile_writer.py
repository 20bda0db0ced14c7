"""The bulk insert writer alone, for profilers: the benchmark's entities through
``BulkWriter.store`` with a consumer thread that drops the buffers (as the sender does, so
their memory is recycled), no socket. Prints the best rate and minor page faults per document.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=pkg python benchmarks/profile_writer.py 384
    perf record -g python benchmarks/profile_writer.py 1024            # then perf report
    valgrind --tool=callgrind python benchmarks/profile_writer.py 384 2000 1
    valgrind --tool=callgrind --separate-threads=yes python benchmarks/profile_writer.py 1024 2000 1 nodefer

A fourth argument ``nodefer`` writes float text on the producer thread
(``defer_float_text=False``); by default the consumer thread writes it.
"""
from __future__ import annotations

import argparse
import resource

from _common import writer_seconds
from bench_bulk_insert import make_entities


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dim", type=int, nargs="?", default=384, help="dimensions (default: 384)")
    parser.add_argument("docs", type=int, nargs="?", default=10_000,
                        help="documents per run (default: 10,000)")
    parser.add_argument("runs", type=int, nargs="?", default=5, help="runs (default: 5)")
    parser.add_argument("float_text", nargs="?", choices=("defer", "nodefer"), default="defer",
                        help="nodefer: float text on the producer thread (default: defer)")
    options = parser.parse_args()
    dim, docs, runs = options.dim, options.docs, options.runs
    defer = options.float_text == "defer"
    entities = make_entities(docs, dim)
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best, _ = writer_seconds(entities, runs, defer)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / runs / docs
    print(f"{dim} dims: {docs / best:,.0f} docs/s ({best / docs * 1e6:.1f} us/doc, best of {runs}); "
          f"{faults:.1f} page faults per document; float text "
          f"{'on the consumer thread' if defer else 'on the producer thread'}")


if __name__ == "__main__":
    main()
