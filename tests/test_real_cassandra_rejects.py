"""Rejected rows and dry runs against a real Cassandra 5.0 node (``--server cassandra``): a
million-row file with 0.1% bad rows of every kind (a null key, an empty key the node refuses,
a vector of another length, a null inside a vector, text that is not ASCII) loads with
``max_errors="0.1%"``; the rejected file holds exactly those rows; loading it once fixed
completes the table; one bad row past ``max_errors`` stops the load; a dry run leaves the
table empty."""
from __future__ import annotations

import re
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cassandra import OperationTimedOut, ReadFailure, ReadTimeout
from cassandra.concurrent import execute_concurrent_with_args

import bulkwire
from bulkwire import targets
from bulkwire.load.rejects import TooManyRejected
from test_cql_load import KEYSPACE, session  # noqa: F401 - the keyspace's fixture

pytestmark = pytest.mark.cassandra_server

ROWS = 1_000_000
PERIOD = 5000
#: row i is bad when i % PERIOD is one of these: 200 rows of each kind, 1,000 in all (0.1%)
KINDS = {1: "null key", 2: "empty key", 3: "short vector", 4: "null in vector",
         5: "not ascii"}
#: the token ranges the table is counted over, at once (one aggregate over the whole table
#: can outlast the node's range read timeout)
RANGES = 64


def table(session, name: str) -> str:
    session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    session.execute(f"CREATE TABLE {KEYSPACE}.{name} (id text PRIMARY KEY, a ascii, n int, "
                    f"v vector<float, 4>)")
    return name


def count(session, name: str) -> tuple[int, int]:
    """The table's rows and the sum of their ``n``, added up on the node over ``RANGES``
    token ranges read at once (no row is shipped to Python)."""
    query = session.prepare(f"SELECT COUNT(*), SUM(CAST(n AS bigint)) FROM {KEYSPACE}.{name} "
                            f"WHERE token(id) >= ? AND token(id) <= ?")
    edges = [-(1 << 63) + (i << 64) // RANGES for i in range(RANGES)] + [1 << 63]
    ranges = [(low, high - 1) for low, high in zip(edges, edges[1:])]
    rows, total = 0, 0
    for bounds, (ok, result) in zip(ranges, execute_concurrent_with_args(
            session, query, ranges, concurrency=8, raise_on_first_error=False)):
        for attempt in range(5):  # a node busy on shared cores can fail a range read
            if ok:
                break
            assert isinstance(result, (ReadFailure, ReadTimeout, OperationTimedOut)), result
            time.sleep(2 ** attempt)
            try:
                result, ok = session.execute(query, bounds), True
            except (ReadFailure, ReadTimeout, OperationTimedOut) as exc:
                result = exc
        assert ok, f"the token range {bounds} could not be counted: {result!r}"
        n, s = result.one()
        rows, total = rows + n, total + (s or 0)
    return rows, total


def read(session, name: str, rows: list[int]) -> list:
    """The table's row of each ``row-{r}`` key (``a``, ``n``, ``v``), None where it has none;
    read at once."""
    query = session.prepare(f"SELECT a, n, v FROM {KEYSPACE}.{name} WHERE id = ?")
    found = []
    for ok, result in execute_concurrent_with_args(session, query, [(f"row-{r}",) for r in rows],
                                                   concurrency=32):
        assert ok, result
        found.append(result.one())
    return found


def source(path: str) -> np.ndarray:
    """Writes the file (built column by column, without a Python object a row); the row
    numbers that are bad, in order."""
    i = np.arange(ROWS)
    kind = i % PERIOD
    ids = pc.binary_join_element_wise("row-", pa.array(i).cast(pa.string()), "")
    ids = pc.if_else(pa.array(kind == 2), pa.scalar("", pa.string()), ids)
    ids = pc.if_else(pa.array(kind == 1), pa.scalar(None, pa.string()), ids)
    text = pc.if_else(pa.array(kind == 5), "caf\u00e9", "ok")
    # vectors: [i, 0.5, 0.25, 0.125]; [1, 2, 3] (short); [1, null, 3, 4] (a null inside)
    values = np.tile(np.array([0.0, 0.5, 0.25, 0.125], np.float32), (ROWS, 1))
    values[:, 0] = i
    values[kind == 3, :3] = [1.0, 2.0, 3.0]
    values[kind == 4] = [1.0, 0.0, 3.0, 4.0]
    nulls = np.zeros((ROWS, 4), bool)
    nulls[kind == 4, 1] = True
    keep = np.ones((ROWS, 4), bool)
    keep[kind == 3, 3] = False
    offsets = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int32)
    vectors = pa.ListArray.from_arrays(pa.array(offsets),
                                       pa.array(values[keep], mask=nulls[keep]))
    pq.write_table(pa.table({"id": ids, "a": text, "n": pa.array(i, pa.int32()),
                             "v": vectors}),
                   path, row_group_size=25_000)
    return np.flatnonzero(np.isin(kind, list(KINDS)))


@pytest.fixture(scope="module")
def million(tmp_path_factory) -> tuple[str, np.ndarray]:
    """The million-row file, made once for the module; its bad rows."""
    path = str(tmp_path_factory.mktemp("rejects") / "s.parquet")
    return path, source(path)


