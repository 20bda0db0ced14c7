"""A row rate limit against a real Cassandra node (``--server cassandra``): ``bulkwire load
--workers 2 --max-rate`` into a table, every row read back, and the rate measured from the
node's own WRITETIME of each row (the coordinator's clock when it applied the write)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bulkwire.cli import EXIT_OK, main
from servers.cassandra import connect

pytestmark = pytest.mark.cassandra_server

KEYSPACE = "rates"
#: rows per second, and the rows loaded: about 15 s of load
LIMIT, FILES, ROWS = 1000, 4, 3750


@pytest.fixture(scope="module")
def node(cassandra_node):
    """The session's node, with a keyspace of this module's own (a node of its own would cost
    a start and measure nothing more: the rate is read from the rows' WRITETIME)."""
    with connect([cassandra_node.address]) as s:
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                  f"{{'class': 'SimpleStrategy', 'replication_factor': 1}}")
        s.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.t")
        s.execute(f"CREATE TABLE {KEYSPACE}.t (id bigint PRIMARY KEY, v text)")
    yield cassandra_node


def test_a_row_rate_over_two_workers_holds_at_the_node(node, tmp_path, capsys):
    paths = []
    for f in range(FILES):
        path = str(tmp_path / f"part-{f}.parquet")
        ids = range(f * ROWS, (f + 1) * ROWS)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "v": [f"row {i}" for i in ids]}), path, row_group_size=500)
        paths.append(path)
    report = tmp_path / "report.json"
    code = main(["load", *paths, "--cql", node.address, "--keyspace", KEYSPACE, "--table", "t",
                 "--workers", "2", "--max-rate", str(LIMIT), "--report", str(report),
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    written = json.loads(report.read_text())
    assert written["result"]["rows"] == FILES * ROWS and written["result"]["workers"] == 2
    assert written["summary"] in out
    with connect([node.address]) as s:
        stamps = [row[0] / 1e6 for row in s.execute(
            f"SELECT WRITETIME(v) FROM {KEYSPACE}.t")]
    assert len(stamps) == FILES * ROWS
    stamps.sort()
    rates = []
    # every 5-second window after the first (the node's first seconds of a load are its
    # slowest: its code not yet compiled)
    start = stamps[0] + 5.0
    while start + 5.0 <= stamps[-1]:
        rates.append(sum(1 for t in stamps if start <= t < start + 5.0) / 5.0)
        start += 0.25
    assert len(rates) >= 15
    assert all(0.9 * LIMIT <= r <= 1.1 * LIMIT for r in rates), f"rates: {rates}"
