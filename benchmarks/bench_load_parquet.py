"""Parquet -> bulk insert body: bulkwire.load_parquet against the VectorDBBench-style path.

Both sides read the same seeded Parquet file (int64 id, fixed_size_list<float32>[dim], row
groups of 1024 rows) and produce the same request body, byte for byte (checked: the SHA-256
of both bodies must match), plain and gzip (zlib level 1, one stream, sync flush per 1 MiB):

- bulkwire: ``load_parquet`` — Arrow batches to command bytes in C (encode_batch);
- baseline: ``iter_batches`` -> ``to_pandas`` -> ``np.stack`` -> ``.tolist()`` -> one entity
  dict per row -> the client's round-trip encoding ``json.loads(json.dumps(entity))`` ->
  ``json.dumps`` of the command -> 1 MiB buffers.

Target ``server`` (default): the loopback bulk insert server (``bulkwire.testing``, in its own
process, counting bytes and commands), both sides streaming through the same transport
(``bulkwire.BulkInsert.store_encoded``: bounded queue, gzip on the sender thread, chunked
POST); the server's byte and document counts must match. Target ``file``: the request body
written to a temporary file, as ``bulkwire load`` does without ``--url`` (deleted after each
run); there the two bodies' SHA-256 must match. Each configuration runs in its own process,
which reports wall time, documents/s, MB/s of body, and its peak RSS (ru_maxrss).

``--tree NAME=PATH`` (repeatable) measures builds side by side: the ``bulkwire`` path runs
once per build as ``bulkwire@NAME``, with that build's package (``_trees.py``), in the same
rotation, and each build's documents/s is compared with each other's (the median of the
per-round ratios); every build's body must be the same.

    python benchmarks/bench_load_parquet.py                      # 5,000 x 1024, a few minutes
    python benchmarks/bench_load_parquet.py --rows 100000           # 100,000 x 1024: 400 MB of vectors
    python benchmarks/bench_load_parquet.py --impls bulkwire --runs 5 \
        --tree before=../before/pkg --tree after=pkg                 # two builds
"""
from __future__ import annotations

import argparse
import contextlib
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


import _trees
from _common import loopback_server, server_summary  # noqa: E402
from _rounds import rotation

BUFFER_SIZE = 1 << 20
META = {"@collection": "Embeddings", "Raven-Python-Type": "builtins.dict"}


def prepare(data_dir: str, rows: int, dim: int) -> str:
    from bulkwire.parquet import sample_parquet

    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, f"load-{rows}x{dim}.parquet")
    if not os.path.exists(path):
        sample_parquet(path + ".tmp", rows=rows, dim=dim, seed=42, row_group_rows=1024)
        os.replace(path + ".tmp", path)
    return path


def run_bulkwire(path: str, out: str, gzip: bool, url: str | None) -> tuple[int, int, int]:
    import bulkwire

    if not _trees.has_targets():  # a build from before targets were values
        where = {"url": url, "database": "bench"} if url else {"out": out}
        r = bulkwire.load_parquet(path, compress=gzip, buffer_size=BUFFER_SIZE, **where)
    elif url:
        r = bulkwire.load_parquet(path, bulkwire.targets.ravendb(url, "bench", compress=gzip,
                                                                 buffer_size=BUFFER_SIZE))
    else:
        r = bulkwire.load_parquet(path, bulkwire.targets.request_file(out, compress=gzip,
                                                                      buffer_size=BUFFER_SIZE))
    return r.rows, r.body_bytes, r.wire_bytes


class _BaselineFile:
    """The baseline's body file: each write one piece (gzip: compressed and sync-flushed)."""

    def __init__(self, path: str, gzip: bool) -> None:
        from bulkwire import _core
        from bulkwire.compression import native_backend

        self._file = open(path, "wb")
        self._gzip = _core.GzipStream(backend=native_backend()) if gzip else None
        self.wire_bytes = 0

    def write(self, data: bytes) -> None:
        if self._gzip is not None:
            data = self._gzip.compress(data)
            if data is None:
                return
        self._file.write(data)
        self.wire_bytes += len(data)

    def close(self) -> None:
        if self._gzip is not None:
            self.write_raw(self._gzip.finish())
        self._file.close()

    def write_raw(self, data: bytes) -> None:
        self._file.write(data)
        self.wire_bytes += len(data)


