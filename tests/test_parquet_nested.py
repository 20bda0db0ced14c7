"""Nested Parquet schemas against ``take``, ``TableFile`` and ``load_parquet``: structs and
lists nested up to and past the depth pyarrow reads (100 schema levels), and random types
made of lists, fixed-size lists and structs of each other (lists of structs of lists), with
nulls, written every way the page reader distinguishes. Each gives pyarrow's rows, or a
clear error naming the file (a schema pyarrow refuses) or the column (a type a document
field cannot have); never a crash, a hang or other values."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

import bulkwire
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import PAGES, TableFile, take

ROWS = 40


def _nest(kind: str, depth: int, leaf: pa.Array) -> pa.Array:
    """``leaf`` wrapped `depth` times: in structs, in lists, or in both by turns."""
    array = leaf
    for level in range(depth):
        if kind == "struct" or (kind == "list-struct" and level % 2):
            array = pa.StructArray.from_arrays([array], names=[f"f{level}"])
        else:
            array = pa.ListArray.from_arrays(pa.array(np.arange(len(array) + 1, dtype=np.int32)),
                                             array)
    return array


def _pyarrow_reads(path: str):
    """pyarrow's reading of the whole file, or None when it refuses the file."""
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException):
        return None


def _loaded_ids(out) -> list:
    return [command["Document"]["id"] for command in json.loads(out.read_text())]


@pytest.mark.parametrize("kind, depth", [
    ("struct", 40), ("struct", 98), ("struct", 99), ("struct", 100), ("struct", 400),
    ("list", 20), ("list", 49), ("list", 50), ("list", 300),
    ("list-struct", 30), ("list-struct", 66), ("list-struct", 67), ("list-struct", 200),
])
def test_deep_nesting_reads_as_pyarrow_or_names_the_file(tmp_path, kind, depth):
    """Where pyarrow reads the file, take and TableFile give its rows (the deep column by row
    groups, the id by pages) and load_parquet loads the other columns, refusing the deep one
    as a field by name; where pyarrow refuses the schema, each raises MalformedFileError
    naming the file, as pyarrow's own error does not."""
    leaf = pa.array(np.arange(ROWS, dtype=np.float64))
    table = pa.table({"id": pa.array(np.arange(ROWS, dtype=np.int64)),
                      "deep": _nest(kind, depth, leaf)})
    path = str(tmp_path / "deep.parquet")
    pq.write_table(table, path, write_page_index=True)
    expected = _pyarrow_reads(path)
    rows = [7, 0, 7, ROWS - 1]
    out = tmp_path / "body.json"
    if expected is None:
        message = r"deep\.parquet' is malformed: .*nested"
        with pytest.raises(MalformedFileError, match=message) as info:
            take(path, rows)
        assert info.value.path == path
        with pytest.raises(MalformedFileError, match=message):
            TableFile(path)
        with pytest.raises(MalformedFileError, match=message):
            bulkwire.load_parquet(path, bulkwire.targets.request_file(out), columns=["id"])
        return
    assert expected.equals(table)
    assert take(path, rows).equals(table.take(rows))
    with TableFile(path) as f:
        assert f.paths["id"] == PAGES and f.paths["deep"] == "row groups (type not covered)"
        assert f.take(rows[::-1]).equals(table.take(rows[::-1]))
    # a nested column cannot be a document field: named by the type check, or (deeper than
    # the 64 levels the Arrow import takes) by the import
    refused = (ValueError, "column 'deep' > .*nested more than 64 levels deep") \
        if depth >= 64 else (TypeError, "column 'deep' has Arrow type")
    with pytest.raises(refused[0], match=refused[1]):
        bulkwire.load_parquet(path, bulkwire.targets.request_file(out))
    bulkwire.load_parquet(path, bulkwire.targets.request_file(out), columns=["id"])
    assert _loaded_ids(out) == table.column("id").to_pylist()
    bulkwire.load_parquet(path, bulkwire.targets.request_file(out), columns=["id"], take=rows)
    assert _loaded_ids(out) == table.column("id").take(rows).to_pylist()


SCALARS = [pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string()]

def _wrapped(inner):
    """A list, a fixed-size list or a struct of what `inner` draws."""
    return st.one_of(
        inner.map(pa.list_),
        inner.map(lambda t: pa.list_(t, 2)),
        st.tuples(inner, inner).map(lambda ts: pa.struct([("a", ts[0]), ("b", ts[1])])))


nested_types = _wrapped(st.recursive(st.sampled_from(SCALARS), _wrapped, max_leaves=4))


def _value(t: pa.DataType, rng: np.random.Generator):
    """A random value of type t, None about one time in seven."""
    if rng.random() < 0.15:
        return None
    if pa.types.is_struct(t):
        return {f.name: _value(f.type, rng) for f in t}
    if pa.types.is_fixed_size_list(t):
        return [_value(t.value_type, rng) for _ in range(t.list_size)]
    if pa.types.is_list(t):
        return [_value(t.value_type, rng) for _ in range(int(rng.integers(0, 4)))]
    if pa.types.is_string(t):
        return f"s{int(rng.integers(0, 30))}"
    if pa.types.is_floating(t):
        return float(np.float32(rng.standard_normal()))
    return int(rng.integers(-1000, 1000))


@settings(max_examples=60)
@given(t=nested_types, seed=st.integers(0, 2**32 - 1), index=st.booleans(),
       dictionary=st.booleans(), version=st.sampled_from(["1.0", "2.0"]),
       rows=st.lists(st.integers(0, 299), max_size=30))
def test_random_nested_types_read_as_pyarrow(tmp_path_factory, t, seed, index, dictionary,
                                             version, rows):
    """Lists, fixed-size lists and structs of each other (lists of structs of lists among
    them) with nulls at every level, beside a covered column: take gives Table.take's rows
    whatever the writer's options; load_parquet refuses the nested column by name."""
    rng = np.random.default_rng(seed)
    values = [_value(t, rng) for _ in range(300)]
    table = pa.table({"id": pa.array(np.arange(300, dtype=np.int64)),
                      "n": pa.array(values, type=t)})
    path = str(tmp_path_factory.mktemp("nested") / "n.parquet")
    pq.write_table(table, path, write_page_index=index, use_dictionary=dictionary,
                   data_page_version=version, data_page_size=256, row_group_size=100,
                   write_batch_size=32)
    assert pq.read_table(path).equals(table)
    assert take(path, rows).equals(table.take(pa.array(rows, type=pa.int64())))
    if not (pa.types.is_list(t) or pa.types.is_fixed_size_list(t)) or \
            t.value_type not in (pa.float32(), pa.float64()):
        with pytest.raises(TypeError, match="column 'n'"):
            bulkwire.load_parquet(path,
                                  bulkwire.targets.request_file(str(tmp_path_factory.mktemp("out") / "b.json")),
                                  columns=["n"])
