"""Parquet and Arrow into a CQL table through the load pipeline (``bulkwire.load_parquet``
and ``load_arrow`` with ``bulkwire.targets.cql``, ``bulkwire load --cql``), against a real
Cassandra 5.0 node (``--server cassandra``): every bound type read back by the official
driver equal to what pyarrow holds, a 768-dimension vector table with an SAI index, the
schema checked before any row, resume, worker processes, the server's errors, the command
line, and a node killed in the middle of a load.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import bulkwire.targets
from bulkwire.errors import ConnectionLostError, CqlServerError, SchemaMismatchError, \
    TransportTimeoutError
from bulkwire.load.cql_target import CqlDescription, parse_host
from servers.cassandra import connect
from cassandra import ConsistencyLevel, OperationTimedOut, ReadTimeout
from test_cql_statements import COLUMNS, arrow_batch, expected

server = pytest.mark.cassandra_server

KEYSPACE = "bulkwire_load"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def session(cassandra_node):
    with connect([cassandra_node.address], timeout=60.0) as s:
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        yield s


def make_table(session, name: str, columns: str) -> str:
    session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    session.execute(f"CREATE TABLE {KEYSPACE}.{name} ({columns})")
    return name


def every_type_table(session, name: str) -> str:
    columns = ", ".join(f"{n} {t}" for n, (t, _) in COLUMNS.items())
    return make_table(session, name, f"{columns}, PRIMARY KEY ((s, k), ti)")


def read_back(session, table: str, names: list[str]) -> dict:
    rows = session.execute(f"SELECT {', '.join(names)} FROM {KEYSPACE}.{table}")
    return {(row[0], row[1]): row for row in rows}


def test_the_host_spelling_is_normalized():
    assert parse_host(" LocalHost ") == ("localhost", 9042)
    assert parse_host("[0:0::1]:9142") == ("::1", 9142)
    for bad in ("", "h:0", "h:x", "[::1", ":9042"):
        with pytest.raises(ValueError):
            parse_host(bad)
    a = CqlDescription.of(["127.0.0.1", "127.0.0.1:9042"], "k", "t")
    assert a.resume_identity() == {"hosts": ["127.0.0.1:9042"], "keyspace": "k", "table": "t"}
    with pytest.raises(ValueError, match="consistency"):
        CqlDescription.of("h", "k", "t", consistency="SERIAL")


@server
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 40))
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_type_is_read_back_as_pyarrow_holds_it(cassandra_node, session, tmp_path_factory,
                                                    seed, rows):
    """Parquet of every bound type (nulls included), loaded, read back by the driver: each
    cell equals what pyarrow reads from the file."""
    table = every_type_table(session, "every_type")
    batch = arrow_batch(seed).slice(0, rows)
    path = str(tmp_path_factory.mktemp("p") / "t.parquet")
    pq.write_table(pa.Table.from_batches([batch]), path, row_group_size=16)
    result = bulkwire.load_parquet(
        path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table), batch_rows=7)
    assert result.rows == rows
    assert result.target == f"{KEYSPACE}.{table} at {cassandra_node.address}:9042"
    written = pq.read_table(path).to_batches()
    names = ["s", "k", *[n for n in COLUMNS if n not in ("s", "k")]]
    found = read_back(session, table, names)
    assert len(found) == rows
    back = pa.Table.from_batches(written, schema=batch.schema).combine_chunks().to_batches()
    source = back[0] if back else batch
    for i in range(rows):
        row = found[(source.column("s")[i].as_py(), source.column("k")[i].as_py())]
        for j, name in enumerate(names):
            assert row[j] == expected(source, name, i), (name, i)


def vector_table(session, name: str, dim: int = 768) -> str:
    make_table(session, name, f"id bigint PRIMARY KEY, emb vector<float, {dim}>")
    session.execute(f"CREATE CUSTOM INDEX IF NOT EXISTS {name}_ann ON {KEYSPACE}.{name}(emb) "
                    "USING 'StorageAttachedIndex'")
    return name


def vector_file(path: str, rows: int, dim: int = 768, row_group: int = 500, start: int = 0):
    import numpy as np

    rng = np.random.default_rng(rows + start)
    values = rng.standard_normal((rows, dim), dtype=np.float32)
    table = pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                      "emb": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), dim)})
    pq.write_table(table, path, row_group_size=row_group)
    return table


@server
def test_a_768_dim_vector_table_with_an_sai_index(cassandra_node, session, tmp_path):
    table = vector_table(session, "vectors")
    source = vector_file(str(tmp_path / "v.parquet"), 3000)
    result = bulkwire.load_parquet(
        str(tmp_path / "v.parquet"), bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    assert result.rows == 3000
    got = {row.id: row.emb for row in session.execute(f"SELECT id, emb FROM {KEYSPACE}.{table}")}
    assert len(got) == 3000
    emb = source.column("emb").combine_chunks()
    for i in (0, 1, 1499, 2999):
        assert got[i] == pytest.approx(emb[i].as_py(), abs=0, rel=0)


@server
def test_the_schema_is_checked_before_any_row(cassandra_node, session, tmp_path):
    table = make_table(session, "small", "id bigint PRIMARY KEY, name text, n int")
    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"],
                             "n": pa.array([1, 2], pa.int64())}), path)
    with pytest.raises(SchemaMismatchError) as caught:
        bulkwire.load_parquet(path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    assert (caught.value.column, caught.value.arrow_type, caught.value.cql_type) == (
        "n", "int64", "int")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "other": [1]}), path)
    with pytest.raises(ValueError, match="'other' of .* is not a column of bulkwire_load.small"):
        bulkwire.load_parquet(path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    pq.write_table(pa.table({"name": ["a"]}), path)
    with pytest.raises(ValueError, match="no column 'id', a primary key column"):
        bulkwire.load_parquet(path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    # a regular column the data lacks is left unset; columns= picks the data's columns
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", None],
                             "junk": [1.5, 2.5]}), path)
    assert bulkwire.load_parquet(
        path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table),
        columns=["id", "name"]).rows == 2
    assert sorted(session.execute(f"SELECT id, name, n FROM {KEYSPACE}.{table}")) == [
        (1, "a", None), (2, None, None)]
    assert session.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0] == 2


@server
def test_a_server_error_names_the_server(cassandra_node, tmp_path):
    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), path)
    with pytest.raises(ValueError, match=f"table no_such_keyspace.t does not exist at "
                                         f"{cassandra_node.address}:9042"):
        bulkwire.load_parquet(
            path, bulkwire.targets.cql(cassandra_node.address, "no_such_keyspace", "t"))


@server
def test_a_row_the_server_refuses_fails_the_load_naming_its_source_row(cassandra_node,
                                                                        session, tmp_path):
    """A text key longer than 64 KiB: the server refuses that row; the load raises the
    server's message and the row's number in the file, never returns."""
    table = make_table(session, "refused", "k text PRIMARY KEY, v int")
    path = str(tmp_path / "r.parquet")
    keys = [f"k{i}" for i in range(50)]
    keys[37] = "x" * 70000
    pq.write_table(pa.table({"k": keys, "v": pa.array(range(50), pa.int32())}), path,
                   row_group_size=20)
    with pytest.raises(CqlServerError) as caught:
        bulkwire.load_parquet(path, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table),
                              batch_rows=8)
    assert caught.value.source_row == 37
    assert f"{cassandra_node.address}:9042" in str(caught.value)
    assert "(source row 37; " in str(caught.value)
    assert caught.value.unconfirmed


def vector_parts(folder, parts: int, rows: int):
    """``parts`` files of ``rows`` rows each (ids counting on from file to file), row groups
    of 100, in ``folder``."""
    folder.mkdir()
    for part in range(parts):
        vector_file(str(folder / f"part-{part}.parquet"), rows, dim=8, row_group=100,
                    start=part * rows)
    return folder


@server
def test_resume_sends_exactly_the_missing_units(cassandra_node, session, tmp_path):
    """A load stopped midway (its progress callback raises) leaves a state; the resumed load
    sends the units not confirmed, and every row is in the table."""
    table = vector_table(session, "resumed", dim=8)
    folder = vector_parts(tmp_path / "d", 3, 400)
    state = str(tmp_path / "state.json")

    def stop_after(rows: int, body: int) -> None:
        if rows >= 500:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bulkwire.load_parquet(
            str(folder), bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table),
            resume=state, batch_rows=50, progress=stop_after)
    first = session.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0]
    assert 500 <= first < 1200
    result = bulkwire.load_parquet(
        str(folder), bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table), resume=state,
        batch_rows=50)
    # the units the first run confirmed (every one of their rows stored), and no more
    assert 500 - 100 <= result.skipped_rows <= first and result.skipped_rows % 100 == 0
    assert result.rows == 1200 - result.skipped_rows
    assert session.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0] == 1200


@server
def test_worker_processes(cassandra_node, session, tmp_path):
    # no vector index: two workers put twice the window in flight, and Cassandra 5.0.9 fails
    # index writes past its processors + 1 in flight (docs/cql.md); the workers are the subject
    table = make_table(session, "workers", "id bigint PRIMARY KEY, emb vector<float, 8>")
    folder = vector_parts(tmp_path / "d", 2, 700)
    result = bulkwire.load_parquet(
        str(folder), bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table), workers=2)
    assert (result.rows, result.workers) == (1400, 2)
    ids = sorted(row.id for row in session.execute(f"SELECT id FROM {KEYSPACE}.{table}"))
    assert ids == list(range(1400))


@server
def test_load_arrow(cassandra_node, session):
    table = make_table(session, "arrow", "id bigint PRIMARY KEY, name text")
    data = pa.table({"id": pa.array([5, 6], pa.int64()), "name": ["five", "six"]})
    assert bulkwire.load_arrow(
        data, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table)).rows == 2
    assert sorted(session.execute(f"SELECT id, name FROM {KEYSPACE}.{table}")) == [
        (5, "five"), (6, "six")]
    with pytest.raises(ValueError, match="workers is load_parquet's"):
        bulkwire.load_arrow(data, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table),
                            workers=2)


@server
def test_the_command_line(cassandra_node, session, tmp_path):
    table = vector_table(session, "cli", dim=8)
    path = str(tmp_path / "c.parquet")
    vector_file(path, 250, dim=8)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__))))
    done = subprocess.run([sys.executable, "-m", "bulkwire", "load", path, "--cql",
                           cassandra_node.address, "--keyspace", KEYSPACE, "--table", table,
                           "--consistency", "one"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"loaded 250 rows from {path} into {KEYSPACE}.{table}" in done.stdout + done.stderr
    assert session.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0] == 250
    refused = subprocess.run([sys.executable, "-m", "bulkwire", "load", path, "--cql",
                              cassandra_node.address, "--url", "http://x", "--keyspace",
                              KEYSPACE, "--table", table], capture_output=True, text=True,
                             env=env, timeout=300)
    assert refused.returncode != 0 and "--cql excludes --url" in refused.stderr


@pytest.fixture(scope="module")
def own_node():
    """A node of this module's own (it is killed)."""
    from servers.cassandra import running

    with running(1, first=31) as nodes:
        yield nodes[0]


