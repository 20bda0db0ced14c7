"""Rejected rows (``max_errors``, ``rejected``): a row refused by the client (a null id, a
vector of another length, a null inside a vector, a value out of range) or by a CQL node
goes to the rejected file with its source file, row and reason, and the rest of the load goes
on; every source row ends up either confirmed by the server or in the rejected file, exactly
once, whatever the batches, worker processes and resumed runs; the rejected file is
complete whenever the load ends, and loads again once fixed."""
from __future__ import annotations

import errno
import os
import struct
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bulkwire
from bulkwire import LoadOptions, targets
from bulkwire.cli import EXIT_INPUT, EXIT_REJECTED, main
from bulkwire.load import rejects as rejects_module
from bulkwire.load.rejects import REJECT_COLUMNS, TooManyRejected
from bulkwire.testing import LoopbackServer
from cql_fake_node import BIGINT, INT, FakeNode, error, execute_values

ASCII = 0x0001

GOOD, NULL_ID, SHORT, HOLE = "good", "null id", "short vector", "null in vector"
KINDS = (GOOD, NULL_ID, SHORT, HOLE)


def source(kinds: list[str]) -> pa.Table:
    """A row per kind: the id is the row number (null for NULL_ID), the vector 2 floats."""
    ids = [None if kind == NULL_ID else i for i, kind in enumerate(kinds)]
    vectors = [[1.0] if kind == SHORT else [None, 2.0] if kind == HOLE else [float(i), 0.5]
               for i, kind in enumerate(kinds)]
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "v": pa.array(vectors, pa.list_(pa.float32()))})


def loaded_rows(server: LoopbackServer) -> list[int]:
    """The source rows the server holds (document ids end with the row number)."""
    return sorted(int(name.rsplit("/", 1)[1]) for name in server.documents)


def rejected_rows(path: str) -> list[int]:
    return sorted(pq.read_table(path).column("_row").to_pylist())


def bad(kinds: list[str]) -> list[int]:
    return [i for i, kind in enumerate(kinds) if kind != GOOD]


def storing_answer():
    """``(stored, answer)``: a fake node's ``answer`` hook that adds each EXECUTE's first
    value (a bigint id) to the set ``stored`` and lets the node answer as it would."""
    stored: set[int] = set()
    lock = threading.Lock()

    def answer(n, body):
        (row_id,) = struct.unpack(">q", execute_values(body)[0])
        with lock:
            stored.add(row_id)
        return None

    return stored, answer


def test_refused_rows_go_to_the_rejected_file_and_the_rest_loads(tmp_path):
    kinds = [GOOD] * 40
    for at, kind in ((0, SHORT), (3, NULL_ID), (4, NULL_ID), (17, HOLE), (39, SHORT)):
        kinds[at] = kind
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path, row_group_size=16)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        result = bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                       max_errors=5, rejected=rejected, batch_rows=8)
        assert loaded_rows(server) == [i for i, k in enumerate(kinds) if k == GOOD]
    assert (result.rows, result.rejected_rows, result.rejected_path) == (35, 5, rejected)
    assert "5 rows rejected, written to " + rejected in result.summary()
    table = pq.read_table(rejected)
    assert table.schema.names == ["id", "v", *REJECT_COLUMNS]
    by_row = {row["_row"]: row for row in table.to_pylist()}
    assert sorted(by_row) == [0, 3, 4, 17, 39]
    assert all(row["_source_file"] == path for row in by_row.values())
    assert "null id" in by_row[3]["_reason"] and "column 'id'" in by_row[3]["_reason"]
    assert "3 values" in by_row[0]["_reason"] or "1 values" in by_row[39]["_reason"]
    assert "null" in by_row[17]["_reason"] and by_row[17]["v"] == [None, 2.0]
    assert by_row[0]["v"] == [1.0] and by_row[0]["id"] == 0
    assert [name for name in os.listdir(tmp_path)] and not [
        name for name in os.listdir(tmp_path) if ".partial" in name or name.endswith(".tmp")]


def test_past_max_errors_the_load_fails_naming_what_was_not_confirmed(tmp_path):
    kinds = [GOOD] * 30
    kinds[5] = kinds[25] = NULL_ID
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path, row_group_size=10)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        with pytest.raises(TooManyRejected) as caught:
            bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                  max_errors=1, rejected=rejected, resume=str(tmp_path / "st"))
    assert "max_errors=1" in str(caught.value) and "row 25" in str(caught.value)
    assert caught.value.unconfirmed  # the rows no request confirmed are named
    assert rejected_rows(rejected) == [5, 25]  # complete: what was refused before the end