def run_baseline(path: str, out: str, gzip: bool, url: str | None) -> tuple[int, int, int]:
    import numpy as np
    import pyarrow.parquet as pq

    from bulkwire.bulk import BulkInsert
    from bulkwire.compression import native_backend

    # server: 1 MiB runs of commands to BulkInsert.store_encoded (it writes '[', ',' and ']');
    # file: the framed body, written 1 MiB at a time (gzip: sync-flushed each time)
    bulk = (BulkInsert(url, "bench", compress=native_backend() if gzip else False, buffer_size=BUFFER_SIZE)
            if url else None)
    sink = None if url else _BaselineFile(out, gzip)
    buf = bytearray() if url else bytearray(b"[")
    rows = body = pending = 0
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
            if (len(buf) > 0) if bulk is not None else not first:
                buf += b","
            first = False
            buf += command.encode()
            pending += 1
            if len(buf) >= BUFFER_SIZE:
                if bulk is not None:
                    bulk.store_encoded(bytes(buf), pending)
                else:
                    sink.write(bytes(buf))
                    body += len(buf)
                buf = bytearray()
                pending = 0
            rows += 1
    if bulk is not None:
        if buf:
            bulk.store_encoded(bytes(buf), pending)
        bulk.close()
        return rows, bulk.stats.body_bytes, bulk.stats.wire_bytes
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

    if args.impl == "bulkwire" and _trees.has_targets():
        import bulkwire.targets  # noqa: F401
    if args.impl == "baseline":
        import pandas  # noqa: F401
    import bulkwire.bulk  # noqa: F401

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = os.path.join(args.data_dir, f"out-{os.getpid()}.json" + (".gz" if args.gzip else ""))
    fn = run_bulkwire if args.impl == "bulkwire" else run_baseline
    t0 = time.perf_counter()
    rows, body, wire = fn(args.path, out, args.gzip, args.url)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"rows": rows, "seconds": seconds, "body_bytes": body, "wire_bytes": wire,
              "peak_rss_mb": peak / 1024, "rss_after_imports_mb": rss_before / 1024,
              "package": _trees.package_folder()}
    if args.url:
        summary = server_summary(args.url)
        result.update(sha256=None, server_documents=summary["documents"],
                      server_body_bytes=summary["body_bytes"], server_wire_bytes=summary["wire_bytes"],
                      server_error=summary["error"])
        if summary["documents"] != rows or summary["body_bytes"] != body or summary["error"]:
            raise SystemExit(f"the server got {summary}, the client sent {rows} rows, {body} bytes")
    else:
        result["sha256"] = body_sha256(out, args.gzip)
        os.unlink(out)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1,
                    help="rounds: each runs every configuration once, in a rotating order")
    ap.add_argument("--impls", default="bulkwire,baseline")
    ap.add_argument("--modes", default="plain,gzip")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "bulkwire-bench"))
    ap.add_argument("--target", choices=["server", "file"], default="server")
    ap.add_argument("--json", help="also write the results here")
    _trees.add_arguments(ap)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--gzip", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    args.trees = _trees.trees_of(ap, args)
    if args.trees and "bulkwire" not in args.impls.split(","):
        ap.error("--tree measures the bulkwire path: add bulkwire to --impls")
    path = prepare(args.data_dir, args.rows, args.dim)
    with loopback_server() if args.target == "server" else contextlib.nullcontext(args.url) as url:
        args.url = url
        run_all(args, path)


def run_one(args: argparse.Namespace, path: str, impl: str, mode: str) -> dict:
    """One run of ``impl`` (``bulkwire@NAME``: the bulkwire path with that build) in a fresh
    process."""
    tree = {t.contender: t for t in args.trees}.get(impl)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--impl",
           "bulkwire" if tree else impl,
           "--path", path, "--data-dir", args.data_dir] + (["--gzip"] if mode == "gzip" else []) \
        + (["--url", args.url] if args.url else [])
    p = subprocess.run(cmd, check=True, capture_output=True, text=True,
                       env=_trees.environment(tree))
    result = json.loads(p.stdout.strip().splitlines()[-1])
    _trees.check_ran(tree, result["package"])
    return dict(result, load=os.getloadavg()[0])


