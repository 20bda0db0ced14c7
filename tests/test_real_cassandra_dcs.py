"""The CQL load into a keyspace replicated by NetworkTopologyStrategy over two data centres,
against real Cassandra 5.0 nodes (``--server cassandra``).

Two nodes, one per data centre (GossipingPropertyFileSnitch: ``dc1`` on DC1_NODE, ``dc2`` on
DC2_NODE), one cluster for the module; the keyspace holds one replica in each data centre
(``{'dc1': 1, 'dc2': 1}``). The load computes NetworkTopologyStrategy placement and sends
each row to its replica in the local data centre (the contact point's), which coordinates
the write: a LOCAL_* level is local to the client's data centre.

- Both nodes up: each consistency level, the contact point in one data centre and in the
  other, loads every row; a read at ALL, and a read of each data centre's own replica, give
  back what was sent; the contact point's node coordinated every row, the other none (the
  write counts each node reports, ``system_views.coordinator_write_latency``).
- A keyspace with no replica in the contact point's data centre (``{'dc1': 1}``, the contact
  point in dc2): LOCAL_ONE and LOCAL_QUORUM fail before any row is sent, naming the
  keyspace, its replication and dc2; ONE and QUORUM send every row to the dc1 node, which
  coordinates them all.
- The dc2 node stopped: LOCAL_ONE, LOCAL_QUORUM and ONE load every row through the dc1 node;
  EACH_QUORUM and QUORUM fail with the dc1 node's *unavailable* answer, naming the node, the
  consistency and every unit not confirmed; a contact point in dc2 alone is a ConnectError
  naming it. With dc2 back, ``bulkwire load --resume`` completes the failed load: every row
  once, in both data centres.

Every test reads back what the server stored and compares it with what was sent.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

import bulkwire.targets
from bulkwire.cql_placement import NoLocalReplica
from bulkwire.errors import ConnectError, CqlServerError
from bulkwire.load.cql_target import CONSISTENCY_LEVELS
from servers.cassandra import connect

pytestmark = pytest.mark.cassandra_server

KEYSPACE = "dcs"
DC1_NODE, DC2_NODE = "127.0.0.61", "127.0.0.62"
PKG = str(pathlib.Path(bulkwire.__file__).resolve().parent.parent)
ROWS = 1200
#: Rows per unit of work (Parquet row group) and per batch.
GROUP = 300
#: Seconds a node may take to be seen up or down by the other (gossip).
GOSSIP_DEADLINE = 120.0


@pytest.fixture(scope="module")
def cluster():
    """The two nodes, ``[dc1's, dc2's]``, and the keyspace."""
    from servers.cassandra import running

    with running(2, first=61, datacenters=["dc1", "dc2"]) as nodes:
        for node, dc in zip(nodes, ("dc1", "dc2")):
            with connect([node.address]) as s:
                assert s.execute("SELECT data_center FROM system.local").one()[0] == dc
        with connect([nodes[0].address]) as s:
            assert {str(r.peer): r.data_center for r in s.execute(
                "SELECT peer, data_center FROM system.peers_v2")} == {nodes[1].address: "dc2"}
            s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                      "{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")
        yield nodes


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, dict]:
    """A Parquet file of ROWS rows (``id`` bigint, ``v`` text) in units of GROUP rows, and
    what it holds by id."""
    path = tmp_path_factory.mktemp("dcs") / "rows.parquet"
    values = {i: f"row {i:06d}" for i in range(ROWS)}
    pq.write_table(pa.table({"id": pa.array(list(values), pa.int64()),
                             "v": list(values.values())}), str(path), row_group_size=GROUP)
    return str(path), values


def make_table(s, name: str) -> str:
    s.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    s.execute(f"CREATE TABLE {KEYSPACE}.{name} (id bigint PRIMARY KEY, v text)")
    return name


def read(s, table: str, level: int) -> dict:
    rows = s.execute(SimpleStatement(f"SELECT id, v FROM {KEYSPACE}.{table}",
                                     consistency_level=level, fetch_size=5000))
    return {row.id: row.v for row in rows}


def at_all(node, table: str) -> dict:
    """The table as a read at ALL coordinated by ``node`` sees it: every replica answered."""
    with connect([node.address], timeout=60.0) as s:
        return read(s, table, ConsistencyLevel.ALL)


def replica_of(node, table: str) -> dict:
    """The table as ``node``'s data centre holds it: a read at LOCAL_ONE that ``node``
    coordinates is answered by its data centre's one replica, ``node`` itself."""
    with connect([node.address], timeout=60.0) as s:
        return read(s, table, ConsistencyLevel.LOCAL_ONE)


def coordinated(nodes, table: str) -> dict:
    """{address: writes of ``table`` the node coordinated} (each node's own count)."""
    return coordinated_in(nodes, KEYSPACE, table)


def coordinated_in(nodes, keyspace: str, table: str) -> dict:
    counts = {}
    for node in nodes:
        if node.process is None or node.process.poll() is not None:
            continue
        with connect([node.address], timeout=60.0) as s:
            row = s.execute("SELECT count FROM system_views.coordinator_write_latency "
                            "WHERE keyspace_name = %s AND table_name = %s",
                            (keyspace, table)).one()
        counts[node.address] = row.count if row else 0
    return counts


