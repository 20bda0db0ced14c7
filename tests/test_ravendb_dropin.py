"""bulkwire.ravendb against the official ``ravendb`` client itself: for the same calls, the
request the loopback server receives is the same, byte for byte (plain and gzip); ids,
write-back, options and errors are the client's."""
import datetime
import enum
import json
import string

import pytest

from forked import forked_child_exit_code
from hypothesis import given, settings, strategies as st

import bulkwire
import bulkwire.ravendb as dropin
from bulkwire.testing import LoopbackServer

from ravendb import DocumentStore
from ravendb.documents.bulk_insert_operation import BulkInsertOptions
from ravendb.documents.conventions import DocumentConventions
from ravendb.exceptions.documents.bulkinsert import BulkInsertAbortedException
from ravendb.json.metadata_as_dictionary import MetadataAsDictionary
from ravendb.tools.utils import Utils

from ravendb_store import store_on


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class User:
    def __init__(self, Name=None, Id=None, **more):
        self.Name = Name
        self.Id = Id
        self.__dict__.update(more)


class Order:
    def __init__(self, **members):
        self.__dict__.update(members)


class Address:
    def __init__(self, city, zip_code):
        self.City = city
        self.Zip = zip_code


class Money:
    """No __dict__ the conventions could use: only a custom default hook knows it."""
    __slots__ = ("cents",)

    def __init__(self, cents):
        self.cents = cents


# ---- running the same calls through one client or the other ----

def run_calls(calls, *, accelerated, compress=False, skip=None, configure=None):
    """Runs ``calls(bulk)`` in a bulk insert of a fresh store on a fresh loopback server;
    returns the bulk insert request as the server received it and what ``calls`` returned."""
    with LoopbackServer() as server:
        with store_on(server, configure) as store:
            options = BulkInsertOptions(use_compression=compress, skip_overwrite_if_unchanged=skip)
            bulk = dropin.bulk_insert(store, options=options) if accelerated \
                else store.bulk_insert(options=options)
            with bulk:
                returned = calls(bulk)
        assert not server.unexpected_errors
        requests = [r for r in server.requests]
        assert len(requests) == 1 and requests[0].complete and requests[0].status == 201
        return requests[0], returned


def assert_same_request(calls, **kwargs):
    reference, ref_returned = run_calls(calls, accelerated=False, **kwargs)
    got, returned = run_calls(calls, accelerated=True, **kwargs)
    assert bytes(got.body) == bytes(reference.body)
    assert got.query == reference.query
    assert got.headers.get("Content-Encoding") == reference.headers.get("Content-Encoding")
    assert returned == ref_returned
    return got


# ---- entity shapes ----

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_keys = _text.filter(lambda k: k not in ("Id", "@metadata"))
_floats = st.floats(allow_nan=False) | st.sampled_from([0.1, -0.0, 1e16, 2.0 ** -24])
_scalars = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | _floats | _text
            | st.sampled_from(list(Color))
            | st.datetimes(min_value=datetime.datetime(1, 1, 1))
            | st.timedeltas(min_value=datetime.timedelta(0)))


# what the client's MetadataAsDictionary is made of (its nested dicts become nested ones)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _floats | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
                     max_leaves=8)
_client_metadata = st.dictionaries(_keys, _json, max_size=3).map(MetadataAsDictionary)


def _nested(inner):
    return (st.lists(inner, max_size=3) | st.tuples(inner, inner)
            | st.dictionaries(_keys, inner, max_size=3)
            | st.builds(Address, inner, inner) | _client_metadata)


_values = st.recursive(_scalars, _nested, max_leaves=10)
_members = st.dictionaries(_keys.filter(lambda k: k.isidentifier() and k != "Name"), _values, max_size=4)
_flat_metadata = st.dictionaries(st.sampled_from(["Owner", "Tag", "@flags", "@collection", "Level"]),
                                 st.none() | st.integers() | _text | st.booleans(), max_size=3)
_metadata = (st.none() | _flat_metadata | _flat_metadata.map(MetadataAsDictionary)
             | _flat_metadata.map(lambda m: {**m, "@id": "given/" + str(len(m))}))
