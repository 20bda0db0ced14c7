"""The CQL statement layer without a server: Arrow columns as CQL values, EXECUTE bodies and
partition tokens (``_core.cql_execute_bodies``), Murmur3 (``_core.cql_murmur3_hash``,
``_core.cql_partition_token``) and the schema check (``_core.cql_check_schema``), each
against the scylla-driver: its type's ``serialize``, its ``ExecuteMessage`` encoding, its
``murmur3`` and ``Murmur3Token``."""
from __future__ import annotations

import array
import datetime
import io
import math
import struct
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("cassandra")
from cassandra import ConsistencyLevel, cqltypes, util  # noqa: E402
from cassandra.metadata import Murmur3Token  # noqa: E402
from cassandra.murmur3 import murmur3  # noqa: E402
from cassandra.protocol import ExecuteMessage  # noqa: E402

from bulkwire import _core  # noqa: E402
from bulkwire.errors import RowError, SchemaMismatchError  # noqa: E402

PV = 4
HSET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ Murmur3

@given(st.binary(min_size=0, max_size=200))
@HSET
def test_murmur3_hash_equals_the_drivers(key: bytes) -> None:
    assert _core.cql_murmur3_hash(key) == murmur3(key)


@given(st.binary(min_size=0, max_size=200))
@HSET
def test_partition_token_of_one_component_equals_murmur3token(key: bytes) -> None:
    assert _core.cql_partition_token([key]) == Murmur3Token.from_key(key).value


def driver_composite_key(parts: list[bytes]) -> bytes:
    """The driver's routing key of a partition key given as its components (a Statement's
    routing_key: each component as [short length][bytes][0] when there are several)."""
    from cassandra.query import SimpleStatement
    statement = SimpleStatement("")
    statement.routing_key = list(parts)
    return statement.routing_key


@given(st.lists(st.binary(min_size=0, max_size=100), min_size=2, max_size=5))
@HSET
def test_partition_token_of_a_composite_key_equals_the_drivers(parts: list[bytes]) -> None:
    key = driver_composite_key(parts)
    assert _core.cql_partition_token(parts) == Murmur3Token.from_key(key).value


def test_the_minimum_long_is_the_maximum_token() -> None:
    # the hash is checked against the driver's on keys of every tail length; the one key
    # whose hash is the minimum long is not known, so the mapping is read where it is applied:
    # a hash of INT64_MIN never reaches a token
    assert Murmur3Token.hash_fn(b"") == _core.cql_partition_token([b""])
    for n in range(0, 33):
        key = bytes(range(128, 128 + n))  # tail bytes >= 0x80: the signed-byte rule
        assert _core.cql_murmur3_hash(key) == murmur3(key)


def test_a_composite_component_past_65535_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="65535"):
        _core.cql_partition_token([b"a", b"x" * 65536])
    _core.cql_partition_token([b"x" * 65536])  # a single component has no short length


# ------------------------------------------------------------------ values and EXECUTE bodies

_driver_types = {
    "tinyint": cqltypes.ByteType, "smallint": cqltypes.ShortType, "int": cqltypes.Int32Type,
    "bigint": cqltypes.LongType, "float": cqltypes.FloatType, "double": cqltypes.DoubleType,
    "boolean": cqltypes.BooleanType, "text": cqltypes.UTF8Type, "ascii": cqltypes.AsciiType,
    "blob": cqltypes.BytesType, "timestamp": cqltypes.DateType, "date": cqltypes.SimpleDateType,
    "uuid": cqltypes.UUIDType, "timeuuid": cqltypes.TimeUUIDType,
}


def driver_serialize(cql: str, value):
    if value is None:
        return None
    if cql.startswith("vector<"):
        sub, dim = cql[len("vector<"):-1].split(",")
        t = cqltypes.lookup_casstype(
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal."
            f"{_driver_types[sub.strip()].__name__}, {int(dim)})")
        return t.serialize(value, PV)
    return _driver_types[cql].serialize(value, PV)


def python_value(arrow_type: pa.DataType, cql: str, value):
    """The Python value the driver is given for an Arrow value (to_pylist), in the form its
    serializer reads exactly: timestamps as integer milliseconds, dates as util.Date, uuids
    as uuid.UUID."""
    if value is None:
        return None
    if pa.types.is_timestamp(arrow_type):
        return value
    if cql == "date":
        return util.Date(value)
    if cql in ("uuid", "timeuuid"):
        return uuid.UUID(bytes=value)
    return value


