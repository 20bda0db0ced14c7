"""Vectors benchmark (issue 3): bulkwire.VectorCodec against the driver's element loop and
NumPy, side by side in one run, float32.

    PYTHONPATH=pkg python benchmarks/bench_vectors.py [--repeat 7] [--quick]

Each figure is the median over --repeat runs of the mean time per call within a run (the
loop count is calibrated to ~0.1 s per run). Ratios are against baselines measured in this
same run. Needs numpy, pyarrow and scylla-driver (or cassandra-driver); pandas is used for
the VectorDBBench path when installed, else that row is skipped.
"""
from __future__ import annotations

import argparse
import platform
import shlex
import statistics
import sys
import time

import numpy as np
import pyarrow as pa
import cassandra
import cassandra.cqltypes as ct

import bulkwire
import bulkwire.cql
from bulkwire import VectorCodec

ORIG_SER = ct.VectorType.__dict__["serialize"].__func__
ORIG_DES = ct.VectorType.__dict__["deserialize"].__func__


def vtype(n):
    return ct.lookup_casstype("org.apache.cassandra.db.marshal.VectorType("
                              f"org.apache.cassandra.db.marshal.FloatType, {n})")


def bench(fn, repeat, budget=0.1):
    fn()
    loops, t = 1, 0.0
    while True:  # calibrate
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        t = time.perf_counter() - t0
        if t >= budget / 4 or loops >= 1 << 20:
            break
        loops *= 4
    loops = max(1, int(loops * budget / max(t, 1e-9)))
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        runs.append((time.perf_counter() - t0) / loops)
    return statistics.median(runs)


def fmt(s):
    if s >= 1e-3:
        return f"{s * 1e3:9.2f} ms"
    return f"{s * 1e6:9.2f} µs"


