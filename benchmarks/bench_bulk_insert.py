"""Bulk insert end to end: bulkwire.BulkInsert vs the official ``ravendb`` client's bulk insert,
both against the same loopback server (bulkwire.testing, run in its own process).

    python benchmarks/bench_bulk_insert.py                       # 10,000 docs, 1024 and 384 dims
    python benchmarks/bench_bulk_insert.py --docs 1000 --runs 3 --dims 1024

Each measured run is a fresh process (so peak RSS belongs to one configuration); the clients
run interleaved round by round, the order rotating; docs/s is the median, the ratio the median
of per-round ratios, printed with the load average. ``--one-thread`` adds bulkwire with its
compressor on one thread (``compress_threads=1``). Documents are class instances with an ``Id``,
a name, a rank and the vector as a list of Python floats (drawn from a pool of 256 distinct
vectors, fixed seed, so the data set itself stays small). Reported: documents/s, the ratio,
peak client memory (RSS growth during the insert; for bulkwire also the peak of live body
buffers), average chunk size on the wire, bytes per document. ``--profile`` adds where the
time goes for bulkwire: encoding alone, compression alone, and cProfile of the whole run.

If ``ravendb`` is not installed the baseline is a pure-Python pipeline built from the reference
algorithm (walk -> json.dumps -> bytearray -> queue.Queue(8) -> zlib level 1 in the body
generator) over http.client.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from _common import (child_arguments, loopback_server, run_measured_child,  # noqa: E402
                     server_summary, timed_insert, writer_seconds)

POOL = 256


class Embedding:
    def __init__(self, Id, Name, Rank, Vector):
        self.Id = Id
        self.Name = Name
        self.Rank = Rank
        self.Vector = Vector


class Small:
    """A small document: ten short fields, a nested dict and a datetime."""

    def __init__(self, Id, i):
        import datetime

        self.Id = Id
        self.name, self.a, self.b, self.c, self.d = f"s{i}", i, 1.5, None, "x"
        self.e, self.f = [1, 2], {"g": 1, "h": "i"}
        self.t = datetime.datetime(2024, 1, 1, 12, 30, i % 60)
        self.k, self.l = True, -3


def make_entities(count: int, dim: int, seed: int = 42) -> list:
    """count Embedding entities of dim dimensions; dim 0: count Small documents."""
    if dim == 0:
        return [Small(f"smalls/{i}", i) for i in range(count)]
    import numpy as np

    pool = np.random.default_rng(seed).standard_normal((POOL, dim)).tolist()
    return [Embedding(f"embeddings/{i}", f"doc {i}", i, pool[i % POOL]) for i in range(count)]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---- the clients ----

def run_bulkwire(url: str, entities: list, compress: bool, threads: int | None = None) -> dict:
    from bulkwire import _core

    _core._testing.reset_piece_peak()
    seconds, stats = timed_insert(url, entities, compress=compress, compress_threads=threads)
    return {"seconds": seconds, "compression": stats.compression,
            "buffer_peak": _core._testing.piece_memory()[1], "queue_peak": stats.queue_peak,
            "blocked_puts": stats.blocked_puts}


def run_ravendb(url: str, entities: list, compress: bool) -> dict:
    from ravendb import DocumentStore
    from ravendb.documents.bulk_insert_operation import BulkInsertOptions

    store = DocumentStore(urls=[url], database="bench")
    store.conventions.disable_topology_updates = True
    store.initialize()
    try:
        start = time.perf_counter()
        with store.bulk_insert(options=BulkInsertOptions(use_compression=compress)) as bulk:
            for entity in entities:
                bulk.store(entity)
        seconds = time.perf_counter() - start
    finally:
        store.close()
    return {"seconds": seconds, "compression": "zlib" if compress else None}


def run_seed_pipeline(url: str, entities: list, compress: bool) -> dict:
    """The reference algorithm in plain Python, for when ravendb is not installed."""
    import http.client
    import queue
    import threading
    import urllib.parse
    import zlib

    u = urllib.parse.urlsplit(url)

    def get(path):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("GET", path)
        body = c.getresponse().read()
        c.close()
        return json.loads(body)

    def default(o):
        return o.__dict__

    start = time.perf_counter()
    op = get("/databases/bench/operations/next-operation-id")["Id"]
    q: queue.Queue = queue.Queue(8)
    done = object()

    def body():
        c = zlib.compressobj(1, zlib.DEFLATED, 31) if compress else None
        while True:
            b = q.get()
            if b is done:
                break
            if c is None:
                yield b
            else:
                out = c.compress(b) + c.flush(zlib.Z_SYNC_FLUSH)
                if out:
                    yield out
        if c is not None:
            yield c.flush()

    result = {}

    def send():
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        headers = {"Content-Encoding": "gzip"} if compress else {}
        c.request("POST", f"/databases/bench/bulk_insert?id={op}&skipOverwriteIfUnchanged=false",
                  body=body(), headers=headers, encode_chunked=True)
        result["status"] = c.getresponse().status

    t = threading.Thread(target=send)
    t.start()
    buf = bytearray(b"[")
    first = True
    for e in entities:
        doc = json.loads(json.dumps(e, default=default))
        doc_id = doc.pop("Id")
        doc["@metadata"] = {"@collection": "Embeddings", "Raven-Python-Type": "__main__.Embedding"}
        if not first:
            buf += b","
        first = False
        buf += b'{"Id":"' + doc_id.encode() + b'","Type":"PUT","Document":' + json.dumps(doc).encode() + b"}"
        if len(buf) > 1 << 20:
            q.put(buf)
            buf = bytearray()
    buf += b"]"
    q.put(buf)
    q.put(done)
    t.join()
    return {"seconds": time.perf_counter() - start, "compression": "zlib" if compress else None}


def run_bulkwire_one_thread(url: str, entities: list, compress: bool) -> dict:
    """bulkwire with its compressor on one thread (compress_threads=1)."""
    return run_bulkwire(url, entities, compress, threads=1)


CLIENTS = {"bulkwire": run_bulkwire, "bulkwire-1thread": run_bulkwire_one_thread,
           "ravendb": run_ravendb, "seed-python": run_seed_pipeline}


def child(args: argparse.Namespace) -> None:
    entities = make_entities(args.docs, args.dim)
    if args.child.startswith("bulkwire"):  # import outside the timed region, as for the others
        import bulkwire  # noqa: F401
        import bulkwire.transport  # noqa: F401  (http.client: ravendb's import brings it too)
    elif args.child == "ravendb":
        import ravendb  # noqa: F401
    import threading

    before = rss_bytes()
    samples = [before]
    done = threading.Event()

    def sample() -> None:  # current RSS every 20 ms: the peak of this insert alone
        while not done.wait(0.02):
            samples.append(rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = CLIENTS[args.child](args.url, entities, args.mode == "gzip")
    done.set()
    sampler.join()
    samples.append(rss_bytes())
    result["rss_growth"] = max(samples) - before
    result["maxrss_growth"] = max(0, peak_rss_bytes() - before)
    summary = server_summary(args.url)
    result.update(docs=args.docs, wire_bytes=summary["wire_bytes"], chunks=summary["wire_chunks"],
                  body_bytes=summary["body_bytes"], received=summary["documents"],
                  server_error=summary["error"])
    print(json.dumps(result))


def run_child(url: str, client: str, mode: str, dim: int, docs: int) -> dict:
    return run_measured_child(__file__, ["--child", client, "--mode", mode, "--dim", str(dim),
                                         "--docs", str(docs), "--url", url],
                              docs, f"{client} {mode} {dim}")


def profile_bulkwire(url: str, docs: int, dim: int) -> None:
    """Where bulkwire's time goes: encoding alone, compression alone, and cProfile."""
    import cProfile
    import pstats
    import threading

    import bulkwire
    from bulkwire import _core
    from bulkwire.bulk import BulkWriter

    entities = make_entities(docs, dim)
    # encoding alone: the writer with a consumer that drops the buffers (so that, as in a
    # real insert, their memory is recycled by the writer's pool); best of 3
    encode_s, body = writer_seconds(entities, 3)
    w = BulkWriter()  # the buffers themselves, kept, for compression alone (not timed)
    pieces: list = []
    t = threading.Thread(target=lambda: pieces.extend(w.pieces()))
    t.start()
    for e in entities:
        w.store(e)
    w.close()
    t.join()
    # the vectors alone, as bulkwire.dumps writes them (this includes making one bytes
    # object per list, which the writer does not do: an upper bound of the float text's share)
    floats_s = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for e in entities:
            bulkwire.dumps(e.Vector)
        floats_s = min(floats_s, time.perf_counter() - start)
    print(f"  encoding only ({docs} docs, {dim} dims): {docs / encode_s:,.0f} docs/s, "
          f"{body / encode_s / 1e6:,.1f} MB/s of JSON; bulkwire.dumps of the vector lists alone "
          f"takes {floats_s / encode_s:.0%} of that time")
    for backend in [b for b in ("zlib", "isal") if b == "zlib" or _core.HAVE_ISAL]:
        gz = _core.GzipStream(backend=backend)
        start = time.perf_counter()
        out = sum(len(gz.compress(c) or b"") for c in pieces) + len(gz.finish())
        s = time.perf_counter() - start
        print(f"  compression only, {backend}: {body / s / 1e6:,.1f} MB/s "
              f"({docs / s:,.0f} docs/s), {out / docs:,.0f} B/doc")
    # the socket alone: the same body, already encoded, through BulkInsert (C pump, HTTP
    # chunks, loopback TCP, the server reading and counting), best of 3
    commands = b"".join(bytes(c) for c in pieces)[1:-1]  # without the array's [ ]
    for mode in ("plain", "gzip"):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            with bulkwire.BulkInsert(url, "bench", compress=mode == "gzip", timeout=120) as bulk:
                bulk.store_encoded(commands, docs)
            best = min(best, time.perf_counter() - start)
        print(f"  sending only ({mode}, body already encoded): {docs / best:,.0f} docs/s, "
              f"{body / best / 1e6:,.1f} MB/s of JSON")
    for mode in ("plain", "gzip"):
        prof = cProfile.Profile()
        prof.enable()
        with bulkwire.BulkInsert(url, "bench", compress=mode == "gzip", timeout=120) as bulk:
            for e in entities:
                bulk.store(e)
        prof.disable()
        print(f"  cProfile of the producer thread, {mode} (top 6 by own time):")
        stats = pstats.Stats(prof)
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:6]
        total = sum(v[2] for v in stats.stats.values())
        for (filename, line, name), (cc, nc, tt, ct, _) in rows:
            where = os.path.basename(filename) if filename != "~" else ""
            print(f"    {tt:7.3f} s {tt / total:5.0%}  {name} {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--dims", type=int, nargs="+", default=[1024, 384],
                        help="vector dimensions; 0: the small-document workload")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["plain", "gzip"], choices=["plain", "gzip"])
    parser.add_argument("--baseline", choices=["ravendb", "seed-python"], default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--one-thread", action="store_true",
                        help="also run bulkwire with compress_threads=1 (gzip on one thread)")
    args = child_arguments(parser, sorted(CLIENTS))
    if args.child:
        return child(args)

    baseline = args.baseline
    if baseline is None:
        try:
            import ravendb  # noqa: F401
            baseline = "ravendb"
        except ImportError:
            baseline = "seed-python"
    with loopback_server() as url:
        from bulkwire import _core
        print(f"bulk insert, {args.docs:,} documents, median of {args.runs} runs, loopback server "
              f"in its own process at {url}; baseline: {baseline}; ISA-L linked: {bool(_core.HAVE_ISAL)}")
        print(f"{'dim':>5} {'mode':>5} {'client':>16} {'docs/s':>9} {'ratio':>6} {'B/doc':>7} "
              f"{'avg chunk':>10} {'peak RSS +':>11} {'buffers peak':>13} {'gzip':>6}")
        for dim in args.dims:
            for mode in args.modes:
                contenders = ["bulkwire"] + (["bulkwire-1thread"] if args.one_thread else []) + [baseline]
                results: dict = {c: [] for c in contenders}
                for run in range(args.runs):  # interleaved, the order rotating round by round
                    for client in contenders[run % len(contenders):] + contenders[:run % len(contenders)]:
                        results[client].append(run_child(url, client, mode, dim, args.docs))
                rates = {c: statistics.median(args.docs / r["seconds"] for r in rs) for c, rs in results.items()}
                for client in contenders:
                    rs = results[client]
                    last = rs[-1]
                    # the median of per-round ratios: load drift between rounds cancels out
                    ratio = statistics.median(results[baseline][i]["seconds"] / rs[i]["seconds"]
                                              for i in range(args.runs))
                    avg_chunk = statistics.median(r["wire_bytes"] / r["chunks"] for r in rs)
                    rss = statistics.median(r["rss_growth"] for r in rs)
                    peak = last.get("buffer_peak")
                    print(f"{dim:>5} {mode:>5} {client:>16} {rates[client]:>9,.0f} {ratio:>5.1f}x "
                          f"{last['wire_bytes'] / args.docs:>7,.0f} {avg_chunk / 1024:>7,.0f} KiB "
                          f"{rss / 2**20:>7,.1f} MiB "
                          f"{(f'{peak / 2**20:,.1f} MiB' if peak is not None else '-'):>13} "
                          f"{last['compression'] or '-':>6}  load {os.getloadavg()[0]:.2f}", flush=True)
        if args.profile:
            print("where bulkwire's time goes:")
            profile_bulkwire(url, min(args.docs, 2000), args.dims[0])


if __name__ == "__main__":
    main()