_ids = st.none() | st.just("users/explicit") | st.text(string.ascii_letters + "/-", min_size=1, max_size=6)

# one call: (method, kind of entity, its members, its own id, metadata, store_as key)
_call = st.tuples(st.sampled_from(["store", "store", "store_as"]),
                  st.sampled_from(["User", "Order", "dict"]), _members, _ids, _metadata,
                  st.text(string.ascii_lowercase + "/", min_size=1, max_size=6).filter(lambda k: k != "/"))


def _entity(kind, members, own_id):
    if kind == "User":
        return User("n", own_id, **members)
    if kind == "Order":  # an object without members is no JSON for the client
        return Order(**members) if members else Order(Empty=None)
    entity = dict(members)
    entity["Name"] = "d"  # never empty: the client takes an empty dict for no entity
    if own_id is not None:
        entity["Id"] = own_id
    return entity


def _copy(value):
    """A fresh copy of a metadata argument (the client adds to the one it is given)."""
    if isinstance(value, MetadataAsDictionary):
        return MetadataAsDictionary(dict(value.metadata))
    return dict(value) if isinstance(value, dict) else value


def _replay(plan):
    def calls(bulk):
        results = []
        for method, kind, members, own_id, metadata, key in plan:
            entity = _entity(kind, members, own_id)
            if method == "store":
                results.append(bulk.store(entity, _copy(metadata)))
            else:
                bulk.store_as(entity, key, _copy(metadata) if metadata is not None else None)
                results.append(key)
            # the id written back into the entity, as the client writes it
            results.append(entity.get("Id") if isinstance(entity, dict) else getattr(entity, "Id", None))
        return results
    return calls


@settings(max_examples=min(40, settings().max_examples))
@given(st.lists(_call, min_size=1, max_size=6), st.booleans(), st.sampled_from([None, False, True]))
def test_any_calls_send_the_official_clients_request(plan, compress, skip):
    # store_as without metadata: the client's default MetadataAsDictionary is one object
    # shared by every call, which gives later entities the first one's collection; bulkwire
    # gives each its own. Both agree when every store_as passes metadata (covered here).
    plan = [(m, k, mem, i, md if m == "store" or md is not None else {}, key)
            for m, k, mem, i, md, key in plan]
    assert_same_request(_replay(plan), compress=compress, skip=skip)


@pytest.mark.parametrize("compress", [False, True])
def test_generated_ids_over_several_hilo_ranges_and_collections(compress):
    count = 3 * LoopbackServer.HILO_RANGE + 5

    def calls(bulk):
        ids = []
        for i in range(count):
            entity = User(f"u{i}", Vector=[i * 0.5, -1.25, 1e-7]) if i % 3 else Order(Number=i)
            ids.append(bulk.store(entity))
            ids.append(entity.Id)
        return ids

    got = assert_same_request(calls, compress=compress)
    commands = json.loads(bytes(got.body))
    assert [c["Id"] for c in commands][:3] == ["orders/1-A", "users/1-A", "users/2-A"]
    assert len({c["Id"] for c in commands}) == count


def test_a_body_over_many_buffers_is_the_clients():
    vector = [0.1 * i for i in range(1024)]

    def calls(bulk):
        return [bulk.store(User(f"u{i}", Vector=vector)) for i in range(150)]  # ~3 MiB

    assert_same_request(calls)
    assert_same_request(calls, compress=True)


