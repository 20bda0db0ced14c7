"""Columns loaded under another name (``columns={"emb": "vector"}``, ``--map``) and constant
columns (``constants=``, ``--set``), for every target: a CQL table (a fake node that keeps
what it was sent, the bytes compared with the scylla-driver's) and the document targets
(JSON Lines). The batch is renamed without a copy; the constants are made by pyarrow once;
a mapping the target cannot take fails before any row is sent, naming both names."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("cassandra")
from cassandra import cqltypes  # noqa: E402
from cassandra.query import UNSET_VALUE  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire import LoadOptions, targets  # noqa: E402
from bulkwire.errors import RowError  # noqa: E402
from bulkwire.load import mapping  # noqa: E402
from cql_fake_node import VARCHAR  # noqa: E402
from cql_table_node import BIGINT, BOOLEAN, DOUBLE, INT, TIMESTAMP, TableNode  # noqa: E402
from test_cql_unset import PV, driver_body  # noqa: E402

TABLE = [("pk", "partition_key", BIGINT), ("vector", "regular", DOUBLE),
         ("source", "regular", VARCHAR), ("n", "regular", INT)]


def data(rows: int = 3) -> pa.Table:
    return pa.table({"id": pa.array(range(rows), pa.int64()),
                     "emb": pa.array([float(i) / 2 for i in range(rows)], pa.float64())})


def test_a_mapping_loads_into_a_table_of_other_names() -> None:
    with TableNode(TABLE) as node:
        result = bulkwire.load_arrow(data(), targets.cql(node.address, "ks", "t"),
                                     columns={"emb": "vector", "id": "pk"},
                                     constants={"source": "export-2026-12", "n": "7"})
        assert result.rows == 3
        assert node.statements[0] == ('INSERT INTO "ks"."t" ("vector", "pk", "source", "n") '
                                      'VALUES (?, ?, ?, ?)')
        want = [driver_body([cqltypes.DoubleType.serialize(i / 2, PV),
                             cqltypes.LongType.serialize(i, PV), b"export-2026-12",
                             cqltypes.Int32Type.serialize(7, PV)]) for i in range(3)]
        assert sorted(node.bodies) == sorted(want)


@pytest.mark.parametrize("cql, text, want", [
    (INT, "-12", cqltypes.Int32Type.serialize(-12, PV)),
    (BIGINT, 2**40, cqltypes.LongType.serialize(2**40, PV)),
    (DOUBLE, "0.25", cqltypes.DoubleType.serialize(0.25, PV)),
    (DOUBLE, 3, cqltypes.DoubleType.serialize(3.0, PV)),
    (BOOLEAN, "true", b"\x01"),
    (BOOLEAN, False, b"\x00"),
    (TIMESTAMP, "2026-12-01T00:00:00", cqltypes.DateType.serialize(1796083200000, PV)),
    (VARCHAR, "a,b=c", b"a,b=c"),
])
def test_a_constant_is_converted_once_to_the_columns_type(cql, text, want) -> None:
    table = [("pk", "partition_key", BIGINT), ("c", "regular", cql)]
    with TableNode(table) as node:
        bulkwire.load_arrow(pa.table({"pk": pa.array([1, 2], pa.int64())}),
                            targets.cql(node.address, "ks", "t"), constants={"c": text})
        assert [row[1] for row in node.rows] == [want, want]


@pytest.mark.parametrize("cql, value, said", [
    (INT, "x", "constant column 'c': 'x' does not convert to int32"),
    (INT, 2**40, "constant column 'c': 1099511627776 does not convert to int32"),
    (INT, "2147483648", "does not convert to int32"),
    (BOOLEAN, "maybe", "constant column 'c': 'maybe' does not convert to bool"),
    (BIGINT, 1.5, "constant column 'c': 1.5 does not convert to int64"),
])
def test_a_constant_that_does_not_fit_is_named_before_any_row(cql, value, said) -> None:
    table = [("pk", "partition_key", BIGINT), ("c", "regular", cql)]
    with TableNode(table) as node:
        with pytest.raises(ValueError, match=said):
            bulkwire.load_arrow(pa.table({"pk": pa.array([1], pa.int64())}),
                                targets.cql(node.address, "ks", "t"), constants={"c": value})
        assert node.executes == 0


@pytest.mark.parametrize("columns, constants, said", [
    ({"emb": "vector", "id": "pk"}, {"nope": 1}, "constant column 'nope' is not a column of ks.t"),
    ({"emb": "vectr", "id": "pk"}, None, r"'vectr'.* \('emb' is mapped to 'vectr'\)"),
    ({"embedding": "vector", "id": "pk"}, None,
     r"column 'embedding' \(mapped to 'vector'\) is not a column of"),
    ({"emb": "vector", "id": "pk"}, {"pk": 1}, "constant column 'pk' is also a column"),
])
def test_what_the_table_cannot_take_fails_before_any_row(columns, constants, said) -> None:
    """A constant the table lacks, a mapped name the table lacks (both names said), a
    mapped column the data lacks, a constant named as a loaded column: refused before any
    row is sent."""
    with TableNode(TABLE) as node:
        with pytest.raises(ValueError, match=said):
            bulkwire.load_arrow(data(), targets.cql(node.address, "ks", "t"),
                                columns=columns, constants=constants)
        assert node.executes == 0


def test_a_mapping_onto_a_key_column_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'id' and 'emb' are both mapped to 'pk'"):
        LoadOptions(columns={"id": "pk", "emb": "pk"})
    with pytest.raises(ValueError, match="both mapped to 'pk'"):
        LoadOptions(columns=(("id", "pk"), ("emb", "pk")))


def test_a_bad_row_is_named_by_its_source_column() -> None:
    bad = pa.table({"id": pa.array([1, None], pa.int64()), "emb": [0.5, 1.0]})
    with TableNode(TABLE) as node:
        with pytest.raises(RowError) as info:
            bulkwire.load_arrow(bad, targets.cql(node.address, "ks", "t"),
                                columns={"emb": "vector", "id": "pk"})
    assert (info.value.column, info.value.row) == ("id", 1)
    assert "written as 'pk'" in str(info.value)


def test_a_null_in_a_mapped_column_is_left_unset() -> None:
    nulls = pa.table({"id": pa.array([1], pa.int64()), "emb": pa.array([None], pa.float64())})
    with TableNode(TABLE) as node:
        bulkwire.load_arrow(nulls, targets.cql(node.address, "ks", "t"),
                            columns={"emb": "vector", "id": "pk"})
        assert node.bodies == [driver_body([UNSET_VALUE, cqltypes.LongType.serialize(1, PV)])]


# ------------------------------------------------------------------ the pipeline's part


def test_the_batch_is_renamed_without_a_copy() -> None:
    schema = data().schema
    options = LoadOptions(columns={"emb": "vector", "id": "pk"}, constants={"s": "x"})
    seen, given, constants = mapping.mapped(schema, options, None, "src")
    target = targets.jsonl("unused.jsonl", id_column="pk")
    plan = target.plan(seen, "src", given)
    encoder = mapping.wrapped(target.encoder(seen, plan, given), options, constants)
    batch = data(100).to_batches()[0]
    renamed = encoder.batch(batch)
    assert renamed.schema.names == ["pk", "vector", "s"]  # the order the target's plan reads
    for name, source in (("vector", "emb"), ("pk", "id")):
        assert (renamed.column(name).buffers()[1].address
                == batch.column(source).buffers()[1].address)
    # the constant's array is made once and sliced: a shorter batch shares its buffers
    shorter = encoder.batch(batch.slice(0, 10)).column("s")
    assert shorter.buffers()[1].address == renamed.column("s").buffers()[1].address
    assert shorter.to_pylist() == ["x"] * 10
    assert encoder.batch(data(300).to_batches()[0]).column("s").to_pylist() == ["x"] * 300
    assert encoder.plan.read_columns == ["id", "emb"]
    again = pickle.loads(pickle.dumps(encoder))
    assert again.batch(batch).equals(renamed)


def test_no_mapping_leaves_the_encoder_as_it_is() -> None:
    assert not mapping.active(LoadOptions(columns={"a": "a", "b": "b"}))
    assert LoadOptions(columns={"a": "a", "b": "b"}).columns == ("a", "b")
    assert mapping.active(LoadOptions(constants={"a": 1}))


def test_the_options_are_judged() -> None:
    options = LoadOptions(columns={"emb": "vector"}, constants={"s": "x", "n": 2})
    assert options.columns == (("emb", "vector"),) and options.source_columns == ("emb",)
    assert options.constants == (("s", "x"), ("n", 2))
    assert hash(options) == hash(LoadOptions(columns=[("emb", "vector")],
                                             constants=(("s", "x"), ("n", 2))))
    for bad, error in (({"a": ""}, TypeError), ({"": "a"}, TypeError), ({}, ValueError)):
        with pytest.raises(error):
            LoadOptions(columns=bad)
    for bad in ({"a": None}, {"a": [1]}, {"": 1}, "a=b"):
        with pytest.raises(TypeError):
            LoadOptions(constants=bad)


names = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)


@given(mapped=st.dictionaries(names, names, min_size=1, max_size=4).filter(
           lambda d: len(set(d.values())) == len(d)),
       constant=st.one_of(st.text(max_size=4), st.integers(-10, 10), st.booleans()),
       rows=st.integers(0, 5))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_a_document_holds_the_mapped_names_and_the_constants(tmp_path_factory, mapped,
                                                           constant, rows) -> None:
    """Into JSON Lines: each document's fields are the mapped names (the id column, which a
    document does not hold as a field, left out of the data) with the source's values, and
    the constant."""
    columns = {source: pa.array([f"{source}{r}" for r in range(rows)], pa.string())
               for source in mapped}
    table = pa.table({"id": pa.array(range(rows), pa.int64()), **columns})
    taken = set(mapped.values()) | {"id"}
    constant_name = next(n for n in ("k", "kk", "kkk", "kkkk", "kkkkk") if n not in taken)
    out = str(tmp_path_factory.mktemp("m") / "o.jsonl")
    bulkwire.load_arrow(table, targets.jsonl(out), columns=mapped,
                        constants={constant_name: constant})
    with open(out) as f:
        documents = [json.loads(line) for line in f]
    assert len(documents) == rows
    for r, document in enumerate(documents):
        document.pop("@metadata")
        want = {to: f"{source}{r}" for source, to in mapped.items() if to != "id"}
        assert document == {**want, constant_name: constant}


def test_the_command_line_maps_and_sets(tmp_path) -> None:
    path = str(tmp_path / "x.parquet")
    pq.write_table(data(2), path)
    with TableNode(TABLE) as node:
        done = subprocess.run([sys.executable, "-m", "bulkwire", "load", path, "--cql",
                               node.address, "--keyspace", "ks", "--table", "t", "-q",
                               "--map", "emb=vector", "--map", "id=pk", "--set",
                               "source=export-2026-12", "--set", "n=5"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert node.statements[0] == ('INSERT INTO "ks"."t" ("vector", "pk", "source", "n") '
                                      'VALUES (?, ?, ?, ?)')
        assert sorted(row[2:] for row in node.rows) == [
            [b"export-2026-12", cqltypes.Int32Type.serialize(5, PV)]] * 2
        for flags, said in ((["--map", "emb"], "'emb' is not SOURCE=TARGET"),
                            (["--set", "novalue"], "'novalue' is not NAME=VALUE"),
                            (["--map", "emb=vector,id=vector"], "both mapped to 'vector'")):
            done = subprocess.run([sys.executable, "-m", "bulkwire", "load", path, "--cql",
                                   node.address, "--keyspace", "ks", "--table", "t", "-q",
                                   *flags], capture_output=True, text=True, timeout=120)
            assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_mapping_with_a_per_row_ttl_and_worker_processes(tmp_path) -> None:
    """The TTL column (not mapped) is read under its own name beside the mapped columns;
    worker processes receive the wrapped encoder and write the same rows."""
    path = str(tmp_path / "x.parquet")
    rows = 40
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()),
                             "emb": pa.array([i / 4 for i in range(rows)], pa.float64()),
                             "ttl": pa.array([i if i % 3 else None for i in range(rows)],
                                             pa.int64())}), path, row_group_size=10)
    with TableNode(TABLE) as node:
        result = bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t",
                                                         ttl_column="ttl"),
                                       columns={"emb": "vector", "id": "pk"},
                                       constants={"source": "s"}, workers=2)
        assert result.rows == rows and result.workers == 2
        assert set(node.statements) == {'INSERT INTO "ks"."t" ("vector", "pk", "source") '
                                        'VALUES (?, ?, ?) USING TTL ?'}
        want = sorted(driver_body([cqltypes.DoubleType.serialize(i / 4, PV),
                                   cqltypes.LongType.serialize(i, PV), b"s",
                                   cqltypes.Int32Type.serialize(i, PV) if i % 3
                                   else UNSET_VALUE]) for i in range(rows))
        assert sorted(node.bodies) == want
