"""A load's read of a Parquet vector column whose pages hold many batches' rows: the file read
batch by batch as a load reads it (``bulkwire.load.datasets._file_batches``: the vector column
by bulkwire's page reader, the id by pyarrow; the load's default batch of about 4 MiB of JSON),
against pyarrow's own ``iter_batches`` of the same batches. No encoding, no target.

Cases: 60,000 rows of 256 float32 in one snappy page (61 MiB), and in 1 MiB pages; 60,000
rows of 768 float32 in pyarrow's pages of at most 20,000 rows (``data_page_size`` 1 GiB,
``max_rows_per_page`` left at pyarrow's default), and in 1 MiB pages. PLAIN pages (no
dictionary), no page index, one row group.

``--tree`` names directories holding a built ``bulkwire`` package (``pkg/`` of checkouts;
none: the bulkwire this Python imports), each run in a fresh process per case and round (imports outside the clock), the trees
interleaved, the order rotating each round. Reported per case and tree: the median wall and
CPU seconds, the pages the page reader read (from ``TableFile.stats``), and the median of the
per-round ratios to pyarrow's read of the same batches in the same process.

    python benchmarks/load_big_pages.py --tree before=../before/pkg --tree after=pkg --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from _rounds import load_average

CASES = {
    "256-dim, one 61 MiB page": (256, dict(data_page_size=1 << 30, max_rows_per_page=60_000)),
    "256-dim, 1 MiB pages": (256, dict(data_page_size=1 << 20)),
    "768-dim, 20,000-row pages": (768, dict(data_page_size=1 << 30)),
    "768-dim, 1 MiB pages": (768, dict(data_page_size=1 << 20)),
}

CHILD = r"""
import json, sys, time
import pyarrow.parquet as pq
from bulkwire.load import datasets
from bulkwire.load.datasets import _file_batches


class Plan:
    read_columns = ["id", "emb"]
    vector_column = "emb"


path, batch_rows = sys.argv[1], int(sys.argv[2])
stats = []
real_close = datasets._PagedVectors.close


def close(self):
    stats.append(dict(self.file.stats[self.name]))
    real_close(self)


datasets._PagedVectors.close = close
result = {}
for name, read in (("pyarrow", lambda: pq.ParquetFile(path).iter_batches(
                        batch_size=batch_rows, columns=Plan.read_columns)),
                   ("bulkwire", lambda: _file_batches(path, Plan(), batch_rows))):
    wall, cpu = time.perf_counter(), time.process_time()
    rows = batches = 0
    for batch in read():
        rows += batch.num_rows
        batches += 1
    result[name] = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                    "rows": rows, "batches": batches}
result["pages_read"] = stats[0]["pages_read"] if stats else None
result["row_groups"] = stats[0]["row_groups"] if stats else None
print(json.dumps(result))
"""


def write_file(path: str, rows: int, dim: int, options: dict) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = np.random.default_rng(7).random(rows * dim, dtype=np.float32)
    table = pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                      "emb": pa.FixedSizeListArray.from_arrays(pa.array(values), dim)})
    pq.write_table(table, path, row_group_size=rows, use_dictionary=False,
                   compression="snappy", **options)


def run(tree: str | None, path: str, batch_rows: int) -> dict:
    """One fresh process reading ``path`` with the bulkwire in ``tree`` (None: the one this
    Python imports)."""
    env = dict(os.environ) if tree is None else dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    done = subprocess.run([sys.executable, "-c", CHILD, path, str(batch_rows)],
                          capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        sys.exit(f"{tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[],
                        help="NAME=DIR: a directory holding a built bulkwire (repeatable)")
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="only this case (repeatable; default: all)")
    args = parser.parse_args()
    trees: dict = dict(t.split("=", 1) for t in args.tree) or {"this": None}
    folder = tempfile.mkdtemp(prefix="load-big-pages-")
    loads = [load_average()]
    print(f"{args.rows:,} rows, id + fixed_size_list<float32>, snappy, one row group; "
          f"{args.rounds} interleaved rounds, a fresh process per run")
    print(f"{'case':<28}{'tree':<10}{'batches':>8}{'pages read':>11}{'wall s':>9}{'CPU s':>8}"
          f"{'pyarrow s':>10}{'/ pyarrow':>10}")
    try:
        for case in args.case or list(CASES):
            dim, options = CASES[case]
            path = os.path.join(folder, "v.parquet")
            write_file(path, args.rows, dim, options)
            batch_rows = max(64, min(65536, (4 << 20) // (64 + 20 * dim)))  # the load's default
            results: dict = {name: [] for name in trees}
            for round_index in range(args.rounds):
                names = list(trees)
                names = names[round_index % len(names):] + names[:round_index % len(names)]
                for name in names:
                    result = run(trees[name], path, batch_rows)
                    for reader in ("pyarrow", "bulkwire"):
                        if result[reader]["rows"] != args.rows:
                            sys.exit(f"{name}: {reader} read {result[reader]['rows']} rows")
                    results[name].append(result)
            loads.append(load_average())
            for name, runs in results.items():
                wall = statistics.median(r["bulkwire"]["wall"] for r in runs)
                cpu = statistics.median(r["bulkwire"]["cpu"] for r in runs)
                theirs = statistics.median(r["pyarrow"]["wall"] for r in runs)
                ratio = statistics.median(r["bulkwire"]["wall"] / r["pyarrow"]["wall"]
                                          for r in runs)
                print(f"{case:<28}{name:<10}{runs[0]['bulkwire']['batches']:>8}"
                      f"{str(runs[0]['pages_read']):>11}{wall:>9.2f}{cpu:>8.2f}{theirs:>10.2f}"
                      f"{ratio:>9.1f}x", flush=True)
            os.unlink(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"load average (1 min) before and after each case: {', '.join(loads)}")


if __name__ == "__main__":
    main()