def test_the_stores_conventions_are_used():
    def configure(conventions):
        conventions.find_collection_name = lambda cls: "People" if cls is User else None
        conventions.find_python_class_name = lambda cls: "app." + cls.__name__
        conventions.find_identity_property_name = lambda cls: "Key" if cls is Order else "Id"
        conventions.json_default_method = lambda o: (
            f"{o.cents // 100}.{o.cents % 100:02d} EUR" if isinstance(o, Money)
            else DocumentConventions.json_default(o))

    def calls(bulk):
        user, order = User("ann", Price=Money(1234)), Order(Key="orders/given", Total=Money(5))
        anonymous = Order(Total=Money(99))
        return [bulk.store(user), user.Id, bulk.store(order), order.Key, bulk.store(anonymous),
                anonymous.Key, bulk.store({"Name": "d", "Paid": [Money(1)]})]

    got = assert_same_request(calls, configure=configure)
    commands = json.loads(bytes(got.body))
    assert commands[0]["Id"] == "people/1-A"
    assert commands[0]["Document"] == {"Name": "ann", "Price": "12.34 EUR", "@metadata": {
        "@collection": "People", "Raven-Python-Type": "app.User"}}
    assert commands[1]["Id"] == "orders/given" and "Key" not in commands[1]["Document"]
    assert commands[2]["Id"] == "orders/1-A" and "Key" not in commands[2]["Document"]


def test_skip_overwrite_if_unchanged_is_the_requests_flag():
    got = assert_same_request(lambda bulk: bulk.store({"Name": "a"}), skip=True)
    assert got.query["skipOverwriteIfUnchanged"] == "true"


def test_metadata_as_dictionary_in_metadata_and_inside_entities():
    def calls(bulk):
        entity = User("m", Extra=MetadataAsDictionary({"a": 1, "nested": {"b": [1, {"c": 2}]}}))
        return [bulk.store(entity, MetadataAsDictionary({"Owner": "me", "@flags": "x"})),
                bulk.store({"Name": "x"}, MetadataAsDictionary({"@id": "things/1"}))]

    got = assert_same_request(calls)
    commands = json.loads(bytes(got.body))
    assert commands[0]["Document"]["Extra"] == {"a": 1, "nested": {"b": [1, {"c": 2}]}}
    assert commands[1]["Id"] == "things/1"


# ---- counters, time series, typed time series, attachments: the same calls ----

from ravendb.documents.operations.attachments import StoreAttachmentParameters  # noqa: E402


# a typed entry both clients take; the calls of counters and of a time series, either client's
from test_bulk_commands import Pulse, append_all, increment_all  # noqa: E402


_utc = datetime.timezone.utc
_moments = st.datetimes(min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2200, 1, 1),
                        timezones=st.just(_utc))
_numbers = st.integers(-10 ** 6, 10 ** 6) | st.floats(-1e9, 1e9, allow_nan=False)
_names = st.builds(str.__add__, st.sampled_from(string.ascii_letters),
                   st.text(string.ascii_letters + " -_.", max_size=7))
_doc_ids = st.sampled_from(["users/1", "users/2", "Users/1", "orders/7"])
_command = st.one_of(
    st.tuples(st.just("document"), _call),
    st.tuples(st.just("counters"), _doc_ids, st.lists(st.tuples(_names, st.integers(-2 ** 40, 2 ** 40)),
                                                      min_size=1, max_size=4)),
    st.tuples(st.just("series"), _doc_ids, _names,
              st.lists(st.tuples(_moments, st.lists(_numbers, min_size=1, max_size=3),
                                 st.none() | _names), min_size=1, max_size=4)),
    st.tuples(st.just("typed"), _doc_ids, st.none() | _names,
              st.lists(st.tuples(_moments, _numbers, _numbers, st.none() | _names), min_size=1, max_size=3)),
    st.tuples(st.just("attachment"), _doc_ids, _names, st.binary(max_size=64),
              st.none() | st.sampled_from(["text/plain", "image/png"]), st.booleans()),
)


def _replay_commands(plan):
    def calls(bulk):
        results = []
        for command in plan:
            kind = command[0]
            if kind == "document":
                method, entity_kind, members, own_id, metadata, key = command[1]
                results += _replay([(method, entity_kind, members, own_id,
                                     metadata if method == "store" or metadata is not None else {},
                                     key)])(bulk)
            elif kind == "counters":
                increment_all(bulk, command[1], command[2])
            elif kind == "series":
                append_all(bulk, command[1], command[2], command[3],
                           lambda values, tag: len(values) == 1)
            elif kind == "typed":
                with bulk.typed_time_series_for(Pulse, command[1], command[2]) as series:
                    for moment, rate, oxygen, tag in command[3]:
                        series.append_single(moment, Pulse(rate, oxygen), tag)
            else:
                _, key, name, data, content_type, with_parameters = command
                attachments = bulk.attachments_for(key)
                if with_parameters:
                    attachments.store_with_parameters(
                        StoreAttachmentParameters(name, data, content_type=content_type))
                else:
                    attachments.store(name, data, content_type)
        return results
    return calls


