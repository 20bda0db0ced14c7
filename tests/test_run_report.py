"""The run report (``report=``, ``--report FILE.json``), the summary made from its data, and
the progress line's time left and rejected count: written when a load completes and when it
fails (what was and was not confirmed), atomically, never holding a credential; a path
where it cannot be written refused before anything is sent."""
from __future__ import annotations

import dataclasses
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
import bulkwire.targets
from bulkwire.cli import EXIT_OK, EXIT_SERVER, EXIT_USAGE, main
from bulkwire.config import build_config
from bulkwire.errors import CqlServerError
from bulkwire.load import LoadResult
from bulkwire.load._progress import _Progress
from bulkwire.testing import LoopbackServer
from cql_fake_node import FakeNode, refusing

PASSWORD = "s3cret-Pa55word"


def int_files(tmp_path, files: int = 2, rows: int = 500) -> list:
    """Files of ``(id bigint, v int)``, the fake node's table, ``rows`` rows each; v = id."""
    paths = []
    for f in range(files):
        path = str(tmp_path / f"part-{f}.parquet")
        ids = range(f * rows, (f + 1) * rows)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "v": pa.array(ids, pa.int32())}), path)
        paths.append(path)
    return paths


def test_a_completed_load_reports_what_it_did_and_the_summary_is_its_data(tmp_path, capsys):
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=1000, dim=8,
                                   row_group_rows=250)
    report = tmp_path / "report.json"
    with LoopbackServer() as server:
        code = main(["load", path, "--url", server.url, "--database", server.database,
                     "--workers", "2", "--max-rate", "1000000", "--report", str(report),
                     "--no-progress"])
        assert len(server.documents) == 1000
    out = capsys.readouterr().out
    assert code == EXIT_OK
    written = json.loads(report.read_text())
    assert written["status"] == "completed" and written["error"] is None
    assert out.strip().splitlines()[-1] == written["summary"]
    result = written["result"]
    assert {f.name for f in dataclasses.fields(LoadResult)} <= set(result)
    assert result["rows"] == 1000 and result["workers"] == 2
    assert result["body_bytes"] > 0 and result["seconds"] > 0
    assert result["rows_per_second"] == pytest.approx(1000 / result["seconds"])
    assert (result["retries"], result["overloaded"]) == (0, 0)
    assert result["confirmed"] == [[path, 0, 1000]] and result["unconfirmed"] == []
    options = written["options"]
    assert options["max_rows_per_second"] == 1000000 and options["workers"] == 2
    assert options["report"] == str(report)
    assert written["target"]["kind"] == "ravendb" and server.url in \
        written["target"]["description"]
    assert written["bulkwire"]["version"] == bulkwire.__version__
    assert written["bulkwire"]["build"] == json.loads(json.dumps(
        dataclasses.asdict(build_config())))
    assert [p for p in os.listdir(tmp_path) if p.startswith(".bulkwire-report")] == []


def test_a_failed_load_reports_what_was_and_was_not_confirmed(tmp_path):
    """Two files, one unit each (``resume``): the server refuses a row of the second. The
    load raises, and its report says it failed, why, that the first file's rows were
    confirmed and the second's were not."""
    paths = int_files(tmp_path)
    report = tmp_path / "report.json"
    with FakeNode(answer_execute=refusing(777)) as node:
        with pytest.raises(CqlServerError) as caught:
            bulkwire.load_parquet(paths, bulkwire.targets.cql(node.address, "ks", "t"),
                                  resume=str(tmp_path / "state.json"), report=str(report))
    written = json.loads(report.read_text())
    assert written["status"] == "failed"
    assert "row with v=777 refused" in written["error"]
    assert written["notes"] == [note for note in caught.value.__notes__]
    assert written["result"]["confirmed"] == [[paths[0], 0, 500]]
    assert written["result"]["unconfirmed"] == [[paths[1], 0, 500]]
    assert "not confirmed: " in written["summary"] and paths[1] in written["summary"]


