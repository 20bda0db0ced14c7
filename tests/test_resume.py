"""Resumable loads: ``bulkwire load --resume STATE`` / ``load_parquet(resume=)`` records each
unit of work (a file's run of row groups, one request) once the server answered its request,
and a re-run skips those and sends the rest with skipOverwriteIfUnchanged. A load killed
halfway (SIGKILL), then resumed, delivers every document."""
from __future__ import annotations

import contextlib
import errno
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
    return sum(stop - first for source in state["sources"]
               for first, stop in source["done"]) * row_group


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
        r = bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
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
        r = bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state)
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
            bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state, batch_rows=50, progress=fail_midway)
        recorded = json.load(open(state))
        ok = [q for q in server.requests if q.succeeded]
        assert confirmed_rows(state, row_group) == sum(len(q.commands) for q in ok)
        assert any(not q.succeeded for q in server.requests)
        assert recorded["version"] == 2 and confirmed_rows(state, row_group) == 1000
        assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []
        server.fail_after_bytes = None
        r = bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state, batch_rows=50)
        assert r.rows + r.skipped_rows == 2000
        assert server.documents == documents(tables)


def test_a_changed_file_or_other_options_are_refused_naming_them(tmp_path):
    write_parts(str(tmp_path / "d"), [300, 300], row_group=100)
    state = str(tmp_path / "state.json")
    with LoopbackServer() as server:
        bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                              resume=state)
        requests = len(server.requests)
        with pytest.raises(ValueError, match=r"resume state '.*state.json' was written by a load "
                                             r"with other options"):
            bulkwire.load_parquet(str(tmp_path / "d"),
                                  bulkwire.targets.ravendb(server.url, "db", collection="Other"),
                                  resume=state)
        other = str(tmp_path / "d" / "part-001.parquet")
        pq.write_table(pq.read_table(other).slice(0, 299), other)  # a changed file
        with pytest.raises(ValueError, match=r"'.*part-001.parquet' changed since resume state "
                                             r"'.*state.json' recorded it"):
            bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state)
        with pytest.raises(ValueError, match=r"resume state .* records '.*part-001.parquet', which "
                                             r"is not part of this load's dataset"):
            bulkwire.load_parquet(str(tmp_path / "d" / "part-000.parquet"),
                                  bulkwire.targets.ravendb(server.url, "db"), resume=state)
        open(state, "w").write("{not json")
        with pytest.raises(ValueError, match=r"resume state '.*state.json' cannot be read"):
            bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state)
        json.dump({"version": 99}, open(state, "w"))
        with pytest.raises(ValueError, match=r"is not a bulkwire resume state of version 2"):
            bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state)
        assert len(server.requests) == requests  # refused before any request
        with pytest.raises(ValueError, match="resume needs a target that confirms each unit"):
            bulkwire.load_parquet(str(tmp_path / "d"), resume=state)
        with pytest.raises(ValueError, match="resume needs files"):
            bulkwire.load_parquet(pa.table({"id": [1]}),
                                  bulkwire.targets.ravendb(server.url, "db"), resume=state)


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
            bulkwire.load_parquet(str(folder / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state, batch_rows=batch_rows, progress=interrupt)
        except KeyboardInterrupt:
            pass
        confirmed = {c["Id"] for q in server.requests if q.succeeded for c in q.commands}
        r = bulkwire.load_parquet(str(folder / "d"), bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state, batch_rows=batch_rows)
        assert r.skipped_rows == len(confirmed) and r.rows + r.skipped_rows == sum(sizes)
        assert server.documents == documents(tables)


# ------------------------------------------------------------------------------ the target

def test_a_state_of_another_target_is_refused_naming_both(tmp_path):
    """A state written by a load into database 'staging' on one server refuses a load of the
    same files into 'prod' on another server (and into another database of the same server,
    and into the same database name on another server): ValueError naming both targets and
    the state file; the second server receives nothing and the state is unchanged."""
    tables = write_parts(str(tmp_path / "d"), [300, 300], row_group=100)
    state = str(tmp_path / "state.json")
    with LoopbackServer("staging") as staging, LoopbackServer("prod") as prod, \
            LoopbackServer("staging") as twin:
        first = bulkwire.load_parquet(str(tmp_path / "d"),
                                      bulkwire.targets.ravendb(staging.url, "staging"),
                                      resume=state)
        assert first.rows == 600 and staging.documents == documents(tables)
        recorded = open(state).read()
        for server, database in ((prod, "prod"), (staging, "prod"), (twin, "staging")):
            with pytest.raises(ValueError) as info:
                bulkwire.load_parquet(str(tmp_path / "d"),
                                      bulkwire.targets.ravendb(server.url, database),
                                      resume=state)
            message = str(info.value)
            assert type(info.value).__name__ == "ResumeStateError" and info.value.path == state
            assert message.startswith(f"resume state {state!r} was written by a load into "
                                      f"database 'staging' at http://{staging.url[7:]}; this "
                                      f"load is into database {database!r} at "
                                      f"http://{server.url[7:]}"), message
            assert open(state).read() == recorded
        assert prod.log == [] and prod.documents == {}  # not even asked for an operation id
        assert twin.log == []


def test_the_same_cluster_in_another_order_is_the_same_target(tmp_path):
    """A cluster's nodes given in another order, or spelled otherwise (scheme and host case,
    the default port, a trailing slash, a str for a single node), are the same target; a
    set of nodes with one more or one less is another target."""
    from bulkwire.testing import LoopbackCluster

    write_parts(str(tmp_path / "d"), [300], row_group=100)
    state = str(tmp_path / "state.json")
    with LoopbackCluster(3) as cluster:
        urls = cluster.urls
        r = bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(urls, "db"),
                                  resume=state)
        assert r.rows == 300
        spelled = [u.replace("http://", "HTTP://") + "/" for u in reversed(urls)]
        again = bulkwire.load_parquet(str(tmp_path / "d"),
                                      bulkwire.targets.ravendb(spelled, "db"), resume=state)
        assert (again.rows, again.skipped_rows) == (0, 300)
        for other in (urls[:2], urls + ["http://127.0.0.1:9"], urls[0]):
            with pytest.raises(ValueError, match="was written by a load into database 'db' at "
                                                 "http://"):
                bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(other, "db"),
                                      resume=state)
    single = str(tmp_path / "single.json")
    with LoopbackServer() as server:  # one URL as a str, then as a list of one node
        bulkwire.load_parquet(str(tmp_path / "d"), bulkwire.targets.ravendb(server.url, "db"),
                              resume=single)
        again = bulkwire.load_parquet(str(tmp_path / "d"),
                                      bulkwire.targets.ravendb([server.url + "/"], "db"),
                                      resume=single)
        assert again.skipped_rows == 300


