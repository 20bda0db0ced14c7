"""Rejected rows and dry runs against a real Cassandra 5.0 node (``--server cassandra``): a
200,000-row file with 0.1% bad rows of every kind (a null key, an empty key the node refuses,
a vector of another length, a null inside a vector, text that is not ASCII) loads with
``max_errors="0.1%"``; the rejected file holds exactly those rows; loading it once fixed
completes the table; a dry run leaves the table empty."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cassandra.query import SimpleStatement

import bulkwire
from bulkwire import targets
from bulkwire.load.rejects import TooManyRejected
from test_cql_load import KEYSPACE, session  # noqa: F401 - the keyspace's fixture

pytestmark = pytest.mark.cassandra_server

ROWS = 200_000
#: row i is bad when i % 5000 is one of these: 40 rows of each kind, 200 in all (0.1%)
KINDS = {1: "null key", 2: "empty key", 3: "short vector", 4: "null in vector",
         5: "not ascii"}


def table(session, name: str) -> str:
    session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    session.execute(f"CREATE TABLE {KEYSPACE}.{name} (id text PRIMARY KEY, a ascii, n int, "
                    f"v vector<float, 4>)")
    return name


def count(session, name: str) -> int:
    """The table's rows, read page by page (an aggregate over 200,000 rows can fail)."""
    rows = session.execute(SimpleStatement(f"SELECT id FROM {KEYSPACE}.{name}",
                                           fetch_size=5000), timeout=120.0)
    return sum(1 for _ in rows)


def source(path: str) -> set[int]:
    """Writes the file; the rows that are bad."""
    kind = [i % 5000 for i in range(ROWS)]
    ids = [None if k == 1 else "" if k == 2 else f"row-{i}" for i, k in enumerate(kind)]
    vectors = [[1.0, 2.0, 3.0] if k == 3 else [1.0, None, 3.0, 4.0] if k == 4
               else [float(i), 0.5, 0.25, 0.125] for i, k in enumerate(kind)]
    text = ["caf\u00e9" if k == 5 else "ok" for k in kind]
    pq.write_table(pa.table({"id": pa.array(ids, pa.string()),
                             "a": pa.array(text, pa.string()),
                             "n": pa.array(range(ROWS), pa.int32()),
                             "v": pa.array(vectors, pa.list_(pa.float32()))}),
                   path, row_group_size=25_000)
    return {i for i, k in enumerate(kind) if k in KINDS}


def test_bad_rows_of_every_kind_go_to_the_rejected_file_and_load_once_fixed(
        session, cassandra_node, tmp_path):
    name = table(session, "rejected_rows")
    path = str(tmp_path / "s.parquet")
    bad = source(path)
    assert len(bad) == ROWS // 1000
    rejected = str(tmp_path / "bad.parquet")
    target = targets.cql(cassandra_node.address, KEYSPACE, name)
    result = bulkwire.load_parquet(path, target, max_errors="0.1%", rejected=rejected)
    assert (result.rows, result.rejected_rows) == (ROWS - len(bad), len(bad))
    assert count(session, name) == ROWS - len(bad)
    thrown = pq.read_table(rejected)
    rows = thrown.column("_row").to_pylist()
    assert sorted(rows) == sorted(bad)
    reasons = dict(zip(rows, thrown.column("_reason").to_pylist()))
    assert "refused by the server" in reasons[2] and "Key may not be empty" in reasons[2]
    assert "null" in reasons[1] and "4" in reasons[3] and "null" in reasons[4]
    assert "ASCII" in reasons[5]

    # fixed: keys, vectors and text made good; the added columns are left in (not read)
    fixed = thrown.set_column(0, "id", pa.array([f"row-{r}" for r in rows], pa.string()))
    fixed = fixed.set_column(1, "a", pa.array(["fixed"] * len(rows), pa.string()))
    fixed = fixed.set_column(3, "v", pa.array([[float(r), 0.5, 0.25, 0.125] for r in rows],
                                              pa.list_(pa.float32())))
    pq.write_table(fixed, str(tmp_path / "fixed.parquet"))
    again = bulkwire.load_parquet(str(tmp_path / "fixed.parquet"), target)
    assert again.rows == len(bad)
    assert count(session, name) == ROWS
    row = session.execute(f"SELECT a, n FROM {KEYSPACE}.{name} WHERE id = 'row-5002'").one()
    assert (row.a, row.n) == ("fixed", 5002)

    # one bad row more than max_errors allows fails the load
    with pytest.raises(TooManyRejected, match="max_errors=199"):
        bulkwire.load_parquet(path, target, max_errors=199,
                              rejected=str(tmp_path / "bad2.parquet"))


def test_a_dry_run_leaves_the_table_empty(session, cassandra_node, tmp_path):
    name = table(session, "dry_run_rows")
    path = str(tmp_path / "s.parquet")
    bad = source(path)
    rejected = str(tmp_path / "bad.parquet")
    result = bulkwire.load_parquet(path, targets.cql(cassandra_node.address, KEYSPACE, name),
                                   dry_run=True, rejected=rejected)
    assert count(session, name) == 0
    assert result.dry_run and result.rows == ROWS - len(bad) + 40  # the node refuses ""
    # a dry run checks what the client can: an empty key is the node's to refuse
    assert sorted(pq.read_table(rejected).column("_row").to_pylist()) == sorted(
        i for i in bad if i % 5000 != 2)
