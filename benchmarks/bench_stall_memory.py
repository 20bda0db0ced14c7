"""Memory over time while the server stalls: a bulk insert of 1024-dim documents into the
loopback server, which stops reading part-way for a while and then reads on.

    python benchmarks/bench_stall_memory.py --docs 6000 --stall-after-mb 24 --stall-seconds 3 \\
        --json stall.json

Every 10 ms a sampler records the bytes of the body's live buffers (the memory the queue
bound limits), the process's resident set, how many documents were stored and whether the
server was stalled. The producer blocks on the full queue while the server stalls, so the
buffers stay within (max_buffers + 2) x (buffer_size + one command) whatever the size of the
load. Prints a
summary; ``--json`` writes the samples (``benchmarks/plot_figures.py`` draws them).
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np

import _common  # noqa: F401 - bulkwire from the checkout when it has an in-place build
import bulkwire
from bulkwire import _core
from bulkwire.testing import LoopbackServer

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=6000, help="documents (default 6000)")
    parser.add_argument("--dim", type=int, default=1024, help="vector dimension (default 1024)")
    parser.add_argument("--stall-after-mb", type=float, default=24.0,
                        help="the server stalls after this many MB of body (default 24)")
    parser.add_argument("--stall-seconds", type=float, default=3.0,
                        help="how long it stalls (default 3)")
    parser.add_argument("--json", help="write the samples here")
    args = parser.parse_args(argv)

    vectors = np.random.default_rng(7).random((args.docs, args.dim), dtype=np.float32)
    samples: list[dict] = []
    stored = [0]
    done = threading.Event()
    with LoopbackServer(keep_body=False) as server:
        server.stall(after_bytes=int(args.stall_after_mb * 1e6))
        buffer_size, max_buffers = 1 << 20, 8  # BulkInsert's defaults, given explicitly
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=buffer_size,
                                   max_buffers=max_buffers)
        # a buffer is handed over once past the threshold: it may end one command (and the
        # allocator's last page) beyond it
        command = len(bulkwire.dumps({"Name": "doc-0", "Embedding": vectors[0]})) + 4096 + 256
        buffer_bound = (max_buffers + 2) * (buffer_size + command)
        start = time.perf_counter()

        def sample() -> None:
            stalled_since = None
            while not done.is_set():
                now = time.perf_counter() - start
                stalled = server.stalled
                if stalled and stalled_since is None:
                    stalled_since = now
                if stalled and now - stalled_since >= args.stall_seconds:
                    server.resume()
                samples.append({"t": now, "buffers": _core._testing.piece_memory()[0], "rss": rss_bytes(),
                                "stored": stored[0], "stalled": stalled})
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            with bulk:
                for i in range(args.docs):
                    bulk.store({"Name": f"doc-{i}", "Embedding": vectors[i]}, id=f"docs/{i}")
                    stored[0] = i + 1
        finally:
            done.set()
            sampler.join()
            server.resume()
        seconds = time.perf_counter() - start
        arrived = server.last_request_summary()["documents"]
    stall = [s for s in samples if s["stalled"]]
    peak_buffers = max(s["buffers"] for s in samples)
    print(f"{args.docs:,} documents of {args.dim} dims in {seconds:.2f} s; the server stalled "
          f"{(stall[-1]['t'] - stall[0]['t']) if stall else 0:.1f} s; live buffers peaked at "
          f"{peak_buffers / 2**20:.1f} MiB (bound {buffer_bound / 2**20:.1f} MiB); RSS peaked at "
          f"{max(s['rss'] for s in samples) / 2**20:.0f} MiB; {arrived:,} documents arrived")
    if arrived != args.docs or peak_buffers > buffer_bound:
        print("the load did not complete within the bound")
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python benchmarks/bench_stall_memory.py " + " ".join(
                argv if argv is not None else __import__("sys").argv[1:]),
                "docs": args.docs, "dim": args.dim, "buffer_bound": buffer_bound,
                "samples": samples}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
