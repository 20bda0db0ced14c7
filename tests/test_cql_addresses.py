"""Where a CQL load reaches each node: the node that answered at a contact point at that
contact point, the others at the address and port they advertise (``system.peers_v2``, or
``system.peers`` on a server without it) unless ``address_map`` / ``--cql-address-map``
says otherwise.

Against emulated nodes in this process (``cql_nodes``, always) that advertise loopback
addresses where nothing listens, as a node behind a port mapping, a NAT or a tunnel does;
and against real Cassandra 5.0 nodes (``--server cassandra``) whose ``broadcast_rpc_address``
is such an address: one reached through a forwarding port, three reached through an address
map.
"""
from __future__ import annotations

import collections
import os
import socket
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire.targets
from bulkwire.cli import main
from bulkwire.errors import ConnectError
from bulkwire.load import _cql_session
from bulkwire.load.cql_target import CqlDescription, address_map_of
from cql_nodes import EmulatedCluster, free_port_on

ROWS = 600


def data_file(tmp_path, rows: int = ROWS, start: int = 0) -> str:
    path = str(tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                             "v": [f"v{i}" for i in range(start, start + rows)]}), path,
                   row_group_size=200)
    return path


def assert_stored(cluster: EmulatedCluster, rows: int = ROWS, start: int = 0) -> None:
    """Every row stored, with its value, and no other."""
    assert cluster.stored == {i: f"v{i}" for i in range(start, start + rows)}


def sent_to(cluster: EmulatedCluster) -> list[collections.Counter]:
    """Per node: how many times each id was sent to it."""
    return [collections.Counter(node.rows) for node in cluster.nodes]


def assert_routed_to_owners(cluster: EmulatedCluster, rows: int = ROWS) -> None:
    """Each row was sent once, to the node owning its token."""
    want = [collections.Counter() for _ in cluster.nodes]
    for i in range(rows):
        want[cluster.owner(i)][i] += 1
    assert sent_to(cluster) == want


def unreachable(i: int, port: int | None = 9042) -> tuple[str, int | None]:
    """A loopback address where nothing listens (an address a container advertises)."""
    return f"127.0.0.{200 + i}", port


def load_mapped(tmp_path, cluster: EmulatedCluster, address_map: dict) -> None:
    """The file's rows loaded through the cluster's first contact point with
    ``address_map``: every row stored in the cluster."""
    result = bulkwire.load_parquet(
        data_file(tmp_path),
        bulkwire.targets.cql(cluster.contact(0), "ks", "t", address_map=address_map),
        batch_rows=64)
    assert result.rows == ROWS
    assert_stored(cluster)


# --------------------------------------------------------------------------------------------
# the node at the contact point


def test_the_node_answering_at_the_contact_point_is_loaded_there(tmp_path):
    """A node advertising an address where nothing listens (its port mapped elsewhere) is
    loaded at the contact point the load was given."""
    with EmulatedCluster(1, advertised=[unreachable(1, None)]) as cluster:
        result = bulkwire.load_parquet(
            data_file(tmp_path), bulkwire.targets.cql(cluster.contact(), "ks", "t"), batch_rows=64)
        assert result.rows == ROWS
        assert_stored(cluster)
        assert sorted(cluster.nodes[0].rows) == list(range(ROWS))


def test_a_forwarded_contact_point_of_a_cluster_reaches_its_peers_where_they_advertise(
        tmp_path):
    """The contact point is a port of its own (a forward) on another loopback address than
    the node advertises; its peers advertise where they listen (peers_v2's native_port,
    not the contact point's port): every row goes to its token's owner."""
    with EmulatedCluster(3, advertised=[unreachable(1), None, None]) as cluster:
        result = bulkwire.load_parquet(
            data_file(tmp_path), bulkwire.targets.cql(cluster.contact(), "ks", "t"), batch_rows=64)
        assert result.rows == ROWS
        assert_stored(cluster)
        assert_routed_to_owners(cluster)


# --------------------------------------------------------------------------------------------
# the address map