def test_a_fraction_is_of_the_loads_rows(tmp_path):
    kinds = [GOOD] * 1000
    kinds[10] = kinds[500] = NULL_ID
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path)
    target = targets.request_file(str(tmp_path / "out.json"))
    result = bulkwire.load_parquet(path, target, max_errors="0.2%",
                                   rejected=str(tmp_path / "b.parquet"))
    assert result.rejected_rows == 2
    with pytest.raises(TooManyRejected):
        bulkwire.load_parquet(path, target, max_errors="0.1%",
                              rejected=str(tmp_path / "b.parquet"))


def test_the_default_is_unchanged_the_first_refused_row_fails(tmp_path):
    kinds = [GOOD] * 10
    kinds[4] = NULL_ID
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path)
    with pytest.raises(bulkwire.errors.RowError, match="row 4"):
        bulkwire.load_parquet(path, targets.request_file(str(tmp_path / "o.json")))


@pytest.mark.parametrize("fields, said", [
    ({"max_errors": -1}, "max_errors must be >= 0"),
    ({"max_errors": "x%", "rejected": "r"}, "max_errors must be a count"),
    ({"max_errors": "101%", "rejected": "r"}, "max_errors must be a count"),
    ({"max_errors": True}, "not bool"),
    ({"max_errors": 3}, "max_errors needs rejected"),
    ({"rejected": "r.parquet"}, "rejected needs max_errors"),
    ({"dry_run": "yes"}, "dry_run must be a bool"),
])
def test_options_are_checked(fields, said):
    with pytest.raises((TypeError, ValueError), match=said):
        LoadOptions(**fields)
    assert LoadOptions(max_errors="7", rejected="r").max_errors == 7
    assert LoadOptions(max_errors=" 0.10% ", rejected="r").max_errors == "0.1%"


def test_a_rejected_file_in_a_folder_that_cannot_be_written_fails_before_sending(tmp_path):
    if os.geteuid() == 0:
        missing = str(tmp_path / "no" / "such" / "bad.parquet")  # root writes anywhere
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        missing = str(locked / "bad.parquet")
    path = str(tmp_path / "s.parquet")
    pq.write_table(source([GOOD] * 5), path)
    with LoopbackServer() as server:
        with pytest.raises(OSError, match="bad.parquet"):
            bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                  max_errors=5, rejected=missing)
        assert not server.requests and not server.documents


def test_a_full_disk_fails_the_load_naming_the_file_and_leaves_no_torn_file(tmp_path,
                                                                           monkeypatch):
    """The log cannot be written (ENOSPC after its schema): the load fails naming the
    rejected file; the file with its name, if any, is a whole Parquet file."""
    opened = rejects_module._open_log

    class Full:
        def __init__(self, f):
            self.f, self.written = f, 0

        def write(self, data):
            self.written += len(data)
            if self.written > 600:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(rejects_module, "_open_log", lambda p: Full(opened(p)))
    kinds = [NULL_ID if i % 3 == 0 else GOOD for i in range(300)]
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path)
    rejected = str(tmp_path / "bad.parquet")
    with pytest.raises(OSError) as caught:
        bulkwire.load_parquet(path, targets.request_file(str(tmp_path / "o.json")),
                              max_errors=1000, rejected=rejected, batch_rows=20)
    assert "bad.parquet" in str(caught.value) and "space" in str(caught.value)
    if os.path.exists(rejected):
        pq.read_table(rejected)  # whole, not torn
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_ctrl_c_mid_load_leaves_a_complete_rejected_file_or_none(tmp_path):
    kinds = [NULL_ID if i % 10 == 0 else GOOD for i in range(400)]
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path, row_group_size=50)
    rejected = str(tmp_path / "bad.parquet")
    calls = []

    def progress(rows, body):
        calls.append(rows)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with LoopbackServer() as server:
        with pytest.raises(KeyboardInterrupt):
            bulkwire.load_parquet(path, targets.ravendb(server.url, server.database),
                                  max_errors=100, rejected=rejected, batch_rows=25,
                                  progress=progress)
    rows = rejected_rows(rejected)  # a whole Parquet file, holding the rows set aside so far
    assert rows and set(rows) <= set(bad(kinds)) and len(rows) == len(set(rows))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp") or ".partial" in n]