def run_all(args: argparse.Namespace, path: str) -> None:
    """Every configuration once per round, the rounds' orders rotating, so that a burst of load
    on the machine hits the contenders alike; the speed-up is the median of the per-round
    ratios."""
    from bulkwire import _core

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    target = (f"the loopback server in its own process ({args.url})" if args.url
              else "a file (the request body)")
    print("command: python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]))
    print(f"# commit {commit or '?'}; {args.rows:,} rows x {args.dim} float32 dims from {path} "
          f"({os.path.getsize(path) / 1e6:,.1f} MB Parquet, row groups of 1024); target: {target}; "
          f"gzip backend: {'isal' if _core.HAVE_ISAL else 'zlib'}; {args.runs} round(s), "
          f"rotating order, one process per run")
    impls = args.impls.split(",")
    if args.trees:  # the bulkwire path once per build, in its place
        at = impls.index("bulkwire")
        impls = impls[:at] + [t.contender for t in args.trees] + impls[at + 1:]
    configs = [(mode, impl) for mode in args.modes.split(",") for impl in impls]
    runs: dict = {c: [] for c in configs}
    for round_, (mode, impl) in rotation(configs, args.runs):
        r = run_one(args, path, impl, mode)
        runs[(mode, impl)].append(r)
        print(f"  round {round_ + 1} {impl:<9} {mode:<5} {r['rows'] / r['seconds']:>10,.0f} "
              f"docs/s {r['body_bytes'] / r['seconds'] / 1e6:>8,.1f} MB/s  peak RSS "
              f"{r['peak_rss_mb']:,.0f} MB  load average {r['load']:.2f}", file=sys.stderr)
    results = []
    for (mode, impl), done in runs.items():
        results.append(dict(done[0], seconds=statistics.median(x["seconds"] for x in done),
                            peak_rss_mb=max(x["peak_rss_mb"] for x in done), impl=impl,
                            mode=mode, load=statistics.median(x["load"] for x in done)))
    print()
    print("| path | mode | docs/s | MB/s (body) | body bytes/doc | wire bytes/doc | peak RSS MB | "
          "seconds | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['impl']} | {r['mode']} | {r['rows'] / r['seconds']:,.0f} | "
              f"{r['body_bytes'] / r['seconds'] / 1e6:,.1f} | {r['body_bytes'] / r['rows']:,.0f} | "
              f"{r['wire_bytes'] / r['rows']:,.0f} | {r['peak_rss_mb']:,.0f} | {r['seconds']:.2f} | "
              f"{r['load']:.2f} |")
    print()
    for mode in args.modes.split(","):
        base = runs.get((mode, "baseline"))
        if args.trees:
            print(_trees.table(f"{mode}: docs/s",
                               {t.contender: [1 / x["seconds"] for x in runs[mode, t.contender]]
                                for t in args.trees}, args.trees))
            same_body(mode, [runs[mode, t.contender][0] for t in args.trees], args.url)
        ours = runs.get((mode, "bulkwire"))
        if ours and base:
            if args.url:
                same = ours[0]["body_bytes"] == base[0]["body_bytes"]
                check = f"same body size at the server: {same}"
            else:
                same = ours[0]["sha256"] == base[0]["sha256"]
                check = f"bodies identical (SHA-256): {same}"
            ratios = [b["seconds"] / o["seconds"] for o, b in zip(ours, base)]
            print(f"{mode}: bulkwire is {statistics.median(ratios):.2f}x the baseline's speed "
                  f"(median of per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}); {check}")
            if not same:
                raise SystemExit("the two bodies differ")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "commit": commit, "results": results}, f, indent=1)


def same_body(mode: str, first_runs: list[dict], url: str | None) -> None:
    """Every build wrote the same body (its SHA-256; at the server, its size); else exits."""
    key = "body_bytes" if url else "sha256"
    if len({r[key] for r in first_runs}) != 1:
        raise SystemExit(f"{mode}: the builds' bodies differ ({key}: "
                         f"{', '.join(str(r[key]) for r in first_runs)})")
    print(f"{mode}: every build's body the same ({'size at the server' if url else 'SHA-256'})")


if __name__ == "__main__":
    main()
