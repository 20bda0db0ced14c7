"""VectorCodec.serialize_rows: every row back to back in one read-only buffer (VectorRows),
byte-identical to the scylla-driver's own VectorType, accepted by bulkwire.cql as the row
itself, without the fresh-page faults of one bytes object per row."""
import gc
import io
import os
import subprocess
import sys
import textwrap
import tracemalloc

import cassandra.cqltypes as ct
import cassandra.protocol
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import bulkwire.cql
from bulkwire import VectorCodec, VectorRows

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
from references import driver_vector_type  # noqa: E402

ORIG_SER = ct.VectorType.__dict__["serialize"].__func__
PV = 4

# subtype -> the dtype its values are generated in (finite values: the driver's float32
# packing quiets signaling NaNs, which only driver_compat codecs reproduce)
DTYPES = {"float": "f4", "double": "f8", "int": "i4", "bigint": "i8", "smallint": "i2",
          "tinyint": "i1", "boolean": "?"}


def outcome(fn, *args):
    try:
        value = fn(*args)
    except Exception as e:  # noqa: BLE001 - the point is to compare any exception
        return ("raise", type(e), str(e))
    return ("value", bytes(value))


@st.composite
def batches(draw):
    subtype = draw(st.sampled_from(sorted(DTYPES)))
    dim = draw(st.integers(1, 40))
    rows = draw(st.integers(0, 12))
    dtype = np.dtype(DTYPES[subtype]).newbyteorder(draw(st.sampled_from("<>=")))
    elements = (hnp.from_dtype(dtype, allow_nan=False, allow_infinity=True)
                if dtype.kind == "f" else hnp.from_dtype(dtype))
    a = draw(hnp.arrays(dtype, (rows, dim), elements=elements))
    if draw(st.booleans()) and rows > 1:
        a = a[::-1]
    if draw(st.booleans()):
        a = np.asfortranarray(a)
    return subtype, dim, a


@given(batches())
def test_rows_are_the_drivers_bytes(case):
    subtype, dim, a = case
    codec = VectorCodec(subtype, dim)
    rows = codec.serialize_rows(a)
    T = driver_vector_type(subtype, dim)
    assert len(rows) == len(a)
    assert rows.stride == codec.serialized_size
    assert (rows.subtype, rows.dimension) == (subtype, dim)
    want = [ORIG_SER(T, row, PV) for row in a.tolist()]
    assert [bytes(r) for r in rows] == want
    assert bytes(rows) == b"".join(want)
    assert codec.serialize_many(a) == want
    for i, r in enumerate(rows):
        assert r.readonly and r.obj is rows and r.nbytes == rows.stride
        assert codec.deserialize(r).tolist() == codec.deserialize(want[i]).tolist()


@given(batches())
def test_dropin_sends_rows_as_they_are(case):
    subtype, dim, a = case
    rows = VectorCodec(subtype, dim).serialize_rows(a)
    T = driver_vector_type(subtype, dim)
    bulkwire.cql.install()
    try:
        for i, row in enumerate(a.tolist()):
            sent = T.serialize(rows[i], PV)
            assert sent.obj is rows  # no copy
            assert bytes(sent) == ORIG_SER(T, row, PV)
    finally:
        bulkwire.cql.uninstall()


def test_dropin_takes_only_whole_rows_of_its_own_vector_type():
    a = np.arange(12, dtype="f4").reshape(3, 4)
    rows = VectorCodec("float", 4).serialize_rows(a)
    whole = memoryview(rows)
    others = [
        driver_vector_type("float", 3),   # another dimension
        driver_vector_type("int", 4),     # another subtype with the same row size
    ]
    wrong_views = [
        whole[2:18],                      # the right length, off a row boundary
        whole[0:16].cast("f"),            # one row, seen as floats
        whole[0:32],                      # two rows
        whole[0:32:2],                    # strided
        memoryview(bytes(rows[0])),       # the same bytes, not from a VectorRows
    ]
    released = rows[1]
    released.release()
    bulkwire.cql.install()
    try:
        T = driver_vector_type("float", 4)
        for v in wrong_views + [released]:
            # the driver's own code runs, with its own outcome
            assert outcome(T.serialize, v, PV) == outcome(ORIG_SER, T, v, PV)
        for T in others:
            assert outcome(T.serialize, rows[0], PV) == outcome(ORIG_SER, T, rows[0], PV)
        assert bytes(driver_vector_type("float", 4).serialize(rows[2], PV)) == a[2].astype(">f4").tobytes()
    finally:
        bulkwire.cql.uninstall()


def test_driver_protocol_writes_a_row():
    codec = VectorCodec("double", 3)
    rows = codec.serialize_rows(np.array([[1.5, -2.0, 3.25]]))
    f = io.BytesIO()
    cassandra.protocol.write_value(f, rows[0])
    assert f.getvalue() == b"\x00\x00\x00\x18" + codec.serialize([1.5, -2.0, 3.25])


