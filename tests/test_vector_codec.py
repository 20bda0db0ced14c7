"""VectorCodec byte layouts against NumPy, casting rules, errors, decoding, JSON rows."""
import math
import struct
import sys
import uuid

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import bulkwire
from bulkwire import VectorCodec

FIXED = {  # subtype -> wire dtype
    "float": ">f4", "double": ">f8", "int": ">i4", "bigint": ">i8", "boolean": "?",
    "timestamp": ">i8",
}
PREFIXED = {"smallint": ">i2", "tinyint": "i1", "date": ">u4", "time": ">i8"}


def sample(dtype, n, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(n) * 1e3).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=dt.newbyteorder("="))


@pytest.mark.parametrize("subtype", list(FIXED))
@pytest.mark.parametrize("dim", [1, 2, 3, 7, 8, 17, 768, 1536, 16000])
def test_fixed_layout_matches_numpy(subtype, dim):
    wire = FIXED[subtype]
    native = np.dtype(wire).newbyteorder("=")
    a = sample(native, dim, seed=dim)
    codec = VectorCodec(subtype, dim)
    expected = a.astype(wire).tobytes()
    assert codec.serialize(a) == expected
    assert codec.serialize(a.astype(wire)) == expected  # big-endian input
    assert codec.serialized_size == len(expected)
    if dim <= 1536:
        assert codec.serialize(a.tolist()) == expected
        assert codec.serialize(tuple(a.tolist())) == expected


@pytest.mark.parametrize("subtype", list(PREFIXED))
def test_prefixed_layout(subtype):
    wire = PREFIXED[subtype]
    width = np.dtype(wire).itemsize
    native = np.dtype(wire).newbyteorder("=")
    a = sample(native, 20)
    if subtype == "time":
        a = np.abs(a) % 86_400_000_000_000
    codec = VectorCodec(subtype, 20)
    big = a.astype(wire)
    expected = b"".join(bytes([width]) + big[i:i + 1].tobytes() for i in range(len(big)))
    assert codec.serialize(a.tolist()) == expected
    assert codec.serialize(a) == expected
    assert codec.serialized_size == len(expected)
    assert codec.variable_width


def test_smallint_spec_example():
    assert VectorCodec("smallint", 1).serialize([1]) == b"\x02\x00\x01"


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f8", ">f8", "<i4", ">i8"])
def test_memory_orders_and_strides(order, dtype):
    base = np.asarray(sample(np.dtype(dtype).newbyteorder("="), 40 * 64), dtype=dtype).reshape(40, 64)
    subtype = {"f4": "float", "f8": "double", "i4": "int", "i8": "bigint"}[dtype[1:]]
    wire = ">" + dtype[1:]
    for arr in (np.asarray(base, order=order), base[::2], base[:, ::2], base[::-1, ::-3],
                base.T.copy().T):
        n = arr.shape[1]
        codec = VectorCodec(subtype, n)
        expected = [row.astype(wire).tobytes() for row in arr]
        assert codec.serialize_many(arr) == expected
        buf, stride = codec.serialize_into(arr)
        assert stride == n * np.dtype(wire).itemsize
        assert bytes(buf) == b"".join(expected)
        for row, want in zip(arr, expected):
            assert codec.serialize(row) == want


def test_special_float_bits_pass_through():
    bits32 = np.array([0x7FC00000, 0x7F800001, 0xFFC12345, 0x7F800000, 0xFF800000, 0x80000000,
                       0x00000001, 0x7F7FFFFF], dtype="<u4")
    f32 = bits32.view("<f4")
    out = VectorCodec("float", len(f32)).serialize(f32)
    assert out == bits32.astype(">u4").tobytes()  # signaling NaN stays signaling
    bits64 = np.array([0x7FF8000000000001, 0x7FF0000000000001, 0x8000000000000000,
                       0x7FF0000000000000], dtype="<u8")
    assert VectorCodec("double", 4).serialize(bits64.view("<f8")) == bits64.astype(">u8").tobytes()
    back = VectorCodec("float", len(f32)).deserialize(out)
    assert back.view(">u4").tolist() == bits32.tolist()