def table(title, rows, base_names):
    print(f"\n### {title}\n")
    print("| path | time per call | " + " | ".join(f"vs {b}" for b in base_names) + " |")
    print("|---|---:|" + "---:|" * len(base_names))
    times = dict(rows)
    for name, t in rows:
        ratios = [f"{t / times[b]:.3f}×" for b in base_names]
        print(f"| {name} | {fmt(t)} | " + " | ".join(ratios) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="fewer rows for the slow baselines")
    args = ap.parse_args()
    r = args.repeat
    print("command:", "PYTHONPATH=pkg python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"python {platform.python_version()}, numpy {np.__version__}, pyarrow {pa.__version__}, "
          f"driver {cassandra.__version__}, {platform.machine()}; times are medians of {r} runs; "
          "ratio < 1 means faster than the baseline")
    rng = np.random.default_rng(0)

    for dim in (768, 1536):
        v = rng.standard_normal(dim).astype("f4")
        lst = v.tolist()
        T = vtype(dim)
        codec = VectorCodec("float", dim)
        ready = codec.serialize(v)
        rows = [
            ("driver element loop (list)", bench(lambda: ORIG_SER(T, lst, 4), r)),
            ("np.asarray(v, '>f4').tobytes()", bench(lambda: np.asarray(v, ">f4").tobytes(), r)),
            ("bulkwire serialize(ndarray)", bench(lambda: codec.serialize(v), r)),
            ("bulkwire serialize(list)", bench(lambda: codec.serialize(lst), r)),
            ("bulkwire serialize(ready bytes)", bench(lambda: codec.serialize(ready), r)),
        ]
        bulkwire.cql.install()
        rows += [("driver + bulkwire.cql (ndarray)", bench(lambda: T.serialize(v, 4), r)),
                 ("driver + bulkwire.cql (list)", bench(lambda: T.serialize(lst, 4), r))]
        bulkwire.cql.uninstall()
        table(f"one {dim}-dim float32 vector", rows,
              ["driver element loop (list)", "np.asarray(v, '>f4').tobytes()"])

    for n in (100, 10_000):
        a = rng.standard_normal((n, 768)).astype("f4")
        codec = VectorCodec("float", 768)
        rows = [
            ("per-row np.asarray(row, '>f4').tobytes()",
             bench(lambda: [np.asarray(x, ">f4").tobytes() for x in a], r)),
            ("one a.astype('>f4') (bandwidth reference)", bench(lambda: a.astype(">f4"), r)),
            ("bulkwire serialize_many", bench(lambda: codec.serialize_many(a), r)),
            ("bulkwire serialize_into", bench(lambda: codec.serialize_into(a), r)),
        ]
        table(f"{n:,} × 768 float32 → list[bytes]", rows,
              ["per-row np.asarray(row, '>f4').tobytes()", "one a.astype('>f4') (bandwidth reference)"])

    n = 10_000
    a = rng.standard_normal((n, 768)).astype("f4")
    fsl = pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), 768)
    codec = VectorCodec("float", 768)
    rows = [
        ("per-row NumPy from Arrow (to_numpy → reshape → tobytes)",
         bench(lambda: [x.tobytes() for x in fsl.values.to_numpy().reshape(-1, 768).astype(">f4")], r)),
        ("bulkwire serialize_many(Arrow FSL)", bench(lambda: codec.serialize_many(fsl), r)),
        ("bulkwire serialize_into(Arrow FSL)", bench(lambda: codec.serialize_into(fsl), r)),
        ("bulkwire serialize_many(chunked, 10 chunks)",
         bench(lambda: codec.serialize_many(pa.chunked_array([fsl.slice(i * 1000, 1000) for i in range(10)])), r)),
    ]
    table("Arrow fixed_size_list<float32>[768], 10,000 rows", rows,
          ["per-row NumPy from Arrow (to_numpy → reshape → tobytes)"])

    m = 200 if args.quick else 1_000
    small = fsl.slice(0, m)
    T = vtype(768)
    try:
        import pandas  # noqa: F401
        tbl = pa.table({"emb": small})

        def vdbbench():
            df = tbl.to_pandas()
            mat = np.stack(df["emb"])
            return [ORIG_SER(T, row, 4) for row in mat.tolist()]

        def vdbbench_dropin():
            df = tbl.to_pandas()
            mat = np.stack(df["emb"])
            return [T.serialize(row, 4) for row in mat.tolist()]
        rows = [("VectorDBBench path (to_pandas → np.stack → .tolist() → driver)", bench(vdbbench, 3, 0.5))]
        bulkwire.cql.install()
        rows.append(("same path with bulkwire.cql installed", bench(vdbbench_dropin, 3, 0.5)))
        bulkwire.cql.uninstall()
        rows.append(("bulkwire serialize_many(Arrow column)", bench(lambda: codec.serialize_many(small), r)))
        rows.append(("bulkwire serialize_many(tbl.to_pandas()['emb'])",
                     bench(lambda: codec.serialize_many(tbl.to_pandas()["emb"]), r)))
        table(f"VectorDBBench loader path, {m:,} × 768", rows,
              ["VectorDBBench path (to_pandas → np.stack → .tolist() → driver)"])
    except ImportError:
        print("\n(pandas not installed: VectorDBBench path skipped)")

    payloads = codec.serialize_many(a[:m])
    rows = [
        ("driver deserialize (list of floats per row)", bench(lambda: [ORIG_DES(T, b, 4) for b in payloads], 3, 0.5)),
        ("per-row np.frombuffer(b, '>f4')", bench(lambda: [np.frombuffer(b, ">f4") for b in payloads], r)),
        ("bulkwire deserialize_many → (rows, 768) float32", bench(lambda: codec.deserialize_many(payloads), r)),
    ]
    bulkwire.cql.install()
    rows.append(("driver + bulkwire.cql (same lists)", bench(lambda: [T.deserialize(b, 4) for b in payloads], 3, 0.5)))
    bulkwire.cql.uninstall()
    table(f"decoding {m:,} × 768 float32", rows, ["driver deserialize (list of floats per row)"])

    # float text comes from csrc/core/float_text.c (shared with the JSON encoder); these figures
    # move with it
    a100 = a[:100]
    rows = [
        ("bulkwire.dumps(row) per row", bench(lambda: [bulkwire.dumps(x) for x in a100], 3, 0.3)),
        ("to_json_many (widen)", bench(lambda: codec.to_json_many(a100), 3, 0.3)),
        ("to_json_many (float32='shortest')", bench(lambda: codec.to_json_many(a100, float32="shortest"), 3, 0.3)),
    ]
    table("JSON arrays, 100 × 768 float32", rows, ["bulkwire.dumps(row) per row"])


if __name__ == "__main__":
    main()
