"""Resumable loads: ``bulkwire load --resume STATE`` / ``load_parquet(resume=)`` records each
unit of work (a file's run of row groups, one request) once the server answered its request,
and a re-run skips those and sends the rest with skipOverwriteIfUnchanged. A load killed
halfway (SIGKILL), then resumed, delivers every document."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire.testing import LoopbackServer  # noqa: E402
from test_datasets import expected_body, write_parts  # noqa: E402
from test_parallel_load import PKG, _children, _gone, documents  # noqa: E402


def confirmed_rows(state_path: str, row_group: int) -> int:
    with open(state_path) as f:
        state = json.load(f)
    return sum(entry["stop"] - entry["first"] for entry in state["done"]) * row_group


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_load_resumes_and_every_document_arrives(tmp_path, workers):
    row_group = 250
    tables = write_parts(str(tmp_path / "d"), [4000] * 6, row_group=row_group)
    total = 24_000
    state = str(tmp_path / "state.json")
    with LoopbackServer() as server:
        server.read_delay = 0.004  # slow enough that the kill comes halfway
        env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
        load = subprocess.Popen([sys.executable, "-m", "bulkwire", "load", str(tmp_path / "d"),
                                 "--url", server.url, "--database", "db", "--resume", state,
                                 "--workers", str(workers), "--batch-rows", "100", "-q"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while not (os.path.exists(state) and confirmed_rows(state, row_group) > 0):
                assert load.poll() is None, load.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.01)
            workers_of_the_run = _children(load.pid)
            load.kill()  # SIGKILL, halfway
            load.wait()
            # its worker processes notice and stop by themselves (no one else would stop them)
            start = time.monotonic()
            while not all(map(_gone, workers_of_the_run)):
                assert time.monotonic() - start < 10, "orphaned workers still running"
                time.sleep(0.05)
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
        confirmed = confirmed_rows(state, row_group)  # the state survived the kill whole
        assert 0 < confirmed < total, confirmed
        first_run = len(server.requests)
        time.sleep(0.3)  # let the cut requests of the killed run end on the server
        r = bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db",
                                  resume=state, workers=workers, batch_rows=100)
        assert r.skipped_rows >= confirmed and r.rows + r.skipped_rows == total
        assert server.documents == documents(tables)  # every one, none missing, right bytes
        resent = [q for q in server.requests[first_run:] if q.commands]
        assert resent and all(q.query.get("skipOverwriteIfUnchanged") == "true" for q in resent)
        assert all(q.query.get("skipOverwriteIfUnchanged") == "false"
                   for q in server.requests[:first_run])
        assert confirmed_rows(state, row_group) == total
        # once all is confirmed, a re-run sends nothing
        before = len(server.requests)
        r = bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state)
        assert r.rows == 0 and r.skipped_rows == total and len(server.requests) == before
        assert "24,000 rows confirmed by an earlier run" in r.summary()


def test_units_are_recorded_only_once_the_server_answered(tmp_path):
    row_group = 100
    tables = write_parts(str(tmp_path / "d"), [1000, 1000], row_group=row_group)
    state = str(tmp_path / "state.json")
    with LoopbackServer() as server:
        def fail_midway(rows, body):  # requests of 500 rows: fail the third one
            if rows >= 1100:
                server.fail_after_bytes = 1

        with pytest.raises(bulkwire.BulkInsertError):
            bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state,
                                  batch_rows=50, progress=fail_midway)
        recorded = json.load(open(state))
        ok = [q for q in server.requests if q.status == 201]
        assert confirmed_rows(state, row_group) == sum(len(q.commands) for q in ok)
        assert any(q.status != 201 for q in server.requests)
        assert recorded["version"] == 1 and confirmed_rows(state, row_group) == 1000
        assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []
        server.fail_after_bytes = None
        r = bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state,
                                  batch_rows=50)
        assert r.rows + r.skipped_rows == 2000
        assert server.documents == documents(tables)


def test_a_changed_file_or_other_options_are_refused_naming_them(tmp_path):
    write_parts(str(tmp_path / "d"), [300, 300], row_group=100)
    state = str(tmp_path / "state.json")
    with LoopbackServer() as server:
        bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state)
        requests = len(server.requests)
        with pytest.raises(ValueError, match=r"resume state '.*state.json' was written by a load "
                                             r"with other options"):
            bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db",
                                  resume=state, collection="Other")
        other = str(tmp_path / "d" / "part-001.parquet")
        pq.write_table(pq.read_table(other).slice(0, 299), other)  # a changed file
        with pytest.raises(ValueError, match=r"'.*part-001.parquet' changed since resume state "
                                             r"'.*state.json' recorded it"):
            bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state)
        with pytest.raises(ValueError, match=r"resume state .* records '.*part-001.parquet', which "
                                             r"is not part of this load's dataset"):
            bulkwire.load_parquet(str(tmp_path / "d" / "part-000.parquet"), url=server.url,
                                  database="db", resume=state)
        open(state, "w").write("{not json")
        with pytest.raises(ValueError, match=r"resume state '.*state.json' cannot be read"):
            bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state)
        json.dump({"version": 99}, open(state, "w"))
        with pytest.raises(ValueError, match=r"is not a bulkwire resume state of version 1"):
            bulkwire.load_parquet(str(tmp_path / "d"), url=server.url, database="db", resume=state)
        assert len(server.requests) == requests  # refused before any request
        with pytest.raises(ValueError, match="resume needs url"):
            bulkwire.load_parquet(str(tmp_path / "d"), resume=state)
        with pytest.raises(ValueError, match="resume needs files"):
            bulkwire.load_parquet(pa.table({"id": [1]}), url=server.url, database="db",
                                  resume=state)


def test_the_cli_resumes_and_says_what_it_skipped(tmp_path, capsys):
    from bulkwire.cli import main

    write_parts(str(tmp_path / "d"), [200, 200], row_group=50)
    state = str(tmp_path / "s.json")
    with LoopbackServer() as server:
        args = ["load", str(tmp_path / "d"), "--url", server.url, "--database", "db",
                "--resume", state, "-q"]
        assert main(args) == 0
        assert "loaded 400 rows" in capsys.readouterr().out
        assert main(args) == 0
        assert "400 rows confirmed by an earlier run were not sent again" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["load", str(tmp_path / "d"), "--resume", state])
    assert "--resume needs --url" in capsys.readouterr().err
    assert expected_body  # the shared oracle (imported for the documents helper's module)


@settings(max_examples=min(20, settings.default.max_examples), deadline=None)
@given(sizes=st.lists(st.integers(0, 120), min_size=1, max_size=4), row_group=st.integers(5, 60),
       stop_after=st.integers(0, 400), batch_rows=st.integers(7, 50))
def test_stopped_anywhere_then_resumed_every_document_arrives(tmp_path_factory, sizes, row_group,
                                                               stop_after, batch_rows):
    """Ctrl-C after any number of rows, then the same load again: the server has every
    document, byte for byte, and the rows skipped are exactly the ones confirmed."""
    folder = tmp_path_factory.mktemp("resume")
    tables = write_parts(str(folder / "d"), sizes, row_group=row_group)
    state = str(folder / "state.json")

    def interrupt(rows, body):
        if rows >= stop_after:
            raise KeyboardInterrupt

    with LoopbackServer() as server:
        try:
            bulkwire.load_parquet(str(folder / "d"), url=server.url, database="db", resume=state,
                                  batch_rows=batch_rows, progress=interrupt)
        except KeyboardInterrupt:
            pass
        confirmed = {c["Id"] for q in server.requests if q.status == 201 for c in q.commands}
        r = bulkwire.load_parquet(str(folder / "d"), url=server.url, database="db", resume=state,
                                  batch_rows=batch_rows)
        assert r.skipped_rows == len(confirmed) and r.rows + r.skipped_rows == sum(sizes)
        assert server.documents == documents(tables)
