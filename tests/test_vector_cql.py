"""bulkwire.cql: the driver's VectorType with our codec inside must give the driver's own
bytes and exceptions (type and message) for every input."""
import datetime
import decimal
import struct
import uuid

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

ct = pytest.importorskip("cassandra.cqltypes")
from cassandra import util  # noqa: E402

import bulkwire.cql  # noqa: E402
from bulkwire import VectorCodec  # noqa: E402

ORIG_SER = ct.VectorType.__dict__["serialize"].__func__
ORIG_DES = ct.VectorType.__dict__["deserialize"].__func__
PV = 4

DRIVER_NAMES = {
    "float": "FloatType", "double": "DoubleType", "int": "Int32Type", "bigint": "LongType",
    "boolean": "BooleanType", "timestamp": "TimestampType", "uuid": "UUIDType",
    "timeuuid": "TimeUUIDType", "smallint": "ShortType", "tinyint": "ByteType",
    "date": "SimpleDateType", "time": "TimeType", "text": "UTF8Type", "varchar": "VarcharType",
    "ascii": "AsciiType", "blob": "BytesType", "varint": "IntegerType",
}


def vtype(subtype, n):
    return ct.lookup_casstype("org.apache.cassandra.db.marshal.VectorType("
                              f"org.apache.cassandra.db.marshal.{DRIVER_NAMES[subtype]}, {n})")


@pytest.fixture(autouse=True)
def installed():
    bulkwire.cql.install()
    yield
    bulkwire.cql.uninstall()


def outcome(fn, *args):
    try:
        value = fn(*args)
    except Exception as e:  # noqa: BLE001 - the point is to compare any exception
        return ("raise", type(e), str(e))
    return ("value", repr(value) if isinstance(value, list) else value)


def same_serialize(T, v):
    want = outcome(ORIG_SER, T, v, PV)
    got = outcome(T.serialize, v, PV)
    assert got == want, (T, v)
    return want


def same_deserialize(T, b):
    want = outcome(ORIG_DES, T, b, PV)
    got = outcome(T.deserialize, b, PV)
    assert got == want, (T, b)
    return want


def fast(subtype, n, v):
    """The codec itself accepts v (so the drop-in really takes the fast path)."""
    return VectorCodec(subtype, n, driver_compat=True).serialize(v)


SNAN = np.array([0x7F800001, 0xFF812345], "<u4").view("<f4")