@pytest.mark.parametrize("url, key", [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("HTTP://Raven.Example.COM:8080/", "http://raven.example.com:8080"),
    ("http://raven.example.com", "http://raven.example.com:80"),
    ("https://raven.example.com", "https://raven.example.com:443"),
    ("https://raven.example.com:443/", "https://raven.example.com:443"),
    ("http://[::1]:8080", "http://[::1]:8080"),
    ("http://host:8080/raven/", "http://host:8080/raven"),
])
def test_a_server_is_recorded_by_scheme_host_port_and_root(url, key):
    from bulkwire.load.targets import _resume_target

    assert _resume_target(url, "db") == {"database": "db", "servers": [key]}


def test_a_state_never_records_credentials(tmp_path):
    """A URL with a password is refused before a state is opened, and the refusal does not
    repeat it; what a state records is the servers' normalized URLs."""
    from bulkwire.load.datasets import _row_groups
    from bulkwire.load.resume import _ResumeState
    from bulkwire.load.targets import ServerDescription, _resume_target

    with pytest.raises(ValueError) as refused:
        _resume_target(["http://user:secret@Node-B:8080/", "http://node-a"], "db")
    assert "secret" not in str(refused.value)
    write_parts(str(tmp_path / "d"), [10], row_group=5)
    files = [str(tmp_path / "d" / "part-000.parquet")]
    state = str(tmp_path / "state.json")
    target = ServerDescription(url=["http://Node-B:8080/", "http://node-a"], database="db")
    with _ResumeState(state, files, [_row_groups(files[0])], {"o": 1}, target):
        pass
    assert json.loads(open(state).read())["target"] == {"database": "db", "servers": [
        "http://node-a:80", "http://node-b:8080"]}