def test_an_address_map_sends_each_advertised_address_where_it_is_reached(tmp_path):
    with EmulatedCluster(3, advertised=[unreachable(i) for i in range(3)]) as cluster:
        address_map = {"127.0.0.201": cluster.contact(1),           # any port of the address
                       "127.0.0.202:9042": cluster.contact(2),      # that port only
                       "127.0.0.202:9043": "127.0.0.1:1"}
        load_mapped(tmp_path, cluster, address_map)
        assert_routed_to_owners(cluster)


def test_without_the_map_the_rows_of_peers_that_cannot_be_reached_go_to_live_nodes(tmp_path):
    with EmulatedCluster(3, advertised=[unreachable(i) for i in range(3)]) as cluster:
        result = bulkwire.load_parquet(
            data_file(tmp_path), bulkwire.targets.cql(cluster.contact(0), "ks", "t"),
            batch_rows=64)
        assert result.rows == ROWS
        assert_stored(cluster)
        assert sorted(cluster.nodes[0].rows) == list(range(ROWS))  # the one node reached
        assert cluster.nodes[1].connections == cluster.nodes[2].connections == 0


def test_a_server_without_peers_v2_is_read_from_system_peers_its_peers_at_the_contact_port(
        tmp_path):
    """Peers listed without a port (system.peers) are reached at the contact point's port;
    a mapped address without a port keeps it."""
    hosts = ["127.0.0.11", "127.0.0.12", "127.0.0.13"]
    port = free_port_on(hosts)
    with EmulatedCluster(3, listen=[(h, port) for h in hosts],
                         advertised=[("127.0.0.11", None), ("127.0.0.12", None),
                                     ("127.0.0.213", None)], peers_v2=False) as cluster:
        result = bulkwire.load_parquet(
            data_file(tmp_path),
            bulkwire.targets.cql(cluster.contact(0), "ks", "t",
                                 address_map={"127.0.0.213": "127.0.0.13"}), batch_rows=64)
        assert result.rows == ROWS
        assert_stored(cluster)
        assert_routed_to_owners(cluster)


def test_the_command_line_takes_the_address_map(tmp_path, capsys):
    with EmulatedCluster(3, advertised=[unreachable(i) for i in range(3)]) as cluster:
        code = main(["load", data_file(tmp_path), "--cql", cluster.contact(0), "--keyspace",
                     "ks", "--table", "t", "--batch-rows", "64",
                     "--cql-address-map", f"127.0.0.201:9042={cluster.contact(1)}",
                     "--cql-address-map", f"127.0.0.202={cluster.contact(2)},127.0.0.209=h:1"])
        assert code == 0, capsys.readouterr().err
        assert f"loaded {ROWS:,} rows" in capsys.readouterr().out
        assert_stored(cluster)
        assert_routed_to_owners(cluster)


@pytest.mark.parametrize("value, words", [
    ("127.0.0.2", "'127.0.0.2' is not FROM=TO"),
    ("db1=127.0.0.1", "'db1' is not an IP address"),
    ("127.0.0.2=", "'127.0.0.2=' is not FROM=TO"),
    ("127.0.0.2:0=127.0.0.1", "the port must be 1..65535"),
    ("127.0.0.2=127.0.0.1:x", "the port 'x' is not a number"),
    ("127.0.0.2=a,,127.0.0.3=b", "'' is not FROM=TO"),
])
def test_a_bad_address_map_entry_is_a_usage_error_naming_it(tmp_path, capsys, value, words):
    with pytest.raises(SystemExit) as caught:
        main(["load", data_file(tmp_path, 1), "--cql", "127.0.0.1", "--keyspace", "k",
              "--table", "t", "--cql-address-map", value])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "--cql-address-map" in err and words in err, err


