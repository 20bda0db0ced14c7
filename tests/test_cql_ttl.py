"""TTL and write time of a CQL load: ``ttl=`` and ``timestamp=`` for every row (``USING TTL
n AND TIMESTAMP n`` in the prepared INSERT), ``ttl_column=`` and ``timestamp_column=`` for
each row's own (``USING TTL ? AND TIMESTAMP ?``, a null sent unset: the table's default).
The EXECUTE bodies equal the scylla-driver's for the same statement and values, against a
fake node that prepares the markers as Cassandra does; every value out of range is refused,
naming the option or the row."""
from __future__ import annotations

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
from bulkwire import targets  # noqa: E402
from bulkwire.errors import RowError  # noqa: E402
from bulkwire.load.cql_target import MAX_TTL  # noqa: E402
from cql_fake_node import VARCHAR  # noqa: E402
from cql_table_node import BIGINT, UNSET, TableNode  # noqa: E402
from test_cql_unset import PV, driver_body  # noqa: E402

TABLE = [("id", "partition_key", BIGINT), ("v", "regular", VARCHAR)]
INSERT = 'INSERT INTO "ks"."t" ("id", "v") VALUES (?, ?)'


def load(data, **options):
    """Loads ``data`` into a fresh fake node with the cql target's ``options``; the node."""
    with TableNode(TABLE) as node:
        bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", **options))
    return node


def bigint(value: int) -> bytes:
    return cqltypes.LongType.serialize(value, PV)


@given(rows=st.lists(st.tuples(st.integers(-2**63, 2**63 - 1),
                               st.none() | st.integers(0, MAX_TTL),
                               st.none() | st.integers(-2**63, 2**63 - 1)),
                     min_size=1, max_size=10),
       ttl_type=st.sampled_from([pa.int32(), pa.int64(), pa.uint32()]))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_per_row_ttl_and_write_time_equal_the_drivers(rows, ttl_type) -> None:
    """USING TTL ? AND TIMESTAMP ?: each row's TTL (an int) and write time (a bigint) bound
    after its columns, a null sent as the driver's UNSET_VALUE (the table's default)."""
    ids, ttls, stamps = zip(*rows)
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": ["x"] * len(ids),
                     "ttl": pa.array(ttls, ttl_type), "ts": pa.array(stamps, pa.int64())})
    node = load(data, ttl_column="ttl", timestamp_column="ts")
    assert node.statements[0] == INSERT + " USING TTL ? AND TIMESTAMP ?"
    want = [driver_body([bigint(i), b"x",
                         UNSET_VALUE if t is None else cqltypes.Int32Type.serialize(t, PV),
                         UNSET_VALUE if s is None else bigint(s)]) for i, t, s in rows]
    assert sorted(node.bodies) == sorted(want)


@pytest.mark.parametrize("options, using", [
    ({"ttl": 60}, " USING TTL 60"),
    ({"timestamp": -5}, " USING TIMESTAMP -5"),
    ({"ttl": 0, "timestamp": 2**63 - 1}, f" USING TTL 0 AND TIMESTAMP {2**63 - 1}"),
    ({"ttl": MAX_TTL, "timestamp_column": "ts"}, f" USING TTL {MAX_TTL} AND TIMESTAMP ?"),
    ({"ttl_column": "ts", "timestamp": 7}, " USING TTL ? AND TIMESTAMP 7"),
])
def test_the_statement_says_using(options, using) -> None:
    """The load's TTL and write time are the statement's (its rows' bodies those of an
    INSERT without them: the driver's for the same prepared statement)."""
    data = pa.table({"id": pa.array([3], pa.int64()), "v": ["x"], "ts": pa.array([9], pa.int32())})
    if "?" not in using:
        data = data.drop_columns(["ts"])
    node = load(data, **options)
    assert node.statements[0] == INSERT + using
    markers = [cqltypes.Int32Type.serialize(9, PV) if "ttl_column" in options else
               bigint(9)] if "?" in using else []
    assert node.bodies == [driver_body([bigint(3), b"x", *markers])]


