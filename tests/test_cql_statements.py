"""The statement layer against a real Cassandra 5.0 node (``--server cassandra``).

Through the core's connection (``_core.CqlConnection``) only with bytes this layer writes:
QUERY bodies create a table holding every column type bulkwire binds, a PREPARE body prepares
its INSERT and the Prepared RESULT is read (bind columns, types, partition key indexes equal
the driver's); an Arrow batch's rows become EXECUTE bodies that the node takes, and the
official driver reads back what was written. Each row's token equals the driver's routing
key token and the server's own ``token()``; the ring read from system.local/system.peers
routes every row to the replica the driver's TokenMap names; Rows results of the system
tables parse to the cells the driver decodes.
"""
from __future__ import annotations

import datetime
import math
import random
import uuid

import pyarrow as pa
import pytest

from cassandra import cqltypes, util  # noqa: E402
from cassandra.metadata import Murmur3Token  # noqa: E402

from bulkwire import _core  # noqa: E402
from bulkwire.cql_statements import Prepared, TokenRing, execute_bodies  # noqa: E402
from bulkwire.errors import SchemaMismatchError  # noqa: E402
from servers.cassandra import connect  # noqa: E402

pytestmark = pytest.mark.cassandra_server

ONE = 0x0001
KEYSPACE = "bulkwire_statements"
TABLE = f"{KEYSPACE}.every_type"
COLUMNS = {  # name: (CQL type, Arrow type)
    "k": ("int", pa.int32()), "s": ("text", pa.string()), "ti": ("tinyint", pa.int8()),
    "si": ("smallint", pa.int16()), "bi": ("bigint", pa.int64()), "wi": ("bigint", pa.int16()),
    "f": ("float", pa.float32()), "d": ("double", pa.float64()), "b": ("boolean", pa.bool_()),
    "a": ("ascii", pa.large_string()), "bl": ("blob", pa.binary()),
    "ts": ("timestamp", pa.timestamp("ms", "UTC")), "dt": ("date", pa.date32()),
    "u": ("uuid", pa.binary(16)), "tu": ("timeuuid", pa.binary(16)),
    "v": ("vector<float, 3>", pa.list_(pa.float32(), 3)),
    "vd": ("vector<double, 2>", pa.list_(pa.float32())),
    "vs": ("vector<smallint, 2>", pa.list_(pa.int16(), 2)),
    "vb": ("vector<bigint, 2>", pa.large_list(pa.int64())),
}
ROWS = 300


@pytest.fixture(scope="module")
def conn(cassandra_node):
    with _core.CqlConnection(cassandra_node.address, 9042, timeout=30.0) as c:
        yield c


def query(conn, cql: str) -> dict:
    opcode, answer = conn.request(_core.CQL_OP_QUERY, _core.cql_query_body(cql, ONE))
    assert opcode == _core.CQL_OP_RESULT
    return _core.cql_parse_result(answer)