def test_the_command_line_refuses_an_address_given_twice_or_a_map_without_cql(tmp_path, capsys):
    path = data_file(tmp_path, 1)
    with pytest.raises(SystemExit) as caught:
        main(["load", path, "--cql", "127.0.0.1", "--keyspace", "k", "--table", "t",
              "--cql-address-map", "127.0.0.2=a", "--cql-address-map", "127.0.0.2:9042=b,"
              "0:0::1=c,::1=d"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "--cql-address-map: '0:0::1' and '::1' are the same" in err
    with pytest.raises(SystemExit) as caught:
        main(["load", path, "--out", str(tmp_path / "o.json"), "--cql-address-map",
              "127.0.0.2=a"])
    assert caught.value.code == 2 and "--cql-address-map needs --cql" in capsys.readouterr().err


def test_the_address_map_is_judged_before_anything_is_read():
    assert address_map_of({"::1": "[::1]:9142", "10.0.0.2:9042": "Tunnel:19042"}) == (
        ("10.0.0.2:9042", "tunnel:19042"), ("::1", "[::1]:9142"))
    for bad, error, words in [
        ({"db": "127.0.0.1"}, ValueError, "address_map: 'db' is not an IP address"),
        ({"10.0.0.2": ""}, ValueError, "address_map: '10.0.0.2' maps to must be"),
        ({"10.0.0.2:99999": "h"}, ValueError, "the port must be 1..65535"),
        ({"10.0.0.2": 5}, TypeError, "address_map must map str to str"),
        ({"10.0.0.2": "a", "10.0.0.2 ": "b"}, ValueError, "are the same address"),
        (["10.0.0.2=a"], TypeError, "address_map must be a mapping"),
    ]:
        with pytest.raises(error, match=words):
            CqlDescription.of("127.0.0.1", "k", "t", address_map=bad)
    # where the nodes are reached is not what a resume state binds to
    mapped = CqlDescription.of("127.0.0.1", "k", "t", address_map={"10.0.0.2": "h:1"})
    assert mapped.resume_identity() == CqlDescription.of("127.0.0.1", "k", "t").resume_identity()


def test_an_address_answering_as_a_node_of_another_cluster_is_not_loaded(tmp_path):
    """The map sends a node's address to a node of another cluster holding the same table
    (as after a node's restart elsewhere, its old address taken): that node is left out,
    none of the rows go there, and its rows are stored by the cluster's live nodes."""
    with EmulatedCluster(3, advertised=[unreachable(i) for i in range(3)]) as cluster, \
            EmulatedCluster(1) as other:
        address_map = {"127.0.0.201": cluster.contact(1), "127.0.0.202": other.contact(0)}
        load_mapped(tmp_path, cluster, address_map)
        assert other.stored == {} and other.nodes[0].rows == []
        assert other.nodes[0].connections == 1  # asked who it is, once: then left out
        owners = [cluster.owner(i) for i in range(ROWS)]
        assert sorted(cluster.nodes[1].rows) == [i for i in range(ROWS) if owners[i] == 1]


def test_the_last_node_answering_as_another_clusters_fails_the_load_naming_it(tmp_path):
    with EmulatedCluster(1) as cluster, EmulatedCluster(1) as other:
        # the contact point's node restarts elsewhere between the plan and the session
        session = _cql_session._CqlSession(CqlDescription.of(cluster.contact(), "ks", "t"))
        session.nodes[0] = other.nodes[0].endpoint
        with pytest.raises(ConnectError, match=f"{other.contact()}: answers as node "
                                               f"{other.nodes[0].host_id}, which is not a node"):
            session._conn(0, b"", ["id", "v"])
        session.abort()
        assert other.stored == {}


def test_a_contact_point_that_does_not_answer_is_named_not_the_address_it_advertises(tmp_path):
    """The contact point that answered is used; one that does not answer is named by
    itself (no address the load was not given appears)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with EmulatedCluster(1, advertised=[unreachable(1, None)]) as cluster:
        result = bulkwire.load_parquet(
            data_file(tmp_path),
            bulkwire.targets.cql([f"127.0.0.1:{closed}", cluster.contact()], "ks", "t"))
        assert result.rows == ROWS
        cluster.close()
        with pytest.raises(ConnectError) as caught:
            bulkwire.load_parquet(
                data_file(tmp_path), bulkwire.targets.cql(cluster.contact(), "ks", "t"))
        assert cluster.contact() in str(caught.value) and "127.0.0.201" not in str(caught.value)


# --------------------------------------------------------------------------------------------
# real Cassandra 5.0 nodes advertising addresses where nothing listens

server = pytest.mark.cassandra_server
KEYSPACE = "bulkwire_addresses"


class Forwarder:
    """A TCP port forward on loopback (``docker run -p``, ``kubectl port-forward``, an SSH
    tunnel): every connection to ``listen`` (host, port 0 for any) is joined to ``target``.
    ``connections`` counts those made."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(listen)
        self.address: tuple[str, int] = self.listener.getsockname()[:2]
        self.connections = 0
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "Forwarder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.connections += 1
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def vector_file(path: str, rows: int) -> pa.Table:
    import numpy as np

    values = np.random.default_rng(rows).standard_normal((rows, 8), dtype=np.float32)
    table = pa.table({"id": pa.array(range(rows), pa.int64()),
                      "emb": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), 8)})
    pq.write_table(table, path, row_group_size=1000)
    return table


