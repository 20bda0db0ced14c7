"""Rejected rows and dry runs against a real RavenDB server (``--server ravendb``): the rows
the client refuses go to the rejected file and every other row is stored; a dry run stores
nothing; the fixed rejected file completes the collection."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
from test_real_ravendb import new_database, raven, user_documents  # noqa: F401 - a fixture

pytestmark = [pytest.mark.ravendb_server, pytest.mark.timeout(600)]


def test_refused_rows_are_set_aside_and_the_fixed_file_completes_the_collection(raven,
                                                                             tmp_path):
    n = 3000
    ids = [None if i % 500 == 1 else i for i in range(n)]
    vectors = [[0.5] if i % 500 == 2 else [None, 1.0] if i % 500 == 3 else [float(i), 1.0]
               for i in range(n)]
    source = str(tmp_path / "points.parquet")
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                             "v": pa.array(vectors, pa.list_(pa.float32()))}), source,
                   row_group_size=1000)
    bad = sorted(i for i in range(n) if i % 500 in (1, 2, 3))
    database = new_database(raven, "rejects")
    target = bulkwire.targets.ravendb(raven.url, database, collection="Points")
    rejected = str(tmp_path / "bad.parquet")

    dry = bulkwire.load_parquet(source, target, dry_run=True, rejected=rejected)
    assert (dry.rows, dry.rejected_rows) == (n - len(bad), len(bad))
    assert user_documents(raven, database) == {}

    result = bulkwire.load_parquet(source, target, max_errors="1%", rejected=rejected)
    assert (result.rows, result.rejected_rows) == (n - len(bad), len(bad))
    stored = user_documents(raven, database)
    assert sorted(int(k.rsplit("/", 1)[1]) for k in stored) == sorted(set(range(n)) - set(bad))
    table = pq.read_table(rejected)
    rows = table.column("_row").to_pylist()
    assert sorted(rows) == bad

    fixed = table.set_column(0, "id", pa.array(rows, pa.int64())).set_column(
        1, "v", pa.array([[float(r), 1.0] for r in rows], pa.list_(pa.float32())))
    pq.write_table(fixed, str(tmp_path / "fixed.parquet"))
    bulkwire.load_parquet(str(tmp_path / "fixed.parquet"), target)
    stored = user_documents(raven, database)
    assert len(stored) == n
    assert set(stored["points/2"]) == {"v", "@metadata"}  # the added columns not stored