# ------------------------------------------------------------------------------ hostile states

SANITIZER_BUILD = bool(os.environ.get("BULKWIRE_SANITIZER"))


@contextlib.contextmanager
def bounded(seconds: float, extra_bytes: int = 1 << 30):
    """Runs the block with a deadline (SIGALRM raises TimeoutError) and, outside the
    sanitizer build (whose shadow memory is address space too), at most ``extra_bytes`` more
    address space than the process has now (MemoryError past it): a state that makes the
    load hang or expand fails the test instead of the machine."""
    import resource

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous_handler = signal.signal(signal.SIGALRM, expire)
    previous_limit = resource.getrlimit(resource.RLIMIT_AS)
    if not SANITIZER_BUILD:
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        limit = size + extra_bytes
        if previous_limit[1] != resource.RLIM_INFINITY:
            limit = min(limit, previous_limit[1])
        resource.setrlimit(resource.RLIMIT_AS, (limit, previous_limit[1]))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        resource.setrlimit(resource.RLIMIT_AS, previous_limit)


def partial_state(folder, server) -> tuple[str, str, list, int]:
    """A dataset of 2 files of 4 row groups each, and a real state of a load into ``server``
    stopped after its first units: (dataset, state path, tables, rows)."""
    tables = write_parts(str(folder / "d"), [200, 200], row_group=50)
    state = str(folder / "state.json")

    def stop(rows, body):
        if rows >= 150:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bulkwire.load_parquet(str(folder / "d"), bulkwire.targets.ravendb(server.url, "db"),
                              resume=state, batch_rows=50, progress=stop)
    return str(folder / "d"), state, tables, 400


def load_or_refuse(dataset: str, state: str, server, total: int):
    """The load with ``state``: it completes (every row sent or skipped) or raises the
    ValueError naming the state file; anything else fails the test."""
    try:
        with bounded(30):
            result = bulkwire.load_parquet(dataset, bulkwire.targets.ravendb(server.url, "db"),
                                           resume=state, batch_rows=50)
    except ValueError as exc:
        assert type(exc).__name__ == "ResumeStateError", repr(exc)
        assert exc.path == state and repr(state) in str(exc), str(exc)
        assert len(str(exc)) < 2000
        return exc
    assert result.rows + result.skipped_rows == total
    with open(state) as f:
        assert sum(b - a for source in json.load(f)["sources"] for a, b in source["done"]) == 8
    return result


def edit(state: str, change) -> None:
    with open(state) as f:
        data = json.load(f)
    data = change(data) or data
    with open(state, "w") as f:
        json.dump(data, f)