def test_a_password_never_appears_in_the_report_or_the_summary(tmp_path, capsys):
    paths = int_files(tmp_path, files=1, rows=50)
    report, failed = tmp_path / "report.json", tmp_path / "failed.json"
    with FakeNode() as node:
        code = main(["load", *paths, "--cql", node.address, "--keyspace", "ks", "--table", "t",
                     "--username", "loader", "--password", PASSWORD, "--report", str(report)])
    with FakeNode(answer_execute=refusing(7)) as node:
        failed_code = main(["load", *paths, "--cql", node.address, "--keyspace", "ks",
                            "--table", "t", "--username", "loader", "--password", PASSWORD,
                            "--report", str(failed)])
    captured = capsys.readouterr()
    assert (code, failed_code) == (EXIT_OK, EXIT_SERVER)
    for text in (report.read_text(), failed.read_text(), captured.out, captured.err):
        assert PASSWORD not in text
    assert json.loads(report.read_text())["target"]["identity"]["table"] == "t"


def test_user_and_password_of_a_url_are_left_out(tmp_path):
    from bulkwire.load.report import _scrubbed

    assert _scrubbed(f"http://loader:{PASSWORD}@db.example:8080 (database x)") == \
        "http://db.example:8080 (database x)"


@pytest.mark.parametrize("where", ["missing/report.json", "a-file/report.json", "."])
def test_a_report_path_that_cannot_be_written_fails_before_sending(tmp_path, capsys, where):
    (tmp_path / "a-file").write_text("")
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=10, dim=2)
    report = str(tmp_path / where)
    with LoopbackServer() as server:
        with pytest.raises(ValueError, match=f"^report {report!r} cannot be written"):
            bulkwire.load_parquet(path, bulkwire.targets.ravendb(server.url, server.database),
                                  report=report)
        with pytest.raises(SystemExit) as caught:
            main(["load", path, "--url", server.url, "--database", server.database,
                  "--report", report])
        assert server.log == []
    assert caught.value.code == EXIT_USAGE
    assert f"--report {report!r} cannot be written" in capsys.readouterr().err


def test_a_report_replaces_the_one_before_it_whole(tmp_path):
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=20, dim=2)
    report = tmp_path / "report.json"
    report.write_text("an earlier report")
    result = bulkwire.load_parquet(path, bulkwire.targets.request_file(), report=str(report))
    assert json.loads(report.read_text())["summary"] == result.summary()
    assert sorted(os.listdir(tmp_path)) == ["report.json", "s.bulk.json", "s.parquet"]


def test_the_report_option_is_checked():
    with pytest.raises(TypeError, match="^report must be a path or None, not int"):
        bulkwire.LoadOptions(report=5)
    with pytest.raises(ValueError, match="^report must not be an empty path"):
        bulkwire.LoadOptions(report="")


def test_the_progress_line_shows_the_time_left_and_the_rejected_rows():
    stream = io.StringIO()
    bar = _Progress(1000, stream=stream)
    bar.start -= 10.0  # 10 s in
    bar.update(250, 1_000_000)
    line = stream.getvalue()
    assert "250/1,000 rows" in line and "30s left" in line and "rejected" not in line
    bar.last = 0.0
    bar.update(500, 2_000_000, rejected=3)
    last = stream.getvalue().rsplit("\r", 1)[-1]
    assert "10s left" in last and "3 rejected" in last
    unknown = io.StringIO()
    _Progress(None, stream=unknown).update(5, 10, final=True)
    assert "left" not in unknown.getvalue()


def test_the_summary_says_what_was_sent_again():
    result = LoadResult(rows=10, body_bytes=100, wire_bytes=100, seconds=1.0, source="s",
                        target="t", compress=False, retries=4, overloaded=3)
    assert result.summary() == ("loaded 10 rows from s into t: 100 bytes in 1.00 s, 10 rows/s, "
                                "0.0 MB/s; 4 requests sent again (3 after an overloaded answer)")
