"""The CQL load into a keyspace replicated by NetworkTopologyStrategy over two data centres of
two nodes each, against real Cassandra 5.0 nodes (``--server cassandra``).

Four nodes (GossipingPropertyFileSnitch: ``dc1`` on the first two addresses, ``dc2`` on the
last two), one replica per data centre (``{'dc1': 1, 'dc2': 1}``): of the two nodes of the
local data centre, each row must go to the one that holds its replica. The writes each node
reports having coordinated (``system_views.coordinator_write_latency``) are compared with the
official driver's token map: per node, the rows whose local-DC replica it is; no node of the
other data centre coordinates any.
"""
from __future__ import annotations

import collections
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cassandra import ConsistencyLevel
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

import bulkwire
from bulkwire import targets
from servers.cassandra import connect
from test_real_cassandra_dcs import coordinated_in

pytestmark = pytest.mark.cassandra_server

KEYSPACE = "dcs4"
ROWS = 2000
DCS = ["dc1", "dc1", "dc2", "dc2"]


@pytest.fixture(scope="module")
def cluster():
    from servers.cassandra import running

    with running(4, first=65, datacenters=DCS) as nodes:
        with connect([nodes[0].address]) as s:
            s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                      "{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")
        yield nodes


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, dict]:
    path = str(tmp_path_factory.mktemp("dcs4") / "rows.parquet")
    values = {i: f"row {i:06d}" for i in range(ROWS)}
    pq.write_table(pa.table({"id": pa.array(list(values), pa.int64()),
                             "v": list(values.values())}), path, row_group_size=500)
    return path, values


def coordinated(nodes, table: str) -> dict:
    return coordinated_in(nodes, KEYSPACE, table)


@pytest.mark.parametrize("contact, local_dc", [(0, None), (2, None), (0, "dc2")])
def test_each_row_is_coordinated_by_its_replica_in_the_local_data_centre(
        cluster, data, contact, local_dc):
    path, values = data
    local = local_dc or DCS[contact]
    table = f"t{contact}_{local}"
    with connect([cluster[0].address], timeout=60.0) as s:
        s.execute(f"CREATE TABLE {KEYSPACE}.{table} (id bigint PRIMARY KEY, v text)")
        s.cluster.refresh_schema_metadata()
        token_map = s.cluster.metadata.token_map
        want = collections.Counter({node.address: 0 for node in cluster})
        for i in values:
            replicas = token_map.get_replicas(KEYSPACE, Murmur3Token.from_key(
                struct.pack(">q", i)))
            mine = [h for h in replicas if h.datacenter == local]
            assert len(mine) == 1, replicas
            want[str(mine[0].address)] += 1
    result = bulkwire.load_parquet(path, targets.cql(cluster[contact].address, KEYSPACE, table,
                                                     local_dc=local_dc), batch_rows=500)
    assert result.rows == ROWS
    with connect([cluster[0].address], timeout=60.0) as s:
        stored = {row.id: row.v for row in s.execute(SimpleStatement(
            f"SELECT id, v FROM {KEYSPACE}.{table}", consistency_level=ConsistencyLevel.ALL,
            fetch_size=5000))}
    assert stored == values
    counts = coordinated(cluster, table)
    print(f"\ncontact {cluster[contact].address}, local {local}: coordinated {counts}, "
          f"replicas {dict(want)}")
    assert all(want[a] > 0 for a, dc in zip(want, DCS) if dc == local), want
    assert counts == dict(want)

