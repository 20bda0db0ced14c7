"""The Dask sink into a CQL table (``bulkwire.dask.to_cql``) and what the Dask and Ray sinks
share for it (``_arrow_sink.SinkConfig`` with a described CQL table): the configuration a
task receives (small, picklable, no connection, no password in its repr), the arguments
refused and the table checked on the client before any task runs, and, against a real
Cassandra 5.0 node (``--server cassandra``), a Dask DataFrame of 64-dimension vectors loaded
by worker processes and read back by the driver, and a partition that fails in the middle.
The Ray datasink's own tests are in test_ray_sink.py.
"""
from __future__ import annotations

import io
import pickle
import re
import socket
import threading

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

# the dask extra (in test-all, not in the light test extra): a skip naming it without
pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")

import bulkwire
import bulkwire.dask
from bulkwire import _arrow_sink
from bulkwire.errors import ConnectError, RowError, SchemaMismatchError
from bulkwire.load.cql_target import CqlDescription
from bulkwire.load.targets import FileDescription
from sink_oracle import make_table

server = pytest.mark.cassandra_server

PASSWORD = "s3cret-Pa55"
#: every type that may be in the pickled configuration of a CQL sink
CONFIG_TYPES = {"SinkConfig", "LoadOptions", "CqlDescription", "dict", "str", "int", "float",
                "bool", "NoneType", "tuple", "type"}


