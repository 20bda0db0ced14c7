"""zstd against gzip on the same bulk insert body: compression alone (every level worth
trying, ISA-L's and zstd's) and end to end (BulkInsert into the loopback server).

    python benchmarks/bench_zstd.py                         # 4,000 docs, 3 rounds
    python benchmarks/bench_zstd.py --docs 1000 --rounds 1 --bodies small

Bodies: ``1024`` and ``384`` (the bulk insert benchmark's Embedding entities: a name, a rank
and a vector of Python floats) and ``small`` (documents of ten short fields, a nested dict
and a datetime). Each body is written once by a BulkWriter into its 1 MiB buffers.

Compression alone: each contender compresses every buffer of the body as the sender does (one
stream, flushed after each buffer) on this thread; contenders alternate within each round;
the figure is the median MB/s of the JSON body over the rounds and the ratio to ISA-L level 1
(the default gzip) as the median of the per-round ratios. ISA-L levels come from the ``isal``
package (the same igzip); ``core isal`` is bulkwire's own GzipStream (level 1), ``zstd N`` is
bulkwire's ZstdStream(level=N) (libzstd).

End to end: ``BulkInsert(url, db, compress=...)`` storing every entity, into the loopback
server in its own process; plain, gzip (the default backend) and zstd alternate within each
round; docs/s is the median, the ratio to gzip the median of per-round ratios, bytes on the
wire as the server counted them.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

from _common import loopback_server, print_command, server_summary, timed_insert  # noqa: F401

from bench_bulk_insert import make_entities  # noqa: E402


def small_documents(count: int) -> list:
    return [{"name": f"s{i}", "a": i, "b": 1.5, "c": None, "d": "x", "e": [1, 2],
             "f": {"g": 1, "h": "i"}, "t": datetime.datetime(2024, 1, 1), "k": True, "l": -3}
            for i in range(count)]


def body_entities(body: str, docs: int) -> list:
    return small_documents(docs * 20) if body == "small" else make_entities(docs, int(body))


def body_buffers(entities: list) -> list:
    """The body's buffers exactly as the sender gets them (bytes)."""
    import threading

    from bulkwire.bulk import BulkWriter

    writer = BulkWriter()
    buffers: list = []
    consumer = threading.Thread(target=lambda: buffers.extend(bytes(p) for p in writer.pieces()))
    consumer.start()
    for entity in entities:
        writer.store(entity)
    writer.close()
    consumer.join()
    return buffers


def compressors() -> dict:
    """name -> a function that compresses the buffers as one flushed stream; its bytes out."""
    from bulkwire import _core

    def isal_package(level: int):
        from isal import isal_zlib

        def run(buffers: list) -> int:
            c = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31)
            out = 0
            for b in buffers[:-1]:
                out += len(c.compress(b)) + len(c.flush(isal_zlib.Z_SYNC_FLUSH))
            return out + len(c.compress(buffers[-1])) + len(c.flush())
        return run

    def core(make):
        def run(buffers: list) -> int:
            stream = make()
            out = sum(len(stream.compress(b) or b"") for b in buffers[:-1])
            return out + len(stream.finish(buffers[-1]))
        return run

    found = {}
    try:
        import isal  # noqa: F401
        for level in (0, 1, 2, 3):
            found[f"isal {level}"] = isal_package(level)
    except ImportError:
        pass
    if _core.HAVE_ISAL:
        found["core isal"] = core(lambda: _core.GzipStream(backend="isal"))
    found["core zlib"] = core(lambda: _core.GzipStream(backend="zlib"))
    if _core.HAVE_ZSTD:
        for level in (-7, -5, -3, -1, 1, 2, 3):
            found[f"zstd {level}"] = core(lambda level=level: _core.ZstdStream(level=level))
    return found