def test_a_killed_process_leaves_only_a_log_named_partial(tmp_path):
    """A log cut short (a process killed while writing) is read up to its last whole
    batch; nothing named like the rejected file exists until the load ends."""
    spec = rejects_module._RejectSpec(str(tmp_path / "bad.parquet"),
                                      pa.schema([("id", pa.int64()), ("_source_file", pa.string()),
                                                 ("_row", pa.int64()), ("_reason", pa.string())]),
                                      None, "test")
    log = rejects_module._Rejects(spec, "main")
    log.add(pa.record_batch({"id": pa.array([1, 2], pa.int64())}), "s", [1, 2], ["a", "b"])
    log.add(pa.record_batch({"id": pa.array([3], pa.int64())}), "s", [3], ["c"])
    log.file.flush()
    size = os.path.getsize(log.path)
    with open(log.path, "r+b") as f:
        f.truncate(size - 10)  # the last batch cut short
    assert not os.path.exists(spec.path)
    assert [b.num_rows for b in rejects_module._log_batches(log.path)] == [2]
    assert rejects_module._finish(spec, "parquet", keep_logs=False) == 2
    assert rejected_rows(spec.path) == [1, 2] and not os.path.exists(log.path)


def test_the_fixed_rejected_file_loads_and_completes_the_data(tmp_path):
    kinds = [GOOD] * 20
    kinds[2], kinds[9], kinds[13] = NULL_ID, SHORT, HOLE
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        target = targets.ravendb(server.url, server.database)
        bulkwire.load_parquet(path, target, max_errors=3, rejected=rejected)
        table = pq.read_table(rejected)
        rows = table.column("_row").to_pylist()
        fixed = table.set_column(0, "id", pa.array(rows, pa.int64())).set_column(
            1, "v", pa.array([[float(r), 0.5] for r in rows], pa.list_(pa.float32())))
        pq.write_table(fixed, str(tmp_path / "fixed.parquet"))
        # the three added columns are not read: neither fields nor refused
        again = bulkwire.load_parquet(str(tmp_path / "fixed.parquet"), target)
        assert again.rows == 3 and again.rejected_rows == 0
        assert loaded_rows(server) == list(range(20))
        assert set(server.documents["embeddings/9"]) == {"v", "@metadata"}


def test_an_ipc_source_gives_an_ipc_rejected_file(tmp_path):
    kinds = [GOOD, NULL_ID, GOOD, SHORT]
    path = str(tmp_path / "s.arrow")
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, source(kinds).schema) as w:
        w.write_table(source(kinds))
    rejected = str(tmp_path / "bad.arrow")
    bulkwire.load_parquet(path, targets.request_file(str(tmp_path / "o.json")), max_errors=2,
                          rejected=rejected)
    with pa.memory_map(rejected) as f:
        assert sorted(pa.ipc.open_file(f).read_all().column("_row").to_pylist()) == [1, 3]


def test_arrow_data_gives_a_parquet_rejected_file(tmp_path):
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        result = bulkwire.load_arrow(source([GOOD, HOLE, GOOD]),
                                     targets.ravendb(server.url, server.database),
                                     max_errors=1, rejected=rejected)
        assert loaded_rows(server) == [0, 2] and result.rejected_rows == 1
    assert pq.read_table(rejected).column("_source_file").to_pylist() == ["Arrow data"]


def test_the_command_line_exits_4_when_rows_were_rejected(tmp_path, capsys):
    kinds = [GOOD] * 10
    kinds[7] = NULL_ID
    path = str(tmp_path / "s.parquet")
    pq.write_table(source(kinds), path)
    rejected = str(tmp_path / "bad.parquet")
    out = str(tmp_path / "o.json")
    assert main(["load", path, "--out", out, "-q", "--max-errors", "1",
                 "--rejected", rejected]) == EXIT_REJECTED
    assert f"1 rows rejected, written to {rejected}" in capsys.readouterr().out
    assert main(["load", path, "--out", out, "-q", "--max-errors", "0%",
                 "--rejected", rejected]) == EXIT_INPUT
    assert "more than max_errors allows" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["load", path, "--out", out, "-q", "--max-errors", "1"])
    assert usage.value.code == 2
    assert "--max-errors needs --rejected" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# the round trip: every row confirmed or rejected, exactly once


