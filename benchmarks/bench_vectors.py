"""Vectors benchmark: bulkwire.VectorCodec against the driver's element loop and NumPy,
float32, side by side.

    PYTHONPATH=pkg python benchmarks/bench_vectors.py [--rounds 7] [--cold-rounds 5] [--quick]
    PYTHONPATH=pkg python benchmarks/bench_vectors.py --only cold --cold-rounds 9

Two kinds of figure, labelled apart, because page faults make them differ:

- warm: all contenders of a table run in one process, round by round, each round in a rotated
  order; each contender's time in a round is the mean of a loop calibrated to about
  --budget seconds. The table gives the median time and the median of the per-round ratios
  to each baseline (ratio < 1: faster than the baseline).
- cold: every sample is a fresh process that makes the data, then times one call (the first
  call of that process, so its output lands in fresh memory: thread CPU time, which counts
  the page faults but not the waits for a shared core, and wall time) and counts its minor
  page faults; the contenders take turns round by round in a rotated order.

Every contender's output is compared with the first baseline's (as bytes, row after row) and
the table says "equal", or how it differs. Prints the commit and the load average. Needs
numpy, pyarrow and scylla-driver (or cassandra-driver); pandas for the VectorDBBench table
(skipped, and said so, without it).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable

from _common import commit  # (also puts the checkout's bulkwire first, when it has an in-place build)
import numpy as np
import pyarrow as pa
import cassandra
import cassandra.cqltypes as ct

import bulkwire
import bulkwire.cql
from bulkwire import VectorCodec

ORIG_SER = ct.VectorType.__dict__["serialize"].__func__
ORIG_DES = ct.VectorType.__dict__["deserialize"].__func__


def vtype(n: int):
    return ct.lookup_casstype("org.apache.cassandra.db.marshal.VectorType("
                              f"org.apache.cassandra.db.marshal.FloatType, {n})")


# ---- what an output is, as bytes, to compare contenders --------------------------------------

def as_bytes(out) -> bytes:
    """The serialized rows of any contender's output, back to back."""
    if isinstance(out, (bytes, bytearray)):
        return bytes(out)
    if isinstance(out, tuple):  # serialize_into: (bytearray, stride)
        return bytes(out[0])
    if isinstance(out, np.ndarray):
        return out.astype(">f4").tobytes()
    if isinstance(out, list):
        return b"".join(bytes(x) for x in out)
    return bytes(out)  # VectorRows, memoryview


def as_floats(out) -> bytes:
    """Decoded rows (lists, arrays or one 2-D array) as native float32 bytes."""
    return np.asarray([np.asarray(x, dtype="f4") for x in out] if isinstance(out, list) else out,
                      dtype="f4").tobytes()


def difference(a: bytes, b: bytes) -> str:
    if a == b:
        return "equal"
    if len(a) != len(b):
        return f"differs: {len(a):,} bytes against {len(b):,}"
    first = next(i for i in range(len(a)) if a[i] != b[i])
    return f"differs from byte {first:,}"


# ---- warm: one process, interleaved rounds ----------------------------------------------------

def calibrate(fn: Callable, budget: float) -> int:
    fn()
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        t = time.perf_counter() - t0
        if t >= budget / 4 or loops >= 1 << 20:
            return max(1, int(loops * budget / max(t, 1e-9)))
        loops *= 4


def fmt(s: float) -> str:
    return f"{s * 1e3:9.2f} ms" if s >= 1e-3 else f"{s * 1e6:9.2f} µs"


def warm_table(title: str, contenders: list, baselines: list, rounds: int, budget: float,
               canon: Callable = as_bytes) -> dict:
    """contenders: (name, fn) pairs. Prints the table; returns {name: median ratio to the
    first baseline}."""
    names = [n for n, _ in contenders]
    fns = dict(contenders)
    reference = canon(fns[baselines[0]]())
    status = {n: difference(canon(fns[n]()), reference) for n in names}
    loops = {n: calibrate(fns[n], budget) for n in names}
    times: dict = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            fn, count = fns[n], loops[n]
            t0 = time.perf_counter()
            for _ in range(count):
                fn()
            times[n].append((time.perf_counter() - t0) / count)
    print(f"\n#### {title} (warm; load average {os.getloadavg()[0]:.2f})\n")
    print("| path | median time per call | " +
          " | ".join(f"median ratio to {b}" for b in baselines) + " | output |")
    print("|---|---:|" + "---:|" * len(baselines) + "---|")
    result = {}
    for n in names:
        ratios = [statistics.median(t / tb for t, tb in zip(times[n], times[b])) for b in baselines]
        result[n] = ratios[0]
        print(f"| {n} | {fmt(statistics.median(times[n]))} | " +
              " | ".join(f"{x:.3f}×" for x in ratios) + f" | {status[n]} |")
    return result


# ---- cold: a fresh process per sample --------------------------------------------------------

COLD_ROWS, COLD_DIM = 10_000, 768