@pytest.fixture(scope="module")
def prepared(conn) -> Prepared:
    created = query(conn, f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                          "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    assert created["kind"] in ("schema_change", "void")
    columns = ", ".join(f"{n} {t}" for n, (t, _) in COLUMNS.items())
    created = query(conn, f"CREATE TABLE IF NOT EXISTS {TABLE} ({columns}, "
                          "PRIMARY KEY ((s, k), ti))")
    if created["kind"] == "schema_change":
        assert (created["target"], created["keyspace"], created["name"]) == (
            "TABLE", KEYSPACE, "every_type")
    names = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    opcode, answer = conn.request(_core.CQL_OP_PREPARE, _core.cql_prepare_body(
        f"INSERT INTO {TABLE} ({names}) VALUES ({marks})"))
    assert opcode == _core.CQL_OP_RESULT
    return Prepared.from_result(answer)


def arrow_batch(seed: int) -> pa.RecordBatch:
    rng = random.Random(seed)

    def maybe(value):
        return None if rng.random() < 0.15 else value

    data = {
        "k": [i for i in range(ROWS)],
        "s": [rng.choice(["", "é", "key", "x" * 300]) + str(i) for i in range(ROWS)],
        "ti": [rng.randint(-128, 127) for _ in range(ROWS)],
        "si": [maybe(rng.randint(-(1 << 15), (1 << 15) - 1)) for _ in range(ROWS)],
        "bi": [maybe(rng.randint(-(1 << 63), (1 << 63) - 1)) for _ in range(ROWS)],
        "wi": [maybe(rng.randint(-(1 << 15), (1 << 15) - 1)) for _ in range(ROWS)],
        "f": [maybe(rng.choice([rng.uniform(-1e30, 1e30), math.inf, -0.0, 1.5])) for _ in range(ROWS)],
        "d": [maybe(rng.choice([rng.uniform(-1e300, 1e300), -math.inf, 0.0])) for _ in range(ROWS)],
        "b": [maybe(rng.random() < 0.5) for _ in range(ROWS)],
        "a": [maybe("".join(chr(rng.randint(0, 127)) for _ in range(rng.randint(0, 20))))
              for _ in range(ROWS)],
        "bl": [maybe(rng.randbytes(rng.randint(0, 50))) for _ in range(ROWS)],
        "ts": [maybe(rng.randint(-(1 << 45), 1 << 45)) for _ in range(ROWS)],
        "dt": [maybe(rng.randint(-(1 << 20), 1 << 20)) for _ in range(ROWS)],
        "u": [maybe(uuid.UUID(int=rng.getrandbits(128)).bytes) for _ in range(ROWS)],
        "tu": [maybe(uuid.uuid1(node=rng.getrandbits(48), clock_seq=rng.getrandbits(14)).bytes)
               for _ in range(ROWS)],
        "v": [maybe([rng.uniform(-1, 1) for _ in range(3)]) for _ in range(ROWS)],
        "vd": [maybe([rng.uniform(-1, 1) for _ in range(2)]) for _ in range(ROWS)],
        "vs": [maybe([rng.randint(-(1 << 15), (1 << 15) - 1) for _ in range(2)])
               for _ in range(ROWS)],
        "vb": [maybe([rng.randint(-(1 << 63), (1 << 63) - 1) for _ in range(2)])
               for _ in range(ROWS)],
    }
    arrays = {}
    for name, (_, arrow_type) in COLUMNS.items():
        values = data[name]
        if pa.types.is_timestamp(arrow_type):
            arrays[name] = pa.array(values, pa.int64()).cast(arrow_type)
        elif pa.types.is_date32(arrow_type):
            arrays[name] = pa.array(values, pa.int32()).cast(arrow_type)
        else:
            arrays[name] = pa.array(values, arrow_type)
    return pa.record_batch(arrays)


def expected(batch: pa.RecordBatch, name: str, row: int):
    """The value the driver should read back for this cell."""
    cql, arrow_type = COLUMNS[name]
    if not batch.column(name)[row].is_valid:
        return None
    if cql == "timestamp":
        ms = batch.column(name).cast(pa.int64())[row].as_py()
        return datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    if cql == "date":  # days past Python's date range: the driver's util.Date holds them
        return util.Date(batch.column(name).cast(pa.int32())[row].as_py())
    value = batch.column(name)[row].as_py()
    if cql in ("uuid", "timeuuid"):
        return uuid.UUID(bytes=value)
    if cql == "float":
        return cqltypes.FloatType.deserialize(cqltypes.FloatType.serialize(value, 4), 4)
    if cql == "vector<float, 3>":
        return [cqltypes.FloatType.deserialize(cqltypes.FloatType.serialize(x, 4), 4)
                for x in value]
    if cql == "vector<double, 2>":  # float32 values widened exactly
        return [float(x) for x in value]
    return value


def test_prepared_result_equals_the_drivers(cassandra_node, prepared) -> None:
    assert prepared.names == list(COLUMNS)
    assert prepared.types == [_core.cql_type_text(t) for t, _ in COLUMNS.values()]
    assert all(c[:2] == (KEYSPACE, "every_type") for c in prepared.columns)
    with connect([cassandra_node.address]) as session:
        theirs = session.prepare(f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) "
                                 f"VALUES ({', '.join('?' for _ in COLUMNS)})")
        assert list(prepared.pk_indexes) == list(theirs.routing_key_indexes)
        assert prepared.id == theirs.query_id