def closed_port() -> int:
    """A port of 127.0.0.1 on which nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pickled_types(obj) -> list[type]:
    """The type of every object pickling ``obj`` writes."""
    seen: list[type] = []

    class Recorder(pickle.Pickler):
        def persistent_id(self, item):
            seen.append(type(item))
            return None

    Recorder(io.BytesIO(), protocol=5).dump(obj)
    return seen


def cql_sink_config(**connection) -> _arrow_sink.SinkConfig:
    return _arrow_sink.cql_config(["127.0.0.1", "10.0.0.2:9142"], "ks", "vectors", None, 500,
                                  connection, "to_cql")


def test_the_cql_configuration_pickles_small_with_no_connection_and_no_password_shown():
    config = cql_sink_config(username="loader", password=PASSWORD, consistency="local_quorum",
                             window=4, retries=2, timeout=12)
    types = pickled_types(config)
    assert {t.__name__ for t in types} <= CONFIG_TYPES, types
    forbidden = (socket.socket, threading.Thread, type(threading.Lock()))
    assert not [t for t in types if issubclass(t, forbidden)]
    data = pickle.dumps(config)
    assert len(data) < 1024, len(data)
    copy = pickle.loads(data)
    assert copy == config and copy.described.password == PASSWORD  # it travels to the tasks
    assert (copy.described.hosts, copy.described.consistency) == (
        ("10.0.0.2:9142", "127.0.0.1:9042"), "LOCAL_QUORUM")
    assert copy.options.batch_rows == 500
    for text in (repr(config), repr(copy), str(config), config.target):
        assert PASSWORD not in text, text
    assert config.target == "ks.vectors at 10.0.0.2:9142, 127.0.0.1:9042"


@settings(max_examples=60, deadline=None)
@given(hosts=st.lists(st.tuples(st.integers(1, 254), st.integers(1, 65535)), min_size=1,
                      max_size=6),
       consistency=st.sampled_from(["one", "LOCAL_QUORUM", "all", "Each_Quorum"]),
       window=st.integers(1, 32768), retries=st.integers(0, 32768),
       password=st.text(alphabet="QWXZqwxz#%&", min_size=12, max_size=64),
       columns=st.one_of(st.none(), st.lists(st.sampled_from(["id", "emb", "Name"]),
                                             min_size=1, max_size=3, unique=True)))
def test_any_cql_configuration_round_trips_through_pickle(hosts, consistency, window, retries,
                                                          password, columns):
    spelled = [f"10.1.{a}.{a}:{port}" for a, port in hosts]
    config = _arrow_sink.cql_config(spelled, "ks", "t", columns, None,
                                    {"consistency": consistency, "window": window,
                                     "retries": retries, "username": "u",
                                     "password": password}, "to_cql")
    assert {t.__name__ for t in pickled_types(config)} <= CONFIG_TYPES
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config and copy.described.password == password
    assert copy.described.hosts == tuple(sorted(set(spelled)))
    assert copy.options.columns == (None if columns is None else tuple(columns))
    for text in (repr(copy), copy.target):
        assert password not in text


def test_a_task_names_itself_on_the_error_that_ends_it():
    """A task whose session cannot open (no node listens): its error, noted with the task,
    never a normal return."""
    port = closed_port()
    config = _arrow_sink.cql_config(f"127.0.0.1:{port}", "ks", "t", None, None, {}, "to_cql")
    table = pa.table({"id": pa.array([1, 2], pa.int64())})
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}") as caught:
        _arrow_sink.load_arrow(table, config, source="partition 3 of the Dask DataFrame")
    assert "in partition 3 of the Dask DataFrame" in caught.value.__notes__
    empty = _arrow_sink.load_arrow(table.slice(0, 0), config, source="partition 4")
    assert empty.rows == 0  # no rows, no session: nothing was to be confirmed


def test_the_sink_configuration_refuses_what_it_cannot_send():
    described = CqlDescription.of("127.0.0.1", "ks", "t")
    for extra in ({"url": "http://127.0.0.1:8080"}, {"database": "db"}, {"ca": False}):
        with pytest.raises(ValueError, match=f"a described target excludes {next(iter(extra))}"):
            _arrow_sink.SinkConfig(described=described, **extra)
    with pytest.raises(ValueError, match="must confirm each task's session on its own, not out.json"):
        _arrow_sink.SinkConfig(described=FileDescription(out="out.json"))
    with pytest.raises(ValueError, match="url is required"):
        _arrow_sink.SinkConfig()


def frame_of_calls(calls: list, rows: int = 20):
    """A Dask DataFrame whose partitions, when computed, append their number to ``calls``."""
    table = make_table(rows, 4)

    def part(n: int):
        calls.append(n)
        return table.slice(n * rows // 2, rows // 2).to_pandas(types_mapper=pd.ArrowDtype)

    meta = table.slice(0, 0).to_pandas(types_mapper=pd.ArrowDtype)
    return dd.from_map(part, [0, 1], meta=meta)


@pytest.mark.parametrize("bad, error, words", [
    ({"collection": "Points"}, TypeError, "collection is not an option of the cql target"),
    ({"options": bulkwire.LoadOptions()}, TypeError, "options is not an option of the cql target"),
    ({"consistency": "SERIAL"}, ValueError, "consistency must be one of"),
    ({"username": "u"}, ValueError, "username and password go together"),
    ({"window": 0}, ValueError, "window must be an int 1..32768"),
    ({"columns": "id"}, TypeError, "columns must be a sequence"),
    ({"batch_rows": 0}, ValueError, "batch_rows"),
    ({"hosts": "h:0"}, ValueError, "the port must be 1..65535"),
    ({"keyspace": ""}, ValueError, "keyspace must be a non-empty str"),
])
def test_arguments_are_refused_before_any_task(bad, error, words):
    calls: list = []
    ddf = frame_of_calls(calls)
    arguments = {"hosts": "127.0.0.1", "keyspace": "ks", "table": "t", **bad}
    load = {name: arguments.pop(name) for name in ("columns", "batch_rows") if name in arguments}
    with pytest.raises(error, match=re.escape(words)):
        bulkwire.dask.to_target(ddf, bulkwire.targets.cql(**arguments),
                                compute_kwargs={"scheduler": "sync"}, **load)
    assert calls == []
    with pytest.raises(TypeError, match="ddf must be a dask.dataframe.DataFrame, not DataFrame"):
        bulkwire.dask.to_target(pd.DataFrame({"id": [1]}),
                                bulkwire.targets.cql("127.0.0.1", "ks", "t"))


def test_the_table_is_checked_on_the_client_before_any_task():
    """The check connects from this process before any partition is computed: with no node
    listening, the call raises the connection's error naming it, and no task ran."""
    calls: list = []
    port = closed_port()
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        bulkwire.dask.to_target(frame_of_calls(calls),
                                bulkwire.targets.cql(f"127.0.0.1:{port}", "ks", "t"),
                                compute_kwargs={"scheduler": "sync"})
    assert calls == []