def _every_row_once(kinds: list[str], server: LoopbackServer, rejected: str) -> None:
    """Each row loaded or rejected, once; a null id or a null in a vector always rejected;
    the vectors loaded all of one length (the length most of the first batch's have: a
    short vector is good when most of them are short)."""
    got = loaded_rows(server)
    thrown = rejected_rows(rejected)
    assert len(thrown) == len(set(thrown))
    assert not set(got) & set(thrown)
    assert sorted(got + thrown) == list(range(len(kinds)))
    assert {i for i, kind in enumerate(kinds) if kind in (NULL_ID, HOLE)} <= set(thrown)
    lengths = {1 if kinds[i] == SHORT else 2 for i in got}
    assert len(lengths) <= 1
    if lengths == {2}:
        assert thrown == bad(kinds)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=120),
       group=st.integers(1, 50), batch=st.integers(1, 40), threads=st.sampled_from([1, 2]),
       stream=st.booleans())
def test_every_row_is_confirmed_or_rejected_exactly_once(tmp_path_factory, kinds, group, batch,
                                                         threads, stream):
    folder = tmp_path_factory.mktemp("trip")
    rejected = str(folder / "bad.parquet")
    with LoopbackServer() as server:
        target = targets.ravendb(server.url, server.database)
        if stream:
            bulkwire.load_arrow(source(kinds), target, max_errors=len(kinds), rejected=rejected,
                                batch_rows=batch, threads=threads)
        else:
            path = str(folder / "s.parquet")
            pq.write_table(source(kinds), path, row_group_size=group)
            bulkwire.load_parquet(path, target, max_errors=len(kinds), rejected=rejected,
                                  batch_rows=batch, threads=threads)
        _every_row_once(kinds, server, rejected)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=150),
       group=st.integers(1, 30), first_limit=st.integers(0, 8))
def test_a_resumed_load_neither_resends_nor_loses_rejected_rows(tmp_path_factory, kinds, group,
                                                                first_limit):
    """A first run stops past a small max_errors; the resumed run (a larger one) ends the
    load: the server holds each good row, the rejected file each bad row, once."""
    folder = tmp_path_factory.mktemp("resume")
    path = str(folder / "s.parquet")
    pq.write_table(source(kinds), path, row_group_size=group)
    rejected, state = str(folder / "bad.parquet"), str(folder / "state.json")
    with LoopbackServer() as server:
        target = targets.ravendb(server.url, server.database)
        try:
            bulkwire.load_parquet(path, target, max_errors=first_limit, rejected=rejected,
                                  resume=state, batch_rows=7)
        except TooManyRejected:
            pass
        sent_before = len(server.documents)
        result = bulkwire.load_parquet(path, target, max_errors=len(kinds), rejected=rejected,
                                       resume=state, batch_rows=7)
        assert result.rows + result.skipped_rows >= len(kinds) - len(bad(kinds))
        assert result.rows <= len(kinds) - sent_before + len(kinds)  # bounded resend
        _every_row_once(kinds, server, rejected)


