"""Documents/s of bulkwire.dumps against the JSON round trip, plain json.dumps and orjson.

    python benchmarks/bench_encode.py [--docs 10000] [--runs 5]

Documents: a name, a few scalar fields and a 1024- (and 384-) dimension vector, given as a
list of Python floats and as a float32 ndarray. Every figure is the median of --runs runs,
all measured in this one process, so the ratios compare like with like. "shortest" is
float32="shortest", which only changes float32 ndarrays (for lists it equals the default);
orjson writes float32 arrays that way too, so that column is the like-for-like one there.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from _common import median_seconds, print_command
from oracle import entity_default

import bulkwire

try:
    import orjson
except ImportError:  # the bench extra installs it
    orjson = None


def make_docs(count: int, dim: int, as_array: bool) -> list:
    rng = np.random.default_rng(42)
    vectors = rng.random((count, dim), dtype=np.float32)
    docs = []
    for i in range(count):
        vec = vectors[i] if as_array else vectors[i].tolist()
        docs.append({"Name": f"document {i}", "Rank": i, "Score": i / 7, "Active": i % 2 == 0,
                     "Tags": ["a", "b"], "Embedding": vec})
    return docs


def run(docs_count: int, runs: int) -> None:
    print(f"{'dim':>5} {'vector':>8} {'bulkwire d/s':>13} {'round trip':>11} {'json.dumps':>11} "
          f"{'orjson':>9} {'vs rt':>7} {'vs json':>8} {'vs orjson':>9} {'shortest d/s':>13} "
          f"{'vs orjson':>9}  bytes/doc widen/shortest")
    for dim in (1024, 384):
        for as_array in (False, True):
            docs = make_docs(docs_count, dim, as_array)
            plain = [bulkwire.to_builtins(d) for d in docs]  # already-plain dicts for json.dumps
            ours = median_seconds(lambda: [bulkwire.dumps(d) for d in docs], runs)
            trip = median_seconds(lambda: [json.dumps(json.loads(json.dumps(d, default=entity_default))).encode()
                                           for d in docs[: max(1, docs_count // 10)]], runs) * 10
            plain_json = median_seconds(lambda: [json.dumps(d).encode() for d in plain], runs)
            if orjson is not None:
                opt = orjson.OPT_SERIALIZE_NUMPY
                orj = median_seconds(lambda: [orjson.dumps(d, option=opt) for d in docs], runs)
            else:
                orj = float("nan")
            # orjson writes float32 arrays with shortest float32 digits: compare that like for like
            short_t = median_seconds(lambda: [bulkwire.dumps(d, float32="shortest") for d in docs], runs)
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
    args = parser.parse_args()
    print_command()
    print(f"{args.docs} documents per run, median of {args.runs} runs; round trip timed on a tenth and scaled")
    run(args.docs, args.runs)


if __name__ == "__main__":
    main()