def cold_contenders(codec: VectorCodec) -> dict:
    return {
        "a.astype('>f4')": lambda a: a.astype(">f4"),
        "per-row np.asarray(row, '>f4').tobytes()": lambda a: [np.asarray(x, ">f4").tobytes() for x in a],
        "serialize_many → list[bytes]": codec.serialize_many,
        "serialize_into → (bytearray, stride)": codec.serialize_into,
        "serialize_rows → VectorRows": codec.serialize_rows,
        "serialize_rows, then rows[i] for every row": lambda a: (lambda rows: (rows, [r for r in rows]))(codec.serialize_rows(a))[0],
    }


def cold_child(name: str, rows: int) -> None:
    """One sample: the data, then one timed call in this fresh process."""
    a = np.random.default_rng(0).standard_normal((rows, COLD_DIM)).astype("f4")
    fn = cold_contenders(VectorCodec("float", COLD_DIM))[name]
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0 = time.thread_time()
    t0 = time.perf_counter()
    out = fn(a)
    seconds = time.perf_counter() - t0
    cpu = time.thread_time() - c0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    digest = hashlib.blake2b(as_bytes(out), digest_size=16).hexdigest()
    print(json.dumps({"seconds": seconds, "cpu": cpu, "faults": faults, "digest": digest}))


def cold_table(rounds: int, rows: int) -> dict:
    names = list(cold_contenders(VectorCodec("float", COLD_DIM)))
    baseline = names[0]
    samples: dict = {n: [] for n in names}
    load = []
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--cold-one", n,
                                  "--cold-rows", str(rows)], capture_output=True, text=True,
                                 check=True, env=dict(os.environ))
            samples[n].append(json.loads(out.stdout.strip().splitlines()[-1]))
        load.append(os.getloadavg()[0])
    print(f"\n#### {rows:,} × {COLD_DIM} float32, cold: a fresh process per sample, one call "
          f"each ({rounds} rounds; load average {min(load):.2f}–{max(load):.2f})\n")
    print("CPU time is the calling thread's (time.thread_time: user + system, page faults "
          "included, time spent waiting for the shared cores excluded); wall time beside it.\n")
    print(f"| path | median CPU time | median CPU ratio to {baseline} | median wall time | "
          "median wall ratio | median page faults | output |")
    print("|---|---:|---:|---:|---:|---:|---|")
    ref = samples[baseline][0]["digest"]
    result = {}
    for n in names:
        def ratio(key):
            return statistics.median(s[key] / b[key] for s, b in zip(samples[n], samples[baseline]))
        result[n] = ratio("cpu")
        digests = {s["digest"] for s in samples[n]}
        status = "equal" if digests == {ref} else "differs"
        print(f"| {n} | {fmt(statistics.median(s['cpu'] for s in samples[n]))} | "
              f"{ratio('cpu'):.3f}× | {fmt(statistics.median(s['seconds'] for s in samples[n]))} | "
              f"{ratio('seconds'):.3f}× | {statistics.median(s['faults'] for s in samples[n]):,.0f} | "
              f"{status} |")
    return result


# ---- the warm tables -------------------------------------------------------------------------

