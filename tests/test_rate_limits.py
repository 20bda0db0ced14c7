"""Rate limits (``max_rows_per_second``, ``max_bytes_per_second``; ``--max-rate``,
``--max-bytes-rate``): held over every worker process, thread and node of a load together,
measured where the rows arrive (emulated CQL nodes) or as the load hands them on; the
overloaded answers counted; a wait that Ctrl-C ends; and the values refused."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
import bulkwire.targets
from bulkwire import LoadOptions
from bulkwire.cli import EXIT_INTERRUPTED, EXIT_USAGE, main, parse_size
from bulkwire.load import rates
from bulkwire.testing import LoopbackServer
from cql_fake_node import FakeNode, error
from cql_nodes import EmulatedCluster


def windows(times: list, weights: list | None = None, length: float = 5.0,
            skip: float = 1.0, step: float = 0.25) -> list:
    """The rate (units per second) over every window of ``length`` seconds that starts
    ``skip`` seconds or more after the first arrival and ends by the last."""
    weights = weights or [1] * len(times)
    pairs = sorted(zip(times, weights))
    first, last = pairs[0][0], pairs[-1][0]
    found = []
    start = first + skip
    while start + length <= last:
        found.append(sum(w for t, w in pairs if start <= t < start + length) / length)
        start += step
    return found


def cql_files(tmp_path, files: int, rows: int) -> list:
    """``files`` Parquet files of ``ks.t (id bigint, v text)``, ``rows`` rows each."""
    paths = []
    for f in range(files):
        path = str(tmp_path / f"part-{f}.parquet")
        ids = range(f * rows, (f + 1) * rows)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "v": pa.array([f"row {i}" for i in ids])}),
                       path, row_group_size=500)
        paths.append(path)
    return paths


def test_a_row_rate_holds_at_the_nodes_over_two_workers_and_their_threads(tmp_path):
    """2,000 rows/s over two worker processes (each with its encoding threads) into two
    emulated nodes: every 5-second window after the first second sees 1,800 to 2,200 rows
    arrive at the nodes together (about 11 s of load), and every row arrives."""
    limit = 2000
    paths = cql_files(tmp_path, 4, 5500)
    arrivals: list = []
    with EmulatedCluster(2) as cluster:
        for node in cluster.nodes:
            recorded = node.executed

            def executed(values, recorded=recorded):
                arrivals.append(time.monotonic())
                recorded(values)
            node.executed = executed
        result = bulkwire.load_parquet(
            paths, bulkwire.targets.cql(cluster.contact(), "ks", "t"), workers=2, threads=2,
            max_rows_per_second=limit)
        assert len(cluster.stored) == 22000
    assert result.rows == 22000 and result.workers == 2
    rates_seen = windows(arrivals)
    assert len(rates_seen) >= 10
    assert all(0.9 * limit <= r <= 1.1 * limit for r in rates_seen), rates_seen
    assert 10.5 <= max(arrivals) - min(arrivals) <= 11.5


def test_a_byte_rate_holds_over_two_workers_into_a_database(tmp_path):
    """1 MB/s of request body over two worker processes into the loopback server: the body
    bytes each 5-second window sees handed on (as the parent hears of them) stay within 10%
    of the limit."""
    limit = 1_000_000
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=4000, dim=200,
                                   row_group_rows=250)
    seen: list = []
    with LoopbackServer(keep_body=False, parse=False) as server:
        result = bulkwire.load_parquet(
            path, bulkwire.targets.ravendb(server.url, server.database), workers=2,
            max_bytes_per_second=limit,
            progress=lambda rows, body: seen.append((time.monotonic(), body)))
    assert result.rows == 4000
    times = [t for t, _ in seen]
    added = [body - before for (_, body), (_, before) in zip(seen, [(0, 0)] + seen)]
    rates_seen = windows(times, added)
    assert result.body_bytes >= 7 * limit and len(rates_seen) >= 4
    assert all(0.9 * limit <= r <= 1.1 * limit for r in rates_seen), rates_seen


def test_a_load_without_a_limit_makes_no_schedule(tmp_path, monkeypatch):
    """No limit: no shared schedule is made, and no batch asks one (the batches pass an
    ``is None`` test each, nothing more)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a schedule was made for a load without a limit")

    monkeypatch.setattr(rates.RateLimit, "create", classmethod(refuse))
    monkeypatch.setattr(rates.RateLimit, "reserve_rows", refuse)
    monkeypatch.setattr(rates.RateLimit, "spent_bytes", refuse)
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=300, dim=4)
    assert bulkwire.load_parquet(path, bulkwire.targets.request_file()).rows == 300


def test_the_schedule_is_shared_by_every_holder_of_its_file():
    """Two schedules opened on one file (as two processes open it) take turns: 50 rows at 100
    rows/s from each of them take a second of the schedule (the last batch starting 0.9 s
    after the first: a new schedule has nothing to catch up on), not half of one."""
    first = rates.RateLimit.create(rows=100, bytes_=None)
    second = rates.RateLimit(first.path, 100, None)
    try:
        start = time.monotonic()
        for _ in range(5):
            first.reserve_rows(10)
            second.reserve_rows(10)
        assert 0.85 <= time.monotonic() - start <= 1.2
    finally:
        second.close()
        first.close()
    assert not os.path.exists(first.path)