def test_sequence_and_buffer_behaviour():
    a = np.arange(6, dtype="f4").reshape(3, 2)
    rows = VectorCodec("float", 2).serialize_rows(a)
    assert isinstance(rows, VectorRows)
    assert repr(rows) == "<VectorRows: 3 rows of vector<float, 2>, 8 bytes each>"
    assert bytes(rows[-1]) == bytes(rows[2]) == a[2].astype(">f4").tobytes()
    with pytest.raises(IndexError, match="VectorRows index out of range"):
        rows[3]
    with pytest.raises(IndexError):
        rows[-4]
    with pytest.raises(TypeError):
        rows[0][0] = 1  # read-only, as bytes
    with pytest.raises(TypeError):
        memoryview(rows)[0] = 1
    assert (np.frombuffer(rows, ">f4").reshape(-1, 2) == a).all()
    # a row is exported on its own; the whole buffer is exported again right after
    views = [rows[1], memoryview(rows), rows[0], memoryview(rows)]
    assert [v.nbytes for v in views] == [8, 24, 8, 24]
    assert bytes(views[1]) == bytes(views[3]) == a.astype(">f4").tobytes()
    assert memoryview(views[0]).obj is rows and bytes(memoryview(views[0])) == bytes(rows[1])
    row = rows[1]
    del rows
    gc.collect()
    assert bytes(row) == a[1].astype(">f4").tobytes()  # the row keeps the memory alive
    empty = VectorCodec("float", 2).serialize_rows(np.zeros((0, 2), "f4"))
    assert len(empty) == 0 and bytes(empty) == b"" and list(empty) == []


def test_inputs_and_errors_match_serialize_into():
    import pyarrow as pa
    codec = VectorCodec("float", 3)
    a = np.arange(12, dtype="f4").reshape(4, 3)
    fsl = pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), 3)
    for batch in (a, fsl, pa.chunked_array([fsl.slice(0, 1), fsl.slice(1)]), a.tolist(),
                  [bytes(r) for r in codec.serialize_many(a)], np.asfortranarray(a)[::-1]):
        assert bytes(codec.serialize_rows(batch)) == bytes(codec.serialize_into(batch)[0])
    for batch in (a.astype("f8"), [[1, 2, 3], [1, 2]], [[1, 2, None]], np.zeros((2, 4), "f4"),
                  "abc", [[1e300, 0, 0]]):
        with pytest.raises(Exception) as into:
            codec.serialize_into(batch)
        with pytest.raises(type(into.value)) as rows:
            codec.serialize_rows(batch)
        assert str(rows.value) == str(into.value)
    with pytest.raises(ValueError, match="serialize_rows needs rows of one size"):
        VectorCodec("text", 2).serialize_rows([["a", "b"]])


def test_no_leak_on_repeat_and_errors():
    codec = VectorCodec("float", 64)
    a = np.random.default_rng(0).random((50, 64), dtype="f4")
    refs = sys.getrefcount(a)

    def once():
        rows = codec.serialize_rows(a)
        for r in rows:
            bytes(r)
        with pytest.raises(TypeError):
            codec.serialize_rows(a.astype("f8"))
        with pytest.raises(TypeError):
            codec.serialize_rows([a[0].tolist(), [None] * 64])

    for _ in range(20):
        once()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(200):
        once()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 64 * 1024, grown
    assert sys.getrefcount(a) == refs


# A fresh process, as a batch job meets the call: how many pages it faults in, against NumPy's
# own astype of the same data. One bytes object per row faults every 4 KiB page of fresh heap
# (7,500 for this batch); one buffer given the same huge-page advice as NumPy's arrays does not.
COLD = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from bulkwire import VectorCodec
    a = np.random.default_rng(0).standard_normal((10000, 768)).astype("f4")
    codec = VectorCodec("float", 768)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = a.astype(">f4") if sys.argv[1] == "astype" else codec.serialize_rows(a)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
""")


def cold_faults(which):
    # the package the tests import (the checkout's in-place build, or the installed one)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__))))
    out = subprocess.run([sys.executable, "-c", COLD, which], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


def test_cold_rows_fault_no_more_pages_than_numpy():
    astype = min(cold_faults("astype") for _ in range(2))
    rows = min(cold_faults("rows") for _ in range(2))
    # the huge-page count moves with the buffer's 2 MiB alignment (347 or 858 faults here, for
    # both); one bytes object per row takes 7,500. The sanitizer build's allocator and shadow
    # memory fault pages of their own (about 3,200 against astype's 1,300 there).
    slack = 2500 if os.environ.get("BULKWIRE_SANITIZER") == "1" else 1000
    assert rows <= astype + slack, (rows, astype)
