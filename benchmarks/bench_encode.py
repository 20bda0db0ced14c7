"""Documents/s of bulkwire.dumps against the JSON round trip, plain json.dumps and orjson.

    python benchmarks/bench_encode.py [--docs 10000] [--runs 5] [--drop-outputs]

Documents: a name, a few scalar fields and a 1024- (and 384-) dimension vector, given as a
list of Python floats and as a float32 ndarray. Every figure is the median of --runs runs,
all measured in this one process, so the ratios compare like with like. "shortest" is
float32="shortest", which only changes float32 ndarrays (for lists it equals the default);
orjson writes float32 arrays that way too, so that column is the like-for-like one there.

By default each timed call keeps its outputs (a list of bytes, ~100 MB at 1024 dims), and
glibc's heap is trimmed before every timed call so that each contender writes into memory the
kernel must fault in afresh. On this machine a page fault costs 3-4 us, 14-21 us of a
1024-dim document's ~50 us (benchmarks/bench_output_faults.py measures it). Without the trim,
whichever contender ran while the heap happened to keep its free memory got those faults for
free (the same work measured 24.5k and 34.8k docs/s in one run). --drop-outputs drops each output as it is made, as a sender does, and measures the
encoding alone.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import statistics
import time

import numpy as np

from _common import median_seconds, print_command
from oracle import entity_default

import bulkwire

try:
    import orjson
except ImportError:  # the bench extra installs it
    orjson = None


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_malloc_trim = getattr(_libc, "malloc_trim", None)


def timed(encode, docs: list, runs: int, drop: bool) -> float:
    """Median seconds of encode over docs; outputs kept in a list unless drop."""
    if drop:
        def call() -> None:
            for d in docs:
                encode(d)
        return median_seconds(call, runs)

    def call_keeping() -> list:
        return [encode(d) for d in docs]

    call_keeping()  # warm-up
    times = []
    for _ in range(runs):
        if _malloc_trim is not None:
            _malloc_trim(0)  # every contender starts from the same (trimmed) heap
        start = time.perf_counter()
        out = call_keeping()
        times.append(time.perf_counter() - start)
        del out
    return statistics.median(times)


def make_docs(count: int, dim: int, as_array: bool) -> list:
    rng = np.random.default_rng(42)
    vectors = rng.random((count, dim), dtype=np.float32)
    docs = []
    for i in range(count):
        vec = vectors[i] if as_array else vectors[i].tolist()
        docs.append({"Name": f"document {i}", "Rank": i, "Score": i / 7, "Active": i % 2 == 0,
                     "Tags": ["a", "b"], "Embedding": vec})
    return docs


def run(docs_count: int, runs: int, drop: bool) -> None:
    print(f"{'dim':>5} {'vector':>8} {'bulkwire d/s':>13} {'round trip':>11} {'json.dumps':>11} "
          f"{'orjson':>9} {'vs rt':>7} {'vs json':>8} {'vs orjson':>9} {'shortest d/s':>13} "
          f"{'vs orjson':>9}  bytes/doc widen/shortest")
    for dim in (1024, 384):
        for as_array in (False, True):
            docs = make_docs(docs_count, dim, as_array)
            plain = [bulkwire.to_builtins(d) for d in docs]  # already-plain dicts for json.dumps
            ours = timed(lambda d: bulkwire.dumps(d), docs, runs, drop)  # a call layer like the others
            trip = timed(lambda d: json.dumps(json.loads(json.dumps(d, default=entity_default))).encode(),
                         docs[: max(1, docs_count // 10)], runs, drop) * 10
            plain_json = timed(lambda d: json.dumps(d).encode(), plain, runs, drop)
            if orjson is not None:
                opt = orjson.OPT_SERIALIZE_NUMPY
                orj = timed(lambda d: orjson.dumps(d, option=opt), docs, runs, drop)
            else:
                orj = float("nan")
            # orjson writes float32 arrays with shortest float32 digits: compare that like for like
            short_t = timed(lambda d: bulkwire.dumps(d, float32="shortest"), docs, runs, drop)
            widen = sum(len(bulkwire.dumps(d)) for d in docs) / len(docs)
            short = sum(len(bulkwire.dumps(d, float32="shortest")) for d in docs) / len(docs)
            n = len(docs)
            print(f"{dim:>5} {'ndarray' if as_array else 'list':>8} {n / ours:>13,.0f} {n / trip:>11,.0f} "
                  f"{n / plain_json:>11,.0f} {n / orj:>9,.0f} {trip / ours:>6.1f}x {plain_json / ours:>7.1f}x "
                  f"{orj / ours:>8.2f}x {n / short_t:>13,.0f} {orj / short_t:>8.2f}x  {widen:,.0f} / {short:,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--drop-outputs", action="store_true",
                        help="drop each output as it is made instead of keeping the run's list")
    args = parser.parse_args()
    print_command()
    outputs = ("outputs dropped as made" if args.drop_outputs
               else "outputs kept, heap trimmed before each timed call")
    print(f"{args.docs} documents per run, median of {args.runs} runs; round trip timed on a tenth "
          f"and scaled; {outputs}")
    run(args.docs, args.runs, args.drop_outputs)


if __name__ == "__main__":
    main()
