"""Parquet -> bulk insert body: bulkwire.load_parquet against the VectorDBBench-style path.

Both sides read the same seeded Parquet file (int64 id, fixed_size_list<float32>[dim], row
groups of 1024 rows) and produce the same request body, byte for byte (checked: the SHA-256
of both bodies must match), plain and gzip (zlib level 1, one stream, sync flush per 1 MiB):

- bulkwire: ``load_parquet`` — Arrow batches to command bytes in C (encode_batch);
- baseline: ``iter_batches`` -> ``to_pandas`` -> ``np.stack`` -> ``.tolist()`` -> one entity
  dict per row -> the client's round-trip encoding ``json.loads(json.dumps(entity))`` ->
  ``json.dumps`` of the command -> 1 MiB buffers.

Target: ``file`` (the request body written to a temporary file, as ``bulkwire load`` does
without ``--url``; deleted after each run). Each configuration runs in its own process, which
reports wall time, documents/s, MB/s of body, and its peak RSS (ru_maxrss).

    python benchmarks/bench_load_parquet.py                      # 5,000 x 1024, a few minutes
    python benchmarks/bench_load_parquet.py --rows 100000 --runs 1  # the issue's full size
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pkg")
if os.path.isdir(PKG):  # run from a checkout: use its in-place build
    sys.path.insert(0, os.path.abspath(PKG))

CHUNK = 1 << 20
META = {"@collection": "Embeddings", "Raven-Python-Type": "builtins.dict"}


def prepare(data_dir: str, rows: int, dim: int) -> str:
    from bulkwire.parquet import sample_parquet

    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, f"load-{rows}x{dim}.parquet")
    if not os.path.exists(path):
        sample_parquet(path + ".tmp", rows=rows, dim=dim, seed=42, row_group_rows=1024)
        os.replace(path + ".tmp", path)
    return path


def run_bulkwire(path: str, out: str, gzip: bool) -> tuple[int, int, int]:
    import bulkwire

    r = bulkwire.load_parquet(path, out=out, compress=gzip, chunk_size=CHUNK)
    return r.rows, r.body_bytes, r.wire_bytes


def run_baseline(path: str, out: str, gzip: bool) -> tuple[int, int, int]:
    import numpy as np
    import pyarrow.parquet as pq

    from bulkwire.load import _FileSink

    sink = _FileSink(out, gzip)
    buf = bytearray(b"[")
    rows = body = 0
    first = True
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        df = batch.to_pandas()
        ids = df["id"].tolist()
        embs = np.stack(df["emb"]).tolist()
        for i, emb in zip(ids, embs):
            entity = {"emb": emb}
            document = json.loads(json.dumps(entity))  # the client's entity -> dict round trip
            document["@metadata"] = dict(META)
            command = '{"Id":%s,"Type":"PUT","Document":%s}' % (json.dumps(f"embeddings/{i}"),
                                                               json.dumps(document))
            if not first:
                buf += b","
            first = False
            buf += command.encode()
            if len(buf) >= CHUNK:
                sink.write(bytes(buf))
                body += len(buf)
                buf = bytearray()
            rows += 1
    buf += b"]"
    sink.write(bytes(buf))
    body += len(buf)
    sink.close()
    return rows, body, sink.wire_bytes


def body_sha256(out: str, gzip: bool) -> str:
    h = hashlib.sha256()
    d = zlib.decompressobj(31) if gzip else None
    with open(out, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                break
            h.update(d.decompress(block) if d else block)
    return h.hexdigest()


def worker(args: argparse.Namespace) -> None:
    import numpy  # noqa: F401  (imports outside the timed region for both sides)
    import pyarrow.parquet  # noqa: F401

    import bulkwire.load  # noqa: F401

    if args.impl == "baseline":
        import pandas  # noqa: F401
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = os.path.join(args.data_dir, f"out-{os.getpid()}.json" + (".gz" if args.gzip else ""))
    fn = run_bulkwire if args.impl == "bulkwire" else run_baseline
    t0 = time.perf_counter()
    rows, body, wire = fn(args.path, out, args.gzip)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    digest = body_sha256(out, args.gzip)
    os.unlink(out)
    print(json.dumps({"rows": rows, "seconds": seconds, "body_bytes": body, "wire_bytes": wire,
                      "peak_rss_mb": peak / 1024, "rss_after_imports_mb": rss_before / 1024,
                      "sha256": digest}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1, help="runs per configuration (median reported)")
    ap.add_argument("--impls", default="bulkwire,baseline")
    ap.add_argument("--modes", default="plain,gzip")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "bulkwire-bench"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--gzip", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    path = prepare(args.data_dir, args.rows, args.dim)
    print(f"# {args.rows:,} rows x {args.dim} float32 dims from {path} "
          f"({os.path.getsize(path) / 1e6:,.1f} MB Parquet, row groups of 1024); target: file; "
          f"median of {args.runs} run(s), one process each")
    results = []
    for mode in args.modes.split(","):
        for impl in args.impls.split(","):
            runs = []
            for _ in range(args.runs):
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--impl", impl,
                       "--path", path, "--data-dir", args.data_dir] + (["--gzip"] if mode == "gzip" else [])
                p = subprocess.run(cmd, check=True, capture_output=True, text=True)
                runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
            r = dict(runs[0], seconds=statistics.median(x["seconds"] for x in runs),
                     peak_rss_mb=max(x["peak_rss_mb"] for x in runs), impl=impl, mode=mode)
            results.append(r)
            print(f"  {impl:<9} {mode:<5} {r['rows'] / r['seconds']:>10,.0f} docs/s "
                  f"{r['body_bytes'] / r['seconds'] / 1e6:>8,.1f} MB/s  peak RSS {r['peak_rss_mb']:,.0f} MB",
                  file=sys.stderr)
    print()
    print("| path | mode | docs/s | MB/s (body) | body bytes/doc | wire bytes/doc | peak RSS MB | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['impl']} | {r['mode']} | {r['rows'] / r['seconds']:,.0f} | "
              f"{r['body_bytes'] / r['seconds'] / 1e6:,.1f} | {r['body_bytes'] / r['rows']:,.0f} | "
              f"{r['wire_bytes'] / r['rows']:,.0f} | {r['peak_rss_mb']:,.0f} | {r['seconds']:.2f} |")
    print()
    for mode in args.modes.split(","):
        ours = [r for r in results if r["mode"] == mode and r["impl"] == "bulkwire"]
        base = [r for r in results if r["mode"] == mode and r["impl"] == "baseline"]
        if ours and base:
            same = ours[0]["sha256"] == base[0]["sha256"]
            print(f"{mode}: bulkwire is {base[0]['seconds'] / ours[0]['seconds']:.2f}x the baseline's "
                  f"speed; bodies identical: {same}")
            if not same:
                raise SystemExit("the two bodies differ")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