@settings(max_examples=min(40, settings().max_examples))
@given(st.tuples(st.just("document"), _call), st.lists(_command, max_size=6), st.booleans())
def test_any_commands_send_the_official_clients_request(first, plan, compress):
    # a time series as the body's first command is followed by the next command without a
    # ',' in the client's body (one the server refuses): the body starts with a document here
    assert_same_request(_replay_commands([first] + plan), compress=compress)


def test_every_command_in_one_body():
    moment = datetime.datetime(2024, 5, 1, 8, 30, tzinfo=_utc)
    plan = [("document", ("store", "User", {"Age": 3}, None, None, "k")),
            ("counters", "users/1", [("likes", 1), ("views", 10)]),
            ("series", "users/1", "Heartrate", [(moment, [61, 0.5], "watch"), (moment, [70], None)]),
            ("typed", "users/1", None, [(moment, 70.0, 98.5, None)]),
            ("attachment", "users/1", "a.txt", b"hello", "text/plain", False),
            ("document", ("store", "dict", {"x": 1}, None, None, "k"))]
    for compress in (False, True):
        got = assert_same_request(_replay_commands(plan), compress=compress)
    types = [c["Type"] for c in got.commands]
    assert types == ["PUT", "Counters", "TimeSeriesBulkInsert", "TimeSeriesBulkInsert",
                     "AttachmentPUT", "PUT"]


def test_command_arguments_are_checked_as_the_client_checks_them():
    def check(bulk, server):
        with bulk:
            for call in (lambda: bulk.counters_for(""), lambda: bulk.time_series_for("", "n"),
                         lambda: bulk.time_series_for("a", ""), lambda: bulk.attachments_for(" "),
                         lambda: bulk.typed_time_series_for(Pulse, "")):
                with pytest.raises(ValueError):
                    call()
            with bulk.time_series_for("users/1", "Heartrate") as series:
                series.append_single(datetime.datetime(2024, 1, 1, tzinfo=_utc), 1)
                with pytest.raises(RuntimeError):
                    bulk.store({"Name": "a"}, {"@id": "things/1"})
    _both(check)


# ---- bulkwire's own conventions and MetadataAsDictionary ----

@settings(max_examples=min(100, settings().max_examples))
@given(st.dictionaries(_keys, _json, max_size=4))
def test_entity_conventions_write_metadata_as_dictionary_as_the_client(members):
    entity = Order(Meta=MetadataAsDictionary(members), Items=[MetadataAsDictionary(members)])
    expected = json.dumps(Utils.entity_to_dict(entity, DocumentConventions.json_default)).encode()
    assert bulkwire.dumps(entity) == expected


def test_nested_metadata_as_dictionary_is_not_a_cycle():
    value = MetadataAsDictionary({"nested": {"deeper": {"x": 1}}})
    assert value["nested"]._parent is value  # what made the walk meet a cycle
    assert bulkwire.dumps({"m": value}) == b'{"m": {"nested": {"deeper": {"x": 1}}}}'


def test_bulkwriter_takes_metadata_as_dictionary_as_metadata():
    writer = bulkwire.BulkWriter()
    writer.store({"Name": "a"}, id="things/1",
                 metadata=MetadataAsDictionary({"Owner": "me", "Tags": {"a": [1]}}))
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert json.loads(body)[0]["Document"]["@metadata"] == {
        "Owner": "me", "Tags": {"a": [1]}, "@collection": "dicts", "Raven-Python-Type": "builtins.dict"}
    with pytest.raises(TypeError, match="metadata must be a mapping"):
        bulkwire.BulkWriter().store({}, id="a/1", metadata=[("Owner", "me")])


