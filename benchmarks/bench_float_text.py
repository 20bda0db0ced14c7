"""Float-to-text speed: bulkwire's hooks vs float.__repr__ vs orjson, per value.

Run:  python benchmarks/bench_float_text.py [--n 1000000] [--runs 5]
Each figure is the median of --runs timings of formatting --n values; ratios are against
float.__repr__ measured in the same run on the same values.
"""
import argparse
import shlex
import statistics
import sys
import time

import numpy as np

from bulkwire import _core

try:
    import orjson
except ImportError:  # optional comparison
    orjson = None


def median_ns_per_value(fn, n, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print("n=%d values per run, median of %d runs" % (args.n, args.runs))

    rng = np.random.default_rng(args.seed)
    bits = rng.integers(0, 2**64, args.n, dtype=np.uint64)
    doubles = bits.view(np.float64)
    doubles = np.where(np.isfinite(doubles), doubles, 0.0)  # orjson rejects non-finite
    f32 = (bits >> np.uint64(32)).astype(np.uint32).view(np.float32)
    f32 = np.where(np.isfinite(f32), f32, np.float32(0))
    uniform = rng.random(args.n)
    normal = rng.standard_normal(args.n)  # embedding-like: mostly 16-17 significant digits

    cases = [
        ("random float64 bit patterns", doubles, _core._format_doubles),
        ("uniform [0,1) float64", uniform, _core._format_doubles),
        ("standard normal float64", normal, _core._format_doubles),
        ("float32 widened to float64", f32.astype(np.float64), _core._format_doubles),
        ("float32, shortest float32 digits", f32, _core._format_floats32),
    ]
    print("%-34s %12s %12s %12s %10s %10s" % ("case", "bulkwire", "repr", "orjson", "x repr", "x orjson"))
    for name, arr, hook in cases:
        arr = np.ascontiguousarray(arr)
        xs = arr.astype(np.float64).tolist()
        ours = median_ns_per_value(lambda: hook(arr), len(xs), args.runs)
        rep = median_ns_per_value(lambda: list(map(repr, xs)), len(xs), args.runs)
        if orjson is not None:
            orj = median_ns_per_value(lambda: orjson.dumps(xs), len(xs), args.runs)
            orj_s, ratio_o = "%9.1f ns" % orj, "%9.2fx" % (orj / ours)
        else:
            orj_s, ratio_o = "n/a", "n/a"
        print("%-34s %9.1f ns %9.1f ns %12s %9.1fx %10s" % (name, ours, rep, orj_s, rep / ours, ratio_o))
    print("(ns per value; 'x repr' = repr time / bulkwire time; 'x orjson' = orjson time / bulkwire time."
          " orjson.dumps(list) includes its list walk and commas; repr excludes any joining;"
          " the hooks include writing a newline per value into one bytes object.)")


if __name__ == "__main__":
    main()
