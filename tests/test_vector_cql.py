"""bulkwire.cql: the driver's VectorType with our codec inside must give the driver's own
bytes and exceptions (type and message) for every input."""
import datetime
import decimal
import uuid

import numpy as np
import pytest

from forked import forked_child_exit_code
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

ct = pytest.importorskip("cassandra.cqltypes")
from cassandra import util  # noqa: E402

import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import bulkwire.cql  # noqa: E402
from references import driver_vector_type  # noqa: E402
from bulkwire import VectorCodec  # noqa: E402

ORIG_SER = ct.VectorType.__dict__["serialize"].__func__
ORIG_DES = ct.VectorType.__dict__["deserialize"].__func__
PV = 4



vtype = driver_vector_type


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
    assert VectorCodec("float", 3)._driver_deserialize(payload, False) == [1.0, 2.0, 3.0]


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


@pytest.mark.parametrize("subtype,dtype", [("float", "f4"), ("double", "f8"), ("int", "i4"),
                                            ("bigint", "i8"), ("smallint", "i2"),
                                            ("tinyint", "i1")])
def test_numpy_results_in_either_byte_order(subtype, dtype):
    """True: arrays viewing the big-endian bytes received; "native": the machine's order.
    Both hold the driver's values."""
    T = vtype(subtype, 4)
    values = [1, -2, 3, 100] if dtype[0] == "i" else [1.5, -2.25, 3.0, 1e-3]
    payload = ORIG_SER(T, values, PV)
    expected = ORIG_DES(T, payload, PV)
    bulkwire.cql.install(numpy_results=True)
    big = T.deserialize(payload, PV)
    # float, double, int and bigint elements have a fixed size: views of the received bytes;
    # smallint and tinyint are written with a length each, so they are decoded into new arrays
    viewed = subtype in ("float", "double", "int", "bigint")
    assert big.dtype == np.dtype((">" if viewed else "=") + dtype) and big.tolist() == expected
    bulkwire.cql.install(numpy_results="native")
    native = T.deserialize(payload, PV)
    assert native.dtype == np.dtype(dtype) and native.dtype.isnative
    assert native.tolist() == expected
    bulkwire.cql.install()
    assert T.deserialize(payload, PV) == expected


@pytest.mark.parametrize("bad", ["little", "big", ""])
def test_numpy_results_refuses_other_words(bad):
    bulkwire.cql.uninstall()
    with pytest.raises(ValueError, match="numpy_results must be False, True or \"native\""):
        bulkwire.cql.install(numpy_results=bad)
    assert not bulkwire.cql.installed()  # nothing was patched
    bulkwire.cql.install()


def test_numpy_results_of_another_type_warns_and_keeps_its_truth():
    T = vtype("float", 2)
    payload = ORIG_SER(T, [1.0, 2.0], PV)
    with pytest.warns(DeprecationWarning, match="numpy_results=\\[1\\] is read as True"):
        bulkwire.cql.install(numpy_results=[1])
    assert isinstance(T.deserialize(payload, PV), np.ndarray)
    bulkwire.cql.install()


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


# ---- NumPy sources: the same checks as the list path, and the driver's bytes ----------------

DAY_NS = 86_400 * 10**9
INT64 = st.integers(-2**63, 2**63 - 1)
NEAR_TIME = st.one_of(st.integers(-3, 3), st.integers(DAY_NS - 3, DAY_NS + 3), INT64)
NEAR_DATE = st.one_of(st.integers(-2**31 - 2, -2**31 + 2), st.integers(2**31 - 2, 2**31 + 1),
                      st.integers(-10**6, 10**6), INT64)
# subtype -> [(dtype, strategy of int64 values or None for hypothesis' own elements)]
SOURCES = {
    "tinyint": [("i1", None), ("u1", None)],
    "smallint": [("i2", None), ("i1", None), ("u1", None)],
    "int": [("i4", None), ("i2", None), ("u2", None), ("?", None)],
    "bigint": [("i8", None), ("u4", None)],
    "boolean": [("?", None), ("u1", None)],  # u1: any byte, viewed as bool
    "timestamp": [("i8", None), ("M8[ms]", INT64)],
    "date": [("u4", None), ("u2", None), ("M8[D]", NEAR_DATE)],
    "time": [("i8", NEAR_TIME), ("i4", None), ("m8[ns]", NEAR_TIME)],
    "float": [("f4", None), ("f2", None), ("i2", None)],
    "double": [("f8", None), ("f4", None), ("i4", None)],
}
NAT = -2**63