def test_the_client_check_is_the_tables_plan_of_the_frames_arrow_schema(monkeypatch):
    """What the client check judges: the Arrow schema the partitions will have (Arrow-backed
    columns as they are: a fixed_size_list vector stays one), with the sink's options; its
    refusal ends the call before any task."""
    seen = []

    def plan(self, schema, source, options):
        seen.append((schema, source, options.columns))
        raise SchemaMismatchError("column 'emb': refused", "emb", "x", "y")

    monkeypatch.setattr(CqlDescription, "plan", plan)
    calls: list = []
    ddf = frame_of_calls(calls)
    with pytest.raises(SchemaMismatchError, match="column 'emb'"):
        bulkwire.dask.to_target(ddf, bulkwire.targets.cql("127.0.0.1", "ks", "t"),
                                columns=["id", "emb"], compute_kwargs={"scheduler": "sync"})
    assert calls == []
    (schema, source, columns), = seen
    assert schema.remove_metadata() == make_table(2, 4).schema
    assert (source, columns) == ("the Dask DataFrame", ("id", "emb"))


# ------------------------------------------------------------------ against a real node

from test_cql_load import KEYSPACE, make_table as make_cql_table, session  # noqa: E402,F401
from test_dask_sink import arrow_backed, client  # noqa: E402,F401

#: the CQL table of sink_oracle.make_table's columns (its nullable int64 "count" left out)
TABLE_COLUMNS = "id bigint PRIMARY KEY, name text, score double, emb vector<float, 64>"
LOADED = ["id", "name", "score", "emb"]


def assert_read_back(session, table: str, source: pa.Table) -> None:
    """Every row of ``source`` is in the table, each cell equal to what pyarrow holds (the
    driver's float of a float32 element is that element exactly), and no other row."""
    got = {row.id: row for row in session.execute(f"SELECT id, name, score, emb FROM "
                                                  f"{KEYSPACE}.{table}")}
    assert len(got) == source.num_rows
    for values in source.select(LOADED).to_pylist():
        row = got[values["id"]]
        assert (row.name, row.score, list(row.emb)) == (values["name"], values["score"],
                                                        values["emb"]), values["id"]


@server
def test_a_dask_dataframe_of_vectors_is_read_back_exactly(cassandra_node, session, client):
    table = make_cql_table(session, "dask_sink", TABLE_COLUMNS)
    source = make_table(2000, 64, seed=11)
    ddf = arrow_backed(source, 4)
    result = bulkwire.dask.to_target(ddf,
                                     bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table),
                                     columns=LOADED, batch_rows=300)
    assert result.rows == 2000
    assert result.target == f"{KEYSPACE}.{table} at {cassandra_node.address}:9042"
    assert result.source == "a Dask DataFrame (4 partitions)"
    assert_read_back(session, table, source)
    # the client's check refuses a frame the table cannot take, naming the column
    with pytest.raises(ValueError, match=f"column 'count' of the Dask DataFrame is not a "
                                         f"column of {KEYSPACE}.{table}"):
        bulkwire.dask.to_target(ddf, bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    ints = source.select(LOADED).set_column(2, "score", pa.array(range(2000), pa.int32()))
    with pytest.raises(SchemaMismatchError) as caught:
        bulkwire.dask.to_target(arrow_backed(ints, 2),
                                bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    assert (caught.value.column, caught.value.arrow_type, caught.value.cql_type) == (
        "score", "int32", "double")


@server
def test_a_partition_with_a_vector_of_the_wrong_length_fails_the_call(cassandra_node, session,
                                                                     client):
    """Vectors as list<float32>: the row of partition 2 whose vector has 63 elements fails
    its task, naming the column and its row in the partition; the call raises that error
    with the partitions not confirmed, never returns."""
    table = make_cql_table(session, "dask_sink_bad", TABLE_COLUMNS)
    source = make_table(2000, 64, seed=12).select(LOADED)
    vectors = source.column("emb").to_pylist()
    vectors[1234] = vectors[1234][:63]  # partition 2 holds rows 1000..1499: its row 234
    source = source.set_column(3, "emb", pa.array(vectors, pa.list_(pa.float32())))
    with pytest.raises(RowError) as caught:
        bulkwire.dask.to_target(arrow_backed(source, 4),
                                bulkwire.targets.cql(cassandra_node.address, KEYSPACE, table))
    assert (caught.value.column, caught.value.row) == ("emb", 234)
    notes = caught.value.__notes__
    assert "in partition 2 of the Dask DataFrame" in notes
    assert 2 in caught.value.unconfirmed
    assert any(n.startswith("not confirmed by the server:") for n in notes), notes
    stored = {row.id for row in session.execute(f"SELECT id FROM {KEYSPACE}.{table}")}
    assert 1234 not in stored and stored <= set(range(2000))