def pylist(arr: pa.Array, cql: str) -> list:
    """The Arrow values as the Python values given to the driver."""
    t = arr.type
    if pa.types.is_timestamp(t):
        scale = {"s": 1000, "ms": 1}[t.unit]
        return [None if v is None else v * scale for v in arr.cast(pa.int64()).to_pylist()]
    if pa.types.is_date32(t):
        return [None if v is None else util.Date(v) for v in arr.cast(pa.int32()).to_pylist()]
    if pa.types.is_date64(t):
        return arr.cast(pa.int64()).to_pylist()
    return [python_value(t, cql, v) for v in arr.to_pylist()]


def driver_bodies(prepared_id: bytes, rows: list[list], consistency: int, **kw) -> list[bytes]:
    out = []
    for values in rows:
        f = io.BytesIO()
        ExecuteMessage(prepared_id, values, consistency, **kw).send_body(f, PV)
        out.append(f.getvalue())
    return out


def split(bodies: bytearray, ends: bytes) -> list[bytes]:
    cut = array.array("q", ends)
    start, out = 0, []
    for end in cut:
        out.append(bytes(bodies[start:end]))
        start = end
    assert start == len(bodies)
    return out


def check_columns(columns: dict[str, tuple[pa.Array, str]], *, offset: int = 0,
                  length: int | None = None, pk: tuple[int, ...] = (),
                  consistency: int = ConsistencyLevel.LOCAL_QUORUM,
                  prepared_id: bytes = b"\x9a\x01id") -> None:
    """The bodies and tokens of the batch (sliced at offset/length) against the driver's."""
    names = list(columns)
    batch = pa.record_batch({n: a for n, (a, _) in columns.items()})
    if length is not None:
        batch = batch.slice(offset, length)
    types = [columns[n][1] for n in names]
    bodies, ends, tokens = _core.cql_execute_bodies(batch, prepared_id, names, types, list(pk),
                                                    consistency)
    values = [pylist(batch.column(i), types[i]) for i in range(len(names))]
    serialized = [[driver_serialize(types[c], values[c][r]) for c in range(len(names))]
                  for r in range(batch.num_rows)]
    assert split(bodies, ends) == driver_bodies(prepared_id, serialized, consistency)
    if pk:
        want = [Murmur3Token.from_key(
            row[pk[0]] if len(pk) == 1 else driver_composite_key([row[k] for k in pk])).value
            for row in serialized]
        assert list(array.array("q", tokens)) == want
    else:
        assert tokens is None


def nullable(strategy):
    return st.one_of(st.none(), strategy)


INT_RANGES = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
ARROW_INTS = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


@st.composite
def int_column(draw):
    src = draw(st.sampled_from([8, 16, 32, 64]))
    cql = draw(st.sampled_from([c for c, bits in INT_RANGES.items() if bits >= src]))
    lo, hi = -(1 << (src - 1)), (1 << (src - 1)) - 1
    values = draw(st.lists(nullable(st.integers(lo, hi)), max_size=20))
    return pa.array(values, ARROW_INTS[src]), cql


@st.composite
def float_column(draw):
    wide = draw(st.booleans())
    if wide:
        values = draw(st.lists(nullable(st.floats(allow_nan=True)), max_size=20))
        return pa.array(values, pa.float64()), "double"
    values = draw(st.lists(nullable(st.floats(width=32, allow_nan=True)), max_size=20))
    return pa.array(values, pa.float32()), draw(st.sampled_from(["float", "double"]))


def text_column():
    return st.tuples(st.lists(nullable(st.text(max_size=30)), max_size=20),
                     st.sampled_from([pa.string(), pa.large_string()])).map(
        lambda x: (pa.array(x[0], x[1]), "text"))


def ascii_column():
    return st.tuples(st.lists(nullable(st.text(alphabet=st.characters(max_codepoint=127),
                                               max_size=30)), max_size=20),
                     st.sampled_from([pa.string(), pa.large_string()])).map(
        lambda x: (pa.array(x[0], x[1]), "ascii"))


def blob_column():
    return st.tuples(st.lists(nullable(st.binary(max_size=40)), max_size=20),
                     st.sampled_from([pa.binary(), pa.large_binary()])).map(
        lambda x: (pa.array(x[0], x[1]), "blob"))


def uuid_column():
    return st.tuples(st.lists(nullable(st.binary(min_size=16, max_size=16)), max_size=20),
                     st.sampled_from(["uuid", "timeuuid"])).map(
        lambda x: (pa.array(x[0], pa.binary(16)), x[1]))


