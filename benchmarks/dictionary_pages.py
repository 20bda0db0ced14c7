"""Point lookups on a page-indexed Parquet file whose pages are dictionary encoded or hold
PLAIN strings: the pages on which every dictionary index and every string length is checked,
not only the requested rows'.

The file (written once into --data-dir, seed 42): --rows rows of a unique string id
(dictionary encoded until the dictionary outgrows pyarrow's 1 MiB limit, then PLAIN), a string
of 50 categories and an int64 of 1,000 values (dictionary encoded throughout: a 128 KiB page of
their indices covers most of the column), and a fixed_size_list<float32>[--dim]; pyarrow's
defaults plus ``write_page_index=True`` and 128 KiB pages. Lookups: 5 clusters of 20 rows
("correlated") and 100 rows drawn at random ("uniform"), on a kept ``TableFile`` ("cached") and
opening the file for every lookup ("reopen"); each checked against the ids asked for, then
repeated for --budget seconds after a warm-up. Prints one JSON line of median milliseconds per
lookup, so that ``ab_builds.py`` can compare two builds round by round:

    python benchmarks/ab_builds.py --before ../before --rounds 6 -- benchmarks/dictionary_pages.py
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

import _common  # noqa: F401 - the checkout's in-place build first, when there is one

SEED = 42


def write_file(path: str, rows: int, dim: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    table = pa.table({
        "id": pa.array([f"doc-{i:08d}" for i in range(rows)]),
        "category": pa.array([f"category-{i}" for i in rng.integers(0, 50, rows)]),
        "n": pa.array(rng.integers(0, 1000, rows), pa.int64()),
        "vector": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(rows * dim, dtype=np.float32)), dim),
    })
    pq.write_table(table, path + ".tmp", write_page_index=True, data_page_size=128 << 10)
    os.replace(path + ".tmp", path)


def patterns(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    starts = np.sort(rng.choice(max(rows - 20, 1), 5, replace=False))
    return {"correlated": np.unique(np.concatenate([np.arange(s, min(s + 20, rows))
                                                    for s in starts])),
            "uniform": np.unique(rng.choice(rows, min(100, rows), replace=False))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows (default: 200,000)")
    parser.add_argument("--dim", type=int, default=64, help="vector width (default: 64)")
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of timed lookups per configuration (default: 2)")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "bulkwire-bench"),
                        help="where the file is written once and reused")
    options = parser.parse_args(argv)
    from bulkwire.parquet import TableFile

    os.makedirs(options.data_dir, exist_ok=True)
    path = os.path.join(options.data_dir, f"dictionary-pages-{options.rows}x{options.dim}.parquet")
    if not os.path.exists(path):
        write_file(path, options.rows, options.dim)
    results = {}
    for mode in ("cached", "reopen"):
        handle = TableFile(path)
        for name, indices in patterns(options.rows).items():
            def lookup(indices=indices):
                return (handle if mode == "cached" else TableFile(path)).take(indices)

            got = lookup().column("id").to_pylist()
            if got != [f"doc-{i:08d}" for i in indices]:
                raise SystemExit(f"wrong rows for the {name} lookup")
            end = time.perf_counter() + min(0.5, options.budget)  # untimed warm-up
            while time.perf_counter() < end:
                lookup()
            times = []
            end = time.perf_counter() + options.budget
            while time.perf_counter() < end or len(times) < 3:
                start = time.perf_counter()
                lookup()
                times.append(time.perf_counter() - start)
            results[f"{name} {mode}"] = round(statistics.median(times) * 1e3, 4)
    paths = sorted(set(TableFile(path).paths.values()))
    print(json.dumps({"ms per lookup": results, "paths": paths}))


if __name__ == "__main__":
    main()
