"""A CQL load into a keyspace replicated over several data centres, against emulated nodes
in this process (``cql_nodes``): each node answers its data centre and rack in
``system.local`` / ``system.peers_v2`` and the keyspace's replication in
``system_schema.keyspaces``.

What each node received is compared with what the official driver's placement says
(``make_token_replica_map``, the ring walked clockwise from each row's token): every row
is sent once, to the first of its replicas in the local data centre (the contact point's,
or ``local_dc`` / ``--local-dc``); a node down hands its rows to the next replica there; a
keyspace with no replica in the local data centre fails up front at LOCAL_ONE and
LOCAL_QUORUM and sends each row to its replica elsewhere at ONE; a ``local_dc`` no node is
in is refused naming the data centres there are.
"""
from __future__ import annotations

import collections

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
from bulkwire import targets
from bulkwire.cli import main
from bulkwire.cql_placement import NoLocalReplica
from cql_nodes import EmulatedCluster

ROWS = 600
DCS = ["dc1", "dc2", "dc1", "dc2", "dc1", "dc2"]
RACKS = ["r1", "r1", "r1", "r2", "r2", "r1"]
BOTH = {"class": "NetworkTopologyStrategy", "dc1": "2", "dc2": "2"}


def data_file(tmp_path) -> str:
    path = str(tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": pa.array(range(ROWS), pa.int64()),
                             "v": [f"v{i}" for i in range(ROWS)]}), path, row_group_size=200)
    return path


def load(path: str, cluster: EmulatedCluster, contact: int = 0, **options):
    return bulkwire.load_parquet(path, targets.cql(cluster.contact(contact), "ks", "t",
                                                   **options), batch_rows=100)


def sent_to(cluster: EmulatedCluster) -> list[collections.Counter]:
    return [collections.Counter(node.rows) for node in cluster.nodes]


def expected(cluster: EmulatedCluster, local: str, down=(), local_only=False):
    """Per node, the ids it should receive once each: the first replica (clockwise) of
    the id's token in ``local`` that is not ``down``, else (not ``local_only``) the first
    replica up in another data centre."""
    want = [collections.Counter() for _ in cluster.nodes]
    for key in range(ROWS):
        replicas = set(cluster.replicas(key))
        met = [i for i in cluster.walk(key) if i in replicas and i not in down]
        mine = [i for i in met if cluster.nodes[i].datacenter == local]
        if mine:
            want[mine[0]][key] += 1
        else:
            assert met and not local_only
            want[met[0]][key] += 1
    return want


def assert_stored(cluster: EmulatedCluster) -> None:
    assert cluster.stored == {i: f"v{i}" for i in range(ROWS)}


@pytest.mark.parametrize("contact, local", [(0, "dc1"), (1, "dc2")])
def test_each_row_goes_to_its_first_replica_in_the_contact_points_data_centre(
        tmp_path, contact, local):
    with EmulatedCluster(6, datacenters=DCS, racks=RACKS, replication=BOTH) as cluster:
        result = load(data_file(tmp_path), cluster, contact)
        assert result.rows == ROWS
        assert_stored(cluster)
        got = sent_to(cluster)
        assert got == expected(cluster, local)
        assert all(not got[i] for i, dc in enumerate(DCS) if dc != local)


def test_local_dc_chooses_another_data_centre_than_the_contact_points(tmp_path):
    path = data_file(tmp_path)
    with EmulatedCluster(6, datacenters=DCS, racks=RACKS, replication=BOTH) as cluster:
        load(path, cluster, 0, local_dc="dc2")
        assert_stored(cluster)
        assert sent_to(cluster) == expected(cluster, "dc2")
    with EmulatedCluster(6, datacenters=DCS, racks=RACKS, replication=BOTH) as cluster:
        code = main(["load", path, "--cql", cluster.contact(0), "--keyspace", "ks", "--table",
                     "t", "--local-dc", "dc2", "-q"])
        assert code == 0
        assert_stored(cluster)
        assert sent_to(cluster) == expected(cluster, "dc2")


def test_a_node_down_hands_its_rows_to_the_next_replica_in_the_local_data_centre(tmp_path):
    # a dc1 node advertising an address where nothing listens: it cannot be reached
    advertised = [("127.0.0.200", 9042), None, None, None, None, None]
    with EmulatedCluster(6, datacenters=DCS, racks=RACKS, replication=BOTH,
                         advertised=advertised) as cluster:
        result = load(data_file(tmp_path), cluster, 2)
        assert result.rows == ROWS
        assert_stored(cluster)
        got = sent_to(cluster)
        assert got == expected(cluster, "dc1", down={0})
        assert all(not got[i] for i, dc in enumerate(DCS) if dc != "dc1")
        # racks decide: node 0's rows met next node 2 (its rack, r1), not a replica, and
        # went past it to node 4 (rack r2), the other replica in dc1
        skipped = [k for k in range(ROWS)
                   if [i for i in cluster.walk(k) if DCS[i] == "dc1"] == [0, 2, 4]]
        assert skipped and all(got[4][k] == 1 and not got[2][k] for k in skipped)


