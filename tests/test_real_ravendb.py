"""bulkwire against a real RavenDB server (4.1.0, started by tests/servers/ravendb.py): what
the server stores, judged by reading it back, never by the bytes sent.

Run with ``--server ravendb`` (deselected otherwise). The servers are fetched once per machine
(``python -m tests.servers.ravendb fetch``, which needs PyPI); a server that cannot be fetched
or started fails these tests, it never skips them. In CI they run inside a network namespace
of their own (``unshare -n``), reaching nothing but loopback.

RavenDB 4.1 is end of life: the emulator (``bulkwire.testing``) keeps the golden-byte and
fault-injection tests; the real server judges acceptance.
"""
from __future__ import annotations

import datetime
import enum
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
import bulkwire.ravendb as dropin
from bulkwire.errors import BulkInsertError, ServerError, TLSError

from _ray_startup import init as init_ray
from servers import ServerSetupError
from servers.ravendb import RAVENDB_VERSION, RavenNodes, RavenServer, fetch

pytestmark = [pytest.mark.ravendb_server, pytest.mark.timeout(600)]

PKG = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))
#: server-side metadata that differs between two stores of the same document
VOLATILE_METADATA = ("@change-vector", "@last-modified")


# ---- servers ----

def running(server):
    """Starts ``server`` (a RavenServer or RavenNodes) for a fixture and stops it afterwards,
    whatever the tests did (failed, interrupted)."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def raven():
    """One plain node for the module; each test makes its own databases."""
    yield from running(RavenServer(fetch()))


@pytest.fixture()
def own_raven():
    """A node of the test's own (for tests that kill or restart it)."""
    yield from running(RavenServer(fetch()))


def new_database(server, label: str = "db") -> str:
    """A database of its own on ``server`` (unique name)."""
    return server.create_database(f"{label}-{uuid.uuid4().hex[:8]}")


def user_documents(server, database) -> dict:
    """The database's documents less the server's own (``Raven/Hilo/<collection>``: the HiLo
    ranges handed out)."""
    return {k: v for k, v in server.documents(database).items() if not k.startswith("Raven/")}


def held(doc: dict) -> dict:
    """A document as the server holds it, less the metadata that differs between stores."""
    doc = dict(doc)
    doc["@metadata"] = {k: v for k, v in doc["@metadata"].items() if k not in VOLATILE_METADATA}
    return doc


def cut_escapes(text: str) -> list:
    """Every string RavenDB 4.1.0 can store for ``text`` sent as JSON (``\\uXXXX`` escapes, as
    both clients write it) when one escape straddles the end of the server's read buffer:
    its parser loses the escape's first characters and keeps the rest as plain text
    ("\\u2603" stored as "603"). The server's bug (RavenDB-12233, fixed after 4.1.0), whatever
    the client: where its reads end depends on how the body arrived."""
    sent = json.dumps(text)
    found = []
    for start in (i for i in range(len(sent) - 1) if sent.startswith("\\u", i)):
        for lost in range(2, 6):
            try:
                found.append(json.loads(sent[:start] + sent[start + lost:]))
            except ValueError:
                pass
    return found