HAND_EDITS = [
    ("a list", lambda s: [s], "is not a bulkwire resume state (a JSON object"),
    ("no version", lambda s: s.pop("version") and None, "of version 2 (its version: None)"),
    ("version as text", lambda s: s.update(version="2"), "of version 2 (its version: '2')"),
    ("version 1", lambda s: s.update(version=1), "earlier bulkwire (version 1"),
    ("no sources", lambda s: s.pop("sources") and None, "has no 'sources'"),
    ("an unknown member", lambda s: s.update(stop=1), "unknown member 'stop'"),
    ("target a str", lambda s: s.update(target="http://x"), "target is 'http://x'"),
    ("a server not a str", lambda s: s["target"].update(servers=[5]),
     "target.servers[0] must be a str"),
    ("a server not http", lambda s: s["target"].update(servers=["ftp://x"]),
     "target.servers[0] 'ftp://x': a server URL starts with http:// or https://"),
    ("options a list", lambda s: s.update(options=[]), "options are [], not an object"),
    ("sources an object", lambda s: s.update(sources={"a": 1}), "sources are {'a': 1}"),
    ("a source without done", lambda s: s["sources"][0].pop("done") and None,
     "sources[0] is {"),
    ("size as text", lambda s: s["sources"][1].update(size="300"), "sources[1] is {"),
    ("mtime a float", lambda s: s["sources"][0].update(mtime_ns=1.5), "sources[0] is {"),
    ("path null", lambda s: s["sources"][0].update(path=None), "sources[0] is {"),
    ("a file twice", lambda s: s["sources"].append(s["sources"][0]), "twice"),
    ("done a str", lambda s: s["sources"][0].update(done="all"), "sources[0] is {"),
    ("a range as an object", lambda s: s["sources"][0].update(done=[{"first": 0, "stop": 1}]),
     "sources[0].done[0] is {'first': 0, 'stop': 1}, not a range [first, stop) of the 4 row "
     "groups of"),
    ("a range of 10^12", lambda s: s["sources"][0].update(done=[[0, 10 ** 12]]),
     "done[0] is [0, 1000000000000], not a range"),
    ("a range of 10^4000", lambda s: s["sources"][0].update(done=[[0, 10 ** 4000]]),
     "done[0] is [0, 1000"),
    ("a reversed range", lambda s: s["sources"][0].update(done=[[2, 1]]), "done[0] is [2, 1]"),
    ("an empty range", lambda s: s["sources"][0].update(done=[[1, 1]]), "done[0] is [1, 1]"),
    ("a negative range", lambda s: s["sources"][0].update(done=[[-1, 2]]), "done[0] is [-1, 2]"),
    ("overlapping ranges", lambda s: s["sources"][0].update(done=[[0, 2], [1, 3]]),
     "done[1] is [1, 3]"),
    ("ranges out of order", lambda s: s["sources"][0].update(done=[[2, 3], [0, 1]]),
     "done[1] is [0, 1]"),
    ("a float in a range", lambda s: s["sources"][0].update(done=[[0, 2.0]]), "done[0] is [0, 2.0]"),
    ("a bool in a range", lambda s: s["sources"][0].update(done=[[False, 2]]),
     "done[0] is [False, 2]"),
    ("three numbers", lambda s: s["sources"][0].update(done=[[0, 1, 2]]), "done[0] is [0, 1, 2]"),
    ("another file", lambda s: s["sources"][0].update(path="/elsewhere/x.parquet"),
     "records '/elsewhere/x.parquet', which is not part of this load's dataset"),
    ("a file missing", lambda s: s["sources"].pop() and None, "does not record '"),
]