def bool_column():
    return st.lists(nullable(st.booleans()), max_size=20).map(
        lambda v: (pa.array(v, pa.bool_()), "boolean"))


@st.composite
def timestamp_column(draw):
    unit = draw(st.sampled_from(["s", "ms"]))
    bound = (1 << 63) // 1000 - 1 if unit == "s" else (1 << 63) - 1
    values = draw(st.lists(nullable(st.integers(-bound, bound)), max_size=20))
    tz = draw(st.sampled_from([None, "UTC", "Europe/Paris"]))
    return pa.array(values, pa.int64()).cast(pa.timestamp(unit, tz)), "timestamp"


def date_column():
    return st.lists(nullable(st.integers(-(1 << 31), (1 << 31) - 1)), max_size=20).map(
        lambda v: (pa.array(v, pa.int32()).cast(pa.date32()), "date"))


VECTOR_INTS = {"tinyint": (pa.int8(), 8), "smallint": (pa.int16(), 16), "int": (pa.int32(), 32),
               "bigint": (pa.int64(), 64)}


@st.composite
def vector_column(draw):
    dim = draw(st.integers(1, 6))
    if draw(st.booleans()):
        sub = draw(st.sampled_from(sorted(VECTOR_INTS)))
        vt, bits = VECTOR_INTS[sub]
        element = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        rows = draw(st.lists(nullable(st.lists(element, min_size=dim, max_size=dim)),
                             max_size=12))
        kind = draw(st.sampled_from(["fixed", "list", "large"]))
        t = {"fixed": pa.list_(vt, dim), "list": pa.list_(vt), "large": pa.large_list(vt)}[kind]
        return pa.array(rows, t), f"vector<{sub}, {dim}>"
    wide_values = draw(st.booleans())
    cql_sub = "double" if wide_values else draw(st.sampled_from(["float", "double"]))
    vt = pa.float64() if wide_values else pa.float32()
    width = 64 if wide_values else 32
    rows = draw(st.lists(nullable(st.lists(st.floats(width=width, allow_nan=False),
                                           min_size=dim, max_size=dim)), max_size=12))
    kind = draw(st.sampled_from(["fixed", "list", "large"]))
    t = {"fixed": pa.list_(vt, dim), "list": pa.list_(vt), "large": pa.large_list(vt)}[kind]
    return pa.array(rows, t), f"vector<{cql_sub}, {dim}>"


ANY_COLUMN = st.one_of(int_column(), float_column(), text_column(), ascii_column(),
                       blob_column(), uuid_column(), bool_column(), timestamp_column(),
                       date_column(), vector_column())


@given(st.lists(ANY_COLUMN, min_size=1, max_size=5), st.data())
@HSET
def test_execute_bodies_equal_the_drivers(cols, data) -> None:
    n = min(len(a) for a, _ in cols)
    columns = {f"c{i}": (a.slice(0, n), cql) for i, (a, cql) in enumerate(cols)}
    offset = data.draw(st.integers(0, n))
    length = data.draw(st.integers(0, n - offset))
    consistency = data.draw(st.sampled_from([ConsistencyLevel.ONE, ConsistencyLevel.QUORUM,
                                             ConsistencyLevel.LOCAL_ONE]))
    check_columns(columns, offset=offset, length=length, consistency=consistency)


@given(st.lists(st.one_of(int_column(), text_column(), blob_column(), uuid_column()),
                min_size=1, max_size=3), st.data())
@HSET
def test_tokens_equal_the_drivers(cols, data) -> None:
    n = min(len(a) for a, _ in cols)
    # partition key values are never null: replace the nulls with the column's first value
    columns = {}
    for i, (a, cql) in enumerate(cols):
        a = a.slice(0, n)
        if a.null_count:
            a = a.fill_null(a.drop_null()[0] if len(a.drop_null()) else
                            pa.scalar(b"\x00" * 16 if cql in ("uuid", "timeuuid") else
                                      (0 if pa.types.is_integer(a.type) else ""), a.type))
        columns[f"k{i}"] = (a, cql)
    pk = tuple(data.draw(st.permutations(range(len(cols)))))
    check_columns(columns, pk=pk)


def test_array_offsets_inside_columns_are_read() -> None:
    ints = pa.array([1, None, 3, 4, 5], pa.int32()).slice(2)
    text = pa.array(["a", "bb", None, "dddd", "e"]).slice(2)
    vec = pa.array([[1.0, 2.0], None, [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]],
                   pa.list_(pa.float32(), 2)).slice(2)
    check_columns({"i": (ints, "int"), "t": (text, "text"), "v": (vec, "vector<float, 2>")})