def differing_leaves(a, b, path="") -> list:
    """The (path, a's value, b's value) of every leaf where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in differing_leaves(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differing_leaves(x, y, f"{path}[{i}]")]
    return [] if a == b else [(path, a, b)]


def assert_same_documents(ours: dict, theirs: dict) -> list:
    """Every document of ``theirs`` is held alike in ``ours``, but where the server itself cut
    a ``\\u`` escape short (see :func:`cut_escapes` and :func:`assert_alike_but_for_cut_escapes`).
    Returns the ids of those."""
    assert ours.keys() == theirs.keys()
    return assert_alike_but_for_cut_escapes({k: held(v) for k, v in ours.items()},
                                            {k: held(v) for k, v in theirs.items()})


def assert_alike_but_for_cut_escapes(got: dict, expected: dict) -> list:
    """Each document of ``got`` equals ``expected``'s of the same id, but where the server cut
    a ``\\u`` escape short: such a document differs in exactly one string, which is the
    other's with one escape cut. Returns the ids of those; at most a few may be (the server's
    reads must happen to end inside an escape), so that a fault of a client, which would show
    in most documents, still fails."""
    assert got.keys() == expected.keys()
    cut = []
    for doc_id, doc in expected.items():
        leaves = differing_leaves(got[doc_id], doc)
        if not leaves:
            continue
        assert len(leaves) == 1, (doc_id, leaves)
        where, mine, other = leaves[0]
        assert isinstance(mine, str) and isinstance(other, str), (doc_id, leaves)
        assert mine in cut_escapes(other) or other in cut_escapes(mine), (doc_id, leaves)
        cut.append(doc_id)
    assert len(cut) <= 3, cut
    if cut:
        print(f"the server cut a \\u escape short in {cut}")
    return cut


def test_the_server_is_ravendb_41_and_starts_within_the_budget(raven):
    version = raven.version()
    assert version["FullVersion"] == RAVENDB_VERSION and version["ProductVersion"] == "4.1"
    assert raven.started_in < 60


# ---- what is stored: bulkwire against the official client ----

class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Address:
    def __init__(self, city, zip_code):
        self.City = city
        self.Zip = zip_code


class Person:
    def __init__(self, i, vector):
        self.Name = f"Zo\u00eb \u2603 \U0001d11e \u2028 line\u2029 {i} \"q\" \\ \t"
        self.Big = 2 ** 60 + i
        self.Negative = -(2 ** 60) - i
        self.Floats = [0.1, 1 / 3, 1e300, 5e-324, 123456789.125, -0.0, 2.5e-8 * i, float(i)]
        self.Born = datetime.datetime(1990, 1, 1, 8, 30, 15, 123456) + datetime.timedelta(days=i)
        self.When = datetime.datetime(2024, 5, 1, 8, 0, tzinfo=datetime.timezone.utc)
        self.Color = Color.RED if i % 2 else Color.BLUE
        self.Home = Address("K\u00f8benhavn", f"{i:05d}")
        self.Tags = ["a", "\u65e5\u672c", None, True, {"Nested": [1, [2, {"Deep": "x"}]]}]
        self.Vector = vector


def people(count: int, *, as_lists: bool):
    """``count`` Persons; their vectors NumPy float32 arrays, or the same as lists (the
    official client cannot write arrays)."""
    rng = np.random.default_rng(3)
    out = []
    for i in range(count):
        vector = (rng.standard_normal(16) * 10.0 ** rng.integers(-6, 6, 16)).astype(np.float32)
        out.append(Person(i, vector.tolist() if as_lists else vector))
    return out


def official_store(server, database):
    from ravendb import DocumentStore
    store = DocumentStore(urls=[server.url], database=database)
    if server.pki is not None:
        store.certificate_pem_path = server.pki.client
        store.trust_store_path = server.pki.ca
    return store.initialize()


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_bulk_insert_stores_what_the_official_client_stores(raven, compress):
    from ravendb.documents.bulk_insert_operation import BulkInsertOptions
    from ravendb.json.metadata_as_dictionary import MetadataAsDictionary

    assert not dropin.installed()
    count = 300
    theirs, ours = new_database(raven, "official"), new_database(raven, "bulkwire")
    store = official_store(raven, theirs)
    try:
        with store.bulk_insert(options=BulkInsertOptions(use_compression=compress)) as bulk:
            for i, person in enumerate(people(count, as_lists=True)):
                bulk.store_as(person, f"people/{i}", MetadataAsDictionary())
            bulk.store_as({"Plain": "dict", "N": 7}, "dicts/1", MetadataAsDictionary())
    finally:
        store.close()
    with bulkwire.BulkInsert(raven.url, ours, compress=compress) as bulk:
        for i, person in enumerate(people(count, as_lists=False)):
            bulk.store(person, id=f"people/{i}")
        bulk.store({"Plain": "dict", "N": 7}, id="dicts/1")
    assert bulk.stats.compression == ("isal" if compress and bulkwire._core.HAVE_ISAL
                                      else "zlib" if compress else None) or compress
    stored_theirs, stored_ours = raven.documents(theirs), raven.documents(ours)
    assert len(stored_theirs) == len(stored_ours) == count + 1
    cut = assert_same_documents(stored_ours, stored_theirs)
    # spot checks that the comparison compares something: the values the server gave back
    whole = next(i for i in range(1, count) if f"people/{i}" not in cut)
    first = raven.get(ours, [f"people/{whole}"])[0]
    assert first["Big"] == 2 ** 60 + whole and first["Name"].startswith("Zo\u00eb \u2603")
    assert "\u2028" in first["Name"] and first["Floats"][3] == 5e-324
    assert first["@metadata"]["@collection"] == "People"


def test_the_real_server_keeps_the_operation_ids_connection_for_the_body(raven, monkeypatch):
    """RavenDB 4.1 keeps the next-operation-id connection open: each insert makes one TCP
    connection, and every document of each insert is stored."""
    import http.client

    connects = []
    real_connect = http.client.HTTPConnection.connect

    def counted(conn):
        connects.append(conn)
        return real_connect(conn)

    database = new_database(raven, "one-connection")
    monkeypatch.setattr(http.client.HTTPConnection, "connect", counted)
    for n in range(3):
        with bulkwire.BulkInsert(raven.url, database) as bulk:
            for i in range(50):
                bulk.store({"Name": f"doc {n}-{i}"}, id=f"docs/{n}-{i}")
    assert len(connects) == 3
    monkeypatch.undo()
    assert len(raven.documents(database)) == 150


def test_gzip_embeddings_in_comma_blocks_are_stored_as_sent(raven, monkeypatch):
    """Embedding documents gzip-compressed on two threads go mostly through the comma coder
    (literals, and back-references at commas): the server inflates them to exactly what the
    plain insert of the same documents stores."""
    streams = []
    real_compressor = bulkwire._bulk_writer.body_compressor

    def kept_compressor(*args, **kwargs):
        streams.append(real_compressor(*args, **kwargs))
        return streams[-1]

    monkeypatch.setattr(bulkwire._bulk_writer, "body_compressor", kept_compressor)
    vectors = np.random.default_rng(11).standard_normal((600, 1024)).astype(np.float32)
    plain, packed = new_database(raven, "plain"), new_database(raven, "commas")
    for database, compress in ((plain, False), (packed, "gzip")):
        with bulkwire.BulkInsert(raven.url, database, compress=compress,
                                 compress_threads=2) as bulk:
            for i, vector in enumerate(vectors):
                bulk.store({"Name": f"item {i}", "Vector": vector}, id=f"vectors/{i}")
    assert len(streams) == 1 and streams[0].comma_blocks > 0
    stored_plain, stored_packed = raven.documents(plain), raven.documents(packed)
    assert len(stored_plain) == len(stored_packed) == len(vectors)
    for doc_id, doc in stored_plain.items():
        assert held(stored_packed[doc_id]) == held(doc), doc_id
    assert stored_packed["vectors/5"]["Vector"] == vectors[5].tolist()


# ---- the drop-in: HiLo ids from the real server ----

class User:
    def __init__(self, name):
        self.Id = None
        self.Name = name


def test_dropin_ids_come_from_the_server_as_the_client_gets_them(raven):
    """Unchanged client code, with and without install(): the same HiLo ids from the real
    server (over several ranges and collections), and the same documents."""
    def run(database):
        store = official_store(raven, database)
        ids = []
        try:
            with store.bulk_insert() as bulk:
                for i in range(100):
                    user = User(f"user {i}")
                    bulk.store(user)
                    ids.append(user.Id)
                    ids.append(bulk.store({"Kind": "order", "N": i}))
        finally:
            store.close()
        return ids

    theirs, ours = new_database(raven, "hilo-client"), new_database(raven, "hilo-dropin")
    client_ids = run(theirs)
    dropin.install()
    try:
        dropin_ids = run(ours)
    finally:
        dropin.uninstall()
    assert dropin_ids == client_ids
    assert client_ids[0] == "users/1-A" and len(set(client_ids)) == 200
    stored_theirs, stored_ours = user_documents(raven, theirs), user_documents(raven, ours)
    assert stored_theirs.keys() == stored_ours.keys() == set(client_ids)
    assert all(held(stored_ours[i]) == held(stored_theirs[i]) for i in client_ids)


def test_two_concurrent_dropin_inserts_never_share_an_id(raven):
    database = new_database(raven, "hilo-concurrent")
    per_thread, results, errors = 500, [[], []], []

    def insert(slot):
        store = official_store(raven, database)
        try:
            with dropin.bulk_insert(store) as bulk:
                for i in range(per_thread):
                    results[slot].append(bulk.store(User(f"t{slot} {i}")))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=insert, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and not any(thread.is_alive() for thread in threads)
    every = results[0] + results[1]
    assert len(every) == len(set(every)) == 2 * per_thread
    assert set(user_documents(raven, database)) == set(every)


# ---- Parquet, the command line, workers, Dask and Ray: every row, sampled values ----

def write_table(path: str, rows: int, dim: int, *, row_group: int = 1000, seed: int = 1,
                first_id: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    flat = (rng.standard_normal(rows * dim) * 10.0 ** rng.integers(-8, 8, rows * dim)).astype(np.float32)
    table = pa.table({
        "id": pa.array(np.arange(first_id, first_id + rows, dtype=np.int64)),
        "name": pa.array([f"caf\u00e9 \u2028 {i}" for i in range(rows)]),
        "score": pa.array(rng.standard_normal(rows) * 1e10),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim),
    })
    pq.write_table(table, path, row_group_size=row_group)
    return table


def reference_documents(source, tmp_path, **options) -> dict:
    """The documents a single-process load_parquet writes to a file, by id."""
    out = str(tmp_path / f"reference-{uuid.uuid4().hex[:6]}.bulk.json")
    bulkwire.load_parquet(source, bulkwire.targets.request_file(out, **options))
    with open(out, "rb") as f:
        return {command["Id"]: command["Document"] for command in json.load(f)}


def assert_every_row(server, database, reference: dict, sample: int = 200) -> None:
    """Every reference id on the server, nothing else; sampled documents equal by value."""
    assert server.count(database) == len(reference)
    ids = sorted(reference)
    picked = [ids[i] for i in np.random.default_rng(0).choice(len(ids), min(sample, len(ids)),
                                                               replace=False)]
    stored = {}
    for doc_id, doc in zip(picked, server.get(database, picked)):
        assert doc is not None, doc_id
        got = held(doc)
        got["@metadata"].pop("@id")
        stored[doc_id] = got
    # equal, but where the server itself cut a \u escape short (its bug, whatever the client)
    assert_alike_but_for_cut_escapes(stored, {doc_id: reference[doc_id] for doc_id in picked})


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_load_parquet_every_row(raven, tmp_path, compress):
    source = str(tmp_path / "points.parquet")
    write_table(source, 5000, 32)
    database = new_database(raven, "parquet")
    result = bulkwire.load_parquet(
        source,
        bulkwire.targets.ravendb(raven.url, database, compress=compress, collection="Points"))
    assert result.rows == 5000
    assert_every_row(raven, database, reference_documents(source, tmp_path, collection="Points"))


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "bulkwire", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_load_with_two_workers_every_row(raven, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for part in range(4):
        write_table(str(folder / f"part-{part}.parquet"), 2500, 16, row_group=500, seed=part,
                    first_id=part * 2500)
    database = new_database(raven, "cli")
    done = run_cli("load", str(folder), "--url", raven.url, "--database", database,
                   "--workers", "2", "--gzip", "-q")
    assert done.returncode == 0, done.stderr
    assert_every_row(raven, database, reference_documents(str(folder), tmp_path))


def test_server_killed_mid_load_fails_then_resume_stores_every_row_once(own_raven, tmp_path):
    """kill -9 of the server while the command line loads: the load fails (a BulkInsertError,
    exit 1, within the timeout), never a normal exit; after a restart, --resume sends the
    rest and the database holds every row exactly once."""
    folder = tmp_path / "parts"
    folder.mkdir()
    for part in range(4):
        write_table(str(folder / f"part-{part}.parquet"), 6_000, 48, row_group=500,
                    seed=part, first_id=part * 6_000)
    database = new_database(own_raven, "resume")
    state = str(tmp_path / "state.json")
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = subprocess.Popen([sys.executable, "-m", "bulkwire", "load", str(folder), "--url",
                             own_raven.url, "--database", database, "--resume", state, "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (os.path.exists(state) and any(
                source["done"] for source in json.load(open(state))["sources"])):
            assert load.poll() is None, load.communicate()
            assert time.monotonic() < deadline, "no unit was confirmed in 120 s"
            time.sleep(0.01)
        killed_at = time.monotonic()
        own_raven.kill()
        out, err = load.communicate(timeout=120)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    assert load.returncode != 0, (out, err)
    assert "BulkInsertError" in err or "ConnectError" in err or "ConnectionLost" in err or \
        "error" in err.lower(), err
    assert time.monotonic() - killed_at < 100
    own_raven.start()
    own_raven.wait_database(database)
    result = bulkwire.load_parquet(str(folder), bulkwire.targets.ravendb(own_raven.url, database),
                                   resume=state)
    assert result.skipped_rows > 0 and result.rows + result.skipped_rows == 24_000
    assert own_raven.count(database) == 24_000
    assert set(own_raven.documents(database)) == {f"embeddings/{i}" for i in range(24_000)}


def test_dask_sink_every_row(raven, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    distributed = pytest.importorskip("distributed")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster

    import bulkwire.dask

    source = str(tmp_path / "points.parquet")
    table = write_table(source, 4000, 16)
    database = new_database(raven, "dask")
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PKG, previous) if p)
    try:
        with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                          memory_limit="1GiB") as cluster, Client(cluster):
            ddf = dd.from_pandas(table.to_pandas(types_mapper=pd.ArrowDtype), npartitions=4, sort=False)
            result = bulkwire.dask.to_target(
                ddf, bulkwire.targets.ravendb(raven.url, database, collection="Points"))
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous
    assert result.rows == 4000
    assert_every_row(raven, database, reference_documents(source, tmp_path, collection="Points"))


def test_ray_sink_every_row(raven, tmp_path):
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")

    import bulkwire.ray

    source = str(tmp_path / "points.parquet")
    table = write_table(source, 4000, 16)
    database = new_database(raven, "ray")
    search_path = [PKG] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    init_ray(ray, num_cpus=2, include_dashboard=False, object_store_memory=80 << 20,
             logging_level="warning",
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(search_path)}})
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        sink = bulkwire.ray.TargetDatasink(
            bulkwire.targets.ravendb(raven.url, database, collection="Points"))
        ray.data.from_arrow(table).repartition(4).write_datasink(sink)
    finally:
        ray.shutdown()
    assert sink.result is not None and sink.result.rows == 4000
    assert_every_row(raven, database, reference_documents(source, tmp_path, collection="Points"))


def test_spark_data_source_every_row(raven, tmp_path):
    """A local Spark (loopback only: it runs in the network namespace of this suite) writes
    a Parquet file's rows through the bulkwire data source, one bulk insert request per
    write task: the server holds every row, as load_parquet writes it."""
    pytest.importorskip("pyspark")
    import bulkwire.spark
    from _spark_session import spark_session

    source = str(tmp_path / "points.parquet")
    write_table(source, 4000, 16)
    database = new_database(raven, "spark")
    spark = spark_session(str(tmp_path))
    try:
        (spark.read.parquet(source).repartition(4).write.format("bulkwire")
         .option("target", "ravendb").option("url", raven.url).option("database", database)
         .option("collection", "Points").mode("append").save())
        result = bulkwire.spark.last_result(spark)
    finally:
        spark.stop()
    assert (result.committed, result.rows, result.tasks) == (True, 4000, 4)
    assert_every_row(raven, database, reference_documents(source, tmp_path, collection="Points"))


# ---- what 4.1 does not read: a clear error, never a normal return ----

def test_compress_true_sends_gzip_which_41_takes(raven):
    database = new_database(raven, "gzip")
    with bulkwire.BulkInsert(raven.url, database, compress=True) as bulk:
        for i in range(100):
            bulk.store({"N": i}, id=f"n/{i}")
    assert bulk.stats.compression in bulkwire.bulk.compression_backends()
    assert raven.count(database) == 100


def test_zstd_into_41_raises_naming_zstd_and_the_version_before_anything_is_sent(raven):
    database = new_database(raven, "zstd")
    bulk = bulkwire.BulkInsert(raven.url, database, compress="zstd")
    with pytest.raises(bulkwire.UnsupportedByServer) as caught:
        bulk.store({"N": 1}, id="n/1")
    message = str(caught.value)
    assert "zstd" in message and "4.1.0" in message and raven.url in message
    assert caught.value.feature == "zstd" and caught.value.server_version == "4.1.0"
    for later in (lambda: bulk.store({"N": 2}, id="n/2"), bulk.close):
        with pytest.raises(bulkwire.UnsupportedByServer):
            later()
    assert raven.count(database) == 0


def _counters(bulk):
    bulk.counters_for("docs/0").increment("likes", 3)


def _time_series(bulk):
    with bulk.time_series_for("docs/0", "Heartrate") as series:
        series.append_single(datetime.datetime(2024, 5, 1, 8, 0), 61.5)


def _attachments(bulk):
    bulk.attachments_for("docs/0").store("notes.txt", b"first line\n", "text/plain")


@pytest.mark.parametrize("feature, command", [("counters", _counters), ("time series", _time_series),
                                              ("attachments", _attachments)])
def test_what_41_cannot_read_raises_naming_it_never_a_normal_return(raven, feature, command):
    database = new_database(raven, feature.replace(" ", "-"))
    bulk = bulkwire.BulkInsert(raven.url, database)
    with pytest.raises(bulkwire.UnsupportedByServer) as caught:
        with bulk:
            bulk.store({"N": 0}, id="docs/0")
            command(bulk)
    assert caught.value.feature == feature and "4.1.0" in str(caught.value)
    assert feature in str(caught.value)
    with pytest.raises(bulkwire.BulkInsertError):
        bulk.close()


# ---- failures: never a normal return ----

def store_until_failure(bulk, make, limit: int = 2_000_000) -> int:
    """Stores ``make(i)`` until a store raises (returned: how many were stored); a close
    that returns normally fails the test."""
    for i in range(limit):
        bulk.store(make(i), id=f"d/{i}")
    bulk.close()
    raise AssertionError(f"the bulk insert returned normally after {limit} documents")


def failure_while(action, bulk) -> BulkInsertError:
    """Stores documents into ``bulk`` while ``action()`` happens a second in; returns the
    BulkInsertError the insert raises (a normal return fails the test)."""
    timer = threading.Timer(1.0, action)
    timer.start()
    try:
        with pytest.raises(BulkInsertError) as caught:
            store_until_failure(bulk, lambda i: {"N": i, "Text": "x" * 500})
    finally:
        timer.cancel()
        timer.join()
    with pytest.raises(BulkInsertError):  # and at every later call
        bulk.close()
    return caught.value


def test_a_server_killed_mid_insert_raises_within_the_timeout(own_raven):
    database = new_database(own_raven, "killed")
    began = time.monotonic()
    error = failure_while(own_raven.kill, bulkwire.BulkInsert(own_raven.url, database, timeout=30))
    assert time.monotonic() - began < 60
    assert isinstance(error, bulkwire.TransportError), repr(error)


def test_the_database_deleted_mid_insert_raises(raven):
    database = new_database(raven, "deleted")
    error = failure_while(lambda: raven.delete_database(database),
                          bulkwire.BulkInsert(raven.url, database, timeout=30))
    print("database deleted mid-insert:", repr(error)[:500])
    status, _ = raven.request("GET", f"/databases/{database}/stats")
    assert status != 200  # it is gone, and the insert said it failed


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting the small file system needs root "
                                               "(CI runs as root)")
def test_a_full_disk_raises_naming_it():
    """The database's files on a 64 MiB tmpfs (mounted in a mount namespace of the server's
    own, gone with it): the insert that fills it fails, with the server's reason."""
    server = RavenServer(fetch())
    small = os.path.join(server.work_dir, "small")
    os.makedirs(small)
    server.wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   'mount -t tmpfs -o size=64m tmpfs "$0" && exec "$@"', small]
    try:
        server.start()
        database = server.create_database("full", settings={"DataDir": small})
        bulk = bulkwire.BulkInsert(server.url, database, timeout=60)
        with pytest.raises(bulkwire.ServerError) as caught:
            store_until_failure(bulk, lambda i: {"N": i, "Text": "x" * 1000})
        print("disk full:", str(caught.value)[:500])
        assert "DiskFull" in str(caught.value) or "space" in str(caught.value).lower()
        assert server.count(database) < 200_000
    finally:
        server.stop()