def test_the_file_has_the_bad_rows_it_says(million):
    """The vectorised file is the one written row by row: each kind where it is said to be."""
    path, bad = million
    assert len(bad) == ROWS // 1000 and pq.read_metadata(path).num_rows == ROWS
    head = pq.read_table(path).slice(PERIOD * 3 - 1, 7).to_pylist()  # rows 14999..15005
    assert head == [
        {"id": "row-14999", "a": "ok", "n": 14999, "v": [14999.0, 0.5, 0.25, 0.125]},
        {"id": "row-15000", "a": "ok", "n": 15000, "v": [15000.0, 0.5, 0.25, 0.125]},
        {"id": None, "a": "ok", "n": 15001, "v": [15001.0, 0.5, 0.25, 0.125]},
        {"id": "", "a": "ok", "n": 15002, "v": [15002.0, 0.5, 0.25, 0.125]},
        {"id": "row-15003", "a": "ok", "n": 15003, "v": [1.0, 2.0, 3.0]},
        {"id": "row-15004", "a": "ok", "n": 15004, "v": [1.0, None, 3.0, 4.0]},
        {"id": "row-15005", "a": "caf\u00e9", "n": 15005, "v": [15005.0, 0.5, 0.25, 0.125]},
    ]
    assert bad.tolist() == [r for r in range(ROWS) if r % PERIOD in KINDS]


def test_bad_rows_of_every_kind_go_to_the_rejected_file_and_load_once_fixed(
        session, cassandra_node, tmp_path, million):
    name = table(session, "rejected_rows")
    path, bad = million
    everything = ROWS * (ROWS - 1) // 2  # the sum of n over the whole file
    rejected = str(tmp_path / "bad.parquet")
    # 32 requests in flight, not the default 2 (kept for tables with a vector index; this one
    # has none): the node, not the wait for its answers, sets the pace, and more rows are in
    # flight when it refuses a key
    target = targets.cql(cassandra_node.address, KEYSPACE, name, window=32)
    result = bulkwire.load_parquet(path, target, max_errors="0.1%", rejected=rejected)
    assert (result.rows, result.rejected_rows) == (ROWS - len(bad), len(bad))
    assert read(session, name, bad.tolist()) == [None] * len(bad)  # no bad row was written
    thrown = pq.read_table(rejected)
    rows = thrown.column("_row").to_pylist()
    assert sorted(rows) == bad.tolist()
    reasons = dict(zip(rows, thrown.column("_reason").to_pylist()))
    for first in range(0, ROWS, ROWS // 4):  # each kind's reason, over the whole file
        assert "refused by the server" in reasons[first + 2]
        assert "Key may not be empty" in reasons[first + 2]
        assert "null" in reasons[first + 1] and "4" in reasons[first + 3]
        assert "null" in reasons[first + 4] and "ASCII" in reasons[first + 5]
    assert thrown.column("n").to_pylist() == rows  # each row rejected whole

    # fixed: keys, vectors and text made good; the added columns are left in (not read)
    fixed = thrown.set_column(0, "id", pa.array([f"row-{r}" for r in rows], pa.string()))
    fixed = fixed.set_column(1, "a", pa.array(["fixed"] * len(rows), pa.string()))
    fixed = fixed.set_column(3, "v", pa.array([[float(r), 0.5, 0.25, 0.125] for r in rows],
                                              pa.list_(pa.float32())))
    pq.write_table(fixed, str(tmp_path / "fixed.parquet"))
    again = bulkwire.load_parquet(str(tmp_path / "fixed.parquet"), target)
    assert again.rows == len(bad)
    # the table's keys can only be the file's: all of them now, of which the fixed load wrote
    # the bad rows' alone, absent before it; so the first load wrote every good row (and the
    # sum of n says each with its own n)
    assert count(session, name) == (ROWS, everything)
    # every fixed row reads back as written, and the good rows beside them are untouched
    looked = [*bad.tolist(), 0, PERIOD, ROWS - 1]
    for r, got in zip(looked, read(session, name, looked)):
        assert (got.a, got.n, list(got.v)) == ("fixed" if r in reasons else "ok", r,
                                               [float(r), 0.5, 0.25, 0.125])

    # one bad row more than max_errors allows stops the load: the 50th, at row 45,005 or so
    # (and so early, not after loading the file again)
    with pytest.raises(TooManyRejected, match=r"more than max_errors allows \(max_errors=49\)"
                       ) as failed:
        bulkwire.load_parquet(path, target, max_errors=49,
                              rejected=str(tmp_path / "bad2.parquet"))
    assert int(re.match(r"([\d,]+) rows rejected", str(failed.value))[1].replace(",", "")) > 49


def test_a_dry_run_leaves_the_table_empty(session, cassandra_node, tmp_path, million):
    name = table(session, "dry_run_rows")
    path, bad = million
    rejected = str(tmp_path / "bad.parquet")
    result = bulkwire.load_parquet(path, targets.cql(cassandra_node.address, KEYSPACE, name),
                                   dry_run=True, rejected=rejected)
    assert count(session, name) == (0, 0)
    # the node refuses "": a dry run checks what the client can, not that
    assert result.dry_run and result.rows == ROWS - len(bad) + len(bad) // len(KINDS)
    assert sorted(pq.read_table(rejected).column("_row").to_pylist()) == [
        int(i) for i in bad if i % PERIOD != 2]
