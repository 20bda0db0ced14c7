"""bulkwire against the official RavenDB client, into the same real RavenDB node (4.1.0,
started by tests/servers/ravendb.py from packages fetched once per machine).

For each workload (1024-dim and 384-dim embeddings as lists of floats, small documents) and
each body (plain, gzip), in interleaved rounds (the order rotates each round):

- ``official``: the ``ravendb`` client's own bulk insert (the baseline);
- ``bulkwire``: ``bulkwire.BulkInsert`` with the same entities and ids;
- ``replay``: the server's own ceiling: the body built once beforehand (gzip-compressed
  beforehand for gzip) and sent as it is, so the client does almost nothing.

Printed per contender: documents per second end to end (median), its ratio to the baseline
(median of the per-round ratios), and this process's CPU seconds per 1,000 documents
(median). The server shares the machine's cores with the client, so the end-to-end rate of a
client that takes CPU also slows the server: the CPU figure is the one that carries over to a
client on its own machine. Every document of every run is stored: the database's count is
checked after each contender's first run.

    python benchmarks/bench_real_server.py --docs 2000 --rounds 5
"""
from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import statistics
import sys
import time

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


def prebuilt_body(items: list, compress: bool) -> bytes:
    """The request body bulkwire writes for ``items``, built once (compressed once)."""
    import threading

    from bulkwire.bulk import BulkWriter

    writer = BulkWriter()
    pieces: list = []  # a consumer takes the pieces as they come: the queue is bounded
    consumer = threading.Thread(target=lambda: pieces.extend(bytes(p) for p in writer.chunks()))
    consumer.start()
    for i, item in enumerate(items):
        writer.store(item, id=f"docs/{i}")
    writer.close()
    consumer.join()
    body = b"".join(pieces)
    return gzip.compress(body, 1) if compress else body


def replay(server: RavenServer, database: str, body: bytes, compress: bool) -> None:
    """Sends a body built beforehand: one operation id, one POST with a Content-Length."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=600)
    try:
        conn.request("GET", f"/databases/{database}/operations/next-operation-id")
        op = json.loads(conn.getresponse().read())["Id"]
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if compress:
            headers["Content-Encoding"] = "gzip"
        conn.request("POST", f"/databases/{database}/bulk_insert?id={op}"
                             "&skipOverwriteIfUnchanged=false", body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        if not 200 <= answer.status < 300:
            raise RuntimeError(f"replay: HTTP {answer.status}: {data[:300]!r}")
    finally:
        conn.close()


def measure(server: RavenServer, workload: str, mode: str, docs: int, rounds: int) -> None:
    compress = mode == "gzip"
    items = entities(workload, docs)
    body = prebuilt_body(items, compress)
    database = server.create_database(f"bench-{workload}-{mode}")
    cpu: dict = {"official": [], "bulkwire": [], "replay": []}
    runs = {"official": lambda: official(server, database, items, compress),
            "bulkwire": lambda: with_bulkwire(server, database, items, compress),
            "replay": lambda: replay(server, database, body, compress)}

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
    print(f"\n{workload}, {mode} ({docs} documents, body {len(body):,} bytes"
          f"{' gzip' if compress else ''}); load average {load_average()}")
    print(f"  {'contender':<10} {'docs/s':>10} {'vs official':>12} {'client CPU s/1000 docs':>24}")
    for name in runs:
        rate = docs / statistics.median(seconds[name])
        ratio = median_ratio(seconds["official"], seconds[name])  # >1: faster than the baseline
        per_thousand = statistics.median(cpu[name]) / docs * 1000
        print(f"  {name:<10} {rate:>10,.0f} {ratio:>11.2f}x {per_thousand:>24.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    _common.print_command()
    print("order rotated each round; ratios are medians of per-round ratios against 'official'")
    with RavenServer(fetch()) as server:
        print(f"server: RavenDB {server.version()['FullVersion']} at {server.url}")
        for workload in args.workloads.split(","):
            for mode in args.modes.split(","):
                measure(server, workload, mode, args.docs, args.rounds)


if __name__ == "__main__":
    main()