# ---- several nodes (separate one-node clusters: 4.1 without a license has no larger ones) ----

@pytest.fixture(scope="module")
def nodes():
    yield from running(RavenNodes(3, fetch()))


def settled_state(server, database: str, op: int, limit: float = 30.0) -> dict:
    """The operation's state once it has left InProgress: the server answers a bulk insert
    201 and then marks its operation completed, a moment later on a busy node."""
    deadline = time.monotonic() + limit
    while True:
        state = server.json("GET", f"/databases/{database}/operations/state?id={op}")
        if state["Status"] != "InProgress" or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def dead_url() -> str:
    from servers import free_port
    return f"http://127.0.0.9:{free_port('127.0.0.9')}"  # nothing listens there


def test_without_a_license_41_runs_one_node_clusters(nodes):
    status, answer = nodes.join(1)
    assert status == 402 and b"LicenseLimitException" in answer
    license = nodes.nodes[0].json("GET", "/license/status")
    assert license["Type"] == "None" and license["MaxClusterSize"] == 1
    assert license["DistributedCluster"] is False


def test_the_topology_comes_from_the_nodes_and_the_insert_goes_where_it_says(nodes):
    """A dead first URL: the topology is asked of the next node, which lists itself; the
    operation id and the body go there; the official client sends its documents there too."""
    database = nodes.create_database(f"topo-{uuid.uuid4().hex[:8]}")
    first, second, third = nodes.nodes
    urls = [dead_url(), second.url, third.url]
    with bulkwire.BulkInsert(urls, database, timeout=30) as bulk:
        for i in range(500):
            bulk.store({"N": i}, id=f"n/{i}")
    assert [str(node.url) for node in bulk._servers.nodes] == [second.url]
    assert str(bulk._transport.origin) == second.url
    assert [first.count(database), second.count(database), third.count(database)] == [0, 500, 0]
    state = settled_state(second, database, bulk.operation_id)
    assert state["Status"] == "Completed" and state["Result"]["Total"] == 500

    from ravendb import DocumentStore
    store = DocumentStore(urls=urls, database=database).initialize()
    try:
        with store.bulk_insert() as client_bulk:
            for i in range(500, 600):
                client_bulk.store_as({"N": i}, f"n/{i}")
    finally:
        store.close()
    assert [first.count(database), second.count(database), third.count(database)] == [0, 600, 0]


