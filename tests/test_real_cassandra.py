"""bulkwire's CQL vector codec against a real Apache Cassandra 5.0 node (``--server cassandra``).

The driver (``cassandra.cluster``, protocol v5) writes and reads ``vector<T, N>`` columns
through prepared statements, once with ``bulkwire.cql.install()`` and once with its own code.
For every subtype the server takes, the bytes the server stores and returns are the same for
both, and the values read back equal what was written. ANN queries on an SAI index over rows
loaded through bulkwire return what a NumPy brute force over the same rows returns.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import decimal
import ipaddress
import itertools
import math
import os
import struct
import uuid
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import cassandra.cqltypes as ct  # noqa: E402  (no skip: a missing driver fails this run)
from cassandra import ConsistencyLevel, InvalidRequest, util  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from cassandra.query import SimpleStatement  # noqa: E402

import bulkwire.cql  # noqa: E402
from bulkwire import VectorCodec  # noqa: E402
from bulkwire.vectors import SUBTYPES  # noqa: E402
from servers.cassandra import connect  # noqa: E402

pytestmark = pytest.mark.cassandra_server

DIM = 4
#: Hypothesis examples per subtype; each costs four requests to the server.
EXAMPLES = int(os.environ.get("BULKWIRE_CASSANDRA_EXAMPLES", "25"))
EPOCH = datetime.datetime(1970, 1, 1)
_keys = itertools.count(1)


# --------------------------------------------------------------------------------------------
# the driver's own code, counted


@contextlib.contextmanager
def driver_code_counted() -> Iterator[collections.Counter]:
    """Wrap the driver's own ``VectorType.serialize``/``deserialize`` in call counters.

    ``bulkwire.cql.install()`` inside the block takes the counters for the driver's code, so
    ``calls["serialize"]`` counts every vector the driver's code wrote, installed or not: zero
    while installed means bulkwire wrote every one. On exit the drop-in is uninstalled and the
    driver's methods are restored."""
    vt = ct.VectorType
    assert not bulkwire.cql.installed()
    own_serialize, own_deserialize = vt.__dict__["serialize"], vt.__dict__["deserialize"]
    calls: collections.Counter = collections.Counter()

    def serialize(cls: Any, v: Any, protocol_version: Any) -> Any:
        calls["serialize"] += 1
        return own_serialize.__func__(cls, v, protocol_version)

    def deserialize(cls: Any, byts: Any, protocol_version: Any) -> Any:
        calls["deserialize"] += 1
        return own_deserialize.__func__(cls, byts, protocol_version)

    vt.serialize, vt.deserialize = classmethod(serialize), classmethod(deserialize)
    try:
        yield calls
    finally:
        bulkwire.cql.uninstall()
        vt.serialize, vt.deserialize = own_serialize, own_deserialize


@contextlib.contextmanager
def raw_vectors() -> Iterator[None]:
    """Inside the block the driver hands back each vector column as the bytes the server sent."""
    vt = ct.VectorType
    before = vt.__dict__["deserialize"]
    vt.deserialize = classmethod(lambda cls, byts, protocol_version: bytes(byts))
    try:
        yield
    finally:
        vt.deserialize = before


# --------------------------------------------------------------------------------------------
# the subtypes


def f32(x: float) -> bytes:
    return struct.pack(">f", x)


def f64(x: float) -> bytes:
    return struct.pack(">d", x)


def ms_of(value: datetime.datetime) -> int:
    return round((value - EPOCH) / datetime.timedelta(milliseconds=1))


@dataclasses.dataclass
class Subtype:
    """A vector subtype: its CQL name, element values, and how a written element and a read
    one are brought to one comparable form."""

    cql: str
    elements: st.SearchStrategy
    written: Callable[[Any], Any] = lambda x: x
    read: Callable[[Any], Any] = lambda x: x
    #: NumPy dtype of array inputs the drop-in takes for this subtype, if any
    array: str | None = None

    @property
    def table(self) -> str:
        return "v_" + "".join(c if c.isalnum() else "_" for c in self.cql).strip("_")

    @property
    def bulkwire_writes(self) -> bool:
        """Whether ``bulkwire.cql`` serializes this subtype itself (else the driver does)."""
        return self.cql in SUBTYPES