def status_of(observer, address: str) -> str:
    """'U' or 'D': what ``observer``'s gossip says of ``address`` (``nodetool status``)."""
    for line in observer.nodetool("status").splitlines():
        fields = line.split()
        if len(fields) > 1 and fields[1] == address:
            return fields[0][0]
    return "?"


def wait_status(observer, address: str, want: str) -> None:
    deadline = time.monotonic() + GOSSIP_DEADLINE
    while status_of(observer, address) != want:
        assert time.monotonic() < deadline, (
            f"{observer.address} does not see {address} {want}:\n{observer.nodetool('status')}")
        time.sleep(1.0)


def unconfirmed_rows(error: BaseException) -> set[int]:
    return {row for _, first, stop in error.unconfirmed for row in range(first, stop)}


def cli(*args: str) -> subprocess.CompletedProcess:
    """``bulkwire ARGS`` in a child process (which shares this process's network)."""
    env = dict(os.environ, PYTHONPATH=PKG)
    return subprocess.run([sys.executable, "-m", "bulkwire", *args], capture_output=True,
                          text=True, env=env, timeout=300)


# --------------------------------------------------------------------------------------------
# both data centres up


LEVELS = ["LOCAL_ONE", "LOCAL_QUORUM", "ONE", "QUORUM", "EACH_QUORUM"]


@pytest.mark.parametrize("contact", ["dc1", "dc2"])
def test_every_level_stores_every_row_in_both_data_centres(cluster, data, contact):
    """With the contact point in either data centre, a load at each level returns having
    stored every row as sent: a read at ALL and each data centre's own replica give back
    the file. Every row went to the contact point's data centre: its node coordinated them
    all, the other node none."""
    path, values = data
    local, remote = cluster if contact == "dc1" else cluster[::-1]
    host = local.address
    with connect([cluster[0].address], timeout=60.0) as s:
        for level in LEVELS:
            table = make_table(s, f"up_{contact}_{level.lower()}")
            result = bulkwire.load_parquet(
                path, bulkwire.targets.cql(host, KEYSPACE, table, consistency=level),
                batch_rows=GROUP)
            assert result.rows == ROWS, level
            assert at_all(cluster[0], table) == values, level
            copies = {node.address: replica_of(node, table) for node in cluster}
            counts = coordinated(cluster, table)
            print(f"\ncontact {host} {level}: coordinated {counts}; rows per data centre "
                  f"{ {a: len(c) for a, c in copies.items()} }")
            for address, copy in copies.items():
                assert copy == values, (level, address)
            assert counts[local.address] >= ROWS and counts[remote.address] == 0, \
                (level, counts)


ONLY_DC1 = "dcs_only_dc1"


@pytest.mark.parametrize("level", ["LOCAL_ONE", "LOCAL_QUORUM", "ONE", "QUORUM"])
def test_a_keyspace_without_a_replica_in_the_local_data_centre(cluster, data, level):
    """A keyspace replicated in dc1 only (``{'dc1': 1}``), both nodes up, the contact point
    in dc2: at LOCAL_ONE and LOCAL_QUORUM no dc2 node could write a row, and the load fails
    before sending any, naming the keyspace, its replication and dc2; at ONE and QUORUM
    every row goes to its replica, the dc1 node, which coordinates them all."""
    path, values = data
    dc1, dc2 = cluster
    with connect([dc1.address], timeout=60.0) as s:
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {ONLY_DC1} WITH replication = "
                  "{'class': 'NetworkTopologyStrategy', 'dc1': 1}")
        table = f"t_{level.lower()}"
        s.execute(f"DROP TABLE IF EXISTS {ONLY_DC1}.{table}")
        s.execute(f"CREATE TABLE {ONLY_DC1}.{table} (id bigint PRIMARY KEY, v text)")
    if level.startswith("LOCAL_"):
        with pytest.raises(NoLocalReplica) as caught:
            bulkwire.load_parquet(
                path, bulkwire.targets.cql(dc2.address, ONLY_DC1, table, consistency=level),
                batch_rows=GROUP)
        print(f"\nonly dc1, {level}: {caught.value}")
        assert str(caught.value).startswith(
            f"keyspace {ONLY_DC1} (replication {{'class': "
            "'org.apache.cassandra.locator.NetworkTopologyStrategy', 'dc1': '1'}) has no "
            "replica in the local data centre dc2"), caught.value
        assert coordinated_in(cluster, ONLY_DC1, table) == {dc1.address: 0, dc2.address: 0}
        with connect([dc1.address], timeout=60.0) as s:
            assert s.execute(SimpleStatement(f"SELECT count(*) FROM {ONLY_DC1}.{table}",
                                             consistency_level=ConsistencyLevel.ALL)
                             ).one()[0] == 0
        return
    result = bulkwire.load_parquet(
        path, bulkwire.targets.cql(dc2.address, ONLY_DC1, table, consistency=level),
        batch_rows=GROUP)
    assert result.rows == ROWS
    with connect([dc1.address], timeout=60.0) as s:
        stored = {row.id: row.v for row in s.execute(SimpleStatement(
            f"SELECT id, v FROM {ONLY_DC1}.{table}",
            consistency_level=ConsistencyLevel.ALL))}
    counts = coordinated_in(cluster, ONLY_DC1, table)
    print(f"\nonly dc1, {level}: loaded; coordinated {counts}")
    assert stored == values
    assert counts[dc1.address] >= ROWS and counts[dc2.address] == 0, counts