def test_a_node_killed_mid_insert_fails_it_and_nothing_is_replayed_elsewhere(nodes):
    database = nodes.create_database(f"failover-{uuid.uuid4().hex[:8]}")
    first, second, third = nodes.nodes
    bulk = bulkwire.BulkInsert([second.url, third.url], database, timeout=30)
    try:
        assert isinstance(failure_while(second.kill, bulk), bulkwire.TransportError)
    finally:
        if not second.running:
            second.start()
            second.wait_database(database)
    assert str(bulk._transport.origin) == second.url
    assert third.count(database) == 0  # the body was never sent to another node
    # what the killed node committed before it died is there, and nothing twice
    stored = user_documents(second, database)
    assert all(doc["N"] == int(doc_id.split("/")[1]) for doc_id, doc in stored.items())


def test_an_operation_id_stays_with_the_node_that_issued_it(nodes):
    """Every node counts operation ids from 1, so the same id exists on each: the body of the
    operation goes to the node that issued its id, and the other nodes know nothing of it."""
    database = nodes.create_database(f"opid-{uuid.uuid4().hex[:8]}")
    first, second, third = nodes.nodes
    for node in (first, third):  # the others have issued ids of their own
        node.json("GET", f"/databases/{database}/operations/next-operation-id")
    with bulkwire.BulkInsert([second.url, first.url, third.url], database) as bulk:
        for i in range(100):
            bulk.store({"N": i}, id=f"n/{i}")
    op = bulk.operation_id
    assert settled_state(second, database, op)["Status"] == "Completed"
    for node in (first, third):
        status, _ = node.request("GET", f"/databases/{database}/operations/state?id={op}")
        assert status == 404
        assert node.count(database) == 0


