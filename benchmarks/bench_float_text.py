"""Float-to-text speed: bulkwire's hooks vs float.__repr__ vs orjson, per value.

Run:  python benchmarks/bench_float_text.py [--n 1000000] [--runs 5]
Each case runs its contenders (bulkwire's hook, float.__repr__, orjson) once per round, in an
order that rotates from round to round, for --runs rounds; a contender's figure is its median
time per value, and a ratio is the median of the per-round ratios to bulkwire in the same
round. Before timing, every case checks that bulkwire's text is the same as the reference's:
``repr`` of each double, and numpy's shortest float32 digits for the float32 case.
"""
import argparse
import shlex
import statistics
import sys

import numpy as np

import _common  # noqa: F401  (imports bulkwire from this checkout when it has an in-place build)
from _rounds import interleaved_seconds, load_average, median_ratio
from bulkwire import _core

try:
    import orjson
except ImportError:  # optional comparison
    orjson = None


def check_same_text(name, arr, hook):
    """bulkwire's text for every value must be the reference's, or the timing compares
    different work: Python's repr for doubles; for float32, numpy's shortest digits laid out
    as repr lays out a double (numpy switches to exponents at 1e6 for float32, repr at 1e16;
    the digits, at most 9, survive the trip through a double unchanged)."""
    ours = hook(arr).split(b"\n")[:-1]
    if arr.dtype == np.float32:
        reference = [repr(float(str(value))).encode() for value in arr]
    else:
        reference = [repr(value).encode() for value in arr.tolist()]
    differing = sum(a != b for a, b in zip(ours, reference))
    if len(ours) != len(reference) or differing:
        raise SystemExit(f"{name}: bulkwire's text differs from the reference on {differing} "
                         f"of {len(reference)} values")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print("n=%d values per run, %d interleaved rounds, load average %s"
          % (args.n, args.runs, load_average()))

    rng = np.random.default_rng(args.seed)
    bits = rng.integers(0, 2**64, args.n, dtype=np.uint64)
    doubles = bits.view(np.float64)
    doubles = np.where(np.isfinite(doubles), doubles, 0.0)  # orjson rejects non-finite
    f32 = (bits >> np.uint64(32)).astype(np.uint32).view(np.float32)
    f32 = np.where(np.isfinite(f32), f32, np.float32(0))
    uniform = rng.random(args.n)
    normal = rng.standard_normal(args.n)  # embedding-like: mostly 16-17 significant digits

    cases = [
        ("random float64 bit patterns", doubles, _core._testing.format_doubles),
        ("uniform [0,1) float64", uniform, _core._testing.format_doubles),
        ("standard normal float64", normal, _core._testing.format_doubles),
        ("float32 widened to float64", f32.astype(np.float64), _core._testing.format_doubles),
        ("float32, shortest float32 digits", f32, _core._testing.format_floats32),
    ]
    print("%-34s %12s %12s %12s %10s %10s" % ("case", "bulkwire", "repr", "orjson", "x repr", "x orjson"))
    for name, arr, hook in cases:
        arr = np.ascontiguousarray(arr)
        xs = arr.astype(np.float64).tolist()
        check_same_text(name, arr, hook)
        contenders = {"bulkwire": lambda: hook(arr), "repr": lambda: list(map(repr, xs))}
        if orjson is not None:
            contenders["orjson"] = lambda: orjson.dumps(xs)
        seconds = interleaved_seconds(contenders, args.runs)
        ns = {key: statistics.median(times) * 1e9 / len(xs) for key, times in seconds.items()}
        ratio_r = median_ratio(seconds["repr"], seconds["bulkwire"])
        if orjson is not None:
            orj_s = "%9.1f ns" % ns["orjson"]
            ratio_o = "%9.2fx" % median_ratio(seconds["orjson"], seconds["bulkwire"])
        else:
            orj_s, ratio_o = "n/a", "n/a"
        print("%-34s %9.1f ns %9.1f ns %12s %9.1fx %10s"
              % (name, ns["bulkwire"], ns["repr"], orj_s, ratio_r, ratio_o))
    print("(ns per value; 'x repr' = repr time / bulkwire time; 'x orjson' = orjson time / bulkwire time."
          " orjson.dumps(list) includes its list walk and commas; repr excludes any joining;"
          " the hooks include writing a newline per value into one bytes object.)")


if __name__ == "__main__":
    main()
