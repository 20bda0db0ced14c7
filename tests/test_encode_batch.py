"""Arrow batches -> bulk insert commands (bulkwire._core.encode_batch).

The oracle is the bulk insert PUT command for the equivalent dict, built in Python from
``Table.to_pylist()`` with ``bulkwire.dumps`` (itself tested against the json round trip):
    {"Id":"<id>","Type":"PUT","Document":<dumps({**row, "@metadata": metadata})>}
"""
from __future__ import annotations

import datetime
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import bulkwire  # noqa: E402
from bulkwire import _core  # noqa: E402

META = {"@collection": "Embeddings", "Raven-Python-Type": "builtins.dict"}
META_JSON = bulkwire.dumps(META)


def command(doc_id: str, row: dict, float32: str = "widen") -> bytes:
    """What BulkInsert.store(row, id=doc_id) writes for a dict: the official client's PUT
    command, the document followed by its @metadata."""
    return (b'{"Id":' + json.dumps(doc_id, ensure_ascii=False).encode() + b',"Type":"PUT","Document":'
            + bulkwire.dumps({**row, "@metadata": META}, float32=float32) + b"}")


def oracle(table, id_column="id", fields=None, vector_column=None, prefix="", float32="widen",
           first=True) -> bytes:
    """The body fragment encode_batch must write for every row of `table`."""
    fields = [n for n in table.column_names if n != id_column] if fields is None else fields
    cmds = []
    for row in table.to_pylist():
        doc = {}
        for name in fields:
            value = row[name]
            if name == vector_column and value is not None:
                t = table.schema.field(name).type.value_type
                value = np.asarray(value, dtype=np.float32 if t == pa.float32() else np.float64)
            doc[name] = value
        cmds.append(command(f"{prefix}{row[id_column]}", doc, float32))
    body = b",".join(cmds)
    return body if first or not cmds else b"," + body


def encode(batch, id_column="id", fields=None, vector_column=None, prefix="", float32="widen",
           first=True, buffer_size=1 << 20, dim=-1) -> bytes:
    fields = [n for n in batch.schema.names if n != id_column] if fields is None else fields
    buffers = _core.encode_batch(batch, id_column, fields, vector_column=vector_column,
                                id_prefix=prefix, metadata=META_JSON, float32=float32,
                                first=first, buffer_size=buffer_size, dim=dim)
    return b"".join(buffers)


def vectors(rows, dim, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)


def fsl(arr):
    t = pa.float32() if arr.dtype == np.float32 else pa.float64()
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1), t), arr.shape[1])


def table_with(vec_array, rows):
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64) * 7 - 3), "emb": vec_array,
                     "name": [f"n{i}é" if i % 3 else None for i in range(rows)],
                     "score": np.linspace(-1, 1, rows), "ok": [i % 2 == 0 for i in range(rows)]})


# ------------------------------------------------------------------ encode_batch vs the oracle

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["fsl", "list", "large_list"])
@pytest.mark.parametrize("float32", ["widen", "shortest"])
def test_vector_layouts(dtype, layout, float32):
    v = vectors(40, 9, dtype)
    t = pa.float32() if dtype == np.float32 else pa.float64()
    arr = {"fsl": fsl(v), "list": pa.array(list(v), pa.list_(t)),
           "large_list": pa.array(list(v), pa.large_list(t))}[layout]
    table = table_with(arr, 40)
    batch = table.to_batches()[0]
    want = oracle(table, vector_column="emb", prefix="embeddings/", float32=float32)
    assert encode(batch, vector_column="emb", prefix="embeddings/", float32=float32) == want
    # sliced batches: offsets of the struct, the columns and the vector children
    for start, length in [(1, 10), (17, 23), (39, 1), (5, 0)]:
        part = batch.slice(start, length)
        assert encode(part, vector_column="emb", prefix="embeddings/", float32=float32) == \
            oracle(table.slice(start, length), vector_column="emb", prefix="embeddings/",
                   float32=float32)


def test_special_floats_and_ints():
    v = np.array([[0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3.4028235e38, 0.1]], np.float32)
    ints = {f"i{w}": pa.array([np.iinfo(f"int{w}").min], getattr(pa, f"int{w}")()) for w in (8, 16, 32, 64)}
    uints = {f"u{w}": pa.array([np.iinfo(f"uint{w}").max], getattr(pa, f"uint{w}")()) for w in (8, 16, 32, 64)}
    table = pa.table({"id": pa.array([2 ** 63 - 1], pa.int64()), "emb": fsl(v), **ints, **uints,
                      "f32": pa.array([0.1], pa.float32()), "f64": [float("nan")],
                      "nothing": pa.nulls(1)})
    for f32 in ("widen", "shortest"):
        assert encode(table.to_batches()[0], vector_column="emb", float32=f32) == \
            oracle(table, vector_column="emb", float32=f32)