def test_batch_rows_are_written_and_read_back(cassandra_node, conn, prepared) -> None:
    batch = arrow_batch(1)
    rows = execute_bodies(batch.slice(7), prepared, consistency=ONE, first_row=7)
    answered, _ = conn.run(_core.CQL_OP_EXECUTE, list(rows), window=16)
    assert answered == ROWS - 7
    with connect([cassandra_node.address], keyspace=KEYSPACE) as session:
        insert = session.prepare(f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) "
                                 f"VALUES ({', '.join('?' for _ in COLUMNS)})")
        select = session.prepare(f"SELECT {', '.join(COLUMNS)}, token(s, k) AS t FROM {TABLE} "
                                 "WHERE s = ? AND k = ?")
        for i in range(7, ROWS):
            s, k = batch.column("s")[i].as_py(), batch.column("k")[i].as_py()
            got = session.execute(select, (s, k)).one()
            assert got is not None, (s, k)
            for name in COLUMNS:
                want = expected(batch, name, i)
                have = getattr(got, name)
                if isinstance(want, float) and math.isnan(want):
                    assert math.isnan(have)
                else:
                    assert have == want, (i, name, have, want)
            token = rows.tokens[i - 7]
            assert token == got.t  # the server's own token()
            bound = insert.bind([getattr(got, n) for n in COLUMNS])
            assert token == Murmur3Token.from_key(bound.routing_key).value


def test_ring_routes_to_the_drivers_replica(cassandra_node, conn, prepared) -> None:
    local = query(conn, "SELECT rpc_address, tokens FROM system.local")
    peers = query(conn, "SELECT peer, rpc_address, tokens FROM system.peers")
    ring = TokenRing.from_system_tables(local, peers, replication_factor=1)
    rows = execute_bodies(arrow_batch(2), prepared, consistency=ONE)
    with connect([cassandra_node.address]) as session:
        token_map = session.cluster.metadata.token_map
        for t in list(rows.tokens)[:100]:
            want = [h.address for h in token_map.get_replicas(KEYSPACE, Murmur3Token(t))]
            assert ring.replicas(t) == want
        primaries = ring.primaries(rows.tokens)
        assert {ring.addresses[i] for i in primaries} == {cassandra_node.address}


def test_rows_of_system_tables_parse_as_the_driver_decodes(cassandra_node, conn) -> None:
    for table in ("system.local", "system.peers", "system_schema.columns"):
        result = query(conn, f"SELECT * FROM {table}")
        with connect([cassandra_node.address]) as session:
            theirs = session.execute(f"SELECT * FROM {table}")
            driver_types, driver_names = theirs.column_types, theirs.column_names
            driver_rows = list(theirs)
        assert [c[2] for c in result["columns"]] == driver_names
        for (_, _, _, ours), t in zip(result["columns"], driver_types):
            theirs_text = t.cql_parameterized_type()
            assert theirs_text.startswith(ours) or (ours, theirs_text) == ("text", "varchar")
        assert len(result["rows"]) == len(driver_rows)
        for cells, row in zip(result["rows"], driver_rows):
            for cell, t, value in zip(cells, driver_types, row):
                assert (None if cell is None else t.from_binary(cell, 4)) == value


def test_a_schema_mismatch_is_found_before_any_row(conn, prepared) -> None:
    batch = arrow_batch(3)
    wrong = batch.set_column(batch.schema.get_field_index("k"), "k",
                             batch.column("k").cast(pa.int64()))
    with pytest.raises(SchemaMismatchError) as info:
        execute_bodies(wrong, prepared, consistency=ONE)
    assert (info.value.column, info.value.arrow_type, info.value.cql_type) == ("k", "int64", "int")