@pytest.mark.timeout(120)
def test_hand_edited_states_raise_a_value_error_naming_the_file(tmp_path):
    """Valid JSON of the wrong shape, ranges that are not ranges of the file's row groups
    (one of 10^12 groups among them): a ValueError naming the state file and what is wrong,
    at once, before any request; the CLI prints it and exits 2, without a traceback."""
    from bulkwire.cli import main

    with LoopbackServer() as server:
        dataset, state, tables, total = partial_state(tmp_path, server)
        original = open(state).read()
        requests = len(server.requests)
        for name, change, says in HAND_EDITS:
            open(state, "w").write(original)
            edit(state, change)
            started = time.monotonic()
            refused = load_or_refuse(dataset, state, server, total)
            assert isinstance(refused, ValueError), name
            assert says in str(refused), (name, str(refused))
            assert time.monotonic() - started < 5, name
        assert len(server.requests) == requests  # refused before any request
        edit(state, lambda s: s["sources"][0].update(done=[{"first": 0}]))
        done = subprocess.run([sys.executable, "-m", "bulkwire", "load", dataset, "--url",
                               server.url, "--database", "db", "--resume", state, "-q"],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=PKG))
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"bulkwire: error: resume state {state!r} sources[0]."
                                      f"done[0] is {{'first': 0}}, not a range"), done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("text", [
    b"[" * 100_000 + b"]" * 100_000,  # deeper than the JSON reader recurses
    b'{"version": 2, "target": ' + b"9" * 5000 + b"}",  # an integer too long to read
    b'{"version": 2, \xff}',  # not UTF-8
    b"",
])
def test_unreadable_states_raise_a_value_error_naming_the_file(tmp_path, text):
    with LoopbackServer() as server:
        dataset, state, tables, total = partial_state(tmp_path, server)
        open(state, "wb").write(text)
        refused = load_or_refuse(dataset, state, server, total)
        assert isinstance(refused, ValueError) and "cannot be read: it is not JSON" in str(refused)


@pytest.mark.timeout(120)
def test_a_state_larger_than_any_of_its_dataset_is_not_read(tmp_path):
    with LoopbackServer() as server:
        dataset, state, tables, total = partial_state(tmp_path, server)
        with open(state, "r+") as f:
            data = json.load(f)
            f.seek(0)
            f.write(json.dumps(data) + " " * (8 << 20))
        refused = load_or_refuse(dataset, state, server, total)
        assert "is larger than any state of this dataset" in str(refused)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 10) |
                    st.integers(-10 ** 15, 10 ** 15) | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) |
                    st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def mutate(data, draw):
    """``data`` (a JSON value) with one value somewhere in it replaced, removed or added."""
    if isinstance(data, (dict, list)) and data and draw(st.integers(0, 3)):
        keys = list(data) if isinstance(data, dict) else list(range(len(data)))
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["descend", "descend", "replace", "remove", "add"]))
        if action == "descend":
            data[key] = mutate(data[key], draw)
        elif action == "replace":
            data[key] = draw(JSON)
        elif action == "remove":
            del data[key]
        elif isinstance(data, dict):
            data[draw(st.text(max_size=8))] = draw(JSON)
        else:
            data.insert(key, draw(JSON))
        return data
    return draw(JSON)


@pytest.mark.timeout(600)
def test_mutated_states_resume_or_raise_a_value_error(tmp_path):
    """Any JSON value put anywhere in a real state file (replacing, removing or adding a
    member or an element, ranges of up to 10^15 groups among them): the load either resumes
    and completes, or raises the ValueError naming the state file; never another exception,
    within 30 s and 1 GiB of address space each."""
    with LoopbackServer() as server:
        dataset, state, tables, total = partial_state(tmp_path, server)
        original = json.load(open(state))
        outcomes = []

        @settings(max_examples=min(60, settings.default.max_examples), deadline=None,
                  database=None)
        @given(st.data())
        def check(data):
            mutated = json.loads(json.dumps(original))
            if data.draw(st.booleans()):  # other confirmed ranges: well formed or not
                edges = data.draw(st.lists(st.integers(-1, 6), max_size=6))
                pairs = [list(p) for p in zip(edges[::2], edges[1::2])]
                mutated["sources"][data.draw(st.integers(0, 1))]["done"] = pairs
            else:
                mutated = mutate(mutated, data.draw)
            with open(state, "w") as f:
                json.dump(mutated, f)
            outcomes.append(type(load_or_refuse(dataset, state, server, total)).__name__)

        check()
        assert {"ResumeStateError", "LoadResult"} <= set(outcomes)
        with open(state, "w") as f:  # the real state still resumes, and every row arrives
            json.dump(original, f)
        assert isinstance(load_or_refuse(dataset, state, server, total), bulkwire.LoadResult)
        assert server.documents == documents(tables)


# ------------------------------------------------------------------------------ two loads at once