def warm_tables(args) -> None:
    rounds, budget = args.rounds, args.budget
    rng = np.random.default_rng(0)
    for dim in (768, 1536):
        v = rng.standard_normal(dim).astype("f4")
        lst = v.tolist()
        T = vtype(dim)
        codec = VectorCodec("float", dim)
        ready = codec.serialize(v)
        rows = codec.serialize_rows(v[None, :])
        contenders = [
            ("np.asarray(v, '>f4').tobytes()", lambda: np.asarray(v, ">f4").tobytes()),
            ("driver element loop (list)", lambda: ORIG_SER(T, lst, 4)),
            ("bulkwire serialize(ndarray)", lambda: codec.serialize(v)),
            ("bulkwire serialize(list)", lambda: codec.serialize(lst)),
            ("bulkwire serialize(ready bytes)", lambda: codec.serialize(ready)),
            ("driver + bulkwire.cql (ndarray)", lambda: T.serialize(v, 4)),
            ("driver + bulkwire.cql (list)", lambda: T.serialize(lst, 4)),
            ("driver + bulkwire.cql (a VectorRows row)", lambda: T.serialize(rows[0], 4)),
        ]
        bulkwire.cql.install()
        try:
            warm_table(f"one {dim}-dim float32 vector", contenders,
                       ["np.asarray(v, '>f4').tobytes()", "driver element loop (list)"],
                       rounds, budget)
        finally:
            bulkwire.cql.uninstall()

    for n in (100, 10_000):
        a = rng.standard_normal((n, 768)).astype("f4")
        codec = VectorCodec("float", 768)
        warm_table(f"{n:,} × 768 float32 → rows", [
            ("a.astype('>f4')", lambda: a.astype(">f4")),
            ("per-row np.asarray(row, '>f4').tobytes()", lambda: [np.asarray(x, ">f4").tobytes() for x in a]),
            ("bulkwire serialize_many → list[bytes]", lambda: codec.serialize_many(a)),
            ("bulkwire serialize_into → (bytearray, stride)", lambda: codec.serialize_into(a)),
            ("bulkwire serialize_rows → VectorRows", lambda: codec.serialize_rows(a)),
        ], ["a.astype('>f4')", "per-row np.asarray(row, '>f4').tobytes()"], rounds, budget)

    n = 10_000
    a = rng.standard_normal((n, 768)).astype("f4")
    fsl = pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), 768)
    chunked = pa.chunked_array([fsl.slice(i * 1000, 1000) for i in range(10)])
    codec = VectorCodec("float", 768)
    warm_table("Arrow fixed_size_list<float32>[768], 10,000 rows", [
        ("per-row NumPy from Arrow (to_numpy → reshape → astype → tobytes)",
         lambda: [x.tobytes() for x in fsl.values.to_numpy().reshape(-1, 768).astype(">f4")]),
        ("bulkwire serialize_many(Arrow FSL)", lambda: codec.serialize_many(fsl)),
        ("bulkwire serialize_into(Arrow FSL)", lambda: codec.serialize_into(fsl)),
        ("bulkwire serialize_rows(Arrow FSL)", lambda: codec.serialize_rows(fsl)),
        ("bulkwire serialize_many(chunked, 10 chunks)", lambda: codec.serialize_many(chunked)),
    ], ["per-row NumPy from Arrow (to_numpy → reshape → astype → tobytes)"], rounds, budget)

    m = 200 if args.quick else 1_000
    small = fsl.slice(0, m)
    T = vtype(768)
    try:
        import pandas  # noqa: F401
    except ImportError:
        print("\n(pandas not installed: the VectorDBBench table is not measured)")
    else:
        tbl = pa.table({"emb": small})

        def vdbbench(serialize):
            df = tbl.to_pandas()
            mat = np.stack(df["emb"])
            return [serialize(row) for row in mat.tolist()]

        bulkwire.cql.install()
        try:
            warm_table(f"VectorDBBench loader path, {m:,} × 768", [
                ("VectorDBBench path (to_pandas → np.stack → .tolist() → driver)",
                 lambda: vdbbench(lambda row: ORIG_SER(T, row, 4))),
                ("same path with bulkwire.cql installed", lambda: vdbbench(lambda row: T.serialize(row, 4))),
                ("bulkwire serialize_many(Arrow column)", lambda: codec.serialize_many(small)),
                ("bulkwire serialize_many(tbl.to_pandas()['emb'])",
                 lambda: codec.serialize_many(tbl.to_pandas()["emb"])),
            ], ["VectorDBBench path (to_pandas → np.stack → .tolist() → driver)"], rounds,
                budget)
        finally:
            bulkwire.cql.uninstall()

    payloads = codec.serialize_many(a[:m])
    bulkwire.cql.install()
    try:
        warm_table(f"decoding {m:,} × 768 float32", [
            ("driver deserialize (list of floats per row)", lambda: [ORIG_DES(T, b, 4) for b in payloads]),
            ("per-row np.frombuffer(b, '>f4')", lambda: [np.frombuffer(b, ">f4") for b in payloads]),
            ("bulkwire deserialize_many → (rows, 768) float32", lambda: codec.deserialize_many(payloads)),
            ("driver + bulkwire.cql (same lists)", lambda: [T.deserialize(b, 4) for b in payloads]),
        ], ["driver deserialize (list of floats per row)"], rounds, budget, canon=as_floats)
    finally:
        bulkwire.cql.uninstall()

    # float text comes from csrc/core/json/float_text.c (shared with the JSON encoder); these
    # figures move with it. 'shortest' writes other digits by design: its output differs.
    a100 = a[:100]
    warm_table("JSON arrays, 100 × 768 float32", [
        ("bulkwire.dumps(row) per row", lambda: [bulkwire.dumps(x) for x in a100]),
        ("to_json_many (widen)", lambda: codec.to_json_many(a100)),
        ("to_json_many (float32='shortest')", lambda: codec.to_json_many(a100, float32="shortest")),
    ], ["bulkwire.dumps(row) per row"], rounds, budget)




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="warm rounds")
    ap.add_argument("--budget", type=float, default=0.02, help="seconds per warm sample")
    ap.add_argument("--cold-rounds", type=int, default=5)
    ap.add_argument("--cold-rows", type=int, default=COLD_ROWS)
    ap.add_argument("--only", choices=("warm", "cold"), help="one kind of figure only")
    ap.add_argument("--quick", action="store_true", help="fewer rows for the slow baselines")
    ap.add_argument("--cold-one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cold_one:
        cold_child(args.cold_one, args.cold_rows)
        return
    print("command:", "PYTHONPATH=pkg python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"commit {commit()}; python {platform.python_version()}, numpy {np.__version__}, "
          f"pyarrow {pa.__version__}, driver {cassandra.__version__}, {platform.machine()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if args.only != "warm":
        cold_table(args.cold_rounds, args.cold_rows)
    if args.only != "cold":
        warm_tables(args)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
