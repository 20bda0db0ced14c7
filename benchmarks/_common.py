"""Shared by the benchmark scripts: timing with medians, the round-trip oracle, and the
loopback bulk insert server (bulkwire.testing) run in its own process."""
from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Callable, Iterator

from _trees import built

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "pkg")  # the checkout's package, with its in-place build
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # oracle.py: the reference round trip
# Scripts import bulkwire from the checkout once they import this, when it has an in-place
# build; otherwise the installed package. A folder on PYTHONPATH that holds a bulkwire
# package comes first all the same (a build under comparison: _trees.py).
_GIVEN = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
          if p and os.path.isdir(os.path.join(p, "bulkwire"))]
if PKG not in sys.path and not _GIVEN and built(PKG):
    sys.path.insert(0, PKG)


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls of fn (one untimed warm-up call first)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def writer_seconds(entities: list, runs: int, defer_float_text: bool = True) -> tuple:
    """The bulk insert writer alone: best wall time over `runs` of BulkWriter.store for every
    entity, with a consumer thread that drops the buffers (as the sender does, so that their
    memory is recycled; reading their length writes any pending float text, as the sender
    does); returns (seconds, body bytes)."""
    import threading

    from bulkwire.bulk import BulkWriter

    best, body = float("inf"), 0
    for _ in range(runs):
        writer = BulkWriter(defer_float_text=defer_float_text)
        sizes: list = []
        consumer = threading.Thread(target=lambda: sizes.extend(len(c) for c in writer.pieces()))
        consumer.start()
        start = time.perf_counter()
        for entity in entities:
            writer.store(entity)
        writer.close()
        consumer.join()
        best = min(best, time.perf_counter() - start)
        body = sum(sizes)
    return best, body


def timed_insert(url: str, entities: list, **options) -> tuple:
    """(seconds, stats) of one ``bulkwire.BulkInsert`` of ``entities`` into the database
    "bench" at ``url`` (a 120 s timeout; ``options``, the insert's other keywords), each
    entity stored through the bound ``store``."""
    import bulkwire

    start = time.perf_counter()
    with bulkwire.BulkInsert(url, "bench", timeout=120, **options) as bulk:
        store = bulk.store
        for entity in entities:
            store(entity)
    return time.perf_counter() - start, bulk.stats


def child_arguments(parser, children) -> object:
    """The command line of a benchmark that runs each client in a child process of its
    own, parsed: ``parser``'s arguments and what the parent hands a child, ``--child`` (one
    of ``children``), ``--mode``, ``--dim`` and ``--url``."""
    parser.add_argument("--child", choices=children)
    parser.add_argument("--mode", choices=["plain", "gzip"])
    parser.add_argument("--dim", type=int)
    parser.add_argument("--url")
    return parser.parse_args()
def split_parquet(table, folder: str, parts: int, name: str = "parts") -> str:
    """The rows of the Arrow ``table`` as ``parts`` Parquet files (consecutive slices) in a
    new directory ``name`` of ``folder``: an engine's partitions of the same rows; returns
    the directory."""
    import pyarrow.parquet as pq

    directory = os.path.join(folder, name)
    os.makedirs(directory)
    step = -(-table.num_rows // parts)
    for n, start in enumerate(range(0, table.num_rows, step)):
        pq.write_table(table.slice(start, step), os.path.join(directory, f"part-{n:03d}.parquet"),
                       row_group_size=4096)
    return directory


def commit() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes), or ``unknown``."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


def print_command() -> None:
    print("command: python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]))


@contextlib.contextmanager
def loopback_server(database: str = "bench") -> Iterator[str]:
    """The loopback bulk insert server (``python -m bulkwire.testing``, which is ``bulkwire
    serve``: counting only) in a process of its own, so that serving does not share the
    measured client's GIL; yields its URL and stops it on the way out."""
    # the child imports the same bulkwire as this process (the checkout's build, or installed)
    package_parent = os.path.dirname(os.path.dirname(sys.modules["bulkwire"].__file__)) \
        if "bulkwire" in sys.modules else (PKG if PKG in sys.path else "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p)}
    server = subprocess.Popen([sys.executable, "-m", "bulkwire.testing", "--port", "0",
                               "--database", database, "--count-only"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        first = server.stdout.readline()  # "serving database 'bench' at <URL> (counting only)..."
        found = re.search(r" at (https?://\S+) ", first)
        if found is None:
            raise RuntimeError(f"the loopback server did not start: {first!r}")
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(10)


def server_summary(url: str) -> dict:
    """What the loopback server counted for the last bulk insert (documents, body and wire
    bytes, chunks, error)."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/_loopback/last")
    data = json.loads(conn.getresponse().read())
    conn.close()
    return data


def run_measured_child(script: str, args: list, docs: int, what: str) -> dict:
    """Runs ``script`` with ``args`` in a fresh process; returns the JSON object its last line
    prints, after checking the server received ``docs`` documents and no error."""
    out = subprocess.run([sys.executable, script, *args], check=True, capture_output=True,
                         text=True, timeout=3600)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["received"] != docs or result["server_error"]:
        raise SystemExit(f"{what}: the server got {result['received']} of {docs} documents "
                         f"({result['server_error']})")
    return result
