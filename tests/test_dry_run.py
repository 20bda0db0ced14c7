"""Dry runs (``dry_run=True``, ``bulkwire load --dry-run``): every row read and checked
against the target (a CQL table's schema read from the node; the document rules), the
refused rows written to the rejected file, the summary printed, and nothing sent to any
server nor written to any target file."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
from bulkwire import targets
from bulkwire.cli import EXIT_OK, EXIT_REJECTED, main
from bulkwire.load.rejects import TooManyRejected
from bulkwire.testing import LoopbackServer
from cql_fake_node import BIGINT, INT, FakeNode
from test_rejected_rows import GOOD, HOLE, NULL_ID, SHORT, source


def write(tmp_path, kinds) -> str:
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path, row_group_size=7)
    return path


def test_a_dry_run_into_ravendb_sends_nothing_and_lists_the_refused_rows(tmp_path):
    kinds = [GOOD] * 30
    kinds[3], kinds[20], kinds[29] = NULL_ID, HOLE, SHORT
    path = write(tmp_path, kinds)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        result = bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                       dry_run=True, rejected=rejected)
        assert not server.requests and not server.documents
        assert not [line for line in server.log if "bulk_insert" in line.lower()]
    assert result.dry_run and result.rows == 27 and result.rejected_rows == 3
    assert result.summary().startswith("dry run: checked 27 good rows")
    assert "nothing sent or written; 3 rows rejected, written to" in result.summary()
    assert sorted(pq.read_table(rejected).column("_row").to_pylist()) == [3, 20, 29]


def test_a_dry_run_into_a_file_target_writes_no_file(tmp_path):
    path = write(tmp_path, [GOOD, NULL_ID, GOOD])
    for target in (targets.request_file(str(tmp_path / "o.json")),
                   targets.jsonl(str(tmp_path / "o.jsonl"))):
        result = bulkwire.load_parquet(path, target, dry_run=True)
        assert (result.rows, result.rejected_rows, result.rejected_path) == (2, 1, None)
    assert sorted(os.listdir(tmp_path)) == ["s.parquet"]


def test_a_dry_run_into_cql_reads_the_schema_and_executes_nothing(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"id": pa.array([1, None, 3], pa.int64()),
                             "v": pa.array([1, 2, 3], pa.int32())}), path)
    with FakeNode(columns=[("id", "partition_key", BIGINT), ("v", "regular", INT)]) as node:
        result = bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t"),
                                       dry_run=True)
        assert node.seen.get("query")  # the schema was read from the node
        assert node.executes == 0 and not node.seen.get("execute")
    assert (result.rows, result.rejected_rows) == (2, 1)
    with FakeNode(columns=[("id", "partition_key", BIGINT), ("w", "regular", INT)]) as node:
        with pytest.raises(ValueError, match="'v'"):  # the table has no column v
            bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t"), dry_run=True)


def test_a_dry_run_with_max_errors_fails_past_it(tmp_path):
    path = write(tmp_path, [NULL_ID, NULL_ID, GOOD])
    with pytest.raises(TooManyRejected):
        bulkwire.load_parquet(path, targets.request_file(str(tmp_path / "o.json")),
                              dry_run=True, max_errors=1, rejected=str(tmp_path / "b.parquet"))
    assert not os.path.exists(tmp_path / "o.json")


def test_a_dry_run_with_workers_checks_every_file(tmp_path):
    paths = []
    for part in range(2):
        paths.append(str(tmp_path / f"p{part}.parquet"))
        pq.write_table(source([GOOD, NULL_ID, GOOD, HOLE]), paths[-1], row_group_size=1)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        result = bulkwire.load_parquet(paths, targets.ravendb(server.url, server.database),
                                       dry_run=True, rejected=rejected, workers=2)
        assert not server.requests
    assert (result.rows, result.rejected_rows, result.workers) == (4, 4, 2)


def test_a_dry_run_cannot_resume(tmp_path):
    path = write(tmp_path, [GOOD])
    with LoopbackServer() as server:
        with pytest.raises(ValueError, match="dry_run and resume exclude each other"):
            bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                  dry_run=True, resume=str(tmp_path / "state"))
    assert not os.path.exists(tmp_path / "state")


def test_the_command_line_dry_run(tmp_path, capsys):
    good = write(tmp_path, [GOOD, GOOD])
    out = str(tmp_path / "o.json")
    assert main(["load", good, "--out", out, "-q", "--dry-run"]) == EXIT_OK
    assert "dry run: checked 2 good rows" in capsys.readouterr().out
    bad = str(tmp_path / "b.parquet")
    pq.write_table(source([GOOD, NULL_ID]), bad)
    assert main(["load", bad, "--out", out, "-q", "--dry-run",
                 "--rejected", str(tmp_path / "r.parquet")]) == EXIT_REJECTED
    assert "1 rows rejected" in capsys.readouterr().out
    assert not os.path.exists(out)