@st.composite
def source_arrays(draw, two_d):
    """A NumPy array a subtype reads, in any byte order and stride, with values anywhere in
    its dtype (out of the subtype's range, NaT, bool bytes other than 0/1)."""
    subtype = draw(st.sampled_from(sorted(SOURCES)))
    spec, values = draw(st.sampled_from(SOURCES[subtype]))
    rows = draw(st.integers(1, 4)) if two_d else 1
    dim = draw(st.integers(1, 6))
    step = draw(st.sampled_from([1, 2, -1]))
    n = rows * dim * abs(step)
    if values is not None:
        a = np.array(draw(st.lists(values, min_size=n, max_size=n)), "i8").view(spec)
    elif subtype == "boolean" and spec == "u1":
        a = draw(hnp.arrays("u1", n)).view("?")
    else:
        a = draw(hnp.arrays(np.dtype(spec), n))
    if draw(st.booleans()) and a.dtype.itemsize > 1:
        a = a.astype(a.dtype.newbyteorder("S"))
    a = a.reshape(rows, dim * abs(step))[:, ::step]  # strided, maybe reversed
    return subtype, a if two_d else a[0]


def list_equivalent(subtype, a):
    """The Python values bulkwire's list path takes for a's elements (None for NaT)."""
    if a.dtype.kind in "Mm":
        raw = a.astype(a.dtype.newbyteorder("=")).view("i8")
        offset = 2**31 if subtype == "date" else 0
        return np.vectorize(lambda v: None if v == NAT else int(v) + offset, otypes=[object])(raw).tolist()
    return a.tolist()


def driver_equivalent(subtype, row):
    """What the driver gets for a's elements: tolist(), except datetime64[D] days, which the
    driver would read as raw CQL values when they come out as ints (util.Date instead)."""
    if row.dtype.kind == "M" and subtype == "date":
        days = row.astype(row.dtype.newbyteorder("=")).view("i8").tolist()
        return [None if d == NAT else util.Date(d) for d in days]
    return row.tolist()


def codec_outcome(fn, arg):
    """bulkwire's bytes, or its exception's type and message (a null is named as it appears:
    NaT in an array, None in a list; otherwise the same words)."""
    try:
        return ("value", fn(arg))
    except (TypeError, ValueError, OverflowError) as e:
        return ("raise", type(e), str(e).replace(" is NaT: ", " is None: "))


def check_against_driver(subtype, row, got):
    """got: bulkwire's outcome for the 1-D array row."""
    T = vtype(subtype, len(row))
    want = outcome(ORIG_SER, T, driver_equivalent(subtype, row), PV)
    if want[0] == "value" and got[0] == "value":
        assert got[1] == want[1], (subtype, row)
    elif want[0] == "value":  # the one documented difference: the CQL time range's lower end
        assert subtype == "time" and min(list_equivalent(subtype, row)) < 0, (subtype, row, got)
    else:
        assert got[0] == "raise", (subtype, row, want)


TARGET = {"tinyint": "i1", "smallint": "i2", "int": "i4", "bigint": "i8", "boolean": "?",
          "timestamp": "i8", "date": "u4", "time": "i8", "float": "f4", "double": "f8"}
DATETIME_READ = {"timestamp": "M8[ms]", "date": "M8[D]", "time": "m8[ns]"}


def refused_cast(subtype, a, got):
    """Whether the codec refused a's dtype, as documented: NumPy's 'safe' rule forbids the
    cast (and a is none of the dtypes the subtype reads directly)."""
    if got[0] == "raise" and "'safe' casting rule" in got[2]:
        assert got[1] is TypeError
        assert not np.can_cast(a.dtype, TARGET[subtype], "safe"), (subtype, a.dtype)
        assert a.dtype.newbyteorder("=") != np.dtype(DATETIME_READ.get(subtype, "O"))
        return True
    return False


@given(source_arrays(two_d=False))
def test_hypothesis_array_same_as_list_path_and_driver(case):
    subtype, a = case
    codec = VectorCodec(subtype, len(a), driver_compat=True)
    got = codec_outcome(codec.serialize, a)
    if refused_cast(subtype, a, got):
        return
    assert got == codec_outcome(codec.serialize, list_equivalent(subtype, a)), (subtype, a)
    check_against_driver(subtype, a, got)
    if got[0] == "value":
        assert got[1] == fast(subtype, len(a), a)


@given(source_arrays(two_d=True))
def test_hypothesis_2d_array_same_as_list_path_and_driver(case):
    subtype, a = case
    codec = VectorCodec(subtype, a.shape[1], driver_compat=True)
    got = codec_outcome(codec.serialize_many, a)
    if refused_cast(subtype, a, got):
        return
    assert got == codec_outcome(codec.serialize_many, list_equivalent(subtype, a)), (subtype, a)
    into = codec_outcome(codec.serialize_into, a)
    if got[0] == "value":
        assert into == ("value", (bytearray(b"".join(got[1])), codec.serialized_size))
    else:
        assert into == got
    for row in a:
        row_outcome = codec_outcome(codec.serialize, row)
        check_against_driver(subtype, row, row_outcome)
        if got[0] == "value":
            assert row_outcome[0] == "value"