@pytest.mark.parametrize("resume", [False, True])
def test_worker_processes_write_their_rejected_rows_to_one_file(tmp_path, resume):
    kinds = [KINDS[(i * 7) % 11 % 4] if i % 5 == 0 else GOOD for i in range(600)]
    paths = []
    for part in range(3):
        paths.append(str(tmp_path / f"p{part}.parquet"))
        pq.write_table(source(kinds).slice(part * 200, 200), paths[-1], row_group_size=40)
    rejected = str(tmp_path / "bad.parquet")
    with LoopbackServer() as server:
        result = bulkwire.load_parquet(paths, targets.ravendb(server.url, server.database),
                                       max_errors=600, rejected=rejected, workers=2,
                                       resume=str(tmp_path / "st") if resume else None)
        got = set(server.documents)
    table = pq.read_table(rejected)
    keys = sorted(zip(table.column("_source_file").to_pylist(),
                      table.column("_row").to_pylist()))
    expected = sorted((paths[i // 200], i % 200) for i in bad(kinds))
    assert keys == expected and result.rejected_rows == len(expected) and result.workers == 2
    # the ids of the slices restart at each part's own ids: count the good rows per part
    assert len(got) == len(kinds) - len(bad(kinds))


# --------------------------------------------------------------------------------------------
# CQL: refused by the client, and by the node


def test_cql_rows_refused_by_the_client_or_by_the_node_are_set_aside(tmp_path):
    """id bigint, v int, a ascii: a null id and text that is not ASCII are refused by the
    client; the node refuses (Invalid) every id ending in 3. The node stored each other
    row."""
    stored: list[int] = []
    lock = threading.Lock()

    def answer(n, body):
        values = execute_values(body)
        (row_id,) = struct.unpack(">q", values[0])
        if row_id % 10 == 3:
            return error(0x2200, f"id {row_id} is not welcome")
        with lock:
            stored.append(row_id)
        return None

    n = 200
    ids = [None if i % 50 == 7 else i for i in range(n)]
    text = ["caf\u00e9" if i % 60 == 11 else "ok" for i in range(n)]
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                             "v": pa.array(range(n), pa.int32()),
                             "a": pa.array(text, pa.string())}), path, row_group_size=64)
    rejected = str(tmp_path / "bad.parquet")
    with FakeNode(columns=[("id", "partition_key", BIGINT), ("v", "regular", INT),
                           ("a", "regular", ASCII)], answer_execute=answer) as node:
        result = bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t"),
                                       max_errors=n, rejected=rejected, batch_rows=30)
    client = {i for i in range(n) if i % 50 == 7 or i % 60 == 11}
    server_side = {i for i in range(n) if i % 10 == 3} - client
    table = pq.read_table(rejected).to_pylist()
    reasons = {row["_row"]: row["_reason"] for row in table}
    assert sorted(reasons) == sorted(client | server_side)
    assert all("refused by the server" in reasons[i] and "not welcome" in reasons[i]
               for i in server_side)
    assert "not ASCII" in reasons[11] and "null" in reasons[7]
    # the rows in flight when a row is refused are sent again (an INSERT written twice
    # holds the same row): each row stored, at least once
    assert set(stored) == set(range(n)) - client - server_side
    assert result.rows == len(set(stored)) and result.rejected_rows == len(reasons)


def test_the_sinks_take_rejected_rows_but_refuse_a_dry_run_naming_it(tmp_path):
    from bulkwire._arrow_sink import SinkConfig

    with pytest.raises(ValueError, match="dry_run is not an option of a sink"):
        SinkConfig(options=LoadOptions(dry_run=True), described=targets.ravendb(
            "http://127.0.0.1:1", "db"))
    taken = SinkConfig(options=LoadOptions(max_errors=0, rejected=str(tmp_path)),
                       described=targets.ravendb("http://127.0.0.1:1", "db"))
    assert taken.options.rejected == str(tmp_path)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(ascii_ok=st.lists(st.booleans(), min_size=1, max_size=120), batch=st.integers(1, 50),
       threads=st.sampled_from([1, 2]))
def test_cql_refusals_found_only_by_the_encoder_any_density(ascii_ok, batch, threads):
    """Text that is not ASCII has no Arrow mask: each refusal is found by the encoder, the
    rows after it judged on; any number of them per batch, each row stored or rejected."""
    import tempfile

    stored, answer = storing_answer()

    n = len(ascii_ok)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.parquet")
        pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()),
                                 "a": pa.array(["ok" if good else "\u00e9" for good in ascii_ok],
                                               pa.string())}), path)
        rejected = os.path.join(folder, "bad.parquet")
        with FakeNode(columns=[("id", "partition_key", BIGINT), ("a", "regular", ASCII)],
                      answer_execute=answer) as node:
            result = bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t"),
                                           max_errors=n, rejected=rejected, batch_rows=batch,
                                           threads=threads)
        thrown = rejected_rows(rejected)
    assert thrown == [i for i, good in enumerate(ascii_ok) if not good]
    assert stored == {i for i, good in enumerate(ascii_ok) if good} and result.rows == len(stored)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=4, max_size=200),
       group=st.integers(1, 40), batch=st.integers(1, 30), resume=st.booleans())
def test_every_row_once_with_worker_processes(tmp_path_factory, kinds, group, batch, resume):
    folder = tmp_path_factory.mktemp("workers")
    half = len(kinds) // 2
    paths = [str(folder / "a.parquet"), str(folder / "b.parquet")]
    pq.write_table(source(kinds).slice(0, half), paths[0], row_group_size=group)
    pq.write_table(source(kinds).slice(half), paths[1], row_group_size=group)
    rejected = str(folder / "bad.parquet")
    with LoopbackServer() as server:
        bulkwire.load_parquet(paths, targets.ravendb(server.url, server.database),
                              max_errors=len(kinds), rejected=rejected, batch_rows=batch,
                              workers=2, resume=str(folder / "st") if resume else None)
        got = sorted(int(name.rsplit("/", 1)[1]) for name in server.documents)
    table = pq.read_table(rejected)
    thrown = sorted(row + (half if name == paths[1] else 0) for name, row in zip(
        table.column("_source_file").to_pylist(), table.column("_row").to_pylist()))
    assert len(thrown) == len(set(thrown)) and not set(got) & set(thrown)
    assert sorted(got + thrown) == list(range(len(kinds)))