# ---- install / uninstall ----

def test_install_and_uninstall_are_idempotent_and_restore_the_original():
    original = vars(DocumentStore)["bulk_insert"]
    try:
        dropin.install()
        dropin.install()
        assert dropin.installed()
        patched = vars(DocumentStore)["bulk_insert"]
        assert patched is not original
        with LoopbackServer() as server:
            with store_on(server) as store:
                with store.bulk_insert() as bulk:
                    assert isinstance(bulk, dropin.BulkInsertOperation)
                    bulk.store({"Name": "a"})
                with store.bulk_insert(server.database, BulkInsertOptions(use_compression=True)) as bulk:
                    assert bulk.use_compression
                    bulk.store({"Name": "b"})
            assert len(server.documents) == 2
            assert server.requests[-1].headers.get("Content-Encoding") == "gzip"
    finally:
        dropin.uninstall()
        dropin.uninstall()
    assert not dropin.installed()
    assert vars(DocumentStore)["bulk_insert"] is original


# ---- behaviour and errors: the client's ----

def _both(check):
    for accelerated in (False, True):
        with LoopbackServer() as server:
            with store_on(server) as store:
                bulk = dropin.bulk_insert(store) if accelerated else store.bulk_insert()
                check(bulk, server)


@pytest.mark.parametrize("key, error", [("", ValueError), ("  ", ValueError), ("a|", RuntimeError)])
def test_bad_keys_raise_the_clients_errors(key, error):
    def check(bulk, server):
        with bulk:
            with pytest.raises(error):
                bulk.store_as({"Name": "a"}, key)
    _both(check)


def test_no_database_raises_the_clients_error():
    with LoopbackServer() as server:
        store = DocumentStore(urls=[server.url])
        store.conventions.disable_topology_updates = True
        store.initialize()
        try:
            with pytest.raises(ValueError, match="Cannot determine database"):
                dropin.bulk_insert(store)
        finally:
            store.close()
    with pytest.raises(RuntimeError, match="initializ"):
        dropin.bulk_insert(DocumentStore(urls=["http://127.0.0.1:1"], database="db"))


def test_nothing_stored_sends_no_request():
    def check(bulk, server):
        with bulk:
            pass
        assert server.requests == []
    _both(check)


def test_leaving_the_block_by_an_exception_commits_what_was_stored():
    def check(bulk, server):
        with pytest.raises(KeyError):
            with bulk:
                bulk.store({"Name": "a"}, {"@id": "things/1"})
                raise KeyError("user code")
        assert list(server.documents) == ["things/1"]
    _both(check)


def test_a_server_failure_raises_bulk_insert_aborted_exception():
    with LoopbackServer() as server:
        server.fail_after_bytes = 1
        with store_on(server) as store:
            with pytest.raises(BulkInsertAbortedException) as caught:
                with dropin.bulk_insert(store) as bulk:
                    bulk.store({"Name": "a"})
            assert isinstance(caught.value.__cause__, bulkwire.BulkInsertError)
            assert "Simulated failure" in str(caught.value)


def test_abort_kills_the_operation_and_the_block_raises():
    with LoopbackServer() as server:
        with store_on(server) as store:
            bulk = dropin.bulk_insert(store)
            bulk.abort()  # nothing started: nothing to kill
            with pytest.raises(BulkInsertAbortedException):
                with bulk:
                    bulk.store({"Name": "a"})
                    bulk.abort()
            assert server.killed == {1}


def test_an_entity_that_cannot_be_encoded_raises_and_the_insert_goes_on():
    with LoopbackServer() as server:
        with store_on(server) as store:
            with dropin.bulk_insert(store) as bulk:
                with pytest.raises(TypeError, match="not JSON serializable"):
                    bulk.store({"Name": "a", "Bad": Money(1)})
                bulk.store({"Name": "b"}, {"@id": "things/2"})
        assert list(server.documents) == ["things/2"]


# ---- the store's urls (a cluster) and its certificate ----