# What each subtype's elements are: values the drop-in takes itself where it covers the
# subtype (exact ints for timestamp, date and time: their raw CQL values), the driver's own
# input types elsewhere.
SUBTYPE_CASES = [
    Subtype("float", st.floats(width=32), written=f32, read=f32, array="f4"),
    Subtype("double", st.floats(), written=f64, read=f64, array="f8"),
    Subtype("int", st.integers(-2**31, 2**31 - 1), array="i4"),
    Subtype("bigint", st.integers(-2**63, 2**63 - 1), array="i8"),
    Subtype("smallint", st.integers(-2**15, 2**15 - 1), array="i2"),
    Subtype("tinyint", st.integers(-2**7, 2**7 - 1), array="i1"),
    Subtype("boolean", st.booleans()),
    # milliseconds of years 1..9999, which the driver reads back as datetimes
    Subtype("timestamp", st.integers(-62135596800000, 253402300799999), read=ms_of),
    Subtype("date", st.integers(0, 2**32 - 1), written=lambda raw: raw - 2**31,
            read=lambda d: d.days_from_epoch),
    Subtype("time", st.integers(0, 86400 * 10**9 - 1), read=lambda t: t.nanosecond_time),
    Subtype("uuid", st.uuids()),
    Subtype("timeuuid", st.uuids(version=1)),
    Subtype("text", st.text(max_size=20)),
    Subtype("varchar", st.text(max_size=20)),
    Subtype("ascii", st.text(st.characters(max_codepoint=127), max_size=20)),
    Subtype("blob", st.binary(max_size=40)),
    Subtype("varint", st.integers(-2**200, 2**200)),
    # the subtypes below are the driver's: install() must hand them to it unchanged
    Subtype("decimal", st.builds(lambda digits, exp: decimal.Decimal(digits).scaleb(exp),
                                 st.integers(-10**30, 10**30), st.integers(-40, 40))),
    Subtype("inet", st.ip_addresses().map(str), written=ipaddress.ip_address,
            read=ipaddress.ip_address),
    Subtype("duration", st.builds(util.Duration, st.integers(0, 2**31 - 1),
                                  st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))),
    Subtype("list<int>", st.lists(st.integers(-2**31, 2**31 - 1), max_size=5)),
    Subtype("set<text>", st.sets(st.text(max_size=8), max_size=5), read=set),
    Subtype("map<int, text>", st.dictionaries(st.integers(-2**31, 2**31 - 1),
                                              st.text(max_size=8), max_size=5), read=dict),
    Subtype("tuple<int, text>", st.tuples(st.integers(-2**31, 2**31 - 1), st.text(max_size=8))),
    # a vector of vectors: the outer one is the driver's, the inner float vectors bulkwire's
    Subtype("vector<float, 2>", st.lists(st.floats(width=32), min_size=2, max_size=2),
            written=lambda v: [f32(x) for x in v], read=lambda v: [f32(x) for x in v]),
]