ONLY_DC1 = {"class": "NetworkTopologyStrategy", "dc1": "1"}


@pytest.mark.parametrize("level", ["LOCAL_ONE", "LOCAL_QUORUM"])
def test_no_replica_in_the_local_data_centre_fails_local_levels_before_any_row(
        tmp_path, level):
    with EmulatedCluster(4, datacenters=DCS[:4], replication=ONLY_DC1) as cluster:
        with pytest.raises(NoLocalReplica) as caught:
            load(data_file(tmp_path), cluster, 1, consistency=level)
        assert str(caught.value).startswith(
            "keyspace ks (replication {'class': 'NetworkTopologyStrategy', 'dc1': '1'}) has "
            "no replica in the local data centre dc2")
        assert cluster.stored == {} and all(not node.rows for node in cluster.nodes)


@pytest.mark.parametrize("level", ["ONE", "QUORUM"])
def test_no_replica_in_the_local_data_centre_sends_each_row_to_its_replica_elsewhere(
        tmp_path, level):
    with EmulatedCluster(4, datacenters=DCS[:4], replication=ONLY_DC1) as cluster:
        load(data_file(tmp_path), cluster, 1, consistency=level)
        assert_stored(cluster)
        got = sent_to(cluster)
        assert got == expected(cluster, "dc2")
        assert not got[1] and not got[3]


def test_a_local_dc_no_node_is_in_is_refused_naming_the_data_centres(tmp_path):
    with EmulatedCluster(4, datacenters=DCS[:4], replication=BOTH) as cluster:
        with pytest.raises(ValueError, match="local_dc 'dc3' is the data centre of no node; "
                                             "the cluster's data centres are dc1, dc2"):
            load(data_file(tmp_path), cluster, 0, local_dc="dc3")
        assert cluster.stored == {}
    with pytest.raises(ValueError, match="local_dc must be a non-empty str"):
        targets.cql("db", "ks", "t", local_dc="")


def test_simple_strategy_sends_each_row_to_its_first_replica_in_the_local_data_centre(
        tmp_path):
    replication = {"class": "SimpleStrategy", "replication_factor": "2"}
    with EmulatedCluster(4, datacenters=DCS[:4], replication=replication) as cluster:
        load(data_file(tmp_path), cluster, 0, consistency="ONE")
        assert_stored(cluster)
        assert sent_to(cluster) == expected(cluster, "dc1")


def test_local_dc_is_an_option_of_the_cql_target_alone(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["load", data_file(tmp_path), "--out", str(tmp_path / "o.json"), "--local-dc",
              "dc1"])
    assert caught.value.code == 2
    assert "--local-dc is not an option of the request_file target" in capsys.readouterr().err


def test_the_ring_is_read_once_per_load_and_travels_with_the_description(tmp_path,
                                                                         monkeypatch):
    """The load's plan reads the ring and the keyspace's placement; each of its sessions (one
    per unit of a resumable load) takes them as they were read, and so does a worker
    process's copy of the description, pickled: it opens a session without a connection."""
    import pickle

    from bulkwire.load import cql_target

    reads, opened = [], []
    placement, open_session = cql_target.CqlDescription.placement, cql_target.CqlDescription.open

    def counted_placement(self, conn, contact):
        reads.append(contact)
        return placement(self, conn, contact)

    def counted_open(self):
        opened.append(self)
        return open_session(self)

    monkeypatch.setattr(cql_target.CqlDescription, "placement", counted_placement)
    monkeypatch.setattr(cql_target.CqlDescription, "open", counted_open)
    with EmulatedCluster(6, datacenters=DCS, racks=RACKS, replication=BOTH) as cluster:
        target = targets.cql(cluster.contact(0), "ks", "t")
        result = bulkwire.load_parquet(data_file(tmp_path), target, batch_rows=100,
                                       resume=tmp_path / "state.json")
        assert result.rows == ROWS
        assert_stored(cluster)
        assert sent_to(cluster) == expected(cluster, "dc1")
        assert len(opened) >= 3 and len(reads) == 1
        copy = pickle.loads(pickle.dumps(target))
        assert copy == target
        before = [node.connections for node in cluster.nodes]
        session = copy.open()
        try:
            assert session.local_dc == "dc1"
            assert sorted(session.placement.addresses) == sorted(
                f"{host}:{port}" for host, port in (node.endpoint for node in cluster.nodes))
        finally:
            session.abort()
        assert len(reads) == 1
        assert [node.connections for node in cluster.nodes] == before