def test_strings_escaping_and_ids():
    names = ["plain", 'q"uote\\back', "tab\tnl\n\x01\x7f", "é", "€", "😀 astral", "", "\u2028"]
    table = pa.table({"key": names, "s": pa.array(names, pa.large_string()),
                      "n": list(range(len(names)))})
    batch = table.to_batches()[0]
    with pytest.raises(ValueError, match=r"column 'key', row 6: id is empty"):
        encode(batch, id_column="key")
    assert encode(batch, id_column="key", prefix="docs/") == oracle(table, "key", prefix="docs/")
    large = table.cast(pa.schema([("key", pa.large_string()), ("s", pa.string()), ("n", pa.int64())]))
    assert encode(large.to_batches()[0], id_column="key", prefix="ü/") == oracle(large, "key", prefix="ü/")
    # all-empty and all-null string columns (buffers that may be absent)
    t3 = pa.table({"id": [1, 2], "e": ["", ""], "n": pa.array([None, None], pa.string()),
                   "z": pa.array([None, None], pa.int32())})
    assert encode(t3.to_batches()[0]) == oracle(t3)
    assert encode(t3.slice(2).to_batches()[0] if t3.slice(2).num_rows else
                  pa.RecordBatch.from_pylist([], schema=t3.schema)) == b""
    # unicode column names are escaped as json does
    t2 = pa.table({"id": [1], "ключ": ["v"]})
    assert encode(t2.to_batches()[0]) == oracle(t2)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "+05:30", "-08:00"])
def test_timestamps(unit, tz):
    base = [datetime.datetime(2024, 5, 1, 12, 30, 15, 123456), datetime.datetime(1969, 12, 31, 23, 59, 59, 999999),
            datetime.datetime(1900, 2, 28, 1, 2, 3), datetime.datetime(2000, 2, 29), None,
            datetime.datetime(1677, 9, 22) if unit == "ns" else datetime.datetime(1, 1, 2, 0, 0)]
    if tz is not None:
        base = [None if d is None else d.replace(tzinfo=datetime.timezone.utc) for d in base]
    arr = pa.array(base, pa.timestamp("us", tz="UTC" if tz else None)).cast(
        pa.timestamp(unit, tz=tz), safe=False)
    table = pa.table({"id": list(range(len(base))), "t": arr})
    # the dict the user would store holds what to_pylist gives: wall clock in the column's zone
    assert encode(table.to_batches()[0]) == oracle(table)


def test_datetime_max_and_range():
    t = pa.table({"id": [1, 2], "t": pa.array([datetime.datetime.max, datetime.datetime.min],
                                               pa.timestamp("us"))})
    assert encode(t.to_batches()[0]) == oracle(t)
    assert b'"9999-12-31T23:59:59.9999999"' in encode(t.to_batches()[0])
    bad = pa.table({"id": [1, 2], "t": pa.array([0, 253402300800], pa.timestamp("s"))})
    with pytest.raises(ValueError, match=r"column 't', row 1: timestamp 253402300800 is outside"):
        encode(bad.to_batches()[0])


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
@pytest.mark.parametrize("tz", [None, "-08:00", "+05:30"])
def test_int64_ends_are_refused_outside_the_years(unit, tz):
    """int64's own ends, in units where they lie far outside years 1..9999, are refused
    (read without overflow: the sanitizer build checks that)."""
    for value in (-2**63, -2**63 + 1, 2**63 - 1):
        t = pa.table({"id": [1], "t": pa.array([value], pa.timestamp(unit, tz=tz))})
        with pytest.raises(ValueError, match=rf"column 't', row 0: timestamp {value} is outside"):
            encode(t.to_batches()[0])