def test_a_write_time_column_of_arrow_timestamps_is_sent_in_microseconds() -> None:
    for unit, scale in (("s", 1_000_000), ("ms", 1000), ("us", 1), ("ns", 1)):
        value = 1_767_225_600_123
        data = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"],
                         "at": pa.array([value, None], pa.int64())[:1].cast(pa.timestamp(unit))})
        node = load(data, timestamp_column="at")
        want = value * scale if unit != "ns" else value // 1000
        assert node.rows[0][2] == bigint(want), unit


def test_a_null_ttl_and_write_time_are_unset_even_with_nulls_written() -> None:
    data = pa.table({"id": pa.array([1], pa.int64()), "v": pa.array([None], pa.string()),
                     "ttl": pa.array([None], pa.int32()), "ts": pa.array([None], pa.int64())})
    node = load(data, ttl_column="ttl", timestamp_column="ts", nulls="null")
    assert node.rows == [[bigint(1), None, UNSET, UNSET]]


# ------------------------------------------------------------------ hostile values


@pytest.mark.parametrize("option, value", [
    ("ttl", -1), ("ttl", MAX_TTL + 1), ("ttl", True), ("ttl", 1.5), ("ttl", "60"),
    ("timestamp", 2**63), ("timestamp", -2**63 - 1), ("timestamp", False),
    ("timestamp", 1.0),
])
def test_the_load_options_are_judged_naming_them(option, value) -> None:
    with pytest.raises(ValueError, match=f"^{option} must be an int"):
        targets.cql("h", "ks", "t", **{option: value})


@pytest.mark.parametrize("options, said", [
    ({"ttl": 5, "ttl_column": "t"}, "ttl and ttl_column exclude each other"),
    ({"timestamp": 5, "timestamp_column": "t"}, "timestamp and timestamp_column exclude"),
    ({"ttl_column": "t", "timestamp_column": "t"}, "are both 't'"),
])
def test_exclusive_options(options, said) -> None:
    with pytest.raises(ValueError, match=said):
        targets.cql("h", "ks", "t", **options)


@pytest.mark.parametrize("bad", ["", 3])
def test_a_column_option_must_name_a_column(bad) -> None:
    with pytest.raises(TypeError, match="ttl_column must be a non-empty str"):
        targets.cql("h", "ks", "t", ttl_column=bad)


@pytest.mark.parametrize("column, option", [
    (pa.array(["60"]), "ttl_column"), (pa.array([1.5]), "ttl_column"),
    (pa.array([b"x"]), "timestamp_column"), (pa.array([1.0]), "timestamp_column"),
])
def test_a_per_row_column_of_the_wrong_type_fails_before_any_row(column, option) -> None:
    data = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"], "per_row": column})
    with TableNode(TABLE) as node:
        with pytest.raises(TypeError, match=f"{option} 'per_row' holds"):
            bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t",
                                                  **{option: "per_row"}))
        assert node.executes == 0


def test_a_per_row_column_the_data_lacks_is_named() -> None:
    data = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]})
    with TableNode(TABLE) as node:
        with pytest.raises(ValueError, match="ttl_column 'gone' is not a column of"):
            bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", ttl_column="gone"))
        assert node.executes == 0


@pytest.mark.parametrize("ttl", [-1, MAX_TTL + 1, -2**63, 2**63 - 1])
def test_a_ttl_out_of_range_names_the_row(ttl) -> None:
    data = pa.table({"id": pa.array(range(5), pa.int64()), "v": ["x"] * 5,
                     "ttl": pa.array([1, None, 3, ttl, 0], pa.int64())})
    with TableNode(TABLE) as node:
        with pytest.raises(RowError) as info:
            bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", ttl_column="ttl"))
        assert node.executes == 0
    error = info.value
    assert (error.column, error.row) == ("ttl", 3)
    assert f"a TTL of {ttl} s is out of 0..{MAX_TTL}" in str(error)