def make_table(session, name: str) -> str:
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    session.execute(f"CREATE TABLE {KEYSPACE}.{name} (id bigint PRIMARY KEY, emb vector<float, 8>)")
    return name


def assert_read_back(session, table: str, source: pa.Table) -> None:
    """Exactly the rows of ``source``, each vector bit for bit."""
    got = {row.id: row.emb for row in session.execute(f"SELECT id, emb FROM {KEYSPACE}.{table}")}
    emb = source.column("emb").combine_chunks()
    assert sorted(got) == source.column("id").to_pylist()
    for i, vector in enumerate(emb.to_pylist()):
        assert got[i] == vector, i


@server
def test_a_node_reached_through_a_forwarded_port_is_loaded_there(tmp_path):
    """One node advertising 127.0.0.151 (nothing listens there), reached only through a
    forward on 127.0.0.1: the load goes through the forward, and the table holds exactly the
    file's rows."""
    from servers.cassandra import connect, running

    with running(1, first=51, advertised=["127.0.0.151"]) as nodes:
        node = nodes[0]
        with connect([node.address], timeout=60.0, translation=node.translation) as session:
            table = make_table(session, "forwarded")
            path = str(tmp_path / "f.parquet")
            source = vector_file(path, 3000)
            with Forwarder(("127.0.0.1", 0), (node.address, 9042)) as forward:
                host = f"{forward.address[0]}:{forward.address[1]}"
                result = bulkwire.load_parquet(path, bulkwire.targets.cql(host, KEYSPACE, table),
                                               batch_rows=500)
                assert result.rows == 3000 and forward.connections >= 2  # the plan, the load
            assert_read_back(session, table, source)


#: the three nodes of the address map's cluster, and the address each advertises
CLUSTER = ["127.0.0.52", "127.0.0.53", "127.0.0.54"]
ADVERTISED = ["127.0.0.152", "127.0.0.153", "127.0.0.154"]


@pytest.fixture(scope="module")
def advertising_cluster():
    """Three nodes (127.0.0.52 the seed, .53, .54), each advertising the address of
    ``ADVERTISED`` where nothing listens."""
    from servers.cassandra import running

    with running(3, first=52, advertised=ADVERTISED) as nodes:
        yield nodes