def test_a_cluster_store_goes_to_the_node_that_issued_the_operation_id():
    from bulkwire.testing import LoopbackCluster

    with LoopbackCluster(3) as cluster:
        cluster.kill(0)  # the first url is dead: the topology comes from the next one
        store = DocumentStore(urls=cluster.urls, database=cluster.database)
        store.conventions.disable_topology_cache = True
        store.initialize()
        try:
            with dropin.bulk_insert(store) as bulk:
                bulk.store({"Name": "a"}, {"@id": "things/1"})
        finally:
            store.close()
        received = [server for server in cluster.servers if "things/1" in server.documents]
        assert [server.node_tag for server in received] == ["B"]
        assert any(path.startswith("GET /topology?name=db") for _, path in cluster.journal)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from bulkwire.testing.pki import make_pki

    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _tls_store(server, pki, certificate):
    store = DocumentStore(urls=[server.url], database=server.database)
    store.certificate_pem_path = certificate
    store.trust_store_path = pki.ca
    store.conventions.disable_topology_updates = True
    store.conventions.disable_topology_cache = True
    return store.initialize()


def test_the_stores_client_certificate_and_trust_store_are_used(pki):
    from bulkwire.testing.pki import server_context

    bodies = []
    for accelerated in (False, True):
        with LoopbackServer(ssl_context=server_context(pki)) as server:
            store = _tls_store(server, pki, pki.client)
            try:
                bulk = dropin.bulk_insert(store) if accelerated else store.bulk_insert()
                with bulk:
                    bulk.store(User("tls"))
                    bulk.store({"Name": "x"}, {"@id": "things/1"})
            finally:
                store.close()
            assert server.requests[-1].complete and not server.tls_failures
            bodies.append(bytes(server.requests[-1].body))
    assert bodies[0] == bodies[1] and b'"Name": "tls"' in bodies[1]


def test_a_refused_client_certificate_raises_the_clients_exception(pki):
    from bulkwire.testing.pki import server_context

    with LoopbackServer(ssl_context=server_context(pki)) as server:
        store = _tls_store(server, pki, pki.rogue_client)
        try:
            with pytest.raises(BulkInsertAbortedException) as caught:
                with dropin.bulk_insert(store) as bulk:
                    bulk.store({"Name": "x"}, {"@id": "things/1"})
            assert isinstance(caught.value.__cause__, bulkwire.BulkInsertError)
        finally:
            store.close()
        assert server.documents == {}


# ---- the writer's options the drop-in uses ----

def test_class_info_may_name_the_members_the_body_leaves_out():
    writer = bulkwire.BulkWriter(class_info=lambda cls: ("x/", {"@collection": "Xs"}, ("Key", "@metadata")))
    writer.store({"Key": "k", "Id": "stays", "@metadata": {"a": 1}, "v": 1})
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == (b'[{"Id":"stays","Type":"PUT","Document":{"Id": "stays", "v": 1, '
                    b'"@metadata": {"a": 1, "@collection": "Xs"}}}]')


@pytest.mark.parametrize("info", [("x/", {}, ["Id"]), ("x/", {}, ("Id", 1)), ("x/", {}, (), None)])
def test_a_bad_class_info_raises(info):
    writer = bulkwire.BulkWriter(class_info=lambda cls: info)
    with pytest.raises(TypeError, match="class_info"):
        writer.store({"v": 1})


def test_the_default_hook_is_the_walkers():
    writer = bulkwire.BulkWriter(default=lambda o: {"cents": o.cents})
    writer.store({"Price": Money(5)}, id="p/1")
    with pytest.raises(TypeError, match="default must be"):
        bulkwire.BulkWriter(default=42)
    writer.close()
    assert b'"Price": {"cents": 5}' in b"".join(bytes(c) for c in writer.pieces())



def test_install_in_a_child_forked_while_the_lock_was_held():
    import bulkwire.ravendb

    def calls():
        bulkwire.ravendb.install()
        bulkwire.ravendb.uninstall()
    assert forked_child_exit_code(bulkwire.ravendb, "_install_lock", calls) == 0
