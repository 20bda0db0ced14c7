"""Differential tests of the float-to-text core (csrc/float_text.c) against float.__repr__.

Everything goes through the test hooks bulkwire._core._testing.format_doubles / _format_floats32,
which format a whole array into newline-terminated text, one value at a time; float64 values
are also written as JSON arrays by bulkwire.dumps (from an ndarray and from a list), which
takes the array writer. The oracle for float64 is repr (with
json's NaN / Infinity names); for float32 it is NumPy's shortest unique digits
(np.format_float_scientific(unique=True)) laid out with repr's rules, plus a round-trip check.

BULKWIRE_FLOAT_TEST_COUNT sets the size: about that many float64 values in total across the
file, and a fifth as many float32 values (default 5,000,000; sanitizer runs set it lower).
"""
import math
import os
import struct

import numpy as np
import pytest

import bulkwire
from bulkwire import _core

COUNT = int(os.environ.get("BULKWIRE_FLOAT_TEST_COUNT", "5000000"))
COUNT32 = max(COUNT // 5, 1000)
SLICE = 500_000

# Generating NaN/inf/overflowing inputs on purpose makes NumPy warn; that is expected here.
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def share(fraction, minimum=1000):
    return max(int(COUNT * fraction), minimum)


def json_repr(x):
    if x != x:
        return "NaN"
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    return repr(x)


def first_difference(values, got_lines, want_lines):
    for i, (g, w) in enumerate(zip(got_lines, want_lines)):
        if g != w:
            return "value %r (%s): got %r, want %r" % (values[i], float(values[i]).hex(), g, w)
    return "line counts differ: got %d, want %d" % (len(got_lines), len(want_lines))


def check_doubles(values):
    """Each value alone (the hook), and the same values as one JSON array: from the ndarray
    and from a list of floats, the two array writers (values taken in groups, a group with a
    value off the common path written value by value)."""
    a = np.ascontiguousarray(values, dtype=np.float64).ravel()
    for start in range(0, len(a), SLICE):
        part = a[start:start + SLICE]
        items = part.tolist()
        texts = list(map(json_repr, items))
        got = _core._testing.format_doubles(part)
        want = ("\n".join(texts) + "\n").encode() if len(part) else b""
        if got != want:
            pytest.fail(first_difference(items, got.decode().split("\n"), want.decode().split("\n")))
        want_array = ("[" + ", ".join(texts) + "]").encode()
        for what, source in (("ndarray", part), ("list", items)):
            got_array = bulkwire.dumps(source)
            if got_array != want_array:
                pytest.fail("as one array (%s): " % what + first_difference(
                    items, got_array[1:-1].decode().split(", "), texts))


def repr_layout(negative, digits, decpt):
    """float.__repr__'s layout of 0.<digits> * 10**decpt."""
    n = len(digits)
    sign = "-" if negative else ""
    if decpt > 16 or decpt <= -4:
        x = decpt - 1
        mant = digits[0] + ("." + digits[1:] if n > 1 else "")
        return "%s%se%s%02d" % (sign, mant, "-" if x < 0 else "+", abs(x))
    if decpt <= 0:
        return sign + "0." + "0" * -decpt + digits
    if decpt >= n:
        return sign + digits + "0" * (decpt - n) + ".0"
    return sign + digits[:decpt] + "." + digits[decpt:]


def float32_oracle(x):
    x = np.float32(x)
    if np.isnan(x):
        return "NaN"
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if np.signbit(x) else "0.0"
    text = np.format_float_scientific(x, unique=True, trim="-")
    negative = text.startswith("-")
    mant, exp = text.lstrip("-").split("e")
    digits = mant.replace(".", "").rstrip("0")
    return repr_layout(negative, digits, int(exp) + 1)


def check_floats32(values):
    a = np.ascontiguousarray(values, dtype=np.float32).ravel()
    for start in range(0, len(a), SLICE):
        part = a[start:start + SLICE]
        got_lines = _core._testing.format_floats32(part).decode().split("\n")
        assert got_lines[-1] == ""
        got_lines.pop()
        want_lines = [float32_oracle(x) for x in part]
        if got_lines != want_lines:
            pytest.fail(first_difference(part.tolist(), got_lines, want_lines))
        # The text reads back to the same float32 (NaN excluded; JSON names for infinities).
        finite = np.isfinite(part)
        back = np.array([float(t) for t, f in zip(got_lines, finite) if f], dtype=np.float64)
        assert np.array_equal(back.astype(np.float32).view(np.uint32), part[finite].view(np.uint32))


def random_bits64(rng, n):
    return rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False).view(np.float64)