def test_float32_widens_to_double_without_numpy_cast():
    import warnings
    a = np.array([0x7F800001, 0x3DCCCCCD, 0x80000000], "<u4").view("<f4")
    for src in (a, a.astype(">f4"), np.repeat(a, 2)[::2]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "invalid value encountered in cast"
            out = VectorCodec("double", 3).serialize(src)
        assert out == b"".join(struct.pack(">d", float(x)) for x in a)
        assert VectorCodec("double", 3).serialize_many(np.stack([src, src])) == [out, out]


def test_driver_compat_quiets_signaling_nans():
    f32 = np.array([0x7F800001, 0x7FC00000, 0xFF812345], dtype="<u4").view("<f4")
    out = VectorCodec("float", 3, driver_compat=True).serialize(f32)
    assert np.frombuffer(out, ">u4").tolist() == [0x7FC00001, 0x7FC00000, 0xFFC12345]
    assert out == b"".join(struct.pack(">f", float(x)) for x in f32)


def test_float_rounding_and_overflow_follow_struct():
    codec = VectorCodec("float", 1)
    for x in [0.1, 1e-46, -1e-46, 3.4028235e38, float.fromhex("0x1.fffffe8p127"), float("inf"),
              float("-inf"), -0.0, float("nan")]:
        assert codec.serialize([x]) == struct.pack(">f", x)
    for x in [3.4028236e38, float.fromhex("0x1.ffffffp127"), 1e39, -1e300]:
        with pytest.raises(OverflowError, match="out of range for float"):
            codec.serialize([x])
        with pytest.raises(OverflowError):
            struct.pack(">f", x)


@pytest.mark.parametrize("subtype,lo,hi", [
    ("tinyint", -2**7, 2**7 - 1), ("smallint", -2**15, 2**15 - 1), ("int", -2**31, 2**31 - 1),
    ("bigint", -2**63, 2**63 - 1), ("timestamp", -2**63, 2**63 - 1), ("date", 0, 2**32 - 1),
    ("time", 0, 86_400_000_000_000 - 1),
])
def test_integer_ranges(subtype, lo, hi):
    codec = VectorCodec(subtype, 2)
    codec.serialize([lo, hi])
    for bad in ([lo - 1, 0], [0, hi + 1], [0, 2**200]):
        with pytest.raises(OverflowError, match=f"out of range for {subtype}"):
            codec.serialize(bad)


def test_safe_casting():
    codec = VectorCodec("float", 3)
    for ok in (np.array([1, 2, 3], "i1"), np.array([1, 2, 3], "u2"), np.array([1, 2, 3], "f2"),
               np.array([True, False, True])):
        assert codec.serialize(ok) == ok.astype(">f4").tobytes()
    for bad in (np.array([1, 2, 3], "f8"), np.array([1, 2, 3], "i8"), np.array(["a", "b", "c"]),
                np.array([1, 2, 3], object)):
        with pytest.raises(TypeError, match=r"'safe' casting rule; cast it explicitly.*astype\(numpy.float32\)"):
            codec.serialize(bad)
    with pytest.raises(TypeError, match="astype"):
        VectorCodec("int", 2).serialize(np.array([1.0, 2.0]))
    assert VectorCodec("double", 2).serialize(np.array([0.1, 2], "f4")) == \
        np.array([0.1, 2], "f4").astype(">f8").tobytes()
    assert VectorCodec("timestamp", 2).serialize(np.array([1, -5], "M8[ms]")) == \
        np.array([1, -5], ">i8").tobytes()
    with pytest.raises(TypeError):
        VectorCodec("timestamp", 2).serialize(np.array([1, -5], "M8[s]"))


def test_sequence_element_errors():
    codec = VectorCodec("float", 3)
    with pytest.raises(TypeError, match="element 1 is None"):
        codec.serialize([1.0, None, 2.0])
    with pytest.raises(TypeError):
        codec.serialize([1.0, "x", 2.0])
    with pytest.raises(TypeError, match="got str"):
        codec.serialize("abc")
    with pytest.raises(TypeError):
        codec.serialize(3.0)
    with pytest.raises(TypeError, match="element 0"):
        VectorCodec("int", 1).serialize([None])
    with pytest.raises(TypeError):
        VectorCodec("int", 1).serialize([1.5])
    with pytest.raises(TypeError, match="expected a bool"):
        VectorCodec("boolean", 1).serialize([1])
    with pytest.raises(TypeError, match="expected an int"):
        VectorCodec("timestamp", 1).serialize([True])
    with pytest.raises(TypeError, match="uuid"):
        VectorCodec("uuid", 1).serialize(["not a uuid"])


def test_length_and_shape_errors():
    codec = VectorCodec("float", 3)
    msg = "Expected sequence of size 3 for vector of type float and dimension 3, observed sequence of length 2"
    with pytest.raises(ValueError, match=msg):
        codec.serialize([1.0, 2.0])
    with pytest.raises(ValueError, match=msg):
        codec.serialize(np.zeros(2, "f4"))
    with pytest.raises(ValueError, match=r"1-D array of shape \(3,\), got an array of shape \(1, 3\)"):
        codec.serialize(np.zeros((1, 3), "f4"))
    with pytest.raises(ValueError, match=r"2-D array of shape \(rows, 3\)"):
        codec.serialize_many(np.zeros((2, 4), "f4"))
    with pytest.raises(ValueError, match=r"2-D"):
        codec.serialize_many(np.zeros(3, "f4"))
    with pytest.raises(ValueError, match="row 1: Expected sequence of size 3"):
        codec.serialize_many([[1, 2, 3], [1, 2]])
    with pytest.raises(TypeError, match="row 0: element 2 is None|row 0: vector element 2 is None"):
        codec.serialize_many([[1, 2, None]])
    with pytest.raises(ValueError):
        VectorCodec("float", 0)
    with pytest.raises(ValueError, match="unsupported vector subtype 'decimal'"):
        VectorCodec("decimal", 3)
    with pytest.raises(TypeError):
        VectorCodec(3, 3)


def test_bytes_passthrough():
    codec = VectorCodec("float", 3)
    b = np.arange(3, dtype=">f4").tobytes()
    assert codec.serialize(b) is b
    assert codec.serialize(bytearray(b)) == b
    with pytest.raises(ValueError, match="serialized size 12; observed serialized size of 11"):
        codec.serialize(b[:-1])
    for sub in ("smallint", "text", "blob", "varint", "date"):
        with pytest.raises(TypeError, match="variable-width"):
            VectorCodec(sub, 3).serialize(b"\x00\x01\x02")
    assert codec.serialize_many([b, b]) == [b, b]
    buf, stride = codec.serialize_into([b, bytearray(b), [0, 1, 2]])
    assert bytes(buf) == b * 3 and stride == 12


def test_variable_width_round_trips():
    texts = ["", "a", "é" * 70, "\U0001F600", "x" * 200]
    c = VectorCodec("text", len(texts))
    assert c.deserialize(c.serialize(texts)).tolist() == texts
    assert VectorCodec("varchar", 1).serialize(["é"]) == b"\x02\xc3\xa9"
    with pytest.raises(UnicodeEncodeError):
        VectorCodec("ascii", 1).serialize(["é"])
    ints = [0, 1, -1, 127, 128, -128, -129, 255, 2**63 - 1, -2**63, 2**64, -2**64 - 1, 10**40,
            -(10**40)]
    v = VectorCodec("varint", len(ints))
    raw = v.serialize(ints)
    assert v.deserialize(raw).tolist() == ints
    expect = b""
    for i in ints:
        n = (i if i >= 0 else ~i).bit_length() // 8 + 1
        body = i.to_bytes(n, "big", signed=True)
        expect += bulkwire._core._testing.vint_pack(len(body)) + body
    assert raw == expect
    us = [uuid.uuid4() for _ in range(3)]
    for sub in ("uuid", "timeuuid"):
        u = VectorCodec(sub, 3)
        assert u.serialize(us) == b"".join(x.bytes for x in us)
        assert u.deserialize(u.serialize(us)).tolist() == us


def test_deserialize_views_and_copies():
    a = np.linspace(-1, 1, 8).astype("f4")
    c = VectorCodec("float", 8)
    b = c.serialize(a)
    out = c.deserialize(b)
    assert out.dtype == np.dtype(">f4") and out.base is not None and not out.flags.writeable
    assert np.array_equal(out, a)
    ba = bytearray(b)
    view = c.deserialize(ba)
    ba[0:4] = np.array([5], ">f4").tobytes()
    assert view[0] == 5  # zero-copy over the bytearray
    with pytest.raises(ValueError, match="serialized size 32; observed serialized size of 31"):
        c.deserialize(b[:-1])
    many = c.deserialize_many([b, bytes(ba), memoryview(b)])
    assert many.dtype == np.dtype("f4") and many.shape == (3, 8)
    assert np.array_equal(many[0], a)
    with pytest.raises(ValueError, match="row 1: Expected vector"):
        c.deserialize_many([b, b[:4]])
    assert c.deserialize_many([]).shape == (0, 8)
    ts = VectorCodec("timestamp", 2)
    assert ts.deserialize(ts.serialize([0, 1000])).tolist() == np.array([0, 1000], "M8[ms]").tolist()
    d = VectorCodec("date", 2)
    assert d.deserialize(d.serialize([2**31, 2**31 + 1])).astype(str).tolist() == ["1970-01-01", "1970-01-02"]
    t = VectorCodec("time", 1)
    assert t.deserialize(t.serialize([5]))[0] == np.timedelta64(5, "ns")
    s = VectorCodec("smallint", 3)
    assert s.deserialize(s.serialize([1, -2, 3])).tolist() == [1, -2, 3]
    with pytest.raises(ValueError, match="length byte"):
        s.deserialize(b"\x03\x00\x01\x02\x00\x01\x02\x00\x01")
    assert s.deserialize_many([s.serialize([1, 2, 3])] * 2).tolist() == [[1, 2, 3]] * 2
    bo = VectorCodec("boolean", 3)
    assert bo.deserialize(b"\x01\x00\x05").tolist() == [True, False, True]
    tx = VectorCodec("text", 2)
    with pytest.raises(ValueError, match="Additional bytes remaining"):
        tx.deserialize(tx.serialize(["a", "b"]) + b"\x00")
    with pytest.raises(ValueError, match="after successfully adding 1 elements"):
        tx.deserialize(b"\x01a\x05ab")
    assert tx.deserialize_many([tx.serialize(["a", "b"])] * 2).tolist() == [["a", "b"]] * 2


def test_serialize_into_rejects_variable_rows():
    with pytest.raises(ValueError, match="rows vary in size"):
        VectorCodec("text", 2).serialize_into([["a", "b"]])


@pytest.mark.parametrize("dtype", ["f4", ">f4", "f8", ">f8"])
@pytest.mark.parametrize("mode", ["widen", "shortest"])
def test_to_json_many_matches_dumps(dtype, mode):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 16)).astype(dtype)
    a[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    a[1, :3] = [1e20, 1e-7, 0.1]
    codec = VectorCodec("float", 16)
    got = codec.to_json_many(a, float32=mode)
    # dumps of the native-order row: bulkwire.dumps writes byte-swapped float32 arrays through
    # the generic (widening) path even with float32="shortest"; to_json_many does not.
    native = a.astype(a.dtype.newbyteorder("="))
    want = [bulkwire.dumps(row, float32=mode) for row in native]
    assert got == want
    assert codec.to_json_many(a[:, ::-1], float32=mode) == [
        bulkwire.dumps(r, float32=mode) for r in native[:, ::-1]]
    with pytest.raises(ValueError, match="float32 must be"):
        codec.to_json_many(a, float32="nope")
    with pytest.raises(TypeError):
        codec.to_json_many(np.zeros((2, 16), "i4"))


finite32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


@given(hnp.arrays(st.sampled_from([np.dtype("<f4"), np.dtype(">f4")]),
                  hnp.array_shapes(min_dims=2, max_dims=2, max_side=20), elements=finite32))
def test_hypothesis_rows_match_numpy(a):
    codec = VectorCodec("float", a.shape[1])
    assert codec.serialize_many(a) == [r.astype(">f4").tobytes() for r in a]
    back = codec.deserialize_many(codec.serialize_many(a))
    assert back.tobytes() == a.astype("=f4").tobytes()


@given(st.lists(st.floats(allow_nan=False), min_size=1, max_size=50))
def test_hypothesis_double_sequences(xs):
    assert VectorCodec("double", len(xs)).serialize(xs) == struct.pack(f">{len(xs)}d", *xs)


@given(st.lists(st.integers(), min_size=1, max_size=20))
def test_hypothesis_varint(xs):
    v = VectorCodec("varint", len(xs))
    assert v.deserialize(v.serialize(xs)).tolist() == xs


def test_reference_leaks():
    import gc

    from _leaks import growth
    codec = VectorCodec("float", 64)
    a = np.ones((10, 64), "f4")
    lst = a[0].tolist()
    bad = [1.0] * 63 + [None]
    payload = codec.serialize(a[0])

    def work():
        codec.serialize(a[0]); codec.serialize(lst); codec.serialize_many(a)
        codec.serialize_into(a); codec.deserialize(payload); codec.deserialize_many([payload] * 3)
        codec.to_json_many(a)
        for call, arg in ((codec.serialize, bad), (codec.serialize, a), (codec.serialize_many, [bad]),
                          (codec.deserialize, payload[:-1]), (codec.serialize, np.ones(64, "f8"))):
            try:
                call(arg)
            except (TypeError, ValueError):
                pass
        VectorCodec("text", 2).deserialize(VectorCodec("text", 2).serialize(["a", "b"]))
        VectorCodec("varint", 1).serialize([10**30])

    for _ in range(50):
        work()
    gc.collect()
    refs = [sys.getrefcount(x) for x in (a, lst, bad, payload)]
    python, heap = growth(work, calls=300, rounds=1)
    assert [sys.getrefcount(x) for x in (a, lst, bad, payload)] == refs
    assert python * 300 < 64 * 1024
    assert heap is None or heap * 300 < 64 * 1024


def test_empty_batches():
    c = VectorCodec("float", 4)
    assert c.serialize_many(np.zeros((0, 4), "f4")) == []
    assert c.serialize_into([]) == (bytearray(), 16)
    assert c.serialize_many([]) == []


def test_threads_share_codecs_while_the_gil_is_released():
    import threading
    codec = VectorCodec("float", 768)
    a = np.random.default_rng(3).standard_normal((1500, 768)).astype("f4")  # > 1 MiB: GIL released
    want = [r.astype(">f4").tobytes() for r in a]
    errors = []

    def worker():
        try:
            for _ in range(3):
                assert codec.serialize_many(a) == want
                buf, _ = codec.serialize_into(a)
                assert np.array_equal(codec.deserialize_many(want), a)
                assert bytes(buf) == b"".join(want)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_masked_arrays_are_rejected():
    codec = VectorCodec("float", 3)
    m = np.ma.masked_array(np.ones(3, "f4"), mask=[0, 1, 0])
    with pytest.raises(TypeError, match="masked arrays"):
        codec.serialize(m)
    with pytest.raises(TypeError, match="masked arrays"):
        codec.serialize_many(np.ma.masked_array(np.ones((2, 3), "f4")))
    assert codec.serialize(m.filled(0)) == np.array([1, 0, 1], ">f4").tobytes()