# --------------------------------------------------------------------------------------------
# the dc2 node down


def test_with_dc2_down_local_levels_load_each_quorum_fails_and_resume_completes(
        cluster, data, tmp_path):
    """The dc2 node stopped (and seen down by dc1's). From the dc1 contact point, LOCAL_ONE,
    LOCAL_QUORUM and ONE store every row in dc1 (the rows of dc2's ranges go to the dc1 node,
    which coordinates them); QUORUM and EACH_QUORUM fail with the dc1 node's *unavailable*
    answer naming it and the level, storing nothing, every unit named not confirmed; the
    dc2 contact point alone is a ConnectError naming it. With dc2 back, ``--resume`` at
    EACH_QUORUM completes that load: every row stored once, in both data centres; the
    rows loaded at LOCAL_ONE while dc2 was down are read back whole at ALL."""
    path, values = data
    dc1, dc2 = cluster
    state = str(tmp_path / "state.json")
    with connect([dc1.address], timeout=60.0) as s:
        local = {level: make_table(s, f"down_{level.lower()}")
                 for level in ("LOCAL_ONE", "LOCAL_QUORUM", "ONE")}
        failing = {level: make_table(s, f"down_{level.lower()}")
                   for level in ("QUORUM", "EACH_QUORUM")}
    dc2.stop()
    try:
        wait_status(dc1, dc2.address, "D")
        for level, table in local.items():
            result = bulkwire.load_parquet(
                path, bulkwire.targets.cql(dc1.address, KEYSPACE, table, consistency=level),
                batch_rows=GROUP)
            assert result.rows == ROWS, level
            assert replica_of(dc1, table) == values, level
            counts = coordinated(cluster, table)
            print(f"\ndc2 down, {level}: coordinated {counts}")
            assert counts == {dc1.address: counts[dc1.address]} and \
                counts[dc1.address] >= ROWS, counts

        for level, table in failing.items():
            with pytest.raises(CqlServerError) as caught:
                bulkwire.load_parquet(
                    path, bulkwire.targets.cql(dc1.address, KEYSPACE, table, consistency=level),
                    batch_rows=GROUP, resume=state if level == "EACH_QUORUM" else None)
            error = caught.value
            print(f"\ndc2 down, {level}: {error!r}; notes {getattr(error, '__notes__', [])}; "
                  f"unconfirmed {error.unconfirmed}")
            assert error.code == 0x1000, error  # unavailable
            assert f"{dc1.address}:9042" in str(error), error
            assert error.consistency == CONSISTENCY_LEVELS[level], error
            assert (error.required, error.alive) == ((2, 1) if level == "QUORUM" else (1, 0))
            partial = replica_of(dc1, table)
            assert partial == {}, level  # unavailable: not one write was attempted
            assert unconfirmed_rows(error) == set(values), level

        with pytest.raises(ConnectError) as caught:
            bulkwire.load_parquet(
                path, bulkwire.targets.cql(dc2.address, KEYSPACE, local["LOCAL_ONE"]))
        assert f"{dc2.address}:9042" in str(caught.value), caught.value
    finally:
        dc2.start()
        dc2.wait_ready(time.monotonic() + 300)
    wait_status(dc1, dc2.address, "U")
    wait_status(dc2, dc1.address, "U")

    table = failing["EACH_QUORUM"]
    done = cli("load", path, "--cql", dc1.address, "--keyspace", KEYSPACE, "--table", table,
               "--consistency", "EACH_QUORUM", "--resume", state)
    assert done.returncode == 0, done.stderr
    print(f"\nresumed: {done.stdout.strip()} coordinated {coordinated(cluster, table)}")
    assert at_all(dc1, table) == values
    for node in cluster:
        assert replica_of(node, table) == values, node.address
    with connect([dc1.address], timeout=60.0) as s:
        assert s.execute(SimpleStatement(f"SELECT count(*) FROM {KEYSPACE}.{table}",
                                         consistency_level=ConsistencyLevel.ALL)).one()[0] \
            == ROWS
    again = cli("load", path, "--cql", dc1.address, "--keyspace", KEYSPACE, "--table", table,
                "--consistency", "EACH_QUORUM", "--resume", state)
    assert again.returncode == 0, again.stderr
    print(f"resumed again: {again.stdout.strip()}")

    for level, table in local.items():
        print(f"dc2 back, {level}: dc2's replica holds {len(replica_of(dc2, table))} rows "
              f"before a read at ALL")
        assert at_all(dc1, table) == values, level