# ---- the secured node: HTTPS with a required client certificate ----

@pytest.fixture(scope="module")
def secured():
    yield from running(RavenServer.secured(fetch()))


def test_the_admitted_certificate_loads(secured):
    database = new_database(secured, "tls")
    with bulkwire.BulkInsert(secured.url, database, certificate=secured.pki.client,
                             ca=secured.pki.ca, compress=True) as bulk:
        for i in range(1000):
            bulk.store({"N": i, "V": [i / 7] * 8}, id=f"t/{i}")
    assert secured.count(database) == 1000
    result = bulkwire.load_parquet(
        write_and_return(secured),
        bulkwire.targets.ravendb(secured.url, database, certificate=secured.pki.client,
                                 ca=secured.pki.ca))
    assert result.rows == 300 and secured.count(database) == 1300


@pytest.mark.parametrize("compress", [False, "zlib"])
@pytest.mark.parametrize("tls", [False, True])
def test_41_answers_at_the_arrays_end_and_the_insert_succeeds(raven, secured, monkeypatch, tls, compress):
    """RavenDB answers 201 once it has parsed the array's closing ']': the producer here says
    the body is ended only a second after the sender took its last buffer, so the answer
    comes before the terminating chunk (and the gzip trailer, a piece of its own) leaves.
    The pump reports an answer after the last data byte, and the insert succeeds."""
    from bulkwire.bulk import BulkWriter
    from bulkwire.transport import Sent
    from fault_server import hold_the_end_until

    outcomes = []
    real_pump = BulkWriter.pump

    def pump(self, fd, timeout, tls=None):
        outcomes.append(real_pump(self, fd, timeout, tls))
        return outcomes[-1]

    monkeypatch.setattr(BulkWriter, "pump", pump)
    server = secured if tls else raven
    options = dict(certificate=server.pki.client, ca=server.pki.ca) if tls else {}
    database = new_database(server, "at-the-end")
    bulk = bulkwire.BulkInsert(server.url, database, compress=compress, timeout=60, **options)
    hold_the_end_until(bulk, lambda: False, limit=1.0)  # the server has a second to answer
    for i in range(300):
        bulk.store({"N": i, "V": [i / 7] * 8}, id=f"e/{i}")
    bulk.close()
    assert outcomes == [Sent.ANSWERED_AT_END]
    assert server.count(database) == 300


