"""The strided copy with byte swap (csrc byteswap.c) through its public users, against NumPy:
every element width the wire has, contiguous and strided, reversed and misaligned views, in
both directions (serialize to big-endian, deserialize back to native). The loops themselves,
the vectorised ones and the baseline ones the CPU dispatch may skip, are checked byte by byte
by tests/c/test_byteswap.c."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from bulkwire import VectorCodec

WIRE = {"float": ">f4", "double": ">f8", "int": ">i4", "bigint": ">i8", "smallint": ">i2"}


def views(base: np.ndarray, data) -> np.ndarray:
    """A contiguous, strided, reversed or misaligned view of base, drawn by hypothesis."""
    kind = data.draw(st.sampled_from(["contiguous", "rows", "columns", "reversed", "misaligned",
                                      "swapped"]))
    if kind == "rows":
        return base[::2]
    if kind == "columns":
        return base[:, ::2]
    if kind == "reversed":
        return base[::-1, ::-1]
    if kind == "misaligned":  # the same values one byte off their natural alignment
        raw = np.zeros(base.nbytes + 1, np.uint8)
        view = raw[1:].view(base.dtype).reshape(base.shape)
        view[...] = base
        return view
    if kind == "swapped":  # non-native byte order in memory
        return base.astype(base.dtype.newbyteorder())
    return base


@pytest.mark.parametrize("subtype", sorted(WIRE))
@given(data=st.data())
def test_serialize_and_deserialize_match_numpy(subtype, data):
    wire = np.dtype(WIRE[subtype])
    native = wire.newbyteorder("=")
    rows = data.draw(st.integers(1, 9))
    dim = data.draw(st.integers(1, 40))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if native.kind == "f":
        base = rng.standard_normal((rows, dim)).astype(native)
    else:
        info = np.iinfo(native)
        base = rng.integers(info.min, info.max, (rows, dim), endpoint=True, dtype=native)
    arr = views(base, data)
    codec = VectorCodec(subtype, arr.shape[1])
    want = [row.astype(wire).tobytes() for row in arr]
    if subtype == "smallint":  # variable width: each element behind its length
        want = [b"".join(b"\x02" + row.astype(wire)[i:i + 1].tobytes() for i in range(len(row)))
                for row in arr]
    assert codec.serialize_many(arr) == want
    assert np.array_equal(codec.deserialize_many(want), arr)
