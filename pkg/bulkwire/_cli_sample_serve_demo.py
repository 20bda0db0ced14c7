"""``bulkwire sample`` (a seeded sample Parquet file), ``bulkwire serve`` (the loopback bulk
insert server) and ``bulkwire demo`` (the JSON encoder timed).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from ._cli_errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, _fail, \
    _sigterm_stops, _Terminated


def _sample_documents(count: int, dim: int, seed: int) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.random((count, dim), dtype=np.float32)
    return [{"Name": f"doc-{i}", "Rank": i, "Score": float(i) / 3, "Active": i % 2 == 0,
             "Embedding": vectors[i]} for i in range(count)]


def cmd_demo(args: argparse.Namespace) -> int:
    """Encode a generated sample of documents and report what it did and how fast."""
    from . import dumps

    docs = _sample_documents(args.docs, args.dim, args.seed)
    start = time.perf_counter()
    total = sum(len(dumps(d, float32=args.float32)) for d in docs)
    seconds = time.perf_counter() - start
    print(f"encoded {len(docs):,} documents with {args.dim}-dim float32 vectors "
          f"(float32={args.float32}): {total:,} bytes in {seconds:.3f} s, "
          f"{len(docs) / seconds:,.0f} documents/s, {total / seconds / 1e6:,.1f} MB/s")
    return 0


#: ``bulkwire sample`` warns before writing more than this into the current directory.
LARGE_SAMPLE_BYTES = 100 * 1000 * 1000


def cmd_sample(args: argparse.Namespace) -> int:
    """Write a seeded sample Parquet file (int64 id, fixed_size_list<float32>[dim])."""
    estimate = args.rows * (args.dim * 4 + 8)  # random float32 values hardly compress
    folder = os.path.dirname(os.path.abspath(args.path))
    if estimate > LARGE_SAMPLE_BYTES and folder == os.path.abspath(os.getcwd()):
        print(f"bulkwire: warning: writing about {estimate / 1e6:,.0f} MB into the current "
              f"directory ({args.path})", file=sys.stderr)
    try:
        from .parquet import sample_parquet

        start = time.perf_counter()
        with _sigterm_stops():
            path = sample_parquet(args.path, rows=args.rows, dim=args.dim, seed=args.seed,
                                  row_group_rows=args.row_group, id_start=args.id_start)
    except _Terminated:
        return _fail("terminated", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        return _fail(str(exc))
    print(f"wrote {args.rows:,} rows x {args.dim} float32 dims (seed {args.seed}) to {path}: "
          f"{os.path.getsize(path):,} bytes in {time.perf_counter() - start:.2f} s")
    return EXIT_OK


def _request_line(request) -> str:
    """One line for a finished bulk insert request of the loopback server."""
    outcome = (f"answered {request.status}" if request.error is None
               else f"failed ({request.error})")
    documents = len(request.commands) if request.commands is not None else request.put_commands
    encoding = request.headers.get("Content-Encoding") or "plain"
    return (f"bulk insert {request.op_id}: {documents:,} documents, {request.body_bytes:,} "
            f"body bytes ({encoding}), {outcome}")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the loopback bulk insert server until Ctrl-C, one line per finished request."""
    from .testing import LoopbackServer

    try:
        server = LoopbackServer(args.database, port=args.port, keep_body=args.keep,
                                keep_decoded_chunks=False)
    except OSError as exc:
        return _fail(f"--port {args.port}: {exc.strerror or exc}", EXIT_USAGE)
    with server:
        print(f"serving database {args.database!r} at {server.url} "
              f"({'keeping documents' if args.keep else 'counting only'}); Ctrl-C stops",
              flush=True)
        reported = 0
        try:
            while True:
                time.sleep(0.2)
                finished = [r for r in server.requests[reported:]]
                for request in finished:
                    if request.status is None and request.error is None:
                        break  # still arriving: report in order
                    print(_request_line(request), flush=True)
                    reported += 1
        except KeyboardInterrupt:
            pass
    return EXIT_OK