def write_and_return(server) -> str:
    path = os.path.join(server.work_dir, "points.parquet")
    write_table(path, 300, 4)
    return path


@pytest.mark.parametrize("who", ["none", "rogue", "wrong-ca"])
def test_refused_certificates_raise_before_a_document_is_sent(secured, who):
    database = new_database(secured, f"refused-{who}")
    options = {"none": dict(ca=secured.pki.ca),
               "rogue": dict(certificate=secured.pki.rogue_client, ca=secured.pki.ca),
               "wrong-ca": dict(certificate=secured.pki.client, ca=secured.pki.rogue_ca)}[who]
    bulk = bulkwire.BulkInsert(secured.url, database, **options)
    with pytest.raises(bulkwire.BulkInsertError) as caught:
        bulk.store({"N": 1}, id="t/1")
    if who == "wrong-ca":
        assert isinstance(caught.value, TLSError) and caught.value.verify_failed
    else:  # 4.1 asks for a certificate without requiring one in the handshake: 403 at once
        assert isinstance(caught.value, ServerError) and caught.value.status == 403
        assert ("none was provided" if who == "none" else "unknown to the server") in str(caught.value)
    assert bulk.operation_id is None
    with pytest.raises(bulkwire.BulkInsertError):
        bulk.close()
    assert secured.count(database) == 0


def test_the_dropin_with_the_stores_certificate_loads_what_the_client_loads(secured):
    def run(database):
        store = official_store(secured, database)
        try:
            with store.bulk_insert() as bulk:
                for person in people(50, as_lists=True):
                    bulk.store(person)
        finally:
            store.close()

    theirs, ours = new_database(secured, "tls-client"), new_database(secured, "tls-dropin")
    run(theirs)
    dropin.install()
    try:
        run(ours)
    finally:
        dropin.uninstall()
    stored_theirs, stored_ours = user_documents(secured, theirs), user_documents(secured, ours)
    assert len(stored_theirs) == 50 and stored_ours.keys() == stored_theirs.keys()
    assert_same_documents(stored_ours, stored_theirs)