def random_bits32(rng, n):
    return rng.integers(0, 2**32, n, dtype=np.uint64, endpoint=False).astype(np.uint32).view(np.float32)


def with_neighbours(values, steps=2):
    a = np.asarray(values, dtype=np.float64)
    out = [a]
    lo = hi = a
    for _ in range(steps):
        lo = np.nextafter(lo, -np.inf)
        hi = np.nextafter(hi, np.inf)
        out += [lo, hi]
    return np.concatenate(out)


# ---------------------------------------------------------------- float64: layout and edges

LAYOUT_CASES = [
    (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (-1.0, "-1.0"), (0.5, "0.5"), (123.456, "123.456"),
    (1e16, "1e+16"), (1e15, "1000000000000000.0"), (9999999999999998.0, "9999999999999998.0"),
    (1e-4, "0.0001"), (1e-5, "1e-05"), (1.5e-7, "1.5e-07"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (2.2250738585072014e-308, "2.2250738585072014e-308"),
    (2.225073858507201e-308, "2.225073858507201e-308"), (0.1, "0.1"), (0.30000000000000004, "0.30000000000000004"),
    (1e23, "1e+23"), (2.0**53, "9007199254740992.0"), (2.0**54, "1.8014398509481984e+16"),
    (math.nan, "NaN"), (-math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    (1e100, "1e+100"), (1.2345e-100, "1.2345e-100"), (0.001, "0.001"), (0.00012, "0.00012"),
]


@pytest.mark.parametrize("value,text", LAYOUT_CASES)
def test_known_texts(value, text):
    assert _core._testing.format_doubles(np.array([value])) == (text + "\n").encode()
    if value == value:
        assert json_repr(value) == text  # the table itself agrees with the oracle


def test_powers_of_ten_and_neighbours():
    exact = [float("1e%d" % e) for e in range(-325, 309)]
    nearby = [float("%de%d" % (m, e)) for e in range(-325, 309) for m in (2, 3, 5, 9, 11, 99, 999, 12345)]
    check_doubles(with_neighbours(exact + nearby, steps=3))


def test_powers_of_two_and_neighbours():
    # Exact powers of two are where the rounding interval is asymmetric.
    check_doubles(with_neighbours([math.ldexp(1.0, e) for e in range(-1074, 1024)], steps=3))


def test_subnormals_and_extremes():
    rng = np.random.default_rng(11)
    tiny = rng.integers(1, 2**52, share(0.02), dtype=np.uint64).view(np.float64)
    small = np.arange(1, 20000, dtype=np.uint64).view(np.float64)  # 5e-324 upwards
    edges = [5e-324, 1e-323, np.float64(np.uint64(2**52 - 1).view(np.float64)),  # largest subnormal
             2.2250738585072014e-308, 1.7976931348623157e308, 8.98846567431158e307]
    values = np.concatenate([tiny, small, with_neighbours(edges, steps=5)])
    check_doubles(np.concatenate([values, -values]))


def test_layout_boundaries():
    # Values whose decimal point position sits on both sides of every layout switch.
    rng = np.random.default_rng(12)
    vals = []
    for e in range(-8, 20):
        base = 10.0 ** e
        vals += [base, base * 0.5, base * 1.5, base * 9.999999999999998, base * 0.9999999999999999]
        vals += list(rng.integers(1, 10**6, 200) * 10.0 ** (e - 6))
        vals += list(rng.random(200) * base)
    vals += [1e16 - 2, 1e16 + 2, 1e17, 12345678901234567.0, 0.00009999999999999999, 9.999999999999999e-05]
    check_doubles(with_neighbours(vals, steps=2))
    check_doubles(-with_neighbours(vals, steps=2))


def test_integers():
    rng = np.random.default_rng(13)
    n = share(0.04)
    parts = [
        np.arange(-100000, 100001, dtype=np.float64),
        rng.integers(-2**53, 2**53, n).astype(np.float64),
        (2**53 + rng.integers(-100000, 100000, 20000)).astype(np.float64),
        rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64).astype(np.float64),
        rng.integers(1, 10**6, n).astype(np.float64) * 10.0 ** rng.integers(0, 22, n),
    ]
    check_doubles(np.concatenate(parts))


def bound_on_decimal_grid(rng, per_exponent):
    """Integer-valued doubles x = (2^52 + j) * 2^q whose interval bound x -+ 2^(q-1) is a
    multiple of 10^(k+1), k = floor(q log10 2): a bound exactly on one of the two shorter
    candidates Schubfach weighs, for q = 2..70 (beyond, 5^(k+1) > 2^52 leaves no such j)."""
    values = []
    for q in range(2, 71):
        k = (q * 315653) >> 20
        grid = 5 ** (k + 1)
        for side in (-1, 1):
            # bound = 2^(q-1) * (2^53 + 2j + side); 2^(k+1) divides 2^(q-1) as q - 1 >= k + 1.
            j0 = (-(2**53 + side) * pow(2, -1, grid)) % grid
            for t in rng.integers(0, max((2**52 - j0) // grid, 1), per_exponent).tolist():
                j = j0 + t * grid
                if j < 2**52:
                    values.append(float((2**52 + j) << q))
    return values


def test_interval_bound_on_the_decimal_grid():
    # The common path places sp10 / tp10 against the interval bounds from one product and hands
    # over to the general Schubfach step when a bound is within 2^-57 units of one of them:
    # exactly on it for these integers (even and odd significands, both bounds, both signs),
    # just off it for their neighbours.
    rng = np.random.default_rng(19)
    values = bound_on_decimal_grid(rng, max(share(0.002) // 140, 20))
    assert len(values) > 100
    values = with_neighbours(values, steps=2)
    check_doubles(np.concatenate([values, -values]))


def test_seventeen_and_few_digit_decimals():
    rng = np.random.default_rng(14)
    n = share(0.04)
    mant17 = rng.integers(10**16, 10**17, n, dtype=np.int64)
    exps = rng.integers(-340, 300, n)
    seventeen = [float("%de%d" % (m, e)) for m, e in zip(mant17.tolist(), exps.tolist())]
    digits = rng.integers(1, 16, n)
    mant = (rng.random(n) * 10.0 ** digits).astype(np.int64) + 1
    exps = rng.integers(-330, 300, n)
    short = [float("%de%d" % (m, e)) for m, e in zip(mant.tolist(), exps.tolist())]
    check_doubles(np.array(seventeen + short))


def test_random_bit_patterns():
    rng = np.random.default_rng(15)
    n = share(0.45)
    for start in range(0, n, SLICE):
        check_doubles(random_bits64(rng, min(SLICE, n - start)))


def test_widened_float32_bit_patterns():
    rng = np.random.default_rng(16)
    n = share(0.18)
    for start in range(0, n, SLICE):
        check_doubles(random_bits32(rng, min(SLICE, n - start)).astype(np.float64))


def test_random_in_common_ranges():
    rng = np.random.default_rng(17)
    n = share(0.03)
    vals = np.concatenate([rng.random(n), rng.normal(0, 1000, n), rng.uniform(-1e6, 1e6, n)])
    check_doubles(vals)
    check_doubles(np.round(vals, 3))


# ---------------------------------------------------------------- float32 shortest

F32_CASES = [
    (0.1, "0.1"), (1.0, "1.0"), (-0.0, "-0.0"), (0.0, "0.0"), (1e16, "1e+16"), (1e15, "1000000000000000.0"),
    (3.4028234663852886e38, "3.4028235e+38"), (1e-45, "1e-45"), (16777216.0, "16777216.0"),
    (1e-5, "1e-05"), (1e-4, "0.0001"), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (math.nan, "NaN"),
    (0.3, "0.3"), (2.0**-149, "1e-45"), (1.1754943508222875e-38, "1.1754944e-38"),
]


@pytest.mark.parametrize("value,text", F32_CASES)
def test_float32_known_texts(value, text):
    assert _core._testing.format_floats32(np.array([value], dtype=np.float32)) == (text + "\n").encode()


def test_float32_random_bit_patterns():
    rng = np.random.default_rng(21)
    check_floats32(random_bits32(rng, COUNT32))


def test_float32_edges():
    f32 = np.float32
    powers = np.array([math.ldexp(1.0, e) for e in range(-149, 128)], dtype=np.float32)
    tens = np.array([float("%de%d" % (m, e)) for e in range(-46, 39) for m in (1, 2, 5, 9)], dtype=np.float32)
    base = np.concatenate([powers, tens, np.arange(1, 5000, dtype=np.uint32).view(np.float32),
                           np.array([2**23 - 1, 2**23, 0x7F7FFFFF], dtype=np.uint32).view(np.float32),
                           np.arange(-3000, 3000, dtype=np.float32), np.arange(0, 1, 0.001, dtype=np.float32)])
    vals = [base]
    lo = hi = base
    for _ in range(3):
        lo = np.nextafter(lo, f32(-np.inf))
        hi = np.nextafter(hi, f32(np.inf))
        vals += [lo, hi]
    v = np.concatenate(vals)
    check_floats32(np.concatenate([v, -v]))


# ---------------------------------------------------------------- the hooks themselves

def test_hooks_validate_arguments():
    with pytest.raises(TypeError):
        _core._testing.format_doubles([1.0, 2.0])
    with pytest.raises(TypeError):
        _core._testing.format_doubles(np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError):
        _core._testing.format_floats32(np.zeros(3, dtype=np.float64))
    with pytest.raises(TypeError):
        _core._testing.format_doubles(np.zeros(3, dtype=">f8"))
    with pytest.raises(ValueError):
        _core._testing.format_doubles(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        _core._testing.format_doubles(np.zeros(10)[::2])
    with pytest.raises(ValueError):
        _core._testing.format_floats32(np.zeros(10, dtype=np.float32)[::3])


def test_hooks_empty_and_unaligned():
    assert _core._testing.format_doubles(np.zeros(0)) == b""
    assert _core._testing.format_floats32(np.zeros(0, dtype=np.float32)) == b""
    raw = bytes(1) + struct.pack("<3d", 1.5, -2.0, 1e300)
    unaligned = np.frombuffer(raw, dtype="<f8", offset=1)
    assert _core._testing.format_doubles(unaligned) == b"1.5\n-2.0\n1e+300\n"
    raw32 = bytes(1) + struct.pack("<2f", 0.1, 3.0)
    assert _core._testing.format_floats32(np.frombuffer(raw32, dtype="<f4", offset=1)) == b"0.1\n3.0\n"


def test_hook_output_length_bound():
    rng = np.random.default_rng(31)
    vals = random_bits64(rng, 100000)
    lines = _core._testing.format_doubles(vals).split(b"\n")[:-1]
    assert max(map(len, lines)) <= 32


def test_the_table_header_is_what_its_generator_writes():
    """The powers of ten and the per-exponent rows are generated (with the integer logarithms
    checked over the whole exponent range); a hand edit of the header fails here."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    written = subprocess.run([sys.executable, str(root / "tools" / "gen_pow10_table.py")],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    assert written == (root / "csrc" / "core" / "json" / "float_text_table.h").read_text()