def test_float32_signaling_nan_is_written_as_the_driver_writes_it() -> None:
    snan = struct.unpack("<f", struct.pack("<I", 0x7f800001))[0]
    arr = pa.array(memoryview(struct.pack("<I", 0x7f800001)).cast("f").tolist(), pa.float32())
    assert math.isnan(snan)
    check_columns({"f": (arr, "float")})


def test_a_stream_of_batches_numbers_rows_across_batches() -> None:
    table = pa.Table.from_batches([pa.record_batch({"a": pa.array(["x", "y"])}),
                                   pa.record_batch({"a": pa.array(["z", "é"])})])
    with pytest.raises(RowError) as info:
        _core.cql_execute_bodies(table, b"id", ["a"], ["ascii"], [], 1)
    assert (info.value.column, info.value.row) == ("a", 3)
    assert "not ASCII" in str(info.value)


def test_row_errors_name_the_row_and_column() -> None:
    batch = pa.record_batch({"k": pa.array([1, None], pa.int32())})
    with pytest.raises(RowError, match="partition key"):
        _core.cql_execute_bodies(batch, b"id", ["k"], ["int"], [0], 1, first_row=10)
    vec = pa.record_batch({"v": pa.array([[1.0], [1.0, 2.0]], pa.list_(pa.float32()))})
    with pytest.raises(RowError) as info:
        _core.cql_execute_bodies(vec, b"id", ["v"], ["vector<float, 1>"], [], 1)
    assert (info.value.column, info.value.row) == ("v", 1)
    holed = pa.record_batch({"v": pa.array([[1.0, None]], pa.list_(pa.float32(), 2))})
    with pytest.raises(RowError, match="null value"):
        _core.cql_execute_bodies(holed, b"id", ["v"], ["vector<float, 2>"], [], 1)
    big = pa.record_batch({"t": pa.array([(1 << 62)], pa.int64()).cast(pa.timestamp("s"))})
    with pytest.raises(RowError, match="out of the range"):
        _core.cql_execute_bodies(big, b"id", ["t"], ["timestamp"], [], 1)


def test_serial_consistency_and_timestamp_equal_the_drivers() -> None:
    batch = pa.record_batch({"i": pa.array([7], pa.int64())})
    bodies, ends, _ = _core.cql_execute_bodies(batch, b"p", ["i"], ["bigint"], [], 1,
                                               serial_consistency=ConsistencyLevel.SERIAL,
                                               timestamp=1234567)
    want = driver_bodies(b"p", [[cqltypes.LongType.serialize(7, PV)]], 1,
                         serial_consistency_level=ConsistencyLevel.SERIAL, timestamp=1234567)
    assert split(bodies, ends) == want


# ------------------------------------------------------------------ the schema check

ACCEPTED = [
    (pa.int8(), ["tinyint", "smallint", "int", "bigint"]),
    (pa.int16(), ["smallint", "int", "bigint"]),
    (pa.int32(), ["int", "bigint"]),
    (pa.int64(), ["bigint"]),
    (pa.float32(), ["float", "double"]),
    (pa.float64(), ["double"]),
    (pa.bool_(), ["boolean"]),
    (pa.string(), ["text", "varchar", "ascii"]),
    (pa.large_string(), ["text", "varchar", "ascii"]),
    (pa.binary(), ["blob"]),
    (pa.large_binary(), ["blob"]),
    (pa.binary(16), ["uuid", "timeuuid", "blob"]),
    (pa.timestamp("ms"), ["timestamp"]),
    (pa.timestamp("s", "UTC"), ["timestamp"]),
    (pa.date64(), ["timestamp"]),
    (pa.date32(), ["date"]),
    (pa.list_(pa.float32(), 3), ["vector<float, 3>", "vector<double, 3>"]),
    (pa.list_(pa.float64(), 3), ["vector<double, 3>"]),
    # a variable-size list binds to any dimension: each row's length is checked as it is read
    (pa.list_(pa.float32()), ["vector<float, 3>", "vector<double, 3>", "vector<float, 4>"]),
    (pa.large_list(pa.float64()), ["vector<double, 3>"]),
    (pa.list_(pa.int32(), 3), ["vector<int, 3>"]),
    (pa.list_(pa.int8(), 3), ["vector<tinyint, 3>"]),
    (pa.large_list(pa.int64()), ["vector<bigint, 3>"]),
]
CQL_TYPES = ["tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "text",
             "varchar", "ascii", "blob", "uuid", "timeuuid", "timestamp", "date", "time",
             "varint", "decimal", "inet", "duration", "counter", "vector<float, 3>",
             "vector<double, 3>", "vector<int, 3>", "vector<float, 4>", "vector<tinyint, 3>",
             "vector<bigint, 3>", "vector<boolean, 3>", "vector<text, 3>"]