@pytest.mark.parametrize("tz,offset", [(None, None), ("-08:00", -8 * 60), ("+05:30", 5 * 60 + 30)])
def test_int64_ends_in_nanoseconds_are_dates(tz, offset):
    """In nanoseconds int64 spans 1677..2262: its ends are written as the datetime they are
    (floored to the microsecond, in the column's zone), computed here with datetime."""
    values = [-2**63, -2**63 + 1, 2**63 - 1]
    t = pa.table({"id": [1, 2, 3], "t": pa.array(values, pa.timestamp("ns", tz=tz))})
    epoch = datetime.datetime(1970, 1, 1)
    expected = []
    for i, value in enumerate(values, 1):
        moment = epoch + datetime.timedelta(microseconds=value // 1000)
        if offset is not None:
            zone = datetime.timezone(datetime.timedelta(minutes=offset))
            moment = moment.replace(tzinfo=datetime.timezone.utc).astimezone(zone)
        expected.append(command(str(i), {"t": moment}))
    assert encode(t.to_batches()[0]) == b",".join(expected)


def test_buffers_and_separators():
    table = table_with(fsl(vectors(50, 4)), 50)
    batch = table.to_batches()[0]
    buffers = _core.encode_batch(batch, "id", ["emb", "name"], vector_column="emb",
                                metadata=META_JSON, buffer_size=1000, first=True)
    assert len(buffers) > 5
    assert all(len(c) >= 1000 for c in buffers[:-1])
    assert b"".join(buffers) == oracle(table, fields=["emb", "name"], vector_column="emb")
    assert not buffers[0].startswith(b",") and all(c.startswith(b",") for c in buffers[1:])
    assert encode(batch, first=False, vector_column="emb") == \
        oracle(table, vector_column="emb", first=False)
    # a stream (a Table of several batches) is one body fragment
    two = pa.Table.from_batches([batch.slice(0, 20), batch.slice(20)])
    assert encode(two, vector_column="emb") == oracle(table, vector_column="emb")


@settings(max_examples=40)
@given(st.data())
def test_random_tables(data):
    n = data.draw(st.integers(0, 12))
    text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
    cols = {
        "id": pa.array(data.draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=n, max_size=n)),
                       pa.int64()),
        "s": pa.array(data.draw(st.lists(st.none() | text, min_size=n, max_size=n)), pa.string()),
        "f": pa.array(data.draw(st.lists(st.none() | st.floats(), min_size=n, max_size=n)), pa.float64()),
        "g": pa.array(data.draw(st.lists(st.none() | st.floats(width=32), min_size=n, max_size=n)),
                      pa.float32()),
        "b": pa.array(data.draw(st.lists(st.none() | st.booleans(), min_size=n, max_size=n)), pa.bool_()),
        "u": pa.array(data.draw(st.lists(st.none() | st.integers(0, 2 ** 32 - 1), min_size=n, max_size=n)),
                      pa.uint32()),
    }
    dim = data.draw(st.integers(0, 5))
    vec = data.draw(st.lists(st.lists(st.floats(width=32), min_size=dim, max_size=dim),
                             min_size=n, max_size=n))
    cols["v"] = pa.array(vec, pa.list_(pa.float32()))
    table = pa.table(cols)
    start = data.draw(st.integers(0, n))
    part = table.slice(start)
    f32 = data.draw(st.sampled_from(["widen", "shortest"]))
    batch = part.combine_chunks().to_batches()
    batch = batch[0] if batch else pa.RecordBatch.from_pylist([], schema=table.schema)
    assert encode(batch, vector_column="v", float32=f32, dim=dim) == \
        oracle(part, vector_column="v", float32=f32)


# ------------------------------------------------------------------ errors, before any byte

def test_row_errors_name_column_and_row():
    v = vectors(6, 3)
    rows = [list(r) for r in v]
    ragged = pa.array(rows[:4] + [rows[4][:2]] + rows[5:], pa.list_(pa.float32()))
    null_vec = pa.array(rows[:2] + [None] + rows[3:], pa.list_(pa.float32()))
    null_elem = pa.array(rows[:5] + [[1.0, None, 2.0]], pa.list_(pa.float32()))
    ids = pa.array(list(range(6)))
    cases = [
        (pa.table({"id": ids, "v": ragged}), r"column 'v', row 4: vector has 2 values, expected 3"),
        (pa.table({"id": ids, "v": null_vec}), r"column 'v', row 2: null vector"),
        (pa.table({"id": ids, "v": null_elem}), r"column 'v', row 5: null value at position 1"),
        (pa.table({"id": pa.array([1, None, 3, 4, 5, 6]), "v": fsl(v)}), r"column 'id', row 1: null id"),
        (pa.table({"id": ["a", "b|", "c", "d", "e", "f"], "v": fsl(v)}), r"column 'id', row 1: id ends with '\|'"),
    ]
    for table, message in cases:
        with pytest.raises(ValueError, match=message):
            _core.encode_batch(table, "id", ["v"], vector_column="v", dim=3)
    fsl_nulls = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), 3,
                                                  mask=pa.array([False, False, False, True, False, False]))
    with pytest.raises(ValueError, match=r"column 'v', row 7: null vector"):
        _core.encode_batch(pa.table({"id": ids, "v": fsl_nulls}), "id", ["v"], vector_column="v",
                           row_base=4)