def test_rejecting_rows_does_not_import_pandas(tmp_path):
    """The rejected rows are taken, found and written without ``pa.array`` or ``to_numpy``,
    which import pandas (a third of a second of CPU for a load that rejects one row)."""
    import subprocess
    import sys

    pytest.importorskip("pandas")  # without it, nothing to prove
    folder = tmp_path / "é"  # a file name outside ASCII, written back as it is
    folder.mkdir()
    kinds = [GOOD] * 30
    for at, kind in ((2, NULL_ID), (9, SHORT), (10, HOLE), (20, NULL_ID), (29, SHORT)):
        kinds[at] = kind
    path = str(folder / "s.parquet")
    pq.write_table(source(kinds), path)
    bad_file = str(tmp_path / "bad.parquet")
    out = str(tmp_path / "out")
    code = ("import sys, bulkwire\n"
            f"r = bulkwire.load_parquet({path!r}, bulkwire.targets.request_file({out!r}),"
            f" max_errors=10, rejected={bad_file!r}, batch_rows=8)\n"
            "print(r.rejected_rows, 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5", "False"]
    table = pq.read_table(bad_file)
    assert sorted(table.column("_row").to_pylist()) == bad(kinds)
    assert set(table.column("_source_file").to_pylist()) == {path}
    reasons = dict(zip(table.column("_row").to_pylist(), table.column("_reason").to_pylist()))
    assert reasons[2].startswith("column 'id'") and reasons[9].startswith("column 'v'")


CQL_KINDS = KINDS + ("not ascii",)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(CQL_KINDS), min_size=1, max_size=150),
       group=st.integers(1, 60), batch=st.integers(1, 70), threads=st.sampled_from([1, 2]))
def test_cql_bad_rows_of_every_kind_anywhere_have_their_own_reason(kinds, group, batch,
                                                                   threads):
    """id bigint (the key), v vector<float, 2>, a ascii: a null id, a vector of another
    length or holding a null, text that is not ASCII, anywhere in a batch (first, last, all
    of it): each bad row is in the rejected file with the reason the encoder gives it on
    its own, and the node stores every other row."""
    import tempfile

    from bulkwire import _core
    from bulkwire.errors import RowError
    from cql_fake_node import FLOAT_VECTOR

    stored, answer = storing_answer()

    data = source(kinds).append_column("a", pa.array(
        ["caf\u00e9" if kind == "not ascii" else "ok" for kind in kinds], pa.string()))
    want = {}
    for i in range(len(kinds)):
        try:
            _core.cql_execute_bodies(data.slice(i, 1), b"p", ["id", "v", "a"],
                                     ["bigint", "vector<float, 2>", "ascii"], [0], 1,
                                     first_row=i)
        except RowError as exc:
            want[i] = f"column {exc.column!r}: {exc.reason}"
    assert sorted(want) == bad(kinds)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "t.parquet")
        pq.write_table(data, path, row_group_size=group)
        rejected = os.path.join(folder, "bad.parquet")
        with FakeNode(columns=[("id", "partition_key", BIGINT),
                               ("v", "regular", FLOAT_VECTOR % 2), ("a", "regular", ASCII)],
                      answer_execute=answer) as node:
            result = bulkwire.load_parquet(path, targets.cql(node.address, "ks", "t"),
                                           max_errors=len(kinds), rejected=rejected,
                                           batch_rows=batch, threads=threads)
        table = pq.read_table(rejected) if want else None
    got = ({} if table is None else
           dict(zip(table.column("_row").to_pylist(), table.column("_reason").to_pylist())))
    assert got == want
    if table is not None:  # the rows themselves, as read
        assert table.column("a").to_pylist() == [data.column("a")[i].as_py() for i in
                                                  table.column("_row").to_pylist()]
    assert stored == set(range(len(kinds))) - set(want)
    assert (result.rows, result.rejected_rows) == (len(stored), len(want))