CASES = {
    "float": [[1.0, 2.5, -0.0], [1, 2, 3], [True, 2, 3.5], [float("nan"), float("inf"), -1e-46],
              [1e39, 0, 0], [-1e300, 0, 0], [None, 1, 2], [1, 2], [1, 2, 3, 4], ["a", 1, 2],
              (1.0, 2.0, 3.0), [decimal.Decimal("1.1"), 2, 3], [np.float32(0.1), np.float64(0.2), 3],
              np.array([1, 2, 3], "f4"), np.array([1, 2, 3], ">f4"), np.array([0.1, 1e300, 3], "f8"),
              np.array([1, 2, 3], "f2"), np.array([1, 2, 3], "i1"), np.array([1, 2, 3], "i8"),
              np.array([1, 2, 3], "u2"), np.array([True, False, True]), np.array([1, 2, 3], object),
              np.zeros((3, 1), "f4"), np.zeros((1, 3), "f4"), np.arange(6, dtype="f4")[::2],
              np.concatenate([SNAN, np.ones(1, "f4")]), b"abc", b"\x00" * 12, "abc", [[1], [2], [3]]],
    "double": [[1.0, 2.5, -0.0], [1, 2, 10**20], [10**400, 1, 2], [None, 1, 2], [1, 2],
               np.array([1, 2, 3], "f8"), np.array([1, 2, 3], ">f8"), np.array([0.1, 2, 3], "f4"),
               np.concatenate([SNAN, np.ones(1, "f4")]), np.array([1, 2, 3], "i8"),
               np.array([1, 2, 3], "u4"), np.array([1, 2, 3], "f2"), b"\x00" * 24, "xyz"],
    "int": [[1, -2, 3], [2**31 - 1, -2**31, 0], [2**31, 0, 0], [1.0, 2, 3], [True, False, 1],
            [None, 1, 2], [np.int64(5), np.uint8(3), 1], [1, 2], np.array([1, 2, 3], "i4"),
            np.array([1, 2, 3], ">i4"), np.array([1, 2, 3], "i8"), np.array([1, 2, 3], "u2"),
            np.array([1, 2, 3], "u4"), np.array([True, False, True]), np.array([1.0, 2, 3]),
            b"\x00\x01\x02", "123"],
    "bigint": [[1, -2, 3], [2**63 - 1, -2**63, 0], [2**63, 0, 0], [None, 1, 2],
               np.array([1, 2, 3], "i8"), np.array([1, 2, 3], "u8"), np.array([1, 2, 3], ">i2")],
    "smallint": [[1, -2, 3], [2**15 - 1, -2**15, 0], [2**15, 0, 0], [1.5, 0, 0], [None, 1, 2],
                 np.array([1, 2, 3], "i2"), np.array([1, 2, 3], "i1"), np.array([1, 2, 3], "i4"),
                 np.array([1, 2, 3], "u1"), b"\x00\x01\x02"],
    "tinyint": [[1, -2, 3], [127, -128, 0], [128, 0, 0], [None, 1, 2], [True, 1, 0],
                np.array([1, 2, 3], "i1"), np.array([1, 2, 3], "u1"), np.array([1, 2, 3], "i2")],
    "boolean": [[True, False, True], [1, 0, 1], [2, 0, 0], [None, True, True], [np.True_, True, True],
                np.array([True, False, True]), [1.0, 0, 0], b"\x00\x01\x01"],
    "timestamp": [[0, 1, -1], [2**63 - 1, 0, 0], [2**63, 0, 0], [1.5, 0, 0], [True, 0, 0],
                  [None, 0, 0], [datetime.datetime(2020, 1, 2, 3, 4, 5, 678000), 0, 0],
                  [datetime.date(2020, 1, 2), 0, 0], np.array([1, 2, 3], "M8[ms]"),
                  np.array([1, 2, 3], "i8")],
    "uuid": [[uuid.uuid4(), uuid.uuid1(), uuid.UUID(int=0)], ["x", uuid.uuid4(), uuid.uuid4()],
             [None, uuid.uuid4(), uuid.uuid4()], [uuid.uuid4()]],
    "timeuuid": [[uuid.uuid1(), uuid.uuid1(), uuid.uuid1()], [b"x" * 16, uuid.uuid1(), uuid.uuid1()]],
    "date": [[2**31, 0, 2**32 - 1], [2**32, 0, 0], [-1, 0, 0], [True, 0, 0],
             [datetime.date(2020, 1, 2), 0, 0], [util.Date(5), 0, 0], [None, 0, 0],
             [np.int64(5), 0, 0], np.array([1, 2, 3], "u4")],
    "time": [[0, 1, 86_400_000_000_000 - 1], [86_400_000_000_000, 0, 0], [-1, 0, 0],
             [datetime.time(1, 2, 3), 0, 0], [util.Time(5), 0, 0], [None, 0, 0], [1.5, 0, 0],
             [np.int64(3), 0, 0]],
    "text": [["a", "é", "\U0001F600"], ["", "x" * 200, "y"], ["\ud800", "a", "b"], [b"a", "b", "c"],
             [None, "a", "b"], [1, "a", "b"], np.array(["a", "bb", "ccc"]), "abc"],
    "varchar": [["a", "é", "z"]],
    "ascii": [["a", "b", "c"], ["é", "b", "c"], [b"a", "b", "c"]],
    "blob": [[b"a", bytearray(b"bb"), memoryview(b"ccc")], [b"", b"x" * 300, b"y"], [3, b"", b""],
             ["s", b"", b""], [None, b"", b""], [np.arange(4, dtype="u1")[::2], b"", b""]],
    "varint": [[0, -1, 2**200], [127, 128, -129], [True, np.int64(-5), 2**63], [1.5, 0, 0],
               [None, 0, 0], [decimal.Decimal(3), 0, 0]],
}


@pytest.mark.parametrize("subtype", list(CASES))
def test_serialize_same_as_driver(subtype):
    for v in CASES[subtype]:
        n = len(v) if hasattr(v, "__len__") else 3
        T = vtype(subtype, 3)
        same_serialize(T, v)
        if n != 3:
            same_serialize(vtype(subtype, n), v)


@pytest.mark.parametrize("subtype", list(CASES))
def test_deserialize_same_as_driver(subtype):
    T = vtype(subtype, 3)
    payloads = []
    for v in CASES[subtype]:
        kind, *rest = outcome(ORIG_SER, T, v, PV)
        if kind == "value":
            payloads.append(rest[0])
    assert payloads
    for b in payloads:
        same_deserialize(T, b)
        same_deserialize(T, b[:-1])
        same_deserialize(T, b + b"\x00")
        same_deserialize(T, b"")