def test_type_errors_name_the_column():
    ids = pa.array([1, 2])
    with pytest.raises(TypeError, match=r"column 'v' cannot be the vector column: expected an Arrow "
                                        r"fixed_size_list, list or large_list of float32/float64, "
                                        r"got string"):
        _core.encode_batch(pa.table({"id": ids, "v": ["a", "b"]}), "id", ["v"], vector_column="v")
    with pytest.raises(TypeError, match=r"column 'v' cannot be the vector column: expected Arrow list "
                                        r"values of float32 or float64, got list<int64>"):
        _core.encode_batch(pa.table({"id": ids, "v": [[1], [2]]}), "id", ["v"], vector_column="v")
    with pytest.raises(TypeError, match=r"column 'd' has Arrow type date32\[day\], "):
        _core.encode_batch(pa.table({"id": ids, "d": pa.array([1, 2], pa.date32())}), "id", ["d"])
    with pytest.raises(TypeError, match=r"column 'c' has Arrow type "
                                        r"dictionary<values=string, indices=int32>, dictionary-encoded"):
        _core.encode_batch(pa.table({"id": ids, "c": pa.array(["x", "y"]).dictionary_encode()}), "id", ["c"])
    with pytest.raises(TypeError, match=r"time zone 'Europe/Paris'"):
        _core.encode_batch(pa.table({"id": ids, "t": pa.array([1, 2], pa.timestamp("s", "Europe/Paris"))}),
                           "id", ["t"])
    with pytest.raises(TypeError, match=r"id column 'id' must hold integers or strings"):
        _core.encode_batch(pa.table({"id": [1.5, 2.5]}), "id", [])
    with pytest.raises(ValueError, match=r"column 'zz' is not in the batch"):
        _core.encode_batch(pa.table({"id": ids}), "id", ["zz"])
    with pytest.raises(TypeError, match="Arrow PyCapsule interface"):
        _core.encode_batch([1, 2], "id", [])
    with pytest.raises(ValueError, match="float32 must be"):
        _core.encode_batch(pa.table({"id": ids}), "id", [], float32="short")


# ------------------------------------------------------------------ against json and pyarrow

@given(st.data())
def test_documents_parse_back_to_the_rows(data):
    """json.loads of each command gives the row as pyarrow holds it (to_pylist) and as json
    reads json.dumps of it: the values, independently of bulkwire's own dumps."""
    n = data.draw(st.integers(0, 8))
    ids = data.draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=n, max_size=n, unique=True))
    cols = {
        "id": pa.array(ids, pa.int64()),
        "s": pa.array(data.draw(st.lists(st.none() | st.text(
            alphabet=st.characters(exclude_categories=["Cs"]), max_size=8), min_size=n, max_size=n)),
            pa.string()),
        "i": pa.array(data.draw(st.lists(st.none() | st.integers(-2 ** 63, 2 ** 63 - 1),
                                         min_size=n, max_size=n)), pa.int64()),
        "f": pa.array(data.draw(st.lists(st.none() | st.floats(allow_nan=False), min_size=n,
                                         max_size=n)), pa.float64()),
        "b": pa.array(data.draw(st.lists(st.none() | st.booleans(), min_size=n, max_size=n))),
    }
    table = pa.table(cols)
    body = b"".join(_core.encode_batch(table, "id", ["s", "i", "f", "b"], id_prefix="p/",
                                       metadata=META_JSON, first=True))
    commands = json.loads(b"[" + body + b"]")
    rows = table.to_pylist()
    assert len(commands) == len(rows)
    for cmd, row in zip(commands, rows):
        assert cmd["Id"] == f"p/{row['id']}" and cmd["Type"] == "PUT"
        want = {k: row[k] for k in ("s", "i", "f", "b")}
        assert cmd["Document"] == json.loads(json.dumps({**want, "@metadata": META}))


@pytest.mark.parametrize("column, words", [
    (pa.array([[1, 2, 3, 4]], pa.list_(pa.int32(), 4)), "fixed_size_list<int32, 4>"),
    (pa.array([1], pa.date32()), "date32[day]"),
    (pa.array([1], pa.date64()), "date64[ms]"),
    (pa.array([1], pa.time64("us")), "time64[us]"),
    (pa.array([1], pa.duration("ms")), "duration[ms]"),
    (pa.array([b"ab"], pa.binary(2)), "fixed_size_binary[2]"),
    (pa.array([b"ab"]), "binary"),
    (pa.array([b"ab"], pa.large_binary()), "large_binary"),
    (pa.array([1], pa.decimal128(5, 2)), "decimal(5,2)"),
    (pa.array([["a"]], pa.large_list(pa.string())), "large_list<string>"),
    (pa.array([{"x": 1}]), "struct"),
])
def test_a_column_type_error_names_the_arrow_type_in_words(column, words):
    table = pa.table({"id": pa.array([1] * len(column)), "x": column})
    with pytest.raises(TypeError) as caught:
        _core.encode_batch(table, "id", ["x"])
    assert f"column 'x' has Arrow type {words}, " in str(caught.value)
    assert "format" not in str(caught.value)