def test_numpy_sources_regressions():
    """The cases the list path refused and the array path used to write as they were."""
    time4 = VectorCodec("time", 4)
    with pytest.raises(OverflowError, match=r"vector element 0 \(86400000000000\) is out of range for time"):
        time4.serialize(np.array([86400 * 10**9, -1, 0, 0], "i8"))
    with pytest.raises(OverflowError, match=r"vector element 1 \(-1\) is out of range for time"):
        time4.serialize(np.array([0, -1, 0, 0], ">i8")[::-1][::-1])
    with pytest.raises(OverflowError, match=r"row 1: vector element 0 \(-1\) is out of range"):
        VectorCodec("time", 1).serialize_many(np.array([[0], [-1]], "i8"))
    with pytest.raises(OverflowError, match=r"row 1: vector element 0 \(-1\) is out of range"):
        VectorCodec("time", 1).serialize_into(np.array([[0], [-1]], "i8"))
    bools = np.array([1, 2, 0, 255], "u1").view(bool)
    assert VectorCodec("boolean", 4).serialize(bools) == b"\x01\x01\x00\x01"
    assert VectorCodec("boolean", 2).serialize_many(bools.reshape(2, 2)) == [b"\x01\x01", b"\x00\x01"]
    assert VectorCodec("boolean", 4).serialize(bools) == ORIG_SER(vtype("boolean", 4), bools.tolist(), PV)
    with pytest.raises(TypeError, match="vector element 1 is NaT: CQL vectors cannot hold nulls"):
        VectorCodec("timestamp", 2).serialize(np.array([1, "NaT"], "M8[ms]"))
    with pytest.raises(TypeError, match="element 0 is NaT"):
        VectorCodec("time", 1).serialize(np.array(["NaT"], "m8[ns]"))
    d = np.array([0, 19000], "M8[D]")
    assert VectorCodec("date", 2).serialize(d) == ORIG_SER(vtype("date", 2), d.tolist(), PV)
    with pytest.raises(OverflowError, match=r"vector element 0 \(4294967296\) is out of range for date"):
        VectorCodec("date", 1).serialize(np.array([2**31], ">M8[D]"))


def test_blob_elements_are_what_bytes_makes_of_them():
    T = vtype("blob", 5)
    v = [np.int64(3), np.uint8(0), True, np.float64(1.5), np.arange(6, dtype="u1")[::-2]]
    want = ORIG_SER(T, v, PV)
    assert want.startswith(b"\x03\x00\x00\x00")  # bytes(np.int64(3)): three zero bytes
    assert VectorCodec("blob", 5).serialize(v) == want
    for bad in ([np.int64(-1)], ["text"]):
        with pytest.raises(outcome(ORIG_SER, vtype("blob", 1), bad, PV)[1]):
            VectorCodec("blob", 1).serialize(bad)
    with pytest.raises(ValueError, match="negative count"):
        VectorCodec("blob", 1).serialize([np.int8(-1)])


def test_decoding_checks_what_the_driver_checks():
    t = VectorCodec("time", 1)
    for nanos in (DAY_NS, -1, -2**63):
        payload = b"\x08" + nanos.to_bytes(8, "big", signed=True)
        with pytest.raises(ValueError, match="out of range for time"):
            t.deserialize(payload)
        with pytest.raises(ValueError, match="row 0: vector element 0 holds"):
            t.deserialize_many([payload])
        if nanos >= DAY_NS:
            with pytest.raises(ValueError):
                ORIG_DES(vtype("time", 1), payload, PV)
    with pytest.raises(ValueError, match="reads as NaT"):
        VectorCodec("timestamp", 1).deserialize((-2**63).to_bytes(8, "big", signed=True))
    with pytest.raises(ValueError, match="after successfully adding 1 elements"):
        VectorCodec("varint", 2).deserialize(b"\x01\x05\x00")
    with pytest.raises(ValueError):
        ORIG_DES(vtype("varint", 2), b"\x01\x05\x00", PV)
    with pytest.raises(ValueError, match="row 1: vector element 0: 'utf-8' codec can't decode"):
        VectorCodec("text", 1).deserialize_many([b"\x01a", b"\x01\xff"])


@pytest.mark.parametrize("subtype,values", [
    ("date", [0, 2**31, 2**32 - 1]), ("time", [0, 1, DAY_NS - 1]),
    ("timestamp", [-2**63 + 1, 0, 2**63 - 1]), ("boolean", [True, False, True]),
])
def test_deserialize_then_serialize_round_trips(subtype, values):
    codec = VectorCodec(subtype, 3)
    payload = codec.serialize(values)
    back = codec.deserialize(payload)
    assert codec.serialize(back) == payload
    assert codec.serialize_many(codec.deserialize_many([payload, payload])) == [payload, payload]



def test_install_in_a_child_forked_while_the_lock_was_held():
    def calls():
        bulkwire.cql.install()
        bulkwire.cql.uninstall()
    assert forked_child_exit_code(bulkwire.cql, "_lock", calls) == 0