def cli_load(dataset: str, server, state: str, *extra: str) -> list:
    return [sys.executable, "-m", "bulkwire", "load", dataset, "--url", server.url,
            "--database", "db", "--resume", state, "-q", *extra]


@pytest.mark.timeout(180)
def test_a_second_load_sharing_the_state_file_is_refused(tmp_path):
    """Two processes given the same state file at once: while the first one loads (held
    mid-request by a stalled server), the second exits 2 naming the state file and the
    load that holds it, and sends nothing; the first completes, and its state is whole."""
    tables = write_parts(str(tmp_path / "d"), [400, 400], row_group=100)
    state = str(tmp_path / "state.json")
    env = dict(os.environ, PYTHONPATH=PKG)
    with LoopbackServer() as server:
        server.stall(after_bytes=1)
        first = subprocess.Popen(cli_load(str(tmp_path / "d"), server, state), env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert server.wait_stalled(60), first.communicate(timeout=1)
            held = open(state).read()
            second = subprocess.run(cli_load(str(tmp_path / "d"), server, state), env=env,
                                    capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stderr
            assert second.stderr == (f"bulkwire: error: resume state {state!r} is in use by "
                                     f"another load (it holds {state + '.lock'!r}): wait for "
                                     f"that load to end, or give this one its own state file\n")
            assert len(server.requests) == 1 and open(state).read() == held
            server.resume()
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0, err
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert "loaded 800 rows" in out
        again = bulkwire.load_parquet(str(tmp_path / "d"),
                                      bulkwire.targets.ravendb(server.url, "db"), resume=state)
        assert (again.rows, again.skipped_rows) == (0, 800)
        assert server.documents == documents(tables)


# ------------------------------------------------------------------------------ failed writes

def a_state(tmp_path):
    from bulkwire.load.datasets import _row_groups, _Unit
    from bulkwire.load.resume import _ResumeState
    from bulkwire.load.targets import ServerDescription

    write_parts(str(tmp_path / "d"), [300], row_group=100)
    files = [str(tmp_path / "d" / "part-000.parquet")]
    state = str(tmp_path / "state.json")
    made = _ResumeState(state, files, [_row_groups(files[0])], {"o": 1},
                        ServerDescription(url="http://h:80", database="db"))
    return made, state, _Unit(files[0], 0, 1, 0, 100)


class Full:
    """A text file whose writes stop, part-way, on a full disk."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, text):
        self.f.write(text[:len(text) // 2])
        self.f.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.f, name)


def fail_with(error):
    def failing(*args, **kwargs):
        raise error
    return failing


@pytest.mark.parametrize("step", ["open", "write", "fsync", "replace", "folder fsync",
                                  "interrupted write"])
def test_a_failed_state_write_keeps_the_old_state_and_no_temporary_file(tmp_path, monkeypatch,
                                                                        step):
    """A failure at each step of writing the state (no file, a full disk part-way through,
    fsync, the rename, the folder's fsync, Ctrl-C): the confirmation raises (OSError naming
    the state file, or the KeyboardInterrupt), no temporary file stays, and the state on
    disk is the one before (or, when only the folder's fsync failed, the new one)."""
    import builtins

    from bulkwire.load import resume as load

    state, path, unit = a_state(tmp_path)
    try:
        before = open(path).read()
        real_open, real_fsync = builtins.open, os.fsync
        full = OSError(errno.ENOSPC, "No space left on device")
        if step == "open":
            monkeypatch.setattr(load, "open", fail_with(OSError(errno.EMFILE, "Too many open "
                                                                               "files")),
                                raising=False)
        elif step == "write":
            monkeypatch.setattr(load, "open", lambda *a, **k: Full(real_open(*a, **k)),
                                raising=False)
        elif step == "fsync":
            monkeypatch.setattr(os, "fsync", fail_with(OSError(errno.EIO, "I/O error")))
        elif step == "replace":
            monkeypatch.setattr(os, "replace", fail_with(full))
        elif step == "folder fsync":
            def fsync(fd):
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    raise OSError(errno.EIO, "I/O error")
                return real_fsync(fd)
            monkeypatch.setattr(os, "fsync", fsync)
        else:
            def interrupted(*a, **k):
                f = real_open(*a, **k)
                f.write = fail_with(KeyboardInterrupt())
                return f
            monkeypatch.setattr(load, "open", interrupted, raising=False)
        expected = KeyboardInterrupt if step == "interrupted write" else OSError
        with pytest.raises(expected) as info:
            state.confirm(unit)
        monkeypatch.undo()
        if expected is OSError:
            assert str(info.value).startswith(f"[Errno {info.value.errno}] cannot write resume "
                                              f"state {path!r} (")
        assert sorted(os.listdir(tmp_path)) == ["d", "state.json", "state.json.lock"]
        written = json.load(open(path))
        if step == "folder fsync":
            assert written["sources"][0]["done"] == [[0, 1]]
        else:
            assert open(path).read() == before and written["sources"][0]["done"] == []
    finally:
        state.close()


NO_SPACE_SCRIPT = r"""
import errno, json, os, sys
import bulkwire
from bulkwire.testing import LoopbackServer

dataset, folder, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
state, filler = os.path.join(folder, "state.json"), os.path.join(folder, "filler")

def fill(rows, body):  # the disk fills up while the first request is under way
    if not os.path.exists(filler):
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        finally:
            os.close(fd)

if __name__ == "__main__":
    out = {}
    with LoopbackServer() as server:
        try:
            bulkwire.load_parquet(dataset, bulkwire.targets.ravendb(server.url, "db"),
                                  resume=state, batch_rows=50, workers=workers, progress=fill)
            out["outcome"] = "returned"
        except OSError as exc:
            out["outcome"], out["errno"], out["message"] = "OSError", exc.errno, str(exc)
        out["files"] = sorted(os.listdir(folder))
        out["state"] = json.load(open(state))
        out["answered"] = sum(q.succeeded for q in server.requests)
        os.unlink(filler)
        again = bulkwire.load_parquet(dataset, bulkwire.targets.ravendb(server.url, "db"),
                                      resume=state, batch_rows=50, workers=workers)
        out["again"] = [again.rows, again.skipped_rows, len(server.documents)]
    print(json.dumps(out))
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_disk_fails_the_load_and_keeps_the_old_state(tmp_path, workers):
    """The state on a real, small tmpfs (mounted in a user namespace) that fills up while
    the first request is under way: once the server confirms it, the state cannot be
    written (ENOSPC); the load raises OSError naming the state file, leaves no temporary
    file, and the state on disk is the one before. With room again, a run with the same
    state sends every row."""
    import shutil

    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user namespaces here to mount a small tmpfs in (the failure paths "
                    "are also covered by test_a_failed_state_write_keeps_the_old_state_and_"
                    "no_temporary_file)")
    write_parts(str(tmp_path / "d"), [300, 300], row_group=100)
    (tmp_path / "small").mkdir()
    (tmp_path / "script.py").write_text(NO_SPACE_SCRIPT)
    small = str(tmp_path / "small")
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=64k tmpfs "$1" && exec '
                                       f'"$2" "$3" "$4" "$1" "$5"', "sh", small, sys.executable,
         str(tmp_path / "script.py"), str(tmp_path / "d"), str(workers)],
        capture_output=True, text=True, timeout=150, env=dict(os.environ, PYTHONPATH=PKG))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["outcome"] == "OSError" and out["errno"] == errno.ENOSPC, out
    assert f"cannot write resume state {os.path.join(small, 'state.json')!r}" in out["message"]
    assert out["files"] == ["filler", "state.json", "state.json.lock"]  # no temporary file
    assert [s["done"] for s in out["state"]["sources"]] == [[], []]  # the state before
    assert out["answered"] >= 1  # a confirmation it could not record
    assert out["again"] == [600, 0, 600]