# --------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def session(cassandra_node):
    with connect([cassandra_node.address]) as s:
        s.execute("CREATE KEYSPACE IF NOT EXISTS bulkwire WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.set_keyspace("bulkwire")
        yield s


@pytest.fixture(scope="module")
def subtype_tables(session):
    """One table per subtype, ``(k int PRIMARY KEY, v vector<T, DIM>)``, with its prepared
    insert and select."""
    tables = {}
    for case in SUBTYPE_CASES:
        session.execute(f"CREATE TABLE IF NOT EXISTS {case.table} "
                        f"(k int PRIMARY KEY, v vector<{case.cql}, {DIM}>)")
        tables[case.cql] = (session.prepare(f"INSERT INTO {case.table} (k, v) VALUES (?, ?)"),
                            session.prepare(f"SELECT v FROM {case.table} WHERE k = ?"))
    return tables


# --------------------------------------------------------------------------------------------
# every subtype, both ways


def read_one(session, select, key: int) -> Any:
    row = session.execute(select, (key,)).one()
    assert row is not None, f"row {key} was not written"
    return row.v


def round_trip(session, tables, case: Subtype, value: Any) -> None:
    """Write ``value`` once through bulkwire and once through the driver alone; the server
    must return the same bytes for both, and each way of reading must give ``value`` back."""
    insert, select = tables[case.cql]
    ours, theirs = next(_keys), next(_keys)
    with driver_code_counted() as calls:
        bulkwire.cql.install()
        session.execute(insert, (ours, value))
        written_by_driver_while_installed = calls["serialize"]
        read_installed = read_one(session, select, ours)
        bulkwire.cql.install(numpy_results=True)
        read_numpy = read_one(session, select, ours)
        bulkwire.cql.uninstall()
        session.execute(insert, (theirs, value))
        assert calls["serialize"] > written_by_driver_while_installed
        read_driver = read_one(session, select, theirs)
    with raw_vectors():
        raw_ours = read_one(session, select, ours)
        raw_theirs = read_one(session, select, theirs)

    if case.bulkwire_writes:
        assert written_by_driver_while_installed == 0, "bulkwire handed the value to the driver"
        # driver_compat: signaling float32 NaNs quieted, as the driver's float path does
        assert raw_ours == VectorCodec(case.cql, DIM, driver_compat=True).serialize(value)
    assert raw_ours == raw_theirs
    expected = [case.written(x) for x in value]
    assert [case.read(x) for x in read_installed] == expected
    assert [case.read(x) for x in read_driver] == expected
    assert [case.read(x) for x in (read_numpy.tolist() if isinstance(read_numpy, np.ndarray)
                                   else read_numpy)] == expected


@pytest.mark.parametrize("case", SUBTYPE_CASES, ids=lambda c: c.cql)
def test_every_subtype_round_trips_as_the_driver_writes_it(session, subtype_tables, case):
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(st.lists(case.elements, min_size=DIM, max_size=DIM))
    def check(value):
        round_trip(session, subtype_tables, case, value)

    check()


@pytest.mark.parametrize("case", [c for c in SUBTYPE_CASES if c.array], ids=lambda c: c.cql)
def test_numpy_rows_round_trip_as_the_driver_writes_them(session, subtype_tables, case):
    """A 1-D ndarray of the subtype's own dtype is written by bulkwire, byte for byte as the
    driver writes the same array element by element."""
    @settings(max_examples=EXAMPLES, deadline=None)
    @given(hnp.arrays(case.array, DIM))
    def check(array):
        round_trip(session, subtype_tables, case, array)

    if case.cql == "float":  # signaling NaNs: the driver's float path quiets them, and so must we
        check = example(np.frombuffer(bytes.fromhex("7f800001ff800002") * 2, ">f4")
                        .astype("f4"))(check)
    check()


def test_counter_vectors_are_created_but_no_client_value_is_taken(session):
    """The server creates a ``vector<counter, N>`` column, but the driver's value (8-byte
    elements back to back, as for ``bigint``) is refused: the server reads counter elements
    as variable-size. bulkwire leaves the subtype to the driver, so both ways fail alike."""
    session.execute("CREATE TABLE IF NOT EXISTS v_counter (k int PRIMARY KEY, "
                    f"v vector<counter, {DIM}>)")
    insert = session.prepare("INSERT INTO v_counter (k, v) VALUES (?, ?)")
    errors = []
    for install in (True, False):
        if install:
            bulkwire.cql.install()
        try:
            with pytest.raises(InvalidRequest, match="extraneous bytes") as raised:
                session.execute(insert, (1, list(range(DIM))))
            errors.append(str(raised.value))
        finally:
            bulkwire.cql.uninstall()
    assert errors[0] == errors[1]


def test_a_timeuuid_that_is_not_version_1_is_refused_by_the_server(session, subtype_tables):
    """The codec writes any 16 bytes as the driver does; the server checks the version."""
    insert, _ = subtype_tables["timeuuid"]
    value = [uuid.uuid4() for _ in range(DIM)]
    for install in (True, False):
        if install:
            bulkwire.cql.install()
        try:
            with pytest.raises(InvalidRequest, match="(?i)version"):
                session.execute(insert, (next(_keys), value))
        finally:
            bulkwire.cql.uninstall()


# --------------------------------------------------------------------------------------------
# ANN search over rows loaded through bulkwire

ANN_DIM = 768
ANN_ROWS = int(os.environ.get("BULKWIRE_CASSANDRA_ANN_ROWS", "3000"))
ANN_QUERIES = 40
ANN_K = 10
#: The mean recall@10 every ANN query set must reach (see test_ann_matches_numpy_brute_force).
ANN_MIN_RECALL = 0.9


def similarity(function: str, matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The score Cassandra's ``similarity_<function>`` gives each row for ``query``, in float64:
    cosine (1 + cos) / 2, dot product (1 + dot) / 2, euclidean 1 / (1 + squared distance)."""
    m, q = matrix.astype(np.float64), query.astype(np.float64)
    if function == "cosine":
        return (1 + (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))) / 2
    if function == "dot_product":
        return (1 + m @ q) / 2
    return 1 / (1 + ((m - q) ** 2).sum(axis=1))


def ann_data(function: str, rows: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 rows and queries: Gaussian clusters (embeddings are clustered, not uniform),
    unit length for dot product (its documented precondition), raw for the others."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((32, ANN_DIM))
    def draw(n: int) -> np.ndarray:
        points = centers[rng.integers(0, len(centers), n)] + 0.6 * rng.standard_normal((n, ANN_DIM))
        if function == "dot_product":
            points /= np.linalg.norm(points, axis=1, keepdims=True)
        return points.astype(np.float32)
    return draw(rows), draw(queries)


#: Concurrent inserts into a vector-indexed table. Cassandra 5.0.9 inserts each row into the
#: memtable's jvector graph on the write thread, and jvector lends each thread a search object
#: from a pool of at most (the JVM's processors + 1); a write that finds the pool empty fails
#: ("Number of outstanding pooled objects has gone beyond the limit", a WriteFailure). The
#: server runs on this machine, so its processor count is ours.
ANN_WRITE_CONCURRENCY = len(os.sched_getaffinity(0)) + 1


def load_rows(session, table: str, matrix: np.ndarray) -> None:
    """Insert ``matrix`` row i as id i, through bulkwire (``serialize_rows``: the rows go to
    the driver as views of one buffer), and check that bulkwire wrote every vector."""
    insert = session.prepare(f"INSERT INTO {table} (id, v) VALUES (?, ?)")
    rows = VectorCodec("float", matrix.shape[1]).serialize_rows(matrix)
    with driver_code_counted() as calls:
        bulkwire.cql.install()
        results = execute_concurrent_with_args(session, insert,
                                               [(i, rows[i]) for i in range(len(rows))],
                                               concurrency=ANN_WRITE_CONCURRENCY,
                                               raise_on_first_error=True)
        assert all(ok for ok, _ in results)
        assert calls["serialize"] == 0


def check_stored(session, table: str, matrix: np.ndarray) -> None:
    """Every row reads back bit for bit."""
    bulkwire.cql.install(numpy_results=True)
    try:
        got = {r.id: r.v for r in session.execute(SimpleStatement(f"SELECT id, v FROM {table}",
                                                                  fetch_size=1000))}
    finally:
        bulkwire.cql.uninstall()
    assert sorted(got) == list(range(len(matrix)))
    stored = np.stack([got[i] for i in range(len(matrix))]).astype("f4")
    assert stored.tobytes() == matrix.tobytes()


def ann_recall(session, table: str, function: str, matrix: np.ndarray,
               queries: np.ndarray) -> float:
    """Run every query as ``ORDER BY v ANN OF ? LIMIT k``; check the server's scores against
    NumPy's for the rows it returned and their order; return the mean recall@k against the
    brute-force top k."""
    select = session.prepare(f"SELECT id, similarity_{function}(v, ?) AS score FROM {table} "
                             f"ORDER BY v ANN OF ? LIMIT {ANN_K}")
    found = 0
    bulkwire.cql.install()
    try:
        for query in queries:
            rows = list(session.execute(select, (query, query)))
            assert len(rows) == ANN_K
            ids = np.array([r.id for r in rows])
            scores = np.array([r.score for r in rows])
            exact = similarity(function, matrix, query)
            np.testing.assert_allclose(scores, exact[ids], rtol=1e-5, atol=1e-6)
            assert (np.diff(scores) <= 1e-6).all(), f"ANN results out of order: {scores}"
            truth = np.argsort(-exact, kind="stable")[:ANN_K]
            found += len(set(ids.tolist()) & set(truth.tolist()))
    finally:
        bulkwire.cql.uninstall()
    return found / (ANN_K * len(queries))


def self_recall(session, table: str, matrix: np.ndarray, ids: np.ndarray) -> float:
    """Query with stored rows: the fraction found among their own ``ANN_K`` nearest; one that
    is found comes first (no other row scores higher than a row against itself)."""
    select = session.prepare(f"SELECT id FROM {table} ORDER BY v ANN OF ? LIMIT {ANN_K}")
    found = 0
    bulkwire.cql.install()
    try:
        for i in ids:
            got = [r.id for r in session.execute(select, (matrix[i],))]
            if i in got:
                assert got[0] == i or np.array_equal(matrix[got[0]], matrix[i]), (i, got)
                found += 1
    finally:
        bulkwire.cql.uninstall()
    return found / len(ids)


@pytest.mark.parametrize("function", ["cosine", "dot_product", "euclidean"])
def test_ann_matches_numpy_brute_force(session, cassandra_node, function, record_property):
    """ANN search over ``ANN_ROWS`` 768-dimensional rows loaded through bulkwire, in the
    memtable's index and, after a flush, in the SSTable's.

    The index is a jvector graph (Cassandra 5.0's defaults, documented in its SAI options:
    16 connections per node, construction beam width 100): the search is approximate and
    Cassandra documents no recall figure, so exact agreement is not required. What is required:
    the scores the server computes for the rows it returns equal NumPy's for the same float32
    rows (to float32 rounding), the rows come in score order, a stored row queried is its own
    nearest neighbour, and the mean recall@10 against the brute force is at least
    ``ANN_MIN_RECALL``. A graph of this size and degree explores far more than k candidates,
    so it finds nearly all true neighbours of clustered data; a codec that changed the
    vectors (byte order, a shifted element) would score near k / rows instead.
    """
    table = f"ann_{function}"
    matrix, queries = ann_data(function, ANN_ROWS, ANN_QUERIES, seed=len(function))
    session.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v vector<float, {ANN_DIM}>)")
    session.execute(f"CREATE CUSTOM INDEX ON {table}(v) USING 'StorageAttachedIndex' "
                    f"WITH OPTIONS = {{'similarity_function': '{function.upper()}'}}")
    load_rows(session, table, matrix)
    check_stored(session, table, matrix)
    sample = np.random.default_rng(7).choice(ANN_ROWS, 20, replace=False)

    measured = {}
    for state in ("memtable", "sstable"):
        if state == "sstable":
            cassandra_node.nodetool("flush", "bulkwire", table)
        measured[state] = (ann_recall(session, table, function, matrix, queries),
                           self_recall(session, table, matrix, sample))
        record_property(f"recall_{state}", measured[state])
    print(f"{function}: recall@{ANN_K}, self-recall: {measured}")
    for state, (recall, own) in measured.items():
        assert recall >= ANN_MIN_RECALL, f"{state}: recall@{ANN_K} {recall}"
        assert own >= ANN_MIN_RECALL, f"{state}: self-recall {own}"


def test_sai_vector_search_takes_float_vectors_only(session):
    """The server refuses an SAI index with a similarity function on a non-float vector; the
    ANN tests therefore cover ``vector<float, N>`` only."""
    session.execute(f"CREATE TABLE IF NOT EXISTS ann_double (id int PRIMARY KEY, "
                    f"v vector<double, {DIM}>)")
    with pytest.raises(InvalidRequest):
        session.execute("CREATE CUSTOM INDEX ON ann_double(v) USING 'StorageAttachedIndex' "
                        "WITH OPTIONS = {'similarity_function': 'COSINE'}")


# --------------------------------------------------------------------------------------------
# a cluster


def test_a_three_node_cluster_serves_bulkwire_vectors_from_every_node(cassandra_cluster):
    """Rows written through bulkwire to a keyspace replicated on three nodes (every replica
    acknowledging) read back bit for bit through each node as coordinator, and an ANN query
    coordinated by each node finds what the NumPy brute force finds."""
    hosts = [node.address for node in cassandra_cluster]
    rng = np.random.default_rng(3)
    matrix, queries = ann_data("cosine", 600, 10, seed=3)
    labels = [[f"row {i}", "é" * (i % 4), ""] for i in range(len(matrix))]
    with connect(hosts) as s:
        s.execute("CREATE KEYSPACE replicated WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute(f"CREATE TABLE replicated.vectors (id int PRIMARY KEY, "
                  f"v vector<float, {ANN_DIM}>, t vector<text, 3>)")
        s.execute("CREATE CUSTOM INDEX ON replicated.vectors(v) USING 'StorageAttachedIndex' "
                  "WITH OPTIONS = {'similarity_function': 'COSINE'}")
        insert = s.prepare("INSERT INTO replicated.vectors (id, v, t) VALUES (?, ?, ?)")
        insert.consistency_level = ConsistencyLevel.ALL
        rows = VectorCodec("float", ANN_DIM).serialize_rows(matrix)
        with driver_code_counted() as calls:
            bulkwire.cql.install()
            results = execute_concurrent_with_args(
                s, insert, [(i, rows[i], labels[i]) for i in range(len(rows))],
                concurrency=ANN_WRITE_CONCURRENCY, raise_on_first_error=True)
            assert all(ok for ok, _ in results)
            assert calls["serialize"] == 0
    order = rng.permutation(len(matrix))[:50]
    for host in hosts:
        with connect([host], keyspace="replicated") as s:
            select = s.prepare("SELECT v, t FROM vectors WHERE id = ?")
            select.consistency_level = ConsistencyLevel.ONE
            bulkwire.cql.install(numpy_results=True)
            try:
                for i in order:
                    row = s.execute(select, (int(i),)).one()
                    assert row.v.astype("f4").tobytes() == matrix[i].tobytes()
                    assert row.t == labels[i]
            finally:
                bulkwire.cql.uninstall()
            recall = ann_recall(s, "vectors", "cosine", matrix, queries)
            assert recall >= ANN_MIN_RECALL, f"{host}: recall@{ANN_K} {recall}"


# --------------------------------------------------------------------------------------------
# the Spark data source


def test_spark_data_source_loads_every_row_into_a_vector_table(session, cassandra_node, tmp_path):
    """A local Spark writes a DataFrame through the bulkwire data source into a table with a
    vector column, one CQL session per write task; the driver reads every row back."""
    pytest.importorskip("pyspark")
    import bulkwire.spark
    from _spark_session import spark_session

    session.execute("CREATE TABLE IF NOT EXISTS spark_load "
                    "(id bigint PRIMARY KEY, name text, v vector<float, 4>)")
    session.execute("TRUNCATE spark_load")
    spark = spark_session(str(tmp_path))
    try:
        frame = spark.range(0, 3000, 1, numPartitions=3).selectExpr(
            "id", "concat('n', cast(id as string)) as name",
            "array(cast(id as float), cast(id * 0.25 as float), cast(-id as float), "
            "cast(1.5 as float)) as v")
        (frame.write.format("bulkwire").option("target", "cql")
         .option("hosts", cassandra_node.address).option("keyspace", "bulkwire")
         .option("table", "spark_load").option("batch_rows", "500").mode("append").save())
        result = bulkwire.spark.last_result(spark)
    finally:
        spark.stop()
    assert (result.committed, result.rows, result.tasks) == (True, 3000, 3)
    stored = {row.id: (row.name, [float(x) for x in row.v])
              for row in session.execute("SELECT id, name, v FROM spark_load")}
    assert stored == {i: (f"n{i}", [float(np.float32(i)), float(np.float32(i * 0.25)), -float(i), 1.5])
                      for i in range(3000)}
