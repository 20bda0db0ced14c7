"""A null in a CQL column outside the primary key is sent unset (length -2), so that a load
writes no tombstones; ``nulls="null"`` (``--write-nulls``) sends it as a null (length -1),
as before; a null in a key column is never sent unset. The EXECUTE bodies equal the
scylla-driver's for the same values (its ``UNSET_VALUE``), against a fake node that keeps
what it was sent."""
from __future__ import annotations

import io
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("cassandra")
from cassandra import ConsistencyLevel, cqltypes  # noqa: E402
from cassandra.protocol import ExecuteMessage  # noqa: E402
from cassandra.query import UNSET_VALUE  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire import _core, targets  # noqa: E402
from bulkwire.errors import RowError  # noqa: E402
from cql_fake_node import VARCHAR  # noqa: E402
from cql_table_node import BIGINT, DOUBLE, INT, UNSET, TableNode  # noqa: E402

PV = 4
PREPARED_ID = b"\x8f\x11"  # the fake node's
LOCAL_ONE = ConsistencyLevel.LOCAL_ONE
SERIALIZE = {"bigint": cqltypes.LongType, "int": cqltypes.Int32Type,
             "text": cqltypes.UTF8Type, "double": cqltypes.DoubleType}


def driver_body(values: list, *, prepared_id: bytes = PREPARED_ID,
                consistency: int = LOCAL_ONE) -> bytes:
    """The EXECUTE body the driver writes for these serialized ``values``."""
    f = io.BytesIO()
    ExecuteMessage(prepared_id, values, consistency).send_body(f, PV)
    return f.getvalue()


def serialized(cql: str, value, null):
    return null if value is None else SERIALIZE[cql].serialize(value, PV)


TABLE = [("id", "partition_key", BIGINT), ("c", "clustering", INT), ("v", "regular", VARCHAR),
         ("d", "regular", DOUBLE)]
TYPES = ["bigint", "int", "text", "double"]


def table_data(ids, cs, vs, ds) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "c": pa.array(cs, pa.int32()),
                     "v": pa.array(vs, pa.string()), "d": pa.array(ds, pa.float64())})


rows_strategy = st.lists(st.tuples(st.integers(-2**63, 2**63 - 1),
                                   st.none() | st.integers(-2**31, 2**31 - 1),
                                   st.none() | st.text(max_size=5),
                                   st.none() | st.floats(allow_nan=False)),
                         min_size=1, max_size=12)


@given(rows=rows_strategy, nulls=st.sampled_from(["unset", "null"]))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_bodies_of_a_load_equal_the_drivers(rows, nulls) -> None:
    """Every EXECUTE a load sends equals the driver's: a regular column's null as
    UNSET_VALUE by default, as None with nulls="null"; a clustering column's null as None
    either way (the server refuses it: a key column is never left unset)."""
    data = table_data(*zip(*rows))
    with TableNode(TABLE) as node:
        bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", nulls=nulls))
        sent = sorted(node.bodies)
    regular = UNSET_VALUE if nulls == "unset" else None
    want = sorted(driver_body([serialized(t, value, regular if k >= 2 else None)
                               for k, (t, value) in enumerate(zip(TYPES, row))])
                  for row in rows)
    assert sent == want


def test_the_execute_body_of_an_unset_value_is_the_drivers() -> None:
    batch = pa.record_batch({"k": pa.array([1, 2], pa.int64()), "v": pa.array(["a", None]),
                             "w": pa.array([None, [1.0, 2.0]], pa.list_(pa.float32(), 2))})
    bodies, ends, _ = _core.cql_execute_bodies(
        batch, b"p", ["k", "v", "w"], ["bigint", "text", "vector<float, 2>"], [0], 1,
        unset=b"\x00\x01\x01")
    second = bytes(bodies[memoryview(ends).cast("q")[0]:])
    vector = cqltypes.lookup_casstype("org.apache.cassandra.db.marshal.VectorType("
                                      "org.apache.cassandra.db.marshal.FloatType, 2)")
    want = driver_body([cqltypes.LongType.serialize(2, PV), UNSET_VALUE,
                        vector.serialize([1.0, 2.0], PV)], prepared_id=b"p", consistency=1)
    assert second == want
    first = bytes(bodies[:memoryview(ends).cast("q")[0]])
    assert first == driver_body([cqltypes.LongType.serialize(1, PV), b"a", UNSET_VALUE],
                                prepared_id=b"p", consistency=1)


def test_unset_holds_one_byte_per_bound_column() -> None:
    batch = pa.record_batch({"k": pa.array([None], pa.int64())})
    for bad in (b"", b"\x01\x01"):
        with pytest.raises(ValueError, match="one per bound column"):
            _core.cql_execute_bodies(batch, b"p", ["k"], ["bigint"], [], 1, unset=bad)
    with pytest.raises(TypeError):
        _core.cql_execute_bodies(batch, b"p", ["k"], ["bigint"], [], 1, unset=[1])
    for flags, length in ((None, -1), (b"\x00", -1), (b"\x07", -2)):
        bodies, _, _ = _core.cql_execute_bodies(batch, b"p", ["k"], ["bigint"], [], 1,
                                                unset=flags)
        assert bodies[-4:] == length.to_bytes(4, "big", signed=True)


def test_a_null_partition_key_is_refused_whatever_nulls_says() -> None:
    data = table_data([1, None], [1, 2], ["a", "b"], [1.0, 2.0])
    for nulls in ("unset", "null"):
        with TableNode(TABLE) as node:
            with pytest.raises(RowError, match="partition key column cannot be null") as info:
                bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", nulls=nulls))
            assert info.value.column == "id" and info.value.row == 1


def test_a_table_of_key_columns_alone_sends_no_unset() -> None:
    data = pa.table({"id": pa.array([1], pa.int64()), "c": pa.array([None], pa.int32())})
    with TableNode(TABLE[:2]) as node:
        bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t"))
        assert node.rows == [[(1).to_bytes(8, "big"), None]]


@pytest.mark.parametrize("bad", ["NULL", "tombstone", None, 1])
def test_nulls_takes_unset_or_null(bad) -> None:
    with pytest.raises(ValueError, match="nulls must be one of 'unset', 'null'"):
        targets.cql("h", "ks", "t", nulls=bad)


def test_the_document_targets_refuse_nulls_naming_it(tmp_path) -> None:
    with pytest.raises(TypeError, match="nulls is not an option of the jsonl target"):
        targets.jsonl(str(tmp_path / "o.jsonl"), nulls="null")
    with pytest.raises(TypeError, match="nulls is not an option of the ravendb target"):
        targets.ravendb("http://127.0.0.1:1", "db", nulls="null")


def test_write_nulls_on_the_command_line(tmp_path) -> None:
    path = str(tmp_path / "x.parquet")
    pq.write_table(table_data([1], [2], [None], [None]), path)
    got = {}
    for flags in ([], ["--write-nulls"], ["--nulls", "null"]):
        with TableNode(TABLE) as node:
            done = subprocess.run([sys.executable, "-m", "bulkwire", "load", path, "--cql",
                                   node.address, "--keyspace", "ks", "--table", "t", "-q",
                                   *flags], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            got[" ".join(flags)] = node.rows[0][2:]
    assert got == {"": [UNSET, UNSET], "--write-nulls": [None, None],
                   "--nulls null": [None, None]}