def test_fast_path_covers_the_common_inputs():
    """Not everything falls back: the codec takes these very inputs itself."""
    f = vtype("float", 3)
    for v in ([1.0, 2.0, 3.0], np.array([1, 2, 3], "f4"), np.array([1, 2, 3], ">f4")):
        assert fast("float", 3, v) == ORIG_SER(f, v, PV)
    for sub, v in (("int", [1, 2, 3]), ("smallint", [1, 2, 3]), ("text", ["a", "b", "c"]),
                   ("varint", [1, -1, 2**70]), ("uuid", [uuid.UUID(int=i) for i in range(3)]),
                   ("boolean", [True, False, True]), ("timestamp", [1, 2, 3]), ("date", [1, 2, 3]),
                   ("time", [1, 2, 3]), ("blob", [b"a", b"b", b"c"]), ("double", [0.1, 0.2, 0.3])):
        assert fast(sub, 3, v) == ORIG_SER(vtype(sub, 3), v, PV)
    payload = ORIG_SER(f, [1.0, 2.0, 3.0], PV)
    assert VectorCodec("float", 3)._deserialize_list(payload) == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("n", [127, 128, 16383, 16384])
def test_vint_boundaries_same_as_driver(n):
    for sub, v in (("text", ["x" * n, "", "é"]), ("blob", [b"y" * n, b"z", b""])):
        T = vtype(sub, 3)
        kind, payload = same_serialize(T, v)
        assert kind == "value"
        same_deserialize(T, payload)
    assert len(same_serialize(vtype("float", n), [0.5] * n)[1]) == 4 * n


def test_install_uninstall_restore():
    vt = ct.VectorType
    assert bulkwire.cql.installed()
    assert "bulkwire" in (vt.serialize.__doc__ or "")
    bulkwire.cql.install()  # idempotent
    bulkwire.cql.uninstall()
    assert not bulkwire.cql.installed()
    assert vt.__dict__["serialize"].__func__ is ORIG_SER
    assert vt.__dict__["deserialize"].__func__ is ORIG_DES
    bulkwire.cql.uninstall()  # idempotent
    bulkwire.cql.install()


def test_numpy_results_on_request():
    T = vtype("float", 3)
    payload = ORIG_SER(T, [1.0, 2.0, 3.0], PV)
    assert T.deserialize(payload, PV) == [1.0, 2.0, 3.0]
    bulkwire.cql.install(numpy_results=True)
    out = T.deserialize(payload, PV)
    assert isinstance(out, np.ndarray) and out.tolist() == [1.0, 2.0, 3.0]
    same = vtype("text", 1)
    assert same.deserialize(ORIG_SER(same, ["a"], PV), PV) == ["a"]  # not numeric: driver's list


def test_unknown_subtypes_use_the_driver():
    T = ct.lookup_casstype("org.apache.cassandra.db.marshal.VectorType("
                           "org.apache.cassandra.db.marshal.DecimalType, 2)")
    v = [decimal.Decimal("1.5"), decimal.Decimal("-2")]
    same_serialize(T, v)
    same_deserialize(T, ORIG_SER(T, v, PV))


bits32 = st.integers(0, 2**32 - 1)


@given(st.lists(bits32, min_size=1, max_size=40), st.booleans())
def test_hypothesis_float32_bit_patterns(bits, big):
    a = np.array(bits, "<u4").view("<f4")
    if big:
        a = a.astype(">f4")
    T = vtype("float", len(bits))
    same_serialize(T, a)
    kind, payload = same_serialize(T, a.tolist())
    same_deserialize(T, payload)


@given(st.lists(st.one_of(st.floats(), st.integers(-2**70, 2**70), st.none(), st.booleans()),
                min_size=1, max_size=12), st.sampled_from(["float", "double"]))
def test_hypothesis_float_sequences(xs, sub):
    same_serialize(vtype(sub, len(xs)), xs)
    same_serialize(vtype(sub, max(1, len(xs) - 1)), xs)


@given(st.lists(st.integers(-2**66, 2**66), min_size=1, max_size=10),
       st.sampled_from(["int", "bigint", "smallint", "tinyint", "varint", "timestamp", "date", "time"]))
def test_hypothesis_integer_sequences(xs, sub):
    T = vtype(sub, len(xs))
    kind, *rest = same_serialize(T, xs)
    if kind == "value":
        same_deserialize(T, rest[0])


@given(hnp.arrays(st.sampled_from([np.dtype(c) for c in ("f2", "f4", ">f4", "f8", "i1", "i2", "i4", "i8",
                                                        "u1", "u4", "u8", "?")]),
                  st.integers(1, 8)),
       st.sampled_from(["float", "double", "int", "bigint", "smallint", "tinyint", "boolean"]))
def test_hypothesis_arrays(a, sub):
    same_serialize(vtype(sub, len(a)), a)


@given(st.lists(st.text(), min_size=1, max_size=6))
def test_hypothesis_text(xs):
    T = vtype("text", len(xs))
    kind, *rest = same_serialize(T, xs)
    if kind == "value":
        same_deserialize(T, rest[0])
        same_deserialize(T, rest[0][:-1])