@server
def test_a_cluster_reached_through_an_address_map_routes_each_row_to_its_owner(
        advertising_cluster, tmp_path, monkeypatch):
    """Every node advertises an address where nothing listens; the map sends each to where
    it listens: each row goes to the node the driver's token map names for it, and the
    table holds exactly the file's rows. Without the map the peers cannot be reached: every
    row goes through the contact point's node, and is stored all the same."""
    import struct

    from cassandra.metadata import Murmur3Token

    from servers.cassandra import connect

    sent: list[tuple[str, int]] = []
    run = _cql_session._CqlSession._run

    def counted(self, job, encoded, rows):  # job: (node, shard)
        done = run(self, job, encoded, rows)
        sent.append((self.nodes[job[0]], len(encoded[1]) // 8 if rows is None else len(rows)))
        return done

    monkeypatch.setattr(_cql_session._CqlSession, "_run", counted)
    translation = advertising_cluster[0].translation
    path = str(tmp_path / "m.parquet")
    source = vector_file(path, 3000)
    with connect(CLUSTER, timeout=60.0, translation=translation) as session:
        table = make_table(session, "mapped")
        result = bulkwire.load_parquet(
            path,
            bulkwire.targets.cql(CLUSTER[0], KEYSPACE, table,
                                 address_map=dict(zip(ADVERTISED, CLUSTER))), batch_rows=256)
        assert result.rows == 3000
        assert_read_back(session, table, source)
        session.cluster.refresh_schema_metadata()
        token_map = session.cluster.metadata.token_map
        want = collections.Counter(
            (next(iter(token_map.get_replicas(KEYSPACE, Murmur3Token.from_key(
                struct.pack(">q", i))))).address, 9042) for i in range(3000))
        got: collections.Counter = collections.Counter()
        for endpoint, count in sent:
            got[endpoint] += count
        assert got == want and len(got) == 3

        sent.clear()
        table = make_table(session, "unmapped")
        assert bulkwire.load_parquet(path, bulkwire.targets.cql(CLUSTER[0], KEYSPACE, table),
                                     batch_rows=256).rows == 3000
        assert_read_back(session, table, source)
        assert {endpoint for endpoint, _ in sent} == {(CLUSTER[0], 9042)}


@server
def test_a_node_that_restarts_with_a_new_address_mid_load(advertising_cluster, tmp_path,
                                                          monkeypatch):
    """Replication factor 1: the third node is killed once 4,000 of 12,000 rows are stored.
    Its rows have no other replica: the load fails naming the rows not acknowledged and the
    units not confirmed, never returning. The node comes back advertising a new address
    (127.0.0.155, which the map sends where it listens); the load resumed with the same
    state sends the units not confirmed, the node's rows to the node again (the same
    host_id at its new address), and the table holds exactly the file's rows. (Last of the
    cluster's tests: the node advertises its new address from here on.)"""
    import signal
    import time

    from bulkwire.errors import ConnectionLostError, CqlServerError, TransportTimeoutError
    from servers.cassandra import connect

    node = advertising_cluster[2]
    address_map = {**dict(zip(ADVERTISED, CLUSTER)), "127.0.0.155": node.address}
    path, state = str(tmp_path / "r.parquet"), str(tmp_path / "state.json")
    source = vector_file(path, 12_000)
    with connect(CLUSTER, timeout=60.0, translation=node.translation) as session:
        table = make_table(session, "restarted")

    def kill_at(done: int, total: int) -> None:
        if done >= 4_000 and node.process.returncode is None:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait()

    with pytest.raises((CqlServerError, ConnectionLostError, TransportTimeoutError)) as caught:
        bulkwire.load_parquet(
            path,
            bulkwire.targets.cql(CLUSTER[0], KEYSPACE, table, address_map=address_map, retries=1,
                                 timeout=10.0), batch_rows=500, resume=state, progress=kill_at)
    assert node.process.returncode is not None, "the node was not killed"
    assert caught.value.unconfirmed
    assert caught.value.source_unacknowledged and "not acknowledged" in str(caught.value)

    node.advertised = "127.0.0.155"
    node.translation["127.0.0.155"] = node.address
    node.start()
    deadline = time.monotonic() + 300
    node.wait_ready(deadline)
    with connect([CLUSTER[0]], timeout=60.0, translation=node.translation) as session:
        while True:  # the contact point's node lists the node at its new address
            row = session.execute("SELECT native_address FROM system.peers_v2 WHERE "
                                  f"peer = '{node.address}' ALLOW FILTERING").one()
            if row is not None and str(row.native_address) == "127.0.0.155":
                break
            assert time.monotonic() < deadline, f"the peers list {node.address} at {row}"
            time.sleep(1.0)

    sent: collections.Counter = collections.Counter()
    run = _cql_session._CqlSession._run

    def counted(self, job, encoded, rows):  # job: (node, shard)
        done = run(self, job, encoded, rows)
        sent[self.nodes[job[0]]] += len(encoded[1]) // 8 if rows is None else len(rows)
        return done

    monkeypatch.setattr(_cql_session._CqlSession, "_run", counted)
    result = bulkwire.load_parquet(
        path, bulkwire.targets.cql(CLUSTER[0], KEYSPACE, table, address_map=address_map),
        batch_rows=500, resume=state)
    # the units the first load confirmed (a quarter of the rows each), and no more
    assert result.rows + result.skipped_rows == 12_000 and result.skipped_rows in (3_000, 6_000)
    assert sent[(node.address, 9042)] > 0
    with connect(CLUSTER, timeout=60.0, translation=node.translation) as session:
        assert_read_back(session, table, source)