def load_killing(node, path: str, *args, kill_after: int = 20_000, **kwargs):
    """``bulkwire.load_parquet(path, bulkwire.targets.cql(*args, **kwargs))`` (a timeout of
    10 s) in a thread, ``node`` killed (SIGKILL) once the load reported ``kill_after`` rows
    done: what the load returned, or the exception it raised."""
    outcome: list = []
    reached = threading.Event()

    def progress(done: int, total: int) -> None:
        if done >= kill_after:
            reached.set()

    def load() -> None:
        try:
            target = bulkwire.targets.cql(*args, timeout=10.0, **kwargs)
            outcome.append(bulkwire.load_parquet(path, target, progress=progress))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        finally:
            reached.set()

    worker = threading.Thread(target=load)
    worker.start()
    assert reached.wait(300), "the load made no progress"
    assert worker.is_alive(), "the load ended before the node was killed"
    os.killpg(node.process.pid, signal.SIGKILL)
    worker.join(300)
    assert not worker.is_alive() and len(outcome) == 1
    return outcome[0]


@server
def test_a_killed_node_fails_the_load_naming_the_unacknowledged_rows(own_node, tmp_path):
    with connect([own_node.address], timeout=60.0) as s:
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        table = make_table(s, "killed", "id bigint PRIMARY KEY, emb vector<float, 8>")
    path = str(tmp_path / "k.parquet")
    vector_file(path, 100_000, dim=8, row_group=10_000)
    error = load_killing(own_node, path, own_node.address, KEYSPACE, table)
    assert isinstance(error, BaseException), "the load returned normally"
    assert isinstance(error, (ConnectionLostError, TransportTimeoutError)), repr(error)
    # the rows not acknowledged are the source's, in the message and the attribute alike
    assert error.source_unacknowledged and "not acknowledged" in str(error)
    assert error.unconfirmed and error.unconfirmed[0][0] == path