def test_overloaded_answers_are_sent_again_and_counted(tmp_path):
    """A node that answers three EXECUTEs "overloaded" (the first time each is sent): the
    load completes, and says it sent 3 requests again, all 3 after an overloaded answer."""
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"id": pa.array(range(50), pa.int64()),
                             "v": pa.array(range(50), pa.int32())}), path)
    overloaded = {3, 20, 41}
    with FakeNode(answer_execute=lambda n, body: error(0x1001, "overloaded")
                  if n in overloaded else None) as node:
        result = bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"))
        assert node.executes == 53
    assert (result.rows, result.retries, result.overloaded) == (50, 3, 3)
    assert "3 requests sent again (3 after an overloaded answer)" in result.summary()


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_ends_a_load_waiting_on_its_rate(tmp_path, workers):
    """``bulkwire load --max-rate 200`` interrupted a second after it began sending, while it
    waits on its schedule (5,000 rows take 25 s), in this process or in two worker processes: it stops
    within 1.5 s, exit code 130, and its report says it was interrupted and which rows were
    not confirmed. A request file is not left behind; a database's workers are gone."""
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=5000, dim=4,
                                   row_group_rows=500)
    out, report = tmp_path / "out.json", tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with LoopbackServer(keep_body=False, parse=False) as server:
        target = (["--out", str(out)] if workers == 1 else
                  ["--url", server.url, "--database", server.database, "--workers", "2"])
        process = subprocess.Popen(
            [sys.executable, "-m", "bulkwire", "load", path, *target, "--max-rate", "200",
             "--report", str(report), "--no-progress"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # sending (a busy machine takes seconds to start the processes), then waiting
            deadline = time.monotonic() + 60
            while not (os.path.exists(f"{out}.partial") if workers == 1 else
                       sum("bulk_insert" in line for line in server.log) == workers):
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(1.0)
            assert process.poll() is None
            sent = time.monotonic()
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=10)
            took = time.monotonic() - sent
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == EXIT_INTERRUPTED, err
    assert took < 1.5 and "interrupted" in err
    assert not out.exists()
    written = json.loads(report.read_text())
    assert written["status"] == "interrupted"
    assert 0 < written["result"]["rows"] < 5000
    if workers > 1:
        assert written["result"]["unconfirmed"]


#: Each command line's rate, and what its usage error says.
OUT_OF_RANGE = {
    "--max-rate 0": "--max-rate must be from 1 to",
    "--max-rate -5": "--max-rate must be from 1 to",
    "--max-rate 1e12": "--max-rate must be from 1 to",
    "--max-rate nan": "--max-rate must be from 1 to",
    "--max-rate fast": "argument --max-rate: not a number: 'fast'",
    "--max-bytes-rate 0": "--max-bytes-rate must be from 1,024 to",
    "--max-bytes-rate 5PB": "argument --max-bytes-rate: not a size: '5PB'",
    "--max-bytes-rate=-1MB": "argument --max-bytes-rate: not a size: '-1MB'",
    "--max-bytes-rate 2000TB": "--max-bytes-rate must be from 1,024 to",
}


@pytest.mark.parametrize("given", sorted(OUT_OF_RANGE))
def test_a_rate_out_of_range_is_a_usage_error_naming_its_option(tmp_path, capsys, given):
    path = bulkwire.sample_parquet(str(tmp_path / "s.parquet"), rows=10, dim=2)
    with pytest.raises(SystemExit) as caught:
        main(["load", path, "--out", str(tmp_path / "o.json"), *given.split()])
    assert caught.value.code == EXIT_USAGE
    assert OUT_OF_RANGE[given] in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("value, error", [
    (0, ValueError), (-1, ValueError), (float("inf"), ValueError), (float("nan"), ValueError),
    (1e13, ValueError), ("100", TypeError), (True, TypeError)])
def test_the_api_refuses_a_rate_out_of_range_naming_it(value, error):
    with pytest.raises(error, match="^max_rows_per_second must be"):
        LoadOptions(max_rows_per_second=value)
    with pytest.raises(error, match="^max_bytes_per_second must be"):
        LoadOptions(max_bytes_per_second=value)


def test_sizes_read_with_their_units():
    assert [parse_size(t) for t in ("1024", "50MB", "50mb", "1GiB", "1.5M", "2KiB", "3 kB")] \
        == [1024, 50_000_000, 50_000_000, 1 << 30, 1_500_000, 2048, 3000]


def test_batches_under_a_limit_are_a_tenth_of_a_second_of_it():
    assert rates.capped_batch_rows(65536, 65536, 2000, None) == 200
    assert rates.capped_batch_rows(65536, 1000, None, 4 << 20) == 100
    assert rates.capped_batch_rows(50, 1000, 2000, None) == 50
    assert rates.capped_batch_rows(65536, 1000, 5, None) == 1


def test_an_engine_sink_refuses_a_report_and_shares_a_rate_limit_among_its_tasks():
    from bulkwire._arrow_sink import SinkConfig

    with pytest.raises(ValueError, match="^report is a load's own"):
        SinkConfig(url="http://127.0.0.1:9", database="db",
                   options=LoadOptions(report="run.json"))
    config = SinkConfig(url="http://127.0.0.1:9", database="db",
                        options=LoadOptions(max_rows_per_second=100,
                                            max_bytes_per_second=1 << 20))
    shared = config.per_task(4).options
    assert (shared.max_rows_per_second, shared.max_bytes_per_second) == (25, 1 << 18)
