"""The bulk insert writer alone, for profilers: the benchmark's entities through
``BulkWriter.store`` with a consumer thread that drops the buffers (as the sender does, so
their memory is recycled), no socket. Prints the best rate and minor page faults per document.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=pkg python benchmarks/profile_writer.py 384
    perf record -g python benchmarks/profile_writer.py 1024            # then perf report
    valgrind --tool=callgrind python benchmarks/profile_writer.py 384 2000 1
"""
from __future__ import annotations

import os
import resource
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "pkg"))
sys.path.insert(0, HERE)

from bench_bulk_insert import make_entities  # noqa: E402
from bulkwire.bulk import BulkWriter  # noqa: E402


def main() -> None:
    dim = int(sys.argv[1]) if len(sys.argv) > 1 else 384
    docs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    entities = make_entities(docs, dim)
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best = float("inf")
    for _ in range(runs):
        writer = BulkWriter()
        consumer = threading.Thread(target=lambda: [None for _ in writer.chunks()])
        consumer.start()
        start = time.perf_counter()
        for entity in entities:
            writer.store(entity)
        writer.close()
        consumer.join()
        best = min(best, time.perf_counter() - start)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / runs / docs
    print(f"{dim} dims: {docs / best:,.0f} docs/s ({best / docs * 1e6:.1f} us/doc, best of {runs}); "
          f"{faults:.1f} page faults per document")


if __name__ == "__main__":
    main()