MEASURE = r"""
import resource, sys
import bulkwire
path, host, keyspace, table, small = sys.argv[1:]
target = bulkwire.targets.cql(host, keyspace, table)
bulkwire.load_parquet(small, target, batch_rows=500)  # every import made
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
result = bulkwire.load_parquet(path, target, batch_rows=500)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(result.rows, before, after)
"""


@server
def test_memory_stays_bounded_on_a_file_much_larger_than_the_window(cassandra_node, session,
                                                                   tmp_path):
    """A file of about 100 MB of vectors (25,000 rows of 1,024 dimensions), read in row groups
    of 1,000 rows and batches of 500: the peak memory of the loading process grows by far
    less than the file. The table has no vector index: what is measured is the client, and
    the node stores plain rows many times faster than it indexes them."""
    table = "memory"
    make_table(session, table, "id bigint PRIMARY KEY, emb vector<float, 1024>")
    path, small = str(tmp_path / "big.parquet"), str(tmp_path / "small.parquet")
    vector_file(path, 25_000, dim=1024, row_group=1000)
    vector_file(small, 1000, dim=1024, row_group=500, start=25_000)
    size = os.path.getsize(path)
    assert size > 90e6
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__))))
    done = subprocess.run([sys.executable, "-c", MEASURE, path, cassandra_node.address,
                           KEYSPACE, table, small], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    rows, before, after = map(int, done.stdout.split())
    assert rows == 25_000
    assert after - before < size / 4, (before, after, size)


# --------------------------------------------------------------------------------------------
# three nodes


@server
def test_each_row_goes_to_the_node_the_driver_routes_it_to(cassandra_cluster, tmp_path,
                                                           monkeypatch):
    """Against three nodes: the rows each node was sent are counted, per node, equal to the
    driver's count of the rows whose token that node owns (its token map)."""
    import collections
    import struct

    from cassandra.metadata import Murmur3Token

    from bulkwire.load import _cql_session

    hosts = [node.address for node in cassandra_cluster]
    sent: list[tuple[str, int]] = []
    run = _cql_session._CqlSession._run

    def counted(self, job, encoded, rows):  # job: (node, shard)
        done = run(self, job, encoded, rows)
        sent.append((self.nodes[job[0]][0], len(encoded[1]) // 8 if rows is None else len(rows)))
        return done

    monkeypatch.setattr(_cql_session._CqlSession, "_run", counted)
    path = str(tmp_path / "c.parquet")
    vector_file(path, 3000, dim=8)
    with connect(hosts, timeout=60.0) as s:
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        table = make_table(s, "routed", "id bigint PRIMARY KEY, emb vector<float, 8>")
        result = bulkwire.load_parquet(path, bulkwire.targets.cql(hosts[0], KEYSPACE, table),
                                       batch_rows=256)
        assert result.rows == 3000
        token_map = s.cluster.metadata.token_map
        s.cluster.refresh_schema_metadata()
        expected_counts = collections.Counter(
            next(iter(token_map.get_replicas(KEYSPACE, Murmur3Token.from_key(
                struct.pack(">q", i))))).address for i in range(3000))
        assert s.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0] == 3000
    got: collections.Counter = collections.Counter()
    for address, count in sent:
        got[address] += count
    assert got == expected_counts
    assert len(got) == 3


@given(st.dictionaries(st.sampled_from("abcdef"),
                       st.lists(st.integers(-(1 << 63) + 1, (1 << 63) - 1), min_size=1,
                                max_size=4), min_size=2),
       st.integers(-(1 << 63) + 1, (1 << 63) - 1))
def test_a_ring_without_a_tokens_primary_routes_it_to_its_next_replica(nodes, token):
    """Where a row goes when its primary replica is down: the second replica
    (SimpleStrategy) of the whole ring."""
    import struct

    from bulkwire.cql_statements import TokenRing

    tokens = [t for values in nodes.values() for t in values]
    assume(len(set(tokens)) == len(tokens))  # a token is owned by one node
    ring = TokenRing(nodes, replication_factor=2)
    primary, second = ring.replicas(token)
    rest = ring.without([primary])
    assert rest.addresses[rest.primaries(struct.pack("=q", token))[0]] == second
    with pytest.raises(ValueError, match="no node"):
        ring.without(list(nodes))


@server
def test_a_node_killed_mid_load_with_rf_2_and_one_leaves_every_row_stored(cassandra_cluster,
                                                                           tmp_path):
    """Three nodes, replication factor 2, consistency ONE: a node killed in the middle of the
    load is left out of the ring, its rows not acknowledged go to their next replica, and the
    load returns; once the node is back, every row is in the table. (Last of the cluster's
    tests.)"""
    hosts = [node.address for node in cassandra_cluster]
    path = str(tmp_path / "k.parquet")
    vector_file(path, 100_000, dim=8, row_group=10_000)
    with connect(hosts, timeout=60.0) as s:
        s.execute("CREATE KEYSPACE IF NOT EXISTS bulkwire_rf2 WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("DROP TABLE IF EXISTS bulkwire_rf2.t")
        s.execute("CREATE TABLE bulkwire_rf2.t (id bigint PRIMARY KEY, emb vector<float, 8>)")
    result = load_killing(cassandra_cluster[2], path, hosts[0], "bulkwire_rf2", "t",
                          consistency="ONE")
    assert not isinstance(result, BaseException), repr(result)
    assert result.rows == 100_000
    # a row the killed node acknowledged (at ONE) is in its commit log: it comes back with it
    cassandra_cluster[2].start()
    cassandra_cluster[2].wait_ready(time.monotonic() + 300)
    with connect(hosts, timeout=120.0) as s:
        query = s.prepare("SELECT count(*) FROM bulkwire_rf2.t WHERE token(id) >= ? AND "
                          "token(id) <= ?")
        query.consistency_level = ConsistencyLevel.QUORUM  # both replicas of each row
        step = (1 << 64) // 64
        total = 0
        for low in range(-(1 << 63), (1 << 63) - 1, step):  # short range reads
            bounds = [low, min(low + step - 1, (1 << 63) - 1)]
            for attempt in range(6):  # a node replaying its commit log and hints is slow
                try:
                    total += s.execute(query, bounds, timeout=120).one()[0]
                    break
                except (ReadTimeout, OperationTimedOut):
                    assert attempt < 5, f"the range {bounds} could not be read"
                    time.sleep(5)
        assert total == 100_000


@pytest.mark.parametrize("extra, refused", [
    (["--url", "http://127.0.0.1:8080", "--database", "db"], "--cql excludes --url"),
    (["--out", "x.json"], "--cql excludes --out"),
    (["--zstd"], "--cql excludes --zstd"),
    (["--collection", "Points"], "--cql excludes --collection"),
    (["--username", "u"], "--username and --password go together"),
    (["--insecure"], "--insecure needs --cql-tls with --cql"),
    (["--consistency", "serial"], "--consistency must be one of ANY, ONE, TWO, THREE, QUORUM, "
                                  "ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE (the levels of a "
                                  "write; SERIAL and LOCAL_SERIAL are a conditional update's), "
                                  "not 'serial'"),
])
def test_the_command_line_refuses_what_cql_excludes(tmp_path, capsys, extra, refused):
    from bulkwire.cli import main

    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"id": [1]}), path)
    with pytest.raises(SystemExit) as caught:
        main(["load", path, "--cql", "127.0.0.1", "--keyspace", "k", "--table", "t", *extra])
    assert caught.value.code == 2 and refused in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["load", path, "--keyspace", "k", "--table", "t"])


def test_a_node_that_is_not_there_is_named(tmp_path, capsys):
    """Nothing listens: the load fails before any row, naming the host and port, and the
    command line exits with the server status."""
    from bulkwire.cli import EXIT_SERVER, main
    from bulkwire.errors import ConnectError

    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = str(tmp_path / "s.parquet")
    pq.write_table(pa.table({"id": [1]}), path)
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        bulkwire.load_parquet(path, bulkwire.targets.cql(f"127.0.0.1:{port}", "k", "t"))
    assert main(["load", path, "--cql", f"127.0.0.1:{port}", "--keyspace", "k",
                 "--table", "t"]) == EXIT_SERVER
    assert f"127.0.0.1:{port}" in capsys.readouterr().err
