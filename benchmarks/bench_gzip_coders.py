"""CPU cost and size of the gzip body coders on two kinds of body: float arrays (1024-dim
embedding documents, written as the JSON round trip writes them) and small documents with
repeating keys. Contenders: the one-thread stream (ISA-L or zlib deflating every byte: the
baseline) and the block path on two threads, which samples one block in 16 and codes float
arrays with the comma coder.

    python benchmarks/bench_gzip_coders.py --mib 32 --rounds 7

For each body and contender: CPU MB/s (input bytes over the process's CPU seconds, every
thread counted), the compressed size over the input, the blocks the comma coder wrote, and
the median over rounds of the baseline's CPU seconds over the contender's. Rounds interleave
the contenders in a rotating order; the load average is printed with the results.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import _common  # noqa: F401  (the checkout's bulkwire, when built in place)
from _rounds import load_average

import numpy as np

from bulkwire import _core, compression

PIECE = 1 << 20  # what the sender hands the compressor: one buffer


def float_arrays(size: int) -> bytes:
    rng = np.random.default_rng(7)
    out, i = bytearray(), 0
    while len(out) < size:
        vector = rng.standard_normal(1024).astype(np.float32)
        vector /= np.linalg.norm(vector)
        out += json.dumps({"Name": f"item {i}", "Vector": vector.tolist()}).encode()
        i += 1
    return bytes(out[:size])


def small_documents(size: int) -> bytes:
    out, i = bytearray(), 0
    while len(out) < size:
        out += json.dumps({"Name": f"user {i}", "Age": i % 90, "Email": f"user{i}@example.com",
                           "@metadata": {"@collection": "Users"}}).encode()
        i += 1
    return bytes(out[:size])


def compress(backend: str, threads: int, body: bytes) -> tuple[float, int, int]:
    """CPU seconds, compressed bytes and comma blocks of one body, piece by piece."""
    stream = _core.GzipStream(backend=backend, threads=threads)
    view = memoryview(body)
    began = time.process_time()
    for start in range(0, len(body) - PIECE, PIECE):
        stream.compress(view[start:start + PIECE])
    stream.finish(view[(len(body) - 1) // PIECE * PIECE:])
    return time.process_time() - began, stream.total_out, stream.comma_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=32, help="body size in MiB")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    backends = [b for b in ("isal", "zlib") if b in compression.compression_backends()]
    size = args.mib << 20
    print(f"load average before: {load_average()}")
    for body_name, body in (("float arrays, 1024 dims", float_arrays(size)),
                            ("small documents", small_documents(size))):
        for backend in backends:
            contenders = {f"{backend}, 1 thread": 1, f"{backend}, 2 threads": 2}
            seconds: dict[str, list[float]] = {name: [] for name in contenders}
            outcome: dict[str, tuple[int, int]] = {}
            names = list(contenders)
            for name in names:  # warm-up
                compress(backend, contenders[name], body)
            for round_index in range(args.rounds):
                start = round_index % len(names)
                for name in names[start:] + names[:start]:
                    cpu, out, commas = compress(backend, contenders[name], body)
                    seconds[name].append(cpu)
                    outcome[name] = (out, commas)
            baseline = names[0]
            print(f"\n{body_name}, {args.mib} MiB, backend {backend} "
                  f"(load average {load_average()}):")
            print(f"  {'contender':18s} {'CPU MB/s':>9s} {'size':>7s} {'comma blocks':>13s} "
                  f"{'baseline CPU / this':>20s}")
            for name in names:
                ratio = statistics.median(b / s for b, s in zip(seconds[baseline], seconds[name]))
                out, commas = outcome[name]
                rate = size / statistics.median(seconds[name]) / 1e6
                print(f"  {name:18s} {rate:9.0f} {out / size:7.4f} {commas:13d} {ratio:19.2f}x")
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
