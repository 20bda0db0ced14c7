"""Random access: point lookups of rows by index from Parquet, Arrow IPC and Lance.

Method (after the random-access benchmark README in ../shared/seeds/002_*):
- one dataset shaped like the feature-vectors set (int64 id, fixed_size_list<float32>[dim]),
  written once as Parquet (row groups of --row-group rows) and as uncompressed Arrow IPC;
- two index patterns from seed 42: "correlated" (5 clusters of 20 consecutive indices at
  random places, sorted) and "uniform" (a Poisson process over the rows, ~100 indices);
- two modes: "cached" (open once, 1 s untimed warm-up, then reuse the handle) and "reopen"
  (file open and metadata parsing inside every timed lookup, after the same warm-up so both
  modes read from a warm page cache: we do not drop the OS cache);
- each configuration runs in its own process; it repeats the lookup until --budget seconds
  are spent and reports the median time per lookup (all indices of the pattern at once);
- ours (``bulkwire.take`` / ``TableFile``) against ``pyarrow.dataset`` ``take`` as the
  baseline, every result checked against the ids asked for.

Parquet layouts (``--layouts``): ``rg`` row groups of --row-group rows (the sample's
writer, snappy, dictionary on); ``pages128k`` / ``pages1m`` pyarrow's default row groups
with the page index written (``write_page_index=True``), PLAIN (``use_dictionary=False``),
snappy, pages of 128 KiB / 1 MiB (``data_page_size``); ``default`` pyarrow's defaults.
Readers (``--impls``): ``bulkwire`` (Parquet and IPC), ``dataset`` (pyarrow), ``lance``
(``pylance``'s ``dataset.take`` on the same rows written as a Lance dataset).

``--rounds N`` interleaves the contenders: every round runs each configuration once (its
own process, rotating the order from round to round), and the report gives, per
configuration, the median time over rounds and the median over rounds of the per-round
ratio to pyarrow on the same layout (and to Lance), with the load average seen.

    python benchmarks/random_access.py                       # small default, ~1 minute
    python benchmarks/random_access.py --rows 1000000 --dim 1024 --budget 5
    python benchmarks/random_access.py --rows 200000 --dim 768 --layouts pages128k,pages1m,default \
        --impls bulkwire,dataset,lance --rounds 3 --budget 1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import _common  # noqa: F401,E402 - the checkout's in-place build first, when there is one

SEED = 42
CLUSTERS, CLUSTER_LEN, UNIFORM_TARGET = 5, 20, 100


def patterns(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    starts = np.sort(rng.choice(max(rows - CLUSTER_LEN, 1), size=CLUSTERS, replace=False))
    correlated = np.unique(np.concatenate([np.arange(s, min(s + CLUSTER_LEN, rows)) for s in starts]))
    rng = np.random.default_rng(SEED)
    gaps = rng.exponential(rows / UNIFORM_TARGET, size=4 * UNIFORM_TARGET)
    uniform = np.unique(np.floor(np.cumsum(gaps)).astype(np.int64))
    uniform = uniform[uniform < rows]
    return {"correlated": correlated.astype(np.int64), "uniform": uniform}


LAYOUTS = ("rg", "pages128k", "pages1m", "default")


def _write_layout(table, path: str, layout: str) -> None:
    import pyarrow.parquet as pq

    if layout == "default":
        pq.write_table(table, path)
    else:
        pq.write_table(table, path, write_page_index=True, use_dictionary=False,
                       data_page_size={"pages128k": 128 << 10, "pages1m": 1 << 20}[layout])


def prepare(data_dir: str, rows: int, dim: int, row_group: int,
            layouts: tuple = ("rg",), lance: bool = False) -> dict[str, str]:
    import pyarrow.feather
    import pyarrow.parquet as pq

    from bulkwire.parquet import sample_parquet

    os.makedirs(data_dir, exist_ok=True)
    stem = os.path.join(data_dir, f"vectors-{rows}x{dim}-rg{row_group}")
    paths = {"parquet": stem + ".parquet", "ipc": stem + ".arrow"}
    if not os.path.exists(paths["parquet"]):
        sample_parquet(paths["parquet"] + ".tmp", rows=rows, dim=dim, seed=SEED,
                       row_group_rows=row_group)
        os.replace(paths["parquet"] + ".tmp", paths["parquet"])
    table = None
    if not os.path.exists(paths["ipc"]):
        table = pq.read_table(paths["parquet"])
        pyarrow.feather.write_feather(table, paths["ipc"] + ".tmp", compression="uncompressed",
                                      chunksize=row_group)
        os.replace(paths["ipc"] + ".tmp", paths["ipc"])
    for layout in layouts:
        if layout == "rg":
            paths["parquet:rg"] = paths["parquet"]
            continue
        path = os.path.join(data_dir, f"vectors-{rows}x{dim}-{layout}.parquet")
        if not os.path.exists(path):
            table = table if table is not None else pq.read_table(paths["parquet"])
            _write_layout(table, path + ".tmp", layout)
            os.replace(path + ".tmp", path)
        paths[f"parquet:{layout}"] = path
    if lance:
        import lance as lance_module

        path = os.path.join(data_dir, f"vectors-{rows}x{dim}.lance")
        if not os.path.exists(path):
            table = table if table is not None else pq.read_table(paths["parquet"])
            lance_module.write_dataset(table, path + ".tmp")
            os.replace(path + ".tmp", path)
        paths["lance"] = path
    return paths


def make_lookup(impl: str, fmt: str, path: str, mode: str):
    """A zero-argument function doing one lookup of the given indices."""
    if impl == "bulkwire":
        from bulkwire.parquet import TableFile, take

        if mode == "cached":
            handle = TableFile(path)
            return lambda idx: handle.take(idx)
        return lambda idx: take(path, idx)
    if impl == "lance":
        import lance

        if mode == "cached":
            dataset = lance.dataset(path)
            return lambda idx: dataset.take(idx)
        return lambda idx: lance.dataset(path).take(idx)
    import pyarrow as pa
    import pyarrow.dataset as ds

    fmt_name = "parquet" if fmt == "parquet" else "ipc"
    if mode == "cached":
        dataset = ds.dataset(path, format=fmt_name)
        return lambda idx: dataset.take(pa.array(idx))
    return lambda idx: ds.dataset(path, format=fmt_name).take(pa.array(idx))


def worker(args: argparse.Namespace) -> None:
    idx = patterns(args.rows)[args.pattern]
    lookup = make_lookup(args.impl, args.format, args.path, args.mode)
    got = lookup(idx)
    if got.column("id").to_numpy().tolist() != idx.tolist():
        raise SystemExit(f"wrong rows from {args.impl} {args.format}")
    end = time.perf_counter() + 1.0  # untimed warm-up
    while time.perf_counter() < end:
        lookup(idx)
    times = []
    end = time.perf_counter() + args.budget
    while time.perf_counter() < end or len(times) < 3:
        t0 = time.perf_counter()
        lookup(idx)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"median_s": statistics.median(times), "iterations": len(times),
                      "indices": int(idx.size)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--row-group", type=int, default=1024, help="Parquet row group / IPC batch rows")
    ap.add_argument("--budget", type=float, default=2.0, help="timed seconds per configuration")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "bulkwire-bench"))
    ap.add_argument("--formats", default="parquet,ipc")
    ap.add_argument("--patterns", default="correlated,uniform")
    ap.add_argument("--modes", default="cached,reopen")
    ap.add_argument("--impls", default="bulkwire,dataset")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--layouts", default="rg", help=f"Parquet layouts, of {','.join(LAYOUTS)}")
    ap.add_argument("--rounds", type=int, default=0,
                    help="interleave the contenders over this many rounds (see above)")
    # worker mode (one configuration, run by the parent in its own process)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--format", help=argparse.SUPPRESS)
    ap.add_argument("--pattern", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return

    if args.rounds:
        interleaved(args)
        return
    paths = prepare(args.data_dir, args.rows, args.dim, args.row_group)
    pats = patterns(args.rows)
    print(f"# {args.rows:,} rows x {args.dim} float32 dims; Parquet {os.path.getsize(paths['parquet']) / 1e6:,.1f} MB "
          f"(row groups of {args.row_group}), Arrow IPC {os.path.getsize(paths['ipc']) / 1e6:,.1f} MB; "
          f"seed {SEED}; {', '.join(f'{k}: {v.size} indices' for k, v in pats.items())}; "
          f"median per lookup over {args.budget:g} s, one process per configuration")
    env = dict(os.environ)
    results = []
    formats, impls = args.formats.split(","), args.impls.split(",")
    header = ["pattern", "mode"] + [f"{f} {i}" for f in formats for i in impls]
    rows_out = []
    for pattern in args.patterns.split(","):
        for mode in args.modes.split(","):
            line = [pattern, mode]
            for fmt in formats:
                for impl in impls:
                    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--rows", str(args.rows),
                           "--budget", str(args.budget), "--path", paths[fmt], "--format", fmt,
                           "--pattern", pattern, "--mode", mode, "--impl", impl]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    r.update(pattern=pattern, mode=mode, format=fmt, impl=impl)
                    results.append(r)
                    line.append(f"{r['median_s'] * 1e3:,.2f} ms")
            rows_out.append(line)
            print("  ".join(line), file=sys.stderr)
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in rows_out:
        print("| " + " | ".join(line) + " |")
    if "bulkwire" in impls and "dataset" in impls:
        print()
        print("speed-up of bulkwire.take over pyarrow.dataset take (baseline time / ours):")
        for r in results:
            if r["impl"] != "bulkwire":
                continue
            base = next(b for b in results if b["impl"] == "dataset" and all(
                b[k] == r[k] for k in ("pattern", "mode", "format")))
            print(f"  {r['pattern']:<10} {r['mode']:<6} {r['format']:<7} {base['median_s'] / r['median_s']:6.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


def _run_config(args: argparse.Namespace, path: str, fmt: str, pattern: str, mode: str,
                impl: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--rows", str(args.rows),
           "--budget", str(args.budget), "--path", path, "--format", fmt, "--pattern", pattern,
           "--mode", mode, "--impl", impl]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def interleaved(args: argparse.Namespace) -> None:
    """Every configuration once per round, in an order rotated each round; medians over
    rounds of the times and of the per-round ratios to pyarrow (same layout) and Lance."""
    impls = args.impls.split(",")
    layouts = tuple(args.layouts.split(","))
    paths = prepare(args.data_dir, args.rows, args.dim, args.row_group, layouts,
                    lance="lance" in impls)
    configs = []  # (label, path, format, impl)
    for layout in layouts:
        for impl in impls:
            if impl in ("bulkwire", "dataset"):
                configs.append((f"parquet:{layout} {impl}", paths[f"parquet:{layout}"],
                                "parquet", impl))
    if "bulkwire" in impls:
        configs.append(("ipc bulkwire", paths["ipc"], "ipc", "bulkwire"))
    if "lance" in impls:
        configs.append(("lance lance", paths["lance"], "lance", "lance"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    print(f"# {args.rows:,} rows x {args.dim} float32; seed {SEED}; {args.rounds} rounds, "
          f"{args.budget:g} s per configuration, order rotated each round; commit {commit}")
    for layout in layouts:
        print(f"#   parquet:{layout}: {os.path.getsize(paths[f'parquet:{layout}']) / 1e6:,.0f} MB")
    results = []
    for pattern in args.patterns.split(","):
        for mode in args.modes.split(","):
            times: dict = {c[0]: [] for c in configs}
            loads = []
            for r in range(args.rounds):
                order = configs[r % len(configs):] + configs[:r % len(configs)]
                for label, path, fmt, impl in order:
                    times[label].append(_run_config(args, path, fmt, pattern, mode,
                                                    impl)["median_s"])
                loads.append(os.getloadavg()[0])
            for label, _, _, _ in configs:
                row = {"pattern": pattern, "mode": mode, "config": label,
                       "median_ms": statistics.median(times[label]) * 1e3,
                       "load": statistics.median(loads)}
                if label.startswith("parquet:"):
                    base = label.rsplit(" ", 1)[0] + " dataset"
                    if base in times and base != label:
                        row["x_vs_pyarrow"] = statistics.median(
                            b / t for b, t in zip(times[base], times[label]))
                if "lance lance" in times and label != "lance lance":
                    row["x_of_lance"] = statistics.median(
                        t / b for b, t in zip(times["lance lance"], times[label]))
                results.append(row)
                extra = "".join(f"  {k} {row[k]:.2f}" for k in ("x_vs_pyarrow", "x_of_lance")
                                if k in row)
                print(f"{pattern:<10} {mode:<6} {label:<28} {row['median_ms']:10.2f} ms"
                      f"{extra}  (load {row['load']:.1f})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "commit": commit, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