def bench_compression(body: str, buffers: list, rounds: int) -> None:
    contenders = compressors()
    baseline = "isal 1" if "isal 1" in contenders else "core zlib"
    size = sum(map(len, buffers))
    seconds = {name: [] for name in contenders}
    wire = {}
    for r in range(rounds):
        names = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name in names:
            start = time.perf_counter()
            wire[name] = contenders[name](buffers)
            seconds[name].append(time.perf_counter() - start)
    print(f"\ncompression alone, body {body}: {size:,} bytes of JSON in {len(buffers)} buffers, "
          f"median of {rounds} rounds; ratio = speed vs {baseline} (median of per-round ratios)")
    print(f"{'contender':>10} {'MB/s':>8} {'ratio':>7} {'bytes out':>12} {'vs ' + baseline:>11}")
    for name in contenders:
        ratio = statistics.median(b / s for b, s in zip(seconds[baseline], seconds[name]))
        mbs = size / statistics.median(seconds[name]) / 1e6
        print(f"{name:>10} {mbs:>8,.1f} {ratio:>6.2f}x {wire[name]:>12,} "
              f"{wire[name] / wire[baseline] - 1:>+10.1%}", flush=True)


def bench_end_to_end(body: str, entities: list, rounds: int, url: str) -> None:
    import bulkwire.transport  # noqa: F401  (imported before the clock)

    # mode -> (compress, compress_threads); "gzip-1t": the gzip stream on one thread
    modes = {"plain": (False, None), "gzip": (True, None), "gzip-1t": (True, 1),
             "zstd": ("zstd", None)}
    rates = {m: [] for m in modes}
    wire = {}
    backend = {}
    for r in range(rounds):
        names = list(modes)
        for mode in names[r % len(names):] + names[:r % len(names)]:  # rotating order
            compress, threads = modes[mode]
            seconds, stats = timed_insert(url, entities, compress=compress,
                                          compress_threads=threads)
            rates[mode].append(len(entities) / seconds)
            summary = server_summary(url)
            if summary["documents"] != len(entities) or summary["error"]:
                sys.exit(f"{mode}: the server got {summary['documents']} of {len(entities)} "
                         f"documents ({summary['error']})")
            wire[mode] = summary["wire_bytes"]
            backend[mode] = stats.compression or "-"
    print(f"\nend to end, body {body}: {len(entities):,} documents into the loopback server, "
          f"median of {rounds} rounds; ratio = docs/s vs gzip (median of per-round ratios); "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'mode':>7} {'backend':>8} {'docs/s':>9} {'ratio':>7} {'wire bytes':>13} {'B/doc':>7} "
          f"{'vs gzip':>8}")
    for mode in modes:
        ratio = statistics.median(m / g for m, g in zip(rates[mode], rates["gzip"]))
        print(f"{mode:>7} {backend[mode]:>8} {statistics.median(rates[mode]):>9,.0f} {ratio:>6.2f}x "
              f"{wire[mode]:>13,} {wire[mode] / len(entities):>7,.0f} "
              f"{wire[mode] / wire['gzip'] - 1:>+7.1%}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=4000,
                        help="documents of the vector bodies (small: 20 times as many)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bodies", nargs="+", default=["1024", "384", "small"],
                        choices=["1024", "384", "small"])
    parser.add_argument("--skip", choices=["compression", "end-to-end"])
    args = parser.parse_args()
    print_command()
    from bulkwire import _core
    print(f"ISA-L linked: {bool(_core.HAVE_ISAL)}, libzstd linked: {bool(_core.HAVE_ZSTD)}, "
          f"bulkwire's zstd level: {_core.ZSTD_LEVEL}")
    with loopback_server() as url:
        for body in args.bodies:
            entities = body_entities(body, args.docs)
            if args.skip != "compression":
                bench_compression(body, body_buffers(entities), args.rounds)
            if args.skip != "end-to-end":
                bench_end_to_end(body, entities, args.rounds, url)


if __name__ == "__main__":
    main()