ARROW_TYPES = [a for a, _ in ACCEPTED] + [
    pa.uint8(), pa.uint32(), pa.uint64(), pa.float16(), pa.timestamp("us"),
    pa.timestamp("ns", "UTC"), pa.time64("us"), pa.decimal128(10, 2), pa.null(),
    pa.list_(pa.int16(), 3), pa.struct([("a", pa.int32())]), pa.binary(8),
    pa.dictionary(pa.int32(), pa.string()),
]


def accepted(arrow: pa.DataType, cql: str) -> bool:
    return any(a == arrow and cql in cqls for a, cqls in ACCEPTED)


@pytest.mark.parametrize("arrow", ARROW_TYPES, ids=str)
def test_schema_check_accepts_exactly_the_listed_pairs(arrow: pa.DataType) -> None:
    schema = pa.schema([("col", arrow)])
    for cql in CQL_TYPES:
        if accepted(arrow, cql):
            assert _core.cql_check_schema(schema, ["col"], [cql]) is None
        else:
            with pytest.raises(SchemaMismatchError) as info:
                _core.cql_check_schema(schema, ["col"], [cql])
            e = info.value
            assert (e.column, e.cql_type) == ("col", _core.cql_type_text(cql))
            assert "col" in str(e) and e.cql_type in str(e) and e.arrow_type in str(e)
            # the Arrow type in words, never a format code
            assert ":" not in e.arrow_type and "+" not in e.arrow_type, e.arrow_type


def test_schema_mismatch_names_the_types_in_words() -> None:
    schema = pa.schema([("emb", pa.list_(pa.float32(), 4)), ("n", pa.int64())])
    with pytest.raises(SchemaMismatchError) as info:
        _core.cql_check_schema(schema, ["emb"], ["vector<float, 3>"])
    assert str(info.value) == ("column 'emb': Arrow fixed_size_list<float32, 4> cannot be bound "
                               "to CQL vector<float, 3>: the dimensions differ")
    with pytest.raises(SchemaMismatchError) as info:
        _core.cql_check_schema(schema, ["n"], ["int"])
    assert info.value.arrow_type == "int64" and info.value.cql_type == "int"
    with pytest.raises(SchemaMismatchError, match="'missing'.*not a column"):
        _core.cql_check_schema(schema, ["missing"], ["int"])


def test_the_schema_is_checked_before_any_row() -> None:
    batch = pa.record_batch({"a": pa.array([1], pa.int64()), "b": pa.array([1], pa.int64())})
    with pytest.raises(SchemaMismatchError, match="'b'"):
        _core.cql_execute_bodies(batch, b"id", ["a", "b"], ["bigint", "int"], [0], 1)


@pytest.mark.parametrize("text,canonical", [
    ("int", "int"), (" INT ", "int"), ("varchar", "text"), ("vector<float,3>", "vector<float, 3>"),
    ("VECTOR< double , 12 >", "vector<double, 12>"),
    ("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 5)",
     "vector<float, 5>"),
])
def test_cql_type_text(text: str, canonical: str) -> None:
    assert _core.cql_type_text(text) == canonical


@pytest.mark.parametrize("text", ["", "vector<float>", "vector<float, 0>", "vector<nope, 3>",
                                  "list<int>", "vector<float, 99999999999>", "int2"])
def test_unknown_cql_type_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="unsupported CQL type"):
        _core.cql_type_text(text)


def test_an_empty_batch_gives_no_bodies() -> None:
    batch = pa.record_batch({"k": pa.array([], pa.int32())})
    bodies, ends, tokens = _core.cql_execute_bodies(batch, b"id", ["k"], ["int"], [0], 1)
    assert (bytes(bodies), ends, tokens) == (b"", b"", b"")


