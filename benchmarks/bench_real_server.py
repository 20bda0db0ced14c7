"""bulkwire against the official RavenDB client, into the same real RavenDB node (4.1.0,
started by tests/servers/ravendb.py from packages fetched once per machine).

For each workload (1024-dim and 384-dim embeddings as lists of floats, small documents) and
each body (plain, gzip), in interleaved rounds (the order rotates each round):

- ``official``: the ``ravendb`` client's own bulk insert (the baseline);
- ``bulkwire``: ``bulkwire.BulkInsert`` with the same entities and ids;
- ``replay``: the server's own ceiling: the pieces bulkwire's sender sends (compressed by
  bulkwire's compressor for gzip), built once beforehand and streamed as the same chunked
  request, one HTTP chunk per piece, so the client does almost nothing.

Printed per contender: documents per second end to end (median), its ratio to the baseline
(median of the per-round ratios), and this process's CPU seconds per 1,000 documents
(median). The server shares the machine's cores with the client, so the end-to-end rate of a
client that takes CPU also slows the server: the CPU figure is the one that carries over to a
client on its own machine. Every document of every run is stored: the database's count is
checked after each contender's first run. ``--json PATH`` also writes the figures as JSON
(``plot_figures.py --real-server PATH`` draws them).

    python benchmarks/bench_real_server.py --docs 2000 --rounds 5 --json real_server.json
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from typing import Optional

import _common  # noqa: F401 - the checkout's bulkwire, when built in place
from _rounds import interleaved_seconds, load_average, median_ratio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.servers.ravendb import RavenServer, fetch  # noqa: E402

import bulkwire  # noqa: E402

WORKLOADS = ("dim1024", "dim384", "small")
MODES = ("plain", "gzip")


class Embedding:
    def __init__(self, i: int, dim: int) -> None:
        self.Name = f"item {i}"
        self.Vector = [((i * 7919 + j * 104729) % 100_003) / 100_003.0 - 0.5 for j in range(dim)]


class Person:
    def __init__(self, i: int) -> None:
        self.Name = f"person {i}"
        self.Age = 20 + i % 60
        self.Email = f"person{i}@example.com"
        self.Active = i % 3 == 0


def entities(workload: str, docs: int) -> list:
    if workload == "small":
        return [Person(i) for i in range(docs)]
    dim = int(workload[3:])
    return [Embedding(i, dim) for i in range(docs)]


def official(server: RavenServer, database: str, items: list, compress: bool) -> None:
    from ravendb import DocumentStore
    from ravendb.documents.bulk_insert_operation import BulkInsertOptions
    from ravendb.json.metadata_as_dictionary import MetadataAsDictionary

    store = DocumentStore(urls=[server.url], database=database).initialize()
    try:
        with store.bulk_insert(options=BulkInsertOptions(use_compression=compress)) as bulk:
            for i, item in enumerate(items):
                bulk.store_as(item, f"docs/{i}", MetadataAsDictionary())
    finally:
        store.close()


def with_bulkwire(server: RavenServer, database: str, items: list, compress: bool) -> None:
    with bulkwire.BulkInsert(server.url, database, compress=compress) as bulk:
        for i, item in enumerate(items):
            bulk.store(item, id=f"docs/{i}")


def prebuilt_pieces(items: list, compress: bool) -> list:
    """The pieces of the request body bulkwire's sender sends for ``items`` (compressed by
    bulkwire's compressor when ``compress``), each one HTTP chunk of its request."""
    import threading

    from bulkwire.bulk import BulkWriter

    writer = BulkWriter(compress=compress)
    pieces: list = []  # a consumer takes the pieces as they come: the queue is bounded
    consumer = threading.Thread(target=lambda: pieces.extend(bytes(p) for p in writer.pieces()))
    consumer.start()
    for i, item in enumerate(items):
        writer.store(item, id=f"docs/{i}")
    writer.close()
    consumer.join()
    return pieces


