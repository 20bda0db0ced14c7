"""Arrow vector columns through the PyCapsule interface (read in C, pyarrow only makes them)."""
import gc

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

import bulkwire
from bulkwire import VectorCodec, _core

DIM = 8


def make(rows=6, dim=DIM, dtype="f4", seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)


def fsl(a, value_type=pa.float32()):
    return pa.FixedSizeListArray.from_arrays(pa.array(a.ravel(), value_type), a.shape[1])


def expected(a, wire=">f4"):
    return [r.astype(wire).tobytes() for r in a]


@pytest.mark.parametrize("kind", ["fsl", "list", "large_list"])
@pytest.mark.parametrize("value", ["f4", "f8"])
def test_kinds_and_value_types(kind, value):
    a = make(dtype=value)
    vt = pa.float32() if value == "f4" else pa.float64()
    arr = {"fsl": lambda: fsl(a, vt),
           "list": lambda: pa.array(list(a), pa.list_(vt)),
           "large_list": lambda: pa.array(list(a), pa.large_list(vt))}[kind]()
    info = _core._testing.arrow_vectors_info(arr)
    assert info[0]["kind"] == {"fsl": "fixed_size_list", "list": "list", "large_list": "large_list"}[kind]
    assert info[0]["value_width"] == int(value[1])
    double = VectorCodec("double", DIM)
    assert double.serialize_many(arr) == expected(a, ">f8")  # float32 widens safely
    if value == "f4":
        assert VectorCodec("float", DIM).serialize_many(arr) == expected(a)
        buf, stride = VectorCodec("float", DIM).serialize_into(arr)
        assert bytes(buf) == b"".join(expected(a)) and stride == DIM * 4
    else:
        with pytest.raises(TypeError, match=r"'safe' casting rule; cast the column explicitly"):
            VectorCodec("float", DIM).serialize_many(arr)
    shortest = VectorCodec("float", DIM).to_json_many(arr, float32="shortest")
    assert shortest == [bulkwire.dumps(r, float32="shortest") for r in a]
    assert VectorCodec("float", DIM).to_json_many(arr) == [bulkwire.dumps(r) for r in a]


@pytest.mark.parametrize("kind", ["fsl", "list", "large_list"])
def test_slices(kind):
    a = make(rows=20)
    arr = fsl(a) if kind == "fsl" else pa.array(list(a), pa.list_(pa.float32()) if kind == "list"
                                                else pa.large_list(pa.float32()))
    codec = VectorCodec("float", DIM)
    for start, stop in ((0, 20), (3, 20), (5, 6), (7, 7), (19, 20)):
        assert codec.serialize_many(arr.slice(start, stop - start)) == expected(a[start:stop])
    # a slice of a slice, and the child array sliced under the list
    assert codec.serialize_many(arr.slice(2, 10).slice(3, 4)) == expected(a[5:9])
    values = pa.array(np.concatenate([np.zeros(3, "f4"), a.ravel()]))[3:]
    offsets = pa.array(np.arange(0, 20 * DIM + 1, DIM, dtype="i4"))
    assert codec.serialize_many(pa.ListArray.from_arrays(offsets, values)) == expected(a)


def test_chunked_streams_and_tables():
    a = make(rows=30)
    arrays = [fsl(a[:10]), fsl(a[10:11]), fsl(a[11:11]), fsl(a[11:])]
    ca = pa.chunked_array(arrays)
    codec = VectorCodec("float", DIM)
    assert codec.serialize_many(ca) == expected(a)
    buf, _ = codec.serialize_into(ca)
    assert bytes(buf) == b"".join(expected(a))
    assert codec.to_json_many(ca) == [bulkwire.dumps(r) for r in a]
    assert len(_core._testing.arrow_vectors_info(ca)) == 4
    table = pa.table({"v": ca})
    with pytest.raises(TypeError, match=r"of float32/float64, got struct$"):
        codec.serialize_many(table)  # a table is a struct stream: pick the column
    assert codec.serialize_many(table.column("v")) == expected(a)


def test_nulls_and_ragged_rows_name_the_row():
    codec = VectorCodec("float", 3)
    with pytest.raises(ValueError, match="row 1 is null"):
        codec.serialize_many(pa.array([[1, 2, 3], None, [4, 5, 6]], pa.list_(pa.float32(), 3)))
    with pytest.raises(ValueError, match="row 2 holds a null value"):
        codec.serialize_many(pa.array([[1, 2, 3], [1, 2, 3], [4, None, 6]], pa.list_(pa.float32())))
    with pytest.raises(ValueError, match=r"row 1 has 2 values, expected 3"):
        codec.serialize_many(pa.array([[1, 2, 3], [1, 2]], pa.list_(pa.float32())))
    with pytest.raises(ValueError, match=r"row 0 has 4 values"):
        codec.serialize_many(pa.array([[1, 2, 3, 4]], pa.list_(pa.float32(), 4)))
    # row numbers count across the ChunkedArray's chunks; nulls outside the slice do not matter
    ca = pa.chunked_array([pa.array([[1, 2, 3]] * 4, pa.list_(pa.float32())),
                           pa.array([[1, 2, 3], [1, None, 3]], pa.list_(pa.float32()))])
    with pytest.raises(ValueError, match="row 5 holds a null value"):
        codec.serialize_many(ca)
    with_null = pa.array([None, [1, 2, 3], [4, 5, 6]], pa.list_(pa.float32(), 3))
    assert codec.serialize_many(with_null.slice(1)) == expected(np.array([[1, 2, 3], [4, 5, 6]], "f4"))
    with pytest.raises(ValueError, match="row 0: null vector"):
        codec.to_json_many(with_null)