def test_a_sliced_struct_starts_at_its_offset() -> None:
    # a sliced StructArray is exported with the struct's own offset and its children whole
    k = pa.array([1, 2, 3, 4], pa.int32())
    v = pa.array([[1.0], [2.0], None, [4.0]], pa.list_(pa.float32(), 1))
    sliced = pa.StructArray.from_arrays([k, v], names=["k", "v"]).slice(2)
    assert sliced.__arrow_c_array__ and sliced.offset == 2
    args = (b"id", ["k", "v"], ["int", "vector<float, 1>"], [0], 1)
    got = _core.cql_execute_bodies(sliced, *args)
    want = _core.cql_execute_bodies(pa.record_batch({"k": k.slice(2), "v": v.slice(2)}), *args)
    assert (bytes(got[0]), got[1], got[2]) == (bytes(want[0]), want[1], want[2])
    check_columns({"k": (k.slice(2), "int"), "v": (v.slice(2), "vector<float, 1>")}, pk=(0,))


def test_names_from_a_generator_are_held_while_rows_are_written() -> None:
    batch = pa.record_batch({"k": pa.array([None], pa.int32())})
    with pytest.raises(RowError) as info:
        _core.cql_execute_bodies(batch, b"id", (n for n in ["k"]), ["int"], [0], 1)
    assert info.value.column == "k"


def _arrow_structs():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "fuzz"))
    import arrow_structs
    return arrow_structs


def test_hand_made_buffers_of_exact_size_give_the_same_bodies() -> None:
    # every buffer its own allocation of exactly pyarrow's size: a read past one is seen by
    # AddressSanitizer in the sanitizer build
    A = _arrow_structs()
    batch = pa.record_batch({
        "k": pa.array([1, None, 3], pa.int32()), "s": pa.array(["a", "", None]),
        "u": pa.array([b"\x01" * 16, None, b"\x02" * 16], pa.binary(16)),
        "v": pa.array([[1.0, 2.0], None, [5.0, 6.0]], pa.list_(pa.float32())),
        "t": pa.array([1, 2, None], pa.int64()).cast(pa.timestamp("ms")),
        "d": pa.array([1, None, -3], pa.int32()).cast(pa.date32()),
    }).slice(1)
    args = (b"id", list(batch.schema.names),
            ["int", "text", "uuid", "vector<float, 2>", "timestamp", "date"], [], 1)
    want = _core.cql_execute_bodies(batch, *args)
    exported = A.Exported(A.from_pyarrow(batch))
    try:
        got = _core.cql_execute_bodies(exported, *args)
        assert exported.released == {"schema": 1, "array": 1}
    finally:
        exported.free()
    assert (bytes(got[0]), got[1]) == (bytes(want[0]), want[1])


def test_malformed_arrow_is_refused_and_released_once() -> None:
    A = _arrow_structs()
    child = A.Node(b"f", 4, [None, struct.pack("<4f", 1, 2, 3, 4)], name=b"item")
    column = A.Node(b"+l", 2, [None, struct.pack("<3i", 0, 2, 9)], [child], name=b"v")
    exported = A.Exported(A.Node(b"+s", 2, [None], [column]))
    try:
        with pytest.raises(ValueError, match="'v'.*past the 4 values"):
            _core.cql_execute_bodies(exported, b"id", ["v"], ["vector<float, 2>"], [], 1)
        assert exported.released == {"schema": 1, "array": 1}
    finally:
        exported.free()


def test_bad_bind_descriptions_are_refused_before_any_row() -> None:
    batch = pa.record_batch({f"c{i}": pa.array([i], pa.int32()) for i in range(70)})
    names = [f"c{i}" for i in range(70)]
    with pytest.raises(ValueError, match="pk_indexes has 65 items"):
        _core.cql_execute_bodies(batch, b"id", names, ["int"] * 70, list(range(65)), 1)
    with pytest.raises(ValueError, match=r"pk_indexes\[0\] = 70"):
        _core.cql_execute_bodies(batch, b"id", names, ["int"] * 70, [70], 1)
    with pytest.raises(ValueError, match="one type per name"):
        _core.cql_execute_bodies(batch, b"id", names, ["int"], [], 1)
    with pytest.raises(ValueError, match="unsupported CQL type 'list<int>'"):
        _core.cql_execute_bodies(batch, b"id", ["c0"], ["list<int>"], [], 1)
    with pytest.raises(ValueError, match="65535"):
        _core.cql_execute_bodies(batch, b"x" * 65536, ["c0"], ["int"], [], 1)
    # 64 key columns is the most, and their composite token is the driver's
    check_columns({n: (batch.column(n), "int") for n in names[:64]}, pk=tuple(range(64)))