def replay(server: RavenServer, database: str, pieces: list, compress: bool) -> None:
    """Streams a body built beforehand: one operation id, one chunked POST, one HTTP chunk
    per piece (as bulkwire's sender frames them)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=600)
    try:
        conn.request("GET", f"/databases/{database}/operations/next-operation-id")
        op = json.loads(conn.getresponse().read())["Id"]
        headers = {"Content-Type": "application/json; charset=utf-8",
                   "Transfer-Encoding": "chunked"}
        if compress:
            headers["Content-Encoding"] = "gzip"
        conn.request("POST", f"/databases/{database}/bulk_insert?id={op}"
                             "&skipOverwriteIfUnchanged=false", body=iter(pieces),
                     headers=headers, encode_chunked=True)
        answer = conn.getresponse()
        data = answer.read()
        if not 200 <= answer.status < 300:
            raise RuntimeError(f"replay: HTTP {answer.status}: {data[:300]!r}")
    finally:
        conn.close()


def summarize(workload: str, mode: str, docs: int, body_bytes: int, seconds: dict,
              cpu: dict, load: str) -> list:
    """One record per contender: documents per second end to end (median), the median of the
    per-round ratios of the official client's seconds to its own, and client CPU seconds per
    1,000 documents (median). ``seconds``/``cpu``: per contender, one figure per round."""
    return [{"workload": workload, "mode": mode, "docs": docs, "body_bytes": body_bytes,
             "load_average": load, "contender": name,
             "docs_per_s": docs / statistics.median(seconds[name]),
             "vs_official": median_ratio(seconds["official"], seconds[name]),
             "cpu_s_per_1000_docs": statistics.median(cpu[name]) / docs * 1000}
            for name in seconds]


def table(records: list) -> str:
    """The printed table of one workload and body (``summarize``'s records)."""
    first = records[0]
    compressed = " gzip" if first["mode"] == "gzip" else ""
    lines = [f"{first['workload']}, {first['mode']} ({first['docs']} documents, body "
             f"{first['body_bytes']:,} bytes{compressed}); load average {first['load_average']}",
             f"  {'contender':<10} {'docs/s':>10} {'vs official':>12} {'client CPU s/1000 docs':>24}"]
    lines += [f"  {r['contender']:<10} {r['docs_per_s']:>10,.0f} {r['vs_official']:>11.2f}x "
              f"{r['cpu_s_per_1000_docs']:>24.4f}" for r in records]
    return "\n".join(lines)


def measure(server: RavenServer, workload: str, mode: str, docs: int, rounds: int) -> list:
    """Runs the contenders on one workload and body; prints its table, returns its records."""
    compress = mode == "gzip"
    items = entities(workload, docs)
    pieces = prebuilt_pieces(items, compress)
    database = server.create_database(f"bench-{workload}-{mode}")
    cpu: dict = {"official": [], "bulkwire": [], "replay": []}
    runs = {"official": lambda: official(server, database, items, compress),
            "bulkwire": lambda: with_bulkwire(server, database, items, compress),
            "replay": lambda: replay(server, database, pieces, compress)}

    def timed(name: str):
        def run() -> None:
            began = time.process_time()
            runs[name]()
            cpu[name].append(time.process_time() - began)
            if len(cpu[name]) == 1:  # after the untimed warm-up run: every document is there
                count = server.count(database)
                if count != docs:
                    raise SystemExit(f"{name}: the server holds {count} of {docs} documents")
        return run

    seconds = interleaved_seconds({name: timed(name) for name in runs}, rounds)
    for name in cpu:
        del cpu[name][0]  # the warm-up run
    records = summarize(workload, mode, docs, sum(map(len, pieces)), seconds, cpu, load_average())
    print("\n" + table(records))
    return records


def parse_args(argv: Optional[list] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    for option, given, known in (("--workloads", args.workloads, WORKLOADS),
                                 ("--modes", args.modes, MODES)):
        unknown = [v for v in given.split(",") if v not in known]
        if unknown:
            parser.error(f"{option}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if args.docs < 1 or args.rounds < 1:
        parser.error("--docs and --rounds must be at least 1")
    return args


def main(argv: Optional[list] = None) -> None:
    args = parse_args(argv)
    _common.print_command()
    print("order rotated each round; ratios are medians of per-round ratios against 'official'")
    results: list = []
    with RavenServer(fetch()) as server:
        version = server.version()["FullVersion"]
        print(f"server: RavenDB {version} at {server.url}")
        for workload in args.workloads.split(","):
            for mode in args.modes.split(","):
                results += measure(server, workload, mode, args.docs, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {"docs": args.docs, "rounds": args.rounds}, "server": version,
                       "results": results}, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
