"""What a load writes into each row, against a real Cassandra 5.0 node (``--server
cassandra``): a TTL that expires the rows, the write time given (``WRITETIME``), no
tombstone for a null by default and one per null with ``nulls="null"`` (counted by a
traced read: "Read N live rows and M tombstone cells"), and a mapping with a constant
into a table whose columns are named otherwise.
"""
from __future__ import annotations

import re
import time

import pyarrow as pa
import pytest

import bulkwire
from bulkwire import targets
from test_cql_load import KEYSPACE, session  # noqa: F401 (the keyspace's fixture)
from test_cql_load import make_table as table

pytestmark = pytest.mark.cassandra_server


def target(node, name: str, **options):
    return targets.cql(node.address, KEYSPACE, name, **options)


def count(session, name: str) -> int:
    return session.execute(f"SELECT COUNT(*) FROM {KEYSPACE}.{name}").one()[0]


def test_rows_with_a_ttl_expire(cassandra_node, session) -> None:
    name = table(session, "ttl_rows", "id bigint PRIMARY KEY, v text")
    data = pa.table({"id": pa.array(range(20), pa.int64()), "v": ["x"] * 20})
    bulkwire.load_arrow(data, target(cassandra_node, name, ttl=2))
    ttls = {row[0] for row in session.execute(f"SELECT TTL(v) FROM {KEYSPACE}.{name}")}
    assert count(session, name) == 20 and ttls <= {1, 2}
    time.sleep(3.5)
    assert count(session, name) == 0


def test_a_ttl_column_expires_each_row_on_its_own_and_a_null_keeps_the_default(
        cassandra_node, session) -> None:
    name = table(session, "ttl_column", "id bigint PRIMARY KEY, v text")
    session.execute(f"ALTER TABLE {KEYSPACE}.{name} WITH default_time_to_live = 3600")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"],
                     "ttl": pa.array([2, 0, None], pa.int32())})
    bulkwire.load_arrow(data, target(cassandra_node, name, ttl_column="ttl"))
    got = {row[0]: row[1] for row in session.execute(
        f"SELECT id, TTL(v) FROM {KEYSPACE}.{name}")}
    assert got[1] <= 2 and got[2] is None and 3000 < got[3] <= 3600
    time.sleep(3.5)
    assert sorted(row[0] for row in session.execute(f"SELECT id FROM {KEYSPACE}.{name}")) == [2, 3]


def test_writetime_is_the_timestamp_given(cassandra_node, session) -> None:
    name = table(session, "write_time", "id bigint PRIMARY KEY, v text")
    stamp = 1_700_000_000_123_456
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})
    bulkwire.load_arrow(data, target(cassandra_node, name, timestamp=stamp))
    times = [row[0] for row in session.execute(f"SELECT WRITETIME(v) FROM {KEYSPACE}.{name}")]
    assert times == [stamp, stamp]
    per_row = pa.table({"id": pa.array([3, 4], pa.int64()), "v": ["c", "d"],
                        "at": pa.array([stamp + 1, None], pa.int64())})
    before = int(time.time() * 1e6)
    bulkwire.load_arrow(per_row, target(cassandra_node, name, timestamp_column="at"))
    got = {row[0]: row[1] for row in session.execute(
        f"SELECT id, WRITETIME(v) FROM {KEYSPACE}.{name} WHERE id IN (3, 4)")}
    assert got[3] == stamp + 1 and got[4] >= before  # a null: the coordinator's time
    # an older write time loses to the cell already there
    bulkwire.load_arrow(pa.table({"id": pa.array([1], pa.int64()), "v": ["old"]}),
                        target(cassandra_node, name, timestamp=stamp - 1))
    assert session.execute(f"SELECT v FROM {KEYSPACE}.{name} WHERE id = 1").one()[0] == "a"


def tombstones(session, name: str, key: int) -> int:
    """The tombstone cells a traced read of partition ``key`` says it read."""
    result = session.execute(f"SELECT * FROM {KEYSPACE}.{name} WHERE id = {key}", trace=True)
    trace = result.get_query_trace(max_wait_sec=30)
    said = [m for m in (e.description for e in trace.events)
            if re.search(r"live rows and \d+ tombstone cells", m)]
    assert said, [e.description for e in trace.events]
    return sum(int(re.search(r"(\d+) tombstone cells", m).group(1)) for m in said)


def test_nulls_write_no_tombstones_unless_asked(cassandra_node, session) -> None:
    name = table(session, "nulls", "id bigint PRIMARY KEY, a text, b int, c double")
    data = pa.table({"id": pa.array([1, 2], pa.int64()),
                     "a": pa.array([None, "x"]), "b": pa.array([None, None], pa.int32()),
                     "c": pa.array([None, 1.0])})
    bulkwire.load_arrow(data, target(cassandra_node, name))
    assert tombstones(session, name, 1) == 0 and tombstones(session, name, 2) == 0
    rows = {row[0]: tuple(row[1:]) for row in session.execute(f"SELECT * FROM {KEYSPACE}.{name}")}
    assert rows == {1: (None, None, None), 2: ("x", None, 1.0)}
    # a null left unset keeps what the cell held; written as a null, it clears it
    bulkwire.load_arrow(pa.table({"id": pa.array([2], pa.int64()), "a": pa.array([None], pa.string())}),
                        target(cassandra_node, name))
    assert session.execute(f"SELECT a FROM {KEYSPACE}.{name} WHERE id = 2").one()[0] == "x"

    name = table(session, "nulls_written", "id bigint PRIMARY KEY, a text, b int, c double")
    bulkwire.load_arrow(data, target(cassandra_node, name, nulls="null"))
    assert tombstones(session, name, 1) == 3 and tombstones(session, name, 2) == 1
    bulkwire.load_arrow(pa.table({"id": pa.array([2], pa.int64()), "a": pa.array([None], pa.string())}),
                        target(cassandra_node, name, nulls="null"))
    assert session.execute(f"SELECT a FROM {KEYSPACE}.{name} WHERE id = 2").one()[0] is None


def test_a_mapping_loads_into_a_table_of_other_names(cassandra_node, session) -> None:
    name = table(session, "mapped", "pk bigint PRIMARY KEY, vector vector<float, 2>, "
                                    "source text, part int, loaded timestamp")
    data = pa.table({"id": pa.array([1, 2], pa.int64()),
                     "emb": pa.array([[0.5, 1.0], [1.5, 2.0]], pa.list_(pa.float32(), 2)),
                     "other": ["not", "loaded"]})
    bulkwire.load_arrow(data, target(cassandra_node, name),
                        columns={"emb": "vector", "id": "pk"},
                        constants={"source": "export-2026-12", "part": "7",
                                   "loaded": "2026-12-01T00:00:00"})
    rows = {row.pk: row for row in session.execute(f"SELECT * FROM {KEYSPACE}.{name}")}
    assert sorted(rows) == [1, 2]
    assert list(rows[2].vector) == [1.5, 2.0] and rows[1].source == "export-2026-12"
    assert rows[1].part == 7 and rows[2].loaded.isoformat() == "2026-12-01T00:00:00"
    with pytest.raises(ValueError, match="'emb' is mapped to 'vectr'"):
        bulkwire.load_arrow(data, target(cassandra_node, name), columns={"emb": "vectr", "id": "pk"})
    with pytest.raises(ValueError, match="constant column 'part'"):
        bulkwire.load_arrow(data, target(cassandra_node, name), columns={"id": "pk"},
                            constants={"part": "x"})
