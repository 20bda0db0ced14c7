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

import resource
import sys

from _common import writer_seconds
from bench_bulk_insert import make_entities


def main() -> None:
    dim = int(sys.argv[1]) if len(sys.argv) > 1 else 384
    docs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    defer = not (len(sys.argv) > 4 and sys.argv[4] == "nodefer")
    entities = make_entities(docs, dim)
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best, _ = writer_seconds(entities, runs, defer)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / runs / docs
    print(f"{dim} dims: {docs / best:,.0f} docs/s ({best / docs * 1e6:.1f} us/doc, best of {runs}); "
          f"{faults:.1f} page faults per document; float text "
          f"{'on the consumer thread' if defer else 'on the producer thread'}")


if __name__ == "__main__":
    main()