def test_a_write_time_out_of_range_names_the_row() -> None:
    data = pa.table({"id": pa.array(range(3), pa.int64()), "v": ["x"] * 3,
                     "ts": pa.array([1, 2**63, 3], pa.uint64())})
    with TableNode(TABLE) as node:
        with pytest.raises(RowError, match="out of the range of a signed 64-bit") as info:
            bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t",
                                                  timestamp_column="ts"))
    assert (info.value.column, info.value.row) == ("ts", 1)
    seconds = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"],
                        "at": pa.array([2**62], pa.int64()).cast(pa.timestamp("s"))})
    with TableNode(TABLE) as node:
        with pytest.raises(RowError, match="out of the range"):
            bulkwire.load_arrow(seconds, targets.cql(node.address, "ks", "t",
                                                     timestamp_column="at"))


def test_rows_are_numbered_across_batches() -> None:
    ttls = [5] * 10 + [-3]
    data = pa.table({"id": pa.array(range(11), pa.int64()), "v": ["x"] * 11,
                     "ttl": pa.array(ttls, pa.int32())})
    with TableNode(TABLE) as node:
        with pytest.raises(RowError) as info:
            bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t", ttl_column="ttl"),
                                batch_rows=4)
    assert info.value.row == 10


@pytest.mark.parametrize("option", ["ttl", "timestamp", "ttl_column", "timestamp_column"])
def test_the_document_targets_refuse_them_naming_them(tmp_path, option) -> None:
    value = "c" if option.endswith("column") else 5
    with pytest.raises(TypeError, match=f"{option} is not an option of the request_file"):
        targets.request_file(str(tmp_path / "x.bulk.json"), **{option: value})
    with pytest.raises(TypeError, match=f"{option} is not an option of the ravendb target"):
        targets.ravendb("http://127.0.0.1:1", "db", **{option: value})


def test_the_command_line_options(tmp_path) -> None:
    path = str(tmp_path / "x.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"],
                             "ttl": pa.array([30, None], pa.int32())}), path)
    base = [sys.executable, "-m", "bulkwire", "load", path, "--cql", None, "--keyspace", "ks",
            "--table", "t", "-q"]
    with TableNode(TABLE) as node:
        base[6] = node.address
        done = subprocess.run(base + ["--ttl-column", "ttl", "--timestamp", "1234"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert node.statements[-1] == INSERT + " USING TTL ? AND TIMESTAMP 1234"
        assert sorted(row[2] for row in node.rows if row[2] != UNSET) == [
            cqltypes.Int32Type.serialize(30, PV)]
        done = subprocess.run(base + ["--columns", "id,v", "--ttl", "99999999999"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0
        assert "--ttl must be an int 0..630720000" in done.stderr
        done = subprocess.run(base + ["--ttl", "x"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2 and "ttl must be an int, not 'x'" in done.stderr


def test_ttls_out_of_range_and_null_keys_are_set_aside_together(tmp_path) -> None:
    """A TTL out of range is judged before the rows (the encoder's one pass does not see
    it): with max_errors, those rows and the rows the encoder refuses are all set aside,
    each with its own reason, and the rest stored."""
    import pyarrow.parquet as pq

    ids = [None if i in (0, 6) else i for i in range(8)]
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": ["x"] * 8,
                     "ttl": pa.array([1, -1, 3, 4, MAX_TTL + 1, 5, 6, 7], pa.int64())})
    rejected = str(tmp_path / "bad.parquet")
    with TableNode(TABLE) as node:
        result = bulkwire.load_arrow(data, targets.cql(node.address, "ks", "t",
                                                       ttl_column="ttl"),
                                     max_errors=8, rejected=rejected, batch_rows=8)
    table = pq.read_table(rejected)
    reasons = dict(zip(table.column("_row").to_pylist(), table.column("_reason").to_pylist()))
    assert sorted(reasons) == [0, 1, 4, 6]
    assert all("a TTL of" in reasons[i] and "column 'ttl'" in reasons[i] for i in (1, 4))
    assert all("column 'id'" in reasons[i] and "null" in reasons[i] for i in (0, 6))
    assert (result.rows, result.rejected_rows) == (4, 4) and node.executes == 4
