"""The emulated CQL node the Spark benchmark writes into (``cql_driver_node``): the Python
driver's prepared INSERTs and bulkwire's load store the same rows there."""
from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("cassandra")

import bulkwire  # noqa: E402
from bulkwire import targets  # noqa: E402

from cql_driver_node import DriverCluster  # noqa: E402


def driver_client(cluster: DriverCluster):
    """The Python driver's ``Cluster`` for the emulated node, as the benchmark connects."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    host, port = cluster.nodes[0].endpoint
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy())
    return Cluster([host], port=port, protocol_version=4, compression=False,
                   schema_metadata_enabled=False, token_metadata_enabled=False,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                   connect_timeout=10, control_connection_timeout=10)


def test_the_driver_and_bulkwire_store_their_rows_in_the_emulated_node():
    from cassandra.concurrent import execute_concurrent_with_args

    with DriverCluster() as cluster:
        client = driver_client(cluster)
        try:
            session = client.connect()
            insert = session.prepare("INSERT INTO ks.t (id, v) VALUES (?, ?)")
            results = execute_concurrent_with_args(
                session, insert, [(i, f"d{i}") for i in range(50)], concurrency=8,
                raise_on_first_error=True)
            assert all(ok for ok, _ in results)
        finally:
            client.shutdown()
        table = pa.table({"id": pa.array(range(50, 80), pa.int64()),
                          "v": [f"b{i}" for i in range(50, 80)]})
        assert bulkwire.load_arrow(table, targets.cql(cluster.contact(0), keyspace="ks",
                                                      table="t")).rows == 30
        assert cluster.stored == {**{i: f"d{i}" for i in range(50)},
                                  **{i: f"b{i}" for i in range(50, 80)}}


def test_a_float_vector_column_is_stored_alike_from_the_driver_and_bulkwire():
    import struct

    def packed(values):
        return struct.pack(">4f", *values)

    with DriverCluster(dimension=4) as cluster:
        client = driver_client(cluster)
        try:
            session = client.connect()
            insert = session.prepare("INSERT INTO ks.t (id, emb) VALUES (?, ?)")
            for i in range(3):  # the driver serializes a list by the prepared custom type
                session.execute(insert, (i, [i, 0.5, -1.0, 2.0]))
        finally:
            client.shutdown()
        table = pa.table({"id": pa.array([3, 4], pa.int64()),
                          "emb": pa.array([[3, 0.5, -1, 2], [4, 0.5, -1, 2]],
                                          pa.list_(pa.float32(), 4))})
        target = targets.cql(cluster.contact(0), keyspace="ks", table="t")
        assert bulkwire.load_arrow(table, target).rows == 2
        assert cluster.stored == {i: packed([i, 0.5, -1.0, 2.0]) for i in range(5)}


def test_the_schema_names_the_vector_column_as_cql_writes_it():
    from cql_fake_node import FLOAT_VECTOR, type_text

    assert type_text(FLOAT_VECTOR % 768) == "vector<float, 768>"