def test_unsupported_arrow_types():
    codec = VectorCodec("float", 3)
    with pytest.raises(TypeError, match=r"float32 or float64, got fixed_size_list<int32, 3>$"):
        codec.serialize_many(pa.array([[1, 2, 3]], pa.list_(pa.int32(), 3)))
    with pytest.raises(TypeError, match=r"got float32$"):
        codec.serialize_many(pa.array([1.0, 2.0, 3.0], pa.float32()))
    with pytest.raises(TypeError, match="float and double vectors only"):
        VectorCodec("int", 3).serialize_many(pa.array([[1, 2, 3]], pa.list_(pa.float32(), 3)))


class Exporter:
    """Exposes only the capsule protocol, as any non-pyarrow producer would."""

    def __init__(self, arr, stream=False):
        self.arr, self.stream = arr, stream
        if stream:
            self.__arrow_c_stream__ = lambda requested_schema=None: arr.__arrow_c_stream__()


class ArrayOnly:
    def __init__(self, arr):
        self.arr = arr

    def __arrow_c_array__(self, requested_schema=None):
        return self.arr.__arrow_c_array__()


class StreamOnly:
    def __init__(self, obj):
        self.obj = obj

    def __arrow_c_stream__(self, requested_schema=None):
        return self.obj.__arrow_c_stream__()


class BadCapsules:
    def __arrow_c_array__(self, requested_schema=None):
        return ("not", "capsules")


def test_protocol_only_objects():
    a = make()
    codec = VectorCodec("float", DIM)
    assert codec.serialize_many(ArrayOnly(fsl(a))) == expected(a)
    assert codec.serialize_many(StreamOnly(pa.chunked_array([fsl(a[:2]), fsl(a[2:])]))) == expected(a)
    with pytest.raises(TypeError, match="PyCapsule"):
        codec.serialize_many(BadCapsules())


def test_release_callbacks_free_the_buffers():
    codec = VectorCodec("float", 64)
    gc.collect()
    baseline = pa.total_allocated_bytes()
    for _ in range(20):
        a = make(rows=500, dim=64)
        arr = fsl(a)
        ragged = pa.chunked_array([pa.array(list(a), pa.list_(pa.float32())),
                                   pa.array([[1.0]], pa.list_(pa.float32()))])
        codec.serialize_many(arr)
        codec.serialize_into(pa.chunked_array([arr, arr]))
        codec.to_json_many(arr.slice(0, 5))
        with pytest.raises(ValueError):
            codec.serialize_many(ragged)
        with pytest.raises(ValueError):
            codec.serialize_many(ArrayOnly(pa.array([None] * 3, pa.list_(pa.float32(), 64))))
        del a, arr, ragged
    gc.collect()
    assert pa.total_allocated_bytes() == baseline


def test_capsule_refcounts_and_memory():
    import sys

    from _leaks import growth
    a = make(rows=50, dim=16)
    arr = fsl(a)
    ca = pa.chunked_array([arr, arr])
    codec = VectorCodec("float", 16)
    bad = pa.array([[1.0] * 15], pa.list_(pa.float32()))

    def work():
        codec.serialize_many(arr); codec.serialize_many(ca); codec.serialize_into(arr)
        codec.to_json_many(ca)
        try:
            codec.serialize_many(bad)
        except ValueError:
            pass

    for _ in range(20):
        work()
    refs = [sys.getrefcount(x) for x in (arr, ca, bad)]
    python, heap = growth(work, calls=40, rounds=1)
    assert [sys.getrefcount(x) for x in (arr, ca, bad)] == refs
    assert python * 40 < 64 * 1024
    assert heap is None or heap * 40 < 64 * 1024


@given(st.lists(st.lists(st.floats(width=32), min_size=3, max_size=3), max_size=30),
       st.integers(0, 5), st.sampled_from(["fsl", "list", "large_list"]))
def test_hypothesis_arrow_matches_numpy(rows, start, kind):
    typ = {"fsl": pa.list_(pa.float32(), 3), "list": pa.list_(pa.float32()),
           "large_list": pa.large_list(pa.float32())}[kind]
    arr = pa.array(rows, typ).slice(min(start, len(rows)))
    want = np.array(rows[min(start, len(rows)):], "f4").reshape(-1, 3)
    assert VectorCodec("float", 3).serialize_many(arr) == expected(want)


class ObjectSeries:
    """What pandas makes of a vector column (to_pandas()): object dtype, one array per row,
    and an Arrow export that would convert every row (must not be used)."""

    dtype = np.dtype(object)

    def __init__(self, rows):
        self.rows = rows

    def __arrow_c_stream__(self, requested_schema=None):
        raise AssertionError("the Arrow export of an object column must not be used")

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)


def test_object_columns_are_iterated():
    a = make(rows=7)
    codec = VectorCodec("float", DIM)
    assert codec.serialize_many(ObjectSeries(list(a))) == expected(a)
    obj = np.empty(len(a), dtype=object)
    obj[:] = list(a)
    assert codec.serialize_many(obj) == expected(a)
    assert bytes(codec.serialize_into(obj)[0]) == b"".join(expected(a))
