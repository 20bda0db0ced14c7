"""Integer text (csrc int_text.c), against int.__repr__: Python ints in and beyond the machine
range, bools, NumPy integer scalars and arrays of every width, dict keys, and the batch
encoder's integer columns. The C core's own unit test is tests/c/test_int_text.c."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import bulkwire
from test_encoder_oracle import check_error

pa = pytest.importorskip("pyarrow")

EDGES = [0, 1, -1, 9, 10, 99, 100, 2**31 - 1, -2**31, 2**32, 2**53 + 1, 2**63 - 1, -2**63,
         2**63, 2**64 - 1, 2**64, -2**64, 10**19, 10**19 - 1, -10**19, 10**30, -(10**40)]


def test_huge_int_hits_the_interpreter_digit_limit():
    import sys
    if not hasattr(sys, "set_int_max_str_digits"):
        pytest.skip("interpreter has no int digit limit")
    big = 10**5000
    check_error([big])
    check_error({big: 1})


@pytest.mark.parametrize("n", EDGES)
def test_edges_match_repr(n):
    assert bulkwire.dumps(n) == repr(n).encode()
    assert bulkwire.dumps({n: n}) == json.dumps({n: n}).encode()


@given(st.integers(-2**64, 2**64) | st.integers())
def test_ints_match_repr(n):
    assert bulkwire.dumps([n, -n]) == f"[{n!r}, {-n!r}]".encode()
    assert bulkwire.dumps({n: 0}) == json.dumps({n: 0}).encode()


def test_bools_are_not_ints():
    assert bulkwire.dumps([True, False, {True: 1, False: 0}]) == \
        json.dumps([True, False, {True: 1, False: 0}]).encode()


@pytest.mark.parametrize("dtype", ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"])
def test_numpy_integers_match_repr(dtype):
    info = np.iinfo(dtype)
    values = np.array([info.min, info.min + 1, -1 if info.min < 0 else 0, 0, 1, 9, 10,
                       info.max - 1, info.max], dtype=dtype)
    want = "[" + ", ".join(repr(int(v)) for v in values) + "]"
    assert bulkwire.dumps(values) == want.encode()
    assert bulkwire.dumps(values.astype(np.dtype(dtype).newbyteorder())) == want.encode()
    assert bulkwire.dumps([values[0], values[-1]]) == f"[{int(values[0])}, {int(values[-1])}]".encode()


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=20))
def test_int64_columns_and_ids_match_repr(values):
    table = pa.table({"id": pa.array(values, pa.int64()), "v": pa.array(values, pa.int64()),
                      "u": pa.array([v + 2**63 for v in values], pa.uint64())})
    body = b"".join(bulkwire._core.encode_batch(table, "id", ["v", "u"], id_prefix="n/", first=True))
    for command, v in zip(body.split(b'{"Id":')[1:], values):
        assert command.startswith(f'"n/{v!r}"'.encode())
        assert f'"v": {v!r}, "u": {v + 2**63!r}'.encode() in command
